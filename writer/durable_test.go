package writer

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/segment"
)

// TestDurableWalkNeedsTheEpochsFirstSegment: an epoch that never published
// makes one flush of several objects; the first object's upload fails for
// good while the others (the last one with the flush's progress frame)
// land, so the flush is never reported. The next epoch must not take that
// frame for the old epoch's durable progress: nothing links it to the
// epoch's start, and a fence at it would make every reader fail on the
// missing first seq. The fault schedules met this as a chain broken below
// seq 40; without the check, the walk started at the lowest seq listed.
func TestDurableWalkNeedsTheEpochsFirstSegment(t *testing.T) {
	ctx := context.Background()
	f, b := faultyMem()
	o := objectOptions(4)
	o.RetryAttempts = 1
	w := openSpan1(t, b, o)
	// Seq 1 fails only once seq 2 is stored, so that the later objects
	// land whatever order the uploads run in.
	gate := make(chan struct{})
	f.Add(blobtest.Rule{Op: blobtest.OpPut, Match: seqIs(1), Wait: gate, Fail: true})
	go func() {
		defer close(gate)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			for a, err := range blob.NewBucket(f.Inner()).List(ctx, layout.Segments(testLog)) {
				if n, perr := segment.ParseName(a.Key); err == nil && perr == nil && n.Seq == 2 {
					return
				}
			}
		}
	}()
	writeBig(t, w, 1, 80)
	if _, err := w.Flush(ctx); err == nil {
		t.Fatal("a flush whose first object never landed was reported")
	}
	w.Close(ctx)
	if keyOf(t, f, 1) != "" || keyOf(t, f, 2) == "" {
		t.Fatalf("want seq 1 missing and seq 2 stored; have %q and %q", keyOf(t, f, 1), keyOf(t, f, 2))
	}

	b2 := blob.NewBucket(f.Inner())
	w2 := open(t, b2, o)
	if w2.FlushedTs() != 0 {
		t.Fatalf("the new epoch starts at %d: it took an unreported flush's frame for durable progress", w2.FlushedTs())
	}
	must(t, w2.AddSpan(1, 0))
	writeBig(t, w2, 1, 80)
	mustFlush(t, w2)
	must(t, w2.Close(ctx))
	readIDs(t, b2, 80, 1, 80)
}

// TestDurableWalkRefusesABadName: a key under the writer's segments that is
// not a segment name could be a damaged segment of the chain; a walk that
// passed it by would end early and reopen the writer below a flush it
// reported. The next epoch refuses to open, naming the key.
func TestDurableWalkRefusesABadName(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	o := flushUnpublished(t, dir)
	b2 := localBucket(t, dir)
	bad := layout.WriterSegments(testLog, "w") + "00000000000000000001-0000000000000000000x.seg"
	if _, err := b2.Put(ctx, bad, []byte("?"), nil); err != nil {
		t.Fatal(err)
	}
	_, err := Open(ctx, b2, o)
	if err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("Open with %q under the writer's segments: %v, want an error naming it", bad, err)
	}
}
