package writer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
)

// durableProgress finds what the epoch of prev made durable after its last
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
func durableProgress(ctx context.Context, b *blob.Bucket, prev *meta.WriterState, appendable bool, log *slog.Logger) (*meta.Progress, error) {
	var missed *listingMissed
	for range 3 {
		p, err := durableWalk(ctx, b, prev, appendable, log)
		if !errors.As(err, &missed) {
			return p, err
		}
		log.Warn("the listing of the previous epoch's segments missed one a narrower listing finds: listing again", "key", missed.key)
	}
	return nil, fmt.Errorf("writer %s epoch %d: three listings of %s missed %s, which a narrower listing finds: the store's listing cannot be trusted to show every segment",
		prev.WriterID, prev.Epoch, layout.WriterSegments(prev.LogID, prev.WriterID), missed.key)
}

// listingMissed: the listing durableWalk read lacks a segment that a
// listing of its seq alone finds.
type listingMissed struct{ key string }

func (e *listingMissed) Error() string { return "the listing missed " + e.key }

// durableWalk is one attempt of durableProgress over one listing. Every
// conclusion it draws from a seq missing in the listing (a gap, or nothing
// above the highest seq) is checked first with a listing of that seq alone:
// a listing that skipped an object (a store that lies, or one racing a
// rename) is *listingMissed, and the walk starts over.
func durableWalk(ctx context.Context, b *blob.Bucket, prev *meta.WriterState, appendable bool, log *slog.Logger) (*meta.Progress, error) {
	prefix := layout.WriterSegments(prev.LogID, prev.WriterID)
	type listed struct {
		key    string
		active bool
	}
	segs := map[uint64]listed{}
	for a, err := range b.List(ctx, prefix) {
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", prefix, err)
		}
		n, err := segment.ParseName(a.Key)
		if err != nil {
			// A damaged name could be a segment of the chain: passing it by
			// would end the walk early and reopen below a reported flush.
			return nil, fmt.Errorf("list %s: %w", prefix, err)
		}
		if n.Epoch != prev.Epoch {
			continue
		}
		if old, ok := segs[n.Seq]; ok && !old.active {
			continue // of a sealed and an active name of one seq, the sealed one
		}
		segs[n.Seq] = listed{a.Key, n.Active}
	}
	// probe lists seq alone: a key there is one the listing above missed.
	probe := func(seq uint64) error {
		n := segment.Name{LogID: prev.LogID, WriterID: prev.WriterID, Epoch: prev.Epoch, Seq: seq, Active: true}
		narrow := strings.TrimSuffix(n.Format(), segment.ActiveExt)
		for a, err := range b.List(ctx, narrow) {
			if err != nil {
				return fmt.Errorf("list %s: %w", narrow, err)
			}
			return &listingMissed{key: a.Key}
		}
		return nil
	}
	seqs := make([]uint64, 0, len(segs))
	for s := range segs {
		seqs = append(seqs, s)
	}
	slices.Sort(seqs)
	// Nothing above the highest seq listed, proven.
	switch {
	case len(seqs) > 0:
		if err := probe(seqs[len(seqs)-1] + 1); err != nil {
			return nil, err
		}
	case prev.HasSeq:
		if err := probe(prev.Seq + 1); err != nil {
			return nil, err
		}
	}
	if len(segs) == 0 {
		return nil, nil
	}
	recs := map[uint64]*segment.Recovery{}
	read := func(seq uint64) (*segment.Recovery, error) {
		if rec := recs[seq]; rec != nil {
			return rec, nil
		}
		key := segs[seq].key
		rd, err := b.NewReader(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", key, err)
		}
		rec, err := segment.Recover(rd, &segment.ScannerOptions{Object: key})
		rd.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", key, err)
		}
		recs[seq] = rec
		return rec, nil
	}
	// gap decides about the segments listed from seqs[j] on, above missing
	// seqs (below seqs[j]; bottom: none of the epoch is listed lower). A
	// progress frame is stored only once every segment below it in its
	// epoch is durable (local disk writes segments in order; an object
	// store launches a flush's last object, the one with its frame, after
	// the others landed). So with no frame above the gap, the missing
	// segments are uploads that failed in a flush that was never
	// reported, and what lies above is fenced out. With a frame above, the
	// missing ones were durable once: GC takes only the bottom of an
	// epoch's chain, and only below the checkpoint, which the link of
	// seqs[j] proves (its PrevMaxTs is the largest commit ts below it); the
	// walk may then go on from seqs[j]. Anything else is segments the epoch
	// made durable, gone: an error naming them. On local disk, where no
	// upload can fail out of order, every gap needs that proof.
	gap := func(j int, firstMissing uint64, missing string, bottom bool) (proceed bool, err error) {
		if firstMissing > 0 {
			if err := probe(firstMissing); err != nil {
				return false, err
			}
		}
		var framed []string
		for _, seq := range seqs[j:] {
			rec, err := read(seq)
			if err != nil {
				return false, err
			}
			if len(rec.Progress) > 0 {
				framed = append(framed, segs[seq].key)
			}
		}
		first := segs[seqs[j]].key
		// On local disk a seq is never skipped (a segment that fails to be
		// created gives its seq to the next one), so a missing one was
		// deleted whatever lies above it: only GC's proof accepts it.
		if len(framed) == 0 && !appendable {
			log.Warn("segments of the previous epoch lie above a missing seq and hold no progress frame: nothing in them was reported; fenced out, not read",
				"epoch", prev.Epoch, "missing", missing, "first_after_gap", first)
			return false, nil
		}
		rec := recs[seqs[j]]
		var why string
		switch {
		case !bottom:
			why = "segments of the epoch are listed below the gap, and GC only removes the bottom of an epoch's chain"
		case !rec.HasHeader || rec.Header.Link.First():
			why = fmt.Sprintf("%s does not link a predecessor", first)
		default:
			cp, err := checkpointTs(ctx, b, prev.LogID)
			if err != nil {
				return false, err
			}
			if rec.Header.Link.PrevMaxTs <= cp {
				return true, nil // collected below the checkpoint
			}
			why = fmt.Sprintf("the largest commit ts below %s is %d, above the checkpoint %d, so GC did not remove them", first, rec.Header.Link.PrevMaxTs, cp)
		}
		if len(framed) == 0 {
			return false, fmt.Errorf("writer %s epoch %d: %s missing below %s, on a store that writes an epoch's segments in order: segments the epoch wrote are gone (%s): %w",
				prev.WriterID, prev.Epoch, missing, first, why, segment.ErrCorrupt)
		}
		return false, fmt.Errorf("writer %s epoch %d: %s missing, yet progress frames lie above (in %s), and a frame is stored only after everything below it: segments the epoch made durable are gone (%s): %w",
			prev.WriterID, prev.Epoch, missing, strings.Join(framed, ", "), why, segment.ErrCorrupt)
	}
	missingName := func(from, to uint64) string {
		if from == to {
			return fmt.Sprintf("seq %d", from)
		}
		return fmt.Sprintf("seqs %d..%d", from, to)
	}
	// The walk starts where the published progress is proven: at the
	// published seq, or at the epoch's first segment when nothing was
	// published; anything missing below the start goes through gap.
	start := seqs[0]
	// A published seq of 0 names no segment (seq 0 is never used): the
	// epoch published flushes that wrote none, and its segments, all
	// above, are walked from its first like those of an epoch that
	// published nothing.
	published := prev.HasSeq && prev.Seq != 0
	if published {
		i, _ := slices.BinarySearch(seqs, prev.Seq)
		if i == len(seqs) {
			return nil, nil
		}
		if seqs[i] != prev.Seq {
			proceed, err := gap(i, prev.Seq, missingName(prev.Seq, seqs[i]-1)+" (the published seq and above)", i == 0)
			if err != nil || !proceed {
				return nil, err
			}
		}
		start = seqs[i]
	} else {
		rec, err := read(start)
		if err != nil {
			return nil, err
		}
		if rec.HasHeader && !rec.Header.Link.First() {
			proceed, err := gap(0, start-1, fmt.Sprintf("the epoch's first segments (below seq %d)", start), true)
			if err != nil || !proceed {
				return nil, err
			}
		}
	}
	type found struct {
		seq    uint64
		active bool
		hdr    segment.Header
		p      segment.ProgressInfo
	}
	var last *found
	var prevHdr segment.Header
	var prevRec *segment.Recovery
	var prevActive bool
	var beforePrev *found // last as it stood before the predecessor
	for seq := start; ; seq++ {
		l, ok := segs[seq]
		if !ok {
			if j, _ := slices.BinarySearch(seqs, seq); j < len(seqs) {
				if _, err := gap(j, seq, missingName(seq, seqs[j]-1), false); err != nil {
					return nil, err
				}
			}
			break
		}
		rec, err := read(seq)
		if err != nil {
			return nil, err
		}
		if !rec.HasHeader {
			if next, ok := segs[seq+1]; ok {
				return nil, fmt.Errorf("read %s: no whole header, but its successor %s links it: %w", l.key, next.key, segment.ErrCorrupt)
			}
			if !l.active || !appendable {
				return nil, fmt.Errorf("read %s: no whole header: %w", l.key, segment.ErrCorrupt)
			}
			break // torn while it was created: it holds nothing
		}
		h := rec.Header
		if h.Epoch != prev.Epoch || h.Seq != seq || h.LogID != prev.LogID || h.WriterID != prev.WriterID {
			return nil, fmt.Errorf("read %s: its header says log %q writer %q epoch %d seq %d: %w", l.key, h.LogID, h.WriterID, h.Epoch, h.Seq, segment.ErrCorrupt)
		}
		if !l.active && !rec.Sealed {
			return nil, fmt.Errorf("read %s: a sealed name without a whole footer and trailer: %w", l.key, segment.ErrCorrupt)
		}
		if seq != start {
			lk := h.Link
			if lk.PrevSeq != seq-1 || lk.PrevHeaderCRC != prevHdr.CRC {
				return nil, fmt.Errorf("%s does not link its predecessor seq %d (header CRC %#08x): it links seq %d, header CRC %#08x: %w",
					l.key, seq-1, prevHdr.CRC, lk.PrevSeq, lk.PrevHeaderCRC, segment.ErrCorrupt)
			}
			// The predecessor's blocks are those the link names. An active
			// one abandoned after a failed sync may hold more, and a
			// progress frame after them was never reported.
			k := -1
			for n := len(prevRec.Blocks); n >= 0; n-- {
				if segment.FooterCRC(prevRec.Blocks[:n]) == lk.PrevFooterCRC && chainMaxOf(prevHdr.Link, prevRec.Blocks[:n]) == lk.PrevMaxTs {
					k = n
					break
				}
				if !prevActive {
					break // a sealed predecessor holds exactly what it links
				}
			}
			if k < 0 {
				return nil, fmt.Errorf("%s links a footer CRC %#08x and chain max ts %d that no prefix of seq %d's %d blocks has: %w",
					l.key, lk.PrevFooterCRC, lk.PrevMaxTs, seq-1, len(prevRec.Blocks), segment.ErrCorrupt)
			}
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
			last = &found{seq: seq, active: l.active, hdr: h, p: rec.Progress[k-1]}
		}
		prevHdr, prevRec, prevActive = h, rec, l.active
	}
	if last == nil || published && last.seq == prev.Seq && !last.active {
		return nil, nil
	}
	spans := make([]meta.SpanTs, len(last.p.Spans))
	for i, s := range last.p.Spans {
		spans[i] = meta.SpanTs{Span: meta.SpanID(s.Span), Ts: s.Ts}
	}
	log.Info("the previous epoch made progress durable beyond what it published", "epoch", prev.Epoch,
		"published_seq", prev.Seq, "published_ts", prev.FlushedTs, "durable_seq", last.seq, "durable_ts", last.p.FlushedTs)
	return &meta.Progress{FlushedTs: last.p.FlushedTs, Seq: last.seq, ChainMaxTs: last.p.ChainMaxTs, Digest: last.hdr.CRC, Spans: spans}, nil
}

// checkpointTs is the log's checkpoint (0 without a meta object: then no GC
// has run).
func checkpointTs(ctx context.Context, b *blob.Bucket, logID string) (uint64, error) {
	m, _, err := meta.ReadMeta(ctx, b, logID)
	switch {
	case blob.IsNotExist(err):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("read the checkpoint: %w", err)
	}
	return m.CheckpointTs, nil
}
