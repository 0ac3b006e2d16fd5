package cli

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/testkit/testenv"
	"github.com/redokit/redokit/testkit/workload"
)

// followSink is a downstream of the kill trials: the sink URI apply gets,
// and how to read a table of it back.
type followSink struct {
	uri  string
	dump func(t *testing.T, schema, table string) []string
}

// TestApplyFollowKilled: apply --follow, SIGKILLed at random moments while
// a load writes the log (inserts, updates, deletes and a column added part
// way) and restarted each time, leaves every sink exactly as one
// uninterrupted apply of the same log does. REDOKIT_FOLLOW_KILLS sets the
// kills per sink (default 3; scripts/test.sh runs more).
func TestApplyFollowKilled(t *testing.T) {
	kills := testenv.Count(t, "REDOKIT_FOLLOW_KILLS", 3)
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		n := 0
		open := func(t *testing.T) followSink {
			n++
			path := filepath.Join(dir, fmt.Sprintf("db%d.db", n))
			return followSink{uri: "sqlite://" + path, dump: func(t *testing.T, _, table string) []string {
				return dumpSQL(t, "sqlite", path, `SELECT * FROM "`+table+`"`)
			}}
		}
		followKills(t, kills, open)
	})
	t.Run("mariadb", func(t *testing.T) {
		addr := needServer(t, "REDOKIT_MYSQL_ADDR")
		dsn := (&mysql.Config{User: "root", Net: "tcp", Addr: addr, AllowNativePasswords: true}).FormatDSN()
		admin, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close()
		open := func(t *testing.T) followSink {
			db := testenv.UniqueName("fk_")
			if _, err := admin.Exec("CREATE DATABASE `" + db + "`"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = admin.Exec("DROP DATABASE IF EXISTS `" + db + "`") })
			// The tables land in the log's schema, the progress in db:
			// each downstream's log schema is mapped to a schema of its
			// own (--map-schema, added by followKills).
			return followSink{uri: fmt.Sprintf("mysql://root@%s/%s", addr, db), dump: func(t *testing.T, schema, table string) []string {
				return dumpSQL(t, "mysql", dsn, "SELECT * FROM `"+schema+"`.`"+table+"`")
			}}
		}
		followKills(t, kills, open)
	})
	t.Run("postgres", func(t *testing.T) {
		base := needServer(t, "REDOKIT_POSTGRES_DSN")
		admin, err := sql.Open("pgx", base)
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close()
		open := func(t *testing.T) followSink {
			db := testenv.UniqueName("fk_")
			if _, err := admin.Exec("CREATE DATABASE " + db); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = admin.Exec("DROP DATABASE IF EXISTS " + db + " WITH (FORCE)") })
			u, err := url.Parse(base)
			if err != nil {
				t.Fatal(err)
			}
			u.Path = "/" + db
			return followSink{uri: u.String(), dump: func(t *testing.T, schema, table string) []string {
				return dumpSQL(t, "pgx", u.String(), `SELECT * FROM "`+schema+`"."`+table+`"`)
			}}
		}
		followKills(t, kills, open)
	})
}

// dumpSQL returns every row of a query as a sorted list of strings.
func dumpSQL(t *testing.T, driver, dsn, q string) []string {
	t.Helper()
	if driver == "sqlite" {
		dsn = "file:" + dsn + "?_pragma=busy_timeout(10000)"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
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
			fmt.Fprintf(&sb, "%s=%v;", cols[i], v)
		}
		out = append(out, sb.String())
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// followKills runs the trials on one sink: a load writes the log in steps;
// between steps apply --follow runs as a child process of this test
// binary and is SIGKILLed after a random while, then started again. At the
// end a last run catches up, and its downstream must equal a fresh one
// that a plain apply of the whole log made.
func followKills(t *testing.T, kills int, open func(t *testing.T) followSink) {
	ctx := context.Background()
	dir := t.TempDir()
	store := fileURL(dir)
	b, err := blob.Open(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	schema := testenv.UniqueName("fs_")
	wf := workloadFlags{flushInterval: 10 * time.Millisecond, segmentSize: 64 << 10}
	p, err := newPipeline(ctx, b, "k", workload.Config{}, 1, wf.writerOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.abort()
	const span = 1 << 8
	k := 0
	route := func(ddl *codec.DDL, rows ...codec.RowChange) {
		t.Helper()
		k++
		ts := tsAt(k)
		tx := &workload.Txn{CommitTs: ts}
		if ddl != nil {
			ddl.StartTs, ddl.CommitTs = ts-1, ts
			tx.DDL = true
			tx.Changes = []workload.Change{{Span: workload.DDLSpan, Event: codec.Event{Kind: codec.DDLEvent, DDL: *ddl}}}
		}
		for _, r := range rows {
			r.StartTs, r.CommitTs = ts-1, ts
			tx.Changes = append(tx.Changes, workload.Change{Span: span, Event: codec.Event{Kind: codec.RowEvent, Row: r}})
		}
		if k == 1 {
			tx.NewSpans = []uint64{span}
		}
		if err := p.route(ctx, tx, -1); err != nil {
			t.Fatal(err)
		}
	}
	tbl := codec.TableName{Schema: schema, Name: "t"}
	withC := false
	image := func(id, v int64) []codec.Column {
		cols := []codec.Column{
			{Name: "id", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey | codec.FlagHandleKey, Value: codec.IntValue(id)},
			{Name: "v", Type: codec.TypeVarchar, Flags: codec.FlagNullable, Charset: "utf8mb4", Value: codec.StringValue(fmt.Sprintf("v%d-%d", id, v))},
		}
		if withC {
			cols = append(cols, codec.Column{Name: "c", Type: codec.TypeLong, Flags: codec.FlagNullable, Value: codec.IntValue(v)})
		}
		return cols
	}
	route(&codec.DDL{Table: codec.TableName{Schema: schema}, Type: codec.ActionCreateSchema, Query: "CREATE DATABASE IF NOT EXISTS " + schema})
	route(&codec.DDL{Table: tbl, Tables: []codec.DDLTable{{TableName: tbl}}, Type: codec.ActionCreateTable,
		Query: "CREATE TABLE " + schema + ".t (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(40))"})
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	live := map[int64]int64{} // id → version
	nextID := int64(1)
	step := func(txns int) {
		t.Helper()
		for range txns {
			var rows []codec.RowChange
			for range 1 + rng.IntN(20) {
				switch op := rng.IntN(10); {
				case op < 6 || len(live) == 0:
					id := nextID
					nextID++
					live[id] = 0
					rows = append(rows, codec.RowChange{Table: tbl, Columns: image(id, 0)})
				default:
					var id int64
					for id = range live {
						break
					}
					if op < 9 {
						pre := image(id, live[id])
						live[id]++
						rows = append(rows, codec.RowChange{Table: tbl, PreColumns: pre, Columns: image(id, live[id])})
					} else {
						rows = append(rows, codec.RowChange{Table: tbl, PreColumns: image(id, live[id])})
						delete(live, id)
					}
				}
			}
			route(nil, rows...)
		}
		if _, err := p.flushAll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	killed := open(t)
	mapTo := func(s followSink) string {
		if u, _ := url.Parse(s.uri); u != nil && u.Scheme == "mysql" {
			return strings.TrimPrefix(u.Path, "/")
		}
		return ""
	}
	args := func(s followSink, follow bool) []string {
		a := []string{"apply", "--storage", store, "--log", "k", "--sink", s.uri, "--json"}
		if m := mapTo(s); m != "" {
			a = append(a, "--map-schema", schema+"="+m)
		}
		if follow {
			a = append(a, "--follow", "--follow-poll", "2ms")
		}
		return a
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var died, afterDDL, running int
	for trial := range kills {
		if trial == kills/2 && !withC {
			withC = true
			route(&codec.DDL{Table: tbl, Tables: []codec.DDLTable{{TableName: tbl}}, Type: codec.ActionAddColumn,
				Query: "ALTER TABLE " + schema + ".t ADD COLUMN c INT"})
		}
		cmd := exec.Command(exe, args(killed, true)...)
		cmd.Env = append(os.Environ(), tortureChildEnv+"=1")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		step(1 + rng.IntN(5))
		// Long enough for the child to start and apply rounds, random
		// enough to land anywhere in one.
		time.Sleep(time.Duration(50+rng.IntN(250)) * time.Millisecond)
		step(1 + rng.IntN(3))
		_ = cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			died++
			if withC {
				afterDDL++
			}
			if strings.Contains(out.String(), `"end_ts"`) {
				running++ // it had applied rounds: killed while following
			}
		} else if err != nil {
			t.Fatalf("trial %d: apply --follow failed before the kill: %v\n%s", trial, err, out.String())
		}
	}
	step(3)
	// The last run: a plain apply to the global resolved ts catches up.
	r := cli(t, args(killed, false)...)
	wantCode(t, r, 0)
	ref := open(t)
	r = cli(t, args(ref, false)...)
	wantCode(t, r, 0)
	tschema := schema
	got := killed.dump(t, orDefault(mapTo(killed), tschema), "t")
	want := ref.dump(t, orDefault(mapTo(ref), tschema), "t")
	if !slices.Equal(got, want) {
		t.Fatalf("after %d kills the downstream differs from one apply of the log: %d rows against %d\nfirst got:  %v\nfirst want: %v", died, len(got), len(want), first(got), first(want))
	}
	if len(want) == 0 {
		t.Fatal("the log applied no row: the test proves nothing")
	}
	if running == 0 {
		t.Fatalf("no run of %d was killed while following (%d killed before their first round): the test proves nothing", kills, died)
	}
	t.Logf("%d of %d runs SIGKILLed, %d of them after applying rounds, %d after the DDL was in the log; %d rows equal an uninterrupted apply", died, kills, running, afterDDL, len(want))
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func first(s []string) []string { return s[:min(len(s), 3)] }
