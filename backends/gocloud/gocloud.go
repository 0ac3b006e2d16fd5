package gocloud

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	gcblob "gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/driver"
)

// DefaultDeleteConcurrency is how many single-key deletes one Driver.Delete
// call keeps in flight when Options.DeleteConcurrency is 0. gocloud has no
// batch delete, so a GC pass of 1,000 keys is 1,000 requests; running them
// concurrently keeps that pass from taking 1,000 round trips.
const DefaultDeleteConcurrency = 16

// contentType is what every Put declares. Setting one keeps gocloud from
// buffering the first 512 bytes to sniff a type the redo log has no use for,
// and lets Bucket.Upload take the driver's streaming path.
const contentType = "application/octet-stream"

// Options configure a Driver. The zero value (or nil) is valid.
type Options struct {
	// DeleteConcurrency bounds the single-key deletes in flight in one
	// Delete call. 0 means DefaultDeleteConcurrency.
	DeleteConcurrency int

	// UnorderedList says the store does not list keys in byte order, so
	// List must read every key under the prefix on each page and sort them.
	// It is set automatically for fileblob buckets (see the package doc).
	UnorderedList bool

	// LocalCAS emulates compare-and-swap (PutOptions.IfMatch), which
	// gocloud.dev/blob cannot express, with a lock per key held in this
	// process: every Put and Delete through a Driver over the same
	// *gcblob.Bucket takes the key's lock, and an IfMatch Put compares the
	// current ETag and writes while holding it. It is sound only when every
	// writer of the bucket is such a Driver in this process; that is true of
	// a private memblob bucket ("gocloud+mem://" turns it on for
	// those) and false of anything other processes can reach. Without it,
	// IfMatch fails with blob.ErrNotSupported.
	LocalCAS bool
}

// Driver is a driver.Driver over a *gocloud.dev/blob.Bucket.
type Driver struct {
	b         *gcblob.Bucket
	deleteN   int
	unordered bool
	cas       *casTable // nil unless Options.LocalCAS
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

var (
	_ driver.Driver = (*Driver)(nil)
	_ driver.Aser   = (*Driver)(nil)
)

// New returns a redokit Bucket over b. The Bucket owns b: closing it closes b.
// opts may be nil.
func New(b *gcblob.Bucket, opts *Options) (*blob.Bucket, error) {
	d, err := NewDriver(b, opts)
	if err != nil {
		return nil, err
	}
	return blob.NewBucket(d), nil
}

// NewDriver returns the driver New wraps, for callers that decorate drivers
// (fault injection, metrics). The driver owns b. opts may be nil.
func NewDriver(b *gcblob.Bucket, opts *Options) (*Driver, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: gocloud: nil bucket", blob.ErrInvalidArgument)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	d := &Driver{b: b, deleteN: o.DeleteConcurrency, unordered: o.UnorderedList}
	if d.deleteN <= 0 {
		d.deleteN = DefaultDeleteConcurrency
	}
	// fileblob is the only gocloud driver whose Bucket.As accepts an
	// *os.FileInfo (of its root directory); it is also the one that lists
	// in directory-walk order. Detecting it this way needs no import of
	// driver internals and survives prefixing, whose As forwards.
	var fi os.FileInfo
	if b.As(&fi) {
		d.unordered = true
	}
	if o.LocalCAS {
		d.cas = acquireCAS(b)
	}
	return d, nil
}

var (
	errIfMatch = fmt.Errorf("%w: gocloud.dev/blob v0.49 has no if-match write (only IfNotExist); use the native backend, or Options.LocalCAS for a process-private bucket", blob.ErrNotSupported)
	errETag    = errors.New("the current ETag differs from IfMatch")
	errMissing = errors.New("IfMatch given but the object does not exist")
)

// check runs before every operation. The context check is not redundant:
// memblob and fileblob never look at the context of a read, a stat or a
// list, so without it an ended context would go unnoticed there.
func (d *Driver) check(ctx context.Context) error {
	if d.closed.Load() {
		return blob.ErrClosed
	}
	return ctx.Err()
}

// Put implements driver.Driver. It streams r through gocloud's Upload and, on
// any failure, cancels the writer's context before gocloud closes the writer:
// gocloud commits whatever the writer holds at Close unless its context is
// done, so the cancel is what keeps a failed Put invisible.
//
// The Attrs it returns come from a Stat after the write (gocloud reports
// nothing about the object it wrote), one extra request per Put. Under
// concurrent unconditional writers of the same key that Stat may see a later
// object; when its size is not the size written, Put returns no ETag rather
// than someone else's. With LocalCAS the Stat runs under the key's lock and is
// exact. A failed Stat after a successful write is not an error: the object is
// stored, and failing would make a caller retry a create that already won.
func (d *Driver) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	if err := d.check(ctx); err != nil {
		return blob.Attrs{}, err
	}
	if opts.IfMatch != "" && d.cas == nil {
		return blob.Attrs{}, errIfMatch
	}
	if d.cas != nil {
		unlock := d.cas.lock(key)
		defer unlock()
		if opts.IfMatch != "" {
			cur, err := d.Stat(ctx, key)
			switch {
			case d.ErrorCode(err) == blob.CodeNotExist:
				return blob.Attrs{}, fmt.Errorf("%w: %w", blob.ErrPreconditionFailed, errMissing)
			case err != nil:
				return blob.Attrs{}, err
			case cur.ETag != opts.IfMatch:
				return blob.Attrs{}, fmt.Errorf("%w: %w", blob.ErrPreconditionFailed, errETag)
			}
		}
	}

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	src := &abortReader{r: r, ctx: wctx, cancel: cancel, size: size}
	err := d.b.Upload(wctx, key, src, &gcblob.WriterOptions{ContentType: contentType, IfNotExist: opts.IfNotExist})
	if err == nil && size >= 0 && src.n != size {
		// A driver that stopped reading early: the write is committed, so
		// all we can do is say so.
		err = fmt.Errorf("%w: stored %d bytes of %d (the gocloud driver stopped reading early)", blob.ErrInvalidArgument, src.n, size)
	}
	if err != nil {
		if src.err != nil {
			// The reader's own error explains the failure better than the
			// context cancellation it caused.
			return blob.Attrs{}, src.err
		}
		if opts.IfNotExist && gcerrors.Code(err) == gcerrors.FailedPrecondition {
			return blob.Attrs{}, fmt.Errorf("%w: %w", blob.ErrPreconditionFailed, err)
		}
		return blob.Attrs{}, err
	}
	a, serr := d.Stat(ctx, key)
	if serr != nil || a.Size != src.n {
		return blob.Attrs{Key: key, Size: src.n}, nil
	}
	return a, nil
}

// abortReader feeds a Put. It enforces the declared size and honours ctx
// between reads, and before it returns any error other than io.EOF it cancels
// the writer's context, so that gocloud's Close (which Upload always calls)
// discards the partial object instead of committing it.
type abortReader struct {
	r      io.Reader
	ctx    context.Context
	cancel context.CancelFunc
	size   int64 // < 0: unknown
	n      int64
	err    error // the error that aborted the write, if it was ours
}

func (a *abortReader) Read(p []byte) (int, error) {
	if err := a.ctx.Err(); err != nil {
		return 0, a.fail(err)
	}
	if a.size >= 0 && int64(len(p)) > a.size-a.n+1 {
		// Read at most one byte past the declared size: enough to notice
		// a reader that is too long without buffering its surplus.
		p = p[:a.size-a.n+1]
	}
	n, err := a.r.Read(p)
	a.n += int64(n)
	if a.size >= 0 && a.n > a.size {
		return n, a.fail(fmt.Errorf("%w: the reader has more than the declared %d bytes", blob.ErrInvalidArgument, a.size))
	}
	switch {
	case err == io.EOF:
		if a.size >= 0 && a.n != a.size {
			return n, a.fail(fmt.Errorf("%w: read %d bytes, size said %d", blob.ErrInvalidArgument, a.n, a.size))
		}
		return n, io.EOF
	case err != nil:
		return n, a.fail(err)
	}
	return n, nil
}

func (a *abortReader) fail(err error) error {
	if a.err == nil {
		a.err = err
	}
	a.cancel()
	return err
}

// NewRangeReader implements driver.Driver. gocloud passes an offset past the
// end through to the store: memblob and fileblob then read nothing, but S3
// and GCS answer 416. So on an error at a positive offset, a Stat tells
// whether the offset was simply at or past the end, which the blob contract
// answers with an empty reader. The Stat costs a request only on that error
// path.
func (d *Driver) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	r, err := d.b.NewRangeReader(ctx, key, offset, length, nil)
	if err == nil {
		return r, nil
	}
	if offset > 0 {
		switch d.ErrorCode(err) {
		case blob.CodeNotExist, blob.CodeCanceled, blob.CodeDeadlineExceeded, blob.CodePermissionDenied:
		default:
			a, serr := d.b.Attributes(ctx, key)
			switch {
			case serr == nil && offset >= a.Size:
				return io.NopCloser(eofReader{}), nil
			case gcerrors.Code(serr) == gcerrors.NotFound:
				// Gone (or never there): that, not the range, is the news.
				return nil, serr
			}
		}
	}
	return nil, err
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// Stat implements driver.Driver. See etag for the ETag it reports.
func (d *Driver) Stat(ctx context.Context, key string) (blob.Attrs, error) {
	if err := d.check(ctx); err != nil {
		return blob.Attrs{}, err
	}
	a, err := d.b.Attributes(ctx, key)
	if err != nil {
		return blob.Attrs{}, err
	}
	return blob.Attrs{Key: key, Size: a.Size, ETag: etag(a), ModTime: a.ModTime}, nil
}

// etag is the ETag this driver reports: the store's ETag followed by the MD5
// when the store keeps one, or, when the store reports no ETag, one
// synthesized as W/"<modtime ns>-<size>[-<md5>]".
//
// The MD5 is there because two gocloud drivers build their ETag from a time
// and a size only (memblob: the write time in ns; fileblob: the file's
// modification time, as coarse as the kernel's clock tick), so two same-size
// writes close together can share it: measured here, 17 of 200 back-to-back
// one-byte overwrites on fileblob kept the previous ETag. With the MD5, such
// writes differ unless their bytes are identical too. The value is opaque and
// is never sent back to the store (this driver has no native if-match).
func etag(a *gcblob.Attributes) string {
	e := a.ETag
	if e == "" {
		e = `W/"` + strconv.FormatInt(a.ModTime.UnixNano(), 16) + "-" + strconv.FormatInt(a.Size, 16)
		if len(a.MD5) > 0 {
			e += "-" + hex.EncodeToString(a.MD5)
		}
		return e + `"`
	}
	if len(a.MD5) > 0 {
		e += ";md5=" + hex.EncodeToString(a.MD5)
	}
	return e
}

// Delete implements driver.Driver. gocloud deletes one key a request, and its
// Delete of a missing key is NotFound; here that is success, and up to
// DeleteConcurrency keys are deleted at once. When keys fail, the error names
// each of them; when ctx ends first, keys not yet attempted are reported by
// the context error.
func (d *Driver) Delete(ctx context.Context, keys []string) error {
	if err := d.check(ctx); err != nil {
		return err
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed []keyError
		sem    = make(chan struct{}, d.deleteN)
	)
	started := 0
loop:
	for _, k := range keys {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			break loop
		}
		if ctx.Err() != nil {
			<-sem
			break
		}
		started++
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := d.deleteOne(ctx, k); err != nil {
				mu.Lock()
				failed = append(failed, keyError{k, err})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if started < len(keys) {
		failed = append(failed, keyError{"", fmt.Errorf("%d of %d keys not attempted: %w", len(keys)-started, len(keys), context.Cause(ctx))})
	}
	if len(failed) == 0 {
		return nil
	}
	return &DeleteError{Failed: failed}
}

func (d *Driver) deleteOne(ctx context.Context, key string) error {
	if d.cas != nil {
		defer d.cas.lock(key)()
	}
	err := d.b.Delete(ctx, key)
	switch gcerrors.Code(err) {
	case gcerrors.OK, gcerrors.NotFound:
		return nil
	case gcerrors.Canceled, gcerrors.DeadlineExceeded:
		return err
	}
	// A key that names no object can still fail to delete: on fileblob a
	// key that is only a directory of other keys ("a" beside "a/b") is an
	// os.Remove of a non-empty directory. If the key does not exist as an
	// object, there was nothing to delete.
	if _, serr := d.b.Attributes(ctx, key); gcerrors.Code(serr) == gcerrors.NotFound {
		return nil
	}
	return err
}

type keyError struct {
	key string // "" for an error that concerns no one key
	err error
}

// DeleteError reports the keys a Delete could not remove.
type DeleteError struct {
	Failed []keyError
}

// Keys lists the keys that failed.
func (e *DeleteError) Keys() []string {
	var out []string
	for _, f := range e.Failed {
		if f.key != "" {
			out = append(out, f.key)
		}
	}
	return out
}

func (e *DeleteError) Error() string {
	const show = 5
	msg := fmt.Sprintf("%d key(s) not deleted", len(e.Keys()))
	for i, f := range e.Failed {
		if i == show {
			msg += fmt.Sprintf("; and %d more", len(e.Failed)-show)
			break
		}
		if f.key == "" {
			msg += "; " + f.err.Error()
		} else {
			msg += "; " + strconv.Quote(f.key) + ": " + f.err.Error()
		}
	}
	return msg
}

// Unwrap returns every underlying error, so errors.Is and ErrorCode see them.
func (e *DeleteError) Unwrap() []error {
	out := make([]error, len(e.Failed))
	for i, f := range e.Failed {
		out[i] = f.err
	}
	return out
}

// ErrorCode implements driver.Driver: it maps gocloud's gcerrors codes.
//
// FailedPrecondition is what every gocloud driver returns for a lost
// IfNotExist (S3 412, GCS 412, Azure 409), so it maps to
// CodePreconditionFailed, except for gocloud's own "Bucket has been closed",
// which carries the same code. Internal and ResourceExhausted are
// CodeTransient: gocloud maps gRPC INTERNAL (a server-side 500) and HTTP 429
// to them. Errors gocloud leaves Unknown are classified by an HTTP status when
// the SDK error reports one (aws-sdk-go-v2 does): 429 and 5xx are transient.
func (d *Driver) ErrorCode(err error) blob.Code {
	switch gcerrors.Code(err) {
	case gcerrors.OK:
		return blob.CodeUnknown
	case gcerrors.NotFound:
		return blob.CodeNotExist
	case gcerrors.AlreadyExists:
		return blob.CodePreconditionFailed
	case gcerrors.FailedPrecondition:
		if isGocloudClosed(err) {
			return blob.CodeUnknown
		}
		return blob.CodePreconditionFailed
	case gcerrors.PermissionDenied:
		return blob.CodePermissionDenied
	case gcerrors.InvalidArgument:
		return blob.CodeInvalidArgument
	case gcerrors.Unimplemented:
		return blob.CodeNotSupported
	case gcerrors.ResourceExhausted, gcerrors.Internal:
		return blob.CodeTransient
	case gcerrors.Canceled:
		return blob.CodeCanceled
	case gcerrors.DeadlineExceeded:
		return blob.CodeDeadlineExceeded
	}
	var hs interface{ HTTPStatusCode() int }
	if errors.As(err, &hs) {
		switch c := hs.HTTPStatusCode(); {
		case c == 429 || c >= 500:
			return blob.CodeTransient
		case c == 412:
			return blob.CodePreconditionFailed
		}
	}
	return blob.CodeOf(err)
}

// isGocloudClosed recognizes the error gocloud returns for a call on a closed
// gocloud Bucket. It is unexported and coded FailedPrecondition, so its text
// is all there is to tell it from a lost conditional write.
func isGocloudClosed(err error) bool {
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "bucket has been closed")
}

// As implements driver.Aser. A **gcblob.Bucket receives the gocloud bucket
// itself; any other type is passed to gocloud's Bucket.As, which supports
// the types its driver's package doc lists (for example *s3.Client for
// s3blob, *storage.Client for gcsblob, *container.Client for azureblob,
// os.FileInfo for fileblob; memblob supports none).
func (d *Driver) As(i any) bool {
	if p, ok := i.(**gcblob.Bucket); ok {
		*p = d.b
		return true
	}
	return d.b.As(i)
}

// Close implements driver.Driver: it closes the gocloud bucket. Every later call
// fails with blob.ErrClosed.
func (d *Driver) Close() error {
	d.closeOnce.Do(func() {
		d.closed.Store(true)
		if d.cas != nil {
			releaseCAS(d.b)
		}
		d.closeErr = d.b.Close()
	})
	return d.closeErr
}
