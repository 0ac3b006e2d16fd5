package pgddl_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/pgddl"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/testkit/testenv"
)

// postgres returns a connection to the server of REDOKIT_POSTGRES_DSN, or
// skips the test (fails it when CI=true).
func postgres(t *testing.T) *sql.DB {
	t.Helper()
	dsn := testenv.Postgres(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatalf("REDOKIT_POSTGRES_DSN: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Ping(); err != nil {
		t.Fatalf("REDOKIT_POSTGRES_DSN: %v", err)
	}
	return db
}

type pgEnv struct {
	t    *testing.T
	db   *sql.DB
	a, b string // the test's two schemas (MySQL databases)
}

// run translates query (a DDL in schema) with RewriteWith and runs it in
// one transaction, as the sink does.
func (e *pgEnv) run(schema, query string) error {
	ctx := context.Background()
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer tx.Rollback()
	stmts, err := pgddl.RewriteWith(ctx, tx, &codec.DDL{Table: codec.TableName{Schema: schema}, Query: query})
	if err != nil {
		return err
	}
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return tx.Commit()
}

// ddl runs query twice: the second run, a replay, must change nothing and
// succeed.
func (e *pgEnv) ddl(schema, query string) {
	e.t.Helper()
	if err := e.run(schema, query); err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	before := e.catalog()
	if err := e.run(schema, query); err != nil {
		e.t.Fatalf("replay of %s: %v", query, err)
	}
	if after := e.catalog(); !slices.Equal(before, after) {
		e.t.Fatalf("replay of %s changed the catalog:\nbefore %q\nafter  %q", query, before, after)
	}
}

// catalog lists the test schemas' columns, indexes and constraints.
func (e *pgEnv) catalog() []string {
	return e.strings(`SELECT table_schema || '.' || table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '-')
FROM information_schema.columns WHERE table_schema IN ($1, $2)
UNION ALL SELECT schemaname || ' ' || indexname || ' ' || indexdef FROM pg_indexes WHERE schemaname IN ($1, $2)
UNION ALL SELECT n.nspname || ' ' || c.conname || ' ' || pg_get_constraintdef(c.oid) FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname IN ($1, $2)
ORDER BY 1`, e.a, e.b)
}

func (e *pgEnv) strings(query string, args ...any) []string {
	e.t.Helper()
	rows, err := e.db.Query(query, args...)
	if err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (e *pgEnv) exec(query string) {
	e.t.Helper()
	if _, err := e.db.Exec(query); err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
}

// indexes returns the index names of table s.t.
func (e *pgEnv) indexes(s, t string) []string {
	return e.strings(`SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND tablename = $2 ORDER BY 1`, s, t)
}

// columns returns "name type[(len|prec,scale)] nullable default" of table s.t.
func (e *pgEnv) columns(s, t string) []string {
	return e.strings(`SELECT column_name || ' ' || data_type ||
  coalesce('(' || character_maximum_length || ')', '') ||
  CASE WHEN data_type = 'numeric' THEN '(' || numeric_precision || ',' || numeric_scale || ')' ELSE '' END ||
  CASE WHEN data_type LIKE 'timestamp%' THEN '(' || datetime_precision || ')' ELSE '' END ||
  CASE WHEN is_nullable = 'NO' THEN ' not null' ELSE '' END || coalesce(' default ' || column_default, '')
FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position`, s, t)
}

// foreignKeys returns "name → table (delete rule)" of table s.t.
func (e *pgEnv) foreignKeys(s, t string) []string {
	return e.strings(`SELECT c.conname || ' -> ' || c.confrelid::regclass::text || ' ' || r.delete_rule
FROM pg_constraint c JOIN information_schema.referential_constraints r ON r.constraint_name = c.conname AND r.constraint_schema = $1
WHERE c.conrelid = to_regclass(quote_ident($1) || '.' || quote_ident($2)) AND c.contype = 'f' ORDER BY 1`, s, t)
}

func wantList(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}

func TestPostgres(t *testing.T) {
	db := postgres(t)
	e := &pgEnv{t: t, db: db, a: fmt.Sprintf("rk%d_a", os.Getpid()), b: fmt.Sprintf("rk%d_b", os.Getpid())}
	cleanup := func() {
		db.Exec(`DROP SCHEMA IF EXISTS "` + e.a + `" CASCADE`)
		db.Exec(`DROP SCHEMA IF EXISTS "` + e.b + `" CASCADE`)
	}
	cleanup()
	t.Cleanup(cleanup)
	a, b := e.a, e.b

	e.ddl(a, "CREATE DATABASE `"+a+"`")
	e.ddl(b, "CREATE DATABASE IF NOT EXISTS "+b+" DEFAULT CHARACTER SET utf8mb4")
	e.ddl(a, "CREATE TABLE par (id BIGINT UNSIGNED NOT NULL PRIMARY KEY, name VARCHAR(20) NOT NULL DEFAULT '', UNIQUE KEY uname (name)) ENGINE=InnoDB")
	e.ddl(a, "CREATE TABLE `ux` (`id` int(11) NOT NULL AUTO_INCREMENT, `pid` bigint(20) unsigned DEFAULT NULL, `u` varchar(10) COLLATE utf8mb4_bin DEFAULT NULL, "+
		"`e` enum('x','y') NOT NULL DEFAULT 'y', `s` set('r','w') DEFAULT 'r,w', `b` bit(64) DEFAULT b'1', `j` json DEFAULT NULL, `ts` timestamp(3) NULL DEFAULT NULL, "+
		"`dt` datetime(6) DEFAULT '2020-01-02 03:04:05.123456', `tm` time DEFAULT '-838:59:59', `d` decimal(12,4) DEFAULT '1.5', `f` float DEFAULT NULL, `dd` double DEFAULT -0.5, "+
		"`bl` blob, `y` year(4) DEFAULT '2024', `ch` char(3) CHARACTER SET binary DEFAULT 'a', "+
		"PRIMARY KEY (`id`), UNIQUE KEY `uu` (`u`), KEY `k_e` (`e`,`id`), "+
		"CONSTRAINT `fk_par` FOREIGN KEY (`pid`) REFERENCES `par` (`id`) ON DELETE CASCADE) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")
	wantList(t, "columns of ux", e.columns(a, "ux"), []string{
		"id integer not null", "pid numeric(20,0)", "u character varying(10)",
		"e smallint not null default 2", "s bigint default 3", "b numeric(20,0) default 1", "j json",
		"ts timestamp with time zone(3)", "dt timestamp without time zone(6) default '2020-01-02 03:04:05.123456'::timestamp without time zone",
		"tm interval default '-838:59:59'::interval", "d numeric(12,4) default 1.5", "f real", "dd double precision default '-0.5'::numeric",
		"bl bytea", "y smallint default 2024", `ch bytea default '\x610000'::bytea`})
	wantList(t, "indexes of ux", e.indexes(a, "ux"), []string{"ux.PRIMARY", "ux.fk_par", "ux.k_e", "ux.uu"})
	wantList(t, "foreign keys of ux", e.foreignKeys(a, "ux"), []string{"fk_par -> " + a + ".par CASCADE"})

	// Rows for ADD COLUMN to fill.
	e.exec(`INSERT INTO "` + a + `"."par" VALUES (1, 'one')`)
	e.exec(`INSERT INTO "` + a + `"."ux" (id, pid, u) VALUES (1, 1, 'k1'), (2, NULL, 'k2')`)
	e.ddl(a, "ALTER TABLE ux ADD COLUMN c INT NOT NULL, ADD COLUMN (c2 VARCHAR(5) DEFAULT 'zz', e2 ENUM('p','q') NOT NULL)")
	wantList(t, "values of added columns", e.strings(`SELECT c || ' ' || c2 || ' ' || e2 FROM "`+a+`"."ux" ORDER BY id`), []string{"0 zz 1", "0 zz 1"})
	// A default whose value the rows cannot get exactly.
	if err := e.run(a, "ALTER TABLE ux ADD COLUMN t2 DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP"); err == nil ||
		!strings.Contains(err.Error(), "cannot add column t2 to table "+a+".ux, which has rows") {
		t.Errorf("ADD COLUMN … DEFAULT CURRENT_TIMESTAMP on a table with rows: %v", err)
	}
	if err := e.run(a, "ALTER TABLE ux ADD COLUMN t3 DATE NOT NULL"); err == nil || !strings.Contains(err.Error(), "implicit default") {
		t.Errorf("ADD COLUMN DATE NOT NULL on a table with rows: %v", err)
	}
	// Unnamed indexes are named as MySQL does; like MySQL's, their
	// replay adds another index (c_3…), so this one runs once.
	if err := e.run(a, "ALTER TABLE ux ADD INDEX (c), ADD INDEX k_c2 (c2), ADD INDEX (c, c2)"); err != nil {
		t.Fatal(err)
	}
	wantList(t, "indexes of ux", e.indexes(a, "ux"), []string{"ux.PRIMARY", "ux.c", "ux.c_2", "ux.fk_par", "ux.k_c2", "ux.k_e", "ux.uu"})

	// The trial's failure: RENAME TABLE, then DROP INDEX on the new name.
	e.ddl(a, "RENAME TABLE ux TO ux2")
	wantList(t, "indexes of ux2", e.indexes(a, "ux2"), []string{"ux2.PRIMARY", "ux2.c", "ux2.c_2", "ux2.fk_par", "ux2.k_c2", "ux2.k_e", "ux2.uu"})
	if err := e.run(a, "DROP INDEX uu ON ux2"); err != nil {
		t.Fatal(err)
	}
	wantList(t, "indexes of ux2 after DROP INDEX uu", e.indexes(a, "ux2"), []string{"ux2.PRIMARY", "ux2.c", "ux2.c_2", "ux2.fk_par", "ux2.k_c2", "ux2.k_e"})
	// A DROP INDEX of an index that is not there is an error naming it.
	for _, q := range []string{"DROP INDEX uu ON ux2", "ALTER TABLE ux2 DROP KEY nope", "ALTER TABLE ux2 DROP FOREIGN KEY nope"} {
		if err := e.run(a, q); err == nil || !strings.Contains(err.Error(), "nope") && !strings.Contains(err.Error(), "index uu of table "+a+".ux2") {
			t.Errorf("%s: %v, want an error naming the index", q, err)
		}
	}
	// …with an SQLSTATE no sink takes for transient.
	var pgErr *pgconn.PgError
	if err := e.run(a, "DROP INDEX uu ON ux2"); !errors.As(err, &pgErr) || pgErr.Code != "42704" {
		t.Errorf("DROP INDEX of a missing index: %v, want SQLSTATE 42704", err)
	}
	e.ddl(a, "DROP INDEX IF EXISTS uu ON ux2")
	// A column named in another case is not "already dropped".
	if err := e.run(a, "ALTER TABLE ux2 DROP COLUMN E2"); err == nil || !strings.Contains(err.Error(), "column E2 of table "+a+".ux2 is there in another case") {
		t.Errorf("DROP COLUMN E2: %v", err)
	}

	e.ddl(a, "ALTER TABLE ux2 MODIFY c BIGINT NULL, CHANGE COLUMN c2 c3 VARCHAR(10) NOT NULL DEFAULT 'q', MODIFY e ENUM('x','y','z') NOT NULL DEFAULT 'z', "+
		"MODIFY u VARBINARY(10), ALTER COLUMN y SET DEFAULT 69, ALTER d SET DEFAULT 2")
	wantList(t, "columns of ux2 after MODIFY", e.columns(a, "ux2")[:6], []string{
		"id integer not null", "pid numeric(20,0)", "u bytea", "e smallint not null default 3", "s bigint default 3", "b numeric(20,0) default 1"})
	wantList(t, "more columns of ux2 after MODIFY", e.strings(`SELECT column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '-') FROM information_schema.columns
WHERE table_schema = $1 AND table_name = 'ux2' AND column_name IN ('c', 'c3', 'y', 'd') ORDER BY 1`, a),
		[]string{"c bigint YES -", "c3 character varying NO 'q'::character varying", "d numeric YES 2", "y smallint YES 2069"})
	wantList(t, "values after MODIFY", e.strings(`SELECT convert_from(u, 'UTF8') || ' ' || c3 FROM "`+a+`"."ux2" ORDER BY id`), []string{"k1 zz", "k2 zz"})
	for _, q := range []string{"ALTER TABLE ux2 MODIFY e ENUM('y','x','z') NOT NULL", "ALTER TABLE ux2 MODIFY dd VARCHAR(30)", "ALTER TABLE ux2 MODIFY b VARCHAR(10)"} {
		if err := e.run(a, q); !errors.Is(err, apply.ErrUnsupportedDDL) {
			t.Errorf("%s: %v, want ErrUnsupportedDDL", q, err)
		}
	}

	// Across schemas, then the indexes follow again.
	e.ddl(a, "ALTER TABLE ux2 RENAME TO `"+b+"`.ux3")
	wantList(t, "indexes of ux3", e.indexes(b, "ux3"), []string{"ux3.PRIMARY", "ux3.c", "ux3.c_2", "ux3.fk_par", "ux3.k_c2", "ux3.k_e"})
	wantList(t, "tables left in "+a, e.strings(`SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY 1`, a), []string{"par"})
	if err := e.run(b, "ALTER TABLE ux3 DROP INDEX k_e"); err != nil {
		t.Fatal(err)
	}
	e.ddl(b, "CREATE TABLE cp LIKE ux3")
	wantList(t, "indexes of the LIKE copy", e.indexes(b, "cp"), []string{"cp.PRIMARY", "cp.c", "cp.c_2", "cp.fk_par", "cp.k_c2"})
	wantList(t, "foreign keys of the LIKE copy", e.foreignKeys(b, "cp"), nil)
	// MySQL index names ignore case.
	if err := e.run(b, "DROP INDEX K_C2 ON cp"); err != nil {
		t.Fatal(err)
	}
	wantList(t, "indexes of the LIKE copy after DROP INDEX K_C2", e.indexes(b, "cp"), []string{"cp.PRIMARY", "cp.c", "cp.c_2", "cp.fk_par"})
	if err := e.run(b, "ALTER TABLE ux3 DROP FOREIGN KEY fk_par"); err != nil {
		t.Fatal(err)
	}
	e.ddl(b, "ALTER TABLE ux3 ADD CONSTRAINT fk2 FOREIGN KEY (pid) REFERENCES `"+a+"`.par (id) ON DELETE SET NULL ON UPDATE RESTRICT")
	wantList(t, "foreign keys of ux3", e.foreignKeys(b, "ux3"), []string{"fk2 -> " + a + ".par SET NULL"})
	// The index TiDB gives a foreign key: none for fk2, fk3 and fk4,
	// whose columns an index starts with (fk_par, c, k_c2); one for FK5.
	// Existing rows are not checked (NOT VALID), as MySQL with
	// foreign_key_checks off: ux3's c is 0, which par has not.
	e.ddl(b, "ALTER TABLE ux3 ADD CONSTRAINT fk3 FOREIGN KEY (c) REFERENCES `"+a+"`.par (id)")
	wantList(t, "indexes of ux3 after ADD FOREIGN KEY", e.indexes(b, "ux3"), []string{"ux3.PRIMARY", "ux3.c", "ux3.c_2", "ux3.fk_par", "ux3.k_c2"})
	e.ddl(b, "ALTER TABLE ux3 ADD CONSTRAINT fk4 FOREIGN KEY (c3) REFERENCES `"+a+"`.par (name)")
	e.ddl(b, "ALTER TABLE ux3 ADD CONSTRAINT FK5 FOREIGN KEY (b) REFERENCES `"+a+"`.par (id)")
	wantList(t, "indexes of ux3 after ADD FOREIGN KEY fk4, FK5", e.indexes(b, "ux3"), []string{"ux3.PRIMARY", "ux3.c", "ux3.c_2", "ux3.fk5", "ux3.fk_par", "ux3.k_c2"})
	e.ddl(b, "ALTER TABLE ux3 DROP PRIMARY KEY, ADD PRIMARY KEY (id, c3)")
	wantList(t, "primary key of ux3", e.strings(`SELECT conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = to_regclass($1) AND contype = 'p'`,
		`"`+b+`"."ux3"`), []string{"ux3.PRIMARY PRIMARY KEY (id, c3)"})

	// A swap through a temporary name: each index follows its table.
	e.ddl(a, "CREATE TABLE s1 (a INT, KEY ka (a))")
	e.ddl(a, "CREATE TABLE s2 (b INT, KEY kb (b))")
	// A swap cannot tell a replay (in MySQL neither): it runs once.
	if err := e.run(a, "RENAME TABLE s1 TO tmp, s2 TO s1, tmp TO s2"); err != nil {
		t.Fatal(err)
	}
	wantList(t, "indexes of s1 after the swap", e.indexes(a, "s1"), []string{"s1.kb"})
	wantList(t, "indexes of s2 after the swap", e.indexes(a, "s2"), []string{"s2.ka"})
	if err := e.run(a, "DROP INDEX kb ON s1"); err != nil {
		t.Fatal(err)
	}

	// Long names: hashed, and found again after a rename.
	long := strings.Repeat("t", 60)
	e.ddl(a, "CREATE TABLE "+long+" (a INT, b INT, KEY long_index_a (a), UNIQUE KEY long_index_b (b))")
	e.ddl(a, "RENAME TABLE "+long+" TO "+long[:59]+"u")
	if err := e.run(a, "DROP INDEX long_index_a ON "+long[:59]+"u"); err != nil {
		t.Fatal(err)
	}
	if got := e.indexes(a, long[:59]+"u"); len(got) != 1 || len(got[0]) > 63 || !strings.Contains(got[0], "~") {
		t.Errorf("indexes of the long-named table: %q", got)
	}

	e.ddl(a, "CREATE ALGORITHM=UNDEFINED DEFINER=`root`@`%` SQL SECURITY DEFINER VIEW v AS SELECT id, name AS n FROM par WHERE id >= 1")
	wantList(t, "view rows", e.strings(`SELECT id || ' ' || n FROM "`+a+`"."v"`), []string{"1 one"})
	e.ddl(a, "DROP VIEW v")
	e.ddl(b, "TRUNCATE TABLE ux3")
	e.ddl(b, "DROP TABLE cp, ux3")
	e.ddl(a, "DROP DATABASE `"+b+"`")
	wantList(t, "schema "+b, e.strings(`SELECT nspname::text FROM pg_namespace WHERE nspname = $1`, b), nil)
}
