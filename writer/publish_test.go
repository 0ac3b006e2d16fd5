package writer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redokit/redokit/blob"
)

// TestPublisherSleepsThroughFlushes: while the publisher waits out its
// interval with a publication pending, a flush's request (not urgent) does
// not wake it: it takes the newest progress when the interval ends. Woken
// at each flush, it started a new timer each time, and at GOMAXPROCS 2 and
// above each wake was another thread woken, every flush. An urgent request
// (Publish) still wakes it at once, and with a short interval the newest
// progress is published without one.
func TestPublisherSleepsThroughFlushes(t *testing.T) {
	onBothStores(t, func(t *testing.T, b *blob.Bucket) {
		ctx := context.Background()
		for i, interval := range []time.Duration{time.Hour, 20 * time.Millisecond} {
			o := testOptions("w")
			o.LogID = fmt.Sprintf("log-%d", i)
			o.PublishInterval = interval
			w, err := Open(ctx, b, o)
			must(t, err)
			must(t, w.AddSpan(1, 0))
			const flushes = 40
			for f := range flushes {
				ts := uint64(f+1) * 100
				must(t, w.Write(ctx, 1, row(1, ts, int64(f))))
				must(t, w.AdvanceResolved(1, ts))
				if _, err := w.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if interval == time.Hour {
				// The first flush's publication starts at once; the ones
				// after wait for the hour, asleep.
				if n := w.pub.wakes.Load(); n > 1 {
					t.Errorf("the publisher was woken %d times in its interval by %d flushes, want at most 1", n, flushes)
				}
				if got := w.Stats().Publications; got > 1 {
					t.Errorf("%d publications within the interval, want at most 1", got)
				}
				if _, err := w.Publish(ctx); err != nil {
					t.Fatal(err)
				}
			} else {
				deadline := time.Now().Add(10 * time.Second)
				for w.PublishedTs() != w.FlushedTs() && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
			}
			if w.PublishedTs() != w.FlushedTs() || w.FlushedTs() != flushes*100 {
				t.Errorf("interval %v: published ts %d, flushed %d, want both %d", interval, w.PublishedTs(), w.FlushedTs(), flushes*100)
			}
			must(t, w.Close(ctx))
		}
	})
}
