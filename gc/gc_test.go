package gc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/internal/chain"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
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
	recordCheckpoint(t, b, "log", checkpoint)
	before := b.Stats()
	res, err := Collect(ctx, b, "log", nil)
	if err != nil {
		t.Fatal(err)
	}
	cost := b.Stats().Sub(before)
	if res.Listed != 2501 || res.Deleted != 1699 || res.FreedBytes != 1699 {
		t.Fatalf("result %+v", res)
	}
	// No writer state: one list page of them and no read.
	if cost.Lists != 4 || cost.Deletes != 2 || cost.Reads != 1 || cost.Stats != 0 || res.Checkpoint != checkpoint {
		t.Fatalf("request cost %+v at checkpoint %d, want 3 list pages of segments and one of writer states, 2 batch deletes and one read of the meta object", cost, res.Checkpoint)
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
	res, err = Collect(ctx, b, "log", nil)
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
	res, err := collectBelow(t, ctx, b, "log", 1000, &Options{DryRun: true})
	if err != nil || res.Deleted != 5 {
		t.Fatalf("dry run: %+v %v", res, err)
	}
	if n := countKeys(t, b, layout.Segments("log")); n != 5 {
		t.Fatalf("dry run deleted: %d left", n)
	}
	res, err = collectBelow(t, ctx, b, "log", 1000, &Options{Grace: time.Hour})
	if err != nil || res.Deleted != 0 || res.KeptByGrace != 5 {
		t.Fatalf("grace: %+v %v", res, err)
	}
	later := func() time.Time { return time.Now().Add(2 * time.Hour) }
	res, err = collectBelow(t, ctx, b, "log", 1000, &Options{Grace: time.Hour, Now: later})
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
			if _, err := collectBelow(t, ctx, b, "log", uint64(1000+i*500), nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := checkNothingLiveDeleted(ctx, b, names, 2500); err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, b, layout.Segments("log")); n != 300-249 {
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
	if ok, _ := b.Exists(ctx, layout.DeleteMarker("log")); !ok {
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

// putNames writes fake segments with the given names.
func putNames(t *testing.T, b *blob.Bucket, names ...segment.Name) {
	t.Helper()
	for _, n := range names {
		if _, err := b.Put(context.Background(), n.Format(), []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
}

func sealed(writer string, epoch, seq, minTs, maxTs uint64) segment.Name {
	return segment.Name{LogID: "log", WriterID: writer, Epoch: epoch, Seq: seq, MinTs: minTs, MaxTs: maxTs}
}

// survivors returns the keys left under the log's segment prefix.
func survivors(t *testing.T, b *blob.Bucket) []string {
	t.Helper()
	var keys []string
	for a, err := range b.List(context.Background(), layout.Segments("log")) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, a.Key)
	}
	return keys
}

func keysOf(names ...segment.Name) []string {
	var out []string
	for _, n := range names {
		out = append(out, n.Format())
	}
	slices.Sort(out)
	return out
}

// TestCollectAppliesTheChainRule: Collect deletes exactly what the
// collectable rule (internal/chain, where its cases are tested) picks from
// the listing, and counts what the rule keeps.
func TestCollectAppliesTheChainRule(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	a1, a2, a3 := sealed("a", 1, 1, 1, 10), sealed("a", 1, 2, 11, 100), sealed("a", 1, 3, 5, 20)
	b1, b3 := sealed("b", 1, 1, 1, 10), sealed("b", 1, 3, 11, 20)
	c1 := segment.Name{LogID: "log", WriterID: "c", Epoch: 1, Seq: 1, Active: true}
	putNames(t, b, a1, a2, a3, b1, b3, c1)
	listing, err := chain.List(ctx, b, "log", "log/seg/")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, e := range chain.Collectable(listing, 50) {
		want = append(want, e.Key)
	}
	res, err := collectBelow(t, ctx, b, "log", 50, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.DeletedKeys, want) || !slices.Equal(want, keysOf(a1, b1)) {
		t.Fatalf("deleted %v, the rule picks %v", res.DeletedKeys, want)
	}
	if res.KeptByChain != 2 || res.Listed != 6 { // a3 and b3
		t.Fatalf("result %+v", res)
	}
	if got := survivors(t, b); !slices.Equal(got, keysOf(a2, a3, b3, c1)) {
		t.Fatalf("left %v", got)
	}
}

// recordCheckpoint writes a meta object for log whose checkpoint (and
// resolved ts) is cp, as a coordinator creating the log at cp does.
func recordCheckpoint(t *testing.T, b *blob.Bucket, log string, cp uint64) {
	t.Helper()
	if _, err := meta.OpenCoordinator(context.Background(), b, log, &meta.CoordinatorOptions{StartTs: cp}); err != nil {
		t.Fatal(err)
	}
}

// collectBelow collects below cp on a log whose recorded checkpoint is far
// above every ts the tests use, so each test picks its own cut through
// Options.Below.
func collectBelow(t *testing.T, ctx context.Context, b *blob.Bucket, log string, cp uint64, opts *Options) (*Result, error) {
	t.Helper()
	recordCheckpoint(t, b, log, 1<<40)
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Below = cp
	return Collect(ctx, b, log, &o)
}

// fullDriver is a store with room for a fixed number of new objects: a
// deletion frees room for one, and a put with no room left fails with
// ENOSPC, as a full file system does. It records the order of events.
type fullDriver struct {
	*mem.Driver
	mu     sync.Mutex
	room   int
	events []string
}

func (d *fullDriver) setRoom(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.room, d.events = n, nil
}

func (d *fullDriver) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	d.mu.Lock()
	if d.room == 0 {
		d.events = append(d.events, "full "+key)
		d.mu.Unlock()
		return blob.Attrs{}, &os.PathError{Op: "write", Path: key, Err: syscall.ENOSPC}
	}
	d.room--
	d.events = append(d.events, "put "+key)
	d.mu.Unlock()
	return d.Driver.Put(ctx, key, r, size, opts)
}

func (d *fullDriver) Delete(ctx context.Context, keys []string) error {
	d.mu.Lock()
	d.room += len(keys)
	for _, k := range keys {
		d.events = append(d.events, "delete "+k)
	}
	d.mu.Unlock()
	return d.Driver.Delete(ctx, keys)
}

// TestDeleteLogOnAFullStore: with no room for the delete marker, DeleteLog
// deletes one segment, the lowest key (the bottom of a chain), writes the
// marker in the room it freed, and removes the rest. With no segment to
// delete it fails with ErrNoMarker, having deleted nothing, and the error
// says the store is full.
func TestDeleteLogOnAFullStore(t *testing.T) {
	ctx := context.Background()
	d := &fullDriver{Driver: mem.NewDriver(), room: 1 << 20}
	b := blob.NewBucket(d)
	defer b.Close()
	names := putSegments(t, b, "log", 5)
	putSegments(t, b, "keep", 2)
	recordCheckpoint(t, b, "log", 1)
	recordCheckpoint(t, b, "empty", 1)
	d.setRoom(0)
	n, err := DeleteLog(ctx, b, "log")
	if err != nil || n != 6 { // 5 segments and the meta object
		t.Fatalf("DeleteLog on a full store: %d deleted, %v", n, err)
	}
	marker := layout.DeleteMarker("log")
	want := []string{"full " + marker, "delete " + names[0].Format(), "put " + marker}
	if len(d.events) < 3 || !slices.Equal(d.events[:3], want) {
		t.Fatalf("DeleteLog on a full store did\n%v\nwant it to start with\n%v", d.events, want)
	}
	if n := countKeys(t, b, "log/"); n != 0 {
		t.Fatalf("%d objects of the log left", n)
	}
	if n := countKeys(t, b, "keep/"); n != 2 {
		t.Fatalf("another log lost objects: %d left", n)
	}

	// Nothing to make room with: nothing happens, and the error says so.
	d.setRoom(0)
	n, err = DeleteLog(ctx, b, "empty")
	if !errors.Is(err, ErrNoMarker) || !NoSpace(err) || n != 0 {
		t.Fatalf("DeleteLog of a log with no segment on a full store: %d deleted, %v", n, err)
	}
	if ok, _ := b.Exists(ctx, layout.Meta("empty")); !ok {
		t.Fatal("the meta object went although the removal never started")
	}
}
