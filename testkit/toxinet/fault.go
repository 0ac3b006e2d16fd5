package toxinet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/testkit/backendtest"
	"github.com/redokit/redokit/testkit/testenv"
)

// The fault tier the cloud backends share: a backend's bucket talks to its
// emulator through a toxiproxy proxy, faults are injected while it works,
// and a second bucket that talks to the emulator directly checks the
// invariant that matters for a redo log: an object is whole or absent, never
// partial, at every moment and after the fault clears. Durations are
// logged, never asserted. The faults only an SDK's own protocol has (a
// stalled chunk of a resumable upload, a reset between staged blocks) stay
// in the backend's tests, on the same Env.

// Env is one backend's bucket behind a toxiproxy proxy.
type Env struct {
	Proxy  *toxiproxy.Proxy
	Bucket *blob.Bucket // through the proxy
	Direct *blob.Bucket // straight to the emulator: the observer
	// After checks what the backend may leave besides the object (S3: no
	// multipart upload is left); nil when there is nothing.
	After func(t testing.TB, when string)
}

// FaultProxy returns the proxy name of the toxiproxy server at
// TOXIPROXY_ADDR, creating it (listen → upstream, host:port each) if the
// emulator script did not, with every toxic removed now and when t ends. A
// test without TOXIPROXY_ADDR skips, or fails under CI (testenv.Need).
func FaultProxy(t testing.TB, name, listen, upstream string) *toxiproxy.Proxy {
	t.Helper()
	addr := os.Getenv("TOXIPROXY_ADDR")
	if addr == "" {
		testenv.Need(t, "TOXIPROXY_ADDR is not set: start toxiproxy (scripts/emulators.sh) to run the fault tests")
	}
	tc := toxiproxy.NewClient(addr)
	if _, err := tc.Proxy(name); err != nil && listen != "" && upstream != "" {
		if _, err := tc.CreateProxy(name, listen, upstream); err != nil {
			t.Fatalf("toxiproxy at %s: no proxy %q and cannot create it: %v", addr, name, err)
		}
	}
	// From a clean proxy: a toxic an earlier test could not remove must
	// not stall this one.
	p, err := Proxy(t, addr, name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Toxic adds a toxic (toxicity 1) to p and returns its removal, which runs
// once, from any goroutine, and in any case when t ends.
func Toxic(t testing.TB, p *toxiproxy.Proxy, name, typ, stream string, attrs toxiproxy.Attributes) (remove func()) {
	t.Helper()
	if _, err := p.AddToxic(name, typ, stream, 1, attrs); err != nil {
		t.Fatalf("toxiproxy: add %s (%s %s): %v", name, typ, stream, err)
	}
	var once sync.Once
	remove = func() {
		once.Do(func() {
			if err := p.RemoveToxic(name); err != nil {
				t.Errorf("toxiproxy: remove %s: %v", name, err)
			}
		})
	}
	t.Cleanup(remove)
	return remove
}

// Toxic adds a toxic to the Env's proxy (see the function Toxic).
func (e *Env) Toxic(t testing.TB, name, typ, stream string, attrs toxiproxy.Attributes) func() {
	t.Helper()
	return Toxic(t, e.Proxy, name, typ, stream, attrs)
}

// Watcher polls an object through a direct bucket and records every
// observation that is neither absent nor exactly what is being written.
type Watcher struct {
	stop    chan struct{}
	done    chan struct{}
	looks   atomic.Int64
	present atomic.Int64
	mu      sync.Mutex
	bad     []string
}

// Watch polls key through b until Finish.
func Watch(b *blob.Bucket, key string, want []byte) *Watcher {
	w := &Watcher{stop: make(chan struct{}), done: make(chan struct{})}
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
				w.note(fmt.Sprintf("partial or wrong content: %d bytes, want %d", len(got), len(want)))
			default:
				w.present.Add(1)
			}
		}
	}()
	return w
}

func (w *Watcher) note(s string) {
	w.mu.Lock()
	if len(w.bad) < 10 {
		w.bad = append(w.bad, s)
	}
	w.mu.Unlock()
}

// Finish stops the watcher and fails the test if it saw what must never be
// visible.
func (w *Watcher) Finish(t testing.TB) {
	t.Helper()
	close(w.stop)
	<-w.done
	t.Logf("watcher: %d looks, %d saw the whole object", w.looks.Load(), w.present.Load())
	if len(w.bad) > 0 {
		t.Fatalf("the observer saw what must never be visible: %s", strings.Join(w.bad, "; "))
	}
}

// WholeOrAbsent checks through direct that after a Put of want that ended
// with err, key holds exactly want (always so when err is nil) or does not
// exist.
func WholeOrAbsent(t testing.TB, direct *blob.Bucket, key string, want []byte, err error) {
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

// UntilVisible calls then once direct shows key holding exactly data, or
// after 20 s; the channel is closed when it has. A lost-response test
// removes its cut with it: as soon as the Put's effect is there.
func UntilVisible(ctx context.Context, direct *blob.Bucket, key string, data []byte, then func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if got, err := direct.ReadAll(ctx, key); err == nil && bytes.Equal(got, data) {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		then()
	}()
	return done
}

func (e *Env) after(t testing.TB, when string) {
	t.Helper()
	if e.After != nil {
		e.After(t, when)
	}
}

// Latency: every operation works through added latency (150±50 ms down,
// 30 ms up): a conditional Put of each size, whole and ranged reads, a
// listing, a batch delete with a missing key.
func Latency(t testing.TB, e *Env, sizes ...int) {
	t.Helper()
	e.Toxic(t, "latency", "latency", "downstream", toxiproxy.Attributes{"latency": 150, "jitter": 50})
	e.Toxic(t, "latency-up", "latency", "upstream", toxiproxy.Attributes{"latency": 30})
	ctx := context.Background()
	keys := []string{"latency/missing"}
	for i, n := range sizes {
		key := fmt.Sprintf("latency/%d", n)
		keys = append(keys, key)
		data := backendtest.Pattern(n, byte(7+i))
		start := time.Now()
		if _, err := e.Bucket.Put(ctx, key, data, &blob.PutOptions{IfNotExist: true}); err != nil {
			t.Fatalf("put %d bytes with 150 ms latency: %v", n, err)
		}
		t.Logf("put %d bytes through 150±50 ms latency: %v", n, time.Since(start))
		got, err := e.Bucket.ReadAll(ctx, key)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read %d bytes back: %d bytes, %v", n, len(got), err)
		}
		got, err = e.Bucket.ReadRange(ctx, key, 10, int64(n-20))
		if err != nil || !bytes.Equal(got, data[10:n-10]) {
			t.Fatalf("ranged read: %d bytes, %v", len(got), err)
		}
	}
	listed := 0
	for _, err := range e.Bucket.List(ctx, "latency/") {
		if err != nil {
			t.Fatal(err)
		}
		listed++
	}
	if listed != len(sizes) {
		t.Fatalf("listed %d objects, want %d", listed, len(sizes))
	}
	if err := e.Bucket.Delete(ctx, keys...); err != nil {
		t.Fatal(err)
	}
	e.after(t, "after the latency test")
}

// Bandwidth: a slow link (rate KB/s each way) delays but does not break a
// Put of size bytes, which is whole or absent throughout, nor reading it
// back.
func Bandwidth(t testing.TB, e *Env, rate, size int) {
	t.Helper()
	e.Toxic(t, "bw-up", "bandwidth", "upstream", toxiproxy.Attributes{"rate": rate})
	e.Toxic(t, "bw-down", "bandwidth", "downstream", toxiproxy.Attributes{"rate": rate})
	ctx := context.Background()
	data := backendtest.Pattern(size, 6)
	w := Watch(e.Direct, "bw", data)
	start := time.Now()
	_, err := e.Bucket.Put(ctx, "bw", data, nil)
	el := time.Since(start)
	w.Finish(t)
	if err != nil {
		t.Fatalf("put through a slow link: %v", err)
	}
	t.Logf("put %d bytes through %d KB/s: %v (%.2f MB/s)", size, rate, el, float64(size)/el.Seconds()/1e6)
	start = time.Now()
	got, err := e.Bucket.ReadAll(ctx, "bw")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %d bytes, %v", len(got), err)
	}
	t.Logf("read %d bytes through %d KB/s: %v", size, rate, time.Since(start))
	e.after(t, "after the slow link")
}

// Midway is a fault that goes on part way through an upload, just before
// piece At (a chunk, a block: what the backend's hook counts), upstream,
// for Lasts.
type Midway struct {
	Toxic, Type string
	Attrs       toxiproxy.Attributes
	At          int64
	Lasts       time.Duration
}

// PutThrough creates key with data (IfNotExist) within deadline while the
// fault m goes on and off: arm installs the backend's hook, which calls its
// argument with n before the n-th piece. The object must be whole or absent
// at every moment and once the fault has cleared; the fault must fire. It
// returns how long the Put took and its error.
func (e *Env) PutThrough(t *testing.T, key string, data []byte, deadline time.Duration, m Midway, arm func(before func(n int64))) (time.Duration, error) {
	t.Helper()
	var fired atomic.Bool
	cleared := make(chan struct{})
	arm(func(n int64) {
		if n == m.At && fired.CompareAndSwap(false, true) {
			clear := e.Toxic(t, m.Toxic, m.Type, "upstream", m.Attrs)
			time.AfterFunc(m.Lasts, func() { clear(); close(cleared) })
		}
	})
	w := Watch(e.Direct, key, data)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	_, err := e.Bucket.Put(ctx, key, data, &blob.PutOptions{IfNotExist: true})
	took := time.Since(start)
	if !fired.Load() {
		t.Fatalf("the %s never fired: the upload had fewer than %d pieces", m.Toxic, m.At)
	}
	select {
	case <-cleared:
	case <-time.After(m.Lasts + 10*time.Second):
		t.Fatalf("the %s toxic was not removed", m.Toxic)
	}
	w.Finish(t)
	WholeOrAbsent(t, e.Direct, key, data, err)
	return took, err
}

// CreateAfterFault checks a conditional create of key that failed with err
// under a fault that has cleared: the failure is transient or a deadline,
// and the same create now succeeds, so the failed one committed nothing.
func (e *Env) CreateAfterFault(t testing.TB, key string, data []byte, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if !blob.IsTransient(err) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the failure is not classified as transient or a deadline: %v (%v)", err, blob.CodeOf(err))
	}
	if _, err := e.Bucket.Put(context.Background(), key, data, &blob.PutOptions{IfNotExist: true}); err != nil {
		t.Fatalf("after the fault cleared, the same create: %v", err)
	}
	WholeOrAbsent(t, e.Direct, key, data, nil)
}

// Existing writes a first version of key and returns its ETag, for an
// IfMatch Put. It is written directly, not through the proxy: a connection
// the proxy opened before a cut toxic may carry the faulted Put's response
// past it (toxiproxy updates a live link's toxics asynchronously), and then
// the Put succeeds in one request and the test proves nothing.
func (e *Env) Existing(t testing.TB, key string) string {
	t.Helper()
	a, err := e.Direct.Put(context.Background(), key, []byte("v1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return a.ETag
}

// LostResponse runs a Put of data at key with opts whose completing
// response the caller's cut toxic drops after the service applied it;
// remove takes the cut away, once the new content is visible. The Put's
// own retry must find its effect and report success, the object be whole,
// and the Put send at least least requests (as requests counts them), else
// the cut was never met and the test proved nothing.
func (e *Env) LostResponse(t testing.TB, key string, data []byte, opts *blob.PutOptions, remove func(), requests func() int64, least int64) {
	t.Helper()
	if !e.TryLostResponse(t, key, data, opts, remove, requests, least) {
		t.Fatalf("the cut response was not retried, so the test proved nothing")
	}
}

// TryLostResponse is LostResponse, but reports instead of failing when the
// cut came too late to catch the response (the toxic is installed when the
// request is seen, and a fast server may answer first): fewer than least
// requests. The caller tries again with a fresh cut, and fails when no try
// proves anything.
func (e *Env) TryLostResponse(t testing.TB, key string, data []byte, opts *blob.PutOptions, remove func(), requests func() int64, least int64) (proved bool) {
	t.Helper()
	ctx := context.Background()
	done := UntilVisible(ctx, e.Direct, key, data, remove)
	r0 := requests()
	_, err := e.Bucket.Put(ctx, key, data, opts)
	<-done
	reqs := requests() - r0
	t.Logf("%d requests for the Put", reqs)
	if err != nil {
		t.Fatalf("the Put's own retry was reported as a failure: %v", err)
	}
	WholeOrAbsent(t, e.Direct, key, data, nil)
	if reqs < least {
		t.Logf("only %d requests: the cut came after the response, so this try proved nothing", reqs)
		return false
	}
	return true
}

// Cut drops every response (a limit_data toxic of 0 bytes, downstream) from
// the moment On is first called, from any goroutine, until Off.
type Cut struct {
	e      *Env
	t      testing.TB
	once   sync.Once
	mu     sync.Mutex
	remove func()
}

// Cut returns a cut, not yet on.
func (e *Env) Cut(t testing.TB) *Cut { return &Cut{e: e, t: t} }

// On puts the cut on, the first time it is called.
func (c *Cut) On() {
	c.once.Do(func() {
		rm := c.e.Toxic(c.t, "cut", "limit_data", "downstream", toxiproxy.Attributes{"bytes": 0})
		c.mu.Lock()
		c.remove = rm
		c.mu.Unlock()
	})
}

// Off takes the cut away, if it was put on.
func (c *Cut) Off() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.remove != nil {
		c.remove()
	}
}
