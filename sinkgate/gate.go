package sinkgate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/meta"
)

// Downstream is where released events go: the sink's real target.
type Downstream interface {
	// Apply writes events downstream. They are all at or below the global
	// resolved ts, in commit-ts order (rows before DDLs at one ts, then
	// arrival order), and each batch ends at a commit-ts boundary. The
	// events belong to the gate: Apply must not keep them past its return.
	// Apply must be idempotent: after a failed call, and after a failover,
	// the same events come again.
	Apply(ctx context.Context, events []codec.Event) error
}

// DownstreamFunc adapts a function to Downstream.
type DownstreamFunc func(ctx context.Context, events []codec.Event) error

// Apply calls f.
func (f DownstreamFunc) Apply(ctx context.Context, events []codec.Event) error { return f(ctx, events) }

// Resolved tells the gate the log's global resolved ts. *meta.Watcher
// implements it by polling the persisted meta object, which is what the
// rule needs: a watermark only the coordinator's memory holds does not
// survive a crash.
type Resolved interface {
	// WaitResolved blocks until the global resolved ts is at least ts and
	// returns it, or until ctx ends.
	WaitResolved(ctx context.Context, ts uint64) (uint64, error)
}

// Checkpointer receives the downstream's applied ts. *meta.Coordinator
// implements it; so does a [Checkpoints] member, and CheckpointFunc adapts
// a callback (an RPC to a coordinator in another process).
type Checkpointer interface {
	SetCheckpoint(ctx context.Context, ts uint64) error
}

// CheckpointFunc adapts a function to Checkpointer.
type CheckpointFunc func(ctx context.Context, ts uint64) error

// SetCheckpoint calls f.
func (f CheckpointFunc) SetCheckpoint(ctx context.Context, ts uint64) error { return f(ctx, ts) }

// Redo is the part of the redo writer the gate drives. *writer.Writer
// implements it.
type Redo interface {
	// WriteEncoded takes events encoded with codec.AppendEvent: the gate
	// encodes each event once, for the writer and for its own queue.
	WriteEncoded(ctx context.Context, span meta.SpanID, events ...[]byte) error
	AddSpan(span meta.SpanID, startTs uint64) error
	RemoveSpan(span meta.SpanID) error
	AdvanceResolved(span meta.SpanID, ts uint64) error
	FlushedTs() uint64
	Close(ctx context.Context) error
}

var (
	_ Resolved     = (*meta.Watcher)(nil)
	_ Checkpointer = (*meta.Coordinator)(nil)
	_ Checkpointer = CheckpointFunc(nil)
	_ Downstream   = DownstreamFunc(nil)
)

// ErrClosed is returned by every call after Close, and by Run once Close
// began.
var ErrClosed = errors.New("sinkgate: closed")

// Defaults of Options.
const (
	DefaultMaxHeldBytes = 64 << 20
	DefaultMaxBatch     = 1024
	DefaultRetryBackoff = 100 * time.Millisecond
)

// Options configure New. Nil means defaults.
type Options struct {
	// MaxHeldBytes bounds the encoded bytes of held events (written to the
	// redo log, not yet released). A Write that would pass it blocks.
	// Default 64 MiB.
	MaxHeldBytes int64
	// MaxBatch is the number of events per Downstream.Apply call; a batch
	// always ends at a commit-ts boundary, so one commit ts with more events
	// makes a bigger batch. Default 1024.
	MaxBatch int
	// RetryBackoff is the wait after a failed read of the resolved ts.
	// Default 100 ms.
	RetryBackoff time.Duration
	// Logger receives failures the gate retries. Default: discard.
	Logger *slog.Logger
}

// held is one event the gate holds: its encoding, and what orders it.
type held struct {
	ts      uint64
	ddl     bool
	arrival uint64
	data    []byte
}

// less is the release order: commit ts, rows before DDLs, arrival.
func (h *held) less(o *held) bool {
	if h.ts != o.ts {
		return h.ts < o.ts
	}
	if h.ddl != o.ddl {
		return !h.ddl
	}
	return h.arrival < o.arrival
}

// spanQ is one span's held events, in arrival (so commit-ts) order.
type spanQ struct {
	id       meta.SpanID
	resolved uint64 // the span's resolved ts as the gate was told
	applied  uint64 // every event of the span at or below it is applied downstream
	q        []held
	head     int // q[:head] are released and gone
	inflight int // q[head:head+inflight] are in the batch being applied
}

func (s *spanQ) pending() []held { return s.q[s.head:] }

// Stats count what a gate did.
type Stats struct {
	HeldEvents    int64 // held now
	HeldBytes     int64 // their encoded bytes
	Written       int64 // events written through the gate
	Released      int64 // events applied downstream
	Batches       int64 // Downstream.Apply calls that succeeded
	Dropped       int64 // events dropped: above a removed span's resolved ts, or above the flushed ts at Close
	BlockedWrites int64 // Writes blocked on MaxHeldBytes now
	Backpressure  time.Duration
	ReleasedTs    uint64 // see Gate.Released
	AppliedTs     uint64 // see Gate.Applied
}

// Gate holds a sink's events until the redo log covers them. Write,
// AdvanceResolved, AddSpan, RemoveSpan and the accessors are safe for
// concurrent use; run one Run at a time.
type Gate struct {
	w    Redo
	res  Resolved
	cp   Checkpointer
	down Downstream
	o    Options
	log  *slog.Logger

	mu       sync.Mutex
	spans    map[meta.SpanID]*spanQ
	retired  []*spanQ // removed spans whose queue still holds releasable events
	heldN    int64
	heldB    int64
	arrival  uint64
	released uint64 // highest G a release acted on
	applied  uint64 // the applied ts at the last release
	sent     uint64 // the applied ts last reported
	hasSent  bool
	closed   bool
	// closeDone is closed when the first Close has finished, with its
	// result in closeErr: a second Close waits for it and returns the same.
	closeDone chan struct{}
	closeErr  error
	room      chan struct{} // closed (and replaced) when held bytes are freed
	wake      func()        // cancels the release loop's wait for G
	stats     struct {
		written, released, batches, dropped, blocked int64
		backpressure                                 time.Duration
	}

	runMu sync.Mutex    // one release loop at a time: Run, or Close's drain
	stop  chan struct{} // closed by Close: Run returns
	cpMu  sync.Mutex    // serializes checkpoint reports, so they arrive in order

	events []codec.Event // decode buffer of the release loop
}

// New returns a gate in front of the redo writer w, releasing to down what
// res says the log covers and reporting the applied ts to cp. The gate
// starts with no spans: add them with AddSpan (not w.AddSpan), and drive the
// writer only through the gate from then on. A nil cp reports nothing.
func New(w Redo, res Resolved, cp Checkpointer, down Downstream, opts *Options) *Gate {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxHeldBytes <= 0 {
		o.MaxHeldBytes = DefaultMaxHeldBytes
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = DefaultRetryBackoff
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Gate{
		w: w, res: res, cp: cp, down: down, o: o, log: o.Logger,
		spans: map[meta.SpanID]*spanQ{},
		room:  make(chan struct{}),
		stop:  make(chan struct{}),
	}
}

// AddSpan adds a span to the writer and the gate at startTs: the downstream
// holds every event of the span at or below startTs (a new table's creation
// ts, or the log's checkpoint when the span moves here from another writer).
// When startTs is below the applied ts the gate last reported, it reports the
// lower value at once.
func (g *Gate) AddSpan(ctx context.Context, span meta.SpanID, startTs uint64) error {
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if err := g.w.AddSpan(span, startTs); err != nil {
		return err
	}
	g.mu.Lock()
	g.spans[span] = &spanQ{id: span, resolved: startTs, applied: startTs}
	lower := g.hasSent && startTs < g.sent
	g.applied = min(g.applied, startTs)
	g.mu.Unlock()
	if lower {
		g.report(ctx)
	}
	return nil
}

// RemoveSpan removes a span from the writer and the gate. Its held events at
// or below its resolved ts are still released when G covers them; those above
// are dropped, as the writer drops them: the span's next owner writes them
// again.
func (g *Gate) RemoveSpan(span meta.SpanID) error {
	if err := g.w.RemoveSpan(span); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.spans[span]
	if s == nil {
		return nil
	}
	delete(g.spans, span)
	// Events in the batch being applied stay, whatever their ts.
	keep := s.head + s.inflight
	for keep < len(s.q) && s.q[keep].ts <= s.resolved {
		keep++
	}
	var freed int64
	for i := keep; i < len(s.q); i++ {
		freed += int64(len(s.q[i].data))
	}
	dropped := len(s.q) - keep
	clear(s.q[keep:])
	s.q = s.q[:keep]
	g.free(int64(dropped), freed)
	g.stats.dropped += int64(dropped)
	if len(s.pending()) > 0 {
		g.retired = append(g.retired, s)
	}
	return nil
}

// free accounts for released or dropped events and wakes blocked Writes. The
// caller holds mu.
func (g *Gate) free(n, bytes int64) {
	g.heldN -= n
	g.heldB -= bytes
	g.broadcast()
}

// broadcast wakes every Write waiting for room. The caller holds mu.
func (g *Gate) broadcast() {
	close(g.room)
	g.room = make(chan struct{})
}

// AdvanceResolved passes a span's resolved ts to the writer and remembers it.
func (g *Gate) AdvanceResolved(span meta.SpanID, ts uint64) error {
	if err := g.w.AdvanceResolved(span, ts); err != nil {
		return err
	}
	g.mu.Lock()
	if s := g.spans[span]; s != nil && ts > s.resolved {
		s.resolved = ts
	}
	g.mu.Unlock()
	return nil
}

// Write writes events of one span to the redo writer, then holds them until
// the log's global resolved ts covers them. The writer's rules apply (events
// of a span in non-decreasing commit ts, above its resolved ts); a Write the
// writer refuses holds nothing. It blocks while the held events would pass
// MaxHeldBytes, or while the writer applies back-pressure, until ctx ends.
func (g *Gate) Write(ctx context.Context, span meta.SpanID, events ...codec.Event) error {
	if len(events) == 0 {
		return nil
	}
	// Encode once: the writer logs these bytes and the gate holds them,
	// exact, and the caller may reuse its events once Write returns.
	var buf []byte
	ends := make([]int, len(events))
	for i := range events {
		buf = codec.AppendEvent(buf, &events[i])
		ends[i] = len(buf)
	}
	encs := make([][]byte, len(events))
	for i, start := 0, 0; i < len(events); i++ {
		encs[i], start = buf[start:ends[i]:ends[i]], ends[i]
	}
	n := int64(len(buf))
	if err := g.reserve(ctx, n); err != nil {
		return err
	}
	if err := g.w.WriteEncoded(ctx, span, encs...); err != nil {
		g.mu.Lock()
		g.free(0, n)
		g.mu.Unlock()
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.spans[span]
	if s == nil {
		// Removed while the writer took them. They are above the span's
		// resolved ts (the writer checked), so RemoveSpan dropped them
		// from the writer too: the span's next owner writes them.
		g.free(0, n)
		g.stats.dropped += int64(len(events))
		return nil
	}
	wake := false
	for i := range events {
		s.q = append(s.q, held{ts: events[i].CommitTs(), ddl: events[i].IsDDL(), arrival: g.arrival, data: encs[i]})
		g.arrival++
		wake = wake || events[i].CommitTs() <= g.released
	}
	g.heldN += int64(len(events))
	g.stats.written += int64(len(events))
	if wake && g.wake != nil {
		// Already covered (a span catching up behind G): release without
		// waiting for G to move.
		g.wake()
	}
	return nil
}

// reserve takes n bytes of the held limit, waiting for room.
func (g *Gate) reserve(ctx context.Context, n int64) error {
	g.mu.Lock()
	var since time.Time
	for {
		if g.closed {
			g.unblock(since)
			g.mu.Unlock()
			return ErrClosed
		}
		if g.heldB == 0 || g.heldB+n <= g.o.MaxHeldBytes {
			g.heldB += n
			g.unblock(since)
			g.mu.Unlock()
			return nil
		}
		if since.IsZero() {
			since = time.Now()
			g.stats.blocked++
		}
		room := g.room
		g.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			g.mu.Lock()
			g.unblock(since)
			g.mu.Unlock()
			return ctx.Err()
		}
		g.mu.Lock()
	}
}

// unblock ends a blocked Write's accounting. The caller holds mu.
func (g *Gate) unblock(since time.Time) {
	if !since.IsZero() {
		g.stats.blocked--
		g.stats.backpressure += time.Since(since)
	}
}

// Released returns the highest global resolved ts the gate acted on: it never
// hands the downstream an event above it.
func (g *Gate) Released() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.released
}

// Applied returns the gate's applied ts at its last release (see the package
// doc): the downstream holds every event of the gate's spans at or below it.
func (g *Gate) Applied() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.applied
}

// Stats returns the gate's counters.
func (g *Gate) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return Stats{
		HeldEvents: g.heldN, HeldBytes: g.heldB,
		Written: g.stats.written, Released: g.stats.released, Batches: g.stats.batches,
		Dropped: g.stats.dropped, BlockedWrites: g.stats.blocked, Backpressure: g.stats.backpressure,
		ReleasedTs: g.released, AppliedTs: g.applied,
	}
}

// Run is the release loop: it waits for the global resolved ts to move,
// applies to the downstream every held event at or below it and reports the
// applied ts, until ctx ends (its error is returned), Close begins (nil), or
// the downstream fails (its error; the batch stays held, and Run again
// retries it).
func (g *Gate) Run(ctx context.Context) error {
	g.runMu.Lock()
	defer g.runMu.Unlock()
	select {
	case <-g.stop:
		return ErrClosed
	default:
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-g.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		if ctx.Err() != nil {
			select {
			case <-g.stop:
				return nil
			default:
				return ctx.Err()
			}
		}
		target, ok := g.waitTarget(ctx)
		if !ok {
			continue
		}
		if err := g.release(ctx, target); err != nil {
			if ctx.Err() != nil {
				continue
			}
			return err
		}
		g.report(ctx)
	}
}

// waitTarget returns the ts to release up to: at once when held events are
// already covered by the last G, otherwise once G passes it. false means
// nothing to do yet (ctx ended, or a read of G failed and was waited out).
func (g *Gate) waitTarget(ctx context.Context) (uint64, bool) {
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	g.mu.Lock()
	last := g.released
	if g.releasableLocked(last) {
		g.mu.Unlock()
		return last, true
	}
	// Checked and armed under one lock, so a Write of a covered event
	// between the two cannot be missed.
	g.wake = wcancel
	g.mu.Unlock()
	G, err := g.res.WaitResolved(wctx, last+1)
	g.mu.Lock()
	g.wake = nil
	g.mu.Unlock()
	switch {
	case err == nil:
		return G, true
	case ctx.Err() != nil:
		return 0, false
	case wctx.Err() != nil:
		return last, true // woken by a covered Write
	}
	g.log.Warn("sinkgate: cannot read the global resolved ts; retrying", "err", err)
	t := time.NewTimer(g.o.RetryBackoff)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return 0, false
}

// releasableLocked reports whether a held event is at or below ts.
func (g *Gate) releasableLocked(ts uint64) bool {
	for _, s := range g.spans {
		if p := s.pending(); len(p) > 0 && p[0].ts <= ts {
			return true
		}
	}
	for _, s := range g.retired {
		if p := s.pending(); len(p) > 0 && p[0].ts <= ts {
			return true
		}
	}
	return false
}

// release applies every held event at or below G, batch by batch, and then
// computes the applied ts. Only one release runs at a time (runMu).
func (g *Gate) release(ctx context.Context, G uint64) error {
	g.mu.Lock()
	g.released = max(g.released, G)
	g.mu.Unlock()
	var batch []held
	for {
		batch = g.take(batch[:0], G)
		if len(batch) == 0 {
			break
		}
		if err := g.apply(ctx, batch); err != nil {
			g.mu.Lock()
			for _, s := range g.queues() {
				s.inflight = 0
			}
			g.mu.Unlock()
			return fmt.Errorf("sinkgate: downstream: %w", err)
		}
		g.mu.Lock()
		var bytes int64
		for _, s := range g.queues() {
			for i := s.head; i < s.head+s.inflight; i++ {
				bytes += int64(len(s.q[i].data))
				s.q[i] = held{}
			}
			s.head += s.inflight
			s.inflight = 0
			if s.head > 64 && s.head > len(s.q)/2 {
				s.q = append(s.q[:0], s.q[s.head:]...)
				s.head = 0
			}
		}
		g.free(int64(len(batch)), bytes)
		g.stats.released += int64(len(batch))
		g.stats.batches++
		g.mu.Unlock()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.applied = g.appliedLocked(G)
	g.retired = slices.DeleteFunc(g.retired, func(s *spanQ) bool { return len(s.pending()) == 0 })
	return nil
}

// queues returns every queue, live and retired. The caller holds mu.
func (g *Gate) queues() []*spanQ {
	out := make([]*spanQ, 0, len(g.spans)+len(g.retired))
	for _, s := range g.spans {
		out = append(out, s)
	}
	return append(out, g.retired...)
}

// take marks the next batch in flight and returns it sorted: the held events
// of the lowest commit ts at or below G, then the next commit ts, and so on,
// until the batch has MaxBatch events. Whole commit ts only, so each span's
// share is a prefix of its queue (a span may hold a DDL before a row of the
// same ts; the batch reorders them).
func (g *Gate) take(dst []held, G uint64) []held {
	g.mu.Lock()
	defer g.mu.Unlock()
	qs := g.queues()
	for len(dst) < g.o.MaxBatch {
		lowest, any := uint64(0), false
		for _, s := range qs {
			if p := s.q[s.head+s.inflight:]; len(p) > 0 && p[0].ts <= G && (!any || p[0].ts < lowest) {
				lowest, any = p[0].ts, true
			}
		}
		if !any {
			break
		}
		for _, s := range qs {
			for s.head+s.inflight < len(s.q) && s.q[s.head+s.inflight].ts == lowest {
				dst = append(dst, s.q[s.head+s.inflight])
				s.inflight++
			}
		}
	}
	slices.SortFunc(dst, func(a, b held) int {
		switch {
		case a.less(&b):
			return -1
		case b.less(&a):
			return 1
		}
		return 0
	})
	return dst
}

// apply decodes a batch and hands it to the downstream.
func (g *Gate) apply(ctx context.Context, batch []held) error {
	if cap(g.events) < len(batch) {
		g.events = make([]codec.Event, len(batch))
	}
	evs := g.events[:len(batch)]
	for i := range batch {
		if err := codec.DecodeEvent(batch[i].data, &evs[i]); err != nil {
			// The gate encoded it; a failure here is a bug, not data.
			return fmt.Errorf("decode a held event at ts %d: %w", batch[i].ts, err)
		}
	}
	return g.down.Apply(ctx, evs)
}

// appliedLocked is the gate's applied ts after a release at G. The caller
// holds mu.
func (g *Gate) appliedLocked(G uint64) uint64 {
	ap, any := G, false
	for _, s := range g.queues() {
		bound := s.resolved
		if p := s.pending(); len(p) > 0 {
			// Events of a span come in commit-ts order, so every one
			// below the oldest held event was released.
			bound = min(bound, p[0].ts-1)
		}
		s.applied = max(s.applied, min(G, bound))
		if !any || s.applied < ap {
			ap, any = s.applied, true
		}
	}
	return ap
}

// report sends the applied ts to the Checkpointer when it changed. A report
// the coordinator refuses as backwards (a span joined behind) is expected;
// any other failure is logged and retried at the next release.
func (g *Gate) report(ctx context.Context) {
	if g.cp == nil {
		return
	}
	g.cpMu.Lock()
	defer g.cpMu.Unlock()
	g.mu.Lock()
	ts := g.applied
	same := g.hasSent && ts == g.sent
	g.mu.Unlock()
	if same {
		return
	}
	err := g.cp.SetCheckpoint(ctx, ts)
	if err != nil && !errors.Is(err, meta.ErrBackwards) {
		g.log.Warn("sinkgate: cannot report the checkpoint; retrying at the next release", "ts", ts, "err", err)
		return
	}
	g.mu.Lock()
	g.sent, g.hasSent = ts, true
	g.mu.Unlock()
}

// Close stops new writes, closes the redo writer, waits (until ctx ends)
// for the global resolved ts to cover the writer's final flushed ts, releases
// what it covers and drops every other held event. It stops Run. The
// writer's Close error (meta.ErrFenced for a writer that lost its lease) is
// returned, joined with any error of the final release. Close is idempotent:
// a later call waits (until its ctx ends) for the first to finish and returns
// the same result.
func (g *Gate) Close(ctx context.Context) (err error) {
	g.mu.Lock()
	if g.closed {
		done := g.closeDone
		g.mu.Unlock()
		select {
		case <-done:
			return g.closeErr
		case <-ctx.Done():
			return fmt.Errorf("sinkgate: wait for a Close under way: %w", ctx.Err())
		}
	}
	g.closed = true
	g.closeDone = make(chan struct{})
	defer func() {
		g.closeErr = err
		close(g.closeDone)
	}()
	g.broadcast() // blocked Writes return ErrClosed
	g.mu.Unlock()

	werr := g.w.Close(ctx)
	final := g.w.FlushedTs()
	close(g.stop)
	g.runMu.Lock()
	defer g.runMu.Unlock()

	g.mu.Lock()
	target, any := uint64(0), false
	for _, s := range g.queues() {
		for _, h := range s.pending() {
			if h.ts <= final {
				target, any = max(target, h.ts), true
			}
		}
	}
	target = max(target, g.released)
	g.mu.Unlock()

	var rerr error
	if any {
		// Whatever G covers is durable, whoever wrote it; what this
		// writer flushed is covered once G reaches target.
		G, err := g.res.WaitResolved(ctx, target)
		if err == nil {
			err = g.release(ctx, G)
		}
		rerr = err
	}
	if rerr == nil {
		g.report(ctx)
	}
	g.mu.Lock()
	var n, bytes int64
	for _, s := range g.queues() {
		for _, h := range s.pending() {
			n++
			bytes += int64(len(h.data))
		}
		s.q, s.head, s.inflight = nil, 0, 0
	}
	g.retired = nil
	g.free(n, bytes)
	g.stats.dropped += n
	g.mu.Unlock()
	return errors.Join(werr, rerr)
}
