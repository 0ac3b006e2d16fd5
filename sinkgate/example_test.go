package sinkgate_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/sinkgate"
	"github.com/redokit/redokit/writer"
)

// A sink wired through a gate: events go to the redo log first and reach the
// downstream (here, a print) only once the coordinator's persisted global
// resolved ts covers them; the downstream's progress becomes the log's
// checkpoint. With Options.Log the gate evicts to the log what does not fit
// in its memory, and reads it back in place.
func Example() {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()

	coord, _ := meta.OpenCoordinator(ctx, b, "cf", &meta.CoordinatorOptions{StartTs: 100})
	coord.AddWriter(ctx, "capture-1")
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	go coord.Run(cctx, 5*time.Millisecond)

	w, _ := writer.Open(ctx, b, &writer.Options{LogID: "cf", WriterID: "capture-1", FlushInterval: 5 * time.Millisecond})
	down := sinkgate.DownstreamFunc(func(ctx context.Context, evs []codec.Event) error {
		for _, ev := range evs {
			fmt.Println("downstream:", ev.Row.Table.Name, ev.CommitTs())
		}
		return nil
	})
	log, _ := redokit.Open(ctx, b, "cf")
	g := sinkgate.New(w, log.Watcher(5*time.Millisecond), coord, down, &sinkgate.Options{Log: log})
	go g.Run(ctx)

	g.AddSpan(ctx, 1, 100)
	for ts := uint64(101); ts <= 103; ts++ {
		g.Write(ctx, 1, codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{
			StartTs: ts - 1, CommitTs: ts,
			Table:   codec.TableName{Schema: "db", Name: "orders", PhysicalID: 1},
			Columns: []codec.Column{{Name: "id", Type: codec.TypeLonglong, Value: codec.IntValue(int64(ts))}},
		}})
	}
	g.AdvanceResolved(1, 103)
	// Close waits until the log covers what the writer flushed, releases it
	// and reports the checkpoint.
	if err := g.Close(ctx); err != nil {
		fmt.Println(err)
	}
	m := coord.Meta()
	fmt.Println("checkpoint:", m.CheckpointTs, "resolved:", m.ResolvedTs)
	// Output:
	// downstream: orders 101
	// downstream: orders 102
	// downstream: orders 103
	// checkpoint: 103 resolved: 103
}
