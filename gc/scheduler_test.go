package gc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
)

// TestCollectReadsTheCheckpoint: Collect trusts only the checkpoint the log
// recorded. Without a meta object it deletes nothing and names the key; a
// Below above the checkpoint is refused.
func TestCollectReadsTheCheckpoint(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	putSegments(t, b, "log", 5) // [1,10] … [41,50]
	_, err := Collect(ctx, b, "log", nil)
	if !blob.IsNotExist(err) || !strings.Contains(err.Error(), layout.Meta("log")) {
		t.Fatalf("collect without a meta object: %v, want not-exist naming %s", err, layout.Meta("log"))
	}
	if n := countKeys(t, b, layout.Segments("log")); n != 5 {
		t.Fatalf("%d segments left after a failed collect, want 5", n)
	}
	recordCheckpoint(t, b, "log", 31)
	_, err = Collect(ctx, b, "log", &Options{Below: 41})
	if !errors.Is(err, ErrAboveCheckpoint) {
		t.Fatalf("collect below 41 at checkpoint 31: %v, want ErrAboveCheckpoint", err)
	}
	res, err := Collect(ctx, b, "log", &Options{Below: 21})
	if err != nil || res.Deleted != 2 || res.Checkpoint != 21 {
		t.Fatalf("collect below 21: %+v %v, want 2 deleted", res, err)
	}
	res, err = Collect(ctx, b, "log", nil)
	if err != nil || res.Deleted != 1 || res.Checkpoint != 31 {
		t.Fatalf("collect at the checkpoint 31: %+v %v, want 1 more deleted", res, err)
	}
}

// TestSchedulerFollowsTheCheckpoint: moving the checkpoint deletes nothing by
// itself; the scheduler's next cycle (here a Kick) does, and Close stops it.
func TestSchedulerFollowsTheCheckpoint(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	putSegments(t, b, "log", 5)
	coord, err := meta.OpenCoordinator(ctx, b, "log", &meta.CoordinatorOptions{StartTs: 10})
	if err != nil {
		t.Fatal(err)
	}
	cycles := make(chan *Result, 8)
	s := Start(ctx, b, "log", &SchedulerOptions{Interval: time.Hour, OnCycle: func(r *Result, err error) {
		if err != nil {
			t.Error(err)
		}
		cycles <- r
	}})
	defer s.Close()
	s.Kick()
	if r := <-cycles; r.Deleted != 0 || r.Checkpoint != 10 {
		t.Fatalf("first cycle %+v, want nothing strictly below checkpoint 10 deleted", r)
	}
	// A writer's progress moves the global resolved ts to 41, and the
	// downstream's checkpoint follows; nothing is deleted inline.
	if err := coord.AddWriter(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	lease, err := meta.AcquireWriter(ctx, b, "log", "w", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.PublishProgress(ctx, meta.Progress{FlushedTs: 41, Seq: 4}); err != nil {
		t.Fatal(err)
	}
	if m, err := coord.Tick(ctx); err != nil || m.ResolvedTs != 41 {
		t.Fatalf("tick: resolved %d, %v; want 41", m.ResolvedTs, err)
	}
	if err := coord.SetCheckpoint(ctx, 41); err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, b, layout.Segments("log")); n != 5 {
		t.Fatalf("SetCheckpoint deleted segments: %d left, want 5", n)
	}
	s.Kick()
	if r := <-cycles; r.Deleted != 4 || r.Checkpoint != 41 {
		t.Fatalf("cycle after the checkpoint moved: %+v, want 4 deleted", r)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
