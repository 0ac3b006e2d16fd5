package reader

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/segment"
)

// A damaged block is named by the commit-ts range it held, beside its key
// and offset, so that an operator knows which range of the log is at risk
// and how far a replay can go without it (up to just below the range).

// damagedBlock is a *segment.CorruptionError of a block (a copy whose
// Detail names the range) with the commit-ts range the block held. It
// unwraps to the CorruptionError: errors.Is(err, segment.ErrCorrupt) and
// errors.As(err, **segment.CorruptionError) see it as before.
type damagedBlock struct {
	ce *segment.CorruptionError
	// min and max bound the commit ts of the block's events, both
	// included; max is math.MaxUint64 when nothing after the block bounds
	// it, min 0 when nothing before it does.
	min, max uint64
}

func (e *damagedBlock) Error() string { return e.ce.Error() }
func (e *damagedBlock) Unwrap() error { return e.ce }

// blockCorruption returns err's *segment.CorruptionError when it is about
// the block at offset off, else nil.
func blockCorruption(err error, off int64) *segment.CorruptionError {
	var ce *segment.CorruptionError
	if !errors.As(err, &ce) || ce.Part != "block" || ce.Offset != off {
		return nil
	}
	return ce
}

func newDamagedBlock(ce *segment.CorruptionError, min, max uint64, says string) error {
	c := *ce
	c.Detail += "; " + says
	return &damagedBlock{ce: &c, min: min, max: max}
}

// sealedBlockDamage names, in a corruption error of block bi of a sealed
// segment, the commit-ts range the footer's index gives the block (the
// footer's own CRC holds: the segment opened). Any other error is returned
// as it is.
func sealedBlockDamage(err error, bi segment.BlockInfo) error {
	ce := blockCorruption(err, bi.Offset)
	if ce == nil {
		return err
	}
	return newDamagedBlock(ce, bi.MinTs, bi.MaxTs,
		fmt.Sprintf("the block holds commit ts [%d, %d] (the footer's index)", bi.MinTs, bi.MaxTs))
}

// activeBlockDamage names, in a corruption error of a block of the active
// segment key (size bytes), the commit-ts range the block can hold. An
// active segment has no index: when the block's own frame is valid (what
// failed is a rule between it and the blocks before it, their order), its
// header gives the range; otherwise its neighbours bound it, at or above
// the max ts of the whole block before it (the last of blocks, the blocks
// read before the damage) and at or below the min ts of the first whole,
// valid block after it. Both are read from the object again. Any other
// error is returned as it is.
func activeBlockDamage(ctx context.Context, b *blob.Bucket, key string, size int64, blocks []segment.BlockInfo, err error) error {
	var ce *segment.CorruptionError
	if !errors.As(err, &ce) || ce.Part != "block" {
		return err
	}
	hdr, rest := readFrom(ctx, b, key, size, ce.Offset)
	if own, ok := blockAt(hdr, rest, 0); ok {
		return newDamagedBlock(ce, own.MinTs, own.MaxTs,
			fmt.Sprintf("the block holds commit ts [%d, %d] (its header: its own bytes are whole)", own.MinTs, own.MaxTs))
	}
	lo, hi := uint64(0), uint64(math.MaxUint64)
	if n := len(blocks); n > 0 {
		lo = blocks[n-1].MaxTs
	}
	for p := 1; p < len(rest); p++ {
		if next, ok := blockAt(hdr, rest, p); ok {
			hi = next.MinTs
			break
		}
	}
	var says string
	switch {
	case lo > 0 && hi < math.MaxUint64:
		says = fmt.Sprintf("the block holds commit ts in [%d, %d] (the max ts of the block before it, the min ts of the block after it)", lo, hi)
	case hi < math.MaxUint64:
		says = fmt.Sprintf("the block holds commit ts at or below %d (the min ts of the block after it; it is the segment's first block, so nothing bounds it below)", hi)
	case lo > 0:
		says = fmt.Sprintf("the block holds commit ts at or above %d (the max ts of the block before it; no whole block follows it)", lo)
	default:
		says = "no whole block before or after it bounds the commit ts it held"
	}
	return newDamagedBlock(ce, lo, hi, says)
}

// readFrom reads the header of the segment key (size bytes) and its bytes
// from offset off to its end; nil when it cannot.
func readFrom(ctx context.Context, b *blob.Bucket, key string, size, off int64) (hdr, rest []byte) {
	if off < segment.HeaderSize || off >= size {
		return nil, nil
	}
	hdr, err := b.ReadRange(ctx, key, 0, segment.HeaderSize)
	if err != nil || len(hdr) != segment.HeaderSize {
		return nil, nil
	}
	rest, err = b.ReadRange(ctx, key, off, size-off)
	if err != nil {
		return nil, nil
	}
	return hdr, rest
}

// blockFrameType and blockStoredAt are the block frame's type byte and the
// offset of its stored length in its header (docs/FORMAT.md, "Block").
const (
	blockFrameType = 1
	blockStoredAt  = 4
)

// blockAt reports the block whose frame starts at rest[p], when one does
// and it is whole and valid: a segment.Scanner checks it after the
// segment's header hdr, as if it were the segment's first block (so only
// the rules between it and earlier blocks are not checked).
func blockAt(hdr, rest []byte, p int) (segment.BlockInfo, bool) {
	if hdr == nil || p+segment.BlockHeaderSize > len(rest) || rest[p] != blockFrameType {
		return segment.BlockInfo{}, false
	}
	end := int64(p) + segment.BlockHeaderSize + int64(binary.LittleEndian.Uint32(rest[p+blockStoredAt:]))
	if end > int64(len(rest)) {
		return segment.BlockInfo{}, false
	}
	sc := segment.NewScanner(io.MultiReader(bytes.NewReader(hdr), bytes.NewReader(rest[p:end])), nil)
	if _, err := sc.Header(); err != nil {
		return segment.BlockInfo{}, false
	}
	blk, err := sc.NextBlock()
	if err != nil {
		return segment.BlockInfo{}, false
	}
	return blk.Info, true
}

// blockRange returns the commit-ts range err names for a damaged block.
func blockRange(err error) (min, max uint64, ok bool) {
	var d *damagedBlock
	if !errors.As(err, &d) {
		return 0, 0, false
	}
	return d.min, d.max, true
}
