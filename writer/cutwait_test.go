package writer

import (
	"context"
	"testing"
	"time"

	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/codec"
)

// TestWritesWaitForTheCut writes a transaction far larger than FlushBytes
// at one commit ts, with a quota that would hold all of it, while every sync
// takes 100 ms (a rotation's sync holds up the committer, and with it the
// loop building the next job): the events not cut yet stay within about
// FlushBytes and one Write instead of filling the quota (awaitCut), on
// both stores, and every event reads back.
func TestWritesWaitForTheCut(t *testing.T) {
	const (
		flushBytes = 1 << 20
		events     = 24 << 10 // of about 1 KiB: 24 MiB
		batch      = 64
	)
	run := func(t *testing.T, appendable bool) {
		ctx := context.Background()
		f, b := faultyMem()
		if appendable {
			f, b = faultyLocal(t, t.TempDir())
		}
		f.Delay(blobtest.OpSync, 100*time.Millisecond)
		f.Delay(blobtest.OpPut, 100*time.Millisecond)
		o := testOptions("w")
		o.MemoryQuota = 256 << 20
		o.FlushBytes = flushBytes
		o.MaxSegmentBytes = 2 << 20
		o.BlockSize = 64 << 10
		w := openSpan1(t, b, o)
		r := newRand(3)
		evs := make([]codec.Event, batch)
		for i := 0; i < events; i += batch {
			for k := range evs {
				evs[k] = bigRow(r, 1, 10, int64(i+k+1), 1000)
			}
			must(t, w.Write(ctx, 1, evs...))
		}
		w.mu.Lock()
		peak := w.peakUncut
		w.mu.Unlock()
		one := int64(batch) * (1000 + 200)
		if limit := int64(flushBytes) + one; peak > limit {
			t.Errorf("up to %d bytes were buffered and not cut (limit FlushBytes + one Write = %d): Writes ran ahead of the loop", peak, limit)
		}
		must(t, w.AdvanceResolved(1, 10))
		must(t, w.Close(ctx))
		if got := len(readLog(t, b, readOpts{})); got != events {
			t.Fatalf("read %d events back, wrote %d", got, events)
		}
		t.Logf("peak uncut %d KiB", peak>>10)
	}
	t.Run("local", func(t *testing.T) { run(t, true) })
	t.Run("mem", func(t *testing.T) { run(t, false) })
}
