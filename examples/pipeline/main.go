// Command pipeline is a complete toy CDC pipeline around a redokit redo log:
// an upstream generator produces transactions and DDLs on a few tables, two
// captures (writer processes) each write their tables' changes to the redo
// log through a sink gate, a coordinator computes the log's global resolved
// ts and checkpoint (and runs GC), and the gates release changes to a SQLite
// downstream (the apply package's SQL sink) only once the log covers them. Halfway through, one capture
// dies; its tables move to the other at the log's checkpoint and are replayed
// from there. At the end the downstream must equal the upstream, and the
// program prints a short summary.
//
//	go run ./examples/pipeline                      # temp dir, removed at the end
//	go run ./examples/pipeline -dir /tmp/cdc -keep  # keep the log and the database
//	go run ./examples/pipeline -no-gate             # what the gate prevents
//
// With -check (the default) every downstream write first reads the log's meta
// object and counts any event above the global resolved ts it holds: with the
// gate there are none; with -no-gate nearly every write is one.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/gc"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/sinkgate"
	"github.com/redokit/redokit/writer"
)

const (
	logID   = "pipeline"
	startTs = 1000
)

type config struct {
	Dir           string // where the log and the database go; "" means a temp dir
	Keep          bool   // keep Dir (a temp dir is removed otherwise)
	Captures      int
	Tables        int
	Txns          int
	Rate          int // upstream transactions per second; 0: as fast as the pipeline takes them
	SegmentBytes  int64
	Seed          uint64
	FlushInterval time.Duration
	Tick          time.Duration // the coordinator's tick and the watcher's poll
	Failover      bool          // kill the last capture halfway
	NoGate        bool          // UNSAFE: write downstream at once, to show what the gate prevents
	Check         bool          // check every downstream write against the persisted watermark
}

func main() {
	var cfg config
	flag.StringVar(&cfg.Dir, "dir", "", "directory for the redo log and the SQLite database (default: a temp dir, removed at the end)")
	flag.BoolVar(&cfg.Keep, "keep", false, "keep the temp dir")
	flag.IntVar(&cfg.Captures, "captures", 2, "writer processes")
	flag.IntVar(&cfg.Tables, "tables", 4, "tables (one span each)")
	flag.IntVar(&cfg.Txns, "txns", 3000, "upstream transactions")
	flag.IntVar(&cfg.Rate, "rate", 3000, "upstream transactions per second (0: unpaced)")
	flag.Int64Var(&cfg.SegmentBytes, "segment-bytes", 64<<10, "redo segment size (small, so that GC has sealed segments to delete)")
	flag.Uint64Var(&cfg.Seed, "seed", 1, "upstream random seed")
	flag.DurationVar(&cfg.FlushInterval, "flush-interval", 20*time.Millisecond, "redo writers' flush interval")
	flag.DurationVar(&cfg.Tick, "tick", 10*time.Millisecond, "coordinator tick and watermark poll interval")
	flag.BoolVar(&cfg.Failover, "failover", true, "kill the last capture halfway and move its tables")
	flag.BoolVar(&cfg.NoGate, "no-gate", false, "UNSAFE: write downstream without waiting for the redo log")
	flag.BoolVar(&cfg.Check, "check", true, "check every downstream write against the log's persisted resolved ts")
	flag.Parse()
	if _, err := run(context.Background(), cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "pipeline:", err)
		os.Exit(1)
	}
}

// summary is what a run did.
type summary struct {
	Txns, Rows, DDLs int
	Elapsed          time.Duration
	ResolvedTs       uint64
	CheckpointTs     uint64
	Segments         int // in the log at the end
	GCDeleted        int64
	LogBytes         int64
	Released         int64 // events the gates released
	Batches          int64
	DownstreamRows   int
	Checks           int // downstream writes checked against the watermark
	Violations       int // events written downstream above it
	FirstViolation   string
	FailedOver       bool
	FailoverAt       uint64 // the upstream's ts when the capture died
	FailoverFrom     uint64 // the log's checkpoint its tables restarted at
	Replayed         int    // events the heir wrote again
}

// checked wraps a downstream: before each write it reads the log's meta
// object and counts every event above the global resolved ts it holds, and
// above the gate's released ts. The meta object is read before the write, and
// the watermark never goes backwards, so the check is conservative.
type checked struct {
	next     sinkgate.Downstream
	log      *redokit.Log  // nil: no checks
	released func() uint64 // the gate's released ts; nil without a gate

	mu         sync.Mutex
	checks     int
	violations int
	first      string
}

func (c *checked) Apply(ctx context.Context, evs []codec.Event) error {
	if c.log == nil {
		return c.next.Apply(ctx, evs)
	}
	m, err := c.log.Meta(ctx)
	if err != nil {
		return err
	}
	var rel uint64 = ^uint64(0)
	if c.released != nil {
		rel = c.released()
	}
	c.mu.Lock()
	c.checks++
	for i := range evs {
		if ts := evs[i].CommitTs(); ts > m.ResolvedTs || ts > rel {
			c.violations++
			if c.first == "" {
				c.first = fmt.Sprintf("an event at ts %d written downstream while the log's global resolved ts was %d", ts, m.ResolvedTs)
			}
		}
	}
	c.mu.Unlock()
	return c.next.Apply(ctx, evs)
}

// capture is one writer process: its redo writer, its gate and its release
// loop.
type capture struct {
	id     string
	w      *writer.Writer
	gate   *sinkgate.Gate // nil with NoGate
	down   *checked
	cancel context.CancelFunc
	done   chan error
	spans  []meta.SpanID
}

func (c *capture) write(ctx context.Context, span meta.SpanID, evs ...codec.Event) error {
	if c.gate != nil {
		return c.gate.Write(ctx, span, evs...)
	}
	// Without the gate: log first, then straight downstream, before the log
	// has made it durable or the other writers have caught up.
	if err := c.w.Write(ctx, span, evs...); err != nil {
		return err
	}
	return c.down.Apply(ctx, evs)
}

func (c *capture) resolve(span meta.SpanID, ts uint64) error {
	if c.gate != nil {
		return c.gate.AdvanceResolved(span, ts)
	}
	return c.w.AdvanceResolved(span, ts)
}

func (c *capture) addSpan(ctx context.Context, span meta.SpanID, ts uint64) error {
	c.spans = append(c.spans, span)
	if c.gate != nil {
		return c.gate.AddSpan(ctx, span, ts)
	}
	return c.w.AddSpan(span, ts)
}

func (c *capture) close(ctx context.Context) error {
	if c.gate != nil {
		err := c.gate.Close(ctx)
		c.cancel()
		if rerr := <-c.done; rerr != nil && !errors.Is(rerr, context.Canceled) {
			err = errors.Join(err, rerr)
		}
		return err
	}
	return c.w.Close(ctx)
}

// run runs the pipeline and prints its summary to out.
func run(ctx context.Context, cfg config, out io.Writer) (*summary, error) {
	cfg.Captures = max(cfg.Captures, 1)
	cfg.Tables = max(cfg.Tables, cfg.Captures)
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = 20 * time.Millisecond
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 10 * time.Millisecond
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "redokit-pipeline-")
		if err != nil {
			return nil, err
		}
		dir = d
		if !cfg.Keep {
			defer os.RemoveAll(dir)
		}
	}
	b, err := local.New(filepath.Join(dir, "redo"), &local.Options{CreateDir: true})
	if err != nil {
		return nil, err
	}
	defer b.Close()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	log, err := redokit.Open(ctx, b, logID)
	if err != nil {
		return nil, err
	}
	coord, err := log.OpenCoordinator(ctx, &meta.CoordinatorOptions{StartTs: startTs})
	if err != nil {
		return nil, err
	}
	var gcDeleted atomic.Int64
	collector := log.StartGC(ctx, &gc.SchedulerOptions{Interval: 50 * time.Millisecond, OnCycle: func(r *gc.Result, err error) {
		if err == nil {
			gcDeleted.Add(int64(r.Deleted))
		}
	}})
	defer collector.Close()
	coordDone := make(chan struct{})
	cctx, stopCoord := context.WithCancel(ctx)
	go func() {
		defer close(coordDone)
		coord.Run(cctx, cfg.Tick)
	}()
	defer func() { stopCoord(); <-coordDone }()

	up := newUpstream(cfg.Tables, cfg.Seed, startTs)
	sink, err := openSink(ctx, filepath.Join(dir, "downstream.db"), up.tables)
	if err != nil {
		return nil, err
	}
	defer sink.Close()

	checkpoints := sinkgate.NewCheckpoints(coord)
	watcher := log.Watcher(cfg.Tick)
	var caps []*capture
	var zombies []*writer.Writer
	defer func() {
		for _, z := range zombies {
			z.Close(context.Background()) // fenced: it can only fail
		}
	}()
	for i := range cfg.Captures {
		c := &capture{id: fmt.Sprintf("capture-%d", i), done: make(chan error, 1)}
		c.w, err = log.OpenWriter(ctx, c.id, &writer.Options{FlushInterval: cfg.FlushInterval, MaxSegmentBytes: cfg.SegmentBytes})
		if err != nil {
			return nil, err
		}
		if err := coord.AddWriter(ctx, c.id); err != nil {
			return nil, err
		}
		c.down = &checked{next: sink}
		if cfg.Check {
			c.down.log = log
		}
		if !cfg.NoGate {
			c.gate = sinkgate.New(c.w, watcher, checkpoints.Join(c.id, startTs), c.down, &sinkgate.Options{MaxHeldBytes: 1 << 20, Log: log})
			c.down.released = c.gate.Released
			rctx, rcancel := context.WithCancel(ctx)
			c.cancel = rcancel
			go func() { c.done <- c.gate.Run(rctx) }()
		}
		caps = append(caps, c)
	}
	all := caps // every capture that ran, for the totals
	owner := map[meta.SpanID]*capture{}
	for i, t := range up.tables {
		c := caps[i%len(caps)]
		// The span holds the watermark at the start ts until its owner
		// reports more: so does every span after a failover.
		if err := coord.AddSpan(ctx, t.span, startTs); err != nil {
			return nil, err
		}
		if err := c.addSpan(ctx, t.span, startTs); err != nil {
			return nil, err
		}
		owner[t.span] = c
	}

	s := &summary{Txns: cfg.Txns}
	began := time.Now()
	resolveAll := func() error {
		for span, c := range owner {
			if err := c.resolve(span, up.ts); err != nil {
				return fmt.Errorf("%s: resolve span %d: %w", c.id, span, err)
			}
		}
		return nil
	}
	for n := range cfg.Txns {
		var err error
		if n%250 == 249 {
			span, ev := up.ddl()
			err = owner[span].write(ctx, span, ev)
		} else {
			span, evs := up.txn()
			err = owner[span].write(ctx, span, evs...)
		}
		if err != nil {
			return nil, err
		}
		if n%20 == 19 {
			if err := resolveAll(); err != nil {
				return nil, err
			}
			if cfg.Rate > 0 {
				// An upstream has its own pace; the pipeline follows it.
				due := began.Add(time.Duration(n+1) * time.Second / time.Duration(cfg.Rate))
				time.Sleep(time.Until(due))
			}
		}
		if cfg.Failover && !cfg.NoGate && len(caps) > 1 && n == cfg.Txns/2 {
			// Die once the downstream has applied half of what the
			// upstream produced, so the failover has applied data behind
			// it and a tail to replay, however slow the machine.
			if err := waitCheckpoint(ctx, coord, startTs+(up.ts-startTs)/2, cfg.Tick); err != nil {
				return nil, err
			}
			z, err := failover(ctx, log, coord, checkpoints, up, caps, owner, s)
			if err != nil {
				return nil, fmt.Errorf("failover: %w", err)
			}
			zombies = append(zombies, z)
			caps = caps[:len(caps)-1]
		}
	}
	if err := resolveAll(); err != nil {
		return nil, err
	}
	// Each gate's Close waits until the log covers what its writer flushed,
	// releases it, and reports the final checkpoint.
	for _, c := range caps {
		if err := c.close(ctx); err != nil {
			return nil, fmt.Errorf("%s: close: %w", c.id, err)
		}
	}
	s.Elapsed = time.Since(began)
	m, err := coord.Tick(ctx)
	if err != nil {
		return nil, err
	}
	s.Rows, s.DDLs = up.rows, up.ddls
	s.ResolvedTs, s.CheckpointTs = m.ResolvedTs, m.CheckpointTs
	for _, c := range all {
		if c.gate != nil {
			gs := c.gate.Stats()
			s.Released += gs.Released
			s.Batches += gs.Batches
		}
		c.down.mu.Lock()
		s.Checks += c.down.checks
		s.Violations += c.down.violations
		if s.FirstViolation == "" {
			s.FirstViolation = c.down.first
		}
		c.down.mu.Unlock()
	}
	if err := collector.Close(); err != nil {
		return nil, err
	}
	s.GCDeleted = gcDeleted.Load()
	for seg, err := range log.Segments(ctx) {
		if err != nil {
			return nil, err
		}
		s.Segments++
		s.LogBytes += seg.Size
	}
	rep, err := log.Verify(ctx, nil)
	if err != nil {
		return nil, err
	}
	if !rep.OK() {
		return nil, fmt.Errorf("the redo log does not verify: %v", rep.Errors())
	}
	s.DownstreamRows, err = sink.compare(ctx, up.tables)
	matches := err == nil
	printSummary(out, cfg, dir, s, matches, err)
	if err != nil && !cfg.NoGate {
		return s, fmt.Errorf("the downstream does not match the upstream: %w", err)
	}
	return s, nil
}

// failover kills the last capture (its release loop stops, its writer is
// abandoned and fenced, its held events are lost with it) and moves its
// tables to the first capture at the log's checkpoint: the new owner writes
// them again from there, and the downstream, written idempotently, absorbs
// the overlap. It returns the dead capture's writer (a zombie).
func failover(ctx context.Context, log *redokit.Log, coord *meta.Coordinator, cks *sinkgate.Checkpoints,
	up *upstream, caps []*capture, owner map[meta.SpanID]*capture, s *summary) (*writer.Writer, error) {
	dead, heir := caps[len(caps)-1], caps[0]
	dead.cancel()
	<-dead.done
	// Taking the writer ID fences the dead process, should it wake up.
	if err := log.FenceWriter(ctx, dead.id); err != nil {
		return nil, err
	}
	if err := coord.RemoveWriter(ctx, dead.id); err != nil {
		return nil, err
	}
	cp := coord.Meta().CheckpointTs
	s.FailedOver, s.FailoverAt, s.FailoverFrom = true, up.ts, cp
	for _, span := range dead.spans {
		// AddSpan lowers the heir's reported checkpoint to cp at once, so
		// the dead member can leave without the checkpoint jumping ahead.
		if err := heir.addSpan(ctx, span, cp); err != nil {
			return nil, err
		}
		owner[span] = heir
		// Replay one commit ts at a time, resolving behind it, so the
		// gate can release (and the watermark pass) while it replays.
		evs := up.since(span, cp)
		s.Replayed += len(evs)
		for i := 0; i < len(evs); {
			j := i
			for j < len(evs) && evs[j].CommitTs() == evs[i].CommitTs() {
				j++
			}
			if err := heir.write(ctx, span, evs[i:j]...); err != nil {
				return nil, err
			}
			if err := heir.resolve(span, evs[i].CommitTs()); err != nil {
				return nil, err
			}
			i = j
		}
	}
	cks.Leave(dead.id)
	return dead.w, nil
}

func printSummary(out io.Writer, cfg config, dir string, s *summary, matches bool, mismatch error) {
	mode := "through the sink gate"
	if cfg.NoGate {
		mode = "WITHOUT the sink gate (unsafe)"
	}
	fmt.Fprintf(out, "pipeline: %d captures, %d tables, %d transactions (%d row changes, %d DDLs) %s in %v\n",
		cfg.Captures, cfg.Tables, s.Txns, s.Rows, s.DDLs, mode, s.Elapsed.Round(time.Millisecond))
	if s.FailedOver {
		fmt.Fprintf(out, "failover: capture-%d died at ts %d; its tables moved to capture-0 at the log's checkpoint %d (%d events written again)\n",
			cfg.Captures-1, s.FailoverAt, s.FailoverFrom, s.Replayed)
	}
	fmt.Fprintf(out, "redo log: %s: global resolved ts %d, checkpoint %d; %d segments (%d bytes) in it, %d deleted by GC\n",
		filepath.Join(dir, "redo"), s.ResolvedTs, s.CheckpointTs, s.Segments, s.LogBytes, s.GCDeleted)
	if !cfg.NoGate {
		fmt.Fprintf(out, "gates: %d events released downstream in %d batches\n", s.Released, s.Batches)
	}
	if cfg.Check {
		fmt.Fprintf(out, "watermark check: %d downstream writes checked, %d events written above the log's global resolved ts\n", s.Checks, s.Violations)
		if s.FirstViolation != "" {
			fmt.Fprintf(out, "  first: %s\n", s.FirstViolation)
		}
	}
	if matches {
		fmt.Fprintf(out, "downstream: %s: %d rows, equal to the upstream\n", filepath.Join(dir, "downstream.db"), s.DownstreamRows)
	} else {
		fmt.Fprintf(out, "downstream: %s: differs from the upstream: %v\n", filepath.Join(dir, "downstream.db"), mismatch)
	}
}

// waitCheckpoint waits until the log's checkpoint reaches ts.
func waitCheckpoint(ctx context.Context, coord *meta.Coordinator, ts uint64, poll time.Duration) error {
	t := time.NewTicker(poll)
	defer t.Stop()
	for coord.Meta().CheckpointTs < ts {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
