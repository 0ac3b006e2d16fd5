package sinkgate_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/sinkgate"
	"github.com/redokit/redokit/testkit/testenv"
	"github.com/redokit/redokit/writer"
)

// The writer a gate evicts through (it names its segments and flushes), and
// the log handle it evicts to.
var (
	_ sinkgate.LogWriter = (*writer.Writer)(nil)
	_ sinkgate.Log       = (*redokit.Log)(nil)
)

// rig is a gate over the real writer, coordinator and watcher on a memory
// bucket: G is the persisted global resolved ts, and evicted events are
// read back from real segments.
type rig struct {
	t     *testing.T
	b     *blob.Bucket
	coord *meta.Coordinator
	w     *writer.Writer
	g     *sinkgate.Gate
	rec   *recorder
	run   *runner
	limit int64

	mu      sync.Mutex
	written []codec.Event // every event written, in the order the Writes ran
	maxHeld int64
}

// newRig starts a rig whose gate holds at most limit bytes and evicts to the
// log when withLog is set.
func newRig(t *testing.T, limit int64, withLog bool) *rig {
	t.Helper()
	r := newRigOpts(t, limit, withLog, 2*time.Millisecond)
	r.start()
	return r
}

// start runs the gate's release loop.
func (r *rig) start() { r.run = runGate(r.t, r.g) }

// newRigOpts is newRig with the writer's flush interval, and the release
// loop not started.
func newRigOpts(t *testing.T, limit int64, withLog bool, flushInterval time.Duration) *rig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := memBucket(t)
	coord, err := meta.OpenCoordinator(ctx, b, testLog, &meta.CoordinatorOptions{StartTs: 1})
	must(t, err)
	must(t, coord.AddWriter(ctx, "w1"))
	coordDone := make(chan struct{})
	go func() {
		defer close(coordDone)
		coord.Run(ctx, time.Millisecond)
	}()
	w, err := writer.Open(ctx, b, &writer.Options{LogID: testLog, WriterID: "w1", FlushInterval: flushInterval})
	must(t, err)
	r := &rig{t: t, b: b, coord: coord, w: w, rec: &recorder{}, limit: limit}
	opts := &sinkgate.Options{MaxHeldBytes: limit, MaxBatch: 64, RetryBackoff: 5 * time.Millisecond}
	if withLog {
		log, err := redokit.Open(ctx, b, testLog)
		must(t, err)
		opts.Log = log
	}
	r.g = sinkgate.New(w, meta.NewWatcher(b, testLog, time.Millisecond), coord, r.rec, opts)
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		r.g.Close(cctx)
		cancel()
		<-coordDone
	})
	return r
}

// write writes events of span through the gate, failing the test when the
// Write does not return within the deadline (the deadlock the gate must not
// have), and records the high-water mark of held bytes.
func (r *rig) write(span meta.SpanID, evs ...codec.Event) error {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := r.g.Write(ctx, span, evs...)
	if errors.Is(err, context.DeadlineExceeded) {
		r.t.Fatalf("Write of %d events of span %d at ts %d blocked past its deadline (stats %+v)", len(evs), span, evs[0].CommitTs(), r.g.Stats())
	}
	if err == nil {
		r.mu.Lock()
		for i := range evs {
			r.written = append(r.written, *evs[i].Clone())
		}
		r.mu.Unlock()
	}
	r.noteHeld()
	return err
}

func (r *rig) noteHeld() {
	st := r.g.Stats()
	r.mu.Lock()
	r.maxHeld = max(r.maxHeld, st.HeldBytes)
	r.mu.Unlock()
}

func (r *rig) resolve(ts uint64, spans ...meta.SpanID) {
	r.t.Helper()
	for _, s := range spans {
		must(r.t, r.g.AdvanceResolved(s, ts))
	}
}

// expected is what a gate that holds everything delivers: every event
// written, in commit-ts order, rows before DDLs at one ts, then in the order
// the Writes ran (this test's Writes never run at once).
func (r *rig) expected() []string {
	r.mu.Lock()
	evs := slices.Clone(r.written)
	r.mu.Unlock()
	slices.SortStableFunc(evs, func(a, b codec.Event) int {
		return cmp.Or(cmp.Compare(a.CommitTs(), b.CommitTs()), cmp.Compare(btoi(a.IsDDL()), btoi(b.IsDDL())))
	})
	return ids(evs)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// check waits until the downstream holds as many events as were written and
// compares them, in order, with what a gate that holds everything would
// have delivered: nothing lost, nothing twice, each in its place.
func (r *rig) check() {
	r.t.Helper()
	want := r.expected()
	r.t.Cleanup(func() {
		if r.t.Failed() {
			runErr := "running"
			select {
			case <-r.run.done:
				runErr = fmt.Sprint("returned ", r.run.err)
			default:
			}
			m, _, _ := meta.ReadMeta(context.Background(), r.b, testLog)
			r.t.Logf("stats at the failure: %+v; downstream got %d of %d; Run %s; writer flushed %d resolved %d err %v stats %+v; meta %+v", r.g.Stats(), len(r.rec.got()), len(want), runErr, r.w.FlushedTs(), r.w.ResolvedTs(), r.w.Err(), r.w.Stats(), m)
		}
	})
	got := ids(r.rec.await(r.t, len(want)))
	if !slices.Equal(got, want) {
		r.t.Fatalf("downstream differs from what holding everything gives (%d events, want %d):\n%s", len(got), len(want), firstDiff(got, want))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.maxHeld > r.limit {
		r.t.Errorf("held %d bytes, above MaxHeldBytes %d", r.maxHeld, r.limit)
	}
}

// settled waits until the gate has accounted for everything it delivered
// (the downstream sees a batch before the gate counts it) and returns its
// stats: nothing held, nothing left in the log.
func (r *rig) settled() sinkgate.Stats {
	r.t.Helper()
	var st sinkgate.Stats
	testenv.WaitFor(r.t, "the gate to settle", func() bool {
		st = r.g.Stats()
		return st.InLog == 0 && st.HeldBytes == 0 && st.HeldEvents == 0 && st.Released+st.Dropped == st.Written
	})
	return st
}

func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			lo := max(i-3, 0)
			return fmt.Sprintf("first difference at %d: got %v, want %v", i, got[lo:min(i+4, len(got))], want[lo:min(i+4, len(want))])
		}
	}
	return fmt.Sprintf("one is a prefix of the other: got %d, want %d", len(got), len(want))
}

// bigRow is a row of about 300 encoded bytes.
func bigRow(span meta.SpanID, ts uint64, id int64) codec.Event {
	ev := row(span, ts, id)
	ev.Row.Columns = append(ev.Row.Columns, codec.Column{Name: "pad", Type: codec.TypeVarchar, Value: codec.StringValue(strings.Repeat("x", 240))})
	return ev
}

func encodedLen(evs ...codec.Event) int64 {
	var n int64
	for i := range evs {
		n += int64(len(codec.AppendEvent(nil, &evs[i])))
	}
	return n
}

// rows returns n bigRows of span at ts, ids from *next on.
func rows(span meta.SpanID, ts uint64, next *int64, n int) []codec.Event {
	evs := make([]codec.Event, n)
	for i := range evs {
		*next++
		evs[i] = bigRow(span, ts, *next)
	}
	return evs
}

// TestEvictOversizedTransaction (issue 26): a transaction of four times
// MaxHeldBytes at one commit ts, written in 64-row Writes before its span
// resolves, completes: the gate evicts it to the log and reads it back once
// G covers it. Another span's events at the same ts, interleaved with it,
// and a DDL there, come exactly where holding everything would have put
// them, and so do the events around it.
func TestEvictOversizedTransaction(t *testing.T) {
	const limit = 32 << 10
	r := newRig(t, limit, true)
	ctx := context.Background()
	must(t, r.g.AddSpan(ctx, 1, 100))
	must(t, r.g.AddSpan(ctx, 2, 100))
	var id int64
	must(t, r.write(2, rows(2, 150, &id, 3)...))
	must(t, r.write(2, ddl(2, 200, "alter table t2 add column c int")))
	var big int64
	for k := 0; big < 4*limit; k++ {
		evs := rows(1, 200, &id, 64)
		big += encodedLen(evs...)
		must(t, r.write(1, evs...))
		if k%3 == 1 {
			must(t, r.write(2, rows(2, 200, &id, 2)...))
		}
	}
	must(t, r.write(2, rows(2, 250, &id, 3)...))
	if st := r.g.Stats(); st.Evictions == 0 || st.InLog == 0 {
		t.Fatalf("a transaction of %d bytes through a gate of %d evicted nothing: %+v", big, limit, st)
	}
	r.resolve(300, 1, 2)
	r.check()
	st := r.settled()
	if st.ReadBack == 0 || st.Dropped != 0 {
		t.Fatalf("after the release: %+v", st)
	}
	t.Logf("transaction %d bytes, limit %d, held at most %d; %+v", big, limit, r.maxHeld, st)
}

// TestEvictStalledSpan (issue 26): a span whose resolved ts is stuck holds G
// back; the other spans fill the gate with events G cannot cover; the
// stalled span's next transaction is still accepted (the gate evicts the
// biggest span's range to the log), and once the span resolves, everything
// reaches the downstream in the order holding everything would have given.
func TestEvictStalledSpan(t *testing.T) {
	const limit = 16 << 10
	r := newRig(t, limit, true)
	ctx := context.Background()
	for s := meta.SpanID(1); s <= 3; s++ {
		must(t, r.g.AddSpan(ctx, s, 10))
	}
	var id int64
	// The stalled span's first transaction, not resolved.
	must(t, r.write(1, rows(1, 20, &id, 5)...))
	var filled int64
	for ts := uint64(30); filled < 3*limit; ts++ {
		evs := rows(2, ts, &id, 8)
		must(t, r.write(2, evs...))
		filled += encodedLen(evs...)
		if ts%5 == 0 {
			// A DDL of span 3, then a row of span 2 at its ts: the row
			// goes first.
			must(t, r.write(3, ddl(3, ts, fmt.Sprintf("alter table t3 comment '%d'", ts))))
			must(t, r.write(2, rows(2, ts, &id, 1)...))
		}
		evs = rows(3, ts, &id, 4)
		must(t, r.write(3, evs...))
		filled += encodedLen(evs...)
		r.resolve(ts, 2, 3)
	}
	if st := r.g.Stats(); st.Evictions == 0 {
		t.Fatalf("spans filled %d bytes of a %d-byte gate behind a stalled span, and nothing was evicted: %+v", filled, limit, st)
	}
	if got := r.rec.got(); len(got) != 0 {
		t.Fatalf("released %d events while the stalled span holds G back", len(got))
	}
	// The stalled span's next transaction: the Write that deadlocked.
	must(t, r.write(1, rows(1, 25, &id, 40)...))
	must(t, r.write(1, rows(1, 26, &id, 3)...))
	r.resolve(1000, 1, 2, 3)
	r.check()
	r.settled()
}

// TestNoLogOversized (issue 26): without a log to evict to, a transaction
// larger than MaxHeldBytes returns ErrNoRoom, naming the span and the bytes,
// instead of blocking forever; so does a stalled span's next transaction
// once another span filled the gate.
func TestNoLogOversized(t *testing.T) {
	const limit = 32 << 10
	t.Run("transaction", func(t *testing.T) {
		g, _ := newGate(t, 0, nil, &recorder{}, &sinkgate.Options{MaxHeldBytes: limit})
		runGate(t, g)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		must(t, g.AddSpan(ctx, 1, 100))
		var id int64
		var err error
		for k := 0; k < 4*limit/(64*300)+2 && err == nil; k++ {
			err = g.Write(ctx, 1, rows(1, 200, &id, 64)...)
		}
		checkNoRoom(t, err, 1)
	})
	t.Run("stalled span", func(t *testing.T) {
		g, _ := newGate(t, 0, nil, &recorder{}, &sinkgate.Options{MaxHeldBytes: limit})
		runGate(t, g)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		must(t, g.AddSpan(ctx, 1, 10))
		must(t, g.AddSpan(ctx, 2, 10))
		var id int64
		must(t, g.Write(ctx, 1, rows(1, 20, &id, 2)...)) // not resolved: G stays at or below 10
		txn := encodedLen(rows(2, 30, new(int64), 10)...)
		for ts := uint64(30); g.Stats().HeldBytes+txn <= limit; ts++ {
			must(t, g.Write(ctx, 2, rows(2, ts, &id, 10)...))
			must(t, g.AdvanceResolved(2, ts))
		}
		checkNoRoom(t, g.Write(ctx, 1, rows(1, 25, &id, 64)...), 1)
	})
}

func checkNoRoom(t *testing.T, err error, span meta.SpanID) {
	t.Helper()
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the Write blocked until its deadline: %v", err)
	}
	if !errors.Is(err, sinkgate.ErrNoRoom) {
		t.Fatalf("Write: %v, want ErrNoRoom", err)
	}
	var nr *sinkgate.NoRoomError
	if !errors.As(err, &nr) || nr.Span != span || nr.Bytes <= 0 || nr.Stuck <= 0 || nr.Limit <= 0 {
		t.Fatalf("Write: %#v, want a *NoRoomError naming span %d and the bytes", err, span)
	}
	if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("span %d", span)) || !strings.Contains(msg, fmt.Sprint(nr.Bytes)) {
		t.Fatalf("the error does not name the span and the bytes: %v", err)
	}
	t.Log(err)
}

// TestReadBackFailsLoudly: a read-back the log cannot prove complete (its
// segments were deleted under it) makes Run fail with the reader's error,
// and nothing of the evicted range reaches the downstream: no event is
// skipped.
func TestReadBackFailsLoudly(t *testing.T) {
	const limit = 16 << 10
	r := newRigOpts(t, limit, true, 2*time.Millisecond) // the release loop starts below
	ctx := context.Background()
	must(t, r.g.AddSpan(ctx, 1, 100))
	var id int64
	for big := int64(0); big < 2*limit; {
		evs := rows(1, 200, &id, 64)
		big += encodedLen(evs...)
		must(t, r.write(1, evs...))
	}
	if st := r.g.Stats(); st.Evictions == 0 {
		t.Fatalf("nothing evicted: %+v", st)
	}
	// The transaction is durable and covered by G once the span resolves
	// past it: delete its segments then, before the gate reads them back.
	r.resolve(300, 1)
	publishAndWait(t, r, 300)
	for obj, err := range r.b.List(ctx, testLog+"/seg/") {
		must(t, err)
		must(t, r.b.Delete(ctx, obj.Key))
	}
	r.start()
	err := r.run.wait(t)
	if err == nil || !strings.Contains(err.Error(), "read back") {
		t.Fatalf("Run: %v, want a read-back error", err)
	}
	if !errors.Is(err, reader.ErrIncomplete) {
		t.Fatalf("Run: %v, want reader.ErrIncomplete", err)
	}
	t.Log(err)
	if got := r.rec.got(); len(got) != 0 {
		t.Fatalf("delivered %d events of a range the log could not give back", len(got))
	}
	if st := r.g.Stats(); st.InLog == 0 {
		t.Fatalf("the evicted events are no longer accounted for: %+v", st)
	}
}

// TestEvictionRandom: spans write transactions of random sizes at random
// ts, resolving now and then, one of them stalling for long stretches,
// through a gate far smaller than what G holds back: the gate evicts,
// windows grow and merge, read-backs stop inside them as G moves, and the
// downstream still gets exactly what holding everything gives.
func TestEvictionRandom(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			const limit = 24 << 10
			r := newRig(t, limit, true)
			ctx := context.Background()
			rnd := rand.New(rand.NewPCG(seed, 26))
			const spans = 4
			last := map[meta.SpanID]uint64{}
			for s := meta.SpanID(1); s <= spans; s++ {
				must(t, r.g.AddSpan(ctx, s, 10))
				last[s] = 10
			}
			var id int64
			stalled := meta.SpanID(0)
			for step := 0; step < 400; step++ {
				s := meta.SpanID(1 + rnd.IntN(spans))
				ts := last[s] + 1 + uint64(rnd.IntN(3))
				var evs []codec.Event
				switch k := rnd.IntN(20); {
				case k == 0:
					evs = []codec.Event{ddl(s, ts, fmt.Sprintf("alter %d", step))}
				case k < 3:
					evs = rows(s, ts, &id, 60+rnd.IntN(60)) // bigger than a third of the gate
				default:
					evs = rows(s, ts, &id, 1+rnd.IntN(8))
				}
				must(t, r.write(s, evs...))
				last[s] = ts
				switch k := rnd.IntN(10); {
				case k == 0:
					stalled = meta.SpanID(1 + rnd.IntN(spans))
				case k == 1:
					stalled = 0
				case k < 6 && s != stalled:
					// Resolve up to the ts written, but leave room
					// for the span's next transaction above it.
					r.resolve(ts, s)
				}
			}
			top := uint64(0)
			for _, ts := range last {
				top = max(top, ts)
			}
			r.resolve(top+10, 1, 2, 3, 4)
			r.check()
			st := r.settled()
			if st.Evictions == 0 {
				t.Fatalf("nothing evicted: %+v", st)
			}
			t.Logf("%+v", st)
		})
	}
}

// TestEvictCatchUp: a span that joins behind G while the gate evicts. Its
// catch-up events at or below G go downstream as they arrive, after what
// was released; those above G that fall in an evicted range are read back
// from the log only once the writer has flushed them (the read-back flushes
// the writer first: its flushed ts says nothing of a span added behind it
// until a flush took it), each in its place.
func TestEvictCatchUp(t *testing.T) {
	const limit = 16 << 10
	r := newRig(t, limit, true)
	ctx := context.Background()
	must(t, r.g.AddSpan(ctx, 1, 100))
	must(t, r.g.AddSpan(ctx, 2, 100))
	var id int64
	for ts := uint64(110); ts <= 200; ts += 10 {
		must(t, r.write(1, rows(1, ts, &id, 2)...))
		must(t, r.write(2, rows(2, ts, &id, 2)...))
	}
	r.resolve(200, 1, 2)
	before := r.rec.await(t, 40)
	if st := r.g.Stats(); st.ReleasedTs < 200 {
		t.Fatalf("released to %d, want 200", st.ReleasedTs)
	}
	// Span 3 moves here behind G, from the log's checkpoint.
	must(t, r.g.AddSpan(ctx, 3, 150))
	var catchUp []codec.Event
	for ts := uint64(160); ts <= 200; ts += 20 {
		evs := rows(3, ts, &id, 2)
		must(t, r.g.Write(ctx, 3, evs...))
		catchUp = append(catchUp, evs...)
	}
	got := r.rec.await(t, 40+len(catchUp))
	if !slices.Equal(ids(got[40:]), ids(catchUp)) {
		t.Fatalf("catch-up events: got %v, want %v", ids(got[40:]), ids(catchUp))
	}
	// Above G: span 3 writes while spans 1 and 2 fill the gate and evict.
	r.mu.Lock()
	r.written = nil // what follows is compared on its own
	r.mu.Unlock()
	for ts := uint64(210); ts <= 260; ts++ {
		must(t, r.write(1, rows(1, ts, &id, 12)...))
		if ts%10 == 0 {
			must(t, r.write(3, rows(3, ts, &id, 3)...))
		}
		must(t, r.write(2, rows(2, ts, &id, 12)...))
		r.resolve(ts, 1, 2)
	}
	if st := r.g.Stats(); st.Evictions == 0 {
		t.Fatalf("nothing evicted: %+v", st)
	}
	r.resolve(300, 1, 2, 3)
	want := r.expected()
	all := r.rec.await(t, len(before)+len(catchUp)+len(want))
	if rest := ids(all[len(before)+len(catchUp):]); !slices.Equal(rest, want) {
		t.Fatalf("above G: %s", firstDiff(rest, want))
	}
	if st := r.settled(); st.ReadBack == 0 {
		t.Fatalf("nothing read back: %+v", st)
	}
}

// TestEvictRemovedSpan: a span removed while the log owns some of its
// events: those at or below its resolved ts are still read back and
// delivered, those above it are not (its next owner writes them).
func TestEvictRemovedSpan(t *testing.T) {
	const limit = 16 << 10
	r := newRig(t, limit, true)
	ctx := context.Background()
	must(t, r.g.AddSpan(ctx, 1, 10))
	must(t, r.g.AddSpan(ctx, 2, 10))
	var id int64
	must(t, r.write(1, rows(1, 20, &id, 3)...)) // span 1 stalls: G stays at or below 10
	for ts := uint64(30); ts <= 90; ts++ {
		must(t, r.write(2, rows(2, ts, &id, 6)...))
		if ts <= 70 {
			r.resolve(ts, 2)
		}
	}
	if st := r.g.Stats(); st.Evictions == 0 || st.InLog == 0 {
		t.Fatalf("nothing evicted: %+v", st)
	}
	must(t, r.g.RemoveSpan(2))
	must(t, r.write(1, rows(1, 40, &id, 3)...))
	r.resolve(100, 1)
	// What holding everything gives, less the removed span's events above
	// its resolved ts.
	r.mu.Lock()
	r.written = slices.DeleteFunc(r.written, func(ev codec.Event) bool {
		return ev.Row.Table.PhysicalID == 2 && ev.CommitTs() > 70
	})
	r.mu.Unlock()
	want := r.expected()
	r.rec.await(t, len(want))
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	must(t, r.g.Close(cctx)) // nothing more can come after it
	if got := ids(r.rec.got()); !slices.Equal(got, want) {
		t.Fatalf("downstream: %s", firstDiff(got, want))
	}
	if st := r.g.Stats(); st.InLog != 0 || st.HeldBytes != 0 || st.Released != int64(len(want)) || st.Released+st.Dropped != st.Written {
		t.Fatalf("after Close: %+v", st)
	}
}

// TestEvictCatchUpBeforeFlush: a span joins behind the writer's flushed ts
// and writes into a range the log owns, above the G the gate acted on but
// below the log's G, before any flush took the span: the writer's flushed
// ts is stale (the span's events there are not in the log), so the
// read-back flushes the writer first and reads no further than that flush
// reached, and reads the rest once the span is flushed.
func TestEvictCatchUpBeforeFlush(t *testing.T) {
	const limit = 16 << 10
	r := newRigOpts(t, limit, true, time.Hour) // flushes only when asked
	ctx := context.Background()
	must(t, r.g.AddSpan(ctx, 1, 100))
	must(t, r.g.AddSpan(ctx, 2, 100))
	var next int64
	for ts := uint64(110); ts <= 200; ts += 2 {
		must(t, r.write(1, rows(1, ts, &next, 6)...))
		must(t, r.write(2, rows(2, ts, &next, 6)...))
	}
	if st := r.g.Stats(); st.Evictions == 0 {
		t.Fatalf("nothing evicted: %+v", st)
	}
	r.resolve(200, 1, 2)
	publishAndWait(t, r, 200)
	// The release loop is not running: the gate acted on G 100 only.
	must(t, r.g.AddSpan(ctx, 3, 150))
	before := r.g.Stats()
	must(t, r.write(3, rows(3, 160, &next, 2)...))
	must(t, r.write(3, rows(3, 181, &next, 2)...))
	if st := r.g.Stats(); st.InLog != before.InLog+4 || st.HeldEvents != before.HeldEvents {
		t.Fatalf("span 3's events in the evicted range are not the log's: %+v, before them %+v", st, before)
	}
	r.start()
	// G is 200, but the writer flushed span 3 only to 150: the gate
	// delivers up to 150 and waits.
	r.rec.await(t, 1)
	time.Sleep(50 * time.Millisecond)
	for _, ev := range r.rec.got() {
		if ev.CommitTs() > 150 {
			t.Fatalf("delivered %s before the writer flushed span 3 past it", id(&ev))
		}
	}
	r.resolve(300, 1, 2, 3)
	publishAndWait(t, r, 300)
	r.check()
}

// publishAndWait publishes the writer's progress and waits for the log's G.
func publishAndWait(t *testing.T, r *rig, ts uint64) {
	t.Helper()
	_, err := r.w.Publish(context.Background())
	must(t, err)
	deadline := time.Now().Add(20 * time.Second)
	for {
		m, _, err := meta.ReadMeta(context.Background(), r.b, testLog)
		must(t, err)
		if m.ResolvedTs >= ts {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log's G is %d, want %d", m.ResolvedTs, ts)
		}
		time.Sleep(time.Millisecond)
	}
}
