package sqlsink

import (
	"context"

	"strings"

	"github.com/redokit/redokit/apply/internal/mysqltok"
	"github.com/redokit/redokit/codec"
)

// MySQL commits a DDL implicitly, so its progress row follows it, and a
// crash (or a cancelled run) in between runs it again on resume. Most DDLs
// run again fail with an error that says their effect is there (a table
// or column that exists, or is gone: Driver.AlreadyApplied). A rename of a
// column does not: run again, it fails as any rename of a column the table
// never had would (1054, unknown column), and an apply that resumed there
// would stop at it for good. So that error is taken as applied only on
// proof: the table has none of the columns the DDL renames and every one
// of the names it renames them to. An ALTER TABLE is atomic (InnoDB's
// DDL), so those renames there mean the whole DDL ran.

// renamedAlready reports whether ddl, which failed with err on MySQL, is an
// ALTER TABLE whose column renames the catalog shows done (see above), and
// logs it as a DDL already applied.
func (s *SQLSink) renamedAlready(ctx context.Context, q Queryer, ddl *codec.DDL, err error) bool {
	drv := drivers[s.d]
	if s.o.StrictDDL || drv == nil || drv.NoSuchColumn == nil || !drv.NoSuchColumn(err) {
		return false
	}
	renames, ok := columnRenames(ddl.Query)
	if !ok {
		return false
	}
	rows, qerr := q.QueryContext(ctx, "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
		ddl.Table.Schema, ddl.Table.Name)
	if qerr != nil {
		return false
	}
	defer rows.Close()
	has := map[string]bool{}
	for rows.Next() {
		var name string
		if rows.Scan(&name) != nil {
			return false
		}
		has[strings.ToLower(name)] = true // MySQL's column names ignore case
	}
	if rows.Err() != nil || len(has) == 0 {
		return false
	}
	for _, r := range renames {
		if has[strings.ToLower(r[0])] && !strings.EqualFold(r[0], r[1]) || !has[strings.ToLower(r[1])] {
			return false
		}
	}
	s.ignoredDDLs.Add(1)
	s.o.Logger.Warn("apply: DDL already applied downstream (its columns are renamed); going on", "commit_ts", ddl.CommitTs,
		"schema", ddl.Table.Schema, "query", ddl.Query, "error", err)
	return true
}

// columnRenames returns the column renames of an ALTER TABLE statement —
// RENAME COLUMN a TO b, CHANGE [COLUMN] a b … — as (from, to) pairs; ok is
// false when query is no ALTER TABLE, renames no column, or renames the
// table or an index too (whose proof this is not).
func columnRenames(query string) (renames [][2]string, ok bool) {
	toks, err := mysqltok.Tokenize(query)
	if err != nil {
		return nil, false
	}
	toks = mysqltok.Solid(toks)
	if !mysqltok.Words(toks, "ALTER") {
		return nil, false
	}
	i := 1
	for i < len(toks) && toks[i].Word() != "TABLE" {
		if toks[i].Kind != mysqltok.Word { // ALTER ONLINE IGNORE TABLE
			return nil, false
		}
		i++
	}
	i++ // TABLE
	if i >= len(toks) || !toks[i].IsName() {
		return nil, false
	}
	i++
	if i+1 < len(toks) && toks[i].Is('.') { // schema.table
		i += 2
	}
	for _, cl := range mysqltok.SplitTop(toks[i:]) {
		switch {
		case mysqltok.Words(cl, "RENAME", "COLUMN"):
			if len(cl) != 5 || cl[3].Word() != "TO" || !cl[2].IsName() || !cl[4].IsName() {
				return nil, false
			}
			renames = append(renames, [2]string{cl[2].Name(), cl[4].Name()})
		case mysqltok.Words(cl, "RENAME"):
			return nil, false // the table, an index or a key
		case mysqltok.Words(cl, "CHANGE"):
			j := 1
			if mysqltok.Words(cl[1:], "COLUMN") {
				j = 2
			}
			if len(cl) < j+2 || !cl[j].IsName() || !cl[j+1].IsName() {
				return nil, false
			}
			renames = append(renames, [2]string{cl[j].Name(), cl[j+1].Name()})
		}
	}
	return renames, len(renames) > 0
}
