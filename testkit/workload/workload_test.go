package workload

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/redokit/redokit/codec"
)

// replay applies the events of a workload to plain maps, the way a
// downstream would, without using the generator's model: if the events and
// the model disagree (a wrong pre-image, a row the model forgot), the
// comparison below fails.
type replay map[string]map[int64]string

func rowKey(cols []codec.Column) (int64, string) {
	var id int64
	s := ""
	for _, c := range cols {
		if c.Name == "id" {
			id = c.Value.Int()
		}
		s += c.Name + "=" + c.Value.String() + ";"
	}
	return id, s
}

func (r replay) apply(t *testing.T, tx *Txn) {
	for _, ch := range tx.Changes {
		ev := ch.Event
		if ev.IsDDL() {
			switch ev.DDL.Type {
			case codec.ActionCreateTable, codec.ActionTruncateTable:
				r[ev.DDL.Table.Name] = map[int64]string{}
			case codec.ActionDropTable:
				delete(r, ev.DDL.Table.Name)
			case codec.ActionAddColumn:
				// Existing rows gain the new column as NULL.
				col := strings.Split(ev.DDL.Query, "`")[3]
				for id, row := range r[ev.DDL.Table.Name] {
					r[ev.DDL.Table.Name][id] = row + col + "=NULL;"
				}
			}
			continue
		}
		tab := r[ev.Row.Table.Name]
		if tab == nil {
			t.Fatalf("row of missing table %s", ev.Row.Table)
		}
		if len(ev.Row.PreColumns) > 0 {
			id, _ := rowKey(ev.Row.PreColumns)
			if _, ok := tab[id]; !ok {
				t.Fatalf("%s: update/delete of missing row %d", ev.Row.Table, id)
			}
			delete(tab, id)
		}
		if len(ev.Row.Columns) > 0 {
			id, s := rowKey(ev.Row.Columns)
			tab[id] = s
		}
	}
}

func render(m *Model) map[string]map[int64]string {
	out := map[string]map[int64]string{}
	for name, t := range m.Tables {
		rows := map[int64]string{}
		for id, vals := range t.Rows {
			_, rows[id] = rowKey(columns(t, vals))
		}
		out[name] = rows
	}
	return out
}

func TestDeterministicAndPeekNeutral(t *testing.T) {
	cfg := Config{Rows: 3000, DDLRate: 0.05, Seed: 7}
	a, b := New(cfg), New(cfg)
	n := 0
	for {
		b.PeekTs() // peeking must not change what b generates
		b.PeekTs()
		ta, oka := a.Next()
		tb, okb := b.Next()
		if oka != okb {
			t.Fatalf("txn %d: one generator ended early", n)
		}
		if !oka {
			break
		}
		if ta.CommitTs != tb.CommitTs || len(ta.Changes) != len(tb.Changes) {
			t.Fatalf("txn %d differs: %d vs %d", n, ta.CommitTs, tb.CommitTs)
		}
		for i := range ta.Changes {
			if !ta.Changes[i].Event.Equal(&tb.Changes[i].Event) || ta.Changes[i].Span != tb.Changes[i].Span {
				t.Fatalf("txn %d event %d differs", n, i)
			}
		}
		n++
	}
	if n < 100 {
		t.Fatalf("only %d transactions", n)
	}
}

func TestModelMatchesEvents(t *testing.T) {
	cfg := Config{Rows: 5000, Tables: 3, DDLRate: 0.03, Seed: 11}
	g := New(cfg)
	r := replay{}
	var mid uint64
	kinds := map[codec.ActionType]int{}
	prev := uint64(0)
	rows := 0
	for i := 0; ; i++ {
		tx, ok := g.Next()
		if !ok {
			break
		}
		if tx.CommitTs <= prev {
			t.Fatalf("commit ts not increasing: %d after %d", tx.CommitTs, prev)
		}
		prev = tx.CommitTs
		rows += tx.Rows()
		for _, ch := range tx.Changes {
			if ch.Event.IsDDL() {
				kinds[ch.Event.DDL.Type]++
				checkNamedTable(t, &ch.Event.DDL)
				if ch.Span != DDLSpan {
					t.Fatal("DDL off the DDL span")
				}
			} else if ch.Event.CommitTs() != tx.CommitTs {
				t.Fatal("row ts differs from its txn")
			}
		}
		r.apply(t, tx)
		if i == 400 {
			mid = tx.CommitTs
		}
	}
	if rows != cfg.Rows {
		t.Fatalf("%d rows, want %d", rows, cfg.Rows)
	}
	for _, k := range []codec.ActionType{codec.ActionCreateTable, codec.ActionAddColumn, codec.ActionTruncateTable, codec.ActionDropTable} {
		if kinds[k] == 0 {
			t.Errorf("no %v DDL in the workload: %v", k, kinds)
		}
	}
	got := render(g.Model())
	if fmt.Sprint(got) != fmt.Sprint(map[string]map[int64]string(r)) {
		t.Fatal("model and replayed events disagree")
	}
	// Expected at a mid ts equals a replay stopped there.
	r2 := replay{}
	g2 := New(cfg)
	for {
		ts, ok := g2.PeekTs()
		if !ok || ts > mid {
			break
		}
		tx, _ := g2.Next()
		r2.apply(t, tx)
	}
	if fmt.Sprint(render(Expected(cfg, mid))) != fmt.Sprint(map[string]map[int64]string(r2)) {
		t.Fatal("Expected(mid) disagrees with a replay stopped at mid")
	}
}

// checkNamedTable holds a DDL to docs/FORMAT.md's rule for the table it
// names: the table as it is after the statement (a CREATE's or a
// TRUNCATE's new ID, created), or for a DROP the dropped one. The codec's
// golden TRUNCATE (codec/testdata/ddl.bin) follows the same rule.
func checkNamedTable(t *testing.T, d *codec.DDL) {
	t.Helper()
	if d.Table.Name == "" {
		return // schema-level: names no table
	}
	want := codec.RoleAffected
	switch d.Type {
	case codec.ActionCreateTable, codec.ActionTruncateTable:
		want = codec.RoleCreated
	case codec.ActionDropTable:
		want = codec.RoleDropped
	}
	for _, e := range d.Tables {
		if e.TableName == d.Table && e.Role == want {
			return
		}
	}
	t.Fatalf("%v DDL names %s ID %d, which is not its %v table: %v", d.Type, d.Table, d.Table.PhysicalID, want, d.Tables)
}

// TestDDLListsItsTables: every generated DDL that touches a table lists
// every physical table it touches in Tables (docs/FORMAT.md, DDL body), with
// the role its action gives it: the named table (as it is after the
// statement) always, and for TRUNCATE also the old physical ID, dropped. A
// schema-level DDL names no table and lists none.
func TestDDLListsItsTables(t *testing.T) {
	g := New(Config{Rows: 20000, Tables: 3, DDLRate: 0.05, Seed: 25})
	ids := map[string]int64{} // table name -> its current physical ID
	kinds := map[codec.ActionType]int{}
	for {
		tx, ok := g.Next()
		if !ok {
			break
		}
		for _, ch := range tx.Changes {
			ev := ch.Event
			if err := codec.CheckEvent(&ev); err != nil {
				t.Fatalf("ts %d: %v", tx.CommitTs, err)
			}
			if !ev.IsDDL() {
				if id, ok := ids[ev.Row.Table.Name]; !ok || id != ev.Row.Table.PhysicalID {
					t.Fatalf("ts %d: row of %+v, the table has ID %d (known %v)", tx.CommitTs, ev.Row.Table, id, ok)
				}
				continue
			}
			d := ev.DDL
			kinds[d.Type]++
			named := codec.DDLTable{TableName: d.Table}
			var want []codec.DDLTable
			switch d.Type {
			case codec.ActionCreateSchema:
				if d.Table.Name != "" || d.Table.PhysicalID != 0 {
					t.Fatalf("ts %d: schema-level %q names %+v", tx.CommitTs, d.Query, d.Table)
				}
			case codec.ActionCreateTable:
				named.Role = codec.RoleCreated
				want = []codec.DDLTable{named}
				ids[d.Table.Name] = d.Table.PhysicalID
			case codec.ActionAddColumn:
				named.Role = codec.RoleAffected
				want = []codec.DDLTable{named}
			case codec.ActionTruncateTable:
				old := named
				old.PhysicalID, old.Role = ids[d.Table.Name], codec.RoleDropped
				named.Role = codec.RoleCreated
				want = []codec.DDLTable{old, named}
				ids[d.Table.Name] = d.Table.PhysicalID
			case codec.ActionDropTable:
				named.Role = codec.RoleDropped
				want = []codec.DDLTable{named}
			default:
				t.Fatalf("ts %d: action %v: this test does not know it", tx.CommitTs, d.Type)
			}
			if d.Type == codec.ActionAddColumn || d.Type == codec.ActionDropTable {
				if id, ok := ids[d.Table.Name]; !ok || id != d.Table.PhysicalID {
					t.Fatalf("ts %d: %q names ID %d, the table has %d", tx.CommitTs, d.Query, d.Table.PhysicalID, id)
				}
			}
			if d.Type == codec.ActionDropTable {
				delete(ids, d.Table.Name)
			}
			if !slices.Equal(d.Tables, want) {
				t.Fatalf("ts %d: %q lists %+v, want %+v", tx.CommitTs, d.Query, d.Tables, want)
			}
		}
	}
	for _, a := range []codec.ActionType{codec.ActionCreateSchema, codec.ActionCreateTable, codec.ActionAddColumn, codec.ActionTruncateTable, codec.ActionDropTable} {
		if kinds[a] == 0 {
			t.Errorf("no DDL of action %v generated: %v", a, kinds)
		}
	}
}
