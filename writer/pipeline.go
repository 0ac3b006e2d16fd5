package writer

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redokit/redokit/segment"
)

// job is one flush: the events it took, on their way to storage.
type job struct {
	resolved  uint64 // the writer's resolved ts when the job was cut
	committed uint64 // the epoch's committed ts once the job is durable: max(resolved, the committed ts before)
	flags     segment.Flags
	staged    int64 // events of the job above its resolved ts (staged, not committed by it)
	lazy      bool  // local disk: appended, but made durable (and released) with the next job
	runs      []run
	spans     []segment.SpanTs // each span's flushed ts once the job is durable
	retired   []*chunk         // arena chunks to recycle once the job's blocks are built (recycle)
	final     bool             // Close's flush: seal the active segment after it
	waiters   []chan flushResult
	start     time.Time

	records, rows, ddls int64
	payload             int64 // encoded bytes
	quota               int64 // quota bytes released when the job is durable
	released            bool

	// tasks carries the job's blocks, in order, from the builder to the
	// committer; it is closed after the last one. Its capacity bounds how
	// far compression runs ahead of storage.
	tasks chan *blockTask
}

// blockTask is one block: built by the loop, compressed by a worker,
// written by the committer.
type blockTask struct {
	bb    *segment.BlockBuilder
	frame segment.Frame
	err   error
	done  chan struct{} // closed by the worker

	// job is the flush the block belongs to. On the local path the
	// committer lets go of the frame once it is written, before it is
	// durable, and a repair reads it back from the segment (readBack, its
	// CRC the proof): a flush's frames held until its one sync would be as
	// much memory again as its records, and touching fresh memory costs
	// more than reading a block back in the rare repair. A task without a
	// job (made by a test) keeps its frame until it is durable.
	job *job
	// stored says where the committer wrote the frame: the segment's key,
	// the frame's offset and length.
	stored struct {
		key string
		off int64
		n   int
	}

	queued bool // the committer holds it for a redo (local path)
	pools  *pools
}

// release gives the frame's buffer back once the frame is stored.
func (t *blockTask) release() {
	if b := t.frame.Bytes(); b != nil {
		t.pools.putFrame(b)
	}
	t.frame = segment.Frame{}
}

// pools are the writer's free lists of block builders and frame buffers
// (about BlockSize each). They are bounded by the blocks the pipeline can
// hold at once, and unlike sync.Pools they are not emptied by garbage
// collections, which at the writer's rate would make every block a fresh,
// zeroed allocation.
type pools struct {
	builders freeList[*segment.BlockBuilder]
	frames   freeList[[]byte]
	made     atomic.Int64 // frame buffers allocated (not from the list)
	// frameCap is the capacity of a new frame buffer: a block's bytes
	// and more. A raw block's buffer becomes its frame and the builder
	// goes on in the buffer it is given, so a smaller one would grow by
	// doubling, copying the block over and over (a flush larger than the
	// pool, or the first ones, would pay that for every block).
	frameCap int
}

func newPools(max, frameCap int) *pools {
	return &pools{builders: freeList[*segment.BlockBuilder]{max: max}, frames: freeList[[]byte]{max: max}, frameCap: frameCap}
}

func (p *pools) getBuilder() *segment.BlockBuilder {
	if b, ok := p.builders.pop(); ok {
		return b
	}
	return new(segment.BlockBuilder)
}

func (p *pools) putBuilder(b *segment.BlockBuilder) {
	b.Reset()
	p.builders.push(b)
}

func (p *pools) getFrame() []byte {
	if b, ok := p.frames.pop(); ok {
		return b
	}
	p.made.Add(1)
	return make([]byte, 0, p.frameCap)
}

func (p *pools) putFrame(b []byte) { p.frames.push(b[:0]) }

// freeList is a bounded stack of values to reuse, safe for concurrent use.
// It holds values of at most max in total weight: each weighs 1, or what
// weight says.
type freeList[T any] struct {
	mu     sync.Mutex
	items  []T
	held   int
	max    int
	weight func(T) int
}

func (f *freeList[T]) weigh(v T) int {
	if f.weight == nil {
		return 1
	}
	return f.weight(v)
}

func (f *freeList[T]) pop() (v T, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.items)
	if n == 0 {
		return v, false
	}
	v = f.items[n-1]
	f.held -= f.weigh(v)
	var zero T
	f.items[n-1] = zero // no stale reference in the backing array
	f.items = f.items[:n-1]
	return v, true
}

// push keeps v unless the list is full.
func (f *freeList[T]) push(v T) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if w := f.weigh(v); f.held+w <= f.max {
		f.items = append(f.items, v)
		f.held += w
	}
}

// The pipeline's bounds: a job's queue holds at most maxQueuedBytes of
// blocks, or maxQueuedRawBytes for raw blocks appended to local disk (and
// at least two per worker), and a job is handed to the committer once
// handAfter of its blocks are queued. Compressed blocks queue deeper so
// that the workers go on compressing while the committer syncs or uploads,
// and so do blocks for an object store, whose committer waits for an
// upload slot and then takes a whole object's worth at once (measured:
// Azure's 16 MiB objects at 0.7-0.9× raw PUT with 4 MiB queued, 0.9-1.0×
// with 16). A raw block on local disk takes a checksum only, which keeps
// up with the committer's appends, and each queued block is a buffer that
// a big flush touches fresh the first time (measured: a 64 MiB flush with
// lz4 off costs about a tenth less CPU with 4 MiB queued than with 16).
const (
	maxQueuedBytes    = 16 << 20
	maxQueuedRawBytes = 4 << 20
	handAfter         = 8
)

// queueDepth is how many blocks a job's queue holds.
func queueDepth(o *Options, comp segment.Compression, appendable bool) int {
	limit := maxQueuedBytes
	if comp == segment.CompressionNone && appendable {
		limit = maxQueuedRawBytes
	}
	return max(2*o.Workers, min(int(o.FlushBytes/int64(o.BlockSize)), limit/o.BlockSize))
}

// loop is the flush loop: it decides when to flush, cuts jobs and builds
// their blocks. Building a job overlaps with the committer storing the one
// before it.
func (w *Writer) loop() {
	defer close(w.loopDone)
	defer close(w.tasks)
	defer close(w.jobs)
	t := time.NewTicker(w.o.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-w.ctx.Done():
			w.answerPending()
			return
		case <-t.C:
			w.flushOnce(cutTick, nil, false)
		case <-w.kick:
			w.flushOnce(cutKick, nil, false)
		case req := <-w.reqs:
			// Serve every request that is waiting with one job.
			reqs := []*flushReq{req}
		more:
			for {
				select {
				case r := <-w.reqs:
					reqs = append(reqs, r)
				default:
					break more
				}
			}
			final := false
			waiters := make([]chan flushResult, len(reqs))
			for i, r := range reqs {
				waiters[i] = r.done
				final = final || r.final
			}
			w.flushOnce(cutForce, waiters, final)
			if final {
				return
			}
		}
	}
}

// answerPending fails the requests that arrive while the loop shuts down.
func (w *Writer) answerPending() {
	for {
		select {
		case r := <-w.reqs:
			r.done <- flushResult{err: w.stoppedErr()}
		default:
			return
		}
	}
}

// flushOnce cuts a job (when force is set, or when the resolved ts moved
// since the last cut), hands it to the committer and builds its blocks.
func (w *Writer) flushOnce(why cutReason, waiters []chan flushResult, final bool) {
	j := w.cut(why)
	if j == nil {
		w.mu.Lock()
		w.endCutTurn()
		w.mu.Unlock()
		return
	}
	j.waiters, j.final = waiters, final
	w.build(j)
}

// cutReason is why the loop cuts a job.
type cutReason int

const (
	cutTick  cutReason = iota // FlushInterval: when the resolved ts moved
	cutKick                   // FlushBytes written, or a Write blocked on the quota
	cutForce                  // Flush, Publish or Close: always
)

// cut takes every buffered event at or below the writer's resolved ts. A
// stage cut (asked for by a Write blocked on a full quota: wantStage) also
// takes every buffered event above the epoch's committed ts — of each span
// whose events above the resolved ts are all above it — so that they leave
// memory once durable: staged, they are part of the log only once a later
// progress frame's committed ts covers them (see Memory in the package doc).
func (w *Writer) cut(why cutReason) *job {
	w.mu.Lock()
	defer w.mu.Unlock()
	resolved := w.resolvedLocked()
	// FlushBytes written while the resolved ts stood still are staged
	// too, rather than cut for nothing: the stream goes on while one
	// span holds the resolved ts back, and compression and storage
	// overlap production in a transaction larger than FlushBytes.
	// (Or while it moved, when nothing buffered is at or below it: a cut
	// of resolved events would take nothing, as at the start, when the
	// spans' resolved ts is new to the loop.)
	pressed := w.wantStage
	stage := pressed || w.smallStageDue() ||
		w.stageable && w.sinceCut >= w.o.FlushBytes && (resolved == w.cutResolved || !w.bufferedAtOrBelow(resolved))
	w.wantStage = false
	switch {
	case why == cutForce || stage:
	case w.changes == w.cutChanges:
		return nil
	case why == cutKick && resolved == w.cutResolved:
		// Asked for by FlushBytes, but the resolved ts stood still and
		// nothing is left to stage (a stage cut came first): only span
		// progress could be recorded, which the next tick does.
		return nil
	}
	changed := w.changes != w.cutChanges
	w.cutResolved = resolved
	j := &job{resolved: resolved, start: time.Now()}
	// A stage cut that no Write waits for needs no sync of its own on
	// local disk: its blocks are made durable by the next job's, and its
	// memory leaves the quota then (a Write that finds the quota full asks
	// for a cut that syncs). Production, compression and appends overlap
	// with one sync per flush the caller asked for, as without staging.
	// A lazy job records no progress, so it must not take a change as cut
	// (a span's resolved ts, so the writer's too; a span added or removed):
	// with nothing changing after it, no later cut would make the change
	// durable (the flushed ts would stand still on an idle writer, whose
	// ticks cut only for a change). So a stage cut with a change pending
	// syncs and records it, except one a Write kicked while the only
	// changes are spans added (a writer's first events, which would
	// otherwise sync at their first cut, unasked): it leaves them pending
	// for the next tick, which then records them, or flush.
	j.lazy = stage && !pressed && why != cutForce && w.append &&
		(!changed || why == cutKick && w.onlyAddsPending())
	if !j.lazy {
		w.cutChanges, w.cutAdds = w.changes, w.adds
	}
	before := w.committed
	j.committed = max(before, j.resolved)
	w.committed = j.committed
	// Events at or below this were either committed before (a span added
	// behind the writer writes them again) or may be staged copies of a
	// span removed and added again: their segments say so (FlagCatchUp), so
	// that readers drop copies within the epoch there and only there.
	dupBelow := max(before, w.dupBelow)
	if stage {
		w.stageable = false
		w.stats.stageCuts.Add(1)
	}
	limit := func(s *spanBuf) uint64 {
		if !stage {
			return j.resolved
		}
		i := sort.Search(len(s.recs), func(i int) bool { return s.recs[i].ts > j.resolved })
		if i < len(s.recs) && s.recs[i].ts <= before {
			// A catch-up span's events at or below the committed ts
			// cannot be staged: a frame's committed ts would take a
			// part of them for committed (the known limit).
			return j.resolved
		}
		return ^uint64(0)
	}
	take := func(s *spanBuf) {
		r, bytes, retired := s.take(w.chunks, limit(s))
		j.retired = append(j.retired, retired...)
		if len(r.recs) == 0 {
			return
		}
		if r.recs[0].ts <= dupBelow {
			j.flags |= segment.FlagCatchUp
		}
		if hi := r.recs[len(r.recs)-1].ts; hi > j.resolved {
			lo := r.recs[sort.Search(len(r.recs), func(i int) bool { return r.recs[i].ts > j.resolved })].ts
			s.noteStaged(lo, hi)
			j.flags |= segment.FlagStaged
			for i := range r.recs {
				if r.recs[i].ts > j.resolved {
					j.staged++
				}
			}
		}
		sortRun(r.recs)
		j.runs = append(j.runs, r)
		j.quota += bytes
		j.records += int64(len(r.recs))
		j.payload += bytes - int64(len(r.recs))*recOverhead
		for i := range r.recs {
			if r.recs[i].kind == segment.KindDDL {
				j.ddls++
			}
		}
	}
	for _, s := range w.spans {
		take(s)
	}
	// Each span's flushed ts after this job: every event of it at or below
	// its resolved ts and below its first event left buffered.
	j.spans = make([]segment.SpanTs, 0, len(w.spans))
	for id, s := range w.spans {
		s.commitStaged(j.committed)
		j.spans = append(j.spans, segment.SpanTs{Span: uint64(id), Ts: s.flushedTs()})
	}
	kept := w.retired[:0]
	for _, s := range w.retired {
		take(s)
		if len(s.recs) > 0 {
			kept = append(kept, s)
		}
	}
	clear(w.retired[len(kept):])
	w.retired = kept
	j.rows = j.records - j.ddls
	w.notePassed(j, stage)
	w.pending -= j.quota
	if j.lazy {
		w.lazyBytes.Add(j.quota)
	}
	w.sinceCut = 0
	w.endCutTurn()
	// Writes waiting on the quota look again: if this cut took nothing,
	// nothing will free memory until the resolved ts moves (see stuck).
	defer w.quota.wake()
	j.tasks = make(chan *blockTask, w.depth)
	return j
}

// notePassed records the commit ts a job's cut reaches, and, for a stage
// cut, whether it went below the cuts before it (smallStageDue). The caller
// holds w.mu.
func (w *Writer) notePassed(j *job, stage bool) {
	if len(j.runs) == 0 {
		return
	}
	lo, hi := ^uint64(0), uint64(0)
	for i := range j.runs {
		recs := j.runs[i].recs
		lo, hi = min(lo, recs[0].ts), max(hi, recs[len(recs)-1].ts)
	}
	if stage {
		w.stageOverlap = lo < w.cutMaxTs
	}
	w.cutMaxTs = max(w.cutMaxTs, hi)
}

// build merges the job's runs in flush order into blocks, hands each to the
// workers and, in order, to the committer, and hands the job to the
// committer: once its blocks are all queued, or as soon as handAfter are.
// A committer handed a job of a few blocks before they are built parks and
// is woken for each; one handed the job after finds them queued, which on a
// busy writer saves context switches worth more than the overlap of its
// first write with the build. A big job is handed early, so that its
// blocks are written (and their buffers reused, warm) while the rest are
// built, instead of all held at once.
func (w *Writer) build(j *job) {
	defer close(j.tasks)
	handed := false
	hand := func() bool {
		if handed {
			return true
		}
		handed = true
		select {
		case w.jobs <- j:
			return true
		case <-w.ctx.Done():
			for _, c := range j.waiters {
				c <- flushResult{err: w.stoppedErr()}
			}
			return false
		}
	}
	defer hand()
	emit := func(bb *segment.BlockBuilder) bool {
		t := &blockTask{bb: bb, done: make(chan struct{}), pools: w.pools, job: j}
		raw := w.comp == segment.CompressionNone
		if raw {
			// A block stored raw needs only its header and CRC, done here
			// while the block is in this goroutine's cache: handed to a
			// worker, it would be read once more from another core's
			// (measured on W1-long at GOMAXPROCS 2: the build and the
			// writes were a third of the CPU more than at 1).
			w.encodeTask(&w.loopEnc, t)
		}
		if len(j.tasks) >= min(cap(j.tasks), handAfter) && !hand() {
			return false
		}
		select {
		case j.tasks <- t:
		case <-w.ctx.Done():
			return false
		}
		if raw {
			return true
		}
		select {
		case w.tasks <- t:
		case <-w.ctx.Done():
			return false
		}
		return true
	}
	w.pools.putBuilder(cutBlocks(j.runs, w.o.BlockSize, w.pools.getBuilder, emit))
	// Every record is in a block (or the pipeline is ending): the job's
	// arena memory can hold the next events at once. Nothing builds its
	// blocks again; the quota keeps counting its bytes until it is durable.
	w.recycle(j)
}

// cutBlocks puts the records of runs, in flush order, into block builders
// (from get) of about blockSize bytes each, and hands each full one to emit,
// which owns it, until emit returns false. It returns the builder it was
// filling, which the caller owns.
func cutBlocks(runs []run, blockSize int, get func() *segment.BlockBuilder, emit func(*segment.BlockBuilder) bool) *segment.BlockBuilder {
	bb := get()
	next := func() bool {
		full := bb
		bb = get()
		return emit(full)
	}
	ok := true
	merge(runs, func(r *run, i int) bool {
		x, data := &r.recs[i], r.data(i)
		if bb.Records() > 0 && bb.Len()+bb.RecordSize(x.ts, len(data)) > blockSize {
			if ok = next(); !ok {
				return false
			}
		}
		if err := bb.Append(x.ts, x.kind, data); err != nil {
			// The merge yields commit-ts order and Write bounds sizes.
			panic(fmt.Sprintf("writer: building a block: %v", err))
		}
		if bb.Len() >= blockSize {
			ok = next()
		}
		return ok
	})
	if ok && bb.Records() > 0 {
		next()
	}
	return bb
}

// recycle takes back the memory of a job whose blocks are built: its record
// slices and the chunks its cut retired, which hold only records of this
// job and of earlier ones (built before it, on the same goroutine).
func (w *Writer) recycle(j *job) {
	w.chunks.recycleRecs(j.runs)
	j.runs = nil
	w.chunks.recycle(j.retired)
	j.retired = nil
}

// sortRun puts a span's run in flush order. It is in commit-ts order
// already; only a DDL followed by rows of its own ts needs moving.
func sortRun(run []rec) {
	for i := 1; i < len(run); i++ {
		if run[i].ts == run[i-1].ts && run[i].kind < run[i-1].kind {
			slices.SortStableFunc(run, func(a, b rec) int {
				switch {
				case recLess(&a, &b):
					return -1
				case recLess(&b, &a):
					return 1
				}
				return 0
			})
			return
		}
	}
}

// merge yields the records of the sorted runs in flush order (recLess) until
// yield returns false.
func merge(runs []run, yield func(*run, int) bool) {
	switch len(runs) {
	case 0:
		return
	case 1:
		for i := range runs[0].recs {
			if !yield(&runs[0], i) {
				return
			}
		}
		return
	}
	// A binary min-heap of run cursors.
	type cursor struct {
		run *run
		i   int
	}
	h := make([]cursor, 0, len(runs))
	for k := range runs {
		if len(runs[k].recs) > 0 {
			h = append(h, cursor{run: &runs[k]})
		}
	}
	less := func(a, b int) bool { return recLess(&h[a].run.recs[h[a].i], &h[b].run.recs[h[b].i]) }
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(h) {
				return
			}
			m := l
			if r := l + 1; r < len(h) && less(r, l) {
				m = r
			}
			if !less(m, i) {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		down(i)
	}
	for len(h) > 0 {
		c := &h[0]
		if !yield(c.run, c.i) {
			return
		}
		c.i++
		if c.i == len(c.run.recs) {
			h[0] = h[len(h)-1]
			h = h[:len(h)-1]
		}
		down(0)
	}
}

// worker compresses and checksums blocks.
func (w *Writer) worker() {
	defer w.workers.Done()
	var enc segment.FrameEncoder
	for t := range w.tasks {
		w.encodeTask(&enc, t)
	}
}

// encodeTask makes a task's frame, compressed as the writer is configured,
// and marks the task done.
func (w *Writer) encodeTask(enc *segment.FrameEncoder, t *blockTask) {
	t.frame, t.err = enc.Encode(w.pools.getFrame(), t.bb, w.comp)
	w.pools.putBuilder(t.bb)
	t.bb = nil
	close(t.done)
}
