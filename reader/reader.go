package reader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/internal/chain"
	"github.com/redokit/redokit/segment"
)

// Event is one event of the log, as the Reader returns it: the decoded
// codec.Event (only its Kind and commit ts in Raw mode), the segment it came
// from, and its encoded bytes. It belongs to the Reader and is valid until the
// next call of Next, NextBatch or the Events iterator; Clone keeps one.
type Event struct {
	// Source is the segment the event was read from. Shared by every event
	// of the segment; do not modify it.
	Source *Source
	// payload comes before the codec.Event, so that what the merge touches
	// of an event (these two, Kind, the commit ts) shares a cache line.
	payload []byte
	codec.Event
	// Padding to a multiple of the cache line: in an array of events
	// (page-aligned, as large allocations are) every event then starts a
	// line, and what a raw read writes of an event lies in one line
	// instead of straddling two. TestEventSize keeps it so.
	_ [eventPad]byte
}

// eventFields are Event's fields, to size its padding.
type eventFields struct {
	Source *Source
	_      []byte // payload
	codec.Event
}

const (
	cacheLine = 64
	eventPad  = (cacheLine - unsafe.Sizeof(eventFields{})%cacheLine) % cacheLine
)

// Payload returns the event's encoded bytes, as stored in the segment.
func (e *Event) Payload() []byte { return e.payload }

// Clone returns a copy of e that shares no memory with the Reader.
func (e *Event) Clone() *Event {
	return &Event{Source: e.Source, payload: bytes.Clone(e.payload), Event: *e.Event.Clone()}
}

// OrderError reports an event whose commit ts is below one already returned:
// a segment held events outside the range its name claims, or a segment
// reordered its records. The merge cannot deliver the range in order, so it
// stops.
type OrderError struct {
	Key, PrevKey string // the segment of the event, and that of the one before
	Ts, PrevTs   uint64
}

func (e *OrderError) Error() string {
	return fmt.Sprintf("reader: commit ts order violated: %q yields commit ts %d after %q yielded %d", e.Key, e.Ts, e.PrevKey, e.PrevTs)
}

// Is makes errors.Is(err, ErrOrder) true.
func (e *OrderError) Is(target error) bool { return target == ErrOrder }

// ErrOrder matches every *OrderError.
var ErrOrder = errors.New("reader: commit ts order violated")

// Stats count what a Reader did. Segments* are known after Open; the rest
// grow as it reads.
type Stats struct {
	SegmentsListed     int // objects under the log's segment prefix
	SegmentsSelected   int // segments the range needs, after fences
	SegmentsActive     int // of which active (unsealed, local)
	SegmentsOutOfRange int // skipped by the ts range in their names
	SegmentsFenced     int // skipped by their writer's fence (a zombie's late segments)
	SegmentsShadowed   int // active segments listed beside their sealed successor
	BadNames           int // keys skipped with SkipBadNames
	SegmentsOpened     int // segments whose prefetch started
	TornTails          int // active segments read up to a torn tail
	// AboveFence counts segments of fenced epochs whose events above their
	// epoch's committed ts (its fence's CommittedTs) were left out: staged
	// and never committed, or written after the epoch's last durable
	// progress and never acknowledged.
	AboveFence int

	Events     int64 // events returned
	Duplicates int64 // exact duplicates dropped
	// Hashed counts the events the duplicate filter hashed: those of a
	// commit ts that segments of more than one writer epoch hold, or a
	// catch-up segment or one older than format version 4 (see the package
	// doc). A transaction one writer epoch split into many segments costs
	// none.
	Hashed   int64
	Filtered int64 // events TableFilter rejected
	Blocks   int64 // blocks read and decoded

	// The memory bound: the most segment streams open at once, and the most
	// decoded blocks (chunks) alive at once across them.
	MaxOpenStreams int
	MaxChunks      int
}

// counters are the Stats the producer goroutines update.
type counters struct {
	opened, torn, blocks, filtered atomic.Int64
	aboveFence                     atomic.Int64
	open, maxOpen                  atomic.Int64
	chunks, maxChunks              atomic.Int64
}

func raise(maxv *atomic.Int64, v int64) {
	for {
		m := maxv.Load()
		if v <= m || maxv.CompareAndSwap(m, v) {
			return
		}
	}
}

// Reader streams one range of a log in commit-ts order. It is not safe for
// concurrent use; Close it when done.
type Reader struct {
	c    *config
	b    *blob.Bucket
	plan *plan

	ctx    context.Context // the producers' context: Open's, until Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	sem    chan struct{} // bounds concurrent decoding
	stats  counters
	links  linkBook // the chain links of the segments opened so far

	// Chunks of finished streams, for the streams to come (producers take
	// them, the merge puts them).
	sparesMu sync.Mutex
	spares   []*chunk

	// The merge. sealed is every sealed segment's stream in plan order;
	// nextOpen is the first the merge has not reached, nextStart the first
	// whose prefetch has not started.
	sealed              []*stream
	nextOpen, nextStart int
	nextMin             uint64      // min ts of sealed[nextOpen]
	openPoints          int         // point segments the merge opened and has not finished
	heap                []heapEntry // streams with a head event, by (head ts, rank)
	// The adaptive prefetch (see heat): streams started and not finished,
	// those of them that may read ahead, and the others with a chunk in
	// the merge, by the last commit ts of that chunk.
	live      int
	hot       []*stream
	fc        []*stream
	many      atomic.Bool // live > hotStreams (producers read it)
	refill    []*stream   // streams that need their next chunk
	release   []*chunk    // chunks holding events returned by this call
	releaseOf []*stream
	out       int // events returned by the current call

	curTs    uint64 // commit ts of the events being merged
	haveTs   bool
	prevSrc  *Source // of the event before
	multi    bool    // the events at curTs need the duplicate filter (dedupAt)
	walk     []int   // dedupAt's stack
	dd       *dedup
	held     []*Event // DDLs at curTs, delivered after its rows
	heldPos  int
	flushing bool

	batch []*Event
	// The Events of the Reader's handed out in the current call (see
	// event): the first rawN of the slabs. dec decodes into them.
	rawEvs   [][]Event
	rawN     int
	dec      codec.Decoder
	events   int64
	dups     int64
	hashed   int64
	err      error // sticky
	errAfter error // to return after the batch in hand
	closed   bool
}

// Open lists the log's segments, selects those the range needs by their
// names, applies the writers' fences, proves that every writer epoch's chain
// is complete for the range (see the package doc; a gap is an error matching
// ErrIncomplete), and returns a Reader positioned before the first event. ctx
// bounds the listing and also every read the Reader makes in the background
// until Close: cancel it to stop a read.
func Open(ctx context.Context, b *blob.Bucket, opts *Options) (*Reader, error) {
	c, err := opts.resolve(ctx, b)
	if err != nil {
		return nil, err
	}
	for replan := 0; ; replan++ {
		p, err := planRead(ctx, b, c)
		if chain.Stale(err) {
			if replan == chain.Relists {
				return nil, chain.Exhausted("reader: log "+c.LogID, err)
			}
			c.Logger.Info("reader: the listing was stale (a segment vanished after it, collected by GC or sealed, or it missed one a listing of its seq finds); listing again", "err", err)
			continue
		}
		if err != nil {
			return nil, err
		}
		return newReader(ctx, b, c, p), nil
	}
}

// planRead lists, plans and proves one read. The writer states are read
// twice: before the listing, for what the writers had published (everything
// it covers was visible before the listing began, so the listing shows it),
// and after, for the fences (a takeover in between only makes the reader
// stricter).
func planRead(ctx context.Context, b *blob.Bucket, c *config) (*plan, error) {
	pub, err := readFences(ctx, b, c)
	if err != nil {
		return nil, err
	}
	if err := proveFresh(ctx, b, c, pub); err != nil {
		return nil, err
	}
	objs, err := listLog(ctx, b, c.LogID)
	if err != nil {
		return nil, err
	}
	fen, err := readFences(ctx, b, c)
	if err != nil {
		return nil, err
	}
	p, err := makePlan(c, objs, b.CanAppend(), fen)
	if err != nil {
		return nil, err
	}
	if err := proveComplete(ctx, b, c, objs, pub, fen, p); err != nil {
		return nil, err
	}
	return p, nil
}

// newReader starts reading the segments of p.
func newReader(ctx context.Context, b *blob.Bucket, c *config, p *plan) *Reader {
	r := &Reader{c: c, b: b, plan: p, sem: make(chan struct{}, c.Concurrency)}
	// Decoded values alias the payloads, which live as long as their
	// chunk: until the call after the one that returned them.
	r.dec.Alias = true
	if !c.KeepDuplicates {
		r.dd = newDedup()
	}
	r.ctx, r.cancel = context.WithCancel(ctx)

	// Ranks break ties between events of equal commit ts the same way on
	// every run: by writer, epoch, seq.
	all := append(append([]*Source(nil), p.active...), p.sealed...)
	rank := rankOf(all)
	// The duplicate filter's units (see stream.unit): one per segment, and
	// after them one per writer epoch.
	groups := map[epochID]int32{}
	newStream := func(src *Source) *stream {
		k := epochID{src.Name.WriterID, src.Name.Epoch}
		g, ok := groups[k]
		if !ok {
			g = int32(len(all) + len(groups))
			groups[k] = g
		}
		return &stream{r: r, src: src, rank: rank[src], group: g, hdrDone: make(chan struct{}), hotIdx: -1, fcIdx: -1}
	}
	for _, src := range p.active {
		s := newStream(src)
		// An active segment's range is unknown until its first block is
		// read, so it starts now and joins the merge with its first event.
		s.start()
		r.refill = append(r.refill, s)
	}
	for _, src := range p.sealed {
		r.sealed = append(r.sealed, newStream(src))
	}
	r.nextMin = r.minOf(0)
	r.lookahead()
	c.Logger.Info("reader: opened", "log", c.LogID, "start_ts", c.start, "end_ts", c.end,
		"listed", p.listed, "sealed", len(p.sealed), "active", len(p.active),
		"out_of_range", p.outOfRange, "fenced", p.fenced)
	return r
}

// epochID is a writer epoch.
type epochID struct {
	writer string
	epoch  uint64
}

func rankOf(srcs []*Source) map[*Source]int {
	sorted := append([]*Source(nil), srcs...)
	slices.SortFunc(sorted, func(a, b *Source) int { return compareID(a.Name, b.Name) })
	m := make(map[*Source]int, len(sorted))
	for i, s := range sorted {
		m[s] = i
	}
	return m
}

// Next returns the next event, or io.EOF after the last one. The event is
// valid until the next call.
func (r *Reader) Next(ctx context.Context) (*Event, error) {
	if err := r.begin(); err != nil {
		return nil, err
	}
	// The producers read ahead, so the next event may be in memory and no
	// wait would notice an ended ctx: check it here, or a cancelled read
	// could run on to its end.
	if err := ctx.Err(); err != nil {
		return nil, r.fail(ctx, err)
	}
	ev, err := r.step(ctx, true)
	if err != nil {
		return nil, r.fail(ctx, err)
	}
	return ev, nil
}

// NextBatch returns up to n events (at least one), or io.EOF after the last
// one. It returns fewer than n when the next event is not decoded yet,
// rather than wait with events in hand. The events, and the slice, are valid
// until the next call. An error met after the first event of a batch is
// returned by the next call.
func (r *Reader) NextBatch(ctx context.Context, n int) ([]*Event, error) {
	if err := r.begin(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, r.fail(ctx, err) // as in Next
	}
	n = max(n, 1)
	r.batch = r.batch[:0]
	for len(r.batch) < n {
		ev, err := r.step(ctx, len(r.batch) == 0)
		if err == errWouldBlock {
			break
		}
		if err != nil {
			if len(r.batch) > 0 {
				r.errAfter = err
				break
			}
			return nil, r.fail(ctx, err)
		}
		r.batch = append(r.batch, ev)
	}
	return r.batch, nil
}

// Events iterates over the remaining events. Each event is valid until the
// next iteration. An error ends the iteration: it is yielded with a nil event.
// io.EOF is not yielded.
func (r *Reader) Events(ctx context.Context) iter.Seq2[*Event, error] {
	return func(yield func(*Event, error) bool) {
		for {
			ev, err := r.Next(ctx)
			if err == io.EOF {
				return
			}
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// Stats returns the counters so far.
func (r *Reader) Stats() Stats {
	p := r.plan
	return Stats{
		SegmentsListed: p.listed, SegmentsSelected: len(p.active) + len(p.sealed), SegmentsActive: len(p.active),
		SegmentsOutOfRange: p.outOfRange, SegmentsFenced: p.fenced, SegmentsShadowed: p.shadowed,
		BadNames: p.badNames, SegmentsOpened: int(r.stats.opened.Load()), TornTails: int(r.stats.torn.Load()), AboveFence: int(r.stats.aboveFence.Load()),
		Events: r.events, Duplicates: r.dups, Hashed: r.hashed, Filtered: r.stats.filtered.Load(), Blocks: r.stats.blocks.Load(),
		MaxOpenStreams: int(r.stats.maxOpen.Load()), MaxChunks: int(r.stats.maxChunks.Load()),
	}
}

// Close stops the prefetching and waits for it. Events returned before are
// invalid after it. Close is idempotent.
func (r *Reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.cancel()
	r.wg.Wait()
	if r.err == nil {
		r.err = errors.New("reader: closed")
	}
	return nil
}

func (r *Reader) openStreams(d int64) { raise(&r.stats.maxOpen, r.stats.open.Add(d)) }
func (r *Reader) chunksLive(d int64)  { raise(&r.stats.maxChunks, r.stats.chunks.Add(d)) }

// begin starts a call: the events the previous call returned are released.
func (r *Reader) begin() error {
	for i, c := range r.release {
		if s := r.releaseOf[i]; s.closed {
			r.putSpare(c)
		} else {
			s.recycle(c)
		}
	}
	clear(r.release)
	clear(r.releaseOf)
	r.release, r.releaseOf = r.release[:0], r.releaseOf[:0]
	r.out, r.rawN = 0, 0
	if r.errAfter != nil {
		r.err, r.errAfter = r.errAfter, nil
		return r.err
	}
	return r.err
}

// fail makes err sticky, except for the end of the caller's own context: the
// merge state is intact then, and the next call can go on.
func (r *Reader) fail(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) && r.ctx.Err() == nil {
		return err
	}
	r.err = err
	if err == io.EOF {
		r.cancel()
	}
	return err
}

// step produces the next event to return: the merge, then the duplicate
// filter, then the rows-before-DDL rule. With mayBlock false it returns
// errWouldBlock instead of waiting for a chunk.
func (r *Reader) step(ctx context.Context, mayBlock bool) (*Event, error) {
	for {
		if r.flushing {
			if r.heldPos < len(r.held) {
				ev := r.held[r.heldPos]
				r.heldPos++
				r.out++
				r.events++
				return ev, nil
			}
			clear(r.held)
			r.held, r.heldPos, r.flushing = r.held[:0], 0, false
		}
		s, err := r.top(ctx, mayBlock)
		if err != nil {
			return nil, err
		}
		if s == nil {
			if len(r.held) > 0 {
				r.flushing = true
				continue
			}
			return nil, io.EOF
		}
		ts := s.ts
		src := s.cur.src // every event's Source
		if len(r.held) > 0 && ts != r.curTs {
			// Every row at the DDLs' ts is out: now the DDLs.
			r.flushing = true
			continue
		}
		if ts <= r.c.start || ts > r.c.end {
			// Producers cut to the range; this guards invariant 2.
			return nil, fmt.Errorf("reader: internal error: %q yielded commit ts %d outside (%d, %d]", src.Key, ts, r.c.start, r.c.end)
		}
		if r.haveTs && ts < r.curTs {
			return nil, &OrderError{Key: src.Key, PrevKey: r.prevSrc.Key, Ts: ts, PrevTs: r.curTs}
		}
		if !r.haveTs || ts != r.curTs {
			multi := false
			if r.dd != nil {
				if multi, err = r.dedupAt(ctx, ts, mayBlock); err != nil {
					return nil, err
				}
				r.dd.reset()
			}
			r.curTs, r.haveTs, r.multi = ts, true, multi
		}
		if src != r.prevSrc {
			r.prevSrc = src
		}
		if r.multi {
			r.hashed++
			if !r.dd.admit(s.cur.payloadOf(s.pos), s.unit()) {
				r.dups++
				r.consume(s)
				continue
			}
		}
		ev, err := r.event(s)
		if err != nil {
			return nil, err
		}
		if s.cur.ddls > 0 && ev.Event.Kind == codec.DDLEvent {
			r.held = append(r.held, ev.Clone())
			if !s.cur.decoded {
				r.rawN-- // its slot is free again
			}
			r.consume(s)
			continue
		}
		r.out++
		r.events++
		r.consume(s)
		return ev, nil
	}
}

// event returns the head of s as an Event: the chunk's, when its producer
// decoded it, or else one of the Reader's (see chunk), decoded here unless
// the read is raw, valid until the next call.
func (r *Reader) event(s *stream) (*Event, error) {
	c, i := s.cur, s.pos
	if c.decoded {
		return &c.events[i], nil
	}
	const slab = 256
	k := r.rawN
	r.rawN++
	if k/slab == len(r.rawEvs) {
		// Slabs, not one slice grown: the Events handed out by this call
		// stay where they are.
		r.rawEvs = append(r.rawEvs, make([]Event, slab))
	}
	ev := &r.rawEvs[k/slab][k%slab]
	ts, kind := c.recs[i].ts, c.kindOf(i)
	ev.Source, ev.payload = c.src, c.payloadOf(i)
	if !r.c.Raw {
		if err := decodeChecked(&r.dec, ev.payload, &ev.Event, c.src, c.blk, c.first+i, ts, segment.Kind(kind)); err != nil {
			return nil, err
		}
		return ev, nil
	}
	// Only the field of its kind: the other is not the event's, and
	// writing it would touch a second cache line of the Event.
	ev.Event.Kind = kind
	if kind == codec.DDLEvent {
		ev.Event.DDL.CommitTs = ts
	} else {
		ev.Event.Row.CommitTs = ts
	}
	return ev, nil
}

// dedupAt reports whether the events of ts need the duplicate filter: whether
// the segments holding them are of more than one unit (stream.unit). They
// are the streams whose head is at ts (a subtree at the root of the heap)
// and the point segments of ts the merge holds back (see top), the next in
// plan order: the segments it has not reached start above ts, since top
// opened every other one that does not.
//
// A point segment held back has not been read yet: its header says whether
// it is a catch-up segment, so when it is of the same writer epoch as every
// other segment at ts its header is read now (the read its stream would make
// first, which it then reuses). With mayBlock false it returns
// errWouldBlock instead of waiting for headers.
func (r *Reader) dedupAt(ctx context.Context, ts uint64, mayBlock bool) (bool, error) {
	u0 := int32(-1)
	stack := append(r.walk[:0], 0)
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i >= len(r.heap) || r.heap[i].ts != ts {
			continue
		}
		switch u := r.heap[i].s.unit(); {
		case u0 < 0:
			u0 = u
		case u != u0:
			r.walk = stack
			return true, nil
		}
		stack = append(stack, 2*i+1, 2*i+2)
	}
	r.walk = stack
	var unknown []*stream // point segments of ts whose headers are not known yet
	for j := r.nextOpen; j < len(r.sealed) && r.sealed[j].src.Name.MinTs == ts; j++ {
		s := r.sealed[j]
		if s.group != u0 {
			// Another writer epoch, or the segment at ts is a unit of its
			// own: two units either way.
			return true, nil
		}
		var known bool
		if s.started {
			select {
			case <-s.hdrDone: // the producer's fields are the merge's to read now
				known = true
			default:
			}
		} else {
			known = s.hdrKnown
		}
		if !known {
			unknown = append(unknown, s)
		} else if s.unit() != u0 {
			return true, nil
		}
	}
	if len(unknown) == 0 {
		return false, nil
	}
	if !mayBlock {
		return false, errWouldBlock
	}
	if err := r.readHeaders(ctx, unknown); err != nil {
		return false, err
	}
	for _, s := range unknown {
		if s.unit() != u0 {
			return true, nil
		}
	}
	return false, nil
}

// readHeaders makes the headers of streams known: a started stream's
// producer reads it, the others' are read here, at most Concurrency at once.
// A header that cannot be read stays unknown (the stream is then a unit of
// its own, and the filter runs): the stream reports the failure when it
// opens.
func (r *Reader) readHeaders(ctx context.Context, ss []*stream) error {
	rctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	var wg sync.WaitGroup
	sem := make(chan struct{}, r.c.Concurrency)
	for _, s := range ss {
		if s.started {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			h, data, err := chain.ReadHeader(rctx, r.b, listed{Key: s.src.Key, Name: s.src.Name, Size: s.src.Size})
			if err != nil {
				return
			}
			if s.src.header == nil {
				s.src.header = data // the stream opens with it, at no request
			}
			s.hdrFlags, s.hdrVersion, s.hdrKnown = h.Flags, h.Version, true
		})
	}
	wg.Wait()
	for _, s := range ss {
		if !s.started {
			continue
		}
		select {
		case <-s.hdrDone:
		case <-ctx.Done():
			return ctx.Err()
		case <-r.ctx.Done():
			return r.ctx.Err()
		}
	}
	return ctx.Err()
}

// top returns the stream with the smallest head after giving every exhausted
// stream its next chunk and opening every segment the frontier has reached;
// nil when the merge is done.
func (r *Reader) top(ctx context.Context, mayBlock bool) (*stream, error) {
	if len(r.refill) == 0 && len(r.heap) > 0 && r.heap[0].ts < r.nextMin {
		return r.heap[0].s, nil // the common case: nothing to refill or open
	}
	for {
		// Every segment the frontier reached starts before the merge
		// waits for any of them, so that their first blocks are read
		// and decoded in parallel.
		r.join()
		if len(r.refill) == 0 {
			break
		}
		for len(r.refill) > 0 {
			s := r.refill[len(r.refill)-1]
			got, err := r.fetch(ctx, s, mayBlock)
			if err != nil {
				return nil, err
			}
			r.refill = r.refill[:len(r.refill)-1]
			if got {
				r.push(s)
				r.forecast(s)
			} else {
				r.closeStream(s)
			}
		}
	}
	if len(r.heap) == 0 {
		return nil, nil
	}
	return r.heap[0].s, nil
}

// join opens the sealed segments the frontier reached: those whose min ts is
// at or below the smallest head in the heap (or the next one, when the heap
// and refill are empty). A stream waiting in refill may have a smaller head,
// which only makes a segment join early.
//
// A point segment joins only when no other is open. That one holds events
// of one ts only (its ts is the frontier, at or below this one's), so this
// one joins when it ends: the point segments of one ts, a transaction split
// into any number of them, are read one after another (plus Lookahead).
// Their events of the one ts come in no other order than before: the point
// segments of a ts join in (writer, epoch, seq) order, and each ends before
// the next joins.
func (r *Reader) join() {
	for r.nextOpen < len(r.sealed) {
		s := r.sealed[r.nextOpen]
		reached := len(r.refill) == 0
		if len(r.heap) > 0 {
			reached = s.src.Name.MinTs <= r.heap[0].ts
		}
		point := isPoint(s.src.Name)
		if !reached || point && r.openPoints > 0 {
			return
		}
		if !s.started {
			s.start()
		}
		if point {
			s.point = true
			r.openPoints++
		}
		r.nextOpen++
		r.nextMin = r.minOf(r.nextOpen)
		r.nextStart = max(r.nextStart, r.nextOpen)
		r.refill = append(r.refill, s)
		r.lookahead()
	}
}

// minOf is the min ts of sealed segment i, or the largest ts past the last.
func (r *Reader) minOf(i int) uint64 {
	if i < len(r.sealed) {
		return r.sealed[i].src.Name.MinTs
	}
	return math.MaxUint64
}

// lookahead starts the prefetch of the next segments the merge will reach.
func (r *Reader) lookahead() {
	for r.nextStart < len(r.sealed) && r.nextStart < r.nextOpen+r.c.Lookahead {
		if s := r.sealed[r.nextStart]; !s.started {
			s.start()
		}
		r.nextStart++
	}
}

// fetch gives s its next chunk; false when s is done.
func (r *Reader) fetch(ctx context.Context, s *stream, mayBlock bool) (bool, error) {
	var c *chunk
	var ok bool
	select {
	case c, ok = <-s.ch:
	default:
		if !mayBlock {
			return false, errWouldBlock
		}
		select {
		case c, ok = <-s.ch:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	if !ok {
		if s.err != nil {
			return false, s.err
		}
		return false, nil
	}
	s.cur, s.pos, s.ts = c, 0, c.recs[0].ts
	return true, nil
}

// consume moves s, the top of the heap, past its head.
func (r *Reader) consume(s *stream) {
	s.pos++
	if s.pos < s.cur.n {
		ts := s.cur.recs[s.pos].ts
		if ts != s.ts {
			// A head at the same ts keeps its place: (ts, rank) is
			// unchanged.
			s.ts = ts
			r.heap[0].ts = ts
			r.fix()
		}
		return
	}
	c := s.cur
	if s.fcIdx >= 0 {
		r.fcRemove(s.fcIdx)
	}
	s.cur = nil
	hot := s.hotIdx >= 0
	if hot && r.live > r.hotStreams() {
		// Its chunk read ahead becomes the one in the merge: it is cold
		// again before its producer learns it has room for another, and
		// the forecast decides anew when it has that chunk.
		r.cool(s)
		s.setLimit(1)
		r.promote()
	}
	if r.out > 0 {
		// This call returned events that may live in c. A hot stream's
		// producer goes on meanwhile (c no longer counts against its
		// limit); a cold one's waits for c, the one chunk it holds.
		r.release = append(r.release, c)
		r.releaseOf = append(r.releaseOf, s)
		if hot {
			s.through(c)
		}
	} else {
		s.recycle(c)
	}
	r.pop()
	r.refill = append(r.refill, s)
}

func (r *Reader) closeStream(s *stream) {
	s.closed = true
	if s.point {
		r.openPoints--
	}
	r.live--
	r.many.Store(r.live > r.hotStreams())
	r.cool(s)
	if s.fcIdx >= 0 {
		r.fcRemove(s.fcIdx)
	}
	r.promote()
	r.openStreams(-1)
	r.chunksLive(-int64(s.allocated.Load()))
	for {
		select {
		case c := <-s.free:
			r.putSpare(c)
		default:
			return
		}
	}
}

// maxSpares bounds the chunks kept for the next streams, in units of one
// stream's pool.
const maxSpares = 4

// putSpare keeps the chunk of a finished stream for a stream to come: its
// events, and in them the buffers decoding reuses, and its segment.Reader,
// whose buffers the next stream's Reset keeps, are what a stream allocates
// most of. Nothing uses the chunk's events any more: the merge hands a
// finished stream's chunks here only after the caller's events are released.
func (r *Reader) putSpare(c *chunk) {
	c.n, c.ddls, c.src, c.raw, c.counted = 0, 0, nil, c.raw[:0], false
	for i := range c.events {
		c.events[i].payload, c.events[i].Source = nil, nil
	}
	r.sparesMu.Lock()
	keep := maxSpares * (r.c.Prefetch + 2)
	if r.many.Load() {
		// Under the adaptive prefetch, the spares are for the streams
		// that read ahead.
		keep = min(keep, r.hotStreams())
	}
	if len(r.spares) < keep {
		r.spares = append(r.spares, c)
	}
	r.sparesMu.Unlock()
}

// takeSpare returns a kept chunk, or a new one.
func (r *Reader) takeSpare() *chunk {
	r.sparesMu.Lock()
	defer r.sparesMu.Unlock()
	if n := len(r.spares); n > 0 {
		c := r.spares[n-1]
		r.spares[n-1] = nil
		r.spares = r.spares[:n-1]
		return c
	}
	return &chunk{}
}

// The adaptive prefetch. A stream reads ahead of the merge (up to its pool,
// Prefetch+2 chunks) only while it is hot; a cold one holds the chunk the
// merge reads and nothing more, its producer waiting until that chunk comes
// back. While few streams are open (hotStreams) every one is hot, as if
// there were no such rule. When many overlapping segments are open, memory
// is about one chunk per stream plus hotStreams × 2: the hot ones are
// those the merge will need a next chunk of first, those whose chunk in the
// merge ends at the smallest commit ts (the forecast of an external merge
// sort), and each reads one chunk ahead.

// hotStreams is how many streams may read ahead at once.
func (r *Reader) hotStreams() int { return 2*r.c.Concurrency + 4 }

// hotLimit is how many chunks a hot stream may have out.
func (r *Reader) hotLimit(s *stream) int {
	if r.live <= r.hotStreams() {
		return s.pool
	}
	return min(2, s.pool)
}

// heat lets s read ahead.
func (r *Reader) heat(s *stream) {
	if s.hotIdx < 0 {
		s.hotIdx = len(r.hot)
		r.hot = append(r.hot, s)
	}
	s.setLimit(r.hotLimit(s))
}

// cool takes s out of the hot streams; the caller sets its limit.
func (r *Reader) cool(s *stream) {
	i := s.hotIdx
	if i < 0 {
		return
	}
	n := len(r.hot) - 1
	r.hot[i] = r.hot[n]
	r.hot[i].hotIdx = i
	r.hot[n] = nil
	r.hot = r.hot[:n]
	s.hotIdx = -1
}

// started counts a stream that starts, and decides whether it reads ahead.
// When it makes the streams many, those that read ahead as far as their
// pools go read one chunk ahead from now on.
func (r *Reader) started(s *stream) {
	s.hotIdx, s.fcIdx = -1, -1
	r.live++
	r.many.Store(r.live > r.hotStreams())
	if r.live == r.hotStreams()+1 {
		for _, h := range r.hot {
			h.setLimit(r.hotLimit(h))
		}
	}
	if r.live <= r.hotStreams() && len(r.hot) < r.hotStreams() {
		// Few streams: each reads ahead as far as its pool goes.
		r.heat(s)
	} else {
		// Many: it reads its first chunk, and ahead only when the
		// forecast says it is next (see forecast).
		s.limit.Store(1)
	}
}

// forecast places s, which has a new chunk in the merge, among the cold
// streams by the chunk's last commit ts, and lets the first of them read
// ahead while there is room.
func (r *Reader) forecast(s *stream) {
	r.cool(s)
	s.fcIdx = len(r.fc)
	r.fc = append(r.fc, s)
	r.fcUp(s.fcIdx)
	r.promote()
	if s.hotIdx < 0 {
		s.setLimit(1)
	}
}

// promote heats the cold streams whose chunks end first, while there is room.
func (r *Reader) promote() {
	for len(r.hot) < r.hotStreams() && len(r.fc) > 0 {
		s := r.fc[0]
		r.fcRemove(0)
		r.heat(s)
	}
}

// fcEnd is the last commit ts of the chunk of a stream in fc.
func fcEnd(s *stream) uint64 { return s.cur.recs[s.cur.n-1].ts }

func (r *Reader) fcLess(i, j int) bool { return fcEnd(r.fc[i]) < fcEnd(r.fc[j]) }

func (r *Reader) fcSwap(i, j int) {
	f := r.fc
	f[i], f[j] = f[j], f[i]
	f[i].fcIdx, f[j].fcIdx = i, j
}

func (r *Reader) fcRemove(i int) {
	n := len(r.fc) - 1
	r.fc[i].fcIdx = -1
	if i != n {
		r.fc[i] = r.fc[n]
		r.fc[i].fcIdx = i
	}
	r.fc[n] = nil
	r.fc = r.fc[:n]
	if i < n {
		r.fcDown(i)
		r.fcUp(i)
	}
}

func (r *Reader) fcUp(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !r.fcLess(i, p) {
			return
		}
		r.fcSwap(i, p)
		i = p
	}
}

func (r *Reader) fcDown(i int) {
	n := len(r.fc)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if rt := l + 1; rt < n && r.fcLess(rt, l) {
			m = rt
		}
		if !r.fcLess(m, i) {
			return
		}
		r.fcSwap(i, m)
		i = m
	}
}

// The heap of streams, ordered by (head commit ts, rank). An entry holds its
// stream's key, so that the comparisons of a merge of hundreds of streams
// read the heap's array alone, not the streams; the merge takes and moves
// only the top, so no stream needs to know its place.

type heapEntry struct {
	ts   uint64 // the stream's head commit ts (stream.ts)
	rank int
	s    *stream
}

func (a *heapEntry) less(b *heapEntry) bool {
	return a.ts < b.ts || a.ts == b.ts && a.rank < b.rank
}

func (r *Reader) push(s *stream) {
	r.heap = append(r.heap, heapEntry{s.ts, s.rank, s})
	r.up(len(r.heap)-1, r.heap[len(r.heap)-1])
}

// up puts e, whose place is the hole at i or above it, in its place.
func (r *Reader) up(i int, e heapEntry) {
	h := r.heap
	for i > 0 {
		p := (i - 1) / 2
		if !e.less(&h[p]) {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = e
}

// pop removes the top.
func (r *Reader) pop() {
	n := len(r.heap) - 1
	r.heap[0] = r.heap[n]
	r.heap[n] = heapEntry{}
	r.heap = r.heap[:n]
	if n > 0 {
		r.down(0)
	}
}

// fix moves the top, whose head ts grew, to its place. A top that is still
// the smallest stays, at two comparisons: the next event of a run that
// leads the merge (a spill's bulk) costs no more. Otherwise its hole goes
// down the smaller children to a leaf, one comparison a level, and the
// entry rises from there (Floyd's sift): among many interleaved runs it
// belongs near the bottom, and this takes half the comparisons of down.
func (r *Reader) fix() {
	h := r.heap
	n := len(h)
	e := h[0]
	m := 1
	if m >= n {
		return
	}
	if m+1 < n && h[m+1].less(&h[m]) {
		m++
	}
	if !h[m].less(&e) {
		return
	}
	i := 0
	for {
		h[i] = h[m]
		i = m
		l := 2*i + 1
		if l >= n {
			break
		}
		m = l
		if l+1 < n && h[l+1].less(&h[l]) {
			m = l + 1
		}
	}
	r.up(i, e)
}

// down moves entry i down to its place.
func (r *Reader) down(i int) {
	h := r.heap
	n := len(h)
	e := h[i]
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if rt := l + 1; rt < n && h[rt].less(&h[l]) {
			m = rt
		}
		if !h[m].less(&e) {
			break
		}
		h[i] = h[m]
		i = m
	}
	h[i] = e
}
