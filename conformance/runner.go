package conformance

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// T is a test that runs subtests: what the suites run on. [Std] adapts a
// *testing.T; a [Recorder] is a T that a program (redokit check) or a test
// that wants to watch the suite fail (this package's own) runs the suites on.
// Like testing, Fatalf and Skipf end only the current subtest, and Run
// returns when the subtest and its cleanups are done.
type T interface {
	TB
	Run(name string, f func(T)) bool
}

// Std adapts a *testing.T to T.
func Std(t *testing.T) T { return stdT{t} }

type stdT struct{ *testing.T }

func (s stdT) Run(name string, f func(T)) bool {
	return s.T.Run(name, func(t *testing.T) { f(stdT{t}) })
}

// A Recorder runs a suite outside go test and remembers, by full subtest
// name ("Plain/Atomic/CanceledNew"), what each subtest did. Subtests run on
// the goroutine that calls Run, one at a time, each body on a goroutine of
// its own (so that Fatalf can end it with runtime.Goexit, as testing does);
// a panic in a subtest fails that subtest. Logs are kept, not printed.
type Recorder struct {
	// OnEnd, when set, is called as each subtest ends (after its cleanups),
	// innermost first, so that a program can print results as they come.
	OnEnd func(Result)

	mu      sync.Mutex
	results map[string]*Result
	order   []string
}

// Result is what one subtest did.
type Result struct {
	Name            string
	Failed, Skipped bool
	Errors          []string // the messages of Errorf and Fatalf, and why it was skipped
	Logs            []string
	Elapsed         time.Duration
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{results: map[string]*Result{}} }

// Run runs f as the root test (named "") and returns when it and all its
// subtests are done.
func (r *Recorder) Run(f func(T)) {
	r.newT("").runBody(f)
}

// Failed lists the names of the subtests that failed, sorted.
func (r *Recorder) Failed() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for name, res := range r.results {
		if res.Failed && name != "" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Get returns the result of the subtest name, or nil if it never ran.
func (r *Recorder) Get(name string) *Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.results[name]
}

// Results returns every subtest's result in the order they started, the root
// ("") first.
func (r *Recorder) Results() []Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Result, len(r.order))
	for i, n := range r.order {
		out[i] = *r.results[n]
		out[i].Errors = slices.Clone(out[i].Errors)
		out[i].Logs = slices.Clone(out[i].Logs)
	}
	return out
}

// Messages returns the failure messages of name and its subtests, each
// prefixed with its subtest's name.
func (r *Recorder) Messages(name string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for n := range r.results {
		if n == name || name == "" || strings.HasPrefix(n, name+"/") {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var out []string
	for _, n := range names {
		if res := r.results[n]; res.Failed {
			for _, m := range res.Errors {
				out = append(out, n+": "+m)
			}
		}
	}
	return out
}

// Expect reports to t, for each of the suite's modes (Plain and Prefixed),
// every subtest of mustFail that passed or did not run and every subtest of
// mustPass that failed: how a test proves that the suite catches a broken
// driver, and only for the rule it breaks.
func (r *Recorder) Expect(t TB, mustFail, mustPass []string) {
	t.Helper()
	for _, mode := range []string{"Plain", "Prefixed"} {
		for _, name := range mustFail {
			full := mode + "/" + name
			switch res := r.Get(full); {
			case res == nil:
				t.Errorf("%s did not run", full)
			case !res.Failed:
				t.Errorf("%s passed; it must catch this driver", full)
			case mode == "Plain":
				t.Logf("caught by %s: %s", full, r.Messages(full)[0])
			}
		}
		for _, name := range mustPass {
			full := mode + "/" + name
			if res := r.Get(full); res == nil || res.Failed {
				t.Errorf("%s failed (or did not run); this driver does not break its rule:\n%s", full, strings.Join(r.Messages(full), "\n"))
			}
		}
	}
	if t.Failed() {
		t.Logf("every failed subtest: %v", r.Failed())
	}
}

// recT is the Recorder's T.
type recT struct {
	rec    *Recorder
	name   string
	res    *Result
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	cleanups []func()
}

func (r *Recorder) newT(name string) *recT {
	ctx, cancel := context.WithCancel(context.Background())
	res := &Result{Name: name}
	r.mu.Lock()
	r.results[name] = res
	r.order = append(r.order, name)
	r.mu.Unlock()
	return &recT{rec: r, name: name, res: res, ctx: ctx, cancel: cancel}
}

func (f *recT) Helper()                  {}
func (f *recT) Name() string             { return f.name }
func (f *recT) Context() context.Context { return f.ctx }

func (f *recT) Logf(format string, args ...any) {
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	f.res.Logs = append(f.res.Logs, fmt.Sprintf(format, args...))
}

func (f *recT) Errorf(format string, args ...any) {
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	f.res.Failed = true
	f.res.Errors = append(f.res.Errors, fmt.Sprintf(format, args...))
}

func (f *recT) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	runtime.Goexit()
}

func (f *recT) Skipf(format string, args ...any) {
	f.rec.mu.Lock()
	f.res.Skipped = true
	f.res.Errors = append(f.res.Errors, fmt.Sprintf(format, args...))
	f.rec.mu.Unlock()
	runtime.Goexit()
}

func (f *recT) Failed() bool {
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	return f.res.Failed
}

func (f *recT) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}

func (f *recT) TempDir() string {
	dir, err := os.MkdirTemp("", "conformance-")
	if err != nil {
		f.Fatalf("TempDir: %v", err)
	}
	f.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (f *recT) Run(name string, fn func(T)) bool {
	full := name
	if f.name != "" {
		full = f.name + "/" + name
	}
	c := f.rec.newT(full)
	c.runBody(fn)
	if c.Failed() {
		f.rec.mu.Lock()
		f.res.Failed = true
		f.rec.mu.Unlock()
	}
	return !c.Failed()
}

// runBody runs fn on its own goroutine, as testing does, so that Goexit ends
// only this test; a panic is recorded as a failure.
func (f *recT) runBody(fn func(T)) {
	start := time.Now()
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
	f.rec.mu.Lock()
	f.res.Elapsed = time.Since(start)
	res := *f.res
	f.rec.mu.Unlock()
	if f.rec.OnEnd != nil {
		f.rec.OnEnd(res)
	}
}

// finish cancels the context and runs the cleanups, last first, each on its
// own goroutine so a Fatalf in one does not skip the rest.
func (f *recT) finish() {
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
