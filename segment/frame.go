package segment

import (
	"fmt"

	"github.com/pierrec/lz4/v4"
)

// This file is the lower-level block API for writers that build, compress
// and write blocks on different goroutines (the redo writer compresses blocks
// on a worker pool while an earlier flush is being synced): a BlockBuilder
// collects the records of one block, a FrameEncoder turns them into a
// finished, checksummed block frame, and Writer.AppendFrame writes that frame
// into a segment. The bytes are exactly those Writer.Append would have
// produced for the same records and block boundaries.

// BlockBuilder collects the records of one block, uncompressed. The zero value
// is an empty builder. It is not safe for concurrent use.
type BlockBuilder struct {
	// buf is room for the frame header, then the encoded records, so that
	// a block stored raw becomes its frame without a copy.
	buf    []byte
	nrec   int
	nddl   int
	minTs  uint64
	lastTs uint64
}

// RecordSize is the number of bytes a record with this commit ts and payload
// length would add to the block: what to check against a target block size
// before appending.
func (b *BlockBuilder) RecordSize(commitTs uint64, payloadLen int) int {
	var delta uint64
	if b.nrec > 0 && commitTs >= b.lastTs {
		delta = commitTs - b.lastTs
	}
	return uvarintLen(delta) + 1 + uvarintLen(uint64(payloadLen)) + payloadLen
}

// Append adds a record to the block. Records must come in non-decreasing
// commit ts (a regression wraps ErrOutOfOrder and adds nothing), kind must be
// known, and the block must stay within MaxBlockSize.
func (b *BlockBuilder) Append(commitTs uint64, kind Kind, payload []byte) error {
	if !kind.valid() {
		return fmt.Errorf("segment: block: unknown record kind %d", kind)
	}
	if b.nrec > 0 && commitTs < b.lastTs {
		return fmt.Errorf("%w: commit ts %d after %d", ErrOutOfOrder, commitTs, b.lastTs)
	}
	if b.Len()+b.RecordSize(commitTs, len(payload)) > MaxBlockSize {
		return fmt.Errorf("segment: block: a record of %d bytes would take the block past %d bytes", len(payload), MaxBlockSize)
	}
	var delta uint64
	if b.nrec == 0 {
		b.minTs = commitTs
		if cap(b.buf) < BlockHeaderSize {
			b.buf = make([]byte, BlockHeaderSize, 4<<10)
		}
		b.buf = b.buf[:BlockHeaderSize]
	} else {
		delta = commitTs - b.lastTs
	}
	b.buf = appendRecord(b.buf, delta, kind, payload)
	b.nrec++
	if kind == KindDDL {
		b.nddl++
	}
	b.lastTs = commitTs
	return nil
}

// Len is the uncompressed size of the records appended so far.
func (b *BlockBuilder) Len() int {
	if b.nrec == 0 {
		return 0
	}
	return len(b.buf) - BlockHeaderSize
}

// Records is the number of records appended so far.
func (b *BlockBuilder) Records() int { return b.nrec }

// Reset empties the builder, keeping its buffer.
func (b *BlockBuilder) Reset() {
	b.buf = b.buf[:0]
	b.nrec, b.nddl, b.minTs, b.lastTs = 0, 0, 0, 0
}

// Frame is one finished block frame, made by FrameEncoder.Encode and written
// with Writer.AppendFrame.
type Frame struct {
	b  []byte
	bh blockHeader
}

// Bytes returns the frame as it is stored. The slice belongs to the frame's
// buffer (see FrameEncoder.Encode).
func (f *Frame) Bytes() []byte { return f.b }

// Len is the stored length of the frame, header included.
func (f *Frame) Len() int { return len(f.b) }

// Info describes the block; its Offset is 0 until a Writer places it.
func (f *Frame) Info() BlockInfo { return f.bh.info(0) }

// FrameEncoder compresses blocks into frames. It keeps the compressor's state
// between calls, so each goroutine that encodes should own one. It is not
// safe for concurrent use.
type FrameEncoder struct {
	lz lz4.Compressor
}

// Encode turns the records of b into a block frame, compressed with c when
// that makes it smaller, as Writer.Append would, and empties b. b must hold at
// least one record. A compressed frame is stored in dst's array (grown when
// it is too small); a block stored raw becomes its frame in place, in b's
// array, and b takes dst's array in exchange: either way no byte is copied
// that need not be.
func (e *FrameEncoder) Encode(dst []byte, b *BlockBuilder, c Compression) (Frame, error) {
	if b.nrec == 0 {
		return Frame{}, fmt.Errorf("segment: encode: the block holds no record")
	}
	if !c.valid() {
		return Frame{}, fmt.Errorf("segment: encode: unknown compression %d", c)
	}
	raw := b.buf[BlockHeaderSize:]
	bh := blockHeader{
		codec: CompressionNone, stored: len(raw), uncompressed: len(raw),
		records: b.nrec, ddls: b.nddl, minTs: b.minTs, maxTs: b.lastTs,
	}
	if c == CompressionLZ4 && len(raw) > 1 {
		n := BlockHeaderSize + len(raw) - 1
		if cap(dst) < n {
			dst = make([]byte, n, n+n/8)
		}
		// As in Writer: a destination one byte short of the input makes
		// lz4 give up as soon as its output could not be smaller.
		if m, err := e.lz.CompressBlock(raw, dst[BlockHeaderSize:n]); err == nil && m > 0 {
			bh.codec, bh.stored = CompressionLZ4, m
			frame := dst[:BlockHeaderSize+m]
			encodeBlockHeader(frame, &bh, frame[BlockHeaderSize:])
			b.Reset()
			return Frame{b: frame, bh: bh}, nil
		}
	}
	frame := b.buf
	encodeBlockHeader(frame, &bh, frame[BlockHeaderSize:])
	b.buf = dst[:0]
	b.Reset()
	return Frame{b: frame, bh: bh}, nil
}

// AppendFrame writes a frame made by FrameEncoder.Encode after the blocks
// already in the segment. Any records buffered by Append are written first as
// their own block. The frame's first commit ts must not be below the last
// record's (ErrOutOfOrder, nothing written); the segment must not be sealed.
// A failed write is sticky, as for Append.
func (w *Writer) AppendFrame(f *Frame) error {
	if err := w.usable(); err != nil {
		return err
	}
	if f.bh.records == 0 || len(f.b) != BlockHeaderSize+f.bh.stored {
		return fmt.Errorf("segment: append frame: not a frame made by FrameEncoder")
	}
	if err := w.closeBlock(); err != nil {
		return err
	}
	if w.haveLast && f.bh.minTs < w.lastTs {
		return fmt.Errorf("%w: frame starts at commit ts %d after %d", ErrOutOfOrder, f.bh.minTs, w.lastTs)
	}
	info := f.bh.info(w.off)
	if err := w.write(f.b); err != nil {
		return err
	}
	w.blocks = append(w.blocks, info)
	w.countBlock(info)
	w.stats.Records += int64(info.Records)
	w.stats.DDLs += int64(info.DDLs)
	w.stats.Rows += int64(info.Records - info.DDLs)
	if !w.haveLast {
		w.stats.MinTs = info.MinTs
	}
	w.stats.MaxTs = info.MaxTs
	w.lastTs, w.haveLast = info.MaxTs, true
	return nil
}

// LastTs returns the commit ts of the last record appended (buffered or
// written) and whether there is one: a caller with records that sort before
// it must start another segment.
func (w *Writer) LastTs() (uint64, bool) { return w.lastTs, w.haveLast }

// ParseFrame makes a Frame of b, which must be exactly one block frame as
// Writer.AppendFrame wrote it at offset off of segment obj (both name it in
// the error): its header is checked and its CRC must hold. The frame keeps
// b. It is how a writer takes back, from its own segment, a frame it let go
// of after writing it: the CRC proves the bytes read are the bytes written
// (after a failed fsync the kernel may have dropped them, and whatever the
// disk held instead is caught here), and a mismatch is a
// CorruptionError.
func ParseFrame(obj string, off int64, b []byte) (Frame, error) {
	bh, p := parseBlockHeader(b, off)
	switch {
	case p != nil:
	case len(b) != BlockHeaderSize+bh.stored:
		p = soft("block", off, "frame is %d bytes, header says %d", len(b), BlockHeaderSize+bh.stored)
	case blockCRC(b, b[BlockHeaderSize:]) != bh.crc:
		p = soft("block", off, "CRC32C mismatch: stored %#08x, computed %#08x", bh.crc, blockCRC(b, b[BlockHeaderSize:]))
	case b[bReserved] != 0 || b[bReserved+1] != 0:
		p = hard("block", off, "reserved bytes %x are not zero", b[bReserved:bReserved+2])
	}
	if p != nil {
		return Frame{}, p.err(obj)
	}
	return Frame{b: b, bh: bh}, nil
}
