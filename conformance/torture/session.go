package torture

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/blob/driver"
	"github.com/redokit/redokit/gc"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/internal/retry"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/segment"
	"github.com/redokit/redokit/writer"
)

// Config configures a run.
type Config struct {
	// Bucket is the storage under test: writers, the coordinator, GC and
	// readers all go through it (through a blobtest.Liar for the fault
	// tier). Clean is the same storage without the faults, for the
	// checker's own reads of the meta and state objects; nil means Bucket.
	Bucket *blob.Bucket
	Clean  *blob.Bucket
	// Liar, when set, is the Liar under Bucket: its honest faults are
	// turned off for the final check, and its counts go into the report.
	Liar *blobtest.Liar

	LogID string // default "torture"
	Seed  uint64
	// Writers is the number of writer IDs (default 3); Spans the number of
	// spans they share (default 2 × Writers).
	Writers int
	Spans   int
	// Steps of the upstream (default 150), and a bound on the time they
	// take: with Duration set, the run stops after Steps or Duration,
	// whichever comes first.
	Steps    int
	Duration time.Duration

	// Tick is the coordinator's interval, GCEvery and ReadEvery those of GC
	// and of the readers (defaults 2 ms, 5 ms, 3 ms).
	Tick, GCEvery, ReadEvery time.Duration
	// RetryAttempts is the writers' writer.Options.RetryAttempts (default
	// 4; negative: none): with few, faults fail flushes, and the writers
	// fail over more.
	RetryAttempts int
	// MemoryQuota, when positive, is every writer's writer.Options.MemoryQuota,
	// with FlushBytes a quarter of it. A quota the workload fills forces
	// staged runs: a Write blocked on the full quota, or FlushBytes written
	// while the writer's resolved ts stood still, makes a stage cut, which
	// stores buffered events above the epoch's committed ts before they
	// are resolved (Counts.StageCuts, Counts.StagedEvents). The workload
	// writes a few hundred bytes per span and step, so a quota of 1 MiB
	// never fills: StageQuota does, many times a run. Zero leaves the
	// writers' default quota (256 MiB), which never fills either.
	MemoryQuota int64
	// GrowSpans adds that many spans during the run (in-process writers
	// only), as a CDC system does when a DDL creates a table: a coordinator
	// of its own (beside the session's) sets a barrier at the upstream's
	// clock, registers the new span at the barrier's ts and releases the
	// barrier; a writer takes the span on a few steps later and catches up
	// from the barrier's ts. Until it does, the span holds the global
	// resolved ts at the barrier's ts.
	GrowSpans int
	// OpTimeout bounds one writer operation, coordinator tick or read: one
	// that takes longer is a liveness violation (default 30 s).
	OpTimeout time.Duration
	// Logf receives progress and violations as they happen; nil discards.
	Logf func(format string, args ...any)
}

func (c *Config) defaults() error {
	if c.Bucket == nil {
		return errors.New("torture: Config.Bucket is nil")
	}
	if c.Clean == nil {
		c.Clean = c.Bucket
	}
	if c.LogID == "" {
		c.LogID = "torture"
	}
	if err := segment.ValidateID(c.LogID); err != nil {
		return fmt.Errorf("torture: log ID: %w", err)
	}
	if c.Writers <= 0 {
		c.Writers = 3
	}
	if c.Spans <= 0 {
		c.Spans = 2 * c.Writers
	}
	if c.Steps <= 0 {
		c.Steps = 150
	}
	if c.Tick <= 0 {
		c.Tick = 2 * time.Millisecond
	}
	if c.GCEvery <= 0 {
		c.GCEvery = 5 * time.Millisecond
	}
	if c.ReadEvery <= 0 {
		c.ReadEvery = 3 * time.Millisecond
	}
	if c.OpTimeout <= 0 {
		c.OpTimeout = 30 * time.Second
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	if c.MemoryQuota < 0 {
		return fmt.Errorf("torture: Config.MemoryQuota %d is negative", c.MemoryQuota)
	}
	return nil
}

// WriterIDs are the writer IDs of a run of n writers.
func WriterIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("w%d", i+1)
	}
	return out
}

// SpanIDs are the spans of a run.
func SpanIDs(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

// Session is one run's checker and background: the coordinator with its
// sink, GC and the readers, over the writers someone else runs (in this
// process, Run; in child processes, redokit torture), who report their
// acknowledged flushes with Ack.
type Session struct {
	cfg   Config
	h     *history
	gcB   *blob.Bucket
	ids   []string
	spans []uint64

	cancel context.CancelFunc
	wg     sync.WaitGroup
	coord  *meta.Coordinator
	// applied is the highest ts a read returned whole up to, from a
	// checkpoint at or below the current one: what the sink has applied.
	applied atomic.Uint64
}

// NewSession creates the log's meta object, registers the writers and
// spans, and returns the session. The faults of the Liar are on.
func NewSession(ctx context.Context, cfg Config) (*Session, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	s := &Session{cfg: cfg, ids: WriterIDs(cfg.Writers), spans: SpanIDs(cfg.Spans)}
	s.h = newHistory(Gen{Seed: cfg.Seed}, s.spans, cfg.Logf)
	s.h.explain = s.explain
	// GC deletes through a watch on cfg.Bucket. The bucket is never
	// closed: closing it would close cfg.Bucket.
	s.gcB = blob.NewBucket(&deleteWatch{Driver: blobtest.BucketDriver(cfg.Bucket), s: s})
	err := s.retry(ctx, "open the coordinator and register the writers and spans", func(ctx context.Context) error {
		c, err := meta.OpenCoordinator(ctx, cfg.Bucket, cfg.LogID, &meta.CoordinatorOptions{StartTs: BaseTs})
		if err != nil {
			return err
		}
		for _, id := range s.ids {
			if err := c.AddWriter(ctx, id); err != nil {
				return err
			}
		}
		for _, sp := range s.spans {
			if err := c.AddSpan(ctx, meta.SpanID(sp), BaseTs); err != nil {
				return err
			}
		}
		s.coord = c
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// retry runs f until it succeeds, at most 50 times, each within OpTimeout;
// past that the failure is a liveness violation and the error is returned.
func (s *Session) retry(ctx context.Context, what string, f func(context.Context) error) error {
	var err error
	for attempt := range 50 {
		if attempt > 0 {
			if serr := retry.Sleep(ctx, time.Duration(attempt)*time.Millisecond); serr != nil {
				return serr
			}
		}
		octx, cancel := context.WithTimeout(ctx, s.cfg.OpTimeout)
		err = f(octx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		s.h.noteErr(err)
	}
	s.h.violate(RuleLiveness, "%s: failed 50 times, last: %v", what, err)
	return fmt.Errorf("torture: %s: %w", what, err)
}

// WriterIDs are the session's writer IDs; Spans its spans.
func (s *Session) WriterIDs() []string { return slices.Clone(s.ids) }
func (s *Session) Spans() []uint64     { return slices.Clone(s.spans) }

// Gen is the session's upstream.
func (s *Session) Gen() Gen { return s.h.gen }

// Ack records an acknowledged flush.
func (s *Session) Ack(a Ack) { s.h.ack(a) }

// Violate records a violation found outside the session (a child process's
// wrongful fence).
func (s *Session) Violate(rule, evidence string) { s.h.violate(rule, "%s", evidence) }

// NoteOpen records the epoch an open of writerID took (a writer process's
// open, from its history) and checks it against the epochs earlier opens
// of the ID took: no two opens may hold one epoch.
func (s *Session) NoteOpen(writerID string, epoch uint64) { s.h.noteOpen(writerID, epoch, 0) }

// Count lets the writers' runner add to the counts.
func (s *Session) Count(f func(c *Counts)) { s.h.count(f) }

// noteWriter adds a closed (or abandoned and woken) writer's stage cuts,
// staged events and writes over the quota to the counts.
func (s *Session) noteWriter(st writer.Stats) {
	s.h.count(func(c *Counts) {
		c.StageCuts += st.StageCuts
		c.StagedEvents += st.StagedEvents
		c.QuotaOvercommits += st.QuotaOvercommits
	})
}

// AckedMax is the highest acknowledged ts of span.
func (s *Session) AckedMax(span uint64) uint64 { return s.h.ackedMax(span) }

// Checkpoint reads the log's checkpoint from the clean bucket (and checks
// the meta object's promises on the way).
func (s *Session) Checkpoint(ctx context.Context) (uint64, error) {
	cp, _, err := s.observe(ctx, "a checkpoint read")
	return cp, err
}

// observe reads the meta object through the clean bucket and checks it
// against what was seen before.
func (s *Session) observe(ctx context.Context, where string) (cp, rs uint64, err error) {
	s.h.metaMu.Lock()
	defer s.h.metaMu.Unlock()
	m, _, err := meta.ReadMeta(ctx, s.cfg.Clean, s.cfg.LogID)
	if err != nil {
		return 0, 0, err
	}
	s.h.observeMeta(where, m.CheckpointTs, m.ResolvedTs)
	return m.CheckpointTs, m.ResolvedTs, nil
}

// Start runs the coordinator, the sink, GC and the readers until Finish.
func (s *Session) Start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	r := rand.New(rand.NewPCG(s.cfg.Seed, 0xc00d))
	seeds := [3]uint64{r.Uint64(), r.Uint64(), r.Uint64()}
	s.loop(ctx, s.cfg.Tick, seeds[0], s.coordinate)
	s.loop(ctx, s.cfg.GCEvery, seeds[1], s.collect)
	s.loop(ctx, s.cfg.ReadEvery, seeds[2], s.read)
}

func (s *Session) loop(ctx context.Context, every time.Duration, seed uint64, f func(ctx context.Context, r *rand.Rand)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		r := rand.New(rand.NewPCG(seed, seed>>1))
		for retry.Sleep(ctx, every) == nil {
			f(ctx, r)
		}
	}()
}

// coordinate ticks the coordinator and, one tick in three, moves the
// checkpoint to a random ts at or below the global resolved ts, as a sink
// does. A coordinator that failed five ticks in a row is opened again.
func (s *Session) coordinate(ctx context.Context, r *rand.Rand) {
	octx, cancel := context.WithTimeout(ctx, s.cfg.OpTimeout)
	defer cancel()
	if s.coord == nil {
		c, err := meta.OpenCoordinator(octx, s.cfg.Bucket, s.cfg.LogID, nil)
		if err != nil {
			s.h.noteErr(err)
			s.h.count(func(c *Counts) { c.TickErrors++ })
			return
		}
		s.coord = c
	}
	m, err := s.coord.Tick(octx)
	if err != nil {
		s.h.noteErr(err)
		s.h.count(func(c *Counts) { c.TickErrors++ })
		if r.IntN(3) == 0 {
			s.coord = nil
		}
		return
	}
	s.h.count(func(c *Counts) { c.Ticks++ })
	// A sink applies before it checkpoints: the checkpoint moves only over
	// what a read returned whole, so what a store lost stays above it, where
	// the reads go on failing and the final check looks.
	top := min(m.ResolvedTs, s.applied.Load())
	if r.IntN(3) != 0 || top <= m.CheckpointTs {
		return
	}
	target := m.CheckpointTs + 1 + r.Uint64N(top-m.CheckpointTs)
	s.h.noteCheckpoint(target)
	if err := s.coord.SetCheckpoint(octx, target); err == nil {
		s.h.count(func(c *Counts) { c.Checkpoints++ })
	} else {
		s.h.noteErr(err)
	}
	s.observe(octx, "after a checkpoint")
}

// collect runs GC at the checkpoint of the meta object.
func (s *Session) collect(ctx context.Context, r *rand.Rand) {
	octx, cancel := context.WithTimeout(ctx, s.cfg.OpTimeout)
	defer cancel()
	cp, _, err := s.observe(octx, "before GC")
	if err != nil {
		return
	}
	res, err := gc.Collect(octx, s.gcB, s.cfg.LogID, &gc.Options{Below: cp})
	s.h.noteErr(err)
	s.h.count(func(c *Counts) {
		c.GCRuns++
		if err != nil {
			c.GCErrors++
		}
		if res != nil {
			c.GCDeleted += int64(res.Deleted)
		}
	})
}

// read reads (checkpoint, global resolved] and checks what it returned.
// One read in four gives no end and lets the reader take the range from the
// meta object.
func (s *Session) read(ctx context.Context, r *rand.Rand) {
	octx, cancel := context.WithTimeout(ctx, s.cfg.OpTimeout)
	defer cancel()
	cp, rs, err := s.observe(octx, "before a read")
	if err != nil || rs <= cp {
		return
	}
	hi, what := rs, fmt.Sprintf("a read of (%d, %d]", cp, rs)
	if r.IntN(4) == 0 {
		hi, what = 0, fmt.Sprintf("a read of (checkpoint, global resolved] from the meta object (at least (%d, %d])", cp, rs)
	}
	start := cp
	if hi == 0 {
		start = 0
	}
	evs, rerr := readRange(octx, s.cfg.Bucket, s.cfg.LogID, start, hi)
	if ctx.Err() != nil {
		return // stopped: proves nothing
	}
	if errors.Is(rerr, reader.ErrNoRange) {
		return
	}
	// The observation after the read gets a deadline of its own: under the
	// read's, a slow read starved it, and a read that took its range from
	// the meta object was then judged against the resolved ts seen before
	// it, although the meta object may have moved on (a false
	// nothing-above-resolved, seen on gcs with seed 12).
	actx, acancel := context.WithTimeout(ctx, s.cfg.OpTimeout)
	cpEnd, rsEnd, err := s.observe(actx, "after a read")
	acancel()
	if err != nil {
		if hi == 0 {
			return // the top of the range the reader took is unknown
		}
		// Without the checkpoint at its end the read cannot be judged
		// whole; its events are still checked.
		cpEnd, rsEnd = ^uint64(0)-1, rs
	}
	if octx.Err() != nil && rerr == nil {
		rerr = octx.Err()
	}
	top, lo, readTo := rs, cp, rs
	if hi == 0 {
		// The reader took its own (checkpoint, resolved] from the meta
		// object: at least what was seen before it, at most what was seen
		// after.
		top = rsEnd
		if s.cfg.Liar != nil && s.cfg.Liar.Stale() != nil {
			// Unless a stale version of the meta object gave it an
			// older (checkpoint, resolved], which the log did promise
			// once: then it is judged by the range its events show,
			// nothing outside (BaseTs, resolved seen after] and none
			// missing above the checkpoint up to the highest it returned.
			lo, readTo = BaseTs, 0
			for _, ev := range evs {
				readTo = max(readTo, min(ev.ts, rs))
			}
		}
	}
	s.h.checkRead(what, lo, top, max(cpEnd, cp), readTo, evs, rerr)
	if rerr == nil {
		// Everything from the checkpoint the read started at up to readTo
		// was read: the sink may apply it.
		for {
			a := s.applied.Load()
			if a >= readTo || s.applied.CompareAndSwap(a, readTo) {
				break
			}
		}
	}
}

// Finish stops the background, turns the Liar's faults off, lets a fresh
// coordinator settle, and checks the whole log: every acknowledged event
// above the final checkpoint must read back, exactly once, in order; then
// Verify must find the log healthy. The writers must be stopped first.
func (s *Session) Finish(ctx context.Context) *Report {
	if s.cancel != nil {
		s.cancel()
		s.wg.Wait()
	}
	if s.cfg.Liar != nil {
		s.cfg.Liar.SetLying(false)
	}
	rep := &Report{Seed: s.cfg.Seed, Mode: "in-process", MemoryQuota: s.cfg.MemoryQuota}
	var cp, rs uint64
	err := s.retry(ctx, "settle the coordinator after the run", func(ctx context.Context) error {
		c, err := meta.OpenCoordinator(ctx, s.cfg.Bucket, s.cfg.LogID, nil)
		if err != nil {
			return err
		}
		if _, err := c.Tick(ctx); err != nil {
			return err
		}
		cp, rs, err = s.observe(ctx, "after the run")
		return err
	})
	// The writer states as the run left them, with the fences the final
	// reads must apply (a failure to read them is a liveness violation).
	var states map[string]*meta.WriterState
	s.retry(ctx, "read the writer states after the run", func(ctx context.Context) error {
		var err error
		states, err = meta.ListWriterStates(ctx, s.cfg.Clean, s.cfg.LogID, nil)
		return err
	})
	if err == nil {
		acked, top := s.h.ackedAbove(cp)
		hi := max(rs, top)
		// Three times, each with a listing of its own: with the faults off
		// every read of a healthy store succeeds, and a store that drops
		// objects from some listings is caught even when a correct reader
		// turns each drop into an error.
		for i := 1; hi > cp && i <= finalReads; i++ {
			what := fmt.Sprintf("final read %d of %d of (%d, %d] (faults off)", i, finalReads, cp, hi)
			octx, cancel := context.WithTimeout(ctx, 4*s.cfg.OpTimeout)
			evs, rerr := readRange(octx, s.cfg.Bucket, s.cfg.LogID, cp, hi)
			if errors.Is(rerr, reader.ErrUnproven) && hi > rs {
				// The reader refuses a range above what the log proves
				// complete, the global resolved ts (a writer whose last
				// flushes failed holds it below what the others
				// acknowledged): a recovery replays up to it, and what
				// lies above is the unresolved tail a CDC system writes
				// again after a failover. The acknowledged events up to
				// it are checked; those above are counted.
				for id := range acked {
					if id.ts > rs {
						delete(acked, id)
						rep.AckedUnproven++
					}
				}
				hi = rs
				what = fmt.Sprintf("final read %d of %d of (%d, %d] (faults off; the reader refused to read above the global resolved ts %d)", i, finalReads, cp, hi, rs)
				evs, rerr = nil, nil
				if hi > cp {
					evs, rerr = readRange(octx, s.cfg.Bucket, s.cfg.LogID, cp, hi)
				}
			}
			cancel()
			got := s.h.checkRead(what, cp, hi, cp, rs, evs, rerr)
			s.h.checkCommitted(what, states, evs)
			var missing []eventID
			for id := range acked {
				if !got[id] {
					missing = append(missing, id)
				}
			}
			if len(missing) > 0 {
				slices.SortFunc(missing, func(a, b eventID) int { return int(a.ts) - int(b.ts) })
				cause := "missing from a read that reported no error"
				if rerr != nil {
					cause = fmt.Sprintf("unread: the read failed: %v", rerr)
				}
				s.h.violate(RuleAckLost, "%s: %d of %d acknowledged events above the final checkpoint %d %s; first %s (acknowledged by %s)",
					what, len(missing), len(acked), cp, cause, missing[0], s.ackOf(missing[0]))
			} else if rerr != nil {
				s.h.violate(RuleAckLost, "%s failed with every acknowledged event read: %v", what, rerr)
			}
			rep.AckedEvents = int64(len(acked))
			rep.FinalReadEvents = int64(len(evs))
		}
		rep.FinalCheckpoint, rep.FinalResolved = cp, rs
		s.verify(ctx)
	}
	rep.Counts, rep.Violations, rep.Suppressed = s.h.report()
	if l := s.cfg.Liar; l != nil {
		rep.Faults = l.Summary()
		rep.StaleServes = l.Count(blobtest.ActStale) + l.Count(blobtest.ActStaleTorn)
	}
	return rep
}

func (s *Session) ackOf(id eventID) string {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	var out []string
	for _, a := range s.h.acks {
		if a.Span == id.span && id.ts > a.From && id.ts <= a.To {
			out = append(out, fmt.Sprintf("%s epoch %d flushed to %d", a.Writer, a.Epoch, a.To))
		}
	}
	return strings.Join(out, "; ")
}

func (s *Session) verify(ctx context.Context) {
	octx, cancel := context.WithTimeout(ctx, 4*s.cfg.OpTimeout)
	defer cancel()
	rep, err := reader.Verify(octx, s.cfg.Bucket, s.cfg.LogID, &reader.VerifyOptions{Concurrency: 2})
	if err != nil {
		s.h.violate(RuleVerifyClean, "Verify could not walk the log: %v", err)
		return
	}
	for i, p := range rep.Errors() {
		if i == maxPerRule {
			break
		}
		s.h.violate(RuleVerifyClean, "%s", p)
	}
	s.h.count(func(c *Counts) { c.Uncommitted = rep.Uncommitted })
}

// finalReads is how many times the final range is read.
const finalReads = 3

// deleteWatch is the driver GC deletes through: a segment it deletes must be
// sealed and wholly below every checkpoint ever set, or hold no event of the
// log above it by its writer's state (read through the clean bucket; a state
// only gains fences): a segment the fence rule does not accept, or one of a
// fenced epoch whose fence's max ts and committed ts are below it.
type deleteWatch struct {
	driver.Driver
	s *Session
}

func (d *deleteWatch) Delete(ctx context.Context, keys []string) error {
	ceil := d.s.h.checkpointCeiling()
	var states map[string]*meta.WriterState
	var statesErr error
	for _, k := range keys {
		n, err := segment.ParseName(k)
		if err != nil {
			continue
		}
		if !n.Active && n.MaxTs < ceil {
			continue
		}
		if states == nil && statesErr == nil {
			// Not GC's context: a GC run canceled at the session's end
			// still calls Delete, and a state read that fails with it
			// would leave the check undecided (and flagged) for a delete
			// that may not even happen.
			states, statesErr = meta.ListWriterStates(context.WithoutCancel(ctx), d.s.cfg.Clean, d.s.cfg.LogID, nil)
		}
		if st := states[n.WriterID]; st != nil && n.Epoch < st.Epoch {
			if !st.Accepts(n) {
				continue
			}
			if f, ok := st.Fence(n.Epoch); ok && max(f.MaxTs, f.CommittedTs) < ceil {
				continue
			}
		}
		d.s.h.violate(RuleGCSafe, "GC deleted %s (max ts %d, active %v) while no checkpoint above %d was ever set, and its writer's state (%v) does not supersede it", k, n.MaxTs, n.Active, ceil, statesErr)
	}
	return d.Driver.Delete(ctx, keys)
}

// explain lists the sealed segments whose range holds id's ts now (read
// through the clean bucket), and who acknowledged it.
func (s *Session) explain(id eventID) string {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.OpTimeout)
	defer cancel()
	var keys []string
	for a, err := range s.cfg.Clean.List(ctx, layout.Segments(s.cfg.LogID)) {
		if err != nil {
			return fmt.Sprintf("the segments could not be listed: %v", err)
		}
		n, err := segment.ParseName(a.Key)
		if err != nil {
			keys = append(keys, a.Key+" (not a segment name)")
			continue
		}
		if n.Active || n.MinTs <= id.ts && id.ts <= n.MaxTs {
			keys = append(keys, a.Key)
		}
	}
	ack := s.ackOf(id)
	if ack == "" {
		ack = "nobody"
	}
	return fmt.Sprintf("acknowledged by %s; segments that may hold it now: %s", ack, strings.Join(keys, ", "))
}
