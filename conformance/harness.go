package conformance

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/redokit/redokit/blob"
)

// DefaultLargeObject is the size of the large round trip when
// Harness.LargeObject is 0: above every SDK's multipart threshold.
const DefaultLargeObject = 64 << 20

// DefaultTimeout bounds each subtest when Harness.Timeout is 0.
const DefaultTimeout = 2 * time.Minute

// defaultHangGrace is how long after its deadline a subtest may still run
// before the suite declares it hung.
const defaultHangGrace = 30 * time.Second

// Prefix is the key prefix of the Prefixed run's view.
const Prefix = "conformance-prefix/"

// siblings are the objects the Prefixed run writes outside Prefix through the
// unprefixed bucket. They share Prefix's leading bytes and sort just before
// ('-' < '/') and just after ('0' > '/') everything under it, so a driver that
// filters by prefix loosely, or pages past the end of a prefix, lists them.
// Neither is a "directory" of a key under the prefix.
var siblings = []string{"conformance-prefix-sibling", "conformance-prefix0"}

// TB is the part of *testing.T the suite uses, and what Harness.MakeBucket
// receives: the current subtest. *testing.T implements it; the package's own
// tests implement it with a recorder, to watch the suite fail on broken
// drivers without failing themselves.
type TB interface {
	Helper()
	Name() string
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Failed() bool
	Cleanup(func())
	TempDir() string
	Context() context.Context
}

// Harness describes the backend under test: how to make a bucket, and what the
// driver can do.
type Harness struct {
	// MakeBucket returns a new, empty bucket; it is called once per subtest,
	// with that subtest as t (use t.TempDir for a directory that is removed
	// afterwards, t.Cleanup for anything else to tear down). The suite closes
	// the bucket when the subtest ends. A bucket on a shared store can be a
	// fresh Prefixed view of it.
	MakeBucket func(ctx context.Context, t TB) (*blob.Bucket, error)

	// Append declares that the driver implements driver.Appender. It must
	// match the driver: the Append subtests check the capability and, when
	// declared, what it guarantees.
	Append bool

	// ConditionalWrites declares that Put honours PutOptions.IfNotExist and
	// PutOptions.IfMatch atomically. When false, ConditionalWritesReason must
	// say why; the conditional subtests are skipped with it, and conditional
	// Puts must be refused rather than applied.
	ConditionalWrites       bool
	ConditionalWritesReason string

	// ListSettle bounds how long a change may take to show in List on a
	// store whose listings lag; the blob suite polls its listings until
	// then, for its own timing of list-after-insert and of deletes. Zero, the
	// default, means read-after-write consistent listings, which is what
	// redokit requires: a store that needs ListSettle cannot hold a redo log,
	// and package conformance/redo refuses a harness that sets it. It never
	// relaxes reads (a read that lags a write fails ReadAfterWrite) nor a
	// check that something must not be listed. The polls count against
	// Timeout: a rule that settles n times on listings of p pages may take
	// n × (ListSettle + p × a page's latency), so raise Timeout with it
	// (the package doc has the figures).
	ListSettle time.Duration

	// LargeObject is the size in bytes of the large round trip and caps the
	// size of the Atomic subtests' objects. 0 means DefaultLargeObject. A
	// harness that lowers it (a slow emulator) must give LargeObjectReason.
	LargeObject       int64
	LargeObjectReason string

	// Timeout bounds each subtest (each rule of the package doc): its
	// context, which every driver call and MakeBucket get, ends Timeout
	// after it starts. A driver call that hangs then fails the subtest named
	// after the rule with a deadline error, instead of the whole test binary
	// running into go test's timeout. A subtest still running 30 seconds
	// after its deadline (a call that ignores its context cannot be
	// interrupted) fails, naming the rule, with a dump of every goroutine
	// in its log, and is abandoned: its goroutine is left running, and the
	// suite goes on with the next rule, so every later result is still
	// reported. 0 means DefaultTimeout; raise it for a slow store.
	Timeout time.Duration

	// hangGrace replaces the 30 seconds, and onHang is told of each
	// abandoned subtest, in the package's own tests.
	hangGrace time.Duration
	onHang    func(t TB, msg string)
}

// RunBucket runs the blob conformance suite against the buckets h makes: every
// subtest once on the bucket itself ("Plain") and once under Prefix
// ("Prefixed"). See the package documentation for what each subtest proves.
func RunBucket(t *testing.T, h Harness) {
	t.Helper()
	RunBucketOn(Std(t), h)
}

// RunBucketOn is RunBucket on any T: a [Recorder] runs the suite from a
// program, outside go test.
func RunBucketOn(t T, h Harness) {
	t.Helper()
	if h.MakeBucket == nil {
		t.Fatalf("conformance: Harness.MakeBucket is nil")
	}
	if !h.ConditionalWrites && h.ConditionalWritesReason == "" {
		t.Fatalf("conformance: Harness.ConditionalWrites is false but ConditionalWritesReason is empty: " +
			"say why the backend cannot do atomic conditional writes (redo fencing needs them), or set ConditionalWrites")
	}
	if h.LargeObject == 0 {
		h.LargeObject = DefaultLargeObject
	}
	if h.LargeObject < 0 {
		t.Fatalf("conformance: Harness.LargeObject is negative (%d)", h.LargeObject)
	}
	if h.LargeObject < DefaultLargeObject {
		if h.LargeObjectReason == "" {
			t.Fatalf("conformance: Harness.LargeObject (%d) is below %d but LargeObjectReason is empty: say why", h.LargeObject, DefaultLargeObject)
		}
		t.Logf("conformance: large objects are %d bytes, not %d: %s", h.LargeObject, DefaultLargeObject, h.LargeObjectReason)
	}
	if h.ListSettle < 0 {
		t.Fatalf("conformance: Harness.ListSettle is negative (%v)", h.ListSettle)
	}
	if h.ListSettle > 0 {
		t.Logf("conformance: listings are polled for up to Harness.ListSettle = %v: a store whose listings lag cannot hold a redo log "+
			"(redokit needs read-after-write consistent listings; package conformance/redo refuses this harness)", h.ListSettle)
	}
	if h.Timeout < 0 {
		t.Fatalf("conformance: Harness.Timeout is negative (%v)", h.Timeout)
	}
	if h.Timeout == 0 {
		h.Timeout = DefaultTimeout
	}
	t.Run("Plain", func(t T) { (&suite{h: h}).runAll(t) })
	t.Run("Prefixed", func(t T) { (&suite{h: h, prefixed: true}).runAll(t) })
}

// timedT is a subtest whose context ends at its rule's deadline. Its own
// subtests inherit the deadline.
type timedT struct {
	T
	ctx context.Context
}

func (t *timedT) Context() context.Context { return t.ctx }

func (t *timedT) Run(name string, f func(T)) bool {
	return t.T.Run(name, func(c T) {
		ctx := c.Context()
		if dl, ok := t.ctx.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, dl)
			defer cancel()
		}
		f(&timedT{T: c, ctx: ctx})
	})
}

// Subtest runs f as the subtest name of t the way the suite runs each of its
// rules, for suites built on a Harness (package conformance/redo): its
// context ends Harness.Timeout after it starts, a subtest that runs into
// that deadline says so, and one still running 30 seconds later is failed,
// naming it, and abandoned, so that the run goes on with the next rule (see
// Harness.Timeout). A panic in f fails the subtest too.
func (h Harness) Subtest(t T, name string, f func(T)) {
	s := &suite{h: h}
	t.Run(name, func(t T) {
		ctx, cancel := context.WithTimeout(t.Context(), s.timeout())
		defer cancel()
		// f runs on a goroutine of its own, behind a guard, so that this
		// one can give up on it: a driver call that ignores its context
		// cannot be interrupted, only left behind.
		g := &guard{T: t, state: &guardState{}}
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer func() {
				if p := recover(); p != nil {
					g.Errorf("panic: %v\n%s", p, debug.Stack())
				}
			}()
			f(&timedT{T: g, ctx: ctx})
		}()
		if !s.wait(ctx, done) {
			g.state.abandon()
			msg := fmt.Sprintf("conformance: subtest %s is still running %v after its deadline (Harness.Timeout = %v): a driver call ignores its context, or hangs; "+
				"the suite abandoned it (its goroutine is left running) and goes on", t.Name(), s.hangGrace(), s.timeout())
			t.Errorf("%s", msg)
			t.Logf("the goroutines when %s was abandoned:\n%s", t.Name(), stacks())
			if s.h.onHang != nil {
				s.h.onHang(t, msg)
			}
			return
		}
		if ctx.Err() == context.DeadlineExceeded && t.Failed() {
			t.Errorf("%s ran into its deadline (Harness.Timeout = %v): a driver call hung, or the store is slower than the harness allows", name, s.timeout())
		}
	})
}

// wait reports whether the subtest ended (done) by hangGrace after ctx's
// deadline.
func (s *suite) wait(ctx context.Context, done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	case <-ctx.Done():
	}
	timer := time.NewTimer(s.hangGrace())
	defer timer.Stop()
	select {
	case <-done:
		return true
	case <-timer.C:
		return false
	}
}

func (s *suite) hangGrace() time.Duration { return cmp.Or(s.h.hangGrace, defaultHangGrace) }

// guardState is shared by the guards of one rule's subtest and of every
// subtest below it.
type guardState struct {
	// mu is held for reading across every call into the T, and for
	// writing to abandon: once abandon returns, no call is under way and
	// none will reach the T, whose test may then end.
	mu        sync.RWMutex
	abandoned bool
}

func (g *guardState) abandon() {
	g.mu.Lock()
	g.abandoned = true
	g.mu.Unlock()
}

// guard is the T a rule's body sees. Until the rule is abandoned it passes
// every call on; after, the body is a goroutine left behind, and a T whose
// test has ended must not hear from it (testing panics on a log after the
// end, which would end the binary): its messages are dropped, and a call
// that would end or start a test (Fatalf, Skipf, Run, TempDir) blocks it
// for good.
type guard struct {
	T
	state *guardState
}

func (g *guard) Logf(format string, args ...any) {
	g.state.mu.RLock()
	defer g.state.mu.RUnlock()
	if !g.state.abandoned {
		g.T.Logf(format, args...)
	}
}

func (g *guard) Errorf(format string, args ...any) {
	g.state.mu.RLock()
	defer g.state.mu.RUnlock()
	if !g.state.abandoned {
		g.T.Errorf(format, args...)
	}
}

// Fatalf and Skipf end the calling goroutine (runtime.Goexit), which runs
// the deferred unlock.
func (g *guard) Fatalf(format string, args ...any) {
	g.state.mu.RLock()
	defer g.state.mu.RUnlock()
	if g.state.abandoned {
		blockForever()
	}
	g.T.Fatalf(format, args...)
}

func (g *guard) Skipf(format string, args ...any) {
	g.state.mu.RLock()
	defer g.state.mu.RUnlock()
	if g.state.abandoned {
		blockForever()
	}
	g.T.Skipf(format, args...)
}

func (g *guard) Cleanup(f func()) {
	g.state.mu.RLock()
	defer g.state.mu.RUnlock()
	if !g.state.abandoned {
		g.T.Cleanup(f)
	}
}

func (g *guard) TempDir() string {
	g.state.mu.RLock()
	if g.state.abandoned {
		g.state.mu.RUnlock()
		blockForever()
	}
	defer g.state.mu.RUnlock()
	return g.T.TempDir()
}

// Run runs a nested subtest, guarded by the same state. It does not hold
// the lock while the subtest runs: that is what may hang.
func (g *guard) Run(name string, f func(T)) bool {
	g.state.mu.RLock()
	abandoned := g.state.abandoned
	g.state.mu.RUnlock()
	if abandoned {
		blockForever()
	}
	return g.T.Run(name, func(c T) { f(&guard{T: c, state: g.state}) })
}

// blockForever parks an abandoned goroutine.
func blockForever() { select {} }

// stacks dumps every goroutine, at most 256 KiB of it.
func stacks() string {
	buf := make([]byte, 256<<10)
	return string(buf[:runtime.Stack(buf, true)])
}

// timeout is the deadline of each subtest (suites other than RunBucket do
// not fill in the harness's defaults).
func (s *suite) timeout() time.Duration { return cmp.Or(s.h.Timeout, DefaultTimeout) }
