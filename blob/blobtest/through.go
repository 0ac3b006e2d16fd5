package blobtest

import (
	"context"
	"io"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/driver"
)

// BucketDriver returns a driver that makes every call through b: its keys are
// relative to b's prefix, b validates them and counts the calls in b.Stats,
// and b's closed state holds. It is how a wrapper such as Faulty or Liar is
// put in front of a bucket that is already open (from a URL, say) without
// reaching under it. Closing the driver closes b.
//
// The driver is an Appender when b can append, a VersionReader when b can
// read versions, and an Aser that forwards to b. It says it stages puts, since b calls PutOptions.BeforeCommit before the
// put is visible, whatever the driver under b does.
func BucketDriver(b *blob.Bucket) driver.Driver {
	t := &through{b: b}
	switch {
	case b.CanAppend() && b.CanReadVersion():
		return throughAppendingVersioned{throughAppending{t}}
	case b.CanAppend():
		return throughAppending{t}
	case b.CanReadVersion():
		return throughVersioned{t}
	}
	return t
}

type through struct{ b *blob.Bucket }

var (
	_ driver.Driver        = (*through)(nil)
	_ driver.Stager        = (*through)(nil)
	_ driver.Aser          = (*through)(nil)
	_ driver.Appender      = throughAppending{}
	_ driver.VersionReader = throughVersioned{}
	_ driver.VersionReader = throughAppendingVersioned{}
)

func (t *through) Put(ctx context.Context, key string, r io.Reader, size int64, opts driver.PutOptions) (driver.Attrs, error) {
	return t.b.PutReader(ctx, key, r, size, &opts)
}

func (t *through) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	return t.b.NewRangeReader(ctx, key, offset, length)
}

func (t *through) Stat(ctx context.Context, key string) (driver.Attrs, error) {
	return t.b.Stat(ctx, key)
}

func (t *through) List(ctx context.Context, opts driver.ListOptions) (driver.ListPage, error) {
	return t.b.ListPage(ctx, opts.Prefix, opts)
}

func (t *through) Delete(ctx context.Context, keys []string) error {
	return t.b.Delete(ctx, keys...)
}

// ErrorCode reads the code b already gave the error.
func (t *through) ErrorCode(err error) driver.Code { return blob.CodeOf(err) }

func (t *through) Close() error { return t.b.Close() }

func (t *through) StagesPuts() bool { return true }

func (t *through) As(i any) bool { return t.b.As(i) }

type throughAppending struct{ *through }

type throughVersioned struct{ *through }

func (t throughVersioned) ReadVersion(ctx context.Context, key string) ([]byte, driver.Attrs, error) {
	return t.b.ReadVersion(ctx, key)
}

type throughAppendingVersioned struct{ throughAppending }

func (t throughAppendingVersioned) ReadVersion(ctx context.Context, key string) ([]byte, driver.Attrs, error) {
	return t.b.ReadVersion(ctx, key)
}

func (t throughAppending) OpenAppend(ctx context.Context, key string) (driver.AppendFile, error) {
	return t.b.OpenAppend(ctx, key)
}
