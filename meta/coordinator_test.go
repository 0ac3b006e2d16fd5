package meta

import (
	"context"
	"errors"
	"github.com/redokit/redokit/segment"
	"testing"
	"time"

	"github.com/redokit/redokit/backends/mem"
)

func publish(t *testing.T, l *Lease, seq uint64, spans map[SpanID]uint64) {
	t.Helper()
	var sp []segment.SpanTs
	lowest := ^uint64(0)
	for s, ts := range spans {
		sp = append(sp, segment.SpanTs{Span: uint64(s), Ts: ts})
		lowest = min(lowest, ts)
	}
	if len(spans) == 0 {
		lowest = 0
	}
	if err := l.PublishProgress(context.Background(), Progress{FlushedTs: lowest, Seq: seq, Spans: sp}); err != nil {
		t.Fatal(err)
	}
}

func tick(t *testing.T, c *Coordinator) Meta {
	t.Helper()
	m, err := c.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestWatermarkAcrossFailover(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	c, err := OpenCoordinator(ctx, b, "log", &CoordinatorOptions{StartTs: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"a", "b"} {
		if err := c.AddWriter(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []SpanID{1, 2, 3} {
		if err := c.AddSpan(ctx, s, 10); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := AcquireWriter(ctx, b, "log", "a", nil)
	bw, _ := AcquireWriter(ctx, b, "log", "b", nil)
	if m := tick(t, c); m.ResolvedTs != 10 {
		t.Fatalf("no progress yet: resolved %d", m.ResolvedTs)
	}
	publish(t, a, 1, map[SpanID]uint64{1: 100, 2: 100})
	publish(t, bw, 1, map[SpanID]uint64{3: 150})
	if m := tick(t, c); m.ResolvedTs != 100 {
		t.Fatalf("resolved %d, want 100", m.ResolvedTs)
	}
	if err := c.SetCheckpoint(ctx, 60); err != nil {
		t.Fatal(err)
	}
	// a dies. Its spans move to b, which restarts them at the checkpoint:
	// b's own flushed ts falls to 60, but the watermark must not.
	if err := c.RemoveWriter(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	publish(t, bw, 2, map[SpanID]uint64{1: 60, 2: 60, 3: 150})
	if m := tick(t, c); m.ResolvedTs != 100 {
		t.Fatalf("after failover resolved %d, want held at 100", m.ResolvedTs)
	}
	// b catches span 1 up past a's progress, span 2 not yet: still held.
	publish(t, bw, 3, map[SpanID]uint64{1: 120, 2: 90, 3: 150})
	if m := tick(t, c); m.ResolvedTs != 100 {
		t.Fatalf("partial catch-up resolved %d, want 100", m.ResolvedTs)
	}
	publish(t, bw, 4, map[SpanID]uint64{1: 160, 2: 170, 3: 160})
	m := tick(t, c)
	if m.ResolvedTs != 160 || m.CheckpointTs != 60 {
		t.Fatalf("caught up: %+v", m)
	}
	if _, ok := m.Writers["a"]; ok {
		t.Fatal("removed writer still live")
	}
	// The persisted object agrees.
	got, _, err := ReadMeta(ctx, b, "log")
	if err != nil || got.ResolvedTs != 160 {
		t.Fatalf("persisted %+v %v", got, err)
	}
}

func TestBarrierHoldsTheWatermarkUntilNewSpansExist(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	c, _ := OpenCoordinator(ctx, b, "log", &CoordinatorOptions{StartTs: 1})
	_ = c.AddWriter(ctx, "w")
	_ = c.AddSpan(ctx, 1, 1)
	w, _ := AcquireWriter(ctx, b, "log", "w", nil)
	publish(t, w, 1, map[SpanID]uint64{1: 50})
	tick(t, c)
	// A CREATE TABLE at 80 is coming: hold at 80.
	if err := c.AddBarrier(ctx, "create-t2", 80); err != nil {
		t.Fatal(err)
	}
	if err := c.AddBarrier(ctx, "too-late", 40); !errors.Is(err, ErrBarrierTooLate) {
		t.Fatalf("barrier below resolved = %v", err)
	}
	publish(t, w, 2, map[SpanID]uint64{1: 200})
	if m := tick(t, c); m.ResolvedTs != 80 {
		t.Fatalf("with barrier at 80 resolved %d", m.ResolvedTs)
	}
	// The new table's span is registered at the DDL's ts, then the barrier
	// goes: the new span now holds the watermark until it is flushed.
	_ = c.AddSpan(ctx, 2, 80)
	_ = c.ReleaseBarrier(ctx, "create-t2")
	if m := tick(t, c); m.ResolvedTs != 80 {
		t.Fatalf("new span unflushed: resolved %d", m.ResolvedTs)
	}
	publish(t, w, 3, map[SpanID]uint64{1: 200, 2: 190})
	if m := tick(t, c); m.ResolvedTs != 190 {
		t.Fatalf("resolved %d, want 190", m.ResolvedTs)
	}
}

func TestCheckpointRules(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	c, _ := OpenCoordinator(ctx, b, "log", &CoordinatorOptions{StartTs: 100})
	if err := c.SetCheckpoint(ctx, 101); !errors.Is(err, ErrCheckpointAhead) {
		t.Fatalf("checkpoint above resolved = %v", err)
	}
	if err := c.SetCheckpoint(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if err := c.SetCheckpoint(ctx, 99); !errors.Is(err, ErrBackwards) {
		t.Fatalf("checkpoint backwards = %v", err)
	}
	if m := c.Meta(); m.CheckpointTs != 100 {
		t.Fatalf("checkpoint %d", m.CheckpointTs)
	}
	// A second coordinator on the same log sees the same object, and their
	// compare-and-swaps do not lose each other's updates.
	c2, _ := OpenCoordinator(ctx, b, "log", nil)
	if err := c2.AddWriter(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if err := c.AddWriter(ctx, "y"); err != nil {
		t.Fatal(err)
	}
	m, _, _ := ReadMeta(ctx, b, "log")
	if len(m.Writers) != 2 {
		t.Fatalf("writers %v: an update was lost", m.Writers)
	}
}

// TestBrokenRuleIsCaught breaks the watermark rule on purpose (min over live
// writers only, which falls when a writer takes a span behind it) and checks
// that the coordinator refuses to persist a watermark going backwards.
func TestBrokenRuleIsCaught(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	c, _ := OpenCoordinator(ctx, b, "log", nil)
	_ = c.AddWriter(ctx, "w")
	w, _ := AcquireWriter(ctx, b, "log", "w", nil)
	publish(t, w, 1, map[SpanID]uint64{1: 100})
	tick(t, c)
	saved := resolvedRule
	defer func() { resolvedRule = saved }()
	resolvedRule = func(m *Meta, states map[string]*WriterState) uint64 { return states["w"].FlushedTs }
	// Bypass the never-backwards max to model a coordinator without it.
	publish(t, w, 2, map[SpanID]uint64{1: 40})
	err := c.update(ctx, func(m *Meta) error {
		states, _ := ListWriterStates(ctx, b, "log", nil)
		m.ResolvedTs = resolvedRule(m, states)
		return nil
	})
	if !errors.Is(err, ErrBackwards) {
		t.Fatalf("a falling watermark was persisted: %v", err)
	}
	if m, _, _ := ReadMeta(ctx, b, "log"); m.ResolvedTs != 100 {
		t.Fatalf("persisted resolved %d", m.ResolvedTs)
	}
}

func TestStaleWritersAreReportedNotDropped(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	now := time.Now()
	c, _ := OpenCoordinator(ctx, b, "log", &CoordinatorOptions{StaleAfter: time.Minute, Now: func() time.Time { return now }})
	_ = c.AddWriter(ctx, "w")
	_ = c.AddWriter(ctx, "ghost")
	w, _ := AcquireWriter(ctx, b, "log", "w", nil)
	publish(t, w, 1, map[SpanID]uint64{})
	tick(t, c)
	if s := c.Stale(); len(s) != 1 || s[0].WriterID != "ghost" {
		t.Fatalf("stale %+v", s)
	}
	now = now.Add(time.Hour)
	m := tick(t, c)
	if s := c.Stale(); len(s) != 2 || len(m.Writers) != 2 {
		t.Fatalf("stale %+v writers %v", s, m.Writers)
	}
}

func TestWatcherWaitsForResolved(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := mem.New()
	defer b.Close()
	wt := NewWatcher(b, "log", time.Millisecond)
	done := make(chan uint64)
	go func() {
		ts, err := wt.WaitResolved(ctx, 50)
		if err != nil {
			t.Error(err)
		}
		done <- ts
	}()
	c, _ := OpenCoordinator(ctx, b, "log", &CoordinatorOptions{StartTs: 10})
	_ = c.AddWriter(ctx, "w")
	w, _ := AcquireWriter(ctx, b, "log", "w", nil)
	publish(t, w, 1, map[SpanID]uint64{})
	_ = w.PublishProgress(ctx, Progress{FlushedTs: 70, Seq: 1})
	tick(t, c)
	if ts := <-done; ts != 70 {
		t.Fatalf("woke at %d", ts)
	}
	short, cancel2 := context.WithCancel(ctx)
	cancel2()
	if _, err := wt.WaitResolved(short, 1000); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled wait = %v", err)
	}
}
