package sqlsink_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/sqlsink"
	"github.com/redokit/redokit/codec"
)

// scopeFaultSink is the SQL sink (a DDLScoper, unlike faultySink) with a
// failure: once the DDL at ddlTs has committed, a transaction holding rows
// of a table other than the DDL's from below ddlTs fails to commit. Run applied
// the DDL while that transaction was open, and dies before it commits.
type scopeFaultSink struct {
	*sqlsink.SQLSink
	ddlTs    uint64
	ddlTable string
	ddlDone  atomic.Bool
	hits     atomic.Int64
}

var errScopeFault = errors.New("injected: commit after the DDL of another table")

func (s *scopeFaultSink) ApplyDDL(ctx context.Context, ddl *codec.DDL, mark apply.DDLMark) error {
	err := s.SQLSink.ApplyDDL(ctx, ddl, mark)
	if err == nil && ddl.CommitTs == s.ddlTs {
		s.ddlDone.Store(true)
	}
	return err
}

func (s *scopeFaultSink) Begin(ctx context.Context) (apply.Tx, error) {
	tx, err := s.SQLSink.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &scopeFaultTx{Tx: tx, s: s}, nil
}

type scopeFaultTx struct {
	apply.Tx
	s     *scopeFaultSink
	early bool // holds rows of another table than the DDL's from below its ts
}

func (t *scopeFaultTx) ApplyRows(ctx context.Context, table apply.Table, rows []*codec.RowChange) error {
	if table.Name != t.s.ddlTable && rows[0].CommitTs < t.s.ddlTs {
		t.early = true
	}
	return t.Tx.ApplyRows(ctx, table, rows)
}

func (t *scopeFaultTx) Commit(ctx context.Context, marks []apply.Mark) error {
	if t.early && t.s.ddlDone.Load() {
		t.s.hits.Add(1)
		t.Tx.Rollback()
		return errScopeFault
	}
	return t.Tx.Commit(ctx, marks)
}

// TestScopedDDLResumes: a DDL waits only for the workers holding rows of its
// tables (apply.DDLScoper), so other tables' rows from before it may still
// be in open transactions when it commits, with its progress row. A run
// that dies then (the first commit of such rows after the DDL fails) must
// resume exactly: the DDL is not run again, and those rows, which only
// their tables' marks can tell, are applied, neither lost nor doubled (a
// keyless table among them). The failure must happen, or the test proves
// nothing: on MariaDB and PostgreSQL the other workers keep their
// transactions open across the DDL; on SQLite (one worker) Run holds the
// other tables' rows across it (apply.EventDDLScoper).
func TestScopedDDLResumes(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e *env) {
		others := []string{"b1", "b2", "b3", "b4", "b5", "b6", "k"} // six keyed, k keyless
		const ddlTs, newTs = 60, 80
		build := func(schema string) []*codec.Event {
			var evs []*codec.Event
			evs = append(evs, ddlEv(1, schema, "a", codec.ActionCreateTable, "CREATE TABLE a (id BIGINT PRIMARY KEY, v VARCHAR(20))"))
			for _, o := range others {
				q := "CREATE TABLE " + o + " (id BIGINT PRIMARY KEY, v VARCHAR(20))"
				if o == "k" {
					q = "CREATE TABLE k (id BIGINT, v VARCHAR(20))"
				}
				evs = append(evs, ddlEv(2, schema, o, codec.ActionCreateTable, q))
			}
			img := func(table string, id int64, v string) []codec.Column {
				flags := codec.ColumnFlag(pk)
				if table == "k" {
					flags = 0
				}
				return []codec.Column{icol("id", id, flags), scol("v", v)}
			}
			for ts := uint64(10); ts < 120; ts++ {
				for _, tb := range append([]string{"a"}, others...) {
					evs = append(evs, rowEv(ts, schema, tb, nil, img(tb, int64(ts), fmt.Sprint("v", ts))))
					if ts%7 == 0 && ts > 20 {
						// an update of an earlier row, and a delete
						evs = append(evs, rowEv(ts, schema, tb, img(tb, int64(ts-5), fmt.Sprint("v", ts-5)), img(tb, int64(ts-5), fmt.Sprint("u", ts))))
						evs = append(evs, rowEv(ts, schema, tb, img(tb, int64(ts-9), fmt.Sprint("v", ts-9)), nil))
					}
				}
				if ts == ddlTs {
					evs = append(evs, ddlEv(ts, schema, "a", codec.ActionAddColumn, "ALTER TABLE a ADD COLUMN x INT"))
				}
				if ts == newTs {
					// Created while every worker holds an open
					// transaction: MariaDB refuses one whose snapshot
					// predates the table to write it (error 159).
					evs = append(evs, ddlEv(ts, schema, "c", codec.ActionCreateTable, "CREATE TABLE c (id BIGINT PRIMARY KEY, v VARCHAR(20))"))
				}
				if ts > newTs {
					evs = append(evs, rowEv(ts, schema, "c", nil, img("c", int64(ts), "c")))
				}
			}
			return evs
		}
		evs := build(e.schema)
		// Small batches, so that the rows are with the workers before the
		// DDL; no commit before it but the DDL's.
		opts := &apply.Options{Workers: 4, BatchRows: 8, TxnRows: 100000, RetryBackoff: 1}
		tables := append([]string{"a", "c"}, others...)

		want := newEnv(t, e.dialect)
		want.run(build(want.schema), opts)

		s := &scopeFaultSink{SQLSink: e.open(nil), ddlTs: ddlTs, ddlTable: "a"}
		res, err := apply.Run(context.Background(), sliceSource(evs), s, opts)
		if !errors.Is(err, errScopeFault) {
			t.Fatalf("Run: %v (%d faults), want the injected failure: did the DDL wait for every worker?", err, s.hits.Load())
		}
		if res.AppliedDDL.CommitTs < ddlTs {
			t.Fatalf("AppliedDDL %+v after the failure, want the DDL at %d or after", res.AppliedDDL, ddlTs)
		}
		p := e.progress()
		if p.DDL != res.AppliedDDL || !maps.Equal(p.Tables, res.Applied) {
			t.Fatalf("progress %v %+v, Result.Applied %v %+v", p.Tables, p.DDL, res.Applied, res.AppliedDDL)
		}
		behind := 0
		for _, o := range others {
			if p.Tables[apply.Table{Schema: e.schema, Name: o}] < ddlTs {
				behind++
			}
		}
		if behind == 0 {
			t.Fatalf("no other table's progress is behind the DDL at %d: %v", ddlTs, p.Tables)
		}

		res, err = apply.Run(context.Background(), sliceSource(evs), e.open(nil), opts)
		if err != nil {
			t.Fatalf("rerun: %v", err)
		}
		got, exp := e.dumpAll(tables...), want.dumpAll(tables...)
		for _, tb := range tables {
			if !slices.Equal(got[tb], exp[tb]) {
				t.Errorf("table %s after the rerun: %s", tb, firstDiff(got[tb], exp[tb]))
			}
		}
		if c := e.open(nil).Conflicts(); c.DuplicatedKeyless != 0 {
			t.Errorf("the rerun doubled %d keyless rows", c.DuplicatedKeyless)
		}
		t.Logf("%d tables behind the DDL when the run died (progress %v); the rerun skipped %d events", behind, p.Tables, res.Skipped)
	})
}

// TestDDLTablesScope: the tables a DDL makes Run wait for are those it names or
// renames and those a foreign key links to them, either way (on SQLite,
// whose foreign keys order nothing with the checks off, those it names or
// renames, by name alone: it has no schemas); a DDL that may add a foreign
// key, read another table (AS SELECT, LIKE), or names no table makes it
// wait for every table. A foreign key added by a DDL is seen by the next.
func TestDDLTablesScope(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		e.ddl("CREATE TABLE p (id BIGINT PRIMARY KEY)")
		e.ddl("CREATE TABLE c (id BIGINT PRIMARY KEY, pid BIGINT, FOREIGN KEY (pid) REFERENCES p (id))")
		e.ddl("CREATE TABLE o (id BIGINT PRIMARY KEY)")
		s := e.open(nil)
		scope := func(table string, action codec.ActionType, q string) ([]string, bool) {
			t.Helper()
			ev := ddlEv(100, e.schema, table, action, q)
			tables, ok, err := s.DDLTables(ctx, &ev.DDL)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			var names []string
			for _, x := range tables {
				if want := e.schema; e.dialect == sqlsink.SQLite && x.Schema != "" || e.dialect != sqlsink.SQLite && x.Schema != want {
					t.Errorf("%s: table %v of another schema", q, x)
				}
				names = append(names, x.Name)
			}
			slices.Sort(names)
			return slices.Compact(names), ok
		}
		linked := func(names ...string) []string {
			if e.dialect == sqlsink.SQLite {
				return names[:1]
			}
			return names
		}
		for _, c := range []struct {
			table  string
			action codec.ActionType
			q      string
			want   []string // nil: every table
		}{
			{"p", codec.ActionAddColumn, "ALTER TABLE p ADD COLUMN z INT", linked("p", "c")},
			{"c", codec.ActionAddColumn, "ALTER TABLE c ADD COLUMN z INT", linked("c", "p")},
			{"o", codec.ActionTruncateTable, "TRUNCATE TABLE o", []string{"o"}},
			{"o", codec.ActionRenameTable, "RENAME TABLE o TO o2", []string{"o", "o2"}},
			{"o", codec.ActionNone, "ALTER TABLE o ADD FOREIGN KEY (id) REFERENCES p (id)", nil},
			{"", codec.ActionDropSchema, "DROP DATABASE " + e.schema, nil},
			{"o3", codec.ActionCreateTable, "CREATE TABLE o3 AS SELECT * FROM o", nil},
			{"o3", codec.ActionCreateTable, "CREATE TABLE o3 LIKE o", nil},
		} {
			got, ok := scope(c.table, c.action, c.q)
			if c.want == nil {
				if ok {
					t.Errorf("%s: waits for %v, want every table", c.q, got)
				}
				continue
			}
			slices.Sort(c.want)
			if !ok || !slices.Equal(got, c.want) {
				t.Errorf("%s: waits for %v (scoped %v), want %v", c.q, got, ok, c.want)
			}
		}
		if e.dialect == sqlsink.SQLite {
			return // no ALTER TABLE … ADD CONSTRAINT, and no foreign key in a scope
		}
		// A foreign key added since the last read: the DDL that added it
		// makes the sink read them again.
		if err := s.ApplyDDL(ctx, &ddlEv(101, e.schema, "o", codec.ActionNone,
			"ALTER TABLE o ADD CONSTRAINT fo FOREIGN KEY (id) REFERENCES p (id)").DDL, apply.DDLMark{}); err != nil {
			t.Fatal(err)
		}
		if got, ok := scope("o", codec.ActionTruncateTable, "TRUNCATE TABLE o"); !ok || !slices.Equal(got, linked("o", "p")) {
			t.Errorf("after the foreign key o → p: TRUNCATE TABLE o waits for %v (scoped %v), want [o p]", got, ok)
		}
	})
}
