package writer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
)

// SpanID is meta.SpanID, named here so that writer code reads naturally.
type SpanID = meta.SpanID

// Sentinel errors. Match them with errors.Is.
var (
	// ErrClosed is returned by every call after Close.
	ErrClosed = errors.New("writer: closed")
	// ErrUnknownSpan is returned for a span that was never added, or was
	// removed.
	ErrUnknownSpan = errors.New("writer: unknown span")
	// ErrSpanExists is returned by AddSpan for a span that is already there.
	ErrSpanExists = errors.New("writer: span already added")
	// ErrOutOfOrder is returned by Write for an event whose commit ts is
	// below that of the span's previous event.
	ErrOutOfOrder = errors.New("writer: commit ts goes backwards within a span")
	// ErrBelowResolved is returned by Write for an event at or below the
	// span's resolved ts, which promised that no such event would come.
	ErrBelowResolved = errors.New("writer: event at or below the span's resolved ts")
)

// errStopped is what a blocked Write sees when the writer stops under it; it
// is replaced by the writer's own error.
var errStopped = errors.New("writer: stopped")

// Writer is the redo writer of one writer ID of one log. It is safe for
// concurrent use: Write, AddSpan, RemoveSpan, AdvanceResolved, Flush and the
// accessors may be called from any goroutine.
type Writer struct {
	b    *blob.Bucket
	o    Options
	comp segment.Compression
	// loopEnc encodes, on the flush loop, the blocks stored raw.
	loopEnc segment.FrameEncoder
	lease   *meta.Lease
	epoch   uint64
	log     *slog.Logger
	append  bool // the backend can append: the local-disk path

	mu          sync.Mutex // guards the fields below
	spans       map[SpanID]*spanBuf
	retired     []*spanBuf // removed spans whose resolved events still wait for a flush
	maxResolved uint64     // highest resolved ts any span (or the previous epoch) reached
	changes     uint64     // bumped by every change a progress frame records (a span added or removed, a resolved ts moved)
	cutChanges  uint64     // changes at the last cut that took them (not a lazy one)
	adds        uint64     // the spans added, of changes
	cutAdds     uint64     // adds at the last cut that took the changes
	arrival     uint64
	pending     int64 // quota bytes in span buffers, not yet cut
	sinceCut    int64 // quota bytes written since the last cut: the threshold counts these
	// cutMaxTs is the largest commit ts any cut took; stageOverlap says
	// that the last stage cut took an event below the cut before it (its
	// run could not follow the active segment: smallStageDue).
	cutMaxTs     uint64
	stageOverlap bool
	// cutTurn, when a Write waits for the loop to cut (awaitCut), is closed
	// once the loop has been through its next cut; nil when none waits.
	cutTurn   chan struct{}
	peakUncut int64 // the most pending ever held (tests hold awaitCut's bound with it)
	closing   bool
	// committed is the epoch's committed ts as of the last cut: what the
	// progress frames of the jobs cut so far say once durable.
	committed uint64
	// wantStage asks the next cut to stage (a Write is blocked on a quota
	// that no flush of resolved events can free); stageable says that an
	// event above the committed ts was written since the last stage cut.
	wantStage, stageable bool
	cutResolved          uint64 // the writer's resolved ts at the last cut
	// lazyBytes are quota bytes of lazy jobs (job.lazy): appended, and
	// released only with the next job's sync, which a blocked Write must
	// therefore ask for.
	lazyBytes atomic.Int64
	// dupBelow is the highest ts a span removed with staged events had
	// staged: it may come again, from the span added back, and segments
	// holding events at or below it are marked FlagCatchUp.
	dupBelow uint64

	quota   *quota
	chunks  *chunkCache
	pools   *pools
	depth   int           // blocks that may wait compressed for the committer, per job
	flushed atomic.Uint64 // the flushed resolved ts reported so far
	pub     *publisher
	stats   counters

	// The writer's fatal error, set once: fenced, or a flush that failed
	// past its retries. stopped is closed when it is set, or when Close
	// begins.
	errMu   sync.Mutex
	err     error
	stopped chan struct{}
	stopMu  sync.Once

	ctx    context.Context // the pipeline's; canceled to abort
	cancel context.CancelFunc
	kick   chan struct{}
	reqs   chan *flushReq
	jobs   chan *job
	tasks  chan *blockTask

	loopDone   chan struct{}
	commitDone chan struct{}
	workers    sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// flushReq is a call of Flush or Close waiting for the loop.
type flushReq struct {
	final bool
	done  chan flushResult
}

type flushResult struct {
	ts  uint64
	err error
}

// Open takes the lease of opts.WriterID in opts.LogID (a new epoch, fencing
// any earlier holder), recovers what earlier epochs left unsealed, and starts
// the writer. opts.LogID and opts.WriterID are required; nil or zero fields
// take their defaults. The caller keeps ownership of b, which must stay open
// until Close returns.
func Open(ctx context.Context, b *blob.Bucket, opts *Options) (*Writer, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	appendable := b.CanAppend()
	lease, err := meta.AcquireWriter(ctx, b, o.LogID, o.WriterID, &meta.AcquireOptions{Owner: o.Owner,
		Durable: func(ctx context.Context, prev *meta.WriterState) (*meta.Progress, error) {
			return durableProgress(ctx, b, prev, appendable, o.Logger)
		}})
	if err != nil {
		return nil, fmt.Errorf("writer %s/%s: take the lease: %w", o.LogID, o.WriterID, err)
	}
	st := lease.State()
	w := &Writer{
		b: b, o: o, comp: o.Compression.segment(), lease: lease, epoch: st.Epoch,
		log:     o.Logger.With("log", o.LogID, "writer", o.WriterID, "epoch", st.Epoch),
		append:  appendable,
		spans:   map[SpanID]*spanBuf{},
		quota:   newQuota(o.MemoryQuota),
		chunks:  newChunkCache(o.MemoryQuota),
		stopped: make(chan struct{}),
		kick:    make(chan struct{}, 1),
		reqs:    make(chan *flushReq),
		jobs:    make(chan *job, 1),
		tasks:   make(chan *blockTask, o.Workers),

		loopDone:   make(chan struct{}),
		commitDone: make(chan struct{}),
	}
	// Enough blocks to cover a threshold flush may wait for the committer,
	// up to a bound (queueDepth): the blocks are memory beyond the quota,
	// and a bigger flush overlaps the committer's writes with its build
	// instead.
	w.depth = queueDepth(&o, w.comp, appendable)
	// Blocks alive at once: a job's queue, the next job's and the
	// workers'. The committer lets go of each frame once it is written.
	w.pools = newPools(2*w.depth+2*o.Workers, segment.BlockHeaderSize+o.BlockSize+o.BlockSize/8)
	w.maxResolved = st.FlushedTs
	w.committed = max(st.CommittedTs, st.FlushedTs)
	w.flushed.Store(st.FlushedTs)
	nextSeq, err := w.restart(ctx, lease)
	if err != nil {
		return nil, err
	}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	c := newCommitter(w, nextSeq, st)
	w.pub = c.pub
	go c.pub.run()
	workers := o.Workers
	if w.comp == segment.CompressionNone {
		// Blocks stored raw are checksummed by the loop as it builds them
		// (build): workers would only wait.
		workers = 0
	}
	for range workers {
		w.workers.Add(1)
		go w.worker()
	}
	go w.loop()
	go c.run()
	w.log.Info("redo writer open", "flushed_ts", st.FlushedTs, "next_seq", nextSeq, "append", w.append,
		"compression", string(o.Compression), "workers", workers)
	return w, nil
}

// Epoch returns the writer's epoch: segment names carry it.
func (w *Writer) Epoch() uint64 { return w.epoch }

// FlushedTs returns the flushed resolved ts: every event at or below it, of
// every span of the writer, is durable and the writer's progress says so.
func (w *Writer) FlushedTs() uint64 { return w.flushed.Load() }

// ResolvedTs returns the writer's resolved ts now: the minimum resolved ts of
// its spans, or with no spans the highest resolved ts it has seen. A flush
// makes it the FlushedTs.
func (w *Writer) ResolvedTs() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.resolvedLocked()
}

// Err returns the error that stopped the writer for good (meta.ErrFenced
// when another process took the writer ID, or a flush that failed past its
// retries), or nil.
func (w *Writer) Err() error {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	return w.err
}

// fail records the writer's fatal error (the first one wins) and stops it.
func (w *Writer) fail(err error) {
	w.errMu.Lock()
	if w.err == nil {
		w.err = err
		w.log.Error("redo writer stopped", "err", err)
	}
	w.errMu.Unlock()
	w.stop()
	w.cancel()
}

func (w *Writer) stop() { w.stopMu.Do(func() { close(w.stopped) }) }

// usable returns the error every call returns once the writer stopped.
func (w *Writer) usable() error {
	if err := w.Err(); err != nil {
		return err
	}
	w.mu.Lock()
	closing := w.closing
	w.mu.Unlock()
	if closing {
		return ErrClosed
	}
	return nil
}

func (w *Writer) resolvedLocked() uint64 {
	if len(w.spans) == 0 {
		return w.maxResolved
	}
	r := ^uint64(0)
	for _, s := range w.spans {
		r = min(r, s.resolved)
	}
	return r
}

// AddSpan adds a span whose resolved ts starts at startTs: its events must
// have commit ts above it. A span may be added behind the writer (startTs
// below FlushedTs, when it moves here from another writer): its catch-up
// events are written in segments of their own, each still sorted, and
// FlushedTs falls to the span's progress until it catches up.
func (w *Writer) AddSpan(span SpanID, startTs uint64) error {
	if err := w.usable(); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.spans[span]; ok {
		return fmt.Errorf("%w: span %d", ErrSpanExists, span)
	}
	w.spans[span] = &spanBuf{id: span, resolved: startTs}
	w.maxResolved = max(w.maxResolved, startTs)
	w.changes++
	w.adds++
	return nil
}

// RemoveSpan removes a span (it moved to another writer, or its table is
// gone). Its buffered events at or below its resolved ts are still flushed,
// in order, when the writer's resolved ts reaches them; those above it are
// dropped now, since no resolved ts here will ever cover them: the span's
// next owner writes them again from its own start ts.
func (w *Writer) RemoveSpan(span SpanID) error {
	if err := w.usable(); err != nil {
		return err
	}
	w.mu.Lock()
	s, ok := w.spans[span]
	if !ok {
		w.mu.Unlock()
		return fmt.Errorf("%w: span %d", ErrUnknownSpan, span)
	}
	delete(w.spans, span)
	if s.staged {
		// Its staged events stay stored and count once the committed ts
		// passes them; its next owner writes them again from the span's
		// flushed ts, below them, and readers drop the copies. If it is
		// added back here, its segments must say they may hold copies.
		w.dupBelow = max(w.dupBelow, s.stagedMax)
	}
	dropped := s.dropAbove(s.resolved)
	w.pending -= dropped
	if len(s.recs) > 0 {
		w.retired = append(w.retired, s)
	}
	w.changes++
	w.mu.Unlock()
	w.quota.release(dropped)
	return nil
}

// AdvanceResolved promises that no more events with commit ts <= ts will
// come for the span. A ts at or below the span's resolved ts is ignored:
// resolved ts never goes backwards.
func (w *Writer) AdvanceResolved(span SpanID, ts uint64) error {
	if err := w.usable(); err != nil {
		return err
	}
	w.mu.Lock()
	s, ok := w.spans[span]
	if !ok {
		w.mu.Unlock()
		return fmt.Errorf("%w: span %d", ErrUnknownSpan, span)
	}
	if ts > s.resolved {
		s.resolved = ts
		w.maxResolved = max(w.maxResolved, ts)
		w.changes++
	}
	due := w.sinceCut >= w.o.FlushBytes
	w.mu.Unlock()
	if due {
		w.poke()
	}
	return nil
}

// poke asks the loop for a flush. The threshold counts bytes written since
// the last cut, not bytes buffered: buffered events above the resolved ts
// would otherwise make every resolved-ts advance a tiny flush.
func (w *Writer) poke() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// scratch is what a Write knows of its events before it buffers them: where
// each one's encoding will end, its commit ts and its kind.
type scratch struct {
	ends  []int
	ts    []uint64
	kinds []segment.Kind
	rooms []room

	// WriteEncoded checks with a Decoder that remembers the tables it
	// saw: a span's events share few tables, and an event of a known table
	// is only scanned.
	dec codec.Decoder
}

var scratchPool = sync.Pool{New: func() any { return &scratch{dec: codec.Decoder{Alias: true}} }}

func getScratch() *scratch { return scratchPool.Get().(*scratch) }

func putScratch(sc *scratch) {
	clear(sc.rooms) // no chunk kept alive by the pool
	sc.ends, sc.ts, sc.kinds, sc.rooms = sc.ends[:0], sc.ts[:0], sc.kinds[:0], sc.rooms[:0]
	scratchPool.Put(sc)
}

// room is where events from..to-1 of a call go: their encodings, back to
// back.
type room struct {
	room     []byte
	num, off uint32
	from, to int
}

// reserve makes room in s for the events added so far, a chunk's worth
// at a time (an event larger than a chunk gets a room of its own): a
// batch larger than a chunk in one room would need a chunk of its size,
// which could not be recycled.
func (sc *scratch) reserve(s *spanBuf, cc *chunkCache) []room {
	sc.rooms = sc.rooms[:0]
	start := 0
	for from := 0; from < len(sc.ends); {
		to := from + 1
		for to < len(sc.ends) && sc.ends[to]-start <= maxChunk {
			to++
		}
		b, num, off := s.reserve(cc, sc.ends[to-1]-start)
		sc.rooms = append(sc.rooms, room{room: b, num: num, off: off, from: from, to: to})
		from, start = to, sc.ends[to-1]
	}
	return sc.rooms
}

// size is the length of the encodings added so far.
func (sc *scratch) size() int {
	if len(sc.ends) == 0 {
		return 0
	}
	return sc.ends[len(sc.ends)-1]
}

// add records the next event, whose encoding is n bytes.
func (sc *scratch) add(span SpanID, i int, n int, ts uint64, kind codec.EventKind) error {
	if n > segment.MaxRecordSize {
		return tooLarge(span, i, n, ts)
	}
	sc.ends = append(sc.ends, sc.size()+n)
	sc.ts = append(sc.ts, ts)
	sc.kinds = append(sc.kinds, recordKind(kind))
	return nil
}

func tooLarge(span SpanID, i, n int, ts uint64) error {
	return fmt.Errorf("writer: span %d: event %d (commit ts %d) encodes to %d bytes, above the record limit %d",
		span, i, ts, n, segment.MaxRecordSize)
}

func recordKind(kind codec.EventKind) segment.Kind {
	if kind == codec.DDLEvent {
		return segment.KindDDL
	}
	return segment.KindRow
}

// Write buffers events of one span. Their commit ts must not go down (from
// the span's previous event on) and must be above the span's resolved ts:
// either violation is an error naming the span and the ts (ErrOutOfOrder,
// ErrBelowResolved), and nothing of the call is written. DDLs are written
// like rows, on the span that owns them.
//
// Write encodes the events before it returns, so the caller may reuse them.
// When the memory quota is full it blocks until a flush frees memory or ctx
// ends (back-pressure).
func (w *Writer) Write(ctx context.Context, span SpanID, events ...codec.Event) error {
	if len(events) == 0 {
		return w.usable()
	}
	s, lastTs, written, resolved, err := w.spanState(span)
	if err != nil {
		return err
	}
	sc := getScratch()
	defer putScratch(sc)
	if err := checkEvents(span, events, lastTs, written, resolved, sc); err != nil {
		return err
	}
	return w.buffer(ctx, span, s, sc, func(room []byte, from, to int) error {
		dst := room[:0]
		base := 0
		if from > 0 {
			base = sc.ends[from-1]
		}
		for i := from; i < to; i++ {
			start := len(dst)
			// Past the room, append would move dst off the span's buffer:
			// any length but the one reserved is a codec bug.
			dst = codec.AppendEvent(dst, &events[i])
			if base+len(dst) != sc.ends[i] {
				panic(fmt.Sprintf("writer: event %d encodes to %d bytes, codec.CheckedLen said %d", i, len(dst)-start, sc.ends[i]-base-start))
			}
		}
		return nil
	})
}

// WriteEncoded buffers events of one span that the caller has encoded
// already, each element one whole event as codec.AppendEvent encodes it: a
// caller that keeps the encoding anyway (a sink gate holding events until
// they may be applied) saves encoding them twice. The rules, errors and
// back-pressure are Write's, and the bytes are copied before it returns.
//
// The writer cannot trust bytes it did not encode, and must not acknowledge
// an event no reader can decode: each event is checked in its copy
// (codec.Decoder.Check, a decode's verdict), so the bytes checked are the
// bytes stored, and its commit ts and kind, which the log record carries
// beside it, are read from the event itself. An event that fails is an
// error naming the span, the event's index and the offset of the bad field
// (codec.DecodeError), and nothing of the call is written; it may have
// waited for memory first, as a valid call would.
func (w *Writer) WriteEncoded(ctx context.Context, span SpanID, events ...[]byte) error {
	if len(events) == 0 {
		return w.usable()
	}
	s, lastTs, written, resolved, err := w.spanState(span)
	if err != nil {
		return err
	}
	sc := getScratch()
	defer putScratch(sc)
	// The first event's commit ts is what buffer checks the span's state
	// against before it takes room (its header is all that needs); every
	// event, the first too, is checked whole as it is copied.
	ts0, err := codec.PeekCommitTs(events[0])
	if err != nil {
		return fmt.Errorf("writer: span %d: encoded event 0: %w", span, err)
	}
	if err := checkOrder(span, 0, ts0, lastTs, written, resolved); err != nil {
		return err
	}
	for i, src := range events {
		if len(src) > segment.MaxRecordSize {
			ts, _ := codec.PeekCommitTs(src)
			return tooLarge(span, i, len(src), ts)
		}
		sc.ends = append(sc.ends, sc.size()+len(src))
	}
	sc.ts = slices.Grow(sc.ts[:0], len(events))[:len(events)]
	sc.kinds = slices.Grow(sc.kinds[:0], len(events))[:len(events)]
	sc.ts[0] = ts0
	return w.buffer(ctx, span, s, sc, func(room []byte, from, to int) error {
		// Each event is checked in its copy, which the copy brought into
		// the cache: the caller's bytes are read once, as a stream. Check
		// accepts exactly what Decode does, and an event Decode accepts
		// passes codec.CheckEvent (codec's fuzzers hold both).
		dst := room[:0]
		for i := from; i < to; i++ {
			start := len(dst)
			dst = append(dst, events[i]...)
			kind, ts, err := sc.dec.Check(dst[start:])
			if err != nil {
				return fmt.Errorf("writer: span %d: encoded event %d: %w", span, i, err)
			}
			if err := checkOrder(span, i, ts, lastTs, written, resolved); err != nil {
				return err
			}
			lastTs, written = ts, true
			sc.ts[i], sc.kinds[i] = ts, recordKind(kind)
		}
		return nil
	})
}

// spanState returns a span's buffer and what Write checks against, or why
// the writer takes no writes.
func (w *Writer) spanState(span SpanID) (s *spanBuf, lastTs uint64, written bool, resolved uint64, err error) {
	if err := w.usable(); err != nil {
		return nil, 0, false, 0, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.spans[span]
	if !ok {
		return nil, 0, false, 0, fmt.Errorf("%w: span %d", ErrUnknownSpan, span)
	}
	return s, s.lastTs, s.written, s.resolved, nil
}

// buffer takes quota for the events that sc describes and stores them in
// span's buffer s: fill writes the encodings of events from..to-1, back to
// back, into the room it is given, which is exactly their size; a batch
// larger than a chunk gets several rooms. fill runs without the writer's
// lock, so that producers of different spans encode at once. An error from
// fill (an event found invalid in its copy) stores nothing of the call.
func (w *Writer) buffer(ctx context.Context, span SpanID, s *spanBuf, sc *scratch, fill func(room []byte, from, to int) error) error {
	count := len(sc.ends)
	size := sc.size()
	n := int64(size) + int64(count)*recOverhead

	if err := w.awaitCut(ctx); err != nil {
		return err
	}
	blocked := false
	waited, forced, err := w.quota.acquire(ctx, w.stopped, n, func() {
		blocked = true
		w.stats.blocked.Add(1)
		w.poke()
	}, w.stuck)
	if forced {
		w.stats.overcommits.Add(1)
		w.log.Warn("memory quota full of a catch-up span's events at or below the committed ts, which cannot be staged; admitting a write over the quota",
			"span", span, "bytes", n, "quota", w.o.MemoryQuota)
	}
	if blocked {
		w.stats.blocked.Add(-1)
		w.stats.backpressure.Add(int64(waited))
	}
	if err != nil {
		if err == errStopped {
			if err := w.usable(); err != nil {
				return err
			}
			return ErrClosed
		}
		return err
	}

	// check is what the span must still allow, first when the room is
	// taken and again when the events are published: another goroutine
	// may have written or resolved the span meanwhile (the first event
	// decides, the rest were checked), removed it (and perhaps added it
	// again), or begun Close.
	check := func() error {
		cur, ok := w.spans[span]
		switch {
		case w.closing:
			return ErrClosed
		case !ok || cur != s:
			return fmt.Errorf("%w: span %d was removed", ErrUnknownSpan, span)
		}
		return checkOrder(span, 0, sc.ts[0], s.lastTs, s.written, s.resolved)
	}
	fail := func(err error) error {
		w.mu.Unlock()
		w.quota.release(n)
		return err
	}
	w.mu.Lock()
	if err := check(); err != nil {
		return fail(err)
	}
	rooms := sc.reserve(s, w.chunks)
	w.mu.Unlock()

	var filled error
	for _, r := range rooms {
		if filled = fill(r.room, r.from, r.to); filled != nil {
			break
		}
	}

	w.mu.Lock()
	if err := check(); err != nil || filled != nil {
		s.inflight -= len(rooms)
		return fail(cmp.Or(filled, err))
	}
	for _, r := range rooms {
		start := 0
		if r.from > 0 {
			start = sc.ends[r.from-1]
		}
		s.publish(w.chunks, r.num, r.off, start, sc.ends[r.from:r.to], sc.ts[r.from:r.to], sc.kinds[r.from:r.to], w.arrival+uint64(r.from))
	}
	w.arrival += uint64(count)
	w.pending += n
	w.peakUncut = max(w.peakUncut, w.pending)
	w.sinceCut += n
	if sc.ts[count-1] > w.committed {
		w.stageable = true
	}
	due := w.cutDue()
	w.mu.Unlock()

	if forced {
		// Other waiters saw these bytes as in flight: let them look again.
		w.quota.wake()
	}
	w.stats.writtenEvents.Add(int64(count))
	w.stats.writtenBytes.Add(int64(size))
	if due {
		w.poke()
	}
	return nil
}

// awaitCut holds a Write back while FlushBytes written since the last cut
// (or a small stage cut's worth, smallStageDue) wait for the loop to cut
// them, until its next cut. The quota bounds the events until they are
// durable, but it is sized for transactions and stalls; most of those
// bytes leave memory as soon as their blocks are built (and on local disk
// before they are durable), so what stays in memory is the events not cut
// yet and the job being built. Without this,
// a producer that outruns a loop blocked on storage (a segment's rotation
// syncing it; or a loop the scheduler runs late, at GOMAXPROCS 1) fills the
// arena up to the quota: measured on W2 with a 256 MiB quota, 76 MiB
// where this keeps it near 2 × FlushBytes. It waits on the loop's turn, and
// the loop waits only on storage: a turn that cuts nothing (a catch-up
// span's events the cut cannot take) lets the Write through as well. Only
// on local disk: an object store's uploads need production to run ahead
// of a loop waiting for an upload slot (measured on the emulators' 16 MiB
// segments: 0.85-0.96× raw PUT with the wait, 1.06-1.15× without), and
// there the quota alone bounds the events not cut yet.
func (w *Writer) awaitCut(ctx context.Context) error {
	w.mu.Lock()
	if !w.append || !w.cutDue() {
		w.mu.Unlock()
		return nil
	}
	if w.cutTurn == nil {
		w.cutTurn = make(chan struct{})
	}
	turn := w.cutTurn
	w.mu.Unlock()
	w.poke()
	select {
	case <-turn:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-w.stopped:
		if err := w.usable(); err != nil {
			return err
		}
		return ErrClosed
	}
}

// lazyStageBytes is the cut size of a lazy stage cut on local disk
// (smallStageDue), when it is below FlushBytes.
const lazyStageBytes = 4 << 20

// cutDue reports whether the loop will cut once it gets to it: FlushBytes
// were written since the last cut, or a small stage cut is due. The caller
// holds w.mu.
func (w *Writer) cutDue() bool {
	return w.sinceCut >= w.o.FlushBytes || w.smallStageDue()
}

// smallStageDue reports whether a lazy stage cut of lazyStageBytes is due
// on local disk: nothing made events flushable since the last cut (no span's
// resolved ts moved: the cut is lazy, with no sync of its own), and the last
// stage cut followed the one before it in commit ts, so this one most
// likely goes on in the active segment instead of rotating it (where spans
// interleave, each stage cut starts a segment, and FlushBytes keeps those
// few). Cut small, the events leave the arena sooner (measured on W2 at
// GOMAXPROCS 1, lz4 off: peak RSS above the idle writer 52 → 37 MiB, page
// faults 28 → 20 per MiB, CPU 1.14 → 0.98 s/GiB, 745-830 → 877 MiB/s; lz4
// on, quiet, two runs alternated: 54 → 34 MiB and 28 → 18 faults per MiB
// at the same MiB/s, at GOMAXPROCS 1 and 2). Spans added since the last
// cut (a writer's first events) make nothing flushable and do not stop it:
// the cut is lazy and leaves them for the next cut that syncs (see cut).
// The caller holds w.mu.
func (w *Writer) smallStageDue() bool {
	return w.append && w.stageable && !w.stageOverlap && w.onlyAddsPending() &&
		w.sinceCut >= min(w.o.FlushBytes, lazyStageBytes)
}

// onlyAddsPending reports whether every change no cut has taken yet is a
// span added: none made a buffered event flushable. The caller holds w.mu.
func (w *Writer) onlyAddsPending() bool {
	return w.changes-w.cutChanges == w.adds-w.cutAdds
}

// endCutTurn lets the Writes waiting in awaitCut go on. The caller holds
// w.mu.
func (w *Writer) endCutTurn() {
	if w.cutTurn != nil {
		close(w.cutTurn)
		w.cutTurn = nil
	}
}

// bufferedAtOrBelow reports whether a span, current or removed, holds an
// event at or below ts: whether a cut of resolved events at ts takes any.
func (w *Writer) bufferedAtOrBelow(ts uint64) bool {
	for _, s := range w.spans {
		if len(s.recs) > 0 && s.recs[0].ts <= ts {
			return true
		}
	}
	for _, s := range w.retired {
		if len(s.recs) > 0 && s.recs[0].ts <= ts {
			return true
		}
	}
	return false
}

// stuck reports whether a Write waiting on the quota could wait forever,
// and otherwise makes sure that something will free memory. A job in flight
// frees it once durable. With none, a cut frees it: of resolved events when
// the resolved ts moved since the last cut, else a stage cut of the events
// above the committed ts, which never waits on a resolved ts. Only when
// neither can take anything (the quota is full of a catch-up span's events
// at or below the committed ts, which cannot be staged) is the waiter let
// through over the quota: the Writes that would resolve them may be the
// blocked ones.
func (w *Writer) stuck() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	lazy := w.lazyBytes.Load()
	if w.quota.inUse() != w.pending+lazy {
		return false // a job in flight frees memory once durable
	}
	if lazy > 0 || w.changes != w.cutChanges || w.stageable {
		w.wantStage = true
		w.poke()
		return false
	}
	return true
}

// checkEvents checks events and their order against the span's state, and
// adds each to sc with the length of its encoding. Sized first, the events
// are encoded straight into the span's buffer: each payload byte is copied
// once on its way there instead of twice. The one pass touches each event
// once before encoding, which is what a batch of cold events costs most.
func checkEvents(span SpanID, events []codec.Event, lastTs uint64, written bool, resolved uint64, sc *scratch) error {
	for i := range events {
		ev := &events[i]
		if ev.Kind != codec.RowEvent && ev.Kind != codec.DDLEvent {
			return fmt.Errorf("writer: span %d: event %d has unknown kind %d", span, i, ev.Kind)
		}
		// An event the codec would write but no reader could decode must be
		// refused before it is acknowledged, not found after a disaster.
		n, err := codec.CheckedLen(ev)
		if err != nil {
			return fmt.Errorf("writer: span %d: event %d: %w", span, i, err)
		}
		ts := ev.CommitTs()
		if err := checkOrder(span, i, ts, lastTs, written, resolved); err != nil {
			return err
		}
		lastTs, written = ts, true
		if err := sc.add(span, i, n, ts, ev.Kind); err != nil {
			return err
		}
	}
	return nil
}

// checkOrder checks the commit ts of a span's event i against the span's
// previous event and resolved ts.
func checkOrder(span SpanID, i int, ts, lastTs uint64, written bool, resolved uint64) error {
	if written && ts < lastTs {
		return fmt.Errorf("%w: span %d: event %d has commit ts %d, after an event at %d", ErrOutOfOrder, span, i, ts, lastTs)
	}
	if ts <= resolved {
		return fmt.Errorf("%w: span %d: event %d has commit ts %d, at or below the span's resolved ts %d", ErrBelowResolved, span, i, ts, resolved)
	}
	return nil
}

// Flush flushes every buffered event at or below the writer's resolved ts
// now, waits until they and the flush's progress frame are durable, and
// returns the flushed resolved ts. The state object that publishes the
// progress to the coordinator and readers follows within PublishInterval;
// Publish waits for it. If ctx ends first, Flush returns its error and the
// flush goes on.
func (w *Writer) Flush(ctx context.Context) (uint64, error) {
	if err := w.usable(); err != nil {
		return 0, err
	}
	return w.request(ctx, false)
}

// Publish flushes as Flush does and then waits until the writer's state
// object publishes that flush's progress, for callers that need the global
// resolved ts to include it. It returns the published flushed resolved ts.
func (w *Writer) Publish(ctx context.Context) (uint64, error) {
	if _, err := w.Flush(ctx); err != nil {
		return 0, err
	}
	p := w.pub
	if err := p.wait(ctx, p.hurry()); err != nil {
		if errors.Is(err, meta.ErrFenced) {
			// The committer stops the writer with the fence and what its
			// retraction left behind: return that.
			select {
			case <-w.stopped:
			case <-ctx.Done():
			}
			if werr := w.Err(); werr != nil {
				return 0, werr
			}
		}
		return 0, err
	}
	return p.publishedTs(), nil
}

// PublishedTs returns the flushed resolved ts the writer's state object
// publishes, as far as this writer knows: at most FlushedTs.
func (w *Writer) PublishedTs() uint64 { return w.pub.publishedTs() }

func (w *Writer) request(ctx context.Context, final bool) (uint64, error) {
	req := &flushReq{final: final, done: make(chan flushResult, 1)}
	select {
	case w.reqs <- req:
	case <-w.loopDone:
		return 0, w.stoppedErr()
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	select {
	case r := <-req.done:
		return r.ts, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// stoppedErr is the error of a writer whose pipeline is gone.
func (w *Writer) stoppedErr() error {
	if err := w.Err(); err != nil {
		return err
	}
	return ErrClosed
}

// Close flushes what is resolved, seals the active segment, publishes the
// progress and stops the writer. Later calls return the first one's result.
// If ctx ends first, Close aborts: the active segment is closed unsealed (the
// next Open of the writer ID recovers it) and ctx's error is returned. A
// writer that was stopped by an error returns that error.
func (w *Writer) Close(ctx context.Context) error {
	w.closeOnce.Do(func() { w.closeErr = w.close(ctx) })
	return w.closeErr
}

func (w *Writer) close(ctx context.Context) error {
	w.mu.Lock()
	w.closing = true
	w.mu.Unlock()
	var err error
	if w.Err() == nil {
		_, err = w.request(ctx, true)
	}
	w.stop() // wakes Writes blocked on the quota
	select {
	case <-w.commitDone:
	case <-ctx.Done():
	}
	w.cancel()
	<-w.pub.finished
	if ctx.Err() != nil && w.Err() == nil {
		// Aborted. A sync or put in progress cannot be interrupted: the
		// pipeline ends on its own when it returns, closing the active
		// segment unsealed.
		return ctx.Err()
	}
	<-w.loopDone
	w.workers.Wait()
	if ferr := w.Err(); ferr != nil {
		return ferr
	}
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	w.log.Info("redo writer closed", "flushed_ts", w.FlushedTs())
	return nil
}

// Stats counts what a writer did.
type Stats struct {
	// Events accepted by Write, and their encoded bytes.
	WrittenEvents int64
	WrittenBytes  int64
	// Of those, what is durable: events (rows and DDLs) and their encoded
	// bytes (the payload).
	Events       int64
	Rows         int64
	DDLs         int64
	PayloadBytes int64
	// StoredBytes is what was written to storage: segment headers, block
	// frames (compressed), footers; retried writes count again.
	StoredBytes int64
	Blocks      int64
	Flushes     int64 // flushes that completed
	Segments    int64 // segments completed: sealed, or put as objects
	Retries     int64 // failed storage or publication attempts that were retried
	// Publications counts the writes of the writer's state object that
	// published progress (lazily, at most one per PublishInterval unless a
	// seal or Close needs one at once).
	Publications int64
	// BufferedBytes are held in memory now (quota bytes), flushing or not.
	BufferedBytes int64
	// Backpressure is the time Writes spent blocked on the memory quota;
	// BlockedWrites is how many are blocked now.
	Backpressure  time.Duration
	BlockedWrites int64
	// QuotaOvercommits counts Writes let through over a quota full of
	// events no flush or stage cut could take: a catch-up span's events
	// at or below the committed ts (see the package doc).
	QuotaOvercommits int64
	// StageCuts counts the cuts that staged events above the resolved ts
	// because a Write was blocked on the quota; StagedEvents the events
	// they stored before the resolved ts covered them.
	StageCuts    int64
	StagedEvents int64
	// CommittedTs is the epoch's committed ts of the newest durable
	// progress: its events at or below it are part of the log.
	CommittedTs uint64
	FlushedTs   uint64
	// PublishedTs is the flushed resolved ts the state object publishes
	// (at most FlushedTs; it follows within PublishInterval).
	PublishedTs uint64
	// FlushDuration is the time from the start of a flush to its durable,
	// durable end (its data and progress frame synced or put);
	// SyncDuration that of an fdatasync or seal of a local segment;
	// UploadDuration that of one segment object put; PublishDuration that
	// of one publication of the state object.
	FlushDuration   Latency
	SyncDuration    Latency
	UploadDuration  Latency
	PublishDuration Latency
}

type counters struct {
	writtenEvents, writtenBytes                       atomic.Int64
	events, rows, ddls, payload, stored, blocks       atomic.Int64
	flushes, segments, retries, backpressure, blocked atomic.Int64
	overcommits, publications, stageCuts, staged      atomic.Int64
	committed                                         atomic.Uint64
	flush, fsync, upload, publish                     latency
}

// Stats returns the writer's counters.
func (w *Writer) Stats() Stats {
	c := &w.stats
	return Stats{
		WrittenEvents: c.writtenEvents.Load(), WrittenBytes: c.writtenBytes.Load(),
		Events: c.events.Load(), Rows: c.rows.Load(), DDLs: c.ddls.Load(), PayloadBytes: c.payload.Load(),
		StoredBytes: c.stored.Load(), Blocks: c.blocks.Load(), Flushes: c.flushes.Load(),
		Segments: c.segments.Load(), Retries: c.retries.Load(),
		BufferedBytes: w.quota.inUse(), Backpressure: time.Duration(c.backpressure.Load()),
		BlockedWrites: c.blocked.Load(), QuotaOvercommits: c.overcommits.Load(),
		StageCuts: c.stageCuts.Load(), StagedEvents: c.staged.Load(), CommittedTs: c.committed.Load(),
		FlushedTs: w.FlushedTs(), PublishedTs: w.PublishedTs(),
		Publications:  c.publications.Load(),
		FlushDuration: c.flush.snapshot(), SyncDuration: c.fsync.snapshot(), UploadDuration: c.upload.snapshot(),
		PublishDuration: c.publish.snapshot(),
	}
}

// LogID returns the log the writer writes.
func (w *Writer) LogID() string { return w.o.LogID }

// ID returns the writer ID: with LogID, what a successor that takes the
// writer over shares with it.
func (w *Writer) ID() string { return w.o.WriterID }
