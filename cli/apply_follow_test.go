package cli

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/testkit/workload"
)

// syncBuffer is a bytes.Buffer safe for one writer and one reader, which
// the reader can wait on (waitFor).
type syncBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{} // a token after each Write, made on first use
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.b.Write(p)
	select {
	case s.signal() <- struct{}{}:
	default:
	}
	return n, err
}

// signal returns the Write notification channel. The caller holds mu.
func (s *syncBuffer) signal() chan struct{} {
	if s.wrote == nil {
		s.wrote = make(chan struct{}, 1)
	}
	return s.wrote
}

// waitFor waits until the buffer holds sub, woken by each Write; false
// when d passes first.
func (s *syncBuffer) waitFor(sub string, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		s.mu.Lock()
		found, wrote := strings.Contains(s.b.String(), sub), s.signal()
		s.mu.Unlock()
		if found {
			return true
		}
		select {
		case <-wrote:
		case <-timer.C:
			return false
		}
	}
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestApplyFollow: apply --follow keeps a SQLite downstream at the global
// resolved ts of a log that grows while it runs, one JSON line per round
// with its lag; Ctrl-C (its ctx) stops it with exit 0 and the downstream
// as far as the log is resolved; a restart goes on from the sink's progress
// without applying anything twice; and the flags that give it an end are
// refused.
func TestApplyFollow(t *testing.T) {
	ctx := context.Background()
	store := memName(t)
	b, err := blob.Open(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	wf := workloadFlags{flushInterval: 20 * time.Millisecond, segmentSize: 64 << 10}
	p, err := newPipeline(ctx, b, "f", workload.Config{}, 1, wf.writerOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.abort()
	route := func(e logEvent, first bool) {
		t.Helper()
		tx := e.txn()
		if first {
			tx.NewSpans = []uint64{rowSpan}
		}
		if err := p.route(ctx, tx, -1); err != nil {
			t.Fatal(err)
		}
	}
	flush := func() uint64 {
		t.Helper()
		ts, err := p.flushAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	route(ddlTx(1, "shop", "", codec.ActionCreateSchema, "CREATE DATABASE IF NOT EXISTS shop"), true)
	route(ddlTx(2, "shop", "orders", codec.ActionCreateTable, "CREATE TABLE shop.orders (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(20))"), false)
	for k := 3; k <= 10; k++ {
		route(rowsTx(k, "shop.orders"), false)
	}
	flush()

	path := filepath.Join(t.TempDir(), "standby.db")
	sink := "sqlite://" + path
	for _, bad := range [][]string{{"--end-ts", "5"}, {"--force"}, {"--dry-run"}} {
		r := cli(t, append([]string{"apply", "--storage", store, "--log", "f", "--sink", sink, "--follow"}, bad...)...)
		wantCode(t, r, exitUsage)
		mustContain(t, "stderr", r.stderr, "--follow has no end", bad[0])
	}

	r := cli(t, "apply", "--storage", store, "--log", "f", "--sink", sink, "--metrics-addr", "127.0.0.1:0")
	wantCode(t, r, exitUsage)
	mustContain(t, "stderr", r.stderr, "--metrics-addr goes with --follow")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := ln.Addr().String()
	ln.Close()
	follow := func(fctx context.Context) (*syncBuffer, chan int) {
		var out, errb syncBuffer
		done := make(chan int, 1)
		go func() {
			a := newApp(strings.NewReader(""), &out, &errb)
			done <- a.execute(fctx, []string{"apply", "--storage", store, "--log", "f", "--sink", sink, "--follow", "--follow-poll", "2ms", "--json", "--metrics-addr", metricsAddr})
		}()
		return &out, done
	}
	scrape := func() string {
		t.Helper()
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	// orders counts the standby's rows while apply writes it: its own
	// connection waits out the writer's lock; no table yet is -1.
	orders := func() int {
		t.Helper()
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM orders").Scan(&n); err != nil {
			if strings.Contains(err.Error(), "no such table") {
				return -1
			}
			t.Fatal(err)
		}
		return n
	}
	waitRows := func(n int, out *syncBuffer) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			if orders() == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the standby did not reach %d rows; its output:\n%s", n, out.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	fctx, stop := context.WithCancel(ctx)
	out, done := follow(fctx)
	waitRows(8, out)
	for k := 11; k <= 30; k++ {
		route(rowsTx(k, "shop.orders"), false)
		if k%5 == 0 {
			flush()
		}
	}
	waitRows(28, out)
	mustContain(t, "metrics", scrape(), `redokit_follower_count{log="f"} 1`, `redokit_follower_lag_seconds{log="f"}`, `redokit_follower_lag_ts{log="f"}`)
	// Written, not resolved: the standby does not apply it.
	route(rowsTx(31, "shop.orders"), false)
	time.Sleep(30 * time.Millisecond)
	if got := orders(); got != 28 {
		t.Fatalf("the standby applied an event above the global resolved ts: %d rows", got)
	}
	stop()
	if code := <-done; code != 0 {
		t.Fatalf("apply --follow stopped by its ctx: exit %d\n%s", code, out.String())
	}
	var rounds int
	var last followSummary
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, `"stopped"`) {
			if err := json.Unmarshal([]byte(line), &last); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var r followRound
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("not a JSON line: %q (%v)", line, err)
		}
		if r.EndTs <= r.StartTs {
			t.Fatalf("round %+v", r)
		}
		rounds++
	}
	if rounds < 2 || last.Stopped != "signal" || last.Position != tsAt(30) || last.Rows != 28 {
		t.Fatalf("%d rounds, summary %+v; want several rounds, stopped by the signal at ts %d after 28 rows\n%s", rounds, last, tsAt(30), out.String())
	}

	// A restart: the sink's progress skips what it holds.
	flush()
	fctx, stop = context.WithCancel(ctx)
	out, done = follow(fctx)
	waitRows(29, out)
	// The row is committed before its round ends and prints its line: a
	// signal in between ends the run with the summary alone.
	if !out.waitFor("\n", 20*time.Second) {
		t.Fatalf("the restart's first round printed no line; its output:\n%s", out.String())
	}
	stop()
	if code := <-done; code != 0 {
		t.Fatalf("restarted apply --follow: exit %d\n%s", code, out.String())
	}
	// It reads from the checkpoint again: its first round skips the 28
	// rows and 2 DDLs the downstream holds, and applies the one new row.
	var first followRound
	if err := json.Unmarshal([]byte(strings.SplitN(out.String(), "\n", 2)[0]), &first); err != nil {
		t.Fatal(err)
	}
	if first.Rows != 1 || first.Skipped != 30 {
		t.Fatalf("the restart's first round %+v: want 1 row applied and 30 events skipped\n%s", first, out.String())
	}
}

// TestApplyFollowStopsBetweenTransactions: a signal inside a round ends it
// at the next commit ts: the downstream holds every upstream transaction
// whole or not at all, the run exits 0, and a rerun applies the rest.
func TestApplyFollowStopsBetweenTransactions(t *testing.T) {
	ctx := context.Background()
	store := memName(t)
	const txns, rows = 150, 200
	ev := []logEvent{
		ddlTx(1, "shop", "", codec.ActionCreateSchema, "CREATE DATABASE IF NOT EXISTS shop"),
		ddlTx(2, "shop", "orders", codec.ActionCreateTable, "CREATE TABLE shop.orders (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(20))"),
	}
	for k := 3; k < 3+txns; k++ {
		e := logEvent{k: k}
		for i := range rows {
			e.rows = append(e.rows, rowsTx(k*1000+i, "shop.orders").rows[0])
		}
		for i := range e.rows {
			e.rows[i].StartTs, e.rows[i].CommitTs = tsAt(k)-1, tsAt(k)
		}
		ev = append(ev, e)
	}
	writeLog(t, store, "s", ev)
	midway := false
	for _, delay := range []time.Duration{10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
		path := filepath.Join(t.TempDir(), "s.db")
		sink := "sqlite://" + path
		fctx, stop := context.WithCancel(ctx)
		var out, errb syncBuffer
		done := make(chan int, 1)
		go func() {
			a := newApp(strings.NewReader(""), &out, &errb)
			done <- a.execute(fctx, []string{"apply", "--storage", store, "--log", "s", "--sink", sink, "--follow", "--json"})
		}()
		time.Sleep(delay)
		stop()
		if code := <-done; code != 0 {
			t.Fatalf("stopped after %v: exit %d\n%s\n%s", delay, code, out.String(), errb.String())
		}
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		per := map[int64]int{}
		q, err := db.Query("SELECT id FROM orders")
		if err == nil {
			for q.Next() {
				var id int64
				if err := q.Scan(&id); err != nil {
					t.Fatal(err)
				}
				per[id/1000]++
			}
			q.Close()
		}
		db.Close()
		for k, n := range per {
			if n != rows {
				t.Fatalf("stopped after %v: transaction %d holds %d of its %d rows downstream", delay, k, n, rows)
			}
		}
		if len(per) > 0 && len(per) < txns {
			midway = true
			// A rerun applies the rest, whole.
			r := cli(t, "apply", "--storage", store, "--log", "s", "--sink", sink)
			wantCode(t, r, 0)
			if got := sqliteTables(t, path)["orders"]; got != txns*rows {
				t.Fatalf("after the rerun: %d rows, want %d", got, txns*rows)
			}
			break
		}
	}
	if !midway {
		t.Fatal("no stop landed inside the round: the test proves nothing")
	}
}
