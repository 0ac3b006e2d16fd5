package writer

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
	"github.com/redokit/redokit/testkit/testenv"
)

// quotaWatch samples a writer's BufferedBytes until stopped and keeps the
// peak: the quota must bound it whatever the transaction's size.
type quotaWatch struct {
	peak atomic.Int64
	stop chan struct{}
	done sync.WaitGroup
}

func watchQuota(w *Writer) *quotaWatch {
	q := &quotaWatch{stop: make(chan struct{})}
	q.done.Add(1)
	go func() {
		defer q.done.Done()
		for {
			if b := w.Stats().BufferedBytes; b > q.peak.Load() {
				q.peak.Store(b)
			}
			select {
			case <-q.stop:
				return
			case <-time.After(100 * time.Microsecond):
			}
		}
	}()
	return q
}

func (q *quotaWatch) end() int64 {
	close(q.stop)
	q.done.Wait()
	return q.peak.Load()
}

// stagedOptions give a small quota, so that a transaction of many quotas
// is quick to write.
func stagedOptions(quota int64) *Options {
	o := testOptions("w")
	o.MemoryQuota = quota
	o.FlushBytes = quota / 4
	o.MaxSegmentBytes = 4 * quota
	o.BlockSize = 16 << 10
	return o
}

// checkQuotaHeld fails unless the writer stayed within its quota without
// letting a Write through over it, having staged to do so.
func checkQuotaHeld(t *testing.T, w *Writer, peak, quota int64) {
	t.Helper()
	st := w.Stats()
	if st.QuotaOvercommits != 0 {
		t.Errorf("%d writes were let through over the quota", st.QuotaOvercommits)
	}
	if peak > quota {
		t.Errorf("buffered bytes peaked at %d, above the quota %d", peak, quota)
	}
	if st.StageCuts == 0 || st.StagedEvents == 0 {
		t.Errorf("no stage cut (%d cuts, %d events staged): the test did not exercise staging", st.StageCuts, st.StagedEvents)
	}
}

// TestTransactionOfManyQuotas writes one transaction of 64 quotas on one
// span at one commit ts, with Write and with WriteEncoded: the writer stages
// it in pieces, never holds more than the quota and never overcommits, and
// once the span resolves the transaction reads back whole. Before staged
// runs, every Write past the first quota was let through over it
// (QuotaOvercommits) and the transaction sat in memory until the resolved ts
// moved.
func TestTransactionOfManyQuotas(t *testing.T) {
	const quota = 1 << 20
	for _, encoded := range []bool{false, true} {
		name := "Write"
		if encoded {
			name = "WriteEncoded"
		}
		t.Run(name, func(t *testing.T) {
			onBothStores(t, func(t *testing.T, b *blob.Bucket) {
				ctx := context.Background()
				w := openSpan1(t, b, stagedOptions(quota))
				q := watchQuota(w)
				const T = 100
				r := newRand(7)
				var n int64
				var enc []byte
				for written := int64(0); written < 64*quota; n++ {
					ev := bigRow(r, 1, T, n, 900)
					if encoded {
						enc = codec.AppendEvent(enc[:0], &ev)
						must(t, w.WriteEncoded(ctx, 1, enc))
						written += int64(len(enc))
					} else {
						must(t, w.Write(ctx, 1, ev))
						written += int64(codec.EncodedLen(&ev))
					}
				}
				if got := w.FlushedTs(); got >= T {
					t.Fatalf("flushed ts %d before the span resolved %d", got, T)
				}
				must(t, w.AdvanceResolved(1, T))
				must(t, w.Close(ctx))
				checkQuotaHeld(t, w, q.end(), quota)
				gs := readLog(t, b, readOpts{})
				if int64(len(gs)) != n {
					t.Fatalf("read %d events, wrote %d", len(gs), n)
				}
				seen := make([]bool, n)
				for _, g := range gs {
					if g.ts != T || g.id < 0 || g.id >= n || seen[g.id] {
						t.Fatalf("unexpected event %v", g)
					}
					seen[g.id] = true
				}
			})
		})
	}
}

// TestStalledSpanDoesNotPinMemory stalls one of four spans (and one of
// 5,000) while the others write eight quotas at rising commit ts and
// resolve as they go: the writer stages what the stalled span holds back,
// stays within the quota, makes at most one cut per resolved-ts change
// plus one per stage, and once the stall ends every event is in the log.
func TestStalledSpanDoesNotPinMemory(t *testing.T) {
	for _, spans := range []int{4, 5000} {
		t.Run(map[int]string{4: "4 spans", 5000: "5000 spans"}[spans], func(t *testing.T) {
			onBothStores(t, func(t *testing.T, b *blob.Bucket) {
				ctx := context.Background()
				const quota = 1 << 20
				w := open(t, b, stagedOptions(quota))
				for s := 1; s <= spans; s++ {
					must(t, w.AddSpan(SpanID(s), 0))
				}
				q := watchQuota(w)
				r := newRand(3)
				var n int64
				var written int64
				changes := 0
				for ts := uint64(1); written < 8*quota; ts++ {
					for s := SpanID(2); s <= 4; s++ {
						ev := bigRow(r, s, ts, n, 900)
						must(t, w.Write(ctx, s, ev))
						written += int64(codec.EncodedLen(&ev))
						n++
						must(t, w.AdvanceResolved(s, ts))
					}
					changes++
				}
				if got := w.FlushedTs(); got != 0 {
					t.Fatalf("flushed ts %d while span 1 is stalled at 0", got)
				}
				st := w.Stats()
				// The writer's resolved ts never moves here (span 1 holds
				// it at 0): every flush must be a stage cut, none an
				// empty one.
				if st.Flushes > st.StageCuts {
					t.Errorf("%d flushes for %d stage cuts: empty flushes", st.Flushes, st.StageCuts)
				}
				// The stall ends.
				must(t, w.AdvanceResolved(1, 1<<40))
				for s := SpanID(2); s <= SpanID(spans); s++ {
					must(t, w.AdvanceResolved(s, 1<<40))
				}
				must(t, w.Close(ctx))
				checkQuotaHeld(t, w, q.end(), quota)
				gs := readLog(t, b, readOpts{})
				if int64(len(gs)) != n {
					t.Fatalf("read %d events, wrote %d", len(gs), n)
				}
			})
		})
	}
}

// TestStagedEventsAreNotCommitted checks what a progress frame says while a
// transaction is staged: the flushed and committed ts stay below it, each
// span's flushed ts stays below its first staged event, and a takeover
// fences the epoch at a committed ts below the transaction, so that readers
// leave every staged event out.
func TestStagedEventsAreNotCommitted(t *testing.T) {
	onBothStores(t, func(t *testing.T, b *blob.Bucket) {
		ctx := context.Background()
		const quota = 1 << 20
		o := stagedOptions(quota)
		w := open(t, b, o)
		must(t, w.AddSpan(1, 0))
		must(t, w.AddSpan(2, 0))
		must(t, w.Write(ctx, 2, row(2, 5, 1)))
		must(t, w.AdvanceResolved(1, 10))
		must(t, w.AdvanceResolved(2, 10))
		flushTo(t, w, 10)
		// Span 1 writes a transaction at 50 of four quotas and resolves
		// it; span 2 lags at 10.
		r := newRand(9)
		for i := int64(0); i < 4*quota/900; i++ {
			must(t, w.Write(ctx, 1, bigRow(r, 1, 50, 100+i, 900)))
		}
		must(t, w.AdvanceResolved(1, 50))
		if _, err := w.Publish(ctx); err != nil {
			t.Fatal(err)
		}
		st := w.Stats()
		if st.StagedEvents == 0 {
			t.Fatal("nothing was staged")
		}
		if st.FlushedTs != 10 || st.CommittedTs != 10 {
			t.Fatalf("flushed ts %d, committed ts %d; want both 10 while span 2 lags", st.FlushedTs, st.CommittedTs)
		}
		ws, _, err := meta.ReadWriterState(ctx, b, testLog, "w")
		must(t, err)
		if ws.CommittedTs != 10 {
			t.Fatalf("published committed ts %d, want 10", ws.CommittedTs)
		}
		for _, s := range ws.Spans {
			if s.Span == 1 && s.Ts >= 50 {
				t.Fatalf("span 1 published flushed ts %d, at or above its staged transaction at 50", s.Ts)
			}
		}
		// A takeover without Close: the new epoch's fence must cut the
		// staged transaction.
		w.cancel()
		w2, err := Open(ctx, b, o)
		must(t, err)
		defer w2.Close(ctx)
		ws2, _, err := meta.ReadWriterState(ctx, b, testLog, "w")
		must(t, err)
		f := ws2.Fences[len(ws2.Fences)-1]
		if f.CommittedTs >= 50 || f.MaxTs < 50 {
			t.Fatalf("fence %+v: want a committed ts below 50 with staged events up to max ts 50", f)
		}
		// Every staged event of the old epoch lies above the fence's
		// committed ts, in segments the fence accepts or above it.
		staged := 0
		for _, g := range readLog(t, b, readOpts{fenced: true}) {
			if g.ts > f.CommittedTs {
				staged++
			}
		}
		if staged == 0 {
			t.Fatal("no staged event is stored: the test did not exercise the cut")
		}
	})
}

// TestCatchUpSegmentsAreFlagged checks the flag readers scope duplicate
// removal by: events at or below the committed ts (a span added behind the
// writer) go to segments marked FlagCatchUp, and no others do.
func TestCatchUpSegmentsAreFlagged(t *testing.T) {
	onBothStores(t, func(t *testing.T, b *blob.Bucket) {
		ctx := context.Background()
		w := openSpan1(t, b, testOptions("w"))
		must(t, w.Write(ctx, 1, row(1, 20, 1)))
		must(t, w.AdvanceResolved(1, 30))
		flushTo(t, w, 30)
		must(t, w.AddSpan(2, 10))
		must(t, w.Write(ctx, 2, row(2, 15, 2)))
		must(t, w.AdvanceResolved(2, 40))
		must(t, w.AdvanceResolved(1, 40))
		flushTo(t, w, 40)
		must(t, w.Write(ctx, 1, row(1, 45, 3)))
		must(t, w.AdvanceResolved(1, 50))
		must(t, w.AdvanceResolved(2, 50))
		must(t, w.Close(ctx))
		flagged := map[int64]bool{}
		for _, key := range segmentKeys(t, b) {
			data, err := b.ReadAll(ctx, key)
			must(t, err)
			n, err := segment.ParseName(key)
			must(t, err)
			next, hdr := openSegment(t, key, n, data)
			for {
				rec, err := next()
				if err != nil {
					break
				}
				var ev codec.Event
				must(t, codec.DecodeEvent(rec.Payload, &ev))
				flagged[ev.Row.Columns[0].Value.Int()] = hdr.Flags&segment.FlagCatchUp != 0
			}
		}
		want := map[int64]bool{1: false, 2: true, 3: false}
		for id, f := range want {
			if got, ok := flagged[id]; !ok || got != f {
				t.Errorf("event %d: in a catch-up segment %v (found %v), want %v", id, got, ok, f)
			}
		}
	})
}

// The child side of TestStagedUnderDataLimit.
func init() {
	testenv.RunChild("writer-staged-limit", stagedLimitChild)
}

// TestCatchUpSpanIsTheKnownLimit is the one case staging cannot take: a
// span added behind the writer whose events lie at or below the committed
// ts. With the quota full of them and nothing else to cut, a Write is let
// through over the quota and counted rather than blocking for good (the
// Write that would resolve them may be the blocked one); once resolved,
// every event is in the log.
func TestCatchUpSpanIsTheKnownLimit(t *testing.T) {
	onBothStores(t, func(t *testing.T, b *blob.Bucket) {
		ctx := context.Background()
		o := stagedOptions(64 << 10)
		w := openSpan1(t, b, o)
		must(t, w.Write(ctx, 1, row(1, 50, 1)))
		must(t, w.AdvanceResolved(1, 100))
		flushTo(t, w, 100)
		must(t, w.AddSpan(2, 10)) // behind the committed ts 100
		r := newRand(5)
		n := int64(0)
		for ts := uint64(11); ts <= 90; ts++ {
			for range 4 {
				n++
				ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				must(t, w.Write(ctx, 2, bigRow(r, 2, ts, 1000+n, 900)))
				cancel()
			}
		}
		st := w.Stats()
		if st.QuotaOvercommits == 0 {
			t.Fatalf("stats %+v: a quota full of catch-up events was never overcommitted", st)
		}
		if st.StagedEvents != 0 {
			t.Fatalf("%d catch-up events at or below the committed ts were staged", st.StagedEvents)
		}
		must(t, w.AdvanceResolved(2, 100))
		must(t, w.Close(ctx))
		if gs := readLog(t, b, readOpts{}); int64(len(gs)) != n+1 {
			t.Fatalf("read %d events, wrote %d", len(gs), n+1)
		}
	})
}

// TestStageCutThatMovesTheResolvedTsIsDurable: a stage cut made while the
// resolved ts had moved (nothing buffered at or below it: FlushBytes of a
// transaction above it) carries the move. A lazy cut records no progress,
// so it must not be lazy: with nothing written after it, no later cut
// would make the move durable, and the writer's flushed ts would stand
// still below its resolved ts for as long as it stays idle.
func TestStageCutThatMovesTheResolvedTsIsDurable(t *testing.T) {
	ctx := context.Background()
	w := openTickingStager(t)
	must(t, w.AddSpan(1, 100))
	must(t, w.AdvanceResolved(1, 200))
	writeStaged(t, w) // ~12 KiB at ts 300, not resolved
	deadline := time.Now().Add(5 * time.Second)
	for w.FlushedTs() < 200 {
		if time.Now().After(deadline) {
			t.Fatalf("flushed ts %d on an idle writer whose resolved ts is 200 (stage cuts %d)", w.FlushedTs(), w.Stats().StageCuts)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if w.Stats().StageCuts == 0 {
		t.Fatal("no stage cut: the test proves nothing")
	}
	must(t, w.Close(ctx))
}

// TestStageCutAfterASpanMovedIsDurable: a stage cut made after a span's
// resolved ts moved, while a stalled span holds the writer's back, carries
// that move. A lazy cut records no progress, and an idle writer's ticks cut
// only for a change: a lazy cut that took the change as cut left the
// span's progress unrecorded for as long as the writer stayed idle (a
// takeover would restart the span below where it was).
func TestStageCutAfterASpanMovedIsDurable(t *testing.T) {
	ctx := context.Background()
	w := openTickingStager(t)
	must(t, w.AddSpan(1, 100))
	must(t, w.AddSpan(2, 100)) // stalls at 100
	mustFlush(t, w)
	must(t, w.AdvanceResolved(1, 200)) // a change; the writer's resolved ts stays 100
	writeStaged(t, w)                  // ~12 KiB at ts 300: FlushBytes, staged
	durable := func() (ts uint64) {
		w.pub.mu.Lock()
		defer w.pub.mu.Unlock()
		for _, s := range w.pub.want.Spans {
			if s.Span == 1 {
				ts = s.Ts
			}
		}
		return ts
	}
	deadline := time.Now().Add(5 * time.Second)
	for durable() < 200 {
		if time.Now().After(deadline) {
			t.Fatalf("span 1's durable flushed ts %d on an idle writer, after it resolved 200 and %d stage cuts", durable(), w.Stats().StageCuts)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if w.Stats().StageCuts == 0 {
		t.Fatal("no stage cut: the test proves nothing")
	}
	must(t, w.Close(ctx))
}

// openTickingStager opens a writer on local disk whose ticks come every
// 5 ms and whose FlushBytes (4 KiB) a few hundred small rows pass.
func openTickingStager(t *testing.T) *Writer {
	o := testOptions("w")
	o.FlushInterval = 5 * time.Millisecond
	o.FlushBytes = 4 << 10
	return open(t, localBucket(t, t.TempDir()), o)
}

// writeStaged writes 200 rows of span 1 at ts 300, about 12 KiB.
func writeStaged(t *testing.T, w *Writer) {
	t.Helper()
	for i := range 200 {
		must(t, w.Write(context.Background(), 1, row(1, 300, int64(i))))
	}
}

// TestFirstEventsStageLazily: a writer's first events are staged at the
// small stage size (4 MiB, not FlushBytes' 16) with no sync of their own,
// though the spans just added are a change no cut has recorded yet: the
// lazy cuts leave that change for the flush, which records the spans. (Cut
// at FlushBytes, the first 16 MiB were held, and touched fresh, at once;
// cut small with the change taken, the first cut synced unasked.)
func TestFirstEventsStageLazily(t *testing.T) {
	ctx := context.Background()
	b := localBucket(t, t.TempDir())
	o := testOptions("w")
	o.BlockSize = 256 << 10
	o.MemoryQuota = 256 << 20
	w := open(t, b, o)
	must(t, w.AddSpan(1, 100))
	must(t, w.AddSpan(2, 100))
	before := b.Stats()
	payload := bytes.Repeat([]byte{0x5a}, 480)
	var evs []codec.Event
	for n := range 24 << 11 { // 24 MiB of 512 B rows, in batches of 1,000
		ev := row(1, 200, int64(n))
		ev.Row.Columns = append(ev.Row.Columns, codec.Column{Name: "payload", Type: codec.TypeBlob, Value: codec.BytesValue(payload)})
		evs = append(evs, ev)
		if len(evs) == 1000 {
			must(t, w.Write(ctx, 1, evs...))
			evs = evs[:0]
		}
	}
	must(t, w.Write(ctx, 1, evs...))
	if got := w.Stats().StageCuts; got < 4 {
		t.Errorf("%d stage cuts of 24 MiB, want one every 4 MiB", got)
	}
	if got := b.Stats().Syncs - before.Syncs; got != 0 {
		t.Errorf("%d fdatasyncs before any flush, want none", got)
	}
	must(t, w.AdvanceResolved(1, 200))
	must(t, w.AdvanceResolved(2, 200))
	mustFlush(t, w)
	if got := b.Stats().Syncs - before.Syncs; got != 1 {
		t.Errorf("%d fdatasyncs for one flush, want 1", got)
	}
	w.pub.mu.Lock()
	spans := slices.Clone(w.pub.want.Spans)
	w.pub.mu.Unlock()
	if len(spans) != 2 || spans[0].Ts != 200 || spans[1].Ts != 200 {
		t.Errorf("durable spans %v after the flush, want spans 1 and 2 at 200", spans)
	}
}

// TestSpansAddedBeforeALazyCutAreRecorded: an idle writer whose only
// change is spans added, and whose first events a lazy stage cut took,
// still records the spans at its next tick: the lazy cut left the change
// pending.
func TestSpansAddedBeforeALazyCutAreRecorded(t *testing.T) {
	ctx := context.Background()
	o := testOptions("w")
	o.FlushInterval = 100 * time.Millisecond
	o.FlushBytes = 4 << 10
	w := open(t, localBucket(t, t.TempDir()), o)
	must(t, w.AddSpan(1, 100))
	writeStaged(t, w) // ~12 KiB at ts 300: small stage cuts, lazy
	cuts := w.Stats().StageCuts
	recorded := func() bool {
		w.pub.mu.Lock()
		defer w.pub.mu.Unlock()
		return len(w.pub.want.Spans) == 1 && w.pub.want.Spans[0].Span == 1
	}
	deadline := time.Now().Add(5 * time.Second)
	for !recorded() {
		if time.Now().After(deadline) {
			t.Fatalf("span 1 not recorded on an idle writer after %d stage cuts", w.Stats().StageCuts)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if cuts == 0 {
		t.Fatal("no stage cut before the first tick: the test proves nothing")
	}
	must(t, w.Close(ctx))
}
