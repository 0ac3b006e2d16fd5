package codec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"unsafe"
)

// tableStream makes the kind of stream a Decoder is for: row events of a few
// tables, each with its own columns, interleaved, with now and then a DDL, a
// table whose columns change, or a fully random event.
type tableStream struct {
	g      *gen
	tables []Event // a template row of each table
}

func newTableStream(seed uint64, tables int) *tableStream {
	s := &tableStream{g: newGen(seed)}
	for range tables {
		s.tables = append(s.tables, s.newTable())
	}
	return s
}

func (s *tableStream) newTable() Event {
	g := s.g
	n := g.r.IntN(12)
	return Event{Kind: RowEvent, Row: RowChange{Table: g.table(), Columns: g.columns(n)}}
}

func (s *tableStream) next() *Event {
	g := s.g
	switch g.r.IntN(20) {
	case 0:
		return g.event()
	case 1:
		// The table's columns change (a DDL altered it).
		s.tables[g.r.IntN(len(s.tables))] = s.newTable()
	}
	t := &s.tables[g.r.IntN(len(s.tables))]
	ev := &Event{Kind: RowEvent, Row: t.Row}
	ev.Row.StartTs = g.u64()
	ev.Row.CommitTs = ev.Row.StartTs + uint64(g.r.IntN(1000))
	ev.Row.Table.PhysicalID = g.i64()
	fresh := func(cols []Column) []Column {
		out := make([]Column, len(cols))
		for i, c := range cols {
			k := c.Value.Kind()
			if g.r.IntN(4) == 0 {
				// NULL now and then, or another kind: the tag changes.
				k = Kind(g.r.IntN(int(maxKind) + 1))
			}
			c.Value = g.value(k)
			out[i] = c
		}
		return out
	}
	switch g.r.IntN(3) {
	case 0:
		ev.Row.Columns = fresh(t.Row.Columns)
	case 1:
		ev.Row.Columns, ev.Row.PreColumns = nil, fresh(t.Row.Columns)
	case 2:
		ev.Row.Columns, ev.Row.PreColumns = fresh(t.Row.Columns), fresh(t.Row.Columns)
	}
	return ev
}

// sameResult fails t unless decoding src with DecodeEvent and with the
// Decoder into into gives the same event or the same error, and unless the
// Decoder's Check gives that verdict, error and all, and the event's kind
// and commit ts.
func sameResult(t *testing.T, d *Decoder, src []byte, into *Event) {
	t.Helper()
	var want Event
	wantErr := DecodeEvent(src, &want)
	if sameErr(t, "Decoder", wantErr, d.Decode(src, into)) && !into.Equal(&want) {
		t.Fatalf("events differ:\nDecodeEvent %s\nDecoder     %s", describe(&want), describe(into))
	}
	kind, ts, checkErr := d.Check(src)
	if sameErr(t, "Check", wantErr, checkErr) && (kind != want.Kind || ts != want.CommitTs()) {
		t.Fatalf("Check says %v at %d, DecodeEvent %v at %d", kind, ts, want.Kind, want.CommitTs())
	}
}

// sameErr fails t unless got is DecodeEvent's error want (by its text), and
// reports whether both are nil.
func sameErr(t *testing.T, who string, want, got error) bool {
	t.Helper()
	switch {
	case (want == nil) != (got == nil):
		t.Fatalf("DecodeEvent: %v; %s: %v", want, who, got)
	case want != nil && want.Error() != got.Error():
		t.Fatalf("errors differ:\nDecodeEvent %v\n%-11s %v", want, who, got)
	}
	return want == nil
}

// TestDecoderMatchesDecodeEvent: a Decoder decodes exactly what DecodeEvent
// does, valid or not, whatever it remembers from earlier events, into events
// that are reused.
func TestDecoderMatchesDecodeEvent(t *testing.T) {
	for _, alias := range []bool{false, true} {
		t.Run(fmt.Sprintf("alias=%v", alias), func(t *testing.T) {
			s := newTableStream(21, 5)
			d := &Decoder{Alias: alias}
			var pool [3]Event
			for i := range 5000 {
				src := AppendEvent(nil, s.next())
				into := &pool[i%len(pool)]
				sameResult(t, d, src, into)
				if i%3 == 0 {
					// Damage it: cut it, or change a byte.
					bad := append([]byte(nil), src...)
					if i%2 == 0 {
						bad = bad[:s.g.r.IntN(len(bad))]
					} else {
						bad[headerLen+s.g.r.IntN(len(bad)-headerLen)] ^= byte(1 + s.g.r.IntN(255))
					}
					sameResult(t, d, bad, into)
				}
			}
		})
	}
}

// TestDecoderAlias: with Alias the byte payloads point into the input,
// without they do not.
func TestDecoderAlias(t *testing.T) {
	ev := benchRow()
	src := AppendEvent(nil, ev)
	inSrc := func(b []byte) bool {
		p, lo := uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(unsafe.Pointer(&src[0]))
		return p >= lo && p < lo+uintptr(len(src))
	}
	for _, alias := range []bool{false, true} {
		d := &Decoder{Alias: alias}
		var into Event
		for range 2 { // the second time from what d remembers
			if err := d.Decode(src, &into); err != nil {
				t.Fatal(err)
			}
			if !into.Equal(ev) {
				t.Fatalf("alias=%v: got %s", alias, describe(&into))
			}
			for _, c := range into.Row.Columns {
				if b := c.Value.Bytes(); len(b) > 0 && inSrc(b) != alias {
					t.Fatalf("alias=%v: column %s's bytes in the input: %v", alias, c.Name, inSrc(b))
				}
			}
		}
	}
}

// TestDecodeInterleavedTablesAllocatesNothing: events of a few tables,
// interleaved, decode without allocating, with a Decoder into a pool of
// events and with DecodeEvent into one event.
func TestDecodeInterleavedTablesAllocatesNothing(t *testing.T) {
	var srcs [][]byte
	for i := range 8 {
		ev := benchRow()
		ev.Row.Table.Name = fmt.Sprintf("orders_%d", i%4)
		ev.Row.Table.PhysicalID = int64(100 + i%4)
		ev.Row.Columns[0].Value = IntValue(int64(i))
		srcs = append(srcs, AppendEvent(nil, ev))
	}
	var d Decoder
	pool := make([]Event, 5)
	var one Event
	i := 0
	decode := func() {
		src := srcs[i%len(srcs)]
		if err := d.Decode(src, &pool[i%len(pool)]); err != nil {
			t.Fatal(err)
		}
		if err := DecodeEvent(src, &one); err != nil {
			t.Fatal(err)
		}
		i++
	}
	for range 100 {
		decode()
	}
	if a := testing.AllocsPerRun(200, decode); a != 0 {
		t.Fatalf("%v allocations per event", a)
	}
}

// TestDecoderForgets: a Decoder remembers a bounded number of tables.
func TestDecoderForgets(t *testing.T) {
	var d Decoder
	var into Event
	ev := benchRow()
	for i := range maxDecoderTables + 10 {
		ev.Row.Table.Name = fmt.Sprintf("t%d", i)
		if err := d.Decode(AppendEvent(nil, ev), &into); err != nil {
			t.Fatal(err)
		}
		if !into.Equal(ev) {
			t.Fatalf("got %s", describe(&into))
		}
	}
	if n := len(d.tables); n > maxDecoderTables {
		t.Fatalf("remembers %d tables", n)
	}
}

// BenchmarkDecoder decodes a stream of events of several tables into a pool
// of reused events, as the reader does: with DecodeEvent, and with a Decoder
// with and without Alias.
func BenchmarkDecoder(b *testing.B) {
	const pool = 1024
	for _, tables := range []int{1, 8} {
		var srcs [][]byte
		for i := range 4096 {
			ev := benchRow()
			ev.Row.Table.Name = fmt.Sprintf("orders_%d", i%tables)
			ev.Row.Columns[0].Value = IntValue(int64(i))
			srcs = append(srcs, AppendEvent(nil, ev))
		}
		for _, mode := range []string{"DecodeEvent", "Decoder", "Decoder-alias"} {
			b.Run(fmt.Sprintf("tables=%d/api=%s", tables, mode), func(b *testing.B) {
				evs := make([]Event, pool)
				d := &Decoder{Alias: mode == "Decoder-alias"}
				b.SetBytes(int64(len(srcs[0])))
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					src, ev := srcs[i%len(srcs)], &evs[i%pool]
					var err error
					if mode == "DecodeEvent" {
						err = DecodeEvent(src, ev)
					} else {
						err = d.Decode(src, ev)
					}
					if err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}

// TestUvarint: the decoder's varints read what encoding/binary writes, with
// or without bytes after them, and the over-long forms the format tolerates,
// the same from the word-at-a-time path and the byte loop.
func TestUvarint(t *testing.T) {
	var vals []uint64
	for b := range 64 {
		v := uint64(1) << b
		vals = append(vals, v-1, v, v+1, v|v>>1|0x5555555555555555&(v-1))
	}
	vals = append(vals, math.MaxUint64)
	for _, v := range vals {
		enc := binary.AppendUvarint(nil, v)
		for _, tail := range [][]byte{nil, {0x80}, {1, 2, 3, 4, 5, 6, 7, 8, 9}} {
			in := append(append([]byte(nil), enc...), tail...)
			d := decoder{b: in}
			if got := d.uvarint(fValue); got != v || d.err != nil || d.off != len(enc) {
				t.Fatalf("%#x with %d bytes after: got %#x at %d, %v", v, len(tail), got, d.off, d.err)
			}
		}
	}
	// Over-long: 5 as 0x85 0x80 0x00, then padding.
	d := decoder{b: []byte{0x85, 0x80, 0x00, 9, 9, 9, 9, 9, 9}}
	if got := d.uvarint(fValue); got != 5 || d.off != 3 {
		t.Fatalf("over-long 5: got %d at %d", got, d.off)
	}
	// Eleven bytes overflow, and a varint cut short is truncated.
	for _, in := range [][]byte{bytes.Repeat([]byte{0xff}, 11), {0x80, 0x80}} {
		d := decoder{b: in}
		d.uvarint(fValue)
		if d.err == nil {
			t.Fatalf("%x: no error", in)
		}
	}
}
