package sqliteddl

import (
	"errors"
	"slices"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
)

func TestSQLiteDDL(t *testing.T) {
	cases := []struct {
		query string
		want  []string // nil and err: unsupported
		err   bool
	}{
		{"CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(20))",
			[]string{`CREATE TABLE "t" ("id" INTEGER NOT NULL PRIMARY KEY, "v" VARCHAR (20))`}, false},
		// Only a signed (or up to 32-bit) integer key becomes the rowid.
		{"CREATE TABLE t (id BIGINT UNSIGNED PRIMARY KEY, v INT)", []string{`CREATE TABLE "t" ("id" TEXT PRIMARY KEY, "v" INT)`}, false},
		{"CREATE TABLE t (a INT, b INT, PRIMARY KEY (a, b))", []string{`CREATE TABLE "t" ("a" INT, "b" INT, PRIMARY KEY (a, b))`}, false},
		{"create table if not exists `db`.`t` (`id` int(11) unsigned NOT NULL AUTO_INCREMENT COMMENT 'the id', `name` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT '' , " +
			"`e` enum('a','b') DEFAULT NULL, `ts` timestamp(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6), " +
			"PRIMARY KEY (`id`) /*T![clustered_index] CLUSTERED */, UNIQUE KEY `uk` (`name`(10)), KEY `k2` (`e`, `ts` DESC)) ENGINE=InnoDB AUTO_INCREMENT=30001 DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='x';",
			[]string{`CREATE TABLE IF NOT EXISTS "t" ("id" INTEGER NOT NULL, "name" varchar (64) DEFAULT '', "e" INTEGER DEFAULT NULL, "ts" timestamp (6) NOT NULL DEFAULT CURRENT_TIMESTAMP, PRIMARY KEY (` + "`id`" + `))`,
				`CREATE UNIQUE INDEX IF NOT EXISTS "t.uk" ON "t" ("name")`,
				`CREATE INDEX IF NOT EXISTS "t.k2" ON "t" ("e", "ts" DESC)`}, false},
		{"TRUNCATE TABLE db.t", []string{`DELETE FROM "t"`}, false},
		{"truncate `t`", []string{`DELETE FROM "t"`}, false},
		{"DROP TABLE IF EXISTS t1, `db`.t2", []string{`DROP TABLE IF EXISTS "t1"`, `DROP TABLE IF EXISTS "t2"`}, false},
		{"ALTER TABLE t ADD COLUMN c INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'c'", []string{`ALTER TABLE "t" ADD COLUMN "c" INT NOT NULL DEFAULT 0`}, false},
		// A double-quoted text is a string in MySQL's default sql_mode.
		{`ALTER TABLE t ADD COLUMN c VARCHAR(10) DEFAULT "it's" COMMENT "c"`, []string{`ALTER TABLE "t" ADD COLUMN "c" VARCHAR (10) DEFAULT 'it''s'`}, false},
		{"ALTER TABLE t ADD c DECIMAL(10,2), DROP COLUMN d, ADD INDEX ix (c), DROP KEY old, RENAME COLUMN x TO y",
			[]string{`ALTER TABLE "t" ADD COLUMN "c" TEXT`, `ALTER TABLE "t" DROP COLUMN "d"`, `CREATE INDEX "t.ix" ON "t" ("c")`, `DROP INDEX "t.old"`, `ALTER TABLE "t" RENAME COLUMN "x" TO "y"`}, false},
		{"ALTER TABLE t RENAME TO u", []string{`ALTER TABLE "t" RENAME TO "u"`}, false},
		{"RENAME TABLE a TO b, c TO d", []string{`ALTER TABLE "a" RENAME TO "b"`, `ALTER TABLE "c" RENAME TO "d"`}, false},
		{"CREATE UNIQUE INDEX ix ON t (a, b(3))", []string{`CREATE UNIQUE INDEX "t.ix" ON "t" ("a", "b")`}, false},
		{"DROP INDEX ix ON t", []string{`DROP INDEX "t.ix"`}, false},
		{"CREATE DATABASE db", nil, false},
		{"CREATE VIEW v AS SELECT 1", []string{"CREATE VIEW v AS SELECT 1"}, false},
		{"DROP DATABASE db", nil, true},
		{"ALTER TABLE t MODIFY COLUMN c BIGINT", nil, true},
		{"ALTER TABLE t ADD COLUMN c INT AFTER b", nil, true},
		{"ALTER TABLE t ADD PRIMARY KEY (a)", nil, true},
		{"CREATE TABLE t LIKE u", nil, true},
		{"CREATE TABLE t (a INT, 'x)", nil, true},
	}
	for _, c := range cases {
		stmts, err := Rewrite(&codec.DDL{Table: codec.TableName{Schema: "db", Name: "t"}, Query: c.query})
		var got []string
		for _, s := range stmts {
			got = append(got, s.SQL)
		}
		if c.err {
			if !errors.Is(err, apply.ErrUnsupportedDDL) {
				t.Errorf("%s: err = %v, want ErrUnsupportedDDL", c.query, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s:\n got %q, %v\nwant %q", c.query, got, err, c.want)
		}
	}
}

// TestTypes: each column is declared with a type whose SQLite affinity keeps
// the value the sink binds (package sqlsink's Dialect.arg), and DEFAULTs are
// what MySQL stores.
func TestTypes(t *testing.T) {
	cases := []struct{ def, want string }{
		// TEXT affinity: values beyond int64 or REAL, and JSON.
		{"c BIGINT UNSIGNED NOT NULL", `"c" TEXT NOT NULL`},
		{"c bigint(20) unsigned zerofill DEFAULT 18446744073709551615", `"c" TEXT DEFAULT '18446744073709551615'`},
		{"c INT8 UNSIGNED", `"c" TEXT`},
		{"c DECIMAL(65,30) NOT NULL", `"c" TEXT NOT NULL`},
		{"c DECIMAL(5,2) DEFAULT 1.5", `"c" TEXT DEFAULT '1.50'`},
		{"c NUMERIC(5,2) DEFAULT '-1.005'", `"c" TEXT DEFAULT '-1.01'`},
		{"c DEC(4,1) DEFAULT -0.01", `"c" TEXT DEFAULT '0.0'`},
		{"c FIXED(10) DEFAULT 99.5", `"c" TEXT DEFAULT '100'`},
		{"c DECIMAL DEFAULT +7", `"c" TEXT DEFAULT '7'`},
		{"c DECIMAL(3,2) DEFAULT .5", `"c" TEXT DEFAULT '0.50'`},
		{"c BIT(64) DEFAULT b'1111111111111111111111111111111111111111111111111111111111111111'", `"c" TEXT DEFAULT '18446744073709551615'`},
		{"c JSON", `"c" TEXT`},
		{"c LONG", `"c" TEXT`},
		// BLOB affinity: a REAL column stores an integral value as an
		// integer, and -0 comes back 0.
		{"c DOUBLE NOT NULL DEFAULT 0", `"c" DOUBLE BLOB NOT NULL DEFAULT 0`},
		{"c DOUBLE PRECISION", `"c" DOUBLE BLOB`},
		{"c FLOAT(7,3) UNSIGNED", `"c" FLOAT BLOB`},
		{"c REAL", `"c" DOUBLE BLOB`},
		// Integers: the bound int64 is kept.
		{"c BIT(8) DEFAULT b'101'", `"c" BIT (8) DEFAULT 5`},
		{"c BIT DEFAULT 0x1", `"c" BIT DEFAULT 1`},
		{"c ENUM('a','b ') NOT NULL DEFAULT 'B'", `"c" INTEGER NOT NULL DEFAULT 2`},
		{"c SET('x','y','z') DEFAULT 'x,z'", `"c" INTEGER DEFAULT 5`},
		{"c INT UNSIGNED DEFAULT 4294967295", `"c" INT DEFAULT 4294967295`},
		// Text a NUMERIC affinity keeps as text ('2038-01-19 03:14:07.999999', '-838:59:59').
		{"c DATETIME(6) DEFAULT '2038-01-19 03:14:07.999999'", `"c" DATETIME (6) DEFAULT '2038-01-19 03:14:07.999999'`},
		{"c TIME", `"c" TIME`},
		{"c YEAR", `"c" YEAR`},
		{"c VARBINARY(16) NOT NULL", `"c" BLOB NOT NULL`},
		{"c CHAR(4) BINARY", `"c" CHAR (4)`},
		// MySQL strings as SQLite strings.
		{`c VARCHAR(10) DEFAULT 'it\'s a\\b'`, `"c" VARCHAR (10) DEFAULT 'it''s a\b'`},
		{"c VARCHAR(10) DEFAULT _utf8mb4'x'", `"c" VARCHAR (10) DEFAULT 'x'`},
	}
	for _, c := range cases {
		stmts, err := Rewrite(&codec.DDL{Query: "ALTER TABLE t ADD COLUMN " + c.def})
		if err != nil || len(stmts) != 1 || stmts[0].SQL != `ALTER TABLE "t" ADD COLUMN `+c.want {
			t.Errorf("%s:\n got %+v, %v\nwant %s", c.def, stmts, err, c.want)
		}
	}
	for _, def := range []string{
		"c ENUM('a') DEFAULT 'z'",
		"c SET('a') DEFAULT 'a,z'",
		"c DECIMAL(5,2) DEFAULT 1e3",
		"c BIGINT UNSIGNED DEFAULT 'x'",
		"c VARCHAR(3) DEFAULT 'a\\0b'",
		"c VARCHAR(3) DEFAULT 0x41",
	} {
		if _, err := Rewrite(&codec.DDL{Query: "ALTER TABLE t ADD COLUMN " + def}); !errors.Is(err, apply.ErrUnsupportedDDL) {
			t.Errorf("%s: err = %v, want ErrUnsupportedDDL", def, err)
		}
	}
	// Only a signed integer key is the rowid: an unsigned BIGINT's values
	// pass int64, and a TEXT key never aliases the rowid.
	for q, want := range map[string]string{
		"CREATE TABLE u (id BIGINT UNSIGNED NOT NULL, PRIMARY KEY (id))": `CREATE TABLE "u" ("id" TEXT NOT NULL, PRIMARY KEY (id))`,
		"CREATE TABLE u (id BIGINT(20) NOT NULL, PRIMARY KEY (id))":      `CREATE TABLE "u" ("id" INTEGER NOT NULL, PRIMARY KEY (id))`,
		"CREATE TABLE u (id DECIMAL(20,0) PRIMARY KEY)":                  `CREATE TABLE "u" ("id" TEXT PRIMARY KEY)`,
	} {
		stmts, err := Rewrite(&codec.DDL{Query: q})
		if err != nil || len(stmts) != 1 || stmts[0].SQL != want {
			t.Errorf("%s:\n got %+v, %v\nwant %s", q, stmts, err, want)
		}
	}
}

// TestIndexStmts: the statements that touch indexes and tables say so, for
// the caller that renames indexes with their table.
func TestIndexStmts(t *testing.T) {
	cases := []struct {
		query string
		want  []Stmt
	}{
		{"RENAME TABLE ux TO ux2", []Stmt{{SQL: `ALTER TABLE "ux" RENAME TO "ux2"`, Op: OpRenameTable, Table: "ux", To: "ux2"}}},
		{"RENAME TABLE a TO b, c TO d", []Stmt{
			{SQL: `ALTER TABLE "a" RENAME TO "b"`, Op: OpRenameTable, Table: "a", To: "b"},
			{SQL: `ALTER TABLE "c" RENAME TO "d"`, Op: OpRenameTable, Table: "c", To: "d"}}},
		{"ALTER TABLE ux RENAME AS ux2", []Stmt{{SQL: `ALTER TABLE "ux" RENAME TO "ux2"`, Op: OpRenameTable, Table: "ux", To: "ux2"}}},
		// MySQL renames after the other specs, which name the old table.
		{"ALTER TABLE ux RENAME TO ux2, DROP INDEX uu", []Stmt{
			{SQL: `DROP INDEX "ux.uu"`, Op: OpDropIndex, Table: "ux", Index: "ux.uu"},
			{SQL: `ALTER TABLE "ux" RENAME TO "ux2"`, Op: OpRenameTable, Table: "ux", To: "ux2"}}},
		{"DROP INDEX uu ON ux2", []Stmt{{SQL: `DROP INDEX "ux2.uu"`, Op: OpDropIndex, Table: "ux2", Index: "ux2.uu"}}},
		{"CREATE FULLTEXT INDEX ft ON t (body)", []Stmt{{SQL: `CREATE INDEX "t.ft" ON "t" ("body")`, Op: OpCreateIndex, Table: "t", Index: "t.ft"}}},
		// Unnamed indexes take MySQL's names; UNIQUE columns and FULLTEXT
		// keys get indexes of their names.
		{"CREATE TABLE t (a INT UNIQUE, b INT, KEY (a, b), KEY (a), FULLTEXT KEY ft (b))", []Stmt{
			{SQL: `CREATE TABLE "t" ("a" INT, "b" INT)`, Op: OpCreateTable, Table: "t"},
			{SQL: `CREATE UNIQUE INDEX IF NOT EXISTS "t.a" ON "t" ("a")`, Op: OpCreateIndex, Table: "t", Index: "t.a"},
			{SQL: `CREATE INDEX IF NOT EXISTS "t.a_2" ON "t" ("a", "b")`, Op: OpCreateIndex, Table: "t", Index: "t.a_2"},
			{SQL: `CREATE INDEX IF NOT EXISTS "t.a_3" ON "t" ("a")`, Op: OpCreateIndex, Table: "t", Index: "t.a_3"},
			{SQL: `CREATE INDEX IF NOT EXISTS "t.ft" ON "t" ("b")`, Op: OpCreateIndex, Table: "t", Index: "t.ft"}}},
		{"ALTER TABLE t ADD COLUMN s SERIAL", []Stmt{
			{SQL: `ALTER TABLE "t" ADD COLUMN "s" TEXT NOT NULL`},
			{SQL: `CREATE UNIQUE INDEX "t.s" ON "t" ("s")`, Op: OpCreateIndex, Table: "t", Index: "t.s"}}},
		{"CREATE TABLE t (a INT, b INT, CONSTRAINT c1 UNIQUE (a), CONSTRAINT c2 UNIQUE KEY u2 (b), CONSTRAINT fk FOREIGN KEY (b) REFERENCES p (id))", []Stmt{
			{SQL: `CREATE TABLE "t" ("a" INT, "b" INT, CONSTRAINT fk FOREIGN KEY (b) REFERENCES p (id))`, Op: OpCreateTable, Table: "t"},
			{SQL: `CREATE UNIQUE INDEX IF NOT EXISTS "t.c1" ON "t" ("a")`, Op: OpCreateIndex, Table: "t", Index: "t.c1"},
			{SQL: `CREATE UNIQUE INDEX IF NOT EXISTS "t.u2" ON "t" ("b")`, Op: OpCreateIndex, Table: "t", Index: "t.u2"}}},
		{"ALTER TABLE t ADD INDEX (c, d), ADD CONSTRAINT cu UNIQUE (d), RENAME INDEX a TO b", []Stmt{
			{SQL: `CREATE INDEX "t.c" ON "t" ("c", "d")`, Op: OpCreateIndex, Table: "t", Index: "t.c", Auto: "c"},
			{SQL: `CREATE UNIQUE INDEX "t.cu" ON "t" ("d")`, Op: OpCreateIndex, Table: "t", Index: "t.cu"},
			{Op: OpRenameIndex, Table: "t", Index: "t.a", To: "t.b"}}},
		{"DROP TABLE a, b", []Stmt{{SQL: `DROP TABLE "a"`, Op: OpDropTable, Table: "a"}, {SQL: `DROP TABLE "b"`, Op: OpDropTable, Table: "b"}}},
	}
	for _, c := range cases {
		got, err := Rewrite(&codec.DDL{Query: c.query})
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s:\n got %+v, %v\nwant %+v", c.query, got, err, c.want)
		}
	}
	for _, q := range []string{"DROP INDEX `PRIMARY` ON t", "ALTER TABLE t DROP INDEX `primary`", "ALTER TABLE t RENAME TO a, RENAME TO b"} {
		if _, err := Rewrite(&codec.DDL{Query: q}); !errors.Is(err, apply.ErrUnsupportedDDL) {
			t.Errorf("%s: err = %v, want ErrUnsupportedDDL", q, err)
		}
	}
}

func TestRecreateIndex(t *testing.T) {
	for _, c := range []struct{ sql, name, table, want string }{
		{`CREATE UNIQUE INDEX "ux.uu" ON "ux2" ("a", "b" DESC)`, "ux2.uu", "ux2", `CREATE UNIQUE INDEX "ux2.uu" ON "ux2" ("a", "b" DESC)`},
		{`CREATE INDEX IF NOT EXISTS "a.""q" ON a ("c") WHERE c > 'x'`, `b."q`, "b", `CREATE INDEX IF NOT EXISTS "b.""q" ON "b" ("c") WHERE c > 'x'`},
	} {
		got, err := RecreateIndex(c.sql, c.name, c.table)
		if err != nil || got != c.want {
			t.Errorf("%s:\n got %s, %v\nwant %s", c.sql, got, err, c.want)
		}
	}
	if _, err := RecreateIndex(`CREATE TABLE t (a)`, "x", "y"); err == nil {
		t.Error("RecreateIndex took a CREATE TABLE")
	}
}

// TestIndexWithoutColumn: DROP COLUMN takes the column out of each index
// that holds it, as MySQL does (issue 27, finding 3).
func TestIndexWithoutColumn(t *testing.T) {
	for _, c := range []struct {
		sql, column, want string
		has               bool
		left              int
	}{
		{`CREATE UNIQUE INDEX "t.ub" ON "t" ("b")`, "b", `CREATE UNIQUE INDEX "t.ub" ON "t" ()`, true, 0},
		{`CREATE UNIQUE INDEX "t.uab" ON "t" ("a", "b")`, "B", `CREATE UNIQUE INDEX "t.uab" ON "t" ("a")`, true, 1},
		{`CREATE INDEX "t.bc" ON "t" ("b" DESC, "c" DESC)`, "b", `CREATE INDEX "t.bc" ON "t" ("c" DESC)`, true, 1},
		{`CREATE INDEX "t.cbd" ON "t" ( c COLLATE NOCASE , "b",d ASC )`, "b", `CREATE INDEX "t.cbd" ON "t" (c COLLATE NOCASE, d ASC)`, true, 2},
		{`CREATE INDEX "t.b" ON "t" ("a")`, "b", `CREATE INDEX "t.b" ON "t" ("a")`, false, 1},
		// A column named like the index, or the table, is not a key part.
		{`CREATE INDEX "b" ON "b" ("a", "bb")`, "b", `CREATE INDEX "b" ON "b" ("a", "bb")`, false, 2},
	} {
		got, has, left, err := IndexWithoutColumn(c.sql, c.column)
		if err != nil || has != c.has || left != c.left || has && got != c.want || !has && got != c.sql {
			t.Errorf("%s without %s:\n got %s, %v, %d, %v\nwant %s, %v, %d", c.sql, c.column, got, has, left, err, c.want, c.has, c.left)
		}
	}
	for _, sql := range []string{
		`CREATE INDEX "t.x" ON "t" (lower("b"))`,
		`CREATE INDEX "t.x" ON "t" ("a") WHERE b > 0`,
	} {
		if _, _, _, err := IndexWithoutColumn(sql, "b"); !errors.Is(err, apply.ErrUnsupportedDDL) {
			t.Errorf("%s: err = %v, want ErrUnsupportedDDL", sql, err)
		}
	}
	if _, _, _, err := IndexWithoutColumn(`CREATE TABLE t (b)`, "b"); err == nil {
		t.Error("IndexWithoutColumn took a CREATE TABLE")
	}
	// The statements of a DROP COLUMN say which column.
	got, err := Rewrite(&codec.DDL{Query: "ALTER TABLE t DROP `b`, DROP COLUMN c"})
	want := []Stmt{
		{SQL: `ALTER TABLE "t" DROP COLUMN "b"`, Op: OpDropColumn, Table: "t", Column: "b"},
		{SQL: `ALTER TABLE "t" DROP COLUMN "c"`, Op: OpDropColumn, Table: "t", Column: "c"},
	}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("got %+v, %v\nwant %+v", got, err, want)
	}
}
