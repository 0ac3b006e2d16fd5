package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/testkit/testenv"
)

// TestNaiveMatchesApply checks that the benchmark's naive baseline is a
// correct replay, not a strawman: over a small gen log (inserts, updates,
// deletes, and DDLs that add columns, truncate, create and drop tables) it
// leaves in SQLite the same tables with the same rows, value for value and
// type for type, as apply.Run does, and as many rows as the upstream holds.
func TestNaiveMatchesApply(t *testing.T) {
	env, err := newSQLiteEnv(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer env.close()
	naiveVersusApply(t, env, func(db *sql.DB) map[string][]string { return dumpSQLite(t, db) })
}

// TestNaiveMatchesApplyMariaDB is the same on MariaDB (REDOKIT_MYSQL_DSN),
// in fresh databases, dropped after; the server's durability settings are
// left as they are.
func TestNaiveMatchesApplyMariaDB(t *testing.T) {
	testenv.MySQL(t)
	res := newResult()
	env, err := newMariaDBEnv(context.Background(), childInput{Rep: 900 + os.Getpid()%100}, res, false)
	if err != nil {
		t.Fatal(err)
	}
	if env == nil {
		t.Fatal(res.Info[applyUnavailable])
	}
	defer env.close()
	naiveVersusApply(t, env, func(db *sql.DB) map[string][]string { return dumpMySQL(t, env.admin, env.schema) })
}

// TestNaiveMatchesApplyPostgres is the same on PostgreSQL
// (REDOKIT_POSTGRES_DSN), in fresh schemas, dropped after; the server's
// durability settings are left as they are.
func TestNaiveMatchesApplyPostgres(t *testing.T) {
	testenv.Postgres(t)
	res := newResult()
	env, err := newPostgresEnv(context.Background(), childInput{Rep: 900 + os.Getpid()%100}, res, false)
	if err != nil {
		t.Fatal(err)
	}
	if env == nil {
		t.Fatal(res.Info[applyUnavailable])
	}
	defer env.close()
	naiveVersusApply(t, env, func(db *sql.DB) map[string][]string { return dumpPostgres(t, env.admin, env.schema) })
}

func naiveVersusApply(t *testing.T, env *applyEnv, dump func(*sql.DB) map[string][]string) {
	ctx := context.Background()
	b, err := local.New(t.TempDir(), &local.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cfg := genConfig(4000, env.schema)
	cfg.DDLRate = 0.03 // DDLs of every kind in a short log
	l, err := writeGenLog(ctx, b, "t", cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	if l.ddls < 10 {
		t.Fatalf("the log has %d DDLs; the test wants DDLs of every kind", l.ddls)
	}
	var ops [3]int
	var actions = map[codec.ActionType]bool{}
	r, err := reader.Open(ctx, b, &reader.Options{LogID: "t", EndTs: l.lastTs})
	if err != nil {
		t.Fatal(err)
	}
	for ev, err := range r.CodecEvents(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == codec.DDLEvent {
			actions[ev.DDL.Type] = true
			continue
		}
		switch ev.Row.Op() {
		case codec.OpInsert:
			ops[0]++
		case codec.OpUpdate:
			ops[1]++
		case codec.OpDelete:
			ops[2]++
		}
	}
	r.Close()
	if ops[0] == 0 || ops[1] == 0 || ops[2] == 0 || !actions[codec.ActionTruncateTable] || !actions[codec.ActionDropTable] || !actions[codec.ActionAddColumn] {
		t.Fatalf("the log lacks some change: inserts/updates/deletes %v, DDL actions %v", ops, actions)
	}

	// apply.Run.
	as, err := env.open(ctx, "apply", "t")
	if err != nil {
		t.Fatal(err)
	}
	r, err = reader.Open(ctx, b, &reader.Options{LogID: "t", EndTs: l.lastTs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := apply.Run(ctx, r.CodecEvents(ctx), as, nil); err != nil {
		t.Fatal(err)
	}
	r.Close()
	want := dump(as.DB())
	as.Close()
	if err := env.reset(ctx); err != nil {
		t.Fatal(err)
	}

	// The naive replay, of the whole log.
	ns, err := env.open(ctx, "naive", "t")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	r, err = reader.Open(ctx, b, &reader.Options{LogID: "t", EndTs: l.lastTs})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	nv, err := newNaive(ctx, ns, env.dialect)
	if err != nil {
		t.Fatal(err)
	}
	n, err := nv.replay(ctx, r, 1<<62)
	nv.close()
	if err != nil {
		t.Fatal(err)
	}
	if n != l.rows {
		t.Fatalf("naive replayed %d row changes of %d", n, l.rows)
	}
	got := dump(ns.DB())

	if len(want) == 0 {
		t.Fatal("apply.Run left no table")
	}
	var total int64
	for name, rows := range want {
		if name != schemaKey {
			total += int64(len(rows))
		}
	}
	if m := modelRows(l.model); total != m {
		t.Fatalf("apply.Run left %d rows, the upstream holds %d", total, m)
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("table %s: apply.Run has it, the naive replay does not", name)
			continue
		}
		if !slices.Equal(g, w) {
			t.Errorf("table %s: the naive replay left %d rows, apply.Run %d; first difference:\n%s", name, len(g), len(w), firstDiff(g, w))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("table %s: the naive replay has it, apply.Run does not", name)
		}
	}
}

// schemaKey is the key of a dump's table definitions.
const schemaKey = "(schema)"

// dumpMySQL is dumpSQLite for a MySQL database: SHOW CREATE TABLE, and the
// rows of every table in key order.
func dumpMySQL(t *testing.T, db *sql.DB, schema string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	rows, err := db.Query("SELECT table_name FROM information_schema.tables WHERE table_schema = ? ORDER BY table_name", schema)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		var tn, ddl string
		if err := db.QueryRow(fmt.Sprintf("SHOW CREATE TABLE `%s`.`%s`", schema, name)).Scan(&tn, &ddl); err != nil {
			t.Fatal(err)
		}
		out[schemaKey] = append(out[schemaKey], ddl)
		out[name] = dumpRows(t, db, fmt.Sprintf("SELECT * FROM `%s`.`%s` ORDER BY 1", schema, name))
	}
	return out
}

// dumpPostgres is dumpMySQL for a PostgreSQL schema: each table's columns
// (name, type, nullability, default) and its rows in key order.
func dumpPostgres(t *testing.T, db *sql.DB, schema string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	rows, err := db.Query("SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name", schema)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		cols := dumpRows(t, db, fmt.Sprintf(`SELECT column_name, data_type, is_nullable, column_default FROM information_schema.columns
			WHERE table_schema = '%s' AND table_name = '%s' ORDER BY ordinal_position`, schema, name))
		out[schemaKey] = append(out[schemaKey], name+": "+strings.Join(cols, "; "))
		out[name] = dumpRows(t, db, fmt.Sprintf(`SELECT * FROM "%s"."%s" ORDER BY 1`, schema, name))
	}
	return out
}

func dumpRows(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	out := []string{}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		for i, v := range vals {
			if b, ok := v.([]byte); ok {
				v = string(b)
			}
			fmt.Fprintf(&sb, "%s=%T:%v ", cols[i], v, v)
		}
		out = append(out, sb.String())
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// dumpSQLite returns every table but the progress table, each as its rows
// (every column's storage class and value) in key order, and the table
// definitions under schemaKey.
func dumpSQLite(t *testing.T, db *sql.DB) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	rows, err := db.Query(`SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name != ? ORDER BY name`, apply.DefaultProgressTable)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var name, ddl string
		if err := rows.Scan(&name, &ddl); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
		out[schemaKey] = append(out[schemaKey], ddl)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		out[name] = dumpRows(t, db, fmt.Sprintf(`SELECT * FROM "%s" ORDER BY 1`, name))
	}
	return out
}

func firstDiff(got, want []string) string {
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			return fmt.Sprintf("row %d:\n  naive: %.300s\n  apply: %.300s", i, g, w)
		}
	}
	return "(none)"
}

// TestApplyReport checks the apply rows of the report and the README
// snippet: every sink, the naive baseline and the bulk load, each ratio
// against its target (5× with SQLite's default, 20× durable, 0.5× bulk),
// and an unreachable sink marked not available with its reason.
func TestApplyReport(t *testing.T) {
	cells := buildMatrix(matrixOpts{quick: true, filter: "apply/"})
	var ids []string
	for _, c := range cells {
		ids = append(ids, c.ID)
	}
	wantIDs := []string{"apply/sqlite", "apply/sqlite-full", "apply/mariadb", "apply/postgres",
		"apply/rare-ddl/sqlite-full", "apply/rare-ddl/mariadb", "apply/rare-ddl/postgres",
		"apply/insert/sqlite", "apply/insert/mariadb", "apply/insert/postgres"}
	if !slices.Equal(ids, wantIDs) {
		t.Fatalf("-quick -cells apply/ keeps %v, want %v", ids, wantIDs)
	}
	ok := func(apply, naive float64) *Result {
		res := newResult()
		res.Metrics["apply_rows_s"], res.Metrics["naive_rows_s"] = apply, naive
		res.Metrics["ratio_apply_naive"] = apply / naive
		res.Metrics["naive_rows"] = 5000
		res.Metrics["apply_s"], res.Metrics["apply_barrier_s"], res.Metrics["apply_ddl_s"] = 2, 1.25, 0.5
		res.Metrics["apply_other_s"] = 0.25
		return res
	}
	bulk := func(apply, bulk float64) *Result {
		res := newResult()
		res.Metrics["apply_rows_s"], res.Metrics["bulk_rows_s"] = apply, bulk
		res.Metrics["ratio_apply_bulk"] = apply / bulk
		res.Metrics["log_rows"] = 61000
		return res
	}
	gone := newResult()
	gone.Info[applyUnavailable] = "REDOKIT_MYSQL_DSN is not set"
	results := map[string][]*Result{
		"apply/sqlite":               {ok(60000, 10000), ok(66000, 11000), ok(30000, 10000)},
		"apply/sqlite-full":          {ok(60000, 1000), ok(60000, 2000), ok(60000, 2500)},
		"apply/mariadb":              {gone, gone, gone},
		"apply/postgres":             {ok(40000, 1000), ok(44000, 1000), ok(42000, 1000)},
		"apply/rare-ddl/postgres":    {ok(90000, 1000), ok(80000, 1000), ok(85000, 1000)},
		"apply/rare-ddl/sqlite-full": {ok(30000, 2000), ok(30000, 2000), ok(30000, 2000)},
		"apply/insert/sqlite":        {bulk(60000, 100000), bulk(66000, 100000), bulk(70000, 100000)},
		"apply/insert/mariadb":       {gone, gone, gone},
		"apply/insert/postgres":      {bulk(40000, 100000), bulk(45000, 100000), bulk(30000, 100000)},
	}
	r := buildReport(Machine{}, nil, cells, results, true, 3, 0)
	verdicts, notes := map[string]string{}, map[string]string{}
	for _, tg := range r.Targets {
		verdicts[tg.Cell] = fmt.Sprintf("%s / %g", tg.Verdict, tg.Need)
		notes[tg.Cell] = tg.Note
	}
	for id, want := range map[string]string{
		"apply/sqlite":               "met / 5",
		"apply/sqlite-full":          "met / 20",
		"apply/postgres":             "met / 20",
		"apply/rare-ddl/postgres":    "met / 20",
		"apply/rare-ddl/sqlite-full": "not met / 20",
		"apply/rare-ddl/mariadb":     "not measured / 20",
		"apply/mariadb":              "not measured / 20",
		"apply/insert/sqlite":        "met / 0.5",
		"apply/insert/postgres":      "not met / 0.5",
		"apply/insert/mariadb":       "not measured / 0.5",
	} {
		if got := verdicts[id]; got != want {
			t.Errorf("%s: verdict %q, want %q", id, got, want)
		}
	}
	if n := notes["apply/sqlite"]; !strings.Contains(n, "the spread crosses the line") { // 3×–6×
		t.Errorf("apply/sqlite: note %q, want the spread crossing the line", n)
	}
	if n := notes["apply/sqlite-full"]; strings.Contains(n, "the spread crosses the line") { // 24×–60×
		t.Errorf("apply/sqlite-full: note %q; its spread stays above 20×", n)
	}
	for _, id := range []string{"apply/mariadb", "apply/insert/mariadb"} {
		if n := notes[id]; n != "not available: REDOKIT_MYSQL_DSN is not set" {
			t.Errorf("%s: note %q", id, n)
		}
	}
	snip := renderSnippet(r)
	for _, want := range []string{"| SQLite, WAL, synchronous=NORMAL | DDL-heavy gen log (1 DDL per ~870) | 60.0k | 10.0k (first 5.00k rows) | 6.0× (3.0–6.0) | ≥ 5× | met |",
		"| mariadb | DDL-heavy gen log (1 DDL per ~870) | – | – | – | ≥ 20× | not available: REDOKIT_MYSQL_DSN is not set |",
		"| SQLite, WAL, synchronous=FULL | DDL-heavy gen log (1 DDL per ~870) | 60.0k | 2.00k (first 5.00k rows) | 30.0× (24.0–60.0) | ≥ 20× | met |",
		"| SQLite, WAL, synchronous=FULL | gen log with rare DDLs (1 per ~20k) | 30.0k | 2.00k (first 5.00k rows) | 15.0× (15.0–15.0) | ≥ 20× | not met |",
		"| SQLite, WAL, synchronous=NORMAL | 61.0k | 66.0k | prepared INSERTs in one transaction | 100k | 0.66× (0.60–0.70) | ≥ 0.5× | met |",
		"| PostgreSQL | 61.0k | 40.0k | COPY FROM STDIN | 100k | 0.40× (0.30–0.45) | ≥ 0.5× | not met |",
		"| mariadb | – | – | LOAD DATA LOCAL INFILE | – | – | ≥ 0.5× | not available: REDOKIT_MYSQL_DSN is not set |"} {
		if !strings.Contains(snip, want) {
			t.Errorf("the snippet lacks %q:\n%s", want, snip)
		}
	}
	md := renderMarkdown(r, nil)
	for _, want := range []string{"### Mixed log against a naive replay", "### Insert-heavy log against the database's bulk load",
		"| apply/postgres | postgres | – (–) | 2.00 (2.00–2.00) | 1.25 (1.25–1.25) | 0.50 (0.50–0.50) | 0.25 (0.25–0.25) |"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report has no section or row %q", want)
		}
	}
}

// TestApplyInsertCell runs the insert cell on a small log on each sink
// (MariaDB and PostgreSQL when their DSN is set; in CI they must be): apply
// and the bulk load must leave the same rows, as many as the log inserted.
func TestApplyInsertCell(t *testing.T) {
	ctx := context.Background()
	for _, sink := range []string{applySQLite, applyMariaDB, applyPostgres} {
		t.Run(sink, func(t *testing.T) {
			in := childInput{Rep: 950 + os.Getpid()%40, Dir: t.TempDir(), Backend: &Backend{Name: "local-nosync", Kind: "local", NoSync: true},
				Cell: Cell{ID: "apply/insert/" + sink, Kind: "apply", Backend: "local-nosync", Sink: sink, Mix: applyInsert, Rows: 3000}}
			res := newResult()
			var env *applyEnv
			var err error
			switch sink {
			case applySQLite:
				env, err = newSQLiteEnv(in.Dir, "")
			case applyMariaDB:
				testenv.MySQL(t)
				env, err = newMariaDBEnv(ctx, in, res, false)
			case applyPostgres:
				testenv.Postgres(t)
				env, err = newPostgresEnv(ctx, in, res, false)
			}
			if err != nil {
				t.Fatal(err)
			}
			if env == nil {
				t.Fatal(res.Info[applyUnavailable])
			}
			defer env.close()
			if err := runApplyInsertCell(ctx, in, res, env); err != nil {
				t.Fatal(err)
			}
			rows := res.Metrics["log_rows"]
			if rows < 1500 || rows >= 3000 {
				t.Errorf("the insert-only log has %v row changes of the workload's 3000; want its inserts (about 60%%)", rows)
			}
			for _, m := range []string{"apply_rows_s", "bulk_rows_s", "ratio_apply_bulk"} {
				if !(res.Metrics[m] > 0) {
					t.Errorf("%s = %v", m, res.Metrics[m])
				}
			}
			t.Logf("%s: %v rows, apply %.0f rows/s, bulk %.0f rows/s (%.2f×), digest %s", sink, rows,
				res.Metrics["apply_rows_s"], res.Metrics["bulk_rows_s"], res.Metrics["ratio_apply_bulk"], res.Info["digest"])
		})
	}
}

// TestDigestSeesADifference checks the insert cell's comparison can fail:
// one value changed, or one row fewer, changes the digest.
func TestDigestSeesADifference(t *testing.T) {
	ctx := context.Background()
	env, err := newSQLiteEnv(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer env.close()
	sink, err := env.open(ctx, "d", "t")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	db := sink.DB()
	for _, q := range []string{`CREATE TABLE "a" (id INTEGER PRIMARY KEY, v TEXT)`, `INSERT INTO "a" VALUES (1, 'x'), (2, 'y'), (3, NULL)`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	d0, err := digestTables(ctx, db, env, []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	if d0.rows != 3 {
		t.Fatalf("digest counted %d rows of 3", d0.rows)
	}
	for _, q := range []string{`UPDATE "a" SET v = 'z' WHERE id = 2`, `DELETE FROM "a" WHERE id = 3`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
		d, err := digestTables(ctx, db, env, []string{"a"})
		if err != nil {
			t.Fatal(err)
		}
		if d == d0 {
			t.Errorf("after %s the digest is unchanged", q)
		}
		d0 = d
	}
}
