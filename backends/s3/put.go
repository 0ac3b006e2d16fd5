package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/driver"
)

// putReq is what every path of one Put shares.
type putReq struct {
	key  string
	opts blob.PutOptions
	id   string // the random put ID stored in the object's metadata
}

func (p *putReq) conditional() bool { return p.opts.IfNotExist || p.opts.IfMatch != "" }

// Put implements driver.Driver (see the package doc).
func (d *Driver) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	if err := d.check(); err != nil {
		return blob.Attrs{}, err
	}
	if err := ctx.Err(); err != nil {
		return blob.Attrs{}, err
	}
	if size > MaxParts*MaxPartSize {
		return blob.Attrs{}, fmt.Errorf("%w: s3: %d bytes is more than S3's largest object", blob.ErrInvalidArgument, size)
	}
	p := &putReq{key: key, opts: opts, id: driver.NewPutID()}
	partSize := d.partSizeFor(size)
	if ra, base, ok := exactly(r, size); ok {
		// The caller's bytes, sent without a copy.
		if size <= d.opts.MultipartThreshold {
			return d.putObject(ctx, p, io.NewSectionReader(ra, base, size), size)
		}
		return d.multipart(ctx, p, &sectionSource{ra: ra, off: base, end: base + size, partSize: partSize}, nil)
	}
	src := &streamSource{d: d, r: r, size: size, partSize: partSize}
	if size > d.opts.MultipartThreshold {
		return d.multipart(ctx, p, src, nil)
	}
	// Read until the object is known to fit in one PutObject, or not.
	var pre []*part
	var total int64
	for total <= d.opts.MultipartThreshold {
		pt, err := src.next(ctx)
		if err != nil {
			releaseAll(pre)
			return blob.Attrs{}, err
		}
		if pt == nil {
			defer releaseAll(pre)
			return d.putObject(ctx, p, newChunksReader(pre), total)
		}
		pre = append(pre, pt)
		total += int64(len(pt.data))
	}
	return d.multipart(ctx, p, src, pre)
}

// partSizeFor returns the part size for an object of size bytes (< 0:
// unknown): Options.PartSize, or more when that would need more than
// MaxParts parts.
func (d *Driver) partSizeFor(size int64) int64 {
	ps := d.opts.PartSize
	if size > ps*MaxParts {
		ps = (size + MaxParts - 1) / MaxParts
		ps = (ps + 1<<20 - 1) &^ (1<<20 - 1) // whole MiB
	}
	return ps
}

// exactly reports whether r can be sent as is: it can be read at any offset
// and holds exactly size bytes from its current offset.
func exactly(r io.Reader, size int64) (io.ReaderAt, int64, bool) {
	ra, ok := r.(io.ReaderAt)
	sk, ok2 := r.(io.Seeker)
	if !ok || !ok2 || size < 0 {
		return nil, 0, false
	}
	cur, err := sk.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, 0, false
	}
	end, err := sk.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, 0, false
	}
	if _, err := sk.Seek(cur, io.SeekStart); err != nil || end-cur != size {
		return nil, 0, false
	}
	return ra, cur, true
}

// putObject sends one PutObject.
func (d *Driver) putObject(ctx context.Context, p *putReq, body io.ReadSeeker, size int64) (blob.Attrs, error) {
	if size > MaxSinglePut {
		return blob.Attrs{}, fmt.Errorf("%w: s3: %d bytes is more than one PutObject takes", blob.ErrInvalidArgument, size)
	}
	in := &awss3.PutObjectInput{
		Bucket: &d.bucket, Key: &p.key, Body: body, ContentLength: aws.Int64(size),
		Metadata: map[string]string{putIDMeta: p.id},
	}
	if p.opts.IfNotExist {
		in.IfNoneMatch = aws.String("*")
	}
	if p.opts.IfMatch != "" {
		in.IfMatch = aws.String(p.opts.IfMatch)
	}
	if d.opts.SSE != "" {
		in.ServerSideEncryption = types.ServerSideEncryption(d.opts.SSE)
	}
	if d.opts.SSEKMSKeyID != "" {
		in.SSEKMSKeyId = aws.String(d.opts.SSEKMSKeyID)
	}
	out, err := d.client.PutObject(ctx, in, d.callOpts...)
	if err != nil {
		if a, ok := d.resolve(ctx, p, err); ok {
			return a, nil
		}
		return blob.Attrs{}, conditionFailed(p, err)
	}
	return blob.Attrs{Key: p.key, Size: size, ETag: aws.ToString(out.ETag), ModTime: responseTime(out.ResultMetadata)}, nil
}

// resolve decides a conditional write that failed its precondition (or,
// for a multipart upload, whose completion the server no longer knows): if
// the object now carries this Put's own ID, an earlier attempt of the same
// request succeeded and only its response was lost.
func (d *Driver) resolve(ctx context.Context, p *putReq, err error) (blob.Attrs, bool) {
	if !p.conditional() || ctx.Err() != nil {
		return blob.Attrs{}, false
	}
	if ErrorCode(err) != blob.CodePreconditionFailed && apiCode(err) != "NoSuchUpload" {
		return blob.Attrs{}, false
	}
	out, herr := d.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &d.bucket, Key: &p.key}, d.callOpts...)
	if herr != nil || out.Metadata[putIDMeta] != p.id {
		return blob.Attrs{}, false
	}
	return blob.Attrs{Key: p.key, Size: aws.ToInt64(out.ContentLength), ETag: aws.ToString(out.ETag), ModTime: aws.ToTime(out.LastModified)}, true
}

// responseTime is the server's Date header of a response (S3 gives no
// modification time in a PUT response), or the local time without one.
func responseTime(md middleware.Metadata) time.Time {
	if resp, ok := awsmiddleware.GetRawResponse(md).(*smithyhttp.Response); ok && resp != nil {
		if t, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
			return t
		}
	}
	return time.Now().Truncate(time.Second)
}

// part is one part of an upload: bytes in a pooled buffer or a section of
// the caller's reader.
type part struct {
	data    []byte        // the part's bytes, for a buffered part
	section io.ReadSeeker // the part's bytes, for a section of the caller's reader
	size    int64
	buf     *[]byte // the pooled buffer under data, returned by release
	pool    *sync.Pool
}

func (p *part) body() io.ReadSeeker {
	if p.section != nil {
		return p.section
	}
	return bytes.NewReader(p.data)
}

func (p *part) release() {
	if p.buf != nil && p.pool != nil {
		p.pool.Put(p.buf)
	}
	p.buf, p.data = nil, nil
}

func releaseAll(ps []*part) {
	for _, p := range ps {
		p.release()
	}
}

// partSource yields the parts of an upload in order; next returns nil after
// the last.
type partSource interface {
	next(ctx context.Context) (*part, error)
}

// sectionSource cuts the caller's io.ReaderAt into parts.
type sectionSource struct {
	ra       io.ReaderAt
	off, end int64
	partSize int64
}

func (s *sectionSource) next(ctx context.Context) (*part, error) {
	if s.off >= s.end {
		return nil, nil
	}
	n := min(s.partSize, s.end-s.off)
	p := &part{section: io.NewSectionReader(s.ra, s.off, n), size: n}
	s.off += n
	return p, nil
}

// streamSource reads the caller's reader into pooled part buffers. With a
// known size it checks the reader holds exactly that many bytes.
type streamSource struct {
	d        *Driver
	r        io.Reader
	size     int64 // < 0: unknown
	partSize int64
	read     int64
	done     bool
}

func (s *streamSource) next(ctx context.Context) (*part, error) {
	if s.done {
		return nil, nil
	}
	want := s.partSize
	if s.size >= 0 {
		want = min(want, s.size-s.read)
		if want == 0 {
			// All the declared bytes are in: the reader must be at its end.
			s.done = true
			var one [1]byte
			n, err := readFull(ctx, s.r, one[:])
			switch {
			case n > 0:
				return nil, fmt.Errorf("%w: s3: the reader holds more than the declared %d bytes", blob.ErrInvalidArgument, s.size)
			case err != nil && err != io.EOF:
				return nil, err
			}
			return nil, nil
		}
	}
	p := &part{}
	if s.partSize == s.d.opts.PartSize {
		p.buf, p.pool = s.d.pool.Get().(*[]byte), &s.d.pool
	} else {
		b := make([]byte, s.partSize)
		p.buf = &b
	}
	n, err := readFull(ctx, s.r, (*p.buf)[:want])
	s.read += int64(n)
	switch {
	case err == io.EOF && s.size >= 0:
		p.release()
		return nil, fmt.Errorf("%w: s3: the reader ended after %d bytes, the declared size is %d", blob.ErrInvalidArgument, s.read, s.size)
	case err == io.EOF:
		s.done = true
	case err != nil:
		p.release()
		return nil, err
	}
	if n == 0 {
		p.release()
		return nil, nil
	}
	p.data = (*p.buf)[:n]
	p.size = int64(n)
	return p, nil
}

// readFull fills p from r like io.ReadFull, but checks ctx between reads
// (a Read that blocks still holds the caller), and reports a short read at
// the end of r as io.EOF with the count.
func readFull(ctx context.Context, r io.Reader, p []byte) (int, error) {
	n, empty := 0, 0
	for n < len(p) {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		m, err := r.Read(p[n:])
		n += m
		if err != nil {
			if err == io.EOF {
				return n, io.EOF
			}
			return n, err
		}
		if m == 0 {
			if empty++; empty > 100 {
				return n, io.ErrNoProgress
			}
		} else {
			empty = 0
		}
	}
	return n, nil
}

// chunksReader is a seekable reader over the parts read before Put knew
// the object fits one PutObject (the SDK needs to rewind bodies).
type chunksReader struct {
	chunks [][]byte
	size   int64
	off    int64
}

func newChunksReader(ps []*part) *chunksReader {
	c := &chunksReader{}
	for _, p := range ps {
		c.chunks = append(c.chunks, p.data)
		c.size += int64(len(p.data))
	}
	return c
}

func (c *chunksReader) Read(b []byte) (int, error) {
	if c.off >= c.size {
		return 0, io.EOF
	}
	n := 0
	off := c.off
	for _, ch := range c.chunks {
		if off >= int64(len(ch)) {
			off -= int64(len(ch))
			continue
		}
		m := copy(b[n:], ch[off:])
		n += m
		off = 0
		if n == len(b) {
			break
		}
	}
	c.off += int64(n)
	return n, nil
}

func (c *chunksReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += c.off
	case io.SeekEnd:
		offset += c.size
	default:
		return 0, errors.New("s3: bad whence")
	}
	if offset < 0 {
		return 0, errors.New("s3: negative seek")
	}
	c.off = offset
	return offset, nil
}

// multipart uploads the parts of pre and then of src, and completes the
// upload, or aborts it.
func (d *Driver) multipart(ctx context.Context, p *putReq, src partSource, pre []*part) (attrs blob.Attrs, err error) {
	cin := &awss3.CreateMultipartUploadInput{Bucket: &d.bucket, Key: &p.key, Metadata: map[string]string{putIDMeta: p.id}}
	if d.opts.SSE != "" {
		cin.ServerSideEncryption = types.ServerSideEncryption(d.opts.SSE)
	}
	if d.opts.SSEKMSKeyID != "" {
		cin.SSEKMSKeyId = aws.String(d.opts.SSEKMSKeyID)
	}
	created, err := d.client.CreateMultipartUpload(ctx, cin, d.callOpts...)
	if err != nil {
		releaseAll(pre)
		return blob.Attrs{}, err
	}
	uploadID := aws.ToString(created.UploadId)
	committed := false
	defer func() {
		if committed {
			return
		}
		if aerr := d.abort(ctx, p.key, uploadID); aerr != nil {
			err = errors.Join(err, aerr)
		}
	}()

	gctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		parts []types.CompletedPart
		total int64
		num   int32
	)
	sem := make(chan struct{}, d.opts.Concurrency)
	send := func(pt *part) {
		num++
		n := num
		total += pt.size
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			defer pt.release()
			out, err := d.client.UploadPart(gctx, &awss3.UploadPartInput{
				Bucket: &d.bucket, Key: &p.key, UploadId: &uploadID, PartNumber: aws.Int32(n),
				Body: pt.body(), ContentLength: aws.Int64(pt.size),
			}, d.callOpts...)
			if err != nil {
				cancel(fmt.Errorf("s3: upload part %d of %q: %w", n, p.key, err))
				return
			}
			mu.Lock()
			parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(n)})
			mu.Unlock()
		}()
	}
	// acquire takes a slot for one more part in flight, unless the upload
	// has failed.
	acquire := func() bool {
		select {
		case sem <- struct{}{}:
			return gctx.Err() == nil || func() bool { <-sem; return false }()
		case <-gctx.Done():
			return false
		}
	}
	for i, pt := range pre {
		if !acquire() {
			releaseAll(pre[i:])
			break
		}
		send(pt)
	}
	for gctx.Err() == nil {
		if !acquire() {
			break
		}
		pt, rerr := src.next(gctx)
		if rerr != nil || pt == nil {
			<-sem
			if rerr != nil {
				cancel(rerr)
			}
			break
		}
		if num == MaxParts {
			<-sem
			pt.release()
			cancel(fmt.Errorf("%w: s3: the object needs more than %d parts of %d bytes (set a larger part size)", blob.ErrInvalidArgument, MaxParts, d.opts.PartSize))
			break
		}
		send(pt)
	}
	wg.Wait()
	if gctx.Err() != nil {
		// The caller's context error, or the first failure.
		return blob.Attrs{}, context.Cause(gctx)
	}

	slices.SortFunc(parts, func(a, b types.CompletedPart) int { return int(aws.ToInt32(a.PartNumber) - aws.ToInt32(b.PartNumber)) })
	in := &awss3.CompleteMultipartUploadInput{
		Bucket: &d.bucket, Key: &p.key, UploadId: &uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}
	if p.opts.IfNotExist {
		in.IfNoneMatch = aws.String("*")
	}
	if p.opts.IfMatch != "" {
		in.IfMatch = aws.String(p.opts.IfMatch)
	}
	testHook.beforeComplete(ctx)
	out, err := d.client.CompleteMultipartUpload(ctx, in, d.callOpts...)
	if err != nil {
		if a, ok := d.resolve(ctx, p, err); ok {
			committed = true
			return a, nil
		}
		return blob.Attrs{}, conditionFailed(p, err)
	}
	committed = true
	return blob.Attrs{Key: p.key, Size: total, ETag: aws.ToString(out.ETag), ModTime: responseTime(out.ResultMetadata)}, nil
}

// abort aborts a multipart upload on a context of its own (the caller's may
// be the reason for the abort), retrying transient failures within
// abortBudget. An upload the server no longer knows is aborted.
func (d *Driver) abort(ctx context.Context, key, uploadID string) error {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortBudget)
	defer cancel()
	testHook.beforeAbort(actx)
	backoff := 100 * time.Millisecond
	for {
		_, err := d.client.AbortMultipartUpload(actx, &awss3.AbortMultipartUploadInput{
			Bucket: &d.bucket, Key: &key, UploadId: &uploadID,
		}, d.callOpts...)
		if err == nil || apiCode(err) == "NoSuchUpload" {
			return nil
		}
		if ErrorCode(err) != blob.CodeTransient || actx.Err() != nil {
			return fmt.Errorf("s3: abort multipart upload %s of %q failed, the upload is left for the bucket's lifecycle rules: %w", uploadID, key, err)
		}
		select {
		case <-time.After(backoff/2 + rand.N(backoff)):
		case <-actx.Done():
			return fmt.Errorf("s3: abort multipart upload %s of %q ran out of time, the upload is left for the bucket's lifecycle rules: %w", uploadID, key, err)
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// hooks let this package's tests act at points of a multipart upload
// (remove a fault before the abort, cancel before the completion). Nil
// functions do nothing.
type hooks struct {
	mu       sync.Mutex
	abort    func(context.Context)
	complete func(context.Context)
}

var testHook hooks

func (h *hooks) get(f *func(context.Context)) func(context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return *f
}

func (h *hooks) beforeAbort(ctx context.Context) {
	if f := h.get(&h.abort); f != nil {
		f(ctx)
	}
}

func (h *hooks) beforeComplete(ctx context.Context) {
	if f := h.get(&h.complete); f != nil {
		f(ctx)
	}
}
