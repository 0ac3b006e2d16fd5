// Package mapblob is a complete, minimal third-party redokit backend: the
// example that docs/BACKENDS.md walks through. It stores objects in a toy
// in-process service, Service, which stands in for a real store's SDK: it has
// its own API and its own error type (APIError, with HTTP-like statuses), and
// the driver's job is to move bytes through it and classify its errors.
//
// URL: "mapblob://NAME[/PREFIX][?page_size=N]" opens the service named NAME
// (created on first use, shared by every Open of the name in the process),
// under the key prefix PREFIX, returning at most N objects a list page.
//
// As: a Bucket over this driver sets a **Service to its service.
package mapblob

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

// ---- the "native client": what a real backend imports from an SDK ----

// Service is a toy object service.
type Service struct {
	mu      sync.Mutex
	objects map[string]object
	version int64
}

type object struct {
	data    []byte
	version int64
	modTime time.Time
}

// APIError is the service's error, as an SDK's would be.
type APIError struct {
	Status int // 404 not found, 412 precondition failed
	Key    string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("mapblob service: status %d for %q", e.Status, e.Key)
}

// NewService returns an empty service.
func NewService() *Service { return &Service{objects: map[string]object{}} }

// ---- the driver ----

// Driver is the driver.Driver over a Service.
type Driver struct {
	svc      *Service
	pageSize int // the most objects this store returns a page; 0: no limit
}

var (
	_ driver.Driver = (*Driver)(nil)
	_ driver.Aser   = (*Driver)(nil)
)

// Options configure a Driver; nil is valid.
type Options struct {
	// PageSize caps the objects a List page returns (a store's own limit);
	// 0 means no cap beyond what the caller asks.
	PageSize int
}

// New returns a Bucket over svc. opts may be nil.
func New(svc *Service, opts *Options) (*blob.Bucket, error) {
	d, err := NewDriver(svc, opts)
	if err != nil {
		return nil, err
	}
	return blob.NewBucket(d), nil
}

// NewDriver returns the driver New wraps, for callers that decorate drivers
// (fault injection, metrics) before handing them to blob.NewBucket.
func NewDriver(svc *Service, opts *Options) (*Driver, error) {
	if svc == nil {
		return nil, fmt.Errorf("%w: mapblob: nil service", blob.ErrInvalidArgument)
	}
	d := &Driver{svc: svc}
	if opts != nil {
		if opts.PageSize < 0 {
			return nil, fmt.Errorf("%w: mapblob: negative page size %d", blob.ErrInvalidArgument, opts.PageSize)
		}
		d.pageSize = opts.PageSize
	}
	return d, nil
}

// etag makes an ETag from the object's version: it changes on every Put.
func etag(version int64) string { return `"v` + strconv.FormatInt(version, 10) + `"` }

func (o object) attrs(key string) blob.Attrs {
	return blob.Attrs{Key: key, Size: int64(len(o.data)), ETag: etag(o.version), ModTime: o.modTime}
}

// Put reads the whole body before touching the store, so that nothing is
// visible until it is complete, and gives up if its context ended meanwhile.
func (d *Driver) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r); err != nil {
		return blob.Attrs{}, err
	}
	if size >= 0 && int64(buf.Len()) != size {
		return blob.Attrs{}, fmt.Errorf("%w: read %d bytes, size said %d", blob.ErrInvalidArgument, buf.Len(), size)
	}
	if err := ctx.Err(); err != nil {
		return blob.Attrs{}, err // the caller gave up: commit nothing
	}
	s := d.svc
	s.mu.Lock()
	defer s.mu.Unlock()
	// The check and the write happen under one lock: exactly one of
	// concurrent conditional writers wins.
	cur, exists := s.objects[key]
	if opts.IfNotExist && exists {
		return blob.Attrs{}, &APIError{Status: 412, Key: key}
	}
	if opts.IfMatch != "" && (!exists || etag(cur.version) != opts.IfMatch) {
		return blob.Attrs{}, &APIError{Status: 412, Key: key}
	}
	s.version++
	o := object{data: buf.Bytes(), version: s.version, modTime: time.Now()}
	s.objects[key] = o
	return o.attrs(key), nil
}

func (d *Driver) get(ctx context.Context, key string) (object, error) {
	if err := ctx.Err(); err != nil {
		return object{}, err
	}
	d.svc.mu.Lock()
	defer d.svc.mu.Unlock()
	o, ok := d.svc.objects[key]
	if !ok {
		return object{}, &APIError{Status: 404, Key: key}
	}
	return o, nil
}

// NewRangeReader serves [offset, offset+length) clipped to the object; an
// offset past the end reads nothing.
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

// Stat implements driver.Driver.
func (d *Driver) Stat(ctx context.Context, key string) (blob.Attrs, error) {
	o, err := d.get(ctx, key)
	if err != nil {
		return blob.Attrs{}, err
	}
	return o.attrs(key), nil
}

// List returns keys in byte order (Go compares strings by bytes). The token
// is the last key returned: continuing after it stays correct when keys are
// inserted or deleted between pages.
func (d *Driver) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	if err := ctx.Err(); err != nil {
		return blob.ListPage{}, err
	}
	after := opts.StartAfter
	if opts.Token != "" {
		after = opts.Token
	}
	limit := opts.PageSize
	if d.pageSize > 0 {
		limit = min(limit, d.pageSize)
	}
	d.svc.mu.Lock()
	defer d.svc.mu.Unlock()
	var keys []string
	for k := range d.svc.objects {
		if strings.HasPrefix(k, opts.Prefix) && k > after {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var page blob.ListPage
	for _, k := range keys[:min(limit, len(keys))] {
		page.Objects = append(page.Objects, d.svc.objects[k].attrs(k))
	}
	if len(keys) > limit {
		page.NextToken = keys[limit-1]
	}
	return page, nil
}

// Delete removes keys; a missing key is not an error.
func (d *Driver) Delete(ctx context.Context, keys []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.svc.mu.Lock()
	defer d.svc.mu.Unlock()
	for _, k := range keys {
		delete(d.svc.objects, k)
	}
	return nil
}

// ErrorCode classifies the service's errors; Bucket turns the code into the
// sentinel callers match (blob.ErrNotExist, blob.ErrPreconditionFailed).
func (d *Driver) ErrorCode(err error) blob.Code {
	var ae *APIError
	if errors.As(err, &ae) {
		switch ae.Status {
		case 404:
			return blob.CodeNotExist
		case 412:
			return blob.CodePreconditionFailed
		case 429, 500, 502, 503, 504:
			return blob.CodeTransient
		}
	}
	return blob.CodeOf(err) // context errors, blob sentinels
}

// As exposes the native client: a **Service.
func (d *Driver) As(i any) bool {
	p, ok := i.(**Service)
	if ok {
		*p = d.svc
	}
	return ok
}

// Close releases nothing: the service outlives its clients.
func (d *Driver) Close() error { return nil }

// ---- URL registration ----

var services = struct {
	sync.Mutex
	m map[string]*Service
}{m: map[string]*Service{}}

func init() {
	blob.Register("mapblob", openURL)
}

// openURL opens "mapblob://NAME[/PREFIX][?page_size=N]".
func openURL(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	// Unknown parameters are an error naming them, never silently ignored.
	if err := blob.CheckQuery(u, "page_size"); err != nil {
		return nil, err
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%w: mapblob URL needs a service name: mapblob://NAME", blob.ErrInvalidArgument)
	}
	var opts Options
	if v := u.Query().Get("page_size"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%w: page_size=%q is not a positive integer", blob.ErrInvalidArgument, v)
		}
		opts.PageSize = n
	}
	services.Lock()
	svc := services.m[u.Host]
	if svc == nil {
		svc = NewService()
		services.m[u.Host] = svc
	}
	services.Unlock()
	b, err := New(svc, &opts)
	if err != nil {
		return nil, err
	}
	if prefix := strings.TrimPrefix(u.Path, "/"); prefix != "" {
		if !strings.HasSuffix(prefix, "/") {
			prefix += "/"
		}
		return b.Prefixed(prefix)
	}
	return b, nil
}
