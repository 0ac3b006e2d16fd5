package redokit_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/codec/codectest"
	"github.com/redokit/redokit/gc"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/reader"
)

func row(ts uint64, id int64) codec.Event {
	return codectest.Row(ts, codectest.Table("shop", "orders", 7), codectest.Key("id", id))
}

// fill opens a log, writes rows at ts 110, 120, …, 200 through one writer,
// moves the global resolved ts to 150 and the checkpoint to 120.
func fill(t *testing.T) (*redokit.Log, *meta.Coordinator) {
	t.Helper()
	ctx := context.Background()
	b := mem.New()
	t.Cleanup(func() { b.Close() })
	log, err := redokit.Open(ctx, b, "cf")
	if err != nil {
		t.Fatal(err)
	}
	coord, err := log.OpenCoordinator(ctx, &meta.CoordinatorOptions{StartTs: 100})
	if err != nil {
		t.Fatal(err)
	}
	const span redokit.SpanID = 7
	must(t, coord.AddWriter(ctx, "w"))
	must(t, coord.AddSpan(ctx, span, 100))
	w, err := log.OpenWriter(ctx, "w", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(ctx) })
	must(t, w.AddSpan(span, 100))
	for ts := uint64(110); ts <= 200; ts += 10 {
		must(t, w.Write(ctx, span, row(ts, int64(ts))))
	}
	must(t, w.AdvanceResolved(span, 150))
	if _, err := w.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	if m, err := coord.Tick(ctx); err != nil || m.ResolvedTs != 150 {
		t.Fatalf("tick: resolved %d, %v; want 150", m.ResolvedTs, err)
	}
	must(t, coord.SetCheckpoint(ctx, 120))
	return log, coord
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func readTs(t *testing.T, log *redokit.Log, o *redokit.ReadOptions) ([]uint64, error) {
	t.Helper()
	ctx := context.Background()
	r, err := log.OpenReader(ctx, o)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var got []uint64
	for {
		ev, err := r.Next(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return got, nil
			}
			return got, err
		}
		got = append(got, ev.CommitTs())
	}
}

// TestReadRangeRules: a Log reads (checkpoint, global resolved] by default
// and refuses, naming the bound and the meta object, a range the log does
// not guarantee unless asked.
func TestReadRangeRules(t *testing.T) {
	log, _ := fill(t)
	got, err := readTs(t, log, nil)
	if err != nil || len(got) != 3 || got[0] != 130 || got[2] != 150 {
		t.Fatalf("default range read %v, %v; want 130, 140, 150", got, err)
	}
	_, err = readTs(t, log, &redokit.ReadOptions{End: 160})
	if !errors.Is(err, redokit.ErrAboveResolved) || !strings.Contains(err.Error(), "end ts 160") || !strings.Contains(err.Error(), log.MetaKey()) {
		t.Fatalf("end above resolved: %v, want ErrAboveResolved naming end ts 160 and %s", err, log.MetaKey())
	}
	_, err = readTs(t, log, &redokit.ReadOptions{Start: 110})
	if !errors.Is(err, redokit.ErrBelowCheckpoint) || !strings.Contains(err.Error(), "start ts 110") {
		t.Fatalf("start below checkpoint: %v, want ErrBelowCheckpoint naming start ts 110", err)
	}
	got, err = readTs(t, log, &redokit.ReadOptions{Start: 110, AllowBelowCheckpoint: true})
	if err != nil || len(got) != 4 || got[0] != 120 {
		t.Fatalf("start below checkpoint, allowed: %v, %v; want 120…150", got, err)
	}
	_, err = readTs(t, log, &redokit.ReadOptions{Start: 150})
	if !errors.Is(err, redokit.ErrEmptyRange) {
		t.Fatalf("start at the end: %v, want ErrEmptyRange", err)
	}
}

// TestReaderKeepsStartWithDefaultEnd: reader.Options with EndTs 0 takes the
// end from the meta object and keeps the StartTs it was given.
func TestReaderKeepsStartWithDefaultEnd(t *testing.T) {
	log, _ := fill(t)
	ctx := context.Background()
	r, err := reader.Open(ctx, log.Bucket(), &reader.Options{LogID: log.ID(), StartTs: 135})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []uint64
	for {
		ev, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.CommitTs())
	}
	if len(got) != 2 || got[0] != 140 {
		t.Fatalf("read %v from start 135 to the resolved ts, want 140, 150", got)
	}
}

// TestOpenFinishesAnInterruptedRemoval: a removal that stopped half way
// leaves its marker; meta refuses to open the log, Log.OpenCoordinator finishes the
// removal first.
func TestOpenFinishesAnInterruptedRemoval(t *testing.T) {
	ctx := context.Background()
	log, _ := fill(t)
	b := log.Bucket()
	if _, err := b.Put(ctx, "cf/~deleting", []byte("deleting\n"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := meta.OpenCoordinator(ctx, b, "cf", nil); !errors.Is(err, meta.ErrDeleting) || !strings.Contains(err.Error(), "cf/~deleting") {
		t.Fatalf("coordinator on a log being deleted: %v, want meta.ErrDeleting naming the marker", err)
	}
	if _, err := meta.AcquireWriter(ctx, b, "cf", "w2", nil); !errors.Is(err, meta.ErrDeleting) {
		t.Fatalf("writer on a log being deleted: %v, want meta.ErrDeleting", err)
	}
	log2, err := redokit.Open(ctx, b, "cf")
	if err != nil {
		t.Fatal(err)
	}
	// Reading changes nothing; opening a coordinator finishes the removal
	// and creates the log anew.
	if n, _, err := log2.Size(ctx); err != nil || n < 3 {
		t.Fatalf("%d objects, %v after Open: reading must not delete", n, err)
	}
	if _, err := log2.OpenCoordinator(ctx, &meta.CoordinatorOptions{StartTs: 500}); err != nil {
		t.Fatal(err)
	}
	if m, err := log2.Meta(ctx); err != nil || m.CheckpointTs != 500 {
		t.Fatalf("meta of the new log: %+v, %v; want checkpoint 500", m, err)
	}
	for s, err := range log2.Segments(ctx) {
		t.Fatalf("segment %s (%v) left after the removal", s.Key, err)
	}
}

// TestCollectThroughTheLog: GC reads the checkpoint itself.
func TestCollectThroughTheLog(t *testing.T) {
	ctx := context.Background()
	log, _ := fill(t)
	res, err := log.Collect(ctx, &gc.Options{DryRun: true})
	if err != nil || res.Checkpoint != 120 {
		t.Fatalf("collect: %+v, %v; want checkpoint 120", res, err)
	}
	if _, err := log.Collect(ctx, &gc.Options{Below: 130}); !errors.Is(err, gc.ErrAboveCheckpoint) {
		t.Fatalf("collect above the checkpoint: %v, want gc.ErrAboveCheckpoint", err)
	}
}

// TestStatus pairs the meta object's writers with their state objects, and
// names a log without a meta object.
func TestStatus(t *testing.T) {
	ctx := context.Background()
	log, coord := fill(t)
	must(t, coord.AddWriter(ctx, "never-opened"))
	st, err := log.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Meta.ResolvedTs != 150 || len(st.Writers) != 2 {
		t.Fatalf("status %+v: want resolved 150 and two writers", st)
	}
	w, never := st.Writers[1], st.Writers[0]
	if w.ID != "w" || !w.Live || w.State == nil || w.State.Epoch != 1 || w.State.FlushedTs != 150 {
		t.Errorf("writer w: %+v", w)
	}
	if never.ID != "never-opened" || !never.Live || never.State != nil {
		t.Errorf("a live writer without a state: %+v", never)
	}
	other, err := redokit.Open(ctx, log.Bucket(), "other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Status(ctx); !errors.Is(err, redokit.ErrNoLog) || !strings.Contains(err.Error(), "other/meta") {
		t.Fatalf("status of a log without a meta object: %v, want ErrNoLog naming other/meta", err)
	}
}
