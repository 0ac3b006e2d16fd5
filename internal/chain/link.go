package chain

import (
	"context"
	"fmt"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
)

// ChainMaxOf is the chain max ts through a segment with link l holding
// blocks: the largest commit ts of the epoch's segments up to it.
func ChainMaxOf(l segment.Link, blocks []segment.BlockInfo) uint64 {
	m := l.PrevMaxTs
	for _, b := range blocks {
		m = max(m, b.MaxTs)
	}
	return m
}

// Successor is the link the successor of the segment with header hdr (as
// written, CRC included) carries, when blocks are its final blocks.
func Successor(hdr segment.Header, blocks []segment.BlockInfo) segment.Link {
	return segment.Link{PrevSeq: hdr.Seq, PrevMaxTs: ChainMaxOf(hdr.Link, blocks), PrevHeaderCRC: hdr.CRC, PrevFooterCRC: segment.FooterCRC(blocks)}
}

// LinkedPrefix returns how many of a predecessor's whole blocks the link l
// of its successor names: the prefix whose footer CRC and chain max ts are
// the link's. A sealed predecessor holds exactly what it links, so only all
// of its blocks may match; an active one may hold more than its successor
// linked (blocks appended after a failed sync, or a zombie's), so the
// longest matching prefix counts. It does not compare the seq and header
// CRC (LinkMismatch does).
func LinkedPrefix(pred segment.Header, blocks []segment.BlockInfo, active bool, l segment.Link) (int, bool) {
	for k := len(blocks); k >= 0; k-- {
		if segment.FooterCRC(blocks[:k]) == l.PrevFooterCRC && ChainMaxOf(pred.Link, blocks[:k]) == l.PrevMaxTs {
			return k, true
		}
		if !active {
			break
		}
	}
	return 0, false
}

// Pred is what is known of a segment's predecessor for the link check.
type Pred struct {
	Key    string
	Header segment.Header // its header (the CRC and its own link)
	Sealed bool
	// Of a sealed predecessor: its footer's CRC and max ts, when known
	// (HaveFooter). CheckMax also compares the chain max ts through it.
	HaveFooter bool
	FooterCRC  uint32
	MaxTs      uint64
	CheckMax   bool
	// Of an active predecessor: its whole blocks, when they were read
	// (nil: only the header CRC can be compared).
	Blocks []segment.BlockInfo
}

// LinkMismatch compares the link l of the segment succ with its
// predecessor, and says what is wrong, or "". A link to a sealed
// predecessor names its footer; a link to an active one names a prefix of
// its whole blocks (FORMAT.md, "When a link is made": recovery seals
// exactly that prefix), and nothing else.
func LinkMismatch(succ string, l segment.Link, p Pred) string {
	if l.PrevHeaderCRC != p.Header.CRC {
		return fmt.Sprintf("%q links a predecessor with header CRC %#08x, but %q has %#08x", succ, l.PrevHeaderCRC, p.Key, p.Header.CRC)
	}
	switch {
	case p.Sealed && p.HaveFooter:
		if l.PrevFooterCRC != p.FooterCRC {
			return fmt.Sprintf("%q links a predecessor with footer CRC %#08x, but %q has %#08x", succ, l.PrevFooterCRC, p.Key, p.FooterCRC)
		}
		if want := max(p.Header.Link.PrevMaxTs, p.MaxTs); p.CheckMax && l.PrevMaxTs != want {
			return fmt.Sprintf("%q links a predecessor chain holding commit ts up to %d, but the chain up to %q holds up to %d", succ, l.PrevMaxTs, p.Key, want)
		}
	case !p.Sealed && p.Blocks != nil:
		if _, ok := LinkedPrefix(p.Header, p.Blocks, true, l); !ok {
			return fmt.Sprintf("%q links a predecessor with footer CRC %#08x and chain max ts %d, but no prefix of the %d whole blocks of the active %q has them",
				succ, l.PrevFooterCRC, l.PrevMaxTs, len(p.Blocks), p.Key)
		}
	}
	return ""
}

// LinkedBlocks reads the header of succ, the next segment of key's epoch,
// and returns how many of blocks (key's whole blocks, header h; key is
// active) its link names. A link to another segment, or to no prefix of
// the blocks, is an error naming both keys.
func LinkedBlocks(ctx context.Context, b *blob.Bucket, key string, h segment.Header, blocks []segment.BlockInfo, succ string) (int, error) {
	hb, err := b.ReadRange(ctx, succ, 0, segment.HeaderSize)
	if err != nil {
		return 0, fmt.Errorf("read the header of %s's successor %s: %w", key, succ, err)
	}
	sh, err := segment.DecodeHeader(hb, succ)
	if err != nil {
		return 0, fmt.Errorf("%s's successor: %w", key, err)
	}
	l := sh.Link
	if l.PrevSeq != h.Seq || l.PrevHeaderCRC != h.CRC {
		return 0, fmt.Errorf("%s (seq %d, header CRC %#08x): its successor %s links seq %d with header CRC %#08x: %w",
			key, h.Seq, h.CRC, succ, l.PrevSeq, l.PrevHeaderCRC, segment.ErrCorrupt)
	}
	k, ok := LinkedPrefix(h, blocks, true, l)
	if !ok {
		return 0, fmt.Errorf("%s: no prefix of its %d whole blocks has the footer CRC %#08x and chain max ts %d its successor %s links: blocks the chain needs are lost: %w",
			key, len(blocks), l.PrevFooterCRC, l.PrevMaxTs, succ, segment.ErrCorrupt)
	}
	return k, nil
}

// FencedBlocks returns how many of the whole blocks of a crashed epoch's
// unsealed segment (of epoch, recovered as rec) its fence covers, for the
// next epoch's recovery to keep: st is the new epoch's state, prev the
// state it replaced. For the epoch just replaced, the fence took its last
// durable progress frame (Durable), so the blocks after the last frame at
// or below the fence's max ts belong to a flush never reported (or
// reported by a zombie after the fence, which counts for nothing); in a
// segment without progress frames (format version 2), the blocks above
// the highest ts the epoch published, for the writer or any span. Older
// epochs' segments keep all their blocks.
func FencedBlocks(rec *segment.Recovery, epoch uint64, st, prev *meta.WriterState) int {
	keep := len(rec.Blocks)
	if prev == nil || epoch != prev.Epoch {
		return keep
	}
	if len(rec.Progress) > 0 {
		f, _ := st.Fence(epoch)
		fenceMax := f.MaxTs
		keep = 0
		for _, p := range rec.Progress {
			if p.ChainMaxTs <= fenceMax {
				keep = p.Blocks
			}
		}
		return keep
	}
	cut := prev.FlushedTs
	for _, s := range prev.Spans {
		cut = max(cut, s.Ts)
	}
	for i, b := range rec.Blocks {
		if b.MaxTs > cut {
			return i
		}
	}
	return keep
}
