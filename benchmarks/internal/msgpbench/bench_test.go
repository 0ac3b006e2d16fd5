package msgpbench

import (
	"bytes"
	"testing"

	"github.com/redokit/redokit/codec"
)

// benchRow is a realistic row change: an insert into a ten-column table of
// mixed types, as a CDC system of an OLTP database logs most. It is the row
// of codec's own benchmarks (codec/bench_test.go), so the figures compare.
func benchRow() *codec.Event {
	const utf8 = "utf8mb4"
	const coll = "utf8mb4_bin" // TiDB's default
	cols := []codec.Column{
		{Name: "id", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey | codec.FlagHandleKey, Value: codec.IntValue(4_611_686_018_427_387)},
		{Name: "account_id", Type: codec.TypeLonglong, Flags: codec.FlagUnsigned | codec.FlagMultipleKey, Value: codec.UintValue(982_451_653)},
		{Name: "customer_name", Type: codec.TypeVarchar, Flags: codec.FlagNullable, Charset: utf8, Collation: coll, Value: codec.StringValue("Alice Johnson-Smith")},
		{Name: "email", Type: codec.TypeVarchar, Flags: codec.FlagUniqueKey, Charset: utf8, Collation: coll, Value: codec.StringValue("alice.j@example.com")},
		{Name: "balance", Type: codec.TypeNewDecimal, Flags: codec.FlagBinary, Value: codec.DecimalValue("12345.67")},
		{Name: "score", Type: codec.TypeDouble, Flags: codec.FlagNullable, Value: codec.Float64Value(98.625)},
		{Name: "created_at", Type: codec.TypeDatetime, Flags: codec.FlagBinary, Value: codec.DatetimeValue(codec.DateTime{Year: 2025, Month: 11, Day: 30, Hour: 14, Minute: 5, Second: 9, Microsecond: 123456, Fsp: 6})},
		{Name: "status", Type: codec.TypeEnum, Charset: utf8, Collation: coll, Value: codec.EnumValue(2)},
		{Name: "avatar_hash", Type: codec.TypeString, Flags: codec.FlagBinary | codec.FlagNullable, Charset: "binary", Collation: "binary", Value: codec.BytesValue([]byte("\x9f\x86\xd0\x81\x88\x4c\x7d\x65\x9a\x2f\xea\xa0\xc5\x5a\xd0\x15\xa3\xbf\x4f\x1b"))},
		{Name: "notes", Type: codec.TypeBlob, Flags: codec.FlagNullable, Charset: utf8, Collation: coll, Value: codec.Null()},
	}
	return &codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{
		StartTs:  463_523_127_618_519_041,
		CommitTs: 463_523_127_631_626_242,
		Table:    codec.TableName{Schema: "shop", Name: "customers", PhysicalID: 112},
		Columns:  cols,
	}}
}

func toMsgp(ev *codec.Event) *RedoLog { return FromEvent(ev) }

var msgpPrefix = Prefix

func msgpEncode(dst []byte, rl *RedoLog) []byte { return Append(dst, rl) }

func TestMsgpMirrorRoundTrips(t *testing.T) {
	rl := toMsgp(benchRow())
	enc := msgpEncode(nil, rl)
	var back RedoLog
	if rest, err := back.UnmarshalMsg(enc[len(msgpPrefix):]); err != nil || len(rest) != 0 {
		t.Fatalf("msgp round trip: %v, %d bytes left", err, len(rest))
	}
	if again := msgpEncode(nil, &back); !bytes.Equal(again, enc) {
		t.Fatalf("msgp re-encoding differs")
	}
	t.Logf("bench row: redokit %d bytes, msgp %d bytes", len(codec.AppendEvent(nil, benchRow())), len(enc))
}

// The benchmarks compare like with like: encoding a ready record into a
// reused buffer, and decoding into a reused record (which is kinder to msgp
// than TiCDC, which decodes into a new RedoLog every time). Compare the two
// codecs with `benchstat -col /codec`; ns/op is per event, MB/s counts each
// codec's own encoded bytes.

func BenchmarkEncode(b *testing.B) {
	b.Run("codec=redokit", func(b *testing.B) {
		ev := benchRow()
		buf := codec.AppendEvent(nil, ev)
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		for b.Loop() {
			buf = codec.AppendEvent(buf[:0], ev)
		}
	})
	b.Run("codec=msgp", func(b *testing.B) {
		rl := toMsgp(benchRow())
		buf := msgpEncode(nil, rl)
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		for b.Loop() {
			buf = msgpEncode(buf[:0], rl)
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	b.Run("codec=redokit", func(b *testing.B) {
		enc := codec.AppendEvent(nil, benchRow())
		var ev codec.Event
		b.SetBytes(int64(len(enc)))
		b.ReportAllocs()
		for b.Loop() {
			if err := codec.DecodeEvent(enc, &ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec=msgp", func(b *testing.B) {
		enc := msgpEncode(nil, toMsgp(benchRow()))
		var rl RedoLog
		b.SetBytes(int64(len(enc)))
		b.ReportAllocs()
		for b.Loop() {
			if !bytes.HasPrefix(enc, msgpPrefix) {
				b.Fatal("no prefix")
			}
			if _, err := rl.UnmarshalMsg(enc[len(msgpPrefix):]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
