// Package s3 is the Amazon S3 backend of redokit, on aws-sdk-go-v2. It also
// serves S3-compatible stores (versitygw, MinIO, Ceph RGW, R2, …) through a
// custom endpoint.
//
// # Opening
//
// From a URL (import the package for its init):
//
//	s3://BUCKET[/PREFIX][?OPTIONS]
//
// Every key is stored under PREFIX + "/" when a prefix is given
// ("s3://b/logs" stores key "x" as "logs/x"). Credentials, and the region
// when the URL has none, come from the SDK's standard chain
// (config.LoadDefaultConfig: environment, shared config and credentials
// files, SSO, web identity, container and instance roles). Credentials never
// appear in the URL (a URL with user information is refused), in an error or
// in a log line. The options, all optional (sizes take a B, KiB, MiB or GiB
// suffix or are bytes; durations are Go durations):
//
//	region=us-east-1           the bucket's region (default: the SDK chain; us-east-1 with a custom endpoint)
//	endpoint=URL               an S3-compatible endpoint; plain http only if it says http:// or with disable_https
//	use_path_style=true        path-style requests (https://host/bucket/key), which most S3-compatible stores need
//	disable_https=true         plain http to the endpoint (or to AWS) although the URL does not say http://
//	sse=AES256                 server-side encryption: AES256 (SSE-S3), aws:kms or aws:kms:dsse
//	sse_kms_key_id=ID          the KMS key of SSE-KMS (implies sse=aws:kms when sse is not given)
//	part_size=8MiB             multipart part size, 5 MiB to 5 GiB
//	multipart_threshold=16MiB  objects larger than this go up in parts, up to it in one PutObject (0: all in parts)
//	concurrency=4              parts in flight in one multipart upload
//	timeout=1m                 per-attempt deadline of each request (see Options.Timeout); 0 disables
//	max_attempts=3             attempts of a retried request, the first included
//
// Unknown options are an error that names them. From Go, [New] with a nil
// client takes the same settings as an [Options]; give it a client of your
// own to configure that yourself (and use [NewDriver] to wrap the driver).
//
// # Put
//
// Put is atomic: S3 shows an object only once PutObject or
// CompleteMultipartUpload succeeds. Objects of at most
// Options.MultipartThreshold bytes (16 MiB by default) go up in one PutObject:
// one request, which is what a redo flush should cost. Larger objects (and
// objects of unknown size that turn out larger) go up as a multipart upload of
// Options.PartSize parts (8 MiB by default), at most Options.Concurrency (4)
// in flight. A canceled context, a failed part, a reader error or a reader
// that delivers more or fewer bytes than the declared size aborts the upload
// (AbortMultipartUpload, with a fresh 30-second context of its own when the
// caller's has ended, retried within that budget), so nothing is visible and
// no parts are left to bill. If the abort itself cannot get through, the
// error says so and names the upload ID; a bucket lifecycle rule
// (AbortIncompleteMultipartUpload) is the backstop.
//
// Bodies are always seekable, because aws-sdk-go-v2 must hash the payload to
// sign it over plain http and refuses a stream it cannot rewind (it also
// rewinds bodies to retry). A *bytes.Reader or any io.ReaderAt+io.Seeker
// holding exactly the declared size is sent as is (parts are sections of it,
// no copy); any other reader is read into part-sized buffers from a pool, so
// a Put holds at most Concurrency × PartSize bytes, or MultipartThreshold +
// PartSize when it has read that much before learning that the object needs
// parts. The caller's reader is read on the caller's goroutine; the context
// is checked between reads (a Read that blocks holds the Put). The driver never uses the unsigned-payload middleware:
// signing the payload is what protects the bytes on plain http.
//
// Conditional writes: PutOptions.IfNotExist sends If-None-Match: * and
// PutOptions.IfMatch sends If-Match: ETAG, on PutObject and on
// CompleteMultipartUpload alike (the server checks them when the object
// would become visible; a multipart upload that loses is aborted). S3
// answers 412 PreconditionFailed, or 409 ConditionalRequestConflict to a
// racer that lost while the winner was still completing; both are
// CodePreconditionFailed. S3 answers an If-Match on a missing key with 404
// NoSuchKey; the driver reports that as CodePreconditionFailed too (the
// contract: IfMatch fails unless the current object has that ETag). A
// retried request makes one ambiguity: if a
// conditional write succeeds but its response is lost, the SDK's retry finds
// the object it just wrote and fails. Every Put stores a random put ID in the
// object's metadata (x-amz-meta-redokit-put-id), and a conditional Put that
// fails its precondition reads the object's metadata once (HeadObject); when
// the object carries its own put ID, the Put succeeded and returns its
// attributes.
//
// Checksums: with a custom endpoint, a client New builds uses the SDK's "when_required"
// checksum modes unless the environment or shared config chose one, as
// S3-compatible servers differ in what flexible checksums they take. The
// segment format carries its own CRC32C on every block.
//
// # Reads, lists, deletes
//
// NewRangeReader is a GetObject with an HTTP range. S3 answers 416
// InvalidRange to an offset at or past the end of the object; the driver
// turns that into an empty reader (the object exists; a missing key is
// NoSuchKey). Stat is HeadObject. List pages are ListObjectsV2 pages: the
// continuation token is S3's own, and StartAfter is S3's start-after (sent
// only when there is no token). Delete sends one DeleteObject for a single
// key and DeleteObjects (quiet mode, at most 1,000 keys) otherwise; S3
// reports no error for a missing key, and the keys that failed are named in
// a *DeleteError with S3's code and message for each.
//
// # Retries and timeouts
//
// Every request goes through the SDK's standard retryer with
// Options.MaxAttempts attempts (3 by default) and exponential backoff with
// full jitter: throttling (SlowDown, 429, …), 500, 502, 503, 504,
// RequestTimeout, connection errors (reset, refused, closed) and per-attempt
// timeouts are retried; other 4xx are not. A response body cut short is not
// retried by the SDK (the bytes were already handed over): the read fails
// with CodeTransient and the caller reopens at its offset. The retry token bucket
// of the standard retryer is disabled in clients New builds: a redo writer
// needs every call to get its attempts, and bounds its own retries.
//
// Options.Timeout (1 minute by default) bounds each attempt of each request
// from its start to the response headers, and then each Read of the
// response body (an idle timeout: a long read that keeps moving is never
// cut, and time the caller spends between Reads does not count). An attempt that times out is a retryable
// connection error, so a stalled part is tried again, and after the last
// attempt the Put fails with CodeTransient and aborts its upload. The
// caller's context still bounds the whole call.
//
// # Errors
//
// ErrorCode maps NoSuchKey, NoSuchBucket, NotFound and 404 to CodeNotExist;
// PreconditionFailed, 412 and ConditionalRequestConflict to
// CodePreconditionFailed; AccessDenied, InvalidAccessKeyId,
// SignatureDoesNotMatch, 401 and 403 to CodePermissionDenied; InvalidRange,
// 416 and other 400s to CodeInvalidArgument; NotImplemented and 501 to
// CodeNotSupported; SlowDown and the other throttling codes,
// RequestTimeout, InternalError, 429, 5xx, connection resets, unexpected EOF
// and timeouts to CodeTransient; context errors to CodeCanceled and
// CodeDeadlineExceeded. versitygw's posix backend refuses a key that is the
// "directory" of another one (409 ExistingObjectIsDirectory,
// ObjectParentIsFile): CodeInvalidArgument.
//
// # Escape hatch
//
// Bucket.As accepts **s3.Client (the SDK client the driver uses) and *string
// (the bucket name). errors.As reaches the SDK's errors (smithy.APIError,
// *smithyhttp.ResponseError, …) through any error the Bucket returns.
package s3

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/logging"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/driver"
)

// Defaults of Options.
const (
	DefaultPartSize           = 8 << 20
	DefaultMultipartThreshold = 16 << 20
	DefaultConcurrency        = 4
	DefaultTimeout            = time.Minute
	DefaultMaxAttempts        = 3

	// MinPartSize and MaxPartSize are S3's limits on every part but the last.
	MinPartSize = 5 << 20
	MaxPartSize = 5 << 30
	// MaxParts is S3's limit on the parts of one upload.
	MaxParts = 10000
	// MaxSinglePut is S3's limit on one PutObject.
	MaxSinglePut = 5 << 30
)

// abortBudget bounds the AbortMultipartUpload of a failed Put, retries
// included. It runs on a context of its own, so an upload is aborted even
// when the caller's context has ended.
const abortBudget = 30 * time.Second

// putIDMeta is the user-metadata key of the random put ID (see the package
// doc on conditional writes). S3 sends it as x-amz-meta-redokit-put-id.
const putIDMeta = "redokit-put-id"

// Options configure the driver. The zero value (and nil) means the defaults.
type Options struct {
	// Region, Endpoint, UsePathStyle, DisableHTTPS and HTTPClient shape the
	// client New builds when it is given none; with a client of yours they
	// are ignored.

	// Region is the bucket's region. Empty: the SDK chain (AWS_REGION, the
	// shared config), or us-east-1 when Endpoint is set.
	Region string
	// Endpoint is an S3-compatible endpoint, "https://host:port" or
	// "host:port" (https). Plain http is used only when it says "http://"
	// or DisableHTTPS is set.
	Endpoint string
	// UsePathStyle sends path-style requests (host/bucket/key).
	UsePathStyle bool
	// DisableHTTPS talks plain http.
	DisableHTTPS bool
	// HTTPClient replaces the SDK's default HTTP client (tests use one with
	// keep-alives off, so that every request rolls a fault proxy's dice).
	HTTPClient awss3.HTTPClient

	// SSE is the server-side encryption of new objects: "" (the bucket's
	// default), "AES256", "aws:kms" or "aws:kms:dsse".
	SSE string
	// SSEKMSKeyID is the KMS key ID of SSE-KMS; it implies "aws:kms" when
	// SSE is empty.
	SSEKMSKeyID string

	// PartSize is the size of multipart parts, MinPartSize to MaxPartSize.
	// A known size that would need more than MaxParts parts gets larger
	// parts. Default DefaultPartSize.
	PartSize int64
	// MultipartThreshold: objects of at most this many bytes go up in one
	// PutObject, larger ones in parts. At most MaxSinglePut. 0 means
	// DefaultMultipartThreshold; a negative value sends every non-empty
	// object in parts.
	MultipartThreshold int64
	// Concurrency bounds the parts in flight in one upload. Default
	// DefaultConcurrency.
	Concurrency int
	// Timeout bounds each attempt of each request (see the package doc).
	// 0 means DefaultTimeout; a negative value disables it.
	Timeout time.Duration
	// MaxAttempts is the number of attempts of a retried request, the first
	// included. 0 means DefaultMaxAttempts for a client New builds and the
	// client's own setting for a client of yours.
	MaxAttempts int
}

// withDefaults validates o and fills in the defaults.
func (o Options) withDefaults() (Options, error) {
	if o.PartSize == 0 {
		o.PartSize = DefaultPartSize
	}
	switch {
	case o.MultipartThreshold == 0:
		o.MultipartThreshold = DefaultMultipartThreshold
	case o.MultipartThreshold < 0:
		o.MultipartThreshold = 0 // every non-empty object in parts
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	switch {
	case o.PartSize < MinPartSize || o.PartSize > MaxPartSize:
		return o, fmt.Errorf("%w: s3: part size %d is outside S3's limits [%d, %d]", blob.ErrInvalidArgument, o.PartSize, MinPartSize, MaxPartSize)
	case o.MultipartThreshold < 0 || o.MultipartThreshold > MaxSinglePut:
		return o, fmt.Errorf("%w: s3: multipart threshold %d is outside [0, %d]", blob.ErrInvalidArgument, o.MultipartThreshold, int64(MaxSinglePut))
	case o.Concurrency < 1 || o.Concurrency > 256:
		return o, fmt.Errorf("%w: s3: concurrency %d is outside [1, 256]", blob.ErrInvalidArgument, o.Concurrency)
	case o.MaxAttempts < 0:
		return o, fmt.Errorf("%w: s3: negative max attempts %d", blob.ErrInvalidArgument, o.MaxAttempts)
	}
	if o.SSEKMSKeyID != "" && o.SSE == "" {
		o.SSE = string(types.ServerSideEncryptionAwsKms)
	}
	switch types.ServerSideEncryption(o.SSE) {
	case "", types.ServerSideEncryptionAes256, types.ServerSideEncryptionAwsKms, types.ServerSideEncryptionAwsKmsDsse:
	default:
		return o, fmt.Errorf("%w: s3: unknown server-side encryption %q (want AES256, aws:kms or aws:kms:dsse)", blob.ErrInvalidArgument, o.SSE)
	}
	if o.SSEKMSKeyID != "" && o.SSE == string(types.ServerSideEncryptionAes256) {
		return o, fmt.Errorf("%w: s3: a KMS key ID needs sse=aws:kms, not AES256", blob.ErrInvalidArgument)
	}
	return o, nil
}

// Driver is the S3 driver.Driver.
type Driver struct {
	client   *awss3.Client
	bucket   string
	opts     Options
	callOpts []func(*awss3.Options)
	owned    bool // NewDriver made the client: Close closes its idle connections
	closed   atomic.Bool
	pool     sync.Pool // *[]byte of opts.PartSize
}

var (
	_ driver.Driver = (*Driver)(nil)
	_ driver.Aser   = (*Driver)(nil)
)

// New returns a Bucket over bucket, through client. The client's own
// configuration (region, endpoint, credentials, retryer, HTTP client) is
// used as is, with Options.Timeout and Options.MaxAttempts (when set)
// applied to each call. With a nil client, New builds one from the SDK's
// default configuration chain and opts, and Close releases it. opts may be
// nil.
func New(client *awss3.Client, bucket string, opts *Options) (*blob.Bucket, error) {
	d, err := NewDriver(client, bucket, opts)
	if err != nil {
		return nil, err
	}
	return blob.NewBucket(d), nil
}

// NewDriver is New without the Bucket, for wrapping the driver.
func NewDriver(client *awss3.Client, bucket string, opts *Options) (*Driver, error) {
	if bucket == "" {
		return nil, fmt.Errorf("%w: s3: empty bucket name", blob.ErrInvalidArgument)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	owned := client == nil
	if owned {
		// Loading the configuration reads the environment and the shared
		// files; credentials are resolved per request, under its ctx, so
		// there is nothing here for a caller's ctx to bound.
		var err error
		if client, err = newClient(context.Background(), o); err != nil {
			return nil, err
		}
		// The retryer of the client already has the attempts; keep the
		// driver from setting them again per call.
		o.MaxAttempts = 0
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	d := &Driver{client: client, bucket: bucket, opts: o, owned: owned}
	d.pool.New = func() any { b := make([]byte, o.PartSize); return &b }
	if o.Timeout > 0 {
		timeout := o.Timeout
		d.callOpts = append(d.callOpts, func(so *awss3.Options) {
			so.HTTPClient = &timeoutClient{base: so.HTTPClient, timeout: timeout}
		})
	}
	if o.MaxAttempts > 0 {
		n := o.MaxAttempts
		d.callOpts = append(d.callOpts, func(so *awss3.Options) { so.RetryMaxAttempts = n })
	}
	return d, nil
}

// endpointURL applies the plain-http rule: an endpoint is https unless it
// says http:// or DisableHTTPS asks for http.
func endpointURL(endpoint string, disableHTTPS bool) (string, error) {
	if endpoint == "" {
		return "", nil
	}
	scheme, rest, ok := strings.Cut(endpoint, "://")
	if !ok {
		if disableHTTPS {
			return "http://" + endpoint, nil
		}
		return "https://" + endpoint, nil
	}
	switch strings.ToLower(scheme) {
	case "http":
	case "https":
		if disableHTTPS {
			return "", fmt.Errorf("%w: s3: endpoint %s says https but disable_https is set", blob.ErrInvalidArgument, blob.RedactURL(endpoint))
		}
	default:
		return "", fmt.Errorf("%w: s3: endpoint scheme %q is not http or https", blob.ErrInvalidArgument, scheme)
	}
	if rest == "" || strings.Contains(rest, "@") {
		return "", fmt.Errorf("%w: s3: endpoint %s must be scheme://host[:port] without user information", blob.ErrInvalidArgument, blob.RedactURL(endpoint))
	}
	return endpoint, nil
}

func newClient(ctx context.Context, o Options) (*awss3.Client, error) {
	endpoint, err := endpointURL(o.Endpoint, o.DisableHTTPS)
	if err != nil {
		return nil, err
	}
	attempts := o.MaxAttempts
	if attempts == 0 {
		attempts = DefaultMaxAttempts
	}
	if attempts < 0 {
		return nil, fmt.Errorf("%w: s3: negative max attempts %d", blob.ErrInvalidArgument, attempts)
	}
	load := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(so *retry.StandardOptions) {
				so.MaxAttempts = attempts
				so.RateLimiter = ratelimit.None
			})
		}),
	}
	if o.Region != "" {
		load = append(load, config.WithRegion(o.Region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		// The SDK's configuration errors name files and profiles, never
		// secrets.
		return nil, fmt.Errorf("s3: load AWS configuration: %w", err)
	}
	custom := endpoint != "" || cfg.BaseEndpoint != nil
	if cfg.Region == "" {
		if !custom {
			return nil, fmt.Errorf("%w: s3: no region: set region= in the URL, Options.Region or AWS_REGION", blob.ErrInvalidArgument)
		}
		cfg.Region = "us-east-1"
	}
	if custom {
		// S3-compatible servers differ in the flexible checksums they
		// take; only send what an operation requires, unless the
		// environment chose.
		if cfg.RequestChecksumCalculation == aws.RequestChecksumCalculationUnset {
			cfg.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		}
		if cfg.ResponseChecksumValidation == aws.ResponseChecksumValidationUnset {
			cfg.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		}
	}
	return awss3.NewFromConfig(cfg, func(so *awss3.Options) {
		// The SDK's default logger writes every record, DEBUG included,
		// straight to stderr: one "Response has no supported checksum"
		// line per object read from a server that sends none. Its records
		// go to slog instead, at their level, and that one is not made.
		so.Logger = slogLogger{}
		so.DisableLogOutputChecksumValidationSkipped = true
		if endpoint != "" {
			so.BaseEndpoint = aws.String(endpoint)
		}
		so.UsePathStyle = o.UsePathStyle
		so.EndpointOptions.DisableHTTPS = o.DisableHTTPS
		if o.HTTPClient != nil {
			// Set here, not in LoadDefaultConfig: that wants a client
			// it can add CA bundles to, and the credential providers
			// keep the SDK's own.
			so.HTTPClient = o.HTTPClient
		}
	}), nil
}

// Client returns the SDK client of d.
func (d *Driver) Client() *awss3.Client { return d.client }

// BucketName returns the S3 bucket of d.
func (d *Driver) BucketName() string { return d.bucket }

// As implements driver.Aser: **s3.Client and *string (the bucket name).
func (d *Driver) As(i any) bool {
	switch p := i.(type) {
	case **awss3.Client:
		if p == nil {
			return false
		}
		*p = d.client
		return true
	case *string:
		if p == nil {
			return false
		}
		*p = d.bucket
		return true
	}
	return false
}

// Close implements driver.Driver. It closes the idle connections of a client
// New made; a client given to New is left alone.
func (d *Driver) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	if d.owned {
		if c, ok := d.client.Options().HTTPClient.(interface{ CloseIdleConnections() }); ok {
			c.CloseIdleConnections()
		}
	}
	return nil
}

func (d *Driver) check() error {
	if d.closed.Load() {
		return blob.ErrClosed
	}
	return nil
}

// Stat implements driver.Driver.
func (d *Driver) Stat(ctx context.Context, key string) (blob.Attrs, error) {
	if err := d.check(); err != nil {
		return blob.Attrs{}, err
	}
	out, err := d.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &d.bucket, Key: &key}, d.callOpts...)
	if err != nil {
		return blob.Attrs{}, err
	}
	return blob.Attrs{Key: key, Size: aws.ToInt64(out.ContentLength), ETag: aws.ToString(out.ETag), ModTime: aws.ToTime(out.LastModified)}, nil
}

// NewRangeReader implements driver.Driver.
func (d *Driver) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	in := &awss3.GetObjectInput{Bucket: &d.bucket, Key: &key}
	switch {
	case length > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", offset, offset+length-1))
	case length < 0 && offset > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", offset))
	case length == 0:
		// S3 cannot express an empty range: check the key exists.
		if _, err := d.Stat(ctx, key); err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	out, err := d.client.GetObject(ctx, in, d.callOpts...)
	if err != nil {
		if in.Range != nil && httpStatus(err) == http.StatusRequestedRangeNotSatisfiable {
			// The object exists and the offset is at or past its end.
			return io.NopCloser(bytes.NewReader(nil)), nil
		}
		return nil, err
	}
	return out.Body, nil
}

var _ driver.VersionReader = (*Driver)(nil)

// ReadVersion implements driver.VersionReader: the ETag is the GetObject
// response's, of the bytes it carries.
func (d *Driver) ReadVersion(ctx context.Context, key string) ([]byte, blob.Attrs, error) {
	if err := d.check(); err != nil {
		return nil, blob.Attrs{}, err
	}
	out, err := d.client.GetObject(ctx, &awss3.GetObjectInput{Bucket: &d.bucket, Key: &key}, d.callOpts...)
	if err != nil {
		return nil, blob.Attrs{}, err
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, blob.Attrs{}, err
	}
	return data, blob.Attrs{Key: key, Size: int64(len(data)), ETag: aws.ToString(out.ETag), ModTime: aws.ToTime(out.LastModified)}, nil
}

// List implements driver.Driver.
func (d *Driver) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	if err := d.check(); err != nil {
		return blob.ListPage{}, err
	}
	in := &awss3.ListObjectsV2Input{Bucket: &d.bucket}
	if opts.Prefix != "" {
		in.Prefix = aws.String(opts.Prefix)
	}
	if opts.PageSize > 0 {
		in.MaxKeys = aws.Int32(int32(min(opts.PageSize, blob.DefaultPageSize)))
	}
	if opts.Token != "" {
		in.ContinuationToken = aws.String(opts.Token)
	} else if opts.StartAfter != "" {
		in.StartAfter = aws.String(opts.StartAfter)
	}
	out, err := d.client.ListObjectsV2(ctx, in, d.callOpts...)
	if err != nil {
		return blob.ListPage{}, err
	}
	page := blob.ListPage{Objects: make([]blob.Attrs, 0, len(out.Contents))}
	for _, o := range out.Contents {
		page.Objects = append(page.Objects, blob.Attrs{
			Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), ETag: aws.ToString(o.ETag), ModTime: aws.ToTime(o.LastModified),
		})
	}
	if aws.ToBool(out.IsTruncated) {
		page.NextToken = aws.ToString(out.NextContinuationToken)
		if page.NextToken == "" {
			return blob.ListPage{}, fmt.Errorf("s3: list: truncated page without a continuation token")
		}
	}
	return page, nil
}

// Delete implements driver.Driver.
func (d *Driver) Delete(ctx context.Context, keys []string) error {
	if err := d.check(); err != nil {
		return err
	}
	switch {
	case len(keys) == 0:
		return nil
	case len(keys) > blob.MaxDeleteBatch:
		return fmt.Errorf("%w: s3: %d keys in one delete, more than %d", blob.ErrInvalidArgument, len(keys), blob.MaxDeleteBatch)
	case len(keys) == 1:
		// One key: DeleteObject is as cheap and needs no Content-MD5.
		_, err := d.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &d.bucket, Key: &keys[0]}, d.callOpts...)
		if err != nil && ErrorCode(err) == blob.CodeNotExist && !isBucketMissing(err) {
			return nil
		}
		return err
	}
	objs := make([]types.ObjectIdentifier, len(keys))
	for i := range keys {
		objs[i] = types.ObjectIdentifier{Key: &keys[i]}
	}
	out, err := d.client.DeleteObjects(ctx, &awss3.DeleteObjectsInput{
		Bucket: &d.bucket,
		Delete: &types.Delete{Objects: objs, Quiet: aws.Bool(true)},
	}, d.callOpts...)
	if err != nil {
		return err
	}
	var de DeleteError
	for _, e := range out.Errors {
		if aws.ToString(e.Code) == "NoSuchKey" {
			continue // already gone: what a delete wants
		}
		de.Keys = append(de.Keys, aws.ToString(e.Key))
		de.Errors = append(de.Errors, e)
	}
	if len(de.Keys) > 0 {
		de.Total = len(keys)
		return &de
	}
	return nil
}

// DeleteError reports the keys of a DeleteObjects call that S3 did not
// delete, with S3's code and message for each.
type DeleteError struct {
	Keys   []string      // the keys that failed, in S3's order
	Errors []types.Error // S3's report for each, in the same order
	Total  int           // the keys of the call
}

func (e *DeleteError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "s3: %d of %d keys not deleted: ", len(e.Keys), e.Total)
	for i, k := range e.Keys {
		if i == 10 {
			fmt.Fprintf(&b, ", and %d more", len(e.Keys)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q (%s: %s)", k, aws.ToString(e.Errors[i].Code), aws.ToString(e.Errors[i].Message))
	}
	return b.String()
}

// Code is the classification of the first failure (they are usually all
// alike: AccessDenied, SlowDown, InternalError).
func (e *DeleteError) Code() blob.Code {
	if len(e.Errors) == 0 {
		return blob.CodeUnknown
	}
	return codeOfS3(aws.ToString(e.Errors[0].Code), 0)
}

// ErrorCode implements driver.Driver.
func (d *Driver) ErrorCode(err error) blob.Code { return ErrorCode(err) }

// slogLogger passes the SDK's log records to slog.Default at their level,
// so that they land where the program's logs go, filtered as they are.
type slogLogger struct{}

func (slogLogger) Logf(c logging.Classification, format string, v ...any) {
	level := slog.LevelDebug
	if c == logging.Warn {
		level = slog.LevelWarn
	}
	ctx := context.Background()
	if l := slog.Default(); l.Enabled(ctx, level) {
		l.Log(ctx, level, "s3: aws sdk: "+fmt.Sprintf(format, v...))
	}
}
