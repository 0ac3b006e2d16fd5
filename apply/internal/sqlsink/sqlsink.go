package sqlsink

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
)

// maxStatementBytes bounds an interpolated MySQL statement well below the
// server's default max_allowed_packet (16 MiB in MariaDB, 64 MiB in MySQL 8).
const maxStatementBytes = 4 << 20

// SQLSink is the apply.Sink for SQL databases: SQLite and MySQL-compatible
// ones (MySQL, MariaDB, TiDB). Package apply's doc says what it writes, and
// those of apply/sqlite and apply/mysql what each dialect does its own way.
type SQLSink struct {
	db       *sql.DB
	d        Dialect
	o        apply.SinkOptions
	progress []byte // the quoted, qualified progress table name
	name     string // the redacted URI, or the dialect name
	ownDB    bool
	lite     *sqliteSession // SQLite: the one writer
	scratch  sync.Pool      // *txScratch: a finished transaction's buffers, for the next

	ignoredDDLs atomic.Int64
	mariaDB     bool // MySQL dialect: the server is MariaDB, whose JSON is text

	conflictsMu sync.Mutex
	conflicts   apply.Conflicts // of the committed transactions
	// unsure are the conflicts of transactions whose commit failed in a way
	// that may have committed them (an answer lost, a context ended while
	// the server committed): they count once a read of the progress shows
	// their marks (settleUnsure).
	unsure []unsureTx
	dryMu  sync.Mutex

	fkMu   sync.Mutex
	fks    map[apply.Table][]apply.Table // child → the tables it references; nil until read, and after a DDL
	fkDefs []fkDef                       // MySQL: the foreign keys with their columns; nil until read, and after a DDL
	// scopeFKs is fks as DDLTables last read it, kept across the DDLs that
	// cannot add or move a foreign key (see DDLTables).
	scopeFKs map[apply.Table][]apply.Table

	cat catalog // what the sink read of the tables' unique keys, until a DDL

	klMu      sync.Mutex
	kl        map[apply.Table]klCheck // what the sink knows of the rows of its tables without a key (keyless.go)
	readMarks bool                    // Progress was read: an apply that keeps progress runs

	// ddlConn is the connection MySQL DDLs run on, kept between them (see
	// mysqlDDLConn); nil until the first, and after an error on it.
	ddlMu   sync.Mutex
	ddlConn *sql.Conn
}

var (
	_ apply.Sink      = (*SQLSink)(nil)
	_ apply.TxLimiter = (*SQLSink)(nil)

	_ apply.ConflictReporter = (*SQLSink)(nil)
	_ apply.CommitOrderer    = (*SQLSink)(nil)
	_ apply.CommitTsSplitter = (*SQLSink)(nil)
	_ apply.EventDDLScoper   = (*SQLSink)(nil)
)

// Conflicts returns what the committed transactions met downstream, in all
// and per table.
func (s *SQLSink) Conflicts() apply.Conflicts {
	s.conflictsMu.Lock()
	defer s.conflictsMu.Unlock()
	return s.conflicts.Clone()
}

// addConflictsLocked adds what a committed transaction met; s.conflictsMu
// is held.
func (s *SQLSink) addConflictsLocked(c apply.Conflicts) {
	for _, tc := range c.Tables {
		s.conflicts.Add(apply.Table{Schema: tc.Schema, Name: tc.Table}, tc.Replaced, tc.DeletesMissed, tc.DuplicatedKeyless)
	}
}

// unsureTx is a transaction whose commit may have landed: its progress
// marks and what it met.
type unsureTx struct {
	marks []apply.Mark
	c     apply.Conflicts
}

// maxUnsure bounds the unsure transactions kept: each is a failed commit,
// and Run stops after a few.
const maxUnsure = 64

// stashUnsure keeps the conflicts of a transaction whose commit may have
// landed. Run finds out whether it did from the progress, which the
// transaction wrote (its retry, or the rerun after a failed Run): without
// this, a doubled row of a table without a key that it counted would go
// uncounted, since no retry writes the row again.
func (s *SQLSink) stashUnsure(marks []apply.Mark, c apply.Conflicts) {
	if c.Zero() || len(marks) == 0 {
		return
	}
	s.conflictsMu.Lock()
	defer s.conflictsMu.Unlock()
	if len(s.unsure) == maxUnsure {
		s.unsure = slices.Delete(s.unsure, 0, 1)
	}
	s.unsure = append(s.unsure, unsureTx{marks: slices.Clone(marks), c: c.Clone()})
}

// settleUnsure counts the conflicts of the unsure transactions that p shows
// committed: every mark of theirs is recorded.
func (s *SQLSink) settleUnsure(p apply.Progress) {
	s.conflictsMu.Lock()
	defer s.conflictsMu.Unlock()
	s.unsure = slices.DeleteFunc(s.unsure, func(u unsureTx) bool {
		for _, m := range u.marks {
			if ts, ok := p.Tables[m.Table]; !ok || ts < m.CommitTs {
				return false
			}
		}
		s.addConflictsLocked(u.c)
		return true
	})
}

// committed counts c, what a transaction with marks met, now that it
// committed. An unsure transaction with the same marks was this one's
// earlier attempt: the retry wrote its events again because that attempt
// did not land, so what the retry met is the count and the attempt's is
// dropped, or a later progress read would count the events twice. The
// marks must match exactly: a later transaction's marks also cover an
// unsure one's, and that one may have landed.
func (s *SQLSink) committed(marks []apply.Mark, c apply.Conflicts) {
	s.conflictsMu.Lock()
	defer s.conflictsMu.Unlock()
	if len(s.unsure) > 0 {
		s.unsure = slices.DeleteFunc(s.unsure, func(u unsureTx) bool {
			return sameMarks(u.marks, marks)
		})
	}
	s.addConflictsLocked(c)
}

// sameMarks reports whether a and b record the same commit ts for the same
// tables.
func sameMarks(a, b []apply.Mark) bool {
	if len(a) != len(b) {
		return false
	}
	for _, m := range a {
		if !slices.Contains(b, m) {
			return false
		}
	}
	return true
}

// dryRun writes a statement and its arguments to w, for SinkOptions.DryRun.
func (s *SQLSink) dryRun(w io.Writer, stmt string, args []any) error {
	s.dryMu.Lock()
	defer s.dryMu.Unlock()
	var b strings.Builder
	b.WriteString(stmt)
	b.WriteString(";")
	if len(args) > 0 {
		b.WriteString(" -- args:")
		for _, a := range args {
			b.WriteByte(' ')
			switch v := a.(type) {
			case nil:
				b.WriteString("NULL")
			case string:
				b.WriteString(strconv.Quote(v))
			case []byte:
				fmt.Fprintf(&b, "x'%x'", v)
			default:
				fmt.Fprint(&b, v)
			}
		}
	}
	b.WriteByte('\n')
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("apply: dry run: %w", err)
	}
	return nil
}

// New makes a SQL sink of dialect d over db, named name in errors (a
// redacted URI). When ownDB, Close closes db too. It connects, and creates
// the progress table if it is missing. The dialect's Driver must be
// registered.
func New(ctx context.Context, db *sql.DB, d Dialect, opts *apply.SinkOptions, name string, ownDB bool) (*SQLSink, error) {
	if name == "" {
		name = d.String()
	}
	s, err := newSQLSink(ctx, db, d, opts, name)
	if err != nil {
		return nil, err
	}
	s.ownDB = ownDB
	if ownDB && d != SQLite {
		db.SetMaxIdleConns(maxIdleConns)
	}
	return s, nil
}

// maxIdleConns is how many connections a sink's own MySQL or PostgreSQL
// pool keeps idle. database/sql keeps 2 by default: at each DDL, Run's
// workers (4 by default) commit and give theirs back, all but 2 were closed,
// and the next transactions connected again, each a new server session
// (on PostgreSQL a new backend process) whose every statement is prepared
// anew and whose catalog caches start cold. A log with a DDL every thousand
// rows made thousands of sessions.
const maxIdleConns = 16

func newSQLSink(ctx context.Context, db *sql.DB, d Dialect, opts *apply.SinkOptions, name string) (*SQLSink, error) {
	if drivers[d] == nil {
		return nil, fmt.Errorf("apply: no driver registered for dialect %v", d)
	}
	s := &SQLSink{db: db, d: d, name: name}
	if opts != nil {
		s.o = *opts
	}
	if s.o.ProgressTable == "" {
		s.o.ProgressTable = apply.DefaultProgressTable
	}
	if s.o.MaxStatementRows <= 0 {
		s.o.MaxStatementRows = apply.DefaultMaxStatementRows
	}
	if s.o.Logger == nil {
		s.o.Logger = slog.New(slog.DiscardHandler)
	}
	if err := db.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("apply: connect to %s: %w", name, err)
	}
	if d == SQLite {
		l, err := newSQLiteSession(ctx, db)
		if err != nil {
			return nil, fmt.Errorf("apply: connect to %s: %w", name, err)
		}
		s.lite = l
		// SQLite checks foreign keys only on a connection that asks; the
		// sink's one connection asks when told to keep the checks on, and
		// otherwise makes sure they are off, whatever the URI's pragmas.
		pragma := "PRAGMA foreign_keys = OFF"
		if s.o.ForeignKeyChecks {
			pragma = "PRAGMA foreign_keys = ON"
		}
		// The writer's session is a bulk writer's, whatever the URI's
		// pragmas, and affects no other connection: statement journals
		// (every multi-row statement keeps one) in memory rather than in
		// temporary files; a page cache of 64 MiB rather than 2, so that a
		// transaction of thousands of rows does not spill pages into the
		// WAL and write them again; and a checkpoint every 64 MiB of WAL
		// rather than every 4, so that a page written by many transactions
		// is copied into the database fewer times. On 1,000,000 rows of
		// the gen workload with synchronous=FULL: 84k rows/s before, 120k
		// after.
		for _, pragma := range []string{pragma, "PRAGMA temp_store = MEMORY", "PRAGMA cache_size = -65536", "PRAGMA wal_autocheckpoint = 16384"} {
			if _, err := l.conn.ExecContext(ctx, pragma); err != nil {
				l.close()
				return nil, fmt.Errorf("apply: %s: %s: %w", name, pragma, err)
			}
		}
	}
	if d == MySQL {
		var v string
		if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
			return nil, fmt.Errorf("apply: %s: %w", name, err)
		}
		s.mariaDB = strings.Contains(strings.ToLower(v), "mariadb")
	}
	if err := s.createProgress(ctx); err != nil {
		if s.lite != nil {
			s.lite.close()
		}
		return nil, err
	}
	return s, nil
}

// progressColumns are the progress table's columns, in the order writeMarks
// binds them. A row is one table's (or, with empty names, the DDLs') progress
// of one log (log_id) applied by one apply (sink_name).
const progressColumns = "log_id, sink_name, schema_name, table_name, commit_ts, ddl_count"

// createProgress creates the progress table if it is missing, and refuses one
// written by a redokit that kept no log ID: its rows belong to a log nobody
// can name, so neither skipping by them nor ignoring them is safe.
func (s *SQLSink) createProgress(ctx context.Context) error {
	var ddl string
	switch s.d {
	case MySQL:
		if s.o.ProgressSchema == "" {
			var cur sql.NullString
			if err := s.db.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&cur); err != nil {
				return fmt.Errorf("apply: %s: %w", s.name, err)
			}
			s.o.ProgressSchema = cur.String
		}
		if s.o.ProgressSchema == "" {
			s.o.ProgressSchema = "redokit"
		}
		ddl = ` (
	log_id      VARCHAR(64) NOT NULL,
	sink_name   VARCHAR(64) NOT NULL,
	schema_name VARCHAR(128) NOT NULL,
	table_name  VARCHAR(128) NOT NULL,
	commit_ts   BIGINT UNSIGNED NOT NULL,
	ddl_count   INT UNSIGNED NOT NULL DEFAULT 0,
	PRIMARY KEY (log_id, sink_name, schema_name, table_name)
) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`
	case Postgres:
		if s.o.ProgressSchema == "" {
			s.o.ProgressSchema = "public"
		}
		ddl = ` (
	log_id      text NOT NULL,
	sink_name   text NOT NULL,
	schema_name text NOT NULL,
	table_name  text NOT NULL,
	commit_ts   bigint NOT NULL,
	ddl_count   integer NOT NULL DEFAULT 0,
	PRIMARY KEY (log_id, sink_name, schema_name, table_name)
)`
	default:
		s.o.ProgressSchema = ""
		ddl = ` (
	log_id      TEXT NOT NULL,
	sink_name   TEXT NOT NULL,
	schema_name TEXT NOT NULL,
	table_name  TEXT NOT NULL,
	commit_ts   INTEGER NOT NULL,
	ddl_count   INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (log_id, sink_name, schema_name, table_name)
)`
	}
	s.progress = s.d.table(nil, apply.Table{Schema: s.o.ProgressSchema, Name: s.o.ProgressTable})
	var ex execer = s.db
	if s.lite != nil {
		ex = s.lite.conn
	}
	if s.o.DryRun != nil {
		// A dry run changes nothing downstream; a missing table reads as
		// no progress.
		return nil
	}
	exists := false
	if s.d == Postgres {
		// CREATE SCHEMA IF NOT EXISTS needs the CREATE privilege on the
		// database even when the schema is there: a role that may write
		// only its own schema would be refused for nothing.
		var n int
		if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", s.o.ProgressSchema).Scan(&n); err != nil {
			return fmt.Errorf("apply: %s: look for the progress schema %s: %w", s.name, s.o.ProgressSchema, err)
		}
		exists = n > 0
	}
	if s.d != SQLite && !exists {
		if _, err := ex.ExecContext(ctx, "CREATE "+s.d.schemaWord()+" IF NOT EXISTS "+s.d.Quote(s.o.ProgressSchema)); err != nil {
			return fmt.Errorf("apply: %s: create the progress %s %s: %w", s.name, s.d.schemaWord(), s.o.ProgressSchema, err)
		}
	}
	if _, err := ex.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+string(s.progress)+ddl); err != nil {
		return fmt.Errorf("apply: %s: create the progress table %s: %w", s.name, s.progress, err)
	}
	if _, err := ex.ExecContext(ctx, "SELECT log_id, sink_name FROM "+string(s.progress)+" WHERE 1 = 0"); err != nil {
		// Said as what was tried, not as a guess at why: a lost connection
		// fails here too.
		return fmt.Errorf("apply: %s: read the log_id and sink_name columns of the progress table %s: %w "+
			"(a table written by a redokit older than per-log progress has neither, and its rows name no log: "+
			"use another progress table, SinkOptions.ProgressTable or --progress-table, or drop it to apply from the start)", s.name, s.progress, s.d.classify(err))
	}
	return nil
}

// DB returns the sink's database.
func (s *SQLSink) DB() *sql.DB { return s.db }

// Dialect returns the sink's dialect.
func (s *SQLSink) Dialect() Dialect { return s.d }

// IgnoredDDLs counts the DDLs whose effect was found already there (see
// apply.SinkOptions.StrictDDL).
func (s *SQLSink) IgnoredDDLs() int64 { return s.ignoredDDLs.Load() }

// SplitsCommitTs reports true: a transaction takes a commit ts of a table
// in parts (apply.CommitTsSplitter), so Run holds bounded memory whatever
// the size of an upstream transaction. Each ApplyRows call keeps nothing
// of its rows past its return (it clears its ops), and applies them over
// the state the calls before it left: plan, collapse and the units give
// the rows of applying the part's changes in order, and Run hands out in
// parts only the commit ts for which that is the rows of the whole (see
// plan on the two shapes of a transaction).
func (s *SQLSink) SplitsCommitTs() bool { return true }

// NeedsCommitOrder reports whether the downstream checks foreign keys during
// the apply (SinkOptions.ForeignKeyChecks): Run then keeps commit-ts order
// across tables (apply.CommitOrderer).
func (s *SQLSink) NeedsCommitOrder() bool { return s.o.ForeignKeyChecks }

// MaxOpenTxs is 1 for SQLite (one writer) and unlimited for MySQL.
func (s *SQLSink) MaxOpenTxs() int {
	if s.d == SQLite {
		return 1
	}
	return 0
}

// Close releases the sink's connection, and closes the database if Open
// opened it. Every transaction must have ended.
func (s *SQLSink) Close() error {
	var err error
	if s.lite != nil {
		err = s.lite.close()
	}
	s.ddlMu.Lock()
	if s.ddlConn != nil {
		discard(s.ddlConn)
		s.ddlConn = nil
	}
	s.ddlMu.Unlock()
	if s.ownDB {
		if cerr := s.db.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// Progress reads the progress rows of this log and sink name. The DDL mark is
// the row with an empty schema and table name. It fails when the table holds
// another log's progress and SinkOptions.AnotherLog is not set.
func (s *SQLSink) Progress(ctx context.Context) (apply.Progress, error) {
	p := apply.Progress{Tables: map[apply.Table]uint64{}}
	q := "SELECT log_id, sink_name, schema_name, table_name, commit_ts, ddl_count FROM " + string(s.progress)
	var rows *sql.Rows
	var err error
	if s.lite != nil {
		s.lite.mu.Lock()
		defer s.lite.mu.Unlock()
		rows, err = s.lite.conn.QueryContext(ctx, q)
	} else {
		rows, err = s.db.QueryContext(ctx, q)
	}
	if err != nil {
		if s.o.DryRun != nil && s.d.noSuchTable(err) {
			return p, nil
		}
		return p, s.d.classify(err)
	}
	defer rows.Close()
	var other string
	for rows.Next() {
		var logID, sinkName string
		var t apply.Table
		var ts uint64
		var n int64
		if s.d == MySQL {
			err = rows.Scan(&logID, &sinkName, &t.Schema, &t.Name, &ts, &n)
		} else {
			var its int64
			err = rows.Scan(&logID, &sinkName, &t.Schema, &t.Name, &its, &n)
			if its < 0 {
				err = fmt.Errorf("apply: %s: progress row of %s holds commit ts %d", s.name, t, its)
			}
			ts = uint64(its)
		}
		if err != nil {
			return p, err
		}
		if logID != s.o.LogID {
			other = logID
			continue
		}
		if sinkName != s.o.SinkName {
			continue
		}
		if t == (apply.Table{}) {
			p.DDL = apply.DDLMark{CommitTs: ts, Count: int(n)}
		} else {
			p.Tables[t] = ts
		}
	}
	if err := rows.Err(); err != nil {
		return p, s.d.classify(err)
	}
	s.noteProgress()
	s.settleUnsure(p)
	if other != "" && !s.o.AnotherLog {
		return p, fmt.Errorf("%w: %s holds the progress of log %q in %s, and this is log %q: a downstream normally mirrors one log; "+
			"set SinkOptions.AnotherLog (--another-log) to apply this one too (its progress is kept apart)",
			apply.ErrAnotherLog, s.name, other, s.progress, s.o.LogID)
	}
	return p, nil
}

// tsArg binds a commit ts: SQLite integers are signed 64-bit.
func (s *SQLSink) tsArg(ts uint64) (any, error) {
	if s.d == MySQL {
		return ts, nil
	}
	if ts > math.MaxInt64 {
		return nil, fmt.Errorf("apply: commit ts %d does not fit %v's signed 64-bit integers", ts, s.d)
	}
	return int64(ts), nil
}

// execer is what *sql.Tx and *sql.Conn share.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// writeMarks upserts the progress rows of marks. A table's commit ts never
// goes down; the DDL row is set as given.
func (s *SQLSink) writeMarks(ctx context.Context, ex execer, marks []apply.Mark, ddl *apply.DDLMark) error {
	if len(marks) == 0 && ddl == nil || s.o.DryRun != nil {
		return nil
	}
	b := append([]byte("INSERT INTO "), s.progress...)
	b = append(b, " ("+progressColumns+") VALUES "...)
	args := make([]any, 0, 6*(len(marks)+1))
	add := func(t apply.Table, ts uint64, n int) error {
		a, err := s.tsArg(ts)
		if err != nil {
			return err
		}
		if len(args) > 0 {
			b = append(b, ',')
		}
		b = append(b, '(')
		b = s.d.params(b, len(args)+1, 6)
		b = append(b, ')')
		args = append(args, s.o.LogID, s.o.SinkName, t.Schema, t.Name, a, int64(n))
		return nil
	}
	for _, m := range marks {
		if m.Table == (apply.Table{}) {
			return fmt.Errorf("apply: progress mark for a table without a name")
		}
		if err := add(m.Table, m.CommitTs, 0); err != nil {
			return err
		}
	}
	if ddl != nil {
		if err := add(apply.Table{}, ddl.CommitTs, ddl.Count); err != nil {
			return err
		}
	}
	// The DDL row is the only one whose ddl_count is not 0: it is set
	// outright, a table's ts only ever rises.
	if s.d == MySQL {
		b = append(b, " ON DUPLICATE KEY UPDATE commit_ts = IF(table_name = '', VALUES(commit_ts), GREATEST(commit_ts, VALUES(commit_ts))), ddl_count = VALUES(ddl_count)"...)
	} else {
		greatest := "max"
		if s.d == Postgres {
			greatest = "GREATEST"
		}
		b = append(b, " ON CONFLICT (log_id, sink_name, schema_name, table_name) DO UPDATE SET commit_ts = CASE WHEN "...)
		b = append(b, s.progress...)
		b = append(b, ".table_name = '' THEN excluded.commit_ts ELSE "+greatest+"("...)
		b = append(b, s.progress...)
		b = append(b, ".commit_ts, excluded.commit_ts) END, ddl_count = excluded.ddl_count"...)
	}
	_, err := ex.ExecContext(ctx, string(b), args...)
	if err != nil {
		return fmt.Errorf("apply: record progress in %s: %w", s.progress, s.d.classify(err))
	}
	return nil
}

// Begin starts a transaction.
func (s *SQLSink) Begin(ctx context.Context) (apply.Tx, error) {
	if s.lite != nil {
		if err := s.lite.begin(ctx); err != nil {
			return nil, fmt.Errorf("apply: begin: %w", s.d.classify(err))
		}
		tx := &sqliteTx{sqlTx: sqlTx{s: s, ex: s.lite.conn, lite: s.lite}, l: s.lite}
		tx.takeScratch()
		return tx, nil
	}
	if s.d == Postgres && s.o.DryRun == nil {
		// On a connection of its own, which COPY reaches (copy.go).
		conn, err := s.db.Conn(ctx)
		if err != nil {
			return nil, fmt.Errorf("apply: begin: %w", s.d.classify(err))
		}
		g := newCommitGuard(ctx)
		tx, err := conn.BeginTx(g.ctx, nil)
		if err != nil {
			g.release()
			conn.Close()
			return nil, fmt.Errorf("apply: begin: %w", s.d.classify(err))
		}
		t := &sqlTx{s: s, tx: tx, ex: tx, conn: conn, guard: g}
		t.takeScratch()
		return t, nil
	}
	g := newCommitGuard(ctx)
	tx, err := s.db.BeginTx(g.ctx, nil)
	if err != nil {
		g.release()
		return nil, fmt.Errorf("apply: begin: %w", s.d.classify(err))
	}
	if err := s.session(ctx, tx); err != nil {
		tx.Rollback()
		g.release()
		return nil, err
	}
	t := &sqlTx{s: s, tx: tx, ex: tx, guard: g}
	t.takeScratch()
	return t, nil
}

// session sets what the apply's MySQL sessions need on the connection of ex:
// foreign-key checks off unless SinkOptions.ForeignKeyChecks (see there),
// and on with it (a transaction whose checks were deferred turns them off
// for a while, and a failure may leave them so on a pooled connection). It
// runs in every transaction, since database/sql may hand any pooled
// connection to the next one; one statement per transaction of thousands of
// rows costs nothing that shows. PostgreSQL's sessions get theirs from the
// connection parameters (package apply/postgres), SQLite's need none.
func (s *SQLSink) session(ctx context.Context, ex execer) error {
	if s.d != MySQL || s.o.DryRun != nil {
		return nil
	}
	q := "SET SESSION foreign_key_checks = 0"
	if s.o.ForeignKeyChecks {
		q = "SET SESSION foreign_key_checks = 1"
	}
	if _, err := ex.ExecContext(ctx, q); err != nil {
		if s.o.ForeignKeyChecks {
			return fmt.Errorf("apply: %s: turn foreign-key checks on for the apply (SinkOptions.ForeignKeyChecks): %w", s.name, s.d.classify(err))
		}
		return fmt.Errorf("apply: %s: turn foreign-key checks off for the apply (SinkOptions.ForeignKeyChecks keeps them on): %w", s.name, s.d.classify(err))
	}
	return nil
}

// useSchema reports whether MySQL runs a DDL after USE of its schema: one of
// a table, not one that creates or drops the schema itself (which need not
// exist before, or no longer does after).
func useSchema(ddl *codec.DDL) bool {
	return ddl.Table.Schema != "" && ddl.Type != codec.ActionCreateSchema && ddl.Type != codec.ActionDropSchema
}

// ApplyDDL runs a DDL. MySQL runs the query as logged on one connection after
// USE of the DDL's schema, then records the mark (MySQL commits a DDL
// implicitly, so the two cannot be one transaction). SQLite runs the
// rewritten statements and records the mark in one transaction. A zero mark
// records nothing: the caller keeps no DDL progress in this downstream.
func (s *SQLSink) ApplyDDL(ctx context.Context, ddl *codec.DDL, mark apply.DDLMark) error {
	var record *apply.DDLMark
	if mark != (apply.DDLMark{}) {
		record = &mark
	}
	defer s.forgetForeignKeys()
	defer s.afterDDL(ddl)
	derr := ddlErr(ddl)
	if s.o.DryRun != nil {
		// The rewrite may read the catalog; reading changes nothing.
		var q Queryer = s.db
		if s.lite != nil {
			s.lite.mu.Lock()
			defer s.lite.mu.Unlock()
			q = s.lite.conn
		}
		return s.dryRunDDL(ctx, q, ddl)
	}
	if rewrite := drivers[s.d].Rewrite; rewrite != nil {
		return s.applyRewritten(ctx, ddl, record, rewrite, derr)
	}

	s.ddlMu.Lock()
	defer s.ddlMu.Unlock()
	conn, err := s.mysqlDDLConn(ctx)
	if err != nil {
		return derr("", err)
	}
	keep := false
	defer func() {
		if !keep || s.db.Stats().MaxOpenConnections > 0 {
			discard(conn)
			s.ddlConn = nil
		}
	}()
	if useSchema(ddl) {
		if _, err := conn.ExecContext(ctx, "USE "+s.d.Quote(ddl.Table.Schema)); err != nil {
			return derr("USE "+s.d.Quote(ddl.Table.Schema), s.d.classify(err))
		}
	}
	if _, err := conn.ExecContext(ctx, ddl.Query); err != nil && !s.tolerate(ddl, err) && !s.renamedAlready(ctx, conn, ddl, err) {
		return derr("", s.d.classify(err))
	}
	if err := s.writeMarks(ctx, conn, nil, record); err != nil {
		return err
	}
	keep = true
	return nil
}

// mysqlDDLConn returns the connection MySQL DDLs run on, its session set.
// Its default database becomes each DDL's (USE), so it never goes back to
// the pool: it is kept for the next DDL (a new connection, its handshake
// and session cost about as much as a small DDL), unless the pool has a
// limit, which a connection held while idle would take from the workers,
// or the DDL failed (the connection's state is then unknown). The caller
// holds ddlMu.
func (s *SQLSink) mysqlDDLConn(ctx context.Context) (*sql.Conn, error) {
	if s.ddlConn != nil {
		if s.ddlConn.PingContext(ctx) == nil {
			return s.ddlConn, nil
		}
		discard(s.ddlConn) // the server closed it while it was idle
		s.ddlConn = nil
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, s.d.classify(err)
	}
	if err := s.session(ctx, conn); err != nil {
		discard(conn)
		return nil, err
	}
	s.ddlConn = conn
	return conn, nil
}

// discard closes conn without giving it back to the pool.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
}

// ddlErr returns what wraps the errors of ddl: a DDLError naming the
// statement that ran (ran) when it is not the DDL itself.
func ddlErr(ddl *codec.DDL) func(ran string, err error) error {
	return func(ran string, err error) error {
		return &apply.DDLError{Schema: ddl.Table.Schema, CommitTs: ddl.CommitTs, Query: ddl.Query, Ran: ran, Err: err}
	}
}

// dryRunDDL writes what ddl would run to the dry run's writer, the
// rewrite reading the catalog through q.
func (s *SQLSink) dryRunDDL(ctx context.Context, q Queryer, ddl *codec.DDL) error {
	stmts := []string{ddl.Query}
	if s.d == MySQL && useSchema(ddl) {
		stmts = []string{"USE " + s.d.Quote(ddl.Table.Schema), ddl.Query}
	}
	if rewrite := drivers[s.d].Rewrite; rewrite != nil {
		var err error
		if stmts, err = rewrite(ctx, q, ddl); err != nil {
			return ddlErr(ddl)("", err)
		}
	}
	for _, st := range stmts {
		if err := s.dryRun(s.o.DryRun, st, nil); err != nil {
			return err
		}
	}
	return nil
}

// applyRewritten runs the statements a dialect rewrites ddl into and records
// the mark, all in one transaction: on the SQLite session, or in a database
// transaction (PostgreSQL runs DDL transactionally).
func (s *SQLSink) applyRewritten(ctx context.Context, ddl *codec.DDL, record *apply.DDLMark,
	rewrite func(context.Context, Queryer, *codec.DDL) ([]string, error), derr func(string, error) error) error {
	var ex interface {
		execer
		Queryer
	}
	var commit func(ok bool) error
	if s.lite != nil {
		if err := s.lite.begin(ctx); err != nil {
			return derr("", s.d.classify(err))
		}
		// The prepared statements stay: SQLite prepares a statement again
		// by itself when the schema changed under it (and one naming a
		// table that is gone fails as it would unprepared). Dropping
		// them all at every DDL made a log with a DDL every thousand rows
		// spend a fifth of its apply preparing statements again.
		ex = s.lite.conn
		commit = func(ok bool) error { return s.lite.end(ctx, ok) }
	} else {
		// As a row transaction's: a COMMIT sent finishes (commitguard.go).
		g := newCommitGuard(ctx)
		defer g.release()
		tx, err := s.db.BeginTx(g.ctx, nil)
		if err != nil {
			return derr("", s.d.classify(err))
		}
		ex = tx
		commit = func(ok bool) error {
			if !ok {
				return tx.Rollback()
			}
			g.commit()
			return tx.Commit()
		}
	}
	if err := s.runRewritten(ctx, ex, ddl, record, rewrite); err != nil {
		commit(false)
		return err
	}
	if err := commit(true); err != nil {
		return derr("COMMIT", s.d.classify(err))
	}
	return nil
}

// runRewritten runs the statements a dialect rewrites ddl into, and records
// the mark, through ex: in the caller's transaction.
func (s *SQLSink) runRewritten(ctx context.Context, ex interface {
	execer
	Queryer
}, ddl *codec.DDL, record *apply.DDLMark, rewrite func(context.Context, Queryer, *codec.DDL) ([]string, error)) error {
	derr := ddlErr(ddl)
	stmts, err := rewrite(ctx, ex, ddl)
	if err != nil {
		return derr("", s.d.classify(err))
	}
	for _, st := range stmts {
		if _, err := ex.ExecContext(ctx, st); err != nil {
			if s.d != SQLite || !s.tolerate(ddl, err) {
				return derr(st, s.d.classify(err))
			}
			// SQLite has undone nothing but the statement (an error at
			// prepare): the transaction goes on. PostgreSQL aborts the
			// whole transaction on an error; its rewrite makes the
			// statements idempotent instead (IF [NOT] EXISTS).
		}
	}
	return s.writeMarks(ctx, ex, nil, record)
}

// foreignKeys returns the downstream's foreign keys as child → parents,
// read from its catalog through q once, and again after each DDL.
func (s *SQLSink) foreignKeys(ctx context.Context, ex execer) (map[apply.Table][]apply.Table, error) {
	s.fkMu.Lock()
	defer s.fkMu.Unlock()
	if s.fks != nil {
		return s.fks, nil
	}
	q, ok := ex.(Queryer)
	if !ok {
		return nil, fmt.Errorf("apply: %s: no way to read the foreign keys", s.name)
	}
	var query string
	switch s.d {
	case MySQL:
		query = "SELECT CONSTRAINT_SCHEMA, TABLE_NAME, UNIQUE_CONSTRAINT_SCHEMA, REFERENCED_TABLE_NAME FROM information_schema.REFERENTIAL_CONSTRAINTS"
	case Postgres:
		query = `SELECT cn.nspname, c.relname, pn.nspname, p.relname FROM pg_constraint k
	JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace cn ON cn.oid = c.relnamespace
	JOIN pg_class p ON p.oid = k.confrelid JOIN pg_namespace pn ON pn.oid = p.relnamespace
	WHERE k.contype = 'f'`
	default:
		query = `SELECT '', m.name, '', f."table" FROM sqlite_master m JOIN pragma_foreign_key_list(m.name) f WHERE m.type = 'table'`
	}
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("apply: %s: read the foreign keys: %w", s.name, s.d.classify(err))
	}
	defer rows.Close()
	fks := map[apply.Table][]apply.Table{}
	for rows.Next() {
		var c, p apply.Table
		if err := rows.Scan(&c.Schema, &c.Name, &p.Schema, &p.Name); err != nil {
			return nil, fmt.Errorf("apply: %s: read the foreign keys: %w", s.name, err)
		}
		if s.d == SQLite {
			c.Name, p.Name = strings.ToLower(c.Name), strings.ToLower(p.Name)
		}
		fks[c] = append(fks[c], p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("apply: %s: read the foreign keys: %w", s.name, s.d.classify(err))
	}
	s.fks = fks
	return fks, nil
}

// forgetForeignKeys drops what foreignKeys read: a DDL may have changed it.
func (s *SQLSink) forgetForeignKeys() {
	s.fkMu.Lock()
	s.fks = nil
	s.fkDefs = nil
	s.fkMu.Unlock()
}

// tolerate reports whether a DDL error is one that says the DDL's effect is
// already there, and logs it.
func (s *SQLSink) tolerate(ddl *codec.DDL, err error) bool {
	if s.o.StrictDDL || !s.d.ddlAlreadyApplied(err, ddl.Type) {
		return false
	}
	s.ignoredDDLs.Add(1)
	s.o.Logger.Warn("apply: DDL already applied downstream; going on", "commit_ts", ddl.CommitTs,
		"schema", ddl.Table.Schema, "query", ddl.Query, "error", err)
	return true
}
