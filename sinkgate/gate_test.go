package sinkgate_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/sinkgate"
	"github.com/redokit/redokit/testkit/testenv"
)

// TestHoldsUntilCovered: nothing reaches the downstream above G; what G
// covers goes in commit-ts order across spans, rows before the DDL of their
// ts, in batches of whole commit ts; the checkpoint is the minimum over the
// spans of what they have applied.
func TestHoldsUntilCovered(t *testing.T) {
	ctx := context.Background()
	rec, cp := &recorder{}, &cps{}
	g, G := newGate(t, 0, cp, rec, &sinkgate.Options{MaxBatch: 2})
	rec.check = func(ev *codec.Event) error {
		G.mu.Lock()
		defer G.mu.Unlock()
		if ev.CommitTs() > G.g {
			return fmt.Errorf("event %s above G %d", id(ev), G.g)
		}
		return nil
	}
	must(t, g.AddSpan(ctx, 1, 0))
	must(t, g.AddSpan(ctx, 2, 0))
	must(t, g.Write(ctx, 1, row(1, 10, 1), ddl(1, 30, "alter"), row(1, 30, 2)))
	must(t, g.Write(ctx, 2, row(2, 20, 3), row(2, 30, 4), row(2, 40, 5)))
	must(t, g.AdvanceResolved(1, 35))
	must(t, g.AdvanceResolved(2, 35))
	runGate(t, g)

	G.awaitWaiting(t, 1)
	if got := rec.got(); len(got) != 0 {
		t.Fatalf("released at G 0: %v", ids(got))
	}

	G.Set(25)
	G.awaitWaiting(t, 26)
	if got, want := ids(rec.got()), []string{"t1/1@10", "t2/3@20"}; !slices.Equal(got, want) {
		t.Fatalf("at G 25: %v, want %v", got, want)
	}
	cp.expect(t, 25, "at G 25")

	G.Set(35)
	G.awaitWaiting(t, 36)
	want := []string{"t1/1@10", "t2/3@20", "t1/2@30", "t2/4@30", "ddl@30"}
	if got := ids(rec.got()); !slices.Equal(got, want) {
		t.Fatalf("at G 35: %v, want %v", got, want)
	}
	// Span 2 holds an event at 40, span 1 resolved 35: both applied to 35.
	cp.expect(t, 35, "at G 35")
	// Batches end at commit-ts boundaries: the three events at 30 go
	// together though MaxBatch is 2.
	rec.mu.Lock()
	batches := slices.Clone(rec.batches)
	rec.mu.Unlock()
	if !slices.ContainsFunc(batches, func(b []uint64) bool { return slices.Equal(b, []uint64{30, 30, 30}) }) {
		t.Fatalf("batches %v: the events at ts 30 were split", batches)
	}

	// The event at 40 is released at G 50, but the checkpoint stays at the
	// spans' resolved ts until they move.
	G.Set(50)
	G.awaitWaiting(t, 51)
	if got := rec.got(); len(got) != 6 {
		t.Fatalf("at G 50: %v", ids(got))
	}
	if ts := g.Applied(); ts != 35 {
		t.Fatalf("applied %d with spans resolved at 35, want 35", ts)
	}
	must(t, g.AdvanceResolved(1, 70))
	must(t, g.AdvanceResolved(2, 70))
	G.Set(60)
	G.awaitWaiting(t, 61)
	cp.expect(t, 60, "at G 60 with spans resolved at 70")
	if st := g.Stats(); st.HeldEvents != 0 || st.HeldBytes != 0 || st.Released != 6 || st.ReleasedTs != 60 {
		t.Fatalf("stats %+v", st)
	}
}

// TestCatchUpBehindG: a span that joins behind G (failover restarts it at
// the log's checkpoint) lowers the reported checkpoint at once, and its
// catch-up events, already covered by G, are released without G moving.
func TestCatchUpBehindG(t *testing.T) {
	ctx := context.Background()
	rec, cp := &recorder{}, &cps{}
	g, G := newGate(t, 100, cp, rec, nil)
	must(t, g.AddSpan(ctx, 1, 0))
	must(t, g.Write(ctx, 1, row(1, 90, 1)))
	must(t, g.AdvanceResolved(1, 100))
	runGate(t, g)
	G.awaitWaiting(t, 101)
	cp.expect(t, 100, "at G 100")

	must(t, g.AddSpan(ctx, 3, 50))
	cp.expect(t, 50, "after a span joined at 50 (at once)")
	must(t, g.Write(ctx, 3, row(3, 60, 2), row(3, 95, 3)))
	if got, want := ids(rec.await(t, 3)), []string{"t1/1@90", "t3/2@60", "t3/3@95"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	must(t, g.AdvanceResolved(3, 120))
	must(t, g.AdvanceResolved(1, 120))
	G.Set(110)
	G.awaitWaiting(t, 111)
	cp.expect(t, 110, "once the span caught up")
}

// TestAddSpanDuringReport: a span that joins while the release loop is
// reporting a higher applied ts lowers the checkpoint after that report, not
// before it: the lower value is the last one the Checkpointer gets. First
// with nothing reported yet (a gate with no spans reports G: a restarted
// capture whose loop ran before its spans were in), then with a report under
// way above the last one sent. In both, the higher report used to be the
// last, and nothing corrected it while no release succeeded (the downstream
// down): a coordinator folding it moved the checkpoint above events the
// downstream never got, and the recovery from it diverged (examples/pgcdc's
// drill, rows and a column missing downstream).
func TestAddSpanDuringReport(t *testing.T) {
	ctx := context.Background()
	cp := &heldCP{entered: make(chan uint64), proceed: make(chan struct{})}
	cp.setHold(true)
	g, G := newGate(t, 100, cp, &recorder{}, nil)
	runGate(t, g)

	// addDuring adds span at startTs while a report of want is held in
	// the Checkpointer, then lets the report go.
	addDuring := func(want uint64, span meta.SpanID, startTs uint64) {
		t.Helper()
		select {
		case ts := <-cp.entered:
			if ts != want {
				t.Fatalf("the release loop reports %d, want %d", ts, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the release loop never reported %d", want)
		}
		cp.setHold(false)
		added := make(chan error, 1)
		go func() { added <- g.AddSpan(ctx, span, startTs) }()
		// The span is in (AddSpan may now wait for the report under way).
		testenv.WaitFor(t, "the span joined", func() bool { return g.Applied() == startTs })
		cp.proceed <- struct{}{}
		must(t, <-added)
		G.awaitWaiting(t, G.get()+1) // the loop's own report is done too
	}

	addDuring(100, 1, 50) // a gate with no spans reports G
	cp.expect(t, 50, "after span 1 joined at 50 during the first report")

	must(t, g.AdvanceResolved(1, 200))
	cp.setHold(true)
	G.Set(200)
	addDuring(200, 2, 150) // above the 50 sent, below the 200 under way
	cp.expect(t, 150, "after span 2 joined at 150 during a report of 200")
}

// heldCP is a Checkpointer that, while hold is set, tells entered each ts it
// is called with and waits for proceed before taking it.
type heldCP struct {
	cps
	holdMu  sync.Mutex
	hold    bool
	entered chan uint64
	proceed chan struct{}
}

func (h *heldCP) setHold(v bool) {
	h.holdMu.Lock()
	h.hold = v
	h.holdMu.Unlock()
}

func (h *heldCP) SetCheckpoint(ctx context.Context, ts uint64) error {
	h.holdMu.Lock()
	hold := h.hold
	h.holdMu.Unlock()
	if hold {
		h.entered <- ts
		<-h.proceed
	}
	return h.cps.SetCheckpoint(ctx, ts)
}

// TestBackpressure: held bytes are bounded; a Write past the bound waits for
// a release that needs nothing of its caller (the span resolved what the gate
// holds, so G can cover it), or for its ctx.
func TestBackpressure(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	one := int64(len(codec.AppendEvent(nil, ptr(row(1, 10, 1)))))
	g, G := newGate(t, 0, nil, rec, &sinkgate.Options{MaxHeldBytes: 2 * one})
	must(t, g.AddSpan(ctx, 1, 0))
	must(t, g.Write(ctx, 1, row(1, 10, 1)))
	must(t, g.Write(ctx, 1, row(1, 11, 2)))
	must(t, g.AdvanceResolved(1, 11))

	// A Write that gives up holds nothing and writes nothing.
	cctx, cancel := context.WithCancel(ctx)
	blocked := make(chan error, 1)
	go func() { blocked <- g.Write(cctx, 1, row(1, 12, 3)) }()
	testenv.WaitFor(t, "a blocked Write", func() bool { return g.Stats().BlockedWrites == 1 })
	cancel()
	if err := <-blocked; !errors.Is(err, context.Canceled) {
		t.Fatalf("blocked Write: %v, want context.Canceled", err)
	}
	if st := g.Stats(); st.HeldEvents != 2 || st.HeldBytes != 2*one || st.BlockedWrites != 0 {
		t.Fatalf("after a canceled Write: %+v", st)
	}

	go func() { blocked <- g.Write(ctx, 1, row(1, 12, 3)) }()
	testenv.WaitFor(t, "a blocked Write", func() bool { return g.Stats().BlockedWrites == 1 })
	runGate(t, g)
	G.Set(11)
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	rec.await(t, 2)
	if st := g.Stats(); st.HeldEvents != 1 || st.Backpressure <= 0 {
		t.Fatalf("after the release: %+v", st)
	}
	// A batch bigger than the bound goes alone.
	G.Set(12)
	rec.await(t, 3)
	must(t, g.Write(ctx, 1, row(1, 20, 4), row(1, 21, 5), row(1, 22, 6)))
	G.Set(22)
	rec.await(t, 6)
}

func ptr[T any](v T) *T { return &v }

// TestRemoveSpan: a removed span's events above its resolved ts are dropped
// (its next owner writes them); those at or below are still released.
func TestRemoveSpan(t *testing.T) {
	ctx := context.Background()
	rec, cp := &recorder{}, &cps{}
	g, G := newGate(t, 0, cp, rec, nil)
	must(t, g.AddSpan(ctx, 1, 0))
	must(t, g.AddSpan(ctx, 2, 0))
	must(t, g.Write(ctx, 1, row(1, 10, 1), row(1, 20, 2), row(1, 30, 3)))
	must(t, g.AdvanceResolved(1, 20))
	must(t, g.AdvanceResolved(2, 15))
	must(t, g.RemoveSpan(1))
	if st := g.Stats(); st.Dropped != 1 || st.HeldEvents != 2 {
		t.Fatalf("after RemoveSpan: %+v", st)
	}
	runGate(t, g)
	G.Set(100)
	G.awaitWaiting(t, 101)
	if got, want := ids(rec.got()), []string{"t1/1@10", "t1/2@20"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// The removed span no longer counts once drained; span 2 resolved 15.
	cp.expect(t, 15, "once the removed span drained (span 2 resolved 15)")
}

// TestCloseDrains: Close releases what the writer flushed once G covers it,
// drops the rest, stops Run, and refuses later calls.
func TestCloseDrains(t *testing.T) {
	ctx := context.Background()
	rec, cp := &recorder{}, &cps{}
	g, G := newGate(t, 0, cp, rec, nil)
	must(t, g.AddSpan(ctx, 1, 0))
	must(t, g.Write(ctx, 1, row(1, 10, 1), row(1, 20, 2), row(1, 30, 3)))
	must(t, g.AdvanceResolved(1, 20))
	r := runGate(t, g)
	G.awaitWaiting(t, 1)

	closed := make(chan error, 1)
	go func() { closed <- g.Close(ctx) }()
	G.awaitWaiting(t, 20) // Close waits for G to cover the flushed ts
	if err := r.wait(t); err != nil {
		t.Fatalf("Run after Close: %v, want nil", err)
	}
	G.Set(20)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if got, want := ids(rec.got()), []string{"t1/1@10", "t1/2@20"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	cp.expect(t, 20, "after Close")
	if st := g.Stats(); st.Dropped != 1 || st.HeldEvents != 0 || st.HeldBytes != 0 {
		t.Fatalf("stats %+v", st)
	}
	if err := g.Write(ctx, 1, row(1, 40, 4)); !errors.Is(err, sinkgate.ErrClosed) {
		t.Fatalf("Write after Close: %v", err)
	}
	if err := g.Run(ctx); !errors.Is(err, sinkgate.ErrClosed) {
		t.Fatalf("Run after Close: %v", err)
	}
	// Close is idempotent, as every other Close in redokit: a second call
	// returns the first one's result.
	if err := g.Close(ctx); err != nil {
		t.Fatalf("second Close: %v, want the first Close's nil", err)
	}
}

// TestDownstreamFailure: Run returns the downstream's error with the batch
// still held; Run again applies it.
func TestDownstreamFailure(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("boom")
	rec := &recorder{fail: boom}
	g, _ := newGate(t, 10, nil, rec, nil)
	must(t, g.AddSpan(ctx, 1, 0))
	must(t, g.Write(ctx, 1, row(1, 10, 1)))
	if err := runGate(t, g).wait(t); !errors.Is(err, boom) {
		t.Fatalf("Run: %v, want %v", err, boom)
	}
	if st := g.Stats(); st.HeldEvents != 1 {
		t.Fatalf("the failed batch is not held: %+v", st)
	}
	rec.mu.Lock()
	rec.fail = nil
	rec.mu.Unlock()
	runGate(t, g)
	if got := ids(rec.await(t, 1)); !slices.Equal(got, []string{"t1/1@10"}) {
		t.Fatalf("got %v", got)
	}
}

// TestWriterRefusal: an event the writer refuses is not held.
func TestWriterRefusal(t *testing.T) {
	ctx := context.Background()
	g, _ := newGate(t, 0, nil, &recorder{}, nil)
	must(t, g.AddSpan(ctx, 1, 0))
	must(t, g.AdvanceResolved(1, 50))
	if err := g.Write(ctx, 1, row(1, 40, 1)); err == nil {
		t.Fatal("an event below the span's resolved ts was accepted")
	}
	if err := g.Write(ctx, 9, row(9, 60, 1)); err == nil {
		t.Fatal("an event of an unknown span was accepted")
	}
	if st := g.Stats(); st.HeldEvents != 0 || st.HeldBytes != 0 {
		t.Fatalf("refused events held: %+v", st)
	}
}

// TestCheckpoints: the aggregate forwards the minimum over its members,
// never backwards, and a member that left no longer holds it.
func TestCheckpoints(t *testing.T) {
	ctx := context.Background()
	target := &cps{}
	c := sinkgate.NewCheckpoints(target)
	a := c.Join("a", 10)
	b := c.Join("b", 10)
	must(t, a.SetCheckpoint(ctx, 50))
	if ts, _ := target.last(); ts != 10 {
		t.Fatalf("forwarded %d while b holds 10", ts)
	}
	must(t, b.SetCheckpoint(ctx, 30))
	if ts, _ := target.last(); ts != 30 {
		t.Fatalf("forwarded %d, want 30", ts)
	}
	must(t, b.SetCheckpoint(ctx, 20)) // b's gate took a span behind
	if ts, _ := target.last(); ts != 30 {
		t.Fatalf("forwarded %d, want still 30", ts)
	}
	c.Leave("b")
	must(t, c.Forward(ctx))
	if ts, _ := target.last(); ts != 50 {
		t.Fatalf("forwarded %d after b left, want 50", ts)
	}
	if err := b.SetCheckpoint(ctx, 60); err == nil {
		t.Fatal("a member that left could still report")
	}
	target.mu.Lock()
	defer target.mu.Unlock()
	if !slices.IsSorted(target.tss) {
		t.Fatalf("forwarded backwards: %v", target.tss)
	}
}

// flakyG fails its first n reads of the global resolved ts, then reads G.
type flakyG struct {
	*fakeG
	mu sync.Mutex
	n  int
}

func (f *flakyG) WaitResolved(ctx context.Context, ts uint64) (uint64, error) {
	f.mu.Lock()
	fail := f.n > 0
	f.n--
	f.mu.Unlock()
	if fail {
		return 0, errors.New("coordinator unreachable")
	}
	return f.fakeG.WaitResolved(ctx, ts)
}

// TestRetriedFailuresAreCounted: a failed read of the global resolved ts
// and a failed checkpoint report are retried by the gate and only logged,
// so Stats counts them: an operator sees why releases or the checkpoint
// (and so GC) stand still.
func TestRetriedFailuresAreCounted(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	cp := &cps{}
	cpFails := 2
	var cpMu sync.Mutex
	flakyCP := sinkgate.CheckpointFunc(func(ctx context.Context, ts uint64) error {
		cpMu.Lock()
		defer cpMu.Unlock()
		if cpFails > 0 {
			cpFails--
			return errors.New("meta object unreachable")
		}
		return cp.SetCheckpoint(ctx, ts)
	})
	G := &flakyG{fakeG: newFakeG(0), n: 3}
	g := sinkgate.New(openWriter(t, memBucket(t), "w1"), G, flakyCP, rec, &sinkgate.Options{RetryBackoff: time.Millisecond})
	must(t, g.AddSpan(ctx, 1, 0))
	runGate(t, g)
	for i, ts := range []uint64{10, 20, 30, 40} {
		must(t, g.Write(ctx, 1, row(1, ts, int64(i))))
		must(t, g.AdvanceResolved(1, ts))
		G.Set(ts)
		G.awaitWaiting(t, ts+1)
	}
	cp.expect(t, 40, "after two failed reports")
	st := g.Stats()
	if st.ResolvedReadFailures != 3 || st.CheckpointFailures != 2 {
		t.Fatalf("ResolvedReadFailures %d, CheckpointFailures %d; want 3 and 2", st.ResolvedReadFailures, st.CheckpointFailures)
	}
}
