package difffuzz

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/redokit/redokit/codec"
)

// family is how a column's values compare across sinks: the canonical text
// both sides of a comparison are brought to.
type family int

const (
	fInt family = iota
	fUint
	fF32
	fF64
	fDec
	fStr
	fBytes
	fDate
	fDT
	fTime
	fYear
	fBit
	fEnum
	fSet
	fJSON
)

// colType is a MySQL column type the generator declares, with the codec
// type and flags its values carry in a log.
type colType struct {
	name    string
	sql     string // the type as a DDL declares it (before NULL / NOT NULL)
	typ     codec.Type
	fam     family
	flags   codec.ColumnFlag // FlagUnsigned, FlagBinary
	text    bool             // a character type: it has a charset and collation
	keyable bool             // may be in a key or index (no prefix length needed, exact equality on every sink)
	fsp     uint8
	// gen makes a value; small draws from a domain small enough that
	// values collide (keys, unique values moving between rows).
	gen func(r *rand.Rand, small, nul bool) codec.Value
}

func intGen(lo, hi int64) func(r *rand.Rand, small, nul bool) codec.Value {
	return func(r *rand.Rand, small, _ bool) codec.Value {
		if small {
			return codec.IntValue(r.Int64N(12) - 2)
		}
		switch r.IntN(6) {
		case 0:
			return codec.IntValue(lo)
		case 1:
			return codec.IntValue(hi)
		}
		if lo == math.MinInt64 {
			return codec.IntValue(int64(r.Uint64()))
		}
		return codec.IntValue(lo + r.Int64N(hi-lo))
	}
}

func uintGen(hi uint64) func(r *rand.Rand, small, nul bool) codec.Value {
	return func(r *rand.Rand, small, _ bool) codec.Value {
		if small {
			return codec.UintValue(r.Uint64N(12))
		}
		switch r.IntN(6) {
		case 0:
			return codec.UintValue(0)
		case 1:
			return codec.UintValue(hi)
		case 2:
			if hi == math.MaxUint64 {
				return codec.UintValue(1<<63 + r.Uint64N(1000))
			}
		}
		return codec.UintValue(r.Uint64N(hi))
	}
}

const keyAlphabet = "abc012"

var textPieces = []string{"a", "b", "z", "0", "1", "9", " ", "é", "日本", "😀", "'", "\\", "%", "_", "\"", "x y"}

// strGen makes text of at most n characters. nul allows a NUL byte, which
// PostgreSQL refuses (a documented refusal).
func strGen(n int) func(r *rand.Rand, small, nul bool) codec.Value {
	return func(r *rand.Rand, small, nul bool) codec.Value {
		var b strings.Builder
		if small {
			// Lower case ASCII only: equal under every collation the
			// generator declares, binary or case-insensitive.
			for range 1 + r.IntN(2) {
				b.WriteByte(keyAlphabet[r.IntN(len(keyAlphabet))])
			}
			return codec.StringValue(b.String())
		}
		l := r.IntN(min(n, 12) + 1)
		chars := 0
		for chars < l {
			p := textPieces[r.IntN(len(textPieces))]
			b.WriteString(p)
			chars += len([]rune(p))
		}
		s := []rune(b.String())
		if len(s) > n {
			s = s[:n]
		}
		out := string(s)
		if nul && r.IntN(2) == 0 {
			out = "a\x00" + out
			if len([]rune(out)) > n {
				out = string([]rune(out)[:n])
			}
		}
		// CHAR drops trailing spaces: the generator never relies on them.
		return codec.StringValue(strings.TrimRight(out, " "))
	}
}

func bytesGen(n int) func(r *rand.Rand, small, nul bool) codec.Value {
	return func(r *rand.Rand, small, _ bool) codec.Value {
		if small {
			return codec.BytesValue([]byte{byte(r.IntN(4)), byte(r.IntN(2))})
		}
		b := make([]byte, r.IntN(n+1))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return codec.BytesValue(b)
	}
}

func decGen(r *rand.Rand, small, _ bool) codec.Value {
	if small {
		return codec.DecimalValue(fmt.Sprintf("%d.%03d", r.IntN(3), r.IntN(2)*500))
	}
	sign := ""
	if r.IntN(3) == 0 {
		sign = "-"
	}
	ip := r.Int64N(1_000_000_000)
	if r.IntN(5) == 0 {
		ip = 999_999_999
	}
	return codec.DecimalValue(fmt.Sprintf("%s%d.%03d", sign, ip, r.IntN(1000)))
}

func daysIn(y, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

func dateOf(r *rand.Rand, small bool, y0, y1 int) codec.DateTime {
	if small {
		return codec.DateTime{Year: 2024, Month: 1, Day: uint8(1 + r.IntN(4))}
	}
	y := y0 + r.IntN(y1-y0+1)
	m := 1 + r.IntN(12)
	return codec.DateTime{Year: uint16(y), Month: uint8(m), Day: uint8(1 + r.IntN(daysIn(y, m)))}
}

func dateGen(r *rand.Rand, small, _ bool) codec.Value {
	return codec.DateValue(dateOf(r, small, 1000, 9999))
}

func dtGen(fsp uint8, ts bool) func(r *rand.Rand, small, nul bool) codec.Value {
	return func(r *rand.Rand, small, _ bool) codec.Value {
		var d codec.DateTime
		if ts {
			d = dateOf(r, small, 1971, 2037)
		} else {
			d = dateOf(r, small, 1000, 9999)
		}
		d.Fsp = fsp
		if !small {
			d.Hour, d.Minute, d.Second = uint8(r.IntN(24)), uint8(r.IntN(60)), uint8(r.IntN(60))
			unit := uint32(math.Pow10(6 - int(fsp)))
			d.Microsecond = uint32(r.IntN(1_000_000)) / unit * unit
		}
		if ts {
			return codec.TimestampValue(d)
		}
		return codec.DatetimeValue(d)
	}
}

func timeGen(fsp uint8) func(r *rand.Rand, small, nul bool) codec.Value {
	return func(r *rand.Rand, small, _ bool) codec.Value {
		const maxMicros = (838*3600 + 59*60 + 59) * 1_000_000
		var m int64
		switch r.IntN(5) {
		case 0:
			m = maxMicros
		case 1:
			m = -maxMicros
		default:
			unit := int64(math.Pow10(6 - int(fsp)))
			m = (r.Int64N(2*maxMicros) - maxMicros) / unit * unit
		}
		return codec.DurationValue(codec.Duration{Micros: m, Fsp: fsp})
	}
}

var jsonDocs = []string{`{"a": 1}`, `[1, 2, "x"]`, `"str"`, `null`, `{"k": "é\"q", "n": [true, false]}`, `12.5`, `{}`}

var (
	tInt       = &colType{name: "int", sql: "INT", typ: codec.TypeLong, fam: fInt, keyable: true, gen: intGen(math.MinInt32, math.MaxInt32)}
	tBigint    = &colType{name: "bigint", sql: "BIGINT", typ: codec.TypeLonglong, fam: fInt, keyable: true, gen: intGen(math.MinInt64, math.MaxInt64)}
	tTiny      = &colType{name: "tinyint", sql: "TINYINT", typ: codec.TypeTiny, fam: fInt, keyable: true, gen: intGen(-128, 127)}
	tMedium    = &colType{name: "mediumint", sql: "MEDIUMINT", typ: codec.TypeInt24, fam: fInt, keyable: true, gen: intGen(-8388608, 8388607)}
	tSmallU    = &colType{name: "smallint_u", sql: "SMALLINT UNSIGNED", typ: codec.TypeShort, fam: fUint, flags: codec.FlagUnsigned, keyable: true, gen: uintGen(65535)}
	tIntU      = &colType{name: "int_u", sql: "INT UNSIGNED", typ: codec.TypeLong, fam: fUint, flags: codec.FlagUnsigned, keyable: true, gen: uintGen(math.MaxUint32)}
	tBigU      = &colType{name: "bigint_u", sql: "BIGINT UNSIGNED", typ: codec.TypeLonglong, fam: fUint, flags: codec.FlagUnsigned, keyable: true, gen: uintGen(math.MaxUint64)}
	tFloat     = &colType{name: "float", sql: "FLOAT", typ: codec.TypeFloat, fam: fF32, gen: floatGen(true)}
	tDouble    = &colType{name: "double", sql: "DOUBLE", typ: codec.TypeDouble, fam: fF64, gen: floatGen(false)}
	tDec       = &colType{name: "decimal", sql: "DECIMAL(12,3)", typ: codec.TypeNewDecimal, fam: fDec, keyable: true, gen: decGen}
	tDec16     = &colType{name: "decimal16", sql: "DECIMAL(16,3)", typ: codec.TypeNewDecimal, fam: fDec, keyable: true, gen: decGen}
	tVarchar   = &colType{name: "varchar", sql: "VARCHAR(32)", typ: codec.TypeVarchar, fam: fStr, text: true, keyable: true, gen: strGen(32)}
	tVarchar64 = &colType{name: "varchar64", sql: "VARCHAR(64)", typ: codec.TypeVarchar, fam: fStr, text: true, keyable: true, gen: strGen(64)}
	tChar      = &colType{name: "char", sql: "CHAR(8)", typ: codec.TypeString, fam: fStr, text: true, keyable: true, gen: strGen(8)}
	tText      = &colType{name: "text", sql: "TEXT", typ: codec.TypeBlob, fam: fStr, text: true, gen: strGen(200)}
	tVarbin    = &colType{name: "varbinary", sql: "VARBINARY(16)", typ: codec.TypeVarchar, fam: fBytes, flags: codec.FlagBinary, keyable: true, gen: bytesGen(16)}
	tBlob      = &colType{name: "blob", sql: "BLOB", typ: codec.TypeBlob, fam: fBytes, flags: codec.FlagBinary, gen: bytesGen(300)}
	tDate      = &colType{name: "date", sql: "DATE", typ: codec.TypeDate, fam: fDate, keyable: true, gen: dateGen}
	tDT3       = &colType{name: "datetime3", sql: "DATETIME(3)", typ: codec.TypeDatetime, fam: fDT, keyable: true, fsp: 3, gen: dtGen(3, false)}
	tDT6       = &colType{name: "datetime6", sql: "DATETIME(6)", typ: codec.TypeDatetime, fam: fDT, keyable: true, fsp: 6, gen: dtGen(6, false)}
	tTS        = &colType{name: "timestamp", sql: "TIMESTAMP(6)", typ: codec.TypeTimestamp, fam: fDT, fsp: 6, gen: dtGen(6, true)}
	tTime2     = &colType{name: "time2", sql: "TIME(2)", typ: codec.TypeDuration, fam: fTime, fsp: 2, gen: timeGen(2)}
	tTime6     = &colType{name: "time6", sql: "TIME(6)", typ: codec.TypeDuration, fam: fTime, fsp: 6, gen: timeGen(6)}
	tYear      = &colType{name: "year", sql: "YEAR", typ: codec.TypeYear, fam: fYear, keyable: true, gen: func(r *rand.Rand, small, _ bool) codec.Value {
		if small {
			return codec.YearValue(uint16(2000 + r.IntN(4)))
		}
		return codec.YearValue(uint16(1901 + r.IntN(255)))
	}}
	tBit = &colType{name: "bit", sql: "BIT(10)", typ: codec.TypeBit, fam: fBit, flags: codec.FlagUnsigned, gen: func(r *rand.Rand, _, _ bool) codec.Value {
		return codec.BitValue(r.Uint64N(1024))
	}}
	tEnum = &colType{name: "enum", sql: "ENUM('a','b','c')", typ: codec.TypeEnum, fam: fEnum, text: true, gen: func(r *rand.Rand, _, _ bool) codec.Value {
		return codec.EnumValue(1 + r.Uint64N(3))
	}}
	tSet = &colType{name: "set", sql: "SET('x','y','z')", typ: codec.TypeSet, fam: fSet, text: true, gen: func(r *rand.Rand, _, _ bool) codec.Value {
		return codec.SetValue(r.Uint64N(8))
	}}
	tJSON = &colType{name: "json", sql: "JSON", typ: codec.TypeJSON, fam: fJSON, gen: func(r *rand.Rand, _, _ bool) codec.Value {
		return codec.JSONValue(jsonDocs[r.IntN(len(jsonDocs))])
	}}
)

func floatGen(f32 bool) func(r *rand.Rand, small, nul bool) codec.Value {
	return func(r *rand.Rand, _, _ bool) codec.Value {
		var f float64
		switch r.IntN(8) {
		case 0:
			f = math.Copysign(0, -1)
		case 1:
			if !f32 {
				f = 1e300
			} else {
				f = 1.5e30
			}
		default:
			f = float64(r.IntN(4001)-2000) / 8
		}
		if f32 {
			return codec.Float32Value(float32(f))
		}
		return codec.Float64Value(f)
	}
}

// allTypes are the types a new column takes; widenings reach the rest.
var allTypes = []*colType{tInt, tBigint, tTiny, tMedium, tSmallU, tIntU, tBigU, tFloat, tDouble, tDec, tVarchar, tChar,
	tText, tVarbin, tBlob, tDate, tDT3, tTS, tTime2, tYear, tBit, tEnum, tSet, tJSON}

// keyTypes are the types a key column takes.
var keyTypes = []*colType{tInt, tBigint, tTiny, tSmallU, tBigU, tDec, tVarchar, tChar, tVarbin, tDate, tDT3, tYear}

// widening is a MODIFY COLUMN MySQL applies to every value without loss,
// and conv what it makes of a value of the old type.
type widening struct {
	from, to *colType
	conv     func(codec.Value) codec.Value
}

func same(v codec.Value) codec.Value { return v }

var widenings = []widening{
	{tTiny, tInt, same}, {tInt, tBigint, same}, {tMedium, tBigint, same}, {tSmallU, tIntU, same}, {tIntU, tBigU, same},
	{tFloat, tDouble, func(v codec.Value) codec.Value { return codec.Float64Value(float64(v.Float32())) }},
	{tDec, tDec16, same},
	{tVarchar, tVarchar64, same}, {tChar, tVarchar, same}, {tVarchar, tText, same},
	{tInt, tVarchar, func(v codec.Value) codec.Value { return codec.StringValue(fmt.Sprint(v.Int())) }},
	{tBigint, tVarchar64, func(v codec.Value) codec.Value { return codec.StringValue(fmt.Sprint(v.Int())) }},
	{tDT3, tDT6, func(v codec.Value) codec.Value { d := v.DateTime(); d.Fsp = 6; return codec.DatetimeValue(d) }},
	{tDate, tDT3, func(v codec.Value) codec.Value { d := v.DateTime(); d.Fsp = 3; return codec.DatetimeValue(d) }},
	{tTime2, tTime6, func(v codec.Value) codec.Value { d := v.Duration(); d.Fsp = 6; return codec.DurationValue(d) }},
}
