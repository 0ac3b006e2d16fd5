package codec

import (
	"testing"
)

// benchRow is a realistic row change: an insert into a ten-column table of
// mixed types, as a CDC system of an OLTP database logs most.
func benchRow() *Event {
	const utf8 = "utf8mb4"
	const coll = "utf8mb4_bin" // TiDB's default
	cols := []Column{
		{Name: "id", Type: TypeLonglong, Flags: FlagPrimaryKey | FlagHandleKey, Value: IntValue(4_611_686_018_427_387)},
		{Name: "account_id", Type: TypeLonglong, Flags: FlagUnsigned | FlagMultipleKey, Value: UintValue(982_451_653)},
		{Name: "customer_name", Type: TypeVarchar, Flags: FlagNullable, Charset: utf8, Collation: coll, Value: StringValue("Alice Johnson-Smith")},
		{Name: "email", Type: TypeVarchar, Flags: FlagUniqueKey, Charset: utf8, Collation: coll, Value: StringValue("alice.j@example.com")},
		{Name: "balance", Type: TypeNewDecimal, Flags: FlagBinary, Value: DecimalValue("12345.67")},
		{Name: "score", Type: TypeDouble, Flags: FlagNullable, Value: Float64Value(98.625)},
		{Name: "created_at", Type: TypeDatetime, Flags: FlagBinary, Value: DatetimeValue(DateTime{Year: 2025, Month: 11, Day: 30, Hour: 14, Minute: 5, Second: 9, Microsecond: 123456, Fsp: 6})},
		{Name: "status", Type: TypeEnum, Charset: utf8, Collation: coll, Value: EnumValue(2)},
		{Name: "avatar_hash", Type: TypeString, Flags: FlagBinary | FlagNullable, Charset: "binary", Collation: "binary", Value: BytesValue([]byte("\x9f\x86\xd0\x81\x88\x4c\x7d\x65\x9a\x2f\xea\xa0\xc5\x5a\xd0\x15\xa3\xbf\x4f\x1b"))},
		{Name: "notes", Type: TypeBlob, Flags: FlagNullable, Charset: utf8, Collation: coll, Value: Null()},
	}
	return &Event{Kind: RowEvent, Row: RowChange{
		StartTs:  463_523_127_618_519_041,
		CommitTs: 463_523_127_631_626_242,
		Table:    TableName{Schema: "shop", Name: "customers", PhysicalID: 112},
		Columns:  cols,
	}}
}

func TestBenchRowSize(t *testing.T) {
	t.Logf("bench row: %d bytes", len(AppendEvent(nil, benchRow())))
}

// BenchmarkEncode and BenchmarkDecode encode into a reused buffer and decode
// into a reused event; ns/op is per event. The comparison with TiCDC's msgp
// encoding of the same row is in the benchmarks module
// (benchmarks/internal/msgpbench), so that msgp stays out of this module.

func BenchmarkEncode(b *testing.B) {
	b.Run("codec=redokit", func(b *testing.B) {
		ev := benchRow()
		buf := AppendEvent(nil, ev)
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		for b.Loop() {
			buf = AppendEvent(buf[:0], ev)
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	b.Run("codec=redokit", func(b *testing.B) {
		enc := AppendEvent(nil, benchRow())
		var ev Event
		b.SetBytes(int64(len(enc)))
		b.ReportAllocs()
		for b.Loop() {
			if err := DecodeEvent(enc, &ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDecodeFresh decodes into a new Event each time, as a caller that
// keeps every event would (compare with msgp's decode, which allocates the
// same way).
func BenchmarkDecodeFresh(b *testing.B) {
	enc := AppendEvent(nil, benchRow())
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		var ev Event
		if err := DecodeEvent(enc, &ev); err != nil {
			b.Fatal(err)
		}
	}
}
