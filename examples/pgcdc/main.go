// Command pgcdc is a change-data-capture system for PostgreSQL built on a
// redokit redo log: it reads a real server's changes through logical
// replication and writes them to the log, and through the sink gate to a
// downstream database, which never runs ahead of what the log holds.
//
//	go run ./examples/pgcdc -pg 'postgres://postgres@127.0.0.1:5432/app' \
//	    -log /tmp/pgcdc/redo -sink 'sqlite:///tmp/pgcdc/down.db' \
//	    -tables 'branches,accounts:aid:2500:5000:7500,history'
//
// # Upstream
//
// The server needs wal_level=logical and a replication slot and a WAL sender
// per writer (max_replication_slots, max_wal_senders). Setup (run by every
// role but capture, idempotent) creates:
//
//   - a publication (-publication) FOR ALL TABLES, so that tables created
//     later are carried;
//   - one logical replication slot per writer (-slot-prefix + index),
//     decoded with pgoutput (github.com/jackc/pglogrepl), but with -role
//     setup;
//   - REPLICA IDENTITY FULL on every table there, and, through the event
//     trigger, on every table created later: pgoutput then sends the whole
//     old row of each update and delete, the before image the log carries;
//   - the table pgcdc_ddl and two event triggers writing a row into it for
//     each DDL statement. pgoutput carries no DDL; the row travels in the
//     WAL like any other, in the transaction of its DDL, so DDLs and rows
//     come out in LSN order;
//   - when it creates the slots, an initial snapshot (see below).
//
// # The initial snapshot
//
// Tables that exist before the capture starts are carried from a snapshot,
// the way logical replication tools start: after the slots, setup creates a
// temporary slot that exports its snapshot (CREATE_REPLICATION_SLOT …
// EXPORT_SNAPSHOT) and imports it into a REPEATABLE READ transaction (SET
// TRANSACTION SNAPSHOT). Its consistent point S is at or above every slot's:
// the snapshot holds every transaction whose commit record is below S, and
// the slots send those at or above it. The log starts at S-3; the
// coordinator logs, under the writer ID pgcdc-snapshot, each table of
// -tables the snapshot holds: its CREATE TABLE at commit ts S-2 (the types
// below, NOT NULL, the primary key, AUTO_INCREMENT on a serial or identity
// first key column; defaults, indexes and other constraints stay upstream)
// and its rows at S-1, read as a stream and written in batches of 512 rows
// per span by a writer with a 64 MiB memory quota (it stages what passes
// it), so memory does not grow with a table. Then it resolves every span at
// S-1, removes that writer from the log's writers, and only then records
// the snapshot done. The captures wait for that, drop what their slots send
// at or below S-1 (a slot made before the temporary one sends what
// committed in between), and replay (S-3, S-1] from the log into their
// downstreams as they replay any range below their slots (see
// Acknowledgement and restart).
//
// The record is the file "snapshot" of -state: "pending S" from before the
// log exists, "done S" at the end. A snapshot that was interrupted cannot be
// resumed (PostgreSQL's exported snapshot lives as long as the transaction
// that took it): a coordinator that finds it pending refuses to start with
// ErrSnapshotIncomplete, naming the slots and the log to drop to start over.
//
// # Events
//
// Each relation is a span, or several: a table listed as
// name:column:b1:b2… is split into ranges of that integer column (keys below
// b1, b1 up to b2, …, the rest). Spans go to the writers round robin; each
// writer reads its own slot of the same stream and writes the events of its
// own spans. An update that moves a row across ranges is a delete in the old
// span and an insert in the new one.
//
// Each committed transaction's row changes carry complete before and after
// images. Values are mapped exactly to the log's MySQL model: int2/int4/int8
// to SMALLINT/INT/BIGINT, bool to TINYINT(1) (0/1), numeric to DECIMAL (its
// exact text), text and varchar to LONGTEXT and VARCHAR (utf8mb4), bytea to
// LONGBLOB, float4/float8 to FLOAT/DOUBLE (their exact bits; NaN and
// infinities are refused), date to DATE, timestamp(p) to DATETIME(p),
// timestamptz(p) to TIMESTAMP(p) in UTC, json and jsonb to JSON (their text).
// Any other type is an error naming the table and column, at its first row.
//
// DDLs are written as MySQL text, the dialect of the log (the sinks translate
// MySQL DDL): CREATE TABLE with columns of the types above, NOT NULL and a
// primary key; ALTER TABLE … ADD COLUMN; DROP TABLE. smallserial, serial and
// bigserial columns and GENERATED … AS IDENTITY are their integer type, NOT
// NULL, and AUTO_INCREMENT on the primary key's first column (the sinks drop
// it: the log carries every value the sequence gave). A query of several
// statements (a migration sent as one string) is split at its semicolons
// outside literals, quoted names, dollar quotes and comments; the trigger
// counts the statements of each tag in the client's message, so each record
// gets its own statement.
//
// Any other DDL — one with a DEFAULT or a constraint other than the primary
// key, a serial or identity column added to a table, CREATE INDEX, ALTER …
// TYPE, … — stops the capture with ErrUntranslatedDDL (a *DDLError) quoting
// the statement and naming the commit LSN of its transaction, and so do a
// DDL on a split table (its spans belong to several gates, which would need
// a barrier) and TRUNCATE. Restarted, the capture stops there again: the way
// on is -skip-ddl LSN (comma-separated, as many as needed), which leaves the
// DDLs of that transaction that the capture cannot translate out of the log
// (each logged as a warning; the ones it can translate are carried). Apply
// their change downstream by hand first when it matters there (a DEFAULT
// does not: the log carries every value). A transaction holding DDL and rows
// stops the capture too (at one commit ts the log orders rows before DDLs,
// the reverse of a CREATE TABLE followed by its first rows); run DDL in
// transactions of their own.
//
// # Timestamps
//
// The commit ts of a transaction is its commit LSN: pgoutput sends
// transactions in commit order, each commit record has its own LSN, so the
// mapping is strictly monotone and unique, a TSO without a clock. The start
// ts is the commit ts minus one. A span's resolved ts moves to each commit's
// LSN, and between transactions to just below the WAL position a keepalive
// reports and below each heartbeat (a non-transactional logical message the
// capture emits every -tick): when either is decoded, every commit below it
// has been sent.
//
// # Acknowledgement and restart
//
// A slot is acknowledged (its flush LSN) only up to the log's global resolved
// ts, read from the log's meta object. A capture that dies (SIGKILL) loses
// nothing: started again, it takes its writer ID over (fencing the dead
// process) and restarts its spans at the log's checkpoint, which its
// downstream is known to hold. What lies between the checkpoint and the
// slot's confirmed LSN the slot will not send again, but the log holds it:
// the capture reads it from the log and hands it to its gate (and to the log
// again, as copies the reader drops), then writes what the slot sends above
// the confirmed LSN. (The coordinator may move the checkpoint up meanwhile,
// folding what the dead process's downstream applied: the replay then
// starts at the new checkpoint, which every downstream holds.) A downstream that was down while its capture died thus
// gets everything; a restart that trusted the slot alone would skip what the
// dead process logged but never released downstream.
//
// # Roles
//
// -role all (the default) runs setup, the coordinator and every writer in
// one process until SIGINT. A deployment of several processes runs one
// -role coordinator (setup, the log's coordinator, the initial snapshot, the
// checkpoint) and one -role capture -writer i per writer, with the same
// -tables, -writers, -log and -state (the captures read the snapshot's
// record there). Each capture's gate reports the downstream's applied ts in
// a file of -state; the coordinator moves the log's checkpoint to their
// minimum. -role setup prepares the upstream (the DDL table, its triggers,
// REPLICA IDENTITY FULL, the publication) but creates no slot: the slots
// and the snapshot taken with them are the coordinator's.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redokit/redokit"
	_ "github.com/redokit/redokit/apply/postgres"
	_ "github.com/redokit/redokit/apply/sqlite"
	"github.com/redokit/redokit/backends/local"
	_ "github.com/redokit/redokit/backends/s3"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/meta"
)

type config struct {
	PG            string
	Log           string // the redo log: a directory (local backend), or a store URL such as s3://bucket/prefix
	LogID         string
	Sink          string // the downstream's URI (apply.Open)
	State         string // checkpoint files
	Publication   string
	SlotPrefix    string
	Tables        string
	Writers       int
	Role          string
	Writer        int
	SkipDDL       string // -skip-ddl: commit LSNs, comma-separated
	Tick          time.Duration
	FlushInterval time.Duration
	Logger        *slog.Logger
}

func main() {
	cfg := &config{}
	flag.StringVar(&cfg.PG, "pg", os.Getenv("PGCDC_UPSTREAM"), "upstream PostgreSQL DSN (default $PGCDC_UPSTREAM)")
	flag.StringVar(&cfg.Log, "log", "pgcdc-redo", "redo log: a directory, or a store URL (s3://bucket/prefix?endpoint=…)")
	flag.StringVar(&cfg.LogID, "log-id", "pgcdc", "redo log ID")
	flag.StringVar(&cfg.Sink, "sink", "", "downstream URI: sqlite:///path.db or postgres://… (required)")
	flag.StringVar(&cfg.State, "state", "", "directory of the captures' checkpoint files (default: -log/../state)")
	flag.StringVar(&cfg.Publication, "publication", "pgcdc", "publication to create and read")
	flag.StringVar(&cfg.SlotPrefix, "slot-prefix", "pgcdc_", "replication slots are this prefix and the writer's index")
	flag.StringVar(&cfg.Tables, "tables", "", "captured tables, comma-separated; name:column:b1:b2… splits a table by ranges of an integer key (required)")
	flag.IntVar(&cfg.Writers, "writers", 2, "writers (captures), each with its own slot and writer ID")
	flag.StringVar(&cfg.Role, "role", "all", "all | setup | coordinator | capture")
	flag.IntVar(&cfg.Writer, "writer", 0, "with -role capture: this writer's index")
	flag.StringVar(&cfg.SkipDDL, "skip-ddl", "", "commit LSNs (comma-separated) of transactions whose DDLs the capture cannot translate: those DDLs are left out of the log (see ErrUntranslatedDDL)")
	flag.DurationVar(&cfg.Tick, "tick", 100*time.Millisecond, "acknowledgement, heartbeat and coordinator interval")
	flag.DurationVar(&cfg.FlushInterval, "flush-interval", 50*time.Millisecond, "redo writers' flush interval")
	flag.Parse()
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "pgcdc:", err)
		os.Exit(1)
	}
}

func (cfg *config) check() error {
	switch {
	case cfg.PG == "":
		return errors.New("-pg: the upstream DSN is required")
	case cfg.Tables == "":
		return errors.New("-tables: name the tables to capture")
	case cfg.Sink == "" && (cfg.Role == "all" || cfg.Role == "capture"):
		return errors.New("-sink: the downstream URI is required")
	case cfg.Writers < 1:
		return fmt.Errorf("-writers %d: at least 1", cfg.Writers)
	case cfg.Writer < 0 || cfg.Writer >= cfg.Writers:
		return fmt.Errorf("-writer %d: not one of the %d writers", cfg.Writer, cfg.Writers)
	}
	if _, err := parseTables(cfg.Tables, cfg.Writers); err != nil {
		return err
	}
	if _, err := parseSkipDDL(cfg.SkipDDL); err != nil {
		return err
	}
	if cfg.State == "" {
		cfg.State = filepath.Join(filepath.Dir(filepath.Clean(cfg.Log)), "state")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 100 * time.Millisecond
	}
	return os.MkdirAll(cfg.State, 0o755)
}

func (cfg *config) slots() []string {
	var s []string
	for i := range cfg.Writers {
		s = append(s, cfg.SlotPrefix+strconv.Itoa(i))
	}
	return s
}

func openLog(ctx context.Context, cfg *config) (*redokit.Log, func(), error) {
	var b *blob.Bucket
	var err error
	if strings.Contains(cfg.Log, "://") {
		// A store URL (s3://bucket/prefix?endpoint=…, file:///dir): a log
		// in another site than its downstream.
		b, err = blob.Open(ctx, cfg.Log)
	} else {
		b, err = local.New(cfg.Log, &local.Options{CreateDir: true})
	}
	if err != nil {
		return nil, nil, err
	}
	lg, err := redokit.Open(ctx, b, cfg.LogID)
	if err != nil {
		b.Close()
		return nil, nil, err
	}
	return lg, func() { b.Close() }, nil
}

func run(ctx context.Context, cfg *config) error {
	if err := cfg.check(); err != nil {
		return err
	}
	lg, closeLog, err := openLog(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeLog()
	if cfg.Role == "capture" {
		var st captureStats
		return runCapture(ctx, cfg, cfg.Writer, lg, fileCheckpoint(cfg.State, cfg.Writer), &st)
	}
	slots := cfg.slots()
	if cfg.Role == "setup" {
		// An initial snapshot lives as long as the process that took it:
		// the slots are made by the process that logs it.
		slots = nil
	}
	up, err := setup(ctx, cfg.PG, cfg.Publication, slots)
	if err != nil {
		return err
	}
	defer up.close()
	cfg.Logger.Info("upstream set up", "upstream", redactDSN(cfg.PG), "publication", cfg.Publication, "slots", strings.Join(slots, ","), "start_ts", up.start)
	switch cfg.Role {
	case "setup":
		return nil
	case "coordinator":
		return coordinate(ctx, cfg, lg, up)
	case "all":
	default:
		return fmt.Errorf("-role %q: one of all, setup, coordinator, capture", cfg.Role)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := coordinate(ctx, cfg, lg, up); err != nil {
			cancel(err)
		}
	})
	stats := make([]captureStats, cfg.Writers)
	for i := range cfg.Writers {
		wg.Go(func() {
			if err := runCapture(ctx, cfg, i, lg, fileCheckpoint(cfg.State, i), &stats[i]); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// coordinate runs the log's coordinator: it registers the writers and the
// spans (at up.start, for a new log), logs the initial snapshot, computes
// and persists the global resolved ts, and moves the checkpoint to the least
// applied ts the captures report.
func coordinate(ctx context.Context, cfg *config, lg *redokit.Log, up *upstream) error {
	spans, err := parseTables(cfg.Tables, cfg.Writers)
	if err != nil {
		return err
	}
	startTs := up.start
	if startTs == 0 {
		// The slots existed: the log must be the one they fed, and its
		// snapshot complete.
		state, lsn, err := readSnapshotState(cfg.State)
		if err != nil {
			return err
		}
		if state == "pending" {
			return incompleteSnapshot(cfg, lsn)
		}
		m, err := lg.Meta(ctx)
		if err != nil {
			return fmt.Errorf("log %s: the slots exist but the log has no meta object (%w): use the log they fed, or drop the slots", lg.ID(), err)
		}
		startTs = m.CheckpointTs
	} else if up.snap != nil {
		// Before the log exists: a capture that finds the log finds the
		// snapshot pending, and waits for it.
		if err := writeSnapshotState(cfg.State, "pending", up.snap.lsn); err != nil {
			return err
		}
	}
	coord, err := lg.OpenCoordinator(ctx, &meta.CoordinatorOptions{StartTs: startTs, Logger: cfg.Logger})
	if err != nil {
		return err
	}
	m := coord.Meta()
	if up.snap != nil {
		if err := coord.AddWriter(ctx, snapshotWriter); err != nil {
			return err
		}
	}
	for i := range cfg.Writers {
		if _, ok := m.Writers[writerID(i)]; !ok {
			if err := coord.AddWriter(ctx, writerID(i)); err != nil {
				return err
			}
		}
	}
	for _, s := range spans.all {
		if err := coord.AddSpan(ctx, s, startTs); err != nil {
			return err
		}
	}
	if up.snap != nil {
		err := logSnapshot(ctx, cfg, lg, coord, up.snap, spans)
		up.snap.close()
		up.snap = nil
		if err != nil {
			return err
		}
	}
	t := time.NewTicker(cfg.Tick)
	defer t.Stop()
	for {
		if _, err := coord.Tick(ctx); err != nil && ctx.Err() == nil {
			cfg.Logger.Warn("coordinator tick failed", "err", err)
		}
		if cp, ok := foldCheckpoints(cfg); ok {
			m := coord.Meta()
			if cp > m.CheckpointTs {
				if err := coord.SetCheckpoint(ctx, min(cp, m.ResolvedTs)); err != nil && ctx.Err() == nil {
					return fmt.Errorf("checkpoint %d: %w", cp, err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// foldCheckpoints returns the least applied ts the captures reported, once
// every one has.
func foldCheckpoints(cfg *config) (uint64, bool) {
	var least uint64
	for i := range cfg.Writers {
		b, err := os.ReadFile(filepath.Join(cfg.State, "checkpoint-"+writerID(i)))
		if err != nil {
			return 0, false
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return 0, false
		}
		if i == 0 || v < least {
			least = v
		}
	}
	return least, true
}
