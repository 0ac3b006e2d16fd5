package reader

import (
	"context"
	"io"

	"github.com/redokit/redokit/blob"
)

// objectReaderAt is the io.ReaderAt a segment.Reader reads a sealed segment
// through. A read outside the streaming window is one ranged read of its own
// (the trailer and footer at open, the header). Reads inside the window, in
// order, come from one ranged request held open from block to block, so a
// segment costs one request for all its blocks instead of one per block, and
// the bytes flow straight into the segment reader's frame buffer.
//
// It is not safe for concurrent use; each stream owns one.
type objectReaderAt struct {
	ctx context.Context
	b   *blob.Bucket
	key string

	winStart, winEnd int64 // the streaming window; empty when equal
	rc               io.ReadCloser
	pos              int64 // offset of the next byte rc yields

	// kept are reads made before, served again without a request (the
	// header the merge read to decide on the duplicate filter).
	kept []keptRead
}

type keptRead struct {
	off  int64
	data []byte
}

// retries is how many times a broken stream is reopened at the offset where
// it broke. A stream may sit idle while the merge drains other writers, and
// object stores close idle connections.
const retries = 2

// window makes reads inside [from, to) stream.
func (r *objectReaderAt) window(from, to int64) {
	r.closeStream()
	r.winStart, r.winEnd = from, to
}

func (r *objectReaderAt) ReadAt(p []byte, off int64) (int, error) {
	end := off + int64(len(p))
	if off < r.winStart || end > r.winEnd {
		for _, k := range r.kept {
			if k.off == off && len(k.data) == len(p) {
				return copy(p, k.data), nil
			}
		}
		// Straight into p: a buffer of the store's client would be as
		// large again, and grown past it to find the end.
		rc, err := r.b.NewRangeReader(r.ctx, r.key, off, int64(len(p)))
		if err != nil {
			return 0, err
		}
		n, err := io.ReadFull(rc, p)
		rc.Close()
		if err == io.ErrUnexpectedEOF {
			err = io.EOF // the object is shorter than asked
		}
		return n, err
	}
	if r.rc != nil && r.pos != off {
		r.closeStream() // a jump: the segment reader skipped or went back
	}
	n := 0
	for attempt := 0; ; attempt++ {
		if r.rc == nil {
			rc, err := r.b.NewRangeReader(r.ctx, r.key, off+int64(n), r.winEnd-(off+int64(n)))
			if err != nil {
				return n, err
			}
			r.rc, r.pos = rc, off+int64(n)
		}
		m, err := io.ReadFull(r.rc, p[n:])
		n += m
		r.pos += int64(m)
		if err == nil {
			return n, nil
		}
		r.closeStream()
		if attempt >= retries || !blob.IsTransient(err) || r.ctx.Err() != nil {
			if err == io.ErrUnexpectedEOF {
				err = io.EOF // the object is shorter than its footer says
			}
			return n, err
		}
	}
}

func (r *objectReaderAt) closeStream() {
	if r.rc != nil {
		r.rc.Close()
		r.rc = nil
	}
}

// Close releases the open stream, if any.
func (r *objectReaderAt) Close() { r.closeStream() }
