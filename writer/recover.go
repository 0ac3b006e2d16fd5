package writer

import (
	"context"
	"fmt"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/internal/chain"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
)

// restart looks at what earlier epochs of the writer ID left: it returns the
// next sequence number (one above the highest of any epoch, so names keep
// increasing across restarts) and, on an appendable backend, recovers the
// active segments earlier epochs left unsealed.
func (w *Writer) restart(ctx context.Context, lease *meta.Lease) (uint64, error) {
	st := lease.State()
	prefix := layout.WriterSegments(w.o.LogID, w.o.WriterID)
	var maxSeq uint64
	var any bool
	var actives []segment.Name
	entries, err := chain.List(ctx, w.b, w.o.LogID, prefix)
	if err != nil {
		return 0, fmt.Errorf("writer %s/%s: %w", w.o.LogID, w.o.WriterID, err)
	}
	var good []chain.Entry
	for _, e := range entries {
		if e.Err != nil {
			w.log.Warn("ignoring an object that is not a segment", "key", e.Key, "err", e.Err)
			continue
		}
		n := e.Name
		if !any || n.Seq > maxSeq {
			maxSeq, any = n.Seq, true
		}
		good = append(good, e)
		if n.Active && n.Epoch < st.Epoch {
			actives = append(actives, n)
		}
	}
	ix := chain.NewIndex(good, nil)
	if len(actives) > 0 && !w.append {
		w.log.Warn("active segments on a backend that cannot append; leaving them", "count", len(actives))
		actives = nil
	}
	for _, n := range actives {
		// A successor the fences accept links this segment: its link, not
		// a guess, says which blocks the segment must keep.
		succ := ""
		if e, ok := ix[chain.KeyOf(n)][n.Seq+1]; ok && st.Accepts(e.Name) {
			succ = e.Key
		}
		if err := w.recoverActive(ctx, n, &st, lease.Previous, succ); err != nil {
			return 0, err
		}
	}
	if !any {
		// Seq 0 is never used, so that a published seq of 0 means "no
		// segment" in every epoch's fence.
		return 1, nil
	}
	return maxSeq + 1, nil
}

// recoverActive makes an earlier epoch's unsealed segment final:
//
//   - one the new epoch's fences do not accept (written after the last
//     progress its epoch published) holds nothing that was reported
//     flushed, and is deleted;
//   - one that is still open elsewhere (a zombie holds its lock) is left
//     alone: readers read it as an active segment, and the zombie's
//     appends are beyond its fence anyway;
//   - otherwise its torn tail is cut at the last whole frame, and for the
//     previous epoch so are the blocks after its last progress frame (or,
//     in a segment of format version 2, above the epoch's published
//     flushed ts): they were never reported, and the new epoch writes
//     those events again, so keeping them would only make duplicates. What
//     is left is sealed under the segment's own (old-epoch) name. Nothing
//     left is an error: the fence accepts the segment, so it held reported
//     blocks, and deleting it would hide that they are gone;
//   - but when succ, the key of the segment with the next seq of the same
//     epoch, is accepted by the fences, its link decides: the segment keeps
//     exactly the blocks whose footer the link names (those it had when its
//     writer moved on to succ), and is sealed even if that leaves it empty,
//     since deleting it would break the chain. No prefix of its blocks
//     matching the link is an error naming both keys: blocks the chain
//     needs are gone.
//
// A segment that is damaged other than at its tail, or torn inside its header
// while an accepted successor links it, is an error naming it: nothing is
// deleted, and Open fails.
func (w *Writer) recoverActive(ctx context.Context, n segment.Name, st *meta.WriterState, prev *meta.WriterState, succ string) error {
	key := n.Format()
	log := w.log.With("key", key)
	if !st.Accepts(n) {
		log.Info("deleting an unsealed segment written after its epoch's last published progress")
		if err := w.b.Delete(ctx, key); err != nil {
			return fmt.Errorf("writer: recover %s: delete: %w", key, err)
		}
		return nil
	}
	af, err := w.b.OpenAppend(ctx, key)
	if blob.IsPreconditionFailed(err) {
		log.Warn("an unsealed segment is still open in another process; leaving it", "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("writer: recover %s: %w", key, err)
	}
	sealed := false
	defer func() {
		if !sealed {
			af.Close()
		}
	}()
	rd, err := w.b.NewReader(ctx, key)
	if err != nil {
		return fmt.Errorf("writer: recover %s: %w", key, err)
	}
	rec, err := segment.Recover(rd, &segment.ScannerOptions{Object: key})
	rd.Close()
	if err != nil {
		return fmt.Errorf("writer: recover: %w", err)
	}
	drop := func(why string) error {
		log.Info("deleting an unsealed segment: "+why, "torn_bytes", rec.TornBytes)
		af.Close()
		sealed = true
		if err := w.b.Delete(ctx, key); err != nil {
			return fmt.Errorf("writer: recover %s: delete: %w", key, err)
		}
		return nil
	}
	if !rec.HasHeader {
		if succ != "" {
			// Its successor is part of the log and links it: the segment
			// had durable blocks, and deleting it would break the chain.
			return fmt.Errorf("writer: recover %s: no whole header, but its successor %s, which the fence accepts, links it: %w", key, succ, segment.ErrCorrupt)
		}
		return drop("no whole header")
	}
	h := rec.Header
	if h.LogID != n.LogID || h.WriterID != n.WriterID || h.Epoch != n.Epoch || h.Seq != n.Seq {
		return fmt.Errorf("writer: recover %s: its header says log %q writer %q epoch %d seq %d",
			key, h.LogID, h.WriterID, h.Epoch, h.Seq)
	}
	keep, progress, err := w.kept(ctx, key, rec, n, st, prev, succ)
	if err != nil {
		return err
	}
	minTs, maxTs, err := sealRecovered(af, key, rec, keep, progress)
	if err != nil {
		return err
	}
	final := h.SealedName(minTs, maxTs).Format()
	if _, err := af.Seal(ctx, final); err != nil {
		return fmt.Errorf("writer: recover %s: seal as %s: %w", key, final, err)
	}
	sealed = true
	log.Info("recovered an unsealed segment", "sealed_as", final, "blocks", keep,
		"dropped_blocks", len(rec.Blocks)-keep, "torn_bytes", rec.TornBytes)
	return nil
}

// kept decides what an unsealed segment (key, name n, recovered as rec)
// keeps: the blocks its fence covers (chain.FencedBlocks), or, when succ
// (its successor, accepted by the fences) links it, exactly the blocks the
// link names; and the progress frames before the first block cut. Nothing
// kept of a segment the fence accepts is an error.
func (w *Writer) kept(ctx context.Context, key string, rec *segment.Recovery, n segment.Name, st, prev *meta.WriterState, succ string) (int, []segment.ProgressInfo, error) {
	keep := chain.FencedBlocks(rec, n.Epoch, st, prev)
	if succ != "" {
		k, err := chain.LinkedBlocks(ctx, w.b, key, rec.Header, rec.Blocks, succ)
		if err != nil {
			return 0, nil, fmt.Errorf("writer: recover: %w", err)
		}
		if k != keep {
			w.log.Info("the successor's link decides which blocks the segment keeps", "key", key, "successor", succ, "blocks", k, "below_progress", keep)
		}
		keep = k
	}
	// The progress frames before the first block cut stay with the blocks
	// they follow.
	progress := rec.Progress
	for i, p := range progress {
		if p.Blocks > keep {
			progress = progress[:i]
			break
		}
	}
	if succ == "" && keep == 0 && len(progress) == 0 {
		// The fence accepts it, so its epoch made a seq at or above it
		// durable, and every segment up to that seq held reported blocks
		// or progress: none left means they are gone, and deleting the
		// segment would turn that into a silent gap.
		return 0, nil, fmt.Errorf("writer: recover %s: its epoch's fence accepts it, but it holds no whole block or progress frame of what its epoch reported (%d whole blocks, %d progress frames): %w",
			key, len(rec.Blocks), len(rec.Progress), segment.ErrCorrupt)
	}
	return keep, progress, nil
}

// sealRecovered writes the footer of an unsealed segment (key, recovered as
// rec, open for appending as af) over its first keep blocks and the
// progress frames before the first block cut, and returns its ts range.
func sealRecovered(af blob.AppendFile, key string, rec *segment.Recovery, keep int, progress []segment.ProgressInfo) (minTs, maxTs uint64, err error) {
	if rec.Sealed && keep == len(rec.Blocks) && len(progress) == len(rec.Progress) {
		// The footer was written but the rename did not happen.
		minTs, maxTs = rec.Footer.MinTs, rec.Footer.MaxTs
	} else {
		end := int64(segment.HeaderSize)
		if keep > 0 {
			end = rec.Blocks[keep-1].End()
		}
		if k := len(progress); k > 0 {
			end = max(end, progress[k-1].End())
		}
		if err := af.Truncate(end); err != nil {
			return 0, 0, fmt.Errorf("writer: recover %s: truncate to %d: %w", key, end, err)
		}
		sw, err := segment.ResumeWriter(af, rec.Header, rec.Blocks[:keep], progress, end, nil)
		if err != nil {
			return 0, 0, fmt.Errorf("writer: recover %s: %w", key, err)
		}
		f, err := sw.Seal()
		if err != nil {
			return 0, 0, fmt.Errorf("writer: recover %s: write the footer: %w", key, err)
		}
		minTs, maxTs = f.MinTs, f.MaxTs
	}
	return minTs, maxTs, nil
}
