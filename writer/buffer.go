package writer

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"
	"unsafe"

	"github.com/redokit/redokit/segment"
)

// rec is one buffered event, encoded.
type rec struct {
	ts      uint64
	arrival uint64 // order of arrival across all spans: the tie-breaker that keeps the merge stable
	kind    segment.Kind
	data    []byte // the codec encoding, in the span's arena
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
// spans cost little, and chunks double up to the maximum as a span proves busy.
const (
	minChunk = 4 << 10
	maxChunk = 1 << 20
)

// spanBuf is one span's buffer: its events, in the order they came, which is
// commit-ts order.
type spanBuf struct {
	id       SpanID
	resolved uint64
	lastTs   uint64 // commit ts of the last event written
	written  bool   // an event has been written (lastTs is meaningful)
	recs     []rec
	bytes    int64  // quota bytes of recs
	chunk    []byte // arena the encodings are copied into; never reallocated, so recs may alias it
	next     int    // size of the next chunk
}

// store copies encoded events (enc, split at ends) into the arena and appends
// their records.
func (s *spanBuf) store(enc []byte, ends []int, ts []uint64, kinds []segment.Kind, arrival uint64) {
	if cap(s.chunk)-len(s.chunk) < len(enc) {
		if s.next < minChunk {
			s.next = minChunk
		}
		s.chunk = make([]byte, 0, max(s.next, len(enc)))
		s.next = min(2*s.next, maxChunk)
	}
	base := len(s.chunk)
	s.chunk = append(s.chunk, enc...)
	start := 0
	for i, end := range ends {
		data := s.chunk[base+start : base+end : base+end]
		s.recs = append(s.recs, rec{ts: ts[i], arrival: arrival + uint64(i), kind: kinds[i], data: data})
		start = end
	}
	s.bytes += int64(len(enc)) + int64(len(ends))*recOverhead
	s.lastTs, s.written = ts[len(ts)-1], true
}

// take detaches the records with commit ts <= ts.
func (s *spanBuf) take(ts uint64) (run []rec, bytes int64) {
	i := sort.Search(len(s.recs), func(i int) bool { return s.recs[i].ts > ts })
	if i == 0 {
		return nil, 0
	}
	run = s.recs[:i:i]
	for j := range run {
		bytes += int64(len(run[j].data)) + recOverhead
	}
	// The rest moves to a new array, so that the taken records (and the
	// arena chunks they hold) are freed with the flush, not kept alive by
	// this span's slice.
	if i == len(s.recs) {
		s.recs = nil
	} else {
		s.recs = slices.Clone(s.recs[i:])
	}
	s.bytes -= bytes
	return run, bytes
}

// dropAbove discards the records with commit ts > ts and returns their quota
// bytes.
func (s *spanBuf) dropAbove(ts uint64) int64 {
	i := sort.Search(len(s.recs), func(i int) bool { return s.recs[i].ts > ts })
	var bytes int64
	for j := i; j < len(s.recs); j++ {
		bytes += int64(len(s.recs[j].data)) + recOverhead
	}
	clear(s.recs[i:])
	s.recs = s.recs[:i]
	s.bytes -= bytes
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
// when it first has to wait.
func (q *quota) acquire(ctx context.Context, stop <-chan struct{}, n int64, onBlock func()) (waited time.Duration, err error) {
	ok, freed := q.tryAcquire(n)
	if ok {
		return 0, nil
	}
	if onBlock != nil {
		onBlock()
	}
	start := time.Now()
	defer func() { waited = time.Since(start) }()
	for {
		select {
		case <-freed:
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-stop:
			return 0, errStopped
		}
		if ok, freed = q.tryAcquire(n); ok {
			return 0, nil
		}
	}
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
