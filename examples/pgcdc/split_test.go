package main

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/redokit/redokit/codec"
)

func TestSplitStatements(t *testing.T) {
	for _, c := range []struct {
		sql  string
		want []string
	}{
		{"CREATE TABLE a (x int)", []string{"CREATE TABLE a (x int)"}},
		{"CREATE TABLE a (x int); -- one; two\n ALTER TABLE a ADD y text /* ; */;;  ",
			[]string{"CREATE TABLE a (x int)", "-- one; two\n ALTER TABLE a ADD y text /* ; */"}},
		{"CREATE FUNCTION f() RETURNS int AS $body$ SELECT 1; $b$;$b$ $body$ LANGUAGE sql; DROP TABLE x",
			[]string{"CREATE FUNCTION f() RETURNS int AS $body$ SELECT 1; $b$;$b$ $body$ LANGUAGE sql", "DROP TABLE x"}},
		{`SELECT 'a;''b', E'c\';d', "q;""x", $$;$$, a$b, $1; /* nested /* ; */ still; */`,
			[]string{`SELECT 'a;''b', E'c\';d', "q;""x", $$;$$, a$b, $1`}},
		{"CREATE RULE r AS ON INSERT TO t DO ALSO (INSERT INTO u VALUES (1); INSERT INTO v VALUES (2)); DROP TABLE x",
			[]string{"CREATE RULE r AS ON INSERT TO t DO ALSO (INSERT INTO u VALUES (1); INSERT INTO v VALUES (2))", "DROP TABLE x"}},
		{"SELECT 'it''s'';' ; SELECT 2", []string{"SELECT 'it''s'';'", "SELECT 2"}},
	} {
		got, err := splitStatements(c.sql)
		if err != nil {
			t.Errorf("%q: %v", c.sql, err)
			continue
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%q:\n got %q\nwant %q", c.sql, got, c.want)
		}
	}
	for _, bad := range []string{"SELECT 'abc", "SELECT $x$ abc $y$", "/* x /* y */", `SELECT "abc`, `SELECT E'a\'`} {
		if got, err := splitStatements(bad); err == nil {
			t.Errorf("%q: split into %q, want an error", bad, got)
		}
	}
}

func TestStmtTag(t *testing.T) {
	for stmt, want := range map[string]string{
		"create unlogged table x (a int)":        "CREATE TABLE",
		"CREATE TEMP TABLE x (a int)":            "CREATE TABLE",
		"CREATE TABLE x AS SELECT 1":             "CREATE TABLE AS",
		"CREATE TABLE x (a, b) AS SELECT 1, 2":   "CREATE TABLE AS",
		"CREATE TABLE x (a int) -- as a comment": "CREATE TABLE",
		`CREATE TABLE x ("as" int)`:              "CREATE TABLE",
		"/* c */ alter table x add y int":        "ALTER TABLE",
		"drop table x":                           "DROP TABLE",
		"create index i on t (a)":                "CREATE INDEX",
		"SELECT 1":                               "SELECT",
	} {
		if got := stmtTag(stmt); got != want {
			t.Errorf("%q: tag %q, want %q", stmt, got, want)
		}
	}
}

// TestDDLRecord: a DDL record of a multi-statement query is the statement
// the trigger counted; one the capture cannot translate is a *DDLError
// naming the statement, the LSN and -skip-ddl, at every try, until
// -skip-ddl names its LSN.
func TestDDLRecord(t *testing.T) {
	spans, err := parseTables("a,b,c", 1)
	if err != nil {
		t.Fatal(err)
	}
	newCapturer := func(skip string) *capturer {
		sk, err := parseSkipDDL(skip)
		if err != nil {
			t.Fatal(err)
		}
		return &capturer{spans: spans, pks: map[uint32][]string{}, logger: slog.New(slog.DiscardHandler), skipDDL: sk, commitLSN: 0x1A2B3C8}
	}
	names := []string{"id", "tag", "query", "objid", "schema_name", "table_name", "pk", "seq"}
	rel := &relation{}
	for _, n := range names {
		rel.cols = append(rel.cols, relCol{name: n})
	}
	record := func(f map[string]string) *pglogrepl.TupleData {
		td := &pglogrepl.TupleData{}
		for _, n := range names {
			v, ok := f[n]
			if !ok {
				td.Columns = append(td.Columns, &pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeNull})
				continue
			}
			td.Columns = append(td.Columns, &pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeText, Data: []byte(v)})
		}
		return td
	}
	multi := "CREATE TABLE a (id bigserial PRIMARY KEY); -- a migration; in one string\nCREATE INDEX i ON a (id); /* ; */ CREATE TABLE b (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text);"
	c := newCapturer("")
	for seq, table := range []string{"a", "b"} {
		f := map[string]string{"tag": "CREATE TABLE", "query": multi, "objid": "100", "schema_name": "public", "table_name": table, "pk": "id", "seq": string(rune('1' + seq))}
		if err := c.ddlRecord(rel, record(f)); err != nil {
			t.Fatalf("CREATE TABLE %s: %v", table, err)
		}
	}
	var got []string
	for _, d := range c.txnDDLs {
		got = append(got, d.evs[0].DDL.Query)
	}
	want := []string{"CREATE TABLE `a` (`id` BIGINT NOT NULL AUTO_INCREMENT, PRIMARY KEY (`id`))",
		"CREATE TABLE `b` (`id` INT NOT NULL AUTO_INCREMENT, `v` LONGTEXT, PRIMARY KEY (`id`))"}
	if !slices.Equal(got, want) {
		t.Errorf("multi-statement query:\n got %q\nwant %q", got, want)
	}
	if c.txnDDLs[1].evs[0].DDL.Type != codec.ActionCreateTable {
		t.Errorf("DDL type %v", c.txnDDLs[1].evs[0].DDL.Type)
	}

	// The CREATE INDEX of the same query, then a seq past its statements.
	for _, f := range []map[string]string{
		{"tag": "CREATE INDEX", "query": multi, "seq": "1"},
		{"tag": "CREATE TABLE", "query": multi, "objid": "100", "schema_name": "public", "table_name": "c", "seq": "3"},
		{"tag": "CREATE TABLE", "query": multi, "objid": "100", "schema_name": "public", "table_name": "a"}, // no seq: an older setup
		{"tag": "ALTER TABLE", "query": "ALTER TABLE c ALTER COLUMN v TYPE int", "objid": "7", "schema_name": "public", "table_name": "c"},
	} {
		for try := range 2 { // the same error at every restart
			c := newCapturer("")
			err := c.ddlRecord(rel, record(f))
			var de *DDLError
			if !errors.Is(err, ErrUntranslatedDDL) || !errors.As(err, &de) {
				t.Fatalf("%s (seq %s): err %v, want a *DDLError", f["tag"], f["seq"], err)
			}
			for _, s := range []string{"0/1A2B3C8", "-skip-ddl 0/1A2B3C8", trunc(f["query"])} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("try %d: %q does not say %q", try, err, s)
				}
			}
		}
		c := newCapturer("0/5, 0/1A2B3C8")
		if err := c.ddlRecord(rel, record(f)); err != nil || len(c.txnDDLs) != 0 {
			t.Errorf("%s with -skip-ddl: err %v, %d DDLs", f["tag"], err, len(c.txnDDLs))
		}
	}
	if _, err := parseSkipDDL("0/1,zz"); err == nil || !strings.Contains(err.Error(), "zz") {
		t.Errorf("-skip-ddl zz: err %v", err)
	}
}
