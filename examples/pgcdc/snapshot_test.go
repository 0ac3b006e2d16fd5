package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/testkit/testenv"
)

// TestSnapshotIncompleteRefused: a coordinator restarted over slots whose
// initial snapshot is still recorded pending (the process taking it died)
// refuses with ErrSnapshotIncomplete, naming what to drop, instead of
// starting a log that lacks part of the tables.
func TestSnapshotIncompleteRefused(t *testing.T) {
	dir := t.TempDir()
	cfg := &config{State: dir, Tables: "t", Writers: 2, SlotPrefix: "s_", Log: "/srv/redo", Tick: time.Millisecond}
	if err := writeSnapshotState(dir, "pending", 0x16B3748); err != nil {
		t.Fatal(err)
	}
	err := coordinate(context.Background(), cfg, nil, &upstream{})
	if !errors.Is(err, ErrSnapshotIncomplete) {
		t.Fatalf("err %v, want ErrSnapshotIncomplete", err)
	}
	for _, s := range []string{"0/16B3748", "s_0, s_1", "/srv/redo", filepath.Join(dir, "snapshot")} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%q does not name %s", err, s)
		}
	}
	// A damaged record is an error, not "no snapshot".
	if err := os.WriteFile(snapshotStatePath(dir), []byte("pend"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readSnapshotState(dir); err == nil {
		t.Error("a damaged record read without an error")
	}
}

// TestWaitSnapshot: a capture waits while the snapshot is pending and goes
// on with its LSN once it is done; without a record it does not wait.
func TestWaitSnapshot(t *testing.T) {
	dir := t.TempDir()
	cfg := &config{State: dir, Tick: time.Millisecond}
	logger := slog.New(slog.DiscardHandler)
	if lsn, err := waitSnapshot(context.Background(), cfg, logger); err != nil || lsn != 0 {
		t.Fatalf("no record: %d, %v", lsn, err)
	}
	if err := writeSnapshotState(dir, "pending", 1000); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		lsn, err := waitSnapshot(context.Background(), cfg, logger)
		if err == nil && lsn != 1000 {
			err = errors.New("LSN " + pglogrepl.LSN(lsn).String())
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("returned while pending: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := writeSnapshotState(dir, "done", 1000); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting after the snapshot was recorded done")
	}
}

// TestUntranslatedDDL, on the real server: a table that existed before the
// capture (the snapshot carries it), then a DDL the capture cannot
// translate (CREATE INDEX) and rows after it. The capture stops with
// ErrUntranslatedDDL naming the LSN, and again at the same LSN when
// restarted; with -skip-ddl that LSN it carries the rows, and the
// downstream equals the upstream.
func TestUntranslatedDDL(t *testing.T) {
	base := postgresDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := logicalServer(t, ctx, base)
	db := testDatabases(t, ctx, base, 1, "_down")
	up, down := withDB(t, base, db), withDB(t, base, db+"_down")
	w := newWorkload(t, ctx, up)
	defer w.close()
	w.exec("CREATE TABLE t (id bigserial PRIMARY KEY, v text)")
	w.exec("INSERT INTO t (v) SELECT 'before ' || g FROM generate_series(1, 50) g")

	dir := t.TempDir()
	cfg := config{PG: up, Log: filepath.Join(dir, "redo"), LogID: "pgcdc", Sink: down, State: filepath.Join(dir, "state"),
		Publication: "pgcdc", SlotPrefix: db + "_", Writers: 1, Tables: "t", Tick: 50 * time.Millisecond, FlushInterval: 50 * time.Millisecond}
	if err := cfg.check(); err != nil {
		t.Fatal(err)
	}
	lg, closeLog, err := openLog(ctx, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeLog()
	u, err := setup(ctx, up, cfg.Publication, cfg.slots())
	if err != nil {
		t.Fatal(err)
	}
	defer u.close()
	cctx, stopCoord := context.WithCancel(ctx)
	coordDone := make(chan struct{})
	go func() {
		defer close(coordDone)
		if err := coordinate(cctx, &cfg, lg, u); err != nil && cctx.Err() == nil {
			t.Errorf("coordinator: %v", err)
		}
	}()
	defer func() { stopCoord(); <-coordDone }()

	w.exec("CREATE INDEX t_v ON t (v)")
	w.exec("INSERT INTO t (v) SELECT 'after ' || g FROM generate_series(1, 20) g")
	var l string
	if err := admin.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&l); err != nil {
		t.Fatal(err)
	}
	last, _ := pglogrepl.ParseLSN(l)

	capture := func(skip string) (context.CancelFunc, <-chan error) {
		c := cfg
		c.SkipDDL = skip
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			var st captureStats
			done <- runCapture(rctx, &c, 0, lg, fileCheckpoint(c.State, 0), &st)
		}()
		return cancel, done
	}
	var first *DDLError
	for try := range 2 {
		cancel, done := capture("")
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			err = errors.New("the capture did not stop within 30 s")
		}
		cancel()
		var de *DDLError
		if !errors.Is(err, ErrUntranslatedDDL) || !errors.As(err, &de) {
			t.Fatalf("run %d: %v, want ErrUntranslatedDDL", try+1, err)
		}
		if first == nil {
			first = de
			t.Logf("the capture stops with: %v", err)
		} else if de.LSN != first.LSN {
			t.Errorf("run 2 stopped at LSN %s, run 1 at %s", pglogrepl.LSN(de.LSN), pglogrepl.LSN(first.LSN))
		}
		for _, s := range []string{"CREATE INDEX t_v ON t (v)", "-skip-ddl " + pglogrepl.LSN(de.LSN).String()} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("run %d: %q does not say %q", try+1, err, s)
			}
		}
	}

	// The way on the error names: the capture passes the DDL and carries
	// the rows after it, through its gate into the downstream.
	cancelCapture, done := capture(pglogrepl.LSN(first.LSN).String())
	defer cancelCapture()
	for {
		b, _ := os.ReadFile(filepath.Join(cfg.State, "checkpoint-"+writerID(0)))
		if applied, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && applied >= uint64(last) {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the capture run with -skip-ddl stopped: %v", err)
		case <-ctx.Done():
			t.Fatalf("the downstream did not reach the upstream's last commit (%s): checkpoint file %q", last, b)
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancelCapture()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("the capture run with -skip-ddl: %v", err)
	}
	compareDBs(t, ctx, up, down)
}

// TestSnapshotMemory: the initial snapshot streams a table: the heap it
// takes stays within a bound set by the writer (its quota, here 4 MiB, its
// blocks and flushes) and the batches, not by the table
// (REDOKIT_PGCDC_SNAPSHOT_ROWS rows of 1 KiB; default 60000, 58 MiB of
// values, above the bound: a snapshot that held a table would fail).
// Measured: 33 MiB for 29 MiB of values, 35.5 MiB for 97 MiB.
func TestSnapshotMemory(t *testing.T) {
	base := postgresDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	logicalServer(t, ctx, base)
	rows := testenv.Count(t, "REDOKIT_PGCDC_SNAPSHOT_ROWS", 60000)
	db := testDatabases(t, ctx, base, 1)
	up := withDB(t, base, db)
	w := newWorkload(t, ctx, up)
	defer w.close()
	w.exec("CREATE TABLE big (id bigint PRIMARY KEY, pad text)")
	// md5 text does not compress: what is read is what is stored.
	w.exec(fmt.Sprintf(`INSERT INTO big SELECT g, (SELECT string_agg(md5((g * 32 + k)::text), '') FROM generate_series(1, 32) k) FROM generate_series(1, %d) g`, rows))
	var tableBytes int64
	if err := w.c.QueryRow(ctx, "SELECT sum(length(pad))::bigint FROM big").Scan(&tableBytes); err != nil {
		t.Fatal(err)
	}

	defer func(q int64) { snapshotMemoryQuota = q }(snapshotMemoryQuota)
	snapshotMemoryQuota = 4 << 20
	dir := t.TempDir()
	cfg := config{PG: up, Log: filepath.Join(dir, "redo"), LogID: "pgcdc", State: filepath.Join(dir, "state"),
		Publication: "pgcdc", SlotPrefix: db + "_", Writers: 1, Tables: "big", Tick: 50 * time.Millisecond, FlushInterval: 50 * time.Millisecond}
	if err := cfg.check(); err != nil {
		t.Fatal(err)
	}
	lg, closeLog, err := openLog(ctx, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeLog()
	u, err := setup(ctx, up, cfg.Publication, cfg.slots())
	if err != nil {
		t.Fatal(err)
	}
	defer u.close()

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseline, peak := ms.HeapInuse, ms.HeapInuse
	var snapLSN uint64
	cctx, stopCoord := context.WithCancel(ctx)
	coordDone := make(chan error, 1)
	began := time.Now()
	go func() { coordDone <- coordinate(cctx, &cfg, lg, u) }()
	for {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
		state, lsn, err := readSnapshotState(cfg.State)
		if err != nil {
			t.Fatal(err)
		}
		if state == "done" {
			snapLSN = lsn
			break
		}
		select {
		case err := <-coordDone:
			t.Fatalf("the coordinator stopped before the snapshot was done: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	took := time.Since(began)
	// The coordinator's next tick takes the global resolved ts to the
	// snapshot's.
	for {
		m, err := lg.Meta(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.ResolvedTs >= snapshotTs(snapLSN) {
			break
		}
		select {
		case err := <-coordDone:
			t.Fatalf("the coordinator stopped: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	stopCoord()
	<-coordDone
	grew := int64(peak - baseline)
	t.Logf("snapshot of %d rows (%d MiB of values) in %v: the heap grew by %.1f MiB at most (writer quota %d MiB)",
		rows, tableBytes>>20, took.Round(time.Millisecond), float64(grew)/(1<<20), snapshotMemoryQuota>>20)
	// The quota, a batch per span, the writer's blocks being built and
	// compressed, the garbage GC has not yet collected (GOGC lets it reach
	// the live heap again): some 35 MiB, whatever the table's size.
	if limit := int64(48 << 20); grew > limit {
		t.Errorf("the heap grew by %d MiB during the snapshot, above %d MiB: it grows with the table", grew>>20, limit>>20)
	}

	// Every row is in the log, at the snapshot's commit ts.
	r, err := lg.OpenReader(ctx, &redokit.ReadOptions{Start: u.start})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var n, ddls int
	for ev, err := range r.CodecEvents(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.IsDDL() {
			ddls++
		} else {
			n++
		}
	}
	if n != rows || ddls != 1 {
		t.Errorf("the log holds %d rows and %d DDLs of the snapshot, want %d and 1", n, ddls, rows)
	}
}

// TestSnapshotInterrupted, on the real server: the coordinator stops while
// it logs the initial snapshot. Started again, it refuses with
// ErrSnapshotIncomplete instead of running a log that lacks part of the
// table; a capture started meanwhile waits and logs nothing; the temporary
// slot that exported the snapshot is gone.
func TestSnapshotInterrupted(t *testing.T) {
	base := postgresDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := logicalServer(t, ctx, base)
	db := testDatabases(t, ctx, base, 1)
	up := withDB(t, base, db)
	w := newWorkload(t, ctx, up)
	defer w.close()
	w.exec("CREATE TABLE big (id bigint PRIMARY KEY, pad text)")
	w.exec(`INSERT INTO big SELECT g, (SELECT string_agg(md5((g * 32 + k)::text), '') FROM generate_series(1, 32) k) FROM generate_series(1, 30000) g`)

	dir := t.TempDir()
	cfg := config{PG: up, Log: filepath.Join(dir, "redo"), LogID: "pgcdc", Sink: "sqlite://" + filepath.Join(dir, "down.db"), State: filepath.Join(dir, "state"),
		Publication: "pgcdc", SlotPrefix: db + "_", Writers: 1, Tables: "big", Tick: 20 * time.Millisecond, FlushInterval: 50 * time.Millisecond}
	if err := cfg.check(); err != nil {
		t.Fatal(err)
	}
	lg, closeLog, err := openLog(ctx, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeLog()
	u, err := setup(ctx, up, cfg.Publication, cfg.slots())
	if err != nil {
		t.Fatal(err)
	}
	cctx, stopCoord := context.WithCancel(ctx)
	coordDone := make(chan error, 1)
	go func() { coordDone <- coordinate(cctx, &cfg, lg, u) }()
	for {
		state, _, err := readSnapshotState(cfg.State)
		if err != nil {
			t.Fatal(err)
		}
		if state == "done" {
			t.Fatal("the snapshot was done before the test could stop it")
		}
		if _, err := lg.Meta(ctx); state == "pending" && err == nil {
			break // the log exists: the snapshot is being logged
		}
		time.Sleep(time.Millisecond)
	}
	stopCoord()
	if err := <-coordDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the stopped coordinator: %v", err)
	}
	u.close() // the process ends: its transaction, and the temporary slot's connection
	if state, _, _ := readSnapshotState(cfg.State); state != "pending" {
		t.Fatalf("the record says %q after the stop, want pending", state)
	}
	// The server drops it as the walsender that held it exits, which may
	// take a moment.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var temp int
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE $1", db+"%_snapshot").Scan(&temp); err != nil {
			t.Fatal(err)
		}
		if temp == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%d temporary slots left 10 s after the snapshot's process ended", temp)
			break
		}
	}

	// A capture waits for the snapshot, and logs nothing.
	wctx, stopWait := context.WithTimeout(ctx, 300*time.Millisecond)
	var st captureStats
	err = runCapture(wctx, &cfg, 0, lg, fileCheckpoint(cfg.State, 0), &st)
	stopWait()
	if !errors.Is(err, context.DeadlineExceeded) || st.Events.Load() != 0 {
		t.Errorf("a capture while the snapshot is pending: %v, %d events; want it waiting", err, st.Events.Load())
	}

	// The restart: the slot exists, the snapshot is pending.
	u2, err := setup(ctx, up, cfg.Publication, cfg.slots())
	if err != nil {
		t.Fatal(err)
	}
	defer u2.close()
	if u2.snap != nil || u2.start != 0 {
		t.Fatalf("setup over the existing slot took a new snapshot (start %d)", u2.start)
	}
	err = coordinate(ctx, &cfg, lg, u2)
	if !errors.Is(err, ErrSnapshotIncomplete) || !strings.Contains(err.Error(), cfg.slots()[0]) {
		t.Fatalf("the restarted coordinator: %v, want ErrSnapshotIncomplete naming slot %s", err, cfg.slots()[0])
	}
	t.Logf("restarted: %v", err)
}
