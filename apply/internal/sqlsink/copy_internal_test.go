package sqlsink

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
)

// TestCopyValueIsArg: the COPY data of a value (appendCopyValue, which
// skips the argument's allocation) is the COPY text of the argument the
// upsert binds (Dialect.arg), for every kind and column type, refusals
// included.
func TestCopyValueIsArg(t *testing.T) {
	dt := codec.DateTime{Year: 2024, Month: 2, Day: 29, Hour: 23, Minute: 59, Second: 59, Microsecond: 123456, Fsp: 6}
	vals := []codec.Value{
		{}, codec.IntValue(0), codec.IntValue(-42), codec.IntValue(math.MinInt64), codec.IntValue(math.MaxInt64),
		codec.UintValue(7), codec.UintValue(math.MaxInt64), codec.UintValue(math.MaxInt64 + 1), codec.UintValue(math.MaxUint64),
		codec.BitValue(math.MaxUint64), codec.BitValue(5), codec.EnumValue(2), codec.SetValue(1 << 63), codec.YearValue(2155), codec.YearValue(0),
		codec.Float32Value(0.1), codec.Float32Value(float32(math.Copysign(0, -1))), codec.Float32Value(math.MaxFloat32),
		codec.Float64Value(0.1), codec.Float64Value(math.SmallestNonzeroFloat64), codec.Float64Value(-1.7976931348623157e308),
		codec.Float64Value(math.Inf(1)), codec.Float64Value(math.NaN()),
		codec.DecimalValue("-12.3400"), codec.StringValue(""), codec.StringValue("tab\there\nnew\\line\rcr é😀"),
		codec.StringValue("nul\x00inside"), codec.JSONValue(`{"a": "b\\n"}`),
		codec.BytesValue(nil), codec.BytesValue([]byte{0, '\\', '\t', 0xff}),
		codec.DateValue(dt), codec.DatetimeValue(dt), codec.TimestampValue(dt),
		codec.DurationValue(codec.Duration{Micros: -(838*3600 + 59*60 + 59) * 1e6, Fsp: 3}),
	}
	oids := []uint32{oidBytea, oidInt2, oidInt4, oidInt8, oidFloat4, oidFloat8, oidNumeric, 25, 1043, 1082, 1114, 1184, 1186, 114}
	for _, v := range vals {
		for _, oid := range oids {
			got, gok := appendCopyValue([]byte("x\t"), v, oid)
			want, wok := appendCopyField([]byte("x\t"), Postgres.arg(v), oid)
			if gok != wok || gok && string(got) != string(want) {
				t.Errorf("%v (%v) into type %d: %q, %v; the argument's %q, %v", v, v.Kind(), oid, got, gok, want, wok)
			}
		}
	}
}

// TestCopyField: what COPY's text format reads back as the upsert's
// parameter, and what it leaves to the upsert.
func TestCopyField(t *testing.T) {
	for _, c := range []struct {
		arg  any
		oid  uint32
		want string // "" for a refusal
	}{
		{nil, 25, `\N`},
		{"a\\b\tc\nd\re", 25, `a\\b\tc\nd\re`},
		{`\N`, 25, `\\N`}, // the text, not NULL
		{`\.`, 25, `\\.`}, // not the end of the data
		{"x\x00y", 25, ""},
		{"end\x00", 25, ""},
		{"\\\t\n", 25, `\\\t\n`},
		{"tail\\", 25, `tail\\`},
		{int64(-5), oidInt4, "-5"},
		{int64(5), 1043, ""}, // an integer into varchar: pgx's text of it, not ours
		{0.1, oidFloat8, "0.1"},
		{float64(float32(0.1)), oidFloat4, "0.1"},
		{0.1, oidFloat4, "0.1"}, // rounded to float32 first, as pgx binds it
		{1e300, oidFloat4, ""},  // float32(1e300) is +Inf: pgx's error, not ours
		{math.Copysign(0, -1), oidFloat8, "-0"},
		{math.Inf(-1), oidFloat8, ""},
		{0.5, oidNumeric, ""},
		{[]byte{0, 0xab}, oidBytea, `\\x00ab`},
		{[]byte("a"), 25, ""},
	} {
		got, ok := appendCopyField(nil, c.arg, c.oid)
		if c.want == "" {
			if ok {
				t.Errorf("%#v into type %d: %q, want it left to the upsert", c.arg, c.oid, got)
			}
			continue
		}
		if !ok || string(got) != c.want {
			t.Errorf("%#v into type %d: %q, %v; want %q", c.arg, c.oid, got, ok, c.want)
		}
	}
	if got, _ := appendCopyField(nil, strings.Repeat("é", 3), 25); string(got) != "ééé" {
		t.Errorf("UTF-8 text: %q", got)
	}
}

// TestDDLTables: a DDL moves the tables it names (as its table, among its
// tables, either side of a rename, in any case) to a new statement
// generation and leaves the others; one whose tables cannot be told moves
// them all.
func TestDDLTables(t *testing.T) {
	tn := func(name string) codec.TableName { return codec.TableName{Schema: "s", Name: name} }
	tb := func(name string) apply.Table { return apply.Table{Schema: "s", Name: name} }
	names := []string{"a", "b", "c", "d", "tmp"}
	gens := func() map[string]uint64 {
		m := map[string]uint64{}
		for _, n := range names {
			m[n] = pgGen(tb(n))
		}
		return m
	}
	for _, c := range []struct {
		ddl   codec.DDL
		moved []string // nil: all
	}{
		{codec.DDL{Table: tn("A"), Type: codec.ActionModifyColumn, Query: "ALTER TABLE A MODIFY c VARCHAR(10)"}, []string{"a"}},
		{codec.DDL{Table: tn("a"), Type: codec.ActionRenameTable, Query: "RENAME TABLE a TO tmp, b TO a, tmp TO b"}, []string{"a", "b", "tmp"}},
		{codec.DDL{Table: tn("c"), Type: codec.ActionRenameTable, Query: "ALTER TABLE c RENAME TO d"}, []string{"c", "d"}},
		{codec.DDL{Table: tn("c"), Type: codec.ActionDropTable, Query: "DROP TABLE c, d",
			Tables: []codec.DDLTable{{TableName: tn("c")}, {TableName: tn("d")}}}, []string{"c", "d"}},
		{codec.DDL{Table: codec.TableName{Schema: "s"}, Type: codec.ActionDropSchema, Query: "DROP DATABASE s"}, nil},
		{codec.DDL{Table: tn("a"), Type: codec.ActionRenameTable, Query: "RENAME TABLE a TO"}, nil},
	} {
		before := gens()
		tables, all := ddlTables(&c.ddl)
		pgDDL(tables, all)
		after := gens()
		for _, n := range names {
			moved := c.moved == nil || slices.Contains(c.moved, n)
			if moved == (after[n] == before[n]) || after[n] < before[n] {
				t.Errorf("%s: table %s went from generation %d to %d, want moved=%v", c.ddl.Query, n, before[n], after[n], moved)
			}
		}
	}
}

// TestCopyTextEscapes: appendCopyText, which skips plain bytes eight at a
// time, escapes every text as a strings.Replacer of the four escapes does,
// at every length and position, bytes with the high bit set included.
func TestCopyTextEscapes(t *testing.T) {
	escape := strings.NewReplacer("\\", `\\`, "\n", `\n`, "\r", `\r`, "\t", `\t`)
	ref := func(x []byte) (string, bool) {
		if slices.Contains(x, 0) {
			return "", false
		}
		return escape.Replace(string(x)), true
	}
	alphabet := []byte{0, '\\', '\n', '\r', '\t', 0x1f, 0x20, 'a', 0x5b, 0x5d, 0x7f, 0x80, 0x9c, 0xdc, 0xff}
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 20000 {
		x := make([]byte, rng.IntN(40))
		for i := range x {
			if rng.IntN(4) == 0 {
				x[i] = alphabet[rng.IntN(len(alphabet))]
			} else {
				x[i] = 'a' + byte(rng.IntN(26))
			}
		}
		want, wok := ref(x)
		got, ok := appendCopyText([]byte("p"), x)
		if ok != wok || ok && string(got) != "p"+want {
			t.Fatalf("case %d, %q: %q, %v; want %q, %v", n, x, got, ok, "p"+want, wok)
		}
		sgot, sok := appendCopyText(nil, string(x))
		if sok != ok || ok && string(sgot) != want {
			t.Fatalf("case %d, %q as a string: %q, %v", n, x, sgot, sok)
		}
	}
}
