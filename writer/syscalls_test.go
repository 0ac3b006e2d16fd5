package writer

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
)

// TestRequestsPerFlush counts, through the bucket's driver counters, what a
// flush costs: on local disk exactly one fdatasync and no put (no hidden
// sync every FlushBytes inside a flush, and no state object write on the
// flush's path); on an object store exactly one segment object put. The
// state object follows lazily: with a long PublishInterval, at most one
// publication happens over all the flushes, and Publish adds exactly one.
func TestRequestsPerFlush(t *testing.T) {
	const flushes = 3
	const perFlush = 20 << 20 // above the 16 MiB at which the writer used to sync inside a flush
	onBothStores(t, func(t *testing.T, b *blob.Bucket) {
		ctx := context.Background()
		o := testOptions("w")
		o.BlockSize = 256 << 10
		o.FlushBytes = 256 << 20
		o.MemoryQuota = 512 << 20
		o.MaxSegmentBytes = 1 << 30
		o.PublishInterval = time.Hour
		w, err := Open(ctx, b, o)
		must(t, err)
		defer w.Close(ctx)
		must(t, w.AddSpan(1, 0))
		payload := bytes.Repeat([]byte{0x5a}, 480)
		var id int64
		before := b.Stats()
		for f := range flushes {
			base := uint64(f+1) * 1_000_000
			var evs []codec.Event
			for n := 0; n*512 < perFlush; n++ {
				id++
				ev := row(1, base+uint64(n), id)
				ev.Row.Columns = append(ev.Row.Columns, codec.Column{Name: "payload", Type: codec.TypeBlob, Value: codec.BytesValue(payload)})
				evs = append(evs, ev)
			}
			must(t, w.Write(ctx, 1, evs...))
			must(t, w.AdvanceResolved(1, base+uint64(len(evs))))
			if _, err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		after := b.Stats()
		// On local disk the flushes may come with lazy stage cuts
		// (smallStageDue), which count as flushes but sync nothing: the
		// fdatasyncs below must still be one per flush asked for.
		if got := w.Stats().Flushes; got < flushes || !b.CanAppend() && got != flushes {
			t.Fatalf("%d flushes, want %d", got, flushes)
		}
		syncs, puts := after.Syncs-before.Syncs, after.Puts-before.Puts
		if b.CanAppend() {
			if syncs != flushes {
				t.Errorf("local disk: %d fdatasyncs for %d flushes of %d MiB, want exactly one per flush", syncs, flushes, perFlush>>20)
			}
			if puts > 1 {
				t.Errorf("local disk: %d puts over %d flushes, want at most one coalesced state publication", puts, flushes)
			}
		} else if puts < flushes || puts > flushes+1 {
			t.Errorf("object store: %d puts for %d flushes, want one segment object each plus at most one state publication", puts, flushes)
		}
		pubs := w.Stats().Publications
		if _, err := w.Publish(ctx); err != nil {
			t.Fatal(err)
		}
		// The lazy publisher may have published the last flush already
		// (flushes slower than its interval, on a loaded machine): then
		// Publish has nothing left to write. It never writes twice.
		if got := w.Stats().Publications - pubs; got > 1 {
			t.Errorf("Publish made %d publications, want at most 1", got)
		}
		if w.PublishedTs() != w.FlushedTs() {
			t.Errorf("published ts %d after Publish, flushed %d", w.PublishedTs(), w.FlushedTs())
		}
	})
}
