package meta_test

// Randomized schedules of a whole redo log: writers, span moves, failovers
// with zombies, table creations behind DDL barriers, checkpoint advances, GC
// and readers, interleaved from a deterministic seed, with invariants 1 to 5
// of the design checked after every step that can change them. Broken rules
// (a GC that deletes too much, a coordinator without the DDL hold) must be
// caught by the same checks.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/gc"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/segment"
	"github.com/redokit/redokit/testkit/testenv"
	"github.com/redokit/redokit/writer"
)

const schedLog = "sched"

// collectFunc is a GC: it deletes segments of the log for a checkpoint and
// returns the keys it deleted.
type collectFunc func(ctx context.Context, b *blob.Bucket, logID string, cp uint64) ([]string, error)

func realGC(ctx context.Context, b *blob.Bucket, logID string, cp uint64) ([]string, error) {
	res, err := gc.Collect(ctx, b, logID, &gc.Options{Below: cp})
	if err != nil {
		return nil, err
	}
	return res.DeletedKeys, nil
}

// rules are the parts of the system a test double can break.
type rules struct {
	collect collectFunc
	// barrier: a table creation holds the watermark with a DDL barrier
	// until the new span exists. false is a coordinator without the hold.
	barrier bool
}

var goodRules = rules{collect: realGC, barrier: true}

// wslot is one writer ID: its live writer and the zombies of its earlier
// epochs.
type wslot struct {
	id      string
	w       *writer.Writer
	zombies []*writer.Writer
}

// sspan is one span of the schedule.
type sspan struct {
	owner   int // index into writers; -1: none (its writer died, or it is being created)
	created bool
}

// pending is a table creation between its barrier and its span.
type pending struct {
	span writer.SpanID
	ts   uint64
}

type sched struct {
	ctx     context.Context
	b       *blob.Bucket
	r       *rand.Rand
	rules   rules
	coord   *meta.Coordinator
	chk     *checker
	tr      *truth
	writers []*wslot
	spans   map[writer.SpanID]*sspan
	now     uint64 // the upstream's clock: the last commit ts it produced
	nextRow int64
	create  *pending
	steps   []string // what happened, for failure messages
	poison  int      // zombie events written after a fence
	tally   map[string]int
}

const schedDDLSpan writer.SpanID = 1

// fail wraps an error with the schedule so far.
func (s *sched) fail(err error) error {
	tail := s.steps
	if len(tail) > 12 {
		tail = tail[len(tail)-12:]
	}
	return fmt.Errorf("%w\nlast steps:\n  %s", err, strings.Join(tail, "\n  "))
}

func (s *sched) logf(format string, args ...any) {
	s.steps = append(s.steps, fmt.Sprintf(format, args...))
}

func newSched(ctx context.Context, b *blob.Bucket, seed uint64, r rules) (*sched, error) {
	const start = 10
	coord, err := meta.OpenCoordinator(ctx, b, schedLog, &meta.CoordinatorOptions{StartTs: start})
	if err != nil {
		return nil, err
	}
	tr := &truth{}
	s := &sched{
		ctx: ctx, b: b, r: rand.New(rand.NewPCG(seed, 0x5c4ed)), rules: r, coord: coord, tr: tr,
		chk:   &checker{b: b, logID: schedLog, truth: tr},
		spans: map[writer.SpanID]*sspan{},
		now:   start,
		tally: map[string]int{},
	}
	nw := 2 + s.r.IntN(2)
	for i := range nw {
		ws := &wslot{id: "w" + strconv.Itoa(i)}
		if ws.w, err = writer.Open(ctx, b, writerOptions(schedLog, ws.id)); err != nil {
			return nil, err
		}
		if err := coord.AddWriter(ctx, ws.id); err != nil {
			return nil, err
		}
		s.writers = append(s.writers, ws)
	}
	for span := schedDDLSpan; span <= writer.SpanID(1+2+s.r.IntN(3)); span++ {
		owner := s.r.IntN(nw)
		if err := coord.AddSpan(ctx, span, start); err != nil {
			return nil, err
		}
		if err := s.writers[owner].w.AddSpan(span, start); err != nil {
			return nil, err
		}
		s.spans[span] = &sspan{owner: owner, created: true}
	}
	return s, nil
}

// close closes every writer and zombie.
func (s *sched) close() {
	for _, ws := range s.writers {
		ws.w.Close(s.ctx)
		for _, z := range ws.zombies {
			z.Close(s.ctx)
		}
	}
}

func (s *sched) spanIDs(cond func(*sspan) bool) []writer.SpanID {
	var out []writer.SpanID
	for _, id := range slices.Sorted(maps.Keys(s.spans)) {
		if cond(s.spans[id]) {
			out = append(out, id)
		}
	}
	return out
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// rowOf is the next row of a span's table at ts.
func (s *sched) rowOf(span writer.SpanID, ts uint64) codec.Event {
	s.nextRow++
	return codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{
		StartTs: ts - 1, CommitTs: ts,
		Table: codec.TableName{Schema: "s", Name: fmt.Sprintf("t%d", span), PhysicalID: int64(span)},
		Columns: []codec.Column{
			{Name: "id", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey | codec.FlagHandleKey, Value: codec.IntValue(s.nextRow)},
			{Name: "v", Type: codec.TypeVarchar, Value: codec.StringValue(strconv.FormatUint(ts, 10))},
		},
	}}
}

// emit records an upstream event and gives it to the span's writer, if the
// span has one now; otherwise its next owner replays it.
func (s *sched) emit(span writer.SpanID, ev codec.Event) error {
	s.tr.add(span, ev)
	if sp := s.spans[span]; sp != nil && sp.owner >= 0 {
		return s.writers[sp.owner].w.Write(s.ctx, span, ev)
	}
	return nil
}

// adopt gives an ownerless span to writer i at the log's checkpoint, and
// replays the upstream's events of the span from there.
func (s *sched) adopt(span writer.SpanID, i int, from uint64) error {
	w := s.writers[i].w
	if err := w.AddSpan(span, from); err != nil {
		return err
	}
	s.spans[span].owner = i
	s.tally["adopt"]++
	if evs := s.tr.of(span, from, s.now); len(evs) > 0 {
		if err := w.Write(s.ctx, span, evs...); err != nil {
			return err
		}
	}
	s.logf("adopt span %d by %s at %d (%d events replayed)", span, s.writers[i].id, from, len(s.tr.of(span, from, s.now)))
	return nil
}

// step takes one random step and checks what it may have broken.
func (s *sched) step() error {
	ctx := s.ctx
	live := s.spanIDs(func(sp *sspan) bool { return sp.owner >= 0 })
	orphans := s.spanIDs(func(sp *sspan) bool { return sp.owner < 0 && sp.created })
	switch n := s.r.IntN(100); {
	case n < 30: // the upstream commits a transaction on one or two spans
		s.now++
		for range 1 + s.r.IntN(2) {
			// Any table that exists, owned or not: an ownerless span's
			// rows wait in the upstream for its next owner.
			span := pick(s.r, s.spanIDs(func(*sspan) bool { return true }))
			if err := s.emit(span, s.rowOf(span, s.now)); err != nil {
				return err
			}
		}
		return nil
	case n < 48: // resolved ts: one span, or all
		all := s.r.IntN(3) == 0
		for _, span := range live {
			if all || s.r.IntN(len(live)) == 0 {
				if err := s.writers[s.spans[span].owner].w.AdvanceResolved(span, s.now); err != nil {
					return err
				}
			}
		}
		return nil
	case n < 60: // a writer flushes
		ws := pick(s.r, s.writers)
		ts, err := ws.w.Publish(ctx)
		if err != nil {
			return err
		}
		s.logf("flush %s: %d", ws.id, ts)
		s.tally["flush"]++
		return s.check()
	case n < 72: // the coordinator ticks
		m, err := s.coord.Tick(ctx)
		if err != nil {
			return err
		}
		s.logf("tick: checkpoint %d, resolved %d", m.CheckpointTs, m.ResolvedTs)
		s.tally["tick"]++
		return s.fail2(s.chk.afterTick(ctx, m))
	case n < 80: // the downstream applied more: checkpoint, then GC
		m := s.coord.Meta()
		if m.ResolvedTs <= m.CheckpointTs {
			return nil
		}
		cp := m.CheckpointTs + 1 + uint64(s.r.Int64N(int64(m.ResolvedTs-m.CheckpointTs)))
		return s.checkpoint(cp)
	case n < 84: // a span moves between live writers, at the checkpoint
		if len(live) == 0 {
			return nil
		}
		span := pick(s.r, live)
		from, to := s.spans[span].owner, s.r.IntN(len(s.writers))
		if from == to {
			return nil
		}
		s.tally["move"]++
		if err := s.writers[from].w.RemoveSpan(span); err != nil {
			return err
		}
		s.spans[span].owner = -1
		return s.adopt(span, to, s.coord.Meta().CheckpointTs)
	case n < 87: // a writer dies; its ID restarts at a new epoch
		return s.kill(pick(s.r, s.writers))
	case n < 94: // ownerless spans find a writer
		for _, span := range orphans {
			if err := s.adopt(span, s.r.IntN(len(s.writers)), s.coord.Meta().CheckpointTs); err != nil {
				return err
			}
		}
		return nil
	case n < 97: // CREATE TABLE: barrier, DDL, later the span
		if s.create == nil {
			return s.startCreate()
		}
		return s.finishCreate()
	default: // a reader runs while GC deletes under it
		return s.readDuringGC()
	}
}

// fail2 adds the schedule to an invariant error.
func (s *sched) fail2(err error) error {
	if err == nil {
		return nil
	}
	return s.fail(err)
}

// check re-checks the invariants on the coordinator's last meta object
// (storage may have changed under it).
func (s *sched) check() error {
	return s.fail2(s.chk.afterTick(s.ctx, s.coord.Meta()))
}

func (s *sched) checkpoint(cp uint64) error {
	if err := s.coord.SetCheckpoint(s.ctx, cp); err != nil {
		return err
	}
	deleted, err := s.rules.collect(s.ctx, s.b, schedLog, cp)
	if err != nil {
		return err
	}
	s.logf("checkpoint %d: gc deleted %d", cp, len(deleted))
	s.tally["checkpoint"]++
	s.tally["gc-deleted"] += len(deleted)
	if err := s.chk.afterGC(cp, deleted); err != nil {
		return s.fail(err)
	}
	return s.check()
}

// kill abandons a writer mid-flight (a crash: no Close) and restarts its ID,
// which fences the old process. The zombie then tries to flush events the
// log must never show; its spans wait for new owners.
func (s *sched) kill(ws *wslot) error {
	ctx := s.ctx
	zombie := ws.w
	before, _, err := meta.ReadWriterState(ctx, s.b, schedLog, ws.id)
	if err != nil {
		return err
	}
	if ws.w, err = writer.Open(ctx, s.b, writerOptions(schedLog, ws.id)); err != nil {
		return err
	}
	ws.zombies = append(ws.zombies, zombie)
	idx := slices.Index(s.writers, ws)
	var owned []writer.SpanID
	for _, span := range slices.Sorted(maps.Keys(s.spans)) {
		if sp := s.spans[span]; sp.owner == idx {
			sp.owner = -1
			owned = append(owned, span)
		}
	}
	s.logf("kill %s (epoch %d → %d), spans %v orphaned", ws.id, zombie.Epoch(), ws.w.Epoch(), owned)
	s.tally["kill"]++
	if len(owned) == 0 || zombie.Err() != nil {
		return nil
	}
	// Invariant 5: the zombie cannot publish progress, and nothing it
	// writes after the fence is read.
	fenced, _, err := meta.ReadWriterState(ctx, s.b, schedLog, ws.id)
	if err != nil {
		return err
	}
	span := owned[0]
	ts := max(s.now, zombie.ResolvedTs()) + 1
	poison := codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{
		StartTs: ts - 1, CommitTs: ts,
		Table:   codec.TableName{Schema: "s", Name: "zombie", PhysicalID: -1},
		Columns: []codec.Column{{Name: "id", Type: codec.TypeLonglong, Value: codec.IntValue(int64(s.poison))}},
	}}
	s.poison++
	if err := zombie.Write(ctx, span, poison); err != nil {
		return s.fail(fmt.Errorf("zombie write: %w", err))
	}
	for _, sp := range owned {
		if err := zombie.AdvanceResolved(sp, ts); err != nil {
			return s.fail(fmt.Errorf("zombie resolve: %w", err))
		}
	}
	if _, err := zombie.Publish(ctx); !errors.Is(err, meta.ErrFenced) {
		return s.fail(fmt.Errorf("invariant 5: a fenced writer's flush returned %v, want meta.ErrFenced", err))
	}
	after, _, err := meta.ReadWriterState(ctx, s.b, schedLog, ws.id)
	if err != nil {
		return err
	}
	if after.Epoch != fenced.Epoch || after.FlushedTs != fenced.FlushedTs || after.Seq != fenced.Seq || !slices.Equal(after.Spans, fenced.Spans) {
		return s.fail(fmt.Errorf("invariant 5: the zombie (epoch %d) changed %s's state: %+v → %+v", before.Epoch, ws.id, fenced, after))
	}
	s.tally["zombie-flush"]++
	got, st, err := readRange(ctx, s.b, schedLog, s.coord.Meta().CheckpointTs, ts, false)
	if errors.Is(err, reader.ErrUnproven) {
		// The zombie's ts is above what the log proves: the read is
		// refused, which returns nothing of the zombie's either.
		s.tally["zombie-read-refused"]++
		return s.check()
	}
	if err != nil {
		return s.fail(fmt.Errorf("invariant 5: read after the zombie's flush: %w", err))
	}
	for _, ev := range got {
		if ev.Row.Table.Name == "zombie" {
			return s.fail(fmt.Errorf("invariant 5: the reader returned %s, written by a fenced writer", describe(ev)))
		}
	}
	s.tally["fenced-segments-skipped"] += st.SegmentsFenced
	return s.check()
}

func (s *sched) startCreate() error {
	s.now++
	ts := s.now
	span := writer.SpanID(len(s.spans) + 1)
	for s.spans[span] != nil {
		span++
	}
	if s.rules.barrier {
		if err := s.coord.AddBarrier(s.ctx, fmt.Sprintf("create-%d", span), ts); err != nil {
			return err
		}
	}
	s.create = &pending{span: span, ts: ts}
	s.spans[span] = &sspan{owner: -1}
	s.logf("CREATE TABLE t%d at %d", span, ts)
	s.tally["create"]++
	return s.emit(schedDDLSpan, codec.Event{Kind: codec.DDLEvent, DDL: codec.DDL{
		StartTs: ts - 1, CommitTs: ts, Type: codec.ActionCreateTable, Query: fmt.Sprintf("CREATE TABLE t%d", span),
		Table:  codec.TableName{Schema: "s", Name: fmt.Sprintf("t%d", span), PhysicalID: int64(span)},
		Tables: []codec.DDLTable{{TableName: codec.TableName{Schema: "s", Name: fmt.Sprintf("t%d", span), PhysicalID: int64(span)}, Role: codec.RoleCreated}},
	}})
}

func (s *sched) finishCreate() error {
	c := s.create
	s.create = nil
	if err := s.coord.AddSpan(s.ctx, c.span, c.ts); err != nil {
		return err
	}
	s.spans[c.span].created = true
	if err := s.adopt(c.span, s.r.IntN(len(s.writers)), c.ts); err != nil {
		return err
	}
	return s.coord.ReleaseBarrier(s.ctx, fmt.Sprintf("create-%d", c.span))
}

// readDuringGC opens a reader on the recovery range, lets GC delete up to a
// later checkpoint while it reads, and requires either the whole range or an
// error naming a missing segment: never a silently shortened range
// (invariant 4's "safe while a reader runs").
func (s *sched) readDuringGC() error {
	ctx := s.ctx
	m := s.coord.Meta()
	lo, hi := m.CheckpointTs, m.ResolvedTs
	if hi <= lo+1 {
		return nil
	}
	r, err := reader.Open(ctx, s.b, &reader.Options{LogID: schedLog, StartTs: lo, EndTs: hi, Prefetch: 1, Lookahead: -1})
	if err != nil {
		return s.fail(fmt.Errorf("invariant 2: open (%d, %d]: %w", lo, hi, err))
	}
	defer r.Close()
	var got []*codec.Event
	ev, err := r.Next(ctx)
	if err == nil {
		got = append(got, ev.Event.Clone())
	}
	if err := s.checkpoint(lo + 1 + uint64(s.r.Int64N(int64(hi-lo)))); err != nil {
		return err
	}
	for err == nil {
		if ev, err = r.Next(ctx); err == nil {
			got = append(got, ev.Event.Clone())
		}
	}
	switch {
	case err == io.EOF:
		if derr := diff(got, s.tr.expect(lo, hi, nil)); derr != nil {
			return s.fail(fmt.Errorf("invariant 4: a read of (%d, %d] during GC: %w", lo, hi, derr))
		}
		s.tally["read-during-gc-whole"]++
	case blob.IsNotExist(err) && strings.Contains(err.Error(), layout.Segments(schedLog)):
		// GC removed a segment under the reader, and the reader said which.
		s.tally["read-during-gc-notexist"]++
	default:
		return s.fail(fmt.Errorf("invariant 4: a read of (%d, %d] during GC: %w", lo, hi, err))
	}
	s.logf("read (%d, %d] during GC: %d events, %v", lo, hi, len(got), err)
	return nil
}

// finish brings the schedule to rest: every span owned and resolved to now,
// every writer flushed, the coordinator ticked. The watermark must then
// reach now (liveness: nothing holds it for good).
func (s *sched) finish() error {
	if s.create != nil {
		if err := s.finishCreate(); err != nil {
			return err
		}
	}
	for _, span := range s.spanIDs(func(sp *sspan) bool { return sp.owner < 0 }) {
		if err := s.adopt(span, s.r.IntN(len(s.writers)), s.coord.Meta().CheckpointTs); err != nil {
			return err
		}
	}
	for span, sp := range s.spans {
		if err := s.writers[sp.owner].w.AdvanceResolved(span, s.now); err != nil {
			return err
		}
	}
	for _, ws := range s.writers {
		if _, err := ws.w.Publish(s.ctx); err != nil {
			return err
		}
	}
	m, err := s.coord.Tick(s.ctx)
	if err != nil {
		return err
	}
	s.logf("final tick: checkpoint %d, resolved %d", m.CheckpointTs, m.ResolvedTs)
	if err := s.chk.afterTick(s.ctx, m); err != nil {
		return s.fail(err)
	}
	if m.ResolvedTs != s.now {
		return s.fail(fmt.Errorf("liveness: every span resolved and flushed to %d, but the global resolved ts is %d", s.now, m.ResolvedTs))
	}
	return nil
}

// runSchedule runs one seeded schedule of n steps, adding what it did to
// tally (when not nil).
func runSchedule(ctx context.Context, b *blob.Bucket, seed uint64, n int, r rules, tally map[string]int) error {
	s, err := newSched(ctx, b, seed, r)
	if err != nil {
		return err
	}
	defer s.close()
	defer func() {
		for k, v := range s.tally {
			if tally != nil {
				tally[k] += v
			}
		}
		if tally != nil {
			tally["reads"] += s.chk.reads
		}
	}()
	for i := range n {
		if err := s.step(); err != nil {
			return fmt.Errorf("seed %d, step %d: %w", seed, i, err)
		}
	}
	if err := s.finish(); err != nil {
		return fmt.Errorf("seed %d, finish: %w", seed, err)
	}
	return nil
}

// scheduleIters is how many schedules a test runs: REDOKIT_SCHEDULE_ITERS
// scales it (CI default below).
func scheduleIters(t *testing.T, def int) int {
	return testenv.Count(t, "REDOKIT_SCHEDULE_ITERS", def)
}

const scheduleSteps = 200

func TestSchedule(t *testing.T) {
	iters := scheduleIters(t, 50)
	start := time.Now()
	tally := map[string]int{}
	for i := range iters {
		name := "mem"
		if i%6 == 5 {
			name = "local" // slower (fsync): one schedule in six
		}
		b := backends()[name](t)
		if err := runSchedule(context.Background(), b, uint64(i), scheduleSteps, goodRules, tally); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	t.Logf("%d schedules of %d steps in %v: %v", iters, scheduleSteps, time.Since(start).Round(time.Millisecond), tally)
	// A schedule that never reached the hard parts proves little.
	for _, k := range []string{"kill", "zombie-flush", "move", "create", "gc-deleted", "read-during-gc-whole"} {
		if tally[k] == 0 {
			t.Errorf("no schedule did %q", k)
		}
	}
}

// catches runs schedules under broken rules until the checks catch one, and
// returns the error they reported.
func catches(t *testing.T, r rules) error {
	t.Helper()
	for i := range 50 {
		b := backends()["mem"](t)
		if err := runSchedule(context.Background(), b, uint64(1000+i), scheduleSteps, r, nil); err != nil {
			t.Logf("caught at schedule %d: %v", i, err)
			return err
		}
	}
	t.Fatal("50 schedules under a broken rule passed every check")
	return nil
}

// TestScheduleCatchesGreedyGC: a GC that deletes segments reaching above the
// checkpoint (it compares their min ts, not their max) is caught.
func TestScheduleCatchesGreedyGC(t *testing.T) {
	greedy := func(ctx context.Context, b *blob.Bucket, logID string, cp uint64) ([]string, error) {
		var del []string
		for a, err := range b.List(ctx, layout.Segments(logID)) {
			if err != nil {
				return nil, err
			}
			if n, err := segment.ParseName(a.Key); err == nil && !n.Active && n.MinTs < cp {
				del = append(del, a.Key)
			}
		}
		return del, b.Delete(ctx, del...)
	}
	err := catches(t, rules{collect: greedy, barrier: true})
	if !strings.Contains(err.Error(), "invariant 4") {
		t.Fatalf("caught by another check than invariant 4: %v", err)
	}
}

// TestScheduleCatchesMissingBarrier: a coordinator that lets the watermark
// pass a CREATE TABLE before the new table's span exists (tiflow#5486) is
// caught: registering the new table's span below the watermark is refused
// (ErrSpanTooLate), where before that rule the new table's rows went
// missing from the recovery range (invariant 2).
func TestScheduleCatchesMissingBarrier(t *testing.T) {
	err := catches(t, rules{collect: realGC, barrier: false})
	if !errors.Is(err, meta.ErrSpanTooLate) && !strings.Contains(err.Error(), "invariant 2") {
		t.Fatalf("caught by another check than ErrSpanTooLate or invariant 2: %v", err)
	}
}
