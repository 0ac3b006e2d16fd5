package redokit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/codec/codectest"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/testkit/testenv"
	"github.com/redokit/redokit/writer"
)

// The staged-transaction crash trials: a writer process stages one large
// transaction at one commit ts (its quota is a fraction of it, and a second
// span lags, so nothing of it is resolved while it is written) and is
// killed with SIGKILL at a random point. The log must then hold all of the
// transaction or none of it, never a part: a read with duplicates kept
// finds exactly N events at that ts once the next epoch has written it
// again (staged events of the killed epoch lie above its fence's committed
// ts and are cut), or N from the killed epoch alone when it committed
// before it died.

const (
	stagedLog = "staged"
	stagedTs  = 1000
)

// stagedTxn yields the transaction's events: about size bytes of rows of
// table t1 at stagedTs, the same for every call with the same seed.
func stagedTxn(seed uint64, size int64, yield func([]codec.Event) error) error {
	r := rand.New(rand.NewPCG(seed, 26))
	batch := make([]codec.Event, 0, 64)
	var id int64
	for written := int64(0); written < size; {
		batch = batch[:0]
		for range 64 {
			pad := make([]byte, 512+r.IntN(1024))
			for i := range pad {
				pad[i] = byte('a' + r.IntN(26))
			}
			ev := codectest.Row(stagedTs, codectest.Table("db", "t1", 1), codectest.Key("id", id), codectest.Str("pad", string(pad)))
			written += int64(codec.EncodedLen(&ev))
			batch = append(batch, ev)
			id++
		}
		if err := yield(batch); err != nil {
			return err
		}
	}
	return nil
}

func stagedWriterOptions() *writer.Options {
	return &writer.Options{LogID: stagedLog, WriterID: "w", MemoryQuota: 1 << 20, FlushBytes: 256 << 10,
		MaxSegmentBytes: 4 << 20, BlockSize: 64 << 10, FlushInterval: 50 * time.Millisecond}
}

// stagedOpen opens the writer with spans 1 (the transaction's) and 2 (the
// laggard) at their flushed ts.
func stagedOpen(ctx context.Context, b *blob.Bucket) (*writer.Writer, error) {
	w, err := writer.Open(ctx, b, stagedWriterOptions())
	if err != nil {
		return nil, err
	}
	for _, s := range []writer.SpanID{1, 2} {
		if err := w.AddSpan(s, min(w.FlushedTs(), stagedTs-1)); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// stagedChild writes the prefix (ts 1..10 on span 2), then the transaction on
// span 1 with span 2 lagging, then commits it, printing each step; then it
// waits to be killed.
func stagedChild(args []string) error {
	dir, seed := args[0], args[1]
	s, err := strconv.ParseUint(seed, 10, 64)
	if err != nil {
		return err
	}
	size, err := strconv.ParseInt(args[2], 10, 64)
	if err != nil {
		return err
	}
	ctx := context.Background()
	b, err := local.New(dir, &local.Options{CreateDir: true})
	if err != nil {
		return err
	}
	w, err := stagedOpen(ctx, b)
	if err != nil {
		return err
	}
	for ts := uint64(1); ts <= 10; ts++ {
		if err := w.Write(ctx, 2, codectest.Row(ts, codectest.Table("db", "t2", 2), codectest.Key("id", int64(ts)))); err != nil {
			return err
		}
	}
	for _, sp := range []writer.SpanID{1, 2} {
		if err := w.AdvanceResolved(sp, 10); err != nil {
			return err
		}
	}
	if _, err := w.Flush(ctx); err != nil {
		return err
	}
	fmt.Println("READY")
	if err := stagedTxn(s, size, func(evs []codec.Event) error { return w.Write(ctx, 1, evs...) }); err != nil {
		return err
	}
	fmt.Println("WRITTEN", w.Stats().StageCuts)
	for _, sp := range []writer.SpanID{1, 2} {
		if err := w.AdvanceResolved(sp, stagedTs); err != nil {
			return err
		}
	}
	if _, err := w.Flush(ctx); err != nil {
		return err
	}
	fmt.Println("COMMITTED")
	time.Sleep(time.Hour)
	return nil
}

func init() { testenv.RunChild("staged-crash", stagedChild) }

// TestStagedTransactionCrash runs REDOKIT_STAGED_CRASH_TRIALS trials (default
// 5) with a transaction of REDOKIT_STAGED_CRASH_MIB (default 8) at a quota of
// 1 MiB.
func TestStagedTransactionCrash(t *testing.T) {
	trials := testenv.Count(t, "REDOKIT_STAGED_CRASH_TRIALS", 5)
	size := int64(testenv.Count(t, "REDOKIT_STAGED_CRASH_MIB", 8)) << 20
	seed := testenv.Seed(t, "REDOKIT_STAGED_CRASH_SEED", uint64(time.Now().UnixNano()))
	r := rand.New(rand.NewPCG(seed, 0))
	// How long a whole run takes, for the kill points.
	full := func() time.Duration {
		start := time.Now()
		c := testenv.StartChild(t, "staged-crash", []string{t.TempDir(), "1", fmt.Sprint(size)})
		for line := range c.Lines {
			if line == "COMMITTED" {
				break
			}
		}
		c.Kill()
		c.Wait()
		return time.Since(start)
	}()
	var outcomes [3]int // killed before the transaction was written, while staging, after commit
	for trial := range trials {
		txnSeed := r.Uint64()
		dir := t.TempDir()
		c := testenv.StartChild(t, "staged-crash", []string{dir, fmt.Sprint(txnSeed), fmt.Sprint(size)})
		if line := c.Line(t); line != "READY" {
			t.Fatalf("trial %d: child said %q: %s", trial, line, c.Stderr())
		}
		time.Sleep(time.Duration(r.Int64N(int64(full) * 5 / 4)))
		if err := c.Kill(); err != nil {
			t.Fatal(err)
		}
		state := 0
		for line := range c.Lines {
			switch {
			case line == "COMMITTED":
				state = 2
			case len(line) > 7 && line[:7] == "WRITTEN":
				state = max(state, 1)
			}
		}
		c.Wait()
		outcomes[state]++
		checkStagedTrial(t, trial, dir, txnSeed, size)
	}
	t.Logf("%d trials: %d killed while writing the transaction, %d after writing it, %d after committing it", trials, outcomes[0], outcomes[1], outcomes[2])
}

// checkStagedTrial takes the killed writer over, writes the transaction
// again when the killed epoch had not committed it, and reads the log with
// duplicates kept: exactly the transaction's events, once each.
func checkStagedTrial(t *testing.T, trial int, dir string, seed uint64, size int64) {
	t.Helper()
	ctx := context.Background()
	b, err := local.New(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	want := 0
	stagedTxn(seed, size, func(evs []codec.Event) error { want += len(evs); return nil })
	w, err := stagedOpen(ctx, b)
	if err != nil {
		t.Fatalf("trial %d: take over: %v", trial, err)
	}
	rewrote := w.FlushedTs() < stagedTs
	if rewrote {
		if err := stagedTxn(seed, size, func(evs []codec.Event) error { return w.Write(ctx, 1, evs...) }); err != nil {
			t.Fatalf("trial %d: write again: %v", trial, err)
		}
	}
	for _, sp := range []writer.SpanID{1, 2} {
		if err := w.AdvanceResolved(sp, stagedTs); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatalf("trial %d: close: %v", trial, err)
	}
	rd, err := reader.Open(ctx, b, &reader.Options{LogID: stagedLog, StartTs: 10, EndTs: stagedTs, KeepDuplicates: true})
	if err != nil {
		t.Fatalf("trial %d: open a reader: %v", trial, err)
	}
	defer rd.Close()
	ids := map[int64]int{}
	n := 0
	for {
		ev, err := rd.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("trial %d: read: %v", trial, err)
		}
		if ev.CommitTs() != stagedTs {
			t.Fatalf("trial %d: event at ts %d", trial, ev.CommitTs())
		}
		ids[ev.Row.Columns[0].Value.Int()]++
		n++
	}
	if n != want || len(ids) != want {
		t.Fatalf("trial %d: read %d events at ts %d (%d distinct), want exactly %d (rewritten: %v): a part of a staged transaction counted as committed",
			trial, n, stagedTs, len(ids), want, rewrote)
	}
}
