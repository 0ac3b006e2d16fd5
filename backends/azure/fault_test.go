package azure

// Fault tests: the driver talks to Azurite through toxiproxy (the proxy named
// "azure"), faults are injected while uploads run, and a second bucket that
// talks to Azurite directly checks the invariant that matters for a redo log:
// a blob is whole or absent, never partial, at every moment and after the
// fault clears. Durations are logged, never asserted.

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/testkit/testenv"
	"github.com/redokit/redokit/testkit/toxinet"
)

// faultEnv is a container reachable directly and through the proxy.
type faultEnv struct {
	proxy  *toxiproxy.Proxy
	direct *blob.Bucket // straight to Azurite: the observer
	hook   *hookTransport
	client *container.Client // through the proxy
}

// hookTransport calls onBlock before the n-th Put Block request it sends,
// and counts requests.
type hookTransport struct {
	base     http.RoundTripper
	blocks   atomic.Int64
	requests atomic.Int64
	mu       sync.Mutex
	onBlock  func(n int64)
}

func (h *hookTransport) Do(r *http.Request) (*http.Response, error) {
	h.requests.Add(1)
	if r.Method == http.MethodPut && r.URL.Query().Get("comp") == "block" {
		n := h.blocks.Add(1)
		h.mu.Lock()
		f := h.onBlock
		h.mu.Unlock()
		if f != nil {
			f(n)
		}
	}
	return h.base.RoundTrip(r)
}

func (h *hookTransport) setOnBlock(f func(n int64)) {
	h.mu.Lock()
	h.onBlock = f
	h.mu.Unlock()
}

// azureProxy returns the toxiproxy proxy "azure", creating it from the
// environment if the emulator script did not.
func azureProxy(t *testing.T) *toxiproxy.Proxy {
	t.Helper()
	addr := os.Getenv("TOXIPROXY_ADDR")
	direct, _, _ := endpointEnv(t, "REDOKIT_AZURE_ENDPOINT")
	toxi, _, _ := endpointEnv(t, "REDOKIT_AZURE_TOXI_ENDPOINT")
	if addr == "" {
		testenv.Need(t, "TOXIPROXY_ADDR is not set: start toxiproxy (scripts/emulators.sh) to run the fault tests")
	}
	tc := toxiproxy.NewClient(addr)
	p, err := tc.Proxy("azure")
	if err != nil {
		du, _ := url.Parse(direct)
		tu, _ := url.Parse(toxi)
		if p, err = tc.CreateProxy("azure", tu.Host, du.Host); err != nil {
			t.Fatalf("toxiproxy at %s: no proxy \"azure\" and cannot create it: %v", addr, err)
		}
	}
	// From a clean proxy: a toxic an earlier test could not remove must
	// not stall this one.
	if err := toxinet.Clear(p); err != nil {
		t.Fatalf("toxiproxy proxy %q: %v", "azure", err)
	}
	return p
}

func newFaultEnv(t *testing.T, opts *Options) (*faultEnv, *blob.Bucket) {
	t.Helper()
	p := azureProxy(t)
	endpoint, account, key := endpointEnv(t, "REDOKIT_AZURE_ENDPOINT")
	toxiEndpoint, _, _ := endpointEnv(t, "REDOKIT_AZURE_TOXI_ENDPOINT")
	dc, _ := newContainerClient(t, endpoint, account, key)
	direct, err := New(dc, nil)
	if err != nil {
		t.Fatal(err)
	}
	cred, _ := container.NewSharedKeyCredential(account, key)
	hook := &hookTransport{base: http.DefaultTransport.(*http.Transport).Clone()}
	tcl, err := container.NewClientWithSharedKeyCredential(toxiEndpoint+"/"+containerName(t, dc), cred, &container.ClientOptions{
		ClientOptions: policy.ClientOptions{Transport: hook},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(tcl, opts)
	if err != nil {
		t.Fatal(err)
	}
	return &faultEnv{proxy: p, direct: direct, hook: hook, client: tcl}, b
}

// toxic adds a toxic and removes it when the test ends (if still there).
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

// watcher polls key through the direct bucket until stopped and records
// every observation that is neither absent nor exactly want.
type watcher struct {
	stop    chan struct{}
	done    chan struct{}
	looks   atomic.Int64
	present atomic.Int64
	mu      sync.Mutex
	bad     []string
}

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
				w.note("partial or wrong content: " + itoa(len(got)) + " bytes, want " + itoa(len(want)))
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

// finish stops the watcher and fails t if it saw a partial object.
func (w *watcher) finish(t *testing.T) {
	t.Helper()
	close(w.stop)
	<-w.done
	t.Logf("watcher: %d looks, %d saw the whole object", w.looks.Load(), w.present.Load())
	if len(w.bad) > 0 {
		t.Fatalf("the observer saw what must never be visible: %s", strings.Join(w.bad, "; "))
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// wholeOrAbsent checks the final state after a Put that returned err.
func wholeOrAbsent(t *testing.T, direct *blob.Bucket, key string, want []byte, err error) {
	t.Helper()
	got, rerr := direct.ReadAll(context.Background(), key)
	switch {
	case err == nil && rerr == nil && bytes.Equal(got, want):
		t.Logf("outcome: the Put succeeded and the blob is whole")
	case err == nil:
		t.Fatalf("the Put succeeded but the blob reads %d bytes (%v), want %d", len(got), rerr, len(want))
	case blob.IsNotExist(rerr):
		t.Logf("outcome: the Put failed (%v) and nothing is visible", err)
	case rerr == nil && bytes.Equal(got, want):
		// A commit that the service applied but whose response was lost
		// past every retry: whole, which is allowed.
		t.Logf("outcome: the Put failed (%v) but the blob is whole", err)
	default:
		t.Fatalf("the Put failed (%v) and the blob reads %d bytes (%v): partial", err, len(got), rerr)
	}
}

func faultOptions() *Options {
	return &Options{
		PutThreshold: 1 << 20, BlockSize: 256 << 10, Concurrency: 4,
		TryTimeout: 2 * time.Second, MaxRetries: 4, RetryDelay: 50 * time.Millisecond, MaxRetryDelay: 500 * time.Millisecond,
	}
}

func TestFaultLatency(t *testing.T) {
	e, b := newFaultEnv(t, faultOptions())
	e.toxic(t, "latency", "latency", "downstream", toxiproxy.Attributes{"latency": 150, "jitter": 50})
	ctx := context.Background()
	for _, n := range []int{100 << 10, 3 << 20} {
		key := "latency/" + itoa(n)
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
	n := 0
	for _, err := range b.List(ctx, "latency/") {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 2 {
		t.Fatalf("listed %d", n)
	}
	if err := b.Delete(ctx, "latency/102400", "latency/3145728", "latency/missing"); err != nil {
		t.Fatal(err)
	}
}

// TestFaultResetMidStagedUpload resets every connection while blocks are
// being staged, for a short while (the retries get through) and for long
// (the Put fails), and checks that the blob is whole or absent throughout.
func TestFaultResetMidStagedUpload(t *testing.T) {
	for _, c := range []struct {
		name    string
		outage  time.Duration
		retries int
	}{{"short", 300 * time.Millisecond, 4}, {"long", 5 * time.Second, 1}} {
		t.Run(c.name, func(t *testing.T) {
			opts := faultOptions()
			opts.MaxRetries = c.retries
			e, b := newFaultEnv(t, opts)
			// Slow the upload so that the reset lands among the blocks.
			e.toxic(t, "bw", "bandwidth", "upstream", toxiproxy.Attributes{"rate": 4096})
			key := "reset/" + c.name
			data := pattern(6<<20, 3) // 24 blocks of 256 KiB
			var fired atomic.Bool
			var clear func()
			cleared := make(chan struct{})
			e.hook.setOnBlock(func(n int64) {
				if n == 5 && fired.CompareAndSwap(false, true) {
					clear = e.toxic(t, "reset", "reset_peer", "upstream", toxiproxy.Attributes{"timeout": 0})
					time.AfterFunc(c.outage, func() { clear(); close(cleared) })
				}
			})
			w := watch(e.direct, key, data)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			start := time.Now()
			_, err := b.Put(ctx, key, data, &blob.PutOptions{IfNotExist: true})
			t.Logf("put with a %v reset outage: %v after %v, %d block requests", c.outage, err, time.Since(start), e.hook.blocks.Load())
			if !fired.Load() {
				t.Fatal("the reset never fired: the upload had fewer blocks than expected")
			}
			select {
			case <-cleared:
			case <-time.After(c.outage + 10*time.Second):
				t.Fatal("the toxic was not removed")
			}
			w.finish(t)
			wholeOrAbsent(t, e.direct, key, data, err)
			if c.name == "long" && err == nil {
				t.Fatal("a 5 s outage with one retry of 2 s tries should fail the Put")
			}
			if err != nil && !blob.IsTransient(err) && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("the failure is not classified as transient or a deadline: %v (%v)", err, blob.CodeOf(err))
			}
			if err != nil {
				// The fault has cleared: the same conditional create now
				// succeeds, so the failed one committed nothing.
				if _, err := b.Put(context.Background(), key, data, &blob.PutOptions{IfNotExist: true}); err != nil {
					t.Fatalf("after the fault cleared: %v", err)
				}
				wholeOrAbsent(t, e.direct, key, data, nil)
			}
		})
	}
}

// TestFaultStalledBlock black-holes the traffic while blocks are staged: the
// stalled tries time out (TryTimeout) and are retried once the stall ends;
// with a caller deadline shorter than the stall, the Put fails with a clear
// deadline error and nothing is committed.
func TestFaultStalledBlock(t *testing.T) {
	for _, c := range []struct {
		name     string
		stall    time.Duration
		deadline time.Duration
	}{{"retried", 3 * time.Second, 60 * time.Second}, {"deadline", 10 * time.Second, 3 * time.Second}} {
		t.Run(c.name, func(t *testing.T) {
			e, b := newFaultEnv(t, faultOptions())
			e.toxic(t, "bw", "bandwidth", "upstream", toxiproxy.Attributes{"rate": 4096})
			key := "stall/" + c.name
			data := pattern(4<<20, 4)
			var fired atomic.Bool
			e.hook.setOnBlock(func(n int64) {
				if n == 3 && fired.CompareAndSwap(false, true) {
					clear := e.toxic(t, "stall", "timeout", "upstream", toxiproxy.Attributes{"timeout": 0})
					time.AfterFunc(c.stall, clear)
				}
			})
			w := watch(e.direct, key, data)
			ctx, cancel := context.WithTimeout(context.Background(), c.deadline)
			defer cancel()
			start := time.Now()
			_, err := b.Put(ctx, key, data, &blob.PutOptions{IfNotExist: true})
			t.Logf("put with a %v stall, %v deadline, 2 s tries: %v after %v, %d block requests", c.stall, c.deadline, err, time.Since(start), e.hook.blocks.Load())
			if !fired.Load() {
				t.Fatal("the stall never fired")
			}
			if c.name == "deadline" {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("want a deadline error, got %v", err)
				}
				// Wait for the stall to end before the final look.
				time.Sleep(time.Until(start.Add(c.stall + 500*time.Millisecond)))
			}
			w.finish(t)
			wholeOrAbsent(t, e.direct, key, data, err)
			if c.name == "retried" && err != nil {
				t.Fatalf("a 3 s stall with 2 s tries and 4 retries should be retried through: %v", err)
			}
		})
	}
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
	t.Logf("put 3 MiB through 2 MB/s per connection (4 blocks in flight): %v (%.2f MB/s)", el, float64(len(data))/el.Seconds()/1e6)
	start = time.Now()
	got, err := b.ReadAll(ctx, "bw")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %d bytes, %v", len(got), err)
	}
	t.Logf("read 3 MiB through 2 MB/s per connection: %v", time.Since(start))
}

// TestFaultLostResponse cuts the response to a conditional Put after the
// service applied it: the SDK retries, the retry fails the condition on the
// Put's own blob, and the driver recognizes its put ID and reports success.
func TestFaultLostResponse(t *testing.T) {
	for _, c := range []struct {
		name string
		size int
		cond func(etag string) *blob.PutOptions
	}{
		{"put-blob-if-not-exist", 10 << 10, func(string) *blob.PutOptions { return &blob.PutOptions{IfNotExist: true} }},
		{"block-list-if-match", 2 << 20, func(etag string) *blob.PutOptions { return &blob.PutOptions{IfMatch: etag} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, b := newFaultEnv(t, faultOptions())
			ctx := context.Background()
			key := "lost/" + c.name
			etag := ""
			if strings.Contains(c.name, "if-match") {
				// Written directly, not through the proxy, so the faulted
				// Put opens its connection after the cut toxic is there
				// (as in the gcs test, where a live link carried the
				// response past it).
				a, err := e.direct.Put(ctx, key, []byte("v1"), nil)
				if err != nil {
					t.Fatal(err)
				}
				etag = a.ETag
			}
			data := pattern(c.size, 8)
			// Cut every response once the body of the final request is
			// sent: the Put Blob, or the Put Block List after the blocks.
			var clear func()
			if c.size < 1<<20 {
				clear = e.toxic(t, "cut", "limit_data", "downstream", toxiproxy.Attributes{"bytes": 0})
			} else {
				clear = e.armCutBeforeCommit(t)
			}
			// Remove the cut as soon as the new content is visible.
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
				clear()
			}()
			r0 := e.hook.requests.Load()
			_, err := b.Put(ctx, key, data, c.cond(etag))
			<-done
			reqs := e.hook.requests.Load() - r0
			t.Logf("%d requests for the Put", reqs)
			if err != nil {
				t.Fatalf("the Put's own retry was reported as a lost race: %v", err)
			}
			// The final request, its retry and the properties check at least.
			if minimum := int64(c.size/(256<<10)) + 3; c.size < 1<<20 && reqs < 3 || c.size >= 1<<20 && reqs < minimum {
				t.Fatalf("only %d requests: the cut response was not retried, so the test proved nothing", reqs)
			}
			wholeOrAbsent(t, e.direct, key, data, nil)
		})
	}
}

// armCutBeforeCommit cuts responses from the moment the block list is sent:
// the transport adds the toxic just before a Put Block List goes out.
func (e *faultEnv) armCutBeforeCommit(t *testing.T) func() {
	var once sync.Once
	var remove func()
	var mu sync.Mutex
	base := e.hook.base
	e.hook.base = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodPut && r.URL.Query().Get("comp") == "blocklist" {
			once.Do(func() {
				rm := e.toxic(t, "cut", "limit_data", "downstream", toxiproxy.Attributes{"bytes": 0})
				mu.Lock()
				remove = rm
				mu.Unlock()
			})
		}
		return base.RoundTrip(r)
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		if remove != nil {
			remove()
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
