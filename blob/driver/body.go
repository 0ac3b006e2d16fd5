package driver

import (
	"bytes"
	"fmt"
	"io"
)

// ExactReader yields exactly size bytes of r and fails, instead of ending,
// when r holds fewer or more: drivers that upload in parts wrap the body with
// it so that no object is ever committed with a length other than the one
// Put declared. Its errors match ErrInvalidArgument.
func ExactReader(r io.Reader, size int64) io.Reader {
	return &exactReader{r: r, left: size, size: size}
}

type exactReader struct {
	r          io.Reader
	left, size int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.left == 0 {
		if err := ExpectEOF(e.r, e.size); err != nil {
			return 0, err
		}
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if err == io.EOF {
		if e.left > 0 {
			return n, ShortRead(io.ErrUnexpectedEOF, e.size)
		}
		err = nil
	}
	return n, err
}

// ShortRead turns an end of input before the declared size into an error
// matching ErrInvalidArgument; other errors pass through.
func ShortRead(err error, size int64) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("%w: the reader ended before the declared size %d", ErrInvalidArgument, size)
	}
	return err
}

// ExpectEOF checks that r has nothing left after the declared size.
func ExpectEOF(r io.Reader, size int64) error {
	var one [1]byte
	for {
		n, err := r.Read(one[:])
		if n > 0 {
			return fmt.Errorf("%w: the reader holds more than the declared size %d", ErrInvalidArgument, size)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// SplitBody reads the start of a Put's body to choose how to upload it, for
// drivers that send a small object in one request and a large one in parts
// (blocks, a resumable upload). size is what Put was given (< 0: unknown) and
// threshold the smallest object that goes up in parts.
//
// Exactly one of small and rest is non-nil. small (possibly empty) is the
// whole body, read to its end, when it is shorter than threshold: of a known
// size, it was exactly size bytes; of an unknown size, the body ended before
// threshold. Otherwise rest yields the whole body, the bytes already read
// first, and fails rather than ends when a known size is not met (see
// ExactReader). A body shorter or longer than a known size below threshold
// is an error matching ErrInvalidArgument, before anything is sent.
func SplitBody(r io.Reader, size, threshold int64) (small []byte, rest io.Reader, err error) {
	switch {
	case size >= 0 && size < threshold:
		small = make([]byte, size)
		if _, err := io.ReadFull(r, small); err != nil {
			return nil, nil, ShortRead(err, size)
		}
		if err := ExpectEOF(r, size); err != nil {
			return nil, nil, err
		}
		return small, nil, nil
	case size < 0:
		buf, err := io.ReadAll(io.LimitReader(r, threshold))
		if err != nil {
			return nil, nil, err
		}
		if int64(len(buf)) < threshold {
			if buf == nil {
				buf = []byte{}
			}
			return buf, nil, nil
		}
		return nil, io.MultiReader(bytes.NewReader(buf), r), nil
	}
	return nil, ExactReader(r, size), nil
}
