package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/sqlite"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/codec/codectest"
)

// These tests apply events through apply.Run into a SQLite file and read
// back what SQLite holds: every value exactly as it was bound, and index
// names that follow their table.

const schema = "db"

func tn(table string) codec.TableName { return codec.TableName{Schema: schema, Name: table} }

func ddl(ts uint64, table string, action codec.ActionType, q string) codec.Event {
	return codectest.DDL(ts, tn(table), action, q, codectest.Affected(tn(table)))
}

func insert(ts uint64, table string, cols ...codec.Column) codec.Event {
	return codectest.Row(ts, tn(table), cols...)
}

const pk = codec.FlagPrimaryKey | codec.FlagHandleKey

func col(name string, t codec.Type, flags codec.ColumnFlag, v codec.Value) codec.Column {
	return codec.Column{Name: name, Type: t, Flags: flags, Value: v}
}

func intCol(name string, v int64, flags codec.ColumnFlag) codec.Column {
	return col(name, codec.TypeLonglong, flags, codec.IntValue(v))
}

// run applies events into a new SQLite file and returns the sink and a
// second connection to read it with.
func run(t *testing.T, events []codec.Event) (*sqlite.Sink, *sql.DB, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "down.db")
	sink, err := sqlite.Open(context.Background(), "sqlite://"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	_, err = apply.Run(context.Background(), apply.SliceSource(events), sink, nil)
	db, derr := sql.Open("sqlite", path)
	if derr != nil {
		t.Fatal(derr)
	}
	t.Cleanup(func() { db.Close() })
	return sink, db, err
}

// texts reads one text column of every row of q: SQLite's value and its
// storage class, as "value:class". The || ” keeps the driver from parsing
// values by their column's declared type.
func texts(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestExactUnsignedKey: four BIGINT UNSIGNED keys above 2^63-1, which as
// REALs were one key, are four rows of exact values.
func TestExactUnsignedKey(t *testing.T) {
	events := []codec.Event{ddl(10, "u", codec.ActionCreateTable, "CREATE TABLE u (id BIGINT UNSIGNED NOT NULL PRIMARY KEY, v VARCHAR(10))")}
	var want []string
	for i := uint64(4); i >= 1; i-- {
		id := math.MaxUint64 - i + 1
		events = append(events, insert(11, "u", col("id", codec.TypeLonglong, pk|codec.FlagUnsigned, codec.UintValue(id)),
			col("v", codec.TypeVarchar, codec.FlagNullable, codec.StringValue("x"))))
		want = append(want, strconv.FormatUint(id, 10)+":text")
	}
	// A small key is text too, and found again by an update's delete.
	events = append(events, insert(12, "u", col("id", codec.TypeLonglong, pk|codec.FlagUnsigned, codec.UintValue(7)),
		col("v", codec.TypeVarchar, codec.FlagNullable, codec.StringValue("a"))))
	events = append(events, codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{StartTs: 12, CommitTs: 13, Table: tn("u"),
		PreColumns: []codec.Column{col("id", codec.TypeLonglong, pk|codec.FlagUnsigned, codec.UintValue(7)), col("v", codec.TypeVarchar, codec.FlagNullable, codec.StringValue("a"))},
		Columns:    []codec.Column{col("id", codec.TypeLonglong, pk|codec.FlagUnsigned, codec.UintValue(8)), col("v", codec.TypeVarchar, codec.FlagNullable, codec.StringValue("b"))}}})
	_, db, err := run(t, events)
	if err != nil {
		t.Fatal(err)
	}
	want = append([]string{"8:text"}, want...)
	if got := texts(t, db, "SELECT id || ':' || typeof(id) FROM u ORDER BY length(id), id"); !slices.Equal(got, want) {
		t.Errorf("ids = %q, want %q", got, want)
	}
}

// TestExactValues: values SQLite's numeric affinities would change come
// back as they were bound.
func TestExactValues(t *testing.T) {
	const q = "CREATE TABLE v (id INT NOT NULL PRIMARY KEY, b BIT(64), d DECIMAL(65,30), s DECIMAL(5,2), j JSON, f DOUBLE, g FLOAT, " +
		"dt DATETIME(6), tm TIME, da DATE, y YEAR, st SET('a','b'), e ENUM('x','y'))"
	row := func(id int64, b uint64, d, s, j string, f float64, g float32) codec.Event {
		return insert(11, "v", intCol("id", id, pk), col("b", codec.TypeBit, codec.FlagNullable, codec.BitValue(b)),
			col("d", codec.TypeNewDecimal, codec.FlagNullable, codec.DecimalValue(d)),
			col("s", codec.TypeNewDecimal, codec.FlagNullable, codec.DecimalValue(s)),
			col("j", codec.TypeJSON, codec.FlagNullable, codec.JSONValue(j)),
			col("f", codec.TypeDouble, codec.FlagNullable, codec.Float64Value(f)),
			col("g", codec.TypeFloat, codec.FlagNullable, codec.Float32Value(g)),
			col("dt", codec.TypeDatetime, codec.FlagNullable, codec.DatetimeValue(codec.DateTime{Year: 2038, Month: 1, Day: 19, Hour: 3, Minute: 14, Second: 7, Microsecond: 999999, Fsp: 6})),
			col("tm", codec.TypeDuration, codec.FlagNullable, codec.DurationValue(codec.Duration{Micros: -(838*3600 + 59*60 + 59) * 1e6})),
			col("da", codec.TypeDate, codec.FlagNullable, codec.DateValue(codec.DateTime{Year: 2024, Month: 2, Day: 29})),
			col("y", codec.TypeYear, codec.FlagNullable, codec.YearValue(2155)),
			col("st", codec.TypeSet, codec.FlagNullable, codec.SetValue(3)),
			col("e", codec.TypeEnum, codec.FlagNullable, codec.EnumValue(2)))
	}
	const big = "99999999999999999999999999999999999.999999999999999999999999999999"
	_, db, err := run(t, []codec.Event{
		ddl(10, "v", codec.ActionCreateTable, q),
		row(1, math.MaxUint64, big, "1.50", "12", math.Copysign(0, -1), float32(math.Copysign(0, -1))),
		row(2, 1<<63, "-"+big, "-0.05", `"1.0"`, 0.1, 1.5),
		row(3, 0, "0.000000000000000000000000000001", "999.99", "1.0", -1, -0.25),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ col, want string }{
		{"b", "18446744073709551615:text 9223372036854775808:text 0:text"},
		{"d", big + ":text -" + big + ":text 0.000000000000000000000000000001:text"},
		{"s", "1.50:text -0.05:text 999.99:text"},
		{"j", `12:text "1.0":text 1.0:text`},
		// (SQLite prints -0.0 as 0.0: its sign is checked below.)
		{"f", "0.0:real 0.1:real -1.0:real"},
		{"g", "0.0:real 1.5:real -0.25:real"},
		{"dt", "2038-01-19 03:14:07.999999:text 2038-01-19 03:14:07.999999:text 2038-01-19 03:14:07.999999:text"},
		{"tm", "-838:59:59:text -838:59:59:text -838:59:59:text"},
		{"da", "2024-02-29:text 2024-02-29:text 2024-02-29:text"},
		{"y", "2155:integer 2155:integer 2155:integer"},
		{"st", "3:integer 3:integer 3:integer"},
		{"e", "2:integer 2:integer 2:integer"},
	} {
		got := strings.Join(texts(t, db, "SELECT "+c.col+" || ':' || typeof("+c.col+") FROM v ORDER BY id"), " ")
		if got != c.want {
			t.Errorf("%s = %s\n      want %s", c.col, got, c.want)
		}
	}
	// The sign of -0 survives to a float64 read by database/sql.
	for _, c := range []string{"f", "g"} {
		var f float64
		if err := db.QueryRow("SELECT " + c + " FROM v WHERE id = 1").Scan(&f); err != nil {
			t.Fatal(err)
		}
		if f != 0 || !math.Signbit(f) {
			t.Errorf("%s = %v (signbit %v), want -0", c, f, math.Signbit(f))
		}
	}
}

// TestExactDefaults: ADD COLUMN gives existing rows its DEFAULT, which must
// be what MySQL stores.
func TestExactDefaults(t *testing.T) {
	_, db, err := run(t, []codec.Event{
		ddl(10, "t", codec.ActionCreateTable, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY)"),
		insert(11, "t", intCol("id", 1, pk)),
		ddl(12, "t", codec.ActionAddColumn, "ALTER TABLE t ADD COLUMN d DECIMAL(5,2) NOT NULL DEFAULT 1.5, "+
			"ADD COLUMN u BIGINT UNSIGNED NOT NULL DEFAULT 18446744073709551615, ADD COLUMN e ENUM('x','y') NOT NULL DEFAULT 'y', "+
			"ADD COLUMN s VARCHAR(8) NOT NULL DEFAULT 'a\\\\b'"),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`1.50:text|18446744073709551615:text|2:integer|a\b:text`}
	if got := texts(t, db, "SELECT d || ':' || typeof(d) || '|' || u || ':' || typeof(u) || '|' || e || ':' || typeof(e) || '|' || s || ':' || typeof(s) FROM t"); !slices.Equal(got, want) {
		t.Errorf("row = %q, want %q", got, want)
	}
}

// renameCase renames table ux (with UNIQUE KEY uu (u) and row 1, u=10),
// drops uu under the new name, and inserts row 2 with u=10: the stale unique
// index would make INSERT OR REPLACE delete row 1.
func renameCase(t *testing.T, rename []codec.Event, newName, drop string, indexes ...string) {
	t.Helper()
	events := []codec.Event{
		ddl(10, "ux", codec.ActionCreateTable, "CREATE TABLE ux (id INT NOT NULL PRIMARY KEY, u INT, UNIQUE KEY uu (u), KEY k (id, u))"),
		ddl(10, "other", codec.ActionCreateTable, "CREATE TABLE other (id INT NOT NULL PRIMARY KEY, u INT, UNIQUE KEY uu (u))"),
		insert(11, "ux", intCol("id", 1, pk), intCol("u", 10, codec.FlagNullable)),
		insert(11, "other", intCol("id", 1, pk), intCol("u", 10, codec.FlagNullable)),
	}
	events = append(events, rename...)
	events = append(events,
		ddl(21, newName, codec.ActionDropIndex, drop),
		insert(22, newName, intCol("id", 2, pk), intCol("u", 10, codec.FlagNullable)),
		insert(22, "other", intCol("id", 2, pk), intCol("u", 10, codec.FlagNullable)),
	)
	sink, db, err := run(t, events)
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(t, db, "SELECT id || ',' || u FROM "+newName+" ORDER BY id"); !slices.Equal(got, []string{"1,10", "2,10"}) {
		t.Errorf("%s = %q, want both rows", newName, got)
	}
	// The other table's uu is untouched, and still unique.
	if got := texts(t, db, "SELECT id || ',' || u FROM other"); !slices.Equal(got, []string{"2,10"}) {
		t.Errorf("other = %q", got)
	}
	want := append([]string{"other.uu", newName + ".k"}, indexes...)
	if got := texts(t, db, "SELECT lower(name) FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY lower(name)"); !slices.Equal(got, want) {
		t.Errorf("indexes %q, want %q", got, want)
	}
	if n := sink.IgnoredDDLs(); n != 0 {
		t.Errorf("%d DDLs taken as already applied", n)
	}
}

func TestRenameMovesIndexes(t *testing.T) {
	t.Run("RENAME TABLE", func(t *testing.T) {
		renameCase(t, []codec.Event{ddl(20, "ux", codec.ActionRenameTable, "RENAME TABLE ux TO ux2")}, "ux2", "DROP INDEX uu ON ux2")
	})
	t.Run("ALTER TABLE RENAME", func(t *testing.T) {
		renameCase(t, []codec.Event{ddl(20, "ux", codec.ActionRenameTable, "ALTER TABLE `ux` RENAME AS `ux2`")}, "ux2", "ALTER TABLE ux2 DROP INDEX uu")
	})
	t.Run("ALTER TABLE RENAME TO, case", func(t *testing.T) {
		renameCase(t, []codec.Event{ddl(20, "UX", codec.ActionRenameTable, "ALTER TABLE UX RENAME TO Ux2")}, "ux2", "DROP INDEX UU ON ux2")
	})
	t.Run("several", func(t *testing.T) {
		renameCase(t, []codec.Event{
			ddl(19, "z", codec.ActionCreateTable, "CREATE TABLE z (id INT PRIMARY KEY, KEY k (id))"),
			ddl(20, "ux", codec.ActionRenameTables, "RENAME TABLE ux TO ux2, z TO z2"),
		}, "ux2", "DROP INDEX uu ON ux2", "z2.k")
	})
	t.Run("chain", func(t *testing.T) {
		// ux → tmp → ux2, and the name ux taken by another table.
		renameCase(t, []codec.Event{
			ddl(19, "z", codec.ActionCreateTable, "CREATE TABLE z (id INT PRIMARY KEY)"),
			ddl(20, "ux", codec.ActionRenameTables, "RENAME TABLE ux TO tmp, z TO ux, tmp TO ux2"),
			ddl(20, "ux", codec.ActionDropTable, "DROP TABLE ux"),
		}, "ux2", "DROP INDEX uu ON ux2")
	})
}

// TestRenameSwap: two tables swap names through a third; each keeps its
// own indexes under its new name.
func TestRenameSwap(t *testing.T) {
	_, db, err := run(t, []codec.Event{
		ddl(10, "a", codec.ActionCreateTable, "CREATE TABLE a (id INT PRIMARY KEY, x INT, UNIQUE KEY ua (x))"),
		ddl(10, "b", codec.ActionCreateTable, "CREATE TABLE b (id INT PRIMARY KEY, y INT, KEY kb (y))"),
		ddl(11, "a", codec.ActionRenameTables, "RENAME TABLE a TO tmp, b TO a, tmp TO b"),
		ddl(12, "b", codec.ActionDropIndex, "DROP INDEX ua ON b"),
		ddl(13, "a", codec.ActionDropIndex, "ALTER TABLE a DROP INDEX kb"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(t, db, "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"); len(got) != 0 {
		t.Errorf("indexes left: %q", got)
	}
}

// TestDropMissingIndex: dropping an index that is not there while its table
// is cannot have been applied already (a DDL and its progress commit
// together): an error naming the index. With the table gone too, it may
// have been, as before.
func TestDropMissingIndex(t *testing.T) {
	sink, _, err := run(t, []codec.Event{
		ddl(10, "t", codec.ActionCreateTable, "CREATE TABLE t (id INT PRIMARY KEY, u INT)"),
		ddl(11, "gone", codec.ActionDropIndex, "DROP INDEX k ON gone"),
		ddl(12, "t", codec.ActionDropIndex, "DROP INDEX nope ON t"),
	})
	var de *apply.DDLError
	if !errors.As(err, &de) || de.CommitTs != 12 || !strings.Contains(err.Error(), `"t.nope"`) {
		t.Fatalf("err = %v, want a DDLError at 12 naming t.nope", err)
	}
	if n := sink.IgnoredDDLs(); n != 1 {
		t.Errorf("IgnoredDDLs = %d, want 1 (the index of the missing table)", n)
	}
}

// TestIndexNames: indexes without a name take MySQL's names, and RENAME
// INDEX renames, so that later drops find them.
func TestIndexNames(t *testing.T) {
	sink, db, err := run(t, []codec.Event{
		ddl(10, "t", codec.ActionCreateTable, "CREATE TABLE t (id INT PRIMARY KEY, c INT, d INT, KEY (c))"),
		ddl(11, "t", codec.ActionAddIndex, "ALTER TABLE t ADD INDEX (c, d)"),
		ddl(12, "t", codec.ActionAddIndex, "ALTER TABLE t ADD UNIQUE (c), ADD KEY (d)"),
		ddl(13, "t", codec.ActionDropIndex, "DROP INDEX c_2 ON t"),
		ddl(14, "t", codec.ActionType(58), "ALTER TABLE t RENAME INDEX c_3 TO uc"),
		ddl(15, "t", codec.ActionDropIndex, "ALTER TABLE t DROP INDEX d"),
		insert(16, "t", intCol("id", 1, pk), intCol("c", 5, codec.FlagNullable), intCol("d", 0, codec.FlagNullable)),
		insert(17, "t", intCol("id", 2, pk), intCol("c", 5, codec.FlagNullable), intCol("d", 0, codec.FlagNullable)),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`CREATE INDEX "t.c" ON "t" ("c")`, `CREATE UNIQUE INDEX "t.uc" ON "t" ("c")`}
	if got := texts(t, db, "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 't' ORDER BY name"); !slices.Equal(got, want) {
		t.Errorf("indexes %q, want %q", got, want)
	}
	// uc is unique: row 2 replaced row 1.
	if got := texts(t, db, "SELECT id FROM t"); !slices.Equal(got, []string{"2"}) {
		t.Errorf("rows %q", got)
	}
	if n := sink.IgnoredDDLs(); n != 0 {
		t.Errorf("%d DDLs taken as already applied", n)
	}
}
