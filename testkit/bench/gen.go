package bench

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/redokit/redokit/codec"
)

// TsBase is the first commit ts of a benchmark log (TSO-like magnitude).
const TsBase = uint64(450_000_000_000_000_000)

// The workload: row changes of a few OLTP-like tables, each row an insert
// whose encoded size (codec.AppendEvent) is close to the cell's row size, its
// padding made of words so that lz4 finds what it finds in real text columns.
// A generator is deterministic for a seed, so every backend, every repetition
// and every baseline sees the same bytes.

const (
	Spans    = 8  // spans (tables) per writer
	TxnRows  = 16 // rows per commit ts (one transaction) in the row mix
	DDLRows  = 4  // rows per commit ts in the DDL-heavy mix, then one DDL
	PoolSize = 1024
)

var genWords = strings.Fields(`order shipped pending customer account balance invoice
payment refund credit debit warehouse berlin paris tokyo lisbon oslo express standard
priority parcel returned delivered cancelled gift wrap fragile glass second attempt call
on arrival leave at door signature required north south east west alpha beta gamma delta
premium basic member since discount coupon summer winter sale item quantity price total`)

// Gen makes the events of one writer. Its pool of rows is built once; next
// stamps the commit ts, the table and a fresh id on a batch taken from it.
type Gen struct {
	rng     *rand.Rand
	mix     string // "rows" or "ddl"
	pool    []codec.Event
	batch   []codec.Event
	nextID  int64
	poolPos int
	ddls    int64
}

func NewGen(seed uint64, rowSize int, mix string) *Gen {
	g := &Gen{rng: rand.New(rand.NewPCG(seed, 0x5eed)), mix: mix}
	for range PoolSize {
		g.pool = append(g.pool, g.makeRow(rowSize))
	}
	g.nextID = int64(seed) << 40
	return g
}

func Table(span int) codec.TableName {
	return codec.TableName{Schema: "bench", Name: fmt.Sprintf("t%02d", span), PhysicalID: int64(100 + span)}
}

// makeRow builds one insert padded to about size encoded bytes.
func (g *Gen) makeRow(size int) codec.Event {
	r := g.rng
	ev := codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{
		StartTs: 1, CommitTs: 2, Table: Table(0),
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

// Next returns the events of one transaction of span at commit ts: rows,
// and in the DDL mix a DDL after them. The events are valid until the next
// call (the caller's Write encodes them).
func (g *Gen) Next(span int, ts uint64) []codec.Event {
	n := TxnRows
	if g.mix == "ddl" {
		n = DDLRows
	}
	g.batch = g.batch[:0]
	t := Table(span)
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

// TxnPool is one writer's transactions, generated before anything is timed
// and replayed in a loop by the writer and read cells (the pipeline, peers
// and apply cells still use gen directly). Each transaction has rows of its
// own (no two share their Columns), made by the same makeRow as gen's, so
// the bytes look alike; a pool holds about poolTargetBytes of encoded
// events, far more than lz4's 64 KiB window and the writer's 256 KiB
// blocks. Replaying stamps the commit ts (and start ts) and a fresh id on
// events that already exist: a few stores per event.
type TxnPool struct {
	txns   [][]codec.Event
	size   []int // encoded bytes of each transaction (codec.AppendEvent)
	nextID int64
}

const (
	poolTargetBytes = 4 << 20
	poolMinTxns     = 128
	poolMaxTxns     = 2048
)

// NewTxnPool makes the pool of the writer whose spans start at spanBase:
// transaction j belongs to span spanBase + j%Spans (the pool's length is
// a multiple of Spans, so transaction k of the replay belongs to span
// spanBase + k%Spans). seed makes it deterministic.
func NewTxnPool(seed uint64, rowSize int, mix string, spanBase int) *TxnPool {
	g := &Gen{rng: rand.New(rand.NewPCG(seed, 0x5eed)), mix: mix}
	per := TxnRows
	if mix == "ddl" {
		per = DDLRows
	}
	n := poolTargetBytes / max(per*rowSize, 1)
	n = min(max(n, poolMinTxns), poolMaxTxns) / Spans * Spans
	p := &TxnPool{nextID: int64(seed) << 40}
	var enc []byte
	for j := range n {
		t := Table(spanBase + j%Spans)
		txn := make([]codec.Event, 0, per+1)
		for range per {
			ev := g.makeRow(rowSize)
			ev.Row.Table = t
			txn = append(txn, ev)
		}
		if mix == "ddl" {
			txn = append(txn, codec.Event{Kind: codec.DDLEvent, DDL: codec.DDL{
				Table: t, Type: codec.ActionAddIndex,
				Query:  fmt.Sprintf("ALTER TABLE `bench`.`%s` ADD INDEX `i%d` (`acct`)", t.Name, j+1),
				Tables: []codec.DDLTable{{TableName: t, Role: codec.RoleAffected}},
			}})
		}
		p.txns = append(p.txns, txn)
		enc = enc[:0]
		for _, ev := range p.stamp(txn, TsBase) {
			enc = codec.AppendEvent(enc, &ev)
		}
		p.size = append(p.size, len(enc))
	}
	p.nextID = int64(seed) << 40
	return p
}

// Txn returns transaction k of the replay stamped with commit ts ts and
// fresh ids. The events are valid until the pool returns the same
// transaction again (the caller's Write encodes them before that).
func (p *TxnPool) Txn(k, ts uint64) []codec.Event {
	return p.stamp(p.txns[k%uint64(len(p.txns))], ts)
}

// Len is the number of transactions in the pool.
func (p *TxnPool) Len() int { return len(p.txns) }

// Bytes is the approximate encoded size of transaction k.
func (p *TxnPool) Bytes(k uint64) int { return p.size[k%uint64(len(p.size))] }

func (p *TxnPool) stamp(txn []codec.Event, ts uint64) []codec.Event {
	for i := range txn {
		ev := &txn[i]
		if ev.Kind == codec.RowEvent {
			ev.Row.CommitTs, ev.Row.StartTs = ts, ts-1
			ev.Row.Columns[0].Value = codec.IntValue(p.nextID)
			p.nextID++
		} else {
			ev.DDL.CommitTs, ev.DDL.StartTs = ts, ts-1
		}
	}
	return txn
}

// Payload replays the pool, transaction after transaction, and encodes it
// until about n bytes: the bytes a baseline moves. It returns the bytes,
// the offsets where each event ends and the number of row events.
func (p *TxnPool) Payload(n int64) (buf []byte, ends []int, rows int64) {
	buf = make([]byte, 0, n+64<<10)
	ts := uint64(1000)
	for k := uint64(0); int64(len(buf)) < n; k++ {
		ts++
		for _, ev := range p.Txn(k, ts) {
			buf = codec.AppendEvent(buf, &ev)
			ends = append(ends, len(buf))
			if ev.Kind == codec.RowEvent {
				rows++
			}
		}
	}
	return buf, ends, rows
}
