package codec

import (
	"math"
	"math/rand/v2"
	"strings"
)

// gen makes random events from a deterministic source. Roughly a third of
// the numbers it draws are edge values.
type gen struct {
	r *rand.Rand
	// bigString lets a few strings be very long (1 MiB); off in loops that
	// encode thousands of events.
	bigString bool
}

func newGen(seed uint64) *gen { return &gen{r: rand.New(rand.NewPCG(seed, 0x5eed))} }

var edgeU64 = []uint64{0, 1, 127, 128, 255, 256, 16383, 16384, math.MaxInt32, math.MaxUint32,
	math.MaxInt64, math.MaxInt64 + 1, math.MaxUint64 - 1, math.MaxUint64}

var edgeI64 = []int64{0, 1, -1, 63, -64, 64, -65, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64,
	math.MinInt64 + 1}

var edgeF64 = []uint64{
	0,                              // +0
	1 << 63,                        // -0
	math.Float64bits(math.Inf(1)),  // +Inf
	math.Float64bits(math.Inf(-1)), // -Inf
	0x7ff8000000000001,             // quiet NaN with a payload
	0x7ff0000000000001,             // signalling NaN
	0xfff8000000000000,             // negative NaN
	1,                              // smallest subnormal
	math.Float64bits(math.MaxFloat64),
}

var edgeF32 = []uint32{0, 1 << 31, 0x7f800000, 0xff800000, 0x7fc00001, 0x7f800001, 0xffc00000, 1, 0x7f7fffff}

var names = []string{"", "id", "user_id", "créé_le", "名前", "emoji_😀", "a b", "`quoted`", "x\x00y",
	strings.Repeat("long_name_", 30)}

func (g *gen) edge() bool { return g.r.IntN(3) == 0 }

func (g *gen) u64() uint64 {
	if g.edge() {
		return edgeU64[g.r.IntN(len(edgeU64))]
	}
	return g.r.Uint64() >> g.r.IntN(64)
}

func (g *gen) i64() int64 {
	if g.edge() {
		return edgeI64[g.r.IntN(len(edgeI64))]
	}
	return int64(g.r.Uint64()) >> g.r.IntN(64)
}

func (g *gen) name() string {
	if g.r.IntN(4) == 0 {
		return g.text(20)
	}
	return names[g.r.IntN(len(names))]
}

// text returns a string of up to max bytes, sometimes invalid UTF-8 (the codec
// must not care).
func (g *gen) text(max int) string {
	b := make([]byte, g.r.IntN(max+1))
	for i := range b {
		if g.r.IntN(8) == 0 {
			b[i] = byte(g.r.Uint32())
		} else {
			b[i] = byte('a' + g.r.IntN(26))
		}
	}
	return string(b)
}

func (g *gen) payload() string {
	switch {
	case g.bigString && g.r.IntN(50) == 0:
		return strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	case g.r.IntN(5) == 0:
		return ""
	case g.r.IntN(10) == 0:
		return g.text(300)
	}
	return g.text(16)
}

// dateTime returns a valid DateTime (the out-of-range ones have tests of
// their own: they do not round-trip, by design).
func (g *gen) dateTime() DateTime {
	if g.edge() {
		return [...]DateTime{{}, {Year: 9999, Month: 12, Day: 31, Hour: 23, Minute: 59, Second: 59, Microsecond: 999999, Fsp: 6},
			{Year: 2024, Month: 2, Day: 0}, {Year: 2023, Month: 2, Day: 31, Microsecond: 900000, Fsp: 1}}[g.r.IntN(4)]
	}
	fsp := uint8(g.r.IntN(7))
	usec := uint32(g.r.IntN(1e6))
	return DateTime{Year: uint16(g.r.IntN(10000)), Month: uint8(g.r.IntN(13)), Day: uint8(g.r.IntN(32)),
		Hour: uint8(g.r.IntN(24)), Minute: uint8(g.r.IntN(60)), Second: uint8(g.r.IntN(60)),
		Microsecond: usec - usec%fracUnit[fsp], Fsp: fsp}
}

func (g *gen) value(k Kind) Value {
	switch k {
	case KindNull:
		return Null()
	case KindInt:
		return IntValue(g.i64())
	case KindUint:
		return UintValue(g.u64())
	case KindFloat32:
		if g.edge() {
			return Float32Value(math.Float32frombits(edgeF32[g.r.IntN(len(edgeF32))]))
		}
		return Float32Value(math.Float32frombits(g.r.Uint32()))
	case KindFloat64:
		if g.edge() {
			return Float64Value(math.Float64frombits(edgeF64[g.r.IntN(len(edgeF64))]))
		}
		return Float64Value(math.Float64frombits(g.r.Uint64()))
	case KindDecimal:
		return DecimalValue([...]string{"0", "-0.00", "123456789012345678901234567890.123456789012345678901234567890",
			"1.50", "-99.9"}[g.r.IntN(5)])
	case KindString:
		return StringValue(g.payload())
	case KindBytes:
		return BytesValue([]byte(g.payload()))
	case KindDate:
		return DateValue(g.dateTime())
	case KindDatetime:
		return DatetimeValue(g.dateTime())
	case KindTimestamp:
		return TimestampValue(g.dateTime())
	case KindDuration:
		fsp := uint8(g.r.IntN(7))
		micros := g.r.Int64N(2*maxDurationMicros+1) - maxDurationMicros
		micros -= micros % int64(fracUnit[fsp])
		if g.edge() {
			micros, fsp = [...]int64{0, -1, 1, maxDurationMicros, -maxDurationMicros}[g.r.IntN(5)], 6
		}
		return DurationValue(Duration{Micros: micros, Fsp: fsp})
	case KindYear:
		return YearValue([...]uint16{0, 1901, 2155, 2024, math.MaxUint16}[g.r.IntN(5)])
	case KindBit:
		return BitValue(g.u64())
	case KindEnum:
		return EnumValue(g.u64())
	case KindSet:
		return SetValue(g.u64())
	case KindJSON:
		return JSONValue([...]string{"null", "{}", `{"a":[1,2,{"b":"ü"}]}`, `"x"`}[g.r.IntN(4)])
	}
	panic("unknown kind")
}

func (g *gen) columns(n int) []Column {
	if n == 0 && g.r.IntN(2) == 0 {
		return nil
	}
	cols := make([]Column, n)
	for i := range cols {
		c := &cols[i]
		c.Name = g.name()
		c.Type = Type(g.r.Uint32())
		c.Flags = ColumnFlag(g.r.Uint32())
		if g.r.IntN(2) == 0 {
			c.Charset = [...]string{"utf8mb4", "binary", "latin1", "gbk"}[g.r.IntN(4)]
		}
		if g.r.IntN(2) == 0 {
			c.Collation = [...]string{"utf8mb4_bin", "utf8mb4_general_ci", "binary"}[g.r.IntN(3)]
		}
		c.Value = g.value(Kind(g.r.IntN(int(maxKind) + 1)))
	}
	return cols
}

func (g *gen) table() TableName {
	return TableName{Schema: g.name(), Name: g.name(), PhysicalID: g.i64(), IsPartition: g.r.IntN(2) == 0}
}

func (g *gen) event() *Event {
	startTs, commitTs := g.u64(), g.u64()
	if g.r.IntN(2) == 0 {
		// The common case: a real TSO pair, commit a little after start.
		commitTs = startTs + uint64(g.r.IntN(1<<30))
	}
	if g.r.IntN(5) == 0 {
		d := DDL{StartTs: startTs, CommitTs: commitTs, Table: g.table(), Type: ActionType(g.r.Uint32()),
			Query: g.payload()}
		for range g.r.IntN(4) {
			d.Tables = append(d.Tables, DDLTable{TableName: g.table(), Role: TableRole(g.r.IntN(3))})
		}
		return &Event{Kind: DDLEvent, DDL: d}
	}
	r := RowChange{StartTs: startTs, CommitTs: commitTs, Table: g.table()}
	n := g.r.IntN(12)
	switch g.r.IntN(4) {
	case 0:
		r.Columns = g.columns(n)
	case 1:
		r.PreColumns = g.columns(n)
	case 2:
		r.Columns, r.PreColumns = g.columns(n), g.columns(n)
	case 3: // unbalanced images are not something a CDC system makes, but the codec must not care
		r.Columns, r.PreColumns = g.columns(n), g.columns(g.r.IntN(3))
	}
	return &Event{Kind: RowEvent, Row: r}
}
