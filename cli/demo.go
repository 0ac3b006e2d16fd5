package cli

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/gc"
	"github.com/redokit/redokit/testkit/workload"
)

// demoReport is everything the demo measured; --json prints it whole.
type demoReport struct {
	Dir      string `json:"dir"`
	Storage  string `json:"storage"`
	Log      string `json:"log"`
	SQLite   string `json:"sqlite"`
	Seed     uint64 `json:"seed,string"` // a seed is a string too: --seed takes any uint64
	Writers  int    `json:"writers"`
	Tables   int    `json:"tables"`
	Txns     int64  `json:"transactions"`
	Rows     int64  `json:"rows"`
	DDLs     int64  `json:"ddls"`
	LastTs   uint64 `json:"last_commit_ts,string"` // ts are JSON strings (see jsonts.go)
	Resolved uint64 `json:"global_resolved_ts,string"`

	Written      writeTotals `json:"written"`
	WriteSeconds float64     `json:"write_seconds"`
	WriteEvPerS  float64     `json:"write_events_per_second"`
	WriteMBPerS  float64     `json:"write_payload_mb_per_second"`

	SinkApply    *applySummary `json:"sink_apply"` // the downstream during normal operation, up to the checkpoint
	SinkAhead    *applySummary `json:"sink_ahead"` // the downstream past the checkpoint before the disaster
	Checkpoint   uint64        `json:"checkpoint_ts,string"`
	GC           *gcSummary    `json:"gc"`
	Failover     *failover     `json:"failover"`
	Recovery     *applySummary `json:"recovery"` // the replay after the disaster
	LogVerify    *verifySum    `json:"log_verify"`
	Segments     int           `json:"segments_left"`
	StoredLeft   int64         `json:"bytes_left"`
	Comparison   *comparison   `json:"comparison"`
	OK           bool          `json:"ok"`
	TotalSeconds float64       `json:"total_seconds"`
}

type gcSummary struct {
	Deleted    int   `json:"deleted"`
	FreedBytes int64 `json:"freed_bytes"`
	Listed     int   `json:"listed"`
}

type verifySum struct {
	OK       bool   `json:"ok"`
	Segments int    `json:"segments"`
	Blocks   int64  `json:"blocks"`
	Events   int64  `json:"events"`
	Errors   int    `json:"errors"`
	First    string `json:"first_error,omitempty"`
}

func (a *app) demoCmd() *cobra.Command {
	var (
		wf  workloadFlags
		dir string
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Write, fail over, collect, replay into SQLite and verify a redo log, end to end",
		Long: `demo runs the whole life of a redo log on this machine, with nothing to set up:

  1. write    a generated CDC workload (tables, one split into spans across
              writers, inserts/updates/deletes, create/add column/truncate/drop
              DDLs) through 3 real redo writers, a coordinator computing the
              global resolved ts;
  2. sink     the downstream (SQLite) applies the log up to the global resolved ts,
              and the checkpoint moves there;
  3. gc       segments wholly below the checkpoint are deleted;
  4. failover one writer is killed mid-stream; a new process takes its writer ID
              (a new epoch fences the old one) and rewrites its spans from the
              checkpoint: the log now holds duplicates;
  5. recovery after the "disaster" the log's (checkpoint, global resolved] is
              replayed into the SQLite file (the downstream had got ahead of the
              checkpoint: those events are skipped, duplicates dropped);
  6. verify   the log is verified block by block, and the SQLite file is compared
              with the upstream state the workload reached, computed by an
              independent model.

The log goes to a local directory (--dir, default a new folder under the system
temp dir) or to --storage; the SQLite file always goes to the directory. The exit
code is 1 if the verification fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := wf.validate(); err != nil {
				return err
			}
			if a.logID == "" {
				a.logID = "demo"
			}
			return a.runDemo(cmd.Context(), &wf, dir)
		},
	}
	wf.register(cmd.Flags(), 50000, 50*time.Millisecond, 256<<10)
	cmd.Flags().StringVar(&dir, "dir", "", "directory for the log and the SQLite file (default: a new folder under the system temp dir)")
	return cmd
}

// say prints a line of the demo's running report (not with --json).
func (a *app) say(format string, args ...any) {
	if !a.jsonOut {
		fmt.Fprintf(a.stdout, format+"\n", args...)
	}
}

func (a *app) runDemo(ctx context.Context, wf *workloadFlags, dir string) error {
	started := time.Now()
	var err error
	if dir == "" {
		if dir, err = os.MkdirTemp("", "redokit-demo-"); err != nil {
			return err
		}
	} else {
		if dir, err = filepath.Abs(dir); err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	dbPath := filepath.Join(dir, "replica.db")
	if _, err := os.Stat(dbPath); err == nil {
		return fmt.Errorf("%s already exists: pick another --dir (the demo never deletes anything)", dbPath)
	}
	// What to pass to --storage to look at the log afterwards: never with
	// a credential in it (storageShown redacts).
	lookArg := ""
	if a.storage == "" {
		a.storage = (&url.URL{Scheme: "file", Path: filepath.Join(dir, "redo")}).String()
		lookArg = shellQuote(filepath.Join(dir, "redo"))
	} else {
		lookArg = shellQuote(a.storageShown())
	}
	cfg := wf.config()
	rep := &demoReport{Dir: dir, Storage: a.storageShown(), Log: a.logID, SQLite: dbPath, Seed: wf.seed, Writers: wf.writers, Tables: wf.tables}
	sinkURI := (&url.URL{Scheme: "sqlite", Path: dbPath}).String()

	b, err := openStorage(ctx, withCreateDir(a.storage))
	if err != nil {
		return err
	}
	defer b.Close()
	p, err := newPipeline(ctx, b, a.logID, cfg, wf.writers, wf.writerOptions(), a.logger())
	if err != nil {
		return err
	}
	defer p.abort()
	stopCoord := p.runCoordinator(ctx, 100*time.Millisecond)
	defer stopCoord()

	where := lookArg
	if isMemStorage(a.storage) {
		where += " (in memory: gone when the demo ends)"
	}
	a.say("redokit demo: log %q in %s, downstream SQLite %s", a.logID, where, dbPath)
	a.say("  [write]    %d row changes over %s (t1 split into %d spans), DDL rate %g, seed %d, through %s; a coordinator ticks every 100ms",
		cfg.Rows, plural(cfg.Tables, "table"), cfg.SplitSpans, wf.ddlRate, wf.seed, plural(wf.writers, "writer"))

	// Phases trigger on the share of rows written: the sink and GC at 40%,
	// the downstream running ahead of the checkpoint at 55%, the failover
	// at 65% (between flushes, so the dead writer loses what it buffered).
	sinkAt, aheadAt, failAt := int64(cfg.Rows)*40/100, int64(cfg.Rows)*55/100, int64(cfg.Rows)*65/100
	victim := min(1, wf.writers-1)
	g := workload.New(cfg)
	bar := a.bar(int64(cfg.Rows), "writing", false)
	var inPhases time.Duration // time spent in the sink, GC and failover, not writing
	writeStart := time.Now()
	for {
		tx, ok := g.Next()
		if !ok {
			break
		}
		if err := p.route(ctx, tx, -1); err != nil {
			return err
		}
		if p.txns%64 == 0 {
			_ = bar.Set64(p.rows)
		}
		switch {
		case rep.SinkApply == nil && p.rows >= sinkAt:
			t0 := time.Now()
			if err := a.demoSinkAndGC(ctx, b, p, sinkURI, rep, bar); err != nil {
				return err
			}
			inPhases += time.Since(t0)
		case rep.SinkAhead == nil && p.rows >= aheadAt:
			t0 := time.Now()
			if err := a.demoSinkAhead(ctx, b, p, sinkURI, rep, bar); err != nil {
				return err
			}
			inPhases += time.Since(t0)
		case rep.Failover == nil && p.rows >= failAt:
			t0 := time.Now()
			if err := a.demoFailover(ctx, p, rep, victim, bar); err != nil {
				return err
			}
			inPhases += time.Since(t0)
		}
	}
	resolved, err := p.closeAll(ctx)
	_ = bar.Finish()
	if err != nil {
		return err
	}
	stopCoord()
	writeTime := time.Since(writeStart) - inPhases
	rep.Txns, rep.Rows, rep.DDLs, rep.LastTs, rep.Resolved = p.txns, p.rows, p.ddls, p.lastTs, resolved
	rep.Written = p.totals()
	rep.WriteSeconds = writeTime.Seconds()
	rep.WriteEvPerS = float64(rep.Written.Events) / rep.WriteSeconds
	rep.WriteMBPerS = float64(rep.Written.PayloadBytes) / 1e6 / rep.WriteSeconds
	a.say("  [written]  %d transactions (%d row changes, %d DDLs) → %d events in %d segments, %s stored, %s encoded: compression %.2fx; %.2fs, %.0f events/s, %.1f MB/s",
		rep.Txns, rep.Rows, rep.DDLs, rep.Written.Events, rep.Written.Segments, humanBytes(rep.Written.StoredBytes),
		humanBytes(rep.Written.PayloadBytes), rep.Written.ratio(), rep.WriteSeconds, rep.WriteEvPerS, rep.WriteMBPerS)
	if resolved != p.lastTs {
		a.say("  warning: the global resolved ts %d did not reach the last commit ts %d", resolved, p.lastTs)
	}

	// The disaster: the downstream is wherever it got to; replay the log
	// from the checkpoint in the meta object, as 'redokit apply' does.
	m, err := a.log(b).Meta(ctx)
	if err != nil {
		return err
	}
	rep.Checkpoint = m.CheckpointTs
	rec, err := a.applyRange(ctx, b, sinkURI, m.CheckpointTs, m.ResolvedTs, nil, nil)
	if err != nil {
		return err
	}
	rep.Recovery = rec
	a.say("  [recover]  replayed (checkpoint %d, global resolved %d]: %d events from %d segments, %d rows and %d DDLs applied, %d skipped (already downstream), %d duplicates dropped; %.2fs, %.0f rows/s",
		m.CheckpointTs, m.ResolvedTs, rec.Events, rec.Segments, rec.Rows, rec.DDLs, rec.Skipped, rec.Duplicates, rec.Seconds, rec.RowsPerSec)

	// Verify the log itself, then the downstream against the model.
	vr, err := a.log(b).Verify(ctx, nil)
	if err != nil {
		return err
	}
	rep.LogVerify = &verifySum{OK: vr.OK(), Segments: vr.Sealed + vr.Active, Blocks: vr.Blocks, Events: vr.Events, Errors: len(vr.Errors())}
	if errs := vr.Errors(); len(errs) > 0 {
		rep.LogVerify.First = errs[0].String()
	}
	segs, err := a.listSegments(ctx, b, nil)
	if err != nil {
		return err
	}
	sum := summarize(segs)
	rep.Segments, rep.StoredLeft = sum.Segments, sum.Bytes
	want := workload.Expected(cfg, m.ResolvedTs)
	cmp, err := compareSQLite(ctx, dbPath, want)
	if err != nil {
		return err
	}
	rep.Comparison = cmp
	rep.OK = rep.LogVerify.OK && cmp.Differences == 0 && m.ResolvedTs == p.lastTs
	rep.TotalSeconds = time.Since(started).Seconds()
	verdict := "OK"
	if !rep.LogVerify.OK {
		verdict = fmt.Sprintf("FAILED (%d errors; first: %s)", rep.LogVerify.Errors, rep.LogVerify.First)
	}
	a.say("  [verify]   log: %d segments left (%s), %d blocks, %d events, every CRC checked: %s", rep.LogVerify.Segments, humanBytes(rep.StoredLeft), vr.Blocks, vr.Events, verdict)
	verdict = "identical"
	if cmp.Differences > 0 {
		verdict = fmt.Sprintf("%d DIFFERENCES", cmp.Differences)
	}
	a.say("             SQLite vs the upstream model at ts %d: %d tables, %d rows: %s", m.ResolvedTs, cmp.Tables, cmp.Rows, verdict)
	for _, ex := range cmp.Examples {
		a.say("               %s", ex)
	}
	if a.jsonOut {
		if err := a.printJSON(rep); err != nil {
			return err
		}
	} else {
		result := "PASS"
		if !rep.OK {
			result = "FAIL"
		}
		if isMemStorage(a.storage) {
			// Another process cannot see this one's memory: commands to
			// look at the log would only fail with "no log".
			a.say("%s in %.1fs. The log was in memory (%s) and is gone now that the demo ends, so there is nothing left to look at with meta, ls, dump or verify; run the demo with --storage DIR (or without --storage) to keep it. The downstream is still there:", result, rep.TotalSeconds, a.storageShown())
		} else {
			a.say("%s in %.1fs. Look around:", result, rep.TotalSeconds)
			storageArg := lookArg
			a.say("  redokit meta   --storage %s --log %s", storageArg, a.logID)
			a.say("  redokit ls     --storage %s --log %s", storageArg, a.logID)
			a.say("  redokit dump   --storage %s --log %s --table %s.t1 --limit 3", storageArg, a.logID, cfg.Schema)
			a.say("  redokit verify --storage %s --log %s", storageArg, a.logID)
		}
		a.say("  sqlite3 %s 'SELECT count(*) FROM t1'", shellQuote(dbPath))
	}
	if !rep.OK {
		return errSilent
	}
	return nil
}

// demoSinkAndGC plays the downstream during normal operation: it applies the
// log up to the global resolved ts, reports that as the checkpoint, and GC
// deletes what the checkpoint left behind.
func (a *app) demoSinkAndGC(ctx context.Context, b *blob.Bucket, p *pipeline, sinkURI string, rep *demoReport, bar interface{ Clear() error }) error {
	_ = bar.Clear()
	g1, err := p.flushAll(ctx)
	if err != nil {
		return err
	}
	start := p.cfg.StartTs
	sum, err := a.applyRange(ctx, b, sinkURI, start, g1, nil, nil)
	if err != nil {
		return err
	}
	rep.SinkApply = sum
	if err := p.coord.SetCheckpoint(ctx, g1); err != nil {
		return err
	}
	a.say("  [sink]     the downstream applied (%d, %d]: %d rows, %d DDLs in %.2fs (%.0f rows/s); checkpoint ts → %d",
		start, g1, sum.Rows, sum.DDLs, sum.Seconds, sum.RowsPerSec, g1)
	res, err := a.log(b).Collect(ctx, &gc.Options{Below: g1})
	if err != nil {
		return err
	}
	rep.GC = &gcSummary{Deleted: res.Deleted, FreedBytes: res.FreedBytes, Listed: res.Listed}
	a.say("  [gc]       %d of %d segments were wholly below the checkpoint: deleted (%s freed)", res.Deleted, res.Listed, humanBytes(res.FreedBytes))
	return nil
}

// demoSinkAhead lets the downstream run ahead of the checkpoint (sinks
// report checkpoints lazily), so the recovery replays events the downstream
// already holds and must skip them.
func (a *app) demoSinkAhead(ctx context.Context, b *blob.Bucket, p *pipeline, sinkURI string, rep *demoReport, bar interface{ Clear() error }) error {
	_ = bar.Clear()
	m := p.coord.Meta()
	g2, err := p.flushAll(ctx)
	if err != nil {
		return err
	}
	ahead, err := a.applyRange(ctx, b, sinkURI, m.CheckpointTs, g2, nil, nil)
	if err != nil {
		return err
	}
	rep.SinkAhead = ahead
	a.say("  [sink]     the downstream went on to %d (%d more rows) without moving the checkpoint", g2, ahead.Rows)
	return nil
}

// demoFailover kills a writer mid-stream and replaces it, restarting its
// spans at the checkpoint.
func (a *app) demoFailover(ctx context.Context, p *pipeline, rep *demoReport, victim int, bar interface{ Clear() error }) error {
	_ = bar.Clear()
	m := p.coord.Meta()
	fo, err := p.killAndReplace(ctx, victim, m.CheckpointTs)
	if err != nil {
		return err
	}
	rep.Failover = fo
	a.say("  [failover] killed writer %s at epoch %d (flushed ts %d); a new process took %s over as epoch %d (fences %s) and rewrote %d events of its spans from the checkpoint %d: %d already durable (duplicates now), %d lost with the dead writer",
		fo.Writer, fo.OldEpoch, fo.FlushedBefore, fo.Writer, fo.NewEpoch, fencesString(fo.Fences), fo.Rewritten, fo.RestartTs, fo.Rewritten-fo.Lost, fo.Lost)
	return nil
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '/' || r == '.' || r == '-' || r == '_' || r == ':') {
			return "'" + escapeSingle(s) + "'"
		}
	}
	return s
}

func escapeSingle(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			out = append(out, `'\''`...)
			continue
		}
		out = append(out, s[i])
	}
	return string(out)
}
