package postgres

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/sqlsink"
	"github.com/redokit/redokit/codec"
)

// TestCopyFallback: a batch of fresh inserts goes by COPY, and a COPY that
// meets a row the downstream holds already — a replay over a downstream
// that ran ahead — fails and leaves the batch to the upserts, which write
// what they always did: the row of a key there is updated to the log's, a
// stale row holding a unique value an insert takes is replaced (and
// counted), inserts into a table without a key that held foreign rows are
// checked and counted. The same log applied with COPY off must leave the
// same rows and count the same conflicts. Without the fallback, the apply
// stops at the COPY's 23505.
func TestCopyFallback(t *testing.T) {
	type outcome struct {
		rows      map[string][]string
		conflicts apply.Conflicts
	}
	run := func(t *testing.T, minCopy int) outcome {
		defer sqlsink.SetMinCopyRows(sqlsink.SetMinCopyRows(minCopy))
		s := newServer(t)
		l := &log27{schema: s.schema}
		l.ddl(10, "", codec.ActionCreateSchema, "CREATE DATABASE "+s.schema)
		l.ddl(11, "k", codec.ActionCreateTable, "CREATE TABLE k (id INT PRIMARY KEY, v VARCHAR(20))")
		l.ddl(12, "u", codec.ActionCreateTable, "CREATE TABLE u (id INT PRIMARY KEY, u INT, v VARCHAR(20), UNIQUE KEY uu (u))")
		l.ddl(13, "n", codec.ActionCreateTable, "CREATE TABLE n (a INT, v VARCHAR(20))")
		l.ddl(14, "nf", codec.ActionCreateTable, "CREATE TABLE nf (a INT, v VARCHAR(20))")
		l.ddl(15, "c", codec.ActionCreateTable, "CREATE TABLE c (id INT PRIMARY KEY, v VARCHAR(20))")
		ddls := len(l.events)
		for i := range int64(100) {
			l.row(100, "k", nil, cols(pkInt("id", i+1), strCol("v", fmt.Sprint("log-", i+1))))
			l.row(100, "u", nil, cols(pkInt("id", i+1), intCol("u", i+1), strCol("v", fmt.Sprint("log-", i+1))))
			l.row(100, "n", nil, cols(intCol("a", i%10), strCol("v", "same")))
			l.row(100, "nf", nil, cols(intCol("a", i%10), strCol("v", "same")))
			l.row(100, "c", nil, cols(pkInt("id", i+1), strCol("v", fmt.Sprint("log-", i+1))))
		}
		sink, err := s.open(s.dsn, apply.SinkOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := apply.Run(context.Background(), apply.SliceSource(l.events[:ddls]), sink, nil); err != nil {
			t.Fatal(err)
		}
		// What the downstream holds beyond the log's progress.
		s.exec(fmt.Sprintf(`INSERT INTO %q.k VALUES (50, 'downstream')`, s.schema))
		s.exec(fmt.Sprintf(`INSERT INTO %q.u VALUES (1000, 7, 'stale')`, s.schema))
		s.exec(fmt.Sprintf(`INSERT INTO %q.nf VALUES (3, 'same'), (4, 'other')`, s.schema))
		sink, err = s.open(s.dsn, apply.SinkOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := apply.Run(context.Background(), apply.SliceSource(l.events), sink, nil); err != nil {
			t.Fatalf("a replay over rows the downstream holds: %v", err)
		}
		o := outcome{rows: map[string][]string{}, conflicts: sink.Conflicts()}
		for _, table := range []string{"k", "u", "n", "nf", "c"} {
			o.rows[table] = s.dump27(table)
		}
		for i := range o.conflicts.Tables {
			o.conflicts.Tables[i].Schema = "" // the schemas differ
		}
		return o
	}
	copied0, fellBack0 := sqlsink.CopyStats()
	got := run(t, 1)
	copied, fellBack := sqlsink.CopyStats()
	// k and u fail their COPY and fall back; n and c go by COPY; nf's
	// inserts are checked, so go by upserts.
	if copied-copied0 < 2 || fellBack-fellBack0 < 2 {
		t.Errorf("%d COPYs, %d of them fell back: want at least 2 of each", copied-copied0, fellBack-fellBack0)
	}
	want := run(t, 1<<30) // no COPY
	if !reflect.DeepEqual(got, want) {
		t.Errorf("with COPY:\n%+v\nwith upserts alone:\n%+v", got, want)
	}
	// And what the log says, counted as it happened.
	for i, r := range got.rows["k"] {
		if w := fmt.Sprint(i+1, "|log-", i+1); !slices.Contains(got.rows["k"], w) || len(got.rows["k"]) != 100 {
			t.Fatalf("k row %d: %q, want 100 rows, each the log's (%q)", i, r, w)
		}
	}
	if n := len(got.rows["u"]); n != 100 || slices.Contains(got.rows["u"], "1000|7|stale") {
		t.Errorf("u: %d rows %q, want the log's 100, the stale row replaced", n, got.rows["u"])
	}
	if n := len(got.rows["n"]); n != 100 {
		t.Errorf("n: %d rows, want 100", n)
	}
	if n := len(got.rows["nf"]); n != 102 {
		t.Errorf("nf: %d rows, want the log's 100 and the 2 it held", n)
	}
	if got.conflicts.Replaced != 1 || got.conflicts.DuplicatedKeyless != 1 {
		t.Errorf("conflicts %+v, want 1 row replaced (u) and 1 duplicated without a key (nf)", got.conflicts)
	}
}

// TestRenameSwapStatements: statements are forgotten per table after a DDL
// (pgGens), and a rename names every table on either side: after tables a
// (c VARCHAR) and b (c INT) swap names in one RENAME TABLE (whose DDL names
// a as its table), a statement of b of the same text as one run on the old
// b must not reuse what was prepared for its integer column ('0031' stays
// '0031'), nor one of a bind text where an integer is. A DDL of another
// table in between leaves them be. The pool is one connection, so every
// statement meets its cache.
func TestRenameSwapStatements(t *testing.T) {
	s, sink, l := oneConnSink(t)
	l.ddl(11, "a", codec.ActionCreateTable, "CREATE TABLE a (id INT PRIMARY KEY, c VARCHAR(10))")
	l.ddl(12, "b", codec.ActionCreateTable, "CREATE TABLE b (id INT PRIMARY KEY, c INT)")
	l.ddl(13, "o", codec.ActionCreateTable, "CREATE TABLE o (id INT PRIMARY KEY)")
	for i := range int64(3) {
		l.row(20+2*uint64(i), "a", nil, cols(pkInt("id", i), strCol("c", "0031")))
		l.row(21+2*uint64(i), "b", nil, cols(pkInt("id", i), intCol("c", 31)))
	}
	l.ddl(30, "o", codec.ActionAddColumn, "ALTER TABLE o ADD COLUMN v INT")
	l.ddl(31, "a", codec.ActionRenameTable, "RENAME TABLE a TO tmp, b TO a, tmp TO b")
	for i := range int64(3) {
		l.row(40+2*uint64(i), "b", nil, cols(pkInt("id", 10+i), strCol("c", "0031")))
		l.row(41+2*uint64(i), "a", nil, cols(pkInt("id", 10+i), intCol("c", 31)))
	}
	if _, err := apply.Run(context.Background(), apply.SliceSource(l.events), sink,
		&apply.Options{Workers: 1, BatchRows: 1, TxnRows: 1}); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"b": {"0|0031", "10|0031", "11|0031", "12|0031", "1|0031", "2|0031"},
		"a": {"0|31", "10|31", "11|31", "12|31", "1|31", "2|31"},
	}
	for table, w := range want {
		if got := s.dump27(table); !slices.Equal(got, w) {
			t.Errorf("%s holds %q, want %q", table, got, w)
		}
	}
}
