package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// The rules docs/FORMAT.md states for readers, each checked where it is
// decided: by DecodeEvent, by a Decoder that learned the column first (its
// fast path), by CheckEvent on the Event a producer would build, and in the
// text the value prints as.

// oneColumn returns a row event with one post-image column "c" of the given
// tag and the bytes after the tag, and the offset of those bytes.
func oneColumn(tag byte, rest []byte) ([]byte, int) {
	b := []byte{Version, byte(RowEvent), 7, 0, 0, 0, 0, 0, 0, 0, 0, // commit ts 7, start delta 0
		0, 0, 0, 0, // table: empty schema and name, ID 0, no flags
		1, 0, // n_cols 1, n_pre 0
		1, 'c', byte(TypeDatetime), 0, tag}
	return append(b, rest...), len(b)
}

// wantReject checks that src fails at field and offset with sentinel, the
// same from DecodeEvent and from a Decoder that knows the column's
// definition from a valid event (learned), so that the fast path is held to
// the rule too.
func wantReject(t *testing.T, src []byte, learned []byte, sentinel error, field string, offset int) {
	t.Helper()
	var ev Event
	err := DecodeEvent(src, &ev)
	var de *DecodeError
	if !errors.Is(err, sentinel) || !errors.As(err, &de) || de.Field != field || de.Offset != offset {
		t.Fatalf("%x: got %v, want %v at %s, offset %d", src, err, sentinel, field, offset)
	}
	for _, alias := range []bool{false, true} {
		d := &Decoder{Alias: alias}
		if learned != nil {
			if err := d.Decode(learned, &ev); err != nil {
				t.Fatalf("learning from %x: %v", learned, err)
			}
		}
		if got := d.Decode(src, &ev); got == nil || got.Error() != err.Error() {
			t.Fatalf("%x: Decoder (alias %v) says %v, DecodeEvent %v", src, alias, got, err)
		}
	}
}

func wantAccept(t *testing.T, src []byte) *Event {
	t.Helper()
	var ev Event
	if err := DecodeEvent(src, &ev); err != nil {
		t.Fatalf("%x: %v", src, err)
	}
	var d Decoder
	var again Event
	if err := d.Decode(src, &again); err != nil || !again.Equal(&ev) {
		t.Fatalf("%x: Decoder says %v", src, err)
	}
	if err := d.Decode(src, &again); err != nil || !again.Equal(&ev) {
		t.Fatalf("%x: Decoder, learned, says %v", src, err)
	}
	if err := CheckEvent(&ev); err != nil {
		t.Fatalf("%x decodes, but CheckEvent rejects the event: %v", src, err)
	}
	return &ev
}

func u64le(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// Each field of a packed date-time just past MySQL's range, and at its edge.
func TestDateTimeFieldRanges(t *testing.T) {
	// A valid datetime to start from: 2024-02-29 12:30:45.120000, fsp 2.
	base := uint64(2)<<dtFspShift | 120000<<dtUsecShift | 45<<dtSecShift | 30<<dtMinShift |
		12<<dtHourShift | 29<<dtDayShift | 2<<dtMonthShift | 2024<<dtYearShift
	set := func(p uint64, shift, width uint, v uint64) uint64 {
		mask := uint64(1)<<width - 1
		return p&^(mask<<shift) | v<<shift
	}
	learned, _ := oneColumn(byte(KindDatetime), u64le(base))
	if got := wantAccept(t, learned).Row.Columns[0].Value.DateTime().String(); got != "2024-02-29 12:30:45.12" {
		t.Fatalf("text %q", got)
	}
	for _, tc := range []struct {
		name   string
		packed uint64
		ok     bool
	}{
		{"fsp 6", set(base, dtFspShift, 3, 6), true},
		{"fsp 7", set(base, dtFspShift, 3, 7), false},
		{"microsecond 999999 at fsp 6", set(set(base, dtFspShift, 3, 6), dtUsecShift, 20, 999999), true},
		{"microsecond 10^6", set(set(base, dtFspShift, 3, 6), dtUsecShift, 20, 1000000), false},
		{"microsecond 2^20-1", set(set(base, dtFspShift, 3, 6), dtUsecShift, 20, 1<<20-1), false},
		{"digits beyond fsp 2", set(base, dtUsecShift, 20, 123000), false},
		{"a digit beyond fsp 0", set(set(base, dtFspShift, 3, 0), dtUsecShift, 20, 1), false},
		{"fsp 0, no fraction", set(set(base, dtFspShift, 3, 0), dtUsecShift, 20, 0), true},
		{"second 59", set(base, dtSecShift, 6, 59), true},
		{"second 60", set(base, dtSecShift, 6, 60), false},
		{"minute 59", set(base, dtMinShift, 6, 59), true},
		{"minute 60", set(base, dtMinShift, 6, 60), false},
		{"hour 23", set(base, dtHourShift, 5, 23), true},
		{"hour 24", set(base, dtHourShift, 5, 24), false},
		{"day 31 of February", set(base, dtDayShift, 5, 31), true},
		{"day 0", set(base, dtDayShift, 5, 0), true},
		{"month 0", set(base, dtMonthShift, 4, 0), true},
		{"month 12", set(base, dtMonthShift, 4, 12), true},
		{"month 13", set(base, dtMonthShift, 4, 13), false},
		{"year 0", set(base, dtYearShift, 14, 0), true},
		{"year 9999", set(base, dtYearShift, 14, 9999), true},
		{"year 10000", set(base, dtYearShift, 14, 10000), false},
		{"bit 63", base | 1<<63, false},
		{"zero", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []Kind{KindDatetime, KindTimestamp} {
				src, off := oneColumn(byte(k), u64le(tc.packed))
				if tc.ok {
					wantAccept(t, src)
					continue
				}
				wantReject(t, src, learned, ErrMalformed, "columns[0].value", off)
				if ev := (Event{Kind: RowEvent, Row: RowChange{Columns: []Column{{Value: Value{kind: k, num: tc.packed}}}}}); CheckEvent(&ev) == nil {
					t.Fatal("CheckEvent accepts what DecodeEvent rejects")
				}
			}
		})
	}
}

// A date has no time: every bit below the day is zero.
func TestDateHasNoTime(t *testing.T) {
	day := uint64(29)<<dtDayShift | 2<<dtMonthShift | 2024<<dtYearShift
	learned, _ := oneColumn(byte(KindDate), u64le(day))
	wantAccept(t, learned)
	for _, p := range []uint64{day | 1, day | 1<<dtUsecShift, day | 1<<dtSecShift, day | 1<<dtMinShift, day | 1<<dtHourShift} {
		src, off := oneColumn(byte(KindDate), u64le(p))
		wantReject(t, src, learned, ErrMalformed, "columns[0].value", off)
	}
	// DateValue drops the time, deliberately: it is what DATE means.
	if v := DateValue(DateTime{Year: 2024, Month: 2, Day: 29, Hour: 5, Fsp: 6, Microsecond: 1}); v.num != day {
		t.Fatalf("DateValue kept the time: %#x", v.num)
	}
}

func TestDurationRanges(t *testing.T) {
	enc := func(micros int64, fsp uint64) []byte {
		v := int64(uint64(micros<<3) | fsp)
		return binary.AppendVarint(nil, v)
	}
	learned, _ := oneColumn(byte(KindDuration), enc(-1_500_000, 1))
	if got := wantAccept(t, learned).Row.Columns[0].Value.Duration().String(); got != "-00:00:01.5" {
		t.Fatalf("text %q", got)
	}
	for _, tc := range []struct {
		name   string
		micros int64
		fsp    uint64
		ok     bool
	}{
		{"838:59:59", maxDurationMicros, 0, true},
		{"-838:59:59", -maxDurationMicros, 6, true},
		{"838:59:59.000001", maxDurationMicros + 1, 6, false},
		{"-839:00:00", -839 * 3600e6, 0, false},
		{"fsp 7", 0, 7, false},
		{"digits beyond fsp 3", 1_234_500, 3, false},
		{"negative, digits beyond fsp 0", -1, 0, false},
		{"fsp 3", -1_234_000, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, off := oneColumn(byte(KindDuration), enc(tc.micros, tc.fsp))
			v := DurationValue(Duration{Micros: tc.micros, Fsp: uint8(tc.fsp)})
			ev := Event{Kind: RowEvent, Row: RowChange{StartTs: 7, CommitTs: 7, Columns: []Column{{Name: "c", Type: TypeDatetime, Value: v}}}}
			if tc.ok {
				wantAccept(t, src)
				if !bytes.Equal(AppendEvent(nil, &ev), src) {
					t.Fatal("DurationValue encodes differently")
				}
				return
			}
			wantReject(t, src, learned, ErrMalformed, "columns[0].value", off)
			if err := CheckEvent(&ev); !errors.Is(err, ErrInvalidEvent) || !strings.Contains(err.Error(), "columns[0].value") {
				t.Fatalf("CheckEvent: %v", err)
			}
			if err := DecodeEvent(AppendEvent(nil, &ev), new(Event)); !errors.Is(err, ErrMalformed) {
				t.Fatalf("the encoding of an invalid Duration decodes: %v", err)
			}
		})
	}
}

// A DateTime out of range is never stored as another, valid time: the
// Value is marked, CheckEvent names it, DecodeEvent rejects its encoding.
func TestInvalidDateTimeIsNotCut(t *testing.T) {
	ok := DateTime{Year: 2024, Month: 2, Day: 29, Hour: 12, Minute: 30, Second: 45, Microsecond: 120000, Fsp: 2}
	for _, tc := range []struct {
		name string
		edit func(*DateTime)
	}{
		{"fsp 7", func(d *DateTime) { d.Fsp = 7 }},
		{"fsp 8", func(d *DateTime) { d.Fsp = 8 }}, // would cut to fsp 0
		{"microsecond 10^6", func(d *DateTime) { d.Fsp, d.Microsecond = 6, 1e6 }},
		{"microsecond 2^20", func(d *DateTime) { d.Fsp, d.Microsecond = 6, 1<<20 }}, // would cut to 0
		{"digits beyond fsp", func(d *DateTime) { d.Microsecond = 123456 }},
		{"second 60", func(d *DateTime) { d.Second = 60 }},
		{"second 64", func(d *DateTime) { d.Second = 64 }}, // would cut to 0
		{"minute 60", func(d *DateTime) { d.Minute = 60 }},
		{"hour 24", func(d *DateTime) { d.Hour = 24 }},
		{"hour 32", func(d *DateTime) { d.Hour = 32 }}, // would cut to 0
		{"day 32", func(d *DateTime) { d.Day = 32 }},   // would cut to 0
		{"month 13", func(d *DateTime) { d.Month = 13 }},
		{"month 16", func(d *DateTime) { d.Month = 16 }}, // would cut to 0
		{"year 10000", func(d *DateTime) { d.Year = 10000 }},
		{"year 16384", func(d *DateTime) { d.Year = 16384 }}, // would cut to 0
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := ok
			tc.edit(&d)
			if d.Valid() {
				t.Fatalf("%+v is Valid", d)
			}
			mk := []func(DateTime) Value{DatetimeValue, TimestampValue}
			if d.Hour < 24 && d.Minute < 60 && d.Second < 60 && d.Fsp == 2 && d.Microsecond == 120000 {
				mk = append(mk, DateValue) // a date field out of range
			}
			for _, f := range mk {
				ev := Event{Kind: RowEvent, Row: RowChange{PreColumns: []Column{{Name: "a"}, {Name: "c", Value: f(d)}}}}
				err := CheckEvent(&ev)
				if !errors.Is(err, ErrInvalidEvent) || !strings.Contains(err.Error(), "pre_columns[1].value") {
					t.Fatalf("CheckEvent: %v", err)
				}
				var de *DecodeError
				if err := DecodeEvent(AppendEvent(nil, &ev), new(Event)); !errors.Is(err, ErrMalformed) ||
					!errors.As(err, &de) || de.Field != "pre_columns[1].value" {
					t.Fatalf("%s: the encoding of an invalid DateTime decodes: %v", f(d).Kind(), err)
				}
			}
		})
	}
	if !ok.Valid() || CheckEvent(&Event{Kind: RowEvent, Row: RowChange{Columns: []Column{{Value: DatetimeValue(ok)}}}}) != nil {
		t.Fatal("a valid DateTime is rejected")
	}
}

// The text forms, digit for digit: a fraction is "." and exactly fsp
// digits, nothing at fsp 0.
func TestDateTimeText(t *testing.T) {
	d := DateTime{Year: 7, Month: 3, Day: 4, Hour: 5, Minute: 6, Second: 7}
	for fsp, want := range []string{"0007-03-04 05:06:07", "0007-03-04 05:06:07.1", "0007-03-04 05:06:07.12",
		"0007-03-04 05:06:07.120", "0007-03-04 05:06:07.1200", "0007-03-04 05:06:07.12000", "0007-03-04 05:06:07.120000"} {
		d.Fsp = uint8(fsp)
		if fsp > 0 {
			d.Microsecond = 100000
			if fsp > 1 {
				d.Microsecond = 120000
			}
		}
		if got := DatetimeValue(d).DateTime().String(); got != want {
			t.Errorf("fsp %d: %q, want %q", fsp, got, want)
		}
	}
	for _, tc := range []struct {
		d    Duration
		want string
	}{
		{Duration{}, "00:00:00"},
		{Duration{Micros: -1, Fsp: 6}, "-00:00:00.000001"},
		{Duration{Micros: maxDurationMicros, Fsp: 2}, "838:59:59.00"},
		{Duration{Micros: 3600e6 + 60e6 + 1e6 + 500000, Fsp: 1}, "01:01:01.5"},
	} {
		if got := DurationValue(tc.d).Duration().String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.d, got, tc.want)
		}
	}
}

// Tag bits 5 and 6 say a non-empty charset (collation) follows; bit 7 is
// reserved.
func TestTagBits(t *testing.T) {
	learned, _ := oneColumn(byte(KindInt)|tagHasCharset|tagHasCollation, []byte{1, 'x', 1, 'y', 2})
	ev := wantAccept(t, learned)
	if c := ev.Row.Columns[0]; c.Charset != "x" || c.Collation != "y" || c.Value.Int() != 1 {
		t.Fatalf("decoded %+v", c)
	}
	src, off := oneColumn(byte(KindInt)|tagHasCharset, []byte{0, 2})
	wantReject(t, src, learned, ErrMalformed, "columns[0].charset", off)
	src, off = oneColumn(byte(KindInt)|tagHasCollation, []byte{0, 2})
	wantReject(t, src, learned, ErrMalformed, "columns[0].collation", off)
	src, off = oneColumn(byte(KindInt)|tagHasCharset|tagHasCollation, []byte{1, 'x', 0, 2})
	wantReject(t, src, learned, ErrMalformed, "columns[0].collation", off+2)
	src, off = oneColumn(byte(KindInt)|tagReserved, []byte{2})
	wantReject(t, src, learned, ErrMalformed, "columns[0].tag", off-1)
	src, off = oneColumn(17, nil)
	wantReject(t, src, learned, ErrMalformed, "columns[0].tag", off-1)
	// The kind bits alone may differ from what the Decoder learned.
	src, _ = oneColumn(byte(KindNull)|tagHasCharset|tagHasCollation, []byte{1, 'x', 1, 'y'})
	if !wantAccept(t, src).Row.Columns[0].Value.IsNull() {
		t.Fatal("not NULL")
	}
}

// Count errors name the count and sit at its first byte; the input ending
// inside a column's type, flags or tag names the field it ends before.
func TestCountAndFieldOffsets(t *testing.T) {
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	row := []byte{Version, byte(RowEvent), 7, 0, 0, 0, 0, 0, 0, 0, 0} // commit ts 7, start delta 0
	ddl := []byte{Version, byte(DDLEvent), 7, 0, 0, 0, 0, 0, 0, 0, 0}
	table := []byte{0, 0, 0, 0} // offset 11: empty schema and name, ID 0, no flags
	hdr := cat(row, table)      // offset 15: n_cols
	for _, tc := range []struct {
		name   string
		in     []byte
		want   error
		field  string
		offset int
	}{
		// 3 columns need 12 bytes, 9 are left after n_cols.
		{"n_cols", cat(hdr, []byte{3, 0}, make([]byte, 8)), ErrTruncated, "n_cols", 15},
		// A two-byte n_cols: 128 columns.
		{"n_cols, two bytes", cat(hdr, []byte{0x80, 0x01, 0}, make([]byte, 8)), ErrTruncated, "n_cols", 15},
		// 2 + 1 columns need 12 bytes, 11 are left after n_pre.
		{"n_pre counts n_cols too", cat(hdr, []byte{2, 1}, make([]byte, 11)), ErrTruncated, "n_pre", 16},
		{"n_pre, two bytes", cat(hdr, []byte{1, 0x80, 0x01}, make([]byte, 11)), ErrTruncated, "n_pre", 16},
		{"n_cols varint cut", cat(hdr, []byte{0x80}), ErrTruncated, "n_cols", 15},
		{"n_pre overflowing", cat(hdr, []byte{0}, bytes.Repeat([]byte{0xff}, 10)), ErrMalformed, "n_pre", 16},
		// A name of 4 bytes passes the count check (4 bytes a column).
		{"ends before type", cat(hdr, []byte{1, 0, 4, 'a', 'b', 'c', 'd'}), ErrTruncated, "columns[0].type", 22},
		{"ends before flags", cat(hdr, []byte{1, 0, 4, 'a', 'b', 'c', 'd', 3}), ErrTruncated, "columns[0].flags", 23},
		{"ends before tag", cat(hdr, []byte{1, 0, 4, 'a', 'b', 'c', 'd', 3, 0}), ErrTruncated, "columns[0].tag", 24},
		{"name longer than the input", cat(hdr, []byte{1, 0, 9, 'c', 3, 0, 0}), ErrTruncated, "columns[0].name", 17},
		// DDL: table, action 11 at 15, query "" at 16, then n_tables 2 at
		// 17 with 9 bytes left (2 entries need 10).
		{"n_tables", cat(ddl, table, []byte{11, 0, 2}, make([]byte, 9)), ErrTruncated, "n_tables", 17},
		{"role", cat(ddl, table, []byte{11, 0, 1}, table, []byte{3}), ErrMalformed, "tables[0].role", 22},
		{"tflags of a DDL's table", cat(ddl, table, []byte{11, 0, 1, 0, 0, 0, 4, 0}), ErrMalformed, "tables[0].tflags", 21},
		{"tflags", cat(row, []byte{0, 0, 0, 0x80, 0, 0}), ErrMalformed, "table.tflags", 14},
		{"physical_id", cat(row, []byte{0, 0, 0x80}), ErrTruncated, "table.physical_id", 13},
		{"start_delta", cat(row[:10], []byte{0x80}), ErrTruncated, "start_delta", 10},
		{"end", cat(hdr, []byte{0, 0, 0}), ErrMalformed, "end", 17},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantReject(t, tc.in, nil, tc.want, tc.field, tc.offset)
		})
	}
}

func TestCheckRecord(t *testing.T) {
	row := AppendEvent(nil, goldenEvents["insert_small"]())
	ddl := AppendEvent(nil, goldenEvents["ddl"]())
	if err := CheckRecord(row, RowEvent, 1002); err != nil {
		t.Fatal(err)
	}
	if err := CheckRecord(ddl, DDLEvent, goldenEvents["ddl"]().CommitTs()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		src    []byte
		kind   EventKind
		ts     uint64
		want   error
		field  string
		offset int
	}{
		{"kind", row, DDLEvent, 1002, ErrMalformed, "kind", 1},
		{"commit ts", row, RowEvent, 1003, ErrMalformed, "commit_ts", 2},
		{"version", append([]byte{2}, row[1:]...), RowEvent, 1002, ErrUnknownVersion, "version", 0},
		{"short", row[:9], RowEvent, 1002, ErrTruncated, "commit_ts", 2},
	} {
		err := CheckRecord(tc.src, tc.kind, tc.ts)
		var de *DecodeError
		if !errors.Is(err, tc.want) || !errors.As(err, &de) || de.Field != tc.field || de.Offset != tc.offset {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestCheckEventKindsAndRoles(t *testing.T) {
	for _, tc := range []struct {
		ev    Event
		field string
	}{
		{Event{}, "kind"},
		{Event{Kind: 3}, "kind"},
		{Event{Kind: DDLEvent, DDL: DDL{Tables: []DDLTable{{Role: RoleDropped}, {Role: 3}}}}, "tables[1].role"},
	} {
		if err := CheckEvent(&tc.ev); !errors.Is(err, ErrInvalidEvent) || !strings.Contains(err.Error(), tc.field+":") {
			t.Errorf("%+v: %v", tc.ev, err)
		}
	}
	g := newGen(11)
	for range 500 {
		if ev := g.event(); CheckEvent(ev) != nil {
			t.Fatalf("CheckEvent rejects %s: %v", describe(ev), CheckEvent(ev))
		}
	}
	for name, mk := range goldenEvents {
		if err := CheckEvent(mk()); err != nil {
			t.Errorf("golden %s: %v", name, err)
		}
	}
}

// ruleSeeds are fuzz seeds at the edges the rules above draw: valid events
// whose date-time, duration and tag bytes are one mutation away from a
// rejected one.
func ruleSeeds() [][]byte {
	top := uint64(6) | 999999<<dtUsecShift | 59<<dtSecShift | 59<<dtMinShift | 23<<dtHourShift |
		31<<dtDayShift | 12<<dtMonthShift | 9999<<dtYearShift
	var out [][]byte
	for _, k := range []Kind{KindDatetime, KindTimestamp} {
		for _, p := range []uint64{top, 0, 2 | 120000<<dtUsecShift} {
			b, _ := oneColumn(byte(k), u64le(p))
			out = append(out, b)
		}
	}
	date, _ := oneColumn(byte(KindDate), u64le(31<<dtDayShift|12<<dtMonthShift|9999<<dtYearShift))
	out = append(out, date)
	for _, d := range []Duration{{Micros: maxDurationMicros, Fsp: 6}, {Micros: -maxDurationMicros}, {Micros: -1_500_000, Fsp: 1}} {
		b, _ := oneColumn(byte(KindDuration), binary.AppendVarint(nil, int64(d.pack())))
		out = append(out, b)
	}
	tags, _ := oneColumn(byte(KindInt)|tagHasCharset|tagHasCollation, []byte{1, 'x', 1, 'y', 2})
	return append(out, tags)
}

// The golden TRUNCATE names the table as the statement leaves it: its new
// ID, the entry of role created (the workload of testkit/workload is held to the
// same rule).
func TestGoldenTruncateNamesNewID(t *testing.T) {
	d := goldenEvents["ddl"]().DDL
	if d.Type != ActionTruncateTable {
		t.Fatalf("golden ddl is a %v", d.Type)
	}
	for _, e := range d.Tables {
		if e.Role == RoleCreated && e.TableName == d.Table {
			return
		}
	}
	t.Fatalf("TRUNCATE names ID %d, not its created table: %v", d.Table.PhysicalID, d.Tables)
}
