package gcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/driver"
	"github.com/redokit/redokit/testkit/backendtest"
)

func TestParseURL(t *testing.T) {
	good := []struct {
		url    string
		bucket string
		prefix string
		check  func(Options) bool
	}{
		{"gs://b", "b", "", func(o Options) bool { return o == Options{} }},
		{"gs://b/", "b", "", nil},
		{"gs://b/logs", "b", "logs/", nil},
		{"gs://b/logs/cf1/", "b", "logs/cf1/", nil},
		{"gs://b?chunk_size=8MiB&resumable_threshold=4MiB&concurrency=3&timeout=5s&max_attempts=2", "b", "", func(o Options) bool {
			return o.ChunkSize == 8<<20 && o.ResumableThreshold == 4<<20 && o.Concurrency == 3 && o.Timeout == 5*time.Second && o.MaxAttempts == 2
		}},
		{"gs://b?chunk_size=262144", "b", "", func(o Options) bool { return o.ChunkSize == 256<<10 }},
		{"gs://b?timeout=0", "b", "", func(o Options) bool { return o.Timeout < 0 }},
		{"gs://b?endpoint=http%3A%2F%2F127.0.0.1%3A1%2Fstorage%2Fv1%2F&anonymous=true", "b", "", nil},
	}
	for _, g := range good {
		u, _ := url.Parse(g.url)
		c, err := parseURL(u)
		if err != nil {
			t.Errorf("%s: %v", g.url, err)
			continue
		}
		if c.bucket != g.bucket || c.prefix != g.prefix {
			t.Errorf("%s: bucket %q prefix %q, want %q %q", g.url, c.bucket, c.prefix, g.bucket, g.prefix)
		}
		if g.check != nil && !g.check(c.opts) {
			t.Errorf("%s: options %+v", g.url, c.opts)
		}
	}
	bad := []struct{ url, want string }{
		{"gs://b?bogus=1&chunk_size=1MiB&zzz=2", "bogus, zzz"},
		{"gs:///prefix", "no bucket"},
		{"gs://b?chunk_size=-1", "chunk_size"},
		{"gs://b?chunk_size=2GiB", "chunk_size"},
		{"gs://b?resumable_threshold=lots", "resumable_threshold"},
		{"gs://b?concurrency=0", "concurrency"},
		{"gs://b?timeout=soon", "timeout"},
		{"gs://b?endpoint=ftp://x", "endpoint"},
		{"gs://b?anonymous=maybe", "anonymous"},
		{"gs://user:hunter2@b/p", "credentials"},
	}
	for _, b := range bad {
		u, _ := url.Parse(b.url)
		_, err := parseURL(u)
		if err == nil || !strings.Contains(err.Error(), b.want) || !errors.Is(err, blob.ErrInvalidArgument) {
			t.Errorf("%s: got %v, want an invalid-argument error mentioning %q", b.url, err, b.want)
		}
	}
	// Through blob.Open, the URL in the error is redacted.
	_, err := blob.Open(context.Background(), "gs://user:hunter2@b/p?bogus=1")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("Open leaked the password or accepted the URL: %v", err)
	}
}

func TestOpenURL(t *testing.T) {
	host := emulatorHost(t)
	c, _ := newClient(t, host)
	name := newTestBucket(t, c)
	ctx := context.Background()
	// STORAGE_EMULATOR_HOST makes the library use plain HTTP without auth.
	b, err := blob.Open(ctx, "gs://"+name+"/logs/cf?resumable_threshold=1MiB&chunk_size=256KiB")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Put(ctx, "k", []byte("hello"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Bucket(name).Object("logs/cf/k").Attrs(ctx); err != nil {
		t.Fatalf("the URL's prefix was not applied: %v", err)
	}
	var sc *storage.Client
	var bh *storage.BucketHandle
	if !b.As(&sc) || sc == nil || !b.As(&bh) || bh == nil || b.As(new(int)) {
		t.Fatal("As")
	}
	// An explicit endpoint also works (here: the same emulator).
	b2, err := blob.Open(ctx, "gs://"+name+"?anonymous=true&endpoint="+url.QueryEscape("http://"+host+"/storage/v1/"))
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	got, err := b2.ReadAll(ctx, "logs/cf/k")
	if err != nil || string(got) != "hello" {
		t.Fatalf("read through endpoint=: %q %v", got, err)
	}
}

func TestRoundTrip(t *testing.T) {
	b, ct := newBucket(t, &Options{ResumableThreshold: 4 << 20, ChunkSize: 1 << 20})
	backendtest.RoundTrip(t, b, []int{0, 1, 1000, 4<<20 - 1, 4 << 20, 10 << 20}, func(t *testing.T, n int) func() {
		m0, r0 := ct.multipart.Load(), ct.resumable.Load()
		return func() {
			if n >= 4<<20 {
				if ct.resumable.Load() == r0 {
					t.Fatalf("%d bytes: no resumable upload", n)
				}
			} else if ct.multipart.Load() != m0+1 || ct.resumable.Load() != r0 {
				t.Fatalf("%d bytes: want one multipart request, got %d multipart %d resumable", n, ct.multipart.Load()-m0, ct.resumable.Load()-r0)
			}
		}
	})
	// Unknown size: small and large.
	backendtest.UnknownSize(t, b, 3000, 5<<20)
}

// A reader that lies about its size must not leave an object behind.
func TestWrongSize(t *testing.T) {
	b, _ := newBucket(t, &Options{ResumableThreshold: 1 << 20, ChunkSize: 256 << 10})
	backendtest.WrongSize(t, b)
}

// The ranged reads are the conformance suite's (rangedRead), which covers
// every case this file once restated.

func TestIfNotExistRace(t *testing.T) {
	b, _ := newBucket(t, &Options{ResumableThreshold: 1 << 20, ChunkSize: 256 << 10})
	backendtest.IfNotExistRace(t, b, 1000, 2<<20+5) // one request; resumable
}

func TestIfMatch(t *testing.T) {
	b, _ := newBucket(t, &Options{ResumableThreshold: 1 << 20, ChunkSize: 256 << 10})
	backendtest.IfMatch(t, b, "1", 100, 2<<20) // one request; resumable
}

func TestListAndBatchDelete(t *testing.T) {
	b, _ := newBucket(t, &Options{Concurrency: 32})
	backendtest.ListAndDelete(t, b, 2500, 32, nil)
}

func TestDeleteErrorNamesKeys(t *testing.T) {
	boom := &googleapi.Error{Code: 503, Message: "slow down"}
	e := driver.NewDeleteError("gcs", 10, []KeyError{{Key: "k2", Err: boom}, {Key: "k1", Err: context.DeadlineExceeded}})
	msg := e.Error()
	if !strings.Contains(msg, `2 of 10`) || !strings.Contains(msg, `"k1"`) || strings.Index(msg, `"k1"`) > strings.Index(msg, `"k2"`) {
		t.Fatalf("message %q", msg)
	}
	if !errors.Is(e, context.DeadlineExceeded) {
		t.Fatal("does not unwrap to the key errors")
	}
	d := &Driver{}
	if c := d.ErrorCode(driver.NewDeleteError("gcs", 1, []KeyError{{Key: "k", Err: boom}})); c != blob.CodeTransient {
		t.Fatalf("code %v", c)
	}
}

func TestErrorCode(t *testing.T) {
	d := &Driver{}
	backendtest.ErrorCodes(t, d.ErrorCode, []backendtest.CodeCase{
		{Err: storage.ErrObjectNotExist, Want: blob.CodeNotExist},
		{Err: fmt.Errorf("x: %w", storage.ErrBucketNotExist), Want: blob.CodeNotExist},
		{Err: &googleapi.Error{Code: 404}, Want: blob.CodeNotExist},
		{Err: &googleapi.Error{Code: 412}, Want: blob.CodePreconditionFailed},
		{Err: &googleapi.Error{Code: 403}, Want: blob.CodePermissionDenied},
		{Err: &googleapi.Error{Code: 401}, Want: blob.CodePermissionDenied},
		{Err: &googleapi.Error{Code: 400}, Want: blob.CodeInvalidArgument},
		{Err: &googleapi.Error{Code: 429}, Want: blob.CodeTransient},
		{Err: &googleapi.Error{Code: 503}, Want: blob.CodeTransient},
		{Err: &googleapi.Error{Code: 500}, Want: blob.CodeTransient},
		{Err: io.ErrUnexpectedEOF, Want: blob.CodeTransient},
		{Err: &url.Error{Op: "Post", URL: "http://x", Err: errors.New("read: connection reset by peer")}, Want: blob.CodeTransient},
		{Err: blob.ErrPreconditionFailed, Want: blob.CodePreconditionFailed},
	}...)
}

func TestCancelMidUpload(t *testing.T) {
	b, _ := newBucket(t, &Options{ResumableThreshold: 1 << 20, ChunkSize: 256 << 10})
	backendtest.CancelMidUpload(t, b, map[string]int64{"small": 512 << 10, "resumable": 8 << 20})
}

func TestClosed(t *testing.T) {
	d, _ := newDriver(t, nil)
	backendtest.Closed(t, blob.NewBucket(d), d)
}

func TestMissingBucket(t *testing.T) {
	c, _ := newClient(t, emulatorHost(t))
	b, err := New(c, "redokit-test-missing-"+backendtest.RandHex(4), &Options{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	backendtest.MissingBucket(t, b)
}

// corruptedBuckets returns a bucket whose first single-request upload is
// corrupted in flight by the returned transport (built with opts), and the
// same bucket straight to the emulator.
func corruptedBuckets(t *testing.T, opts *Options) (b, direct *blob.Bucket, ct *backendtest.Corrupter) {
	dc, _ := newClient(t, emulatorHost(t))
	name := newTestBucket(t, dc)
	direct, _ = New(dc, name, nil)
	ct = &backendtest.Corrupter{Base: http.DefaultTransport, Match: func(r *http.Request) bool {
		return r.URL.Query().Get("uploadType") == "multipart"
	}}
	c, err := storage.NewClient(context.Background(),
		option.WithEndpoint("http://"+emulatorHost(t)+"/storage/v1/"),
		option.WithoutAuthentication(),
		option.WithHTTPClient(&http.Client{Transport: ct}),
		storage.WithDisabledClientMetrics())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	b, _ = New(c, name, opts)
	return b, direct, ct
}

// TestIntegrity corrupts a single-request upload in flight: the server must
// reject it (the driver sends the CRC32C), and nothing becomes visible.
func TestIntegrity(t *testing.T) {
	b, direct, ct := corruptedBuckets(t, &Options{MaxAttempts: 1})
	backendtest.RejectsCorruption(t, b, direct, ct, "corrupt", 100<<10)
}

// TestIntegrityRetried: with retries (the default), the rejected attempt is
// sent again and the Put succeeds with the right bytes.
func TestIntegrityRetried(t *testing.T) {
	b, direct, ct := corruptedBuckets(t, nil)
	backendtest.HealsCorruption(t, b, direct, ct, "healed", 100<<10)
}
