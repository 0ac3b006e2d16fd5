package gcs

// Fault tests: the driver talks to fake-gcs-server through toxiproxy (the
// proxy named "gcs"), faults are injected while uploads run, and a second
// bucket that talks to the emulator directly checks that an object is whole
// or absent, never partial, at every moment and after the fault clears.
// Durations are logged, never asserted.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"google.golang.org/api/option"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/testkit/backendtest"
	"github.com/redokit/redokit/testkit/testenv"
	"github.com/redokit/redokit/testkit/toxinet"
)

// faultEnv is a bucket reachable directly and through the proxy, with the
// hook on its requests.
type faultEnv struct {
	*toxinet.Env
	hook *hookTransport
}

// hookTransport counts requests and calls onChunk before the n-th chunk of
// a resumable upload (a request to an upload session) and onFinal before a
// request that finishes an upload (a multipart upload, or the last chunk).
type hookTransport struct {
	base     http.RoundTripper
	chunks   atomic.Int64
	requests atomic.Int64
	mu       sync.Mutex
	onChunk  func(n int64)
	onFinal  func()
}

func (h *hookTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	h.requests.Add(1)
	q := r.URL.Query()
	h.mu.Lock()
	onChunk, onFinal := h.onChunk, h.onFinal
	h.mu.Unlock()
	final := q.Get("uploadType") == "multipart"
	if q.Get("upload_id") != "" { // a chunk (the library POSTs them)
		n := h.chunks.Add(1)
		if onChunk != nil {
			onChunk(n)
		}
		// The last chunk names the total size: "bytes a-b/TOTAL".
		cr := r.Header.Get("Content-Range")
		final = cr != "" && !strings.HasSuffix(cr, "/*")
	}
	if final && onFinal != nil {
		onFinal()
	}
	return h.base.RoundTrip(r)
}

func (h *hookTransport) set(onChunk func(int64), onFinal func()) {
	h.mu.Lock()
	h.onChunk, h.onFinal = onChunk, onFinal
	h.mu.Unlock()
}

// gcsProxy returns the toxiproxy proxy "gcs", creating it from the
// environment if the emulator script did not.
func gcsProxy(t *testing.T) (*toxiproxy.Proxy, string) {
	t.Helper()
	toxi := os.Getenv("REDOKIT_GCS_TOXI_HOST")
	if toxi == "" {
		testenv.Need(t, "TOXIPROXY_ADDR and REDOKIT_GCS_TOXI_HOST must be set: start toxiproxy (scripts/emulators.sh) to run the fault tests")
	}
	return toxinet.FaultProxy(t, "gcs", toxi, emulatorHost(t)), toxi
}

func newFaultEnv(t *testing.T, opts *Options) (*faultEnv, *blob.Bucket) {
	t.Helper()
	p, toxi := gcsProxy(t)
	dc, _ := newClient(t, emulatorHost(t))
	name := newTestBucket(t, dc)
	direct, err := New(dc, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	hook := &hookTransport{base: http.DefaultTransport.(*http.Transport).Clone()}
	tc, err := storage.NewClient(context.Background(),
		option.WithEndpoint("http://"+toxi+"/storage/v1/"),
		option.WithoutAuthentication(),
		option.WithHTTPClient(&http.Client{Transport: hook}),
		storage.WithDisabledClientMetrics(),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.Close() })
	b, err := New(tc, name, opts)
	if err != nil {
		t.Fatal(err)
	}
	return &faultEnv{Env: &toxinet.Env{Proxy: p, Bucket: b, Direct: direct}, hook: hook}, b
}

func faultOptions() *Options {
	return &Options{
		ResumableThreshold: 1 << 20, ChunkSize: 256 << 10,
		Timeout: 2 * time.Second, ChunkRetryDeadline: 10 * time.Second, MaxAttempts: 6,
	}
}

func TestFaultLatency(t *testing.T) {
	e, _ := newFaultEnv(t, faultOptions())
	toxinet.Latency(t, e.Env, 100<<10, 2<<20)
}

// TestFaultResetMidResumableUpload resets every connection between chunks of
// a resumable upload, briefly (the library resumes the session) and for long
// (the chunk retry deadline passes and the Put fails).
func TestFaultResetMidResumableUpload(t *testing.T) {
	for _, c := range []struct {
		name     string
		outage   time.Duration
		deadline time.Duration // ChunkRetryDeadline
	}{{"short", 300 * time.Millisecond, 10 * time.Second}, {"long", 6 * time.Second, 2 * time.Second}} {
		t.Run(c.name, func(t *testing.T) {
			opts := faultOptions()
			opts.ChunkRetryDeadline = c.deadline
			e, _ := newFaultEnv(t, opts)
			key := "reset/" + c.name
			data := backendtest.Pattern(3<<20, 3) // 12 chunks of 256 KiB
			reset := toxinet.Midway{Toxic: "reset", Type: "reset_peer", Attrs: toxiproxy.Attributes{"timeout": 0}, At: 4, Lasts: c.outage}
			took, err := e.PutThrough(t, key, data, 60*time.Second, reset, func(f func(int64)) { e.hook.set(f, nil) })
			t.Logf("put with a %v reset outage, %v chunk retry deadline: %v after %v, %d chunk requests", c.outage, c.deadline, err, took, e.hook.chunks.Load())
			switch {
			case c.name == "short" && err != nil:
				t.Fatalf("a 300 ms outage should be retried through: %v", err)
			case c.name == "long" && err == nil:
				t.Fatal("a 6 s outage with a 2 s chunk retry deadline should fail the Put")
			}
			e.CreateAfterFault(t, key, data, err)
		})
	}
}

// TestFaultStalledChunk black-holes the traffic during a resumable upload:
// each stalled chunk request times out (Options.Timeout, as
// Writer.ChunkTransferTimeout) and is retried once the stall ends; with a
// caller deadline shorter than the stall the Put fails with a deadline error
// and nothing is visible.
func TestFaultStalledChunk(t *testing.T) {
	for _, c := range []struct {
		name     string
		stall    time.Duration
		deadline time.Duration
	}{{"retried", 3 * time.Second, 60 * time.Second}, {"deadline", 8 * time.Second, 3 * time.Second}} {
		t.Run(c.name, func(t *testing.T) {
			e, _ := newFaultEnv(t, faultOptions())
			stall := toxinet.Midway{Toxic: "stall", Type: "timeout", Attrs: toxiproxy.Attributes{"timeout": 0}, At: 3, Lasts: c.stall}
			took, err := e.PutThrough(t, "stall/"+c.name, backendtest.Pattern(2<<20, 4), c.deadline, stall, func(f func(int64)) { e.hook.set(f, nil) })
			t.Logf("put with a %v stall, %v deadline, 2 s chunk timeout: %v after %v, %d chunk requests", c.stall, c.deadline, err, took, e.hook.chunks.Load())
			if c.name == "deadline" && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("want a deadline error, got %v", err)
			}
			if c.name == "retried" && err != nil {
				t.Fatalf("a 3 s stall with 2 s chunk timeouts should be retried through: %v", err)
			}
		})
	}
}

// TestFaultStalledSmallPut stalls a single-request upload: the attempt's own
// deadline (Options.Timeout) passes and the driver retries it.
func TestFaultStalledSmallPut(t *testing.T) {
	e, b := newFaultEnv(t, faultOptions())
	data := backendtest.Pattern(200<<10, 2)
	clear := e.Toxic(t, "stall", "timeout", "upstream", toxiproxy.Attributes{"timeout": 0})
	time.AfterFunc(3*time.Second, clear)
	w := toxinet.Watch(e.Direct, "small", data)
	start := time.Now()
	_, err := b.Put(context.Background(), "small", data, &blob.PutOptions{IfNotExist: true})
	t.Logf("small put with a 3 s stall and 2 s attempts: %v after %v, %d requests", err, time.Since(start), e.hook.requests.Load())
	w.Finish(t)
	if err != nil {
		t.Fatalf("want the retried attempt to succeed: %v", err)
	}
	toxinet.WholeOrAbsent(t, e.Direct, "small", data, err)
}

func TestFaultBandwidth(t *testing.T) {
	e, _ := newFaultEnv(t, faultOptions())
	toxinet.Bandwidth(t, e.Env, 2048, 3<<20)
}

// TestFaultLostResponse cuts the response to the request that completes a
// conditional upload after the server applied it. The retry finds the
// upload done: for a single request, the precondition fails on the Put's own
// object and the driver recognizes its put ID; for a resumable upload, the
// library asks the session, which has finished.
func TestFaultLostResponse(t *testing.T) {
	for _, c := range []struct {
		name string
		size int
		cond func(etag string) *blob.PutOptions
	}{
		{"single-if-not-exist", 10 << 10, func(string) *blob.PutOptions { return &blob.PutOptions{IfNotExist: true} }},
		{"single-if-match", 10 << 10, func(etag string) *blob.PutOptions { return &blob.PutOptions{IfMatch: etag} }},
		{"resumable-if-not-exist", 2 << 20, func(string) *blob.PutOptions { return &blob.PutOptions{IfNotExist: true} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The cut is installed when the request is seen: a fast server
			// may answer first. Three tries, each with a fresh cut, must
			// catch one response.
			for try := range 3 {
				e, _ := newFaultEnv(t, faultOptions())
				key := fmt.Sprintf("lost/%s/%d", c.name, try)
				etag := ""
				if strings.Contains(c.name, "if-match") {
					etag = e.Existing(t, key)
				}
				cut := e.Cut(t)
				e.hook.set(nil, cut.On)
				// Small: the upload, its retry, the metadata check. Resumable:
				// the session, 8 chunks, and at least one more.
				least := int64(3)
				if c.size >= 1<<20 {
					least = 10
				}
				if e.TryLostResponse(t, key, backendtest.Pattern(c.size, 8), c.cond(etag), cut.Off, e.hook.requests.Load, least) {
					return
				}
			}
			t.Fatal("no try caught the response with the cut: the test proved nothing")
		})
	}
}
