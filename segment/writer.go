package segment

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// WriterOptions configure a Writer. The zero value (or nil) is valid.
type WriterOptions struct {
	// BlockSize is the target uncompressed size of a block. A block is
	// closed before the record that would take it past the target, so
	// blocks stay at or under it unless a single record is larger. 0 means
	// DefaultBlockSize; at most MaxBlockSize.
	BlockSize int
}

// WriterStats counts what a Writer has done.
type WriterStats struct {
	Records      int64  // records appended, buffered ones included
	Rows         int64  // of which KindRow
	DDLs         int64  // of which KindDDL
	MinTs, MaxTs uint64 // commit ts range of the records; 0 before the first
	Blocks       int    // blocks written
	Uncompressed int64  // uncompressed bytes of the written blocks
	Written      int64  // bytes written to the io.Writer; equal to Offset
	Buffered     int    // bytes of records waiting in the open block
}

// Writer appends records to a segment. It buffers records into a block and
// writes each block with one Write call, so the io.Writer only ever sees whole
// frames; Seal writes the footer and trailer with one more. The same Writer
// serves an appendable file (FlushBlock, then fsync, at every flush) and an
// in-memory buffer that becomes one object when sealed.
//
// After a failed Write the Writer does not know how much of the frame reached
// the io.Writer, so every later call returns that error: recover the segment
// with Recover, truncate it to Recovery.ValidSize and use ResumeWriter.
//
// A Writer is not safe for concurrent use.
type Writer struct {
	w         io.Writer
	hdr       Header
	blockSize int
	enc       *FrameEncoder

	off      int64 // bytes written to w
	blocks   []BlockInfo
	progress []ProgressInfo
	stats    WriterStats
	err      error // sticky write error
	sealed   bool

	bb       BlockBuilder // the open block
	lastTs   uint64       // commit ts of the last record appended, in any block
	haveLast bool

	frame []byte // scratch for the header, a block frame or the footer
}

// NewWriter writes hdr to w and returns a Writer that appends blocks after it.
// hdr.Created is set to now when zero.
func NewWriter(w io.Writer, hdr Header, opts *WriterOptions) (*Writer, error) {
	if hdr.Created.IsZero() {
		hdr.Created = time.Now()
	}
	sw, err := newWriter(w, hdr, opts, false)
	if err != nil {
		return nil, err
	}
	buf := sw.grow(HeaderSize)
	encodeHeader(buf, &sw.hdr)
	if err := sw.write(buf); err != nil {
		return nil, err
	}
	return sw, nil
}

// ResumeWriter returns a Writer that appends to an unsealed segment whose
// header is hdr, whose whole blocks are blocks and whose whole progress
// frames are progress, as Recover reports them (a caller may keep a prefix of
// either). The caller has truncated the segment to end, which is at or after
// the end of the last block or progress frame given, and w is positioned
// there: the Writer continues at end. The blocks and progress frames given
// must follow one another from the end of the header without a gap; any
// bytes between the last of them and end must be whole progress frames the
// caller chose not to pass (the footer Seal writes indexes the blocks given,
// and a reader expects progress frames in its gaps). Nothing is written until the next frame, and the footer
// written by Seal indexes the earlier blocks too. A segment that has not even
// a whole header is started again with NewWriter.
//
// A segment of format version 2 (hdr.Version 2, started by an older build) is
// continued as version 2: it holds no progress frames, so progress must be
// empty and AppendProgress fails.
func ResumeWriter(w io.Writer, hdr Header, blocks []BlockInfo, progress []ProgressInfo, end int64, opts *WriterOptions) (*Writer, error) {
	if hdr.Created.IsZero() {
		return nil, fmt.Errorf("segment: resume: the header has no creation time")
	}
	sw, err := newWriter(w, hdr, opts, true)
	if err != nil {
		return nil, err
	}
	if end < HeaderSize {
		return nil, fmt.Errorf("segment: resume: end offset %d is inside the header", end)
	}
	gaps := sw.hdr.Version >= 3
	if _, msg := checkIndex(blocks, gaps, end); msg != "" {
		return nil, fmt.Errorf("segment: resume: %s", msg)
	}
	if !gaps && len(progress) > 0 {
		return nil, fmt.Errorf("segment: resume: a version-%d segment holds no progress frames, %d given", sw.hdr.Version, len(progress))
	}
	if msg := checkProgressIndex(sw.hdr.Link.PrevMaxTs, sw.hdr.Version, blocks, progress, end); msg != "" {
		return nil, fmt.Errorf("segment: resume: %s", msg)
	}
	// The header is encoded again only to learn its CRC: it is already on
	// disk, and a caller's header that would encode differently is not the
	// one there.
	given := hdr.CRC
	encodeHeader(sw.grow(HeaderSize), &sw.hdr)
	if given != 0 && given != sw.hdr.CRC {
		return nil, fmt.Errorf("segment: resume: the header's CRC field is %#08x, but it encodes to %#08x", given, sw.hdr.CRC)
	}
	sw.off = end
	sw.stats.Written = end
	sw.blocks = append(make([]BlockInfo, 0, len(blocks)+16), blocks...)
	sw.progress = make([]ProgressInfo, 0, len(progress)+4)
	for _, p := range progress {
		p.Spans = slices.Clone(p.Spans)
		sw.progress = append(sw.progress, p)
	}
	for _, b := range blocks {
		sw.countBlock(b)
		sw.stats.Records += int64(b.Records)
		sw.stats.DDLs += int64(b.DDLs)
		sw.stats.Rows += int64(b.Records - b.DDLs)
	}
	if n := len(blocks); n > 0 {
		sw.stats.MinTs, sw.stats.MaxTs = blocks[0].MinTs, blocks[n-1].MaxTs
		sw.lastTs, sw.haveLast = blocks[n-1].MaxTs, true
	}
	return sw, nil
}

// checkProgressIndex checks that blocks (an index already checked) and
// progress frames could have been written by a Writer: together they fill
// the segment from the end of the header without gaps or overlaps, up to at
// most end; each progress frame has the length its spans give, spans in
// order, its block count the number of blocks before it and its chain max ts
// what those blocks and prevMax give.
func checkProgressIndex(prevMax uint64, version uint16, blocks []BlockInfo, progress []ProgressInfo, end int64) string {
	pos := int64(HeaderSize) // where the previous frame ends
	nb := 0
	nextBlocks := func(upto int) string {
		for ; nb < upto; nb++ {
			if b := blocks[nb]; b.Offset != pos {
				return fmt.Sprintf("block %d is at offset %d, but the frame before it ends at %d", nb, b.Offset, pos)
			}
			pos = blocks[nb].End()
		}
		return ""
	}
	for i, p := range progress {
		if p.Blocks < nb || p.Blocks > len(blocks) {
			return fmt.Sprintf("progress frame %d at offset %d follows %d blocks, the frame before it %d of %d", i, p.Offset, p.Blocks, nb, len(blocks))
		}
		if msg := nextBlocks(p.Blocks); msg != "" {
			return msg
		}
		if msg := checkSpans(p.Spans); msg != "" {
			return fmt.Sprintf("progress frame %d at offset %d: %s", i, p.Offset, msg)
		}
		if p.Length != progressSize(len(p.Spans), version) {
			return fmt.Sprintf("progress frame %d at offset %d: length %d, but %d spans make %d", i, p.Offset, p.Length, len(p.Spans), progressSize(len(p.Spans), version))
		}
		if p.Offset != pos {
			return fmt.Sprintf("progress frame %d is at offset %d, but the frame before it ends at %d", i, p.Offset, pos)
		}
		if want := chainMaxTs(prevMax, blocks[:nb]); p.ChainMaxTs != want {
			return fmt.Sprintf("progress frame %d at offset %d: chain max ts %d, but the blocks before it give %d", i, p.Offset, p.ChainMaxTs, want)
		}
		pos = p.End()
	}
	if msg := nextBlocks(len(blocks)); msg != "" {
		return msg
	}
	if pos > end {
		return fmt.Sprintf("the frames given end at offset %d, past the end offset %d", pos, end)
	}
	return ""
}

func newWriter(w io.Writer, hdr Header, opts *WriterOptions, resume bool) (*Writer, error) {
	if err := hdr.validate(resume); err != nil {
		return nil, err
	}
	if hdr.Version == 0 {
		hdr.Version = FormatVersion
	}
	var o WriterOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case o.BlockSize == 0:
		o.BlockSize = DefaultBlockSize
	case o.BlockSize < 0 || o.BlockSize > MaxBlockSize:
		return nil, fmt.Errorf("segment: block size %d is outside [1, %d]", o.BlockSize, MaxBlockSize)
	}
	return &Writer{w: w, hdr: hdr, blockSize: o.BlockSize, enc: new(FrameEncoder)}, nil
}

// Header returns the segment's header, its CRC field included.
func (w *Writer) Header() Header { return w.hdr }

// HeaderCRC returns the header's CRC field: the segment's digest, for its
// successor's Link.PrevHeaderCRC.
func (w *Writer) HeaderCRC() uint32 { return w.hdr.CRC }

// FooterCRC returns the CRC field of the footer Seal would write if nothing
// more were appended: the successor's Link.PrevFooterCRC, known before the
// segment is sealed. Call FlushBlock first; with records buffered it returns
// an error wrapping ErrBuffered rather than a CRC Seal would not write.
func (w *Writer) FooterCRC() (uint32, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.bb.Records() > 0 {
		return 0, fmt.Errorf("segment: footer CRC of %s: %w (%d records)", w.hdr.ActiveName(), ErrBuffered, w.bb.Records())
	}
	return FooterCRC(w.blocks), nil
}

// Offset returns how many bytes have been written to the io.Writer: the
// segment's size if the buffered records were dropped now.
func (w *Writer) Offset() int64 { return w.off }

// Stats returns the writer's counters.
func (w *Writer) Stats() WriterStats {
	s := w.stats
	s.Buffered = w.bb.Len()
	return s
}

// Blocks returns the index of the blocks written so far. The slice belongs to
// the Writer: do not modify it; the next block may reuse its array.
func (w *Writer) Blocks() []BlockInfo { return w.blocks }

// Append adds a record. Records must come in non-decreasing commit ts; a
// regression is an error wrapping ErrOutOfOrder and writes nothing. Append
// copies payload and writes a block when the open one reaches the target
// size.
func (w *Writer) Append(commitTs uint64, kind Kind, payload []byte) error {
	if err := w.usable(); err != nil {
		return err
	}
	if !kind.valid() {
		return fmt.Errorf("segment: append: unknown record kind %d", kind)
	}
	if w.haveLast && commitTs < w.lastTs {
		return fmt.Errorf("%w: commit ts %d after %d", ErrOutOfOrder, commitTs, w.lastTs)
	}
	if len(payload) > MaxRecordSize {
		return fmt.Errorf("segment: append: payload of %d bytes exceeds the limit %d", len(payload), MaxRecordSize)
	}
	if w.bb.Records() > 0 && w.bb.Len()+w.bb.RecordSize(commitTs, len(payload)) > w.blockSize {
		if err := w.closeBlock(); err != nil {
			return err
		}
	}
	if err := w.bb.Append(commitTs, kind, payload); err != nil {
		return err
	}
	if kind == KindDDL {
		w.stats.DDLs++
	} else {
		w.stats.Rows++
	}
	w.stats.Records++
	if !w.haveLast {
		w.stats.MinTs = commitTs
	}
	w.stats.MaxTs = commitTs
	w.lastTs, w.haveLast = commitTs, true
	if w.bb.Len() >= w.blockSize {
		return w.closeBlock()
	}
	return nil
}

// FlushBlock writes the open block, if it holds any record, so that
// everything appended so far has reached the io.Writer and the segment ends
// on a block boundary. Call it before syncing a file.
func (w *Writer) FlushBlock() error {
	if err := w.usable(); err != nil {
		return err
	}
	return w.closeBlock()
}

// Seal writes the open block, then the footer and the trailer, and returns
// the footer. The Writer accepts nothing after it. Sealing a segment with no
// records is allowed: its footer has no blocks and a ts range of [0, 0].
func (w *Writer) Seal() (Footer, error) {
	if err := w.usable(); err != nil {
		return Footer{}, err
	}
	if err := w.closeBlock(); err != nil {
		return Footer{}, err
	}
	f := footerFor(w.blocks)
	buf := appendFooter(w.frame[:0], &f)
	flen := len(buf)
	buf = append(buf, make([]byte, TrailerSize)...)
	encodeTrailer(buf[flen:], w.off, flen, w.hdr.Version)
	w.frame = buf
	if err := w.write(buf); err != nil {
		return Footer{}, err
	}
	w.sealed = true
	f.Blocks = append([]BlockInfo(nil), w.blocks...)
	return f, nil
}

// AppendProgress writes the open block, if it holds records, then one
// progress frame (with one Write call) holding flushedTs and spans, which must
// be strictly increasing by Span and at most MaxProgressSpans (otherwise it
// returns an error and writes nothing). The Writer sets the frame's ChainMaxTs:
// the max of the header link's PrevMaxTs and the blocks' max ts. Not allowed
// after Seal, nor in a resumed version-2 segment. A failed write is sticky, as
// for Append. The returned ProgressInfo's Spans are the Writer's copy.
func (w *Writer) AppendProgress(flushedTs uint64, spans []SpanTs) (ProgressInfo, error) {
	return w.AppendProgressCommitted(flushedTs, flushedTs, spans)
}

// AppendProgressCommitted is AppendProgress with the epoch's committed ts
// (Progress.CommittedTs), which must not be below flushedTs. A version-3
// segment has no room for it: there it must equal the flushed ts.
func (w *Writer) AppendProgressCommitted(flushedTs, committedTs uint64, spans []SpanTs) (ProgressInfo, error) {
	if err := w.usable(); err != nil {
		return ProgressInfo{}, err
	}
	if w.hdr.Version < 3 {
		return ProgressInfo{}, fmt.Errorf("segment: append progress: %s is a version-%d segment, which holds no progress frames", w.hdr.ActiveName(), w.hdr.Version)
	}
	if msg := checkSpans(spans); msg != "" {
		return ProgressInfo{}, fmt.Errorf("segment: append progress: %s", msg)
	}
	if committedTs < flushedTs || w.hdr.Version < 4 && committedTs != flushedTs {
		return ProgressInfo{}, fmt.Errorf("segment: append progress: committed ts %d with flushed ts %d in a version-%d segment", committedTs, flushedTs, w.hdr.Version)
	}
	if err := w.closeBlock(); err != nil {
		return ProgressInfo{}, err
	}
	p := Progress{FlushedTs: flushedTs, CommittedTs: committedTs, ChainMaxTs: chainMaxTs(w.hdr.Link.PrevMaxTs, w.blocks)}
	if w.hdr.Version < 4 {
		p.CommittedTs = max(p.ChainMaxTs, p.FlushedTs) // what decoding it gives
	}
	if len(spans) > 0 {
		p.Spans = slices.Clone(spans)
	}
	buf := appendProgressFrame(w.frame[:0], p, w.hdr.Version)
	w.frame = buf
	info := ProgressInfo{Offset: w.off, Length: len(buf), Blocks: len(w.blocks), Progress: p}
	if err := w.write(buf); err != nil {
		return ProgressInfo{}, err
	}
	w.progress = append(w.progress, info)
	return info, nil
}

// Progress returns the progress frames written or resumed, in order. The
// slice belongs to the Writer: do not modify it.
func (w *Writer) Progress() []ProgressInfo { return w.progress }

func (w *Writer) usable() error {
	if w.err != nil {
		return w.err
	}
	if w.sealed {
		return ErrSealed
	}
	return nil
}

// closeBlock compresses and writes the open block.
func (w *Writer) closeBlock() error {
	if w.bb.Records() == 0 {
		return nil
	}
	f, err := w.enc.Encode(w.frame, &w.bb, w.hdr.Compression)
	if err != nil {
		return err
	}
	w.frame = f.b[:cap(f.b)]
	info := f.bh.info(w.off)
	if err := w.write(f.b); err != nil {
		return err
	}
	w.blocks = append(w.blocks, info)
	w.countBlock(info)
	w.bb.Reset()
	return nil
}

func (w *Writer) countBlock(b BlockInfo) {
	w.stats.Blocks++
	w.stats.Uncompressed += int64(b.Uncompressed)
}

// write hands buf to w, making any failure sticky.
func (w *Writer) write(buf []byte) error {
	n, err := w.w.Write(buf)
	if err == nil && n != len(buf) {
		err = io.ErrShortWrite
	}
	if err != nil {
		w.err = fmt.Errorf("segment: write %d bytes at offset %d: %w", len(buf), w.off, err)
		return w.err
	}
	w.off += int64(n)
	w.stats.Written = w.off
	return nil
}

// grow returns the scratch buffer resized to n bytes.
func (w *Writer) grow(n int) []byte {
	if cap(w.frame) < n {
		w.frame = make([]byte, n, n+n/4)
	}
	w.frame = w.frame[:n]
	return w.frame
}
