package codec

import (
	"bytes"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ from the current encoder")

// goldenEvents are checked byte for byte against testdata/NAME.bin, so that
// any change to the wire format is deliberate: run `go test ./codec -update`
// and review the diff (and docs/FORMAT.md, and Version).
var goldenEvents = map[string]func() *Event{
	// The worked example of docs/FORMAT.md.
	"insert_small": func() *Event {
		return &Event{Kind: RowEvent, Row: RowChange{
			StartTs: 1000, CommitTs: 1002,
			Table: TableName{Schema: "db", Name: "t", PhysicalID: 42},
			Columns: []Column{
				{Name: "id", Type: TypeLong, Flags: FlagPrimaryKey | FlagHandleKey, Value: IntValue(-3)},
				{Name: "v", Type: TypeVarchar, Flags: FlagNullable, Charset: "utf8mb4", Value: StringValue("hi")},
			},
		}}
	},
	"row_all_kinds": func() *Event {
		dt := DateTime{Year: 2024, Month: 2, Day: 29, Hour: 23, Minute: 59, Second: 58, Microsecond: 123456, Fsp: 6}
		return &Event{Kind: RowEvent, Row: RowChange{
			StartTs: 463_523_127_618_519_041, CommitTs: 463_523_127_631_626_242,
			Table: TableName{Schema: "shop", Name: "orders_p2024", PhysicalID: 1_099_511_627_776, IsPartition: true},
			Columns: []Column{
				{Name: "c_null", Type: TypeLong, Flags: FlagNullable, Value: Null()},
				{Name: "c_int", Type: TypeLonglong, Flags: FlagPrimaryKey | FlagHandleKey, Value: IntValue(math.MinInt64)},
				{Name: "c_uint", Type: TypeLonglong, Flags: FlagUnsigned, Value: UintValue(math.MaxUint64)},
				{Name: "c_float", Type: TypeFloat, Value: Float32Value(math.Float32frombits(0x7fc00001))},
				{Name: "c_double", Type: TypeDouble, Value: Float64Value(math.Copysign(0, -1))},
				{Name: "c_decimal", Type: TypeNewDecimal, Flags: FlagBinary, Value: DecimalValue("-12345.6700")},
				{Name: "c_string", Type: TypeVarchar, Flags: FlagUniqueKey, Charset: "utf8mb4", Collation: "utf8mb4_bin", Value: StringValue("héllo, 世界")},
				{Name: "c_bytes", Type: TypeBlob, Flags: FlagBinary, Charset: "binary", Collation: "binary", Value: BytesValue([]byte{0x00, 0xff, 0x80})},
				{Name: "c_empty_bytes", Type: TypeVarchar, Flags: FlagBinary | FlagNullable, Value: BytesValue([]byte{})},
				{Name: "c_date", Type: TypeDate, Value: DateValue(dt)},
				{Name: "c_datetime", Type: TypeDatetime, Value: DatetimeValue(dt)},
				{Name: "c_timestamp", Type: TypeTimestamp, Value: TimestampValue(DateTime{Year: 1970, Month: 1, Day: 1, Second: 1})},
				{Name: "c_time", Type: TypeDuration, Value: DurationValue(Duration{Micros: -(838*3600 + 59*60 + 59) * 1e6, Fsp: 0})},
				{Name: "c_year", Type: TypeYear, Flags: FlagUnsigned, Value: YearValue(2155)},
				{Name: "c_bit", Type: TypeBit, Flags: FlagUnsigned, Value: BitValue(0b1011)},
				{Name: "c_enum", Type: TypeEnum, Charset: "utf8mb4", Collation: "utf8mb4_bin", Value: EnumValue(3)},
				{Name: "c_set", Type: TypeSet, Charset: "utf8mb4", Collation: "utf8mb4_bin", Value: SetValue(0b101)},
				{Name: "c_json", Type: TypeJSON, Flags: FlagBinary, Value: JSONValue(`{"a":[1,"ü"]}`)},
				{Name: "c_generated_multiple", Type: TypeLong, Flags: FlagGenerated | FlagMultipleKey, Value: IntValue(7)},
			},
		}}
	},
	"delete": func() *Event {
		return &Event{Kind: RowEvent, Row: RowChange{
			StartTs: 463_523_200_000_000_000, CommitTs: 463_523_200_000_000_001,
			Table: TableName{Schema: "shop", Name: "customers", PhysicalID: 112},
			PreColumns: []Column{
				{Name: "id", Type: TypeLonglong, Flags: FlagPrimaryKey | FlagHandleKey, Value: IntValue(9)},
				{Name: "email", Type: TypeVarchar, Flags: FlagUniqueKey, Charset: "utf8mb4", Collation: "utf8mb4_bin", Value: StringValue("x@example.com")},
				{Name: "note", Type: TypeBlob, Flags: FlagNullable, Charset: "utf8mb4", Collation: "utf8mb4_bin", Value: Null()},
			},
		}}
	},
	"update": func() *Event {
		pre := []Column{
			{Name: "id", Type: TypeLonglong, Flags: FlagPrimaryKey | FlagHandleKey, Value: IntValue(9)},
			{Name: "balance", Type: TypeNewDecimal, Flags: FlagBinary, Value: DecimalValue("10.00")},
			{Name: "seen_at", Type: TypeTimestamp, Flags: FlagNullable, Value: Null()},
		}
		post := append([]Column(nil), pre...)
		post[1].Value = DecimalValue("7.50")
		post[2].Value = TimestampValue(DateTime{Year: 2025, Month: 12, Day: 2, Hour: 9, Minute: 30, Fsp: 0})
		return &Event{Kind: RowEvent, Row: RowChange{
			StartTs: 463_523_300_000_000_000, CommitTs: 463_523_300_000_000_000,
			Table:   TableName{Schema: "shop", Name: "customers", PhysicalID: 112},
			Columns: post, PreColumns: pre,
		}}
	},
	"ddl": func() *Event {
		return &Event{Kind: DDLEvent, DDL: DDL{
			StartTs: 463_523_400_000_000_000, CommitTs: 463_523_400_000_262_144,
			Table: TableName{Schema: "shop", Name: "customers", PhysicalID: 113},
			Type:  ActionTruncateTable,
			Query: "TRUNCATE TABLE `shop`.`customers`",
			Tables: []DDLTable{
				{TableName: TableName{Schema: "shop", Name: "customers", PhysicalID: 112}, Role: RoleDropped},
				{TableName: TableName{Schema: "shop", Name: "customers", PhysicalID: 113}, Role: RoleCreated},
			},
		}}
	},
}

func TestGolden(t *testing.T) {
	for name, mk := range goldenEvents {
		t.Run(name, func(t *testing.T) {
			ev := mk()
			path := filepath.Join("testdata", name+".bin")
			enc := AppendEvent(nil, ev)
			if *update {
				if err := os.WriteFile(path, enc, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run `go test ./codec -update` to create it)", err)
			}
			if !bytes.Equal(enc, want) {
				t.Fatalf("encoding of %s changed; if that is deliberate, run `go test ./codec -update`\nfile %x\nnow  %x", name, want, enc)
			}
			var got Event
			if err := DecodeEvent(want, &got); err != nil {
				t.Fatal(err)
			}
			if !got.Equal(ev) {
				t.Fatalf("decoding %s:\nwant %s\ngot  %s", path, describe(ev), describe(&got))
			}
		})
	}
}

// The worked example in docs/FORMAT.md shows these bytes; if this test fails
// the document is wrong too.
func TestWorkedExample(t *testing.T) {
	const want = "0101ea03000000000000" + // version, kind, commit ts 1002 (0x3ea)
		"02" + // start ts = 1002 - 2
		"026462" + "0174" + "54" + "00" + // table "db"."t", ID 42, not a partition
		"02" + "00" + // 2 columns, no pre image
		"026964" + "03" + "06" + "01" + "05" + // "id" INT pk|handle int
		"0176" + "0f" + "01" + "26" + "07757466386d6234" + "02" + "6869" // "v" VARCHAR nullable string+charset "utf8mb4" "hi"
	got := AppendEvent(nil, goldenEvents["insert_small"]())
	if hexStr := bytesToHex(got); hexStr != want {
		t.Fatalf("worked example\nwant %s\ngot  %s", want, hexStr)
	}
}

func bytesToHex(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

func FuzzDecodeEvent(f *testing.F) {
	for name := range goldenEvents {
		b, err := os.ReadFile(filepath.Join("testdata", name+".bin"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	g := newGen(8)
	for range 20 {
		f.Add(AppendEvent(nil, g.event()))
	}
	for _, b := range ruleSeeds() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// A Decoder decodes the same, the second time from what it
		// learned the first.
		var d Decoder
		var into Event
		sameResult(t, &d, data, &into)
		sameResult(t, &d, data, &into)

		var ev Event
		err := DecodeEvent(data, &ev)
		ts, peekErr := PeekCommitTs(data)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || de.Offset < 0 || de.Offset > len(data) {
				t.Fatalf("error %v is not a DecodeError with an offset in the input", err)
			}
			n := 0
			for _, s := range []error{ErrUnknownVersion, ErrTruncated, ErrMalformed} {
				if errors.Is(err, s) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("error %v matches %d sentinels, want 1", err, n)
			}
			return
		}
		if peekErr != nil || ts != ev.CommitTs() {
			t.Fatalf("PeekCommitTs = %d, %v; decode says %d", ts, peekErr, ev.CommitTs())
		}
		if err := CheckRecord(data, ev.Kind, ev.CommitTs()); err != nil {
			t.Fatalf("CheckRecord rejects the decoded event's own kind and ts: %v", err)
		}
		// What decodes is what a writer may store.
		if err := CheckEvent(&ev); err != nil {
			t.Fatalf("CheckEvent rejects a decoded event: %v", err)
		}
		enc := AppendEvent(nil, &ev)
		if n, err := CheckedLen(&ev); err != nil || n != len(enc) {
			t.Fatalf("CheckedLen = %d, %v; the event encodes to %d bytes", n, err, len(enc))
		}
		var again Event
		if err := DecodeEvent(enc, &again); err != nil {
			t.Fatalf("re-encoded event does not decode: %v", err)
		}
		if !again.Equal(&ev) {
			t.Fatalf("unstable:\nfirst  %s\nsecond %s", describe(&ev), describe(&again))
		}
		if enc2 := AppendEvent(nil, &again); !bytes.Equal(enc, enc2) {
			t.Fatalf("re-encoding is not stable")
		}
	})
}
