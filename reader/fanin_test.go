package reader

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/redokit/redokit/testkit/testenv"
)

// TestOverlappingRunsMemory holds a merge of overlapping runs to the bound
// of issue 26: its live heap stays within runs × one chunk + 64 MiB, one
// chunk being what a read of the same events in one segment holds per chunk
// (its live heap over its chunks, an upper bound), which holds a few chunks
// and never its log. Both logs are read with a GC every few milliseconds,
// so that the live heap is measured all along the read, not only when the
// GC happens to run. REDOKIT_RUNS_MEM_SIZE_MIB sets the MiB of events
// (default 64, about 95 MiB of blocks, which a reader holding the log
// decoded would not pass the bound with; the bound is tightest on logs far
// larger than it, e.g. 2048).
func TestOverlappingRunsMemory(t *testing.T) {
	total := int64(testenv.Count(t, "REDOKIT_RUNS_MEM_SIZE_MIB", 64)) << 20
	const runs = 64
	l := buildRunsLog(t, runsBucket(t), runs, interleaved, false, total)
	one := buildRunsLog(t, runsBucket(t), runs, interleaved, true, total)
	for _, raw := range []bool{true, false} {
		oneLive, oneSt := liveDuringRead(t, one, raw)
		runsLive, runsSt := liveDuringRead(t, l, raw)
		chunk := float64(oneLive) / float64(oneSt.MaxChunks)
		bound := runs*chunk + 64<<20
		t.Logf("raw %v: %d runs, %.0f MiB of events: live heap %.1f MiB (%d chunks, %d streams), bound %.1f MiB (one segment: %.1f MiB, %d chunks)",
			raw, runs, float64(l.uncomp)/(1<<20), float64(runsLive)/(1<<20), runsSt.MaxChunks, runsSt.MaxOpenStreams, bound/(1<<20), float64(oneLive)/(1<<20), oneSt.MaxChunks)
		// The measure of one chunk must itself be one: a read of one
		// segment holds a few chunks, never its log (95 MiB).
		if oneLive > 32<<20 {
			t.Errorf("raw %v: a read of one segment held %.1f MiB live in %d chunks", raw, float64(oneLive)/(1<<20), oneSt.MaxChunks)
		}
		if runsSt.MaxOpenStreams != runs {
			t.Fatalf("raw %v: %d streams open at once, want %d: the runs do not overlap", raw, runsSt.MaxOpenStreams, runs)
		}
		if float64(runsLive) > bound {
			t.Errorf("raw %v: a merge of %d runs held %.1f MiB live, above the bound %.1f MiB", raw, runs, float64(runsLive)/(1<<20), bound/(1<<20))
		}
	}
}

// liveDuringRead reads l whole, collecting garbage every few milliseconds
// meanwhile, and returns the largest live heap a collection found above
// what was live before the read, and the reader's stats.
func liveDuringRead(t *testing.T, l *runsLog, raw bool) (uint64, Stats) {
	runtime.GC()
	_, base := heapNow()
	stop, done := make(chan struct{}), make(chan uint64)
	go func() {
		var peak uint64
		tk := time.NewTicker(5 * time.Millisecond)
		defer tk.Stop()
		for {
			runtime.GC()
			_, live := heapNow()
			peak = max(peak, live)
			select {
			case <-stop:
				done <- peak
				return
			case <-tk.C:
			}
		}
	}()
	r, err := Open(context.Background(), l.b, &Options{LogID: testLog, StartTs: 0, EndTs: 1 << 63, Raw: raw})
	if err != nil {
		t.Fatal(err)
	}
	n := drainBatches(t, r)
	st := r.Stats()
	r.Close()
	close(stop)
	peak := <-done
	if n != l.rows {
		t.Fatalf("read %d events, the log has %d", n, l.rows)
	}
	return peak - min(peak, base), st
}
