package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/mysql"
	"github.com/redokit/redokit/apply/sqlite"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/testkit/workload"
	"github.com/redokit/redokit/writer"
)

// The apply cells measure `redokit apply` (apply.Run over the real reader,
// default options) against a naive replay of the same log, into SQLite and
// into MariaDB, on the workload of `redokit gen` with the CLI's defaults.

// Apply sinks: the Cell.Sink of an apply cell.
const (
	applySQLite   = "sqlite"
	applyMariaDB  = "mariadb"
	applyPostgres = "postgres"
)

// Apply logs: the Cell.Mix of an apply cell.
const (
	applyMixed  = ""       // the gen workload: inserts, updates, deletes, DDLs (DDL-heavy: gen's 0.5% of transactions)
	applyInsert = "insert" // the gen workload's CREATEs and inserts only
	// applyRareDDL is the gen workload with DDLs at a CDC stream's rate
	// rather than gen's: applyRareDDLRate of the transactions.
	applyRareDDL = "rare-ddl"
)

// applyRareDDLRate makes about one DDL per 20,000 row changes (gen's
// transactions hold 4.35 row changes on average, so one in 4,600): schema
// changes a day against a stream's millions of rows is rarer still, so
// this is still DDL-rich for CDC, and leaves a few DDLs in the -quick log
// (100 k row changes) to measure.
const applyRareDDLRate = 1.0 / 4600

// applyUnavailable is the Info key of an apply cell whose sink could not be
// reached: the reason. Such a repetition has no metrics and no error.
const applyUnavailable = "unavailable"

// genConfig is the workload `redokit gen --rows rows` writes with every
// other flag at its default (4 tables, 200 B text, up to 8 rows per
// transaction, 0.5% DDLs, the first table split in 3 spans, seed 1); schema
// "" is gen's default, "demo".
func genConfig(rows int, schema string) workload.Config {
	return workload.Config{Schema: schema, Tables: 4, Rows: rows, RowSize: 200, TxnRows: 8, DDLRate: 0.005,
		SplitSpans: 3, Seed: 1}.Normalize()
}

// applyLogConfig is the workload of a mixed apply cell: gen's, with DDLs
// at applyRareDDLRate for Mix applyRareDDL.
func applyLogConfig(c Cell, schema string) workload.Config {
	cfg := genConfig(c.Rows, schema)
	if c.Mix == applyRareDDL {
		cfg.DDLRate = applyRareDDLRate
	}
	return cfg
}

// genLog is a log written from a gen workload.
type genLog struct {
	cfg    workload.Config
	lastTs uint64
	midTs  uint64 // the commit ts by which half the row changes are written
	rows   int64  // row changes written
	ddls   int64
	model  *workload.Model // the upstream state at lastTs (mixed logs)
	// Insert-only logs: the DDL events written (the CREATEs).
	ddlEvents []codec.Event
}

// writeGenLog writes cfg's whole workload into log logID through one redo
// writer (the CLI's writer options), spans added and removed as the DDLs
// create and drop tables, every span resolved after each transaction. With
// insertsOnly the workload's updates and deletes are left out (and its
// DDLs, cfg.DDLRate being negative, are the initial CREATEs): the log of
// the insert-heavy cell, whose final rows are the rows inserted.
func writeGenLog(ctx context.Context, b *blob.Bucket, logID string, cfg workload.Config, insertsOnly bool) (*genLog, error) {
	if insertsOnly && cfg.DDLRate >= 0 {
		return nil, fmt.Errorf("an insert-only gen log wants no DDLs but the CREATEs (DDLRate %v)", cfg.DDLRate)
	}
	w, err := writer.Open(ctx, b, &writer.Options{LogID: logID, WriterID: "w1", FlushInterval: 200 * time.Millisecond,
		FlushBytes: 4 << 20, MaxSegmentBytes: 16 << 20, BlockSize: 64 << 10, MemoryQuota: 128 << 20})
	if err != nil {
		return nil, err
	}
	defer w.Close(context.Background())
	spans := map[uint64]bool{workload.DDLSpan: true}
	if err := w.AddSpan(writer.SpanID(workload.DDLSpan), cfg.StartTs); err != nil {
		return nil, err
	}
	g := workload.New(cfg)
	l := &genLog{cfg: g.Config(), lastTs: cfg.StartTs}
	var order []uint64
	bySpan := map[uint64][]codec.Event{}
	for {
		tx, ok := g.Next()
		if !ok {
			break
		}
		if insertsOnly {
			if tx.DDL {
				l.ddlEvents = append(l.ddlEvents, tx.Changes[0].Event)
			} else {
				kept := tx.Changes[:0]
				for _, ch := range tx.Changes {
					if ch.Event.Row.Op() == codec.OpInsert {
						kept = append(kept, ch)
					}
				}
				if len(kept) == 0 {
					continue
				}
				tx.Changes = kept
			}
		}
		order = order[:0]
		clear(bySpan)
		for _, ch := range tx.Changes {
			if _, ok := bySpan[ch.Span]; !ok {
				order = append(order, ch.Span)
			}
			bySpan[ch.Span] = append(bySpan[ch.Span], ch.Event)
		}
		for _, span := range order {
			if err := w.Write(ctx, writer.SpanID(span), bySpan[span]...); err != nil {
				return nil, fmt.Errorf("write span %d at %d: %w", span, tx.CommitTs, err)
			}
		}
		for _, span := range tx.DroppedSpans {
			if !spans[span] {
				continue
			}
			if err := w.AdvanceResolved(writer.SpanID(span), tx.CommitTs); err != nil {
				return nil, err
			}
			if err := w.RemoveSpan(writer.SpanID(span)); err != nil {
				return nil, err
			}
			delete(spans, span)
		}
		for _, span := range tx.NewSpans {
			if err := w.AddSpan(writer.SpanID(span), tx.CommitTs); err != nil {
				return nil, fmt.Errorf("add span %d at %d: %w", span, tx.CommitTs, err)
			}
			spans[span] = true
		}
		for span := range spans {
			if err := w.AdvanceResolved(writer.SpanID(span), tx.CommitTs); err != nil {
				return nil, err
			}
		}
		l.lastTs = tx.CommitTs
		if tx.DDL {
			l.ddls++
		} else {
			l.rows += int64(len(tx.Changes))
			if l.midTs == 0 && l.rows >= int64(cfg.Rows)/2 {
				l.midTs = tx.CommitTs
			}
		}
	}
	l.model = g.Model()
	return l, w.Close(ctx)
}

// modelRows is the number of rows the upstream holds at the end.
func modelRows(m *workload.Model) int64 {
	var n int64
	for _, t := range m.Tables {
		n += int64(len(t.Rows))
	}
	return n
}

// openApplyEnv opens the cell's downstream server (or folder). A nil env
// with a nil error means the sink is not available (res.Info says why).
func openApplyEnv(ctx context.Context, in childInput, res *Result) (*applyEnv, error) {
	switch c := in.Cell; c.Sink {
	case applySQLite:
		env, err := newSQLiteEnv(in.Dir, c.Sync)
		if env != nil {
			res.Info["synchronous"] = env.sync
		}
		return env, err
	case applyMariaDB:
		return newMariaDBEnv(ctx, in, res, true)
	case applyPostgres:
		return newPostgresEnv(ctx, in, res, true)
	default:
		return nil, fmt.Errorf("apply cell %s: unknown sink %q", c.ID, c.Sink)
	}
}

// runApplyCell writes the gen log (untimed), replays it whole with apply.Run
// into a fresh downstream (timed from reader.Open to Run's return), checks
// the downstream holds the upstream's rows, then replays its first NaiveRows
// row changes (and the DDLs among them) naively into another fresh
// downstream of the same sink and settings (timed likewise). The insert
// cell (Mix "insert") compares apply.Run with the sink's bulk load instead
// (runApplyInsertCell).
func runApplyCell(ctx context.Context, in childInput, res *Result) error {
	c := in.Cell
	env, err := openApplyEnv(ctx, in, res)
	if err != nil {
		return err
	}
	if env == nil {
		return nil // not available: res.Info says why
	}
	defer env.close()
	if c.Mix == applyInsert {
		return runApplyInsertCell(ctx, in, res, env)
	}

	b, _, done, err := openBucket(ctx, in.Backend, in.Dir)
	if err != nil {
		return err
	}
	defer done()
	const logID = "apply"
	t0 := time.Now()
	l, err := writeGenLog(ctx, b, logID, applyLogConfig(c, env.schema), false)
	if err != nil {
		return fmt.Errorf("write the gen log: %w", err)
	}
	res.Metrics["log_rows"] = float64(l.rows)
	res.Metrics["log_ddls"] = float64(l.ddls)
	res.Metrics["log_write_s"] = time.Since(t0).Seconds()
	res.Metrics["gomaxprocs"] = float64(runtime.GOMAXPROCS(0))

	// apply.Run, as `redokit apply` runs it.
	sink, err := env.open(ctx, "apply", logID)
	if err != nil {
		return err
	}
	if err := env.settleDown(ctx); err != nil {
		sink.Close()
		return err
	}
	cpu0, t0 := cpuSeconds(), time.Now()
	r, err := reader.Open(ctx, b, &reader.Options{LogID: logID, EndTs: l.lastTs})
	if err != nil {
		sink.Close()
		return err
	}
	ar, err := apply.Run(ctx, r.CodecEvents(ctx), sink, nil)
	r.Close()
	el, cpu := time.Since(t0), cpuSeconds()-cpu0
	if err != nil {
		sink.Close()
		return fmt.Errorf("apply.Run: %w", err)
	}
	if ar.Rows != l.rows {
		sink.Close()
		return fmt.Errorf("apply.Run applied %d row changes of the log's %d", ar.Rows, l.rows)
	}
	got, err := env.countRows(ctx, sink.DB(), l.model)
	sink.Close()
	if err != nil {
		return fmt.Errorf("count the rows apply left: %w", err)
	}
	if want := modelRows(l.model); got != want {
		return fmt.Errorf("apply.Run left %d rows downstream, the upstream holds %d", got, want)
	}
	res.Metrics["apply_rows_s"] = float64(ar.Rows) / el.Seconds()
	res.Metrics["apply_s"] = el.Seconds()
	res.Metrics["apply_cpu_s"] = cpu
	res.Metrics["apply_txns"] = float64(ar.Transactions)
	// Where the time went: waiting at the DDLs' barriers for the workers
	// to commit, in the DDLs (server work the naive loop pays too), and
	// the rest (reading, and the rows the workers apply meanwhile).
	res.Metrics["apply_barrier_s"] = ar.BarrierTime.Seconds()
	res.Metrics["apply_ddl_s"] = ar.DDLTime.Seconds()
	res.Metrics["apply_other_s"] = (el - ar.BarrierTime - ar.DDLTime).Seconds()
	res.Metrics["apply_write_s"] = ar.WriteTime.Seconds()
	res.Metrics["apply_commit_s"] = ar.CommitTime.Seconds()
	res.Metrics["rss_mib"] = float64(peakRSS()) / mib

	// The naive replay of NaiveRows row changes from the log's start, into
	// small tables, and as many from its middle, into tables as large as
	// apply's are on average: apply's rate is over the whole log.
	first, err := naiveWindow(ctx, env, b, logID, "naive", 0, l.lastTs, int64(c.NaiveRows))
	if err != nil {
		return fmt.Errorf("naive replay from the start: %w", err)
	}
	mid, err := naiveWindow(ctx, env, b, logID, "naive-mid", l.midTs, l.lastTs, int64(c.NaiveRows))
	if err != nil {
		return fmt.Errorf("naive replay from the middle (commit ts %d): %w", l.midTs, err)
	}
	res.Metrics["naive_rows"] = float64(first.rows)
	res.Metrics["naive_first_rows_s"] = float64(first.rows) / first.el.Seconds()
	res.Metrics["naive_mid_rows"] = float64(mid.rows)
	res.Metrics["naive_mid_rows_s"] = float64(mid.rows) / mid.el.Seconds()
	res.Metrics["naive_rows_s"] = float64(first.rows+mid.rows) / (first.el + mid.el).Seconds()
	res.Metrics["naive_s"] = (first.el + mid.el).Seconds()
	res.Metrics["naive_cpu_s"] = first.cpu + mid.cpu
	res.Metrics["naive_ddls"] = float64(first.ddls + mid.ddls)
	res.Metrics["naive_ddl_s"] = (first.ddlTime + mid.ddlTime).Seconds()
	res.Metrics["ratio_apply_naive"] = res.Metrics["apply_rows_s"] / res.Metrics["naive_rows_s"]
	return nil
}

// naiveRun is what a naive window measured.
type naiveRun struct {
	rows, ddls int64
	el         time.Duration
	cpu        float64
	ddlTime    time.Duration
}

// naiveWindow replays up to n row changes of the log after commit ts from
// naively into a fresh downstream called name (timed), which apply.Run has
// first brought to the log's state at from (untimed).
func naiveWindow(ctx context.Context, env *applyEnv, b *blob.Bucket, logID, name string, from, lastTs uint64, n int64) (naiveRun, error) {
	var out naiveRun
	if err := env.reset(ctx); err != nil {
		return out, err
	}
	nsink, err := env.open(ctx, name, logID)
	if err != nil {
		return out, err
	}
	defer nsink.Close()
	if from > 0 {
		r, err := reader.Open(ctx, b, &reader.Options{LogID: logID, EndTs: from})
		if err != nil {
			return out, err
		}
		_, err = apply.Run(ctx, r.CodecEvents(ctx), nsink, nil)
		r.Close()
		if err != nil {
			return out, fmt.Errorf("bring the downstream to commit ts %d: %w", from, err)
		}
	}
	r, err := reader.Open(ctx, b, &reader.Options{LogID: logID, StartTs: from, EndTs: lastTs})
	if err != nil {
		return out, err
	}
	defer r.Close()
	nv, err := newNaive(ctx, nsink, env.dialect)
	if err != nil {
		return out, err
	}
	defer nv.close()
	if err := env.settleDown(ctx); err != nil {
		return out, err
	}
	cpu0, t0 := cpuSeconds(), time.Now()
	out.rows, err = nv.replay(ctx, r, n)
	out.el, out.cpu = time.Since(t0), cpuSeconds()-cpu0
	out.ddls, out.ddlTime = int64(nv.ddls), nv.ddlTime
	return out, err
}

// applyEnv is a downstream server (or folder) the cell makes fresh sinks in.
type applyEnv struct {
	schema  string  // the gen workload's schema ("" for gen's default)
	dialect string  // the sink: applySQLite, applyMariaDB or applyPostgres
	sync    string  // SQLite: the synchronous pragma of both downstreams
	admin   *sql.DB // MariaDB, PostgreSQL: a pool outside the downstreams
	open    func(ctx context.Context, name, logID string) (*mysql.Sink, error)
	// reset drops what the apply wrote, before the naive replay.
	reset func(ctx context.Context) error
	// settle, when set, runs (untimed) before each timed replay or load:
	// on PostgreSQL a CHECKPOINT, so that neither side of a ratio pays
	// for a checkpoint of the other's writes.
	settle func(ctx context.Context) error
	close  func()
	// ref is a table of the gen schema as the downstream's SQL names it.
	ref func(table string) string
}

// settleDown runs env.settle, if any, and a garbage collection: the
// process has just written the log, and a timed run starts, as a fresh
// `redokit apply` would, with none of that garbage left to trace.
func (e *applyEnv) settleDown(ctx context.Context) error {
	runtime.GC()
	if e.settle == nil {
		return nil
	}
	if err := e.settle(ctx); err != nil {
		return fmt.Errorf("%s: settle before a timed run: %w", e.dialect, err)
	}
	return nil
}

// countRows counts the rows of the model's tables downstream.
func (e *applyEnv) countRows(ctx context.Context, db *sql.DB, m *workload.Model) (int64, error) {
	var total int64
	for name := range m.Tables {
		var n int64
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+e.ref(name)).Scan(&n); err != nil {
			return 0, fmt.Errorf("table %s: %w", name, err)
		}
		total += n
	}
	return total, nil
}

// newSQLiteEnv makes sinks on fresh files in a temporary folder, with the
// SQLite sink's defaults (WAL, synchronous=NORMAL, busy_timeout), or with
// synchronous=FULL when sync is "full" (an fsync of the WAL at every commit:
// a commit is durable).
func newSQLiteEnv(dir, sync string) (*applyEnv, error) {
	query := ""
	switch sync {
	case "", "normal":
		sync = "normal"
	case "full":
		query = "?_pragma=synchronous(FULL)"
	default:
		return nil, fmt.Errorf("SQLite synchronous=%q: want normal or full", sync)
	}
	d, err := os.MkdirTemp(dir, "redokit-apply-")
	if err != nil {
		return nil, err
	}
	opened := map[string]bool{}
	return &applyEnv{
		dialect: applySQLite,
		sync:    sync,
		open: func(ctx context.Context, name, logID string) (*mysql.Sink, error) {
			// Each downstream is a file of its own, fresh: a second open of
			// one name would find the first's rows (reset drops nothing).
			if opened[name] {
				return nil, fmt.Errorf("SQLite downstream %q opened twice in one cell: it would not be fresh", name)
			}
			opened[name] = true
			return sqlite.Open(ctx, "sqlite://"+filepath.Join(d, name+".db")+query, &apply.SinkOptions{LogID: logID})
		},
		reset: func(context.Context) error { return nil }, // each downstream has a file of its own
		close: func() { os.RemoveAll(d) },
		ref:   func(t string) string { return `"` + t + `"` },
	}, nil
}

// newMariaDBEnv makes sinks on the server of REDOKIT_MYSQL_DSN: the
// workload in a fresh database (the gen schema) and the progress in another,
// both dropped after. It sets innodb_flush_log_at_trx_commit=1 (and
// sync_binlog=1 when the binary log is on) for the measurement, records the
// values measured with, and restores the old ones at close (unless
// durable is false: the tests leave the server as it is). A nil env with a
// nil error means the server is not available (res.Info says why).
func newMariaDBEnv(ctx context.Context, in childInput, res *Result, durable bool) (*applyEnv, error) {
	dsn := os.Getenv("REDOKIT_MYSQL_DSN")
	if dsn == "" {
		res.Info[applyUnavailable] = "REDOKIT_MYSQL_DSN is not set (scripts/emulators.sh start mariadb, then source its env file)"
		return nil, nil
	}
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		// The driver's parse errors do not quote the DSN, password included.
		return nil, fmt.Errorf("REDOKIT_MYSQL_DSN: %w", err)
	}
	// As mysql.Open configures it: interpolated parameters, UTC sessions.
	cfg.DBName = ""
	cfg.InterpolateParams = true
	cfg.MultiStatements = false
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("REDOKIT_MYSQL_DSN: %w", err)
	}
	admin := sql.OpenDB(conn)
	if err := admin.PingContext(ctx); err != nil {
		admin.Close()
		res.Info[applyUnavailable] = fmt.Sprintf("MariaDB at %s does not answer: %v", cfg.Addr, err)
		return nil, nil
	}
	var version string
	var flush, syncBinlog int64
	var logBin, localInfile bool
	if err := admin.QueryRowContext(ctx, "SELECT VERSION(), @@GLOBAL.innodb_flush_log_at_trx_commit, @@GLOBAL.sync_binlog, @@GLOBAL.log_bin, @@GLOBAL.local_infile").
		Scan(&version, &flush, &syncBinlog, &logBin, &localInfile); err != nil {
		admin.Close()
		return nil, fmt.Errorf("MariaDB at %s: read the durability settings: %w", cfg.Addr, err)
	}
	restore := func() {
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(rctx, fmt.Sprintf("SET GLOBAL innodb_flush_log_at_trx_commit=%d", flush)); err != nil {
			fmt.Fprintf(os.Stderr, "apply/mariadb: restore innodb_flush_log_at_trx_commit=%d: %v\n", flush, err)
		}
		if logBin {
			if _, err := admin.ExecContext(rctx, fmt.Sprintf("SET GLOBAL sync_binlog=%d", syncBinlog)); err != nil {
				fmt.Fprintf(os.Stderr, "apply/mariadb: restore sync_binlog=%d: %v\n", syncBinlog, err)
			}
		}
		if !localInfile && in.Cell.Mix == applyInsert {
			if _, err := admin.ExecContext(rctx, "SET GLOBAL local_infile=0"); err != nil {
				fmt.Fprintf(os.Stderr, "apply/mariadb: restore local_infile=0: %v\n", err)
			}
		}
	}
	var set []string
	if durable {
		set = append(set, "SET GLOBAL innodb_flush_log_at_trx_commit=1")
		if logBin {
			set = append(set, "SET GLOBAL sync_binlog=1")
		}
		if !localInfile && in.Cell.Mix == applyInsert {
			// The bulk baseline is LOAD DATA LOCAL INFILE; the driver
			// sends a registered reader's rows, the server must accept them.
			set = append(set, "SET GLOBAL local_infile=1")
		}
	} else {
		restore = func() {}
	}
	for _, q := range set {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			restore()
			admin.Close()
			return nil, fmt.Errorf("MariaDB at %s: %s: %w", cfg.Addr, q, err)
		}
	}
	var mflush, msync int64
	if err := admin.QueryRowContext(ctx, "SELECT @@GLOBAL.innodb_flush_log_at_trx_commit, @@GLOBAL.sync_binlog").Scan(&mflush, &msync); err != nil {
		restore()
		admin.Close()
		return nil, err
	}
	if durable && mflush != 1 {
		restore()
		admin.Close()
		return nil, fmt.Errorf("MariaDB at %s: innodb_flush_log_at_trx_commit is %d after setting it to 1", cfg.Addr, mflush)
	}
	res.Info["server"] = version
	res.Info["innodb_flush_log_at_trx_commit"] = fmt.Sprint(mflush)
	res.Info["log_bin"] = fmt.Sprint(logBin)
	res.Info["sync_binlog"] = fmt.Sprint(msync)
	res.Info["innodb_flush_log_at_trx_commit_before"] = fmt.Sprint(flush)
	if in.Cell.Mix == applyInsert {
		res.Info["local_infile_before"] = fmt.Sprint(localInfile)
	}
	res.Metrics["innodb_flush_log_at_trx_commit"] = float64(mflush)

	schema := fmt.Sprintf("rkbench_%d_%d", os.Getpid(), in.Rep)
	progress := schema + "_progress"
	drop := func(ctx context.Context) error {
		for _, s := range []string{schema, progress} {
			if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+s+"`"); err != nil {
				return fmt.Errorf("MariaDB: drop database %s: %w", s, err)
			}
		}
		return nil
	}
	if err := drop(ctx); err != nil {
		restore()
		admin.Close()
		return nil, err
	}
	var dbs []*sql.DB
	return &applyEnv{
		admin:   admin,
		schema:  schema,
		dialect: applyMariaDB,
		open: func(ctx context.Context, name, logID string) (*mysql.Sink, error) {
			db := sql.OpenDB(conn)
			dbs = append(dbs, db)
			return mysql.New(ctx, db, &apply.SinkOptions{LogID: logID, ProgressSchema: progress})
		},
		reset: drop,
		close: func() {
			dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := drop(dctx); err != nil {
				fmt.Fprintln(os.Stderr, "apply/mariadb:", err)
			}
			for _, db := range dbs {
				db.Close()
			}
			restore()
			admin.Close()
		},
		ref: func(t string) string { return "`" + schema + "`.`" + t + "`" },
	}, nil
}

// naive is the baseline: one statement per row change in autocommit, on one
// connection, no batching, no progress table, each DDL through the sink's
// ApplyDDL with a zero mark (which records nothing) so the schema follows
// the log. Inserts and updates are upserts of the new image (INSERT … ON
// CONFLICT DO UPDATE on SQLite, INSERT … ON DUPLICATE KEY UPDATE on MySQL),
// deletes (and the old image of an update that moves the key) a DELETE by
// key, or by every column with one row's limit on a table without a key.
// Values are bound as the SQL sink binds them. On SQLite each statement
// shape stays prepared, so the baseline pays for the commits and not for
// parsing SQL; MySQL interpolates the values, one round trip a statement,
// as the sink does.
//
// The row changes run in log order: a commit ts of a gen log holds one
// transaction that touches each row once and never moves a key, so that
// order gives the upstream's rows (TestNaiveMatchesApply checks it).
type naive struct {
	sink  *mysql.Sink
	conn  *sql.Conn
	my    bool // MariaDB
	pg    bool // PostgreSQL
	stmts map[string]*sql.Stmt
	buf   []byte
	args  []any

	ddls    int           // DDLs applied
	ddlTime time.Duration // in the sink's ApplyDDL
}

func newNaive(ctx context.Context, sink *mysql.Sink, dialect string) (*naive, error) {
	my, pg := dialect == applyMariaDB, dialect == applyPostgres
	// The pool keeps no limit: the sink's DDLs then run as apply's do (on
	// MySQL, on a connection the sink keeps between them).
	conn, err := sink.DB().Conn(ctx)
	if err != nil {
		return nil, err
	}
	return &naive{sink: sink, conn: conn, my: my, pg: pg, stmts: map[string]*sql.Stmt{}}, nil
}

func (n *naive) close() {
	n.forget()
	n.conn.Close()
}

func (n *naive) forget() {
	for q, st := range n.stmts {
		st.Close()
		delete(n.stmts, q)
	}
}

// replay applies the reader's events until limit row changes are applied
// (or the log ends) and returns how many were.
func (n *naive) replay(ctx context.Context, r *reader.Reader, limit int64) (int64, error) {
	var rows int64
	for rows < limit {
		ev, err := r.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return rows, err
		}
		if err := n.event(ctx, &ev.Event); err != nil {
			return rows, err
		}
		if ev.Kind == codec.RowEvent {
			rows++
		}
	}
	return rows, nil
}

// event applies one event.
func (n *naive) event(ctx context.Context, ev *codec.Event) error {
	if ev.Kind == codec.DDLEvent {
		n.forget() // the tables' shapes may have changed
		t0 := time.Now()
		err := n.sink.ApplyDDL(ctx, &ev.DDL, apply.DDLMark{})
		n.ddlTime += time.Since(t0)
		n.ddls++
		return err
	}
	row := &ev.Row
	table := apply.TableOf(row.Table)
	switch row.Op() {
	case codec.OpDelete:
		return n.delete(ctx, table, row.PreColumns)
	case codec.OpUpdate:
		if codec.KeyChanged(row.PreColumns, row.Columns) {
			if err := n.delete(ctx, table, row.PreColumns); err != nil {
				return err
			}
		}
	}
	return n.upsert(ctx, table, row.Columns)
}

func (n *naive) quote(b []byte, name string) []byte {
	q := byte('"')
	if n.my {
		q = '`'
	}
	b = append(b, q)
	for i := 0; i < len(name); i++ {
		if name[i] == q {
			b = append(b, q)
		}
		b = append(b, name[i])
	}
	return append(b, q)
}

func (n *naive) table(b []byte, t apply.Table) []byte {
	if n.my || n.pg {
		b = n.quote(b, t.Schema)
		b = append(b, '.')
	}
	return n.quote(b, t.Name)
}

func (n *naive) exec(ctx context.Context) error {
	q := string(n.buf)
	if n.my || n.pg {
		// MySQL: interpolated, as the sink runs it; PostgreSQL: pgx
		// prepares each statement text once on the connection and keeps it.
		_, err := n.conn.ExecContext(ctx, q, n.args...)
		return err
	}
	st := n.stmts[q]
	if st == nil {
		var err error
		if st, err = n.conn.PrepareContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
		n.stmts[q] = st
	}
	if _, err := st.ExecContext(ctx, n.args...); err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	return nil
}

func (n *naive) upsert(ctx context.Context, t apply.Table, img []codec.Column) error {
	n.buf = append(n.buf[:0], "INSERT INTO "...)
	n.buf = n.table(n.buf, t)
	n.buf = append(n.buf, " ("...)
	n.args = n.args[:0]
	cols := storedColumns(img)
	for k, i := range cols {
		if k > 0 {
			n.buf = append(n.buf, ',')
		}
		n.buf = n.quote(n.buf, img[i].Name)
		n.args = append(n.args, naiveArg(n.my, img[i].Value))
	}
	n.buf = append(n.buf, ") VALUES ("...)
	for k := range cols {
		if k > 0 {
			n.buf = append(n.buf, ',')
		}
		n.buf = n.param(n.buf, k+1)
	}
	switch {
	case n.my:
		n.buf = append(n.buf, ") ON DUPLICATE KEY UPDATE "...)
	case n.pg:
		// PostgreSQL's DO UPDATE names its conflict target; a keyless
		// table's row is only inserted.
		key := codec.KeyColumns(img)
		if key == nil {
			n.buf = append(n.buf, ')')
			return n.exec(ctx)
		}
		n.buf = append(n.buf, ") ON CONFLICT ("...)
		for j, i := range key {
			if j > 0 {
				n.buf = append(n.buf, ',')
			}
			n.buf = n.quote(n.buf, img[i].Name)
		}
		n.buf = append(n.buf, ") DO UPDATE SET "...)
	default:
		n.buf = append(n.buf, ") ON CONFLICT DO UPDATE SET "...)
	}
	for k, i := range cols {
		if k > 0 {
			n.buf = append(n.buf, ',')
		}
		n.buf = n.quote(n.buf, img[i].Name)
		if n.my {
			n.buf = append(n.buf, "=VALUES("...)
			n.buf = n.quote(n.buf, img[i].Name)
			n.buf = append(n.buf, ')')
		} else {
			n.buf = append(n.buf, "=excluded."...)
			n.buf = n.quote(n.buf, img[i].Name)
		}
	}
	return n.exec(ctx)
}

// storedColumns returns the indexes of img's columns a statement writes:
// all but the generated ones.
func storedColumns(img []codec.Column) []int {
	var cols []int
	for i := range img {
		if !img[i].Flags.Has(codec.FlagGenerated) {
			cols = append(cols, i)
		}
	}
	return cols
}

func (n *naive) delete(ctx context.Context, t apply.Table, img []codec.Column) error {
	n.buf = append(n.buf[:0], "DELETE FROM "...)
	n.buf = n.table(n.buf, t)
	n.buf = append(n.buf, " WHERE "...)
	n.args = n.args[:0]
	key := codec.KeyColumns(img)
	if key == nil {
		switch {
		case n.pg:
			n.buf = append(n.buf, "ctid = (SELECT ctid FROM "...)
			n.buf = n.table(n.buf, t)
			n.buf = append(n.buf, " WHERE "...)
		case !n.my:
			n.buf = append(n.buf, "rowid = (SELECT rowid FROM "...)
			n.buf = n.table(n.buf, t)
			n.buf = append(n.buf, " WHERE "...)
		}
		key = storedColumns(img)
	}
	for j, i := range key {
		if j > 0 {
			n.buf = append(n.buf, " AND "...)
		}
		n.buf = n.quote(n.buf, img[i].Name)
		if img[i].Value.IsNull() {
			n.buf = append(n.buf, " IS NULL"...)
			continue
		}
		n.buf = append(n.buf, " = "...)
		n.args = append(n.args, naiveArg(n.my, img[i].Value))
		n.buf = n.param(n.buf, len(n.args))
	}
	if codec.KeyColumns(img) == nil {
		n.buf = append(n.buf, " LIMIT 1"...)
		if !n.my {
			n.buf = append(n.buf, ')')
		}
	}
	return n.exec(ctx)
}

// param appends the k-th (from 1) placeholder: $k on PostgreSQL, ? elsewhere.
func (n *naive) param(b []byte, k int) []byte {
	if n.pg {
		return strconv.AppendInt(append(b, '$'), int64(k), 10)
	}
	return append(b, '?')
}

// naiveArg binds a value as the SQL sink does (its Dialect.arg): MySQL takes
// unsigned values whole; SQLite takes those above 2^63-1 as decimal text.
func naiveArg(my bool, v codec.Value) any {
	switch v.Kind() {
	case codec.KindNull:
		return nil
	case codec.KindInt:
		return v.Int()
	case codec.KindUint, codec.KindBit, codec.KindEnum, codec.KindSet:
		u := v.Uint()
		if my {
			return u
		}
		if u > 1<<63-1 {
			return fmt.Sprint(u)
		}
		return int64(u)
	case codec.KindFloat32:
		return float64(v.Float32())
	case codec.KindFloat64:
		return v.Float64()
	case codec.KindDecimal, codec.KindString, codec.KindJSON:
		return string(v.Bytes())
	case codec.KindBytes:
		return append(make([]byte, 0, max(len(v.Bytes()), 1)), v.Bytes()...)
	case codec.KindDate:
		return v.DateTime().String()[:10]
	case codec.KindDatetime, codec.KindTimestamp:
		return v.DateTime().String()
	case codec.KindDuration:
		return v.Duration().String()
	case codec.KindYear:
		return int64(v.Year())
	}
	return v.String()
}
