// Package azure is the Azure Blob Storage backend of redokit, on the azblob
// SDK (block blobs).
//
// # Opening
//
// From a URL (import the package for its init):
//
//	azblob://CONTAINER[/PREFIX][?OPTIONS]
//
// Every key is stored under PREFIX + "/" when a prefix is given. Credentials
// and the account come from the environment, first match wins:
//
//  1. AZURE_STORAGE_CONNECTION_STRING: AccountName and AccountKey, or
//     SharedAccessSignature; BlobEndpoint (or DefaultEndpointsProtocol and
//     EndpointSuffix) name the endpoint;
//  2. AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY (shared key);
//  3. AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_SAS_TOKEN (a SAS for the
//     container or the account).
//
// The endpoint is https://ACCOUNT.blob.core.windows.net/ unless the
// connection string or the endpoint option names another one (for Azurite:
// endpoint=http://127.0.0.1:10000/devstoreaccount1). Plain HTTP is used only
// when one of those explicitly asks for it. Keys and SAS tokens never appear
// in errors: the driver rewrites every error message it returns (SAS
// signature and known secrets replaced by "xxxxx"), keeping the SDK error
// reachable with errors.As. Azure AD (token) credentials are not read from
// the environment; use New with a container.Client built on azidentity.
//
// The options, all optional (sizes take a B, KiB, MiB or GiB suffix):
//
//	endpoint=URL          the account's blob endpoint
//	put_threshold=32MiB   objects of at least this size are uploaded as staged blocks
//	block_size=8MiB       the size of a staged block
//	concurrency=4         blocks in flight per Put; delete batches in flight per Delete
//	try_timeout=1m        deadline of each HTTP try (retried); 0 disables
//	max_retries=3         retries of a failed try
//	batch_delete=true     delete with the Blob Batch API (false: one request a key)
//
// Unknown options are an error that names them. With a client of your own,
// use [New] (or [NewDriver] to wrap the driver).
//
// # Semantics
//
// Put below Options.PutThreshold is one Put Blob request, whose body the
// driver holds in memory (so the SDK can retry it) with its Content-MD5 for
// the service to verify (a body it rejects as corrupted is sent again, up to
// Options.MaxRetries times). At or above it, Put reads Options.BlockSize blocks,
// stages them with Put Block, Options.Concurrency at a time, each with its
// Content-MD5, and makes the blob visible with one Put Block List: the only
// moment the new content appears, atomically. Block IDs carry a random
// per-Put ID, so racing writers of one key never reference each other's
// blocks. If the context is canceled, the reader fails or delivers fewer or
// more bytes than declared, or a block fails, no block list is committed:
// nothing becomes visible, and the staged blocks stay uncommitted, invisible,
// until the service discards them (on the blob's next commit, or after a
// week).
//
// Conditions apply on both paths, to Put Blob and to Put Block List:
// IfNotExist is If-None-Match: * (the service answers 409 BlobAlreadyExists)
// and IfMatch is If-Match: ETAG (412 ConditionNotMet); both are
// CodePreconditionFailed. The ETag is the service's (a quoted string). The
// service checks conditions atomically, so of racing conditional writers
// exactly one wins.
//
// Retries: the SDK retries each request (408, 429, 5xx, connection errors)
// with exponential backoff, each try bounded by Options.TryTimeout; the
// driver sets these per call, so they apply to a caller's client too. A
// conditional write whose response is lost is retried and then fails its own
// condition, and a write whose last response is lost past every retry fails
// although its blob landed. Every Put therefore stores a random put ID in
// the blob's metadata (redokit_put_id), and a Put that fails for any reason
// but its context, a bad argument or a permission reads the blob's
// properties once: if they carry the Put's own ID, the Put succeeded. A Put
// whose context ends while its last request is in flight may still have
// landed, as on every object store; it reports the context's error.
//
// Reads: a ranged Get Blob, whose body is read through the SDK's retry
// reader (a dropped connection resumes at the offset reached, on the same
// ETag). An offset at or past the end makes the service answer 416
// InvalidRange; the driver turns that into an empty reader.
//
// List uses List Blobs (flat) pages of at most the requested size. The
// continuation token wraps the service's marker (and StartAfter, see below).
// StartAfter is sent as the startFrom parameter, which is inclusive, and the
// driver drops keys <= StartAfter on every page of the listing, so a server
// that ignores startFrom (an older API version) is still listed correctly,
// at the cost of listing every key from the prefix to StartAfter. Azure and
// Azurite 3.37 honour it.
//
// Delete sends Blob Batch requests of at most 256 deletes each,
// Options.Concurrency batches at a time; a missing key is success, and the
// keys whose sub-requests failed are named in the error.
//
// The service turns a backslash into "/" in blob names, so a key holding a
// backslash would be stored, read and deleted as another key. Every call
// refuses such a key with [blob.ErrInvalidKey] naming it, and a listing
// whose prefix holds one is empty (no blob name can).
//
// # Errors
//
// ErrorCode maps the service error codes BlobNotFound, ContainerNotFound and
// ResourceNotFound (and HTTP 404) to CodeNotExist; BlobAlreadyExists,
// ConditionNotMet (and HTTP 412) to CodePreconditionFailed;
// AuthorizationFailure, AuthenticationFailed,
// AuthorizationPermissionMismatch (and 401, 403) to CodePermissionDenied;
// InvalidRange and other 400s to CodeInvalidArgument; ServerBusy,
// InternalError, OperationTimedOut, Crc64Mismatch and Md5Mismatch (a body
// corrupted in transit), 408, 429, 5xx and connection errors to
// CodeTransient; context errors to CodeCanceled and CodeDeadlineExceeded.
//
// # Escape hatch
//
// Bucket.As accepts **container.Client.
package azure

import (
	"bytes"
	"cmp"
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	azblobblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/driver"
)

// Defaults and limits of Options.
const (
	DefaultPutThreshold = 32 << 20
	DefaultBlockSize    = 8 << 20
	DefaultConcurrency  = 4
	DefaultTryTimeout   = time.Minute
	DefaultMaxRetries   = 3

	MaxPutBlobSize = 5000 << 20 // the service's limit for one Put Blob
	MaxBlockSize   = 4000 << 20 // the service's limit for one block
	MaxBlocks      = 50000      // committed blocks per blob
	MaxBatch       = 256        // sub-requests per Blob Batch
)

// putIDKey is the metadata name holding the random ID of the Put that wrote
// a blob (a C# identifier, as Azure requires).
const putIDKey = "redokit_put_id"

// Options configure a Driver. The zero value (and nil) means the defaults.
type Options struct {
	// PutThreshold is the size from which Put stages blocks; smaller
	// objects are one Put Blob, held in memory. At most MaxPutBlobSize.
	// Default DefaultPutThreshold.
	PutThreshold int64
	// BlockSize is the size of a staged block; a Put holds up to
	// Concurrency blocks in memory. It grows for objects of known size that
	// would need more than MaxBlocks blocks. Default DefaultBlockSize.
	BlockSize int64
	// Concurrency is the number of blocks a Put stages at once, and of
	// batches a Delete sends at once. Default DefaultConcurrency.
	Concurrency int
	// TryTimeout bounds each HTTP try; a try that runs out is retried.
	// Default DefaultTryTimeout; negative disables it.
	TryTimeout time.Duration
	// MaxRetries is the number of retries after a failed try. Default
	// DefaultMaxRetries; negative means none.
	MaxRetries int
	// RetryDelay and MaxRetryDelay shape the exponential backoff. Defaults
	// 200 ms and 10 s.
	RetryDelay, MaxRetryDelay time.Duration
	// NoBatchDelete makes Delete send one Delete Blob request per key
	// instead of Blob Batch requests (for servers without the batch API).
	NoBatchDelete bool
	// Secrets are strings (an account key, a SAS token) that must never
	// appear in an error message; blob.Open fills it. A SAS in the client's URL
	// is found by the driver itself.
	Secrets []string
}

func (o *Options) withDefaults() (Options, error) {
	var v Options
	if o != nil {
		v = *o
		v.Secrets = slices.Clone(o.Secrets)
	}
	switch {
	case v.PutThreshold < 0 || v.PutThreshold > MaxPutBlobSize:
		return v, fmt.Errorf("%w: put threshold %d out of [0, %d]", blob.ErrInvalidArgument, v.PutThreshold, int64(MaxPutBlobSize))
	case v.BlockSize < 0 || v.BlockSize > MaxBlockSize:
		return v, fmt.Errorf("%w: block size %d out of [0, %d]", blob.ErrInvalidArgument, v.BlockSize, int64(MaxBlockSize))
	case v.Concurrency < 0:
		return v, fmt.Errorf("%w: negative concurrency %d", blob.ErrInvalidArgument, v.Concurrency)
	}
	v.PutThreshold = cmp.Or(v.PutThreshold, DefaultPutThreshold)
	v.BlockSize = cmp.Or(v.BlockSize, DefaultBlockSize)
	v.Concurrency = cmp.Or(v.Concurrency, DefaultConcurrency)
	v.TryTimeout = cmp.Or(v.TryTimeout, DefaultTryTimeout)
	v.MaxRetries = cmp.Or(v.MaxRetries, DefaultMaxRetries)
	if v.RetryDelay <= 0 {
		v.RetryDelay = 200 * time.Millisecond
	}
	if v.MaxRetryDelay <= 0 {
		v.MaxRetryDelay = 10 * time.Second
	}
	return v, nil
}

// Driver is the Azure Blob driver.Driver.
type Driver struct {
	client  *container.Client
	opts    Options
	retry   policy.RetryOptions
	secrets []string
	closed  atomic.Bool
}

var (
	_ driver.Driver = (*Driver)(nil)
	_ driver.Aser   = (*Driver)(nil)
)

// New returns a Bucket over the container client. opts may be nil.
func New(client *container.Client, opts *Options) (*blob.Bucket, error) {
	d, err := NewDriver(client, opts)
	if err != nil {
		return nil, err
	}
	return blob.NewBucket(d), nil
}

// NewDriver returns the driver New wraps, for decorating it (metrics, fault
// injection) before handing it to blob.NewBucket.
func NewDriver(client *container.Client, opts *Options) (*Driver, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: azure: nil container client", blob.ErrInvalidArgument)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("azure: %w", err)
	}
	d := &Driver{client: client, opts: o}
	d.retry = policy.RetryOptions{
		MaxRetries:    int32(max(o.MaxRetries, -1)),
		TryTimeout:    max(o.TryTimeout, 0),
		RetryDelay:    o.RetryDelay,
		MaxRetryDelay: o.MaxRetryDelay,
	}
	d.secrets = append(d.secrets, o.Secrets...)
	if u, err := url.Parse(client.URL()); err == nil && u.RawQuery != "" {
		// A SAS client carries its token in the URL: never print it.
		d.secrets = append(d.secrets, u.RawQuery)
		for _, vs := range u.Query() {
			for _, v := range vs {
				if len(v) >= 16 {
					d.secrets = append(d.secrets, v, url.QueryEscape(v))
				}
			}
		}
	}
	d.secrets = slices.DeleteFunc(d.secrets, func(s string) bool { return len(s) < 8 })
	return d, nil
}

// As implements driver.Aser: **container.Client.
func (d *Driver) As(i any) bool {
	if p, ok := i.(**container.Client); ok {
		*p = d.client
		return true
	}
	return false
}

// ctx attaches the driver's retry options to a call.
func (d *Driver) ctx(ctx context.Context) context.Context {
	return policy.WithRetryOptions(ctx, d.retry)
}

func contentHeaders() *azblobblob.HTTPHeaders {
	return &azblobblob.HTTPHeaders{BlobContentType: to.Ptr("application/octet-stream")}
}

// Put implements driver.Driver.
func (d *Driver) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	if d.closed.Load() {
		return blob.Attrs{}, blob.ErrClosed
	}
	if err := checkKey(key); err != nil {
		return blob.Attrs{}, err
	}
	var cond *azblobblob.AccessConditions
	switch {
	case opts.IfNotExist:
		cond = &azblobblob.AccessConditions{ModifiedAccessConditions: &azblobblob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)}}
	case opts.IfMatch != "":
		cond = &azblobblob.AccessConditions{ModifiedAccessConditions: &azblobblob.ModifiedAccessConditions{IfMatch: to.Ptr(azcore.ETag(opts.IfMatch))}}
	}
	putID := driver.NewPutID()
	bb := d.client.NewBlockBlobClient(key)

	small, rest, err := driver.SplitBody(r, size, d.opts.PutThreshold)
	if err != nil {
		return blob.Attrs{}, err
	}
	var a blob.Attrs
	if small != nil {
		a, err = d.putBlob(ctx, bb, small, cond, putID)
	} else {
		a, err = d.putBlocks(ctx, bb, rest, size, cond, putID)
	}
	if err != nil && driver.MayHaveLanded(ctx, d.ErrorCode(err)) {
		// Did our own write land although its response was lost? (See the
		// package doc.)
		if won, ok := d.ownBlob(ctx, key, putID); ok {
			return won, nil
		}
	}
	if err != nil {
		return blob.Attrs{}, d.fail(err)
	}
	a.Key = key
	return a, nil
}

func (d *Driver) ownBlob(ctx context.Context, key, putID string) (blob.Attrs, bool) {
	p, err := d.client.NewBlobClient(key).GetProperties(d.ctx(ctx), nil)
	if err != nil {
		return blob.Attrs{}, false
	}
	for k, v := range p.Metadata {
		if strings.EqualFold(k, putIDKey) && v != nil && *v == putID {
			return blob.Attrs{Key: key, Size: deref(p.ContentLength), ETag: string(deref(p.ETag)), ModTime: deref(p.LastModified)}, true
		}
	}
	return blob.Attrs{}, false
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// contentMD5 is the Content-MD5 of a request body, which the service checks,
// rejecting a body corrupted on the way. MD5 rather than the cheaper CRC-64
// (x-ms-content-crc64): every Azure-compatible server checks Content-MD5
// (Azure Stack, older emulators), and Azurite computes CRC-64 in JavaScript,
// which made the driver 25% slower than a raw upload there (MD5: 8%).
func contentMD5(body []byte) azblobblob.TransferValidationType {
	sum := md5.Sum(body)
	return azblobblob.TransferValidationTypeMD5(sum[:])
}

// resendCorrupted runs send again, up to MaxRetries times, while the service
// rejects the body as corrupted (its Content-MD5 does not match): the SDK
// does not retry a 400, and the body is in memory.
func (d *Driver) resendCorrupted(send func() error) error {
	err := send()
	for i := 0; i < d.opts.MaxRetries && err != nil && (bloberror.HasCode(err, bloberror.Code("Md5Mismatch"), bloberror.Code("Crc64Mismatch"))); i++ {
		err = send()
	}
	return err
}

// putBlob is the single-request path.
func (d *Driver) putBlob(ctx context.Context, bb *blockblob.Client, data []byte, cond *azblobblob.AccessConditions, putID string) (blob.Attrs, error) {
	var resp blockblob.UploadResponse
	err := d.resendCorrupted(func() (err error) {
		resp, err = bb.Upload(d.ctx(ctx), streaming.NopCloser(bytes.NewReader(data)), &blockblob.UploadOptions{
			Metadata:                map[string]*string{putIDKey: to.Ptr(putID)},
			HTTPHeaders:             contentHeaders(),
			AccessConditions:        cond,
			TransactionalValidation: contentMD5(data),
		})
		return err
	})
	if err != nil {
		return blob.Attrs{}, err
	}
	return blob.Attrs{Size: int64(len(data)), ETag: string(deref(resp.ETag)), ModTime: deref(resp.LastModified)}, nil
}

// blockID is the base64 ID of block i of the Put putID. Every ID has the
// same length, as the service requires of the blocks of one blob.
func blockID(putID string, i int) string {
	return base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "%s-%06d", putID, i))
}

// putBlocks stages r as blocks, Concurrency at a time, and commits them.
func (d *Driver) putBlocks(ctx context.Context, bb *blockblob.Client, r io.Reader, size int64, cond *azblobblob.AccessConditions, putID string) (blob.Attrs, error) {
	blockSize := d.opts.BlockSize
	if size > 0 && (size+blockSize-1)/blockSize > MaxBlocks {
		blockSize = (size + MaxBlocks - 1) / MaxBlocks
		if blockSize > MaxBlockSize {
			return blob.Attrs{}, fmt.Errorf("%w: %d bytes exceed the largest block blob", blob.ErrInvalidArgument, size)
		}
	}
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg    sync.WaitGroup
		sem   = make(chan []byte, d.opts.Concurrency) // free buffers
		ids   []string
		total int64
	)
	for range d.opts.Concurrency {
		sem <- nil // buffers are allocated on first use
	}
	var readErr error
	for i := 0; ; i++ {
		var buf []byte
		select {
		case buf = <-sem:
		case <-sctx.Done():
		}
		if sctx.Err() != nil {
			break
		}
		if buf == nil {
			buf = make([]byte, blockSize)
		}
		n, err := io.ReadFull(r, buf)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			err = nil
		}
		if err != nil {
			readErr = err
			sem <- buf
			break
		}
		if n == 0 {
			sem <- buf
			break
		}
		if i >= MaxBlocks {
			readErr = fmt.Errorf("%w: the object needs more than %d blocks of %d bytes", blob.ErrInvalidArgument, MaxBlocks, blockSize)
			sem <- buf
			break
		}
		id, idx := blockID(putID, i), i
		ids = append(ids, id)
		total += int64(n)
		wg.Go(func() {
			defer func() { sem <- buf }()
			block := buf[:n]
			err := d.resendCorrupted(func() error {
				_, err := bb.StageBlock(d.ctx(sctx), id, streaming.NopCloser(bytes.NewReader(block)), &blockblob.StageBlockOptions{
					TransactionalValidation: contentMD5(block),
				})
				return err
			})
			if err != nil {
				cancel(fmt.Errorf("stage block %d: %w", idx, d.fail(err)))
			}
		})
		if n < len(buf) {
			break // the reader ended
		}
	}
	if readErr != nil {
		cancel(readErr)
	}
	wg.Wait()
	if sctx.Err() != nil {
		// The first failure: a block, the reader, or the caller's ctx.
		if err := ctx.Err(); err != nil {
			return blob.Attrs{}, err
		}
		return blob.Attrs{}, context.Cause(sctx)
	}
	resp, err := bb.CommitBlockList(d.ctx(ctx), ids, &blockblob.CommitBlockListOptions{
		Metadata:         map[string]*string{putIDKey: to.Ptr(putID)},
		HTTPHeaders:      contentHeaders(),
		AccessConditions: cond,
	})
	if err != nil {
		return blob.Attrs{}, err
	}
	return blob.Attrs{Size: total, ETag: string(deref(resp.ETag)), ModTime: deref(resp.LastModified)}, nil
}

// NewRangeReader implements driver.Driver.
func (d *Driver) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if d.closed.Load() {
		return nil, blob.ErrClosed
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	rng := azblobblob.HTTPRange{Offset: offset}
	if length > 0 {
		rng.Count = length
	}
	cctx := d.ctx(ctx)
	resp, err := d.client.NewBlobClient(key).DownloadStream(cctx, &azblobblob.DownloadStreamOptions{Range: rng})
	if err != nil {
		if bloberror.HasCode(err, bloberror.InvalidRange) {
			// The blob exists and offset is at or past its end.
			return io.NopCloser(bytes.NewReader(nil)), nil
		}
		return nil, d.fail(err)
	}
	rr := resp.NewRetryReader(cctx, &azblobblob.RetryReaderOptions{MaxRetries: int32(max(d.opts.MaxRetries, 0))})
	return &reader{rc: rr, d: d}, nil
}

var _ driver.VersionReader = (*Driver)(nil)

// ReadVersion implements driver.VersionReader: the ETag is the download
// response's (its retries are conditioned on it), of the bytes it carries.
func (d *Driver) ReadVersion(ctx context.Context, key string) ([]byte, blob.Attrs, error) {
	if d.closed.Load() {
		return nil, blob.Attrs{}, blob.ErrClosed
	}
	if err := checkKey(key); err != nil {
		return nil, blob.Attrs{}, err
	}
	cctx := d.ctx(ctx)
	resp, err := d.client.NewBlobClient(key).DownloadStream(cctx, nil)
	if err != nil {
		return nil, blob.Attrs{}, d.fail(err)
	}
	rr := resp.NewRetryReader(cctx, &azblobblob.RetryReaderOptions{MaxRetries: int32(max(d.opts.MaxRetries, 0))})
	r := &reader{rc: rr, d: d}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, blob.Attrs{}, err
	}
	return data, blob.Attrs{Key: key, Size: int64(len(data)), ETag: string(deref(resp.ETag)), ModTime: deref(resp.LastModified)}, nil
}

// reader rewrites the errors of a body read like every other error.
type reader struct {
	rc io.ReadCloser
	d  *Driver
}

func (r *reader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	if err != nil && err != io.EOF {
		err = r.d.fail(err)
	}
	return n, err
}

func (r *reader) Close() error { return r.d.fail(r.rc.Close()) }

// Stat implements driver.Driver.
func (d *Driver) Stat(ctx context.Context, key string) (blob.Attrs, error) {
	if d.closed.Load() {
		return blob.Attrs{}, blob.ErrClosed
	}
	if err := checkKey(key); err != nil {
		return blob.Attrs{}, err
	}
	p, err := d.client.NewBlobClient(key).GetProperties(d.ctx(ctx), nil)
	if err != nil {
		return blob.Attrs{}, d.fail(err)
	}
	return blob.Attrs{Key: key, Size: deref(p.ContentLength), ETag: string(deref(p.ETag)), ModTime: deref(p.LastModified)}, nil
}

// checkKey refuses a key the service would store under another name: Azure
// Blob Storage turns a backslash into "/" in blob names, so `a\b` would be written,
// read and deleted as "a/b", another key, silently.
func checkKey(key string) error {
	if strings.ContainsRune(key, '\\') {
		return fmt.Errorf("%w: key %q holds a backslash, which Azure Blob Storage turns into %q: it would alias the key %q",
			blob.ErrInvalidKey, key, "/", strings.ReplaceAll(key, `\`, "/"))
	}
	return nil
}

// List tokens: "m" + marker, or "a" + base64url(StartAfter) + "." + marker
// when keys <= StartAfter must still be dropped on later pages.
func encodeToken(startAfter, marker string) string {
	if marker == "" {
		return ""
	}
	if startAfter == "" {
		return "m" + marker
	}
	return "a" + base64.RawURLEncoding.EncodeToString([]byte(startAfter)) + "." + marker
}

func decodeToken(tok string) (startAfter, marker string, err error) {
	bad := fmt.Errorf("%w: malformed list token", blob.ErrInvalidArgument)
	switch {
	case strings.HasPrefix(tok, "m") && len(tok) > 1:
		return "", tok[1:], nil
	case strings.HasPrefix(tok, "a"):
		enc, m, ok := strings.Cut(tok[1:], ".")
		if !ok || m == "" {
			return "", "", bad
		}
		sa, derr := base64.RawURLEncoding.DecodeString(enc)
		if derr != nil {
			return "", "", bad
		}
		return string(sa), m, nil
	}
	return "", "", bad
}

// List implements driver.Driver.
func (d *Driver) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	if d.closed.Load() {
		return blob.ListPage{}, blob.ErrClosed
	}
	pageSize := opts.PageSize
	if pageSize <= 0 || pageSize > blob.DefaultPageSize {
		pageSize = blob.DefaultPageSize
	}
	if strings.ContainsRune(opts.Prefix, '\\') {
		// No blob name holds one (see checkKey), and the service would
		// read the prefix's as "/": list another prefix's blobs.
		return blob.ListPage{}, nil
	}
	lo := &container.ListBlobsFlatOptions{MaxResults: to.Ptr(int32(pageSize))}
	if opts.Prefix != "" {
		lo.Prefix = to.Ptr(opts.Prefix)
	}
	after := opts.StartAfter
	if opts.Token != "" {
		sa, m, err := decodeToken(opts.Token)
		if err != nil {
			return blob.ListPage{}, err
		}
		after = sa
		lo.Marker = to.Ptr(m)
	} else if after != "" {
		lo.StartFrom = to.Ptr(after)
	}
	resp, err := d.client.NewListBlobsFlatPager(lo).NextPage(d.ctx(ctx))
	if err != nil {
		return blob.ListPage{}, d.fail(err)
	}
	var page blob.ListPage
	if resp.Segment != nil {
		for _, it := range resp.Segment.BlobItems {
			if it == nil || it.Name == nil {
				continue
			}
			name := *it.Name
			if after != "" && name <= after {
				continue
			}
			a := blob.Attrs{Key: name}
			if p := it.Properties; p != nil {
				a.Size = deref(p.ContentLength)
				a.ETag = string(deref(p.ETag))
				a.ModTime = deref(p.LastModified)
			}
			page.Objects = append(page.Objects, a)
		}
	}
	page.NextToken = encodeToken(after, deref(resp.NextMarker))
	return page, nil
}

// Delete implements driver.Driver.
func (d *Driver) Delete(ctx context.Context, keys []string) error {
	if d.closed.Load() {
		return blob.ErrClosed
	}
	for _, k := range keys {
		if err := checkKey(k); err != nil {
			return err // before anything is deleted: `a\b` would delete "a/b"
		}
	}
	var failed []KeyError
	if d.opts.NoBatchDelete {
		failed = driver.DeleteEach(ctx, keys, 4*d.opts.Concurrency, func(ctx context.Context, k string) error {
			_, err := d.client.NewBlobClient(k).Delete(d.ctx(ctx), nil)
			if err != nil && d.ErrorCode(err) != blob.CodeNotExist {
				return d.fail(err)
			}
			return nil
		})
	} else {
		var (
			mu  sync.Mutex
			wg  sync.WaitGroup
			sem = make(chan struct{}, d.opts.Concurrency)
		)
		for batch := range slices.Chunk(keys, MaxBatch) {
			if ctx.Err() != nil {
				break
			}
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				errs := d.deleteBatch(ctx, batch)
				mu.Lock()
				failed = append(failed, errs...)
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	if len(failed) == 0 {
		return ctx.Err()
	}
	return driver.NewDeleteError("azure", len(keys), failed)
}

// deleteBatch deletes up to MaxBatch keys with one Blob Batch request.
func (d *Driver) deleteBatch(ctx context.Context, keys []string) []KeyError {
	all := func(err error) []KeyError {
		err = d.fail(err)
		out := make([]KeyError, len(keys))
		for i, k := range keys {
			out[i] = KeyError{Key: k, Err: err}
		}
		return out
	}
	bb, err := d.client.NewBatchBuilder()
	if err != nil {
		return all(err)
	}
	for _, k := range keys {
		if err := bb.Delete(k, nil); err != nil {
			return all(err)
		}
	}
	resp, err := d.client.SubmitBatch(d.ctx(ctx), bb, nil)
	if err != nil {
		return all(err)
	}
	var failed []KeyError
	seen := make([]bool, len(keys))
	for _, item := range resp.Responses {
		if item == nil || item.ContentID == nil || *item.ContentID < 0 || *item.ContentID >= len(keys) {
			continue
		}
		i := *item.ContentID
		seen[i] = true
		if item.Error != nil && d.ErrorCode(item.Error) != blob.CodeNotExist {
			failed = append(failed, KeyError{Key: keys[i], Err: d.fail(item.Error)})
		}
	}
	for i, ok := range seen {
		if !ok {
			failed = append(failed, KeyError{Key: keys[i], Err: errors.New("azure: no sub-response for this key in the batch response")})
		}
	}
	return failed
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
	var de *DeleteError
	if errors.As(err, &de) && len(de.Failed) > 0 {
		return d.ErrorCode(de.Failed[0].Err)
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		switch bloberror.Code(re.ErrorCode) {
		case bloberror.BlobNotFound, bloberror.ContainerNotFound, bloberror.ResourceNotFound:
			return blob.CodeNotExist
		case bloberror.BlobAlreadyExists, bloberror.ConditionNotMet:
			return blob.CodePreconditionFailed
		case bloberror.AuthorizationFailure, bloberror.AuthenticationFailed, bloberror.AuthorizationPermissionMismatch,
			bloberror.InsufficientAccountPermissions:
			return blob.CodePermissionDenied
		case bloberror.ServerBusy, bloberror.InternalError, bloberror.OperationTimedOut,
			// A body corrupted on the way: sending it again is the cure.
			"Crc64Mismatch", "Md5Mismatch":
			return blob.CodeTransient
		case bloberror.InvalidRange:
			return blob.CodeInvalidArgument
		}
		return driver.HTTPStatusCode(re.StatusCode)
	}
	if c := blob.CodeOf(err); c != blob.CodeUnknown {
		return c
	}
	if isConnError(err) {
		return blob.CodeTransient
	}
	return blob.CodeUnknown
}

// isConnError reports a broken or refused connection: worth retrying.
func isConnError(err error) bool {
	var ne net.Error
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed):
		return true
	case errors.As(err, &ne):
		return true
	}
	var ue *url.Error
	if errors.As(err, &ue) && errors.Is(err, io.EOF) {
		return true // the server closed the connection mid-request
	}
	return false
}

// Close implements driver.Driver. Azure clients hold no resources to release.
func (d *Driver) Close() error {
	d.closed.Store(true)
	return nil
}

// azError is an SDK error with a compact message free of secrets; it
// unwraps to the SDK error.
type azError struct {
	msg string
	err error
}

func (e *azError) Error() string { return e.msg }
func (e *azError) Unwrap() error { return e.err }

var (
	sigRE     = regexp.MustCompile(`(?i)\b(sig|signature|accountkey|sharedaccesssignature)=[^&;\s"'<]*`)
	messageRE = regexp.MustCompile(`(?s)<Message>([^<]*)</Message>`)
)

// fail rewrites err for the caller: a short message for service errors and
// no secret anywhere.
func (d *Driver) fail(err error) error {
	if err == nil {
		return nil
	}
	var ae *azError
	if errors.As(err, &ae) {
		return err
	}
	var msg string
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		msg = compactResponseError(re)
	} else {
		msg = err.Error()
	}
	red := d.redact(msg)
	if re == nil && red == err.Error() {
		return err
	}
	return &azError{msg: red, err: err}
}

func (d *Driver) redact(s string) string {
	for _, sec := range d.secrets {
		s = strings.ReplaceAll(s, sec, "xxxxx")
	}
	return sigRE.ReplaceAllString(s, "${1}=xxxxx")
}

func compactResponseError(re *azcore.ResponseError) string {
	var b strings.Builder
	b.WriteString("azure:")
	if resp := re.RawResponse; resp != nil {
		if req := resp.Request; req != nil {
			fmt.Fprintf(&b, " %s %s:", req.Method, req.URL.EscapedPath())
		}
	}
	fmt.Fprintf(&b, " %d", re.StatusCode)
	if re.ErrorCode != "" {
		b.WriteString(" " + re.ErrorCode)
	}
	// The service's message, first line (the rest is a request ID and time).
	if m := messageRE.FindStringSubmatch(re.Error()); m != nil {
		line, _, _ := strings.Cut(strings.TrimSpace(m[1]), "\n")
		if line = strings.TrimSpace(line); line != "" {
			b.WriteString(": " + line)
		}
	}
	return b.String()
}
