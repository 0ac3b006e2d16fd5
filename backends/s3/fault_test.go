package s3

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/testkit/toxinet"
)

// Fault tests: the driver talks to versitygw through the toxiproxy proxy
// "s3" (REDOKIT_S3_TOXI_ENDPOINT), the test adds toxics to it, and checks
// behind the driver's back, on the direct endpoint, that after the fault an
// object is whole or absent and no multipart upload is left. Nothing here
// asserts on timing; every loop is bounded.

// faultProxy returns the proxy and its endpoint, with every toxic removed
// now and when the test ends.
func faultProxy(t *testing.T) (*toxiproxy.Proxy, string) {
	t.Helper()
	v := needEnv(t, "REDOKIT_S3_TOXI_ENDPOINT", "TOXIPROXY_ADDR")
	p, err := toxinet.Proxy(t, v[1], "s3")
	if err != nil {
		t.Fatal(err)
	}
	return p, v[0]
}

// faultEnv is e's bucket behind the proxy p for the shared fault tier,
// which also checks that no multipart upload is left.
func faultEnv(t *testing.T, p *toxiproxy.Proxy, e *testEnv) *toxinet.Env {
	return &toxinet.Env{Proxy: p, Bucket: e.b, Direct: directBucket(t, e), After: func(t testing.TB, when string) {
		t.Helper()
		wantNoUploads(t, e.admin, e.bucket, when)
	}}
}

func addToxic(t *testing.T, p *toxiproxy.Proxy, name, kind, stream string, toxicity float32, attrs toxiproxy.Attributes) {
	t.Helper()
	if _, err := p.AddToxic(name, kind, stream, toxicity, attrs); err != nil {
		t.Fatalf("toxiproxy: add %s (%s %s): %v", name, kind, stream, err)
	}
}

// removeOnce returns a function that removes a toxic the first time it is
// called (from any goroutine).
func removeOnce(t *testing.T, p *toxiproxy.Proxy, name string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			if err := p.RemoveToxic(name); err != nil {
				t.Errorf("toxiproxy: remove %s: %v", name, err)
			}
		})
	}
}

// wholeOrAbsent checks, on the direct endpoint, that key holds exactly
// data or does not exist, and that no multipart upload is left.
func wholeOrAbsent(t *testing.T, e *testEnv, direct *blob.Bucket, key string, data []byte, when string) (present bool) {
	t.Helper()
	got, err := direct.ReadAll(t.Context(), key)
	switch {
	case blob.IsNotExist(err):
	case err != nil:
		t.Errorf("%s: reading %q on the direct endpoint: %v", when, key, err)
	default:
		present = true
		wantSame(t, got, data, when+": "+key+" (must be whole if present)")
	}
	wantNoUploads(t, e.admin, e.bucket, when)
	return present
}

// directBucket opens the test's bucket on the direct endpoint.
func directBucket(t *testing.T, e *testEnv) *blob.Bucket {
	t.Helper()
	b, err := New(nil, e.bucket, &Options{Endpoint: endpoint(t), UsePathStyle: true, Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestFaultLatency: every operation works through added latency.
func TestFaultLatency(t *testing.T) {
	p, via := faultProxy(t)
	e := newEnv(t, via, &Options{PartSize: 5 << 20, MultipartThreshold: 5 << 20})
	toxinet.Latency(t, faultEnv(t, p, e), 1000, 7<<20)
}

// TestFaultResetMidUpload: connections cut in the middle of part uploads.
func TestFaultResetMidUpload(t *testing.T) {
	data := payload(12<<20, 5)
	t.Run("EveryPartCut", func(t *testing.T) {
		// Every connection is closed after 1 MiB from the client: the
		// small requests (create, abort) pass, no 5 MiB part can. The
		// Put must fail as transient and abort its upload through the
		// same fault.
		p, via := faultProxy(t)
		e := newEnv(t, via, &Options{PartSize: 5 << 20, MultipartThreshold: 5 << 20, MaxAttempts: 2})
		direct := directBucket(t, e)
		addToxic(t, p, "cut", "limit_data", "upstream", 1, toxiproxy.Attributes{"bytes": 1 << 20})
		_, err := e.b.Put(t.Context(), "reset/cut", data, nil)
		wantCode(t, err, blob.CodeTransient, "Put with every part cut")
		t.Logf("Put with every part cut: %v", err)
		if wholeOrAbsent(t, e, direct, "reset/cut", data, "after cut parts") {
			t.Errorf("the object exists although no part could be sent")
		}
	})
	t.Run("RandomResets", func(t *testing.T) {
		// Half of the connections are reset at once; a fresh connection
		// per request makes each request roll. Puts succeed through
		// retries, or fail and leave nothing.
		p, via := faultProxy(t)
		cc := newCounting(noKeepAlive())
		e := newEnv(t, via, &Options{PartSize: 5 << 20, MultipartThreshold: 5 << 20, MaxAttempts: 8, HTTPClient: cc})
		direct := directBucket(t, e)
		addToxic(t, p, "reset", "reset_peer", "upstream", 0.5, toxiproxy.Attributes{"timeout": 0})
		ok := 0
		for i := range 3 {
			key := "reset/random-" + string(rune('a'+i))
			_, err := e.b.Put(t.Context(), key, data, &blob.PutOptions{IfNotExist: true})
			if err == nil {
				ok++
			} else {
				t.Logf("Put %s through random resets failed: %v", key, err)
				if c := blob.CodeOf(err); c != blob.CodeTransient {
					t.Errorf("Put %s: code %v, want transient", key, c)
				}
			}
			if present := wholeOrAbsent(t, e, direct, key, data, "after random resets"); present != (err == nil) {
				t.Errorf("%s: present=%v but Put returned %v", key, present, err)
			}
		}
		t.Logf("%d of 3 Puts succeeded through a 50%% connection reset rate; %d of %d requests were reset and retried", ok, cc.failed.Load(), cc.total())
		if cc.failed.Load() == 0 {
			t.Errorf("no request failed: the fault was not seen")
		}
	})
}

// TestFaultStalledPart: a part whose connection stalls (a black hole)
// times out per attempt and is retried; if the stall lasts, the Put fails
// with a clear transient error and aborts its upload.
func TestFaultStalledPart(t *testing.T) {
	data := payload(12<<20, 6)
	run := func(t *testing.T, recover bool) {
		p, via := faultProxy(t)
		cc := newCounting(noKeepAlive())
		e := newEnv(t, via, &Options{PartSize: 5 << 20, MultipartThreshold: 5 << 20, Timeout: time.Second, MaxAttempts: 2, HTTPClient: cc})
		direct := directBucket(t, e)
		remove := removeOnce(t, p, "stall")
		if recover {
			// The stall ends when the first attempt gives up.
			cc.onFail = func(error) { remove() }
		}
		// The abort needs the network back (the fault has cleared).
		setHook(t, &testHook.abort, func(context.Context) { remove() })

		// The reader blocks before the first part: the upload exists
		// then, and the stall starts before any part is sent.
		r := newGated(data, 0)
		done := make(chan error, 1)
		go func() {
			_, err := e.b.PutReader(t.Context(), "stall/obj", r, int64(len(data)), nil)
			done <- err
		}()
		select {
		case <-r.reached:
		case err := <-done:
			t.Fatalf("Put ended before reading: %v", err)
		}
		addToxic(t, p, "stall", "timeout", "upstream", 1, toxiproxy.Attributes{"timeout": 0})
		close(r.release)
		var err error
		select {
		case err = <-done:
		case <-time.After(2 * time.Minute): // a hang is the failure this test exists for
			remove()
			t.Fatalf("Put did not return within 2 minutes of a stalled part (per-attempt timeout 1s)")
		}
		if recover {
			if err != nil {
				t.Errorf("Put after a stall that cleared: %v", err)
			}
			if cc.failed.Load() == 0 {
				t.Errorf("no attempt failed: the stall was not seen")
			}
			if !wholeOrAbsent(t, e, direct, "stall/obj", data, "after a cleared stall") {
				t.Errorf("object missing after a successful Put")
			}
			return
		}
		wantCode(t, err, blob.CodeTransient, "Put through a lasting stall")
		var te *attemptTimeoutError
		if !errors.As(err, &te) || !strings.Contains(err.Error(), "per-attempt timeout") {
			t.Errorf("Put through a lasting stall: %v; want the per-attempt timeout named", err)
		}
		if wholeOrAbsent(t, e, direct, "stall/obj", data, "after a lasting stall") {
			t.Errorf("the object exists although its parts stalled")
		}
	}
	t.Run("Cleared", func(t *testing.T) { run(t, true) })
	t.Run("Lasting", func(t *testing.T) { run(t, false) })
}

// TestFaultBandwidth: a slow link (a few MB/s each way) delays but does
// not break puts and reads.
func TestFaultBandwidth(t *testing.T) {
	p, via := faultProxy(t)
	e := newEnv(t, via, &Options{PartSize: 5 << 20, MultipartThreshold: 5 << 20})
	toxinet.Bandwidth(t, faultEnv(t, p, e), 8192, 11<<20)
}

// TestFaultTruncatedRead: a response body cut short is a transient read
// error, never a short object read as whole.
func TestFaultTruncatedRead(t *testing.T) {
	p, via := faultProxy(t)
	e := newEnv(t, via, &Options{HTTPClient: noKeepAlive()})
	data := payload(4<<20, 8)
	if _, err := e.b.Put(t.Context(), "trunc/obj", data, nil); err != nil {
		t.Fatal(err)
	}
	addToxic(t, p, "cut-down", "limit_data", "downstream", 1, toxiproxy.Attributes{"bytes": 1 << 20})
	got, err := e.b.ReadAll(t.Context(), "trunc/obj")
	if err == nil {
		t.Fatalf("ReadAll through a cut connection returned %d bytes and no error", len(got))
	}
	wantCode(t, err, blob.CodeTransient, "ReadAll through a cut connection")
	if strings.Contains(err.Error(), "trunc/obj") == false {
		t.Errorf("read error does not name the key: %v", err)
	}
}

// TestFaultProxyDown: a refused connection is transient, and the driver
// works again once the endpoint is back.
func TestFaultProxyDown(t *testing.T) {
	p, via := faultProxy(t)
	e := newEnv(t, via, &Options{MaxAttempts: 2})
	if _, err := e.b.Put(t.Context(), "down/k", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Disable(); err != nil {
		t.Fatal(err)
	}
	_, err := e.b.Stat(t.Context(), "down/k")
	wantCode(t, err, blob.CodeTransient, "Stat with the endpoint down")
	_, err = e.b.Put(t.Context(), "down/k2", bytes.Repeat([]byte("y"), 10), &blob.PutOptions{IfNotExist: true})
	wantCode(t, err, blob.CodeTransient, "Put with the endpoint down")
	if err := p.Enable(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.b.Stat(t.Context(), "down/k"); err != nil {
		t.Errorf("Stat after the endpoint came back: %v", err)
	}
}
