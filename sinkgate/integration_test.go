package sinkgate_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/sinkgate"
	"github.com/redokit/redokit/writer"
)

// TestPersistedWatermark runs two gates on one log with the real coordinator
// and watcher, and checks at every downstream write that the event is at or
// below the global resolved ts the meta object holds right then: the rule
// the package exists for. At the end every event is downstream once per
// span order, and the log's checkpoint is the final applied ts.
func TestPersistedWatermark(t *testing.T) {
	for _, v := range persistedRun(t, func(w *meta.Watcher) sinkgate.Resolved { return w }) {
		t.Error(v)
	}
}

// eagerG is a broken Resolved: it says G covers whatever is asked.
type eagerG struct{}

func (eagerG) WaitResolved(ctx context.Context, ts uint64) (uint64, error) { return ts + 1000, nil }

// TestPersistedWatermarkCatchesEagerGate: the check above fails when the
// gate's idea of G runs ahead of the meta object.
func TestPersistedWatermarkCatchesEagerGate(t *testing.T) {
	if v := persistedRun(t, func(*meta.Watcher) sinkgate.Resolved { return eagerG{} }); len(v) == 0 {
		t.Fatal("a gate releasing above the persisted resolved ts went unnoticed")
	}
}

// persistedRun is the workload of TestPersistedWatermark over the Resolved
// that res returns, and the violations it saw. With a broken Resolved only
// the violations are meaningful.
func persistedRun(t *testing.T, res func(*meta.Watcher) sinkgate.Resolved) []string {
	broken := false
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := memBucket(t)
	coord, err := meta.OpenCoordinator(ctx, b, testLog, &meta.CoordinatorOptions{StartTs: 1})
	must(t, err)
	must(t, coord.AddWriter(ctx, "a"))
	must(t, coord.AddWriter(ctx, "b"))
	coordDone := make(chan struct{})
	go func() {
		defer close(coordDone)
		coord.Run(ctx, time.Millisecond)
	}()
	defer func() { cancel(); <-coordDone }()

	var mu sync.Mutex
	var violations []string
	got := map[meta.SpanID][]uint64{}
	down := func(name string) sinkgate.Downstream {
		return sinkgate.DownstreamFunc(func(ctx context.Context, evs []codec.Event) error {
			m, _, err := meta.ReadMeta(ctx, b, testLog)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			for i := range evs {
				ts := evs[i].CommitTs()
				if ts > m.ResolvedTs {
					violations = append(violations, fmt.Sprintf("%s applied ts %d above the persisted resolved ts %d", name, ts, m.ResolvedTs))
				}
				span := meta.SpanID(evs[i].Row.Table.PhysicalID)
				got[span] = append(got[span], ts)
			}
			return nil
		})
	}
	cks := sinkgate.NewCheckpoints(coord)
	watcher := meta.NewWatcher(b, testLog, time.Millisecond)
	resolved := res(watcher)
	_, broken = resolved.(eagerG)
	open := func(id string) *sinkgate.Gate {
		w, err := writer.Open(ctx, b, &writer.Options{LogID: testLog, WriterID: id, FlushInterval: 2 * time.Millisecond})
		must(t, err)
		return sinkgate.New(w, resolved, cks.Join(id, 1), down(id), &sinkgate.Options{MaxHeldBytes: 4 << 10})
	}
	ga, gb := open("a"), open("b")
	owner := map[meta.SpanID]*sinkgate.Gate{1: ga, 2: ga, 3: gb}
	for s, g := range owner {
		must(t, g.AddSpan(ctx, s, 1))
	}
	var runs sync.WaitGroup
	for _, g := range []*sinkgate.Gate{ga, gb} {
		runs.Add(1)
		go func() {
			defer runs.Done()
			if err := g.Run(ctx); err != nil {
				t.Errorf("Run: %v", err)
			}
		}()
	}

	r := rand.New(rand.NewPCG(1, 2))
	want := map[meta.SpanID][]uint64{}
	for ts := uint64(2); ts < 600; ts++ {
		s := meta.SpanID(1 + r.IntN(3))
		must(t, owner[s].Write(ctx, s, row(s, ts, int64(ts))))
		want[s] = append(want[s], ts)
		if ts%16 == 0 {
			for s, g := range owner {
				must(t, g.AdvanceResolved(s, ts))
			}
		}
	}
	for s, g := range owner {
		must(t, g.AdvanceResolved(s, 600))
	}
	for _, g := range []*sinkgate.Gate{ga, gb} {
		must(t, g.Close(ctx))
	}
	runs.Wait()

	mu.Lock()
	defer mu.Unlock()
	if broken {
		return violations
	}
	for s := range want {
		if fmt.Sprint(got[s]) != fmt.Sprint(want[s]) {
			t.Errorf("span %d downstream: %v, want %v", s, got[s], want[s])
		}
	}
	m, _, err := meta.ReadMeta(ctx, b, testLog)
	must(t, err)
	if m.CheckpointTs != 600 || m.ResolvedTs != 600 {
		t.Errorf("meta: checkpoint %d, resolved %d; want 600, 600", m.CheckpointTs, m.ResolvedTs)
	}
	for _, g := range []*sinkgate.Gate{ga, gb} {
		if st := g.Stats(); st.HeldBytes != 0 || st.Dropped != 0 || st.AppliedTs != 600 {
			t.Errorf("gate stats %+v", st)
		}
	}
	return violations
}
