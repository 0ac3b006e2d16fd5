package sqlsink

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
)

// uniqueIndex is one unique index (or constraint) of a downstream table.
type uniqueIndex struct {
	name string
	cols []string // its key columns in order; "" for a part that is an expression
	// plain: every part is a whole column and no predicate limits it, so
	// two rows conflict on it exactly when they hold the same values in
	// cols, none NULL.
	plain bool
}

// catalog is what a sink read of its tables' unique keys since the last DDL.
type catalog struct {
	mu     sync.Mutex
	unique map[apply.Table][]uniqueIndex
	copy   map[apply.Table]*copyInfo // what COPY needs (copy.go)
}

// sameTable reports whether a and b name one downstream table: without
// regard to case (a DDL may spell a name in another case than the row
// changes do, and forgetting more than needed costs only a read), and on
// SQLite, which has no schemas, by name alone.
func (s *SQLSink) sameTable(a, b apply.Table) bool {
	return strings.EqualFold(a.Name, b.Name) && (s.d == SQLite || strings.EqualFold(a.Schema, b.Schema))
}

// afterDDL forgets what a DDL may have changed, of the tables it names (see
// ddlTables), or of every table when it cannot tell: on PostgreSQL the
// statements written before it (pgGens), on every dialect the unique keys
// and columns read, and what the sink knew of the rows of the tables it
// names (see keyless.go). A log with a DDL every thousand rows read every
// table's unique keys again after each, where one table's had changed.
func (s *SQLSink) afterDDL(ddl *codec.DDL) {
	if movesForeignKeys(ddl) {
		s.fkMu.Lock()
		s.scopeFKs = nil
		s.fkMu.Unlock()
	}
	tables, all := ddlTables(ddl)
	if s.d == Postgres {
		pgDDL(tables, all)
	}
	s.cat.mu.Lock()
	if all {
		s.cat.unique, s.cat.copy = nil, nil
	} else {
		for _, named := range tables {
			maps.DeleteFunc(s.cat.unique, func(t apply.Table, _ []uniqueIndex) bool { return s.sameTable(t, named) })
			maps.DeleteFunc(s.cat.copy, func(t apply.Table, _ *copyInfo) bool { return s.sameTable(t, named) })
		}
	}
	s.cat.mu.Unlock()
	s.forgetKeyless(ddl)
}

// uniqueIndexes returns the unique indexes of table, read from the
// downstream's catalog once, and again after a DDL of it (afterDDL). A
// table that does not exist has none.
func (t *sqlTx) uniqueIndexes(ctx context.Context, table apply.Table) ([]uniqueIndex, error) {
	s := t.s
	s.cat.mu.Lock()
	idx, ok := s.cat.unique[table]
	s.cat.mu.Unlock()
	if ok {
		return idx, nil
	}
	q, ok := t.ex.(Queryer)
	if !ok {
		return nil, fmt.Errorf("apply: %s: no way to read the unique keys of %s", s.name, table)
	}
	var rows *sql.Rows
	var err error
	switch s.d {
	case Postgres:
		// indkey holds the INCLUDE columns after the indnkeyatts key
		// columns, and 0 for an expression.
		rows, err = q.QueryContext(ctx, `SELECT c.relname, coalesce(a.attname, ''), i.indexprs IS NULL AND i.indpred IS NULL
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(n, o)
LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n AND k.n > 0
WHERE i.indrelid = to_regclass($1) AND i.indisunique AND k.o <= i.indnkeyatts
ORDER BY c.relname, k.o`, string(s.d.table(nil, table)))
	case MySQL:
		// A prefix (SUB_PART) conflicts on the prefix alone; a functional
		// key part (MySQL 8) has no column.
		rows, err = q.QueryContext(ctx, `SELECT INDEX_NAME, COALESCE(COLUMN_NAME, ''), SUB_PART IS NULL
FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND NON_UNIQUE = 0
ORDER BY INDEX_NAME, SEQ_IN_INDEX`, table.Schema, table.Name)
	default:
		// An INTEGER PRIMARY KEY is the rowid, which has no index: it is
		// listed from the table's columns, as index "" (no index name is
		// empty), so that the upsert may name it as its conflict target.
		rows, err = q.QueryContext(ctx, `SELECT n, c, p FROM (
SELECT il.name AS n, coalesce(ii.name, '') AS c, il.partial = 0 AS p, ii.seqno AS o
FROM pragma_index_list(?1) AS il JOIN pragma_index_info(il.name) AS ii WHERE il."unique" = 1
UNION ALL
SELECT '', ti.name, 1, ti.pk FROM pragma_table_info(?1) AS ti
WHERE ti.pk > 0 AND NOT EXISTS (SELECT 1 FROM pragma_index_list(?1) WHERE origin = 'pk')
) ORDER BY n, o`, table.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("apply: %s: read the unique keys of %s: %w", s.name, table, s.d.classify(err))
	}
	defer rows.Close()
	idx = []uniqueIndex{}
	for rows.Next() {
		var name, col string
		var plain bool
		if err := rows.Scan(&name, &col, &plain); err != nil {
			return nil, fmt.Errorf("apply: %s: read the unique keys of %s: %w", s.name, table, err)
		}
		if n := len(idx); n == 0 || idx[n-1].name != name {
			idx = append(idx, uniqueIndex{name: name, plain: true})
		}
		u := &idx[len(idx)-1]
		u.cols = append(u.cols, col)
		u.plain = u.plain && plain && col != ""
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("apply: %s: read the unique keys of %s: %w", s.name, table, s.d.classify(err))
	}
	s.cat.mu.Lock()
	if s.cat.unique == nil {
		s.cat.unique = map[apply.Table][]uniqueIndex{}
	}
	s.cat.unique[table] = idx
	s.cat.mu.Unlock()
	return idx, nil
}

// otherUnique reports whether table has a unique index besides the one of
// img's key (every unique index, for an image without a key): one an
// upsert's ON CONFLICT (key) does not name, on which a row that is not the
// image's own may hold a value the image takes. backed reports whether a
// plain unique index (or the primary key) holds exactly the key's columns:
// one an upsert may name as its conflict target.
func (t *sqlTx) otherUnique(ctx context.Context, table apply.Table, img []codec.Column) (other, backed bool, err error) {
	idx, err := t.uniqueIndexes(ctx, table)
	if err != nil {
		return false, false, err
	}
	var key []string
	for _, i := range codec.KeyColumns(img) {
		key = append(key, img[i].Name)
	}
	for _, u := range idx {
		if len(u.cols) != len(key) || slices.ContainsFunc(u.cols, func(c string) bool { return !slices.Contains(key, c) }) {
			other = true
		} else if u.plain {
			backed = true
		}
	}
	return other, backed, nil
}

// units reports whether the upserts of ops go by units, each cleared first
// (clearUnit). An upsert (INSERT … ON CONFLICT/ON DUPLICATE KEY UPDATE)
// updates the row holding its key; a row holding another unique value it
// takes fails it: PostgreSQL's (23505, and with it the transaction), and
// MySQL's and SQLite's too where the image meets two rows at once. The row
// changes of one commit ts are one upstream transaction, and collapse
// reorders a batch's changes by key; so a unique value that moves from one
// row to another (a chain of them, a swap) meets the row that held it
// whatever order the upserts go in, although the log is legal. MySQL and
// SQLite would then REPLACE, deleting that row, and count a conflict that is
// none; PostgreSQL would stop.
//
// So the upserts of a table with another unique key go by units — every
// upsert of a collapsed batch, else those of one commit ts — and a unit in
// which some row may have held a unique value before it (an update, a row
// inserted again) first deletes the rows of every key it writes
// (clearUnit). What is left of the table then holds none of the unit's
// rows, so no order of the unit's final images meets a row holding a
// unique value they take, and a row that still does is not the log's: a
// stale one, which the upsert's fallback replaces and counts
// (Conflicts.Replaced). A unit of fresh inserts alone needs no delete: a
// row that held one of their unique values gave it up in a delete, which
// runs before.
//
// The delete fires no foreign-key action: the sink's sessions run with the
// checks off (foreign_key_checks=0, session_replication_role=replica,
// SQLite's foreign_keys off), unless SinkOptions.ForeignKeyChecks, and
// then the units are only for tables no foreign key references (a unique
// value moving in a referenced table still fails, naming the statement).
// Triggers downstream see a delete and an insert where the row was
// updated.
func (t *sqlTx) units(ctx context.Context, table apply.Table, ops []rowOp) (bool, error) {
	var img []codec.Column
	for i := range ops {
		if !ops[i].del && !ops[i].fresh {
			if codec.KeyColumns(ops[i].img) == nil {
				return false, nil // no key: every update is a delete and an insert already
			}
			img = ops[i].img
			break
		}
	}
	if img == nil {
		return false, nil
	}
	more, _, err := t.otherUnique(ctx, table, img)
	if err != nil || !more {
		return false, err
	}
	if t.s.o.ForeignKeyChecks {
		graph, err := t.s.foreignKeys(ctx, t.ex)
		if err != nil {
			return false, err
		}
		key := fkKey(t.s.d == SQLite)
		for _, parents := range graph {
			for _, p := range parents {
				if key(p) == key(table) {
					return false, nil
				}
			}
		}
	}
	return true, nil
}

// clearUnit deletes the rows of every key the unit at the head of ops
// writes, when one of its upserts is not fresh (see units), and returns the
// unit's length: the upserts at the head of ops, of one commit ts unless
// collapsed, and whether it deleted them.
func (t *sqlTx) clearUnit(ctx context.Context, table apply.Table, ops []rowOp, collapsed bool) (int, bool, error) {
	n := 0
	stale := false
	for n < len(ops) && !ops[n].del && (collapsed || ops[n].ts == ops[0].ts) {
		stale = stale || !ops[n].fresh
		n++
	}
	if !stale {
		return n, false, nil
	}
	// The unit's own rows are no conflict: a key none of them reached
	// yet is not missed.
	counted := t.conflicts.Clone()
	defer func() { t.conflicts = counted }()
	for rest := ops[:n]; len(rest) > 0; {
		k := 1
		for k < len(rest) && k < t.s.o.MaxStatementRows && sameKeyShape(rest[0].img, rest[k].img) {
			k++
		}
		done, err := t.delete(ctx, table, rest[:k])
		if err != nil {
			return 0, false, err
		}
		rest = rest[done:]
	}
	return n, true, nil
}
