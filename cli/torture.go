package cli

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/conformance/torture"
)

// tortureOptions are the flags of torture.
type tortureOptions struct {
	duration time.Duration
	seed     uint64
	writers  int
	quota    int64
	broken   string // hidden: a broken mode of the Liar, for tests
}

// tortureChildEnv marks a process started as a torture writer (the test
// binary's TestMain runs the CLI when it is set).
const tortureChildEnv = "REDOKIT_TORTURE_CHILD"

// tortureBrokenEnv selects a broken mode of the Liar, like --broken.
const tortureBrokenEnv = "REDOKIT_TORTURE_BROKEN"

func (a *app) tortureCmd() *cobra.Command {
	var o tortureOptions
	cmd := &cobra.Command{
		Use:   "torture",
		Short: "Prove on a bucket that no acknowledged event is lost, skipped or altered",
		Long: `torture runs redokit's history checker against the bucket of --storage: writer
processes (this binary, re-executed) write a randomized workload of rows and
DDLs over several spans and append every flush they were told is durable to a
history file they fsync; the parent kills them with SIGKILL at random and
starts them again (a new epoch each time), and runs the coordinator, a sink
moving the checkpoint, GC and readers meanwhile. Writers and parent lose
answers of stored writes, see writes refused, delayed and reordered (a lying
wrapper around the driver). At the end, with the faults off, every
acknowledged event above the final checkpoint must read back exactly once,
in commit-ts order, and every read made during the run must have been whole
or ended in an error; no read may return an event a fenced writer epoch
holds above its committed ts. See the rules in the package doc of
github.com/redokit/redokit/conformance/torture.

--quota forces staged runs: every writer gets that small a memory quota, and
now and then one span lags (its resolved ts held back, as by a long
transaction), so that writers store events above their committed ts before
they are resolved (stage cuts), and writer processes are killed with such
events stored. The verdict counts the stage cuts; a run that made none says
so. The workload writes a few KiB between flushes: a quota of 1 MiB never
fills, 2048 (torture.StageQuota) fills many times a run.

The verdict is PASS with counts (exit 0) or FAIL naming each rule broken and
its evidence (exit 1). Everything happens under a fresh scratch prefix
(redokit-torture-…/) that is removed afterwards, also on failure; nothing
outside it is read or written. mem:// is process-local: there the writers
run in this process (abandoned instead of killed).`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{annStorage: "1"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(cmd); err != nil {
				return err
			}
			return a.runTorture(cmd.Context(), &o)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.duration, "duration", 10*time.Second, "how long the writers write")
	f.Uint64Var(&o.seed, "seed", 0, "seed of the workload and the faults (default: random, printed)")
	f.IntVar(&o.writers, "writers", 3, "writer processes (writer IDs)")
	f.Int64Var(&o.quota, "quota", 0, "writers' memory quota in bytes, FlushBytes a quarter of it, with lagging spans: a quota the workload fills forces stage cuts (2048 does, 1 MiB never fills; 0: the writers' default, 256 MiB, no lagging span)")
	f.StringVar(&o.broken, "broken", "", "break the store on purpose: misreport-lost, list-skip or stale-meta (tests)")
	_ = f.MarkHidden("broken")
	return cmd
}

func (o *tortureOptions) validate(cmd *cobra.Command) error {
	if o.broken == "" {
		o.broken = os.Getenv(tortureBrokenEnv)
	}
	switch {
	case o.duration <= 0 || o.duration > 24*time.Hour:
		return usageErrorf("--duration must be positive and at most 24h")
	case o.writers < 1 || o.writers > 16:
		return usageErrorf("--writers must be between 1 and 16")
	case o.quota < 0:
		return usageErrorf("--quota must not be negative (0: the writers' default)")
	case o.broken != "" && o.broken != string(blobtest.BrokenMisreport) && o.broken != string(blobtest.BrokenListSkip) && o.broken != string(blobtest.BrokenStale):
		return usageErrorf("--broken %q: want %s, %s or %s", o.broken, blobtest.BrokenMisreport, blobtest.BrokenListSkip, blobtest.BrokenStale)
	}
	if !cmd.Flags().Changed("seed") {
		var b [8]byte
		_, _ = crand.Read(b[:])
		o.seed = binary.LittleEndian.Uint64(b[:]) >> 1
	}
	return nil
}

// schedule is the Liar's schedule of one process of the run.
func (o *tortureOptions) schedule(seed uint64) blobtest.Schedule {
	s := torture.Faults(seed)
	if o.broken == string(blobtest.BrokenStale) {
		// Stats and reads of the meta object and the writer states answer
		// older versions (consistent and torn windows), in the final
		// check too: the writers, the coordinator and the readers must
		// not take them for the newest.
		s.Broken = blobtest.BrokenStale
		return s
	}
	if o.broken != "" {
		// Segments only: a misreported state or meta put may heal (its
		// writer reads the object back); a lost segment cannot. Every
		// listing leaves out a recent segment of every writer: a correct
		// reader turns that into an error, and the final reads meet one.
		s.Kinds = []blobtest.PutKind{blobtest.KindSegment}
		s.LostAnswer = 0.1
		s.Broken = blobtest.Broken(o.broken)
		if s.Broken == blobtest.BrokenListSkip {
			s.ListSkip, s.SkipRecent = 1, true
		}
	}
	return s
}

func (a *app) runTorture(ctx context.Context, o *tortureOptions) (err error) {
	b, err := a.open(ctx)
	if err != nil {
		return err
	}
	defer b.Close()
	sb, prefix, cleanup, err := openScratch(ctx, b, "torture")
	if err != nil {
		return err
	}
	defer cleanup(&err)
	liar := blobtest.NewLiar(blobtest.BucketDriver(b), o.schedule(o.seed))
	lb, err := liar.Bucket().Prefixed(prefix)
	if err != nil {
		return err
	}
	cfg := torture.Config{
		Bucket: lb, Clean: sb, Liar: liar, Seed: o.seed, Writers: o.writers,
		Steps: 1 << 40, Duration: o.duration, MemoryQuota: o.quota,
	}
	if o.broken == string(blobtest.BrokenStale) {
		// Spans added behind barriers (in-process writers): what a stale
		// meta object that predates them would lose.
		cfg.GrowSpans = 3
	}
	if a.verbose {
		// The children's output, these lines and the store's log records
		// (quietDefaultLogs) reach stderr from several goroutines at once.
		prev := a.stderr
		a.stderr = &lockedWriter{w: prev}
		defer func() { a.stderr = prev }()
		cfg.Logf = func(format string, args ...any) { fmt.Fprintf(a.stderr, "torture: "+format+"\n", args...) }
	}
	defer a.quietDefaultLogs()()
	var rep *torture.Report
	u, _ := url.Parse(a.storage)
	if u != nil && u.Scheme == "mem" {
		rep, err = torture.Run(ctx, cfg)
		if rep == nil {
			return err
		}
		rep.Mode = "in-process writers (mem:// is process-local: abandoned, not killed)"
	} else {
		rep, err = a.tortureProcesses(ctx, o, cfg, prefix)
		if rep == nil {
			return err
		}
		rep.Mode = "writer processes killed with SIGKILL"
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	rep.Storage = a.storageShown()
	if a.jsonOut {
		if perr := a.printJSON(struct {
			Verdict string `json:"verdict"`
			*torture.Report
			Rules  []string `json:"broken_rules"`
			Prefix string   `json:"scratch_prefix"`
			Error  string   `json:"error,omitempty"`
		}{map[bool]string{true: "PASS", false: "FAIL"}[rep.OK() && err == nil], rep, rep.BrokenRules(), prefix, errString(err)}); perr != nil {
			return perr
		}
	} else {
		fmt.Fprintf(a.stdout, "redokit torture on %s, scratch prefix %s\n%s, %s, %v, seed %d\n",
			rep.Storage, prefix, rep.Mode, plural(o.writers, "writer"), o.duration, o.seed)
		if rep.Faults != "" {
			fmt.Fprintf(a.stdout, "faults injected (coordinator, GC, readers): %s\n", rep.Faults)
		}
		if rep.WriterFaults != "" {
			fmt.Fprintf(a.stdout, "faults injected (writer processes, as last recorded): %s\n", rep.WriterFaults)
		}
		if !rep.OK() && o.quota > 0 {
			// A PASS verdict says it.
			fmt.Fprintf(a.stdout, "staging: %s\n", rep.Staging())
		}
		for _, v := range rep.Violations {
			fmt.Fprintf(a.stdout, "VIOLATION %s\n", v)
		}
		if rep.Suppressed > 0 {
			fmt.Fprintf(a.stdout, "(%d more violations of the same rules not shown)\n", rep.Suppressed)
		}
		fmt.Fprintln(a.stdout, rep.Verdict())
		if err != nil {
			fmt.Fprintf(a.stdout, "the run stopped early: %v\n", err)
		}
	}
	if !rep.OK() || err != nil {
		return errSilent
	}
	return nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// child is one writer process of a run.
type child struct {
	id      string
	spans   []uint64
	history string
	cmd     *exec.Cmd
	done    chan struct{}
	runs    int
}

// tortureProcesses runs the writers as child processes, killing and
// restarting them at random, with the session's coordinator, GC and readers
// in this process; then stops them and checks the histories they left.
func (a *app) tortureProcesses(ctx context.Context, o *tortureOptions, cfg torture.Config, prefix string) (*torture.Report, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this binary to start writer processes: %w", err)
	}
	dir, err := os.MkdirTemp("", "redokit-torture-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	s, err := torture.NewSession(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s.Start(ctx)
	start := time.Now()
	spans := s.Spans()
	var children []*child
	for i, id := range s.WriterIDs() {
		c := &child{id: id, history: filepath.Join(dir, id+".history")}
		for j, sp := range spans {
			if j%len(s.WriterIDs()) == i {
				c.spans = append(c.spans, sp)
			}
		}
		children = append(children, c)
	}
	var runErr error
	// Children's own messages (a writer that failed under the faults, as
	// expected) only with --verbose, one line at a time.
	var childOut *lockedWriter
	if a.verbose {
		childOut = &lockedWriter{w: a.stderr}
	}
	startChild := func(c *child) error {
		c.runs++
		args := []string{"torture-child", "--torture-prefix", prefix, "--writer-id", c.id,
			"--spans", joinUints(c.spans), "--seed", strconv.FormatUint(o.seed, 10),
			"--incarnation", strconv.Itoa(c.runs), "--history", c.history,
			"--start", strconv.FormatInt(start.UnixNano(), 10)}
		if o.broken != "" {
			args = append(args, "--broken", o.broken)
		}
		if o.quota > 0 {
			args = append(args, "--quota", strconv.FormatInt(o.quota, 10))
		}
		cmd := exec.Command(exe, args...)
		// The storage URL goes through the environment, never argv, where
		// any user of the machine could read its credentials.
		cmd.Env = append(os.Environ(), tortureChildEnv+"=1", "REDOKIT_STORAGE="+a.storage)
		if childOut != nil {
			cmd.Stdout, cmd.Stderr = childOut, childOut
		}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start writer %s: %w", c.id, err)
		}
		c.cmd = cmd
		c.done = make(chan struct{})
		go func() {
			cmd.Wait()
			close(c.done)
		}()
		return nil
	}
	for _, c := range children {
		if err := startChild(c); err != nil {
			runErr = err
		}
	}
	r := rand.New(rand.NewPCG(o.seed, 0x7e11))
	deadline := time.After(o.duration)
	for runErr == nil {
		next := time.Duration(150+r.IntN(450)) * time.Millisecond
		select {
		case <-ctx.Done():
			runErr = ctx.Err()
			continue
		case <-deadline:
		case <-time.After(next):
			c := children[r.IntN(len(children))]
			c.cmd.Process.Signal(syscall.SIGKILL)
			<-c.done
			s.Count(func(n *torture.Counts) { n.Kills++ })
			runErr = startChild(c)
			// A child that ended by itself (a writer that failed for good)
			// is started again too.
			for _, d := range children {
				select {
				case <-d.done:
					s.Count(func(n *torture.Counts) { n.Failovers++ })
					if err := startChild(d); err != nil {
						runErr = err
					}
				default:
				}
			}
			continue
		}
		break
	}
	for _, c := range children {
		if c.cmd != nil {
			c.cmd.Process.Signal(syscall.SIGKILL)
			<-c.done
		}
	}
	var files []string
	for _, c := range children {
		files = append(files, c.history)
	}
	h, err := torture.ReadHistory(files...)
	if err != nil {
		return nil, err
	}
	for _, a := range h.Acks {
		s.Ack(a)
	}
	for _, v := range h.Violations {
		s.Violate(v.Rule, v.Evidence)
	}
	for _, op := range h.Opens {
		s.NoteOpen(op.Writer, op.Epoch)
	}
	// One ack line per flush names every span of its writer.
	flushes := 0
	for _, c := range children {
		for _, a := range h.Acks {
			if a.Writer == c.id && a.Span == c.spans[0] {
				flushes++
			}
		}
	}
	s.Count(func(n *torture.Counts) {
		n.Flushes += int64(flushes)
		n.StageCuts += h.StageCuts
		n.StagedEvents += h.StagedEvents
		n.QuotaOvercommits += h.QuotaOvercommits
	})
	rep := s.Finish(context.WithoutCancel(ctx))
	rep.WriterFaults = summary(h.Faults)
	return rep, runErr
}

func joinUints(v []uint64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatUint(x, 10)
	}
	return strings.Join(s, ",")
}

// tortureChildCmd is the hidden command a torture writer process runs.
func (a *app) tortureChildCmd() *cobra.Command {
	var (
		prefix, writerID, spans, history, broken string
		seed                                     uint64
		incarnation                              int
		startNano, quota                         int64
	)
	cmd := &cobra.Command{
		Use:         "torture-child",
		Short:       "a writer process of redokit torture (internal)",
		Hidden:      true,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{annStorage: "1"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			var sp []uint64
			for _, f := range strings.Split(spans, ",") {
				n, err := strconv.ParseUint(f, 10, 64)
				if err != nil {
					return usageErrorf("--spans %q: %v", spans, err)
				}
				sp = append(sp, n)
			}
			ctx := cmd.Context()
			b, err := a.open(ctx)
			if err != nil {
				return err
			}
			defer b.Close()
			clean, err := b.Prefixed(prefix)
			if err != nil {
				return err
			}
			o := &tortureOptions{broken: broken}
			// Each incarnation of each writer loses other answers.
			liar := blobtest.NewLiar(blobtest.BucketDriver(b), o.schedule(seed^uint64(incarnation)<<32^uint64(len(writerID))<<48^hashString(writerID)))
			lb, err := liar.Bucket().Prefixed(prefix)
			if err != nil {
				return err
			}
			h, err := os.OpenFile(history, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
			if err != nil {
				return err
			}
			defer h.Close()
			err = torture.RunChild(ctx, torture.ChildConfig{
				Bucket: lb, Clean: clean, LogID: "torture", Seed: seed, WriterID: writerID, Spans: sp,
				History: h, Start: time.Unix(0, startNano), Liar: liar, Incarnation: incarnation,
				MemoryQuota: quota,
			})
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&prefix, "torture-prefix", "", "scratch prefix")
	f.StringVar(&writerID, "writer-id", "", "writer ID")
	f.StringVar(&spans, "spans", "", "spans, comma-separated")
	f.StringVar(&history, "history", "", "history file")
	f.StringVar(&broken, "broken", "", "broken mode of the Liar")
	f.Uint64Var(&seed, "seed", 0, "seed")
	f.IntVar(&incarnation, "incarnation", 0, "how many times this writer was started")
	f.Int64Var(&startNano, "start", 0, "the run's clock origin, Unix nanoseconds")
	f.Int64Var(&quota, "quota", 0, "the writer's memory quota (torture --quota)")
	return cmd
}

func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// lockedWriter serializes the writes of several children's output copiers.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// summary is a Liar's counts as one sorted line.
func summary(c map[string]int) string {
	keys := slices.Sorted(maps.Keys(c))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, c[k])
	}
	return strings.Join(parts, " ")
}

// quietDefaultLogs routes slog.Default, where drivers log (the S3 driver
// passes the AWS SDK's records on to it), to stderr with --verbose and
// nowhere otherwise, until the returned func restores it. Under torture's
// faults a store's SDK warns (a retry it could not rewind), and those lines
// are noise among the verdict, like the writer processes' own messages,
// which also show only with --verbose.
func (a *app) quietDefaultLogs() (restore func()) {
	prev, out, flags := slog.Default(), log.Writer(), log.Flags()
	h := slog.DiscardHandler
	if a.verbose {
		h = a.logger().Handler()
	}
	slog.SetDefault(slog.New(h))
	return func() {
		slog.SetDefault(prev)
		// SetDefault pointed package log at the handler; the default
		// handler writes through package log, so put it back as it was.
		log.SetOutput(out)
		log.SetFlags(flags)
	}
}
