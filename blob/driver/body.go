package driver

import (
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
