// Package mem is an in-memory object store: the fastest backend, for tests,
// examples and benchmarks. It has object-store semantics (atomic whole-object
// puts, conditional create and compare-and-swap, no append), so code tested on
// it takes the same path it takes on S3. Nothing survives the process.
//
// URL: "mem://" opens a new, empty store; "mem://name" opens the store of that
// name, shared by every Open of the same name in the process (so a writer and
// a reader opened from one URL see the same objects).
//
// [New] and [NewDriver] are the constructors every backend has, with nothing
// to pass and no error: a new store needs no name and no options, and cannot
// fail to open.
package mem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/driver"
)

func init() {
	blob.Register("mem", func(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
		if err := blob.CheckQuery(u); err != nil {
			return nil, err
		}
		if u.Host == "" {
			return New(), nil
		}
		named.Lock()
		defer named.Unlock()
		d := named.m[u.Host]
		if d == nil || d.closed {
			d = newDriver()
			named.m[u.Host] = d
		}
		b := blob.NewBucket(&view{d})
		if p := strings.TrimPrefix(u.Path, "/"); p != "" {
			return b.Prefixed(p)
		}
		return b, nil
	})
}

var named = struct {
	sync.Mutex
	m map[string]*Driver
}{m: map[string]*Driver{}}

// New returns a Bucket over a new, empty store.
func New() *blob.Bucket { return blob.NewBucket(newDriver()) }

// Driver is the in-memory driver.Driver.
type Driver struct {
	mu      sync.RWMutex
	objects map[string]object
	keys    []string // sorted
	seq     int64
	closed  bool
}

type object struct {
	data    []byte
	etag    string
	modTime time.Time
}

var (
	_ driver.Driver        = (*Driver)(nil)
	_ driver.VersionReader = (*Driver)(nil)
)

func newDriver() *Driver { return &Driver{objects: map[string]object{}} }

// NewDriver returns a new, empty in-memory driver (for wrapping in tests).
func NewDriver() *Driver { return newDriver() }

var errNotExist = errors.New("no such object")

// Put implements driver.Driver.
func (d *Driver) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	var buf bytes.Buffer
	if size > 0 {
		buf.Grow(int(size))
	}
	if _, err := buf.ReadFrom(r); err != nil {
		return blob.Attrs{}, err
	}
	if size >= 0 && int64(buf.Len()) != size {
		return blob.Attrs{}, fmt.Errorf("%w: read %d bytes, size said %d", blob.ErrInvalidArgument, buf.Len(), size)
	}
	if err := ctx.Err(); err != nil {
		return blob.Attrs{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return blob.Attrs{}, blob.ErrClosed
	}
	old, exists := d.objects[key]
	if opts.IfNotExist && exists {
		return blob.Attrs{}, blob.ErrPreconditionFailed
	}
	if opts.IfMatch != "" && (!exists || old.etag != opts.IfMatch) {
		return blob.Attrs{}, blob.ErrPreconditionFailed
	}
	d.seq++
	o := object{data: buf.Bytes(), etag: `"` + strconv.FormatInt(d.seq, 10) + `"`, modTime: time.Now()}
	d.objects[key] = o
	if !exists {
		i, _ := slices.BinarySearch(d.keys, key)
		d.keys = slices.Insert(d.keys, i, key)
	}
	return o.attrs(key), nil
}

func (o object) attrs(key string) blob.Attrs {
	return blob.Attrs{Key: key, Size: int64(len(o.data)), ETag: o.etag, ModTime: o.modTime}
}

func (d *Driver) get(ctx context.Context, key string) (object, error) {
	if err := ctx.Err(); err != nil {
		return object{}, err
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return object{}, blob.ErrClosed
	}
	o, ok := d.objects[key]
	if !ok {
		return object{}, errNotExist
	}
	return o, nil
}

// NewRangeReader implements driver.Driver.
func (d *Driver) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	o, err := d.get(ctx, key)
	if err != nil {
		return nil, err
	}
	data := o.data[min(offset, int64(len(o.data))):]
	if length >= 0 && length < int64(len(data)) {
		data = data[:length]
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// ReadVersion implements driver.VersionReader: one lookup gives the bytes
// and the attributes of one version.
func (d *Driver) ReadVersion(ctx context.Context, key string) ([]byte, blob.Attrs, error) {
	o, err := d.get(ctx, key)
	if err != nil {
		return nil, blob.Attrs{}, err
	}
	return bytes.Clone(o.data), o.attrs(key), nil
}

// Stat implements driver.Driver.
func (d *Driver) Stat(ctx context.Context, key string) (blob.Attrs, error) {
	o, err := d.get(ctx, key)
	if err != nil {
		return blob.Attrs{}, err
	}
	return o.attrs(key), nil
}

// List implements driver.Driver. The token is the last key of the previous page.
func (d *Driver) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	if err := ctx.Err(); err != nil {
		return blob.ListPage{}, err
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return blob.ListPage{}, blob.ErrClosed
	}
	after := opts.StartAfter
	if opts.Token != "" {
		after = opts.Token
	}
	start := opts.Prefix
	i, _ := slices.BinarySearch(d.keys, max(start, after))
	var page blob.ListPage
	for ; i < len(d.keys) && len(page.Objects) < opts.PageSize; i++ {
		k := d.keys[i]
		if k <= after {
			continue
		}
		if !strings.HasPrefix(k, opts.Prefix) {
			break
		}
		page.Objects = append(page.Objects, d.objects[k].attrs(k))
	}
	if len(page.Objects) == opts.PageSize && i < len(d.keys) && strings.HasPrefix(d.keys[i], opts.Prefix) {
		page.NextToken = page.Objects[len(page.Objects)-1].Key
	}
	return page, nil
}

// Delete implements driver.Driver.
func (d *Driver) Delete(ctx context.Context, keys []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return blob.ErrClosed
	}
	for _, k := range keys {
		if _, ok := d.objects[k]; !ok {
			continue
		}
		delete(d.objects, k)
		if i, found := slices.BinarySearch(d.keys, k); found {
			d.keys = slices.Delete(d.keys, i, i+1)
		}
	}
	return nil
}

// ErrorCode implements driver.Driver.
func (d *Driver) ErrorCode(err error) blob.Code {
	if errors.Is(err, errNotExist) {
		return blob.CodeNotExist
	}
	return blob.CodeOf(err)
}

// Close implements driver.Driver.
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	return nil
}

// view is a named store's handle: closing one Bucket opened from
// "mem://name" must not close the store other Opens of the name share.
type view struct{ *Driver }

func (view) Close() error { return nil }
