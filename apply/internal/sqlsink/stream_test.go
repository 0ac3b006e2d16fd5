package sqlsink_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/sqlsink"
	"github.com/redokit/redokit/codec"
)

// TestDuplicates: failover rewrites put copies of events into the stream (the
// reader drops exact copies, but a sink must not depend on it): a copy of a
// commit ts's row changes, in any order, and a DDL twice, change nothing.
// Keyless tables are the exception (a copy is a second row), so t4 is left
// single.
func TestDuplicates(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e *env) {
		w := newWorkload(9, e.schema, 200)
		rng := rand.New(rand.NewPCG(9, 9))
		var events []*codec.Event
		for i := 0; i < len(w.events); {
			j := i
			for j < len(w.events) && w.events[j].CommitTs() == w.events[i].CommitTs() {
				j++
			}
			var rows, ddls []*codec.Event
			for _, ev := range w.events[i:j] {
				if ev.IsDDL() {
					ddls = append(ddls, ev, ev)
					continue
				}
				rows = append(rows, ev)
			}
			var again []*codec.Event
			for _, ev := range rows {
				if ev.Row.Table.Name != "t4" {
					again = append(again, ev)
				}
			}
			rng.Shuffle(len(again), func(a, b int) { again[a], again[b] = again[b], again[a] })
			events = append(append(append(events, rows...), again...), ddls...)
			i = j
		}
		res := e.run(events, &apply.Options{Workers: 3, BatchRows: 4, TxnRows: 30})
		if d := diff(e.dumpAll(workloadTables...), w.want()); d != "" {
			t.Fatalf("with duplicates:\n%s", d)
		}
		if res.DDLs != 16 {
			t.Errorf("DDLs = %d, want 16 (each twice)", res.DDLs)
		}
	})
}

// TestOrder: apply.Run refuses a source out of commit-ts order, and a row change
// after a DDL of its commit ts (it would be lost on a resume, which skips
// rows at or below the recorded DDL ts).
func TestOrder(t *testing.T) {
	e := newEnv(t, sqlsink.SQLite)
	s := e.schema
	create := ddlEv(10, s, "a", codec.ActionCreateTable, "CREATE TABLE a (id BIGINT PRIMARY KEY)")
	ins := func(ts uint64) *codec.Event { return rowEv(ts, s, "a", nil, []codec.Column{icol("id", int64(ts), pk)}) }
	for name, events := range map[string][]*codec.Event{
		"backwards":     {create, ins(12), ins(11)},
		"row after DDL": {create, ins(11), ddlEv(11, s, "a", codec.ActionAddColumn, "ALTER TABLE a ADD COLUMN c INT"), ins(11)},
	} {
		res, err := apply.Run(context.Background(), sliceSource(events), e.open(nil), nil)
		if !errors.Is(err, apply.ErrOrder) {
			t.Errorf("%s: err = %v, want apply.ErrOrder", name, err)
		}
		if res == nil || res.Events != int64(len(events)) {
			t.Errorf("%s: result %+v", name, res)
		}
	}
	// Neither image: not a row change.
	_, err := apply.Run(context.Background(), sliceSource([]*codec.Event{rowEv(20, s, "a", nil, nil)}), e.open(nil), nil)
	if err == nil || !strings.Contains(err.Error(), "neither image") {
		t.Errorf("empty row change: err = %v", err)
	}
}

// TestSourceError: a source failure stops the apply, rolls back what is not
// committed, and is returned.
func TestSourceError(t *testing.T) {
	e := newEnv(t, sqlsink.SQLite)
	w := newWorkload(2, e.schema, 50)
	boom := errors.New("segment corrupt")
	src := func(yield func(*codec.Event, error) bool) {
		for _, ev := range w.events[:len(w.events)/2] {
			if !yield(ev, nil) {
				return
			}
		}
		yield(nil, boom)
	}
	if _, err := apply.Run(context.Background(), src, e.open(nil), &apply.Options{TxnRows: 1 << 20}); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	// The rows after the last DDL were never committed.
	res := e.run(w.events, nil)
	if res.Skipped == 0 || res.Skipped+res.Rows+res.DDLs != int64(len(w.events)) {
		t.Errorf("re-run %+v", res)
	}
	if d := diff(e.dumpAll(workloadTables...), w.want()); d != "" {
		t.Fatal(d)
	}
	for ev, err := range apply.SliceSource(nil) {
		t.Errorf("empty SliceSource yielded %v, %v", ev, err)
	}
}
