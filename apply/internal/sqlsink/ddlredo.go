package sqlsink

import (
	"context"
	"strings"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/mysqltok"
	"github.com/redokit/redokit/codec"
)

// MySQL commits a DDL implicitly, so its progress row follows it, and a
// crash (or a cancelled run) in between runs it again on resume. Most DDLs
// run again fail with an error that says their effect is there (a table
// or column that exists, or is gone: Driver.AlreadyApplied). A rename does
// not: run again, it fails as a rename of a table, column or index that was
// never there would (1146, 1054, 1176), and an apply that resumed there
// would stop at it for good. So that error is taken as applied only on
// proof: none of the names the DDL renames is left, and every name it
// renames them to is there. A DDL is atomic (InnoDB's), so its renames
// done mean the whole DDL ran.

// renamedAlready reports whether ddl, which failed with err on MySQL,
// renames tables, columns or indexes that the catalog shows renamed (see
// above), and logs it as a DDL already applied.
func (s *SQLSink) renamedAlready(ctx context.Context, q Queryer, ddl *codec.DDL, err error) bool {
	drv := drivers[s.d]
	if s.o.StrictDDL || drv == nil {
		return false
	}
	// A dialect names the errors it knows; one it leaves nil never matches.
	says := func(f func(error) bool) bool { return f != nil && f(err) }
	var done bool
	switch {
	case says(drv.NoSuchTable):
		done = s.tablesRenamed(ctx, q, ddl)
	case says(drv.NoSuchColumn) || says(drv.NoSuchIndex):
		done = s.alterRenamed(ctx, q, ddl)
	}
	if !done {
		return false
	}
	s.ignoredDDLs.Add(1)
	s.o.Logger.Warn("apply: DDL already applied downstream (what it renames is renamed); going on", "commit_ts", ddl.CommitTs,
		"schema", ddl.Table.Schema, "query", ddl.Query, "error", err)
	return true
}

// tablesRenamed reports whether every table ddl renames is gone and every
// new name there.
func (s *SQLSink) tablesRenamed(ctx context.Context, q Queryer, ddl *codec.DDL) bool {
	renames, err := apply.DDLRenames(ddl)
	if err != nil || len(renames) == 0 {
		return false
	}
	for _, r := range renames {
		from, err1 := s.catalogHas(ctx, q, "SELECT count(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", r[0].Schema, r[0].Name)
		to, err2 := s.catalogHas(ctx, q, "SELECT count(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", r[1].Schema, r[1].Name)
		if err1 != nil || err2 != nil || from || !to {
			return false
		}
	}
	return true
}

// alterRenamed reports whether ddl is an ALTER TABLE of ddl.Table whose
// column and index renames the catalog shows done.
func (s *SQLSink) alterRenamed(ctx context.Context, q Queryer, ddl *codec.DDL) bool {
	cols, idx, ok := alterRenames(ddl.Query)
	if !ok {
		return false
	}
	for _, c := range []struct {
		renames [][2]string
		query   string
	}{
		{cols, "SELECT count(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND LOWER(COLUMN_NAME) = LOWER(?)"},
		{idx, "SELECT count(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND LOWER(INDEX_NAME) = LOWER(?)"},
	} {
		for _, r := range c.renames {
			from, err1 := s.catalogHas(ctx, q, c.query, ddl.Table.Schema, ddl.Table.Name, r[0])
			to, err2 := s.catalogHas(ctx, q, c.query, ddl.Table.Schema, ddl.Table.Name, r[1])
			// MySQL's column and index names ignore case: a rename
			// that changes only the case leaves the name there.
			if err1 != nil || err2 != nil || from && !strings.EqualFold(r[0], r[1]) || !to {
				return false
			}
		}
	}
	return true
}

// catalogHas runs query, a count, and reports whether it counted any.
func (s *SQLSink) catalogHas(ctx context.Context, q Queryer, query string, args ...any) (bool, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	n := 0
	if rows.Next() {
		if err := rows.Scan(&n); err != nil {
			return false, err
		}
	}
	return n > 0, rows.Err()
}

// alterRenames returns the column renames (RENAME COLUMN a TO b, CHANGE
// [COLUMN] a b …) and index renames (RENAME INDEX|KEY i TO j) of an ALTER
// TABLE statement, as (from, to) pairs; ok is false when query is no ALTER
// TABLE, renames neither, or renames the table too (tablesRenamed's
// proof).
func alterRenames(query string) (cols, idx [][2]string, ok bool) {
	toks, err := mysqltok.Tokenize(query)
	if err != nil {
		return nil, nil, false
	}
	toks = mysqltok.Solid(toks)
	if !mysqltok.Words(toks, "ALTER") {
		return nil, nil, false
	}
	i := 1
	for i < len(toks) && toks[i].Word() != "TABLE" {
		if toks[i].Kind != mysqltok.Word { // ALTER ONLINE IGNORE TABLE
			return nil, nil, false
		}
		i++
	}
	i++ // TABLE
	if i >= len(toks) || !toks[i].IsName() {
		return nil, nil, false
	}
	i++
	if i+1 < len(toks) && toks[i].Is('.') { // schema.table
		i += 2
	}
	// pair reads "a TO b" at cl[j:], the whole rest of the clause.
	pair := func(cl []mysqltok.Token, j int) ([2]string, bool) {
		if len(cl) != j+3 || cl[j+1].Word() != "TO" || !cl[j].IsName() || !cl[j+2].IsName() {
			return [2]string{}, false
		}
		return [2]string{cl[j].Name(), cl[j+2].Name()}, true
	}
	for _, cl := range mysqltok.SplitTop(toks[i:]) {
		switch {
		case mysqltok.Words(cl, "RENAME", "COLUMN"):
			p, ok := pair(cl, 2)
			if !ok {
				return nil, nil, false
			}
			cols = append(cols, p)
		case mysqltok.Words(cl, "RENAME", "INDEX"), mysqltok.Words(cl, "RENAME", "KEY"):
			p, ok := pair(cl, 2)
			if !ok {
				return nil, nil, false
			}
			idx = append(idx, p)
		case mysqltok.Words(cl, "RENAME"):
			return nil, nil, false // the table
		case mysqltok.Words(cl, "CHANGE"):
			j := 1
			if mysqltok.Words(cl[1:], "COLUMN") {
				j = 2
			}
			if len(cl) < j+2 || !cl[j].IsName() || !cl[j+1].IsName() {
				return nil, nil, false
			}
			cols = append(cols, [2]string{cl[j].Name(), cl[j+1].Name()})
		}
	}
	return cols, idx, len(cols)+len(idx) > 0
}
