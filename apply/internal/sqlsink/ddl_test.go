package sqlsink_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/sqlsink"
	"github.com/redokit/redokit/codec"
)

// TestDDLOrder checks that each DDL sees exactly the rows before it: rows at
// a DDL's commit ts come first, later rows after, whichever worker holds them.
func TestDDLOrder(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e0 *env) {
		for _, opts := range []*apply.Options{{Workers: 4, BatchRows: 1, TxnRows: 1}, {Workers: 2, BatchRows: 100}} {
			e := newEnv(t, e0.dialect)
			s := e.schema
			ins := func(ts uint64, table string, id int64, v string, extra ...codec.Column) *codec.Event {
				return rowEv(ts, s, table, nil, append([]codec.Column{icol("id", id, pk), scol("v", v)}, extra...))
			}
			events := []*codec.Event{
				ddlEv(10, s, "a", codec.ActionCreateTable, "CREATE TABLE a (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(20))"),
				ddlEv(10, s, "b", codec.ActionCreateTable, "CREATE TABLE b (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(20))"),
				ins(11, "a", 1, "a1"), ins(11, "b", 1, "b1"),
				ins(12, "a", 2, "a2"), ins(12, "b", 2, "b2"),
				// Rows at 13 come before the ADD COLUMN at 13, in the old shape.
				ins(13, "a", 3, "a3"), ins(13, "b", 3, "b3"),
				ddlEv(13, s, "a", codec.ActionAddColumn, "ALTER TABLE a ADD COLUMN c BIGINT"),
				ins(14, "a", 4, "a4", icol("c", 40, codec.FlagNullable)), ins(14, "b", 4, "b4"),
				// Rows at 15 are truncated with the table.
				ins(15, "b", 5, "b5"),
				ddlEv(15, s, "b", codec.ActionTruncateTable, "TRUNCATE TABLE b"),
				ins(16, "b", 6, "b6"),
				ins(16, "a", 6, "a6", icol("c", 60, codec.FlagNullable)),
				ddlEv(17, s, "a", codec.ActionDropTable, "DROP TABLE a"),
				ddlEv(18, s, "a", codec.ActionCreateTable, "CREATE TABLE a (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(20))"),
				ins(19, "a", 7, "new"),
			}
			res := e.run(events, opts)
			if res.DDLs != 6 || res.Rows != 12 {
				t.Errorf("result %+v", res)
			}
			if got, want := e.dump("a"), []string{"7|new"}; !slices.Equal(got, want) {
				t.Errorf("a = %q, want %q", got, want)
			}
			if got, want := e.dump("b"), []string{"6|b6"}; !slices.Equal(got, want) {
				t.Errorf("b = %q, want %q", got, want)
			}
			p := e.progress()
			if p.DDL != (apply.DDLMark{CommitTs: 18, Count: 1}) || p.Tables[apply.Table{Schema: s, Name: "a"}] != 19 || p.Tables[apply.Table{Schema: s, Name: "b"}] != 16 {
				t.Errorf("progress %+v", p)
			}
		}
	})
}

// TestDDLAlreadyApplied: a downstream that already ran a DDL (past the
// checkpoint, or just before a crash) is not an error, unless StrictDDL.
func TestDDLAlreadyApplied(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e *env) {
		s := e.schema
		e.ddl("CREATE TABLE a (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(20), c BIGINT)")
		events := []*codec.Event{
			ddlEv(10, s, "a", codec.ActionCreateTable, "CREATE TABLE a (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(20))"),
			ddlEv(11, s, "a", codec.ActionAddColumn, "ALTER TABLE a ADD COLUMN c BIGINT"),
			rowEv(12, s, "a", nil, []codec.Column{icol("id", 1, pk), scol("v", "x"), icol("c", 2, codec.FlagNullable)}),
			ddlEv(13, s, "z", codec.ActionDropTable, "DROP TABLE z"),
		}
		strict := e.open(&apply.SinkOptions{StrictDDL: true})
		_, err := apply.Run(context.Background(), sliceSource(events), strict, nil)
		var de *apply.DDLError
		if e.dialect == sqlsink.Postgres {
			// PostgreSQL's translations say IF [NOT] EXISTS: no error to
			// tolerate or to be strict about.
			if err != nil {
				t.Fatalf("strict, on PostgreSQL: %v", err)
			}
		} else if !errors.As(err, &de) || de.CommitTs != 10 || !strings.Contains(err.Error(), "CREATE TABLE a") {
			t.Fatalf("strict: err = %v, want a apply.DDLError at 10", err)
		}
		sink := e.open(nil)
		res, err := apply.Run(context.Background(), sliceSource(events), sink, nil)
		if err != nil {
			t.Fatal(err)
		}
		wantDDLs, wantIgnored := int64(3), int64(3)
		if e.dialect == sqlsink.Postgres {
			wantDDLs, wantIgnored = 0, 0 // the strict run applied them
		}
		if res.DDLs != wantDDLs || sink.IgnoredDDLs() != wantIgnored {
			t.Errorf("DDLs %d, ignored %d; want %d and %d", res.DDLs, sink.IgnoredDDLs(), wantDDLs, wantIgnored)
		}
		if got := e.dump("a"); !slices.Equal(got, []string{"1|x|2"}) {
			t.Errorf("a = %q", got)
		}
	})
}

// TestDDLError: a DDL the downstream refuses stops the apply with an error
// naming it, after committing the rows before it; the DDL is not recorded.
func TestDDLError(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e *env) {
		s := e.schema
		events := []*codec.Event{
			ddlEv(10, s, "a", codec.ActionCreateTable, "CREATE TABLE a (id BIGINT NOT NULL PRIMARY KEY)"),
			rowEv(11, s, "a", nil, []codec.Column{icol("id", 1, pk)}),
			ddlEv(12, s, "a", codec.ActionAddColumn, "ALTER TABLE a ADD COLUMN c NO_SUCH_TYPE(3) FIRST"),
			rowEv(13, s, "a", nil, []codec.Column{icol("id", 2, pk)}),
		}
		res, err := apply.Run(context.Background(), sliceSource(events), e.open(nil), nil)
		var de *apply.DDLError
		if !errors.As(err, &de) || de.CommitTs != 12 || de.Schema != s || !strings.Contains(err.Error(), "NO_SUCH_TYPE") {
			t.Fatalf("err = %v, want a apply.DDLError naming the DDL at 12", err)
		}
		if e.dialect == sqlsink.SQLite && !errors.Is(err, apply.ErrUnsupportedDDL) {
			t.Errorf("SQLite: err = %v, want apply.ErrUnsupportedDDL", err)
		}
		if res.Rows != 1 || res.DDLs != 1 {
			t.Errorf("result %+v", res)
		}
		if got := e.dump("a"); !slices.Equal(got, []string{"1"}) {
			t.Errorf("a = %q", got)
		}
		if p := e.progress(); p.DDL != (apply.DDLMark{CommitTs: 10, Count: 1}) || p.Tables[apply.Table{Schema: s, Name: "a"}] != 11 {
			t.Errorf("progress %+v", p)
		}
	})
}

// TestSQLiteDDLRuns runs the rewritten DDLs on SQLite.
func TestSQLiteDDLRuns(t *testing.T) {
	e := newEnv(t, sqlsink.SQLite)
	s := e.schema
	events := []*codec.Event{
		ddlEv(10, s, "t", codec.ActionCreateTable, "create table `t` (`id` int(11) unsigned NOT NULL AUTO_INCREMENT, `name` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT '', "+
			"`ts` timestamp(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6), PRIMARY KEY (`id`), UNIQUE KEY `uk` (`name`), KEY `k` (`ts`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"),
		ddlEv(11, s, "u", codec.ActionCreateTable, "CREATE TABLE u (id INT PRIMARY KEY, KEY `k` (id))"),
		ddlEv(12, s, "t", codec.ActionAddColumn, "ALTER TABLE t ADD COLUMN c INT, ADD INDEX c_idx (c)"),
		ddlEv(13, s, "t", codec.ActionDropIndex, "DROP INDEX k ON t"),
		rowEv(14, s, "t", nil, []codec.Column{icol("id", 1, pk), scol("name", "n"), {Name: "ts", Type: codec.TypeTimestamp, Value: codec.TimestampValue(dt(2024, 1, 1, 0, 0, 0, 0, 6))}, icol("c", 3, codec.FlagNullable)}),
		ddlEv(15, s, "t", codec.ActionRenameTable, "RENAME TABLE t TO t2"),
	}
	res := e.run(events, nil)
	if res.DDLs != 5 {
		t.Fatalf("result %+v", res)
	}
	if got := e.dump("t2"); !slices.Equal(got, []string{"1|n|2024-01-01 00:00:00.000000|3"}) {
		t.Errorf("t2 = %q", got)
	}
}

// TestRenameRunAgain: MySQL commits a DDL before its progress row, so a
// crash (or a cancelled run) in between runs it again on resume. A rename
// of a column, an index or a table run again fails as a rename of one
// never there would (1054, 1176, 1146): it must count as applied when the
// catalog shows the renames done
// — else the resume stops there for good, as apply's differential fuzzer
// found (seed 900072, a run cancelled by a split too late while a worker
// ran the rename) — and still fail when they are not.
func TestRenameRunAgain(t *testing.T) {
	e := newEnv(t, sqlsink.MySQL)
	s := e.open(nil)
	ctx := context.Background()
	e.ddl("CREATE TABLE rn (k INT PRIMARY KEY, a INT, c INT)")
	run := func(q string) error {
		d := &codec.DDL{Table: codec.TableName{Schema: e.schema, Name: "rn"}, Type: codec.ActionModifyColumn, Query: q}
		switch {
		case strings.HasPrefix(q, "RENAME TABLE"):
			d.Table.Name, d.Type = "ra", codec.ActionRenameTable
		case strings.Contains(q, " RENAME TO "):
			d.Table.Name, d.Type = "rb", codec.ActionRenameTable
		case strings.Contains(q, " ra "):
			d.Table.Name = "ra"
		}
		return s.ApplyDDL(ctx, d, apply.DDLMark{})
	}
	e.ddl("CREATE TABLE ra (k INT PRIMARY KEY, a INT, KEY i (a))")
	for _, q := range []string{"ALTER TABLE rn RENAME COLUMN a TO b", "ALTER TABLE rn CHANGE COLUMN c d BIGINT, ADD COLUMN x INT",
		"ALTER TABLE ra RENAME INDEX i TO j", "RENAME TABLE ra TO rb", "ALTER TABLE rb RENAME TO rc"} {
		if err := run(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		before := s.IgnoredDDLs()
		if err := run(q); err != nil {
			t.Fatalf("%s, run again: %v; want it counted as applied", q, err)
		}
		if s.IgnoredDDLs() != before+1 {
			t.Fatalf("%s, run again: not counted as a DDL already applied", q)
		}
	}
	// Not run: the renamed-to column is not there (a table whose columns
	// are absent and present as after the DDL looks like it ran).
	for _, q := range []string{"ALTER TABLE rn RENAME COLUMN nope TO e", "ALTER TABLE rn CHANGE nope f INT", "ALTER TABLE rn RENAME COLUMN b TO e, RENAME COLUMN nope TO g",
		"RENAME TABLE nope TO rd", "ALTER TABLE rn RENAME INDEX nope TO m"} {
		if err := run(q); err == nil {
			t.Fatalf("%s: a rename of a column the table never had succeeded", q)
		}
	}
}
