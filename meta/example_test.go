package meta_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/redokit/redokit/segment"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/meta"
)

// The coordinator moves the global resolved ts from the writers' published
// progress, holds it at a DDL barrier, and keeps the checkpoint at or below
// it.
func ExampleCoordinator() {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	coord, _ := meta.OpenCoordinator(ctx, b, "cf", &meta.CoordinatorOptions{StartTs: 100})
	_ = coord.AddWriter(ctx, "w1")
	_ = coord.AddSpan(ctx, 1, 100)

	// A writer's lease, as writer.Open takes it; its progress after a
	// durable flush of span 1 up to ts 150.
	lease, _ := meta.AcquireWriter(ctx, b, "cf", "w1", nil)
	_ = lease.PublishProgress(ctx, meta.Progress{FlushedTs: 150, Spans: []segment.SpanTs{{Span: 1, Ts: 150}}})

	// A CREATE TABLE at 140 holds the watermark until its span exists and
	// its owner reports it.
	_ = coord.AddBarrier(ctx, "create-t2", 140)
	m, _ := coord.Tick(ctx)
	fmt.Println("held at the barrier:", m.ResolvedTs)
	_ = coord.AddSpan(ctx, 2, 140)
	_ = coord.ReleaseBarrier(ctx, "create-t2")
	_ = lease.PublishProgress(ctx, meta.Progress{FlushedTs: 150, Spans: []segment.SpanTs{{Span: 1, Ts: 150}, {Span: 2, Ts: 150}}})
	m, _ = coord.Tick(ctx)
	fmt.Println("after the new span reports:", m.ResolvedTs)

	err := coord.SetCheckpoint(ctx, 160)
	fmt.Println("checkpoint above the watermark refused:", errors.Is(err, meta.ErrCheckpointAhead))
	// Output:
	// held at the barrier: 140
	// after the new span reports: 150
	// checkpoint above the watermark refused: true
}
