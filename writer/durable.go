package writer

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

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
// A segment that cannot be read, or a chain that breaks where both sides
// are listed, is an error naming the keys: a guess here could drop reported
// data or accept a zombie's.
func durableProgress(ctx context.Context, b *blob.Bucket, prev *meta.WriterState, appendable bool, log *slog.Logger) (*meta.Progress, error) {
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
	if len(segs) == 0 {
		return nil, nil
	}
	seqs := make([]uint64, 0, len(segs))
	for s := range segs {
		seqs = append(seqs, s)
	}
	slices.Sort(seqs)
	// The walk starts where the published progress is proven: at the
	// published seq, or right above it when GC took it; at the epoch's first
	// segment when nothing was published (checked below: it must link
	// nothing). A gap before the start means nothing above it is proven.
	start := seqs[0]
	if prev.HasSeq {
		i, _ := slices.BinarySearch(seqs, prev.Seq)
		if i == len(seqs) {
			return nil, nil
		}
		if seqs[i] > prev.Seq+1 {
			// An upload that failed while a later one landed leaves this
			// gap, and then no flush past it was reported; so would a
			// segment deleted after its flush was reported, which no
			// listing can tell apart. The fence leaves them out either
			// way: say so, naming them.
			log.Warn("segments of the previous epoch lie past a gap above its published seq: fenced out, not read", "epoch", prev.Epoch,
				"published_seq", prev.Seq, "first_after_gap", segs[seqs[i]].key)
			return nil, nil
		}
		start = seqs[i]
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
			break
		}
		rd, err := b.NewReader(ctx, l.key)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", l.key, err)
		}
		rec, err := segment.Recover(rd, &segment.ScannerOptions{Object: l.key})
		rd.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", l.key, err)
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
		if seq == start && !prev.HasSeq && !h.Link.First() {
			// The epoch's first segment is missing (its upload failed while a
			// later one landed): no frame of the epoch is proven reported.
			log.Warn("the previous epoch's first segment is missing: its later segments are fenced out, not read", "epoch", prev.Epoch, "first_found", l.key)
			return nil, nil
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
	if last == nil || prev.HasSeq && last.seq == prev.Seq && !last.active {
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
