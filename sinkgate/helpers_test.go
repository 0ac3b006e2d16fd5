package sinkgate_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/sinkgate"
	"github.com/redokit/redokit/testkit/testenv"
	"github.com/redokit/redokit/writer"
)

const testLog = "gate-log"

// The redo writer is what a gate drives in production; sinkgate itself does
// not import package writer.
var _ sinkgate.Redo = (*writer.Writer)(nil)

// fakeG is a global resolved ts the test moves by hand. Every WaitResolved
// call is visible, so a test can wait until the release loop has done all it
// can at the current G and is waiting for more: a sync point without sleeps.
type fakeG struct {
	mu      sync.Mutex
	g       uint64
	changed chan struct{}
	waiting map[uint64]int // WaitResolved calls blocked now, by their ts
	cond    *sync.Cond
}

func newFakeG(g uint64) *fakeG {
	f := &fakeG{g: g, changed: make(chan struct{}), waiting: map[uint64]int{}}
	f.cond = sync.NewCond(&f.mu)
	return f
}

func (f *fakeG) Set(g uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.g = g
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeG) get() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.g
}

func (f *fakeG) WaitResolved(ctx context.Context, ts uint64) (uint64, error) {
	f.mu.Lock()
	f.waiting[ts]++
	f.cond.Broadcast()
	defer func() {
		f.mu.Lock()
		f.waiting[ts]--
		f.mu.Unlock()
	}()
	for {
		if f.g >= ts {
			g := f.g
			f.mu.Unlock()
			return g, nil
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		f.mu.Lock()
	}
}

// awaitWaiting blocks until a WaitResolved(ts) call is blocked: the release
// loop released everything up to ts-1 and reported the checkpoint.
func (f *fakeG) awaitWaiting(t *testing.T, ts uint64) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		f.mu.Lock()
		for f.waiting[ts] == 0 {
			f.cond.Wait()
		}
		f.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the release loop never waited for G ≥ %d", ts)
	}
}

// recorder is a downstream that keeps what it was given.
type recorder struct {
	mu      sync.Mutex
	events  []codec.Event
	batches [][]uint64 // commit ts of each batch
	check   func(ev *codec.Event) error
	fail    error
}

func (r *recorder) Apply(ctx context.Context, evs []codec.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	var tss []uint64
	for i := range evs {
		if r.check != nil {
			if err := r.check(&evs[i]); err != nil {
				return err
			}
		}
		r.events = append(r.events, *evs[i].Clone())
		tss = append(tss, evs[i].CommitTs())
	}
	r.batches = append(r.batches, tss)
	return nil
}

func (r *recorder) got() []codec.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// cps records checkpoint reports.
type cps struct {
	mu  sync.Mutex
	tss []uint64
}

func (c *cps) SetCheckpoint(ctx context.Context, ts uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tss = append(c.tss, ts)
	return nil
}

func (c *cps) last() (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.tss) == 0 {
		return 0, false
	}
	return c.tss[len(c.tss)-1], true
}

// expect fails the test unless the last checkpoint reported is want; when
// says at what point, for the message.
func (c *cps) expect(t *testing.T, want uint64, when string) {
	t.Helper()
	if ts, _ := c.last(); ts != want {
		t.Fatalf("checkpoint %d %s, want %d", ts, when, want)
	}
}

func row(span meta.SpanID, ts uint64, id int64) codec.Event {
	return codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{
		StartTs: ts - 1, CommitTs: ts,
		Table: codec.TableName{Schema: "db", Name: fmt.Sprintf("t%d", span), PhysicalID: int64(span)},
		Columns: []codec.Column{
			{Name: "id", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey, Value: codec.IntValue(id)},
			{Name: "v", Type: codec.TypeVarchar, Value: codec.StringValue(fmt.Sprintf("v%d@%d", id, ts))},
		},
	}}
}

func ddl(span meta.SpanID, ts uint64, q string) codec.Event {
	return codec.Event{Kind: codec.DDLEvent, DDL: codec.DDL{
		StartTs: ts - 1, CommitTs: ts, Type: codec.ActionAddColumn, Query: q,
		Table: codec.TableName{Schema: "db", Name: fmt.Sprintf("t%d", span), PhysicalID: int64(span)},
	}}
}

// id is a test's name for an event.
func id(ev *codec.Event) string {
	if ev.IsDDL() {
		return fmt.Sprintf("ddl@%d", ev.CommitTs())
	}
	return fmt.Sprintf("%s/%d@%d", ev.Row.Table.Name, ev.Row.Columns[0].Value.Int(), ev.CommitTs())
}

func ids(evs []codec.Event) []string {
	out := make([]string, len(evs))
	for i := range evs {
		out[i] = id(&evs[i])
	}
	return out
}

func openWriter(t *testing.T, b *blob.Bucket, writerID string) *writer.Writer {
	t.Helper()
	w, err := writer.Open(context.Background(), b, &writer.Options{
		LogID: testLog, WriterID: writerID, FlushInterval: time.Hour,
		RetryBackoff: time.Millisecond, RetryMaxBackoff: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(context.Background()) })
	return w
}

// newGate is a gate over writer "w1" on a fresh memory bucket, a fake G at
// g0, the downstream down and the checkpointer cp (nil: none).
func newGate(t *testing.T, g0 uint64, cp sinkgate.Checkpointer, down sinkgate.Downstream, opts *sinkgate.Options) (*sinkgate.Gate, *fakeG) {
	G := newFakeG(g0)
	return sinkgate.New(openWriter(t, memBucket(t), "w1"), G, cp, down, opts), G
}

func memBucket(t *testing.T) *blob.Bucket {
	b := mem.New()
	t.Cleanup(func() { b.Close() })
	return b
}

// runner is a release loop running in the background.
type runner struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// runGate runs g's release loop until the test ends.
func runGate(t *testing.T, g interface{ Run(context.Context) error }) *runner {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &runner{cancel: cancel, done: make(chan struct{})}
	go func() {
		r.err = g.Run(ctx)
		close(r.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// wait returns Run's result once it returned.
func (r *runner) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// await blocks until n events reached the downstream.
func (r *recorder) await(t *testing.T, n int) []codec.Event {
	t.Helper()
	testenv.WaitFor(t, fmt.Sprintf("%d events downstream", n), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.events) >= n
	})
	return r.got()
}
