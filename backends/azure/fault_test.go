package azure

// Fault tests: the driver talks to Azurite through toxiproxy (the proxy named
// "azure"), faults are injected while uploads run, and a second bucket that
// talks to Azurite directly checks the invariant that matters for a redo log:
// a blob is whole or absent, never partial, at every moment and after the
// fault clears. Durations are logged, never asserted.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/testkit/backendtest"
	"github.com/redokit/redokit/testkit/toxinet"
)

// faultEnv is a container reachable directly and through the proxy.
type faultEnv struct {
	*toxinet.Env
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
	direct, _, _ := endpointEnv(t, "REDOKIT_AZURE_ENDPOINT")
	toxi, _, _ := endpointEnv(t, "REDOKIT_AZURE_TOXI_ENDPOINT")
	du, _ := url.Parse(direct)
	tu, _ := url.Parse(toxi)
	return toxinet.FaultProxy(t, "azure", tu.Host, du.Host)
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
	return &faultEnv{Env: &toxinet.Env{Proxy: p, Bucket: b, Direct: direct}, hook: hook, client: tcl}, b
}

func faultOptions() *Options {
	return &Options{
		PutThreshold: 1 << 20, BlockSize: 256 << 10, Concurrency: 4,
		TryTimeout: 2 * time.Second, MaxRetries: 4, RetryDelay: 50 * time.Millisecond, MaxRetryDelay: 500 * time.Millisecond,
	}
}

func TestFaultLatency(t *testing.T) {
	e, _ := newFaultEnv(t, faultOptions())
	toxinet.Latency(t, e.Env, 100<<10, 3<<20)
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
			e, _ := newFaultEnv(t, opts)
			// Slow the upload so that the reset lands among the blocks.
			e.Toxic(t, "bw", "bandwidth", "upstream", toxiproxy.Attributes{"rate": 4096})
			key := "reset/" + c.name
			data := backendtest.Pattern(6<<20, 3) // 24 blocks of 256 KiB
			reset := toxinet.Midway{Toxic: "reset", Type: "reset_peer", Attrs: toxiproxy.Attributes{"timeout": 0}, At: 5, Lasts: c.outage}
			took, err := e.PutThrough(t, key, data, 60*time.Second, reset, e.hook.setOnBlock)
			t.Logf("put with a %v reset outage: %v after %v, %d block requests", c.outage, err, took, e.hook.blocks.Load())
			if c.name == "long" && err == nil {
				t.Fatal("a 5 s outage with one retry of 2 s tries should fail the Put")
			}
			e.CreateAfterFault(t, key, data, err)
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
			e, _ := newFaultEnv(t, faultOptions())
			e.Toxic(t, "bw", "bandwidth", "upstream", toxiproxy.Attributes{"rate": 4096})
			stall := toxinet.Midway{Toxic: "stall", Type: "timeout", Attrs: toxiproxy.Attributes{"timeout": 0}, At: 3, Lasts: c.stall}
			took, err := e.PutThrough(t, "stall/"+c.name, backendtest.Pattern(4<<20, 4), c.deadline, stall, e.hook.setOnBlock)
			t.Logf("put with a %v stall, %v deadline, 2 s tries: %v after %v, %d block requests", c.stall, c.deadline, err, took, e.hook.blocks.Load())
			if c.name == "deadline" && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("want a deadline error, got %v", err)
			}
			if c.name == "retried" && err != nil {
				t.Fatalf("a 3 s stall with 2 s tries and 4 retries should be retried through: %v", err)
			}
		})
	}
}

func TestFaultBandwidth(t *testing.T) {
	e, _ := newFaultEnv(t, faultOptions())
	toxinet.Bandwidth(t, e.Env, 2048, 3<<20)
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
				// Cut every response once the body of the final request is
				// sent: the Put Blob, or the Put Block List after the blocks.
				cut := e.Cut(t)
				if c.size < 1<<20 {
					cut.On()
				} else {
					e.cutBeforeCommit(cut)
				}
				// The final request, its retry and the properties check at least.
				least := int64(3)
				if c.size >= 1<<20 {
					least = int64(c.size/(256<<10)) + 3
				}
				if e.TryLostResponse(t, key, backendtest.Pattern(c.size, 8), c.cond(etag), cut.Off, e.hook.requests.Load, least) {
					return
				}
			}
			t.Fatal("no try caught the response with the cut: the test proved nothing")
		})
	}
}

// cutBeforeCommit puts cut on just before a Put Block List goes out.
func (e *faultEnv) cutBeforeCommit(cut *toxinet.Cut) {
	base := e.hook.base
	e.hook.base = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodPut && r.URL.Query().Get("comp") == "blocklist" {
			cut.On()
		}
		return base.RoundTrip(r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
