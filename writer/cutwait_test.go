package writer

import (
	"context"
	"testing"
	"time"

	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/codec"
)

// TestWritesWaitForTheCut writes a transaction far larger than FlushBytes
// at one commit ts on local disk, with a quota that would hold all of it,
// while every sync takes 100 ms (a rotation's sync holds up the committer,
// and with it the loop building the next job): the events not cut yet stay
// within about FlushBytes and one Write instead of filling the quota
// (awaitCut), and every event reads back. On an object store, where the
// uploads need production to run ahead, they may fill it.
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
		if limit := int64(flushBytes) + one; appendable && peak > limit {
			t.Errorf("up to %d bytes were buffered and not cut (limit FlushBytes + one Write = %d): Writes ran ahead of the loop", peak, limit)
		} else if !appendable && peak <= limit {
			t.Errorf("on an object store at most %d bytes were buffered and not cut: Writes waited for the loop, which starves the uploads", peak)
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

// TestSmallStageCuts: on local disk, a transaction written while
// no resolved ts moves is staged every 4 MiB (smallStageDue), each cut
// appended without a sync of its own; where spans interleave, so that each
// stage cut would go below the last and start a segment, cuts stay at
// FlushBytes.
func TestSmallStageCuts(t *testing.T) {
	const (
		flushBytes = 16 << 20
		total      = 32 << 20
		size       = 1000
		batch      = 64
	)
	run := func(t *testing.T, spans int) (stageCuts, syncsBefore int64) {
		ctx := context.Background()
		b := localBucket(t, t.TempDir())
		o := testOptions("w")
		o.Compression = CompressionNone
		o.MemoryQuota = 256 << 20
		o.FlushBytes = flushBytes
		o.MaxSegmentBytes = 256 << 20
		o.BlockSize = 64 << 10
		w := open(t, b, o)
		for s := range spans {
			must(t, w.AddSpan(SpanID(s+1), 0))
		}
		r := newRand(5)
		evs := make([]codec.Event, batch)
		before := b.Stats().Syncs
		for n := 0; n*size < total; n += batch {
			span := SpanID(n/batch%spans + 1)
			// Span 1 runs 1,000,000 ts ahead of the others: where several
			// spans write, every cut holds events below the last one's.
			base := uint64(n) + 1
			if span == 1 && spans > 1 {
				base += 1_000_000
			}
			for k := range evs {
				evs[k] = bigRow(r, span, base+uint64(k), int64(n+k), size)
			}
			must(t, w.Write(ctx, span, evs...))
		}
		syncsBefore = b.Stats().Syncs - before
		stageCuts = w.Stats().StageCuts
		for s := range spans {
			must(t, w.AdvanceResolved(SpanID(s+1), 2_000_000))
		}
		if _, err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		must(t, w.Close(ctx))
		if got, want := len(readLog(t, b, readOpts{staged: true})), total/size+batch; got < total/size || got > want {
			t.Fatalf("read %d events back, wrote about %d", got, total/size)
		}
		return stageCuts, syncsBefore
	}
	t.Run("one span", func(t *testing.T) {
		cuts, syncs := run(t, 1)
		// The first cut comes at FlushBytes: AddSpan made events
		// flushable, so it is not a lazy one.
		if want := int64(total-flushBytes) / (4 << 20); cuts < want {
			t.Errorf("%d stage cuts of %d MiB written, want at least %d: one per 4 MiB after the first", cuts, total>>20, want)
		}
		if syncs > 1 {
			t.Errorf("%d fdatasyncs before the flush: the stage cuts are lazy, only the first (the resolved ts new to the loop) may sync", syncs)
		}
	})
	t.Run("interleaved spans", func(t *testing.T) {
		cuts, _ := run(t, 4)
		if cuts > total/flushBytes+2 {
			t.Errorf("%d stage cuts of %d MiB written by interleaved spans, want about one per FlushBytes (%d MiB): each small one would start a segment", cuts, total>>20, flushBytes>>20)
		}
	})
}
