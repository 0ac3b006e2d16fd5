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
		{"CREATE TABLE t (id BIGINT UNSIGNED PRIMARY KEY, v INT)", []string{`CREATE TABLE "t" ("id" BIGINT PRIMARY KEY, "v" INT)`}, false},
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
		{"ALTER TABLE t ADD c DECIMAL(10,2), DROP COLUMN d, ADD INDEX ix (c), DROP KEY old, RENAME COLUMN x TO y",
			[]string{`ALTER TABLE "t" ADD COLUMN "c" DECIMAL (10, 2)`, `ALTER TABLE "t" DROP COLUMN "d"`, `CREATE INDEX "t.ix" ON "t" ("c")`, `DROP INDEX "t.old"`, `ALTER TABLE "t" RENAME COLUMN "x" TO "y"`}, false},
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
		got, err := Rewrite(&codec.DDL{Table: codec.TableName{Schema: "db", Name: "t"}, Query: c.query})
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
