package meta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/segment"
)

// Errors of the coordinator. Each names the rule a call would have broken.
var (
	// ErrCheckpointAhead: a checkpoint above the global resolved ts would
	// let the downstream hold data the log does not.
	ErrCheckpointAhead = errors.New("meta: checkpoint ts above the global resolved ts")
	// ErrBackwards: the checkpoint never goes backwards.
	ErrBackwards = errors.New("meta: ts would go backwards")
	// ErrBarrierTooLate: a DDL barrier below the global resolved ts cannot
	// hold anything any more.
	ErrBarrierTooLate = errors.New("meta: DDL barrier below the global resolved ts")
)

// CoordinatorOptions configure OpenCoordinator. Nil means defaults.
type CoordinatorOptions struct {
	// StartTs is where a new log starts: its first checkpoint and resolved ts.
	StartTs uint64
	// StaleAfter reports a live writer whose progress is older than this
	// (default 30 s). A stale writer is reported, never dropped: removing
	// it is the explicit RemoveWriter (failover).
	StaleAfter time.Duration
	Now        func() time.Time
	Logger     *slog.Logger
}

// Coordinator computes and persists a log's global resolved ts and
// checkpoint. Run one per log, in the process that owns the log (TiCDC's
// owner); a second one is safe (every write is a compare-and-swap) but
// wasteful. It is safe for concurrent use.
//
// The global resolved ts is
//
//	max(previous, min(min over registered spans of their effective flushed ts,
//	                  min over pending barriers of their commit ts))
//
// where a span's effective flushed ts is the highest ts any writer that owned
// it published for it — so a span that failed over keeps the progress its
// dead owner made durable until its new owner passes it, and the watermark
// neither falls nor jumps ahead of what is durable. With no span registered,
// the minimum is over the live writers' flushed ts instead.
type Coordinator struct {
	b     *blob.Bucket
	logID string
	o     CoordinatorOptions

	mu   sync.Mutex
	m    *Meta
	etag string
	// pending are the tokens of meta writes whose outcome is open, all
	// conditioned on etag: the next update settles them by a re-read first.
	pending map[string]bool
	stale   []StaleWriter
	// seenMetaGen is the newest meta generation a writer state read at
	// open or at a Tick had seen: no update is made from an older object.
	seenMetaGen uint64
}

// StaleWriter is a live writer whose progress is older than StaleAfter.
type StaleWriter struct {
	WriterID  string
	Epoch     uint64
	FlushedTs uint64
	Updated   time.Time // zero: never published
}

// OpenCoordinator opens (or creates) the meta object of logID. A log whose
// removal started and did not finish is ErrDeleting: a new log must never mix
// with an old one's leftovers, and finishing the removal is GC's job
// (gc.ResumeDeleteLog; redokit.Log.OpenWriter and OpenCoordinator call it
// first).
func OpenCoordinator(ctx context.Context, b *blob.Bucket, logID string, opts *CoordinatorOptions) (*Coordinator, error) {
	var o CoordinatorOptions
	if opts != nil {
		o = *opts
	}
	if o.StaleAfter <= 0 {
		o.StaleAfter = 30 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if err := checkNotDeleting(ctx, b, logID); err != nil {
		return nil, err
	}
	c := &Coordinator{b: b, logID: logID, o: o}
	key := layout.Meta(logID)
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, attempt-1); err != nil {
				return nil, fmt.Errorf("meta: open coordinator of %s: %w", key, err)
			}
		}
		m, etag, err := ReadMeta(ctx, b, logID)
		if err == nil {
			c.m, c.etag = m, etag
			if err := c.checkAtOpen(ctx); err != nil {
				return nil, err
			}
			return c, nil
		}
		if !blob.IsNotExist(err) {
			return nil, err
		}
		m = &Meta{Version: StateVersion, LogID: logID, CheckpointTs: o.StartTs, ResolvedTs: o.StartTs,
			Writers: map[string]uint64{}, Spans: map[SpanID]uint64{}, Barriers: []Barrier{},
			RemovedSpans: map[SpanID]uint64{}, Generation: 1, WriterGenerations: map[string]uint64{},
			Updated: o.Now().UTC(), Token: newToken()}
		attrs, err := b.Put(ctx, key, encodeMeta(m), &blob.PutOptions{IfNotExist: true})
		switch {
		case err == nil:
			c.m, c.etag = m, attrs.ETag
			return c, nil
		case definitive(err):
			return nil, err
		case blob.IsPreconditionFailed(err):
			continue // created concurrently (or by an attempt of ours whose answer was lost): read it
		}
		// The outcome is unknown: whoever created it, an object there is
		// the log's meta; none means this put did not land (yet).
		got, etag, rerr := ReadMeta(ctx, b, logID)
		switch {
		case rerr == nil:
			c.m, c.etag = got, etag
			return c, nil
		case !blob.IsNotExist(rerr):
			return nil, fmt.Errorf("meta: create %s: the put failed and re-reading it failed too (the put may still land): %w", key, errors.Join(err, rerr))
		}
		return nil, err
	}
	return nil, fmt.Errorf("meta: create %s: lost the create race %d times in a row, yet cannot read the object; the store may serve stale reads: %w", key, maxAttempts, ErrContended)
}

// checkAtOpen holds the writer states against the meta object the
// coordinator opened on (CheckStates): a coordinator that opens on a stale
// copy and then writes, whatever the write, would carry the old content
// forward. It costs a listing of the writer states.
func (c *Coordinator) checkAtOpen(ctx context.Context) error {
	states, err := ListWriterStates(ctx, c.b, c.logID, nil)
	if err != nil {
		return fmt.Errorf("meta: open coordinator of %s: %w", c.logID, err)
	}
	if err := CheckStates(ctx, c.b, c.logID, c.m, states); err != nil {
		return fmt.Errorf("meta: open coordinator of %s: %w", c.logID, err)
	}
	for _, st := range states {
		c.seenMetaGen = max(c.seenMetaGen, st.MetaGeneration)
	}
	if c.m.Generation >= c.seenMetaGen {
		return nil
	}
	// CheckStates settled it with a fresh read; hold that one (with its
	// ETag), not the stale one the open read, or the first update would
	// write the stale content forward.
	m, etag, err := ReadMeta(ctx, c.b, c.logID)
	if err != nil {
		return fmt.Errorf("meta: open coordinator of %s: %w", c.logID, err)
	}
	if m.Generation < c.seenMetaGen {
		return fmt.Errorf("meta: open coordinator of %s: %w", c.logID, &StaleError{Key: layout.Meta(c.logID), Got: m.Generation,
			Witness: "the writer states", Want: c.seenMetaGen, Detail: "a writer had read that generation"})
	}
	c.m, c.etag = m, etag
	return nil
}

// Meta returns a copy of the last meta object the coordinator read or wrote.
func (c *Coordinator) Meta() Meta {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cloneMeta(c.m)
}

func cloneMeta(m *Meta) Meta {
	cp := *m
	cp.Writers = maps.Clone(m.Writers)
	cp.Spans = maps.Clone(m.Spans)
	cp.RemovedSpans = maps.Clone(m.RemovedSpans)
	cp.WriterGenerations = maps.Clone(m.WriterGenerations)
	if cp.RemovedSpans == nil {
		cp.RemovedSpans = map[SpanID]uint64{}
	}
	if cp.WriterGenerations == nil {
		cp.WriterGenerations = map[string]uint64{}
	}
	cp.Barriers = slices.Clone(m.Barriers)
	if cp.Barriers == nil {
		cp.Barriers = []Barrier{}
	}
	return cp
}

// update applies fn to a copy of the meta object and writes it by
// compare-and-swap, re-reading and re-applying on a lost race, at most 8
// times with backoff (then ErrContended, naming the key). It refuses any
// result that breaks an invariant, whatever fn did. A write whose outcome is
// unknown is settled by a re-read (finding its token is success); when the
// re-read fails, the error is returned and the next update settles first.
func (c *Coordinator) update(ctx context.Context, fn func(m *Meta) error) error {
	return c.updateChecked(ctx, fn, checkTransition)
}

// updateChecked is update with the invariant check to apply.
func (c *Coordinator) updateChecked(ctx context.Context, fn func(m *Meta) error, check func(prev, next *Meta) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := layout.Meta(c.logID)
	if len(c.pending) > 0 {
		if _, err := c.settle(ctx); err != nil {
			return err
		}
	}
	refreshed := false
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, attempt-1); err != nil {
				return fmt.Errorf("meta: update %s: %w", key, err)
			}
		}
		if c.m.Generation < c.seenMetaGen {
			// A writer saw a newer object than the one held: never write
			// from this one. A fresh read decides (once).
			if refreshed {
				return &StaleError{Key: key, Got: c.m.Generation, Witness: "a writer state read by this coordinator", Want: c.seenMetaGen,
					Detail: "its writer had read that generation"}
			}
			refreshed = true
			if _, err := c.settle(ctx); err != nil {
				return err
			}
			attempt--
			continue
		}
		next := cloneMeta(c.m)
		if err := fn(&next); err != nil {
			var behind *metaBehind
			if errors.As(err, &behind) && !refreshed {
				// A writer saw a newer meta object than the one held:
				// another process wrote it meanwhile, or the one held is
				// stale. A fresh read decides (once).
				refreshed = true
				if _, err := c.settle(ctx); err != nil {
					return err
				}
				attempt--
				continue
			}
			if errors.As(err, &behind) {
				return behind.err
			}
			return err
		}
		if err := check(c.m, &next); err != nil {
			return err
		}
		next.Updated = c.o.Now().UTC()
		next.Token = newToken()
		next.Generation = c.m.Generation + 1
		if next.Barriers == nil {
			next.Barriers = []Barrier{}
		}
		if c.pending == nil {
			c.pending = map[string]bool{}
		}
		c.pending[next.Token] = true
		attrs, err := c.b.Put(ctx, key, encodeMeta(&next), &blob.PutOptions{IfMatch: c.etag})
		if err == nil {
			c.m, c.etag, c.pending = &next, attrs.ETag, nil
			return nil
		}
		if definitive(err) {
			delete(c.pending, next.Token)
			return err
		}
		landed, serr := c.settle(ctx)
		switch {
		case serr != nil:
			return fmt.Errorf("meta: update %s: the put failed and its outcome is still open: %w", key, errors.Join(err, serr))
		case landed == next.Token:
			return nil
		case landed != "":
			continue // an earlier write of ours landed: apply fn on top of it
		case !blob.IsPreconditionFailed(err):
			return err // nothing landed: the put failed
		}
		// Lost the race: settle adopted the winner's version.
	}
	return fmt.Errorf("meta: update %s: compare-and-swap lost %d times in a row; the store may serve stale reads after an overwrite: %w", key, maxAttempts, ErrContended)
}

// settle re-reads the meta object and returns the token of the write of
// ours that landed ("" for none). Any version other than the one the
// coordinator holds is adopted: after it no write of ours conditioned on
// the old ETag can land. Called with c.mu held.
func (c *Coordinator) settle(ctx context.Context) (string, error) {
	m, etag, err := ReadMeta(ctx, c.b, c.logID)
	if err != nil {
		return "", fmt.Errorf("meta: re-read %s: %w", layout.Meta(c.logID), err)
	}
	if etag == c.etag && m.Token == c.m.Token {
		return "", nil // unchanged: what is pending may still land
	}
	if err := c.checkFresh(m, etag); err != nil {
		return "", err
	}
	landed := ""
	if c.pending[m.Token] {
		landed = m.Token
	}
	c.m, c.etag, c.pending = m, etag, nil
	return landed, nil
}

// checkFresh refuses a meta object read that is older than the one the
// coordinator holds (the last it read or wrote): a restored version or a
// lagging replica. Adopting it would let the next write carry its old
// content forward. The held version under another ETag is refused too:
// the ETag may be that of a write of ours whose body the read did not
// return yet, so the pair is not proven to be of one version. Called with
// c.mu held.
func (c *Coordinator) checkFresh(m *Meta, etag string) error {
	key := layout.Meta(c.logID)
	held := c.m.Generation
	switch {
	case m.Generation < held:
		return &StaleError{Key: key, Got: m.Generation, Witness: "this coordinator", Want: held,
			Detail: "it read or wrote that generation before"}
	case m.Generation == held && m.Token != c.m.Token:
		return &StaleError{Key: key, Got: m.Generation, Witness: "this coordinator", Want: held + 1,
			Detail: fmt.Sprintf("it holds generation %d with token %s, and the object read has another token at the same generation: a write made from a stale read", held, c.m.Token)}
	case m.Generation == held && etag != c.etag:
		return &StaleError{Key: key, Got: m.Generation, Witness: "this coordinator", Want: held + 1,
			Detail: fmt.Sprintf("the read paired the body it holds with another ETag (%s, not %s): the body may lag a newer version", etag, c.etag)}
	}
	return nil
}

// metaBehind is what an update function returns when a writer state proves
// a newer meta object than the one it was given: update reads the object
// again once, and returns err if the fresh one is still behind.
type metaBehind struct{ err error }

func (e *metaBehind) Error() string { return e.err.Error() }

// checkTransition is invariant 3 of the design: neither ts goes backwards,
// and the checkpoint never passes the resolved ts.
func checkTransition(prev, next *Meta) error {
	switch {
	case next.ResolvedTs < prev.ResolvedTs:
		return fmt.Errorf("%w: resolved ts %d → %d", ErrBackwards, prev.ResolvedTs, next.ResolvedTs)
	case next.CheckpointTs < prev.CheckpointTs:
		return fmt.Errorf("%w: checkpoint ts %d → %d", ErrBackwards, prev.CheckpointTs, next.CheckpointTs)
	case next.CheckpointTs > next.ResolvedTs:
		return fmt.Errorf("%w: checkpoint %d, resolved %d", ErrCheckpointAhead, next.CheckpointTs, next.ResolvedTs)
	}
	return nil
}

// AddWriter makes writerID a live writer of the log.
func (c *Coordinator) AddWriter(ctx context.Context, writerID string) error {
	if err := segment.ValidateID(writerID); err != nil {
		return fmt.Errorf("meta: add writer: %w", err)
	}
	return c.update(ctx, func(m *Meta) error {
		if _, ok := m.Writers[writerID]; !ok {
			m.Writers[writerID] = 0
		}
		return nil
	})
}

// RemoveWriter drops writerID from the live writers: the explicit failover
// step after a writer died. The progress it made for its spans stays in the
// spans' effective flushed ts, so the watermark holds until the spans' new
// owners pass it.
func (c *Coordinator) RemoveWriter(ctx context.Context, writerID string) error {
	return c.update(ctx, func(m *Meta) error {
		delete(m.Writers, writerID)
		return nil
	})
}

// AddSpan registers a span of the log at startTs: the span holds the
// watermark at startTs until an owner reports more. Registering a known span
// keeps its progress.
//
// A new span whose start is below the global resolved ts is refused
// (ErrSpanTooLate): the log already claims (start, resolved] complete, and
// the span's events there are not in it. Register a span before its events
// can be resolved, as a DDL barrier holds the watermark for a new table.
func (c *Coordinator) AddSpan(ctx context.Context, span SpanID, startTs uint64) error {
	return c.update(ctx, func(m *Meta) error {
		if _, ok := m.Spans[span]; ok {
			return nil
		}
		if startTs < m.ResolvedTs {
			return fmt.Errorf("%w: span %d at start ts %d, resolved ts %d", ErrSpanTooLate, span, startTs, m.ResolvedTs)
		}
		m.Spans[span] = startTs
		delete(m.RemovedSpans, span)
		return nil
	})
}

// RemoveSpan unregisters a span (its table was dropped).
func (c *Coordinator) RemoveSpan(ctx context.Context, span SpanID) error {
	return c.update(ctx, func(m *Meta) error {
		if ts, ok := m.Spans[span]; ok {
			m.RemovedSpans[span] = ts
			delete(m.Spans, span)
		}
		return nil
	})
}

// AddBarrier holds the watermark at or below commitTs until ReleaseBarrier(id):
// call it before a DDL that changes which spans exist (create table, add
// partition, truncate) is written, and release it once the DDL is written and
// the new spans are registered. A barrier below the current resolved ts is
// ErrBarrierTooLate.
func (c *Coordinator) AddBarrier(ctx context.Context, id string, commitTs uint64) error {
	if id == "" {
		return errors.New("meta: add barrier: empty barrier ID")
	}
	return c.update(ctx, func(m *Meta) error {
		if commitTs < m.ResolvedTs {
			return fmt.Errorf("%w: barrier %s at %d, resolved ts %d", ErrBarrierTooLate, id, commitTs, m.ResolvedTs)
		}
		m.Barriers = slices.DeleteFunc(m.Barriers, func(b Barrier) bool { return b.ID == id })
		m.Barriers = append(m.Barriers, Barrier{ID: id, CommitTs: commitTs})
		return nil
	})
}

// ReleaseBarrier removes a barrier. Releasing an unknown one is not an error.
func (c *Coordinator) ReleaseBarrier(ctx context.Context, id string) error {
	return c.update(ctx, func(m *Meta) error {
		m.Barriers = slices.DeleteFunc(m.Barriers, func(b Barrier) bool { return b.ID == id })
		return nil
	})
}

// Tick reads every writer's progress, folds it into the spans' effective
// flushed ts, recomputes the global resolved ts, and persists the meta object
// if anything changed. It returns the meta object after the tick.
//
// Before it uses a writer state it cross-checks it with the meta object
// (see Freshness in the package doc): a state older than the generation
// the meta object accounted for its writer, a meta object older than one a
// writer state saw, or a span a writer publishes that the meta object
// neither lists nor removed is an error naming both objects, and nothing
// is written. A race with another coordinator or a writer (a newer object
// written between the reads) is told apart by reading again.
func (c *Coordinator) Tick(ctx context.Context) (Meta, error) {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var m Meta
		m, err = c.tick(ctx)
		var behind *statesBehind
		if !errors.As(err, &behind) {
			return m, err
		}
		// The meta object accounted a newer state than the listing read:
		// another coordinator read it meanwhile, or the state read is
		// stale. Read the states again.
	}
	var behind *statesBehind
	errors.As(err, &behind)
	return Meta{}, behind.err
}

// statesBehind is what a tick returns when a writer state read is older
// than the meta object accounted: Tick reads the states again, and returns
// err if they are still behind.
type statesBehind struct {
	writer string // the writer whose state is behind
	err    error
}

func (e *statesBehind) Error() string { return e.err.Error() }

func (c *Coordinator) tick(ctx context.Context) (Meta, error) {
	states, err := ListWriterStates(ctx, c.b, c.logID, nil)
	if err != nil {
		return Meta{}, err
	}
	now := c.o.Now()
	var stale []StaleWriter
	err = c.update(ctx, func(m *Meta) error {
		if err := crossCheck(c.logID, m, states); err != nil {
			return err
		}
		stale = stale[:0]
		for id := range m.Writers {
			st := states[id]
			if st == nil {
				stale = append(stale, StaleWriter{WriterID: id})
				continue
			}
			m.Writers[id] = st.Epoch
			if now.Sub(st.Updated) > c.o.StaleAfter {
				stale = append(stale, StaleWriter{WriterID: id, Epoch: st.Epoch, FlushedTs: st.FlushedTs, Updated: st.Updated})
			}
		}
		// Every writer's published span progress counts, live or removed:
		// what it published is durable (fences keep its segments).
		listed := map[SpanID]bool{}
		for id, st := range states {
			c.seenMetaGen = max(c.seenMetaGen, st.MetaGeneration)
			m.WriterGenerations[id] = max(m.WriterGenerations[id], st.Generation)
			for _, s := range st.Spans {
				span := SpanID(s.Span)
				listed[span] = true
				if cur, ok := m.Spans[span]; ok && s.Ts > cur {
					m.Spans[span] = s.Ts
				}
			}
		}
		for span := range m.RemovedSpans {
			if !listed[span] {
				delete(m.RemovedSpans, span)
			}
		}
		m.ResolvedTs = max(m.ResolvedTs, resolvedRule(m, states))
		return nil
	})
	c.mu.Lock()
	c.stale = stale
	c.mu.Unlock()
	if err != nil {
		return Meta{}, err
	}
	return c.Meta(), nil
}

// crossCheck holds the writer states read against the meta object m: each
// must be at least as new as the generation m accounted for it, m must be
// at least as new as every generation of it a state saw, and in a log with
// registered spans every span a state publishes must be registered or
// removed. A state behind m is *statesBehind and m behind a state
// *metaBehind (each may be a race, which a fresh read settles); a span
// neither registered nor removed after a fresh read is ErrInconsistent.
func crossCheck(logID string, m *Meta, states map[string]*WriterState) error {
	metaKey := layout.Meta(logID)
	for _, id := range slices.Sorted(maps.Keys(states)) {
		st := states[id]
		key := layout.WriterState(logID, id)
		if want := m.WriterGenerations[id]; st.Generation < want {
			return &statesBehind{id, &StaleError{Key: key, Got: st.Generation, Witness: metaKey, Want: want,
				Detail: fmt.Sprintf("meta generation %d accounted that generation of the writer's state", m.Generation)}}
		}
		if st.MetaGeneration > m.Generation {
			return &metaBehind{&StaleError{Key: metaKey, Got: m.Generation, Witness: key, Want: st.MetaGeneration,
				Detail: fmt.Sprintf("writer %s had read that generation when it wrote its state generation %d", id, st.Generation)}}
		}
	}
	if len(m.Spans) == 0 && len(m.RemovedSpans) == 0 {
		return nil // no span registered: the watermark is over the writers
	}
	for _, id := range slices.Sorted(maps.Keys(states)) {
		for _, s := range states[id].Spans {
			_, ok := m.Spans[SpanID(s.Span)]
			_, gone := m.RemovedSpans[SpanID(s.Span)]
			if !ok && !gone {
				return &metaBehind{&InconsistentError{Key: metaKey, Witness: layout.WriterState(logID, id),
					Detail: fmt.Sprintf("writer %s publishes span %d (flushed to %d), which meta generation %d neither registers nor removed: the meta object predates the span's registration (stale), or the writer took the span before it was registered",
						id, s.Span, s.Ts, m.Generation)}}
			}
		}
	}
	return nil
}

// resolvedRule is the watermark rule; a variable so tests can break it on
// purpose and see the invariant checks catch it.
var resolvedRule = computeResolved

// computeResolved is the watermark formula of the Coordinator doc, before
// the never-backwards max.
func computeResolved(m *Meta, states map[string]*WriterState) uint64 {
	lowest, any := uint64(0), false
	take := func(ts uint64) {
		if !any || ts < lowest {
			lowest, any = ts, true
		}
	}
	if len(m.Spans) > 0 {
		for _, ts := range m.Spans {
			take(ts)
		}
	} else {
		for id := range m.Writers {
			if st := states[id]; st != nil {
				take(st.FlushedTs)
			} else {
				take(0) // a live writer with no progress yet holds everything
			}
		}
	}
	for _, b := range m.Barriers {
		take(b.CommitTs)
	}
	if !any {
		return m.ResolvedTs
	}
	return lowest
}

// Stale returns the live writers whose progress was older than StaleAfter
// (or missing) at the last Tick.
func (c *Coordinator) Stale() []StaleWriter {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.stale)
}

// SetCheckpoint records that the downstream has applied everything up to ts.
// A ts above the global resolved ts is ErrCheckpointAhead and one below the
// current checkpoint ErrBackwards: errors, never silent clamps. Moving the
// checkpoint deletes nothing: GC reads it on its own schedule (gc.Scheduler).
func (c *Coordinator) SetCheckpoint(ctx context.Context, ts uint64) error {
	return c.update(ctx, func(m *Meta) error {
		if ts > m.ResolvedTs {
			return fmt.Errorf("%w: checkpoint %d, resolved %d", ErrCheckpointAhead, ts, m.ResolvedTs)
		}
		if ts < m.CheckpointTs {
			return fmt.Errorf("%w: checkpoint %d → %d", ErrBackwards, m.CheckpointTs, ts)
		}
		m.CheckpointTs = ts
		return nil
	})
}

// RewindCheckpoint moves the checkpoint back to ts: the operator's step
// after the downstream was restored to an earlier point (a backup), so that
// a replay starts from there. It is the one exception to "the checkpoint
// never goes backwards", and only the checkpoint moves: a ts above the
// global resolved ts is still ErrCheckpointAhead, since every later update
// of the meta object would be refused until the resolved ts passed it.
// Segments GC deleted below the old checkpoint do not come back: a replay
// from ts fails loudly on the missing chain rather than read short.
func (c *Coordinator) RewindCheckpoint(ctx context.Context, ts uint64) error {
	return c.updateChecked(ctx, func(m *Meta) error {
		if ts > m.ResolvedTs {
			return fmt.Errorf("%w: checkpoint %d, resolved %d", ErrCheckpointAhead, ts, m.ResolvedTs)
		}
		m.CheckpointTs = ts
		return nil
	}, func(prev, next *Meta) error {
		rewound := *next
		rewound.CheckpointTs = max(next.CheckpointTs, prev.CheckpointTs)
		if next.CheckpointTs > next.ResolvedTs {
			return fmt.Errorf("%w: checkpoint %d, resolved %d", ErrCheckpointAhead, next.CheckpointTs, next.ResolvedTs)
		}
		return checkTransition(prev, &rewound)
	})
}

// Run ticks every interval until ctx ends, logging failed ticks.
func (c *Coordinator) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := c.Tick(ctx); err != nil && ctx.Err() == nil {
			c.o.Logger.Warn("coordinator tick failed", "log", c.logID, "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
