package sqlsink

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
)

// With the foreign-key checks on (SinkOptions.ForeignKeyChecks), ApplyGroup
// writes a transaction's tables parents first and deletes children first.
// No order of tables serves a table whose rows reference its own rows (a
// report inserted before the manager the same transaction inserts later, a
// manager deleted in the statement before its reports), nor tables that
// reference each other, nor a parent whose referenced key moves while its
// children move with it: yet the upstream's transaction is consistent at
// its end, which is all a check of the upstream's own rows can ask. For
// such a transaction the checks must see its end state:
//
//   - SQLite: PRAGMA defer_foreign_keys = ON in the transaction, which
//     checks every key at COMMIT. It cannot be turned off again before the
//     COMMIT (SQLite then forgets the violations counted so far), so the
//     rest of the database transaction is deferred too; a COMMIT refused
//     reads pragma_foreign_key_check to name what broke.
//   - MySQL and MariaDB have no deferred constraints: foreign_key_checks is
//     turned off for the transaction's statements (as MySQL's replication
//     applies its events), back on after them, and the sink then checks
//     the end state itself: every row the transaction wrote in a child
//     table must find its parent, and no row may reference a key a parent
//     row of the transaction held before. A violation fails the
//     transaction, naming the foreign key and the row.
//
// PostgreSQL checks a foreign key at the end of each statement: it needs
// none of this for the rows of one statement, and gets none of it here.

// deferral reports whether the checks must see the end state of the group
// (see above): a table of the group is on a cycle of foreign keys among the
// group's tables (itself included), or a table that a table of the group
// references loses or changes rows (a delete or an update) while that table
// writes rows.
func deferral(groups []apply.TableRows, graph map[apply.Table][]apply.Table, byName bool) bool {
	key := fkKey(byName)
	in := map[apply.Table]int{}
	for i, g := range groups {
		in[key(g.Table)] = i
	}
	changes := func(rows []*codec.RowChange) (old, img bool) {
		for _, r := range rows {
			old = old || len(r.PreColumns) > 0
			img = img || len(r.Columns) > 0
		}
		return old, img
	}
	for _, g := range groups {
		c := key(g.Table)
		_, writes := changes(g.Rows)
		for _, p := range graph[c] {
			j, ok := in[key(p)]
			if !ok {
				continue
			}
			if key(p) == c {
				return true // a table referencing itself
			}
			if old, _ := changes(groups[j].Rows); old && writes {
				return true
			}
			// A cycle: p reaches c through the group's tables.
			seen := map[apply.Table]bool{}
			var reaches func(t apply.Table) bool
			reaches = func(t apply.Table) bool {
				if t == c {
					return true
				}
				if seen[t] {
					return false
				}
				seen[t] = true
				for _, q := range graph[t] {
					if _, ok := in[key(q)]; ok && reaches(key(q)) {
						return true
					}
				}
				return false
			}
			if reaches(key(p)) {
				return true
			}
		}
	}
	return false
}

// fkKey is how tables are matched against the catalog: by name alone on
// SQLite (one namespace), lower-cased as the catalog read gives it.
func fkKey(byName bool) func(apply.Table) apply.Table {
	return func(t apply.Table) apply.Table {
		if byName {
			return apply.Table{Name: strings.ToLower(t.Name)}
		}
		return t
	}
}

// deferChecks makes the checks of the rest of the group see its end state:
// on SQLite for the rest of the database transaction; on MySQL until
// endDeferral.
func (t *sqlTx) deferChecks(ctx context.Context) error {
	if t.s.o.DryRun != nil {
		return nil
	}
	q := "PRAGMA defer_foreign_keys = ON"
	if t.s.d == MySQL {
		q = "SET SESSION foreign_key_checks = 0"
	}
	if _, err := t.ex.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("apply: %s: defer the foreign-key checks to the end of the transaction (%s): %w", t.s.name, q, t.s.d.classify(err))
	}
	t.deferredFK = true
	return nil
}

// endDeferral turns MySQL's checks on again after a deferred group, and
// checks the group's end state (see checkGroup). A group that failed is
// rolled back with its transaction, its connection perhaps left with the
// checks off: Begin (and ApplyDDL) turn them on again on whichever
// connection the pool gives next.
func (t *sqlTx) endDeferral(ctx context.Context, groups []apply.TableRows) error {
	if t.s.d != MySQL || t.s.o.DryRun != nil {
		return nil
	}
	if _, err := t.ex.ExecContext(ctx, "SET SESSION foreign_key_checks = 1"); err != nil {
		return fmt.Errorf("apply: %s: turn the foreign-key checks on again: %w", t.s.name, t.s.d.classify(err))
	}
	return t.checkGroup(ctx, groups)
}

// fkDef is one foreign key of a MySQL downstream: child columns referencing
// parent columns.
type fkDef struct {
	name          string
	child, parent apply.Table
	cols, refs    []string
}

// foreignKeyColumns reads the downstream's foreign keys with their columns
// (MySQL), once, and again after each DDL.
func (s *SQLSink) foreignKeyColumns(ctx context.Context, q Queryer) ([]fkDef, error) {
	s.fkMu.Lock()
	defer s.fkMu.Unlock()
	if s.fkDefs != nil {
		return s.fkDefs, nil
	}
	rows, err := q.QueryContext(ctx, "SELECT CONSTRAINT_SCHEMA, TABLE_NAME, CONSTRAINT_NAME, COLUMN_NAME, "+
		"REFERENCED_TABLE_SCHEMA, REFERENCED_TABLE_NAME, REFERENCED_COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE "+
		"WHERE REFERENCED_TABLE_NAME IS NOT NULL ORDER BY CONSTRAINT_SCHEMA, TABLE_NAME, CONSTRAINT_NAME, ORDINAL_POSITION")
	if err != nil {
		return nil, fmt.Errorf("apply: %s: read the foreign keys' columns: %w", s.name, s.d.classify(err))
	}
	defer rows.Close()
	defs := []fkDef{}
	for rows.Next() {
		var c, p apply.Table
		var name, col, ref string
		if err := rows.Scan(&c.Schema, &c.Name, &name, &col, &p.Schema, &p.Name, &ref); err != nil {
			return nil, fmt.Errorf("apply: %s: read the foreign keys' columns: %w", s.name, err)
		}
		if n := len(defs); n > 0 && defs[n-1].child == c && defs[n-1].name == name {
			defs[n-1].cols = append(defs[n-1].cols, col)
			defs[n-1].refs = append(defs[n-1].refs, ref)
			continue
		}
		defs = append(defs, fkDef{name: name, child: c, parent: p, cols: []string{col}, refs: []string{ref}})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("apply: %s: read the foreign keys' columns: %w", s.name, s.d.classify(err))
	}
	s.fkDefs = defs
	return defs, nil
}

// maxCheckTuples bounds the values one check statement binds.
const maxCheckTuples = 1000

// checkGroup checks, after a group applied with MySQL's checks off, what
// the checks would have refused at the group's end: for each foreign key
// whose child table the group writes rows to, that the values of the rows
// written find a parent row; for each whose parent table the group deletes
// or updates rows of, that no child row holds a value of the rows' old
// images without finding a parent row (another may hold the value now). A
// row whose key columns hold a NULL is not checked, as InnoDB does not. A
// value the images lack (a partial image) makes the check read the whole
// child table.
func (t *sqlTx) checkGroup(ctx context.Context, groups []apply.TableRows) error {
	q, ok := t.ex.(Queryer)
	if !ok {
		return fmt.Errorf("apply: %s: no way to check the foreign keys", t.s.name)
	}
	defs, err := t.s.foreignKeyColumns(ctx, q)
	if err != nil {
		return err
	}
	for i := range defs {
		fk := &defs[i]
		var tuples [][]codec.Value
		seen := map[string]bool{}
		whole := false
		var first, last uint64
		add := func(img []codec.Column, cols []string, ts uint64) {
			tuple := make([]codec.Value, len(cols))
			for j, name := range cols {
				k := columnIndex(img, name)
				if k < 0 {
					whole = true
					return
				}
				if img[k].Value.IsNull() {
					return // MATCH SIMPLE: not checked
				}
				tuple[j] = img[k].Value
			}
			var kb []byte
			for _, v := range tuple {
				kb = append(kb, byte(v.Kind()))
				kb = append(kb, v.String()...)
				kb = append(kb, 0)
			}
			if !seen[string(kb)] {
				seen[string(kb)] = true
				tuples = append(tuples, tuple)
			}
			if first == 0 || ts < first {
				first = ts
			}
			last = max(last, ts)
		}
		for _, g := range groups {
			if g.Table == fk.child {
				for _, r := range g.Rows {
					if len(r.Columns) > 0 {
						add(r.Columns, fk.cols, r.CommitTs)
					}
				}
			}
			if g.Table == fk.parent {
				for _, r := range g.Rows {
					if len(r.PreColumns) > 0 {
						add(r.PreColumns, fk.refs, r.CommitTs)
					}
				}
			}
		}
		if whole {
			tuples = nil
		} else if len(tuples) == 0 {
			continue
		}
		for {
			n := min(len(tuples), maxCheckTuples)
			if err := t.checkKey(ctx, q, fk, tuples[:n], whole, first, last); err != nil {
				return err
			}
			tuples = tuples[n:]
			if len(tuples) == 0 {
				break
			}
		}
	}
	return nil
}

// checkKey reads one child row of fk holding one of tuples (or any value,
// when whole) that finds no parent row, and fails naming it.
//
//	SELECT c.`mgr` FROM `s`.`emp` AS c WHERE c.`mgr` IN (?,?) AND NOT EXISTS
//	  (SELECT 1 FROM `s`.`emp` AS p WHERE p.`id` = c.`mgr`) LIMIT 1
func (t *sqlTx) checkKey(ctx context.Context, q Queryer, fk *fkDef, tuples [][]codec.Value, whole bool, first, last uint64) error {
	d := t.s.d
	var b []byte
	var args []any
	col := func(b []byte, alias byte, name string) []byte {
		b = append(b, alias, '.')
		return d.quote(b, name)
	}
	b = append(b, "SELECT "...)
	for i, c := range fk.cols {
		if i > 0 {
			b = append(b, ',')
		}
		b = col(b, 'c', c)
	}
	b = append(b, " FROM "...)
	b = d.table(b, fk.child)
	b = append(b, " AS c WHERE "...)
	switch {
	case whole:
		for i, c := range fk.cols {
			if i > 0 {
				b = append(b, " AND "...)
			}
			b = col(b, 'c', c)
			b = append(b, " IS NOT NULL"...)
		}
	case len(fk.cols) == 1:
		b = col(b, 'c', fk.cols[0])
		b = append(b, " IN ("...)
		for i, tu := range tuples {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '?')
			args = append(args, d.arg(tu[0]))
		}
		b = append(b, ')')
	default:
		b = append(b, '(')
		for i, c := range fk.cols {
			if i > 0 {
				b = append(b, ',')
			}
			b = col(b, 'c', c)
		}
		b = append(b, ") IN ("...)
		for i, tu := range tuples {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '(')
			for j, v := range tu {
				if j > 0 {
					b = append(b, ',')
				}
				b = append(b, '?')
				args = append(args, d.arg(v))
			}
			b = append(b, ')')
		}
		b = append(b, ')')
	}
	b = append(b, " AND NOT EXISTS (SELECT 1 FROM "...)
	b = d.table(b, fk.parent)
	b = append(b, " AS p WHERE "...)
	for i := range fk.cols {
		if i > 0 {
			b = append(b, " AND "...)
		}
		b = col(b, 'p', fk.refs[i])
		b = append(b, " = "...)
		b = col(b, 'c', fk.cols[i])
	}
	b = append(b, ") LIMIT 1"...)
	shown := func() string {
		s := string(b)
		if len(tuples) > 1 {
			s += " /* " + fmt.Sprint(len(tuples)) + " values */"
		}
		return s
	}
	rows, err := q.QueryContext(ctx, string(b), args...)
	if err != nil {
		return &apply.StatementError{Table: fk.child, FirstTs: first, LastTs: last, SQL: shown(), Err: d.classify(err)}
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return &apply.StatementError{Table: fk.child, FirstTs: first, LastTs: last, SQL: shown(), Err: d.classify(err)}
		}
		return nil
	}
	vals := make([]sql.NullString, len(fk.cols))
	ptrs := make([]any, len(vals))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return &apply.StatementError{Table: fk.child, FirstTs: first, LastTs: last, SQL: shown(), Err: err}
	}
	held := make([]string, len(vals))
	for i, v := range vals {
		held[i] = fk.cols[i] + " = " + v.String
	}
	return &apply.StatementError{Table: fk.child, FirstTs: first, LastTs: last, SQL: shown(),
		Err: fmt.Errorf("a foreign key constraint fails at the end of the transaction: foreign key %s of %s (%s) references %s (%s), and a row of %s holding %s finds no row there "+
			"(the transaction was applied with foreign_key_checks off: rows of one table reference each other, or the referenced rows change)",
			fk.name, fk.child, strings.Join(fk.cols, ", "), fk.parent, strings.Join(fk.refs, ", "), fk.child, strings.Join(held, ", "))}
}

// columnIndex is the index of column name in img, compared as MySQL
// compares column names (case-insensitively), or -1.
func columnIndex(img []codec.Column, name string) int {
	for i := range img {
		if strings.EqualFold(img[i].Name, name) {
			return i
		}
	}
	return -1
}

// explainForeignKey names what a SQLite COMMIT refused on a deferred
// foreign key: the transaction is still open, and pragma_foreign_key_check
// reads the rows that break a key (it reads every table that has one: a
// cost paid only here).
func explainForeignKey(ctx context.Context, q Queryer, err error) error {
	if !strings.Contains(err.Error(), "FOREIGN KEY constraint failed") {
		return err
	}
	rows, qerr := q.QueryContext(ctx, `SELECT c."table", c.rowid, c.parent, group_concat(f."from", ', '), group_concat(f."to", ', ')
	FROM pragma_foreign_key_check c JOIN pragma_foreign_key_list(c."table") f ON f.id = c.fkid
	GROUP BY c."table", c.rowid, c.parent, c.fkid LIMIT 3`)
	if qerr != nil {
		return fmt.Errorf("%w (naming the rows that break it failed: %v)", err, qerr)
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		var table, parent string
		var rowid sql.NullInt64
		var from, to sql.NullString
		if err := rows.Scan(&table, &rowid, &parent, &from, &to); err != nil {
			break
		}
		row := "a row"
		if rowid.Valid {
			row = fmt.Sprintf("the row of rowid %d", rowid.Int64)
		}
		found = append(found, fmt.Sprintf("%s of %s references %s (%s) by (%s), and finds no row there", row, table, parent, to.String, from.String))
	}
	if len(found) == 0 {
		return err
	}
	return fmt.Errorf("a foreign key constraint fails at the end of the transaction (checks deferred: rows of one table reference each other, or the referenced rows change): %s: %w",
		strings.Join(found, "; "), err)
}
