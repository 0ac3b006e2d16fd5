package codec

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// roundTrip encodes ev, decodes it into into, and fails t unless the result
// equals ev and encodes to the same bytes.
func roundTrip(t *testing.T, ev *Event, into *Event) []byte {
	t.Helper()
	enc := AppendEvent(nil, ev)
	if err := DecodeEvent(enc, into); err != nil {
		t.Fatalf("decode of %d bytes: %v", len(enc), err)
	}
	if !into.Equal(ev) {
		t.Fatalf("round trip changed the event:\nwant %s\ngot  %s", describe(ev), describe(into))
	}
	if again := AppendEvent(nil, into); !bytes.Equal(again, enc) {
		t.Fatalf("re-encoding differs:\nfirst  %x\nsecond %x", enc, again)
	}
	return enc
}

// describe prints an event for failure messages.
func describe(ev *Event) string {
	var b strings.Builder
	switch ev.Kind {
	case RowEvent:
		r := &ev.Row
		fmt.Fprintf(&b, "row %d/%d %s#%d part=%v op=%s", r.StartTs, r.CommitTs, r.Table, r.Table.PhysicalID,
			r.Table.IsPartition, r.Op())
		for i, cols := range [2][]Column{r.Columns, r.PreColumns} {
			fmt.Fprintf(&b, " %s[", [2]string{"post", "pre"}[i])
			for _, c := range cols {
				fmt.Fprintf(&b, " %q:%d:%s:%q:%q=%s", c.Name, c.Type, c.Flags, c.Charset, c.Collation, c.Value)
			}
			b.WriteString(" ]")
		}
	case DDLEvent:
		d := &ev.DDL
		fmt.Fprintf(&b, "ddl %d/%d %s %s %q %v", d.StartTs, d.CommitTs, d.Table, d.Type, d.Query, d.Tables)
	default:
		fmt.Fprintf(&b, "kind %d", ev.Kind)
	}
	return b.String()
}

func TestRoundTripRandom(t *testing.T) {
	g := newGen(1)
	var into Event // reused throughout, as a reader would
	sizes := 0
	for range 3000 {
		ev := g.event()
		sizes += len(roundTrip(t, ev, &into))
	}
	t.Logf("3000 events, %d bytes", sizes)
}

func TestRoundTripRandomWithHugeStrings(t *testing.T) {
	g := newGen(2)
	g.bigString = true
	var into Event
	huge := 0
	for range 400 {
		ev := g.event()
		if len(roundTrip(t, ev, &into)) > 1<<20 {
			huge++
		}
	}
	if huge == 0 {
		t.Fatal("the generator made no event with a 1 MiB string; the test proves nothing")
	}
}

func TestRoundTripEveryKindEdgeValues(t *testing.T) {
	values := []Value{
		Null(),
		IntValue(math.MinInt64), IntValue(math.MaxInt64), IntValue(0), IntValue(-1),
		UintValue(math.MaxUint64), UintValue(0),
		Float32Value(float32(math.Copysign(0, -1))), Float32Value(0), Float32Value(math.Float32frombits(0x7fc00001)),
		Float32Value(math.Float32frombits(0xff800001)),
		Float64Value(math.Copysign(0, -1)), Float64Value(0), Float64Value(math.Float64frombits(0x7ff8dead0000beef)),
		Float64Value(math.Float64frombits(0xfff0000000000001)), Float64Value(math.Inf(-1)),
		DecimalValue("-0.000"), DecimalValue(""),
		StringValue(""), StringValue("ünïcödé ✓"), StringValue(strings.Repeat("x", 1<<20)),
		BytesValue(nil), BytesValue([]byte{}), BytesValue([]byte{0, 0xff, 0x80}),
		DateValue(DateTime{}), DateValue(DateTime{Year: 9999, Month: 12, Day: 31}),
		DatetimeValue(DateTime{Year: 2024, Month: 2, Day: 29, Hour: 23, Minute: 59, Second: 59, Microsecond: 500000, Fsp: 1}),
		TimestampValue(DateTime{Year: 1970, Month: 1, Day: 1, Fsp: 6}),
		DurationValue(Duration{Micros: -(838*3600 + 59*60 + 59) * 1e6, Fsp: 0}),
		DurationValue(Duration{Micros: maxDurationMicros, Fsp: 6}), DurationValue(Duration{Micros: -1, Fsp: 6}),
		YearValue(0), YearValue(2155), YearValue(math.MaxUint16),
		BitValue(math.MaxUint64), EnumValue(0), EnumValue(math.MaxUint64), SetValue(1 << 63),
		JSONValue(`{"k":"v"}`), JSONValue(""),
	}
	var cols []Column
	for i, v := range values {
		cols = append(cols, Column{Name: fmt.Sprintf("c%d_%s", i, v.Kind()), Type: TypeVarchar, Value: v})
	}
	ev := &Event{Kind: RowEvent, Row: RowChange{StartTs: 1, CommitTs: math.MaxUint64,
		Table: TableName{Schema: "数据库", Name: "表😀", PhysicalID: math.MinInt64}, Columns: cols}}
	var into Event
	roundTrip(t, ev, &into)
	seen := map[Kind]bool{}
	for i, c := range into.Row.Columns {
		seen[c.Value.Kind()] = true
		// Equal compares floats by bits already; check the accessors too.
		if got, want := math.Float64bits(c.Value.Float64()), math.Float64bits(values[i].Float64()); got != want {
			t.Errorf("column %d: float64 bits %#x, want %#x", i, got, want)
		}
		if got, want := math.Float32bits(c.Value.Float32()), math.Float32bits(values[i].Float32()); got != want {
			t.Errorf("column %d: float32 bits %#x, want %#x", i, got, want)
		}
	}
	for k := KindNull; k <= maxKind; k++ {
		if !seen[k] {
			t.Errorf("kind %s not covered", k)
		}
	}
}

func TestEmptyBytesAndEmptyStringAreNotNull(t *testing.T) {
	ev := &Event{Kind: RowEvent, Row: RowChange{Columns: []Column{
		{Name: "null", Value: Null()},
		{Name: "bytes", Value: BytesValue([]byte{})},
		{Name: "nil-bytes", Value: BytesValue(nil)},
		{Name: "string", Value: StringValue("")},
	}}}
	var into Event
	roundTrip(t, ev, &into)
	c := into.Row.Columns
	if !c[0].Value.IsNull() || c[0].Value.Bytes() != nil {
		t.Errorf("NULL decoded as %s", c[0].Value)
	}
	for _, col := range c[1:] {
		if col.Value.IsNull() || col.Value.Bytes() == nil || len(col.Value.Bytes()) != 0 {
			t.Errorf("%s decoded as %s (bytes %#v)", col.Name, col.Value, col.Value.Bytes())
		}
	}
}

func TestZeroColumnsAndOps(t *testing.T) {
	cols := []Column{{Name: "id", Value: IntValue(1)}}
	for _, tc := range []struct {
		post, pre []Column
		op        Op
	}{
		{nil, nil, OpNone},
		{[]Column{}, []Column{}, OpNone},
		{cols, nil, OpInsert},
		{nil, cols, OpDelete},
		{cols, cols, OpUpdate},
	} {
		ev := &Event{Kind: RowEvent, Row: RowChange{Columns: tc.post, PreColumns: tc.pre}}
		var into Event
		roundTrip(t, ev, &into)
		if got := into.Row.Op(); got != tc.op {
			t.Errorf("%d post, %d pre columns: op %s, want %s", len(tc.post), len(tc.pre), got, tc.op)
		}
	}
}

func TestEventAccessors(t *testing.T) {
	tbl := TableName{Schema: "s", Name: "t", PhysicalID: 7}
	row := &Event{Kind: RowEvent, Row: RowChange{StartTs: 10, CommitTs: 20, Table: tbl}}
	ddl := &Event{Kind: DDLEvent, DDL: DDL{StartTs: 30, CommitTs: 40, Table: TableName{Schema: "s2", Name: "t2"}}}
	if row.IsDDL() || row.StartTs() != 10 || row.CommitTs() != 20 || row.TableName() != tbl {
		t.Errorf("row accessors: ddl=%v start=%d commit=%d table=%v", row.IsDDL(), row.StartTs(), row.CommitTs(), row.TableName())
	}
	if !ddl.IsDDL() || ddl.StartTs() != 30 || ddl.CommitTs() != 40 || ddl.TableName().Name != "t2" {
		t.Errorf("ddl accessors: ddl=%v start=%d commit=%d table=%v", ddl.IsDDL(), ddl.StartTs(), ddl.CommitTs(), ddl.TableName())
	}
	for _, ev := range []*Event{row, ddl} {
		enc := AppendEvent(nil, ev)
		ts, err := PeekCommitTs(enc)
		if err != nil || ts != ev.CommitTs() {
			t.Errorf("PeekCommitTs = %d, %v; want %d", ts, err, ev.CommitTs())
		}
	}
}

// Decoding into a reused Event must clear the part of the other kind and
// must not leave values of a longer earlier row behind.
func TestDecodeReuseAcrossKinds(t *testing.T) {
	g := newGen(3)
	var into Event
	for range 500 {
		ev := g.event()
		roundTrip(t, ev, &into)
		switch into.Kind {
		case RowEvent:
			if into.DDL.Query != "" || len(into.DDL.Tables) != 0 || into.DDL.CommitTs != 0 {
				t.Fatalf("row event keeps DDL fields of an earlier event: %+v", into.DDL)
			}
		case DDLEvent:
			if len(into.Row.Columns) != 0 || len(into.Row.PreColumns) != 0 || into.Row.CommitTs != 0 {
				t.Fatalf("DDL event keeps row fields of an earlier event")
			}
		}
	}
}

// The decoded event must not change when the caller reuses the input buffer.
func TestDecodedValuesDoNotAliasInput(t *testing.T) {
	ev := &Event{Kind: RowEvent, Row: RowChange{Columns: []Column{
		{Name: "s", Value: StringValue("hello")}, {Name: "b", Value: BytesValue([]byte("world"))}}}}
	enc := AppendEvent(nil, ev)
	var into Event
	if err := DecodeEvent(enc, &into); err != nil {
		t.Fatal(err)
	}
	for i := range enc {
		enc[i] = 'X'
	}
	if !into.Equal(ev) {
		t.Fatalf("overwriting the input changed the decoded event: %s", describe(&into))
	}
	// Appending to a decoded payload must not run into the next one.
	s := into.Row.Columns[0].Value.Bytes()
	_ = append(s, "!!!!!!"...)
	if got := into.Row.Columns[1].Value.Text(); got != "world" {
		t.Fatalf("appending to one payload overwrote the next: %q", got)
	}
}

func TestCloneSurvivesNextDecode(t *testing.T) {
	g := newGen(4)
	var into Event
	for range 200 {
		ev := g.event()
		roundTrip(t, ev, &into)
		kept := into.Clone()
		other := g.event()
		roundTrip(t, other, &into)
		if !kept.Equal(ev) {
			t.Fatalf("clone changed by the next decode:\nwant %s\ngot  %s", describe(ev), describe(kept))
		}
	}
}

// TestCopyRowReuses: CopyRow into a copy that held another row makes an
// exact copy, sharing no memory with the source (the next decode leaves it
// whole) nor with the rows copied into it before, and allocates nothing
// once the copy has held a row as large.
func TestCopyRowReuses(t *testing.T) {
	g := newGen(6)
	var into Event
	var dst RowChange
	var arena []byte
	for range 300 {
		ev := g.event()
		if ev.Kind != RowEvent {
			continue
		}
		roundTrip(t, ev, &into)
		arena = CopyRow(&dst, &into.Row, arena)
		roundTrip(t, g.event(), &into)
		kept := Event{Kind: RowEvent, Row: dst}
		if !kept.Equal(ev) {
			t.Fatalf("copy changed by the next decode:\nwant %s\ngot  %s", describe(ev), describe(&kept))
		}
		if dst.Op() != ev.Row.Op() {
			t.Fatalf("copy is an %v of an %v", dst.Op(), ev.Row.Op())
		}
	}
	src := benchRow()
	arena = CopyRow(&dst, &src.Row, arena)
	if allocs := testing.AllocsPerRun(100, func() { arena = CopyRow(&dst, &src.Row, arena) }); allocs != 0 {
		t.Fatalf("CopyRow into a copy that held the row allocates %v times", allocs)
	}
}

func TestDecodeAllocatesNothingWhenReused(t *testing.T) {
	ev := benchRow()
	enc := AppendEvent(nil, ev)
	var into Event
	if err := DecodeEvent(enc, &into); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := DecodeEvent(enc, &into); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("DecodeEvent into a warm Event allocates %v times", allocs)
	}
	buf := make([]byte, 0, 1024)
	allocs = testing.AllocsPerRun(100, func() { buf = AppendEvent(buf[:0], ev) })
	if allocs != 0 {
		t.Fatalf("AppendEvent into a large enough buffer allocates %v times", allocs)
	}
}

// Every proper prefix of a valid event is truncated: an error matching
// ErrTruncated, never a panic, never a different event.
func TestTruncatedAtEveryLength(t *testing.T) {
	g := newGen(5)
	var into Event
	for n := range 300 {
		ev := g.event()
		enc := AppendEvent(nil, ev)
		step := 1
		if len(enc) > 4096 {
			step = len(enc) / 1024 // keep the test fast on huge events; the short prefixes still all run
		}
		for l := 0; l < len(enc); l++ {
			if l > 64 && l%step != 0 {
				continue
			}
			err := DecodeEvent(enc[:l], &into)
			if !errors.Is(err, ErrTruncated) {
				t.Fatalf("event %d (%d bytes) cut to %d: error %v, want ErrTruncated", n, len(enc), l, err)
			}
			var de *DecodeError
			if !errors.As(err, &de) || de.Offset < 0 || de.Offset > l {
				t.Fatalf("cut to %d: error %v is not a DecodeError with an offset inside the input", l, err)
			}
		}
	}
}

func TestTrailingBytesAreMalformed(t *testing.T) {
	enc := AppendEvent(nil, benchRow())
	var into Event
	err := DecodeEvent(append(enc, 0), &into)
	var de *DecodeError
	if !errors.Is(err, ErrMalformed) || !errors.As(err, &de) || de.Offset != len(enc) || de.Field != "end" {
		t.Fatalf("trailing byte: %v", err)
	}
}

func TestUnknownVersion(t *testing.T) {
	enc := AppendEvent(nil, benchRow())
	for _, v := range []byte{0, 2, 0xff} {
		enc[0] = v
		var into Event
		err := DecodeEvent(enc, &into)
		var de *DecodeError
		if !errors.Is(err, ErrUnknownVersion) || !IsUnknownVersion(err) || IsCorrupt(err) {
			t.Fatalf("version %d: %v", v, err)
		}
		if !errors.As(err, &de) || de.Offset != 0 || de.Field != "version" {
			t.Fatalf("version %d: not a DecodeError at the version byte: %#v", v, err)
		}
		if want := fmt.Sprintf("version %d ", v); !strings.Contains(err.Error(), want) {
			t.Fatalf("version %d: message %q does not name the version", v, err)
		}
		if _, err := PeekCommitTs(enc); !errors.Is(err, ErrUnknownVersion) {
			t.Fatalf("PeekCommitTs on version %d: %v", v, err)
		}
	}
}

// Hand-made hostile inputs: each must fail with the named sentinel, at the
// named field, without allocating in proportion to what it claims.
func TestMalformedInputs(t *testing.T) {
	header := func(kind byte) []byte {
		return []byte{Version, kind, 1, 0, 0, 0, 0, 0, 0, 0, 0} // commit ts 1, start delta 0
	}
	table := []byte{0, 0, 0, 0} // empty schema and name, ID 0, no flags
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	huge := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f} // 2^63-1
	col := func(tag byte, rest ...byte) []byte { return cat([]byte{1, 'c', byte(TypeLong), 0, tag}, rest) }
	for _, tc := range []struct {
		name  string
		in    []byte
		want  error
		field string
	}{
		{"unknown event kind", cat(header(3), table), ErrMalformed, "kind"},
		{"event kind zero", cat(header(0), table), ErrMalformed, "kind"},
		{"huge column count", cat(header(1), table, huge, []byte{0}), ErrTruncated, "n_cols"},
		{"huge pre column count", cat(header(1), table, []byte{0}, huge), ErrTruncated, "n_pre"},
		{"counts that fit alone but not together", cat(header(1), table, []byte{2, 2}, col(0), col(0)), ErrTruncated, "n_pre"},
		{"huge string length", cat(header(1), []byte{0x80, 0x80, 0x80, 0x80, 0x08}), ErrTruncated, "table.schema"},
		{"varint of 11 bytes", cat(header(1), bytes.Repeat([]byte{0x80}, 10), []byte{0}), ErrMalformed, "table.schema"},
		{"varint overflowing 64 bits", cat(header(1), bytes.Repeat([]byte{0xff}, 9), []byte{0x02}), ErrMalformed, "table.schema"},
		{"reserved table flag", cat(header(1), []byte{0, 0, 0, 2}), ErrMalformed, "table.tflags"},
		{"unknown value kind", cat(header(1), table, []byte{1, 0}, col(17)), ErrMalformed, "columns[0].tag"},
		{"reserved tag bit", cat(header(1), table, []byte{1, 0}, col(0x80)), ErrMalformed, "columns[0].tag"},
		{"year over 16 bits", cat(header(1), table, []byte{1, 0}, col(byte(KindYear), 0x80, 0x80, 0x04)), ErrMalformed, "columns[0].value"},
		{"reserved date bit", cat(header(1), table, []byte{0, 1}, col(byte(KindDate), 0, 0, 0, 0, 0, 0, 0, 0x80)), ErrMalformed, "pre_columns[0].value"},
		{"string value longer than input", cat(header(1), table, []byte{1, 0}, col(byte(KindBytes), 5, 'a')), ErrTruncated, "columns[0].value"},
		{"unknown table role", cat(header(2), table, []byte{3, 0, 1}, table, []byte{3}), ErrMalformed, "tables[0].role"},
		{"huge table count", cat(header(2), table, []byte{3, 0}, huge), ErrTruncated, "n_tables"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var into Event
			var err error
			allocs := testing.AllocsPerRun(1, func() { err = DecodeEvent(tc.in, &into) })
			var de *DecodeError
			if !errors.Is(err, tc.want) || !errors.As(err, &de) || de.Field != tc.field {
				t.Fatalf("got %v, want %v at %s", err, tc.want, tc.field)
			}
			if allocs > 20 {
				t.Fatalf("%v allocations for a %d-byte input", allocs, len(tc.in))
			}
			t.Log(err)
		})
	}
}

func TestAppendEventPanicsOnInvalidKind(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "kind 0") {
			t.Fatalf("recovered %v, want a panic naming kind 0", r)
		}
	}()
	AppendEvent(nil, &Event{})
}

func TestValueStrings(t *testing.T) {
	for _, tc := range []struct {
		v    Value
		want string
	}{
		{Null(), "NULL"},
		{IntValue(-5), "int(-5)"},
		{UintValue(5), "uint(5)"},
		{StringValue("a\"b"), `string("a\"b")`},
		{BytesValue([]byte{0, 0xff}), "bytes(x'00ff')"},
		{DecimalValue("1.50"), "decimal(1.50)"},
		{DateValue(DateTime{Year: 2024, Month: 2, Day: 29, Hour: 5}), "date(2024-02-29)"},
		{DatetimeValue(DateTime{Year: 2024, Month: 2, Day: 29, Hour: 23, Minute: 59, Second: 59, Microsecond: 500000, Fsp: 1}),
			"datetime(2024-02-29 23:59:59.5)"},
		{TimestampValue(DateTime{Year: 1, Month: 1, Day: 1, Microsecond: 123, Fsp: 6}), "timestamp(0001-01-01 00:00:00.000123)"},
		{DurationValue(Duration{Micros: -(838*3600 + 59*60 + 59) * 1e6}), "duration(-838:59:59)"},
		{DurationValue(Duration{Micros: 1_500_000, Fsp: 3}), "duration(00:00:01.500)"},
		{BitValue(5), "bit(0x5)"},
		{SetValue(6), "set(0x6)"},
		{EnumValue(2), "enum(2)"},
		{YearValue(2024), "year(2024)"},
		{JSONValue(`{"a":1}`), `json({"a":1})`},
		{Float64Value(math.Inf(-1)), "float64(-Inf)"},
	} {
		if got := tc.v.String(); got != tc.want {
			t.Errorf("String() = %s, want %s", got, tc.want)
		}
	}
}

func TestAccessorsOfOtherKindsAreZero(t *testing.T) {
	g := newGen(6)
	for k := KindNull; k <= maxKind; k++ {
		v := g.value(k)
		if k != KindInt && v.Int() != 0 {
			t.Errorf("%s: Int() = %d", v, v.Int())
		}
		if k != KindUint && k != KindBit && k != KindEnum && k != KindSet && v.Uint() != 0 {
			t.Errorf("%s: Uint() = %d", v, v.Uint())
		}
		if !k.hasBytes() && v.Bytes() != nil {
			t.Errorf("%s: Bytes() = %q", v, v.Bytes())
		}
		if k != KindYear && v.Year() != 0 {
			t.Errorf("%s: Year() = %d", v, v.Year())
		}
		if k != KindDate && k != KindDatetime && k != KindTimestamp && v.DateTime() != (DateTime{}) {
			t.Errorf("%s: DateTime() = %v", v, v.DateTime())
		}
		if k != KindDuration && v.Duration() != (Duration{}) {
			t.Errorf("%s: Duration() = %v", v, v.Duration())
		}
	}
}

func TestDateTimePacking(t *testing.T) {
	g := newGen(7)
	for range 1000 {
		dt := g.dateTime()
		if got := DatetimeValue(dt).DateTime(); got != dt {
			t.Fatalf("DateTime %+v came back as %+v", dt, got)
		}
	}
	// Packed values of one fsp order like the times they hold.
	a := DateTime{Year: 2023, Month: 12, Day: 31, Hour: 23, Minute: 59, Second: 59, Microsecond: 999999, Fsp: 6}
	b := DateTime{Year: 2024, Month: 1, Day: 1, Fsp: 6}
	if !(a.pack() < b.pack()) {
		t.Fatalf("packed %v ≥ packed %v", a, b)
	}
	if (DateTime{Month: 13}).Valid() || !(DateTime{}).Valid() || !a.Valid() {
		t.Fatal("Valid disagrees with MySQL's ranges")
	}
	d := Duration{Micros: -123456780, Fsp: 5}
	if got := DurationValue(d).Duration(); got != d {
		t.Fatalf("Duration %+v came back as %+v", d, got)
	}
	// An invalid one is marked, not cut into a valid one.
	if got := DurationValue(Duration{Micros: -123456789, Fsp: 5}).Duration(); got.Fsp != 7 {
		t.Fatalf("invalid Duration came back as %+v, want fsp 7", got)
	}
}

func TestTextValue(t *testing.T) {
	b := []byte("12.5")
	v := TextValue(KindDecimal, b)
	if v.Kind() != KindDecimal || &v.Bytes()[0] != &b[0] {
		t.Fatalf("TextValue copied or changed kind: %s", v)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("TextValue(KindInt) did not panic")
		}
	}()
	TextValue(KindInt, b)
}

func TestStringers(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{(FlagPrimaryKey | FlagHandleKey | FlagGenerated).String(), "primary-key|handle-key|generated"},
		{ColumnFlag(0).String(), "0"},
		{ActionTruncateTable.String(), "truncate table"},
		{ActionType(200).String(), "action(200)"},
		{RoleCreated.String(), "created"},
		{Kind(31).String(), "kind(31)"},
		{DDLEvent.String(), "ddl"},
		{OpUpdate.String(), "update"},
		{TableName{Schema: "s", Name: "t"}.String(), "s.t"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestKeyColumns(t *testing.T) {
	pk, hk := FlagPrimaryKey, FlagPrimaryKey|FlagHandleKey
	col := func(name string, f ColumnFlag, v int64) Column {
		return Column{Name: name, Flags: f, Value: IntValue(v)}
	}
	both := []Column{col("a", pk, 1), col("b", hk, 2), col("c", 0, 3)}
	if got := KeyColumns(both); !slices.Equal(got, []int{1}) {
		t.Errorf("handle key over primary key: %v, want [1]", got)
	}
	if got := KeyColumns([]Column{col("a", pk, 1), col("b", 0, 2), col("c", pk, 3)}); !slices.Equal(got, []int{0, 2}) {
		t.Errorf("primary key alone: %v, want [0 2]", got)
	}
	if got := KeyColumns([]Column{col("a", 0, 1)}); got != nil {
		t.Errorf("no key: %v, want nil", got)
	}
	moved := []Column{col("a", pk, 1), col("b", hk, 9), col("c", 0, 3)}
	same := []Column{col("a", pk, 7), col("b", hk, 2), col("c", 0, 8)}
	if !KeyChanged(both, moved) || KeyChanged(both, same) || !KeyChanged([]Column{col("a", 0, 1)}, []Column{col("a", 0, 1)}) {
		t.Error("KeyChanged: want a changed handle key and a keyless update to count, other columns not")
	}
}
