package gc

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/segment"
)

// putSegments writes n fake segments of one writer: segment i holds
// [10i+1, 10i+10]. GC never reads them, so their content is a marker.
func putSegments(t *testing.T, b *blob.Bucket, log string, n int) []segment.Name {
	t.Helper()
	var names []segment.Name
	for i := range n {
		nm := segment.Name{LogID: log, WriterID: "w1", Epoch: 1, Seq: uint64(i), MinTs: uint64(10*i + 1), MaxTs: uint64(10*i + 10)}
		if _, err := b.Put(context.Background(), nm.Format(), []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
		names = append(names, nm)
	}
	return names
}

// checkNothingLiveDeleted is invariant 4: no segment holding an event above
// the checkpoint is gone, and every survivor is either above it or kept.
func checkNothingLiveDeleted(ctx context.Context, b *blob.Bucket, names []segment.Name, checkpoint uint64) error {
	for _, n := range names {
		ok, err := b.Exists(ctx, n.Format())
		if err != nil {
			return err
		}
		if !ok && n.MaxTs >= checkpoint {
			return fmt.Errorf("segment %s (max ts %d) deleted at checkpoint %d", n.Format(), n.MaxTs, checkpoint)
		}
	}
	return nil
}

func TestCollectStrictlyBelowCheckpointWithinBudget(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	names := putSegments(t, b, "log", 2500)
	active := segment.Name{LogID: "log", WriterID: "w2", Epoch: 1, Seq: 0, Active: true}
	if _, err := b.Put(ctx, active.Format(), []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	// Another log's segments must be untouched.
	other := putSegments(t, b, "log2", 3)

	const checkpoint = 17000 // segment 1699 ends at 17000: kept
	before := b.Stats()
	res, err := Collect(ctx, b, "log", checkpoint, nil)
	if err != nil {
		t.Fatal(err)
	}
	cost := b.Stats().Sub(before)
	if res.Listed != 2501 || res.Deleted != 1699 || res.FreedBytes != 1699 {
		t.Fatalf("result %+v", res)
	}
	if cost.Lists != 3 || cost.Deletes != 2 || cost.Reads != 0 || cost.Stats != 0 {
		t.Fatalf("request cost %+v, want 3 list pages, 2 batch deletes, no reads", cost)
	}
	if err := checkNothingLiveDeleted(ctx, b, names, checkpoint); err != nil {
		t.Fatal(err)
	}
	if ok, _ := b.Exists(ctx, names[1698].Format()); ok {
		t.Fatalf("segment ending at %d survived checkpoint %d", names[1698].MaxTs, checkpoint)
	}
	for _, k := range []string{active.Format(), other[0].Format()} {
		if ok, _ := b.Exists(ctx, k); !ok {
			t.Fatalf("%s was deleted", k)
		}
	}
	// Idempotent: a second cycle deletes nothing more.
	res, err = Collect(ctx, b, "log", checkpoint, nil)
	if err != nil || res.Deleted != 0 {
		t.Fatalf("second cycle: %+v %v", res, err)
	}
}

// TestInvariantCheckCatchesAnOffByOneCollector breaks the rule on purpose:
// a collector that deletes segments ending at the checkpoint must be caught.
func TestInvariantCheckCatchesAnOffByOneCollector(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	names := putSegments(t, b, "log", 10)
	const checkpoint = 50
	for _, n := range names {
		if n.MaxTs <= checkpoint { // the broken rule: ≤ instead of <
			if err := b.Delete(ctx, n.Format()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := checkNothingLiveDeleted(ctx, b, names, checkpoint); err == nil {
		t.Fatal("the invariant check did not catch a segment deleted at the checkpoint")
	}
}

func TestDryRunAndGrace(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	putSegments(t, b, "log", 5)
	res, err := Collect(ctx, b, "log", 1000, &Options{DryRun: true})
	if err != nil || res.Deleted != 5 {
		t.Fatalf("dry run: %+v %v", res, err)
	}
	if n := countKeys(t, b, "log/"); n != 5 {
		t.Fatalf("dry run deleted: %d left", n)
	}
	res, err = Collect(ctx, b, "log", 1000, &Options{Grace: time.Hour})
	if err != nil || res.Deleted != 0 || res.KeptByGrace != 5 {
		t.Fatalf("grace: %+v %v", res, err)
	}
	later := func() time.Time { return time.Now().Add(2 * time.Hour) }
	res, err = Collect(ctx, b, "log", 1000, &Options{Grace: time.Hour, Now: later})
	if err != nil || res.Deleted != 5 {
		t.Fatalf("after grace: %+v %v", res, err)
	}
}

func TestConcurrentCollects(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	names := putSegments(t, b, "log", 300)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			if _, err := Collect(ctx, b, "log", uint64(1000+i*500), nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := checkNothingLiveDeleted(ctx, b, names, 2500); err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, b, "log/"); n != 300-249 {
		t.Fatalf("%d segments left, want %d", n, 300-249)
	}
}

func TestDeleteLogResumesAfterACrash(t *testing.T) {
	ctx := context.Background()
	f := blobtest.NewFaulty(mem.NewDriver())
	b := f.Bucket()
	defer b.Close()
	putSegments(t, b, "log", 2200)
	putSegments(t, b, "keep", 2)
	f.FailNth(blobtest.OpDelete, 2, nil) // the second batch fails: an interrupted removal
	if _, err := DeleteLog(ctx, b, "log"); err == nil {
		t.Fatal("DeleteLog survived an injected delete failure")
	}
	if ok, _ := b.Exists(ctx, DeleteMarkerKey("log")); !ok {
		t.Fatal("marker missing after an interrupted removal")
	}
	resumed, err := ResumeDeleteLog(ctx, b, "log")
	if err != nil || !resumed {
		t.Fatalf("resume: %v %v", resumed, err)
	}
	if n := countKeys(t, b, "log/"); n != 0 {
		t.Fatalf("%d objects left of the deleted log", n)
	}
	if n := countKeys(t, b, "keep/"); n != 2 {
		t.Fatalf("another log lost objects: %d left", n)
	}
	if resumed, err := ResumeDeleteLog(ctx, b, "log"); err != nil || resumed {
		t.Fatalf("second resume: %v %v", resumed, err)
	}
}

func countKeys(t *testing.T, b *blob.Bucket, prefix string) int {
	t.Helper()
	var keys []string
	for a, err := range b.List(context.Background(), prefix) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, a.Key)
	}
	if !slices.IsSorted(keys) {
		t.Fatal("listing out of order")
	}
	return len(keys)
}
