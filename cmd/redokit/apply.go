package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/redokit/redokit/apply"
	_ "github.com/redokit/redokit/apply/mysql"  // mysql:, mariadb:, tidb: sinks
	_ "github.com/redokit/redokit/apply/sqlite" // sqlite: sinks
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/reader"
)

// applySummary is what apply prints.
type applySummary struct {
	Log          string  `json:"log"`
	Sink         string  `json:"sink"` // password redacted
	StartTs      uint64  `json:"start_ts"`
	EndTs        uint64  `json:"end_ts"`
	Events       int64   `json:"events"`
	Rows         int64   `json:"rows"`
	DDLs         int64   `json:"ddls"`
	Skipped      int64   `json:"skipped"`    // at or below what the sink recorded as applied
	Duplicates   int64   `json:"duplicates"` // exact duplicates the reader dropped (failover rewrites)
	Transactions int64   `json:"transactions"`
	Retries      int64   `json:"retries"`
	Segments     int     `json:"segments"`
	Seconds      float64 `json:"seconds"`
	RowsPerSec   float64 `json:"rows_per_second"`
}

// applyRange replays (start, end] of the log in b into the sink at sinkURI: a
// range the caller took from one read of the meta object (through
// redokit.CheckRange), so a checkpoint that moves meanwhile cannot refuse it.
// It returns what was done, also when it fails part way.
func (a *app) applyRange(ctx context.Context, b *blob.Bucket, sinkURI string, start, end uint64, opts *apply.Options, sopts *apply.SinkOptions) (*applySummary, error) {
	sum := &applySummary{Log: a.logID, Sink: apply.Redact(sinkURI), StartTs: start, EndTs: end}
	sink, err := apply.Open(ctx, sinkURI, sopts)
	if err != nil {
		if errors.Is(err, apply.ErrBadURI) {
			return sum, &exitErr{code: exitUsage, err: fmt.Errorf("--sink: %w", err)}
		}
		return sum, fmt.Errorf("open the sink %s: %w", apply.Redact(sinkURI), err)
	}
	defer sink.Close()
	r, err := reader.Open(ctx, b, &reader.Options{LogID: a.logID, StartTs: start, EndTs: end, Logger: a.logger()})
	if err != nil {
		return sum, err
	}
	defer r.Close()
	bar := a.bar(int64(end-start), "applying", false)
	// The bar observes the stream on its way to Run: every 1024 events.
	src := func(yield func(*codec.Event, error) bool) {
		var n int64
		for ev, err := range r.CodecEvents(ctx) {
			if n++; err == nil && n%1024 == 0 {
				_ = bar.Set64(int64(ev.CommitTs() - start))
			}
			if !yield(ev, err) {
				return
			}
		}
	}
	started := time.Now()
	res, err := apply.Run(ctx, src, sink, opts)
	_ = bar.Finish()
	st := r.Stats()
	sum.Segments, sum.Duplicates = st.SegmentsSelected, st.Duplicates
	if res != nil {
		sum.Events, sum.Rows, sum.DDLs, sum.Skipped = res.Events, res.Rows, res.DDLs, res.Skipped
		sum.Transactions, sum.Retries = res.Transactions, res.Retries
		sum.Seconds = res.Duration.Seconds()
		sum.RowsPerSec = res.RowsPerSecond()
	} else {
		sum.Seconds = time.Since(started).Seconds()
	}
	if err != nil {
		return sum, fmt.Errorf("apply log %s (%d, %d] to %s: %w", a.logID, start, end, apply.Redact(sinkURI), err)
	}
	return sum, nil
}

func (a *app) applyCmd() *cobra.Command {
	var (
		rf       rangeFlags
		sinkURI  string
		workers  int
		batch    int
		progress string
	)
	cmd := &cobra.Command{
		Use:   "apply",
		Short: "Replay the log into a MySQL-compatible database or SQLite",
		Long: `apply replays a range of the log into a SQL downstream, in commit-ts order, rows
of a commit ts before its DDLs, idempotently: the sink records its progress in a
table of its own (redokit_apply_progress) in the same transactions as the data,
so running apply again resumes instead of applying twice, and rows the
downstream already holds are replaced, not duplicated.

The range defaults to (checkpoint ts, global resolved ts] from the log's meta
object. --end-ts above the global resolved ts is refused unless --force: the
log is only complete up to it.

Sinks:
  mysql://user:password@host:3306/db   MySQL, MariaDB, TiDB (also mariadb://, tidb://)
  sqlite:///absolute/path.db           SQLite (sqlite:relative/path.db too)`,
		Example: `  redokit apply --storage s3://bucket/redo --log cf1 --sink 'mysql://root:secret@127.0.0.1:3306/shop'
  redokit apply --storage /var/redo --log cf1 --sink sqlite:///tmp/replica.db --end-ts 455000000000000000`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{annStorage: "1", annLog: "1"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if sinkURI == "" {
				return usageErrorf("apply needs --sink URI (mysql://user:password@host:port/db or sqlite:///path.db)")
			}
			b, err := a.open(ctx)
			if err != nil {
				return err
			}
			defer b.Close()
			m, err := a.readMeta(ctx, b)
			if err != nil {
				return err
			}
			start, end, err := rf.resolve(cmd, a, m)
			if err != nil {
				return err
			}
			if start == end {
				fmt.Fprintf(a.stderr, "redokit: nothing to apply: the range (%d, %d] is empty\n", start, end)
				return nil
			}
			sum, err := a.applyRange(ctx, b, sinkURI, start, end, &apply.Options{Workers: workers, BatchRows: batch, Logger: a.logger()},
				&apply.SinkOptions{ProgressTable: progress, Logger: a.logger()})
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(sum)
			}
			a.printApply(sum)
			return nil
		},
	}
	rf.register(cmd, "apply")
	f := cmd.Flags()
	f.StringVar(&sinkURI, "sink", "", "downstream: mysql://user:password@host:port/db or sqlite:///path.db (required)")
	f.IntVar(&workers, "workers", 0, "transactions applying rows at once (default 4; SQLite uses 1)")
	f.IntVar(&batch, "batch-rows", 0, "rows of a table per multi-row statement batch (default 256)")
	f.StringVar(&progress, "progress-table", "", "table the sink records its progress in (default redokit_apply_progress; two logs applied into one downstream need two)")
	return cmd
}

func (a *app) printApply(s *applySummary) {
	tw := a.table()
	fmt.Fprintf(tw, "log\t%s\n", s.Log)
	fmt.Fprintf(tw, "sink\t%s\n", s.Sink)
	fmt.Fprintf(tw, "range\t(%d, %d]\n", s.StartTs, s.EndTs)
	fmt.Fprintf(tw, "segments read\t%d\n", s.Segments)
	fmt.Fprintf(tw, "events\t%d (%d rows, %d DDLs applied; %d skipped as already applied; %d duplicates dropped)\n", s.Events, s.Rows, s.DDLs, s.Skipped, s.Duplicates)
	fmt.Fprintf(tw, "transactions\t%d (%d retries)\n", s.Transactions, s.Retries)
	fmt.Fprintf(tw, "time\t%.2fs (%.0f rows/s)\n", s.Seconds, s.RowsPerSec)
	tw.Flush()
	fmt.Fprintln(a.stdout, "applied the redo log successfully")
}
