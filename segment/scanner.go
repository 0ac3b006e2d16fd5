package segment

import (
	"fmt"
	"io"
	"slices"
)

// ScannerOptions configure a Scanner. The zero value (or nil) is valid.
type ScannerOptions struct {
	// Object names the segment in errors (an object key or a file path).
	Object string
	// RequireSealed makes a segment that does not end with a valid footer
	// and trailer a *CorruptionError, torn tail or not. Set it when the
	// segment's name says it is sealed: an object store only holds sealed
	// segments, so there a torn tail is a truncated object.
	RequireSealed bool
}

// Scanner reads a segment front to back from an io.Reader: an unsealed
// segment (the active file of a writer, perhaps after a crash) or a sealed one
// read in one pass. Every frame's CRC is checked. Progress frames are checked
// and collected (Progress) as they are passed; Next and NextBlock skip them.
//
// When a frame is damaged (a short read, an implausible header, a CRC that
// fails) the Scanner reads the rest of the stream and looks for any valid frame
// after the damage. If there is one, the damage is not a torn tail and the
// Scanner returns a *CorruptionError. If there is none, the damage is the torn
// tail a crash leaves: Next and NextBlock return io.EOF, Torn reports true and
// ValidSize the offset at which the tail starts, where the writer truncates
// before resuming. A footer whose trailer is damaged counts as a torn seal: the
// segment reads as unsealed, torn at the footer.
//
// A Scanner is not safe for concurrent use.
type Scanner struct {
	r             io.Reader
	obj           string
	requireSealed bool

	state     int
	off       int64 // offset of the next frame
	hdr       Header
	hasHeader bool
	blocks    []BlockInfo
	progress  []ProgressInfo
	buf       []byte // the frame being read; len(buf) is its capacity
	dec       blockDecoder
	blk       *Block // block Next is reading, nil when none

	sealed    bool
	footer    Footer
	torn      bool
	validSize int64
	tornBytes int64
	err       error // sticky
}

const (
	scanStart = iota
	scanBlocks
	scanDone
)

// NewScanner returns a Scanner reading a segment from r. It reads nothing
// until the first call.
func NewScanner(r io.Reader, opts *ScannerOptions) *Scanner {
	s := &Scanner{r: r}
	if opts != nil {
		s.obj, s.requireSealed = opts.Object, opts.RequireSealed
	}
	return s
}

// Header reads the segment header if no call has yet, and returns it. It
// returns io.EOF when the stream holds no whole, valid header and nothing
// valid after it: an empty segment file, or one torn before its header was
// durable (ValidSize is then 0).
func (s *Scanner) Header() (Header, error) {
	if s.state == scanStart {
		s.start()
	}
	if s.hasHeader {
		return s.hdr, nil
	}
	if s.err != nil {
		return Header{}, s.err
	}
	return Header{}, io.EOF
}

// Next returns the next record, or io.EOF after the last record of a sealed
// segment or the last whole block of an unsealed one. The record's payload is
// valid until the next call.
func (s *Scanner) Next() (Record, error) {
	for {
		if s.blk != nil {
			if rec, ok := s.blk.Next(); ok {
				return rec, nil
			}
			s.blk = nil
		}
		if _, err := s.NextBlock(); err != nil {
			return Record{}, err
		}
	}
}

// NextBlock reads, checks and decodes the next block; Next then continues
// with its records. It returns io.EOF after the last block. The Block is
// reused by the next call.
func (s *Scanner) NextBlock() (*Block, error) {
	s.blk = nil
	if s.state == scanStart {
		s.start()
	}
	if s.err != nil {
		return nil, s.err
	}
	if s.state == scanDone {
		return nil, io.EOF
	}
	for {
		// Every frame is at least MinProgressSize bytes long (a progress
		// frame without spans is the smallest), so that much can be read
		// before the frame type is known.
		at := s.off
		n, err := io.ReadFull(s.r, s.ensure(BlockHeaderSize)[:MinProgressSize])
		switch {
		case err == io.EOF:
			return nil, s.finish()
		case err == io.ErrUnexpectedEOF:
			part := "block"
			if s.buf[0] == frameProgress {
				part = "progress"
			}
			return nil, s.damaged(soft(part, at, "stream ends %d bytes into a frame header", n), at, s.buf[:n])
		case err != nil:
			return nil, s.fail(ioErr(s.obj, "read", at, err))
		}
		switch s.buf[0] {
		case frameBlock:
			if have, err := s.fill(MinProgressSize, BlockHeaderSize); err != nil {
				return nil, s.shortFrame("block", at, have, BlockHeaderSize, err)
			}
			return s.readBlock(at)
		case frameFooter:
			return nil, s.readFooter(at)
		case frameProgress:
			if err := s.readProgress(at); err != nil {
				return nil, err
			}
			continue
		}
		return nil, s.damaged(soft("block", at, "frame type %d is neither a block (%d), a progress frame (%d) nor a footer (%d)", s.buf[0], frameBlock, frameProgress, frameFooter), at, s.buf[:MinProgressSize])
	}
}

// readProgress reads and checks the progress frame that starts at, whose
// first MinProgressSize bytes are in s.buf.
func (s *Scanner) readProgress(at int64) error {
	n, p := progressSpanCount(s.buf[:MinProgressSize], at)
	if p != nil {
		return s.damaged(p, at, s.buf[:MinProgressSize])
	}
	total := progressSize(n, s.hdr.Version)
	if have, err := s.fill(MinProgressSize, total); err != nil {
		return s.shortFrame("progress", at, have, total, err)
	}
	pr, _, p := decodeProgress(s.buf[:total], at, s.hdr.Version)
	switch {
	case p != nil && p.hard:
		return s.fail(p.err(s.obj))
	case p != nil:
		return s.damaged(p, at, s.buf[:total])
	case s.hdr.Version < 3:
		return s.fail(hard("progress", at, "a progress frame in a version-%d segment", s.hdr.Version).err(s.obj))
	}
	if want := chainMaxTs(s.hdr.Link.PrevMaxTs, s.blocks); pr.ChainMaxTs != want {
		return s.fail(hard("progress", at, "chain max ts %d, but the header link and the %d blocks before it give %d", pr.ChainMaxTs, len(s.blocks), want).err(s.obj))
	}
	s.progress = append(s.progress, ProgressInfo{Offset: at, Length: total, Blocks: len(s.blocks), Progress: pr})
	s.off = at + int64(total)
	return nil
}

// Blocks returns the blocks read so far. The slice belongs to the Scanner.
func (s *Scanner) Blocks() []BlockInfo { return s.blocks }

// Progress returns the progress frames read so far, in order. The slice
// belongs to the Scanner.
func (s *Scanner) Progress() []ProgressInfo { return s.progress }

// Sealed reports whether the segment ended with a valid footer and trailer.
// Like Footer, Torn and ValidSize, it is final once Next or NextBlock has
// returned io.EOF.
func (s *Scanner) Sealed() bool { return s.sealed }

// Footer returns the footer of a sealed segment.
func (s *Scanner) Footer() Footer { return s.footer }

// Torn reports whether the segment ended with a torn tail.
func (s *Scanner) Torn() bool { return s.torn }

// ValidSize is the length of the segment's valid prefix: the whole segment
// when it is sealed or ends cleanly on a frame boundary, the offset where the
// torn tail starts when it is torn.
func (s *Scanner) ValidSize() int64 { return s.validSize }

// TornBytes is the length of the torn tail.
func (s *Scanner) TornBytes() int64 { return s.tornBytes }

func (s *Scanner) start() {
	s.state = scanBlocks
	n, err := io.ReadFull(s.r, s.ensure(HeaderSize)[:HeaderSize])
	switch {
	case err == io.EOF:
		s.finish()
		return
	case err == io.ErrUnexpectedEOF:
		s.damaged(soft("header", 0, "stream ends after %d of %d bytes", n, HeaderSize), 0, s.buf[:n])
		return
	case err != nil:
		s.fail(ioErr(s.obj, "read header", 0, err))
		return
	}
	h, version, p := decodeHeader(s.buf[:HeaderSize])
	switch {
	case p == nil && !versionSupported(version):
		s.fail(&VersionError{Object: s.obj, Version: version})
	case p != nil && p.hard:
		s.fail(p.err(s.obj))
	case p != nil:
		s.damaged(p, 0, s.buf[:HeaderSize])
	default:
		s.hdr, s.hasHeader, s.off = h, true, HeaderSize
	}
}

func (s *Scanner) readBlock(at int64) (*Block, error) {
	bh, p := parseBlockHeader(s.buf[:BlockHeaderSize], at)
	if p != nil {
		return nil, s.damaged(p, at, s.buf[:BlockHeaderSize])
	}
	total := BlockHeaderSize + bh.stored
	if have, err := s.fill(BlockHeaderSize, total); err != nil {
		return nil, s.shortFrame("block", at, have, total, err)
	}
	b, p := s.dec.decode(s.buf[:total], at)
	if p == nil {
		p = codecAllowed(s.hdr, b)
	}
	switch {
	case p != nil && p.hard:
		return nil, s.fail(p.err(s.obj))
	case p != nil:
		return nil, s.damaged(p, at, s.buf[:total])
	}
	if n := len(s.blocks); n > 0 && b.Info.MinTs < s.blocks[n-1].MaxTs {
		return nil, s.fail(hard("block", at, "min commit ts %d is below the previous block's max %d", b.Info.MinTs, s.blocks[n-1].MaxTs).err(s.obj))
	}
	s.blocks = append(s.blocks, b.Info)
	s.off = at + int64(total)
	s.blk = b
	return b, nil
}

// readFooter reads the footer that starts at, the trailer after it, and makes
// sure nothing follows.
func (s *Scanner) readFooter(at int64) error {
	if have, err := s.fill(MinProgressSize, FooterFixedSize); err != nil {
		return s.shortFrame("footer", at, have, FooterFixedSize, err)
	}
	n, p := footerBlockCount(s.buf[:FooterFixedSize], at)
	if p == nil && n != len(s.blocks) {
		p = soft("footer", at, "indexes %d blocks, but %d precede it", n, len(s.blocks))
	}
	if p != nil {
		return s.damaged(p, at, s.buf[:FooterFixedSize])
	}
	flen := footerSize(n)
	total := flen + TrailerSize
	if have, err := s.fill(FooterFixedSize, total); err != nil {
		return s.shortFrame("footer", at, have, total, err)
	}
	f, p := decodeFooter(s.buf[:flen], at, s.hdr.Version)
	switch {
	case p != nil && p.hard:
		return s.fail(p.err(s.obj))
	case p != nil:
		return s.damaged(p, at, s.buf[:total])
	case !slices.Equal(f.Blocks, s.blocks):
		return s.fail(hard("footer", at, "index disagrees with the blocks that precede it").err(s.obj))
	}
	trOff := at + int64(flen)
	fOff, fLen, version, p := decodeTrailer(s.buf[flen:total], trOff)
	switch {
	case p != nil && p.hard:
		return s.fail(p.err(s.obj))
	case p != nil:
		// The footer and trailer go out in one write; a crash during it
		// leaves a whole footer and a torn trailer.
		return s.damaged(p, at, s.buf[:total])
	case !versionSupported(version):
		return s.fail(&VersionError{Object: s.obj, Offset: trOff, Version: version})
	case version != s.hdr.Version:
		return s.fail(hard("trailer", trOff, "format version %d, but the header's is %d", version, s.hdr.Version).err(s.obj))
	case fOff != at || fLen != flen:
		return s.fail(hard("trailer", trOff, "points at a footer at offset %d of %d bytes, the footer is at %d with %d bytes", fOff, fLen, at, flen).err(s.obj))
	}
	end := at + int64(total)
	var one [1]byte
	switch m, err := io.ReadFull(s.r, one[:]); {
	case m > 0:
		return s.fail(hard("segment", end, "bytes follow the trailer").err(s.obj))
	case err != io.EOF:
		return s.fail(ioErr(s.obj, "read", end, err))
	}
	s.off, s.sealed, s.footer = end, true, f
	return s.finish()
}

// shortFrame handles a read error inside a frame.
func (s *Scanner) shortFrame(part string, at int64, have, want int, err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return s.damaged(soft(part, at, "stream ends %d bytes into a frame of %d", have, want), at, s.buf[:have])
	}
	return s.fail(ioErr(s.obj, "read", at+int64(have), err))
}

// finish ends a scan that reached the end of the stream on a frame boundary.
func (s *Scanner) finish() error {
	s.state = scanDone
	s.validSize = s.off
	if s.requireSealed && !s.sealed {
		return s.fail(hard("segment", s.off, "ends without a footer: the segment is not sealed, or is truncated").err(s.obj))
	}
	return io.EOF
}

// damaged decides whether the damaged frame starting at offset at, whose
// bytes read so far are have, is a torn tail: it is when no valid frame
// starts anywhere after it in the rest of the stream.
func (s *Scanner) damaged(p *problem, at int64, have []byte) error {
	rest, err := io.ReadAll(s.r)
	if err != nil {
		return s.fail(ioErr(s.obj, "read", at+int64(len(have)), err))
	}
	data := append(slices.Clip(have), rest...)
	if i := findValidFrame(data); i > 0 {
		p.detail += fmt.Sprintf("; a valid %s follows at offset %d, so this is not a torn tail", frameName(data[i]), at+int64(i))
		return s.fail(p.err(s.obj))
	}
	s.state = scanDone
	s.torn, s.validSize, s.tornBytes = true, at, int64(len(data))
	if s.requireSealed {
		p.detail += " (a torn tail, in a segment that must be sealed)"
		return s.fail(p.err(s.obj))
	}
	return io.EOF
}

func (s *Scanner) fail(err error) error {
	s.state = scanDone
	s.err = err
	return err
}

// ensure returns s.buf with room for at least n bytes.
func (s *Scanner) ensure(n int) []byte {
	if len(s.buf) < n {
		s.buf = make([]byte, max(n, 4096))
	}
	return s.buf
}

// fill reads the frame's bytes [have, n) into s.buf, keeping the first have.
// The buffer grows in steps no larger than what has already arrived plus
// 64 KiB, so a corrupt length in a short stream cannot make it allocate much
// more than the stream holds. It returns how many bytes s.buf then holds.
// Within that bound it grows a quarter beyond the frame, so that the next
// frame, a little larger, does not reallocate it.
func (s *Scanner) fill(have, n int) (int, error) {
	for have < n {
		target := n
		if len(s.buf) < n {
			limit := 2*have + 64<<10
			target = min(n, limit)
			if len(s.buf) < target {
				nb := make([]byte, max(target, min(n+n/4, limit)))
				copy(nb, s.buf[:have])
				s.buf = nb
			}
		}
		m, err := io.ReadFull(s.r, s.buf[have:target])
		have += m
		if err != nil {
			return have, err
		}
	}
	return have, nil
}

// findValidFrame returns the position of the first whole, CRC-valid block,
// progress frame, footer or trailer in data after data[0], or -1. It
// allocates nothing.
func findValidFrame(data []byte) int {
	for i := 1; i < len(data); i++ {
		b := data[i:]
		switch {
		case b[0] == frameBlock && validBlockAt(b):
			return i
		case b[0] == frameFooter && validFooterAt(b):
			return i
		case b[0] == frameProgress && (validProgressAt(b, 3) || validProgressAt(b, 4)):
			return i
		case validTrailerAt(b):
			return i
		}
	}
	return -1
}

func frameName(b byte) string {
	switch b {
	case frameBlock:
		return "block"
	case frameFooter:
		return "footer"
	case frameProgress:
		return "progress frame"
	}
	return "trailer"
}

func validFooterAt(b []byte) bool {
	n, p := footerBlockCount(b, 0)
	if p != nil || uint64(footerSize(n)) > uint64(len(b)) {
		return false
	}
	end := footerSize(n) - footerCRCSize
	return le.Uint32(b[end:]) == crc(b[:end])
}

func validTrailerAt(b []byte) bool {
	if len(b) < TrailerSize || [8]byte(b[tMagic:tMagic+8]) != trailerMagic {
		return false
	}
	_, _, _, p := decodeTrailer(b, 0)
	return p == nil
}

// Recovery is what Recover found in a segment.
type Recovery struct {
	Header    Header      // valid when HasHeader
	HasHeader bool        // false: the segment is empty or torn inside its header
	Blocks    []BlockInfo // the whole, valid blocks
	// Progress holds the whole, valid progress frames in the valid prefix,
	// in order; each one's Blocks counts the blocks before it.
	Progress  []ProgressInfo
	Sealed    bool   // the segment ends with a valid footer and trailer
	Footer    Footer // when Sealed
	ValidSize int64  // length of the valid prefix; truncate to it before resuming
	TornBytes int64  // length of the torn tail after ValidSize (0 when none)
}

// Torn reports whether the segment has a torn tail.
func (r *Recovery) Torn() bool { return r.TornBytes > 0 }

// Recover scans a whole segment with a Scanner, checking every block, and
// reports where its valid prefix ends. A writer reopening its active segment
// truncates it to ValidSize and continues with ResumeWriter(w, Header, Blocks,
// Progress, ValidSize, opts) (or NewWriter when !HasHeader), or renames it when it is Sealed. Damage
// that is not a torn tail is a *CorruptionError.
func Recover(r io.Reader, opts *ScannerOptions) (*Recovery, error) {
	s := NewScanner(r, opts)
	for {
		_, err := s.NextBlock()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return &Recovery{
		Header: s.hdr, HasHeader: s.hasHeader, Blocks: s.blocks, Progress: s.progress,
		Sealed: s.sealed, Footer: s.footer,
		ValidSize: s.validSize, TornBytes: s.tornBytes,
	}, nil
}
