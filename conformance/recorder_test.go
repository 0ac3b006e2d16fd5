package conformance

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// recorder runs the suite on fake tests and remembers, by full subtest name,
// which failed and why, so that a test can assert that a broken driver fails
// a given subtest without failing itself.
type recorder struct {
	mu      sync.Mutex
	results map[string]*result
}

type result struct {
	failed, skipped bool
	msgs            []string
}

func newRecorder() *recorder { return &recorder{results: map[string]*result{}} }

// run runs f as the root fake test and returns when it and all its subtests
// are done.
func (r *recorder) run(f func(suiteT)) {
	root := r.newT("")
	root.runBody(f)
}

// failed lists the names of the subtests that failed, sorted.
func (r *recorder) failed() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for name, res := range r.results {
		if res.failed && name != "" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// get returns the result of the subtest name (nil if it never ran).
func (r *recorder) get(name string) *result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.results[name]
}

// messages returns the failure messages of name and its subtests.
func (r *recorder) messages(name string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for n := range r.results {
		if n == name || strings.HasPrefix(n, name+"/") {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var out []string
	for _, n := range names {
		for _, m := range r.results[n].msgs {
			out = append(out, n+": "+m)
		}
	}
	return out
}

// fakeT is a suiteT that records instead of reporting. Like testing.T,
// Fatalf and Skipf end the (sub)test's goroutine with runtime.Goexit, a
// failed subtest fails its parent, and cleanups run last-in first-out after
// the context is canceled.
type fakeT struct {
	rec    *recorder
	name   string
	res    *result
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	cleanups []func()
}

func (r *recorder) newT(name string) *fakeT {
	ctx, cancel := context.WithCancel(context.Background())
	res := &result{}
	r.mu.Lock()
	r.results[name] = res
	r.mu.Unlock()
	return &fakeT{rec: r, name: name, res: res, ctx: ctx, cancel: cancel}
}

func (f *fakeT) Helper()                  {}
func (f *fakeT) Name() string             { return f.name }
func (f *fakeT) Context() context.Context { return f.ctx }

func (f *fakeT) Logf(format string, args ...any) {}

func (f *fakeT) Errorf(format string, args ...any) {
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	f.res.failed = true
	f.res.msgs = append(f.res.msgs, fmt.Sprintf(format, args...))
}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	runtime.Goexit()
}

func (f *fakeT) Skipf(format string, args ...any) {
	f.rec.mu.Lock()
	f.res.skipped = true
	f.rec.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeT) Failed() bool {
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	return f.res.failed
}

func (f *fakeT) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}

func (f *fakeT) TempDir() string {
	dir, err := os.MkdirTemp("", "conformance-recorder-")
	if err != nil {
		f.Fatalf("TempDir: %v", err)
	}
	f.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (f *fakeT) Run(name string, fn func(suiteT)) bool {
	full := name
	if f.name != "" {
		full = f.name + "/" + name
	}
	c := f.rec.newT(full)
	c.runBody(fn)
	if c.Failed() {
		f.rec.mu.Lock()
		f.res.failed = true
		f.rec.mu.Unlock()
	}
	return !c.Failed()
}

// runBody runs fn on its own goroutine, as testing does, so that Goexit ends
// only this test; a panic is recorded as a failure.
func (f *fakeT) runBody(fn func(suiteT)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer f.finish()
		defer func() {
			if p := recover(); p != nil {
				f.Errorf("panic: %v", p)
			}
		}()
		fn(f)
	}()
	<-done
}

// finish cancels the context and runs the cleanups, last first, each on its
// own goroutine so a Fatalf in one does not skip the rest.
func (f *fakeT) finish() {
	f.cancel()
	f.mu.Lock()
	cleanups := f.cleanups
	f.cleanups = nil
	f.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		done := make(chan struct{})
		go func() {
			defer close(done)
			cleanups[i]()
		}()
		<-done
	}
}
