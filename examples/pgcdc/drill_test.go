package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/testkit/testenv"
)

// The disaster drill: a pgbench-style workload on a real PostgreSQL while two
// capture processes (writers pgcdc-w0 and pgcdc-w1, each its own slot and
// half the spans) write the log and, through their gates, a PostgreSQL
// downstream. Two tables exist before the capture (a bigserial key split
// across both writers, an identity and a serial column): the initial
// snapshot carries them. A migration sent as one query string creates two
// tables (bigserial, identity) and alters a third. The coordinator restarts
// with the capture (setup runs again). Midway the downstream dies (its connections are cut and
// refused) and capture 1 is SIGKILLed, then started again: it resumes from its
// slot and takes its writer ID over. When the log's global resolved ts covers
// the last upstream commit, the recovery applies (checkpoint, resolved] into
// the dead downstream, and the whole log into a fresh one: both must equal
// the upstream, table by table, value by value.
//
// REDOKIT_PGCDC_TXNS sets the workload's transactions (default 3000).

// The child's side: a capture process, run from the test binary before any
// test (startChild).
func init() {
	testenv.RunChild("pgcdc-capture", func(args []string) error {
		cfg, err := childConfig(args)
		if err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		if err := cfg.check(); err != nil {
			return err
		}
		lg, closeLog, err := openLog(ctx, &cfg)
		if err != nil {
			return err
		}
		defer closeLog()
		var st captureStats
		go func() {
			// The parent reads what this process did from a file: it may
			// be killed at any moment.
			path := filepath.Join(cfg.State, "stats-"+writerID(cfg.Writer))
			tick := time.NewTicker(50 * time.Millisecond)
			for range tick.C {
				b := fmt.Sprintf("%d %d\n", st.Events.Load(), st.Txns.Load())
				os.WriteFile(path+".tmp", []byte(b), 0o644)
				os.Rename(path+".tmp", path)
			}
		}()
		return runCapture(ctx, &cfg, cfg.Writer, lg, fileCheckpoint(cfg.State, cfg.Writer), &st)
	})
}

// childConfig is the configuration a child process gets as its one
// argument, in JSON.
func childConfig(args []string) (config, error) {
	var cfg config
	if len(args) != 1 {
		return cfg, fmt.Errorf("want the configuration, got %q", args)
	}
	if err := json.Unmarshal([]byte(args[0]), &cfg); err != nil {
		return cfg, err
	}
	cfg.Logger = nil
	return cfg, nil
}

func postgresDSN(t *testing.T) string { return testenv.Postgres(t) }

// withDB returns dsn naming database db instead.
func withDB(t *testing.T, dsn, db string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("REDOKIT_POSTGRES_DSN does not parse as a URL: %v", err)
	}
	u.Path = "/" + db
	return u.String()
}

// startChild starts capture process idx.
func startChild(t *testing.T, cfg config, idx int) *testenv.Child {
	cfg.Writer = idx
	cfg.Logger = nil
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return testenv.StartChild(t, "pgcdc-capture", []string{string(b)}, testenv.StderrTo(&prefixWriter{t: t, prefix: writerID(idx) + ": "}))
}

type prefixWriter struct {
	t      *testing.T
	prefix string
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		p.t.Log(p.prefix + l)
	}
	return len(b), nil
}

func TestDrill(t *testing.T) {
	base := postgresDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin := logicalServer(t, ctx, base)
	txns := testenv.Count(t, "REDOKIT_PGCDC_TXNS", 3000)
	db := testDatabases(t, ctx, base, 2, "_down", "_fresh")
	up := withDB(t, base, db)
	downURI, freshURI := withDB(t, base, db+"_down"), withDB(t, base, db+"_fresh")
	dir := t.TempDir()
	cfg := config{
		PG: up, Log: filepath.Join(dir, "redo"), LogID: "pgcdc", Sink: downURI, State: filepath.Join(dir, "state"),
		Publication: "pgcdc", SlotPrefix: db + "_", Writers: 2,
		Tables:        "branches,tellers,accounts:aid:250:500:750,history,extra,legacy:id:1000,seeded,multi_a,multi_b",
		Tick:          50 * time.Millisecond,
		FlushInterval: 250 * time.Millisecond,
	}
	if err := cfg.check(); err != nil {
		t.Fatal(err)
	}
	lg, closeLog, err := openLog(ctx, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeLog()
	// Tables that were there before the capture: the initial snapshot
	// carries them (a bigserial key split across both writers, an identity
	// column and a serial one).
	pre, err := connect(ctx, up)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"CREATE TABLE legacy (id bigserial PRIMARY KEY, name text NOT NULL, amount numeric(10,2), at timestamptz, tags jsonb)",
		`INSERT INTO legacy (name, amount, at, tags) SELECT 'it''s row ' || g, g * 0.5, '2026-02-01 00:00:00+00'::timestamptz + g * interval '1 minute',
			jsonb_build_object('g', g) FROM generate_series(1, 2000) g`,
		"CREATE TABLE seeded (k int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v varchar(30), n serial)",
		"INSERT INTO seeded (v) SELECT 'seed; ' || g FROM generate_series(1, 200) g",
	} {
		if _, err := pre.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	pre.Close(ctx)
	first, err := setup(ctx, up, cfg.Publication, cfg.slots())
	if err != nil {
		t.Fatal(err)
	}
	defer first.close()
	start := first.start
	// The coordinator runs here; stopCoord stops it and waits.
	startCoord := func(u *upstream) (stop func()) {
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := coordinate(cctx, &cfg, lg, u); err != nil && cctx.Err() == nil {
				t.Errorf("coordinator: %v", err)
			}
		}()
		return func() { cancel(); <-done }
	}
	stopCoord := startCoord(first)
	defer func() { stopCoord() }()

	children := []*testenv.Child{startChild(t, cfg, 0), startChild(t, cfg, 1)}
	defer func() {
		for _, c := range children {
			c.Kill()
			c.Wait()
		}
	}()

	// The upstream's WAL position over time: the RPO at the kill is read
	// against it.
	type sample struct {
		at  time.Time
		lsn uint64
	}
	var (
		samplesMu sync.Mutex
		samples   []sample
	)
	sctx, stopSampler := context.WithCancel(ctx)
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		c, err := connect(sctx, up)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		tick := time.NewTicker(10 * time.Millisecond) // the sampling period
		defer tick.Stop()
		for sctx.Err() == nil {
			var l string
			if c.QueryRow(sctx, "SELECT pg_current_wal_lsn()::text").Scan(&l) == nil {
				v, _ := pglogrepl.ParseLSN(l)
				samplesMu.Lock()
				samples = append(samples, sample{time.Now(), uint64(v)})
				samplesMu.Unlock()
			}
			select {
			case <-tick.C:
			case <-sctx.Done():
			}
		}
	}()

	w := newWorkload(t, ctx, up)
	defer w.close()
	began := time.Now()
	w.ddl("CREATE TABLE branches (bid int PRIMARY KEY, bbalance bigint NOT NULL, filler text)")
	w.ddl("CREATE TABLE tellers (tid int PRIMARY KEY, bid int, tbalance bigint, note varchar(40))")
	w.ddl("CREATE TABLE accounts (aid bigint PRIMARY KEY, bid int, abalance numeric(12,2), flag boolean, updated timestamptz, doc jsonb, raw bytea, score float8, born date, seen timestamp(3), small int2, ratio real)")
	w.ddl("CREATE TABLE history (hid bigint PRIMARY KEY, tid int, bid int, aid bigint, delta int, mtime timestamp)")
	w.exec("INSERT INTO branches SELECT g, 0, 'branch ' || g FROM generate_series(1, 4) g")
	w.exec("INSERT INTO tellers SELECT g, 1 + g % 4, 0, 'teller ' || g FROM generate_series(1, 40) g")
	w.exec(`INSERT INTO accounts SELECT g, 1 + g % 4, g * 1.25, g % 2 = 0, '2026-01-01 00:00:00+00'::timestamptz + g * interval '1 second',
		jsonb_build_object('n', g, 's', 'acc ' || g), decode(lpad(to_hex(g), 8, '0'), 'hex'), g / 3.0, '2000-01-01'::date + g,
		'2026-06-01 12:00:00'::timestamp + g * interval '1.5 ms', g % 30000, g / 7.0 FROM generate_series(1, 1000) g`)

	var (
		killDownAt, killCapAt time.Time
		rpoBytes              uint64
		rpoTime               time.Duration
		restarted             bool
	)
	var nextAid atomic.Int64
	nextAid.Store(5000)
	var hid atomic.Int64
	clients := 2
	var wg sync.WaitGroup
	var workErr atomic.Value
	per := txns / clients
	for cl := range clients {
		wg.Go(func() {
			c, err := connect(ctx, up)
			if err != nil {
				workErr.Store(err)
				txnSignal()
				return
			}
			defer c.Close(context.Background())
			defer txnSignal() // step sees a client that stopped
			r := rand.New(rand.NewPCG(uint64(cl), 16))
			for n := range per {
				if err := pgbenchTxn(ctx, c, r, &nextAid, &hid); err != nil {
					workErr.Store(fmt.Errorf("client %d txn %d: %w", cl, n, err))
					return
				}
			}
		})
	}
	// The DDLs and the disasters, while the clients run.
	step := func(frac float64) {
		for w.txnsDone() < int64(frac*float64(txns)) && workErr.Load() == nil && ctx.Err() == nil {
			select {
			case <-txnDone:
			case <-ctx.Done():
			}
		}
	}
	step(0.15)
	w.ddl("ALTER TABLE tellers ADD COLUMN rank int")
	// A migration sent as one string: the trigger records the whole text
	// for each of its DDLs.
	w.ddl(`CREATE TABLE multi_a (id bigserial PRIMARY KEY, v text); -- a migration; in one string
		ALTER TABLE seeded ADD COLUMN note varchar(20); /* a ; in a comment */
		CREATE TABLE multi_b (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, s text, n bigserial);`)
	w.exec("INSERT INTO multi_a (v) SELECT 'a' || g FROM generate_series(1, 100) g")
	w.exec("INSERT INTO multi_b (s) SELECT 'b' || g FROM generate_series(1, 100) g")
	w.exec("UPDATE seeded SET note = 'n' || k WHERE k % 3 = 0")
	w.exec("INSERT INTO legacy (name, amount) SELECT 'new ' || g, g FROM generate_series(1, 100) g")
	w.exec("UPDATE legacy SET amount = amount + 1, tags = tags || '{\"u\": 1}' WHERE id % 7 = 0")
	w.ddl("CREATE TABLE extra (id int PRIMARY KEY, v text, at timestamptz)")
	w.exec("INSERT INTO extra SELECT g, 'extra ' || g, now() FROM generate_series(1, 50) g")
	w.exec("UPDATE tellers SET rank = tid % 5")
	step(0.3)
	// The downstream dies: its sessions are cut and no new one is let in.
	killDownAt = time.Now()
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+db+"_down ALLOW_CONNECTIONS false"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", db+"_down"); err != nil {
		t.Fatal(err)
	}
	t.Logf("downstream %s_down killed after %d transactions", db, w.txnsDone())
	w.ddl("ALTER TABLE history ADD COLUMN memo text")
	step(0.5)
	// Capture 1 dies hard.
	killCapAt = time.Now()
	children[1].Kill()
	children[1].Wait()
	m, err := lg.Meta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var l string
	if err := admin.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&l); err != nil {
		t.Fatal(err)
	}
	cur, _ := pglogrepl.ParseLSN(l)
	if uint64(cur) > m.ResolvedTs {
		rpoBytes = uint64(cur) - m.ResolvedTs
	}
	samplesMu.Lock()
	for i := len(samples) - 1; i >= 0; i-- {
		if samples[i].lsn <= m.ResolvedTs {
			rpoTime = killCapAt.Sub(samples[i].at)
			break
		}
	}
	samplesMu.Unlock()
	t.Logf("capture %s SIGKILLed after %d transactions: global resolved ts %s, upstream WAL at %s: RPO %d bytes of WAL, about %v of commits",
		writerID(1), w.txnsDone(), pglogrepl.LSN(m.ResolvedTs), cur, rpoBytes, rpoTime.Round(time.Millisecond))
	// Down while the upstream moves on: the slot holds what it misses.
	step(0.55)
	children[1] = startChild(t, cfg, 1)
	restarted = true
	// The coordinator restarts too, over the upstream it set up: setup
	// again (no new slot, no new snapshot), then the log it left.
	stopCoord()
	again, err := setup(ctx, up, cfg.Publication, cfg.slots())
	if err != nil {
		t.Fatal(err)
	}
	if again.start != 0 || again.snap != nil {
		t.Fatalf("setup run again made a new start (%d)", again.start)
	}
	stopCoord = startCoord(again)
	// On both writers' spans of the snapshot's split table, after the
	// restarts.
	w.exec("DELETE FROM legacy WHERE id % 11 = 0")
	w.exec("UPDATE legacy SET id = id + 10000 WHERE id % 13 = 0")
	w.exec("INSERT INTO multi_b (s) VALUES ('after the restart')")
	step(0.7)
	w.ddl("DROP TABLE extra")
	wg.Wait()
	if err := workErr.Load(); err != nil {
		t.Fatal(err)
	}
	workEnd := time.Now()
	// A burst: one transaction of many rows on one span, committed at
	// once. From its commit until the log covers it, the capture decodes,
	// converts and logs it as fast as it can: one writer's rate.
	const burst = 20000
	w.exec(fmt.Sprintf("INSERT INTO history (hid, tid, bid, aid, delta, mtime) SELECT 10000000 + g, 1, 1, 1, g, now() FROM generate_series(1, %d) g", burst))
	burstAt := time.Now()
	if err := admin.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&l); err != nil {
		t.Fatal(err)
	}
	last, _ := pglogrepl.ParseLSN(l)
	// The log covers every upstream commit once its global resolved ts
	// passes the WAL position after the last one.
	var covered time.Time
	for {
		m, err = lg.Meta(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.ResolvedTs >= uint64(last) {
			covered = time.Now()
			break
		}
		select {
		case <-children[0].Done:
			t.Fatalf("capture %s exited: %v", writerID(0), children[0].Wait())
		case <-children[1].Done:
			t.Fatalf("capture %s exited: %v", writerID(1), children[1].Wait())
		case <-ctx.Done():
			t.Fatalf("the log's global resolved ts stays at %s, below the upstream's last commit (WAL %s)", pglogrepl.LSN(m.ResolvedTs), last)
		case <-time.After(20 * time.Millisecond):
		}
	}
	stopSampler()
	<-samplerDone
	if state, lsn, err := readSnapshotState(cfg.State); err != nil || state != "done" || snapshotStart(lsn) != start {
		t.Errorf("the initial snapshot's record: %q at LSN %s (%v), want done at the log's start ts %d + 2", state, pglogrepl.LSN(lsn), err, start)
	}
	var events, rtxns int64
	for i := range 2 {
		b, _ := os.ReadFile(filepath.Join(cfg.State, "stats-"+writerID(i)))
		var e, x int64
		fmt.Sscan(string(b), &e, &x)
		events += e
		rtxns += x
	}
	for _, c := range children {
		c.Kill()
		c.Wait()
	}
	children = nil
	stopCoord()
	m, err = lg.Meta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("workload: %d transactions in %v; the log covered the last commit %v after it",
		txns, workEnd.Sub(began).Round(time.Millisecond), covered.Sub(workEnd).Round(time.Millisecond))
	t.Logf("capture: the last process of each writer wrote %d events and read %d transactions", events, rtxns)
	t.Logf("log: checkpoint %s, global resolved ts %s (downstream killed at %v, capture killed at %v, restarted: %v)",
		pglogrepl.LSN(m.CheckpointTs), pglogrepl.LSN(m.ResolvedTs), killDownAt.Sub(began).Round(time.Millisecond), killCapAt.Sub(began).Round(time.Millisecond), restarted)

	// Recovery: the downstream comes back and gets (checkpoint, resolved].
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+db+"_down ALLOW_CONNECTIONS true"); err != nil {
		t.Fatal(err)
	}
	res := applyRange(t, ctx, lg, downURI, nil)
	t.Logf("apply (checkpoint, resolved] into the killed downstream: %d events, %d rows, %d DDLs, %d skipped as applied, in %v",
		res.Events, res.Rows, res.DDLs, res.Skipped, res.Duration.Round(time.Millisecond))
	compareDBs(t, ctx, up, downURI)
	res = applyRange(t, ctx, lg, freshURI, &redokit.ReadOptions{Start: start, AllowBelowCheckpoint: true})
	t.Logf("apply of the whole log into a fresh downstream: %d events, %d rows, %d DDLs in %v", res.Events, res.Rows, res.DDLs, res.Duration.Round(time.Millisecond))
	// The capture's rate: the log's events (copies dropped) over the time
	// from the workload's start until the log covered its last commit,
	// across both writers, the kill and the restart.
	t.Logf("capture rate: %.0f events/s during the workload (%d events in %v, as fast as the workload made them); a burst of %d rows in one transaction logged at %.0f events/s (%v from its commit until the log covered it); RPO at the kill: %d bytes of WAL, about %v of commits",
		float64(res.Events-burst)/workEnd.Sub(began).Seconds(), res.Events-burst, workEnd.Sub(began).Round(time.Millisecond),
		burst, burst/covered.Sub(burstAt).Seconds(), covered.Sub(burstAt).Round(time.Millisecond), rpoBytes, rpoTime.Round(time.Millisecond))
	compareDBs(t, ctx, up, freshURI)
}

// logicalServer connects to the PostgreSQL server at base, which must run
// with wal_level=logical (testenv.Need: a failure under CI, a skip with the
// reason elsewhere).
func logicalServer(t *testing.T, ctx context.Context, base string) *pgx.Conn {
	t.Helper()
	admin, err := connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	var walLevel string
	if err := admin.QueryRow(ctx, "SHOW wal_level").Scan(&walLevel); err != nil {
		t.Fatal(err)
	}
	if walLevel != "logical" {
		msg := "the PostgreSQL server runs with wal_level=" + walLevel + ": logical replication needs wal_level=logical (scripts/emulators.sh: start postgres with -c wal_level=logical -c max_replication_slots=20 -c max_wal_senders=20)"
		testenv.Need(t, msg)
	}
	return admin
}

// testDatabases creates a database per run, and one more per suffix, so that
// runs on the shared server never meet, and returns its name: the slots'
// prefix too (slot names are the server's), for writers slots. The cleanup
// drops the slots and the databases.
func testDatabases(t *testing.T, ctx context.Context, base string, writers int, suffixes ...string) string {
	t.Helper()
	db := fmt.Sprintf("pgcdc_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	dbs := []string{db}
	for _, s := range suffixes {
		dbs = append(dbs, db+s)
	}
	c, err := connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	for _, d := range dbs {
		if _, err := c.Exec(ctx, "CREATE DATABASE "+d); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		// A slot left behind would hold the shared server's WAL forever:
		// its walsender may outlive the killed capture for a moment.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, err := connect(ctx, base)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		defer c.Close(context.Background())
		var slots []string
		for i := range writers {
			slots = append(slots, fmt.Sprintf("%s_%d", db, i))
		}
		// A slot stays active until its walsender has gone: retry the drop
		// until it is, within the cleanup's deadline.
		retry := time.NewTicker(100 * time.Millisecond)
		defer retry.Stop()
		for {
			c.Exec(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = ANY($1) AND active_pid IS NOT NULL", slots)
			_, err := c.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = ANY($1)", slots)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Errorf("cleanup: drop the replication slots %v: %v", slots, err)
				return
			}
			select {
			case <-retry.C:
			case <-ctx.Done():
			}
		}
		for _, d := range dbs {
			if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+d+" WITH (FORCE)"); err != nil {
				t.Errorf("cleanup: drop database %s: %v", d, err)
			}
		}
	})
	return db
}

// applyRange replays a range of the log into the sink at uri, as
// `redokit apply` does.
func applyRange(t *testing.T, ctx context.Context, lg *redokit.Log, uri string, o *redokit.ReadOptions) *apply.Result {
	t.Helper()
	r, err := lg.OpenReader(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sink, err := apply.Open(ctx, uri, &apply.SinkOptions{LogID: lg.ID()})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	res, err := apply.Run(ctx, r.CodecEvents(ctx), sink, nil)
	if err != nil {
		t.Fatalf("apply into %s: %v", apply.Redact(uri), err)
	}
	return res
}

// compareDBs checks that the downstream's tables are the upstream's: the same
// tables, columns and rows, each value read as text and mapped by its own
// side's type to the log's value model, so that a bool upstream and the
// smallint it became downstream compare as the 1 or 0 both are.
func compareDBs(t *testing.T, ctx context.Context, upDSN, downDSN string) {
	t.Helper()
	up, err := connect(ctx, upDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close(context.Background())
	down, err := connect(ctx, downDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close(context.Background())
	tables := func(c *pgx.Conn) []string {
		rows, err := c.Query(ctx, `SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = 'public' AND c.relkind = 'r' AND relname <> $1 AND relname NOT LIKE 'redokit%' ORDER BY 1`, ddlTable)
		if err != nil {
			t.Fatal(err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	ut, dt := tables(up), tables(down)
	if !slices.Equal(ut, dt) {
		t.Fatalf("tables: upstream %v, downstream %v", ut, dt)
	}
	total := 0
	for _, tbl := range ut {
		uRows := readTable(t, ctx, up, tbl)
		dRows := readTable(t, ctx, down, tbl)
		if len(uRows) != len(dRows) {
			t.Errorf("table %s: %d rows upstream, %d downstream", tbl, len(uRows), len(dRows))
			continue
		}
		for i := range uRows {
			for j := range uRows[i] {
				if !uRows[i][j].Equal(dRows[i][j]) {
					t.Errorf("table %s row %d (key %v) column %d: upstream %v, downstream %v", tbl, i, uRows[i][0], j, uRows[i][j], dRows[i][j])
					break
				}
			}
		}
		total += len(uRows)
	}
	if !t.Failed() {
		t.Logf("compared %d tables, %d rows: the downstream equals the upstream", len(ut), total)
	}
}

func readTable(t *testing.T, ctx context.Context, c *pgx.Conn, table string) [][]codec.Value {
	t.Helper()
	rows, err := c.Query(ctx, `SELECT attname, atttypid, atttypmod FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, table)
	if err != nil {
		t.Fatal(err)
	}
	var cols []string
	var types []colType
	for rows.Next() {
		var name string
		var oid uint32
		var mod int32
		if err := rows.Scan(&name, &oid, &mod); err != nil {
			t.Fatal(err)
		}
		ct, err := mapColumn(table, name, oid, mod)
		if err != nil {
			t.Fatal(err)
		}
		cols = append(cols, pgx.Identifier{name}.Sanitize()+"::text")
		types = append(types, ct)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows, err = c.Query(ctx, "SELECT "+strings.Join(cols, ", ")+" FROM "+pgx.Identifier{table}.Sanitize()+" ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]codec.Value
	for rows.Next() {
		vals := make([]*string, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := make([]codec.Value, len(cols))
		for i, v := range vals {
			if v == nil {
				row[i] = codec.Null()
				continue
			}
			cv, err := types[i].toValue(table, cols[i], []byte(*v))
			if err != nil {
				t.Fatal(err)
			}
			row[i] = cv
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// pgbenchTxn is one transaction of a pgbench-like mix: the TPC-B update of an
// account, its teller and branch with a history row; now and then an update
// that moves an account to a new key (often across spans), a delete of an
// account or of history.
func pgbenchTxn(ctx context.Context, c *pgx.Conn, r *rand.Rand, nextAid, hid *atomic.Int64) error {
	tx, err := c.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	aid := 1 + r.Int64N(1000)
	delta := r.IntN(10001) - 5000
	tid := 1 + r.IntN(40)
	bid := 1 + r.IntN(4)
	switch k := r.IntN(20); {
	case k == 0:
		// The key moves to a new one, in the last span: from another
		// span, but for a quarter of the rows.
		_, err = tx.Exec(ctx, "UPDATE accounts SET aid = $1, updated = now() WHERE aid = $2", nextAid.Add(1), aid)
	case k == 1:
		_, err = tx.Exec(ctx, "DELETE FROM accounts WHERE aid = $1", aid)
	case k == 2:
		_, err = tx.Exec(ctx, "DELETE FROM history WHERE hid IN (SELECT hid FROM history ORDER BY hid LIMIT 3)")
	default:
		if _, err = tx.Exec(ctx, "UPDATE accounts SET abalance = abalance + $1, updated = now(), doc = jsonb_set(doc, '{d}', to_jsonb($1::int)), flag = NOT flag, score = score * 1.0001, seen = seen + interval '1 ms', raw = raw || '\\x2a'::bytea WHERE aid = $2", delta, aid); err != nil {
			break
		}
		if _, err = tx.Exec(ctx, "UPDATE tellers SET tbalance = tbalance + $1 WHERE tid = $2", delta, tid); err != nil {
			break
		}
		if _, err = tx.Exec(ctx, "UPDATE branches SET bbalance = bbalance + $1 WHERE bid = $2", delta, bid); err != nil {
			break
		}
		_, err = tx.Exec(ctx, "INSERT INTO history (hid, tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, $5, now())", hid.Add(1), tid, bid, aid, delta)
	}
	if err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	doneTxns.Add(1)
	txnSignal()
	return nil
}

var (
	doneTxns atomic.Int64
	txnDone  = make(chan struct{}, 1) // a transaction ended, or a client stopped
)

// txnSignal wakes a step waiting on the workload's progress.
func txnSignal() {
	select {
	case txnDone <- struct{}{}:
	default:
	}
}

// workload runs the DDLs and the setup statements on a connection of its
// own.
type workload struct {
	t   *testing.T
	ctx context.Context
	c   *pgx.Conn
}

func newWorkload(t *testing.T, ctx context.Context, dsn string) *workload {
	c, err := connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	doneTxns.Store(0)
	return &workload{t: t, ctx: ctx, c: c}
}

func (w *workload) close() { w.c.Close(context.Background()) }

func (w *workload) txnsDone() int64 { return doneTxns.Load() }

func (w *workload) exec(q string) {
	w.t.Helper()
	if _, err := w.c.Exec(w.ctx, q); err != nil {
		w.t.Fatalf("%s: %v", q, err)
	}
}

// ddl runs one DDL statement in a transaction of its own (the capture
// refuses a transaction mixing DDL and rows).
func (w *workload) ddl(q string) { w.exec(q) }
