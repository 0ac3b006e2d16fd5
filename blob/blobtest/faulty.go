// Package blobtest holds test doubles for code that stores through package
// blob. Its Faulty driver wraps a real driver and injects faults: it fails
// chosen calls, delays or blocks them, counts calls by operation, and
// simulates a crash that drops every appended byte that was not synced.
//
// It is a wrapper with the same interface, not a mock: every call that is not
// made to fail reaches the wrapped driver, so the behaviour under test is the
// real backend's.
//
//	f := blobtest.NewFaulty(drv)
//	f.FailNth(blobtest.OpSync, 2, nil) // the second Sync fails
//	release := f.Block(blobtest.OpPut) // every Put waits...
//	release()                          // ...until now
//	f.Crash()                          // unsynced appends are gone
//	b := f.Bucket()                    // a Bucket over the wrapper
//
// Two more adversaries are seeded and replayable: every decision is a
// function of the seed, the operation, the key and how many calls came
// before, so a schedule replays the same way whatever the goroutines do.
// Liar loses the answers of writes it stored, refuses, delays and reorders
// them, and in a Broken mode breaks the store's contract. Stale serves
// older versions of a log's metadata objects (the meta object and the
// writer states): for a window of calls, a stat and a read answer one
// version the store held before, consistently (its old ETag with its old
// body, as a restored object version or a lagging replica does) or torn
// (the current ETag with an old body). It remembers every version it saw
// written or read, and may go back to any of them:
//
//	st := blobtest.NewStale(drv, blobtest.StaleSchedule{Seed: 7, Start: 0.1, Calls: 6, Torn: 0.3})
//	st.SetServing(false) // the newest version from now on
//
// A Liar puts one under itself with Schedule.Stale (an honest fault that
// SetLying(false) turns off) or Broken: BrokenStale (it stays on).
package blobtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/driver"
)

// Op names a driver operation, for rules and counts.
type Op string

// The operations Faulty sees.
const (
	OpPut        Op = "put"
	OpRead       Op = "read" // NewRangeReader
	OpStat       Op = "stat"
	OpList       Op = "list"
	OpDelete     Op = "delete"
	OpOpenAppend Op = "open-append"
	OpWrite      Op = "append-write" // AppendFile.Write
	OpSync       Op = "sync"         // AppendFile.Sync
	OpTruncate   Op = "truncate"     // AppendFile.Truncate
	OpSeal       Op = "seal"         // AppendFile.Seal
	OpWriteback  Op = "writeback"    // AppendFile.StartWriteback (driver.WritebackStarter)
)

// ErrInjected is the error a rule returns when it names none. Faulty
// classifies it as blob.CodeTransient, the code of a failure worth retrying.
var ErrInjected = errors.New("blobtest: injected fault")

// ErrCrashed is returned by every call after Crash: the simulated process is
// dead.
var ErrCrashed = errors.New("blobtest: driver crashed")

// Call describes one driver call, for a rule's Match.
type Call struct {
	Op  Op
	Key string // the key (the list prefix for OpList; the first key for OpDelete)
	N   int    // 1-based count of calls of this Op on the driver so far, this one included
}

// Rule is a fault. A call matches when Op is empty or equal to the call's,
// and Match is nil or returns true. Of the matching calls, the rule fires on
// the Nth only (1-based, counted from when the rule was added), or on every
// one when Nth is 0. A firing rule first waits (Delay, then until Wait is
// closed), then fails the call with Err unless Err and Fail are both unset.
// An OpWrite that fails with Partial set first writes half its bytes, as a
// torn write does. An OpSync that fails with Drop set loses what a kernel
// may lose when writeback fails: of the 4 KiB pages (by file offset) after
// the one the last successful Sync ended in, every other one reads as zeros
// from then on, starting with the first (the pages were dropped, and the
// disk never had them); the file's length is unchanged. The page of the
// sync point is kept, so that what follows it starts well and only a
// checksum can tell.
type Rule struct {
	Op      Op
	Match   func(Call) bool
	Nth     int
	Delay   time.Duration
	Wait    <-chan struct{}
	Err     error // the error; nil with Fail means ErrInjected
	Fail    bool  // fail even though Err is nil
	Partial bool
	Drop    bool
}

type rule struct {
	Rule
	seen int
}

// Faulty is a driver.Driver that wraps another and injects the faults its rules
// describe. Its Appender capability is the wrapped driver's: use Driver or
// Bucket to get a value that has OpenAppend exactly when the wrapped driver
// does. It is safe for concurrent use.
type Faulty struct {
	inner  driver.Driver
	mu     sync.Mutex
	rules  []*rule
	counts map[Op]int
	// files are the append files opened through the wrapper that are not
	// sealed, by key, with what is known durable of each.
	files   map[string]*fileState
	crashed bool
	// inflight counts the calls that passed the crash check and may still
	// change the store or files; Crash waits on idle until it is zero, so
	// every such call takes effect wholly before the crash, and every later
	// one fails.
	inflight int
	idle     *sync.Cond
	// dying is canceled when Crash begins: the contexts of calls in flight
	// end, as a dying process's requests do, so none can hold Crash up.
	dying     context.Context
	kill      context.CancelFunc
	crashDone chan struct{} // closed when Crash has finished
}

// fileState is the durable state of one appended key.
type fileState struct {
	open   *faultyFile // nil once closed without sealing
	synced int64       // bytes known durable: the size at the last successful Sync or Truncate
}

var _ driver.Driver = (*Faulty)(nil)

// NewFaulty wraps inner. With no rules it passes every call through.
func NewFaulty(inner driver.Driver) *Faulty {
	f := &Faulty{inner: inner, counts: map[Op]int{}, files: map[string]*fileState{}, crashDone: make(chan struct{})}
	f.idle = sync.NewCond(&f.mu)
	f.dying, f.kill = context.WithCancel(context.Background())
	return f
}

// Driver returns the wrapper as a driver that implements driver.Appender when
// the wrapped driver does.
func (f *Faulty) Driver() driver.Driver {
	if _, ok := f.inner.(driver.Appender); ok {
		return appending{f}
	}
	return f
}

// Bucket returns a new Bucket over Driver(). Closing it closes the wrapped
// driver.
func (f *Faulty) Bucket() *blob.Bucket { return blob.NewBucket(f.Driver()) }

// Inner returns the wrapped driver.
func (f *Faulty) Inner() driver.Driver { return f.inner }

// Add installs a rule and returns a function that removes it.
func (f *Faulty) Add(r Rule) (remove func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rr := &rule{Rule: r}
	f.rules = append(f.rules, rr)
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, x := range f.rules {
			if x == rr {
				f.rules = append(f.rules[:i], f.rules[i+1:]...)
				return
			}
		}
	}
}

// FailNth makes the nth call of op from now on fail with err (ErrInjected
// when nil).
func (f *Faulty) FailNth(op Op, n int, err error) (remove func()) {
	if n < 1 {
		panic(fmt.Sprintf("blobtest: FailNth(%s, %d): n must be at least 1", op, n))
	}
	return f.Add(Rule{Op: op, Nth: n, Err: err, Fail: true})
}

// FailWhen makes every call of op (any op when empty) for which match returns
// true (every call when nil) fail with err (ErrInjected when nil), until
// removed.
func (f *Faulty) FailWhen(op Op, match func(Call) bool, err error) (remove func()) {
	return f.Add(Rule{Op: op, Match: match, Err: err, Fail: true})
}

// Delay makes every call of op wait d before it proceeds, until removed.
func (f *Faulty) Delay(op Op, d time.Duration) (remove func()) {
	return f.Add(Rule{Op: op, Delay: d})
}

// Block makes every call of op wait (a Put also until its ctx ends) until
// release is called; release removes the rule and frees the waiting calls. It
// is safe to call release more than once.
func (f *Faulty) Block(op Op) (release func()) {
	ch := make(chan struct{})
	remove := f.Add(Rule{Op: op, Wait: ch})
	var once sync.Once
	return func() {
		once.Do(func() {
			remove()
			close(ch)
		})
	}
}

// Count returns how many calls of op the driver has seen, failed ones
// included.
func (f *Faulty) Count(op Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[op]
}

// Counts returns a copy of the call counts by operation.
func (f *Faulty) Counts() map[Op]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[Op]int, len(f.counts))
	for k, v := range f.counts {
		out[k] = v
	}
	return out
}

// Crash simulates the death of the process and the loss of the page cache:
// every append file opened through the wrapper that is not sealed, open or
// closed, is cut to the size it had at its last successful Sync (or Truncate),
// and closed. From then on every call on the wrapper or its files fails with
// ErrCrashed. Objects written by Put and sealed files are left alone: the
// driver made them durable before it acknowledged them.
//
// A call that changes something (Put, Delete, OpenAppend and every call on
// an append file but Size) and is concurrent with Crash either takes effect
// wholly before the crash, a Sync's bytes surviving it, or fails with
// ErrCrashed and changes nothing: Crash first stops new calls, then cancels
// the contexts of those in flight and waits for them to return, and only
// then cuts the files. So a Sync that returned nil is never undone, and
// nothing changes after Crash returns. A call still waiting on a rule (a
// Block, a Delay) is not in flight: it fails when it wakes. A concurrent
// second Crash waits for the first and returns nil.
func (f *Faulty) Crash() error {
	f.mu.Lock()
	if f.crashed {
		f.mu.Unlock()
		<-f.crashDone
		return nil
	}
	defer close(f.crashDone)
	f.crashed = true
	f.kill()
	for f.inflight > 0 {
		if testHookCrashWaits != nil {
			testHookCrashWaits()
		}
		f.idle.Wait()
	}
	files := f.files
	f.files = map[string]*fileState{}
	f.mu.Unlock()
	var errs []error
	for key, st := range files {
		af := st.open
		if af == nil {
			// Closed without sealing: open it again to cut it.
			ap, ok := f.inner.(driver.Appender)
			if !ok {
				continue
			}
			inner, err := ap.OpenAppend(context.Background(), key)
			if err != nil {
				errs = append(errs, fmt.Errorf("blobtest: crash: reopen %q: %w", key, err))
				continue
			}
			af = &faultyFile{inner: inner}
		}
		af.mu.Lock()
		inner := af.inner
		af.dead = true
		af.mu.Unlock()
		if inner.Size() > st.synced {
			if err := inner.Truncate(st.synced); err != nil {
				errs = append(errs, fmt.Errorf("blobtest: crash: truncate %q to %d: %w", key, st.synced, err))
			}
		}
		if err := inner.Close(); err != nil {
			errs = append(errs, fmt.Errorf("blobtest: crash: close %q: %w", key, err))
		}
	}
	return errors.Join(errs...)
}

// Crashed reports whether Crash has been called.
func (f *Faulty) Crashed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.crashed
}

// SyncedSize returns the size of key at its last successful Sync through the
// wrapper, and whether the wrapper tracks the key (an unsealed append file).
func (f *Faulty) SyncedSize(key string) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.files[key]
	if !ok {
		return 0, false
	}
	return st.synced, true
}

// Test hooks, called at the points where a call and a concurrent Crash used
// to race.
var (
	testHookPutChecked func(key string) // a Put past its checks, before the wrapped Put
	testHookSynced     func(key string) // a Sync done, before its size is recorded
	testHookCrashWaits func()           // Crash about to wait for calls in flight (f.mu held)
)

// begin admits a call that may change the store: it fails with ErrCrashed
// once Crash has begun, and otherwise counts the call in flight until the
// returned end is called.
func (f *Faulty) begin() (end func(), err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.crashed {
		return nil, ErrCrashed
	}
	f.inflight++
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.inflight--; f.inflight == 0 {
			f.idle.Broadcast()
		}
	}, nil
}

// beginCtx is begin for a call with a context: the returned context also
// ends when Crash begins, and its cause is then ErrCrashed.
func (f *Faulty) beginCtx(ctx context.Context) (context.Context, func(), error) {
	end, err := f.begin()
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(f.dying, func() { cancel(ErrCrashed) })
	return ctx, func() {
		stop()
		cancel(nil)
		end()
	}, nil
}

// crashErr returns err, marked with ErrCrashed when the crash interrupted
// the call that returned it.
func crashErr(ctx context.Context, err error) error {
	if err != nil && context.Cause(ctx) == ErrCrashed && !errors.Is(err, ErrCrashed) {
		return fmt.Errorf("%w: %w", ErrCrashed, err)
	}
	return err
}

// fault is what the rules decided for one call.
type fault struct {
	delay   time.Duration
	waits   []<-chan struct{}
	err     error
	partial bool
	drop    bool
}

// enter counts a call and evaluates the rules for it.
func (f *Faulty) enter(op Op, key string) (fault, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.crashed {
		return fault{}, ErrCrashed
	}
	f.counts[op]++
	c := Call{Op: op, Key: key, N: f.counts[op]}
	var ft fault
	for _, r := range f.rules {
		if r.Op != "" && r.Op != op {
			continue
		}
		if r.Match != nil && !r.Match(c) {
			continue
		}
		r.seen++
		if r.Nth != 0 && r.seen != r.Nth {
			continue
		}
		ft.delay += r.Delay
		if r.Wait != nil {
			ft.waits = append(ft.waits, r.Wait)
		}
		if ft.err == nil && (r.Err != nil || r.Fail) {
			ft.err = r.Err
			if ft.err == nil {
				ft.err = ErrInjected
			}
			ft.partial, ft.drop = r.Partial, r.Drop
		}
	}
	return ft, nil
}

// wait applies a fault's delay and waits, until ctx ends. An AppendFile's
// Write, Sync and Truncate have no context of their own; they pass
// context.Background, whose Done is nil, and wait without a deadline.
func (ft *fault) wait(ctx context.Context) error {
	done := ctx.Done()
	if ft.delay > 0 {
		t := time.NewTimer(ft.delay)
		select {
		case <-t.C:
		case <-done:
			t.Stop()
			return ctx.Err()
		}
	}
	for _, w := range ft.waits {
		select {
		case <-w:
		case <-done:
			return ctx.Err()
		}
	}
	return nil
}

// before runs the rules for a call that has a context.
func (f *Faulty) before(ctx context.Context, op Op, key string) error {
	ft, err := f.enter(op, key)
	if err != nil {
		return err
	}
	if err := ft.wait(ctx); err != nil {
		return err
	}
	return ft.err
}

// Put implements driver.Driver.
func (f *Faulty) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	if err := f.before(ctx, OpPut, key); err != nil {
		return blob.Attrs{}, err
	}
	ctx, end, err := f.beginCtx(ctx)
	if err != nil {
		return blob.Attrs{}, err
	}
	defer end()
	if testHookPutChecked != nil {
		testHookPutChecked(key)
	}
	a, err := f.inner.Put(ctx, key, r, size, opts)
	return a, crashErr(ctx, err)
}

// StagesPuts implements driver.Stager for the wrapped driver: Put passes
// PutOptions.BeforeCommit through to a driver that calls it.
func (f *Faulty) StagesPuts() bool {
	st, ok := f.inner.(driver.Stager)
	return ok && st.StagesPuts()
}

// NewRangeReader implements driver.Driver.
func (f *Faulty) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := f.before(ctx, OpRead, key); err != nil {
		return nil, err
	}
	return f.inner.NewRangeReader(ctx, key, offset, length)
}

// Stat implements driver.Driver.
func (f *Faulty) Stat(ctx context.Context, key string) (blob.Attrs, error) {
	if err := f.before(ctx, OpStat, key); err != nil {
		return blob.Attrs{}, err
	}
	return f.inner.Stat(ctx, key)
}

// List implements driver.Driver.
func (f *Faulty) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	if err := f.before(ctx, OpList, opts.Prefix); err != nil {
		return blob.ListPage{}, err
	}
	return f.inner.List(ctx, opts)
}

// Delete implements driver.Driver.
func (f *Faulty) Delete(ctx context.Context, keys []string) error {
	first := ""
	if len(keys) > 0 {
		first = keys[0]
	}
	if err := f.before(ctx, OpDelete, first); err != nil {
		return err
	}
	ctx, end, err := f.beginCtx(ctx)
	if err != nil {
		return err
	}
	defer end()
	if err := f.inner.Delete(ctx, keys); err != nil {
		return crashErr(ctx, err)
	}
	f.mu.Lock()
	for _, k := range keys {
		if st, ok := f.files[k]; ok && st.open == nil {
			delete(f.files, k)
		}
	}
	f.mu.Unlock()
	return nil
}

// ErrorCode implements driver.Driver: injected faults are transient, a crash
// is unknown, the rest is the wrapped driver's call.
func (f *Faulty) ErrorCode(err error) blob.Code {
	switch {
	case errors.Is(err, ErrInjected):
		return blob.CodeTransient
	case errors.Is(err, ErrCrashed):
		return blob.CodeUnknown
	}
	return f.inner.ErrorCode(err)
}

// Close implements driver.Driver.
func (f *Faulty) Close() error { return f.inner.Close() }

// appending is the wrapper with the Appender capability.
type appending struct{ *Faulty }

var _ driver.Appender = appending{}

// OpenAppend implements driver.Appender.
func (a appending) OpenAppend(ctx context.Context, key string) (blob.AppendFile, error) {
	f := a.Faulty
	if err := f.before(ctx, OpOpenAppend, key); err != nil {
		return nil, err
	}
	ctx, end, err := f.beginCtx(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	inner, err := f.inner.(driver.Appender).OpenAppend(ctx, key)
	if err != nil {
		return nil, crashErr(ctx, err)
	}
	af := &faultyFile{f: f, key: key, inner: inner}
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.files[key]
	if !ok {
		// What the file held when it was opened survived whatever came
		// before: count it as durable.
		st = &fileState{synced: inner.Size()}
		f.files[key] = st
	}
	st.open = af
	return af, nil
}

// faultyFile wraps an AppendFile. Every call that changes it is in flight
// (Faulty.begin) for its whole effect, so Crash, which waits for those,
// never cuts a file in the middle of one; its mutex guards dead.
type faultyFile struct {
	f     *Faulty
	key   string
	mu    sync.Mutex
	inner blob.AppendFile
	dead  bool // the process crashed
}

// start begins a call of op on the file: the fault its rules give it,
// once waited for, with the call counted in flight (Crash waits for it) and
// the file locked, alive, until done.
func (a *faultyFile) start(op Op) (ft fault, done func(), err error) {
	ft, err = a.f.enter(op, a.key)
	if err != nil {
		return fault{}, nil, err
	}
	if err := ft.wait(context.Background()); err != nil {
		return fault{}, nil, err
	}
	end, err := a.f.begin()
	if err != nil {
		return fault{}, nil, err
	}
	a.mu.Lock()
	done = func() {
		a.mu.Unlock()
		end()
	}
	if a.dead {
		done()
		return fault{}, nil, ErrCrashed
	}
	return ft, done, nil
}

func (a *faultyFile) Write(p []byte) (int, error) {
	ft, done, err := a.start(OpWrite)
	if err != nil {
		return 0, err
	}
	defer done()
	if ft.err != nil {
		if ft.partial && len(p) > 1 {
			n, _ := a.inner.Write(p[:len(p)/2])
			return n, ft.err
		}
		return 0, ft.err
	}
	return a.inner.Write(p)
}

// StartWriteback passes the hint to the wrapped file when it takes it
// (driver.WritebackStarter). A rule can fail or delay it like any call: a
// hint that fails must cost its caller nothing but the hint.
func (a *faultyFile) StartWriteback(off, n int64) error {
	ft, done, err := a.start(OpWriteback)
	if err != nil {
		return err
	}
	defer done()
	if ft.err != nil {
		return ft.err
	}
	if ws, ok := a.inner.(driver.WritebackStarter); ok {
		return ws.StartWriteback(off, n)
	}
	return nil
}

func (a *faultyFile) Size() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.inner.Size()
}

func (a *faultyFile) Sync() error {
	ft, done, err := a.start(OpSync)
	if err != nil {
		return err
	}
	defer done()
	if ft.err != nil {
		// A failed fsync promises nothing about the bytes it covered.
		if ft.drop {
			if err := a.dropUnsynced(); err != nil {
				return errors.Join(ft.err, err)
			}
		}
		return ft.err
	}
	size := a.inner.Size()
	if err := a.inner.Sync(); err != nil {
		return err
	}
	if testHookSynced != nil {
		testHookSynced(a.key)
	}
	a.setSynced(size)
	return nil
}

// dropUnsynced zeroes pages of what was written since the last successful
// Sync as Rule.Drop says, keeping the length: the inner file is cut back to
// that point and written again.
func (a *faultyFile) dropUnsynced() error {
	a.f.mu.Lock()
	var synced int64
	if st := a.f.files[a.key]; st != nil {
		synced = st.synced
	}
	a.f.mu.Unlock()
	size := a.inner.Size()
	if size <= synced {
		return nil
	}
	r, err := a.f.inner.NewRangeReader(context.Background(), a.key, synced, size-synced)
	if err != nil {
		return err
	}
	tail, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		return err
	}
	const page = 4 << 10
	first := synced / page
	for p := first + 1; p*page < size; p += 2 {
		clear(tail[p*page-synced : min(size, (p+1)*page)-synced])
	}
	if err := a.inner.Truncate(synced); err != nil {
		return err
	}
	_, err = a.inner.Write(tail)
	return err
}

func (a *faultyFile) setSynced(size int64) {
	a.f.mu.Lock()
	defer a.f.mu.Unlock()
	if st := a.f.files[a.key]; st != nil && st.open == a {
		st.synced = size
	}
}

func (a *faultyFile) Truncate(size int64) error {
	ft, done, err := a.start(OpTruncate)
	if err != nil {
		return err
	}
	defer done()
	if ft.err != nil {
		return ft.err
	}
	if err := a.inner.Truncate(size); err != nil {
		return err
	}
	a.setSynced(size)
	return nil
}

func (a *faultyFile) Seal(ctx context.Context, finalKey string) (blob.Attrs, error) {
	if err := a.f.before(ctx, OpSeal, a.key); err != nil {
		return blob.Attrs{}, err
	}
	ctx, end, err := a.f.beginCtx(ctx)
	if err != nil {
		return blob.Attrs{}, err
	}
	defer end()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.dead {
		return blob.Attrs{}, ErrCrashed
	}
	attrs, err := a.inner.Seal(ctx, finalKey)
	if err != nil {
		return attrs, crashErr(ctx, err)
	}
	a.f.mu.Lock()
	if st := a.f.files[a.key]; st != nil && st.open == a {
		delete(a.f.files, a.key)
	}
	a.f.mu.Unlock()
	return attrs, nil
}

func (a *faultyFile) Close() error {
	end, err := a.f.begin()
	if err != nil {
		return nil // the crash closed it
	}
	defer end()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.dead {
		return nil
	}
	err = a.inner.Close()
	a.f.mu.Lock()
	if st := a.f.files[a.key]; st != nil && st.open == a {
		st.open = nil
	}
	a.f.mu.Unlock()
	return err
}
