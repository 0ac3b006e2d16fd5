package writer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/testkit/testenv"
)

// The crash test runs the writer in a child process (this test binary run
// again, testenv.StartChild), SIGKILLs it at a random
// moment, and checks what is on disk: every event at or below the last
// flushed ts the child printed is there exactly once, segments are in order,
// nothing is corrupt. Then it runs a child that reopens the writer ID (which
// recovers the killed epoch's active segment) and writes on, and checks the
// whole log again.
// crashSpans is the number of spans of the crash workload.
const crashSpans = 4

// crashEvent is one event of the workload.
type crashEvent struct {
	span SpanID
	ts   uint64
	id   int64
	ddl  bool
}

// crashWorkload yields the deterministic workload of a seed, tick by tick:
// each tick is one commit ts, holding up to three events on random spans,
// rows and now and then a DDL (written after its span's rows of the tick).
func crashWorkload(seed uint64, yield func(ts uint64, evs []crashEvent) bool) {
	r := rand.New(rand.NewPCG(seed, 0xc7a5))
	var id int64
	for ts := uint64(1); ; ts++ {
		n := r.IntN(4)
		evs := make([]crashEvent, 0, n)
		for range n {
			id++
			evs = append(evs, crashEvent{span: SpanID(1 + r.IntN(crashSpans)), ts: ts, id: id, ddl: r.IntN(20) == 0})
		}
		if !yield(ts, evs) {
			return
		}
	}
}

func (e crashEvent) event(pad []byte) codec.Event {
	if e.ddl {
		return ddl(e.span, e.ts, fmt.Sprintf("ALTER TABLE t%d /* %d */", e.span, e.id))
	}
	ev := row(e.span, e.ts, e.id)
	ev.Row.Columns = append(ev.Row.Columns, codec.Column{Name: "pad", Type: codec.TypeBlob, Value: codec.BytesValue(pad)})
	return ev
}

// crashPad is the pad column of the row with id: bytes the reader must give
// back unaltered.
func crashPad(id int64) []byte {
	pad := make([]byte, 80)
	for i := range pad {
		pad[i] = byte(id) + byte(i)
	}
	return pad
}

func (e crashEvent) key() string {
	if e.ddl {
		return fmt.Sprintf("ddl %d %d /* %d */", e.span, e.ts, e.id)
	}
	return fmt.Sprintf("row %d %d %d", e.span, e.ts, e.id)
}

func gotKey(g got) string {
	if g.ddl != "" {
		id := g.ddl[strings.LastIndex(g.ddl, "/* ")+3 : len(g.ddl)-3]
		return fmt.Sprintf("ddl %d %d /* %s */", g.span, g.ts, id)
	}
	return fmt.Sprintf("row %d %d %d", g.span, g.ts, g.id)
}

func crashOptions() *Options {
	return &Options{
		LogID: testLog, WriterID: "crash",
		FlushInterval:   5 * time.Millisecond,
		MaxSegmentBytes: 8 << 10, // rotations all the time
		BlockSize:       1 << 10,
		RetryAttempts:   3,
		RetryBackoff:    time.Millisecond,
	}
}

// crashQuotaEnv, set for a child, is its writer's MemoryQuota: the trials
// that read through the reader (crash_gc_test.go) run half their children
// on a tiny one. (readLog, which reads segments raw, applies no committed
// ts cut, so TestWriterCrash's checks cannot read a staged log.)
const crashQuotaEnv = "REDOKIT_CRASH_CHILD_QUOTA"

// The child side: crashChild, run from the test binary before any test.
func init() {
	testenv.RunChild("writer-crash", func(args []string) error {
		if len(args) != 3 {
			return fmt.Errorf("want mode, directory and seed, got %q", args)
		}
		seed, err := strconv.ParseUint(args[2], 10, 64)
		if err != nil {
			return err
		}
		if err := crashChild(args[0], args[1], seed); err != nil {
			fmt.Println("ERROR", err)
			return err
		}
		return nil
	})
}

// crashChild writes the workload. In "kill" mode it writes until killed (or
// for a long while), printing "F <ts>" after each Flush and "P <ts>" with the
// flushed ts its state object is known to publish (every fifth flush waits
// for the publication, the others take what the lazy publisher has done); in
// "resume" mode it
// reopens the writer, writes on from its flushed ts for a while, closes, and
// prints the final flushed ts and "DONE".
func crashChild(mode, dir string, seed uint64) error {
	ctx := context.Background()
	b, err := local.New(dir, nil)
	if err != nil {
		return err
	}
	defer b.Close()
	o := crashOptions()
	if q := os.Getenv(crashQuotaEnv); q != "" {
		// A quota smaller than a tick's events: the writer stages what is
		// not resolved yet (stage cuts), so the kills land in staged runs.
		n, err := strconv.ParseInt(q, 10, 64)
		if err != nil {
			return fmt.Errorf("%s=%q: %v", crashQuotaEnv, q, err)
		}
		o.MemoryQuota = n
	}
	w, err := Open(ctx, b, o)
	if err != nil {
		return err
	}
	from := w.FlushedTs()
	for s := SpanID(1); s <= crashSpans; s++ {
		if err := w.AddSpan(s, from); err != nil {
			return err
		}
	}
	until := uint64(1 << 40)
	if mode == "resume" {
		until = from + 150
	}
	fmt.Fprintln(os.Stdout, "READY", from)
	var werr error
	crashWorkload(seed, func(ts uint64, evs []crashEvent) bool {
		if ts <= from {
			return true
		}
		if ts > until {
			return false
		}
		// One Write per span, in the tick's order.
		for s := SpanID(1); s <= crashSpans; s++ {
			var batch []codec.Event
			for _, e := range evs {
				if e.span == s {
					// A pad of its own: Write keeps the events until the
					// flush, so a shared buffer would leave every event of
					// a batch with the last one's pad.
					batch = append(batch, e.event(crashPad(e.id)))
				}
			}
			if len(batch) > 0 {
				if werr = w.Write(ctx, s, batch...); werr != nil {
					return false
				}
			}
		}
		for s := SpanID(1); s <= crashSpans; s++ {
			if werr = w.AdvanceResolved(s, ts); werr != nil {
				return false
			}
		}
		if ts%20 == 0 {
			f, err := w.Flush(ctx)
			if err != nil {
				werr = err
				return false
			}
			fmt.Fprintln(os.Stdout, "F", f)
			fmt.Fprintln(os.Stdout, "S", w.Stats().StageCuts)
			if ts%100 == 0 {
				if _, err := w.Publish(ctx); err != nil {
					werr = err
					return false
				}
			}
			fmt.Fprintln(os.Stdout, "P", w.PublishedTs())
		}
		return true
	})
	if werr != nil {
		return werr
	}
	if err := w.Close(ctx); err != nil {
		return err
	}
	fmt.Fprintln(os.Stdout, "F", w.FlushedTs())
	fmt.Fprintln(os.Stdout, "DONE")
	return nil
}

// crashTrials is how many kill trials to run: REDOKIT_WRITER_CRASH_TRIALS,
// else REDOKIT_CRASH_TRIALS (at least 100 under CI), else 5.
func crashTrials(t *testing.T) int {
	if n, ok := testenv.LookupCount(t, "REDOKIT_WRITER_CRASH_TRIALS"); ok {
		return n
	}
	n := testenv.Count(t, "REDOKIT_CRASH_TRIALS", 5)
	if testenv.InCI() {
		return max(n, 100)
	}
	return n
}

// childRun is a running child and what it printed.
type childRun struct {
	*testenv.Child
	last uint64 // last flushed ts printed
	// published is the last flushed ts printed as published: the global
	// resolved ts must cover it even before a next epoch reads the chain.
	published uint64
	from      uint64 // the flushed ts the writer reopened at
	stageCuts int64  // the most stage cuts the child reported
	ready     bool
	fin       bool
	out       []string
}

func startChild(t *testing.T, mode, dir string, seed uint64) *childRun {
	t.Helper()
	c := testenv.StartChild(t, "writer-crash", []string{mode, dir, strconv.FormatUint(seed, 10)}, testenv.StderrInLines())
	return &childRun{Child: c}
}

// resumeChild runs a child that recovers the log in dir, writes on and
// closes, to its end: it must exit cleanly, having finished.
func resumeChild(t *testing.T, dir string, seed uint64) *childRun {
	t.Helper()
	r := startChild(t, "resume", dir, seed)
	r.drain(t, true)
	if err := r.Wait(); err != nil {
		t.Errorf("resumed child: %v", err)
	}
	if !r.fin {
		t.Fatalf("resumed child did not finish: %q", r.out)
	}
	return r
}

// drain reads what the child printed so far; wait says whether to read
// until its output ends.
func (c *childRun) drain(t *testing.T, wait bool) {
	t.Helper()
	for {
		var line string
		var ok bool
		if wait {
			line, ok = <-c.Lines
		} else {
			select {
			case line, ok = <-c.Lines:
			default:
				return
			}
		}
		if !ok {
			return
		}
		c.handle(t, line)
	}
}

// killAfter kills the child delay after it says it is ready, and reads what
// it printed until then; it reports whether the kill landed mid-run.
func (c *childRun) killAfter(t *testing.T, delay time.Duration) bool {
	t.Helper()
	waitReady(t, c)
	time.Sleep(delay)
	err := c.Kill()
	c.drain(t, true)
	c.Wait()
	return err == nil && !c.fin
}

// waitReady handles the child's lines until it says it is ready; it fails
// the test if the child ends first or takes 30 s.
func waitReady(t *testing.T, c *childRun) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !c.ready {
		select {
		case line, ok := <-c.Lines:
			if !ok {
				c.Wait()
				t.Fatalf("child ended before it was ready: %q", c.out)
			}
			c.handle(t, line)
		case <-deadline:
			c.Kill()
			c.Wait()
			t.Fatal("child never became ready")
		}
	}
}

func (c *childRun) handle(t *testing.T, line string) {
	t.Helper()
	{
		c.out = append(c.out, line)
		switch {
		case strings.HasPrefix(line, "F "):
			ts, err := strconv.ParseUint(line[2:], 10, 64)
			must(t, err)
			if ts < c.last {
				t.Fatalf("child printed flushed ts %d after %d", ts, c.last)
			}
			c.last = ts
		case strings.HasPrefix(line, "P "):
			ts, err := strconv.ParseUint(line[2:], 10, 64)
			must(t, err)
			if ts < c.published || ts > c.last {
				t.Fatalf("child printed published ts %d after %d, with flushed ts %d", ts, c.published, c.last)
			}
			c.published = ts
		case strings.HasPrefix(line, "S "):
			n, err := strconv.ParseInt(line[2:], 10, 64)
			must(t, err)
			c.stageCuts = max(c.stageCuts, n)
		case strings.HasPrefix(line, "READY "):
			from, err := strconv.ParseUint(line[len("READY "):], 10, 64)
			must(t, err)
			c.ready, c.from = true, from
		case line == "DONE":
			c.fin = true
		case strings.HasPrefix(line, "ERROR"):
			t.Fatalf("child failed: %s", line)
		}
	}
}

// expected returns the workload's events with ts <= upTo, by key.
func expected(seed, upTo uint64) map[string]bool {
	want := map[string]bool{}
	crashWorkload(seed, func(ts uint64, evs []crashEvent) bool {
		if ts > upTo {
			return false
		}
		for _, e := range evs {
			want[e.key()] = true
		}
		return true
	})
	return want
}

// checkCrashLog checks the events read back against the workload: those at or
// below upTo exactly once; any above it at most once and real.
func checkCrashLog(t *testing.T, gs []got, seed, upTo uint64, phase string) {
	t.Helper()
	maxTs := upTo
	for _, g := range gs {
		maxTs = max(maxTs, g.ts)
	}
	all := expected(seed, maxTs)
	seen := map[string]int{}
	for _, g := range gs {
		k := gotKey(g)
		if !all[k] {
			t.Fatalf("%s: read an event the workload never wrote: %s (in %s)", phase, k, g.seg)
		}
		seen[k]++
		if seen[k] > 1 {
			t.Fatalf("%s: %s read %d times", phase, k, seen[k])
		}
	}
	for k := range expected(seed, upTo) {
		if seen[k] != 1 {
			t.Fatalf("%s: event %s at or below the flushed ts %d is missing", phase, k, upTo)
		}
	}
}

// TestWriterCrash is the acceptance test of invariant 1 on local disk with
// real processes and SIGKILL.
func TestWriterCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	trials := crashTrials(t)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	start := time.Now()
	var kills, withData, recovered int
	for trial := range trials {
		seed := rng.Uint64()
		delay := time.Duration(10+rng.IntN(250)) * time.Millisecond
		dir := t.TempDir()
		ok := t.Run(fmt.Sprintf("trial%03d", trial), func(t *testing.T) {
			t.Logf("seed %d, kill after %v", seed, delay)
			c := startChild(t, "kill", dir, seed)
			if c.killAfter(t, delay) {
				kills++
			}
			if c.last > 0 {
				withData++
			}
			b := localBucket(t, dir)
			// Everything the child reported is on disk, exactly once.
			checkCrashLog(t, readLog(t, b, readOpts{}), seed, c.last, "after the kill")
			if len(activeFiles(t, dir)) > 0 {
				recovered++
			}

			// A new epoch recovers and goes on.
			r := resumeChild(t, dir, seed)
			if r.last < c.last {
				t.Fatalf("resumed at flushed ts %d, below the %d reported before the kill", r.last, c.last)
			}
			// Both epochs' chains are gapless and linked, the killed one's
			// sealed by recovery with the footers its links name, and the
			// progress and the fence name their ends.
			checkWriterChains(t, localBucket(t, dir), "crash")
			if n := len(activeFiles(t, dir)); n != 0 {
				t.Fatalf("%d active segments after a clean close", n)
			}
			checkCrashLog(t, readLog(t, b, readOpts{fenced: true}), seed, r.last, "after the restart")
		})
		if !ok {
			break
		}
	}
	t.Logf("%d trials in %v: %d killed mid-run, %d with flushed data, %d left an active segment to recover",
		trials, time.Since(start).Round(time.Millisecond), kills, withData, recovered)
}
