package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/sqlite"
	"github.com/redokit/redokit/codec"
)

// Issue 27, finding 3: SQLite refuses ALTER TABLE … DROP COLUMN of a column
// an index holds ("error in index … after drop column: no such column"),
// and the sink took that refusal for a drop already applied: the column and
// its indexes stayed, and the rows written after it went wrong. MySQL drops
// the column from each index that holds it, and an index whose only column
// it was; the sink must do the same, and never take SQLite's refusal of a
// drop it could not make for one already made.

func strCol(name, v string) codec.Column {
	return col(name, codec.TypeVarchar, codec.FlagNullable, codec.StringValue(v))
}

// indexSQL is the SQL of every index of table, sorted.
func indexSQL(t *testing.T, sink *sqlite.Sink, table string) []string {
	t.Helper()
	got := texts(t, sink.DB(), "SELECT sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL AND tbl_name = '"+table+"'")
	slices.Sort(got)
	return got
}

// TestDropIndexedColumn is the minimal case: t's column u has a
// unique index; the log drops u, adds it again, and writes a row whose new
// u holds a value an old row held. The stale column and index made that row
// take the old row's place: one row lost, three cells wrong.
func TestDropIndexedColumn(t *testing.T) {
	sink, db, err := run(t, []codec.Event{
		ddl(10, "t", codec.ActionCreateTable, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, v VARCHAR(8), u INT, UNIQUE KEY uu (u))"),
		insert(11, "t", intCol("id", 1, pk), strCol("v", "a"), intCol("u", 10, codec.FlagNullable|codec.FlagUniqueKey)),
		insert(11, "t", intCol("id", 2, pk), strCol("v", "b"), intCol("u", 20, codec.FlagNullable|codec.FlagUniqueKey)),
		ddl(12, "t", codec.ActionDropColumn, "ALTER TABLE t DROP COLUMN u"),
		insert(13, "t", intCol("id", 3, pk), strCol("v", "c")),
		ddl(14, "t", codec.ActionAddColumn, "ALTER TABLE t ADD COLUMN u INT"),
		insert(15, "t", intCol("id", 4, pk), strCol("v", "d"), intCol("u", 10, codec.FlagNullable)),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"1|a|NULL", "2|b|NULL", "3|c|NULL", "4|d|10"}
	if got := texts(t, db, "SELECT id || '|' || v || '|' || coalesce(u, 'NULL') FROM t ORDER BY id"); !slices.Equal(got, want) {
		t.Errorf("rows %q, want %q", got, want)
	}
	if got := indexSQL(t, sink, "t"); len(got) != 0 {
		t.Errorf("indexes left: %q", got)
	}
	if n := sink.IgnoredDDLs(); n != 0 {
		t.Errorf("%d DDLs taken as already applied", n)
	}
}

// TestDropIndexedColumnIndexes: as MySQL does, an index loses the dropped
// column and keeps its name, uniqueness and the order of its other columns;
// an index of that column alone goes; and later DDLs find each index under
// its name.
func TestDropIndexedColumnIndexes(t *testing.T) {
	row := func(ts uint64, id, a, b, c int64) codec.Event {
		return insert(ts, "t", intCol("id", id, pk), intCol("a", a, codec.FlagNullable), intCol("b", b, codec.FlagNullable), intCol("c", c, codec.FlagNullable))
	}
	sink, db, err := run(t, []codec.Event{
		ddl(10, "t", codec.ActionCreateTable, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, a INT, b INT, c INT, d INT, "+
			"UNIQUE KEY ub (b), KEY ab (a, b), UNIQUE KEY uab (a, b), KEY bc (b DESC, c), KEY cbd (c, b, d), KEY da (d, a))"),
		row(11, 1, 1, 1, 1), row(11, 2, 2, 2, 2),
		ddl(12, "t", codec.ActionDropColumn, "ALTER TABLE `t` DROP `b`"),
		// Two columns in one DDL: cbd loses both, one after the other.
		ddl(13, "t", codec.ActionDropColumn, "ALTER TABLE t DROP COLUMN d, DROP COLUMN c"),
		// uab is unique on a alone now: a new image of a = 1 takes row 1's
		// place (an upstream could not log it otherwise).
		insert(14, "t", intCol("id", 3, pk), intCol("a", 3, codec.FlagNullable)),
		ddl(15, "t", codec.ActionDropIndex, "ALTER TABLE t DROP INDEX uab"),
		ddl(16, "t", codec.ActionDropIndex, "DROP INDEX ab ON t"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := texts(t, db, "SELECT id || '|' || a FROM t ORDER BY id"), []string{"1|1", "2|2", "3|3"}; !slices.Equal(got, want) {
		t.Errorf("rows %q, want %q", got, want)
	}
	if got := texts(t, db, "SELECT group_concat(name) FROM pragma_table_info('t')"); !slices.Equal(got, []string{"id,a"}) {
		t.Errorf("columns %q, want id,a", got)
	}
	if got, want := indexSQL(t, sink, "t"), []string{`CREATE INDEX "t.da" ON "t" ("a")`}; !slices.Equal(got, want) {
		t.Errorf("indexes %q, want %q", got, want)
	}
	if n := sink.IgnoredDDLs(); n != 0 {
		t.Errorf("%d DDLs taken as already applied", n)
	}
}

// TestDropIndexedColumnKeepsUnique: the index that loses a column is still
// unique on the others, and its order and options are kept.
func TestDropIndexedColumnKeepsUnique(t *testing.T) {
	sink, _, err := run(t, []codec.Event{
		ddl(10, "t", codec.ActionCreateTable, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, a VARCHAR(10), b INT, c INT, "+
			"UNIQUE KEY uab (a(4), b), KEY bc (b DESC, c DESC))"),
		ddl(11, "t", codec.ActionDropColumn, "ALTER TABLE t DROP COLUMN b"),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`CREATE INDEX "t.bc" ON "t" ("c" DESC)`, `CREATE UNIQUE INDEX "t.uab" ON "t" ("a")`}
	if got := indexSQL(t, sink, "t"); !slices.Equal(got, want) {
		t.Errorf("indexes %q, want %q", got, want)
	}
}

// TestDropColumnAlreadyApplied: a drop whose effect is there (the
// downstream ran past the checkpoint) is counted and goes on, or fails
// with StrictDDL; so is one of a table that is gone.
func TestDropColumnAlreadyApplied(t *testing.T) {
	events := []codec.Event{
		ddl(10, "t", codec.ActionCreateTable, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, u INT, KEY ku (u, id))"),
		ddl(11, "t", codec.ActionDropColumn, "ALTER TABLE t DROP COLUMN u"),
		ddl(12, "t", codec.ActionDropColumn, "ALTER TABLE t DROP COLUMN u"),
		ddl(13, "gone", codec.ActionDropColumn, "ALTER TABLE gone DROP COLUMN u"),
	}
	sink, _, err := run(t, events)
	if err != nil {
		t.Fatal(err)
	}
	if n := sink.IgnoredDDLs(); n != 2 {
		t.Errorf("IgnoredDDLs = %d, want 2", n)
	}
	if got, want := indexSQL(t, sink, "t"), []string{`CREATE INDEX "t.ku" ON "t" ("id")`}; !slices.Equal(got, want) {
		t.Errorf("indexes %q, want %q", got, want)
	}
	strict, err := sqlite.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "strict.db"), &apply.SinkOptions{StrictDDL: true})
	if err != nil {
		t.Fatal(err)
	}
	defer strict.Close()
	_, err = apply.Run(context.Background(), apply.SliceSource(events), strict, nil)
	var de *apply.DDLError
	if !errors.As(err, &de) || de.CommitTs != 12 {
		t.Errorf("StrictDDL: err = %v, want a DDLError at 12", err)
	}
}

// TestDropColumnRefused: a drop SQLite cannot make is an error naming the
// DDL, never a drop taken as already applied: a column of the primary key
// (SQLite alters no key), a column a view reads.
func TestDropColumnRefused(t *testing.T) {
	for _, c := range []struct {
		name    string
		events  []codec.Event
		want    string
		indexes string // the indexes there before the DDL, which stay
	}{
		{"primary key", []codec.Event{
			ddl(10, "t", codec.ActionCreateTable, "CREATE TABLE t (id INT NOT NULL, b INT NOT NULL, c INT, PRIMARY KEY (id, b), KEY bc (b, c))"),
			ddl(11, "t", codec.ActionDropColumn, "ALTER TABLE t DROP COLUMN b"),
		}, "primary key", "1"},
		{"rowid key", []codec.Event{
			ddl(10, "t", codec.ActionCreateTable, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, c INT)"),
			ddl(11, "t", codec.ActionDropColumn, "ALTER TABLE t DROP COLUMN id"),
		}, "primary key", "0"},
		{"view", []codec.Event{
			ddl(10, "t", codec.ActionCreateTable, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, c INT, KEY kc (c))"),
			ddl(10, "v", codec.ActionCreateView, "CREATE VIEW v AS SELECT c FROM t"),
			ddl(11, "t", codec.ActionDropColumn, "ALTER TABLE t DROP COLUMN c"),
		}, "view", "1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sink, db, err := run(t, c.events)
			var de *apply.DDLError
			if !errors.As(err, &de) || de.CommitTs != 11 || !strings.Contains(strings.ToLower(err.Error()), c.want) {
				t.Fatalf("err = %v, want a DDLError at 11 naming the %s", err, c.want)
			}
			t.Logf("refused: %v", err)
			if n := sink.IgnoredDDLs(); n != 0 {
				t.Errorf("%d DDLs taken as already applied", n)
			}
			// Nothing of the DDL ran: the indexes are all there.
			if got := texts(t, db, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"); got[0] != c.indexes {
				t.Errorf("%s indexes, want %s", got[0], c.indexes)
			}
		})
	}
}
