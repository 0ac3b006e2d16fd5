package writer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/gc"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/segment"
	"github.com/redokit/redokit/testkit/testenv"
)

// The crash trials of crash_test.go run alone; these run the whole log around
// the killed writer: while a child writer process is SIGKILLed (one to three
// times per trial, each kill followed by a new epoch), the parent ticks a
// coordinator, advances the checkpoint (at or below the global resolved ts),
// collects garbage and reads (checkpoint, resolved] in a loop, and every read
// must be the workload's events of its range exactly, in order, or fail with
// an error. A read that comes back short without an error is the bug hunted
// here. After each kill, with the background paused, the acknowledged flushes
// must be covered by the global resolved ts and read back exactly. A
// follower (a warm standby) reads the whole log through every trial, and
// half the trials' writers run on a 1 KiB quota, so that they stage events
// before they are resolved and the kills land in staged runs.

// crashGCTrials is how many trials to run: REDOKIT_CRASH_GC_TRIALS, else 100
// under CI, else 5.
func crashGCTrials(t *testing.T) int {
	return testenv.Count(t, "REDOKIT_CRASH_GC_TRIALS", testenv.ByCI(100, 5))
}

// crashGCSeed is the seed of the trials' choices (workload seeds, kill
// delays, checkpoints): REDOKIT_CRASH_GC_SEED, else a fixed one. The moment a
// kill lands still depends on the machine.
func crashGCSeed(t *testing.T) uint64 {
	return testenv.Seed(t, "REDOKIT_CRASH_GC_SEED", 20261203)
}

// crashTruth is the workload of one seed, indexed for checking reads.
type crashTruth struct {
	seed uint64
	mu   sync.Mutex
	evs  []crashEvent // in ts order, as far as computed
	top  uint64       // evs holds every event with ts ≤ top
}

// upTo returns the workload's events with ts ≤ hi, in workload order.
func (tr *crashTruth) upTo(hi uint64) []crashEvent {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if hi > tr.top {
		tr.evs = tr.evs[:0]
		top := max(hi, 2*tr.top)
		crashWorkload(tr.seed, func(ts uint64, evs []crashEvent) bool {
			if ts > top {
				return false
			}
			tr.evs = append(tr.evs, evs...)
			return true
		})
		tr.top = top
	}
	n := len(tr.evs)
	for n > 0 && tr.evs[n-1].ts > hi {
		n--
	}
	return tr.evs[:n]
}

// encoding is the exact encoding the child wrote for e (crashChild's pad).
func (e crashEvent) encoding() []byte {
	ev := e.event(crashPad(e.id))
	return codec.AppendEvent(nil, &ev)
}

func readKey(ev *codec.Event) string {
	if ev.IsDDL() {
		return gotKey(got{span: SpanID(ev.DDL.Table.PhysicalID), ts: ev.CommitTs(), ddl: ev.DDL.Query})
	}
	if len(ev.Row.Columns) == 0 {
		return fmt.Sprintf("row without columns @%d", ev.CommitTs())
	}
	return gotKey(got{span: SpanID(ev.Row.Table.PhysicalID), ts: ev.CommitTs(), id: ev.Row.Columns[0].Value.Int()})
}

// errShortRead marks a read that returned without an error but not the
// range's events: the one outcome no race may produce.
var errShortRead = errors.New("read returned without an error but not exactly the range's events")

// readCrashRange reads (lo, hi] and checks it against the workload: every
// event of the range exactly once and byte-identical to what was written,
// nothing else, in commit-ts order with rows before the DDLs of their ts. An
// error of the reader is returned as is; a wrong result wraps errShortRead.
func readCrashRange(ctx context.Context, b *blob.Bucket, tr *crashTruth, lo, hi uint64) (int, error) {
	r, err := reader.Open(ctx, b, &reader.Options{LogID: testLog, StartTs: lo, EndTs: hi})
	if err != nil {
		return 0, err
	}
	defer r.Close()
	want := map[string][]byte{}
	for _, e := range tr.upTo(hi) {
		if e.ts > lo {
			want[e.key()] = e.encoding()
		}
	}
	seen := map[string]bool{}
	var prevTs uint64
	prevDDL := false
	n := 0
	for {
		ev, err := r.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return n, err
		}
		n++
		ts, k := ev.Event.CommitTs(), readKey(&ev.Event)
		switch {
		case ts <= lo || ts > hi:
			return n, fmt.Errorf("%w: read (%d, %d] returned %s, outside the range", errShortRead, lo, hi, k)
		case ts < prevTs:
			return n, fmt.Errorf("%w: read (%d, %d] returned %s after an event at ts %d", errShortRead, lo, hi, k, prevTs)
		case ts == prevTs && prevDDL && !ev.Event.IsDDL():
			return n, fmt.Errorf("%w: read (%d, %d] returned the row %s after a DDL of its ts", errShortRead, lo, hi, k)
		}
		prevTs, prevDDL = ts, ev.Event.IsDDL()
		enc, ok := want[k]
		switch {
		case !ok:
			return n, fmt.Errorf("%w: read (%d, %d] returned %s, which the workload never wrote", errShortRead, lo, hi, k)
		case seen[k]:
			return n, fmt.Errorf("%w: read (%d, %d] returned %s twice", errShortRead, lo, hi, k)
		case !bytes.Equal(codec.AppendEvent(nil, &ev.Event), enc):
			return n, fmt.Errorf("%w: read (%d, %d] returned %s altered", errShortRead, lo, hi, k)
		}
		seen[k] = true
	}
	if len(seen) != len(want) {
		var missing []string
		for k := range want {
			if !seen[k] {
				missing = append(missing, k)
			}
		}
		return n, fmt.Errorf("%w: read (%d, %d] returned %d of its %d events; missing e.g. %q", errShortRead, lo, hi, len(seen), len(want), missing[:min(5, len(missing))])
	}
	return n, nil
}

// background is the coordinator, checkpoint, GC and reader loops of a trial.
type background struct {
	b     *blob.Bucket
	coord *meta.Coordinator
	tr    *crashTruth

	// pause is held shared by each loop iteration and exclusively by the
	// checks after a kill, which need a checkpoint that stays put.
	pause sync.RWMutex

	mu                    sync.Mutex
	fails                 []string
	ticks, collected      int
	reads, readErrs, evts int
	sealedErrs            int    // reads failed on an active segment sealed under them
	takeoverErrs          int    // reads failed while a new epoch recovered the killed one
	belowErrs             int    // reads failed on a segment wholly below their start that GC removed
	firstBelow            string // the first of those errors, for the log
	firstTakeover         string // likewise
	lastResolved, lastCp  uint64

	// The follower (a warm standby) reads the whole log as it grows; the
	// checkpoint never passes its position, as a standby that joins the
	// checkpoint fan-in holds it.
	fpos     atomic.Uint64 // its position
	fseen    map[string]bool
	fprevTs  uint64
	fprevDDL bool
	fevents  int
	freopens int
}

func (bg *background) fail(format string, args ...any) {
	bg.mu.Lock()
	defer bg.mu.Unlock()
	if len(bg.fails) < 10 {
		bg.fails = append(bg.fails, fmt.Sprintf(format, args...))
	}
}

// run starts the loops; the returned function stops them and waits.
func (bg *background) run(seed uint64) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { bg.coordinate(ctx, rand.New(rand.NewPCG(seed, 1))) })
	wg.Go(func() { bg.read(ctx, rand.New(rand.NewPCG(seed, 2))) })
	return func() { cancel(); wg.Wait() }
}

// coordinate ticks, and now and then moves the checkpoint to a random ts at
// or below the global resolved ts and collects below it.
func (bg *background) coordinate(ctx context.Context, r *rand.Rand) {
	for ctx.Err() == nil {
		bg.pause.RLock()
		bg.coordinateOnce(ctx, r)
		bg.pause.RUnlock()
		time.Sleep(time.Duration(1+r.IntN(4)) * time.Millisecond)
	}
}

func (bg *background) coordinateOnce(ctx context.Context, r *rand.Rand) {
	m, err := bg.coord.Tick(ctx)
	if err != nil {
		if ctx.Err() == nil {
			bg.fail("tick: %v", err)
		}
		return
	}
	bg.mu.Lock()
	bg.ticks++
	prevR, prevC := bg.lastResolved, bg.lastCp
	bg.lastResolved, bg.lastCp = m.ResolvedTs, m.CheckpointTs
	bg.mu.Unlock()
	if m.ResolvedTs < prevR || m.CheckpointTs < prevC || m.CheckpointTs > m.ResolvedTs {
		bg.fail("invariant 3: resolved %d → %d, checkpoint %d → %d", prevR, m.ResolvedTs, prevC, m.CheckpointTs)
	}
	if r.IntN(3) != 0 || m.ResolvedTs <= m.CheckpointTs {
		return
	}
	// Mostly close behind the watermark, as a downstream keeping up would
	// be, so that GC collects while readers still read just above it.
	cp := m.ResolvedTs - uint64(r.IntN(int(min(m.ResolvedTs-m.CheckpointTs, 60))+1))
	if cp = min(cp, bg.fpos.Load()); cp <= m.CheckpointTs {
		return // the standby holds the checkpoint
	}
	if err := bg.coord.SetCheckpoint(ctx, cp); err != nil {
		if ctx.Err() == nil {
			bg.fail("checkpoint %d (resolved %d): %v", cp, m.ResolvedTs, err)
		}
		return
	}
	res, err := gc.Collect(ctx, bg.b, testLog, &gc.Options{Below: cp})
	if err != nil {
		if ctx.Err() == nil {
			bg.fail("gc at %d: %v", cp, err)
		}
		return
	}
	bg.mu.Lock()
	bg.collected += res.Deleted
	bg.mu.Unlock()
}

// read reads (checkpoint, resolved] of the stored meta object in a loop, as
// a recovery would. GC may remove a segment under a read whose start the
// checkpoint has passed, and a writer may seal (rename) an active segment
// under it: both are a not-exist error naming the object, which is allowed.
// Any other error, or a wrong result, fails the trial.
func (bg *background) read(ctx context.Context, r *rand.Rand) {
	for ctx.Err() == nil {
		bg.pause.RLock()
		bg.readOnce(ctx)
		bg.pause.RUnlock()
		time.Sleep(time.Duration(r.IntN(3)) * time.Millisecond)
	}
}

func (bg *background) readOnce(ctx context.Context) {
	m, _, err := meta.ReadMeta(ctx, bg.b, testLog)
	if err != nil {
		if ctx.Err() == nil {
			bg.fail("read the meta object: %v", err)
		}
		return
	}
	if m.ResolvedTs <= m.CheckpointTs {
		return
	}
	epoch0 := bg.writerEpoch(ctx)
	n, err := readCrashRange(ctx, bg.b, bg.tr, m.CheckpointTs, m.ResolvedTs)
	bg.mu.Lock()
	bg.reads++
	bg.evts += n
	bg.mu.Unlock()
	switch {
	case err == nil:
	case ctx.Err() != nil:
	case errors.Is(err, errShortRead):
		// Read the same range again at once: an exact second read says the
		// first one missed an object that was there (a listing race), a
		// short one that the data is gone (GC collected it after the
		// checkpoint passed the read's start: the chain must make that an
		// error).
		_, again := readCrashRange(ctx, bg.b, bg.tr, m.CheckpointTs, m.ResolvedTs)
		bg.fail("concurrent read (%d, %d]: %v (read again at once: %v)\n%s", m.CheckpointTs, m.ResolvedTs, err, errOrExact(again), dumpLog(bg.b))
	default:
		// A read may fail when GC collected what it needs, which it may do
		// only once the checkpoint has passed the read's start: then the
		// segment is gone under the read (not-exist) or the chain is cut
		// above the start (incomplete). With the checkpoint still at the
		// start, no error has an excuse.
		now, _, merr := meta.ReadMeta(ctx, bg.b, testLog)
		switch {
		case merr != nil:
			if ctx.Err() == nil {
				bg.fail("read the meta object: %v", merr)
			}
		case now.CheckpointTs > m.CheckpointTs && (blob.IsNotExist(err) || errors.Is(err, reader.ErrIncomplete)):
			bg.mu.Lock()
			bg.readErrs++
			bg.mu.Unlock()
		case bg.writerEpoch(ctx) != epoch0 && (blob.IsNotExist(err) || errors.Is(err, reader.ErrIncomplete)):
			// A new epoch took over and recovered the killed one's
			// segments under the read (cut blocks above the published
			// progress, deleted what the fence excludes). Loud, so not the
			// bug hunted here; counted and reported.
			bg.mu.Lock()
			bg.takeoverErrs++
			if bg.takeoverErrs == 1 {
				bg.firstTakeover = err.Error()
			}
			bg.mu.Unlock()
		case collectedBelow(err, m.CheckpointTs):
			// GC at the read's own start may delete what lies wholly
			// below it; a read that still looks at it (to prove its
			// chain) fails needlessly. Loud; counted and reported.
			bg.mu.Lock()
			bg.belowErrs++
			if bg.firstBelow == "" {
				bg.firstBelow = err.Error()
			}
			bg.mu.Unlock()
		case sealedUnder(err):
			// Not silent, but needless: the reader could list again and
			// read the sealed name, as it does for a segment GC removes.
			bg.mu.Lock()
			bg.sealedErrs++
			bg.mu.Unlock()
		default:
			bg.fail("concurrent read (%d, %d], checkpoint now %d: %v\n%s", m.CheckpointTs, m.ResolvedTs, now.CheckpointTs, err, dumpLog(bg.b))
		}
	}
}

// follow runs a follower from the log's start, checking every event as it
// comes: in commit-ts order (rows before the DDLs of their ts), each one
// once, byte-identical to what the workload wrote. Its reads race every
// kill, takeover, seal and GC of the trial, and any error fails the trial:
// a standby must go on through all of them. finish waits until it has
// passed the final global resolved ts and checks it returned every event
// up to it.
func (bg *background) follow() (finish func(t *testing.T, resolved uint64)) {
	f, err := reader.Follow(context.Background(), bg.b, &reader.FollowOptions{Options: reader.Options{LogID: testLog}, Poll: time.Millisecond, OpenTimeout: 20 * time.Second})
	if err != nil {
		bg.fail("follow: %v", err)
		return func(*testing.T, uint64) {}
	}
	bg.fseen = map[string]bool{}
	// The follower's own copy of the workload's truth: upTo's slice is
	// its buffer, which the reader loop's calls would rewrite under it.
	tr := &crashTruth{seed: bg.tr.seed}
	ctx, cancel := context.WithCancel(context.Background())
	next := func() bool {
		ev, err := f.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				bg.fail("follower at %d: %v\n%s", f.Position(), err, dumpLog(bg.b))
			}
			return false
		}
		ts, k := ev.Event.CommitTs(), readKey(&ev.Event)
		want := map[string][]byte{}
		evs := tr.upTo(ts)
		for i := sort.Search(len(evs), func(i int) bool { return evs[i].ts >= ts }); i < len(evs) && evs[i].ts == ts; i++ {
			want[evs[i].key()] = evs[i].encoding()
		}
		enc, ok := want[k]
		switch {
		case ts < bg.fprevTs || ts == bg.fprevTs && bg.fprevDDL && !ev.Event.IsDDL():
			bg.fail("follower returned %s after an event at ts %d (a DDL: %v)", k, bg.fprevTs, bg.fprevDDL)
		case !ok:
			bg.fail("follower returned %s, which the workload never wrote", k)
		case bg.fseen[k]:
			bg.fail("follower returned %s twice", k)
		case !bytes.Equal(codec.AppendEvent(nil, &ev.Event), enc):
			bg.fail("follower returned %s altered", k)
		default:
			bg.fseen[k] = true
			bg.fprevTs, bg.fprevDDL = ts, ev.Event.IsDDL()
			bg.fevents++
			bg.fpos.Store(f.Position())
			return true
		}
		return false
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for next() {
		}
	}()
	return func(t *testing.T, resolved uint64) {
		t.Helper()
		defer f.Close()
		deadline := time.Now().Add(30 * time.Second)
		for f.Position() < resolved && len(bg.failures()) == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		cancel()
		<-done
		bg.freopens = f.Reopens()
		if fl := bg.failures(); len(fl) > 0 {
			t.Fatalf("follower:\n%s", joinLines(fl))
		}
		if pos := f.Position(); pos < resolved {
			t.Fatalf("the follower is at %d, below the final global resolved ts %d", pos, resolved)
		}
		if n := len(tr.upTo(resolved)); len(bg.fseen) != n {
			t.Fatalf("the follower returned %d events up to the final global resolved ts %d; the workload wrote %d", len(bg.fseen), resolved, n)
		}
	}
}

// dumpLog describes the log's objects for a failure message: the segment
// keys and the writer state as stored.
func dumpLog(b *blob.Bucket) string {
	ctx := context.Background()
	var buf bytes.Buffer
	for a, err := range b.List(ctx, testLog+"/") {
		if err != nil {
			fmt.Fprintf(&buf, "    list: %v\n", err)
			break
		}
		fmt.Fprintf(&buf, "    %s (%d bytes)\n", a.Key, a.Size)
	}
	if data, err := b.ReadAll(ctx, layout.WriterState(testLog, "crash")); err == nil {
		fmt.Fprintf(&buf, "    state: %s\n", data)
	}
	return buf.String()
}

// sealedUnder reports whether err is a read of an active segment that is
// gone: the writer sealed (renamed) it under the read.
func sealedUnder(err error) bool {
	var be *blob.Error
	return blob.IsNotExist(err) && errors.As(err, &be) && strings.HasSuffix(be.Key, segment.ActiveExt)
}

// writerEpoch is the crash writer's stored epoch, 0 when it has none or it
// cannot be read.
func (bg *background) writerEpoch(ctx context.Context) uint64 {
	st, _, err := meta.ReadWriterState(ctx, bg.b, testLog, "crash")
	if err != nil {
		return 0
	}
	return st.Epoch
}

// collectedBelow reports whether err is a read of a sealed segment that is
// gone and lies wholly at or below lo: GC at a checkpoint of lo may remove it
// whatever the read does.
func collectedBelow(err error, lo uint64) bool {
	var be *blob.Error
	if !blob.IsNotExist(err) || !errors.As(err, &be) {
		return false
	}
	n, perr := segment.ParseName(be.Key)
	return perr == nil && !n.Active && n.MaxTs < lo
}

func errOrExact(err error) any {
	if err == nil {
		return "exact"
	}
	return err
}

// failures returns what the loops found so far.
func (bg *background) failures() []string {
	bg.mu.Lock()
	defer bg.mu.Unlock()
	return append([]string(nil), bg.fails...)
}

// checkQuiet pauses the loops, ticks, and checks that the global resolved ts
// covers the published progress given and that (checkpoint, resolved] reads back
// exactly.
func (bg *background) checkQuiet(t *testing.T, published uint64, phase string) meta.Meta {
	t.Helper()
	bg.pause.Lock()
	defer bg.pause.Unlock()
	ctx := context.Background()
	m, err := bg.coord.Tick(ctx)
	if err != nil {
		t.Fatalf("%s: tick: %v", phase, err)
	}
	if m.ResolvedTs < published {
		t.Fatalf("%s: the global resolved ts %d is below the flushed ts %d the writer published", phase, m.ResolvedTs, published)
	}
	if m.ResolvedTs > m.CheckpointTs {
		if _, err := readCrashRange(ctx, bg.b, bg.tr, m.CheckpointTs, m.ResolvedTs); err != nil {
			t.Fatalf("%s: read (checkpoint %d, resolved %d] with nothing running: %v", phase, m.CheckpointTs, m.ResolvedTs, err)
		}
	}
	// A killed writer leaves a torn or unsealed active segment and perhaps
	// a zombie's segment: findings of Info severity, never errors.
	rep, err := reader.Verify(ctx, bg.b, testLog, nil)
	if err != nil {
		t.Fatalf("%s: verify: %v", phase, err)
	}
	if !rep.OK() {
		t.Fatalf("%s: verify found errors: %v\n%s", phase, rep.Errors(), dumpLog(bg.b))
	}
	return m
}

// TestWriterCrashWithReaderAndGC is the SIGKILL acceptance of issue 12:
// invariant 1 with a coordinator, the checkpoint, GC and a reader running
// around the killed writer.
func TestWriterCrashWithReaderAndGC(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the SIGKILL trials with a reader and GC take about a minute; scripts/test.sh runs them")
	}
	trials := crashGCTrials(t)
	base := crashGCSeed(t)
	rng := rand.New(rand.NewPCG(base, 12))
	start := time.Now()
	var kills, reads, readErrs, sealedErrs, takeoverErrs, belowErrs, events, collected, verified, followed, reopened int
	var staged int64 // stage cuts of the killed children (odd seeds run on a tiny quota)
	var firstTakeover, firstBelow string
	for trial := range trials {
		seed := rng.Uint64()
		nKills := 1 + rng.IntN(3)
		var delays []time.Duration
		for range nKills {
			delays = append(delays, time.Duration(10+rng.IntN(250))*time.Millisecond)
		}
		dir := t.TempDir()
		ok := t.Run(fmt.Sprintf("trial%04d", trial), func(t *testing.T) {
			t.Logf("base seed %d, workload seed %d, kills after %v", base, seed, delays)
			ctx := context.Background()
			b := localBucket(t, dir)
			coord, err := meta.OpenCoordinator(ctx, b, testLog, nil)
			must(t, err)
			must(t, coord.AddWriter(ctx, "crash"))
			for s := SpanID(1); s <= crashSpans; s++ {
				must(t, coord.AddSpan(ctx, s, 0))
			}
			bg := &background{b: b, coord: coord, tr: &crashTruth{seed: seed}}
			finishFollow := bg.follow()
			stop := bg.run(seed)
			defer func() {
				stop()
				bg.mu.Lock()
				reads += bg.reads
				readErrs += bg.readErrs
				sealedErrs += bg.sealedErrs
				takeoverErrs += bg.takeoverErrs
				belowErrs += bg.belowErrs
				if firstBelow == "" {
					firstBelow = bg.firstBelow
				}
				if firstTakeover == "" {
					firstTakeover = bg.firstTakeover
				}
				events += bg.evts
				collected += bg.collected
				bg.mu.Unlock()
			}()
			// acked is the newest flush a child reported, published the
			// newest it knew its state object to publish. After a kill the
			// global resolved ts covers published at once, acked only
			// once the next epoch has read the killed one's chain.
			var acked, published uint64
			if seed%2 == 1 {
				// Half the trials stage: a 1 KiB quota is less than a
				// tick's events, so the writer stores events above its
				// resolved ts before they are resolved.
				t.Setenv(crashQuotaEnv, "1024")
			}
			for k, delay := range delays {
				c := startChild(t, "kill", dir, seed)
				if c.killAfter(t, delay) {
					kills++
				}
				staged += c.stageCuts
				if c.from < acked {
					t.Fatalf("kill %d: the writer reopened at flushed ts %d, below the %d acknowledged before", k, c.from, acked)
				}
				acked = max(acked, c.last)
				published = max(published, c.published)
				if f := bg.failures(); len(f) > 0 {
					t.Fatalf("after kill %d:\n%s", k, joinLines(f))
				}
				bg.checkQuiet(t, published, fmt.Sprintf("after kill %d (acknowledged %d, published %d)", k, acked, published))
			}

			// A last epoch recovers, writes on and closes.
			r := resumeChild(t, dir, seed)
			if r.from < acked || r.last < acked {
				t.Fatalf("the last epoch reopened at flushed ts %d and closed at %d, below the %d acknowledged before", r.from, r.last, acked)
			}
			stop()
			if f := bg.failures(); len(f) > 0 {
				t.Fatalf("during the run:\n%s", joinLines(f))
			}
			final := bg.checkQuiet(t, r.last, "after the last epoch closed")
			finishFollow(t, final.ResolvedTs)
			followed += bg.fevents
			reopened += bg.freopens
			if n := len(activeFiles(t, dir)); n != 0 {
				t.Fatalf("%d active segments after a clean close", n)
			}
			verified++
		})
		if !ok {
			break
		}
	}
	t.Logf("a follower through every trial: %d events, each once and in order, %d rounds read again after the log changed under them; %d stage cuts by the killed writers", followed, reopened, staged)
	t.Logf("%d trials in %v: %d kills mid-run, %d concurrent reads (%d events; %d ended by an error after GC passed their start, %d by a not-exist error on an active segment sealed under them, %d by an error while a new epoch took over, %d by a not-exist error on a segment wholly below their start), %d segments collected, %d verified clean",
		trials, time.Since(start).Round(time.Millisecond), kills, reads, events, readErrs, sealedErrs, takeoverErrs, belowErrs, collected, verified)
	if firstBelow != "" {
		t.Logf("first read failed on a segment below its start: %s", firstBelow)
	}
	if firstTakeover != "" {
		t.Logf("first read failed during a takeover: %s", firstTakeover)
	}
}

func joinLines(s []string) string {
	var buf bytes.Buffer
	for _, l := range s {
		buf.WriteString("  " + l + "\n")
	}
	return buf.String()
}
