// Package apply replays a redo log into a downstream database: the last step
// of a recovery. [Run] reads events from a [Source] (the ordered reader's
// CodecEvents, or a batch in memory) and writes them into a [Sink]
// idempotently, in parallel where the log allows it, recording its progress
// in the downstream so that an interrupted apply resumes without duplicates
// or gaps.
//
// This package is the engine alone and imports no database driver. The sinks
// are packages of their own that register their URI schemes with [Register]
// when imported, as database/sql drivers do, and [Open] dispatches on the
// scheme:
//
//	github.com/redokit/redokit/apply/sqlite   sqlite:, sqlite3:             (modernc.org/sqlite)
//	github.com/redokit/redokit/apply/mysql    mysql:, mariadb:, tidb:       (github.com/go-sql-driver/mysql)
//	github.com/redokit/redokit/apply/postgres postgres:, postgresql:        (github.com/jackc/pgx/v5)
//
// Other sinks implement the small [Sink] and [Tx] interfaces, and may
// register a scheme too. sinkgate.ApplyTo replays the batches a sink gate
// releases through Run.
//
// # The source
//
// A Source is an iter.Seq2[*codec.Event, error]: it yields events in
// commit-ts order, and at each commit ts every row change before any DDL (the
// reader's order), and ends; an error it yields stops Run. Run checks the
// order: an event below one already read, or a row change after a DDL of its
// commit ts, stops it with [ErrOrder]. (*reader.Reader).CodecEvents is a
// Source, and [SliceSource] makes one of a []codec.Event, the batch shape
// the sink gate and the redo writer use; apply does not import the reader.
//
// # Ordering, batching and parallelism
//
// Run keeps, per table, the row changes read and not yet handed out (a
// table is schema.name: the partitions of a partitioned table are one
// table). The rows of one table at one commit ts are held and handed out
// together: when the commit ts moves on, every table holding
// Options.BatchRows rows or more hands them to its worker; past
// Options.MaxBufferedRows held in all, every table does. The exception is
// a transaction larger than memory: into a sink that takes a commit ts in
// parts ([CommitTsSplitter]: the SQL sinks, outside commit order), once the
// commit ts being read holds more than Options.SplitBytes of rows, Run
// hands them out, the largest tables' first, in parts of BatchRows rows,
// until it holds half of that; the worker's
// transaction stays open (its rows let go, none kept to replay) until the
// rest of the commit ts has followed. So a bulk load, a large DELETE or
// UPDATE of millions of rows passes in bounded memory (Result.PeakRows says
// how many rows Run held at once). A commit ts that deletes or moves keys
// after writing others is held whole, since in parts a later change could
// delete a row an earlier part wrote (a swap of keys, in the shape where
// each pre image is the row before the transaction); see CommitTsSplitter.
// One found so only after a part went out fails the run with a
// [SplitTooLateError], none of it committed, and a rerun with its commit ts
// in Options.WholeTs applies it whole (redokit apply reruns so by itself).
// A table belongs to
// one of Options.Workers workers, so its rows are applied in commit-ts
// order by one transaction at a time, while different tables are applied
// in parallel. A table seen first, or again after a barrier emptied it, goes
// to the worker holding the fewest tables (no open transaction holds its
// rows then): four tables over four workers get one each, where a hash of
// the names left a worker idle in most runs. A worker applies what it is
// handed in its open transaction and commits once it holds
// Options.TxnRows rows.
//
// Run owns a copy of every row it holds (the source may reuse an event's
// memory). A worker hands its transaction's copies back when the
// transaction commits, and Run refills them with the next rows: a Tx may
// keep no row past its end. A replay so allocates copies for the rows in
// flight, not for every row of the log.
//
// A DDL is a barrier for the tables it touches: every row held of them is
// handed out, and a worker runs the DDL once every worker holding rows of
// them has committed; their rows read after it go to that worker, behind
// it in its queue, so none is written before the DDL ran. The rows at a
// DDL's commit ts come before it (the source's order), so the rows of its
// tables are committed before it runs. Run does not wait for the DDL: it
// reads on, hands out the rows of other tables as before, and waits only
// at the next DDL, whose scope is read from a catalog this one may change.
// A DDL barrier for every table with several workers is the exception: Run
// waits for it before it hands out another row. Which tables a DDL touches,
// the sink says ([DDLScoper]): the MySQL and PostgreSQL sinks name the tables
// the DDL names or renames and those a foreign key links to them, whose
// locks it may take; a DDL that names none (a schema's), may add a foreign
// key, or may read another table's rows (… AS SELECT, LIKE, EXCHANGE
// PARTITION), with the foreign-key checks on (commit order), or into a sink
// that cannot tell, is a barrier for every table. The SQLite sink names the
// DDL's own tables, by name alone ([EventDDLScoper]; below). The other workers keep their transactions open across
// the DDL, holding rows of other tables from before and after it, and each
// commits before it next writes a table of a DDL that ended while its
// transaction was open (MariaDB refuses a transaction whose snapshot
// predates a table's DDL to write that table): Run fences every worker but
// the DDL's once it has seen the DDL end, ahead of any row it hands them
// after, since a worker idle when the DDL was handed out may have begun a
// transaction, of other tables, while it ran.
//
// With one worker (SQLite) everything is in its queue's order, so Run reads
// on past every DDL and waits for none: the queue's bound is its only
// back-pressure. It reads no scope from a catalog (the DDLs queued ahead may
// not have run), but a sink that names a DDL's tables from the event alone
// ([EventDDLScoper]: SQLite's) has Run hand out only those tables' rows
// before the DDL; the other tables' rows stay held across it, within
// Options.BatchRows per table and MaxBufferedRows in all, and go out in
// calls of up to BatchRows rows. On gen's log with a DDL every ~870 rows over
// some 40 tables that made 2,845 calls of the sink instead of 43,036, and
// SQLite, which re-prepares every statement after any DDL, went from 67.5k
// to 135k rows/s (2026-12-07). A table's rows held so are committed after
// the DDL, with its own progress mark (see Idempotency). A sink whose
// transactions run DDL ([DDLTx]: SQLite's)
// gets each DDL inside the worker's open transaction, which commits every
// Options.TxnRows rows across DDLs, rather than twice at each: on a log with
// a DDL every ~870 rows, 122 commits instead of 2,290. A DDL that fails
// there for good is taken out, and the rows before it commit, as they would
// have before a DDL run on its own.
//
// Triggers the downstream has are not followed: a MySQL trigger of one
// table that writes another makes a DDL of the other wait on the open
// transaction of the first table's worker, which only ends after the DDL
// (PostgreSQL's replica sessions fire no ordinary trigger).
//
// Within one commit ts of one table the SQL sinks apply the net effect of
// its row changes on each row, every delete before every upsert. The row
// changes of one commit ts are one upstream transaction, in one of two
// shapes the log does not label: each row's final state, at most one change
// per row in no meaningful order (TiDB and TiCDC: `UPDATE t SET k = 3 - k`
// is update 1→2 and update 2→1, each pre image the row before the
// transaction), or each statement's change in the order it ran (a binlog,
// PostgreSQL's logical decoding: a row may change several times, a swap
// goes through a spare key, a row is inserted and deleted again). A pre
// image that is exactly the image an earlier change of the same commit ts
// wrote at its key is that row changed again, and the two cancel; any other
// pre image is the row the key held before the commit ts, deleted unless a
// change writes the key. So each key ends with its last image written,
// deleted, or untouched, in both shapes, and a transaction that moves a row
// onto a key another row left needs no order of its own. A table without a
// key matches a pre image with an identical post image of the commit ts,
// in either order, as no change. When every key of a batch compares exactly
// by its bytes (integers, dates and times, binary strings, strings of a
// _bin collation), the batch is reduced further to the last change of each
// key — deletes, then upserts — which gives the same rows in a few large
// statements; a key of a case-insensitive or unknown collation keeps the
// per-commit-ts order.
//
// # Idempotency ("safe mode", always on)
//
// A log replayed over a downstream that already holds part of it (the
// downstream's own sink ran past the checkpoint before the disaster; an
// apply was interrupted; failover wrote events twice) must end in the same
// state. So every insert, and the new image of every update, is an upsert
// that updates a row already there in place, and inserts it otherwise:
// INSERT … ON DUPLICATE KEY UPDATE (MySQL), INSERT … ON CONFLICT DO UPDATE
// (SQLite: on whichever unique key conflicts; PostgreSQL: on the key). An
// update in place deletes nothing, so an ON DELETE CASCADE of a foreign key
// never fires on a parent whose other columns changed. A delete finds its
// row by the columns flagged handle key, else by those flagged primary key;
// an update that changes them is a delete of the old row and an upsert of
// the new one. Generated columns are never written.
//
// Where the replay overlaps changes already downstream, a new image can meet
// two rows at once: its key held by one, another unique key by a stale one.
// Every SQL sink then writes it with REPLACE semantics, deleting the stale
// row, and counts it (Conflicts.Replaced): MySQL and SQLite with REPLACE and
// INSERT OR REPLACE, row by row; PostgreSQL, where a failed statement aborts
// its transaction, runs the statements of a table with another unique key
// under a savepoint and, when one fails, deletes the rows outside each
// image's key that hold one of its unique values, then writes it again.
// With the foreign-key checks off (the default) that delete fires nothing;
// with SinkOptions.ForeignKeyChecks the duplicate-key error stops Run,
// naming the table, rather than delete a parent row. A unique value that
// moves between the rows the log changes is no such conflict, and is not
// counted: the upserts of a table with another unique key go by units (a
// reduced batch, or one commit ts), and a unit that changes rows first
// deletes the rows of every key it writes. With SinkOptions.ForeignKeyChecks
// a table that a foreign key references (its own included) is written as
// is instead, since that delete could cascade or leave children dangling:
// on every sink a unique value moving between its rows then stops Run with
// the duplicate-key StatementError, naming the table and the foreign-key
// checks. Deletes that match no row are
// counted too (Conflicts.DeletesMissed), and so are rows inserted into a
// table without a key where the downstream held an identical row that this
// log's progress does not account for (Conflicts.DuplicatedKeyless, see
// below); [ConflictReporter] gives them, in all and per table, and
// Result.SkippedRows counts per table what the progress let Run skip.
//
// # Foreign keys
//
// A log holds every change the upstream made, its own cascades included, so
// a cascade or a check run again downstream can only delete or refuse what
// the log says is there. The sinks therefore turn the checks off for the
// apply's sessions by default, as replication does: MySQL's
// foreign_key_checks=0 (set in every transaction), PostgreSQL's
// session_replication_role=replica (a connection parameter; it needs a
// superuser, or PostgreSQL 15's GRANT SET ON PARAMETER), and SQLite's
// foreign_keys pragma off. SinkOptions.ForeignKeyChecks keeps them on: the
// sink then reports [CommitOrderer], and Run applies with one worker, each
// commit ts whole and in order ([GroupApplier]). A log keeps no order of the
// tables inside a transaction, so the SQL sinks order each one by the
// foreign keys the downstream's catalog declares: every delete first,
// children before parents, then every upsert, parents before children. What
// that cannot order (a cycle of foreign keys, a table referencing itself, a
// parent written in the same transaction as its children) is applied so that
// the checks see the transaction's end state: SQLite defers them to COMMIT
// (defer_foreign_keys), MariaDB turns them off for that transaction's
// statements, as replication does, and the sink then checks each foreign key
// the transaction touched itself; a violation fails the transaction, naming
// the key, the table and the value, and nothing of it is committed.
// PostgreSQL checks at the end of each statement and declares no deferrable
// constraints: there a reparenting, a key move or a two-table cycle inside
// one transaction still fails on the check, loudly (23503).
//
// A table with no key: a delete then matches every column of the old image
// exactly — NULLs by IS NULL, floating-point values by their exact binary
// value, text by its bytes whatever its collation (on MySQL, 'a' never
// matches a row holding 'A' or 'a '), JSON as JSON on MySQL, as text on MariaDB (where JSON is text) and
// PostgreSQL (whose json type has no equality) — leaving out only generated
// columns, and deletes one row (LIMIT 1, through rowid on SQLite and ctid on
// PostgreSQL); every update is a delete and an insert. Identical rows of
// such a table cannot be told apart, so an insert replayed twice is two
// rows: Run's progress keeps a resumed apply exactly-once for them (it skips
// every row change at or below what the progress records), and copies that
// failover wrote are the reader's to drop (it does, by default). What no
// progress can tell is a downstream written by something else — its own
// sink, which ran past the log's checkpoint before the disaster, or an apply
// that keeps no progress (sinkgate.ApplyTo). So when a SQL sink first
// writes a table without a key in a Run that found the table holding rows
// and skipped none of its changes (a replay that starts past what the
// progress records of it: [RunSkipped]), it checks each statement of
// inserts against the rows there and counts the inserts that met an
// identical row (Conflicts.DuplicatedKeyless, per table): the insert is
// applied, since an identical row may be legitimate, and the report says
// that the table may now hold such a row twice. The check scans the table
// once per statement, only in that case.
//
// # Progress and resuming
//
// The SQL sinks record their progress in a table of the downstream,
// redokit_apply_progress (SinkOptions.ProgressTable; for MySQL in the URI's
// database, or "redokit"; for PostgreSQL in schema public, or
// SinkOptions.ProgressSchema). Its rows belong to one log
// (SinkOptions.LogID; the CLI gives the log's ID) and one apply of it
// (SinkOptions.SinkName, "" by default):
//
//	log_id  sink_name  schema_name  table_name  commit_ts  ddl_count
//	'shop'  ''         'shop'       'orders'    4471       0          rows of shop.orders with commit ts ≤ 4471 are applied
//	'shop'  ''         ''           ''          4460       1          the first DDL at 4460, and all DDLs before, are applied
//
// A transaction writes the progress rows of its tables (the commit ts of
// each table's last row in it) in the same transaction as the rows, so the
// two commit together or not at all. Because the rows of one table at one
// commit ts are never split across transactions (a commit ts handed out in
// parts is one transaction too), "applied up to commit ts T" is exact: there is never a half-applied commit ts to count. When Run
// starts it reads the progress and skips (Result.Skipped) each row change at
// or below its table's recorded ts, and each DDL the DDL row covers. The
// DDL row says nothing of other tables' rows: a DDL waits only for the rows
// of the tables it touches, so rows of another table from below it may have
// been in a transaction that never committed, and are applied on resume,
// while rows of another table from above it may have committed before it
// ran (TestScopedDDLResumes fails the first such commit after a DDL, then
// reruns; on SQLite, rows held across the DDL, see [EventDDLScoper]). Several DDLs at one commit ts are counted
// (ddl_count), in the order the source delivers them.
//
// A commit whose outcome is unknown (the connection broke during COMMIT) is
// checked against the progress rows before it is replayed: replaying a
// transaction that did commit would double the rows of a keyless table.
// What such a transaction met (its Conflicts) counts once the progress
// shows it landed, or not at all when its replay commits instead (the
// replay's own count is the one that counts). The end of Run's context
// (a cancelled Run, or one that fails on another worker) does not cut a
// COMMIT already sent short: it finishes, or is given up on 30 s later, so
// that its outcome is known when Run returns. A COMMIT cut short could land
// after Run returned, past the progress read of the next Run, which then
// replayed it.
//
// MySQL commits a DDL implicitly, so its progress row is written just after
// it, and a crash in between runs it again on resume. SQLite and PostgreSQL
// run the DDL (as their rewrite translates it) and its progress row in one
// transaction. Either way, and for DDLs the downstream ran past the log's
// checkpoint before the disaster, a DDL whose effect is already there —
// MySQL errors 1007, 1008, 1050, 1051, 1060, 1061, 1068, 1091, and 1146,
// 1054 and 1176 for a rename of tables, columns or indexes that the catalog
// shows done (no old name left, every new name there); SQLite
// "already exists", "duplicate column name", and "no such table/index/column"
// for drops, except a DROP INDEX of an index its existing table lacks, which
// is an error — is logged and counted as applied (the sink's IgnoredDDLs);
// SinkOptions.StrictDDL makes it an error. PostgreSQL aborts a transaction
// at its first error, so its rewrite makes each statement idempotent instead
// (IF [NOT] EXISTS), and StrictDDL changes nothing there.
//
// A downstream normally mirrors one log, and a second log there is more
// often a wrong URL than a plan: Progress fails with [ErrAnotherLog], naming
// both logs, when the table holds another log's rows, unless
// SinkOptions.AnotherLog allows it; the two logs' progress then stays apart
// (and so does that of applies of one log with different SinkNames, e.g. one
// per table filter). A progress table written by a redokit that kept no log
// ID is refused, naming it: its rows belong to a log nobody can name.
//
// # Errors and retries
//
// A sink marks the errors worth retrying with [Transient]: the SQL sinks do
// for lost connections, MySQL 1205 (lock wait timeout), 1213 (deadlock),
// 1053, 1927, 1040 and network errors, and SQLITE_BUSY and SQLITE_LOCKED.
// Run then rolls the transaction back, waits Options.RetryBackoff (doubling,
// at most 5 s) and replays it whole in a new one, up to Options.MaxRetries
// times; a DDL is retried the same way. Any other error stops Run: every
// open transaction is rolled back, so the downstream holds exactly what was
// committed, with its progress, and the next run resumes there. A failed
// statement is a [*StatementError] naming the table, the commit ts of its
// rows and the SQL with placeholders (never the values); a failed DDL is a
// [*DDLError] naming its commit ts, schema and query. Run returns the
// [Result] so far with its error.
//
// # Values
//
// The SQL sinks bind each codec value as (and the DDL rewrites of SQLite
// and PostgreSQL declare the column as):
//
//	kind          MySQL                         SQLite                         PostgreSQL
//	null          NULL                          NULL                           NULL
//	int           int64                         INTEGER                        smallint/integer/bigint
//	uint          uint64 (all 64 bits)          TEXT column for BIGINT         bigint; BIGINT UNSIGNED numeric(20,0)
//	                                            UNSIGNED (exact to 2^64-1)
//	float32/64    DOUBLE (exact for float32)    REAL in a BLOB-affinity        real / double precision (-0 kept)
//	                                            column (-0 kept)
//	decimal       its text                      TEXT, exact (scale kept)       numeric(p,s)
//	string        text                          TEXT                           varchar(n) / text (no NUL: an error)
//	bytes         binary (never NULL if empty)  BLOB                           bytea
//	date          'YYYY-MM-DD'                  TEXT                           date (no zero date: an error)
//	datetime, ts  'YYYY-MM-DD hh:mm:ss[.f]'     TEXT, f with the fsp digits    timestamp / timestamptz (session UTC)
//	duration      '[-]hh:mm:ss[.f]'             TEXT                           interval (holds ±838:59:59)
//	year          integer                       INTEGER                        smallint
//	bit, set      unsigned integer              INTEGER; BIT(64) and 64-member bigint; 64 bits numeric(20,0)
//	                                            SET as TEXT
//	enum          the 1-based index             INTEGER, the index             smallint, the index
//	json          text                          TEXT                           json (the text as given)
//
// MySQL converts each to the column's type, exactly (an ENUM or SET column
// takes the number as the member index or bitmap, a BIT column the number).
// TIMESTAMP values are read in the session time zone, which the sink sets to
// UTC (time_zone='+00:00', the zone producers write; override it in the
// URI); PostgreSQL's sessions are UTC too. MariaDB stores a DOUBLE or FLOAT
// -0 as 0: it has no negative zero to keep. SQLite keeps every value as
// bound: its sink declares each column with a type whose affinity leaves it
// alone (see package apply/sqlite, "Values"). A value a sink cannot hold (a
// zero date or a NUL in text on PostgreSQL) fails its statement, naming the
// table: it is never changed silently.
//
// # Opening a sink by URI
//
// [Open] takes a URI whose scheme a sink package registered (importing the
// package is enough); the packages' docs give their URIs and parameters:
//
//	mysql://user:password@host[:port]/[database][?param=value&...]
//	postgres://user:password@host[:port]/database[?sslmode=...&param=value...]
//	sqlite:///absolute/path.db[?param=value&...]   or   sqlite:relative/path.db
//
// A URI that does not parse, or whose scheme nobody registered, fails with
// [ErrBadURI]. The password is never shown: errors and logs use [Redact]ed
// URIs. [SinkOptions] carry what the SQL sinks take (the progress table and
// its log, the statement size, StrictDDL, foreign-key checks, a dry run);
// another sink ignores what it has no use for.
//
// # Writing a sink
//
// A Sink reads its recorded [Progress], begins transactions ([Tx]) and runs
// DDLs. A Tx applies rows of one table at a time (ApplyRows gets whole
// commit ts of a table, in order; the sink decides how to write them) and
// commits them together with the [Mark]s Run gives it, atomically: that is
// what makes a resumed apply exact. A sink that cannot have several
// transactions open at once must implement [TxLimiter], or Run's workers
// would wait on each other forever. Errors that may pass are wrapped with
// [Transient].
//
// # Performance
//
// BenchmarkApply (in apply/internal/sqlsink) compares Run with a naive loop that writes one statement
// per row change in autocommit, over the same events and sink settings. Over
// a network (MySQL) batching saves a round trip and a commit per row; into
// SQLite, in process, where an autocommit in WAL mode costs no fsync, the
// gap is narrower.
package apply
