package sqlsink_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/sqlsink"
	"github.com/redokit/redokit/codec"
)

const valsDDL = "CREATE TABLE vals (id INT NOT NULL PRIMARY KEY, i BIGINT, u BIGINT UNSIGNED, f FLOAT, d DOUBLE, dc DECIMAL(30,4), " +
	"s VARCHAR(64), b VARBINARY(64), dt DATE, dtm DATETIME(6), ts TIMESTAMP(6) NULL DEFAULT NULL, tm TIME(3), y YEAR, " +
	"bt BIT(64), e ENUM('a','b','c'), st SET('x','y','z'), j JSON) DEFAULT CHARSET=utf8mb4"

// valsRow is one row of the value test: the values of every column after id,
// and what each dialect reads back (see valsSelect).
type valsRow struct {
	vals                    []codec.Value
	mysql, sqlite, postgres string // the columns read back, joined by "|"
	// notPostgres: the row holds a value PostgreSQL cannot (a zero date):
	// its insert must fail, naming the table.
	notPostgres bool
}

var valsCols = []struct {
	name string
	typ  codec.Type
}{
	{"i", codec.TypeLonglong}, {"u", codec.TypeLonglong}, {"f", codec.TypeFloat}, {"d", codec.TypeDouble},
	{"dc", codec.TypeNewDecimal}, {"s", codec.TypeVarchar}, {"b", codec.TypeVarchar}, {"dt", codec.TypeDate},
	{"dtm", codec.TypeDatetime}, {"ts", codec.TypeTimestamp}, {"tm", codec.TypeDuration}, {"y", codec.TypeYear},
	{"bt", codec.TypeBit}, {"e", codec.TypeEnum}, {"st", codec.TypeSet}, {"j", codec.TypeJSON},
}

// valsSelect reads the columns back as text: MySQL's own rendering (numbers
// of BIT, ENUM and SET), SQLite's stored values.
var valsSelect = map[sqlsink.Dialect]string{
	sqlsink.MySQL: "SELECT i, u, f, d, dc, s, HEX(b), dt, dtm, ts, tm, y, bt+0, e+0, st+0, j FROM %s ORDER BY id",
	// (hex(NULL) is '' in SQLite; the CASTs keep the driver from parsing
	// DATE columns into times.)
	sqlsink.SQLite: "SELECT i, u, f, d, dc, s, iif(b IS NULL, NULL, hex(b)), CAST(dt AS TEXT), CAST(dtm AS TEXT), CAST(ts AS TEXT), tm, y, bt, e, st, j FROM %s ORDER BY id",
	// PostgreSQL's own text of each value.
	sqlsink.Postgres: "SELECT i::text, u::text, f::text, d::text, dc::text, s, upper(encode(b, 'hex')), dt::text, dtm::text, ts::text, tm::text, y::text, bt::text, e::text, st::text, j::text FROM %s ORDER BY id",
}

func dt(y uint16, mo, d, h, mi, s uint8, us uint32, fsp uint8) codec.DateTime {
	return codec.DateTime{Year: y, Month: mo, Day: d, Hour: h, Minute: mi, Second: s, Microsecond: us, Fsp: fsp}
}

var valsRows = []valsRow{
	{ // ordinary values
		vals: []codec.Value{codec.IntValue(-42), codec.UintValue(42), codec.Float32Value(1.5), codec.Float64Value(2.25),
			codec.DecimalValue("12.3400"), codec.StringValue("héllo"), codec.BytesValue([]byte{0, 0xff, 0x10}),
			codec.DateValue(dt(2024, 2, 29, 0, 0, 0, 0, 0)), codec.DatetimeValue(dt(2024, 2, 29, 23, 59, 59, 123456, 6)),
			codec.TimestampValue(dt(2024, 1, 2, 3, 4, 5, 6, 6)), codec.DurationValue(codec.Duration{Micros: -(12*3600+34*60+56)*1e6 - 789000, Fsp: 3}),
			codec.YearValue(2024), codec.BitValue(5), codec.EnumValue(2), codec.SetValue(5), codec.JSONValue(`{"a": [1, 2]}`)},
		mysql:    `-42|42|1.5|2.25|12.3400|héllo|00FF10|2024-02-29|2024-02-29 23:59:59.123456|2024-01-02 03:04:05.000006|-12:34:56.789|2024|5|2|5|{"a": [1, 2]}`,
		postgres: `-42|42|1.5|2.25|12.3400|héllo|00FF10|2024-02-29|2024-02-29 23:59:59.123456|2024-01-02 03:04:05.000006+00|-12:34:56.789|2024|5|2|5|{"a": [1, 2]}`,
		sqlite:   `-42|42|1.5|2.25|12.3400|héllo|00FF10|2024-02-29|2024-02-29 23:59:59.123456|2024-01-02 03:04:05.000006|-12:34:56.789|2024|5|2|5|{"a": [1, 2]}`,
	},
	{ // extremes: every unsigned bit, the zero date, MySQL's range ends
		vals: []codec.Value{codec.IntValue(math.MinInt64), codec.UintValue(math.MaxUint64), codec.Float32Value(0.1), codec.Float64Value(-1.7976931348623157e308),
			codec.DecimalValue("-99999999999999999999999999.9999"), codec.StringValue(`it's \ "q"`), codec.BytesValue([]byte{'\'', '\\', 0}),
			codec.DateValue(dt(0, 0, 0, 0, 0, 0, 0, 0)), codec.DatetimeValue(dt(9999, 12, 31, 23, 59, 59, 999999, 6)),
			codec.TimestampValue(dt(2038, 1, 19, 3, 14, 7, 999999, 6)), codec.DurationValue(codec.Duration{Micros: (838*3600 + 59*60 + 59) * 1e6, Fsp: 3}),
			codec.YearValue(2155), codec.BitValue(math.MaxUint64), codec.EnumValue(3), codec.SetValue(7), codec.JSONValue(`"str"`)},
		mysql:       `-9223372036854775808|18446744073709551615|0.1|-1.7976931348623157e+308|-99999999999999999999999999.9999|it's \ "q"|275C00|0000-00-00|9999-12-31 23:59:59.999999|2038-01-19 03:14:07.999999|838:59:59.000|2155|18446744073709551615|3|7|"str"`,
		notPostgres: true,
		sqlite:      `-9223372036854775808|18446744073709551615|0.10000000149011612|-1.7976931348623157e+308|-99999999999999999999999999.9999|it's \ "q"|275C00|0000-00-00|9999-12-31 23:59:59.999999|2038-01-19 03:14:07.999999|838:59:59.000|2155|18446744073709551615|3|7|"str"`,
	},
	{ // empty string and empty bytes are not NULL; the JSON null is not NULL
		vals: []codec.Value{codec.IntValue(math.MaxInt64), codec.UintValue(math.MaxInt64), codec.Float32Value(-2.5e-3), codec.Float64Value(0),
			codec.DecimalValue("0.0000"), codec.StringValue(""), codec.BytesValue(nil),
			codec.DateValue(dt(1000, 1, 1, 0, 0, 0, 0, 0)), codec.DatetimeValue(dt(1000, 1, 1, 0, 0, 0, 0, 0)),
			codec.TimestampValue(dt(1970, 1, 1, 0, 0, 1, 0, 0)), codec.DurationValue(codec.Duration{}),
			codec.YearValue(0), codec.BitValue(0), codec.EnumValue(1), codec.SetValue(0), codec.JSONValue(`null`)},
		mysql:    `9223372036854775807|9223372036854775807|-0.0025|0|0.0000|||1000-01-01|1000-01-01 00:00:00.000000|1970-01-01 00:00:01.000000|00:00:00.000|0|0|1|0|null`,
		postgres: `9223372036854775807|9223372036854775807|-0.0025|0|0.0000|||1000-01-01|1000-01-01 00:00:00|1970-01-01 00:00:01+00|00:00:00|0|0|1|0|null`,
		sqlite:   `9223372036854775807|9223372036854775807|-0.0024999999441206455|0|0.0000|||1000-01-01|1000-01-01 00:00:00|1970-01-01 00:00:01|00:00:00|0|0|1|0|null`,
	},
	{ // the extremes again with a date PostgreSQL holds, and -0
		vals: []codec.Value{codec.IntValue(math.MinInt64), codec.UintValue(math.MaxUint64), codec.Float32Value(float32(math.Copysign(0, -1))), codec.Float64Value(math.SmallestNonzeroFloat64),
			codec.DecimalValue("-99999999999999999999999999.9999"), codec.StringValue("emoji 😀 and \\ and 'q'"), codec.BytesValue([]byte{'\'', '\\', 0}),
			codec.DateValue(dt(1, 1, 1, 0, 0, 0, 0, 0)), codec.DatetimeValue(dt(9999, 12, 31, 23, 59, 59, 999999, 6)),
			codec.TimestampValue(dt(2038, 1, 19, 3, 14, 7, 999999, 6)), codec.DurationValue(codec.Duration{Micros: -(838*3600 + 59*60 + 59) * 1e6, Fsp: 3}),
			codec.YearValue(1901), codec.BitValue(math.MaxUint64), codec.EnumValue(3), codec.SetValue(7), codec.JSONValue(`12`)},
		// MariaDB has no negative zero; SQLite and PostgreSQL keep it.
		mysql:    `-9223372036854775808|18446744073709551615|0|5e-324|-99999999999999999999999999.9999|emoji 😀 and \ and 'q'|275C00|0001-01-01|9999-12-31 23:59:59.999999|2038-01-19 03:14:07.999999|-838:59:59.000|1901|18446744073709551615|3|7|12`,
		sqlite:   `-9223372036854775808|18446744073709551615|-0|5e-324|-99999999999999999999999999.9999|emoji 😀 and \ and 'q'|275C00|0001-01-01|9999-12-31 23:59:59.999999|2038-01-19 03:14:07.999999|-838:59:59.000|1901|18446744073709551615|3|7|12`,
		postgres: `-9223372036854775808|18446744073709551615|-0|5e-324|-99999999999999999999999999.9999|emoji 😀 and \ and 'q'|275C00|0001-01-01|9999-12-31 23:59:59.999999|2038-01-19 03:14:07.999999+00|-838:59:59|1901|18446744073709551615|3|7|12`,
	},
	{ // NULL everywhere
		vals:     make([]codec.Value, 16),
		mysql:    strings.Repeat("NULL|", 15) + "NULL",
		sqlite:   strings.Repeat("NULL|", 15) + "NULL",
		postgres: strings.Repeat("NULL|", 15) + "NULL",
	},
}

func TestValuesRoundTrip(t *testing.T) {
	forEachDialect(t, valuesRoundTrip)
}

// TestValuesRoundTripCopy: PostgreSQL writes a batch of fresh inserts by
// COPY (copy.go), which must store every value as the upsert stores it
// (the same text read back), and a value the upsert refuses must fail as
// it does, naming the table (the COPY fails, and its rows go to the
// upserts).
func TestValuesRoundTripCopy(t *testing.T) {
	e := newEnv(t, sqlsink.Postgres)
	defer sqlsink.SetMinCopyRows(sqlsink.SetMinCopyRows(1))
	copied0, fellBack0 := sqlsink.CopyStats()
	valuesRoundTrip(t, e)
	copied, fellBack := sqlsink.CopyStats()
	if copied == copied0 || fellBack == fellBack0 {
		t.Errorf("%d COPYs, %d of them fell back to the upserts: want both (the rows PostgreSQL holds, and the zero date it refuses)",
			copied-copied0, fellBack-fellBack0)
	}
}

func valuesRoundTrip(t *testing.T, e *env) {
	{
		events := []*codec.Event{ddlEv(10, e.schema, "vals", codec.ActionCreateTable, valsDDL)}
		var rejected []*codec.Event
		var held []valsRow
		for i, r := range valsRows {
			img := []codec.Column{icol("id", int64(i+1), pk)}
			for j, c := range valsCols {
				img = append(img, codec.Column{Name: c.name, Type: c.typ, Flags: codec.FlagNullable, Value: r.vals[j]})
			}
			if e.dialect == sqlsink.Postgres && r.notPostgres {
				rejected = append(rejected, rowEv(12, e.schema, "vals", nil, img))
				continue
			}
			held = append(held, r)
			events = append(events, rowEv(11, e.schema, "vals", nil, img))
		}
		e.run(events, nil)
		for _, ev := range rejected {
			_, err := apply.Run(context.Background(), sliceSource([]*codec.Event{ev}), e.open(nil), nil)
			var se *apply.StatementError
			if !errors.As(err, &se) || se.Table.Name != "vals" {
				t.Errorf("a value PostgreSQL cannot hold: err = %v, want a StatementError naming the table", err)
			}
		}
		rows, err := e.admin.Query(strings.Replace(valsSelect[e.dialect], "%s", e.table("vals"), 1))
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		i := 0
		for ; rows.Next(); i++ {
			got := scanJoined(t, rows)
			want := held[i].mysql
			switch e.dialect {
			case sqlsink.SQLite:
				want = held[i].sqlite
			case sqlsink.Postgres:
				want = held[i].postgres
			}
			if got != want {
				t.Errorf("row %d:\n got %s\nwant %s", i+1, got, want)
			}
		}
		if i != len(held) {
			t.Fatalf("%d rows read back, want %d", i, len(held))
		}
	}
}
