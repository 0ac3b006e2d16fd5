package redokit_test

import (
	"context"
	"fmt"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/meta"
)

// Wiring redokit into a CDC system: one coordinator per log, one writer per
// capture, GC on its own schedule, and a reader for recovery.
func Example() {
	ctx := context.Background()
	bucket := mem.New() // blob.Open(ctx, "s3://bucket/redo") in production
	defer bucket.Close()

	log, _ := redokit.Open(ctx, bucket, "changefeed-1")
	coord, _ := log.OpenCoordinator(ctx, &meta.CoordinatorOptions{StartTs: 400})
	collector := log.StartGC(ctx, nil)
	defer collector.Close()

	const orders redokit.SpanID = 112 // a table (or a key range of one)
	_ = coord.AddWriter(ctx, "capture-1")
	_ = coord.AddSpan(ctx, orders, 400)
	w, _ := log.OpenWriter(ctx, "capture-1", nil)
	_ = w.AddSpan(orders, 400)

	// The capture writes each committed change before the downstream may
	// see it, and resolves the span as the upstream's resolved ts moves.
	_ = w.Write(ctx, orders, codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{
		StartTs: 420, CommitTs: 425,
		Table:   codec.TableName{Schema: "shop", Name: "orders", PhysicalID: 112},
		Columns: []codec.Column{{Name: "id", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey, Value: codec.IntValue(1)}},
	}})
	_ = w.AdvanceResolved(orders, 430)
	_, _ = w.Publish(ctx)
	_ = w.Close(ctx)
	m, _ := coord.Tick(ctx) // the global resolved ts: the downstream may apply up to it
	fmt.Println("global resolved ts:", m.ResolvedTs)

	// After a disaster: replay (checkpoint, global resolved], proven complete.
	r, err := log.OpenReader(ctx, nil)
	if err != nil {
		panic(err)
	}
	defer r.Close()
	for ev, err := range r.CodecEvents(ctx) {
		if err != nil {
			panic(err)
		}
		fmt.Println("replay", ev.Row.Table.Name, "at", ev.CommitTs())
	}
	// Output:
	// global resolved ts: 430
	// replay orders at 425
}
