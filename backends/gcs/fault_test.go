package gcs

// Fault tests: the driver talks to fake-gcs-server through toxiproxy (the
// proxy named "gcs"), faults are injected while uploads run, and a second
// bucket that talks to the emulator directly checks that an object is whole
// or absent, never partial, at every moment and after the fault clears.
// Durations are logged, never asserted.

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"google.golang.org/api/option"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/testkit/testenv"
	"github.com/redokit/redokit/testkit/toxinet"
)

type faultEnv struct {
	proxy  *toxiproxy.Proxy
	direct *blob.Bucket // straight to the emulator: the observer
	hook   *hookTransport
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
	direct := emulatorHost(t)
	addr, toxi := os.Getenv("TOXIPROXY_ADDR"), os.Getenv("REDOKIT_GCS_TOXI_HOST")
	if addr == "" || toxi == "" {
		testenv.Need(t, "TOXIPROXY_ADDR and REDOKIT_GCS_TOXI_HOST must be set: start toxiproxy (scripts/emulators.sh) to run the fault tests")
	}
	tc := toxiproxy.NewClient(addr)
	p, err := tc.Proxy("gcs")
	if err != nil {
		if p, err = tc.CreateProxy("gcs", toxi, direct); err != nil {
			t.Fatalf("toxiproxy at %s: no proxy \"gcs\" and cannot create it: %v", addr, err)
		}
	}
	// From a clean proxy: a toxic an earlier test could not remove must
	// not stall this one.
	if err := toxinet.Clear(p); err != nil {
		t.Fatalf("toxiproxy proxy %q: %v", "gcs", err)
	}
	return p, toxi
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
	return &faultEnv{proxy: p, direct: direct, hook: hook}, b
}

func (e *faultEnv) toxic(t *testing.T, name, typ, stream string, attrs toxiproxy.Attributes) func() {
	t.Helper()
	if _, err := e.proxy.AddToxic(name, typ, stream, 1, attrs); err != nil {
		t.Fatalf("add toxic %s: %v", name, err)
	}
	var once sync.Once
	remove := func() {
		once.Do(func() {
			if err := e.proxy.RemoveToxic(name); err != nil {
				t.Errorf("remove toxic %s: %v", name, err)
			}
		})
	}
	t.Cleanup(remove)
	return remove
}

type watcher struct {
	stop    chan struct{}
	done    chan struct{}
	looks   atomic.Int64
	present atomic.Int64
	mu      sync.Mutex
	bad     []string
}

// watch polls key through the direct bucket until stopped and records every
// observation that is neither absent nor exactly want.
func watch(b *blob.Bucket, key string, want []byte) *watcher {
	w := &watcher{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		ctx := context.Background()
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			w.looks.Add(1)
			got, err := b.ReadAll(ctx, key)
			switch {
			case blob.IsNotExist(err):
			case err != nil:
				w.note("read error: " + err.Error())
			case !bytes.Equal(got, want):
				w.note("partial or wrong content: " + strconv.Itoa(len(got)) + " bytes, want " + strconv.Itoa(len(want)))
			default:
				w.present.Add(1)
			}
		}
	}()
	return w
}

func (w *watcher) note(s string) {
	w.mu.Lock()
	if len(w.bad) < 10 {
		w.bad = append(w.bad, s)
	}
	w.mu.Unlock()
}

func (w *watcher) finish(t *testing.T) {
	t.Helper()
	close(w.stop)
	<-w.done
	t.Logf("watcher: %d looks, %d saw the whole object", w.looks.Load(), w.present.Load())
	if len(w.bad) > 0 {
		t.Fatalf("the observer saw what must never be visible: %s", strings.Join(w.bad, "; "))
	}
}

func wholeOrAbsent(t *testing.T, direct *blob.Bucket, key string, want []byte, err error) {
	t.Helper()
	got, rerr := direct.ReadAll(context.Background(), key)
	switch {
	case err == nil && rerr == nil && bytes.Equal(got, want):
		t.Logf("outcome: the Put succeeded and the object is whole")
	case err == nil:
		t.Fatalf("the Put succeeded but the object reads %d bytes (%v), want %d", len(got), rerr, len(want))
	case blob.IsNotExist(rerr):
		t.Logf("outcome: the Put failed (%v) and nothing is visible", err)
	case rerr == nil && bytes.Equal(got, want):
		t.Logf("outcome: the Put failed (%v) but the object is whole", err)
	default:
		t.Fatalf("the Put failed (%v) and the object reads %d bytes (%v): partial", err, len(got), rerr)
	}
}

func faultOptions() *Options {
	return &Options{
		ResumableThreshold: 1 << 20, ChunkSize: 256 << 10,
		Timeout: 2 * time.Second, ChunkRetryDeadline: 10 * time.Second, MaxAttempts: 6,
	}
}

func TestFaultLatency(t *testing.T) {
	e, b := newFaultEnv(t, faultOptions())
	e.toxic(t, "latency", "latency", "downstream", toxiproxy.Attributes{"latency": 150, "jitter": 50})
	ctx := context.Background()
	for _, n := range []int{100 << 10, 2 << 20} {
		key := "latency/" + strconv.Itoa(n)
		data := pattern(n, 7)
		start := time.Now()
		if _, err := b.Put(ctx, key, data, &blob.PutOptions{IfNotExist: true}); err != nil {
			t.Fatalf("put %d bytes with 150 ms latency: %v", n, err)
		}
		t.Logf("put %d bytes through 150±50 ms latency: %v", n, time.Since(start))
		got, err := b.ReadRange(ctx, key, 10, int64(n-20))
		if err != nil || !bytes.Equal(got, data[10:n-10]) {
			t.Fatalf("ranged read: %d bytes, %v", len(got), err)
		}
	}
	if err := b.Delete(ctx, "latency/102400", "latency/2097152", "latency/missing"); err != nil {
		t.Fatal(err)
	}
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
			e, b := newFaultEnv(t, opts)
			key := "reset/" + c.name
			data := pattern(3<<20, 3) // 12 chunks of 256 KiB
			var fired atomic.Bool
			cleared := make(chan struct{})
			e.hook.set(func(n int64) {
				if n == 4 && fired.CompareAndSwap(false, true) {
					clear := e.toxic(t, "reset", "reset_peer", "upstream", toxiproxy.Attributes{"timeout": 0})
					time.AfterFunc(c.outage, func() { clear(); close(cleared) })
				}
			}, nil)
			w := watch(e.direct, key, data)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			start := time.Now()
			_, err := b.Put(ctx, key, data, &blob.PutOptions{IfNotExist: true})
			t.Logf("put with a %v reset outage, %v chunk retry deadline: %v after %v, %d chunk requests", c.outage, c.deadline, err, time.Since(start), e.hook.chunks.Load())
			if !fired.Load() {
				t.Fatal("the reset never fired")
			}
			<-cleared
			w.finish(t)
			wholeOrAbsent(t, e.direct, key, data, err)
			switch {
			case c.name == "short" && err != nil:
				t.Fatalf("a 300 ms outage should be retried through: %v", err)
			case c.name == "long" && err == nil:
				t.Fatal("a 6 s outage with a 2 s chunk retry deadline should fail the Put")
			}
			if err != nil {
				if !blob.IsTransient(err) && !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("the failure is not classified as transient or a deadline: %v (%v)", err, blob.CodeOf(err))
				}
				if _, err := b.Put(context.Background(), key, data, &blob.PutOptions{IfNotExist: true}); err != nil {
					t.Fatalf("after the fault cleared, the same create: %v", err)
				}
				wholeOrAbsent(t, e.direct, key, data, nil)
			}
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
			e, b := newFaultEnv(t, faultOptions())
			key := "stall/" + c.name
			data := pattern(2<<20, 4)
			var fired atomic.Bool
			e.hook.set(func(n int64) {
				if n == 3 && fired.CompareAndSwap(false, true) {
					clear := e.toxic(t, "stall", "timeout", "upstream", toxiproxy.Attributes{"timeout": 0})
					time.AfterFunc(c.stall, clear)
				}
			}, nil)
			w := watch(e.direct, key, data)
			ctx, cancel := context.WithTimeout(context.Background(), c.deadline)
			defer cancel()
			start := time.Now()
			_, err := b.Put(ctx, key, data, &blob.PutOptions{IfNotExist: true})
			t.Logf("put with a %v stall, %v deadline, 2 s chunk timeout: %v after %v, %d chunk requests", c.stall, c.deadline, err, time.Since(start), e.hook.chunks.Load())
			if !fired.Load() {
				t.Fatal("the stall never fired")
			}
			if c.name == "deadline" {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("want a deadline error, got %v", err)
				}
				time.Sleep(time.Until(start.Add(c.stall + 500*time.Millisecond)))
			}
			w.finish(t)
			wholeOrAbsent(t, e.direct, key, data, err)
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
	data := pattern(200<<10, 2)
	clear := e.toxic(t, "stall", "timeout", "upstream", toxiproxy.Attributes{"timeout": 0})
	time.AfterFunc(3*time.Second, clear)
	w := watch(e.direct, "small", data)
	start := time.Now()
	_, err := b.Put(context.Background(), "small", data, &blob.PutOptions{IfNotExist: true})
	t.Logf("small put with a 3 s stall and 2 s attempts: %v after %v, %d requests", err, time.Since(start), e.hook.requests.Load())
	w.finish(t)
	if err != nil {
		t.Fatalf("want the retried attempt to succeed: %v", err)
	}
	wholeOrAbsent(t, e.direct, "small", data, err)
}

func TestFaultBandwidth(t *testing.T) {
	e, b := newFaultEnv(t, faultOptions())
	e.toxic(t, "bw-up", "bandwidth", "upstream", toxiproxy.Attributes{"rate": 2048})
	e.toxic(t, "bw-down", "bandwidth", "downstream", toxiproxy.Attributes{"rate": 2048})
	ctx := context.Background()
	data := pattern(3<<20, 6)
	w := watch(e.direct, "bw", data)
	start := time.Now()
	_, err := b.Put(ctx, "bw", data, nil)
	el := time.Since(start)
	w.finish(t)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("put 3 MiB through 2 MB/s (resumable, chunks in sequence): %v (%.2f MB/s)", el, float64(len(data))/el.Seconds()/1e6)
	start = time.Now()
	got, err := b.ReadAll(ctx, "bw")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %d bytes, %v", len(got), err)
	}
	t.Logf("read 3 MiB through 2 MB/s: %v", time.Since(start))
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
			e, b := newFaultEnv(t, faultOptions())
			ctx := context.Background()
			key := "lost/" + c.name
			etag := ""
			if strings.Contains(c.name, "if-match") {
				// Written directly, not through the proxy: a connection
				// the proxy opened before the cut toxic may carry the
				// faulted Put's response past it (toxiproxy updates a
				// live link's toxics asynchronously), and then the Put
				// succeeds in one request and the test proves nothing.
				a, err := e.direct.Put(ctx, key, []byte("v1"), nil)
				if err != nil {
					t.Fatal(err)
				}
				etag = a.ETag
			}
			data := pattern(c.size, 8)
			var (
				mu     sync.Mutex
				remove func()
				once   sync.Once
			)
			e.hook.set(nil, func() {
				once.Do(func() {
					rm := e.toxic(t, "cut", "limit_data", "downstream", toxiproxy.Attributes{"bytes": 0})
					mu.Lock()
					remove = rm
					mu.Unlock()
				})
			})
			done := make(chan struct{})
			go func() {
				defer close(done)
				deadline := time.Now().Add(20 * time.Second)
				for time.Now().Before(deadline) {
					if got, err := e.direct.ReadAll(ctx, key); err == nil && bytes.Equal(got, data) {
						break
					}
					time.Sleep(2 * time.Millisecond)
				}
				mu.Lock()
				if remove != nil {
					remove()
				}
				mu.Unlock()
			}()
			r0 := e.hook.requests.Load()
			_, err := b.Put(ctx, key, data, c.cond(etag))
			<-done
			reqs := e.hook.requests.Load() - r0
			t.Logf("%d requests for the Put", reqs)
			if err != nil {
				t.Fatalf("the Put's own retry was reported as a failure: %v", err)
			}
			wholeOrAbsent(t, e.direct, key, data, nil)
			// Small: the upload, its retry, the metadata check. Resumable:
			// the session, 8 chunks, and at least one more.
			if c.size < 1<<20 && reqs < 3 || c.size >= 1<<20 && reqs < 10 {
				t.Fatalf("only %d requests: the cut response was not retried, so the test proved nothing", reqs)
			}
		})
	}
}
