package writer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/blob/driver"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/testkit/testenv"
)

// lostProgress stores the progress puts (compare-and-swap on a writer's
// state object) it is told to, and then reports a failure: a put whose
// answer was lost, as a timeout, a reset connection or (on local disk) a
// failed directory fsync after the rename leaves it.
type lostProgress struct {
	wrapped
	mu    sync.Mutex
	which map[int]bool // 1-based numbers of the progress puts to lose
	n     int
	lost  int
}

func (l *lostProgress) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	a, err := l.Driver.Put(ctx, key, r, size, opts)
	if err != nil || opts.IfMatch == "" || !strings.Contains(key, "/"+layout.WritersDir+"/") {
		return a, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	if l.which[l.n] {
		l.lost++
		return blob.Attrs{}, blobtest.ErrInjected
	}
	return a, nil
}

// wrapped is what the test wrappers here embed: the driver they wrap, for
// whom StagesPuts answers (BeforeCommit passes through).
type wrapped struct{ driver.Driver }

func (w wrapped) StagesPuts() bool {
	st, ok := w.Driver.(driver.Stager)
	return ok && st.StagesPuts()
}

// faultyOver is a Faulty over w, a test wrapper of inner, with inner's
// Appender capability when it has one.
func faultyOver(w interface {
	driver.Driver
	driver.Stager
}, inner driver.Driver) *blobtest.Faulty {
	var drv driver.Driver = w
	if a, ok := inner.(driver.Appender); ok {
		drv = struct {
			driver.Driver
			driver.Stager
			driver.Appender
		}{w, w, a}
	}
	return blobtest.NewFaulty(drv)
}

// TestLostProgressAnswer loses the answers of progress puts that were
// stored, on mem and on local disk, alone and with the re-read that follows
// failing too. The writer must neither call itself fenced nor delete or cut
// a segment: every flushed event stays readable, exactly once. Before write
// tokens the retry failed its precondition, the lease said ErrFenced
// although no newer epoch existed, and the writer cut or deleted segments
// the stored progress covered (finding 1 of issue 12).
func TestLostProgressAnswer(t *testing.T) {
	for _, backend := range []string{"mem", "local"} {
		for _, rereadFails := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/reread-fails=%v", backend, rereadFails), func(t *testing.T) {
				ctx := context.Background()
				inner := backendDriver(t, backend)
				lp := &lostProgress{wrapped: wrapped{inner}, which: map[int]bool{1: true, 3: true}}
				f := faultyOver(lp, inner)
				b := f.Bucket()
				defer b.Close()
				destroyed := recordDestruction(f)
				if rereadFails {
					// The first read of the state object after each lost
					// answer fails: the outcome stays open until the
					// writer's retry settles it.
					var mu sync.Mutex
					seen := 0
					f.Add(blobtest.Rule{Op: blobtest.OpStat, Fail: true, Match: func(c blobtest.Call) bool {
						mu.Lock()
						defer mu.Unlock()
						lp.mu.Lock()
						lost := lp.lost
						lp.mu.Unlock()
						if !isState(c) || lost <= seen {
							return false
						}
						seen = lost
						return true
					}})
				}
				o := testOptions("w")
				o.RetryAttempts = 10
				w := openSpan1(t, b, o)
				for i := range uint64(4) {
					from := i*10 + 1
					writeRange(t, w, 1, from, from+9)
					must(t, w.AdvanceResolved(1, from+9))
					ts, err := w.Publish(ctx)
					if err != nil || ts != from+9 {
						t.Fatalf("flush %d: %d, %v (fenced: %v)", i+1, ts, err, errors.Is(err, meta.ErrFenced))
					}
				}
				must(t, w.Close(ctx))
				if lp.lost != 2 {
					t.Fatalf("%d answers lost, want 2", lp.lost)
				}
				if len(*destroyed) > 0 {
					t.Fatalf("the writer destroyed stored data: %v", *destroyed)
				}
				st, _, err := meta.ReadWriterState(ctx, b, testLog, "w")
				must(t, err)
				if st.Epoch != 1 || st.FlushedTs != 40 {
					t.Fatalf("state %+v: want epoch 1 flushed to 40", st)
				}
				checkIDs(t, readLog(t, b, readOpts{fenced: true}), 1, 40)
			})
		}
	}
}

// TestFencedKeepsWhatTheFenceCovers fences a writer whose last progress put
// was stored but whose answer was lost, and whose takeover happened before
// it could re-read: the new epoch's fence covers that put. The zombie must
// delete or cut nothing the fence covers, so every event it flushed before
// the fence, acknowledged or not, is still readable under the fence rule.
func TestFencedKeepsWhatTheFenceCovers(t *testing.T) {
	for _, backend := range []string{"mem", "local"} {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			inner := backendDriver(t, backend)
			lp := &lostProgress{wrapped: wrapped{inner}, which: map[int]bool{2: true}}
			f := faultyOver(lp, inner)
			b := f.Bucket()
			defer b.Close()
			// The re-read after the lost answer is where the takeover
			// strikes: it happens first, then the read goes on.
			var once sync.Once
			var takeover error
			f.Add(blobtest.Rule{Op: blobtest.OpStat, Match: func(c blobtest.Call) bool {
				lp.mu.Lock()
				lost := lp.lost
				lp.mu.Unlock()
				if isState(c) && lost == 1 {
					once.Do(func() {
						_, takeover = meta.AcquireWriter(ctx, blob.NewBucket(inner), testLog, "w", nil)
					})
				}
				return false
			}})
			o := testOptions("w")
			o.RetryAttempts = 10
			w := openSpan1(t, b, o)
			writeFlushed(t, w, 1, 1, 10)
			writeRange(t, w, 1, 11, 20)
			must(t, w.AdvanceResolved(1, 20))
			if _, err := w.Publish(ctx); !errors.Is(err, meta.ErrFenced) {
				t.Fatalf("flush across the takeover: %v, want ErrFenced", err)
			}
			must(t, takeover)
			w.Close(ctx)
			st, _, err := meta.ReadWriterState(ctx, b, testLog, "w")
			must(t, err)
			if st.Epoch != 2 || st.FlushedTs != 20 || len(st.Fences) != 1 {
				t.Fatalf("state after the takeover %+v: want epoch 2 at 20 with the lost put in its fence", st)
			}
			// The new epoch starts at 20: it will never write 11..20 again,
			// so they must be in the log.
			checkIDs(t, readLog(t, b, readOpts{fenced: true}), 1, 20)
		})
	}
}

// chaosState fails the calls on writer state objects at random, from a
// seed: conditional puts fail before storing or store and lose their
// answer, stats and reads fail. Other calls pass through.
type chaosState struct {
	wrapped
	mu             sync.Mutex
	r              *rand.Rand
	lost, refused  int
	statsFailed    int
	readsFailed    int
	pLost, pRefuse float64
	pStat, pRead   float64
}

func (c *chaosState) roll(p float64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.r.Float64() < p
}

func (c *chaosState) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	if opts.IfMatch == "" || !strings.Contains(key, "/"+layout.WritersDir+"/") {
		return c.Driver.Put(ctx, key, r, size, opts)
	}
	if c.roll(c.pRefuse) {
		c.mu.Lock()
		c.refused++
		c.mu.Unlock()
		return blob.Attrs{}, blobtest.ErrInjected
	}
	a, err := c.Driver.Put(ctx, key, r, size, opts)
	if err == nil && c.roll(c.pLost) {
		c.mu.Lock()
		c.lost++
		c.mu.Unlock()
		return blob.Attrs{}, blobtest.ErrInjected
	}
	return a, err
}

func (c *chaosState) Stat(ctx context.Context, key string) (blob.Attrs, error) {
	if strings.Contains(key, "/"+layout.WritersDir+"/") && c.roll(c.pStat) {
		c.mu.Lock()
		c.statsFailed++
		c.mu.Unlock()
		return blob.Attrs{}, blobtest.ErrInjected
	}
	return c.Driver.Stat(ctx, key)
}

func (c *chaosState) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if strings.Contains(key, "/"+layout.WritersDir+"/") && c.roll(c.pRead) {
		c.mu.Lock()
		c.readsFailed++
		c.mu.Unlock()
		return nil, blobtest.ErrInjected
	}
	return c.Driver.NewRangeReader(ctx, key, offset, length)
}

func (c *chaosState) ErrorCode(err error) blob.Code {
	if errors.Is(err, blobtest.ErrInjected) {
		return blob.CodeTransient
	}
	return c.Driver.ErrorCode(err)
}

// lostAnswerSchedules is how many randomized schedules
// TestLostProgressSchedules runs per backend: REDOKIT_LOST_ANSWER_SCHEDULES,
// default 20.
func lostAnswerSchedules(t *testing.T) int {
	return testenv.Count(t, "REDOKIT_LOST_ANSWER_SCHEDULES", 20)
}

// TestLostProgressSchedules runs a writer through randomized schedules of
// faults on its state object (progress puts refused or stored with their
// answer lost, failed re-reads), on mem and local: no schedule may fence
// the writer, and every flushed event must read back exactly once.
func TestLostProgressSchedules(t *testing.T) {
	n := lostAnswerSchedules(t)
	for _, backend := range []string{"mem", "local"} {
		t.Run(backend, func(t *testing.T) {
			var lost, refused, stats, reads int
			for seed := range uint64(n) {
				c := lostSchedule(t, backend, seed)
				lost, refused, stats, reads = lost+c.lost, refused+c.refused, stats+c.statsFailed, reads+c.readsFailed
				if t.Failed() {
					t.Fatalf("seed %d failed", seed)
				}
			}
			t.Logf("%d schedules: %d answers lost, %d puts refused, %d stats and %d reads failed", n, lost, refused, stats, reads)
			if n >= 10 && lost == 0 {
				t.Fatal("no answer was lost: the schedules test nothing")
			}
		})
	}
}

func lostSchedule(t *testing.T, backend string, seed uint64) *chaosState {
	ctx := context.Background()
	inner := backendDriver(t, backend)
	c := &chaosState{wrapped: wrapped{inner}, r: rand.New(rand.NewPCG(seed, 12)), pLost: 0.3, pRefuse: 0.1, pStat: 0.15, pRead: 0.1}
	f := faultyOver(c, inner)
	b := f.Bucket()
	defer b.Close()
	destroyed := recordDestruction(f)
	o := testOptions("w")
	o.RetryAttempts = 100
	o.MaxSegmentBytes = 8 << 10 // several segments per schedule
	w, err := Open(ctx, b, o)
	for attempt := 0; err != nil && attempt < 20; attempt++ {
		// Opening reads the state object too; its faults are transient.
		w, err = Open(ctx, b, o)
	}
	if err != nil {
		t.Fatalf("seed %d: open: %v", seed, err)
	}
	defer w.Close(ctx)
	must(t, w.AddSpan(1, 0))
	const flushes, per = 6, 8
	for i := range uint64(flushes) {
		from := i*per + 1
		writeRange(t, w, 1, from, from+per-1)
		must(t, w.AdvanceResolved(1, from+per-1))
		ts, err := w.Flush(ctx)
		if err != nil || ts != from+per-1 {
			t.Fatalf("seed %d: flush %d: %d, %v (fenced: %v)", seed, i+1, ts, err, errors.Is(err, meta.ErrFenced))
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatalf("seed %d: close: %v", seed, err)
	}
	if len(*destroyed) > 0 {
		t.Fatalf("seed %d: the writer destroyed stored data: %v", seed, *destroyed)
	}
	// The check reads without faults.
	c.mu.Lock()
	c.pLost, c.pRefuse, c.pStat, c.pRead = 0, 0, 0, 0
	c.mu.Unlock()
	checkIDs(t, readLog(t, b, readOpts{fenced: true}), 1, flushes*per)
	return c
}
