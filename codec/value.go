package codec

import (
	"encoding/hex"
	"math"
	"strconv"
)

// Kind says which of its representations a Value holds. The numbers are the
// wire codes (the low 5 bits of a column's tag byte), so they never change.
type Kind uint8

// Value kinds.
const (
	KindNull      Kind = 0  // SQL NULL; no payload
	KindInt       Kind = 1  // signed 64-bit integer (TINYINT…BIGINT)
	KindUint      Kind = 2  // unsigned 64-bit integer (… UNSIGNED)
	KindFloat32   Kind = 3  // FLOAT, bit pattern kept exactly
	KindFloat64   Kind = 4  // DOUBLE, bit pattern kept exactly
	KindDecimal   Kind = 5  // DECIMAL as its exact text, e.g. "-12.3400"
	KindString    Kind = 6  // character data (CHAR, VARCHAR, TEXT)
	KindBytes     Kind = 7  // binary data (BINARY, VARBINARY, BLOB)
	KindDate      Kind = 8  // DATE, as a packed DateTime
	KindDatetime  Kind = 9  // DATETIME, as a packed DateTime
	KindTimestamp Kind = 10 // TIMESTAMP, as a packed DateTime
	KindDuration  Kind = 11 // TIME, as a signed Duration
	KindYear      Kind = 12 // YEAR
	KindBit       Kind = 13 // BIT(n), right-aligned in a uint64
	KindEnum      Kind = 14 // ENUM, as its 1-based index (0 is the '' error value)
	KindSet       Kind = 15 // SET, as its member bitmap
	KindJSON      Kind = 16 // JSON, as its text
	maxKind            = KindJSON
)

var kindNames = [...]string{"null", "int", "uint", "float32", "float64", "decimal", "string", "bytes",
	"date", "datetime", "timestamp", "duration", "year", "bit", "enum", "set", "json"}

func (k Kind) String() string {
	if k <= maxKind {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// hasBytes reports whether values of kind k carry a byte payload.
func (k Kind) hasBytes() bool {
	return k == KindDecimal || k == KindString || k == KindBytes || k == KindJSON
}

// Value is one column value as a MySQL or TiDB row holds it. It is a plain
// struct rather than an interface so that a row of values is one allocation
// (or none, when a decoded Event is reused).
//
// The zero Value is NULL. Build values with the constructors (IntValue,
// StringValue, …) and read them with the accessor of their Kind; an accessor
// of another kind returns its zero value.
//
// Byte payloads (decimal, string, bytes, JSON) are held as []byte. A Value
// from DecodeEvent shares that slice with its Event: see DecodeEvent.
type Value struct {
	kind Kind
	num  uint64 // integer, float bits, packed date/time, year, bit, enum or set
	b    []byte // decimal, string, bytes or JSON text
}

// Null returns the NULL value (the zero Value).
func Null() Value { return Value{} }

// IntValue returns a signed integer.
func IntValue(v int64) Value { return Value{kind: KindInt, num: uint64(v)} }

// UintValue returns an unsigned integer.
func UintValue(v uint64) Value { return Value{kind: KindUint, num: v} }

// Float32Value returns a FLOAT. Its bit pattern (NaN payloads, -0) survives encoding.
func Float32Value(f float32) Value {
	return Value{kind: KindFloat32, num: uint64(math.Float32bits(f))}
}

// Float64Value returns a DOUBLE. Its bit pattern (NaN payloads, -0) survives encoding.
func Float64Value(f float64) Value { return Value{kind: KindFloat64, num: math.Float64bits(f)} }

// DecimalValue returns a DECIMAL from its text. The codec keeps the text as
// is and does not parse it; producers should write MySQL's canonical form
// (the scale's digits after the point) so that "1.50" stays "1.50".
func DecimalValue(s string) Value { return Value{kind: KindDecimal, b: []byte(s)} }

// StringValue returns character data. It copies s.
func StringValue(s string) Value { return Value{kind: KindString, b: []byte(s)} }

// BytesValue returns binary data. It keeps b (no copy). A non-nil empty or a
// nil b is the empty byte string, which is not NULL.
func BytesValue(b []byte) Value {
	if b == nil {
		b = []byte{}
	}
	return Value{kind: KindBytes, b: b}
}

// JSONValue returns a JSON document from its text. The codec does not parse it.
func JSONValue(s string) Value { return Value{kind: KindJSON, b: []byte(s)} }

// TextValue returns a value of a byte-payload kind (KindDecimal, KindString,
// KindBytes or KindJSON) that keeps b without copying it, for producers that
// already hold the bytes. It panics on any other kind, a programming error.
func TextValue(k Kind, b []byte) Value {
	if !k.hasBytes() {
		panic("codec: TextValue of kind " + k.String())
	}
	if b == nil {
		b = []byte{}
	}
	return Value{kind: k, b: b}
}

// DateValue returns a DATE. Only t's date fields are kept.
func DateValue(t DateTime) Value {
	return Value{kind: KindDate, num: DateTime{Year: t.Year, Month: t.Month, Day: t.Day}.pack()}
}

// DatetimeValue returns a DATETIME.
func DatetimeValue(t DateTime) Value { return Value{kind: KindDatetime, num: t.pack()} }

// TimestampValue returns a TIMESTAMP. No time zone is recorded: a producer
// must use one zone for every timestamp of a log (UTC is the sane choice).
func TimestampValue(t DateTime) Value { return Value{kind: KindTimestamp, num: t.pack()} }

// DurationValue returns a TIME.
func DurationValue(d Duration) Value { return Value{kind: KindDuration, num: d.pack()} }

// YearValue returns a YEAR (0 is the zero year, otherwise 1901…2155 in MySQL).
func YearValue(y uint16) Value { return Value{kind: KindYear, num: uint64(y)} }

// BitValue returns a BIT(n) value, right-aligned.
func BitValue(v uint64) Value { return Value{kind: KindBit, num: v} }

// EnumValue returns an ENUM by its 1-based member index.
func EnumValue(index uint64) Value { return Value{kind: KindEnum, num: index} }

// SetValue returns a SET by its member bitmap (bit i = member i+1).
func SetValue(bits uint64) Value { return Value{kind: KindSet, num: bits} }

// Kind returns v's kind.
func (v Value) Kind() Kind { return v.kind }

// IsNull reports whether v is NULL.
func (v Value) IsNull() bool { return v.kind == KindNull }

// Int returns a KindInt value.
func (v Value) Int() int64 {
	if v.kind != KindInt {
		return 0
	}
	return int64(v.num)
}

// Uint returns the number of a KindUint, KindBit, KindEnum or KindSet value.
func (v Value) Uint() uint64 {
	switch v.kind {
	case KindUint, KindBit, KindEnum, KindSet:
		return v.num
	}
	return 0
}

// Float32 returns a KindFloat32 value.
func (v Value) Float32() float32 {
	if v.kind != KindFloat32 {
		return 0
	}
	return math.Float32frombits(uint32(v.num))
}

// Float64 returns a KindFloat64 value.
func (v Value) Float64() float64 {
	if v.kind != KindFloat64 {
		return 0
	}
	return math.Float64frombits(v.num)
}

// Bytes returns the payload of a KindDecimal, KindString, KindBytes or
// KindJSON value (nil for other kinds; never nil for those four). The caller
// must not modify it when v came from a constructor that kept its argument.
func (v Value) Bytes() []byte {
	if !v.kind.hasBytes() {
		return nil
	}
	return v.b
}

// Text returns Bytes as a string (a copy).
func (v Value) Text() string { return string(v.Bytes()) }

// DateTime returns a KindDate, KindDatetime or KindTimestamp value.
func (v Value) DateTime() DateTime {
	switch v.kind {
	case KindDate, KindDatetime, KindTimestamp:
		return unpackDateTime(v.num)
	}
	return DateTime{}
}

// Duration returns a KindDuration value.
func (v Value) Duration() Duration {
	if v.kind != KindDuration {
		return Duration{}
	}
	return unpackDuration(v.num)
}

// Year returns a KindYear value.
func (v Value) Year() uint16 {
	if v.kind != KindYear {
		return 0
	}
	return uint16(v.num)
}

// Equal reports whether v and w are the same value: same kind and same
// payload, comparing floats by bit pattern (so NaN equals the same NaN and
// -0 differs from +0), which is what "survives a round trip" means.
func (v Value) Equal(w Value) bool {
	if v.kind != w.kind || v.num != w.num {
		return false
	}
	return !v.kind.hasBytes() || string(v.b) == string(w.b)
}

// String formats v for humans and tests, e.g. int(-5), string("a"),
// bytes(x'00ff'), datetime(2024-02-29 23:59:59.5), NULL.
func (v Value) String() string {
	var s string
	switch v.kind {
	case KindNull:
		return "NULL"
	case KindInt:
		s = strconv.FormatInt(int64(v.num), 10)
	case KindUint, KindEnum, KindYear:
		s = strconv.FormatUint(v.num, 10)
	case KindBit, KindSet:
		s = "0x" + strconv.FormatUint(v.num, 16)
	case KindFloat32:
		s = strconv.FormatFloat(float64(v.Float32()), 'g', -1, 32)
	case KindFloat64:
		s = strconv.FormatFloat(v.Float64(), 'g', -1, 64)
	case KindDecimal, KindJSON:
		s = string(v.b)
	case KindString:
		s = strconv.Quote(string(v.b))
	case KindBytes:
		s = "x'" + hex.EncodeToString(v.b) + "'"
	case KindDate:
		s = v.DateTime().String()[:10]
	case KindDatetime, KindTimestamp:
		s = v.DateTime().String()
	case KindDuration:
		s = v.Duration().String()
	}
	return v.kind.String() + "(" + s + ")"
}

// DateTime is a MySQL DATE, DATETIME or TIMESTAMP broken into its fields,
// which is how MySQL and TiDB hold one: no time zone, and zero dates such as
// 0000-00-00 or 2024-02-00 allowed. Fsp is the column's fractional-seconds
// precision (0…6): it decides how many fraction digits the value prints with,
// so it is part of the value.
//
// On the wire a DateTime is packed into 64 bits (see the package doc). A
// DateTime that is not Valid cannot be stored: the Value built from it is
// marked invalid (its fields are cut to their slots, a Day of 32 becomes 0),
// [CheckEvent] rejects an event holding it, and DecodeEvent rejects its
// encoding. Cutting it into something valid instead would store a different
// time without a word.
type DateTime struct {
	Year        uint16 // 0…9999
	Month       uint8  // 0…12
	Day         uint8  // 0…31
	Hour        uint8  // 0…23
	Minute      uint8  // 0…59
	Second      uint8  // 0…59
	Microsecond uint32 // 0…999999
	Fsp         uint8  // 0…6
}

// The packed layout, low bit first: fsp 3, microsecond 20, second 6, minute 6,
// hour 5, day 5, month 4, year 14; bit 63 is zero. Putting fsp lowest and year
// highest makes packed values of one fsp compare like the times they hold.
const (
	dtFspShift   = 0
	dtUsecShift  = 3
	dtSecShift   = 23
	dtMinShift   = 29
	dtHourShift  = 35
	dtDayShift   = 40
	dtMonthShift = 45
	dtYearShift  = 49
	dtReserved   = 1 << 63
)

// pack packs t, setting the reserved bit 63 when t is not Valid so that the
// value cannot pass for the valid time its cut fields would spell.
func (t DateTime) pack() uint64 {
	var bad uint64
	if !t.Valid() {
		bad = dtReserved
	}
	return bad | uint64(t.Fsp&7)<<dtFspShift |
		uint64(t.Microsecond&(1<<20-1))<<dtUsecShift |
		uint64(t.Second&63)<<dtSecShift |
		uint64(t.Minute&63)<<dtMinShift |
		uint64(t.Hour&31)<<dtHourShift |
		uint64(t.Day&31)<<dtDayShift |
		uint64(t.Month&15)<<dtMonthShift |
		uint64(t.Year&(1<<14-1))<<dtYearShift
}

func unpackDateTime(p uint64) DateTime {
	return DateTime{
		Fsp:         uint8(p >> dtFspShift & 7),
		Microsecond: uint32(p >> dtUsecShift & (1<<20 - 1)),
		Second:      uint8(p >> dtSecShift & 63),
		Minute:      uint8(p >> dtMinShift & 63),
		Hour:        uint8(p >> dtHourShift & 31),
		Day:         uint8(p >> dtDayShift & 31),
		Month:       uint8(p >> dtMonthShift & 15),
		Year:        uint16(p >> dtYearShift & (1<<14 - 1)),
	}
}

// Valid reports whether t is a value a MySQL DATETIME(Fsp) column can hold,
// which is what the format stores: every field within MySQL's range, and no
// fraction digit beyond Fsp (Microsecond a multiple of 10^(6-Fsp)), since the
// text form prints Fsp digits and must not drop any. Zero dates and zero
// parts (0000-00-00, 2024-02-00) are valid, and the day is not checked
// against the month: MySQL keeps 2023-02-31 under ALLOW_INVALID_DATES, and
// which of these a downstream takes is its SQL mode's call.
func (t DateTime) Valid() bool {
	return t.Year <= 9999 && t.Month <= 12 && t.Day <= 31 && t.Hour <= 23 && t.Minute <= 59 &&
		t.Second <= 59 && t.Microsecond <= 999999 && t.Fsp <= 6 && t.Microsecond%fracUnit[t.Fsp] == 0
}

// fracUnit[fsp] is the smallest microsecond step a value of that fsp holds:
// 10^(6-fsp).
var fracUnit = [7]uint32{1e6, 1e5, 1e4, 1e3, 100, 10, 1}

// maxDurationMicros is MySQL's largest TIME, 838:59:59 (the fraction must be
// zero there: MySQL's range ends at 838:59:59.000000).
const maxDurationMicros = (838*3600 + 59*60 + 59) * 1e6

// checkPackedDateTime returns what is wrong with p as the payload of a value
// of kind k (date, datetime or timestamp), or "" if nothing is. The decoder
// and CheckEvent share it, so that what one accepts the other does.
func checkPackedDateTime(k Kind, p uint64) string {
	t := unpackDateTime(p)
	switch {
	case p&dtReserved != 0:
		return "the reserved bit 63 is set (a " + k.String() + " built from fields out of range sets it)"
	case t.Fsp > 6:
		return "fsp " + strconv.Itoa(int(t.Fsp)) + " is above 6"
	case t.Microsecond > 999999:
		return "microsecond " + strconv.Itoa(int(t.Microsecond)) + " is above 999999"
	case t.Microsecond%fracUnit[t.Fsp] != 0:
		return "microsecond " + strconv.Itoa(int(t.Microsecond)) + " has digits beyond fsp " + strconv.Itoa(int(t.Fsp))
	case t.Second > 59:
		return "second " + strconv.Itoa(int(t.Second)) + " is above 59"
	case t.Minute > 59:
		return "minute " + strconv.Itoa(int(t.Minute)) + " is above 59"
	case t.Hour > 23:
		return "hour " + strconv.Itoa(int(t.Hour)) + " is above 23"
	case t.Month > 12:
		return "month " + strconv.Itoa(int(t.Month)) + " is above 12"
	case t.Year > 9999:
		return "year " + strconv.Itoa(int(t.Year)) + " is above 9999"
	case k == KindDate && p&(1<<dtDayShift-1) != 0:
		return "a date has a non-zero time or fsp"
	}
	return ""
}

// packedDateTimeOK is checkPackedDateTime(k, p) == "" without building a
// message, for the decoder's fast path.
func packedDateTimeOK(k Kind, p uint64) bool {
	fsp := p & 7
	usec := uint32(p >> dtUsecShift & (1<<20 - 1))
	// fsp 6, the common case, skips the division.
	return p&dtReserved == 0 && fsp <= 6 && usec <= 999999 && (fsp == 6 || usec%fracUnit[fsp] == 0) &&
		p>>dtSecShift&63 <= 59 && p>>dtMinShift&63 <= 59 && p>>dtHourShift&31 <= 23 &&
		p>>dtMonthShift&15 <= 12 && p>>dtYearShift <= 9999 &&
		(k != KindDate || p&(1<<dtDayShift-1) == 0)
}

// checkPackedDuration returns what is wrong with p (the decoded varint of a
// duration), or "".
func checkPackedDuration(p uint64) string {
	d := unpackDuration(p)
	switch {
	case d.Fsp > 6:
		return "fsp " + strconv.Itoa(int(d.Fsp)) + " is above 6 (a duration out of range is built with fsp 7)"
	case d.Micros > maxDurationMicros || d.Micros < -maxDurationMicros:
		return "micros " + strconv.FormatInt(d.Micros, 10) + " is beyond ±838:59:59"
	case d.Micros%int64(fracUnit[d.Fsp]) != 0:
		return "micros " + strconv.FormatInt(d.Micros, 10) + " has digits beyond fsp " + strconv.Itoa(int(d.Fsp))
	}
	return ""
}

// packedDurationOK is checkPackedDuration(p) == "" without the message.
func packedDurationOK(p uint64) bool {
	fsp := p & 7
	m := int64(p) >> 3
	return fsp <= 6 && m <= maxDurationMicros && m >= -maxDurationMicros && m%int64(fracUnit[fsp]) == 0
}

// String returns MySQL's text form, "YYYY-MM-DD hh:mm:ss" followed by Fsp
// fraction digits when Fsp > 0.
func (t DateTime) String() string {
	b := make([]byte, 0, 26)
	b = appendPadded(b, uint64(t.Year), 4)
	b = append(b, '-')
	b = appendPadded(b, uint64(t.Month), 2)
	b = append(b, '-')
	b = appendPadded(b, uint64(t.Day), 2)
	b = append(b, ' ')
	b = appendPadded(b, uint64(t.Hour), 2)
	b = append(b, ':')
	b = appendPadded(b, uint64(t.Minute), 2)
	b = append(b, ':')
	b = appendPadded(b, uint64(t.Second), 2)
	return string(appendFraction(b, t.Microsecond, t.Fsp))
}

// Duration is a MySQL TIME: a signed span of microseconds within MySQL's
// range, ±838:59:59, and the column's fractional-seconds precision, which is
// part of the value as for DateTime. A Duration that is not Valid cannot be
// stored: the Value built from it has fsp 7, which CheckEvent and DecodeEvent
// reject.
type Duration struct {
	Micros int64
	Fsp    uint8 // 0…6
}

// Valid reports whether d is a value a MySQL TIME(Fsp) column can hold:
// |Micros| at most 838:59:59, Fsp at most 6, and no fraction digit beyond Fsp.
func (d Duration) Valid() bool {
	return d.Fsp <= 6 && d.Micros <= maxDurationMicros && d.Micros >= -maxDurationMicros &&
		d.Micros%int64(fracUnit[d.Fsp]) == 0
}

// A packed Duration is Micros<<3 | Fsp, a two's-complement int64; one that
// is not Valid gets fsp 7, so that it cannot pass for a valid one.
func (d Duration) pack() uint64 {
	if !d.Valid() {
		return uint64(d.Micros<<3) | 7
	}
	return uint64(d.Micros<<3) | uint64(d.Fsp)
}

func unpackDuration(p uint64) Duration {
	return Duration{Micros: int64(p) >> 3, Fsp: uint8(p & 7)}
}

// String returns MySQL's text form, "[-]hhh:mm:ss" followed by Fsp fraction digits.
func (d Duration) String() string {
	b := make([]byte, 0, 24)
	u := uint64(d.Micros)
	if d.Micros < 0 {
		b = append(b, '-')
		u = -u
	}
	secs := u / 1e6
	b = appendPadded(b, secs/3600, 2)
	b = append(b, ':')
	b = appendPadded(b, secs/60%60, 2)
	b = append(b, ':')
	b = appendPadded(b, secs%60, 2)
	return string(appendFraction(b, uint32(u%1e6), d.Fsp))
}

func appendPadded(b []byte, v uint64, width int) []byte {
	s := strconv.FormatUint(v, 10)
	for i := len(s); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

func appendFraction(b []byte, micros uint32, fsp uint8) []byte {
	if fsp == 0 {
		return b
	}
	if fsp > 6 {
		fsp = 6
	}
	var digits [6]byte
	for i := 5; i >= 0; i-- {
		digits[i] = byte('0' + micros%10)
		micros /= 10
	}
	b = append(b, '.')
	return append(b, digits[:fsp]...)
}
