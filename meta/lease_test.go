package meta

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/segment"
)

func TestLeaseFencesThePreviousEpoch(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	a, err := AcquireWriter(ctx, b, "log1", "w1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Epoch() != 1 || a.Previous != nil {
		t.Fatalf("first acquire: epoch %d previous %v", a.Epoch(), a.Previous)
	}
	if err := a.PublishProgress(ctx, Progress{FlushedTs: 100, Seq: 3}); err != nil {
		t.Fatal(err)
	}
	if err := a.PublishProgress(ctx, Progress{FlushedTs: 100, Seq: 2}); err == nil {
		t.Fatal("publishing a lower seq succeeded")
	}
	z, err := AcquireWriter(ctx, b, "log1", "w1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if z.Epoch() != 2 || z.Previous == nil || z.Previous.FlushedTs != 100 {
		t.Fatalf("takeover: epoch %d previous %+v", z.Epoch(), z.Previous)
	}
	st := z.State()
	if len(st.Fences) != 1 || st.Fences[0] != (Fence{Epoch: 1, LastSeq: 3, CommittedTs: 100}) || st.FlushedTs != 100 || st.CommittedTs != 100 {
		t.Fatalf("takeover state %+v", st)
	}
	// The zombie can no longer publish, and stays fenced.
	if err := a.PublishProgress(ctx, Progress{FlushedTs: 200, Seq: 4}); !errors.Is(err, ErrFenced) {
		t.Fatalf("zombie publish = %v, want ErrFenced", err)
	}
	if err := a.Check(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("zombie check = %v, want ErrFenced", err)
	}
	got, _, err := ReadWriterState(ctx, b, "log1", "w1")
	if err != nil || got.Epoch != 2 || got.FlushedTs != 100 {
		t.Fatalf("state after zombie publish: %+v %v", got, err)
	}
	if err := z.Check(ctx); err != nil {
		t.Fatalf("live lease check: %v", err)
	}
	// Readers accept the old epoch's segments up to its fence only.
	for _, c := range []struct {
		epoch, seq uint64
		want       bool
	}{{1, 3, true}, {1, 0, true}, {1, 4, false}, {2, 0, true}, {2, 9, true}, {3, 0, true}} {
		if got := st.Accepts(segment.Name{Epoch: c.epoch, Seq: c.seq}); got != c.want {
			t.Errorf("Accepts(epoch %d seq %d) = %v, want %v", c.epoch, c.seq, got, c.want)
		}
	}
	if f, ok := st.Fence(1); !ok || f != st.Fences[0] {
		t.Errorf("Fence(1) = %+v, %v; want the epoch's fence", f, ok)
	}
	if f, ok := st.Fence(2); ok {
		t.Errorf("Fence(2) of the current epoch = %+v, want none", f)
	}
	// An epoch that never published anything leaves no fence: its segments
	// are all ignored.
	y, err := AcquireWriter(ctx, b, "log1", "w1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if st := y.State(); st.Accepts(segment.Name{Epoch: 2, Seq: 0}) || !st.Accepts(segment.Name{Epoch: 1, Seq: 2}) {
		t.Fatalf("fences after an empty epoch: %+v", st.Fences)
	}
}

func TestConcurrentAcquirersGetDistinctEpochs(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	const n = 16
	leases := make([]*Lease, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			l, err := AcquireWriter(ctx, b, "log", "w", nil)
			if err != nil {
				t.Error(err)
				return
			}
			leases[i] = l
		})
	}
	wg.Wait()
	seen := map[uint64]bool{}
	live := 0
	for _, l := range leases {
		if l == nil {
			t.FailNow()
		}
		if seen[l.Epoch()] {
			t.Fatalf("epoch %d handed out twice", l.Epoch())
		}
		seen[l.Epoch()] = true
		if l.Check(ctx) == nil {
			live++
		}
	}
	if live != 1 || !seen[n] {
		t.Fatalf("%d live leases, epochs %v; want exactly one live and epochs 1..%d", live, seen, n)
	}
}

func TestBadIDsAndVersions(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	if _, err := AcquireWriter(ctx, b, "log", "a/b", nil); err == nil {
		t.Fatal("writer ID with a slash accepted")
	}
	for _, v := range []string{
		`{"version":9,"log":"log","writer":"w"}`,
		// Version 1, as the unreleased first format wrote it: refused by
		// name, not read.
		`{"version":1,"log":"log","writer":"w","epoch":1,"flushed_ts":0,"seq":0,"has_seq":false,"updated":"2026-01-01T00:00:00Z"}`,
	} {
		if _, err := b.Put(ctx, layout.WriterState("log", "w"), []byte(v), nil); err != nil {
			t.Fatal(err)
		}
		_, _, err := ReadWriterState(ctx, b, "log", "w")
		if !errors.Is(err, ErrUnsupportedVersion) || !strings.Contains(err.Error(), layout.WriterState("log", "w")) {
			t.Fatalf("state %s: %v", v, err)
		}
	}
	if _, err := AcquireWriter(ctx, b, "log", "w", nil); err == nil {
		t.Fatal("acquired over an unreadable state object")
	}
}

// TestListWriterStatesRefusesWhatItCannotProve: the listing of writer states
// is what readers apply the fence rule with, so a state it would leave out
// must be an error naming its key. A store whose listing shows a state that
// a read then does not find (lagging, or lying) gives ErrStateGone, or
// ErrDeleting while the log's delete marker is there; a key under the states
// that is not a writer ID is an error unless the caller asks to skip it.
// Passing these by, as the listing once did, made the writer read as one
// that never took a lease: every segment of its fenced zombies accepted.
func TestListWriterStatesRefusesWhatItCannotProve(t *testing.T) {
	ctx := context.Background()
	f := blobtest.NewFaulty(mem.NewDriver())
	b := f.Bucket()
	for _, id := range []string{"w1", "w2"} {
		if _, err := AcquireWriter(ctx, b, "log", id, nil); err != nil {
			t.Fatal(err)
		}
	}
	if states, err := ListWriterStates(ctx, b, "log", nil); err != nil || len(states) != 2 {
		t.Fatalf("ListWriterStates = %v, %v; want both states", states, err)
	}

	gone := layout.WriterState("log", "w2")
	lie := f.Add(blobtest.Rule{Op: blobtest.OpRead, Match: func(c blobtest.Call) bool { return c.Key == gone }, Err: blob.ErrNotExist})
	_, err := ListWriterStates(ctx, b, "log", nil)
	if !errors.Is(err, ErrStateGone) || !strings.Contains(err.Error(), gone) {
		t.Fatalf("a listed state that reads as missing: %v, want ErrStateGone naming %s", err, gone)
	}
	if _, err := b.Put(ctx, layout.DeleteMarker("log"), []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ListWriterStates(ctx, b, "log", nil); !errors.Is(err, ErrDeleting) {
		t.Fatalf("a state gone while the log is being deleted: %v, want ErrDeleting", err)
	}
	lie()
	if err := b.Delete(ctx, layout.DeleteMarker("log")); err != nil {
		t.Fatal(err)
	}

	bad := layout.Writers("log") + "w 3"
	if _, err := b.Put(ctx, bad, []byte("{}"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ListWriterStates(ctx, b, "log", nil); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("a key that is not a writer ID: %v, want an error naming %q", err, bad)
	}
	var skipped []string
	states, err := ListWriterStates(ctx, b, "log", &ListOptions{SkipBadName: func(key string, _ error) { skipped = append(skipped, key) }})
	if err != nil || len(states) != 2 || len(skipped) != 1 || skipped[0] != bad {
		t.Fatalf("with SkipBadName: %d states, %v, skipped %v", len(states), err, skipped)
	}
}
