package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/codec/codectest"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/sinkgate"
)

// TestStartGateSpansFirst: a capture's gate reports no checkpoint above the
// ts its spans restart at. A gate with no spans reports the global resolved
// ts G as its applied ts; a restarted capture that ran the release loop
// before adding its spans overwrote its dead predecessor's applied ts in the
// writer's checkpoint file with G, the coordinator folded it, and the
// recovery from that checkpoint skipped what the predecessor logged but its
// downstream, down at the time, never got (the drill: rows of the restarted
// writer's spans and its ALTER TABLE missing downstream, about one run in
// ten). The writer here takes its time adding a span, so that a loop started
// first always reports before the spans are in.
func TestStartGateSpansFirst(t *testing.T) {
	const G, from = 1000, 500
	cp := &reports{}
	w := &slowRedo{reported: cp.ch}
	g := sinkgate.New(w, resolvedAt(G), cp, sinkgate.DownstreamFunc(func(context.Context, []codec.Event) error { return nil }), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done, err := startGate(ctx, g, []meta.SpanID{1, 3}, from, time.Millisecond, slog.New(slog.DiscardHandler), "w")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := cp.all()
		for _, ts := range got {
			if ts > from {
				t.Fatalf("the gate reported checkpoint %d (all: %v) for spans restarting at %d", ts, got, from)
			}
		}
		if len(got) > 0 && got[len(got)-1] == from {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gate reported %v, never %d", got, from)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWaitMeta: a capture that starts before the coordinator created the
// log's meta object waits for it (the drill's first capture failed with
// "no such log" now and then).
func TestWaitMeta(t *testing.T) {
	ctx := context.Background()
	cfg := &config{Log: filepath.Join(t.TempDir(), "redo"), LogID: "wait"}
	lg, closeLog, err := openLog(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeLog()
	type result struct {
		m   *meta.Meta
		err error
	}
	got := make(chan result, 1)
	go func() {
		m, err := waitMeta(ctx, lg, time.Millisecond, slog.New(slog.DiscardHandler))
		got <- result{m, err}
	}()
	select {
	case r := <-got:
		t.Fatalf("waitMeta returned before the log existed: %v, %v", r.m, r.err)
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := lg.OpenCoordinator(ctx, &meta.CoordinatorOptions{StartTs: 7}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.err != nil || r.m.CheckpointTs != 7 {
			t.Fatalf("waitMeta: %+v, %v; want the log's meta object at checkpoint 7", r.m, r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("waitMeta did not return once the log existed")
	}
}

// resolvedAt is a global resolved ts that stays at G.
type resolvedAt uint64

func (g resolvedAt) WaitResolved(ctx context.Context, ts uint64) (uint64, error) {
	if ts <= uint64(g) {
		return uint64(g), nil
	}
	<-ctx.Done()
	return 0, ctx.Err()
}

// reports records checkpoint reports; reported is closed at the first.
type reports struct {
	mu       sync.Mutex
	tss      []uint64
	once     sync.Once
	reported chan struct{}
}

func (r *reports) SetCheckpoint(ctx context.Context, ts uint64) error {
	r.mu.Lock()
	r.tss = append(r.tss, ts)
	r.mu.Unlock()
	r.once.Do(func() { close(r.ch()) })
	return nil
}

func (r *reports) ch() chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reported == nil {
		r.reported = make(chan struct{})
	}
	return r.reported
}

func (r *reports) all() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]uint64(nil), r.tss...)
}

// slowRedo is a redo writer whose AddSpan returns once a checkpoint was
// reported, or after 100 ms.
type slowRedo struct {
	reported func() chan struct{}
}

func (w *slowRedo) AddSpan(meta.SpanID, uint64) error {
	select {
	case <-w.reported():
	case <-time.After(100 * time.Millisecond):
	}
	return nil
}

func (w *slowRedo) WriteEncoded(context.Context, meta.SpanID, ...[]byte) error { return nil }
func (w *slowRedo) RemoveSpan(meta.SpanID) error                               { return nil }
func (w *slowRedo) AdvanceResolved(meta.SpanID, uint64) error                  { return nil }
func (w *slowRedo) FlushedTs() uint64                                          { return 0 }
func (w *slowRedo) Close(context.Context) error                                { return nil }

// TestOpenReplayAfterCheckpointMoved: a restarted capture reads the
// checkpoint, and the coordinator moves it up (folding what the captures'
// downstreams applied) before the capture opens its replay. CI's
// TestUntranslatedDDL failed on it once ("replay (151775693, 151775695]
// from the log: read range below the checkpoint"); the replay now starts at
// the new checkpoint, which every downstream holds, or has nothing to do.
func TestOpenReplayAfterCheckpointMoved(t *testing.T) {
	ctx := context.Background()
	cfg := &config{Log: filepath.Join(t.TempDir(), "redo"), LogID: "moved"}
	lg, closeLog, err := openLog(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeLog()
	coord, err := lg.OpenCoordinator(ctx, &meta.CoordinatorOptions{StartTs: 100})
	if err != nil {
		t.Fatal(err)
	}
	const span meta.SpanID = 1
	if err := coord.AddWriter(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	if err := coord.AddSpan(ctx, span, 100); err != nil {
		t.Fatal(err)
	}
	w, err := lg.OpenWriter(ctx, "w", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	if err := w.AddSpan(span, 100); err != nil {
		t.Fatal(err)
	}
	for ts := uint64(110); ts <= 200; ts += 10 {
		ev := codectest.Row(ts, codectest.Table("s", "t", 1), codectest.Key("id", int64(ts)))
		if err := w.Write(ctx, span, ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AdvanceResolved(span, 200); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := coord.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	from := uint64(100) // what the capture read
	if err := coord.SetCheckpoint(ctx, 140); err != nil {
		t.Fatal(err)
	}
	r, start, err := openReplay(ctx, lg, from, 180)
	if err != nil {
		t.Fatalf("replay (%d, 180] after the checkpoint moved to 140: %v", from, err)
	}
	var got []uint64
	for ev, err := range r.CodecEvents(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.CommitTs())
	}
	r.Close()
	if want := []uint64{150, 160, 170, 180}; start != 140 || !slices.Equal(got, want) {
		t.Fatalf("replay started at %d and read %v; want 140 and %v", start, got, want)
	}
	if err := coord.SetCheckpoint(ctx, 190); err != nil {
		t.Fatal(err)
	}
	if r, start, err := openReplay(ctx, lg, from, 180); r != nil || err != nil || start != 190 {
		t.Fatalf("replay (%d, 180] after the checkpoint moved to 190: reader %v, start %d, %v; want none, 190", from, r, start, err)
	}
}
