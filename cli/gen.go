package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/testkit/workload"
	"github.com/redokit/redokit/writer"
)

// workloadFlags are the flags of gen and demo that shape the workload and
// the writers.
type workloadFlags struct {
	rows, tables, rowSize, writers, txnRows int
	ddlRate                                 float64
	seed                                    uint64
	schema                                  string
	flushInterval                           time.Duration
	segmentSize                             int64
}

func (w *workloadFlags) register(f *pflag.FlagSet, rows int, flush time.Duration, segment int64) {
	f.IntVar(&w.rows, "rows", rows, "row changes to generate (inserts, updates, deletes)")
	f.IntVar(&w.tables, "tables", 4, "tables created at the start; the first is split into one span per writer")
	f.IntVar(&w.rowSize, "row-size", 200, "bytes of each row's text column")
	f.IntVar(&w.writers, "writers", 3, "writers (captures) writing the log")
	f.IntVar(&w.txnRows, "txn-rows", 8, "most row changes in one transaction")
	f.Float64Var(&w.ddlRate, "ddl-rate", 0.005, "fraction of transactions that are DDLs (add column, truncate, create, drop table)")
	f.Uint64Var(&w.seed, "seed", 1, "seed of the workload: the same seed writes the same events")
	f.StringVar(&w.schema, "schema", "demo", "schema (database) of the tables")
	f.DurationVar(&w.flushInterval, "flush-interval", flush, "writer flush interval")
	f.Int64Var(&w.segmentSize, "segment-size", segment, "bytes at which a writer starts a new segment")
}

func (w *workloadFlags) validate() error {
	switch {
	case w.rows < 1:
		return usageErrorf("--rows must be at least 1")
	case w.tables < 1:
		return usageErrorf("--tables must be at least 1")
	case w.writers < 1 || w.writers > 64:
		return usageErrorf("--writers must be between 1 and 64")
	case w.rowSize < 1 || w.rowSize > 1<<20:
		return usageErrorf("--row-size must be between 1 and 1048576")
	case w.txnRows < 1:
		return usageErrorf("--txn-rows must be at least 1")
	case w.ddlRate < 0 || w.ddlRate > 0.5:
		return usageErrorf("--ddl-rate must be between 0 and 0.5")
	case w.schema == "" || strings.ContainsAny(w.schema, "`\"'./ "):
		return usageErrorf("--schema %q: want a plain name", w.schema)
	case w.flushInterval <= 0:
		return usageErrorf("--flush-interval must be positive")
	case w.segmentSize < 4<<10:
		return usageErrorf("--segment-size must be at least 4096")
	}
	return nil
}

func (w *workloadFlags) config() workload.Config {
	rate := w.ddlRate
	if rate == 0 {
		rate = -1 // gen's "none"; its zero means the default
	}
	return workload.Config{
		Schema: w.schema, Tables: w.tables, Rows: w.rows, RowSize: w.rowSize, TxnRows: w.txnRows, DDLRate: rate,
		SplitSpans: max(2, w.writers), Seed: w.seed,
	}.Normalize()
}

func (w *workloadFlags) writerOptions() writer.Options {
	return writer.Options{
		FlushInterval:   w.flushInterval,
		FlushBytes:      4 << 20,
		MaxSegmentBytes: w.segmentSize,
		BlockSize:       64 << 10,
		MemoryQuota:     128 << 20,
		RetryBackoff:    20 * time.Millisecond,
	}
}

// writeResult is what writing a workload did.
type writeResult struct {
	Txns       int64       `json:"transactions"`
	Rows       int64       `json:"rows"`
	DDLs       int64       `json:"ddls"`
	Totals     writeTotals `json:"written"`
	Seconds    float64     `json:"seconds"`
	EventsPerS float64     `json:"events_per_second"`
	MBPerS     float64     `json:"payload_mb_per_second"`
	ResolvedTs uint64      `json:"resolved_ts,string"` // ts are JSON strings (see jsonts.go)
	LastTs     uint64      `json:"last_commit_ts,string"`
}

func (a *app) genCmd() *cobra.Command {
	var wf workloadFlags
	cmd := &cobra.Command{
		Use:   "gen",
		Short: "Write a generated CDC workload to a log",
		Long: `gen writes a deterministic CDC workload through the real redo writer: several
tables, the first split into one key-range span per writer; inserts, updates and
deletes; and DDLs both MySQL and SQLite accept (create table, add column, drop
table, truncate). A coordinator computes the global resolved ts as it goes. The
same --seed and flags write the same events.

The log must not exist yet.`,
		Example: `  redokit gen --storage /tmp/redo --log bench --rows 1000000 --writers 4
  redokit gen --storage s3://bucket/redo?region=eu-west-1 --log cf1 --rows 50000 --ddl-rate 0.01`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{annStorage: "1", annLog: "1"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := wf.validate(); err != nil {
				return err
			}
			ctx := cmd.Context()
			if isMemStorage(a.storage) {
				// Not an error (gen on mem:// measures the writer alone), but
				// never silent: no later command can read this log.
				fmt.Fprintln(cmd.ErrOrStderr(), "redokit gen: note: mem:// lives only in this process: the log is gone when gen exits; give --storage a directory or a bucket to keep it")
			}
			b, err := openStorage(ctx, withCreateDir(a.storage))
			if err != nil {
				return err
			}
			defer b.Close()
			res, err := a.writeWorkload(ctx, b, &wf)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(struct {
					Log     string `json:"log"`
					Storage string `json:"storage"`
					*writeResult
				}{a.logID, a.storageShown(), res})
			}
			t := res.Totals
			tw := a.table()
			fmt.Fprintf(tw, "log\t%s in %s\n", a.logID, a.storageShown())
			fmt.Fprintf(tw, "workload\t%d transactions: %d row changes, %d DDLs (seed %d)\n", res.Txns, res.Rows, res.DDLs, wf.seed)
			fmt.Fprintf(tw, "written\t%d events, %d segments, %d blocks, %s stored (%s encoded, compression %.2fx)\n",
				t.Events, t.Segments, t.Blocks, humanBytes(t.StoredBytes), humanBytes(t.PayloadBytes), t.ratio())
			fmt.Fprintf(tw, "time\t%.2fs: %.0f events/s, %.1f MB/s of events\n", res.Seconds, res.EventsPerS, res.MBPerS)
			fmt.Fprintf(tw, "global resolved ts\t%s (last commit ts %d)\n", tsDesc(res.ResolvedTs), res.LastTs)
			tw.Flush()
			return nil
		},
	}
	wf.register(cmd.Flags(), 100000, 200*time.Millisecond, 16<<20)
	return cmd
}

// writeWorkload writes the whole workload and closes the writers.
func (a *app) writeWorkload(ctx context.Context, b *blob.Bucket, wf *workloadFlags) (*writeResult, error) {
	cfg := wf.config()
	p, err := newPipeline(ctx, b, a.logID, cfg, wf.writers, wf.writerOptions(), a.logger())
	if err != nil {
		return nil, err
	}
	stop := p.runCoordinator(ctx, 100*time.Millisecond)
	defer stop()
	g := workload.New(cfg)
	bar := a.bar(int64(cfg.Rows), "writing rows", false)
	start := time.Now()
	for {
		tx, ok := g.Next()
		if !ok {
			break
		}
		if err := p.route(ctx, tx, -1); err != nil {
			if ctx.Err() != nil {
				// Interrupted: close the writers as at the end (Close
				// flushes only what is resolved) and release them, or the
				// meta object lists them live for good and rm refuses the
				// log. A context of its own, bounded: a second interrupt
				// kills anyway.
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer cancel()
				if _, cerr := p.closeAll(cctx); cerr != nil {
					p.abort()
					return nil, errors.Join(err, cerr)
				}
				return nil, err
			}
			p.abort()
			return nil, err
		}
		if p.txns%64 == 0 {
			_ = bar.Set64(p.rows)
		}
	}
	resolved, err := p.closeAll(ctx)
	_ = bar.Finish()
	if err != nil {
		return nil, err
	}
	res := &writeResult{Txns: p.txns, Rows: p.rows, DDLs: p.ddls, Totals: p.totals(), ResolvedTs: resolved, LastTs: p.lastTs}
	res.Seconds = time.Since(start).Seconds()
	res.EventsPerS = float64(res.Totals.Events) / res.Seconds
	res.MBPerS = float64(res.Totals.PayloadBytes) / 1e6 / res.Seconds
	return res, nil
}
