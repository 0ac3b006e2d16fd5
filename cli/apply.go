package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/redokit/redokit/apply"
	_ "github.com/redokit/redokit/apply/mysql"    // mysql:, mariadb:, tidb: sinks
	_ "github.com/redokit/redokit/apply/postgres" // postgres:, postgresql: sinks
	_ "github.com/redokit/redokit/apply/sqlite"   // sqlite: sinks
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/reader"
)

// applySummary is what apply prints. Its ts are JSON strings (see
// jsonts.go).
type applySummary struct {
	Log          string  `json:"log"`
	Sink         string  `json:"sink"` // password redacted
	StartTs      uint64  `json:"start_ts,string"`
	EndTs        uint64  `json:"end_ts,string"`
	Events       int64   `json:"events"`
	Rows         int64   `json:"rows"`
	DDLs         int64   `json:"ddls"`
	Skipped      int64   `json:"skipped"`    // at or below what the sink recorded as applied
	Duplicates   int64   `json:"duplicates"` // exact duplicates the reader dropped (failover rewrites)
	Transactions int64   `json:"transactions"`
	Retries      int64   `json:"retries"`
	PeakRows     int64   `json:"peak_rows"` // the most row changes held at once (apply.Result.PeakRows)
	Splits       int64   `json:"splits"`    // hand-outs of a transaction to the sink in parts (--split-mib; apply.Result.Splits)
	Segments     int     `json:"segments"`
	Seconds      float64 `json:"seconds"`
	RowsPerSec   float64 `json:"rows_per_second"`

	// The operator's controls, as given.
	Tables        []string          `json:"include_tables,omitempty"` // --table patterns
	ExcludeTables []string          `json:"exclude_tables,omitempty"` // --exclude-table patterns
	MapSchema     map[string]string `json:"map_schema,omitempty"`     // --map-schema from → to
	DryRun        bool              `json:"dry_run,omitempty"`
	Filtered      int64             `json:"filtered"` // events of tables the filter did not select (and a DDL it refused)

	// Applied is where the downstream stands after the run, from the
	// engine's own count (apply.Result.Applied): the progress read at the
	// start raised by every commit of this run. After a failure it is
	// where the apply stopped; nil when the apply never started, and in a
	// dry run (whose commits wrote nothing).
	Applied *appliedJSON `json:"applied,omitempty"`
	// Conflicts is what the replay met downstream that the log did not
	// lead it to expect (see apply.Conflicts), in all and per table, with
	// the rows skipped as already applied per table; null for a sink that
	// does not count them.
	Conflicts *apply.Conflicts `json:"conflicts"`
	// Error is why the apply stopped, when it did.
	Error string `json:"error,omitempty"`
}

// appliedJSON is apply.Result's progress: per table (named as in the
// downstream, after --map-schema), the commit ts up to which its row
// changes are applied, and the DDL mark.
type appliedJSON struct {
	Tables []appliedTable `json:"tables"`
	DDL    appliedDDL     `json:"ddl"`
}

type appliedTable struct {
	Schema   string `json:"schema"`
	Table    string `json:"table"`
	CommitTs uint64 `json:"commit_ts,string"`
}

// appliedDDL: every DDL below commit_ts is applied, and the first count at it.
type appliedDDL struct {
	CommitTs uint64 `json:"commit_ts,string"`
	Count    int    `json:"count"`
}

func newAppliedJSON(res *apply.Result) *appliedJSON {
	out := &appliedJSON{Tables: []appliedTable{}, DDL: appliedDDL{res.AppliedDDL.CommitTs, res.AppliedDDL.Count}}
	for t, ts := range res.Applied {
		out.Tables = append(out.Tables, appliedTable{t.Schema, t.Name, ts})
	}
	slices.SortFunc(out.Tables, func(a, b appliedTable) int {
		return cmp.Or(strings.Compare(a.Schema, b.Schema), strings.Compare(a.Table, b.Table))
	})
	return out
}

// applyControls are what the operator narrows or redirects an apply with.
type applyControls struct {
	include, exclude []string
	mapSchema        map[string]string
}

// applyRange replays (start, end] of the log in b into the sink at sinkURI: a
// range the caller took from one read of the meta object (through
// redokit.CheckRange), so a checkpoint that moves meanwhile cannot refuse it.
// It returns what was done, also when it fails part way.
func (a *app) applyRange(ctx context.Context, b *blob.Bucket, sinkURI string, start, end uint64, opts *apply.Options, sopts *apply.SinkOptions) (*applySummary, error) {
	return a.applyRangeWith(ctx, b, sinkURI, start, end, opts, sopts, nil)
}

// applyRangeWith is applyRange with the operator's controls: the table
// filter and the schema mapping wrap the reader's events on their way to
// apply.Run (see apply.FilterTables and apply.MapSchemas).
func (a *app) applyRangeWith(ctx context.Context, b *blob.Bucket, sinkURI string, start, end uint64, opts *apply.Options, sopts *apply.SinkOptions, ctl *applyControls) (*applySummary, error) {
	var rows, ddls int64 // what the attempts before the last committed
	for {
		sum, err := a.applyRangeOnce(ctx, b, sinkURI, start, end, opts, sopts, ctl)
		if again := a.holdWhole(err, opts); again != nil {
			rows, ddls, opts = rows+sum.Rows, ddls+sum.DDLs, again
			continue
		}
		// The rerun skipped, as already applied, what the attempts
		// before it committed: the summary counts it as applied, once.
		sum.Rows, sum.DDLs = sum.Rows+rows, sum.DDLs+ddls
		sum.Skipped = max(0, sum.Skipped-rows-ddls)
		return sum, err
	}
}

// holdWhole is apply.HoldWhole, saying on stderr what the rerun does.
func (a *app) holdWhole(err error, opts *apply.Options) *apply.Options {
	again, late := apply.HoldWhole(opts, err)
	if again != nil {
		fmt.Fprintf(a.stderr, "redokit: the transaction of %s at commit ts %d went to the sink in parts and must be applied whole; nothing of it was committed: applying it again, whole (its memory is its size; --split-mib bounds the others)\n",
			late.Table, late.CommitTs)
	}
	return again
}

// applyRangeOnce is one run of applyRangeWith.
func (a *app) applyRangeOnce(ctx context.Context, b *blob.Bucket, sinkURI string, start, end uint64, opts *apply.Options, sopts *apply.SinkOptions, ctl *applyControls) (*applySummary, error) {
	sum := a.newApplySummary(sinkURI, start, end, sopts, ctl)
	sink, err := a.openSink(ctx, sinkURI, sopts)
	if err != nil {
		return sum, err
	}
	defer sink.Close()
	r, err := openRange(ctx, b, a.logID, start, end, reader.Options{Logger: a.logger()})
	if err != nil {
		return sum, err
	}
	defer r.Close()
	return a.applyReader(ctx, r, sink, sum, opts, ctl)
}

// newApplySummary is the summary of an apply of (start, end] before it runs.
func (a *app) newApplySummary(sinkURI string, start, end uint64, sopts *apply.SinkOptions, ctl *applyControls) *applySummary {
	sum := &applySummary{Log: a.logID, Sink: apply.Redact(sinkURI), StartTs: start, EndTs: end}
	if sopts != nil && sopts.DryRun != nil {
		sum.DryRun = true
	}
	if ctl != nil {
		sum.Tables, sum.ExcludeTables, sum.MapSchema = ctl.include, ctl.exclude, ctl.mapSchema
	}
	return sum
}

// openSink opens the sink at sinkURI, its progress kept under this log.
func (a *app) openSink(ctx context.Context, sinkURI string, sopts *apply.SinkOptions) (apply.Sink, error) {
	o := apply.SinkOptions{}
	if sopts != nil {
		o = *sopts
	}
	if o.LogID == "" {
		// The progress is kept per log: its rows name this one.
		o.LogID = a.logID
	}
	sink, err := apply.Open(ctx, sinkURI, &o)
	if err != nil {
		if errors.Is(err, apply.ErrBadURI) {
			return nil, &exitErr{code: exitUsage, err: fmt.Errorf("--sink: %w", err)}
		}
		return nil, fmt.Errorf("open the sink %s: %w", apply.Redact(sinkURI), err)
	}
	return sink, nil
}

// applyReader replays what r reads into sink with apply.Run, through the
// operator's controls, and fills sum (its range set by the caller).
func (a *app) applyReader(ctx context.Context, r *reader.Reader, sink apply.Sink, sum *applySummary, opts *apply.Options, ctl *applyControls) (*applySummary, error) {
	return a.applyReaderUntil(ctx, nil, r, sink, sum, opts, ctl)
}

// applyReaderUntil is applyReader that, once stop ends (nil: never), ends
// the stream at the next commit ts: the transaction in hand is applied and
// committed with its progress, and the run ends as if the range ended there
// (sum.EndTs says where). ctx must then outlive stop.
func (a *app) applyReaderUntil(ctx, stop context.Context, r *reader.Reader, sink apply.Sink, sum *applySummary, opts *apply.Options, ctl *applyControls) (*applySummary, error) {
	if ctl == nil {
		ctl = &applyControls{}
	}
	start, end := sum.StartTs, sum.EndTs
	shown := sum.Sink // the sink URI, redacted
	var err error
	bar := a.rangeBar(start, end, "applying")
	// The bar observes the stream on its way to Run: every 1024 events.
	var read, passed int64 // events read, and passed by the filter
	var src apply.Source = func(yield func(*codec.Event, error) bool) {
		var ts uint64
		for ev, err := range r.CodecEvents(ctx) {
			if err == nil {
				if stop != nil && stop.Err() != nil && ev.CommitTs() != ts && read > 0 {
					sum.EndTs = ts // every event up to ts was handed to Run
					return
				}
				ts = ev.CommitTs()
				if read++; read%1024 == 0 {
					bar.update(ev.CommitTs(), read)
				}
			}
			if !yield(ev, err) {
				return
			}
		}
	}
	if len(ctl.include) > 0 || len(ctl.exclude) > 0 {
		// The flags were checked with apply.CheckTablePattern: an error
		// here is not the user's.
		if src, err = apply.FilterTables(src, ctl.include, ctl.exclude); err != nil {
			return sum, err
		}
		src = filterHint(src, ctl.exclude)
	}
	filtered := src
	src = func(yield func(*codec.Event, error) bool) {
		for ev, err := range filtered {
			if err == nil {
				passed++
			}
			if !yield(ev, err) {
				return
			}
		}
	}
	if len(ctl.mapSchema) > 0 {
		if src, err = apply.MapSchemas(src, ctl.mapSchema); err != nil {
			return sum, err
		}
	}
	var before apply.Progress
	if sum.DryRun {
		if before, err = sink.Progress(ctx); err != nil {
			return sum, fmt.Errorf("read the progress of %s: %w", shown, err)
		}
	}
	started := time.Now()
	res, err := apply.Run(ctx, src, sink, opts)
	bar.finish()
	if sum.DryRun && err == nil {
		// A sink that ignores SinkOptions.DryRun applies for real: say so
		// rather than report a dry run.
		after, perr := sink.Progress(ctx)
		if perr != nil {
			err = fmt.Errorf("read the progress after the dry run: %w", perr)
		} else if after.DDL != before.DDL || !maps.Equal(after.Tables, before.Tables) {
			err = fmt.Errorf("--dry-run: the sink %s does not support dry runs: it applied the changes and recorded its progress", shown)
		}
	}
	sum.Filtered = read - passed
	if cr, ok := sink.(apply.ConflictReporter); ok && !sum.DryRun {
		sum.Conflicts = conflictReport(cr.Conflicts(), res)
	}
	st := r.Stats()
	sum.Segments, sum.Duplicates = st.SegmentsSelected, st.Duplicates
	if res != nil {
		sum.Events, sum.Rows, sum.DDLs, sum.Skipped = res.Events, res.Rows, res.DDLs, res.Skipped
		sum.Transactions, sum.Retries = res.Transactions, res.Retries
		sum.PeakRows, sum.Splits = res.PeakRows, res.Splits
		sum.Seconds = res.Duration.Seconds()
		sum.RowsPerSec = res.RowsPerSecond()
		// A dry run's commits wrote nothing: the engine's count of them
		// is not where the downstream stands.
		if res.Applied != nil && !sum.DryRun {
			sum.Applied = newAppliedJSON(res)
		}
	} else {
		sum.Seconds = time.Since(started).Seconds()
	}
	if err != nil {
		err = damageHint(fmt.Errorf("apply log %s (%d, %d] to %s: %w", a.logID, start, end, shown, err))
		sum.Error = err.Error()
		return sum, err
	}
	return sum, nil
}

// parseSchemaMap parses the --map-schema values, from=to each.
func parseSchemaMap(specs []string) (map[string]string, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	m := map[string]string{}
	seen := map[string]string{}
	for _, s := range specs {
		from, to, ok := strings.Cut(s, "=")
		from, to = strings.TrimSpace(from), strings.TrimSpace(to)
		if !ok || from == "" || to == "" || strings.Contains(to, "=") {
			return nil, usageErrorf("--map-schema %q: want from=to (a schema of the log, and the downstream schema its tables go to)", s)
		}
		// Schema names compare case-insensitively (apply.MapSchemas).
		if prev, dup := seen[strings.ToLower(from)]; dup {
			return nil, usageErrorf("--map-schema %q: schema %q is already mapped (by %q)", s, from, prev)
		}
		seen[strings.ToLower(from)] = s
		m[from] = to
	}
	return m, nil
}

func (a *app) applyCmd() *cobra.Command {
	var (
		rf        rangeFlags
		sinkURI   string
		workers   int
		batch     int
		splitMiB  int64
		progress  string
		include   []string
		exclude   []string
		mapSchema []string
		dryRun    bool
		another   bool
		sinkName  string
		fkChecks  bool
		follow    bool
		poll      time.Duration
		metrics   string
	)
	cmd := &cobra.Command{
		Use:   "apply",
		Short: "Replay the log into a MySQL-compatible database, PostgreSQL or SQLite (--follow: keep a standby at the log)",
		Long: `apply replays a range of the log into a SQL downstream, in commit-ts order, rows
of a commit ts before its DDLs, idempotently: the sink records its progress in a
table of its own (redokit_apply_progress) in the same transactions as the data,
so running apply again resumes instead of applying twice, and rows the
downstream already holds are replaced, not duplicated.

The range defaults to (checkpoint ts, global resolved ts] from the log's meta
object. --end-ts above the global resolved ts is refused unless --force: the
log is only complete up to it. With --force the read may pass it only as far
as the writers' published progress proves the log complete; beyond that it is
refused, naming the bound, never read short.

--follow keeps applying as the log grows, for a warm standby: rounds of
(position, global resolved ts], each proven complete and committed with the
sink's progress, then a wait (--follow-poll) for the resolved ts to move on.
It prints a line per round with how far the downstream is behind (--json: a
JSON object per line, and one with "stopped" at the end). Ctrl-C stops it
with exit 0: what was committed stays, with its progress, and a rerun goes on
from the checkpoint, skipping what the downstream holds. It refuses a start
whose segments GC deleted (naming the gap) and a removed log.

--start-ts and --end-ts take a commit ts (a TiDB TSO) or an RFC 3339 time,
which stands for the first TSO of its millisecond (physical milliseconds << 18):
--end-ts 2025-01-01T12:00:00Z applies what committed up to that instant. A time
without a zone (2025-01-01T12:00:00, 2025-01-01 12:00) is UTC.

Sinks:
  mysql://user:password@host:3306/db   MySQL, MariaDB, TiDB (also mariadb://, tidb://)
  postgres://user:password@host:5432/db PostgreSQL (postgresql:// too; TLS unless ?sslmode=disable)
  sqlite:///absolute/path.db           SQLite (sqlite:relative/path.db too)

The database in a mysql:// URI is where the progress table goes, and nothing
else: the tables land in the schemas the log names them in (shop.orders goes
to the downstream's shop.orders). --map-schema shop=replica puts the log's
schema shop into replica instead — rows, DDLs and the qualified names in the
DDLs' text — so --sink mysql://…/replica --map-schema shop=replica keeps the
replica and its progress in one database. SQLite has one schema: every table
goes into the one file whatever its schema.

--table and --exclude-table select tables by schema.table patterns with shell
globs (shop.*, *.orders, shop.order_?), matched against the log's names
before any --map-schema: a table is applied when it matches some --table (or
none is given) and no --exclude-table. DDLs follow their tables; a DDL that
names no table (CREATE/DROP DATABASE) is applied when its schema matches the
schema part of some --table (or none is given), unless an --exclude-table
schema.* excludes its whole schema. A DDL that touches tables on both sides —
a RENAME TABLE from a selected table to an unselected one, or back — stops
the apply before it with an error naming it, its commit ts, and the flags
that go on: --end-ts just before it, or the --table that follows a rename
to its new name (or, for a table renamed into the filter, that selects its
old name once the downstream holds it).
Keep the same filter for every run into one progress table (--progress-table):
the progress does not remember it.

When the apply stops on an error, it prints where it stopped: per table, the
commit ts up to which the downstream holds its row changes, and the last DDL
applied (--json: the "applied" object, printed after a success too). The
next run resumes there.

--dry-run prints the statements the sink would run, with their values, on
stdout, and runs none (nor writes the progress table).`,
		Example: `  redokit apply --storage s3://bucket/redo --log cf1 --sink 'mysql://root:secret@127.0.0.1:3306/shop'
  redokit apply --storage /var/redo --log cf1 --sink sqlite:///tmp/replica.db --end-ts 455000000000000000
  redokit apply --storage /var/redo --log cf1 --sink 'mysql://root:secret@db:3306/replica' --map-schema shop=replica \
      --table 'shop.*' --exclude-table 'shop.tmp_*' --end-ts 2025-01-01T12:00:00Z`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{annStorage: "1", annLog: "1"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if sinkURI == "" {
				return usageErrorf("apply needs --sink URI (mysql://user:password@host:port/db, postgres://user:password@host:port/db or sqlite:///path.db)")
			}
			// 0 is "the default"; below it is a typo, not a setting.
			if workers < 0 {
				return usageErrorf("--workers %d: want 1 or more (0: the default)", workers)
			}
			if batch < 0 {
				return usageErrorf("--batch-rows %d: want 1 or more (0: the default)", batch)
			}
			if splitMiB < 0 {
				return usageErrorf("--split-mib %d: want 1 or more (0: the default)", splitMiB)
			}
			for _, f := range []struct {
				flag string
				pats []string
			}{{"--table", include}, {"--exclude-table", exclude}} {
				for _, p := range f.pats {
					if err := apply.CheckTablePattern(p); err != nil {
						return usageErrorf("%s: %v", f.flag, err)
					}
				}
			}
			schemas, err := parseSchemaMap(mapSchema)
			if err != nil {
				return err
			}
			if dryRun && a.jsonOut {
				return usageErrorf("--dry-run prints SQL on stdout, where --json prints the summary: pass one of them")
			}
			if metrics != "" && !follow {
				return usageErrorf("--metrics-addr goes with --follow")
			}
			if follow {
				for _, fl := range []string{"end-ts", "force", "dry-run"} {
					if cmd.Flags().Changed(fl) {
						return usageErrorf("--follow has no end: it keeps the downstream at the global resolved ts, and --%s does not go with it", fl)
					}
				}
				if poll <= 0 {
					return usageErrorf("--follow-poll %v: want a positive duration", poll)
				}
				b, m, err := a.openMeta(ctx)
				if err != nil {
					return followStopped(ctx, err)
				}
				defer b.Close()
				start := m.CheckpointTs
				if cmd.Flags().Changed("start-ts") {
					start = rf.start
					if start < m.CheckpointTs {
						fmt.Fprintf(a.stderr, "redokit: warning: --start-ts %d is below the checkpoint ts %d: GC may have deleted segments below the checkpoint (the first round then fails, naming the gap)\n", start, m.CheckpointTs)
					}
				}
				sopts := &apply.SinkOptions{ProgressTable: progress, Logger: a.logger(),
					LogID: m.LogID, SinkName: sinkName, AnotherLog: another, ForeignKeyChecks: fkChecks}
				return followStopped(ctx, a.applyFollow(ctx, b, sinkURI, start, poll, metrics, &apply.Options{Workers: workers, BatchRows: batch, SplitBytes: splitMiB << 20, Logger: a.logger()},
					sopts, &applyControls{include: include, exclude: exclude, mapSchema: schemas}))
			}
			b, m, start, end, err := rf.open(ctx, cmd, a)
			if err != nil {
				return err
			}
			defer b.Close()
			if start == end {
				fmt.Fprintf(a.stderr, "redokit: nothing to apply: the range (%d, %d] is empty\n", start, end)
				return nil
			}
			sopts := &apply.SinkOptions{ProgressTable: progress, Logger: a.logger(),
				LogID: m.LogID, SinkName: sinkName, AnotherLog: another, ForeignKeyChecks: fkChecks}
			if dryRun {
				sopts.DryRun = a.stdout
			}
			sum, err := a.applyRangeWith(ctx, b, sinkURI, start, end, &apply.Options{Workers: workers, BatchRows: batch, SplitBytes: splitMiB << 20, Logger: a.logger()},
				sopts, &applyControls{include: include, exclude: exclude, mapSchema: schemas})
			if err != nil {
				// Where it stopped, when it got as far as running.
				if sum != nil && sum.Applied != nil {
					if a.jsonOut {
						_ = a.printJSON(sum)
					} else {
						a.printStopped(sum, err)
					}
				}
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
	f.StringVar(&sinkURI, "sink", "", "downstream: mysql://user:password@host:port/db, postgres://user:password@host:port/db or sqlite:///path.db (required)")
	f.IntVar(&workers, "workers", 0, "transactions applying rows at once (default 4; SQLite uses 1)")
	f.IntVar(&batch, "batch-rows", 0, fmt.Sprintf("rows of a table per multi-row statement batch (default %d)", apply.DefaultBatchRows))
	f.Int64Var(&splitMiB, "split-mib", 0, fmt.Sprintf("MiB of row changes of one transaction held before it goes to the sink in parts, in bounded memory (default %d; see apply.Options.SplitBytes)", apply.DefaultSplitBytes>>20))
	f.StringVar(&progress, "progress-table", "", "table the sink records its progress in (default redokit_apply_progress; two logs applied into one downstream need two)")
	f.StringArrayVar(&include, "table", nil, "apply only the tables matching this schema.table `PATTERN` (shell globs: shop.*, *.orders); repeat for several")
	f.StringArrayVar(&exclude, "exclude-table", nil, "do not apply the tables matching this schema.table `PATTERN`; repeat for several")
	f.StringArrayVar(&mapSchema, "map-schema", nil, "apply the log's schema FROM into the downstream schema TO, as `FROM=TO`; repeat for several")
	f.BoolVar(&dryRun, "dry-run", false, "print the statements the sink would run, with their values, and run none")
	f.BoolVar(&another, "another-log", false, "apply this log into a downstream that holds another log's progress (kept apart per log)")
	f.StringVar(&sinkName, "sink-name", "", "name this apply's progress apart from other applies of the same log into the same downstream (e.g. one per table filter)")
	f.BoolVar(&follow, "follow", false, "keep applying as the log grows (a warm standby): rounds up to the global resolved ts, each committed with its progress, until Ctrl-C; a restart goes on from the sink's progress")
	f.StringVar(&metrics, "metrics-addr", "", "with --follow, serve Prometheus metrics of the follower's lag on this `ADDR` (host:port), at /metrics")
	f.DurationVar(&poll, "follow-poll", 100*time.Millisecond, "with --follow, how often the log's meta object is read while the downstream is at the global resolved ts")
	f.BoolVar(&fkChecks, "foreign-key-checks", false, "keep the downstream's foreign-key checks on (default off for the apply's sessions, as replication does; on makes the apply keep commit order with one worker)")
	return cmd
}

// printStopped tells where a failed apply stopped: what the downstream holds.
func (a *app) printStopped(s *applySummary, err error) {
	fmt.Fprintf(a.stdout, "apply stopped after %d rows and %d DDLs; the downstream holds:\n", s.Rows, s.DDLs)
	tw := a.table()
	for _, t := range s.Applied.Tables {
		fmt.Fprintf(tw, "  %s.%s\trows up to commit ts %s\n", t.Schema, t.Table, tsDesc(t.CommitTs))
	}
	if d := s.Applied.DDL; d.CommitTs > 0 {
		fmt.Fprintf(tw, "  DDLs\tup to commit ts %s (%d at it)\n", tsDesc(d.CommitTs), d.Count)
	} else {
		fmt.Fprintf(tw, "  DDLs\tnone recorded\n")
	}
	printConflicts(tw, s.Conflicts)
	tw.Flush()
	var fb *apply.FilterBoundaryError
	if errors.As(err, &fb) {
		// The same flags stop at the same DDL again: the error says
		// which flags go on.
		fmt.Fprintln(a.stdout, "running apply again with the same flags stops at the same DDL: see the error for the flags that go on")
		return
	}
	fmt.Fprintln(a.stdout, "running apply again resumes there")
}

func (a *app) printApply(s *applySummary) {
	tw := a.table()
	fmt.Fprintf(tw, "log\t%s\n", s.Log)
	fmt.Fprintf(tw, "sink\t%s\n", s.Sink)
	fmt.Fprintf(tw, "range\t(%d, %d]\n", s.StartTs, s.EndTs)
	if len(s.Tables) > 0 || len(s.ExcludeTables) > 0 {
		fmt.Fprintf(tw, "tables\t%s; excluded %s (%d events filtered out)\n", orAll(s.Tables), orNone(s.ExcludeTables), s.Filtered)
	}
	if len(s.MapSchema) > 0 {
		var m []string
		for from, to := range s.MapSchema {
			m = append(m, from+" → "+to)
		}
		slices.Sort(m)
		fmt.Fprintf(tw, "schemas\t%s\n", strings.Join(m, ", "))
	}
	fmt.Fprintf(tw, "segments read\t%d\n", s.Segments)
	fmt.Fprintf(tw, "events\t%d (%d rows, %d DDLs applied; %d skipped as already applied; %d duplicates dropped)\n", s.Events, s.Rows, s.DDLs, s.Skipped, s.Duplicates)
	fmt.Fprintf(tw, "transactions\t%d (%d retries)\n", s.Transactions, s.Retries)
	fmt.Fprintf(tw, "memory\tup to %d rows held at once; %d hand-outs of a transaction in parts\n", s.PeakRows, s.Splits)
	fmt.Fprintf(tw, "time\t%.2fs (%.0f rows/s)\n", s.Seconds, s.RowsPerSec)
	printConflicts(tw, s.Conflicts)
	tw.Flush()
	if s.DryRun {
		fmt.Fprintln(a.stdout, "dry run: nothing was applied")
		return
	}
	fmt.Fprintln(a.stdout, "applied the redo log successfully")
}

func orAll(p []string) string {
	if len(p) == 0 {
		return "all"
	}
	return strings.Join(p, ", ")
}

func orNone(p []string) string {
	if len(p) == 0 {
		return "none"
	}
	return strings.Join(p, ", ")
}
