package main

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"

	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/meta"
)

// upstream is the toy source database: tables of (id, v, and columns added by
// DDLs) rows, changed by transactions with increasing commit ts. It keeps
// every event it produced (a failover replays them from the log's
// checkpoint, as a CDC system re-reads its source) and the state the
// downstream must end in.
type upstream struct {
	r      *rand.Rand
	ts     uint64 // the last commit ts given out
	tables []*table
	nextID int64

	history map[meta.SpanID][]codec.Event
	rows    int // row changes produced
	ddls    int
}

type table struct {
	span    meta.SpanID
	name    string
	columns []string         // beyond id and v, in the order they were added
	rows    map[int64][]cell // the current state, by id
}

type cell struct {
	name string
	val  codec.Value
}

func newUpstream(tables int, seed, startTs uint64) *upstream {
	u := &upstream{r: rand.New(rand.NewPCG(seed, 0xcdc)), ts: startTs, history: map[meta.SpanID][]codec.Event{}}
	for i := range tables {
		u.tables = append(u.tables, &table{span: meta.SpanID(i + 1), name: fmt.Sprintf("t%d", i+1), rows: map[int64][]cell{}})
	}
	return u
}

func (t *table) tableName() codec.TableName {
	return codec.TableName{Schema: "main", Name: t.name, PhysicalID: int64(t.span)}
}

// image turns a row's cells into a complete row image.
func image(cells []cell) []codec.Column {
	cols := make([]codec.Column, len(cells))
	for i, c := range cells {
		cols[i] = codec.Column{Name: c.name, Type: codec.TypeLonglong, Value: c.val}
		switch {
		case i == 0:
			cols[i].Flags = codec.FlagPrimaryKey | codec.FlagHandleKey
		case c.name == "v":
			cols[i].Type = codec.TypeVarchar
		default:
			cols[i].Flags = codec.FlagNullable
		}
	}
	return cols
}

// newRow makes a row's cells at ts: every column of the table has a value.
func (u *upstream) newRow(t *table, id int64, ts uint64) []cell {
	cells := []cell{{"id", codec.IntValue(id)}, {"v", codec.StringValue(fmt.Sprintf("%s row %d at %d", t.name, id, ts))}}
	for _, c := range t.columns {
		cells = append(cells, cell{c, codec.IntValue(int64(ts))})
	}
	return cells
}

// txn produces one transaction on one table (1 to 3 row changes at one
// commit ts), applies it to the upstream state and returns its span and
// events.
func (u *upstream) txn() (meta.SpanID, []codec.Event) {
	u.ts++
	ts := u.ts
	t := u.tables[u.r.IntN(len(u.tables))]
	var evs []codec.Event
	used := map[int64]bool{}
	for range 1 + u.r.IntN(3) {
		rc := codec.RowChange{StartTs: ts - 1, CommitTs: ts, Table: t.tableName()}
		ids := slices.Sorted(maps.Keys(t.rows))
		n := u.r.IntN(10)
		switch {
		case len(ids) == 0 || n < 5: // insert
			u.nextID++
			id := u.nextID
			t.rows[id] = u.newRow(t, id, ts)
			rc.Columns = image(t.rows[id])
			used[id] = true
		case n < 8: // update every non-key column
			id := ids[u.r.IntN(len(ids))]
			if used[id] {
				continue // one change per row per transaction
			}
			used[id] = true
			rc.PreColumns = image(t.rows[id])
			t.rows[id] = u.newRow(t, id, ts)
			rc.Columns = image(t.rows[id])
		default: // delete
			id := ids[u.r.IntN(len(ids))]
			if used[id] {
				continue
			}
			used[id] = true
			rc.PreColumns = image(t.rows[id])
			delete(t.rows, id)
		}
		evs = append(evs, codec.Event{Kind: codec.RowEvent, Row: rc})
	}
	u.rows += len(evs)
	u.history[t.span] = append(u.history[t.span], evs...)
	return t.span, evs
}

// ddl produces ALTER TABLE ... ADD COLUMN on a random table, at its own
// commit ts.
func (u *upstream) ddl() (meta.SpanID, codec.Event) {
	u.ts++
	ts := u.ts
	t := u.tables[u.r.IntN(len(u.tables))]
	col := fmt.Sprintf("c%d", ts)
	t.columns = append(t.columns, col)
	for id, cells := range t.rows {
		t.rows[id] = append(cells, cell{col, codec.Null()})
	}
	ev := codec.Event{Kind: codec.DDLEvent, DDL: codec.DDL{
		StartTs: ts - 1, CommitTs: ts, Table: t.tableName(), Type: codec.ActionAddColumn,
		Query:  fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s INTEGER", t.name, col),
		Tables: []codec.DDLTable{{TableName: t.tableName(), Role: codec.RoleAffected}},
	}}
	u.ddls++
	u.history[t.span] = append(u.history[t.span], ev)
	return t.span, ev
}

// since returns a span's events with commit ts above ts: what a span's new
// owner writes again after a failover.
func (u *upstream) since(span meta.SpanID, ts uint64) []codec.Event {
	h := u.history[span]
	i, _ := slices.BinarySearchFunc(h, ts+1, func(ev codec.Event, ts uint64) int {
		switch c := ev.CommitTs(); {
		case c < ts:
			return -1
		case c > ts:
			return 1
		}
		return 0
	})
	return h[i:]
}
