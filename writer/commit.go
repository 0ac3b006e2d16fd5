package writer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redokit/redokit/internal/chain"
	"github.com/redokit/redokit/internal/retry"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
)

// committer stores jobs in order, makes them durable, publishes progress and
// reports flushes. It runs on one goroutine, which alone drives its store.
type committer struct {
	w       *Writer
	ctx     context.Context
	nextSeq uint64

	// dur is the newest durable progress: what the last progress frame (or
	// urgent publication) made durable, and what the next publication says.
	dur meta.Progress
	pub *publisher

	// The completeness chain (segment.Link). chain is the link the epoch's
	// next new segment carries: it names the last segment whose blocks are
	// final (PrevSeq 0 before the first), so seqs never skip within the
	// epoch.
	chain    segment.Link
	firstSeq uint64 // the epoch's first seq: what a segment with PrevSeq 0 must have

	// store is what differs between backends: how a flush's blocks
	// become durable and what is sealed after its publication.
	store store

	attempts int // failures in the current job

	// flags are the current job's segment flags: a segment begun for it
	// carries them (nextHeader).
	flags segment.Flags
	// lazy are jobs appended without a sync or a progress frame of their
	// own (job.lazy): the next job's sync makes them durable and releases
	// them.
	lazy []*job
}

// store is how a flush's blocks become durable: appended to a growing
// local file and fdatasynced (appendStore), or put as segment objects
// (objectStore). The committer drives it from its one goroutine; the chain,
// the retry budget and the publication stay with the committer, so both
// paths keep the same promises (see the package doc).
type store interface {
	// add takes the flush's next frame, in order. It is called again
	// through committer.retry until it succeeds; a call after a failure
	// repairs what the failure left first.
	add(t *blockTask) error
	// canRecord reports whether a progress frame can go where the flush's
	// frames went (a segment is open for them).
	canRecord() bool
	// record adds the flush's progress frame after its blocks: flushed ts
	// ts, the epoch's committed ts committed. It is retried like add.
	record(ts, committed uint64, spans []segment.SpanTs) error
	// persist makes every frame added durable, retrying each step itself,
	// and then sets committer.dur from the progress frame recorded.
	persist() error
	// settle runs once the flush's progress frame is durable: what may be
	// sealed only then is (final: Close's flush, the active segment too).
	settle(final bool) error
	// age fires when the store wants aged called between flushes (nil:
	// never).
	age() <-chan time.Time
	aged() error
	// doomed returns the keys of the segments stored in this epoch whose
	// seq is above a fence's lastSeq, letting go of any it holds open.
	doomed(epoch, lastSeq uint64) []string
	// abandon lets go of everything when the committer stops without
	// finishing: open files stay unsealed for the next Open, and no
	// goroutine of the store outlives it.
	abandon()
}

func newCommitter(w *Writer, nextSeq uint64, st meta.WriterState) *committer {
	c := &committer{
		w: w, ctx: w.ctx, nextSeq: nextSeq, firstSeq: nextSeq,
		dur: meta.Progress{FlushedTs: st.FlushedTs, Seq: st.Seq, ChainMaxTs: st.ChainMaxTs, CommittedTs: max(st.CommittedTs, st.FlushedTs), Digest: st.Digest, Spans: st.Spans},
		pub: newPublisher(w, st),
	}
	if w.append {
		c.store = &appendStore{c: c}
	} else {
		c.store = &objectStore{c: c}
	}
	return c
}

func (c *committer) run() {
	w := c.w
	defer close(w.commitDone)
	defer c.store.abandon()
	for {
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
				if c.ctx.Err() == nil || w.Err() != nil || errors.Is(err, meta.ErrFenced) {
					w.fail(c.fenced(err))
				}
				// else: Close gave up; the writer is not broken.
				c.drop(j, err)
				for _, l := range c.lazy {
					c.drop(l, err)
				}
				c.lazy = nil
			}
		case err := <-c.pub.failed:
			w.fail(c.fenced(err))
		case <-c.store.age():
			// Idle between flushes: every block is published.
			if w.Err() != nil {
				continue
			}
			c.attempts = 0
			if err := c.store.aged(); err != nil {
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

// releaseLazy gives back the memory of the lazy jobs before the one just
// made durable, and counts what they stored.
func (c *committer) releaseLazy() {
	w := c.w
	for _, l := range c.lazy {
		// Out of the lazy count before the quota wakes the waiters, so
		// that none finds the bytes counted twice.
		w.lazyBytes.Add(-l.quota)
		c.release(l)
		w.stats.staged.Add(l.staged)
		w.stats.events.Add(l.records)
		w.stats.rows.Add(l.rows)
		w.stats.ddls.Add(l.ddls)
		w.stats.payload.Add(l.payload)
	}
	clear(c.lazy)
	c.lazy = c.lazy[:0]
}

// release gives a job's memory back to the quota, once.
func (c *committer) release(j *job) {
	if j.released {
		return
	}
	j.released = true
	c.w.quota.release(j.quota)
}

// commit stores one job, makes it durable, publishes the progress and
// reports it.
func (c *committer) commit(j *job) error {
	w := c.w
	c.attempts = 0
	c.flags = j.flags
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
		if err := c.retry(func() error { return c.store.add(t) }); err != nil {
			return err
		}
	}
	if j.lazy {
		// Appended; the next job's sync makes it durable.
		w.stats.blocks.Add(blocks)
		c.lazy = append(c.lazy, j)
		return nil
	}
	// The flushed ts is the job's resolved ts: the minimum over the spans.
	// It falls when a span is added behind the writer, until the span
	// catches up (meta.Lease.PublishProgress; the coordinator keeps the
	// global watermark from falling).
	ts, committed := j.resolved, max(j.committed, c.dur.CommittedTs)
	spans := c.withRemoved(j.spans)
	switch {
	case blocks == 0 && len(c.lazy) == 0 && ts == c.dur.FlushedTs && committed == c.dur.CommittedTs && slices.Equal(spans, c.dur.Spans):
		// Nothing new to make durable.
	case c.store.canRecord():
		// The progress goes into the segment, after the flush's blocks,
		// and the one sync (or put) that makes them durable makes it
		// durable too. The state object follows lazily.
		if err := c.retry(func() error { return c.store.record(ts, committed, spans) }); err != nil {
			return err
		}
		if err := c.store.persist(); err != nil {
			return err
		}
		c.dur.Spans = spans
		c.pub.request(c.dur, false)
	case blocks > 0:
		return permanent{fmt.Errorf("writer %s/%s epoch %d: a flush stored %d blocks but no segment is open for its progress frame", w.o.LogID, w.o.WriterID, w.epoch, blocks)}
	default:
		// No segment is open to hold the progress (a flush with no
		// blocks after the active segment was sealed, or on an object
		// store): the state object is its durable record, and the flush
		// waits for it.
		p := c.dur
		p.FlushedTs, p.CommittedTs, p.Spans = ts, committed, spans
		if err := c.pub.wait(c.ctx, c.pub.request(p, true)); err != nil {
			return err
		}
		c.dur = p
	}
	// Durable. The memory can go.
	c.releaseLazy()
	c.release(j)
	if err := c.store.settle(j.final); err != nil {
		return err
	}
	if j.final {
		if err := c.publishNow(); err != nil {
			return err
		}
	}
	w.flushed.Store(ts)
	w.stats.committed.Store(c.dur.CommittedTs)
	w.stats.staged.Add(j.staged)
	w.stats.events.Add(j.records)
	w.stats.rows.Add(j.rows)
	w.stats.ddls.Add(j.ddls)
	w.stats.payload.Add(j.payload)
	w.stats.blocks.Add(blocks)
	w.stats.flushes.Add(1)
	w.stats.flush.since(j.start)
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
// backoff is the wait between the writer's retries of a failed operation.
func (w *Writer) backoff() retry.Backoff {
	return retry.Backoff{First: w.o.RetryBackoff, Max: w.o.RetryMaxBackoff}
}

func (c *committer) retry(op func() error) error {
	w := c.w
	for {
		err := op()
		if err == nil {
			return nil
		}
		var p permanent
		if errors.Is(err, meta.ErrFenced) || errors.As(err, &p) {
			return err
		}
		if c.ctx.Err() != nil {
			return c.aborted()
		}
		if c.attempts >= w.o.RetryAttempts {
			return fmt.Errorf("writer: flush failed after %d retries: %w", c.attempts, err)
		}
		wait := w.backoff().Wait(c.attempts)
		c.attempts++
		w.stats.retries.Add(1)
		w.log.Warn("flush failed; retrying", "err", err, "attempt", c.attempts, "backoff", wait)
		if retry.Sleep(c.ctx, wait) != nil {
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
func (c *committer) withRemoved(spans []segment.SpanTs) []segment.SpanTs {
	out := make([]segment.SpanTs, 0, len(spans))
	out = append(out, spans...)
	var top uint64
	have := make(map[uint64]bool, len(spans))
	for _, s := range spans {
		top = max(top, s.Ts)
		have[s.Span] = true
	}
	for _, s := range c.dur.Spans {
		if !have[s.Span] && s.Ts > top {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b segment.SpanTs) int { return cmp.Compare(a.Span, b.Span) })
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
		Created: time.Now(), Link: c.chain, Flags: c.flags}, nil
}

// extend moves the end of the chain to the segment with header hdr (as
// written, CRC included) whose final blocks are blocks, and returns its
// footer's CRC.
func (c *committer) extend(hdr segment.Header, blocks []segment.BlockInfo) uint32 {
	c.chain = chain.Successor(hdr, blocks)
	return c.chain.PrevFooterCRC
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

// recorded sets the durable progress from a progress frame made durable
// in the segment with header hdr.
func (c *committer) recorded(hdr segment.Header, p segment.ProgressInfo) {
	c.dur.FlushedTs, c.dur.Seq, c.dur.ChainMaxTs, c.dur.Digest = p.FlushedTs, hdr.Seq, p.ChainMaxTs, hdr.CRC
	c.dur.CommittedTs = max(c.dur.CommittedTs, p.CommittedTs)
}

// publishNow publishes the newest durable progress and waits for it: before
// a seal that would leave the newest progress frame in a sealed segment (the
// next epoch trusts the state object over the frames of a sealed segment at
// its published seq), and at Close.
func (c *committer) publishNow() error {
	return c.pub.wait(c.ctx, c.pub.request(c.dur, true))
}

// fenced turns a fence into the error the writer stops with, after
// deleting what the fence leaves out (retract). Other errors pass.
func (c *committer) fenced(err error) error {
	if !errors.Is(err, meta.ErrFenced) {
		return err
	}
	if rerr := c.retract(err); rerr != nil {
		// Still fenced (errors.Is), and saying what was left behind.
		return fmt.Errorf("%w; %w", err, rerr)
	}
	return err
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
// deleting covered data is not. The deletes run under RetractTimeout (and
// the writer's context), so a hung store cannot hold a fenced committer; a
// delete that fails or runs out of time is returned, naming the segments,
// to be reported with the fence.
func (c *committer) retract(err error) error {
	w := c.w
	var fe *meta.FencedError
	if !errors.As(err, &fe) {
		w.log.Warn("fenced without the state that proves it; deleting nothing", "err", err)
		return nil
	}
	fence, ok := fe.Fence()
	if !ok {
		w.log.Warn("fenced, and the new epoch recorded no fence for ours; deleting nothing", "epoch", w.epoch, "key", fe.Key)
		return nil
	}
	doomed := c.store.doomed(fence.Epoch, fence.LastSeq)
	if len(doomed) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(c.ctx, w.o.RetractTimeout)
	defer cancel()
	if err := w.b.Delete(ctx, doomed...); err != nil {
		w.log.Warn("fenced: cannot delete segments above the fence; readers ignore them", "keys", doomed, "err", err)
		return fmt.Errorf("writer: fenced: cannot delete segments %s above the fence (readers ignore them; gc removes them): %w",
			strings.Join(doomed, ", "), err)
	}
	return nil
}
