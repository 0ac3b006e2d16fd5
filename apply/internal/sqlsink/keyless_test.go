package sqlsink_test

import (
	"slices"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/sqlsink"
	"github.com/redokit/redokit/codec"
)

// Keyless tables (issue 15): a delete or an update of a table without a key
// must find its row by every column, exactly — floats and JSON included,
// NULL-safe — and change one row. The trial's sink left the FLOAT, DOUBLE
// and JSON columns out of the match, and so deleted whichever row came
// first among those that differ only there. In each case below the row the
// log changes is the second one inserted, so that "the first match" is the
// wrong one.

func klDouble(name string, f float64) codec.Column {
	return codec.Column{Name: name, Type: codec.TypeDouble, Flags: codec.FlagNullable, Value: codec.Float64Value(f)}
}

func klFloat(name string, f float32) codec.Column {
	return codec.Column{Name: name, Type: codec.TypeFloat, Flags: codec.FlagNullable, Value: codec.Float32Value(f)}
}

func klJSON(name, doc string) codec.Column {
	return codec.Column{Name: name, Type: codec.TypeJSON, Flags: codec.FlagNullable, Value: codec.JSONValue(doc)}
}

func klInt(name string, v int64) codec.Column { return icol(name, v, codec.FlagNullable) }

func klRow(cols ...codec.Column) []codec.Column { return cols }

type keylessCase struct {
	name string
	ddl  string
	// rows are inserted at ts 11, in this order; then each change is one
	// transaction (ts 12, 13, …): a delete (post nil), an update, or an
	// insert (pre nil).
	rows    [][]codec.Column
	changes [][2][]codec.Column
	want    []string // env.dump of the end state
	// wantSQLite, when set, is SQLite's dump (FLOAT: SQLite holds the
	// float32 as a REAL, whose text has 17 digits where MariaDB's has 6).
	wantSQLite []string
}

var keylessCases = []keylessCase{
	{
		name: "double-delete",
		ddl:  "CREATE TABLE kl (d DOUBLE, v VARCHAR(8))",
		rows: [][]codec.Column{
			klRow(klDouble("d", 0.1), scol("v", "x")),
			klRow(klDouble("d", 0.30000000000000004), scol("v", "x")),
			klRow(klDouble("d", 0.3), scol("v", "x")),
		},
		changes: [][2][]codec.Column{{klRow(klDouble("d", 0.30000000000000004), scol("v", "x")), nil}},
		want:    []string{"0.1|x", "0.3|x"},
	},
	{
		name: "double-update",
		ddl:  "CREATE TABLE kl (d DOUBLE, v VARCHAR(8))",
		rows: [][]codec.Column{
			klRow(klDouble("d", 0.1), scol("v", "x")),
			klRow(klDouble("d", 0.30000000000000004), scol("v", "x")),
		},
		changes: [][2][]codec.Column{{klRow(klDouble("d", 0.30000000000000004), scol("v", "x")), klRow(klDouble("d", 0.30000000000000004), scol("v", "y"))}},
		want:    []string{"0.1|x", "0.30000000000000004|y"},
	},
	{
		name: "float-delete",
		ddl:  "CREATE TABLE kl (f FLOAT, v VARCHAR(8))",
		rows: [][]codec.Column{
			klRow(klFloat("f", 0.5), scol("v", "x")),
			klRow(klFloat("f", 0.1), scol("v", "x")),
		},
		changes: [][2][]codec.Column{{klRow(klFloat("f", 0.1), scol("v", "x")), nil}},
		want:    []string{"0.5|x"},
	},
	{
		name: "float-update",
		ddl:  "CREATE TABLE kl (f FLOAT, v VARCHAR(8))",
		rows: [][]codec.Column{
			klRow(klFloat("f", 0.5), scol("v", "x")),
			klRow(klFloat("f", 0.1), scol("v", "x")),
		},
		changes:    [][2][]codec.Column{{klRow(klFloat("f", 0.1), scol("v", "x")), klRow(klFloat("f", 0.1), scol("v", "y"))}},
		want:       []string{"0.1|y", "0.5|x"},
		wantSQLite: []string{"0.10000000149011612|y", "0.5|x"},
	},
	{
		name: "json-delete",
		ddl:  "CREATE TABLE kl (j JSON, v VARCHAR(8))",
		rows: [][]codec.Column{
			klRow(klJSON("j", `{"a": 1}`), scol("v", "x")),
			klRow(klJSON("j", `{"a": 2}`), scol("v", "x")),
			klRow(klJSON("j", `12`), scol("v", "x")),
		},
		changes: [][2][]codec.Column{{klRow(klJSON("j", `{"a": 2}`), scol("v", "x")), nil}},
		want:    []string{`12|x`, `{"a": 1}|x`},
	},
	{
		name: "json-update",
		ddl:  "CREATE TABLE kl (j JSON, v VARCHAR(8))",
		rows: [][]codec.Column{
			klRow(klJSON("j", `[1]`), scol("v", "x")),
			klRow(klJSON("j", `[2]`), scol("v", "x")),
		},
		changes: [][2][]codec.Column{{klRow(klJSON("j", `[2]`), scol("v", "x")), klRow(klJSON("j", `[2]`), scol("v", "y"))}},
		want:    []string{`[1]|x`, `[2]|y`},
	},
	{
		// NULL-safe: the rows differ in whether the DOUBLE is NULL.
		name: "null-double-delete",
		ddl:  "CREATE TABLE kl (a INT, d DOUBLE, v VARCHAR(8))",
		rows: [][]codec.Column{
			klRow(nullCol("a", codec.TypeLong), klDouble("d", 0.5), scol("v", "x")),
			klRow(nullCol("a", codec.TypeLong), nullCol("d", codec.TypeDouble), scol("v", "x")),
		},
		changes: [][2][]codec.Column{{klRow(nullCol("a", codec.TypeLong), nullCol("d", codec.TypeDouble), scol("v", "x")), nil}},
		want:    []string{"NULL|0.5|x"},
	},
	{
		name: "double-not-null-delete",
		ddl:  "CREATE TABLE kl (a INT, d DOUBLE, v VARCHAR(8))",
		rows: [][]codec.Column{
			klRow(nullCol("a", codec.TypeLong), nullCol("d", codec.TypeDouble), scol("v", "x")),
			klRow(nullCol("a", codec.TypeLong), klDouble("d", 0.5), scol("v", "x")),
		},
		changes: [][2][]codec.Column{{klRow(nullCol("a", codec.TypeLong), klDouble("d", 0.5), scol("v", "x")), nil}},
		want:    []string{"NULL|NULL|x"},
	},
	{
		// The JSON null literal is not SQL NULL.
		name: "json-null-literal-delete",
		ddl:  "CREATE TABLE kl (j JSON, v VARCHAR(8))",
		rows: [][]codec.Column{
			klRow(nullCol("j", codec.TypeJSON), scol("v", "x")),
			klRow(klJSON("j", `null`), scol("v", "x")),
		},
		changes: [][2][]codec.Column{{klRow(klJSON("j", `null`), scol("v", "x")), nil}},
		want:    []string{"NULL|x"},
	},
	{
		name: "null-json-delete",
		ddl:  "CREATE TABLE kl (j JSON, v VARCHAR(8))",
		rows: [][]codec.Column{
			klRow(klJSON("j", `null`), scol("v", "x")),
			klRow(nullCol("j", codec.TypeJSON), scol("v", "x")),
		},
		changes: [][2][]codec.Column{{klRow(nullCol("j", codec.TypeJSON), scol("v", "x")), nil}},
		want:    []string{"null|x"},
	},
	{
		// Identical rows cannot be told apart: a delete takes one of them.
		name: "identical-delete-one",
		ddl:  "CREATE TABLE kl (a INT, d DOUBLE, j JSON, v VARCHAR(8))",
		rows: [][]codec.Column{
			klRow(klInt("a", 1), klDouble("d", 0.1), klJSON("j", `{"k": [1]}`), scol("v", "x")),
			klRow(klInt("a", 1), klDouble("d", 0.1), klJSON("j", `{"k": [1]}`), scol("v", "x")),
		},
		changes: [][2][]codec.Column{{klRow(klInt("a", 1), klDouble("d", 0.1), klJSON("j", `{"k": [1]}`), scol("v", "x")), nil}},
		want:    []string{`1|0.1|{"k": [1]}|x`},
	},
	{
		name: "identical-update-one",
		ddl:  "CREATE TABLE kl (a INT, d DOUBLE, v VARCHAR(8))",
		rows: [][]codec.Column{
			klRow(klInt("a", 1), klDouble("d", 0.1), scol("v", "x")),
			klRow(klInt("a", 1), klDouble("d", 0.1), scol("v", "x")),
			klRow(klInt("a", 1), klDouble("d", 0.1), scol("v", "x")),
		},
		changes: [][2][]codec.Column{
			{klRow(klInt("a", 1), klDouble("d", 0.1), scol("v", "x")), klRow(klInt("a", 1), klDouble("d", 0.1), scol("v", "y"))},
			{klRow(klInt("a", 1), klDouble("d", 0.1), scol("v", "x")), nil},
		},
		want: []string{"1|0.1|x", "1|0.1|y"},
	},
}

// keylessEvents is c's log: the table at ts 10, the rows at 11, each change
// at its own ts after.
func keylessEvents(schema string, c keylessCase) []*codec.Event {
	evs := []*codec.Event{ddlEv(10, schema, "kl", codec.ActionCreateTable, c.ddl)}
	for _, r := range c.rows {
		evs = append(evs, rowEv(11, schema, "kl", nil, r))
	}
	for i, ch := range c.changes {
		evs = append(evs, rowEv(12+uint64(i), schema, "kl", ch[0], ch[1]))
	}
	return evs
}

func TestKeyless(t *testing.T) {
	for _, d := range allDialects {
		for _, c := range keylessCases {
			for _, o := range []*apply.Options{nil, {Workers: 1, BatchRows: 1, TxnRows: 1}} {
				name := d.String() + "/" + c.name + "/defaults"
				if o != nil {
					name = d.String() + "/" + c.name + "/tiny"
				}
				t.Run(name, func(t *testing.T) {
					e := newEnv(t, d)
					e.i15MustApply(nil, keylessEvents(e.schema, c), o)
					want := c.want
					if d == sqlsink.SQLite && c.wantSQLite != nil {
						want = c.wantSQLite
					}
					want = slices.Sorted(slices.Values(want))
					if got := e.dump("kl"); !slices.Equal(got, want) {
						t.Errorf("kl = %q, want %q", got, want)
					}
				})
			}
		}
	}
}
