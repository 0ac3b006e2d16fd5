// Package gcs is the Google Cloud Storage backend of redokit, on
// cloud.google.com/go/storage (JSON API for writes, lists and stats; XML API
// for reads, as the library does).
//
// # Opening
//
// From a URL (import the package for its init):
//
//	gs://BUCKET[/PREFIX][?OPTIONS]
//
// Every key is stored under PREFIX + "/" when a prefix is given ("gs://b/logs"
// stores key "x" as "logs/x"). Credentials are Google's Application Default
// Credentials, unless the environment variable STORAGE_EMULATOR_HOST is set:
// then the library talks plain HTTP, without authentication, to that host (an
// emulator such as fake-gcs-server). Plain HTTP is used in that case and when
// the URL's endpoint option asks for it, never otherwise. The options, all
// optional (sizes take a B, KiB, MiB or GiB suffix or are bytes):
//
//	chunk_size=16MiB          resumable uploads send chunks of this size (rounded up to 256 KiB by the library)
//	resumable_threshold=16MiB objects of at least this size use a resumable upload; smaller ones one request
//	concurrency=16            per-key deletes in flight during a batch delete
//	timeout=1m                per-call deadline (see Options.Timeout); 0 disables
//	max_attempts=6            attempts of a retried request, the first included
//	endpoint=URL              JSON API endpoint, e.g. http://127.0.0.1:4443/storage/v1/
//	anonymous=true            send no credentials (public buckets, emulators behind endpoint=)
//
// Unknown options are an error that names them. With a client of your own,
// use [New] (or [NewDriver] to wrap the driver).
//
// # Semantics
//
// Put is atomic: an object becomes visible only when its upload finalizes.
// Objects smaller than Options.ResumableThreshold (and every object of unknown
// size that turns out smaller) go up in one multipart request whose body the
// driver holds in memory, with its CRC32C for the server to verify; the
// driver retries that request itself (Writer.ChunkSize=0 makes the library
// unable to). Larger objects use a resumable upload session of
// Options.ChunkSize chunks, each retried by the library; the session is only
// finalized by the last chunk, so a canceled context, a reader error or a
// reader that delivers fewer or more bytes than the declared size leaves
// nothing visible (an unfinalized session expires on its own after a week).
//
// The ETag of an object is its generation number in decimal: it changes on
// every write, and PutOptions.IfMatch is sent as the precondition
// ifGenerationMatch. An IfMatch that is not a decimal generation cannot match
// and fails with CodePreconditionFailed without a request. IfNotExist is
// ifGenerationMatch=0 (Conditions{DoesNotExist: true}). The server checks
// preconditions atomically, so of racing conditional writers exactly one wins.
//
// Retries: the bucket handle retries every operation on transient errors
// (408, 429, 5xx, connection resets and connections closed mid-request, as
// storage.ShouldRetry decides; it is set explicitly because resumable chunks
// otherwise use a narrower predicate) with exponential backoff, under policy
// RetryAlways. That is safe: unconditional puts and deletes are idempotent,
// and conditional puts carry their precondition. Two ambiguities remain, as
// on every object store: if a conditional write succeeds but its response is
// lost, the retry finds its own object and fails the precondition; and a
// write whose last response is lost past every retry fails although its
// object landed. The driver resolves both: every Put
// stores a random put ID in the object's metadata (key "redokit-put-id"),
// and a Put that fails for any reason but its context, a bad argument or a
// permission reads the object's metadata once; if the object carries its own
// put ID, the Put succeeded and returns the object's attributes. (One more
// case: fake-gcs-server answers 404 to the retry of a resumable upload's last
// chunk once the session has finished, where GCS returns the object.) A
// Put whose context ends while its last request is in flight may still have
// landed, as on every object store; it reports the context's error.
//
// Timeouts: Options.Timeout is a per-call deadline (context.WithTimeout
// around the call, retries included) for Stat, one List page, each key of a
// Delete, each attempt of a single-request upload, and the opening of a
// reader (time to the response headers; reading the body is bounded by the
// caller's context only, since a reader may be held open for long). A
// resumable upload is bounded by the caller's context; each of its chunks
// must be acknowledged within Timeout (Writer.ChunkTransferTimeout) and is
// retried for up to Options.ChunkRetryDeadline.
//
// Reads: NewRangeReader maps to an HTTP range request. An offset at or past
// the end of the object makes the server answer 416; the driver turns that
// into an empty reader.
//
// List pages come from the Objects iterator (one iterator.Pager page of the
// requested size plus one). StartAfter is sent as the query's startOffset,
// which is inclusive, and the key equal to it is dropped. The continuation
// token is the last key of the page, used the same way; it is not GCS's page
// token, whose meaning differs on fake-gcs-server (see List).
//
// Delete removes keys one request each (the Go library has no batch call),
// Options.Concurrency at a time. A missing key is success; the keys that
// failed are named in the error, each with its cause.
//
// # Errors
//
// ErrorCode maps storage.ErrObjectNotExist, storage.ErrBucketNotExist and
// HTTP 404 to CodeNotExist; 412 to CodePreconditionFailed; 401 and 403 to
// CodePermissionDenied; 400 and 416 to CodeInvalidArgument, except a 400 for
// a CRC32C or MD5 mismatch (a body corrupted in transit), which is
// CodeTransient like 408, 429, 5xx and errors the library would retry
// (connection resets, unexpected EOF); context errors to CodeCanceled and
// CodeDeadlineExceeded.
//
// # Escape hatch
//
// Bucket.As accepts **storage.Client and **storage.BucketHandle.
package gcs

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/driver"
)

// Defaults of Options.
const (
	DefaultChunkSize          = 16 << 20
	DefaultResumableThreshold = 16 << 20
	DefaultConcurrency        = 16
	DefaultTimeout            = time.Minute
	DefaultMaxAttempts        = 6
	DefaultChunkRetryDeadline = 32 * time.Second
)

// putIDKey is the metadata key holding the random ID of the Put that wrote
// an object (see the package doc on retries).
const putIDKey = "redokit-put-id"

// Options configure a Driver. The zero value (and nil) means the defaults.
type Options struct {
	// ChunkSize is the chunk size of resumable uploads (Writer.ChunkSize);
	// the library rounds it up to a multiple of 256 KiB. Each resumable Put
	// holds one chunk in memory. Default DefaultChunkSize.
	ChunkSize int
	// ResumableThreshold is the size from which Put uses a resumable upload;
	// smaller objects go up in one request, held in memory. Default
	// DefaultResumableThreshold.
	ResumableThreshold int64
	// Concurrency is the number of single-key deletes a batch Delete keeps
	// in flight. Default DefaultConcurrency.
	Concurrency int
	// Timeout is the per-call deadline described in the package doc.
	// Default DefaultTimeout; negative disables it.
	Timeout time.Duration
	// ChunkRetryDeadline bounds the retries of one resumable chunk
	// (Writer.ChunkRetryDeadline). Default DefaultChunkRetryDeadline.
	ChunkRetryDeadline time.Duration
	// MaxAttempts bounds the attempts of a retried request, the first one
	// included. Default DefaultMaxAttempts.
	MaxAttempts int
	// Backoff is the retry backoff. Default: 100 ms initial, doubling, at
	// most 5 s, jittered by the library.
	Backoff gax.Backoff
	// OwnClient makes Close close the client. blob.Open sets it; with New the
	// caller keeps ownership unless it sets it.
	OwnClient bool
}

func (o *Options) withDefaults() (Options, error) {
	var v Options
	if o != nil {
		v = *o
	}
	switch {
	case v.ChunkSize < 0:
		return v, fmt.Errorf("%w: negative chunk size %d", blob.ErrInvalidArgument, v.ChunkSize)
	case v.ResumableThreshold < 0:
		return v, fmt.Errorf("%w: negative resumable threshold %d", blob.ErrInvalidArgument, v.ResumableThreshold)
	case v.Concurrency < 0:
		return v, fmt.Errorf("%w: negative concurrency %d", blob.ErrInvalidArgument, v.Concurrency)
	case v.MaxAttempts < 0:
		return v, fmt.Errorf("%w: negative max attempts %d", blob.ErrInvalidArgument, v.MaxAttempts)
	case v.ChunkRetryDeadline < 0:
		return v, fmt.Errorf("%w: negative chunk retry deadline %v", blob.ErrInvalidArgument, v.ChunkRetryDeadline)
	}
	v.ChunkSize = cmp.Or(v.ChunkSize, DefaultChunkSize)
	v.ResumableThreshold = cmp.Or(v.ResumableThreshold, DefaultResumableThreshold)
	v.Concurrency = cmp.Or(v.Concurrency, DefaultConcurrency)
	v.Timeout = cmp.Or(v.Timeout, DefaultTimeout)
	v.ChunkRetryDeadline = cmp.Or(v.ChunkRetryDeadline, DefaultChunkRetryDeadline)
	v.MaxAttempts = cmp.Or(v.MaxAttempts, DefaultMaxAttempts)
	if v.Backoff == (gax.Backoff{}) {
		v.Backoff = gax.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second, Multiplier: 2}
	}
	return v, nil
}

// Driver is the GCS driver.Driver.
type Driver struct {
	client *storage.Client
	bkt    *storage.BucketHandle
	name   string
	opts   Options
	closed atomic.Bool
}

var (
	_ driver.Driver = (*Driver)(nil)
	_ driver.Aser   = (*Driver)(nil)
)

// New returns a Bucket over the GCS bucket named bucket, through client. opts
// may be nil. The caller keeps ownership of client unless opts.OwnClient.
func New(client *storage.Client, bucket string, opts *Options) (*blob.Bucket, error) {
	d, err := NewDriver(client, bucket, opts)
	if err != nil {
		return nil, err
	}
	return blob.NewBucket(d), nil
}

// NewDriver returns the driver New wraps, for decorating it (metrics, fault
// injection) before handing it to blob.NewBucket.
func NewDriver(client *storage.Client, bucket string, opts *Options) (*Driver, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: gcs: nil client", blob.ErrInvalidArgument)
	}
	if bucket == "" {
		return nil, fmt.Errorf("%w: gcs: empty bucket name", blob.ErrInvalidArgument)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("gcs: %w", err)
	}
	// The retry settings live on the bucket handle, not the client, so a
	// caller's client keeps its own configuration.
	bkt := client.Bucket(bucket).Retryer(
		storage.WithPolicy(storage.RetryAlways),
		storage.WithBackoff(o.Backoff),
		storage.WithMaxAttempts(o.MaxAttempts),
		// Explicit, because without it resumable chunks fall back to the
		// upload library's own predicate, which does not retry a
		// connection closed mid-request (a bare EOF).
		storage.WithErrorFunc(storage.ShouldRetry),
	)
	return &Driver{client: client, bkt: bkt, name: bucket, opts: o}, nil
}

// As implements driver.Aser: **storage.Client and **storage.BucketHandle.
func (d *Driver) As(i any) bool {
	switch p := i.(type) {
	case **storage.Client:
		*p = d.client
	case **storage.BucketHandle:
		*p = d.bkt
	default:
		return false
	}
	return true
}

// callCtx applies the per-call deadline.
func (d *Driver) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if d.opts.Timeout > 0 {
		return context.WithTimeout(ctx, d.opts.Timeout)
	}
	return context.WithCancel(ctx)
}

// ETag returns the ETag this driver reports for an object generation.
func ETag(generation int64) string { return strconv.FormatInt(generation, 10) }

func attrsOf(a *storage.ObjectAttrs) blob.Attrs {
	return blob.Attrs{Key: a.Name, Size: a.Size, ETag: ETag(a.Generation), ModTime: a.Updated}
}

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// Put implements driver.Driver.
func (d *Driver) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	if d.closed.Load() {
		return blob.Attrs{}, blob.ErrClosed
	}
	obj := d.bkt.Object(key)
	switch {
	case opts.IfNotExist:
		obj = obj.If(storage.Conditions{DoesNotExist: true})
	case opts.IfMatch != "":
		gen, err := strconv.ParseInt(opts.IfMatch, 10, 64)
		if err != nil || gen <= 0 {
			return blob.Attrs{}, fmt.Errorf("%w: if-match ETag %q is not a GCS generation", blob.ErrPreconditionFailed, opts.IfMatch)
		}
		obj = obj.If(storage.Conditions{GenerationMatch: gen})
	}
	putID := driver.NewPutID()

	small, rest, err := driver.SplitBody(r, size, d.opts.ResumableThreshold)
	if err != nil {
		return blob.Attrs{}, err
	}
	var a *storage.ObjectAttrs
	if small != nil {
		a, err = d.putSmall(ctx, obj, small, putID)
	} else {
		a, err = d.putResumable(ctx, obj, rest, putID)
	}
	if err != nil && driver.MayHaveLanded(ctx, d.ErrorCode(err)) {
		// Did our own write land although its response was lost? (See the
		// package doc.)
		if won, ok := d.ownObject(ctx, key, putID); ok {
			return won, nil
		}
	}
	if err != nil {
		return blob.Attrs{}, err
	}
	return attrsOf(a), nil
}

// ownObject reports the object's attributes if it carries putID.
func (d *Driver) ownObject(ctx context.Context, key, putID string) (blob.Attrs, bool) {
	cctx, cancel := d.callCtx(ctx)
	defer cancel()
	a, err := d.bkt.Object(key).Attrs(cctx)
	if err != nil || a.Metadata[putIDKey] != putID {
		return blob.Attrs{}, false
	}
	return attrsOf(a), true
}

func (d *Driver) newWriter(ctx context.Context, obj *storage.ObjectHandle, putID string) *storage.Writer {
	w := obj.NewWriter(ctx)
	w.ContentType = "application/octet-stream"
	w.Metadata = map[string]string{putIDKey: putID}
	return w
}

// putSmall uploads data in one request, retrying it on transient errors
// (the library cannot, as it keeps no copy of a ChunkSize=0 body).
func (d *Driver) putSmall(ctx context.Context, obj *storage.ObjectHandle, data []byte, putID string) (*storage.ObjectAttrs, error) {
	sum := crc32.Checksum(data, crc32c)
	bo := d.opts.Backoff
	for attempt := 1; ; attempt++ {
		a, err := d.putSmallOnce(ctx, obj, data, sum, putID)
		// An attempt that ran out of its own deadline (a stalled
		// connection) is worth another one while the caller's ctx lives.
		retry := d.ErrorCode(err) == blob.CodeTransient || errors.Is(err, context.DeadlineExceeded)
		if err == nil || !retry || attempt >= d.opts.MaxAttempts || ctx.Err() != nil {
			return a, err
		}
		if serr := gax.Sleep(ctx, bo.Pause()); serr != nil {
			return nil, err
		}
	}
}

func (d *Driver) putSmallOnce(ctx context.Context, obj *storage.ObjectHandle, data []byte, sum uint32, putID string) (*storage.ObjectAttrs, error) {
	cctx, cancel := d.callCtx(ctx)
	defer cancel()
	w := d.newWriter(cctx, obj, putID)
	w.ChunkSize = 0
	w.CRC32C = sum
	w.SendCRC32C = true // the server rejects a corrupted body
	_, err := w.Write(data)
	return finish(w, cancel, err)
}

// finish ends an upload through w, whose context cancel cancels, after the
// body was written with err: an error abandons the upload (its context is
// canceled before Close, so nothing becomes visible), else Close commits it.
func finish(w *storage.Writer, cancel context.CancelFunc, err error) (*storage.ObjectAttrs, error) {
	if err != nil {
		cancel()
		_ = w.Close()
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return w.Attrs(), nil
}

// putResumable streams r through a resumable upload session. Any error
// before the last chunk cancels the writer's context, which abandons the
// session unfinalized: nothing becomes visible.
func (d *Driver) putResumable(ctx context.Context, obj *storage.ObjectHandle, r io.Reader, putID string) (*storage.ObjectAttrs, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := d.newWriter(wctx, obj, putID)
	w.ChunkSize = d.opts.ChunkSize
	w.ChunkRetryDeadline = d.opts.ChunkRetryDeadline
	if d.opts.Timeout > 0 {
		w.ChunkTransferTimeout = d.opts.Timeout
	}
	// Large writes: each Write goes through a pipe to the upload goroutine,
	// and io.Copy's 32 KiB writes cost a fifth of the throughput.
	_, err := io.CopyBuffer(w, r, make([]byte, min(d.opts.ChunkSize, 1<<20)))
	return finish(w, cancel, err)
}

// NewRangeReader implements driver.Driver.
func (d *Driver) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if d.closed.Load() {
		return nil, blob.ErrClosed
	}
	// The deadline covers the wait for the response only: cancel rctx if it
	// passes before the reader opens, and leave the body to the caller's ctx.
	rctx, cancel := context.WithCancelCause(ctx)
	var timer *time.Timer
	if d.opts.Timeout > 0 {
		timer = time.AfterFunc(d.opts.Timeout, func() {
			cancel(fmt.Errorf("gcs: no response within %v: %w", d.opts.Timeout, context.DeadlineExceeded))
		})
	}
	r, err := d.bkt.Object(key).NewRangeReader(rctx, offset, length)
	if timer != nil && !timer.Stop() {
		if r != nil {
			r.Close()
		}
		err = context.Cause(rctx)
	}
	if err != nil {
		cancel(nil)
		var gerr *googleapi.Error
		if errors.As(err, &gerr) && gerr.Code == http.StatusRequestedRangeNotSatisfiable {
			// The object exists and offset is at or past its end.
			return io.NopCloser(bytes.NewReader(nil)), nil
		}
		return nil, err
	}
	return &reader{Reader: r, cancel: func() { cancel(nil) }}, nil
}

var _ driver.VersionReader = (*Driver)(nil)

// ReadVersion implements driver.VersionReader: the ETag is the generation
// the reader's response served.
func (d *Driver) ReadVersion(ctx context.Context, key string) ([]byte, blob.Attrs, error) {
	rc, err := d.NewRangeReader(ctx, key, 0, -1)
	if err != nil {
		return nil, blob.Attrs{}, err
	}
	defer rc.Close()
	r, ok := rc.(*reader)
	if !ok {
		return nil, blob.Attrs{}, fmt.Errorf("gcs: read %s: no reader attributes to pair the bytes with", key)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, blob.Attrs{}, err
	}
	return data, blob.Attrs{Key: key, Size: int64(len(data)), ETag: ETag(r.Attrs.Generation), ModTime: r.Attrs.LastModified}, nil
}

type reader struct {
	*storage.Reader
	cancel func()
}

func (r *reader) Close() error {
	err := r.Reader.Close()
	r.cancel()
	return err
}

// Stat implements driver.Driver.
func (d *Driver) Stat(ctx context.Context, key string) (blob.Attrs, error) {
	if d.closed.Load() {
		return blob.Attrs{}, blob.ErrClosed
	}
	cctx, cancel := d.callCtx(ctx)
	defer cancel()
	a, err := d.bkt.Object(key).Attrs(cctx)
	if err != nil {
		return blob.Attrs{}, err
	}
	return attrsOf(a), nil
}

// List implements driver.Driver.
//
// The continuation token is the last key returned, not the server's page
// token: the next page is the query again with startOffset at that key,
// which is dropped. On GCS the two are equivalent, but fake-gcs-server's
// page token names the first key of the next page, so a key inserted between
// two pages would never be listed; the driver's own token means the same on
// every server.
func (d *Driver) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	if d.closed.Load() {
		return blob.ListPage{}, blob.ErrClosed
	}
	pageSize := opts.PageSize
	if pageSize <= 0 || pageSize > blob.DefaultPageSize {
		pageSize = blob.DefaultPageSize
	}
	after := opts.StartAfter
	if opts.Token != "" {
		after = opts.Token
	}
	q := &storage.Query{Prefix: opts.Prefix, Projection: storage.ProjectionNoACL}
	if after > opts.Prefix {
		q.StartOffset = after // inclusive: the key itself is dropped below
	}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Generation", "Updated"}); err != nil {
		return blob.ListPage{}, err
	}
	cctx, cancel := d.callCtx(ctx)
	defer cancel()
	// One more than a page: the key equal to after may take a place.
	var objs []*storage.ObjectAttrs
	more, err := iterator.NewPager(d.bkt.Objects(cctx, q), pageSize+1, "").NextPage(&objs)
	if err != nil {
		return blob.ListPage{}, err
	}
	var page blob.ListPage
	for _, o := range objs {
		if after != "" && o.Name <= after {
			continue
		}
		if len(page.Objects) == pageSize {
			more = "more"
			break
		}
		page.Objects = append(page.Objects, attrsOf(o))
	}
	if more != "" && len(page.Objects) > 0 {
		page.NextToken = page.Objects[len(page.Objects)-1].Key
	}
	return page, nil
}

// Delete implements driver.Driver.
func (d *Driver) Delete(ctx context.Context, keys []string) error {
	if d.closed.Load() {
		return blob.ErrClosed
	}
	failed := driver.DeleteEach(ctx, keys, d.opts.Concurrency, func(ctx context.Context, k string) error {
		cctx, cancel := d.callCtx(ctx)
		defer cancel()
		if err := d.bkt.Object(k).Delete(cctx); err != nil && d.ErrorCode(err) != blob.CodeNotExist {
			return err
		}
		return nil
	})
	if len(failed) == 0 {
		return ctx.Err()
	}
	return driver.NewDeleteError("gcs", len(keys), failed)
}

// DeleteError reports the keys of a batch Delete that failed (see
// driver.DeleteError).
type DeleteError = driver.DeleteError

// KeyError is one key that a batch Delete failed to remove.
type KeyError = driver.KeyError

// ErrorCode implements driver.Driver.
func (d *Driver) ErrorCode(err error) blob.Code {
	if c, ok := driver.ContextCode(err); ok {
		return c
	}
	if errors.Is(err, storage.ErrObjectNotExist) || errors.Is(err, storage.ErrBucketNotExist) {
		return blob.CodeNotExist
	}
	if c := blob.CodeOf(err); c != blob.CodeUnknown {
		return c
	}
	var de *DeleteError
	if errors.As(err, &de) && len(de.Failed) > 0 {
		return d.ErrorCode(de.Failed[0].Err)
	}
	status := 0
	var gerr *googleapi.Error
	var aerr *apierror.APIError
	switch {
	case errors.As(err, &gerr):
		status = gerr.Code
		if m := strings.ToLower(gerr.Message); status == http.StatusBadRequest && (strings.Contains(m, "crc32c") || strings.Contains(m, "md5")) {
			// A body corrupted on the way (its checksum does not match):
			// sending it again is the cure.
			return blob.CodeTransient
		}
	case errors.As(err, &aerr):
		status = aerr.HTTPCode()
	}
	if c := driver.HTTPStatusCode(status); c != blob.CodeUnknown {
		return c
	}
	if storage.ShouldRetry(err) {
		return blob.CodeTransient
	}
	return blob.CodeUnknown
}

// Close implements driver.Driver. It closes the client only if the driver owns
// it (Options.OwnClient, set by blob.Open).
func (d *Driver) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	if d.opts.OwnClient {
		return d.client.Close()
	}
	return nil
}
