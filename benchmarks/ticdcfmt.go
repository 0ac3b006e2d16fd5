package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	"github.com/redokit/redokit/benchmarks/internal/msgpbench"
)

// TiCDC's redo file format (shared/reference/ticdc-redo.md §1, §2), shared
// by the model of its writer (ticdcPeer, peers.go) and the model of its
// apply reader on TiCDC-format files (ticdcmerge.go): each record is
// msgpbench.Append's bytes (0xff 0xff, the codec version, msgpack) in a
// frame of an 8-byte little-endian length word (the low 56 bits the
// record's length; when the record is padded to 8 bytes, the top byte is
// 0x80|padding) and the record, zero-padded to 8 bytes. No checksum.
const ticdcFrameWord = 8

// appendTicdcFrame appends rl to dst as one frame and returns the extended
// slice and n, the record's length (prefix and msgpack, without the length
// word and the padding).
func appendTicdcFrame(dst []byte, rl *msgpbench.RedoLog) ([]byte, int) {
	off := len(dst)
	b := append(dst, make([]byte, ticdcFrameWord)...)
	b = msgpbench.Append(b, rl)
	n := len(b) - off - ticdcFrameWord
	word := uint64(n)
	if pad := (8 - n%8) % 8; pad > 0 {
		b = append(b, make([]byte, pad)...)
		word |= uint64(0x80|pad) << 56
	}
	binary.LittleEndian.PutUint64(b[off:], word)
	return b, n
}

// ticdcFrameSize splits a length word into the record's length and its
// padding (TiCDC's decodeFrameSize: the padding is in the low 3 bits of the
// top byte when its top bit is set).
func ticdcFrameSize(word uint64) (n, pad uint64) {
	n = word &^ (uint64(0xff) << 56)
	if word>>63 == 1 {
		pad = (word >> 56) & 0x7
	}
	return n, pad
}

// nextTicdcFrame splits the next frame off data, a whole file's frames in
// memory: the record and the rest. io.EOF when data is empty.
func nextTicdcFrame(data []byte) (rec, rest []byte, err error) {
	if len(data) == 0 {
		return nil, nil, io.EOF
	}
	if len(data) < ticdcFrameWord {
		return nil, nil, fmt.Errorf("torn frame: %d bytes left", len(data))
	}
	n, pad := ticdcFrameSize(binary.LittleEndian.Uint64(data))
	if uint64(len(data)-ticdcFrameWord) < n+pad {
		return nil, nil, fmt.Errorf("torn frame: %d bytes left for a frame of %d", len(data)-ticdcFrameWord, n+pad)
	}
	data = data[ticdcFrameWord:]
	return data[:n], data[n+pad:], nil
}

// readTicdcFrame reads the next frame from r into buf (grown as needed)
// and returns the buffer and the record in it; io.EOF exactly at a frame
// boundary.
func readTicdcFrame(r io.Reader, buf []byte) (newBuf, rec []byte, err error) {
	var hdr [ticdcFrameWord]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return buf, nil, err
	}
	n, pad := ticdcFrameSize(binary.LittleEndian.Uint64(hdr[:]))
	buf = slices.Grow(buf[:0], int(n+pad))[:n+pad]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return buf, nil, fmt.Errorf("torn frame: %w", err)
	}
	return buf, buf[:n], nil
}

// unmarshalTicdcRecord decodes one record (TiCDC's prefix, then msgpack)
// into rl. msgp copies what it decodes: rl does not keep rec.
func unmarshalTicdcRecord(rec []byte, rl *msgpbench.RedoLog) error {
	if !bytes.HasPrefix(rec, msgpbench.Prefix) {
		return fmt.Errorf("a record without TiCDC's prefix % x", msgpbench.Prefix)
	}
	rest, err := rl.UnmarshalMsg(rec[len(msgpbench.Prefix):])
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return fmt.Errorf("%d bytes after the record", len(rest))
	}
	return nil
}
