package sqlsink_test

import (
	"bytes"
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/sqlsink"
	"github.com/redokit/redokit/codec"
)

// A replay that overlaps rows already downstream: the upsert of (1,'x') meets
// row 1 on its key and row 2, stale, on the unique u. The statement's
// duplicate-key error must end in the row's final image (both old rows gone)
// and be counted as a replacement, not stop the apply — on PostgreSQL too
// (issue 27, finding 4: it stopped with 23505); a delete of a row that is
// not there is counted too, each per table.
func TestUpsertMeetsTwoRows(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e *env) {
		e.ddl("CREATE TABLE u (id BIGINT PRIMARY KEY, u VARCHAR(8) COLLATE utf8mb4_bin, UNIQUE KEY uu (u))")
		e.exec("INSERT INTO " + e.table("u") + " (id, u) VALUES (1, 'y'), (2, 'x')")
		uk := codec.FlagUniqueKey | codec.FlagNullable
		row := func(id int64, u string) []codec.Column {
			c := scol("u", u)
			c.Flags = uk
			c.Collation = "utf8mb4_bin"
			return []codec.Column{icol("id", id, pk), c}
		}
		s := e.open(nil)
		_, err := apply.Run(context.Background(), sliceSource([]*codec.Event{
			rowEv(10, e.schema, "u", nil, row(1, "x")),
			rowEv(11, e.schema, "u", row(7, "z"), nil),
		}), s, nil)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got, want := e.dump("u"), []string{"1|x"}; !slices.Equal(got, want) {
			t.Errorf("rows %q, want %q", got, want)
		}
		want := apply.Conflicts{Replaced: 1, DeletesMissed: 1, Tables: []apply.TableConflicts{{Schema: e.schema, Table: "u", Replaced: 1, DeletesMissed: 1}}}
		if c := s.Conflicts(); !reflect.DeepEqual(c, want) {
			t.Errorf("conflicts %+v, want %+v", c, want)
		}
	})
}

// A dry run prints the statements with their values and changes nothing, not
// even the progress table.
func TestDryRun(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e *env) {
		var out bytes.Buffer
		s := e.open(&apply.SinkOptions{DryRun: &out})
		_, err := apply.Run(context.Background(), sliceSource([]*codec.Event{
			ddlEv(9, e.schema, "d", codec.ActionCreateTable, "CREATE TABLE d (id BIGINT PRIMARY KEY, v VARCHAR(8))"),
			rowEv(10, e.schema, "d", nil, []codec.Column{icol("id", 1, pk), scol("v", "hello")}),
		}), s, nil)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		text := out.String()
		for _, want := range []string{"CREATE TABLE", "INSERT INTO", `"hello"`} {
			if !strings.Contains(text, want) {
				t.Errorf("dry run output lacks %q:\n%s", want, text)
			}
		}
		if e.exists("d") || e.exists(apply.DefaultProgressTable) {
			t.Errorf("a dry run changed the downstream:\n%s", text)
		}
	})
}

// A dry run of CREATE DATABASE prints it without a USE of the schema it
// creates, as the real run does (issue 27, item 7: MariaDB's dry run printed
// USE before CREATE DATABASE, which would fail).
func TestDryRunCreateSchema(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e *env) {
		var out bytes.Buffer
		s := e.open(&apply.SinkOptions{DryRun: &out})
		ev := ddlEv(9, "fresh", "", codec.ActionCreateSchema, "CREATE DATABASE fresh")
		if _, err := apply.Run(context.Background(), sliceSource([]*codec.Event{ev}), s, nil); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if text := out.String(); strings.Contains(text, "USE") {
			t.Errorf("dry run of CREATE DATABASE uses the schema first:\n%s", text)
		}
	})
}

// A row inserted and deleted inside one batch collapses to the delete alone,
// which then matches nothing: that is no conflict. A delete of a row the
// downstream never held is one.
func TestDeleteOfOwnInsertIsNoConflict(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e *env) {
		e.ddl("CREATE TABLE o (id BIGINT PRIMARY KEY, v VARCHAR(8))")
		row := func(id int64) []codec.Column { return []codec.Column{icol("id", id, pk), scol("v", "x")} }
		s := e.open(nil)
		_, err := apply.Run(context.Background(), sliceSource([]*codec.Event{
			rowEv(10, e.schema, "o", nil, row(1)),
			rowEv(10, e.schema, "o", nil, row(2)),
			rowEv(11, e.schema, "o", row(1), nil),
			rowEv(12, e.schema, "o", row(9), nil), // never there
		}), s, nil)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got := e.dump("o"); !slices.Equal(got, []string{"2|x"}) {
			t.Errorf("rows %q, want 2|x", got)
		}
		if c := s.Conflicts(); c.Replaced != 0 || c.DeletesMissed != 1 || c.DuplicatedKeyless != 0 {
			t.Errorf("conflicts %+v, want only the delete of row 9", c)
		}
	})
}

// TestStaleUniqueHolderCounted: a replay over a downstream that ran ahead,
// where a stale row holds only a unique value of the log's row (not its
// key). Every sink ends with the log's row alone, and counts it as
// replaced. SQLite's upsert, with no conflict target, and MySQL's, which
// cannot name one, updated the stale row into the log's row in place,
// uncounted; the batch also updates a row, so the MySQL sink deleted its
// keys first, and counts the rows its upsert updated rather than inserted.
// A batch of new rows alone still goes uncounted on MySQL (the second
// run): documented in apply.Conflicts.
func TestStaleUniqueHolderCounted(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e *env) {
		e.ddl("CREATE TABLE su (id BIGINT PRIMARY KEY, u VARCHAR(8) COLLATE utf8mb4_bin, UNIQUE KEY uu (u))")
		e.exec("INSERT INTO " + e.table("su") + " (id, u) VALUES (2, 'x'), (3, 'y')")
		row := func(id int64, u string) []codec.Column {
			c := scol("u", u)
			c.Flags |= codec.FlagUniqueKey
			c.Collation = "utf8mb4_bin"
			return []codec.Column{icol("id", id, pk), c}
		}
		s := e.open(nil)
		_, err := apply.Run(context.Background(), sliceSource([]*codec.Event{
			rowEv(10, e.schema, "su", nil, row(1, "x")),
			rowEv(10, e.schema, "su", nil, row(4, "z")),
			rowEv(11, e.schema, "su", row(3, "y"), row(3, "w")),
		}), s, nil)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got, want := e.dump("su"), []string{"1|x", "3|w", "4|z"}; !slices.Equal(got, want) {
			t.Errorf("rows %q, want %q", got, want)
		}
		if c := s.Conflicts(); c.Replaced != 1 {
			t.Errorf("conflicts %+v, want 1 replaced", c)
		}

		e.exec("INSERT INTO " + e.table("su") + " (id, u) VALUES (5, 'v')")
		_, err = apply.Run(context.Background(), sliceSource([]*codec.Event{
			rowEv(12, e.schema, "su", nil, row(6, "v")),
		}), s, nil)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got, want := e.dump("su"), []string{"1|x", "3|w", "4|z", "6|v"}; !slices.Equal(got, want) {
			t.Errorf("rows %q, want %q", got, want)
		}
		want := int64(2)
		if e.dialect == sqlsink.MySQL {
			want = 1
		}
		if c := s.Conflicts(); c.Replaced != want {
			t.Errorf("conflicts %+v, want %d replaced", c, want)
		}
	})
}

// TestSQLiteCatalogForgottenAcrossSchemas: SQLite has no schemas, so two
// schemas' tables of one name are one table, and a DDL through one name
// changes what the sink read of the other. Rows of s2.su are written (the
// sink reads that su has no other unique key), then s1.su gets a unique
// index, then a row of s2.su meets a stale row on it. Read again, the
// catalog names the key as the upsert's conflict target and the stale row
// is replaced and counted; kept from before the DDL (forgotten by schema
// and name), the upsert updated the stale row in place, uncounted.
func TestSQLiteCatalogForgottenAcrossSchemas(t *testing.T) {
	e := newEnv(t, sqlsink.SQLite)
	e.ddl("CREATE TABLE su (id BIGINT PRIMARY KEY, u VARCHAR(8))")
	row := func(id int64, u string) []codec.Column {
		return []codec.Column{icol("id", id, pk), scol("u", u)}
	}
	s := e.open(nil)
	if _, err := apply.Run(context.Background(), sliceSource([]*codec.Event{
		rowEv(10, "s2", "su", nil, row(1, "x")),
	}), s, nil); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := apply.Run(context.Background(), sliceSource([]*codec.Event{
		ddlEv(11, "s1", "su", codec.ActionAddIndex, "CREATE UNIQUE INDEX uu ON su (u)"),
	}), s, nil); err != nil {
		t.Fatalf("Run: %v", err)
	}
	e.exec("INSERT INTO " + e.table("su") + " (id, u) VALUES (2, 'y')") // stale: the downstream ran ahead
	if _, err := apply.Run(context.Background(), sliceSource([]*codec.Event{
		rowEv(12, "s2", "su", nil, row(3, "y")),
	}), s, nil); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got, want := e.dump("su"), []string{"1|x", "3|y"}; !slices.Equal(got, want) {
		t.Errorf("rows %q, want %q", got, want)
	}
	if c := s.Conflicts(); c.Replaced != 1 {
		t.Errorf("conflicts %+v, want the stale row replaced, counted", c)
	}
}
