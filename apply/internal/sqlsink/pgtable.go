package sqlsink

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
)

// What the PostgreSQL sink knows of a table's columns and keys is true only
// until the next DDL: the statements pgx prepared for it, and the unique
// keys the sink read from the catalog.

// pgDDLs counts the DDLs the PostgreSQL sinks of this process ran (or
// tried). Every row statement carries the count in a comment (see query),
// so a statement written after a DDL is never one written before it, even
// when their text is otherwise the same.
//
// pgx's database/sql connections prepare each statement once, on its first
// run, and run it again by its text from a cache of their own. PostgreSQL
// fixes a prepared statement's parameter types at its preparation: after a
// DDL changed a column from an integer to a VARCHAR, the statement written
// for the integer column binds '0031' as the integer 31, which the server
// then stores as '31' (and a delete by that column finds no text equal to
// an integer, or the wrong row). The server re-plans a prepared statement
// after a DDL, but it never retypes its parameters, and pgx's cache keeps
// the old description; neither can be reached on every pooled connection,
// so the text itself changes. One count for every table and every sink
// (two sinks may share a *sql.DB given to New): DDLs are rare, and a
// statement prepared again costs one round trip on each connection. DDLs
// run on the downstream by others than the sink are not counted.
var pgDDLs atomic.Uint64

// query is the text the statement in t.buf runs as: the same, except on
// PostgreSQL after a DDL (see pgDDLs).
func (t *sqlTx) query() string {
	if t.s.d != Postgres {
		return string(t.buf)
	}
	n := pgDDLs.Load()
	if n == 0 {
		return string(t.buf)
	}
	// Past len(t.buf): what an error shows of t.buf stays as it was.
	b := append(t.buf, " /* ddl "...)
	b = strconv.AppendUint(b, n, 10)
	b = append(b, " */"...)
	return string(b)
}

// pgCatalog is what a PostgreSQL sink read of its tables' keys since the
// last DDL.
type pgCatalog struct {
	mu     sync.Mutex
	unique map[apply.Table]bool // whether the table has more than one unique index
}

// pgAfterDDL forgets what a DDL may have changed: the statements written
// before it (pgDDLs) and the unique keys read.
func (s *SQLSink) pgAfterDDL() {
	if s.d != Postgres {
		return
	}
	pgDDLs.Add(1)
	s.pg.mu.Lock()
	s.pg.unique = nil
	s.pg.mu.Unlock()
}

// pgMoreUnique reports whether table has a unique index besides one (its
// primary key, or the index of the log's handle key): one its upserts'
// ON CONFLICT does not name, read once after each DDL.
func (t *sqlTx) pgMoreUnique(ctx context.Context, table apply.Table) (bool, error) {
	s := t.s
	s.pg.mu.Lock()
	more, ok := s.pg.unique[table]
	s.pg.mu.Unlock()
	if ok {
		return more, nil
	}
	q, ok := t.ex.(Queryer)
	if !ok {
		return false, fmt.Errorf("apply: %s: no way to read the unique keys of %s", s.name, table)
	}
	rows, err := q.QueryContext(ctx, "SELECT count(*) FROM pg_index WHERE indrelid = to_regclass($1) AND indisunique",
		string(s.d.table(nil, table)))
	if err != nil {
		return false, fmt.Errorf("apply: %s: read the unique keys of %s: %w", s.name, table, s.d.classify(err))
	}
	defer rows.Close()
	n := 0
	if rows.Next() {
		err = rows.Scan(&n)
	}
	if err == nil {
		err = rows.Err()
	}
	if err != nil {
		return false, fmt.Errorf("apply: %s: read the unique keys of %s: %w", s.name, table, s.d.classify(err))
	}
	more = n > 1
	s.pg.mu.Lock()
	if s.pg.unique == nil {
		s.pg.unique = map[apply.Table]bool{}
	}
	s.pg.unique[table] = more
	s.pg.mu.Unlock()
	return more, nil
}

// pgUnits reports whether the upserts of ops go by units, each cleared
// first (pgClearUnit). PostgreSQL's upsert (INSERT … ON CONFLICT (key) DO
// UPDATE) updates the row holding its key; a row holding another unique
// value it takes fails it (23505), and with it the transaction. The row
// changes of one commit ts are one upstream transaction's final state of
// each row, in no order (the order they came in is not the upstream's), and
// collapse reorders a batch's changes by key; so a unique value that moves
// from one row to another (a chain of them, a swap) meets the row that held
// it whatever order the upserts go in, although the log is legal. MySQL's
// upsert updates the row it meets on any unique key, and MySQL and SQLite
// fall back on REPLACE, which deletes it: their sinks never see this.
//
// So on PostgreSQL the upserts of a table with another unique key go by
// units — every upsert of a collapsed batch, else those of one commit ts —
// and a unit in which some row may have held a unique value before it (an
// update, a row inserted again) first deletes the rows of every key it
// writes (pgClearUnit). What is left of the table then holds none of the
// unit's rows, so no order of the unit's final images meets a row holding
// a unique value they take. A unit of fresh inserts alone needs no delete:
// a row that held one of their unique values gave it up in a delete, which
// runs before.
//
// The delete fires no foreign-key action: the sink's sessions run with
// session_replication_role=replica, unless SinkOptions.ForeignKeyChecks,
// and then the units are only for tables no foreign key references (a
// unique value moving in a referenced table still fails, naming the
// statement). Triggers the replica role leaves on (ENABLE ALWAYS) see a
// delete and an insert where the row was updated.
func (t *sqlTx) pgUnits(ctx context.Context, table apply.Table, ops []rowOp) (bool, error) {
	if t.s.d != Postgres {
		return false, nil
	}
	stale := false
	for i := range ops {
		if !ops[i].del && !ops[i].fresh {
			if codec.KeyColumns(ops[i].img) == nil {
				return false, nil // no key: every update is a delete and an insert already
			}
			stale = true
			break
		}
	}
	if !stale {
		return false, nil
	}
	more, err := t.pgMoreUnique(ctx, table)
	if err != nil || !more {
		return false, err
	}
	if t.s.o.ForeignKeyChecks {
		graph, err := t.s.foreignKeys(ctx, t.ex)
		if err != nil {
			return false, err
		}
		for _, parents := range graph {
			for _, p := range parents {
				if p == table {
					return false, nil
				}
			}
		}
	}
	return true, nil
}

// pgClearUnit deletes the rows of every key the unit at the head of ops
// writes, when one of its upserts is not fresh (see pgUnits), and returns
// the unit's length: the upserts at the head of ops, of one commit ts
// unless collapsed.
func (t *sqlTx) pgClearUnit(ctx context.Context, table apply.Table, ops []rowOp, collapsed bool) (int, error) {
	n := 0
	stale := false
	for n < len(ops) && !ops[n].del && (collapsed || ops[n].ts == ops[0].ts) {
		stale = stale || !ops[n].fresh
		n++
	}
	if !stale {
		return n, nil
	}
	// The unit's own rows are no conflict: a key none of them reached
	// yet is not missed.
	missed := t.conflicts.DeletesMissed
	defer func() { t.conflicts.DeletesMissed = missed }()
	for rest := ops[:n]; len(rest) > 0; {
		k := 1
		for k < len(rest) && k < t.s.o.MaxStatementRows && sameKeyShape(rest[0].img, rest[k].img) {
			k++
		}
		done, err := t.delete(ctx, table, rest[:k])
		if err != nil {
			return 0, err
		}
		rest = rest[done:]
	}
	return n, nil
}
