package cli

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/testkit/workload"
)

// tsAt is the commit ts k milliseconds after gen's start: a TSO.
func tsAt(k int) uint64 { return workload.DefaultStartTs + uint64(k)<<18 }

// logEvent is one transaction of a hand-written log: a DDL, or rows.
type logEvent struct {
	k    int // commit ts tsAt(k)
	ddl  *codec.DDL
	rows []codec.RowChange
}

func ddlTx(k int, schema, table string, action codec.ActionType, q string) logEvent {
	d := &codec.DDL{StartTs: tsAt(k) - 1, CommitTs: tsAt(k), Table: codec.TableName{Schema: schema, Name: table}, Type: action, Query: q}
	if table != "" {
		d.Tables = []codec.DDLTable{{TableName: d.Table}}
	}
	return logEvent{k: k, ddl: d}
}

// rowsTx inserts row id k (v "v<k>") into each of tables ("schema.name").
func rowsTx(k int, tables ...string) logEvent {
	e := logEvent{k: k}
	for _, t := range tables {
		schema, name, _ := strings.Cut(t, ".")
		e.rows = append(e.rows, codec.RowChange{StartTs: tsAt(k) - 1, CommitTs: tsAt(k), Table: codec.TableName{Schema: schema, Name: name},
			Columns: []codec.Column{
				{Name: "id", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey | codec.FlagHandleKey, Value: codec.IntValue(int64(k))},
				{Name: "v", Type: codec.TypeVarchar, Flags: codec.FlagNullable, Charset: "utf8mb4", Value: codec.StringValue(fmt.Sprintf("v%d", k))},
			}})
	}
	return e
}

// rowSpan is the one span of a hand-written log's rows.
const rowSpan = 1 << 8

// txn is e as the workload's transaction: a DDL on the DDL span, rows on
// rowSpan.
func (e logEvent) txn() *workload.Txn {
	tx := &workload.Txn{CommitTs: tsAt(e.k)}
	if e.ddl != nil {
		tx.DDL = true
		tx.Changes = []workload.Change{{Span: workload.DDLSpan, Event: codec.Event{Kind: codec.DDLEvent, DDL: *e.ddl}}}
	}
	for _, r := range e.rows {
		tx.Changes = append(tx.Changes, workload.Change{Span: rowSpan, Event: codec.Event{Kind: codec.RowEvent, Row: r}})
	}
	return tx
}

// writeLog writes events through the real writer (one writer, every row on
// one span) and closes the log, so its global resolved ts is the last
// commit ts.
func writeLog(t *testing.T, storage, logID string, events []logEvent) {
	t.Helper()
	ctx := context.Background()
	b, err := blob.Open(ctx, withCreateDir(storage))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	wf := workloadFlags{flushInterval: 20 * time.Millisecond, segmentSize: 64 << 10}
	p, err := newPipeline(ctx, b, logID, workload.Config{}, 1, wf.writerOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range events {
		tx := e.txn()
		if i == 0 {
			if e.ddl == nil {
				t.Fatal("writeLog: the first event must be a DDL (the row span starts at it)")
			}
			tx.NewSpans = []uint64{rowSpan}
		}
		if err := p.route(ctx, tx, -1); err != nil {
			p.abort()
			t.Fatal(err)
		}
	}
	if _, err := p.closeAll(ctx); err != nil {
		t.Fatal(err)
	}
}

// shopLog is two schemas, three tables, rows in each at k = 6..20, and at
// k = 21 a RENAME of shop.orders to shop.orders_old.
func shopLog() []logEvent {
	ev := []logEvent{
		ddlTx(1, "shop", "", codec.ActionCreateSchema, "CREATE DATABASE IF NOT EXISTS shop"),
		ddlTx(2, "crm", "", codec.ActionCreateSchema, "CREATE DATABASE IF NOT EXISTS crm"),
		ddlTx(3, "shop", "orders", codec.ActionCreateTable, "CREATE TABLE shop.orders (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(20))"),
		ddlTx(4, "shop", "items", codec.ActionCreateTable, "CREATE TABLE `shop`.`items` (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(20))"),
		ddlTx(5, "crm", "users", codec.ActionCreateTable, "CREATE TABLE users (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(20))"),
	}
	for k := 6; k <= 20; k++ {
		ev = append(ev, rowsTx(k, "shop.orders", "shop.items", "crm.users"))
	}
	return append(ev,
		ddlTx(21, "shop", "orders_old", codec.ActionRenameTable, "RENAME TABLE orders TO orders_old"),
		rowsTx(22, "shop.orders_old", "shop.items"))
}

// sqliteTables returns the row count of every table of a SQLite file but the
// progress table.
func sqliteTables(t *testing.T, path string) map[string]int {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT name FROM sqlite_master WHERE type = 'table' AND name <> 'redokit_apply_progress'")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	rows.Close()
	out := map[string]int{}
	for _, n := range names {
		var c int
		if err := db.QueryRow("SELECT COUNT(*) FROM \"" + n + "\"").Scan(&c); err != nil {
			t.Fatal(err)
		}
		out[n] = c
	}
	return out
}

// sqliteProgress reads the progress table as the sink wrote it: per
// "schema.table" the commit ts, and the DDL row as "" → "ts/count".
func sqliteProgress(t *testing.T, path string) map[string]string {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT schema_name, table_name, commit_ts, ddl_count FROM redokit_apply_progress")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var s, n string
		var ts, c int64
		if err := rows.Scan(&s, &n, &ts, &c); err != nil {
			t.Fatal(err)
		}
		if s == "" && n == "" {
			out[""] = fmt.Sprintf("%d/%d", uint64(ts), c)
		} else {
			out[s+"."+n] = fmt.Sprint(uint64(ts))
		}
	}
	return out
}

// reported turns the summary's "applied" object into sqliteProgress's form.
func reported(a *appliedJSON) map[string]string {
	out := map[string]string{}
	for _, t := range a.Tables {
		out[t.Schema+"."+t.Table] = fmt.Sprint(t.CommitTs)
	}
	if a.DDL.CommitTs > 0 {
		out[""] = fmt.Sprintf("%d/%d", a.DDL.CommitTs, a.DDL.Count)
	}
	return out
}

func TestApplyTableFilter(t *testing.T) {
	store := memName(t)
	writeLog(t, store, "f", shopLog())
	path := filepath.Join(t.TempDir(), "f.db")
	args := []string{"apply", "--storage", store, "--log", "f", "--sink", "sqlite://" + path, "--table", "shop.*", "--exclude-table", "*.items", "--exclude-table", "*.*_old"}

	// Up to the rename: shop.orders only.
	r := cli(t, append(args, "--end-ts", fmt.Sprint(tsAt(20)), "--json")...)
	wantCode(t, r, 0)
	var sum applySummary
	decodeJSON(t, r.stdout, &sum)
	if got := sqliteTables(t, path); len(got) != 1 || got["orders"] != 15 {
		t.Fatalf("tables %v, want orders with 15 rows", got)
	}
	// 15 rows each of items and users, their CREATE TABLEs and CREATE DATABASE crm.
	if sum.Rows != 15 || sum.DDLs != 2 || sum.Filtered != 33 || sum.Applied == nil || sum.Conflicts == nil || !reflect.DeepEqual(*sum.Conflicts, apply.Conflicts{Tables: []apply.TableConflicts{}}) {
		t.Fatalf("summary %+v\n%s", sum, r.stdout)
	}
	mustContain(t, "json", r.stdout, `"conflicts": {`, `"include_tables": [`, `"shop.*"`)
	if got, want := reported(sum.Applied), sqliteProgress(t, path); !equalMaps(got, want) {
		t.Fatalf("reported %v, the progress table holds %v", got, want)
	}

	r = cli(t, append(args, "--end-ts", fmt.Sprint(tsAt(20)))...)
	wantCode(t, r, 0)
	mustContain(t, "text", r.stdout, "shop.*; excluded *.items, *.*_old (33 events filtered out)", "applied the redo log successfully")

	// On to the end: the RENAME carries shop.orders out of the filter, so
	// the apply stops there, naming it, and says where it stopped.
	r = cli(t, args...)
	wantCode(t, r, 1)
	mustContain(t, "stderr", r.stderr, "RENAME TABLE orders TO orders_old", fmt.Sprintf("commit ts %d", tsAt(21)),
		"shop.orders (selected)", "shop.orders_old (not selected)")
	mustContain(t, "stdout", r.stdout, "apply stopped", "shop.orders", fmt.Sprintf("rows up to commit ts %d", tsAt(20)), "running apply again with the same flags stops at the same DDL")
	if got := sqliteTables(t, path); len(got) != 1 || got["orders"] != 15 {
		t.Fatalf("after the refused rename: tables %v", got)
	}

	// Without a filter the same log applies whole.
	path2 := filepath.Join(t.TempDir(), "all.db")
	r = cli(t, "apply", "--storage", store, "--log", "f", "--sink", "sqlite://"+path2)
	wantCode(t, r, 0)
	if got := sqliteTables(t, path2); !equalMaps(got, map[string]int{"orders_old": 16, "items": 16, "users": 15}) {
		t.Fatalf("unfiltered: tables %v", got)
	}
}

func equalMaps[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestApplyUsageErrors(t *testing.T) {
	store := memName(t)
	writeLog(t, store, "u", shopLog()[:6])
	sink := "sqlite://" + filepath.Join(t.TempDir(), "u.db")
	base := []string{"apply", "--storage", store, "--log", "u", "--sink", sink}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--table", "orders"}, []string{"--table", `"orders"`, "schema.table"}},
		{[]string{"--exclude-table", "shop.[a-"}, []string{"--exclude-table", `"shop.[a-"`, "bad glob"}},
		{[]string{"--table", "shop.*", "--exclude-table", ".x"}, []string{"--exclude-table", `".x"`}},
		{[]string{"--map-schema", "shop"}, []string{"--map-schema", `"shop"`, "from=to"}},
		{[]string{"--map-schema", "shop=a", "--map-schema", "SHOP=b"}, []string{"--map-schema", "already mapped"}},
		{[]string{"--end-ts", "yesterday"}, []string{"--end-ts", "yesterday", "RFC 3339"}},
		{[]string{"--start-ts", "2025-13-01T00:00:00Z"}, []string{"--start-ts", "RFC 3339"}},
		{[]string{"--dry-run", "--json"}, []string{"--dry-run", "--json"}},
	} {
		r := cli(t, append(base, c.args...)...)
		wantCode(t, r, 2)
		mustContain(t, strings.Join(c.args, " "), r.stderr, c.want...)
	}
}

// TestApplyEndTsTime: an RFC 3339 --end-ts (and --start-ts) is the TSO of
// its millisecond, and applies what the number does.
func TestApplyEndTsTime(t *testing.T) {
	store := memName(t)
	writeLog(t, store, "e", shopLog())
	at := func(k int) string {
		return time.UnixMilli(int64(tsAt(k) >> 18)).UTC().Format(time.RFC3339Nano)
	}
	if at(10) != "2025-01-01T00:00:00.01Z" {
		t.Fatalf("tsAt(10) is %s", at(10))
	}
	var progress [2]map[string]string
	var dumps [2]string
	for i, rng := range [][2]string{{fmt.Sprint(tsAt(7)), fmt.Sprint(tsAt(12))}, {at(7), at(12)}} {
		path := filepath.Join(t.TempDir(), "e.db")
		r := cli(t, "apply", "--storage", store, "--log", "e", "--sink", "sqlite://"+path, "--end-ts", rng[1], "--json")
		wantCode(t, r, 0)
		var sum applySummary
		decodeJSON(t, r.stdout, &sum)
		progress[i] = sqliteProgress(t, path)
		if sum.EndTs != tsAt(12) || sum.Rows != 3*7 {
			t.Fatalf("--end-ts %s: %+v", rng[1], sum)
		}
		// --start-ts takes a time too (dump shares the flags): (7, 12]
		// is 5 commits of 3 rows.
		r = cli(t, "dump", "--storage", store, "--log", "e", "--start-ts", rng[0], "--end-ts", rng[1])
		wantCode(t, r, 0)
		if n := strings.Count(r.stdout, "\n"); n != 15 {
			t.Fatalf("dump --start-ts %s --end-ts %s: %d events", rng[0], rng[1], n)
		}
		dumps[i] = r.stdout
	}
	if !equalMaps(progress[0], progress[1]) || dumps[0] != dumps[1] {
		t.Fatalf("numeric %v, RFC 3339 %v", progress[0], progress[1])
	}
}

// TestApplyMapSchema: the log's schema shop lands in replica: the rows, the
// DDLs (their text included, which SQLite must then run) and the progress.
func TestApplyMapSchema(t *testing.T) {
	store := memName(t)
	writeLog(t, store, "m", shopLog())
	path := filepath.Join(t.TempDir(), "m.db")
	r := cli(t, "apply", "--storage", store, "--log", "m", "--sink", "sqlite://"+path, "--map-schema", "shop=replica", "--json")
	wantCode(t, r, 0)
	var sum applySummary
	decodeJSON(t, r.stdout, &sum)
	got := reported(sum.Applied)
	want := map[string]string{"replica.items": fmt.Sprint(tsAt(22)), "crm.users": fmt.Sprint(tsAt(20)),
		"replica.orders": fmt.Sprint(tsAt(20)), "replica.orders_old": fmt.Sprint(tsAt(22)), "": fmt.Sprintf("%d/1", tsAt(21))}
	if !equalMaps(got, want) {
		t.Fatalf("applied %v, want %v", got, want)
	}
	if p := sqliteProgress(t, path); !equalMaps(p, want) {
		t.Fatalf("progress table %v, want %v", p, want)
	}
	if sum.MapSchema["shop"] != "replica" {
		t.Fatalf("summary %+v", sum)
	}
	r = cli(t, "apply", "--storage", store, "--log", "m", "--sink", "sqlite://"+path, "--map-schema", "shop=replica")
	wantCode(t, r, 0)
	mustContain(t, "text", r.stdout, "schemas", "shop → replica")
}

// TestApplyStopReport: a DDL SQLite cannot run stops the apply midway; the
// report, as text and as JSON, says exactly what the progress table holds.
func TestApplyStopReport(t *testing.T) {
	store := memName(t)
	ev := []logEvent{
		ddlTx(1, "shop", "", codec.ActionCreateSchema, "CREATE DATABASE shop"),
		ddlTx(2, "shop", "orders", codec.ActionCreateTable, "CREATE TABLE orders (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(20))"),
		ddlTx(3, "shop", "items", codec.ActionCreateTable, "CREATE TABLE items (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(20))"),
	}
	for k := 4; k <= 14; k++ {
		tables := []string{"shop.orders"}
		if k <= 11 {
			tables = append(tables, "shop.items")
		}
		ev = append(ev, rowsTx(k, tables...))
	}
	ev = append(ev, ddlTx(15, "shop", "orders", codec.ActionAddColumn, "ALTER TABLE orders ADD COLUMN c NO_SUCH_TYPE(3) FIRST"))
	for k := 16; k <= 20; k++ {
		ev = append(ev, rowsTx(k, "shop.orders", "shop.items"))
	}
	writeLog(t, store, "s", ev)
	path := filepath.Join(t.TempDir(), "s.db")
	args := []string{"apply", "--storage", store, "--log", "s", "--sink", "sqlite://" + path, "--batch-rows", "2"}

	r := cli(t, append(args, "--json")...)
	wantCode(t, r, 1)
	mustContain(t, "stderr", r.stderr, "NO_SUCH_TYPE", fmt.Sprintf("commit ts %d", tsAt(15)))
	var sum applySummary
	decodeJSON(t, r.stdout, &sum)
	if sum.Applied == nil || !strings.Contains(sum.Error, "NO_SUCH_TYPE") {
		t.Fatalf("summary %+v", sum)
	}
	want := map[string]string{"shop.orders": fmt.Sprint(tsAt(14)), "shop.items": fmt.Sprint(tsAt(11)), "": fmt.Sprintf("%d/1", tsAt(3))}
	if got, held := reported(sum.Applied), sqliteProgress(t, path); !equalMaps(got, held) || !equalMaps(got, want) {
		t.Fatalf("reported %v, the progress table holds %v, want %v", got, held, want)
	}

	// Text: the same positions, and again (the second run resumes and
	// stops at the same DDL, applying nothing).
	r = cli(t, args...)
	wantCode(t, r, 1)
	lines := strings.Split(r.stdout, "\n")
	for _, w := range []string{
		fmt.Sprintf("shop.items  rows up to commit ts %s", tsDesc(tsAt(11))),
		fmt.Sprintf("shop.orders  rows up to commit ts %s", tsDesc(tsAt(14))),
		fmt.Sprintf("DDLs  up to commit ts %s (1 at it)", tsDesc(tsAt(3))),
	} {
		if !slices.ContainsFunc(lines, func(l string) bool {
			return strings.Join(strings.Fields(l), "  ") == strings.Join(strings.Fields(w), "  ")
		}) {
			t.Errorf("stdout has no line %q:\n%s", w, r.stdout)
		}
	}
	mustContain(t, "stdout", r.stdout, "apply stopped after 0 rows and 0 DDLs")
}

// TestApplyDryRun: --dry-run prints the statements, with their values, and
// leaves the downstream as it was. It needs the sinks to honour
// apply.SinkOptions.DryRun: a sink that ignores it applies for real, which
// this test catches.
func TestApplyDryRun(t *testing.T) {
	store := memName(t)
	writeLog(t, store, "d", shopLog()[:8])
	path := filepath.Join(t.TempDir(), "d.db")
	r := cli(t, "apply", "--storage", store, "--log", "d", "--sink", "sqlite://"+path, "--dry-run")
	wantCode(t, r, 0)
	mustContain(t, "stdout", r.stdout, "orders", "v7", "dry run: nothing was applied")
	if got := sqliteTables(t, path); len(got) != 0 {
		t.Fatalf("a dry run created tables: %v", got)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM redokit_apply_progress").Scan(&n); err == nil && n != 0 {
		t.Fatalf("a dry run wrote %d progress rows", n)
	}
}

// TestTsFlagWithoutZone: a time without a zone is UTC (issue 27, item 7:
// before, "2025-01-01T00:00:00.01" was refused as not RFC 3339), and the
// forms an operator copies from a log line all parse to the same TSO.
func TestTsFlagWithoutZone(t *testing.T) {
	want := uint64(time.Date(2025, 1, 1, 12, 30, 0, 0, time.UTC).UnixMilli()) << 18
	for _, s := range []string{"2025-01-01T12:30:00Z", "2025-01-01T12:30:00", "2025-01-01 12:30:00", "2025-01-01T12:30", "2025-01-01 12:30", "2025-01-01T14:30:00+02:00"} {
		var ts uint64
		if err := (tsValue{&ts}).Set(s); err != nil || ts != want {
			t.Errorf("%q: ts %d, %v; want %d", s, ts, err, want)
		}
	}
	var ts uint64
	if err := (tsValue{&ts}).Set("2025-01-01"); err != nil || ts != uint64(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())<<18 {
		t.Errorf("a date: ts %d, %v", ts, err)
	}
	for _, bad := range []string{"yesterday", "2025-13-01T00:00:00", "12:30"} {
		if err := (tsValue{&ts}).Set(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
