package torture

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
	"github.com/redokit/redokit/writer"
)

// WriterOptions are the options of every torture writer: flushed only when
// told, small blocks and segments (many seals, rotations and objects), few
// quick retries.
func WriterOptions(logID, writerID string) *writer.Options {
	return &writer.Options{
		LogID: logID, WriterID: writerID,
		FlushInterval:   time.Hour,
		MaxSegmentBytes: 6 << 10,
		BlockSize:       1 << 10,
		Workers:         1,
		MaxUploads:      2,
		RetryAttempts:   4,
		RetryBackoff:    time.Millisecond,
		RetryMaxBackoff: 4 * time.Millisecond,
		Owner:           "torture " + writerID,
	}
}

// StageQuota is a writer memory quota (Config.MemoryQuota) that the torture
// workload fills, so that its writers stage: a few steps' worth of one
// writer's events. Its FlushBytes (a quarter) are written in a step or
// two while a lagging span holds the writer's resolved ts still, and the
// quota fills in a few; Writes block on it too while a writer catches a
// span up (events at or below the committed ts, which cannot be staged:
// those Writes are let through over the quota, Counts.QuotaOvercommits).
const StageQuota = 2 << 10

// withQuota gives o the memory quota quota, FlushBytes a quarter of it
// (Config.MemoryQuota); 0 leaves the defaults.
func withQuota(o *writer.Options, quota int64) *writer.Options {
	if quota > 0 {
		o.MemoryQuota, o.FlushBytes = quota, max(1, quota/4)
	}
	return o
}

// slot is one writer ID and its current writer.
type slot struct {
	id    string
	w     *writer.Writer
	epoch uint64
	spans map[uint64]uint64 // span → the start ts it was taken on at
}

// zombie is a writer abandoned while running.
type zombie struct {
	id    string
	w     *writer.Writer
	epoch uint64
	spans map[uint64]uint64
}

// Run runs the whole workload in this process: the session's background,
// the writers, then the final check. The error is a run that could not go
// on (its cause is also in the report as a liveness violation) or ctx's.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	s, err := NewSession(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s.Start(ctx)
	ws := &inProcess{s: s, r: rand.New(rand.NewPCG(s.cfg.Seed, 0x11)), clock: BaseTs}
	runErr := ws.run(ctx)
	ws.stop(ctx)
	rep := s.Finish(context.WithoutCancel(ctx))
	return rep, runErr
}

type inProcess struct {
	s       *Session
	r       *rand.Rand
	clock   uint64
	slots   []*slot
	owner   map[uint64]int // span → slot
	zombies []*zombie
	// spans are the spans the writers are fed: the session's, and those
	// added during the run once a writer took them on.
	spans []uint64
	// grown counts the spans added (Config.GrowSpans); pending are those
	// registered and not yet taken on by a writer.
	grown   int
	pending []growth
	// lag holds spans back (Config.MemoryQuota): a span in it is written
	// its events, but its resolved ts stays where it is for the steps
	// left, as a long transaction holds a span back (lagStep).
	lag map[uint64]int
}

// growth is a span added during the run, registered at start, that a
// writer takes on at step takeAt.
type growth struct {
	span, start uint64
	takeAt      int
}

func (p *inProcess) run(ctx context.Context) error {
	cfg := &p.s.cfg
	p.owner = map[uint64]int{}
	p.lag = map[uint64]int{}
	for _, id := range p.s.ids {
		sl := &slot{id: id, spans: map[uint64]uint64{}}
		if err := p.open(ctx, sl); err != nil {
			return err
		}
		p.slots = append(p.slots, sl)
	}
	p.spans = slices.Clone(p.s.spans)
	for i, sp := range p.spans {
		p.take(ctx, i%len(p.slots), sp, BaseTs)
	}
	start := time.Now()
	for step := 0; ; step++ {
		if step >= cfg.Steps || cfg.Duration > 0 && time.Since(start) >= cfg.Duration {
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		p.s.h.count(func(c *Counts) { c.Steps++ })
		if cfg.GrowSpans > 0 {
			p.growStep(ctx, step)
		}
		if cfg.MemoryQuota > 0 {
			p.lagStep()
		}
		prev := p.clock
		p.clock += 1 + p.r.Uint64N(2)
		for _, sp := range p.spans {
			sl := p.slots[p.owner[sp]]
			if sl.w == nil {
				continue
			}
			if err := p.feed(ctx, sl, sp, prev, p.clock, p.lag[sp] == 0); err != nil {
				p.fail(ctx, sl, "write", err)
			}
		}
		if p.r.IntN(2) == 0 {
			p.flushAll(ctx)
		}
		switch x := p.r.IntN(100); {
		case x < 3:
			p.failover(ctx, p.slots[p.r.IntN(len(p.slots))], p.r.IntN(2) == 0)
		case x < 6 && len(p.zombies) > 0:
			p.wakeZombie(ctx, p.r.IntN(len(p.zombies)))
		}
		if err := p.reopenDead(ctx); err != nil {
			return err
		}
	}
	return nil
}

// growStep takes on the added spans whose time came, and now and then adds
// one (Config.GrowSpans, spread over the steps).
func (p *inProcess) growStep(ctx context.Context, step int) {
	for i := 0; i < len(p.pending); {
		g := p.pending[i]
		if g.takeAt > step {
			i++
			continue
		}
		p.pending = slices.Delete(p.pending, i, i+1)
		p.spans = append(p.spans, g.span)
		p.take(ctx, p.r.IntN(len(p.slots)), g.span, g.start)
	}
	cfg := &p.s.cfg
	// Spread over the steps; a run bounded by its duration adds one about
	// every 25 steps.
	if p.grown < cfg.GrowSpans && p.r.IntN(max(1, min(cfg.Steps/(cfg.GrowSpans+1), 25))) == 0 {
		p.grow(ctx, step)
	}
}

// grow adds a span as a DDL that creates a table does: through a
// coordinator of its own, a barrier at the upstream's clock, the span
// registered at the barrier's ts, the barrier released; a writer takes the
// span on one to four steps later. The checker expects the span's events
// above the barrier's ts from the moment the barrier is set: until the span
// is registered the barrier holds the global resolved ts below them, and
// then the span does until its writer passes them.
func (p *inProcess) grow(ctx context.Context, step int) {
	s := p.s
	span := uint64(len(s.spans) + p.grown + 1)
	p.grown++
	start := p.clock
	id := fmt.Sprintf("create-t%d", span)
	// Each attempt opens a coordinator: the owner of a changefeed may move.
	op := func(what string, f func(ctx context.Context, c *meta.Coordinator) error) error {
		return s.retry(ctx, what, func(ctx context.Context) error {
			c, err := meta.OpenCoordinator(ctx, s.cfg.Bucket, s.cfg.LogID, nil)
			if err != nil {
				return err
			}
			return f(ctx, c)
		})
	}
	if op(fmt.Sprintf("set the barrier %s at %d", id, start), func(ctx context.Context, c *meta.Coordinator) error {
		return c.AddBarrier(ctx, id, start)
	}) != nil {
		return
	}
	s.h.addSpan(span, start)
	if op(fmt.Sprintf("register span %d at %d", span, start), func(ctx context.Context, c *meta.Coordinator) error {
		return c.AddSpan(ctx, meta.SpanID(span), start)
	}) != nil {
		return // the barrier stays: the span's events are never promised
	}
	if op("release the barrier "+id, func(ctx context.Context, c *meta.Coordinator) error {
		return c.ReleaseBarrier(ctx, id)
	}) != nil {
		return
	}
	p.pending = append(p.pending, growth{span: span, start: start, takeAt: step + 1 + p.r.IntN(4)})
}

// lagStep ends the lags whose time is up and now and then starts one: a
// span, whose owner's resolved ts then stands still for two to seven steps
// while its other spans write. Under a small quota (Config.MemoryQuota)
// what they write can only be staged: FlushBytes of it make stage cuts,
// and a full quota blocks Writes until a stage cut frees it. A takeover in
// the meantime fences an epoch with staged events above its committed ts.
func (p *inProcess) lagStep() {
	for sp, n := range p.lag {
		if n <= 1 {
			delete(p.lag, sp)
		} else {
			p.lag[sp] = n - 1
		}
	}
	if len(p.lag) == 0 && p.r.IntN(4) == 0 {
		p.lag[p.spans[p.r.IntN(len(p.spans))]] = 2 + p.r.IntN(6)
	}
}

// feed writes the events of span in (from, to] to its owner and, with
// resolve, advances the span's resolved ts to to.
func (p *inProcess) feed(ctx context.Context, sl *slot, span, from, to uint64, resolve bool) error {
	n := 0
	for ts := from + 1; ts <= to; ts++ {
		evs := p.s.h.gen.Events(span, ts)
		if len(evs) == 0 {
			continue
		}
		// A Write blocks while the memory quota is full: a writer that
		// frees none of it (no flush, no stage cut) hangs the run.
		wctx, cancel := context.WithTimeout(ctx, p.s.cfg.OpTimeout)
		err := sl.w.Write(wctx, writer.SpanID(span), evs...)
		cancel()
		if err != nil {
			if wctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
				st := sl.w.Stats()
				p.s.h.violate(RuleLiveness, "writer %s epoch %d: a Write of span %d at ts %d did not return within %v (buffered %d bytes, memory quota %d; %d stage cuts, %d writes over the quota, flushed ts %d)",
					sl.id, sl.epoch, span, ts, p.s.cfg.OpTimeout, st.BufferedBytes, p.s.cfg.MemoryQuota, st.StageCuts, st.QuotaOvercommits, st.FlushedTs)
			}
			return err
		}
		n += len(evs)
	}
	p.s.h.count(func(c *Counts) { c.WrittenEvents += int64(n) })
	if !resolve {
		return nil
	}
	return sl.w.AdvanceResolved(writer.SpanID(span), to)
}

// take gives span to the writer of slot i from start ts on, and writes it
// what the upstream has above it.
func (p *inProcess) take(ctx context.Context, i int, span, start uint64) {
	sl := p.slots[i]
	p.owner[span] = i
	sl.spans[span] = start
	delete(p.lag, span) // its new owner resolves it as it catches up
	if sl.w == nil {
		return // its reopening takes it on
	}
	if err := sl.w.AddSpan(writer.SpanID(span), start); err != nil {
		p.fail(ctx, sl, "add span", err)
		return
	}
	if start < p.clock {
		if err := p.feed(ctx, sl, span, start, p.clock, true); err != nil {
			p.fail(ctx, sl, "write", err)
		}
	}
}

// open opens the writer of a slot (a new epoch) and takes its spans on again.
func (p *inProcess) open(ctx context.Context, sl *slot) error {
	listed := p.s.listedEpoch(ctx, sl.id)
	var w *writer.Writer
	err := p.s.retry(ctx, "open writer "+sl.id, func(ctx context.Context) error {
		var err error
		o := withQuota(WriterOptions(p.s.cfg.LogID, sl.id), p.s.cfg.MemoryQuota)
		if p.s.cfg.RetryAttempts != 0 {
			o.RetryAttempts = p.s.cfg.RetryAttempts
		}
		w, err = writer.Open(blobtest.WithTakeover(ctx), p.s.cfg.Bucket, o)
		return err
	})
	if err != nil {
		return err
	}
	sl.w, sl.epoch = w, w.Epoch()
	p.s.h.noteOpen(sl.id, sl.epoch, listed)
	return nil
}

// listedEpoch is the highest epoch in the names of writerID's segments, as
// the clean bucket lists them now (0 when it cannot tell).
func (s *Session) listedEpoch(ctx context.Context, writerID string) uint64 {
	top := uint64(0)
	for a, err := range s.cfg.Clean.List(ctx, layout.WriterSegments(s.cfg.LogID, writerID)) {
		if err != nil {
			return 0
		}
		if n, err := segment.ParseName(a.Key); err == nil {
			top = max(top, n.Epoch)
		}
	}
	return top
}

func (p *inProcess) flushAll(ctx context.Context) {
	type result struct {
		f   uint64
		err error
	}
	res := make([]result, len(p.slots))
	var wg sync.WaitGroup
	for i, sl := range p.slots {
		if sl.w == nil {
			continue
		}
		wg.Go(func() {
			octx, cancel := context.WithTimeout(ctx, p.s.cfg.OpTimeout)
			defer cancel()
			f, err := sl.w.Flush(octx)
			if err != nil && octx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
				p.s.h.violate(RuleLiveness, "writer %s epoch %d: a flush did not end within %v", sl.id, sl.epoch, p.s.cfg.OpTimeout)
			}
			res[i] = result{f, err}
		})
	}
	wg.Wait()
	for i, sl := range p.slots {
		if sl.w == nil {
			continue
		}
		if res[i].err != nil {
			p.fail(ctx, sl, "flush", res[i].err)
			continue
		}
		p.acked(sl.id, sl.epoch, sl.spans, res[i].f)
	}
}

// acked records a flushed ts a writer reported for its spans.
func (p *inProcess) acked(id string, epoch uint64, spans map[uint64]uint64, f uint64) {
	p.s.h.count(func(c *Counts) { c.Flushes++ })
	for sp, start := range spans {
		p.s.h.ack(Ack{Writer: id, Epoch: epoch, Span: sp, From: start, To: f})
	}
}

// fail handles a writer that failed: a fence must be proven by a newer
// epoch in its state object; the writer is closed and its ID reopened by
// reopenDead.
func (p *inProcess) fail(ctx context.Context, sl *slot, op string, err error) {
	if sl.w == nil {
		return
	}
	p.s.h.count(func(c *Counts) { c.FailedFlushes++ })
	p.s.h.noteErr(err)
	p.s.cfg.Logf("writer %s epoch %d: %s failed: %v", sl.id, sl.epoch, op, err)
	p.checkFence(ctx, sl.id, sl.epoch, op, err)
	w := sl.w
	sl.w = nil
	cctx, cancel := context.WithTimeout(ctx, p.s.cfg.OpTimeout)
	w.Close(cctx)
	cancel()
	p.s.noteWriter(w.Stats())
}

// checkFence: a writer told it is fenced while its state object holds its
// own epoch was fenced wrongly.
func (p *inProcess) checkFence(ctx context.Context, id string, epoch uint64, op string, err error) {
	if !errors.Is(err, meta.ErrFenced) {
		return
	}
	p.s.checkFence(ctx, id, epoch, op, err)
}

// checkFence is the session's check of a fence reported by a writer.
func (s *Session) checkFence(ctx context.Context, id string, epoch uint64, op string, err error) {
	var st *meta.WriterState
	rerr := s.retry(ctx, "read the state of writer "+id, func(ctx context.Context) error {
		var err error
		st, _, err = meta.ReadWriterState(ctx, s.cfg.Clean, s.cfg.LogID, id)
		return err
	})
	if rerr != nil {
		return
	}
	if st.Epoch <= epoch {
		s.h.violate(RuleWrongfulFence, "writer %s epoch %d: %s reported %v, but its state object holds epoch %d: no newer epoch exists", id, epoch, op, err, st.Epoch)
		return
	}
	s.h.count(func(c *Counts) { c.Fences++ })
}

// failover closes (or abandons) a slot's writer and gives its spans to
// random writers, the slot's own next epoch among them.
func (p *inProcess) failover(ctx context.Context, sl *slot, abandon bool) {
	if sl.w == nil {
		return
	}
	w := sl.w
	sl.w = nil
	if abandon {
		p.zombies = append(p.zombies, &zombie{id: sl.id, w: w, epoch: sl.epoch, spans: maps.Clone(sl.spans)})
		p.s.h.count(func(c *Counts) { c.Zombies++ })
	} else {
		cctx, cancel := context.WithTimeout(ctx, p.s.cfg.OpTimeout)
		err := w.Close(cctx)
		cancel()
		p.s.noteWriter(w.Stats())
		if err != nil {
			p.s.h.count(func(c *Counts) { c.FailedFlushes++ })
			p.checkFence(ctx, sl.id, sl.epoch, "close", err)
		} else {
			p.acked(sl.id, sl.epoch, sl.spans, w.FlushedTs())
		}
	}
}

// wakeZombie flushes and closes an abandoned writer: a fence there is right
// (a newer epoch exists), and what it reports flushed is acknowledged.
func (p *inProcess) wakeZombie(ctx context.Context, i int) {
	z := p.zombies[i]
	p.zombies = slices.Delete(p.zombies, i, i+1)
	cctx, cancel := context.WithTimeout(ctx, p.s.cfg.OpTimeout)
	defer cancel()
	if f, err := z.w.Flush(cctx); err == nil {
		p.acked(z.id, z.epoch, z.spans, f)
	} else {
		p.s.h.noteErr(err)
		p.checkFence(ctx, z.id, z.epoch, "a zombie's flush", err)
	}
	z.w.Close(cctx)
	p.s.noteWriter(z.w.Stats())
}

// reopenDead opens a new epoch of every slot without a writer and moves
// its spans: each to a random writer, from the checkpoint or from its
// highest acknowledged ts.
func (p *inProcess) reopenDead(ctx context.Context) error {
	for i, sl := range p.slots {
		if sl.w != nil {
			continue
		}
		p.s.h.count(func(c *Counts) { c.Failovers++ })
		cp, err := p.s.Checkpoint(ctx)
		if err != nil {
			cp = BaseTs
		}
		moving := sl.spans
		sl.spans = map[uint64]uint64{}
		if err := p.open(ctx, sl); err != nil {
			return err
		}
		for _, sp := range slices.Sorted(maps.Keys(moving)) {
			start := cp
			if p.r.IntN(2) == 0 {
				start = max(p.s.h.ackedMax(sp), BaseTs)
			}
			// A span added during the run has no events below its start.
			start = max(start, p.s.h.spanStart(sp))
			to := i
			if p.r.IntN(2) == 0 {
				to = p.r.IntN(len(p.slots))
				if p.slots[to].w == nil {
					to = i
				}
			}
			p.take(ctx, to, sp, start)
		}
	}
	return nil
}

// stop closes every writer and zombie; what a Close reports flushed is
// acknowledged.
func (p *inProcess) stop(ctx context.Context) {
	// Spans held back are resolved first: their owners' final flushes
	// then take everything written.
	for _, sp := range slices.Sorted(maps.Keys(p.lag)) {
		if sl := p.slots[p.owner[sp]]; sl.w != nil {
			sl.w.AdvanceResolved(writer.SpanID(sp), p.clock) // an error shows in Close
		}
	}
	p.lag = nil
	for i := len(p.zombies) - 1; i >= 0; i-- {
		p.wakeZombie(ctx, i)
	}
	// Added spans not taken on yet are taken on now: left alone, each would
	// hold the global resolved ts at its start, below what the writers'
	// final flushes acknowledge.
	for _, g := range p.pending {
		p.spans = append(p.spans, g.span)
		p.take(ctx, p.r.IntN(len(p.slots)), g.span, g.start)
	}
	p.pending = nil
	for _, sl := range p.slots {
		if sl.w == nil {
			continue
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.s.cfg.OpTimeout)
		err := sl.w.Close(cctx)
		p.s.noteWriter(sl.w.Stats())
		if err == nil {
			p.acked(sl.id, sl.epoch, sl.spans, sl.w.FlushedTs())
		} else {
			p.s.h.count(func(c *Counts) { c.FailedFlushes++ })
			p.checkFence(cctx, sl.id, sl.epoch, "close", err)
		}
		cancel()
		sl.w = nil
	}
}

// Faults is the honest schedule of a run: lost answers and refused writes
// on every kind of put (segment, state, takeover, meta, other) and on the
// syncs and seals of local segments, delays, reordered answers and failed
// reads. A correct log survives all of it without losing an acknowledged
// event.
func Faults(seed uint64) blobtest.Schedule {
	return blobtest.Schedule{
		Seed:       seed,
		LostAnswer: 0.04,
		Fail:       0.03,
		Delay:      0.05,
		Reorder:    0.05,
		MaxDelay:   time.Millisecond,
		ReadFail:   0.003,
		Syncs:      true,
	}
}
