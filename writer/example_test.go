package writer_test

import (
	"context"
	"fmt"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/writer"
)

func Example() {
	ctx := context.Background()
	bucket := mem.New() // or local.New(dir, nil) for appendable segments on disk
	w, err := writer.Open(ctx, bucket, &writer.Options{LogID: "changefeed-1", WriterID: "capture-1"})
	if err != nil {
		panic(err)
	}
	defer w.Close(ctx)

	// One span per table (or key range), starting at its checkpoint.
	const orders writer.SpanID = 112
	if err := w.AddSpan(orders, 400); err != nil {
		panic(err)
	}
	insert := codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{
		StartTs: 420, CommitTs: 425,
		Table:   codec.TableName{Schema: "shop", Name: "orders", PhysicalID: 112},
		Columns: []codec.Column{{Name: "id", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey, Value: codec.IntValue(1)}},
	}}
	if err := w.Write(ctx, orders, insert); err != nil {
		panic(err)
	}
	// Nothing more will come for the span at or below 430.
	if err := w.AdvanceResolved(orders, 430); err != nil {
		panic(err)
	}
	flushed, err := w.Flush(ctx)
	if err != nil {
		panic(err)
	}
	// The sink may now apply everything up to the global resolved ts, which
	// the writers' flushed ts bound.
	fmt.Println("flushed resolved ts:", flushed)
	// Output: flushed resolved ts: 430
}
