package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/cli"
	"github.com/redokit/redokit/testkit/s3test"
	"github.com/redokit/redokit/testkit/testenv"
)

// The two-site drill. Site A holds the upstream (PostgreSQL), this
// example's coordinator and captures (one child process, -role all) and
// writes the log to an object store (the S3 emulator); site B keeps a
// standby downstream with `redokit apply --follow`. Under a steady
// pgbench-style load, site A is SIGKILLed at a random moment and its
// upstream stops (the site is gone). Site B then promotes: it applies up
// to the final global resolved ts and stops. Measured and printed:
//
//   - RPO: the upstream's commits after the final global resolved ts (WAL
//     bytes and time, as TestDrill reads them); at or below it, nothing may
//     be missing: the standby must equal a cold apply of the whole log, and
//     the log holds every commit up to its resolved ts (TestDrill).
//   - RTO with follow: from the kill until the standby holds the final
//     global resolved ts; and, for comparison, the cold path: applying the
//     whole log into a fresh downstream (the run's log is shorter than a
//     minute, so a checkpoint interval of one minute would replay at least
//     as much), and that rate's time for one minute of this load.
//
// REDOKIT_TWOSITE_TRIALS sets the trials (default 1; each kills at a new
// random moment).

func init() {
	testenv.RunChild("pgcdc-site", func(args []string) error {
		cfg, err := childConfig(args)
		if err != nil {
			return err
		}
		// Site A runs until it is SIGKILLed: the disaster.
		return run(context.Background(), &cfg)
	})
}

// s3Log creates a fresh bucket on the S3 emulator and returns a log URL
// in it.
func s3Log(t *testing.T) string {
	t.Helper()
	return s3test.NewBucket(t, "pgcdc-twosite-")
}

// lockedBuf is a buffer one goroutine writes while another reads.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// standbyAt is the end of the last round the standby's JSON lines report.
func standbyAt(out string) uint64 {
	var end uint64
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r struct {
			EndTs uint64 `json:"end_ts,string"`
		}
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			end = max(end, r.EndTs)
		}
	}
	return end
}

func TestTwoSiteDrill(t *testing.T) {
	trials := testenv.Count(t, "REDOKIT_TWOSITE_TRIALS", 1)
	var rtoFollow, rtoCold, coldMinute []time.Duration
	for trial := range trials {
		t.Run(fmt.Sprint("trial", trial), func(t *testing.T) {
			f, c, m := twoSiteTrial(t, uint64(trial))
			rtoFollow, rtoCold, coldMinute = append(rtoFollow, f), append(rtoCold, c), append(coldMinute, m)
		})
	}
	med := func(d []time.Duration) string {
		if len(d) == 0 {
			return "-"
		}
		s := slices.Clone(d)
		slices.Sort(s)
		return fmt.Sprintf("%v (%v–%v)", s[len(s)/2].Round(time.Millisecond), s[0].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
	}
	t.Logf("%d trials: RTO with apply --follow %s; cold apply of the whole log %s; cold apply of one minute of this load (at the measured apply rate) %s",
		len(rtoFollow), med(rtoFollow), med(rtoCold), med(coldMinute))
}

func twoSiteTrial(t *testing.T, trial uint64) (rtoFollow, rtoCold, coldMinute time.Duration) {
	base := postgresDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin := logicalServer(t, ctx, base)
	logURL := s3Log(t)
	db := testDatabases(t, ctx, base, 2, "_standby", "_cold")
	up := withDB(t, base, db)
	standby, cold := withDB(t, base, db+"_standby"), withDB(t, base, db+"_cold")
	dir := t.TempDir()
	cfg := config{
		PG: up, Log: logURL, LogID: "pgcdc", Sink: withDB(t, base, db+"_cold"), State: filepath.Join(dir, "state"),
		Publication: "pgcdc", SlotPrefix: db + "_", Writers: 2, Role: "all",
		Tables:        "branches,tellers,accounts:aid:250:500:750,history,marks",
		Tick:          50 * time.Millisecond,
		FlushInterval: 100 * time.Millisecond,
	}
	if err := cfg.check(); err != nil {
		t.Fatal(err)
	}
	w := newWorkload(t, ctx, up)
	defer w.close()
	w.ddl("CREATE TABLE branches (bid int PRIMARY KEY, bbalance bigint NOT NULL, filler text)")
	w.ddl("CREATE TABLE tellers (tid int PRIMARY KEY, bid int, tbalance bigint, note varchar(40))")
	w.ddl("CREATE TABLE accounts (aid bigint PRIMARY KEY, bid int, abalance numeric(12,2), flag boolean, updated timestamptz, doc jsonb, raw bytea, score float8, born date, seen timestamp(3), small int2, ratio real)")
	w.ddl("CREATE TABLE history (hid bigint PRIMARY KEY, tid int, bid int, aid bigint, delta int, mtime timestamp)")
	// A mark per client transaction, committed alone, and the WAL position
	// read after its commit: an upper bound of its commit LSN. A mark at or
	// below the final global resolved ts must be in the standby.
	w.ddl("CREATE TABLE marks (id bigint PRIMARY KEY, client int NOT NULL)")
	w.exec("INSERT INTO branches SELECT g, 0, 'branch ' || g FROM generate_series(1, 4) g")
	w.exec("INSERT INTO tellers SELECT g, 1 + g % 4, 0, 'teller ' || g FROM generate_series(1, 40) g")
	w.exec(`INSERT INTO accounts SELECT g, 1 + g % 4, g * 1.25, g % 2 = 0, '2026-01-01 00:00:00+00'::timestamptz + g * interval '1 second',
		jsonb_build_object('n', g, 's', 'acc ' || g), decode(lpad(to_hex(g), 8, '0'), 'hex'), g / 3.0, '2000-01-01'::date + g,
		'2026-06-01 12:00:00'::timestamp + g * interval '1.5 ms', g % 30000, g / 7.0 FROM generate_series(1, 1000) g`)

	// Site A: the coordinator and both captures in one process.
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	siteA := testenv.StartChild(t, "pgcdc-site", []string{string(b)}, testenv.StderrTo(&prefixWriter{t: t, prefix: "site A: "}))
	defer func() { siteA.Kill(); siteA.Wait() }()
	lg, closeLog, err := openLog(ctx, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeLog()
	// Wait for site A's log to exist before site B follows it.
	for {
		if _, err := lg.Meta(ctx); err == nil {
			break
		}
		select {
		case <-siteA.Done:
			t.Fatalf("site A exited: %v", siteA.Wait())
		case <-ctx.Done():
			t.Fatal("site A made no log")
		case <-time.After(20 * time.Millisecond):
		}
	}

	// Site B: apply --follow into the standby.
	var out, errb lockedBuf
	bctx, stopB := context.WithCancel(ctx)
	bdone := make(chan int, 1)
	go func() {
		bdone <- cli.Run(bctx, []string{"apply", "--storage", logURL, "--log", cfg.LogID, "--sink", standby,
			"--follow", "--follow-poll", "20ms", "--json"}, strings.NewReader(""), &out, &errb)
	}()
	defer func() { stopB(); <-bdone }()

	// A steady load until site A dies at a random moment.
	rng := rand.New(rand.NewPCG(trial, uint64(time.Now().UnixNano())))
	// The kill comes at a random moment after site A's global resolved ts
	// has passed a committed mark, so every trial has something to prove;
	// on a loaded machine site A can take longer than the random delay to
	// start its captures.
	killAfter := time.Duration(rng.IntN(2000)) * time.Millisecond
	var firstMark atomic.Uint64
	var nextAid, hid atomic.Int64
	nextAid.Store(5000)
	lctx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var loadErr atomic.Value
	type mark struct {
		id    int64
		after uint64 // the WAL position read after its commit
	}
	marks := make([][]mark, 2)
	began := time.Now()
	for cl := range 2 {
		wg.Go(func() {
			c, err := connect(lctx, up)
			if err != nil {
				loadErr.Store(err)
				return
			}
			defer c.Close(context.Background())
			r := rand.New(rand.NewPCG(uint64(cl), trial))
			for id := int64(cl) << 40; lctx.Err() == nil; id++ {
				if err := pgbenchTxn(lctx, c, r, &nextAid, &hid); err != nil {
					if lctx.Err() == nil {
						loadErr.Store(err)
					}
					return
				}
				var l string
				if _, err := c.Exec(lctx, "INSERT INTO marks (id, client) VALUES ($1, $2)", id, cl); err != nil {
					if lctx.Err() == nil {
						loadErr.Store(err)
					}
					return
				}
				if err := c.QueryRow(lctx, "SELECT pg_current_wal_lsn()::text").Scan(&l); err != nil {
					if lctx.Err() == nil {
						loadErr.Store(err)
					}
					return
				}
				lsn, _ := pglogrepl.ParseLSN(l)
				marks[cl] = append(marks[cl], mark{id, uint64(lsn)})
				firstMark.CompareAndSwap(0, uint64(lsn))
			}
		})
	}
	for {
		if fm := firstMark.Load(); fm != 0 {
			if m, err := lg.Meta(ctx); err == nil && m.ResolvedTs >= fm {
				break
			}
		}
		select {
		case <-siteA.Done:
			t.Fatalf("site A exited before the kill: %v", siteA.Wait())
		case <-ctx.Done():
			t.Fatalf("site A's global resolved ts never passed a committed mark (first mark at %s)", pglogrepl.LSN(firstMark.Load()))
		case <-time.After(20 * time.Millisecond):
		}
	}
	time.Sleep(killAfter)
	// The disaster: site A's processes die and its upstream with them.
	kill := time.Now()
	_ = siteA.Cmd.Process.Signal(syscall.SIGKILL)
	stopLoad()
	wg.Wait()
	siteA.Wait()
	if err, _ := loadErr.Load().(error); err != nil {
		t.Fatalf("the load: %v", err)
	}
	var l string
	if err := admin.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&l); err != nil {
		t.Fatal(err)
	}
	walEnd, _ := pglogrepl.ParseLSN(l)
	m, err := lg.Meta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	final := m.ResolvedTs

	// Site B promotes: it applies up to the final global resolved ts.
	for standbyAt(out.String()) < final {
		select {
		case code := <-bdone:
			t.Fatalf("apply --follow exited (%d) before it caught up:\n%s\n%s", code, out.String(), errb.String())
		case <-ctx.Done():
			t.Fatalf("the standby did not reach the final global resolved ts %s: at %s\n%s", pglogrepl.LSN(final), pglogrepl.LSN(standbyAt(out.String())), errb.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	rtoFollow = time.Since(kill)
	stopB()
	if code := <-bdone; code != 0 {
		t.Fatalf("apply --follow stopped with exit %d:\n%s", code, errb.String())
	}
	bdone <- 0 // for the deferred stop

	// RPO at the resolved ts: every mark committed at or below it is in
	// the standby.
	sc, err := connect(ctx, standby)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close(context.Background())
	var covered, missing int
	for _, ms := range marks {
		for _, mk := range ms {
			if mk.after > final {
				continue
			}
			covered++
			var n int
			if err := sc.QueryRow(ctx, "SELECT count(*) FROM marks WHERE id = $1", mk.id).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 1 {
				missing++
			}
		}
	}
	if missing > 0 || covered == 0 {
		t.Fatalf("RPO at the final global resolved ts: %d of %d transactions committed at or below it are missing from the standby", missing, covered)
	}

	// The cold path, and the check: one apply of the whole log.
	coldStart := time.Now()
	res := applyRange(t, ctx, lg, cold, &redokit.ReadOptions{AllowBelowCheckpoint: true, Start: 0, End: final})
	rtoCold = time.Since(coldStart)
	compareDBs(t, ctx, cold, standby)
	loadSecs := kill.Sub(began).Seconds()
	if res.Rows > 0 && loadSecs > 0 {
		coldMinute = time.Duration(float64(res.Rows) / loadSecs * 60 / res.RowsPerSecond() * float64(time.Second))
	}
	var rpoBytes uint64
	if uint64(walEnd) > final {
		rpoBytes = uint64(walEnd) - final
	}
	t.Logf("site A killed after %v of load (%v after its resolved ts passed a mark): final global resolved ts %s, upstream WAL at %s (%d bytes after it, the commits lost with the site); RPO at the resolved ts 0 (all %d transactions committed at or below it are in the standby); standby promoted %v after the kill (RTO); a cold apply of the whole log (%d rows) took %v; one minute of this load cold: about %v",
		kill.Sub(began).Round(time.Millisecond), killAfter, pglogrepl.LSN(final), walEnd, rpoBytes, covered, rtoFollow.Round(time.Millisecond), res.Rows, rtoCold.Round(time.Millisecond), coldMinute.Round(time.Millisecond))
	return rtoFollow, rtoCold, coldMinute
}
