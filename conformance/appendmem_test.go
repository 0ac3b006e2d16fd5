package conformance

import (
	"bytes"
	"context"
	"errors"
	"io"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/driver"
)

// appendMem is mem.Driver with a healthy Appender, so that the Append
// subtests have a driver that must pass them (the mem backend has no append:
// object stores cannot). An open object is the mem object under its key,
// rewritten whole on every change: visible and readable at once, as an open
// local file is.
type appendMem struct{ *mem.Driver }

var _ driver.Appender = appendMem{}

func (d appendMem) OpenAppend(ctx context.Context, key string) (blob.AppendFile, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f := &memAppendFile{d: d.Driver, key: key}
	r, err := d.NewRangeReader(ctx, key, 0, -1)
	switch {
	case err == nil:
		f.buf, err = io.ReadAll(r)
		r.Close()
		if err != nil {
			return nil, err
		}
	case d.ErrorCode(err) == blob.CodeNotExist:
		if err := f.flush(ctx); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	return f, nil
}

type memAppendFile struct {
	d      *mem.Driver
	key    string
	buf    []byte
	closed bool
}

var errFileClosed = errors.New("append file is closed")

func (f *memAppendFile) flush(ctx context.Context) error {
	_, err := f.d.Put(ctx, f.key, bytes.NewReader(f.buf), int64(len(f.buf)), blob.PutOptions{})
	return err
}

func (f *memAppendFile) Write(p []byte) (int, error) {
	if f.closed {
		return 0, errFileClosed
	}
	f.buf = append(f.buf, p...)
	return len(p), f.flush(context.Background())
}

func (f *memAppendFile) Size() int64 { return int64(len(f.buf)) }

func (f *memAppendFile) Sync() error {
	if f.closed {
		return errFileClosed
	}
	return nil
}

func (f *memAppendFile) Truncate(size int64) error {
	if f.closed {
		return errFileClosed
	}
	f.buf = f.buf[:min(size, int64(len(f.buf)))]
	return f.flush(context.Background())
}

func (f *memAppendFile) Seal(ctx context.Context, finalKey string) (blob.Attrs, error) {
	if f.closed {
		return blob.Attrs{}, errFileClosed
	}
	a, err := f.d.Put(ctx, finalKey, bytes.NewReader(f.buf), int64(len(f.buf)), blob.PutOptions{IfNotExist: true})
	if err != nil {
		return blob.Attrs{}, err
	}
	f.closed = true
	return a, f.d.Delete(ctx, []string{f.key})
}

func (f *memAppendFile) Close() error {
	f.closed = true
	return nil
}
