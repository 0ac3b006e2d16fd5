// Package tinyfs is the outside driver of examples/outsidedriver: a backend
// that redokit's own binary does not register, which a five-line main links
// into a redokit of its own (see the example's main.go and docs/BACKENDS.md,
// "Running redokit check and torture on your driver").
//
// It keeps objects as files under a directory, through the local backend's
// driver, but as an object store would: it has no Appender, so a redo writer
// on it puts every segment whole as it does on S3, and its list pages are at
// most page_size objects. Its files can be shared by processes, which
// torture needs (its writers are child processes of the binary).
//
// URL: "tinyfs:///ABS/DIR[?page_size=N]": the directory (created if
// missing) is the URL's path; there is no host (a bucket name is no part of
// a file-backed store's URL) and no key prefix in the URL: the whole path is
// the directory.
package tinyfs

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/driver"
)

// Scheme is the URL scheme the driver registers.
const Scheme = "tinyfs"

// init registers the scheme with blob, the one registry every redokit
// command opens --storage through: importing this package is all a main
// has to do.
func init() { blob.Register(Scheme, openURL) }

func openURL(_ context.Context, u *url.URL) (*blob.Bucket, error) {
	if err := blob.CheckQuery(u, "page_size"); err != nil {
		return nil, err
	}
	if u.Host != "" || u.Opaque != "" || u.Path == "" {
		return nil, fmt.Errorf("%w: want tinyfs:///ABS/DIR (three slashes, an absolute path)", blob.ErrInvalidArgument)
	}
	pageSize := 0
	if v := u.Query().Get("page_size"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%w: page_size=%q is not a positive integer", blob.ErrInvalidArgument, v)
		}
		pageSize = n
	}
	return New(u.Path, pageSize)
}

// New returns a Bucket over the directory dir, creating it if it is
// missing, whose list pages hold at most pageSize objects (0: what the
// caller asks). Like every New of a driver it takes no context; it may do
// quick local I/O (here a mkdir and an open of the directory), never a
// network round trip, which belongs to the first call that has a context.
func New(dir string, pageSize int) (*blob.Bucket, error) {
	inner, err := local.NewDriver(dir, &local.Options{CreateDir: true})
	if err != nil {
		return nil, err
	}
	return blob.NewBucket(&Driver{inner: inner, pageSize: pageSize}), nil
}

// Driver is tinyfs's driver.Driver. It implements the seven methods and no
// optional capability.
type Driver struct {
	inner    *local.Driver
	pageSize int
}

var _ driver.Driver = (*Driver)(nil)

// Put implements driver.Driver.
func (d *Driver) Put(ctx context.Context, key string, r io.Reader, size int64, opts driver.PutOptions) (driver.Attrs, error) {
	return d.inner.Put(ctx, key, r, size, opts)
}

// NewRangeReader implements driver.Driver.
func (d *Driver) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	return d.inner.NewRangeReader(ctx, key, offset, length)
}

// Stat implements driver.Driver.
func (d *Driver) Stat(ctx context.Context, key string) (driver.Attrs, error) {
	return d.inner.Stat(ctx, key)
}

// List implements driver.Driver: the store's page limit, if any, caps the
// caller's. A short page is allowed (its NextToken says more follow).
func (d *Driver) List(ctx context.Context, opts driver.ListOptions) (driver.ListPage, error) {
	if d.pageSize > 0 && (opts.PageSize <= 0 || opts.PageSize > d.pageSize) {
		opts.PageSize = d.pageSize
	}
	return d.inner.List(ctx, opts)
}

// Delete implements driver.Driver.
func (d *Driver) Delete(ctx context.Context, keys []string) error {
	return d.inner.Delete(ctx, keys)
}

// ErrorCode implements driver.Driver: the errors are the local driver's.
func (d *Driver) ErrorCode(err error) driver.Code { return d.inner.ErrorCode(err) }

// Close implements driver.Driver.
func (d *Driver) Close() error { return d.inner.Close() }
