package writer

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
)

// committer stores jobs in order, makes them durable, publishes progress and
// reports flushes. It runs on one goroutine and owns the active segment.
type committer struct {
	w       *Writer
	ctx     context.Context
	nextSeq uint64

	// What is published, and what the next publication will say.
	pubTs, pubSeq uint64
	pubHasSeq     bool
	pubSpans      []meta.SpanTs
	lastSeq       uint64 // highest seq holding durable data of this epoch
	hasData       bool

	// The completeness chain (segment.Link). chain is the link the epoch's
	// next new segment carries: it names the last segment whose blocks are
	// final (PrevSeq 0 before the first), so seqs never skip within the
	// epoch. lastChainMax and lastDigest are the chain max ts through
	// lastSeq and its header CRC; pubChainMax and pubDigest what the
	// published progress says.
	chain        segment.Link
	firstSeq     uint64 // the epoch's first seq: what a segment with PrevSeq 0 must have
	lastChainMax uint64
	lastDigest   uint32
	pubChainMax  uint64
	pubDigest    uint32

	// The local (append) path.
	act           *activeSeg
	full          []*activeSeg // rotated out, synced, to be sealed after the next publication
	unsynced      []*blockTask // frames not durable yet, in order: in act after its last sync unless broken
	unsyncedBytes int64
	broken        bool // an append, sync or seal failed: act must be rewound and unsynced written again
	ageTimer      *time.Timer

	// The object-store path.
	obj         *objectSeg
	uploads     []*upload       // segment objects launched and not known durable yet, in seq order
	finished    chan *upload    // upload attempts that returned; capacity MaxUploads
	segBufs     []*bytes.Buffer // free segment buffers
	unpublished []string        // objects put since the last publication

	attempts int // failures in the current job
}

// activeSeg is the active segment of the local path.
type activeSeg struct {
	name         segment.Name
	key          string
	af           blob.AppendFile // nil once sealed or abandoned
	sw           *segment.Writer
	hdr          segment.Header
	syncedSize   int64 // bytes known durable
	syncedBlocks int   // blocks known durable
	pubSize      int64 // bytes durable when the progress was last published
	pubBlocks    int
	// linked is set once the chain has moved past the segment (its blocks
	// are final): its successor links footerCRC, and the footer written
	// when it is sealed must have that CRC.
	linked    bool
	footerCRC uint32
}

// objectSeg is the segment object being assembled on the object-store path.
type objectSeg struct {
	hdr      segment.Header // as written: its CRC is the segment's digest
	sw       *segment.Writer
	buf      *bytes.Buffer
	sealed   bool
	chainMax uint64 // chain max ts through this segment, once sealed
}

func newCommitter(w *Writer, nextSeq uint64, st meta.WriterState) *committer {
	return &committer{
		w: w, ctx: w.ctx, nextSeq: nextSeq, firstSeq: nextSeq,
		pubTs: st.FlushedTs, pubSeq: st.Seq, pubHasSeq: st.HasSeq, pubSpans: st.Spans,
		pubChainMax: st.ChainMaxTs, pubDigest: st.Digest,
	}
}

// countingFile counts what reaches an append file.
type countingFile struct {
	blob.AppendFile
	n *Writer
}

func (c countingFile) Write(p []byte) (int, error) {
	n, err := c.AppendFile.Write(p)
	c.n.stats.stored.Add(int64(n))
	c.n.m.stored.Add(float64(n))
	return n, err
}

func (c *committer) run() {
	w := c.w
	defer close(w.commitDone)
	defer c.abandon()
	for {
		var age <-chan time.Time
		if c.ageTimer != nil {
			age = c.ageTimer.C
		}
		select {
		case j, ok := <-w.jobs:
			if !ok {
				return
			}
			if w.Err() != nil {
				c.drop(j, w.Err())
				continue
			}
			if err := c.commit(j); err != nil {
				if c.ctx.Err() == nil || w.Err() != nil {
					w.fail(err)
				}
				// else: Close gave up; the writer is not broken.
				c.drop(j, err)
			}
		case <-age:
			// Idle between flushes: every block is published.
			c.ageTimer = nil
			if w.Err() != nil {
				continue
			}
			c.attempts = 0
			if err := c.retry(c.sealActive); err != nil {
				w.fail(err)
			}
		}
	}
}

// drop fails a job that will never be stored.
func (c *committer) drop(j *job, err error) {
	for t := range j.tasks {
		select {
		case <-t.done:
			t.release()
		default:
			// Its worker may still hold it; leave it to the GC.
		}
	}
	for _, ch := range j.waiters {
		ch <- flushResult{err: err}
	}
	c.release(j)
}

// release gives a job's memory back to the quota, once.
func (c *committer) release(j *job) {
	if j.released {
		return
	}
	j.released = true
	c.w.quota.release(j.quota)
	c.w.m.buffered.Sub(float64(j.quota))
}

// commit stores one job, makes it durable, publishes the progress and
// reports it.
func (c *committer) commit(j *job) error {
	w := c.w
	c.attempts = 0
	var blocks int64
	for {
		var t *blockTask
		var ok bool
		select {
		case t, ok = <-j.tasks:
		case <-c.ctx.Done():
			return c.aborted()
		}
		if !ok {
			break
		}
		select {
		case <-t.done:
		case <-c.ctx.Done():
			return c.aborted()
		}
		if t.err != nil {
			return fmt.Errorf("writer: encode block: %w", t.err)
		}
		blocks++
		var err error
		if w.append {
			err = c.retry(func() error { return c.appendFrame(t) })
		} else {
			err = c.retry(func() error { return c.addToObject(t) })
		}
		if err != nil {
			return err
		}
	}
	// The flushed ts is the job's resolved ts: the minimum over the spans.
	// It falls when a span is added behind the writer, until the span
	// catches up (meta.Lease.PublishProgress; the coordinator keeps the
	// global watermark from falling).
	ts := j.resolved
	var err error
	if w.append {
		err = c.syncAndPublish(ts, j.spans)
	} else {
		err = c.retry(c.putObject)
		if err == nil {
			err = c.retry(func() error { return c.publish(ts, j.spans, nil) })
		}
	}
	if err != nil {
		return err
	}
	// Durable and published. The memory can go.
	c.release(j)
	if w.append {
		err = c.retry(c.sealFull)
		if err == nil && j.final {
			err = c.retry(c.sealActive)
		}
		if err != nil {
			return err
		}
	}
	w.flushed.Store(ts)
	w.stats.events.Add(j.records)
	w.stats.rows.Add(j.rows)
	w.stats.ddls.Add(j.ddls)
	w.stats.payload.Add(j.payload)
	w.stats.blocks.Add(blocks)
	w.stats.flushes.Add(1)
	w.m.rows.Add(float64(j.rows))
	w.m.ddls.Add(float64(j.ddls))
	w.m.payload.Add(float64(j.payload))
	w.m.flushedTs.Set(float64(ts))
	w.m.flushDuration.Observe(time.Since(j.start).Seconds())
	for _, ch := range j.waiters {
		ch <- flushResult{ts: ts}
	}
	return nil
}

// aborted is the error of a job cut short by the pipeline's end.
func (c *committer) aborted() error {
	if err := c.w.Err(); err != nil {
		return err
	}
	return fmt.Errorf("writer: flush aborted: %w", ErrClosed)
}

// retry runs op until it succeeds, backing off between failures, as long as
// the job's retry budget lasts. A fence or the pipeline's end stops it at
// once.
func (c *committer) retry(op func() error) error {
	w := c.w
	for {
		err := op()
		if err == nil {
			return nil
		}
		var p permanent
		if errors.Is(err, blob.ErrFenced) || errors.As(err, &p) {
			return err
		}
		if c.ctx.Err() != nil {
			return c.aborted()
		}
		if c.attempts >= w.o.RetryAttempts {
			return fmt.Errorf("writer: flush failed after %d retries: %w", c.attempts, err)
		}
		wait := w.o.RetryBackoff << min(c.attempts, 30)
		if wait <= 0 || wait > w.o.RetryMaxBackoff {
			wait = w.o.RetryMaxBackoff
		}
		c.attempts++
		w.stats.retries.Add(1)
		w.m.retries.Inc()
		w.log.Warn("flush failed; retrying", "err", err, "attempt", c.attempts, "backoff", wait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
			return c.aborted()
		}
	}
}

// withRemoved adds to a flush's span progress the spans published before
// that are gone since (removed from this writer) while their published ts is
// above every current span's: their progress stays on record, so that the
// highest ts the writer ever published for any span — the ts above which a
// restart may cut unreported blocks — never falls. The result is sorted by
// span and never nil (nil would keep the published list).
func (c *committer) withRemoved(spans []meta.SpanTs) []meta.SpanTs {
	out := make([]meta.SpanTs, 0, len(spans))
	out = append(out, spans...)
	var top uint64
	have := make(map[SpanID]bool, len(spans))
	for _, s := range spans {
		top = max(top, s.Ts)
		have[s.Span] = true
	}
	for _, s := range c.pubSpans {
		if !have[s.Span] && s.Ts > top {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b meta.SpanTs) int { return cmp.Compare(a.Span, b.Span) })
	return out
}

// permanent marks an error that retrying cannot fix.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// The completeness chain. Every segment of an epoch links its predecessor
// (segment.Link): seqs are consecutive within the epoch, the first carries
// PrevSeq 0. A seq is taken only by a segment that was created, and one
// dropped before any of its blocks was durable gives its seq back (unuse),
// so no seq is ever skipped. The chain moves past a segment (extend) when
// its blocks are final: at rotation on the local path, whether it is sealed
// then or later (by this writer, or by the next Open's recovery: the footer
// depends only on the blocks), and at sealing on the object-store path.

// nextHeader returns the header of the epoch's next segment, linked to the
// end of the chain. A seq that would leave a gap is an error, never a link.
func (c *committer) nextHeader() (segment.Header, error) {
	w := c.w
	seq := c.nextSeq
	if want := c.chain.PrevSeq + 1; c.chain.PrevSeq == 0 && seq != c.firstSeq || c.chain.PrevSeq != 0 && seq != want {
		return segment.Header{}, permanent{fmt.Errorf("writer %s/%s epoch %d: the next segment would be seq %d, but the chain ends at seq %d (first seq %d): a seq would be skipped",
			w.o.LogID, w.o.WriterID, w.epoch, seq, c.chain.PrevSeq, c.firstSeq)}
	}
	return segment.Header{LogID: w.o.LogID, WriterID: w.o.WriterID, Epoch: w.epoch, Seq: seq, Compression: w.comp,
		Created: time.Now(), Link: c.chain}, nil
}

// extend moves the end of the chain to the segment with header hdr (as
// written, CRC included) whose final blocks are blocks, and returns its
// footer's CRC.
func (c *committer) extend(hdr segment.Header, blocks []segment.BlockInfo) uint32 {
	f := segment.FooterCRC(blocks)
	c.chain = segment.Link{PrevSeq: hdr.Seq, PrevMaxTs: chainMaxOf(hdr.Link, blocks), PrevHeaderCRC: hdr.CRC, PrevFooterCRC: f}
	return f
}

// unuse gives back the seq of a segment dropped with no durable block, when
// no later seq was taken: the next segment takes it, and the chain stays
// gapless. (Only this epoch writes its names, and nothing published covers
// the dropped one.)
func (c *committer) unuse(seq uint64) {
	if seq+1 == c.nextSeq {
		c.nextSeq = seq
	}
}

// chainMaxOf is the chain max ts through a segment with link l holding blocks.
func chainMaxOf(l segment.Link, blocks []segment.BlockInfo) uint64 {
	m := l.PrevMaxTs
	for _, b := range blocks {
		m = max(m, b.MaxTs)
	}
	return m
}

// chainThrough returns the chain max ts through segment seq and its header
// CRC, for a progress that publishes seq: of the active segment (with the
// blocks the pending sync makes durable when onceSynced), of the last
// segment holding durable data, or of what is published already. Any other
// seq is a bug that the progress must not cover with a guess.
func (c *committer) chainThrough(seq uint64, hasData, onceSynced bool) (uint64, uint32, error) {
	if !hasData && seq == c.pubSeq {
		return c.pubChainMax, c.pubDigest, nil
	}
	if a := c.act; hasData && a != nil && a.hdr.Seq == seq {
		n := a.syncedBlocks
		if onceSynced {
			n = len(a.sw.Blocks())
		}
		if n > 0 {
			return chainMaxOf(a.hdr.Link, a.sw.Blocks()[:n]), a.hdr.CRC, nil
		}
	}
	if hasData && seq == c.lastSeq {
		return c.lastChainMax, c.lastDigest, nil
	}
	return 0, 0, permanent{fmt.Errorf("writer %s/%s epoch %d: progress for seq %d, whose chain end is unknown (last durable seq %d, published %d)",
		c.w.o.LogID, c.w.o.WriterID, c.w.epoch, seq, c.lastSeq, c.pubSeq)}
}

// publish records the progress in the lease when it changed. ready, when
// not nil, is the sync of the active segment: it runs before the progress
// can become visible (meta.Lease.PublishProgressAfter), and the progress is
// what the segment holds once it succeeds.
func (c *committer) publish(ts uint64, spans []meta.SpanTs, ready func(context.Context) error) error {
	seq, hasData := c.lastSeq, c.hasData
	if ready != nil {
		seq, hasData = c.seqOnceSynced()
	}
	if !hasData {
		seq = c.pubSeq
	}
	spans = c.withRemoved(spans)
	chainMax, digest, err := c.chainThrough(seq, hasData, ready != nil)
	if err != nil {
		return err
	}
	if ts != c.pubTs || seq != c.pubSeq || chainMax != c.pubChainMax || digest != c.pubDigest || !c.pubHasSeq && hasData || !slices.Equal(spans, c.pubSpans) {
		err := c.w.lease.PublishProgressAfter(c.ctx, meta.Progress{FlushedTs: ts, Seq: seq, ChainMaxTs: chainMax, Digest: digest, Spans: spans}, ready)
		if err != nil {
			if errors.Is(err, blob.ErrFenced) {
				c.retract(err)
			}
			return err
		}
		c.pubTs, c.pubSeq, c.pubHasSeq, c.pubSpans = ts, seq, true, spans
		c.pubChainMax, c.pubDigest = chainMax, digest
	} else if ready != nil {
		if err := ready(c.ctx); err != nil {
			return err
		}
	}
	for _, a := range append(c.full, c.act) {
		if a != nil {
			a.pubSize, a.pubBlocks = a.syncedSize, a.syncedBlocks
		}
	}
	c.unpublished = c.unpublished[:0]
	return nil
}

// retract removes, best effort, the segments this writer stored that the
// log can never use, once it learns it was fenced. The lease says fenced
// only when a newer epoch is proven (meta.FencedError), and that epoch's
// fence for ours is the last seq of ours the log keeps: readers ignore any
// segment of ours above it, so deleting those is safe, and anything at or
// below it may hold data the log relies on. Nothing is ever truncated: a
// publication whose answer was lost may have landed before the takeover,
// and then the fence covers blocks past what this writer last saw
// published. Without a fence for our epoch, or without the proof, nothing
// is deleted: a zombie's leftover is harmless (readers skip it, or drop
// its blocks as exact duplicates of what the new epoch writes again),
// deleting covered data is not. The deletes get a bounded context derived
// from the writer's, so a hung store cannot hold a fenced committer.
func (c *committer) retract(err error) {
	w := c.w
	var fe *meta.FencedError
	if !errors.As(err, &fe) {
		w.log.Warn("fenced without the state that proves it; deleting nothing", "err", err)
		return
	}
	fence, ok := fe.Fence()
	if !ok {
		w.log.Warn("fenced, and the new epoch recorded no fence for ours; deleting nothing", "epoch", w.epoch, "key", fe.Key)
		return
	}
	var doomed []string
	for _, a := range append(c.full, c.act) {
		if a == nil || a.af == nil || a.hdr.Epoch != fence.Epoch || a.hdr.Seq <= fence.LastSeq {
			continue
		}
		a.af.Close()
		a.af = nil
		doomed = append(doomed, a.key)
	}
	for _, key := range c.unpublished {
		if n, err := segment.ParseName(key); err == nil && n.Epoch == fence.Epoch && n.Seq > fence.LastSeq {
			doomed = append(doomed, key)
		}
	}
	c.unpublished = nil
	if len(doomed) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, retractTimeout)
	defer cancel()
	if err := w.b.Delete(ctx, doomed...); err != nil {
		w.log.Warn("fenced: cannot delete segments above the fence; readers ignore them", "keys", doomed, "err", err)
	}
}

// retractTimeout bounds the deletes of a fenced writer.
const retractTimeout = 30 * time.Second

// The local path.
//
// Frames are appended to the active segment (act). A segment is synced when
// it is rotated out, but sealed only after the progress that covers all of
// its blocks is published: a sealed segment never holds an unreported block,
// so the blocks a crash leaves above the published flushed ts are all in
// active segments, where the next Open's recovery cuts them.

// appendFrame appends a frame to the active segment. It is retried until it
// succeeds: a call after a failure first repairs the segment, which writes
// the frame again if it was already queued.
func (c *committer) appendFrame(t *blockTask) error {
	if err := c.repair(); err != nil {
		return err
	}
	if t.queued {
		return nil // the repair wrote it
	}
	if err := c.prepareFor(t); err != nil {
		return err
	}
	if err := c.write(t); err != nil {
		return err
	}
	// Bound the frames kept for a redo: a huge flush is made durable piece
	// by piece.
	if c.unsyncedBytes >= c.w.o.FlushBytes {
		return c.syncActive()
	}
	return nil
}

// prepareFor makes the active segment ready to take t. It rotates when t
// would take the segment past the size limit, or when t starts below its last
// record (the catch-up of a span added behind the writer): the full segment
// is synced and set aside to be sealed after the next publication. It opens
// a new segment when there is none.
func (c *committer) prepareFor(t *blockTask) error {
	if a := c.act; a != nil && len(a.sw.Blocks()) > 0 {
		last, _ := a.sw.LastTs()
		if t.frame.Info().MinTs < last || a.sw.Offset()+int64(t.frame.Len()) > c.w.o.MaxSegmentBytes {
			if err := c.syncActive(); err != nil {
				return err
			}
			// Synced: its blocks are final, and the next segment links
			// them.
			a.footerCRC, a.linked = c.extend(a.hdr, a.sw.Blocks()[:a.syncedBlocks]), true
			c.full = append(c.full, a)
			c.act = nil
			c.stopAge()
		}
	}
	if c.act == nil {
		return c.openActive()
	}
	return nil
}

// write queues t for a redo and appends it to the active segment.
func (c *committer) write(t *blockTask) error {
	t.queued = true
	c.unsynced = append(c.unsynced, t)
	c.unsyncedBytes += int64(t.frame.Len())
	if err := c.act.sw.AppendFrame(&t.frame); err != nil {
		c.broken = true
		return err
	}
	return nil
}

// openActive starts a new active segment.
func (c *committer) openActive() error {
	w := c.w
	hdr, err := c.nextHeader()
	if err != nil {
		return err
	}
	name := hdr.ActiveName()
	key := name.Format()
	af, err := w.b.OpenAppend(c.ctx, key)
	if err != nil {
		return err
	}
	if size := af.Size(); size != 0 {
		// Only this process writes names of this epoch, and no progress
		// covers this seq: the file is a leftover of a failed attempt (a
		// header write, or a dropped segment whose delete failed). Skipping
		// the seq would break the chain; start it over.
		w.log.Warn("new active segment is not empty; cutting it", "key", key, "size", size)
		if err := af.Truncate(0); err != nil {
			af.Close()
			return fmt.Errorf("writer: new active segment %s is not empty (%d bytes) and cannot be cut: %w", key, size, err)
		}
	}
	sw, err := segment.NewWriter(countingFile{af, w}, hdr, nil)
	if err != nil {
		af.Close()
		w.b.Delete(c.ctx, key)
		return err
	}
	c.nextSeq++
	c.act = &activeSeg{name: name, key: key, af: af, sw: sw, hdr: sw.Header()}
	if w.o.MaxSegmentAge > 0 {
		c.ageTimer = time.NewTimer(w.o.MaxSegmentAge)
	}
	w.log.Debug("segment opened", "key", key)
	return nil
}

// syncAndPublish makes the active segment durable and publishes the
// flush's progress. The fdatasync of the segment and the staging of the
// progress object (on local disk: a temporary file and its fsync) run at
// once, and the progress becomes visible only once the sync succeeded
// (blob.PutOptions.BeforeCommit), so it never covers data that is not
// durable: a flush costs about two sync latencies instead of three. When
// the sync fails, the publication is abandoned and the two steps run one
// after the other with retries, as they would on their own.
func (c *committer) syncAndPublish(ts uint64, spans []meta.SpanTs) error {
	a := c.act
	if c.broken || a == nil || a.syncedSize == a.sw.Offset() || c.w.o.Sync != SyncEveryFlush {
		if err := c.retry(c.syncActive); err != nil {
			return err
		}
		return c.retry(func() error { return c.publish(ts, spans, nil) })
	}
	done := make(chan error, 1)
	go func() {
		start := time.Now()
		err := a.af.Sync()
		c.w.m.fsyncDuration.Observe(time.Since(start).Seconds())
		done <- err
	}()
	var syncErr error
	synced := false
	collect := func() {
		if !synced {
			syncErr, synced = <-done, true
			if syncErr != nil {
				c.broken = true
			} else {
				c.markSynced(a)
			}
		}
	}
	pubErr := c.publish(ts, spans, func(ctx context.Context) error {
		if !synced {
			select {
			case err := <-done:
				done <- err // collect takes it below
			case <-ctx.Done():
				return ctx.Err()
			}
			collect()
		}
		return syncErr
	})
	// The sync owns the active segment until it returns.
	collect()
	if syncErr != nil {
		first := true
		err := c.retry(func() error {
			if first {
				first = false
				return syncErr
			}
			return c.syncActive()
		})
		if err != nil {
			return err
		}
		return c.retry(func() error { return c.publish(ts, spans, nil) })
	}
	if pubErr == nil {
		return nil
	}
	first := true
	return c.retry(func() error {
		if first {
			first = false
			return pubErr
		}
		return c.publish(ts, spans, nil)
	})
}

// seqOnceSynced is the highest seq holding flushed data once everything
// appended so far is synced (what syncActive will record).
func (c *committer) seqOnceSynced() (uint64, bool) {
	if a := c.act; a != nil && len(a.sw.Blocks()) > 0 {
		return a.hdr.Seq, true
	}
	return c.lastSeq, c.hasData
}

// syncActive makes everything appended to the active segment durable.
func (c *committer) syncActive() error {
	if err := c.repair(); err != nil {
		return err
	}
	a := c.act
	if a == nil || a.af == nil || a.syncedSize == a.sw.Offset() {
		return nil
	}
	if c.w.o.Sync == SyncEveryFlush {
		start := time.Now()
		err := a.af.Sync()
		c.w.m.fsyncDuration.Observe(time.Since(start).Seconds())
		if err != nil {
			c.broken = true
			return err
		}
	}
	c.markSynced(a)
	return nil
}

// markSynced records that everything appended to a is durable.
func (c *committer) markSynced(a *activeSeg) {
	a.syncedSize = a.sw.Offset()
	a.syncedBlocks = len(a.sw.Blocks())
	if a.syncedBlocks > 0 {
		c.lastSeq, c.hasData = a.hdr.Seq, true
		c.lastChainMax, c.lastDigest = chainMaxOf(a.hdr.Link, a.sw.Blocks()[:a.syncedBlocks]), a.hdr.CRC
	}
	for _, t := range c.unsynced {
		t.release()
	}
	clear(c.unsynced)
	c.unsynced = c.unsynced[:0]
	c.unsyncedBytes = 0
}

// sealFull seals the segments set aside at rotation. It runs after a
// publication, which covers every block they hold.
func (c *committer) sealFull() error {
	for len(c.full) > 0 {
		if err := c.seal(c.full[0]); err != nil {
			return err
		}
		c.full[0] = nil
		c.full = c.full[1:]
	}
	c.full = nil
	return nil
}

// sealActive seals the active segment (at Close, or when it is old), after
// syncing it. Its blocks must all be published.
func (c *committer) sealActive() error {
	if err := c.syncActive(); err != nil {
		return err
	}
	a := c.act
	if a == nil {
		return nil
	}
	if err := c.seal(a); err != nil {
		return err
	}
	if a.syncedBlocks == 0 {
		c.unuse(a.hdr.Seq) // deleted
	} else if !a.linked {
		a.footerCRC, a.linked = c.extend(a.hdr, a.sw.Blocks()[:a.syncedBlocks]), true
	}
	c.act = nil
	c.stopAge()
	return nil
}

// seal writes a synced segment's footer and renames it to its sealed name
// (AppendFile.Seal syncs the file and the directory). A segment without
// blocks is deleted instead. After a failure the footer is cut off again, so
// that the retry starts over; a segment that cannot even be cut is left
// unsealed with its synced blocks, for the next Open to recover.
func (c *committer) seal(a *activeSeg) error {
	w := c.w
	if a.af == nil {
		return nil // abandoned
	}
	if a.syncedBlocks == 0 {
		a.af.Close()
		a.af = nil
		return w.b.Delete(c.ctx, a.key)
	}
	f, err := a.sw.Seal()
	if err == nil && a.linked && f.CRC != a.footerCRC {
		// The successor links the footer of the blocks this segment had at
		// rotation; sealing another would break the chain for good.
		err = permanent{fmt.Errorf("writer: seal %s: its footer's CRC is %#08x, but its successor links %#08x (%d blocks)", a.key, f.CRC, a.footerCRC, len(f.Blocks))}
	}
	if err == nil {
		start := time.Now()
		final := a.hdr.SealedName(f.MinTs, f.MaxTs).Format()
		if _, err = a.af.Seal(c.ctx, final); err == nil {
			w.m.fsyncDuration.Observe(time.Since(start).Seconds())
			a.af = nil
			w.stats.segments.Add(1)
			w.m.segments.Inc()
			w.log.Debug("segment sealed", "key", final, "blocks", len(f.Blocks), "min_ts", f.MinTs, "max_ts", f.MaxTs)
			return nil
		}
	}
	if rerr := c.rewind(a); rerr != nil {
		w.log.Warn("abandoning a segment that cannot be sealed; the next open recovers it", "key", a.key, "err", rerr)
		a.af.Close()
		a.af = nil
	}
	return err
}

// rewind cuts a segment back to its last sync and resumes its writer there.
func (c *committer) rewind(a *activeSeg) error {
	if err := a.af.Truncate(a.syncedSize); err != nil {
		return err
	}
	sw, err := segment.ResumeWriter(countingFile{a.af, c.w}, a.hdr, a.sw.Blocks()[:a.syncedBlocks], nil)
	if err != nil {
		return err
	}
	a.sw = sw
	return nil
}

func (c *committer) stopAge() {
	if c.ageTimer != nil {
		c.ageTimer.Stop()
		c.ageTimer = nil
	}
}

// repair rewinds the active segment to its last durable point after a
// failure and appends the frames that were not durable again. When the
// segment cannot be rewound it is abandoned, unsealed, with its durable
// prefix (the next Open recovers it), and the frames go to a new segment.
// Redoing the frames, rather than syncing again, matters: after a failed
// fsync the kernel may have dropped the dirty pages, and a second fsync that
// succeeds proves nothing about them.
func (c *committer) repair() error {
	if !c.broken {
		return nil
	}
	w := c.w
	if a := c.act; a != nil {
		if a.syncedBlocks == 0 {
			// Nothing durable: drop the segment; the frames go to a new
			// one under the next seq.
			a.af.Close()
			if err := w.b.Delete(c.ctx, a.key); err != nil {
				w.log.Warn("cannot delete a failed segment", "key", a.key, "err", err)
			}
			c.unuse(a.hdr.Seq)
			c.act = nil
		} else if err := c.rewind(a); err != nil {
			// Its durable blocks are final: the next segment links them,
			// and the next Open's recovery seals exactly those (the link
			// tells it which, whatever else reached the file).
			w.log.Warn("abandoning an active segment that cannot be rewound; the next open recovers it", "key", a.key, "err", err)
			a.af.Close()
			a.af = nil
			a.footerCRC, a.linked = c.extend(a.hdr, a.sw.Blocks()[:a.syncedBlocks]), true
			c.act = nil
		}
		if c.act == nil {
			c.stopAge()
		}
	}
	c.broken = false
	redo := c.unsynced
	c.unsynced = nil
	c.unsyncedBytes = 0
	for i, t := range redo {
		if err := c.prepareFor(t); err != nil {
			c.unsynced = append(c.unsynced, redo[i:]...)
			for _, r := range redo[i:] {
				c.unsyncedBytes += int64(r.frame.Len())
			}
			c.broken = true
			return err
		}
		if err := c.write(t); err != nil {
			c.unsynced = append(c.unsynced, redo[i+1:]...)
			for _, r := range redo[i+1:] {
				c.unsyncedBytes += int64(r.frame.Len())
			}
			return err
		}
	}
	return nil
}

// abandon closes the segments unsealed when the committer stops without
// sealing them (an abort, or a fatal error).
func (c *committer) abandon() {
	c.stopAge()
	for _, a := range append(c.full, c.act) {
		if a != nil && a.af != nil {
			a.af.Close()
			a.af = nil
		}
	}
	c.full, c.act = nil, nil
	for _, t := range c.unsynced {
		t.release()
	}
	c.unsynced = nil
	// Uploads still under way belong to a flush that failed or was given
	// up: end them, and wait, so that no goroutine of the writer outlives
	// Close.
	running := 0
	for _, u := range c.uploads {
		if u.running {
			running++
		}
	}
	if running > 0 {
		c.w.cancel()
		for range running {
			<-c.finished
		}
	}
}

// The object-store path.
//
// A flush's frames are copied into a segment object assembled in memory.
// When the next frame would take it past MaxSegmentBytes (or starts below
// its last record: a catch-up), the object is sealed and its upload starts on
// a goroutine of its own, while the committer assembles the next one; at
// most MaxUploads objects are launched and not yet durable at once, and the
// committer waits for a slot before it launches another. A flush's last
// object is launched at its end, and the flush waits for every upload before
// it publishes (commit: putObject, then publish), so the progress never
// covers an object that is not durable, and no upload outlives a flush that
// succeeds. When a flush fails for good (or Close gives up) the writer
// cancels the uploads still under way and waits for them as it stops; what
// they stored is above the epoch's published seq, which the next epoch's
// fence leaves out.
//
// An upload makes one attempt per launch. A failed attempt's error goes to
// the committer's retry loop (the next addToObject or putObject returns it),
// which backs off and calls again; that call starts the failed uploads again,
// with the same bytes under the same name.

// upload is one segment object on its way to the store.
type upload struct {
	key     string
	seq     uint64
	buf     *bytes.Buffer
	running bool  // an attempt is under way (the committer's view)
	err     error // the attempt's result: set by its goroutine before it reports on finished

	chainMax uint64 // chain max ts through this segment
	digest   uint32 // its header CRC
}

// addToObject adds a frame to the segment object being assembled, launching
// the object's upload first when the frame would take it past the size
// limit. It is retried until it succeeds: an error leaves t out of every
// object, and a call after a failure first starts the failed uploads again.
func (c *committer) addToObject(t *blockTask) error {
	w := c.w
	if o := c.obj; o != nil && (o.sealed || o.sw.Stats().Blocks > 0 && c.rotates(o, t)) {
		if err := c.launch(); err != nil {
			return err
		}
	} else if err := c.awaitUploads(w.o.MaxUploads); err != nil {
		return err
	}
	if c.obj == nil {
		hdr, err := c.nextHeader()
		if err != nil {
			return err
		}
		buf := c.segBuf()
		sw, err := segment.NewWriter(buf, hdr, nil)
		if err != nil {
			c.segBufs = append(c.segBufs, buf)
			return err
		}
		c.nextSeq++
		c.obj = &objectSeg{hdr: sw.Header(), sw: sw, buf: buf}
	}
	// Writing to memory cannot fail.
	if err := c.obj.sw.AppendFrame(&t.frame); err != nil {
		return err
	}
	t.release()
	return nil
}

// rotates reports whether t must go to a new segment object: it would take
// o past the size limit, or it starts below o's last record.
func (c *committer) rotates(o *objectSeg, t *blockTask) bool {
	last, _ := o.sw.LastTs()
	return t.frame.Info().MinTs < last || o.sw.Offset()+int64(t.frame.Len())+footerReserve(o.sw) > c.w.o.MaxSegmentBytes
}

// footerReserve is what the footer and trailer of sw will take with one more
// block.
func footerReserve(sw *segment.Writer) int64 {
	return int64(segment.FooterFixedSize + 4 + (len(sw.Blocks())+1)*segment.IndexEntrySize + segment.TrailerSize)
}

// segBuf returns an empty buffer for a segment object. At most MaxUploads+1
// exist: the uploads' and the one being assembled.
func (c *committer) segBuf() *bytes.Buffer {
	if n := len(c.segBufs); n > 0 {
		b := c.segBufs[n-1]
		c.segBufs[n-1] = nil
		c.segBufs = c.segBufs[:n-1]
		b.Reset()
		return b
	}
	return new(bytes.Buffer)
}

// putObject launches the flush's last segment object, if any, and waits
// until every object launched is durable. It is retried until it succeeds.
func (c *committer) putObject() error {
	if c.obj != nil {
		if err := c.launch(); err != nil {
			return err
		}
	}
	return c.awaitUploads(0)
}

// launch seals the object being assembled, waits for an upload slot and
// starts its upload. After an error the object stays, sealed, in c.obj, and
// the next call launches it.
func (c *committer) launch() error {
	o := c.obj
	if !o.sealed {
		f, err := o.sw.Seal()
		if err != nil {
			return err
		}
		o.sealed = true
		// Sealed in memory: final, whenever and in whatever order the
		// uploads land. The next object links it.
		c.extend(o.hdr, f.Blocks)
		o.chainMax = c.chain.PrevMaxTs
	}
	if err := c.awaitUploads(c.w.o.MaxUploads - 1); err != nil {
		return err
	}
	st := o.sw.Stats()
	u := &upload{key: o.hdr.SealedName(st.MinTs, st.MaxTs).Format(), seq: o.hdr.Seq, buf: o.buf, chainMax: o.chainMax, digest: o.hdr.CRC}
	c.uploads = append(c.uploads, u)
	c.obj = nil
	c.attempt(u)
	return nil
}

// awaitUploads collects the upload attempts that returned, starts again the
// uploads whose failure an earlier call reported, and waits until at most
// limit uploads are not durable. It returns the first failure it sees; the
// caller's retry loop backs off and calls again.
func (c *committer) awaitUploads(limit int) error {
	if len(c.uploads) == 0 {
		return nil
	}
	var failed error
	for more := true; more; {
		select {
		case u := <-c.finished:
			if err := c.uploaded(u); err != nil && failed == nil {
				failed = err
			}
		default:
			more = false
		}
	}
	if failed != nil {
		return failed
	}
	for _, u := range c.uploads {
		if !u.running {
			c.attempt(u)
		}
	}
	for len(c.uploads) > limit {
		select {
		case u := <-c.finished:
			if err := c.uploaded(u); err != nil {
				return err
			}
		case <-c.ctx.Done():
			return c.aborted()
		}
	}
	return nil
}

// attempt starts one attempt at storing u.
func (c *committer) attempt(u *upload) {
	if c.finished == nil {
		// Every upload in c.uploads has at most one attempt under way, so
		// the reports never block, even after the committer stopped
		// listening.
		c.finished = make(chan *upload, c.w.o.MaxUploads)
	}
	w, ctx, finished := c.w, c.ctx, c.finished
	data := u.buf.Bytes()
	u.running = true
	go func() {
		start := time.Now()
		err := putSegment(ctx, w.b, u.key, data)
		w.m.uploadDuration.Observe(time.Since(start).Seconds())
		u.err = err
		finished <- u
	}()
}

// uploaded takes the result of an attempt. A durable object counts as stored
// and unpublished, and its buffer is free for the next object; a failure is
// returned, and the upload stays to be tried again.
func (c *committer) uploaded(u *upload) error {
	u.running = false
	if u.err != nil {
		return u.err
	}
	w := c.w
	n := int64(u.buf.Len())
	w.stats.stored.Add(n)
	w.m.stored.Add(float64(n))
	w.stats.segments.Add(1)
	w.m.segments.Inc()
	// Uploads land in any order; the progress publishes the highest seq
	// once all below it landed too (putObject waits for every one).
	if !c.hasData || u.seq > c.lastSeq {
		c.lastSeq, c.lastChainMax, c.lastDigest = u.seq, u.chainMax, u.digest
	}
	c.hasData = true
	c.unpublished = append(c.unpublished, u.key)
	c.uploads = slices.DeleteFunc(c.uploads, func(x *upload) bool { return x == u })
	c.segBufs = append(c.segBufs, u.buf)
	u.buf = nil
	return nil
}

// putSegment puts a sealed segment object, if-not-exists. It runs on an
// upload's goroutine.
func putSegment(ctx context.Context, b *blob.Bucket, key string, data []byte) error {
	_, err := b.Put(ctx, key, data, &blob.PutOptions{IfNotExist: true})
	if blob.IsPreconditionFailed(err) {
		// Only this epoch writes this name: an earlier attempt whose answer
		// was lost may have stored it. If it holds exactly these bytes, that
		// attempt succeeded.
		got, rerr := b.ReadAll(ctx, key)
		switch {
		case rerr != nil:
			return rerr
		case !bytes.Equal(got, data):
			// Only a second process with this epoch could have written
			// it, which the lease rules out: never overwrite, stop.
			return permanent{fmt.Errorf("writer: segment %s exists with other contents: %w", key, err)}
		}
		err = nil
	}
	return err
}
