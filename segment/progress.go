package segment

import (
	"fmt"
	"slices"
)

// This file is the progress frame (frame type 3, new in format version 3;
// version 4 added the committed ts): a writer's flush progress (its flushed
// resolved ts, its committed ts and the flushed ts of each span) made
// durable in the same segment, with the same sync or upload, as the data it
// covers.

// MaxProgressSpans bounds a progress frame's span count, and therefore what a
// reader allocates for a count read from input: 1<<20 spans make a frame of
// 16 MiB.
const MaxProgressSpans = 1 << 20

// Progress frame layout. Version 4 inserts the committed ts before the
// spans; the fields before it are where version 3 has them.
const (
	pType        = 0
	pReserved    = 1 // 3 bytes
	pCount       = 4
	pFlushedTs   = 8
	pChainMaxTs  = 16
	pSpansV3     = 24 // version 3: N × (span, ts), 16 bytes each
	pCommittedTs = 24 // version 4
	pSpansV4     = 32 // version 4: N × (span, ts)

	progressSpanSize = 16
	progressCRCSize  = 4
	// MinProgressSize is the length of a version-3 progress frame with no
	// spans: the smallest frame of any type and version.
	MinProgressSize = pSpansV3 + progressCRCSize
)

// progressFixed is the length of a progress frame's fixed part in a segment
// of the given format version.
func progressFixed(version uint16) int {
	if version >= 4 {
		return pSpansV4
	}
	return pSpansV3
}

// progressSize is the length of a progress frame holding n spans in a
// segment of the given format version.
func progressSize(n int, version uint16) int {
	return progressFixed(version) + n*progressSpanSize + progressCRCSize
}

// SpanTs is one span's flushed ts in a progress frame, and in a writer
// state (meta.WriterState.Spans, stored as JSON "span" and "ts"): the
// writer publishes the pairs of its newest durable frame as they are.
type SpanTs struct {
	Span uint64 `json:"span"`
	Ts   uint64 `json:"ts"`
}

// Progress is a progress frame's content. meta.Progress is the same
// progress placed in its writer epoch's chain: with the seq of the segment
// that holds it and that segment's header CRC.
type Progress struct {
	FlushedTs uint64
	// CommittedTs is the writer epoch's committed ts: the largest flushed
	// ts of any of its progress frames up to this one (or the ts the epoch
	// started from). An event of the epoch is part of the log only when its
	// commit ts is at or below the committed ts of a durable frame: blocks
	// may hold events staged above it (written before they were resolved,
	// to bound the writer's memory). A version-3 frame has none; decoding
	// one sets it to max(ChainMaxTs, FlushedTs): a version-3 reader cut a
	// fenced epoch at its chain max ts, and no writer of that version
	// stored an event it had not committed. It is never below FlushedTs.
	CommittedTs uint64
	ChainMaxTs  uint64   // set by the Writer on append; checked on read
	Spans       []SpanTs // strictly increasing by Span
}

// ProgressInfo is a progress frame found in or appended to a segment.
type ProgressInfo struct {
	Offset int64 // frame offset in the segment
	Length int   // frame length
	Blocks int   // number of blocks before it in the segment
	Progress
}

// End is the offset just past the progress frame.
func (p ProgressInfo) End() int64 { return p.Offset + int64(p.Length) }

// checkSpans reports why spans cannot be a progress frame's, or "".
func checkSpans(spans []SpanTs) string {
	if len(spans) > MaxProgressSpans {
		return fmt.Sprintf("%d spans exceed the limit %d", len(spans), MaxProgressSpans)
	}
	for i := 1; i < len(spans); i++ {
		if spans[i].Span <= spans[i-1].Span {
			return fmt.Sprintf("span %d (%d) does not follow span %d (%d) in strictly increasing order", i, spans[i].Span, i-1, spans[i-1].Span)
		}
	}
	return ""
}

// AppendProgressFrame appends the progress frame holding p, in the layout of
// FormatVersion, to dst and returns the extended slice. It does not check p:
// a frame whose spans are not strictly increasing, or more than
// MaxProgressSpans, or whose committed ts is below its flushed ts, is one no
// reader accepts (Writer.AppendProgress checks them).
func AppendProgressFrame(dst []byte, p Progress) []byte {
	return appendProgressFrame(dst, p, FormatVersion)
}

// appendProgressFrame appends p in the layout of the given format version
// (3 or 4; version 3 has no committed ts).
func appendProgressFrame(dst []byte, p Progress, version uint16) []byte {
	start := len(dst)
	n := progressSize(len(p.Spans), version)
	dst = slices.Grow(dst, n)[:start+n]
	b := dst[start:]
	b[pType] = frameProgress
	b[pReserved], b[pReserved+1], b[pReserved+2] = 0, 0, 0
	le.PutUint32(b[pCount:], uint32(len(p.Spans)))
	le.PutUint64(b[pFlushedTs:], p.FlushedTs)
	le.PutUint64(b[pChainMaxTs:], p.ChainMaxTs)
	if version >= 4 {
		le.PutUint64(b[pCommittedTs:], p.CommittedTs)
	}
	e := b[progressFixed(version):]
	for _, s := range p.Spans {
		le.PutUint64(e[0:], s.Span)
		le.PutUint64(e[8:], s.Ts)
		e = e[progressSpanSize:]
	}
	end := n - progressCRCSize
	le.PutUint32(b[end:], crc(b[:end]))
	return dst
}

// progressSpanCount checks what bounds a progress frame before its CRC: its
// type and span count. Its problems are soft.
func progressSpanCount(b []byte, off int64) (int, *problem) {
	if len(b) < pSpansV3 {
		return 0, soft("progress", off, "%d bytes, need at least %d", len(b), MinProgressSize)
	}
	if b[pType] != frameProgress {
		return 0, soft("progress", off, "frame type %d is not a progress frame", b[pType])
	}
	n := le.Uint32(b[pCount:])
	if n > MaxProgressSpans {
		return 0, soft("progress", off, "span count %d exceeds the limit %d", n, MaxProgressSpans)
	}
	return int(n), nil
}

// decodeProgress parses and checks the progress frame at the start of b,
// found at off, and returns it with its length. Everything checked after the
// CRC (reserved bytes, span order) is a hard problem. The chain max ts is
// not checked here: that takes the blocks before the frame (Scanner).
func decodeProgress(b []byte, off int64, version uint16) (Progress, int, *problem) {
	n, p := progressSpanCount(b, off)
	if p != nil {
		return Progress{}, 0, p
	}
	size := progressSize(n, version)
	if len(b) < size {
		return Progress{}, 0, soft("progress", off, "%d bytes, but %d spans need %d", len(b), n, size)
	}
	end := size - progressCRCSize
	if got, want := le.Uint32(b[end:]), crc(b[:end]); got != want {
		return Progress{}, 0, soft("progress", off, "CRC32C mismatch: stored %#08x, computed %#08x", got, want)
	}
	if b[pReserved] != 0 || b[pReserved+1] != 0 || b[pReserved+2] != 0 {
		return Progress{}, 0, hard("progress", off, "reserved bytes %x are not zero", b[pReserved:pReserved+3])
	}
	pr := Progress{FlushedTs: le.Uint64(b[pFlushedTs:]), ChainMaxTs: le.Uint64(b[pChainMaxTs:])}
	if version >= 4 {
		pr.CommittedTs = le.Uint64(b[pCommittedTs:])
		if pr.CommittedTs < pr.FlushedTs {
			return Progress{}, 0, hard("progress", off, "committed ts %d is below the flushed ts %d", pr.CommittedTs, pr.FlushedTs)
		}
	} else {
		pr.CommittedTs = max(pr.ChainMaxTs, pr.FlushedTs)
	}
	if n > 0 {
		pr.Spans = make([]SpanTs, n)
		e := b[progressFixed(version):]
		for i := range pr.Spans {
			pr.Spans[i] = SpanTs{Span: le.Uint64(e[0:]), Ts: le.Uint64(e[8:])}
			e = e[progressSpanSize:]
		}
	}
	if msg := checkSpans(pr.Spans); msg != "" {
		return Progress{}, 0, hard("progress", off, "%s", msg)
	}
	return pr, size, nil
}

// DecodeProgressFrame decodes and checks the progress frame at the start of
// b, in the layout of the given format version (3 or 4: see
// Header.Version), and returns it with the frame's length. Bytes after the
// frame are ignored. A frame that is short, out of range, fails its CRC or
// breaks the format under a good CRC is a *CorruptionError (part
// "progress", offset 0). Whether its ChainMaxTs is right depends on the
// segment around it, which only a Scanner knows.
func DecodeProgressFrame(b []byte, version uint16) (Progress, int, error) {
	if version < 3 || !versionSupported(version) {
		return Progress{}, 0, fmt.Errorf("segment: a version-%d segment holds no progress frames of this build's", version)
	}
	p, n, prob := decodeProgress(b, 0, version)
	if prob != nil {
		return Progress{}, 0, prob.err("")
	}
	return p, n, nil
}

// validProgressAt reports whether b begins with a whole progress frame whose
// CRC holds, for the torn-tail test. It allocates nothing.
func validProgressAt(b []byte, version uint16) bool {
	n, p := progressSpanCount(b, 0)
	if p != nil || len(b) < progressSize(n, version) {
		return false
	}
	end := progressSize(n, version) - progressCRCSize
	return le.Uint32(b[end:]) == crc(b[:end])
}

// chainMaxTs is the chain max ts through the blocks given: the max of the
// header link's prev chain max ts and the blocks' max ts.
func chainMaxTs(prev uint64, blocks []BlockInfo) uint64 {
	if n := len(blocks); n > 0 && blocks[n-1].MaxTs > prev {
		return blocks[n-1].MaxTs
	}
	return prev
}
