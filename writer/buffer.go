package writer

import (
	"context"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/redokit/redokit/segment"
)

// rec is one buffered event, encoded. It holds no pointer, so that the
// garbage collector does not scan the millions of records a large buffer
// holds: the encoding is found by chunk number and offset.
type rec struct {
	ts      uint64
	arrival uint64 // order of arrival across all spans: the tie-breaker that keeps the merge stable
	off     uint32 // offset of the encoding in its chunk
	n       uint32 // length of the encoding
	chunk   uint32 // number of the span's chunk that holds it
	kind    segment.Kind
}

// recOverhead is what a record costs beyond its encoding; the quota counts
// it so that many tiny events cannot hide behind a small byte count.
const recOverhead = int64(unsafe.Sizeof(rec{}))

// recLess is the flush order: commit ts, then rows before DDLs, then arrival.
func recLess(a, b *rec) bool {
	if a.ts != b.ts {
		return a.ts < b.ts
	}
	if a.kind != b.kind {
		return a.kind < b.kind // segment.KindRow < segment.KindDDL
	}
	return a.arrival < b.arrival
}

// Arena chunk sizes: a span's first chunk is small, so that thousands of quiet
// spans cost little, and chunks double up to the maximum as a span proves
// busy. Chunks of the maximum size are recycled once the flush that took
// their records has built its blocks: a busy writer then copies into
// memory that is already mapped instead of fresh, zeroed pages (page faults
// and zeroing cost more than the copy itself).
const (
	minChunk = 4 << 10
	maxChunk = 1 << 20
)

// chunkCache keeps recycled chunks of maxChunk bytes. Unlike a sync.Pool it
// is not emptied by every garbage collection, which at the writer's
// allocation rate would throw the chunks away about as fast as they come
// back; it holds at most what the memory quota allows.
type chunkCache struct {
	free freeList[[]byte]
	recs recPool
	made atomic.Int64 // chunks of maxChunk allocated (not from the list)
}

func newChunkCache(quota int64) *chunkCache {
	cc := &chunkCache{free: freeList[[]byte]{max: int(min(quota/maxChunk+1, 4096))}}
	cc.recs.max = recsBudget(quota)
	return cc
}

func (cc *chunkCache) get() []byte {
	if b, ok := cc.free.pop(); ok {
		return b
	}
	cc.made.Add(1)
	return make([]byte, 0, maxChunk)
}

// recycle takes back the chunks of the maximum size.
func (cc *chunkCache) recycle(chunks []*chunk) {
	for _, c := range chunks {
		if cap(c.b) == maxChunk {
			cc.free.push(c.b[:0])
		}
		c.b = nil
	}
}

// chunk is an arena chunk. Its slice only grows within its capacity, so the
// encodings in it never move.
type chunk struct{ b []byte }

// spanBuf is one span's buffer: its events, in the order they came, which is
// commit-ts order.
type spanBuf struct {
	id       SpanID
	resolved uint64
	lastTs   uint64 // commit ts of the last event written
	written  bool   // an event has been written (lastTs is meaningful)
	recs     []rec
	chunks   []*chunk // chunks[i] is chunk number base+i
	base     uint32
	next     int // size of the next chunk
	inflight int // reservations not yet published or abandoned

	// Events of the span staged (cut above the writer's resolved ts, to
	// bound memory) and not yet committed lie in [stagedMin, stagedMax]
	// when staged is set: the span's flushed ts stays below them.
	staged               bool
	stagedMin, stagedMax uint64
}

// flushedTs is the span's flushed ts once the events cut so far are
// durable: every event of it at or below its resolved ts, below its first
// event still buffered and below its first event staged but not committed.
func (s *spanBuf) flushedTs() uint64 {
	ts := s.resolved
	if len(s.recs) > 0 {
		ts = min(ts, s.recs[0].ts-1)
	}
	if s.staged {
		ts = min(ts, s.stagedMin-1)
	}
	return ts
}

// commitStaged notes that the epoch's committed ts is now committed: staged
// events at or below it are part of the log. The first staged event above
// it is not known, so the span's staged range starts just above it, which
// only keeps its flushed ts lower than it could be.
func (s *spanBuf) commitStaged(committed uint64) {
	switch {
	case !s.staged || committed < s.stagedMin:
	case committed >= s.stagedMax:
		s.staged = false
	default:
		s.stagedMin = committed + 1
	}
}

// noteStaged records that the span's events in [lo, hi] were staged.
func (s *spanBuf) noteStaged(lo, hi uint64) {
	if !s.staged {
		s.staged, s.stagedMin, s.stagedMax = true, lo, hi
		return
	}
	s.stagedMin, s.stagedMax = min(s.stagedMin, lo), max(s.stagedMax, hi)
}

// run is the records a flush took from one span, with the chunks that hold
// them (their slices as they stood at the cut).
type run struct {
	recs   []rec
	chunks [][]byte // chunks[i] is chunk number base+i
	base   uint32
}

func (r *run) data(i int) []byte {
	x := &r.recs[i]
	return r.chunks[x.chunk-r.base][x.off : x.off+x.n : x.off+x.n]
}

// reserve makes room for n bytes of encodings at the end of the span's last
// chunk and returns it, with where it is. The caller fills it without the
// writer's lock, then publishes or abandons it: until then the span keeps
// every chunk (take retires none), so the room cannot be recycled under it.
// Room that is never published is lost to the chunk, which is harmless: no
// record points into it.
func (s *spanBuf) reserve(cc *chunkCache, n int) (room []byte, num, off uint32) {
	var c *chunk
	if k := len(s.chunks); k > 0 {
		c = s.chunks[k-1]
	}
	if c == nil || cap(c.b)-len(c.b) < n {
		// A span that writes n bytes at once is as busy as one that has
		// filled chunks of 2n: doubling up from the smallest chunk would
		// give it a fresh chunk for nearly every batch, each too small to
		// recycle, and fresh memory is what costs (first touch of a
		// page, above all on a virtual machine, costs many times the copy
		// into it).
		s.next = min(max(s.next, minChunk), maxChunk)
		for s.next < 2*n && s.next < maxChunk {
			s.next *= 2
		}
		size := max(s.next, n)
		if size == maxChunk {
			c = &chunk{b: cc.get()}
		} else {
			c = &chunk{b: make([]byte, 0, size)}
		}
		s.chunks = append(s.chunks, c)
		s.next *= 2
	}
	num = s.base + uint32(len(s.chunks)-1)
	start := len(c.b)
	c.b = c.b[:start+n]
	s.inflight++
	return c.b[start : start+n : start+n], num, uint32(start)
}

// publish appends the records of a reservation that has been filled with
// encodings ending at ends, counted from start (where the reservation
// begins). The caller checked their order.
func (s *spanBuf) publish(cc *chunkCache, num, off uint32, start int, ends []int, ts []uint64, kinds []segment.Kind, arrival uint64) {
	s.inflight--
	if need := len(s.recs) + len(ends); need > cap(s.recs) {
		// Doubling (the pool's classes are powers of two), and the
		// outgrown slice goes back for a smaller span: a slice grown by
		// append would be fresh memory at every growth, and the
		// garbage collector's.
		grown := append(cc.recs.get(max(need, 2*len(s.recs))), s.recs...)
		cc.recs.put(s.recs)
		s.recs = grown
	}
	base := start
	for i, end := range ends {
		s.recs = append(s.recs, rec{
			ts: ts[i], arrival: arrival + uint64(i), kind: kinds[i],
			off: off + uint32(start-base), n: uint32(end - start), chunk: num,
		})
		start = end
	}
	s.lastTs, s.written = ts[len(ts)-1], true
}

// recsBudget is the record-slice cache's budget for a memory quota, in
// records of capacity: a sixteenth of the quota (16 MiB at the default),
// beyond the quota, since the quota counts records only while they hold
// events. A span whose every record is taken starts its next slice from
// nothing, and at a thousand records a flush, growing it again was most of
// the writer's allocation; a span of a big flush (tens of thousands of
// records) would grow it again by doubling every flush, all of it fresh
// memory. A burst's bigger slices go to the garbage collector rather than
// stay for good.
func recsBudget(quota int64) int { return int(quota / 16 / recOverhead) }

// recycleRecs takes back the record slices of runs that are done with.
func (cc *chunkCache) recycleRecs(runs []run) {
	for i := range runs {
		cc.recs.put(runs[i].recs)
	}
}

// Record slices come in classes of capacity 1<<k records, minRecClass <= k
// <= maxRecClass (64 records to 1 M: 2 KiB to 32 MiB); larger ones are
// made to measure and left to the garbage collector.
const (
	minRecClass = 6
	maxRecClass = 20
)

// recPool keeps record slices for reuse, by capacity class, up to max
// records of capacity in all. A span's slice is taken from it, grown
// through it and given back to it when a flush is done with the slice, so a
// busy writer reuses the same few slices however its spans' batches vary.
type recPool struct {
	mu      sync.Mutex
	classes [maxRecClass + 1][][]rec
	held    int
	max     int
}

// recClass is the class of a slice that can hold n records.
func recClass(n int) int {
	k := minRecClass
	for k <= maxRecClass && 1<<k < n {
		k++
	}
	return k
}

// get returns an empty slice that can hold n records.
func (p *recPool) get(n int) []rec {
	k := recClass(n)
	if k > maxRecClass {
		return make([]rec, 0, n)
	}
	p.mu.Lock()
	if l := p.classes[k]; len(l) > 0 {
		r := l[len(l)-1]
		l[len(l)-1] = nil
		p.classes[k] = l[:len(l)-1]
		p.held -= cap(r)
		p.mu.Unlock()
		return r
	}
	p.mu.Unlock()
	return make([]rec, 0, 1<<k)
}

// put takes back a slice nothing refers to any more. One that is not of a
// class, or that the budget has no room for, is left to the collector.
func (p *recPool) put(r []rec) {
	c := cap(r)
	k := recClass(c)
	if c == 0 || k > maxRecClass || 1<<k != c {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held+c <= p.max {
		p.classes[k] = append(p.classes[k], r[:0])
		p.held += c
	}
}

// take detaches the records with commit ts <= ts. It also returns the chunks
// that no record left in the span refers to: the caller recycles them once
// it no longer reads the run. The run keeps the span's record slice, whole
// capacity and all, so that it goes back to its pool class; the span's
// records left over move to a slice of their own.
func (s *spanBuf) take(cc *chunkCache, ts uint64) (r run, bytes int64, retired []*chunk) {
	i := sort.Search(len(s.recs), func(i int) bool { return s.recs[i].ts > ts })
	if i == 0 {
		return run{}, 0, nil
	}
	last := int(s.recs[i-1].chunk - s.base)
	r = run{recs: s.recs[:i], chunks: make([][]byte, last+1), base: s.base}
	for k := range r.chunks {
		r.chunks[k] = s.chunks[k].b
	}
	for k := range r.recs {
		bytes += int64(r.recs[k].n)
	}
	bytes += int64(i) * recOverhead
	// Chunks before the one the first remaining record is in (before the
	// last one, when none remains and it is small: new events go there)
	// are done with.
	keep := last
	if i < len(s.recs) {
		keep = int(s.recs[i].chunk - s.base)
		s.recs = append(cc.recs.get(len(s.recs)-i), s.recs[i:]...)
	} else {
		s.recs = nil
		if cap(s.chunks[last].b) == maxChunk {
			// A full-size chunk goes back to the cache too, so that the
			// span's next events start a recycled chunk from its
			// beginning: kept, the unused end of every busy span's last
			// chunk would be memory of its own (8 spans taking turns at
			// 512 KiB transactions, each flushed, made 9 chunks, not 1:
			// W1's peak RSS above the idle writer 12 → 4 MiB, page faults
			// 32 → 10 per MiB), and a first touch costs more than the
			// copy into it. Smaller chunks stay: they are not recycled,
			// and a quiet span would allocate a new one at every flush.
			keep = last + 1
		}
	}
	if s.inflight > 0 {
		// A Write is filling room that a concurrent one may have left
		// behind in a chunk the records taken here have passed: retire
		// nothing until a later cut.
		keep = 0
	}
	if keep > 0 {
		retired = slices.Clone(s.chunks[:keep])
		s.chunks = slices.Clone(s.chunks[keep:])
		s.base += uint32(keep)
	}
	return r, bytes, retired
}

// dropAbove discards the records with commit ts > ts and returns their quota
// bytes.
func (s *spanBuf) dropAbove(ts uint64) int64 {
	i := sort.Search(len(s.recs), func(i int) bool { return s.recs[i].ts > ts })
	var bytes int64
	for j := i; j < len(s.recs); j++ {
		bytes += int64(s.recs[j].n) + recOverhead
	}
	s.recs = s.recs[:i]
	return bytes
}

// quota is the memory quota: a counting semaphore in bytes. A request larger
// than the whole quota is admitted when nothing else holds any, so that one
// huge batch cannot wait forever.
type quota struct {
	mu    sync.Mutex
	used  int64
	limit int64
	freed chan struct{} // closed (and replaced) by every release
}

func newQuota(limit int64) *quota { return &quota{limit: limit, freed: make(chan struct{})} }

// tryAcquire takes n bytes if they fit now; otherwise it returns the channel
// that the next release closes.
func (q *quota) tryAcquire(n int64) (bool, <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.used == 0 || q.used+n <= q.limit {
		q.used += n
		return true, nil
	}
	return false, q.freed
}

// acquire takes n bytes, waiting for releases. It gives up when ctx ends or
// stop is closed. waited is the time it spent blocked; onBlock is called once
// when it first has to wait. When stuck reports that no release can come, it
// takes the bytes over the limit and reports forced.
func (q *quota) acquire(ctx context.Context, stop <-chan struct{}, n int64, onBlock func(), stuck func() bool) (waited time.Duration, forced bool, err error) {
	ok, freed := q.tryAcquire(n)
	if ok {
		return 0, false, nil
	}
	if onBlock != nil {
		onBlock()
	}
	start := time.Now()
	defer func() { waited = time.Since(start) }()
	for {
		if stuck() {
			q.mu.Lock()
			q.used += n
			q.mu.Unlock()
			return 0, true, nil
		}
		select {
		case <-freed:
		case <-ctx.Done():
			return 0, false, ctx.Err()
		case <-stop:
			return 0, false, errStopped
		}
		if ok, freed = q.tryAcquire(n); ok {
			return 0, false, nil
		}
	}
}

// wake makes the waiters look again (the state stuck reports changed).
func (q *quota) wake() {
	q.mu.Lock()
	defer q.mu.Unlock()
	close(q.freed)
	q.freed = make(chan struct{})
}

func (q *quota) release(n int64) {
	if n == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.used -= n
	close(q.freed)
	q.freed = make(chan struct{})
}

func (q *quota) inUse() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.used
}
