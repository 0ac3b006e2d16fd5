package torture

import (
	"fmt"

	"github.com/redokit/redokit/codec"
)

// BaseTs is the start ts of every torture log: its first checkpoint.
const BaseTs = 1000

// Gen is the upstream: the events of a span at a commit ts, a pure function
// of the seed.
type Gen struct{ Seed uint64 }

func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func (g Gen) hash(span, ts, k uint64) uint64 {
	return mix(mix(mix(g.Seed^0x5eed)+span) + ts*8 + k)
}

// Events returns the events of span at ts, in the order the span writes
// them: rows, then at most one DDL.
func (g Gen) Events(span, ts uint64) []codec.Event {
	if ts <= BaseTs {
		return nil
	}
	h := g.hash(span, ts, 0)
	rows := []int{0, 1, 1, 2, 3, 0, 1, 2}[h%8]
	var out []codec.Event
	table := codec.TableName{Schema: "torture", Name: fmt.Sprintf("t%d", span), PhysicalID: int64(span) + 1}
	for k := range rows {
		hv := g.hash(span, ts, uint64(k)+1)
		v := make([]byte, 16+hv%120)
		for i := range v {
			v[i] = 'a' + byte(mix(hv+uint64(i))%26)
		}
		out = append(out, codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{
			StartTs: ts - 1, CommitTs: ts, Table: table,
			Columns: []codec.Column{
				{Name: "id", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey | codec.FlagHandleKey, Value: codec.IntValue(int64(span<<40 | ts<<4 | uint64(k)))},
				{Name: "v", Type: codec.TypeBlob, Value: codec.BytesValue(v)},
			},
		}})
	}
	if (h>>8)%19 == 0 {
		out = append(out, codec.Event{Kind: codec.DDLEvent, DDL: codec.DDL{
			StartTs: ts - 1, CommitTs: ts, Type: codec.ActionAddColumn, Table: table,
			Query: fmt.Sprintf("ALTER TABLE t%d ADD COLUMN c%d INT", span, ts),
			// Every physical table the DDL touches (docs/FORMAT.md, DDL
			// body): the altered one, which exists before and after.
			Tables: []codec.DDLTable{{TableName: table, Role: codec.RoleAffected}},
		}})
	}
	return out
}

// eventID names one upstream event in a violation's evidence.
type eventID struct {
	span, ts uint64
	k        int // position at its ts; the DDL is after the rows
	ddl      bool
}

func (e eventID) String() string {
	if e.ddl {
		return fmt.Sprintf("span %d ts %d DDL", e.span, e.ts)
	}
	return fmt.Sprintf("span %d ts %d row %d", e.span, e.ts, e.k)
}

// index maps the encodings of the upstream's events of some spans in a ts
// range to their IDs.
type index map[string]eventID

// expected returns the index of every event of spans in (lo, hi].
func (g Gen) expected(spans []uint64, lo, hi uint64) index {
	ix := index{}
	for _, s := range spans {
		for ts := lo + 1; ts <= hi; ts++ {
			for k, ev := range g.Events(s, ts) {
				ix[string(codec.AppendEvent(nil, &ev))] = eventID{span: s, ts: ts, k: k, ddl: ev.IsDDL()}
			}
		}
	}
	return ix
}
