package apply

import (
	"context"
	"fmt"
	"testing"

	"github.com/redokit/redokit/codec"
)

// scopeSink is a nopSink whose DDLs touch the table they name alone.
type scopeSink struct{ nopSink }

func (*scopeSink) DDLTables(_ context.Context, d *codec.DDL) ([]Table, bool, error) {
	return []Table{TableOf(d.Table)}, true, nil
}

// eventScopeSink is a one-writer nopSink whose DDLs touch the table they
// name alone, said from the event (EventDDLScoper).
type eventScopeSink struct{ scopeSink }

func (*eventScopeSink) MaxOpenTxs() int       { return 1 }
func (*eventScopeSink) ScopesFromEvent() bool { return true }

// TestTablesListStaysBounded: a log that creates, writes and drops table
// after table, with scoped DDLs only, while another table's transaction
// stays open across them (several workers) or its rows stay held across
// them (one worker, scoped from the event), leaves the runner a table list
// and an order list as long as the tables live, not as every table the log
// ever had, and the workers' table counts agree with it. Without the drop
// at a scoped DDL the table list holds every table, and without its
// removal from the order list that list does; a worker notes a fenced table
// once.
func TestTablesListStaysBounded(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		sink    Sink
		workers int
	}{{&scopeSink{}, 3}, {&eventScopeSink{}, 1}} {
		o := (&Options{Workers: c.workers}).withDefaults(c.sink)
		r := newRunner(ctx, c.sink, &o, &Result{Applied: map[Table]uint64{}}, Progress{Tables: map[Table]uint64{}})
		ts := uint64(100)
		for i := range 2000 {
			name := fmt.Sprint("t", i)
			for _, ev := range []codec.Event{
				ddlAt(ts, "s", name, codec.ActionCreateTable, "CREATE TABLE "+name+" (id INT PRIMARY KEY)"),
				rowAt(ts+1, "s", name),
				rowAt(ts+2, "s", "keep"),
				ddlAt(ts+3, "s", name, codec.ActionDropTable, "DROP TABLE "+name),
			} {
				if err := r.event(&ev); err != nil {
					t.Fatal(err)
				}
			}
			ts += 4
		}
		if len(r.tables) > 2 || len(r.order) > 2 {
			t.Fatalf("%T: the runner lists %d tables, %d in its order, after 2,000 created and dropped; want at most 2", c.sink, len(r.tables), len(r.order))
		}
		held := 0
		for _, w := range r.workers {
			held += w.tables
		}
		if held != len(r.tables) {
			t.Fatalf("%T: the workers count %d tables, the runner lists %d", c.sink, held, len(r.tables))
		}
		r.stop()
	}
	var w worker
	a, b := Table{Schema: "s", Name: "a"}, Table{Schema: "s", Name: "b"}
	w.fence([]Table{a, b})
	w.fence([]Table{b, a})
	if len(w.fenced) != 2 {
		t.Fatalf("a worker fenced by the same two tables twice lists %d", len(w.fenced))
	}
}

// TestOrderListStaysBounded: a table handed out at every commit ts (it
// holds BatchRows rows each time) is listed once in the runner's order
// between two barriers, not once per hand-out: a log without DDLs and
// below MaxBufferedRows never empties the list.
func TestOrderListStaysBounded(t *testing.T) {
	ctx := context.Background()
	sink := &nopSink{}
	o := (&Options{Workers: 2, BatchRows: 1, MaxBufferedRows: 1 << 20}).withDefaults(sink)
	r := newRunner(ctx, sink, &o, &Result{Applied: map[Table]uint64{}}, Progress{Tables: map[Table]uint64{}})
	defer r.stop()
	for ts := uint64(100); ts < 20100; ts++ {
		for _, name := range []string{"a", "b"} {
			ev := rowAt(ts, "s", name)
			if err := r.event(&ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(r.order) > 2 {
		t.Fatalf("the runner's order lists %d entries after 20,000 hand-outs of 2 tables; want at most 2", len(r.order))
	}
}
