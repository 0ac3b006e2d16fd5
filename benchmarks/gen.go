package main

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/redokit/redokit/codec"
)

// The workload: row changes of a few OLTP-like tables, each row an insert
// whose encoded size (codec.AppendEvent) is close to the cell's row size, its
// padding made of words so that lz4 finds what it finds in real text columns.
// A generator is deterministic for a seed, so every backend, every repetition
// and every baseline sees the same bytes.

const (
	genSpans    = 8  // spans (tables) per writer
	genTxnRows  = 16 // rows per commit ts (one transaction) in the row mix
	genDDLRows  = 4  // rows per commit ts in the DDL-heavy mix, then one DDL
	genPoolSize = 1024
)

var genWords = strings.Fields(`order shipped pending customer account balance invoice
payment refund credit debit warehouse berlin paris tokyo lisbon oslo express standard
priority parcel returned delivered cancelled gift wrap fragile glass second attempt call
on arrival leave at door signature required north south east west alpha beta gamma delta
premium basic member since discount coupon summer winter sale item quantity price total`)

// gen makes the events of one writer. Its pool of rows is built once; next
// stamps the commit ts, the table and a fresh id on a batch taken from it.
type gen struct {
	rng     *rand.Rand
	mix     string // "rows" or "ddl"
	pool    []codec.Event
	batch   []codec.Event
	nextID  int64
	poolPos int
	ddls    int64
}

func newGen(seed uint64, rowSize int, mix string) *gen {
	g := &gen{rng: rand.New(rand.NewPCG(seed, 0x5eed)), mix: mix}
	for range genPoolSize {
		g.pool = append(g.pool, g.makeRow(rowSize))
	}
	g.nextID = int64(seed) << 40
	return g
}

func genTable(span int) codec.TableName {
	return codec.TableName{Schema: "bench", Name: fmt.Sprintf("t%02d", span), PhysicalID: int64(100 + span)}
}

// makeRow builds one insert padded to about size encoded bytes.
func (g *gen) makeRow(size int) codec.Event {
	r := g.rng
	ev := codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{
		StartTs: 1, CommitTs: 2, Table: genTable(0),
		Columns: []codec.Column{
			{Name: "id", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey | codec.FlagHandleKey, Value: codec.IntValue(0)},
			{Name: "acct", Type: codec.TypeLonglong, Flags: codec.FlagUnsigned, Value: codec.UintValue(uint64(r.IntN(1_000_000)))},
			{Name: "status", Type: codec.TypeTiny, Value: codec.IntValue(int64(r.IntN(5)))},
			{Name: "created", Type: codec.TypeDatetime, Value: codec.DatetimeValue(codec.DateTime{Year: 2026, Month: uint8(1 + r.IntN(12)), Day: uint8(1 + r.IntN(28)), Hour: uint8(r.IntN(24)), Minute: uint8(r.IntN(60)), Second: uint8(r.IntN(60))})},
			{Name: "note", Type: codec.TypeVarchar, Value: codec.StringValue("")},
		},
	}}
	base := len(codec.AppendEvent(nil, &ev))
	var sb strings.Builder
	for sb.Len() < size-base-2 {
		if r.IntN(6) == 0 {
			fmt.Fprintf(&sb, "%d ", r.IntN(100000))
		} else {
			sb.WriteString(genWords[r.IntN(len(genWords))])
			sb.WriteByte(' ')
		}
	}
	pad := sb.String()
	if n := size - base - 2; n > 0 && len(pad) > n {
		pad = pad[:n]
	}
	ev.Row.Columns[4].Value = codec.StringValue(pad)
	return ev
}

// next returns the events of one transaction of span at commit ts: rows,
// and in the DDL mix a DDL after them. The events are valid until the next
// call (the caller's Write encodes them).
func (g *gen) next(span int, ts uint64) []codec.Event {
	n := genTxnRows
	if g.mix == "ddl" {
		n = genDDLRows
	}
	g.batch = g.batch[:0]
	t := genTable(span)
	for range n {
		ev := g.pool[g.poolPos]
		g.poolPos = (g.poolPos + 1) % len(g.pool)
		// ev shares its Columns with the pool: the id is set afresh on every
		// use, and the caller's Write encodes before the next use.
		ev.Row.Table, ev.Row.CommitTs, ev.Row.StartTs = t, ts, ts-1
		ev.Row.Columns[0].Value = codec.IntValue(g.nextID)
		g.nextID++
		g.batch = append(g.batch, ev)
	}
	if g.mix == "ddl" {
		g.ddls++
		g.batch = append(g.batch, codec.Event{Kind: codec.DDLEvent, DDL: codec.DDL{
			StartTs: ts - 1, CommitTs: ts, Table: t, Type: codec.ActionAddIndex,
			Query:  fmt.Sprintf("ALTER TABLE `bench`.`%s` ADD INDEX `i%d` (`acct`)", t.Name, g.ddls),
			Tables: []codec.DDLTable{{TableName: t, Role: codec.RoleAffected}},
		}})
	}
	return g.batch
}

// payload encodes the generator's events, transaction after transaction,
// until about n bytes: the bytes a baseline moves. It returns the bytes, the
// offsets where each event ends and the number of row events.
func (g *gen) payload(n int64) (buf []byte, ends []int, rows int64) {
	buf = make([]byte, 0, n+64<<10)
	ts := uint64(1000)
	for span := 0; int64(len(buf)) < n; span = (span + 1) % genSpans {
		ts++
		for i, ev := range g.next(span, ts) {
			buf = codec.AppendEvent(buf, &ev)
			ends = append(ends, len(buf))
			if g.batch[i].Kind == codec.RowEvent {
				rows++
			}
		}
	}
	return buf, ends, rows
}
