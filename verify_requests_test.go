package redokit_test

import (
	"context"
	"sync"
	"testing"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/meta"
)

// One Verify is one pass: it lists the log once, reads the meta object
// once and each writer state once (the meta object first), whatever it
// then checks against what.
func TestVerifyListsOnceAndReadsMetaOnce(t *testing.T) {
	ctx := context.Background()
	inner := mem.New()
	defer inner.Close()
	f := blobtest.NewFaulty(blobtest.BucketDriver(inner))
	b := f.Bucket()
	log, err := redokit.Open(ctx, b, "cf")
	must(t, err)
	coord, err := log.OpenCoordinator(ctx, &meta.CoordinatorOptions{StartTs: 100})
	must(t, err)
	writers := []string{"w1", "w2"}
	for i, id := range writers {
		span := meta.SpanID(7 + i)
		must(t, coord.AddWriter(ctx, id))
		must(t, coord.AddSpan(ctx, span, 100))
		w, err := log.OpenWriter(ctx, id, nil)
		must(t, err)
		defer w.Close(ctx)
		must(t, w.AddSpan(span, 100))
		for ts := uint64(110); ts <= 130; ts += 10 {
			must(t, w.Write(ctx, span, row(ts, int64(ts))))
			must(t, w.AdvanceResolved(span, ts))
			_, err := w.Publish(ctx)
			must(t, err)
		}
	}
	_, err = coord.Tick(ctx)
	must(t, err)

	// Count the requests of Verify alone, by operation and key.
	var mu sync.Mutex
	var calls []blobtest.Call
	counting := false
	f.Add(blobtest.Rule{Match: func(c blobtest.Call) bool {
		mu.Lock()
		defer mu.Unlock()
		if counting {
			calls = append(calls, c)
		}
		return false
	}})
	mu.Lock()
	counting = true
	mu.Unlock()
	before := b.Stats()
	rep, err := log.Verify(ctx, nil)
	must(t, err)
	d := b.Stats().Sub(before)
	mu.Lock()
	counting = false
	mu.Unlock()
	if !rep.OK() {
		t.Fatalf("verify: %v", rep.Problems)
	}
	t.Logf("one Verify of %d segments and %d writers: %+v", rep.Sealed+rep.Active, len(writers), d)

	if d.Lists != 1 {
		t.Errorf("Verify made %d listings, want 1", d.Lists)
	}
	count := func(op blobtest.Op, key string) (n int, first int) {
		first = -1
		for i, c := range calls {
			if c.Op == op && c.Key == key {
				if n == 0 {
					first = i
				}
				n++
			}
		}
		return n, first
	}
	metaReads, metaAt := count(blobtest.OpRead, log.MetaKey())
	if metaReads != 1 {
		t.Errorf("Verify read the meta object %d times, want 1", metaReads)
	}
	if n, _ := count(blobtest.OpStat, log.MetaKey()); n != 0 {
		t.Errorf("Verify stat the meta object %d times, want 0 (it needs no ETag)", n)
	}
	for _, id := range writers {
		n, at := count(blobtest.OpRead, log.WriterKey(id))
		if n != 1 {
			t.Errorf("Verify read the state of %s %d times, want 1", id, n)
		}
		if at < metaAt {
			t.Errorf("Verify read the state of %s before the meta object", id)
		}
	}
}
