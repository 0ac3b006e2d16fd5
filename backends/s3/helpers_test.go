package s3

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/testkit/testenv"
)

// The tests talk to a real S3-compatible server (versitygw, started by
// scripts/emulators.sh) at REDOKIT_S3_ENDPOINT, with the credentials of
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY. Without it they skip, except
// under CI=true, where a missing server is a failure.

// needEnv returns the environment variable name, or skips (fails under CI).
func needEnv(t testing.TB, names ...string) []string {
	t.Helper()
	vals := make([]string, len(names))
	for i, n := range names {
		vals[i] = os.Getenv(n)
		if vals[i] == "" {
			testenv.Need(t, n+" is not set: start the local servers with scripts/emulators.sh (or run scripts/test.sh)")
		}
	}
	return vals
}

func endpoint(t testing.TB) string { return needEnv(t, "REDOKIT_S3_ENDPOINT")[0] }

// adminClient talks to the server directly, for setting up and for checking
// behind the driver's back.
func adminClient(t testing.TB, ep string) *awss3.Client {
	t.Helper()
	c, err := newClient(t.Context(), Options{Endpoint: ep, UsePathStyle: true, Region: "us-east-1", MaxAttempts: 3})
	if err != nil {
		t.Fatalf("admin client: %v", err)
	}
	return c
}

// cleanupT is what the bucket helpers need of a test: *testing.T and
// conformance.TB both have it.
type cleanupT interface {
	Helper()
	Name() string
	Cleanup(func())
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Context() context.Context
}

// newBucketName returns a unique, valid bucket name mentioning the test.
func newBucketName(t cleanupT) string {
	var r [5]byte
	_, _ = rand.Read(r[:])
	name := strings.ToLower(t.Name())
	var b strings.Builder
	for _, c := range name {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
		} else if b.Len() > 0 && !strings.HasSuffix(b.String(), "-") {
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-")
	if len(s) > 40 {
		s = s[len(s)-40:]
		s = strings.Trim(s, "-")
	}
	return "rk-" + hex.EncodeToString(r[:]) + "-" + s
}

// makeBucket creates a fresh bucket on the server behind ep and removes it
// (objects, unfinished uploads and all) when the test ends.
func makeBucket(t testing.TB, admin *awss3.Client) string {
	t.Helper()
	name, err := createBucket(t, admin)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// createBucket is makeBucket returning its error.
func createBucket(t cleanupT, admin *awss3.Client) (string, error) {
	name := newBucketName(t)
	if _, err := admin.CreateBucket(t.Context(), &awss3.CreateBucketInput{Bucket: &name}); err != nil {
		return "", fmt.Errorf("CreateBucket(%s): %w", name, err)
	}
	t.Cleanup(func() { removeBucket(t, admin, name) })
	return name, nil
}

func removeBucket(t cleanupT, admin *awss3.Client, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 100 { // bounded: at most 100 pages of 1,000 keys
		out, err := admin.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: &name})
		if err != nil {
			t.Logf("cleanup: list %s: %v", name, err)
			return
		}
		if len(out.Contents) == 0 {
			break
		}
		ids := make([]types.ObjectIdentifier, len(out.Contents))
		for i, o := range out.Contents {
			ids[i] = types.ObjectIdentifier{Key: o.Key}
		}
		if _, err := admin.DeleteObjects(ctx, &awss3.DeleteObjectsInput{Bucket: &name, Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}}); err != nil {
			t.Logf("cleanup: delete in %s: %v", name, err)
			return
		}
	}
	for _, u := range uploads(t, admin, name) {
		_, _ = admin.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: &name, Key: u.Key, UploadId: u.UploadId})
	}
	if _, err := admin.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: &name}); err != nil {
		t.Logf("cleanup: delete bucket %s: %v", name, err)
	}
}

// uploads lists the unfinished multipart uploads of a bucket.
func uploads(t cleanupT, admin *awss3.Client, bucket string) []types.MultipartUpload {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := admin.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: &bucket})
	if err != nil {
		t.Errorf("ListMultipartUploads(%s): %v", bucket, err)
		return nil
	}
	return out.Uploads
}

// wantNothingLeft checks that no multipart upload and no object is left in
// e's bucket.
func wantNothingLeft(t testing.TB, e *testEnv, when string) {
	t.Helper()
	wantNoUploads(t, e.admin, e.bucket, when)
	if keys := objectKeys(t, e.admin, e.bucket); len(keys) != 0 {
		t.Errorf("%s: objects left: %v", when, keys)
	}
}

// wantNoUploads fails unless the bucket has no unfinished multipart upload.
func wantNoUploads(t testing.TB, admin *awss3.Client, bucket, when string) {
	t.Helper()
	if us := uploads(t, admin, bucket); len(us) != 0 {
		var keys []string
		for _, u := range us {
			keys = append(keys, aws.ToString(u.Key)+"@"+aws.ToString(u.UploadId))
		}
		t.Errorf("%s: %d multipart upload(s) left on the server: %v", when, len(us), keys)
	}
}

// objectKeys lists every key of a bucket behind the driver's back.
func objectKeys(t testing.TB, admin *awss3.Client, bucket string) []string {
	t.Helper()
	out, err := admin.ListObjectsV2(t.Context(), &awss3.ListObjectsV2Input{Bucket: &bucket})
	if err != nil {
		t.Fatalf("ListObjectsV2(%s): %v", bucket, err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	return keys
}

// testEnv is a fresh bucket and a driver on it.
type testEnv struct {
	admin  *awss3.Client
	bucket string
	b      *blob.Bucket
	d      *Driver
}

// newEnv makes a bucket on the direct endpoint and opens the driver on it
// through via (the direct endpoint when empty) with opts.
func newEnv(t testing.TB, via string, opts *Options) *testEnv {
	t.Helper()
	ep := endpoint(t)
	admin := adminClient(t, ep)
	name := makeBucket(t, admin)
	var o Options
	if opts != nil {
		o = *opts
	}
	if via == "" {
		via = ep
	}
	o.Endpoint, o.UsePathStyle, o.Region = via, true, "us-east-1"
	d, err := NewDriver(nil, name, &o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	b := blob.NewBucket(d)
	t.Cleanup(func() { b.Close() })
	return &testEnv{admin: admin, bucket: name, b: b, d: d}
}

// payload is n deterministic bytes that differ with seed.
func payload(n int, seed byte) []byte {
	p := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range p {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		p[i] = byte(x)
	}
	return p
}

// onlyReader hides every method of r but Read, so the driver takes its
// buffered path.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// gatedReader hands over its first gate bytes, then blocks until release
// is closed (closing reached when it gets there), then hands over the
// rest, or fails with err.
type gatedReader struct {
	data    []byte
	off     int
	gate    int
	passed  bool
	reached chan struct{}
	release chan struct{}
	err     error
}

func newGated(data []byte, gate int) *gatedReader {
	return &gatedReader{data: data, gate: gate, reached: make(chan struct{}), release: make(chan struct{})}
}

func (r *gatedReader) Read(p []byte) (int, error) {
	if r.off == r.gate && !r.passed {
		r.passed = true
		close(r.reached)
		<-r.release
		if r.err != nil {
			return 0, r.err
		}
	}
	if r.off >= len(r.data) {
		return 0, io.EOF
	}
	end := len(r.data)
	if r.off < r.gate {
		end = r.gate
	}
	n := copy(p, r.data[r.off:end])
	r.off += n
	return n, nil
}

// countingClient counts the HTTP requests of a client by method and can
// run a hook on each failed request.
type countingClient struct {
	base   awss3.HTTPClient
	mu     sync.Mutex
	counts map[string]int
	failed atomic.Int64
	onFail func(error)
}

func newCounting(base awss3.HTTPClient) *countingClient {
	if base == nil {
		base = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	return &countingClient{base: base, counts: map[string]int{}}
}

func (c *countingClient) Do(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.counts[req.Method]++
	f := c.onFail
	c.mu.Unlock()
	resp, err := c.base.Do(req)
	if err != nil {
		c.failed.Add(1)
		if f != nil {
			f(err)
		}
	}
	return resp, err
}

func (c *countingClient) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]int, len(c.counts))
	for k, v := range c.counts {
		m[k] = v
	}
	return m
}

func (c *countingClient) total() int {
	n := 0
	for _, v := range c.snapshot() {
		n += v
	}
	return n
}

func (c *countingClient) CloseIdleConnections() {
	if ci, ok := c.base.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// noKeepAlive is an HTTP client with a fresh connection per request, so a
// fault proxy's probabilistic toxics roll per request.
func noKeepAlive() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	return &http.Client{Transport: tr}
}

func mustRead(t testing.TB, b *blob.Bucket, key string) []byte {
	t.Helper()
	got, err := b.ReadAll(t.Context(), key)
	if err != nil {
		t.Fatalf("ReadAll(%q): %v", key, err)
	}
	return got
}

func wantSame(t testing.TB, got, want []byte, what string) {
	t.Helper()
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Errorf("%s: %d bytes, want %d; first difference at byte %d", what, len(got), len(want), i)
	}
}

func wantCode(t testing.TB, err error, code blob.Code, what string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want %v", what, code)
		return
	}
	if c := blob.CodeOf(err); c != code {
		t.Errorf("%s: %v (code %v), want code %v", what, err, c, code)
	}
}

var errInjected = errors.New("injected reader failure")
