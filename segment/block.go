package segment

import (
	"encoding/binary"

	"github.com/pierrec/lz4/v4"
)

// Record is one entry of a block: a commit ts, a kind, and the payload the
// codec package encoded. The payload aliases the reader's buffer: it is valid
// until the next call on the reader, scanner or block that returned it.
type Record struct {
	CommitTs uint64
	Kind     Kind
	Payload  []byte
}

// Block is one decoded block. Its records were fully checked when the block
// was loaded, so iterating them cannot fail. A Block belongs to the Reader or
// Scanner that returned it and is reused by the next load.
type Block struct {
	Info  BlockInfo
	Codec Compression // how this block was stored

	data []byte // uncompressed records
	pos  int    // next record in data
	ts   uint64 // commit ts of the record before pos
}

// Next returns the next record of the block, or false after the last one.
func (b *Block) Next() (Record, bool) {
	if b.pos >= len(b.data) {
		return Record{}, false
	}
	// The block was validated on load; these reads cannot go out of range.
	d := b.data[b.pos:]
	// The common cases inline: a ts delta of one byte, a payload length of
	// one or two.
	delta, n := uint64(d[0]), 1
	if delta >= 0x80 {
		delta, n = binary.Uvarint(d)
	}
	kind := Kind(d[n])
	p := d[n+1:]
	size, m := uint64(p[0]), 1
	if size >= 0x80 {
		if len(p) > 1 && p[1] < 0x80 {
			size, m = size&0x7f|uint64(p[1])<<7, 2
		} else {
			size, m = binary.Uvarint(p)
		}
	}
	start := n + 1 + m
	b.ts += delta
	b.pos += start + int(size)
	return Record{CommitTs: b.ts, Kind: kind, Payload: d[start : start+int(size) : start+int(size)]}, true
}

// uvarint is binary.Uvarint with the records' common cases first: a ts
// delta fits one byte, a payload length one or two.
func uvarint(b []byte) (uint64, int) {
	if len(b) >= 2 {
		if b[0] < 0x80 {
			return uint64(b[0]), 1
		}
		if b[1] < 0x80 {
			return uint64(b[0]&0x7f) | uint64(b[1])<<7, 2
		}
	}
	return binary.Uvarint(b)
}

// Rewind makes Next start again from the block's first record.
func (b *Block) Rewind() {
	b.pos = 0
	b.ts = b.Info.MinTs
}

// appendRecord appends the encoding of one record to dst: the ts delta from the
// previous record of the block (from the block's first record for the first
// one, so 0), the kind, the payload length, the payload.
func appendRecord(dst []byte, delta uint64, kind Kind, payload []byte) []byte {
	dst = binary.AppendUvarint(dst, delta)
	dst = append(dst, byte(kind))
	dst = binary.AppendUvarint(dst, uint64(len(payload)))
	return append(dst, payload...)
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// blockDecoder turns block frames into Blocks, reusing its buffers so that
// reading costs no allocation per block once they have grown.
type blockDecoder struct {
	ub  []byte // decompression buffer
	blk Block
}

// growBuf returns buf if it can hold n bytes, and otherwise a new buffer of
// n bytes with a quarter more capacity (and at least 4 KiB), contents not
// kept. Blocks of one segment vary in size around the writer's target, so a
// buffer grown to exactly one block's size would be reallocated by the next,
// slightly larger one: the headroom makes the first allocation the last.
// Callers pass lengths already checked against MaxBlockSize.
func growBuf(buf []byte, n int) []byte {
	if cap(buf) >= n {
		return buf[:cap(buf)]
	}
	return make([]byte, max(n+n/4, 4<<10))
}

// decode checks frame, which must be exactly one block frame found at off,
// and loads it into d.blk. Problems found before the CRC holds are soft; any
// after are hard.
func (d *blockDecoder) decode(frame []byte, off int64) (*Block, *problem) {
	bh, p := parseBlockHeader(frame, off)
	if p != nil {
		return nil, p
	}
	if len(frame) != BlockHeaderSize+bh.stored {
		return nil, soft("block", off, "frame is %d bytes, header says %d", len(frame), BlockHeaderSize+bh.stored)
	}
	payload := frame[BlockHeaderSize:]
	if got := blockCRC(frame, payload); got != bh.crc {
		return nil, soft("block", off, "CRC32C mismatch: stored %#08x, computed %#08x", bh.crc, got)
	}
	if frame[bReserved] != 0 || frame[bReserved+1] != 0 {
		return nil, hard("block", off, "reserved bytes %x are not zero", frame[bReserved:bReserved+2])
	}
	data := payload
	if bh.codec == CompressionLZ4 {
		d.ub = growBuf(d.ub, bh.uncompressed)
		data = d.ub[:bh.uncompressed]
		n, err := lz4.UncompressBlock(payload, data)
		if err != nil {
			return nil, hard("block", off, "lz4: %v", err)
		}
		if n != bh.uncompressed {
			return nil, hard("block", off, "lz4 output is %d bytes, header says %d", n, bh.uncompressed)
		}
	}
	if p := checkRecords(data, &bh, off); p != nil {
		return nil, p
	}
	d.blk = Block{Info: bh.info(off), Codec: bh.codec, data: data, ts: bh.minTs}
	return &d.blk, nil
}

// checkRecords walks the records of a block once, so that Block.Next can trust
// them: exactly bh.records of them fill data, commit ts never goes down and
// runs from bh.minTs to bh.maxTs, kinds are known and bh.ddls are DDLs.
func checkRecords(data []byte, bh *blockHeader, off int64) *problem {
	ts := bh.minTs
	ddls := 0
	pos := 0
	for i := range bh.records {
		if pos >= len(data) {
			return hard("block", off, "record %d of %d starts past the end of the %d-byte block", i, bh.records, len(data))
		}
		delta, n := uvarint(data[pos:])
		if n <= 0 {
			return hard("block", off, "record %d at block byte %d: bad ts delta varint", i, pos)
		}
		if i == 0 && delta != 0 {
			return hard("block", off, "record 0: ts delta %d, must be 0", delta)
		}
		if delta > bh.maxTs-ts {
			return hard("block", off, "record %d at block byte %d: commit ts %d+%d passes the block's max %d", i, pos, ts, delta, bh.maxTs)
		}
		ts += delta
		pos += n
		if pos >= len(data) {
			return hard("block", off, "record %d: truncated after its ts", i)
		}
		kind := Kind(data[pos])
		if !kind.valid() {
			return hard("block", off, "record %d at block byte %d: unknown kind %d", i, pos, data[pos])
		}
		if kind == KindDDL {
			ddls++
		}
		pos++
		size, m := uvarint(data[pos:])
		if m <= 0 {
			return hard("block", off, "record %d at block byte %d: bad payload length varint", i, pos)
		}
		pos += m
		if size > uint64(len(data)-pos) {
			return hard("block", off, "record %d: payload of %d bytes passes the end of the block", i, size)
		}
		pos += int(size)
	}
	switch {
	case pos != len(data):
		return hard("block", off, "%d bytes after the last of %d records", len(data)-pos, bh.records)
	case ts != bh.maxTs:
		return hard("block", off, "last record's commit ts %d is not the block's max %d", ts, bh.maxTs)
	case ddls != bh.ddls:
		return hard("block", off, "%d DDL records, header says %d", ddls, bh.ddls)
	}
	return nil
}

// validBlockAt reports whether b begins with a whole block frame whose CRC
// holds. It is the test for "valid data follows" when deciding whether damage
// is a torn tail, so it must not allocate or decompress.
func validBlockAt(b []byte) bool {
	bh, p := parseBlockHeader(b, 0)
	if p != nil || len(b)-BlockHeaderSize < bh.stored {
		return false
	}
	return blockCRC(b, b[BlockHeaderSize:BlockHeaderSize+bh.stored]) == bh.crc
}

// codecAllowed rejects a block whose codec the segment's policy does not
// allow: a writer with policy none never compresses, so an lz4 block under it
// was not written by a Writer. (Under policy lz4 a raw block is normal: lz4
// did not make it smaller.) The block's CRC holds, so this is corruption.
func codecAllowed(h Header, b *Block) *problem {
	if h.Compression == CompressionNone && b.Codec != CompressionNone {
		return hard("block", b.Info.Offset, "%v block in a segment whose compression policy is none", b.Codec)
	}
	return nil
}
