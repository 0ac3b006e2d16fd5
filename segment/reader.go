package segment

import (
	"fmt"
	"io"
	"sort"
	"sync"
)

// ReaderOptions configure a Reader. The zero value (or nil) is valid.
type ReaderOptions struct {
	// Object names the segment in errors (an object key or a file path).
	Object string
}

// tailRead is how many bytes from the end NewReader reads at once: the
// trailer and, for segments of up to about 1,600 blocks, the whole footer, so
// that opening costs one ranged read at the end plus one for the header.
const tailRead = 64 << 10

// tailPool holds the buffers open reads the tail into, framePool those
// ReadBlockInto reads frames into.
var (
	tailPool  = sync.Pool{New: func() any { b := make([]byte, tailRead); return &b }}
	framePool = sync.Pool{New: func() any { return new([]byte) }}
)

// Reader reads a sealed segment through an io.ReaderAt: the trailer, then the
// footer it points to, then blocks by index. Every block's CRC is checked as it
// is read, and any failure is a *CorruptionError: a sealed segment has no
// legitimate torn tail. Use a Scanner for unsealed segments. The progress
// frames between indexed blocks are not read by Next or ReadBlock (the
// index's offsets are only checked to lie in order within [HeaderSize,
// footer offset]): a verifier reads and checks them with ProgressBefore, or
// a Scanner does.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	r      io.ReaderAt
	size   int64
	obj    string
	hdr    Header
	footer Footer
	fOff   int64 // the footer's offset

	frame []byte
	dec   blockDecoder
	cur   int    // next block Next loads
	blk   *Block // block Next is reading, nil when none
	skip  bool   // Next drops records with commit ts <= skipTs
	skipT uint64
	err   error // sticky corruption
}

// NewReader opens the sealed segment of size bytes in r: it checks the
// trailer, footer and header, but reads no block yet.
func NewReader(r io.ReaderAt, size int64, opts *ReaderOptions) (*Reader, error) {
	sr := &Reader{r: r, size: size}
	if opts != nil {
		sr.obj = opts.Object
	}
	if err := sr.open(); err != nil {
		return nil, err
	}
	return sr, nil
}

// Reset makes r read the sealed segment of size bytes in ra, as NewReader
// would, keeping the buffers r has grown: a caller that reads many segments
// one after another reuses one Reader instead of allocating its buffers again
// for each. Blocks and records r returned before are invalid after it. On
// error r is unusable until the next successful Reset.
func (r *Reader) Reset(ra io.ReaderAt, size int64, opts *ReaderOptions) error {
	*r = Reader{r: ra, size: size, frame: r.frame, dec: blockDecoder{ub: r.dec.ub}}
	if opts != nil {
		r.obj = opts.Object
	}
	if err := r.open(); err != nil {
		if r.err == nil {
			r.err = err
		}
		return err
	}
	return nil
}

func (r *Reader) open() error {
	const minSize = HeaderSize + minFooterSize + TrailerSize
	if r.size < minSize {
		return r.corrupt(hard("segment", 0, "size %d is less than the %d bytes of the smallest sealed segment", r.size, minSize))
	}
	tailLen := min(r.size, tailRead)
	tailOff := r.size - tailLen
	// The header and footer are decoded into values that do not alias the
	// tail, so its buffer goes back to the pool when open returns: a
	// program that holds many segments open (a reader merging hundreds of
	// overlapping runs) does not hold a tail for each.
	tp := tailPool.Get().(*[]byte)
	defer tailPool.Put(tp)
	tail := (*tp)[:tailLen]
	if err := r.readAt(tail, tailOff); err != nil {
		return err
	}

	trOff := r.size - TrailerSize
	fOff, fLen, version, p := decodeTrailer(tail[tailLen-TrailerSize:], trOff)
	if p != nil {
		return r.corrupt(p)
	}
	if !versionSupported(version) {
		return &VersionError{Object: r.obj, Offset: trOff, Version: version}
	}
	if fOff < HeaderSize || fLen < minFooterSize || fOff+int64(fLen) != trOff {
		return r.corrupt(hard("trailer", trOff, "footer at offset %d of %d bytes does not end at the trailer", fOff, fLen))
	}

	var fbuf []byte
	if fOff >= tailOff {
		fbuf = tail[fOff-tailOff : trOff-tailOff]
	} else {
		fbuf = make([]byte, fLen)
		if err := r.readAt(fbuf, fOff); err != nil {
			return err
		}
	}
	f, p := decodeFooter(fbuf, fOff, version)
	if p != nil {
		return r.corrupt(p)
	}

	var hbuf []byte
	if tailOff == 0 {
		hbuf = tail[:HeaderSize]
	} else {
		hbuf = make([]byte, HeaderSize)
		if err := r.readAt(hbuf, 0); err != nil {
			return err
		}
	}
	h, hversion, p := decodeHeader(hbuf)
	if p == nil && !versionSupported(hversion) {
		return &VersionError{Object: r.obj, Version: hversion}
	}
	if p != nil {
		return r.corrupt(p)
	}
	if hversion != version {
		return r.corrupt(hard("header", 0, "format version %d, but the trailer's is %d", hversion, version))
	}
	r.hdr, r.footer, r.fOff = h, f, fOff
	return nil
}

// Header returns the segment header.
func (r *Reader) Header() Header { return r.hdr }

// Footer returns the footer: the block index and the totals. Its Blocks slice
// belongs to the Reader.
func (r *Reader) Footer() Footer { return r.footer }

// Size returns the segment's size in bytes.
func (r *Reader) Size() int64 { return r.size }

// ReadBlock reads, checks and decodes block i of the index. The Block is
// reused by the next ReadBlock or Next. Next continues from where the
// returned block's own iteration stands, then with block i+1.
func (r *Reader) ReadBlock(i int) (*Block, error) {
	b, _, err := r.readBlock(i, nil)
	return b, err
}

// ReadBlockInto is ReadBlock with the records in the caller's buffer: the
// block is decompressed (or, stored uncompressed, copied) into ub, grown
// when too small, and the buffer is returned for the caller to keep. The
// records' payloads then stay valid, whatever the Reader reads next, for as
// long as the caller leaves that buffer alone: a caller that holds the
// records of several blocks of a segment at once gives each its own buffer
// and needs one Reader, not one per block. The Reader holds no buffer for
// it: the frame is read into a buffer shared with other Readers until the
// block is decoded. The Block value itself is the Reader's, reused by its
// next read: iterate it before that.
func (r *Reader) ReadBlockInto(i int, ub []byte) (*Block, []byte, error) {
	return r.readBlock(i, &ub)
}

// readBlock reads block i; with ub, into *ub (see ReadBlockInto).
func (r *Reader) readBlock(i int, ub *[]byte) (*Block, []byte, error) {
	if i < 0 || i >= len(r.footer.Blocks) {
		return nil, nil, fmt.Errorf("segment%s: block %d out of range [0, %d)", object(r.obj), i, len(r.footer.Blocks))
	}
	bi := r.footer.Blocks[i]
	var frame []byte
	if ub == nil {
		r.frame = growBuf(r.frame, bi.Length)
		frame = r.frame[:bi.Length]
	} else {
		// The records end up in *ub, so the frame is needed only until
		// this returns: from the pool, not held by the Reader.
		fp := framePool.Get().(*[]byte)
		defer framePool.Put(fp)
		*fp = growBuf(*fp, bi.Length)
		frame = (*fp)[:bi.Length]
	}
	if err := r.readAt(frame, bi.Offset); err != nil {
		return nil, nil, err
	}
	var b *Block
	var p *problem
	if ub == nil {
		b, p = r.dec.decode(frame, bi.Offset)
	} else {
		if n := bi.Uncompressed; cap(*ub) < n {
			// A sixteenth of headroom, not growBuf's quarter: a caller
			// holding hundreds of these buffers at once (one per open
			// stream of a merge) pays for the headroom in each, and the
			// blocks of a segment differ in size by about a record.
			*ub = make([]byte, n+n/16)
		}
		own := r.dec.ub
		r.dec.ub = *ub
		b, p = r.dec.decode(frame, bi.Offset)
		*ub, r.dec.ub = r.dec.ub, own
		if p == nil && b.Codec == CompressionNone {
			// The records are the frame's bytes, which the next read
			// overwrites.
			*ub = growBuf(*ub, len(b.data))
			b.data = (*ub)[:copy(*ub, b.data)]
		}
	}
	if p == nil {
		p = codecAllowed(r.hdr, b)
	}
	if p != nil {
		return nil, nil, r.corrupt(p)
	}
	if b.Info != bi {
		return nil, nil, r.corrupt(hard("block", bi.Offset, "header %+v disagrees with its index entry %+v", b.Info, bi))
	}
	r.blk, r.cur, r.skip = b, i+1, false
	if ub == nil {
		return b, nil, nil
	}
	return b, *ub, nil
}

// ProgressBefore reads and checks what lies before block i of the index and
// after the block before it (or the header): i == len(Footer().Blocks) is
// what lies between the last block (or the header) and the footer. Those
// bytes must be exactly whole, valid progress frames (none in a version-2
// segment), each with the chain max ts of the header's link and the blocks
// before it. A verifier that reads every block calls it for every i in order,
// so that every byte of the segment is checked: a flip inside a progress
// frame is invisible to a ranged read of the blocks. A failure is a
// *CorruptionError naming the offset; it does not stop Next or ReadBlock.
func (r *Reader) ProgressBefore(i int) ([]ProgressInfo, error) {
	blocks := r.footer.Blocks
	if i < 0 || i > len(blocks) {
		return nil, fmt.Errorf("segment%s: progress before block %d out of range [0, %d]", object(r.obj), i, len(blocks))
	}
	start, end := int64(HeaderSize), r.fOff
	if i > 0 {
		start = blocks[i-1].End()
	}
	if i < len(blocks) {
		end = blocks[i].Offset
	}
	if end <= start {
		return nil, nil
	}
	if r.hdr.Version < 3 {
		return nil, hard("progress", start, "%d bytes between frames in a version-%d segment", end-start, r.hdr.Version).err(r.obj)
	}
	r.frame = growBuf(r.frame, int(end-start))
	gap := r.frame[:end-start]
	if err := r.readAt(gap, start); err != nil {
		return nil, err
	}
	want := chainMaxTs(r.hdr.Link.PrevMaxTs, blocks[:i])
	var out []ProgressInfo
	for off := 0; off < len(gap); {
		at := start + int64(off)
		pr, n, p := decodeProgress(gap[off:], at, r.hdr.Version)
		if p != nil {
			return nil, p.err(r.obj)
		}
		if pr.ChainMaxTs != want {
			return nil, hard("progress", at, "chain max ts %d, but the header link and the %d blocks before it give %d", pr.ChainMaxTs, i, want).err(r.obj)
		}
		out = append(out, ProgressInfo{Offset: at, Length: n, Blocks: i, Progress: pr})
		off += n
	}
	return out, nil
}

// SeekTs positions Next at the first record with commit ts > ts: in the first
// block whose max ts is above ts, past its records at or below ts. It returns
// that block's index (len(Footer().Blocks) when there is none) and reads
// nothing; the block is read by the next Next.
func (r *Reader) SeekTs(ts uint64) int {
	blocks := r.footer.Blocks
	i := sort.Search(len(blocks), func(i int) bool { return blocks[i].MaxTs > ts })
	r.cur, r.blk, r.skip, r.skipT = i, nil, true, ts
	return i
}

// Next returns the next record, io.EOF after the last one. The record's
// payload is valid until the next call.
func (r *Reader) Next() (Record, error) {
	if r.err != nil {
		return Record{}, r.err
	}
	for {
		if r.blk != nil {
			rec, ok := r.blk.Next()
			if ok {
				if r.skip && rec.CommitTs <= r.skipT {
					continue
				}
				r.skip = false
				return rec, nil
			}
			r.blk = nil
		}
		if r.cur >= len(r.footer.Blocks) {
			return Record{}, io.EOF
		}
		skip, skipT := r.skip, r.skipT
		if _, err := r.ReadBlock(r.cur); err != nil {
			return Record{}, err
		}
		r.skip, r.skipT = skip, skipT
	}
}

func (r *Reader) readAt(b []byte, off int64) error {
	n, err := r.r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return ioErr(r.obj, fmt.Sprintf("read %d bytes", len(b)), off, err)
}

// corrupt turns p into the error every later Next returns too.
func (r *Reader) corrupt(p *problem) error {
	r.err = p.err(r.obj)
	return r.err
}
