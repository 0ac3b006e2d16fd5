package redokit_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/codec/codectest"
	"github.com/redokit/redokit/gc"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/writer"
)

// bigRow is a row of 5,000 random letters: larger than a 4 KiB segment
// even compressed.
func bigRow(ts uint64) codec.Event {
	r := rand.New(rand.NewPCG(ts, ts))
	v := make([]byte, 5000)
	for i := range v {
		v[i] = byte('a' + r.IntN(26))
	}
	return codectest.Row(ts, codectest.Table("shop", "orders", 7), codectest.Key("id", int64(ts)), codectest.Str("v", string(v)))
}

// waitFor polls cond until it holds or a few seconds pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestServiceRunsTheLoops: with a Service, the caller runs no loop by hand.
// Its tick folds the writers' publications into the global resolved ts, a
// span is registered on both sides by one call, the checkpoint fan-in
// forwards the minimum of the gates' applied ts and a move starts GC (which
// deletes below it), a follower's lag is reported, and Close closes the
// writers it opened, ticks their last progress in and refuses more.
func TestServiceRunsTheLoops(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	log, err := redokit.Open(ctx, b, "cf")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := log.Start(ctx, &redokit.ServiceOptions{
		Coordinator:  &meta.CoordinatorOptions{StartTs: 100},
		TickInterval: 2 * time.Millisecond,
		GC:           &gc.SchedulerOptions{Interval: time.Hour}, // only the checkpoint's moves start a cycle
	})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close(ctx)
	w, err := svc.OpenWriter(ctx, "w", &writer.Options{FlushInterval: time.Hour, PublishInterval: time.Millisecond, MaxSegmentBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	const span redokit.SpanID = 7
	must(t, svc.AddSpan(ctx, w, span, 100))
	if _, ok := svc.Meta().Spans[span]; !ok {
		t.Fatalf("span %d is not on the coordinator: %+v", span, svc.Meta().Spans)
	}
	for ts := uint64(110); ts <= 200; ts += 10 {
		must(t, w.Write(ctx, span, bigRow(ts)))
		must(t, w.AdvanceResolved(span, ts))
		if _, err := w.Flush(ctx); err != nil { // a segment per flush: each row is larger than MaxSegmentBytes
			t.Fatal(err)
		}
	}
	if _, err := w.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the tick loop to fold the writer's progress in", func() bool { return svc.Stats().ResolvedTs == 200 })

	f, err := svc.Follow(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := f.Next(ctx)
	if err != nil || ev.CommitTs() != 110 {
		t.Fatalf("follower's first event: %v, %v; want ts 110", ev, err)
	}
	if st := svc.Stats(); len(st.Followers) != 1 || st.Followers[0].LagTs != 200-109 {
		t.Fatalf("follower lag %+v; want one follower 91 ts behind", st.Followers)
	}

	cps := svc.Checkpoints()
	g1, g2 := cps.Join("g1", 100), cps.Join("g2", 100)
	must(t, g1.SetCheckpoint(ctx, 180))
	if cp := svc.Meta().CheckpointTs; cp != 100 {
		t.Fatalf("checkpoint %d after one gate of two reported; want 100 (the other gate's)", cp)
	}
	must(t, g2.SetCheckpoint(ctx, 150))
	if cp := svc.Meta().CheckpointTs; cp != 150 {
		t.Fatalf("checkpoint %d; want 150, the minimum", cp)
	}
	waitFor(t, "the checkpoint move to start a GC cycle that deletes", func() bool { return svc.Stats().GCDeleted > 0 })
	if st := svc.Stats(); st.GCErrors != 0 || st.CheckpointTs != 150 {
		t.Fatalf("stats after GC: %+v", st)
	}

	must(t, w.Write(ctx, span, row(210, 210)))
	must(t, w.AdvanceResolved(span, 220))
	must(t, svc.Close(ctx))
	if m, err := log.Meta(ctx); err != nil || m.ResolvedTs != 220 {
		t.Fatalf("after Close: %+v, %v; want the writer's last progress (220) ticked in", m, err)
	}
	if err := w.Write(ctx, span, row(230, 230)); !errors.Is(err, writer.ErrClosed) {
		t.Fatalf("Write after the service closed its writer: %v", err)
	}
	if _, err := svc.OpenWriter(ctx, "w2", nil); !errors.Is(err, redokit.ErrServiceClosed) {
		t.Fatalf("OpenWriter after Close: %v", err)
	}
	if _, err := f.Next(ctx); err == nil {
		t.Fatal("the follower goes on after the service closed it")
	}
	if st := svc.Stats(); len(st.Followers) != 0 {
		t.Fatalf("a closed follower is still reported: %+v", st.Followers)
	}
}
