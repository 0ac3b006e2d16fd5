package sinkgate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/internal/retry"
	"github.com/redokit/redokit/meta"
)

// Downstream is where released events go: the sink's real target.
type Downstream interface {
	// Apply writes events downstream. They are all at or below the global
	// resolved ts, in commit-ts order (rows before DDLs at one ts, then
	// arrival order), and each batch ends at a commit-ts boundary, except
	// in a commit ts read back from the log (see the package doc, Eviction)
	// whose events do not fit in MaxHeldBytes beside what the gate holds:
	// that one comes in consecutive batches. The events belong to the
	// gate: Apply must not keep them past its return.
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

// LogWriter is what a gate needs of its redo writer to read its own events
// back from the log (Options.Log): the log, writer and epoch its segments
// are named by, and a flush that makes every event it took durable.
// *writer.Writer implements it.
type LogWriter interface {
	Redo
	LogID() string
	ID() string
	Epoch() uint64
	// Flush makes every event at or below the writer's resolved ts
	// durable, and returns that flushed resolved ts.
	Flush(ctx context.Context) (uint64, error)
}

// Log is the redo log a gate evicts held events to and reads them back
// from: the log its writer writes. *redokit.Log implements it.
type Log interface {
	ID() string
	Bucket() *blob.Bucket
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

// ErrNoRoom matches the *NoRoomError a Write returns instead of blocking
// forever: a gate that cannot evict (no Options.Log) is full of events that
// no release can free before the writing span's own resolved ts moves,
// which its caller can only do once the Write returns.
var ErrNoRoom = errors.New("sinkgate: no room for the write")

// NoRoomError is ErrNoRoom with the numbers: the span and bytes of the
// Write, and what the gate holds.
type NoRoomError struct {
	Span  meta.SpanID
	Bytes int64 // the Write's encoded bytes the gate would hold
	Held  int64 // encoded bytes the gate holds
	// Stuck are the held bytes above the span's resolved ts and the
	// global resolved ts the gate acted on: none of them can be released
	// before the span's resolved ts moves.
	Stuck  int64
	Limit  int64  // Options.MaxHeldBytes
	Reason string // why the gate could not evict
}

func (e *NoRoomError) Error() string {
	return fmt.Sprintf("sinkgate: no room for a write of %d bytes of span %d: the gate holds %d bytes (limit %d), %d of them above what can be released before the span's resolved ts moves, and cannot evict them: %s",
		e.Bytes, e.Span, e.Held, e.Limit, e.Stuck, e.Reason)
}

// Is makes errors.Is(err, ErrNoRoom) true.
func (e *NoRoomError) Is(target error) bool { return target == ErrNoRoom }

// Defaults of Options.
const (
	DefaultMaxHeldBytes = 64 << 20
	DefaultMaxBatch     = 1024
	DefaultRetryBackoff = 100 * time.Millisecond
)

// Options configure New. Nil means defaults.
type Options struct {
	// MaxHeldBytes bounds the encoded bytes of held events (written to the
	// redo log, not yet released). A Write that would pass it evicts (with
	// Log), waits for a release that needs nothing of its caller, or fails
	// with ErrNoRoom (see the package doc). Default 64 MiB.
	MaxHeldBytes int64
	// MaxBatch is the number of events per Downstream.Apply call; a batch
	// ends at a commit-ts boundary, so one commit ts with more events makes
	// a bigger batch (except a commit ts read back from the log that does
	// not fit beside what the gate holds, see Downstream.Apply). Default
	// 1024.
	MaxBatch int
	// RetryBackoff is the wait after a failed read of the resolved ts.
	// Default 100 ms.
	RetryBackoff time.Duration
	// Logger receives failures the gate retries. Default: discard.
	Logger *slog.Logger
	// Log is the redo log the writer writes (its ID must be the writer's
	// LogID, and the writer must implement LogWriter). With it, a full
	// gate evicts held events to the log and reads them back when the
	// global resolved ts covers them (see the package doc, Eviction).
	// Without it, a Write that no release can make room for returns
	// ErrNoRoom.
	Log Log
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

// spanQ is one span's held events, in arrival (so commit-ts) order, and
// what the gate knows of the span's events the log owns.
type spanQ struct {
	id       meta.SpanID
	resolved uint64 // the span's resolved ts as the gate was told
	applied  uint64 // every event of the span at or below it is applied downstream
	q        []held
	head     int // q[:head] are released and gone
	inflight int // q[head:head+inflight] are in the batch being applied

	lastTs uint64 // the highest commit ts of the span a Write took or is taking
	// tables are the tables the span's events name (a DDL's Table and
	// Tables): a read-back keeps the events of the gate's spans' tables.
	tables  map[codec.TableName]struct{}
	lastTab codec.TableName
	// The span's events the log owns (evicted, or written into an evicted
	// range) lie in [winLo, winHi] when inLog is set: winLo only ever
	// rises, so it is a lower bound of the first one not delivered.
	inLog        bool
	winLo, winHi uint64
}

func (s *spanQ) pending() []held { return s.q[s.head:] }

// noteLog records that the log owns an event of the span at ts.
func (s *spanQ) noteLog(ts uint64) {
	if !s.inLog {
		s.inLog, s.winLo, s.winHi = true, ts, ts
		return
	}
	s.winLo, s.winHi = min(s.winLo, ts), max(s.winHi, ts)
}

// noteTables adds the tables of events to the span's.
func (s *spanQ) noteTables(events []codec.Event) {
	add := func(t codec.TableName) {
		if s.tables == nil {
			s.tables = map[codec.TableName]struct{}{}
		} else if t == s.lastTab {
			return
		}
		s.tables[t] = struct{}{}
		s.lastTab = t
	}
	for i := range events {
		ev := &events[i]
		if !ev.IsDDL() {
			add(ev.Row.Table)
			continue
		}
		add(ev.DDL.Table)
		for _, t := range ev.DDL.Tables {
			add(t.TableName)
		}
	}
}

// Stats count what a gate did.
type Stats struct {
	HeldEvents    int64 // held now
	HeldBytes     int64 // their encoded bytes, and those of a batch being read back
	Written       int64 // events written through the gate
	Released      int64 // events applied downstream
	Batches       int64 // Downstream.Apply calls that succeeded
	Dropped       int64 // events dropped: above a removed span's resolved ts, or above the flushed ts at Close
	BlockedWrites int64 // Writes blocked on MaxHeldBytes now
	Backpressure  time.Duration
	ReleasedTs    uint64 // see Gate.Released
	AppliedTs     uint64 // see Gate.Applied

	Evictions int64 // evictions: ranges of commit ts handed to the log
	Evicted   int64 // events the log owns instead of the gate: evicted, or written into an evicted range
	InLog     int64 // of those, not delivered yet
	ReadBack  int64 // events read back from the log and applied downstream

	// Failures the gate retries on its own, and only logs: while either
	// grows, the checkpoint (and so GC) or the releases stand still.
	CheckpointFailures   int64 // reports of the applied ts to the Checkpointer that failed (retried at the next release)
	ResolvedReadFailures int64 // reads of the global resolved ts that failed (retried after RetryBackoff)
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

	// The log the gate evicts to (see spill.go); spillOff says why it
	// cannot when it is not empty.
	lw       LogWriter
	bucket   *blob.Bucket
	logID    string
	writerID string
	epoch    uint64
	spillOff string

	mu       sync.Mutex
	spans    map[meta.SpanID]*spanQ
	retired  []*spanQ // removed spans whose queue still holds releasable events, or whose events the log owns
	heldN    int64
	heldB    int64
	arrival  uint64
	released uint64 // highest G a release acted on (lowered to where a read-back had to stop)
	applied  uint64 // the applied ts at the last release
	sent     uint64 // the applied ts last reported
	hasSent  bool
	closed   bool
	final    bool // Close closed the writer: its flushed ts is final
	// closeDone is closed when the first Close has finished, with its
	// result in closeErr: a second Close waits for it and returns the same.
	closeDone chan struct{}
	closeErr  error
	room      chan struct{} // closed (and replaced) when held bytes are freed
	wake      func()        // cancels the release loop's wait for G
	stats     struct {
		written, released, batches, dropped, blocked int64
		evictions, evicted, readBack                 int64
		backpressure                                 time.Duration
		checkpointFailures, resolvedFailures         int64
	}

	// windows are the commit-ts ranges the log owns, sorted, disjoint
	// (see spill.go).
	windows []*window
	// reading is the range a read-back is reading, from its listing on.
	reading struct {
		on     bool
		lo, hi uint64
	}
	// looseUntil: a window reaching at or below it cannot count its
	// events exactly (a span was removed with events above its resolved
	// ts, which the log may or may not hold).
	looseUntil uint64
	// behind counts the spans added behind the writer's flushed ts, and
	// flushedBehind how many of them a Flush since covered: the writer's
	// FlushedTs says nothing of their events until one has.
	behind, flushedBehind uint64

	runMu sync.Mutex    // one release loop at a time: Run, or Close's drain
	stop  chan struct{} // closed by Close: Run returns
	cpMu  sync.Mutex    // serializes checkpoint reports, so they arrive in order
	// rbMu orders AddSpan against a read-back's listing: a span added
	// between the flushed ts a read-back trusts and its listing could have
	// events there that the read-back would take from the log as well.
	rbMu sync.Mutex

	events []codec.Event // decode buffer of the release loop
}

// New returns a gate in front of the redo writer w, releasing to down what
// res says the log covers and reporting the applied ts to cp. The gate
// starts with no spans: add them with AddSpan (not w.AddSpan), and drive the
// writer only through the gate from then on. A nil cp reports nothing.
//
// Add the spans before the first Run when cp carries a value for them
// already (a restarted process reporting under its predecessor's name): a
// gate with no spans reports the global resolved ts as its applied ts, and
// whoever folds cp's values may take that one before AddSpan lowers it.
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
	g := &Gate{
		w: w, res: res, cp: cp, down: down, o: o, log: o.Logger,
		spans: map[meta.SpanID]*spanQ{},
		room:  make(chan struct{}),
		stop:  make(chan struct{}),
	}
	g.setLog(o.Log)
	return g
}

// AddSpan adds a span to the writer and the gate at startTs: the downstream
// holds every event of the span at or below startTs (a new table's creation
// ts, or the log's checkpoint when the span moves here from another writer).
// When startTs is below the gate's applied ts, or below the one it last
// reported, it reports the lower value at once, after any report under way:
// the lower value is the last the Checkpointer gets.
func (g *Gate) AddSpan(ctx context.Context, span meta.SpanID, startTs uint64) error {
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if closed {
		return ErrClosed
	}
	g.rbMu.Lock()
	if err := g.w.AddSpan(span, startTs); err != nil {
		g.rbMu.Unlock()
		return err
	}
	// Behind the writer's flushed ts, the span's events there are not in
	// the log until a flush takes them (the writer writes them in
	// catch-up segments): a read-back must not trust the flushed ts until
	// a flush has run since.
	behind := startTs < g.w.FlushedTs()
	g.mu.Lock()
	g.spans[span] = &spanQ{id: span, resolved: startTs, applied: startTs, lastTs: startTs}
	if behind {
		g.behind++
	}
	// Report again whenever the span lowers the applied ts, not only
	// below the last value sent: Run may be reporting the value before
	// it (report reads it, then calls the Checkpointer without mu), and
	// that report, the first one or one above the last sent, would
	// otherwise be the last the Checkpointer gets until a release
	// succeeds, which a dead downstream never lets happen. report takes
	// cpMu, so this one arrives after it.
	lower := startTs < g.applied || g.hasSent && startTs < g.sent
	g.applied = min(g.applied, startTs)
	g.mu.Unlock()
	g.rbMu.Unlock()
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
	if s.lastTs > s.resolved {
		// Its events above its resolved ts are dropped, but the writer
		// keeps those it staged: a read-back leaves out the span's
		// tables above its resolved ts, and cannot count exactly what
		// it does not know the log holds.
		g.loosenLocked(s.lastTs)
	}
	// Of its events the log owns, a read-back delivers those at or below
	// its resolved ts.
	if s.inLog && s.winLo > s.resolved {
		s.inLog = false
	}
	s.winHi = min(s.winHi, s.resolved)
	if s.inLog || len(s.pending()) > 0 {
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
		g.broadcast() // a Write waiting on it may now see room coming
	}
	g.mu.Unlock()
	return nil
}

// Write writes events of one span to the redo writer, then holds them until
// the log's global resolved ts covers them. The writer's rules apply (events
// of a span in non-decreasing commit ts, above its resolved ts); a Write the
// writer refuses holds nothing. When the held events would pass
// MaxHeldBytes it evicts (with Options.Log), or waits while a release that
// needs nothing of its caller can make room, or returns a *NoRoomError; it
// also waits while the writer applies back-pressure, until ctx ends.
func (g *Gate) Write(ctx context.Context, span meta.SpanID, events ...codec.Event) error {
	if len(events) == 0 {
		return nil
	}
	// Encode once: the writer logs these bytes and the gate holds them,
	// exact, and the caller may reuse its events once Write returns.
	var buf []byte
	ends := make([]int, len(events))
	tss := make([]uint64, len(events))
	for i := range events {
		buf = codec.AppendEvent(buf, &events[i])
		ends[i] = len(buf)
		tss[i] = events[i].CommitTs()
	}
	encs := make([][]byte, len(events))
	for i, start := 0, 0; i < len(events); i++ {
		encs[i], start = buf[start:ends[i]:ends[i]], ends[i]
	}
	reserved, err := g.reserve(ctx, span, encs, tss)
	if err != nil {
		return err
	}
	if err := g.w.WriteEncoded(ctx, span, encs...); err != nil {
		g.mu.Lock()
		g.free(0, reserved)
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
		g.free(0, reserved)
		g.stats.dropped += int64(len(events))
		return nil
	}
	s.noteTables(events)
	wake := false
	var holds int64
	for i := range events {
		if w := g.ownerLocked(tss[i]); w != nil {
			// The log owns this commit ts: the event is read back
			// from there, in its place.
			w.n++
			s.noteLog(tss[i])
			g.stats.evicted++
			continue
		}
		s.q = append(s.q, held{ts: tss[i], ddl: events[i].IsDDL(), arrival: g.arrival, data: encs[i]})
		g.arrival++
		g.heldN++
		holds += int64(len(encs[i]))
		wake = wake || tss[i] <= g.released
	}
	// What reserve took, corrected for a range evicted meanwhile.
	g.heldB += holds - reserved
	if holds < reserved {
		g.broadcast()
	}
	g.stats.written += int64(len(events))
	if wake && g.wake != nil {
		// Already covered (a span catching up behind G): release without
		// waiting for G to move.
		g.wake()
	}
	return nil
}

// reserve takes room for the events of a Write that the gate will hold
// (those of a commit ts the log owns need none), evicting or waiting for
// room, and returns the bytes taken.
func (g *Gate) reserve(ctx context.Context, span meta.SpanID, encs [][]byte, tss []uint64) (int64, error) {
	g.mu.Lock()
	var since time.Time
	for {
		if g.closed {
			g.unblock(since)
			g.mu.Unlock()
			return 0, ErrClosed
		}
		s := g.spans[span]
		n := g.holdBytesLocked(encs, tss)
		fits := n == 0 || g.heldB+n <= g.o.MaxHeldBytes
		if !fits && s != nil {
			if g.spillOff == "" {
				// The Write's own events count as its span's: a
				// batch larger than the limit goes to the log too.
				if g.evictLocked(s, encs, tss, n) {
					continue
				}
			} else if err := g.noRoomLocked(s, n); err != nil {
				g.unblock(since)
				g.mu.Unlock()
				return 0, err
			}
		}
		if fits || g.heldB == 0 {
			// A batch larger than the limit that cannot go to the
			// log is admitted alone.
			g.heldB += n
			if s != nil {
				s.lastTs = max(s.lastTs, tss[len(tss)-1])
			}
			g.unblock(since)
			g.mu.Unlock()
			return n, nil
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
			return 0, ctx.Err()
		}
		g.mu.Lock()
	}
}

// holdBytesLocked is the encoded bytes of the events the gate would hold:
// those of a commit ts the log does not own. The caller holds mu.
func (g *Gate) holdBytesLocked(encs [][]byte, tss []uint64) int64 {
	var n int64
	for i := range encs {
		if g.ownerLocked(tss[i]) == nil {
			n += int64(len(encs[i]))
		}
	}
	return n
}

// noRoomLocked returns the *NoRoomError of a Write of n bytes of span s
// that no release can make room for before s's resolved ts moves: G cannot
// pass it (every event of s above it is the caller's to resolve), so the
// held events above it, and above the G the gate acted on, stay. nil means
// waiting is enough. The caller holds mu.
func (g *Gate) noRoomLocked(s *spanQ, n int64) error {
	bound := max(g.released, s.resolved)
	var stuck int64
	for _, q := range g.queues() {
		for i := q.head + q.inflight; i < len(q.q); i++ {
			if q.q[i].ts > bound {
				stuck += int64(len(q.q[i].data))
			}
		}
	}
	if stuck == 0 || stuck+n <= g.o.MaxHeldBytes {
		return nil
	}
	return &NoRoomError{Span: s.id, Bytes: n, Held: g.heldB, Stuck: stuck, Limit: g.o.MaxHeldBytes, Reason: g.spillOff}
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
	var inLog int64
	for _, w := range g.windows {
		inLog += max(w.n, 0)
	}
	return Stats{
		HeldEvents: g.heldN, HeldBytes: g.heldB,
		Written: g.stats.written, Released: g.stats.released, Batches: g.stats.batches,
		Dropped: g.stats.dropped, BlockedWrites: g.stats.blocked, Backpressure: g.stats.backpressure,
		ReleasedTs: g.released, AppliedTs: g.applied,
		Evictions: g.stats.evictions, Evicted: g.stats.evicted, InLog: inLog, ReadBack: g.stats.readBack,
		CheckpointFailures: g.stats.checkpointFailures, ResolvedReadFailures: g.stats.resolvedFailures,
	}
}

// Run is the release loop: it waits for the global resolved ts to move,
// applies to the downstream every held event at or below it (reading back
// from the log what it evicted) and reports the applied ts, until ctx ends
// (its error is returned), Close begins (nil), or the downstream or a
// read-back fails (its error; what failed stays, and Run again retries it).
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
		stalled, err := g.release(ctx, target)
		if err != nil {
			if ctx.Err() != nil {
				continue
			}
			return err
		}
		g.report(ctx)
		if stalled {
			// A read-back waits for the writer to flush a span that
			// joined behind it: look again later.
			_ = retry.Sleep(ctx, g.o.RetryBackoff) // the caller looks at ctx itself
		}
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
	g.mu.Lock()
	g.stats.resolvedFailures++
	g.mu.Unlock()
	g.log.Warn("sinkgate: cannot read the global resolved ts; retrying", "err", err)
	_ = retry.Sleep(ctx, g.o.RetryBackoff) // the caller looks at ctx itself
	return 0, false
}

// releasableLocked reports whether a held event, or an event the log owns,
// is at or below ts.
func (g *Gate) releasableLocked(ts uint64) bool {
	for _, s := range g.queues() {
		if p := s.pending(); len(p) > 0 && p[0].ts <= ts {
			return true
		}
	}
	for _, w := range g.windows {
		if w.lo <= w.hi && w.lo <= ts || w.err != nil {
			return true
		}
	}
	return false
}

// release applies every held event at or below G, and every event the log
// owns there, in order, and then computes the applied ts. stalled means it
// had to stop below G: a read-back cannot pass what the writer flushed (a
// span joined behind it). Only one release runs at a time (runMu).
func (g *Gate) release(ctx context.Context, G uint64) (stalled bool, err error) {
	g.mu.Lock()
	g.released = max(g.released, G)
	target := g.released
	g.mu.Unlock()
	reached, err := g.releaseTo(ctx, target)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.settleLocked()
	if err != nil {
		return false, err
	}
	if reached < target {
		// Above reached the events wait for the read-back: they are
		// not covered, for Writes and eviction alike.
		g.released = reached
		stalled = true
	}
	g.applied = g.appliedLocked(g.released)
	g.retired = slices.DeleteFunc(g.retired, func(s *spanQ) bool { return len(s.pending()) == 0 && !s.inLog })
	return stalled, nil
}

// releaseTo applies, in commit-ts order, the held events at or below target
// and the events the log owns there, and returns the ts up to which it did:
// target, or less when a read-back had to stop.
func (g *Gate) releaseTo(ctx context.Context, target uint64) (uint64, error) {
	for {
		g.mu.Lock()
		var w *window
		for _, x := range g.windows {
			if x.err != nil {
				g.mu.Unlock()
				return 0, x.err
			}
			if x.lo <= x.hi && x.lo <= target {
				w = x
				break
			}
		}
		var lo, hi uint64
		if w != nil {
			lo, hi = w.lo, w.hi
		}
		g.mu.Unlock()
		if w == nil {
			return target, g.releaseHeld(ctx, target)
		}
		// What the gate holds below the range, then the range from the
		// log: each event where it would have been.
		if err := g.releaseHeld(ctx, lo-1); err != nil {
			return 0, err
		}
		end, err := g.readBack(ctx, w, target)
		if err != nil {
			return 0, err
		}
		if end < min(target, hi) {
			return end, nil
		}
	}
}

// releaseHeld applies every held event at or below ts, batch by batch.
func (g *Gate) releaseHeld(ctx context.Context, ts uint64) error {
	var batch []held
	for {
		batch = g.take(batch[:0], ts)
		if len(batch) == 0 {
			return nil
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
		if s.inLog {
			bound = min(bound, s.winLo-1)
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
		g.mu.Lock()
		g.stats.checkpointFailures++
		g.mu.Unlock()
		g.log.Warn("sinkgate: cannot report the checkpoint; retrying at the next release", "ts", ts, "err", err)
		return
	}
	g.mu.Lock()
	g.sent, g.hasSent = ts, true
	g.mu.Unlock()
}

// Close stops new writes, closes the redo writer, waits (until ctx ends)
// for the global resolved ts to cover the writer's final flushed ts, releases
// what it covers (reading back from the log what it evicted) and drops every
// other held event. It stops Run. The writer's Close error (meta.ErrFenced
// for a writer that lost its lease) is returned, joined with any error of
// the final release. Close is idempotent: a later call waits (until its ctx
// ends) for the first to finish and returns the same result.
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
	g.mu.Lock()
	g.final = true
	g.mu.Unlock()
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
	for _, w := range g.windows {
		if w.lo <= w.hi && w.lo <= final {
			target, any = max(target, min(w.hi, final)), true
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
			_, err = g.release(ctx, G)
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
		s.inLog = false
	}
	var inLog int64
	for _, w := range g.windows {
		// Above the final flushed ts: not in the log.
		inLog += max(w.n, 0)
	}
	g.windows = nil
	g.retired = nil
	g.free(n, bytes)
	g.stats.dropped += n + inLog
	g.mu.Unlock()
	return errors.Join(werr, rerr)
}
