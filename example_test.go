package redokit_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/meta"
)

// Wiring redokit into a CDC system: one Service per log runs the
// coordinator's tick, GC and the checkpoint fan-in; writers are opened and
// spans registered through it; a reader replays after a disaster.
func Example() {
	ctx := context.Background()
	bucket := mem.New() // blob.Open(ctx, "s3://bucket/redo") in production
	defer bucket.Close()

	rlog, err := redokit.Open(ctx, bucket, "changefeed-1")
	if err != nil {
		log.Fatal(err)
	}
	svc, err := rlog.Start(ctx, &redokit.ServiceOptions{Coordinator: &meta.CoordinatorOptions{StartTs: 400}})
	if err != nil {
		log.Fatal(err)
	}
	w, err := svc.OpenWriter(ctx, "capture-1", nil)
	if err != nil {
		log.Fatal(err)
	}
	const orders redokit.SpanID = 112 // a table (or a key range of one)
	if err := svc.AddSpan(ctx, w, orders, 400); err != nil {
		log.Fatal(err)
	}

	// The capture writes each committed change before the downstream may
	// see it, and resolves the span as the upstream's resolved ts moves.
	err = w.Write(ctx, orders, codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{
		StartTs: 420, CommitTs: 425,
		Table:   codec.TableName{Schema: "shop", Name: "orders", PhysicalID: 112},
		Columns: []codec.Column{{Name: "id", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey, Value: codec.IntValue(1)}},
	}})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.AdvanceResolved(orders, 430); err != nil {
		log.Fatal(err)
	}
	// Close closes the writer (it publishes its progress) and ticks it into
	// the global resolved ts: the downstream may apply up to it.
	if err := svc.Close(ctx); err != nil {
		log.Fatal(err)
	}
	m, err := rlog.Meta(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("global resolved ts:", m.ResolvedTs)

	// After a disaster: replay (checkpoint, global resolved], proven complete.
	r, err := rlog.OpenReader(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	for ev, err := range r.CodecEvents(ctx) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("replay", ev.Row.Table.Name, "at", ev.CommitTs())
	}
	// Output:
	// global resolved ts: 430
	// replay orders at 425
}
