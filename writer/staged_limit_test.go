package writer

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"syscall"
	"testing"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/testkit/testenv"
)

// stagedLimitChild writes one transaction of txnMiB at one commit ts through a
// writer with a quota of quotaMiB, under a data-size limit of limitMiB set on
// itself, then resolves and closes. It prints its peak RSS (VmHWM) and its
// RSS before the writer opened.
func stagedLimitChild(args []string) error {
	if len(args) != 4 {
		return fmt.Errorf("want directory, quota, transaction and limit (MiB), got %q", args)
	}
	var mib [3]int64
	for i, a := range args[1:] {
		n, err := strconv.ParseInt(a, 10, 64)
		if err != nil {
			return err
		}
		mib[i] = n << 20
	}
	quota, txn, limit := mib[0], mib[1], mib[2]
	idle := testenv.ProcStatus("VmRSS")
	if limit > 0 {
		if err := syscall.Setrlimit(syscall.RLIMIT_DATA, &syscall.Rlimit{Cur: uint64(limit), Max: uint64(limit)}); err != nil {
			return fmt.Errorf("set RLIMIT_DATA: %w", err)
		}
	}
	ctx := context.Background()
	b, err := local.New(args[0], &local.Options{CreateDir: true})
	if err != nil {
		return err
	}
	defer b.Close()
	o := stagedOptions(quota)
	o.BlockSize = 64 << 10
	o.MaxSegmentBytes = 64 << 20
	w, err := Open(ctx, b, o)
	if err != nil {
		return err
	}
	if err := w.AddSpan(1, 0); err != nil {
		return err
	}
	r := newRand(11)
	var n int64
	batch := make([]codec.Event, 64)
	for written := int64(0); written < txn; {
		for i := range batch {
			batch[i] = bigRow(r, 1, 100, n, 4000)
			written += int64(codec.EncodedLen(&batch[i]))
			n++
		}
		if err := w.Write(ctx, 1, batch...); err != nil {
			return err
		}
	}
	if err := w.AdvanceResolved(1, 100); err != nil {
		return err
	}
	if err := w.Close(ctx); err != nil {
		return err
	}
	st := w.Stats()
	fmt.Printf("events %d overcommits %d stagecuts %d idle %d peak %d\n", n, st.QuotaOvercommits, st.StageCuts, idle, testenv.ProcStatus("VmHWM"))
	return nil
}

// TestStagedUnderDataLimit is the crash loop that staged runs end: a
// transaction of eight quotas, written by a process whose data size is
// limited to quota + pipeline + 128 MiB, completes (before, the writer held
// the whole transaction and the process died with "out of memory", again on
// every restart); and a transaction of 64 quotas keeps the peak RSS within
// quota + pipeline + 64 MiB above the idle process. The quota is
// REDOKIT_STAGED_QUOTA_MIB (default 8).
func TestStagedUnderDataLimit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("RLIMIT_DATA and /proc/self/status are Linux's")
	}
	if raceEnabled {
		// The race detector's shadow memory does not fit any such limit;
		// scripts/test.sh runs this test without -race in a step of its
		// own.
		t.Skip("measures memory: run without -race (scripts/test.sh does)")
	}
	quota := int64(testenv.Count(t, "REDOKIT_STAGED_QUOTA_MIB", 8))
	// The pipeline's own bound (package doc, Memory): blocks in flight,
	// about twice min(FlushBytes, 16 MiB), record lists up to a sixteenth
	// of the quota, and the runtime's own.
	pipeline := int64(2*16 + quota/16 + 16)
	run := func(t *testing.T, txn, limit int64) (peak, idle int64) {
		c := testenv.StartChild(t, "writer-staged-limit", []string{t.TempDir(), fmt.Sprint(quota), fmt.Sprint(txn), fmt.Sprint(limit)})
		var last string
		for line := range c.Lines {
			last = line
		}
		if err := c.Wait(); err != nil {
			t.Fatalf("child: %v\n%s", err, c.Stderr())
		}
		var n, over, cuts int64
		if _, err := fmt.Sscanf(last, "events %d overcommits %d stagecuts %d idle %d peak %d", &n, &over, &cuts, &idle, &peak); err != nil {
			t.Fatalf("child said %q: %v", last, err)
		}
		if over != 0 || cuts == 0 {
			t.Fatalf("%d overcommits, %d stage cuts", over, cuts)
		}
		t.Logf("quota %d MiB, transaction %d MiB: %d events, %d stage cuts, RSS idle %d MiB, peak %d MiB", quota, txn, n, cuts, idle>>20, peak>>20)
		return peak, idle
	}
	t.Run("8 quotas under a data limit", func(t *testing.T) {
		run(t, 8*quota, quota+pipeline+128)
	})
	t.Run("64 quotas", func(t *testing.T) {
		peak, idle := run(t, 64*quota, 0)
		if bound := idle + (quota+pipeline+64)<<20; peak > bound {
			t.Errorf("peak RSS %d MiB, above idle + quota + pipeline + 64 MiB = %d MiB", peak>>20, bound>>20)
		}
	})
}
