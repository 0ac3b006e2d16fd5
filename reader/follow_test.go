package reader

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/gc"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/writer"
)

// follower starts a follower of the test log polling every millisecond.
func follower(t *testing.T, b *blob.Bucket, start uint64) *Follower {
	t.Helper()
	f, err := Follow(context.Background(), b, &FollowOptions{Options: Options{LogID: testLog, StartTs: start}, Poll: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// nextTs reads the next event (waiting at most a few seconds) and returns
// its commit ts and id.
func nextTs(t *testing.T, f *Follower) (ts uint64, id int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := f.Next(ctx)
	if err != nil {
		t.Fatalf("follower at %d: %v", f.Position(), err)
	}
	return ev.CommitTs(), ev.Row.Columns[0].Value.Int()
}

// expectQuiet checks that the follower has nothing to return now: Next
// waits until a short deadline and leaves the follower usable.
func expectQuiet(t *testing.T, f *Follower) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if ev, err := f.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		what := fmt.Sprint(err)
		if ev != nil {
			what = fmt.Sprintf("an event at %d", ev.CommitTs())
		}
		t.Fatalf("follower at %d returned %s; want it waiting for the global resolved ts", f.Position(), what)
	}
}

// TestFollowerFollowsTheLog: a follower returns every event once, in order,
// as the global resolved ts moves past it, waits at it, says how far
// behind it is, and goes on after a wait cut short by its ctx.
func TestFollowerFollowsTheLog(t *testing.T) {
	onMemAndLocal(t, func(t *testing.T, b *blob.Bucket) {
		ctx := context.Background()
		w, c := freshLog(t, b, 3) // 10, 20, 30; resolved 30
		f := follower(t, b, 0)
		for _, want := range []uint64{10, 20, 30} {
			if ts, _ := nextTs(t, f); ts != want {
				t.Fatalf("event at %d, want %d", ts, want)
			}
		}
		expectQuiet(t, f)
		if f.Position() != 30 {
			t.Fatalf("position %d at the global resolved ts 30", f.Position())
		}
		if ts, d := f.Lag(); ts != 0 || d != 0 {
			t.Fatalf("lag %d, %v when caught up", ts, d)
		}

		// Written but not resolved globally: nothing.
		writeFlush(t, w, 40)
		expectQuiet(t, f)
		if _, err := c.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		if ts, _ := nextTs(t, f); ts != 40 {
			t.Fatalf("event at %d, want 40", ts)
		}

		// Two ticks' worth behind: the lag says so until it is read.
		writeFlush(t, w, 50)
		writeFlush(t, w, 60)
		if _, err := c.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		if ts, _ := nextTs(t, f); ts != 50 {
			t.Fatalf("event at %d, want 50", ts)
		}
		time.Sleep(5 * time.Millisecond) // an age to see: the follower saw 60 before it returned 50
		if lts, d := f.Lag(); lts != 60-49 || d < 5*time.Millisecond {
			t.Fatalf("lag %d ts, %v after reading 50 of (40, 60]; want 11 and at least 5ms", lts, d)
		}
		if ts, _ := nextTs(t, f); ts != 60 {
			t.Fatalf("event at %d, want 60", ts)
		}
		expectQuiet(t, f)
		if ts, d := f.Lag(); ts != 0 || d != 0 {
			t.Fatalf("lag %d, %v when caught up again", ts, d)
		}
	})
}

// TestFollowerThroughTakeoverAndGC: a writer taken over by a new epoch of
// its ID (the old one fenced, with events it wrote and the new epoch writes
// again), and GC below the follower's position every round: the follower
// returns every event once, in order.
func TestFollowerThroughTakeoverAndGC(t *testing.T) {
	onMemAndLocal(t, func(t *testing.T, b *blob.Bucket) {
		ctx := context.Background()
		old, c := freshLog(t, b, 2) // 10, 20
		f := follower(t, b, 0)
		var got []uint64
		read := func(n int) {
			for range n {
				ts, _ := nextTs(t, f)
				got = append(got, ts)
			}
		}
		read(2)
		// The old epoch writes 30 durably but never publishes it past the
		// takeover: the new epoch writes 30 again, and 40.
		if err := old.Write(ctx, 1, *row(30, "t", 30, bigValue)); err != nil {
			t.Fatal(err)
		}
		if err := old.AdvanceResolved(1, 30); err != nil {
			t.Fatal(err)
		}
		if _, err := old.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		nw := openFreshWriter(t, b)
		if err := nw.AddSpan(1, nw.FlushedTs()); err != nil {
			t.Fatal(err)
		}
		for ts := max(nw.FlushedTs()+10, 30); ts <= 60; ts += 10 {
			writeFlush(t, nw, ts)
			if _, err := c.Tick(ctx); err != nil {
				t.Fatal(err)
			}
			for len(got) == 0 || got[len(got)-1] < ts {
				read(1)
			}
			// GC every round, below what the follower returned.
			if err := c.SetCheckpoint(ctx, f.Position()); err != nil {
				t.Fatal(err)
			}
			if _, err := gc.Collect(ctx, b, testLog, nil); err != nil {
				t.Fatal(err)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint([]uint64{10, 20, 30, 40, 50, 60}) {
			t.Fatalf("the follower returned %v", got)
		}
		expectQuiet(t, f)
	})
}

// TestFollowerNeverReturnsStaged: a writer whose quota is full while a span
// holds the resolved ts back stages events above its committed ts; a
// follower at the global resolved ts returns none of them until the span
// resolves them, and then every event once, in order.
func TestFollowerNeverReturnsStaged(t *testing.T) {
	onMemAndLocal(t, func(t *testing.T, b *blob.Bucket) {
		ctx := context.Background()
		c, err := meta.OpenCoordinator(ctx, b, testLog, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddWriter(ctx, "w"); err != nil {
			t.Fatal(err)
		}
		w, err := writer.Open(ctx, b, &writer.Options{LogID: testLog, WriterID: "w", FlushInterval: time.Hour,
			MemoryQuota: 64 << 10, FlushBytes: 16 << 10, BlockSize: 4 << 10, RetryAttempts: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close(context.Background()) })
		for _, sp := range []writer.SpanID{1, 2} {
			if err := c.AddSpan(ctx, meta.SpanID(sp), 0); err != nil {
				t.Fatal(err)
			}
			if err := w.AddSpan(sp, 0); err != nil {
				t.Fatal(err)
			}
		}
		// Span 1 at 10, resolved by both; then a transaction at 20 of
		// 16× the quota on span 1 while span 2 stays at 10.
		if err := w.Write(ctx, 1, *row(10, "t", 0, "v")); err != nil {
			t.Fatal(err)
		}
		for _, sp := range []writer.SpanID{1, 2} {
			if err := w.AdvanceResolved(sp, 10); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.Publish(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		f := follower(t, b, 0)
		if ts, _ := nextTs(t, f); ts != 10 {
			t.Fatalf("event at %d, want 10", ts)
		}
		const n = 1000 // ~1 MiB
		for i := 1; i <= n; i++ {
			if err := w.Write(ctx, 1, *row(20, "t", int64(i), bigValue[:1000])); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.AdvanceResolved(1, 20); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Publish(ctx); err != nil {
			t.Fatal(err)
		}
		if st := w.Stats(); st.StageCuts == 0 {
			t.Fatalf("no stage cut: the test proves nothing (%+v)", st)
		}
		if _, err := c.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		expectQuiet(t, f)
		if err := w.AdvanceResolved(2, 20); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Publish(ctx); err != nil {
			t.Fatal(err)
		}
		if m, err := c.Tick(ctx); err != nil || m.ResolvedTs != 20 {
			t.Fatalf("tick: %+v, %v", m, err)
		}
		for i := 1; i <= n; i++ {
			ts, id := nextTs(t, f)
			if ts != 20 || id != int64(i) {
				t.Fatalf("event %d: ts %d id %d, want 20 and %d", i, ts, id, i)
			}
		}
		expectQuiet(t, f)
	})
}

// TestFollowerRefusesAGap: a follower started below the checkpoint, after
// GC deleted what it would need, fails with ErrIncomplete instead of
// reading short; a log removed under a follower is ErrLogGone.
func TestFollowerRefusesAGap(t *testing.T) {
	onMemAndLocal(t, func(t *testing.T, b *blob.Bucket) {
		ctx := context.Background()
		_, c := freshLog(t, b, 4)
		if err := c.SetCheckpoint(ctx, 30); err != nil {
			t.Fatal(err)
		}
		res, err := gc.Collect(ctx, b, testLog, nil)
		if err != nil || res.Deleted == 0 {
			t.Fatalf("GC: %+v, %v: the test needs a deleted segment", res, err)
		}
		f := follower(t, b, 5)
		ctx2, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if ev, err := f.Next(ctx2); !errors.Is(err, ErrIncomplete) {
			t.Fatalf("a follower from 5, below the checkpoint 30 after GC: %v, %v; want ErrIncomplete", ev, err)
		}

		g := follower(t, b, 0) // from the checkpoint
		if ts, _ := nextTs(t, g); ts != 40 {
			t.Fatalf("from the checkpoint: event at %d, want 40", ts)
		}
		if err := b.Delete(ctx, layout.Meta(testLog)); err != nil {
			t.Fatal(err)
		}
		if ev, err := g.Next(ctx2); !errors.Is(err, ErrLogGone) {
			t.Fatalf("log removed: %v, %v; want ErrLogGone", ev, err)
		}
	})
}

// TestFollowerUnderStaleMetadata: the follower reads through a store that
// serves older versions of the meta object and the writer states (a
// lagging replica or cache) while the log grows: it never takes an older
// resolved ts for a newer one, never returns an event twice or out of
// order, and a round that cannot be proven fresh is opened again, not
// failed and not read short.
func TestFollowerUnderStaleMetadata(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			ctx := context.Background()
			d := mem.NewDriver()
			wb := blob.NewBucket(d)
			st := blobtest.NewStale(d, blobtest.StaleSchedule{Seed: seed, Start: 0.3, Calls: 6, Torn: 0.5})
			w, c := freshLog(t, wb, 1)
			f := follower(t, st.Bucket(), 0)
			const n = 40
			done := make(chan []uint64, 1)
			go func() {
				var got []uint64
				ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				for len(got) < n {
					ev, err := f.Next(ctx)
					if err != nil {
						t.Errorf("after %v: %v", got, err)
						break
					}
					got = append(got, ev.CommitTs())
				}
				done <- got
			}()
			for i := 2; i <= n; i++ {
				writeFlush(t, w, uint64(10*i))
				if _, err := c.Tick(ctx); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Millisecond)
			}
			got := <-done
			for i, ts := range got {
				if ts != uint64(10*(i+1)) {
					t.Fatalf("the follower returned %v", got)
				}
			}
			if len(got) != n {
				t.Fatalf("the follower returned %d events, want %d", len(got), n)
			}
			if cs := st.Counts(); cs["meta/stale"]+cs["meta/stale-torn"]+cs["state/stale"]+cs["state/stale-torn"] == 0 {
				t.Fatalf("nothing was served stale (%v): the test proves nothing", cs)
			}
		})
	}
}

// TestFollowerReopensARoundPartWay: a round whose read fails part way
// through a commit ts (here a segment read fails; in life a takeover cuts
// or seals a segment under it) is read again from the position, and the
// events of that commit ts returned before are not returned again: every
// event exactly once. Byte-identical events count one by one.
func TestFollowerReopensARoundPartWay(t *testing.T) {
	ctx := context.Background()
	d := mem.NewDriver()
	wb := blob.NewBucket(d)
	w, c := freshLog(t, wb, 1) // 10
	const n = 60
	for i := 1; i <= n; i++ {
		id := int64(min(i, n-2)) // the last three are the same row: copies count one by one
		if err := w.Write(ctx, 1, *row(20, "t", id, bigValue)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AdvanceResolved(1, 20); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	f := blobtest.NewFaulty(d)
	segs := func(c blobtest.Call) bool { return strings.Contains(c.Key, "/seg/") }
	f.Add(blobtest.Rule{Op: blobtest.OpRead, Match: segs, Nth: 12, Fail: true})
	fl := follower(t, f.Bucket(), 0)
	fl.opts.KeepDuplicates = true // the two copies are one transaction's identical rows
	count := map[int64]int{}
	for range n + 1 {
		ts, id := nextTs(t, fl)
		if ts == 20 {
			count[id]++
		}
	}
	expectQuiet(t, fl)
	for i := int64(1); i <= n-2; i++ {
		want := 1
		if i == n-2 {
			want = 3
		}
		if count[i] != want {
			t.Fatalf("id %d returned %d times, want %d (all: %v)", i, count[i], want, count)
		}
	}
	if fl.reopens == 0 {
		t.Fatal("no round was read again: the injected failure missed the round")
	}
}

// TestFollowerRoundOpenOutlivesGC: GC deletes a segment below the
// follower's position between a round's listing and its read of the
// segment's header (the reader refuses a segment that vanished, after
// listing again a few times): the round is opened again, not failed. It
// failed the standby in a crash+GC trial before the retry.
func TestFollowerRoundOpenOutlivesGC(t *testing.T) {
	ctx := context.Background()
	d := mem.NewDriver()
	w, c := freshLog(t, blob.NewBucket(d), 4) // 10 .. 40, a segment each
	f := blobtest.NewFaulty(d)
	fl := follower(t, f.Bucket(), 0)
	for _, want := range []uint64{10, 20, 30, 40} {
		if ts, _ := nextTs(t, fl); ts != want {
			t.Fatalf("event at %d, want %d", ts, want)
		}
	}
	// The next round's reads of the oldest segment's header find it gone,
	// as often as the reader lists again.
	var failed atomic.Int32
	f.Add(blobtest.Rule{Op: blobtest.OpRead, Err: blob.ErrNotExist, Match: func(call blobtest.Call) bool {
		return strings.Contains(call.Key, "-00000000000000000010-00000000000000000010.seg") && failed.Add(1) <= 8
	}})
	writeFlush(t, w, 50)
	if _, err := c.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if ts, _ := nextTs(t, fl); ts != 50 {
		t.Fatalf("event at %d, want 50", ts)
	}
	if failed.Load() == 0 {
		t.Fatal("no read of the old segment failed: the test proves nothing")
	}
}
