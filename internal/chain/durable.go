package chain

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
)

// Durable finds what the epoch of prev made durable after its last
// publication: the newest progress frame in its chain, walked up from the
// published seq (from its first segment when it published none) while the
// seqs are consecutive and each links its predecessor. It returns nil when
// the publication is as new as any frame: no frame is found, or the newest
// is in a sealed segment at the published seq (a local writer publishes
// before it seals a segment whose last frame is its newest progress, and an
// object's only frame is durable before any publication names its seq).
//
// A flush is reported once its progress frame is durable, before the state
// object says so; the next epoch's fence is taken from this, so that what
// was reported stays in the log. A zombie's frames written after this
// reading are beyond the fence, and count for nothing.
//
// A missing seq is read by the rule in gap: segments above it that hold no
// progress frame are fenced out (an upload that failed in a flush never
// reported); a frame above it proves the missing segments were durable, and
// unless GC took them (the bottom of the chain, below the checkpoint) that
// is an error naming them. A segment that cannot be read, or a chain that
// breaks where both sides are listed, is an error naming the keys: a guess
// here could drop reported data or accept a zombie's.
//
// Every conclusion drawn from a seq missing in the listing is checked first
// with a listing of the epoch alone (ProbeEpoch); a listing that missed a segment
// is listed again, at most Relists times.
func Durable(ctx context.Context, b *blob.Bucket, prev *meta.WriterState, appendable bool, log *slog.Logger) (*meta.Progress, error) {
	return durable(ctx, b, prev, appendable, log, func() (uint64, error) { return Checkpoint(ctx, b, prev.LogID) })
}

// durable is Durable with the checkpoint read by checkpoint (only when a
// gap needs it).
func durable(ctx context.Context, b *blob.Bucket, prev *meta.WriterState, appendable bool, log *slog.Logger, checkpoint func() (uint64, error)) (*meta.Progress, error) {
	for i := 0; ; i++ {
		w := &walk{ctx: ctx, b: b, prev: prev, appendable: appendable, log: log, checkpoint: checkpoint, recs: map[uint64]*segment.Recovery{}}
		p, err := w.run()
		if !Stale(err) {
			return p, err
		}
		if i == Relists {
			return nil, Exhausted(fmt.Sprintf("writer %s epoch %d: the segments of %s", prev.WriterID, prev.Epoch, layout.WriterSegments(prev.LogID, prev.WriterID)), err)
		}
		log.Warn("the listing of the previous epoch's segments missed one a narrower listing finds: listing again", "err", err)
	}
}

// walk is one attempt of Durable over one listing.
type walk struct {
	ctx        context.Context
	b          *blob.Bucket
	prev       *meta.WriterState
	appendable bool
	log        *slog.Logger
	checkpoint func() (uint64, error)

	segs map[uint64]Entry // the epoch's listed segments by seq
	seqs []uint64         // their seqs, ascending
	recs map[uint64]*segment.Recovery
}

// found is a progress frame the walk met.
type found struct {
	seq    uint64
	active bool
	hdr    segment.Header
	p      segment.ProgressInfo
}

func (w *walk) run() (*meta.Progress, error) {
	if err := w.list(); err != nil {
		return nil, err
	}
	// Every conclusion below drawn from a seq missing in the listing (a
	// gap, nothing above the highest seq, nothing at all) rests on this.
	if err := w.probe(); err != nil || len(w.seqs) == 0 {
		return nil, err
	}
	start, ok, err := w.start()
	if err != nil || !ok {
		return nil, err
	}
	last, err := w.frames(start)
	if err != nil {
		return nil, err
	}
	return w.fence(last), nil
}

// list reads the epoch's segments from one listing of the writer's prefix.
func (w *walk) list() error {
	prefix := layout.WriterSegments(w.prev.LogID, w.prev.WriterID)
	entries, err := List(w.ctx, w.b, w.prev.LogID, prefix)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Err != nil {
			// A damaged name could be a segment of the chain: passing it by
			// would end the walk early and reopen below a reported flush.
			return fmt.Errorf("list %s: %w", prefix, e.Err)
		}
	}
	w.segs = NewIndex(entries, func(n segment.Name) bool { return n.Epoch == w.prev.Epoch })[EpochKey{w.prev.WriterID, w.prev.Epoch}]
	w.seqs = Seqs(w.segs)
	return nil
}

// probe proves every seq the listing lacks absent, with a listing of the
// epoch alone; a seq there is one the listing missed.
func (w *walk) probe() error {
	return ProbeEpoch(w.ctx, w.b, w.prev.LogID, w.prev.WriterID, w.prev.Epoch, w.segs)
}

// read recovers the listed segment of seq (once).
func (w *walk) read(seq uint64) (*segment.Recovery, error) {
	if rec := w.recs[seq]; rec != nil {
		return rec, nil
	}
	key := w.segs[seq].Key
	rd, err := w.b.NewReader(w.ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	rec, err := segment.Recover(rd, &segment.ScannerOptions{Object: key})
	rd.Close()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	w.recs[seq] = rec
	return rec, nil
}

func missingName(from, to uint64) string {
	if from == to {
		return fmt.Sprintf("seq %d", from)
	}
	return fmt.Sprintf("seqs %d..%d", from, to)
}

// start returns the seq the walk starts at: where the published progress
// is proven, at the published seq, or at the epoch's first segment when
// nothing was published. Anything missing below the start goes through
// gap; ok is false when the walk ends there (nothing to take).
func (w *walk) start() (uint64, bool, error) {
	seqs := w.seqs
	// A published seq of 0 names no segment (seq 0 is never used): the
	// epoch published flushes that wrote none, and its segments, all
	// above, are walked from its first like those of an epoch that
	// published nothing.
	if w.published() {
		i, _ := slices.BinarySearch(seqs, w.prev.Seq)
		if i == len(seqs) {
			return 0, false, nil
		}
		if seqs[i] != w.prev.Seq {
			proceed, err := w.gap(i, missingName(w.prev.Seq, seqs[i]-1)+" (the published seq and above)", i == 0)
			if err != nil || !proceed {
				return 0, false, err
			}
		}
		return seqs[i], true, nil
	}
	rec, err := w.read(seqs[0])
	if err != nil {
		return 0, false, err
	}
	if rec.HasHeader && !rec.Header.Link.First() {
		proceed, err := w.gap(0, fmt.Sprintf("the epoch's first segments (below seq %d)", seqs[0]), true)
		if err != nil || !proceed {
			return 0, false, err
		}
	}
	return seqs[0], true, nil
}

func (w *walk) published() bool { return w.prev.HasSeq && w.prev.Seq != 0 }

// gap decides about the segments listed from seqs[j] on, above missing
// seqs (below seqs[j]; bottom: none of the epoch is listed lower). A
// progress frame is stored only once every segment below it in its epoch
// is durable (local disk writes segments in order; an object store
// launches a flush's last object, the one with its frame, after the others
// landed). So with no frame above the gap, the missing segments are
// uploads that failed in a flush that was never reported, and what lies
// above is fenced out. With a frame above, the missing ones were durable
// once: GC takes only the bottom of an epoch's chain, and only below the
// checkpoint, which the link of seqs[j] proves (its PrevMaxTs is the
// largest commit ts below it); the walk may then go on from seqs[j].
// Anything else is segments the epoch made durable, gone: an error naming
// them. On local disk, where no upload can fail out of order, every gap
// needs that proof.
func (w *walk) gap(j int, missing string, bottom bool) (proceed bool, err error) {
	var framed []string
	for _, seq := range w.seqs[j:] {
		rec, err := w.read(seq)
		if err != nil {
			return false, err
		}
		if len(rec.Progress) > 0 {
			framed = append(framed, w.segs[seq].Key)
		}
	}
	first := w.segs[w.seqs[j]].Key
	// On local disk a seq is never skipped (a segment that fails to be
	// created gives its seq to the next one), so a missing one was deleted
	// whatever lies above it: only GC's proof accepts it.
	if len(framed) == 0 && !w.appendable {
		w.log.Warn("segments of the previous epoch lie above a missing seq and hold no progress frame: nothing in them was reported; fenced out, not read",
			"epoch", w.prev.Epoch, "missing", missing, "first_after_gap", first)
		return false, nil
	}
	collected, why, err := w.collected(w.recs[w.seqs[j]], first, bottom)
	if err != nil || collected {
		return collected, err
	}
	if len(framed) == 0 {
		return false, fmt.Errorf("writer %s epoch %d: %s missing below %s, on a store that writes an epoch's segments in order: segments the epoch wrote are gone (%s): %w",
			w.prev.WriterID, w.prev.Epoch, missing, first, why, segment.ErrCorrupt)
	}
	return false, fmt.Errorf("writer %s epoch %d: %s missing, yet progress frames lie above (in %s), and a frame is stored only after everything below it: segments the epoch made durable are gone (%s): %w",
		w.prev.WriterID, w.prev.Epoch, missing, strings.Join(framed, ", "), why, segment.ErrCorrupt)
}

// collected reports whether GC can have taken the segments missing below
// first (recovered as rec): they are the bottom of the chain, and first's
// link says that everything below it lies at or below the checkpoint.
// Otherwise why says what rules GC out.
func (w *walk) collected(rec *segment.Recovery, first string, bottom bool) (bool, string, error) {
	switch {
	case !bottom:
		return false, "segments of the epoch are listed below the gap, and GC only removes the bottom of an epoch's chain", nil
	case !rec.HasHeader || rec.Header.Link.First():
		return false, fmt.Sprintf("%s does not link a predecessor", first), nil
	}
	cp, err := w.checkpoint()
	if err != nil {
		return false, "", err
	}
	if rec.Header.Link.PrevMaxTs <= cp {
		return true, "", nil
	}
	return false, fmt.Sprintf("the largest commit ts below %s is %d, above the checkpoint %d, so GC did not remove them", first, rec.Header.Link.PrevMaxTs, cp), nil
}

// frames walks the chain up from start while the seqs are consecutive and
// each links its predecessor, and returns the newest progress frame the
// links cover (nil: none).
func (w *walk) frames(start uint64) (*found, error) {
	var last, beforePrev *found // beforePrev: last as it stood before the predecessor
	var prevHdr segment.Header
	var prevRec *segment.Recovery
	var prevActive bool
	for seq := start; ; seq++ {
		e, ok := w.segs[seq]
		if !ok {
			return last, w.after(seq)
		}
		rec, err := w.read(seq)
		if err != nil {
			return nil, err
		}
		if !rec.HasHeader {
			if next, ok := w.segs[seq+1]; ok {
				return nil, fmt.Errorf("read %s: no whole header, but its successor %s links it: %w", e.Key, next.Key, segment.ErrCorrupt)
			}
			if !e.Name.Active || !w.appendable {
				return nil, fmt.Errorf("read %s: no whole header: %w", e.Key, segment.ErrCorrupt)
			}
			return last, nil // torn while it was created: it holds nothing
		}
		if err := w.checkSegment(e, rec); err != nil {
			return nil, err
		}
		if seq != start {
			k, err := predBlocks(e.Key, rec.Header.Link, prevHdr, prevRec, prevActive)
			if err != nil {
				return nil, err
			}
			// The predecessor's blocks are those the link names: a frame
			// after them (an active one abandoned after a failed sync) was
			// never reported.
			if last != nil && last.seq == seq-1 && last.p.Blocks > k {
				last = beforePrev
				for _, p := range prevRec.Progress {
					if p.Blocks <= k {
						last = &found{seq: seq - 1, active: prevActive, hdr: prevHdr, p: p}
					}
				}
			}
		}
		beforePrev = last
		if k := len(rec.Progress); k > 0 {
			last = &found{seq: seq, active: e.Name.Active, hdr: rec.Header, p: rec.Progress[k-1]}
		}
		prevHdr, prevRec, prevActive = rec.Header, rec, e.Name.Active
	}
}

// after settles the segments listed above the first missing seq of the
// walk: gap fences them out, or fails.
func (w *walk) after(seq uint64) error {
	j, _ := slices.BinarySearch(w.seqs, seq)
	if j == len(w.seqs) {
		return nil
	}
	_, err := w.gap(j, missingName(seq, w.seqs[j]-1), false)
	return err
}

// checkSegment holds a segment read in the walk to its name.
func (w *walk) checkSegment(e Entry, rec *segment.Recovery) error {
	h := rec.Header
	if h.Epoch != w.prev.Epoch || h.Seq != e.Name.Seq || h.LogID != w.prev.LogID || h.WriterID != w.prev.WriterID {
		return fmt.Errorf("read %s: its header says log %q writer %q epoch %d seq %d: %w", e.Key, h.LogID, h.WriterID, h.Epoch, h.Seq, segment.ErrCorrupt)
	}
	if !e.Name.Active && !rec.Sealed {
		return fmt.Errorf("read %s: a sealed name without a whole footer and trailer: %w", e.Key, segment.ErrCorrupt)
	}
	return nil
}

// predBlocks checks the link lk of key to its predecessor (header ph,
// recovered as pr) and returns how many of the predecessor's blocks it
// names.
func predBlocks(key string, lk segment.Link, ph segment.Header, pr *segment.Recovery, active bool) (int, error) {
	seq := ph.Seq
	if lk.PrevSeq != seq || lk.PrevHeaderCRC != ph.CRC {
		return 0, fmt.Errorf("%s does not link its predecessor seq %d (header CRC %#08x): it links seq %d, header CRC %#08x: %w",
			key, seq, ph.CRC, lk.PrevSeq, lk.PrevHeaderCRC, segment.ErrCorrupt)
	}
	k, ok := LinkedPrefix(ph, pr.Blocks, active, lk)
	if !ok {
		return 0, fmt.Errorf("%s links a footer CRC %#08x and chain max ts %d that no prefix of seq %d's %d blocks has: %w",
			key, lk.PrevFooterCRC, lk.PrevMaxTs, seq, len(pr.Blocks), segment.ErrCorrupt)
	}
	return k, nil
}

// fence decides the durable progress from the newest frame the walk
// covers: nil when the publication is as new (no frame, or the frame is in
// a sealed segment at the published seq).
func (w *walk) fence(last *found) *meta.Progress {
	prev := w.prev
	if last == nil || w.published() && last.seq == prev.Seq && !last.active {
		return nil
	}
	w.log.Info("the previous epoch made progress durable beyond what it published", "epoch", prev.Epoch,
		"published_seq", prev.Seq, "published_ts", prev.FlushedTs, "durable_seq", last.seq, "durable_ts", last.p.FlushedTs)
	return &meta.Progress{FlushedTs: last.p.FlushedTs, Seq: last.seq, ChainMaxTs: last.p.ChainMaxTs, CommittedTs: last.p.CommittedTs, Digest: last.hdr.CRC, Spans: last.p.Spans}
}

// Checkpoint is the log's checkpoint (0 without a meta object: then no GC
// has run).
func Checkpoint(ctx context.Context, b *blob.Bucket, logID string) (uint64, error) {
	m, _, err := meta.ReadMeta(ctx, b, logID)
	switch {
	case blob.IsNotExist(err):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("read the checkpoint: %w", err)
	}
	return m.CheckpointTs, nil
}
