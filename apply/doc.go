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
// table). The rows of one table at one commit ts are always held and handed
// out together: when the commit ts moves on, every table holding
// Options.BatchRows rows or more hands them to its worker; past
// Options.MaxBufferedRows held in all, every table does. A table belongs to
// one of Options.Workers workers (a hash of its name), so its rows are
// applied in commit-ts order by one transaction at a time, while different
// tables are applied in parallel. A worker applies what it is handed in its
// open transaction and commits once it holds Options.TxnRows rows.
//
// A DDL is a barrier for every table: before it runs, every row held is
// handed out and every worker commits; then the DDL runs alone. This is
// simpler than tracking which tables a DDL touches, and always safe; DDLs are
// rare in a log. The rows at a DDL's commit ts come before it (the source's
// order), so they are committed before it runs.
//
// Within one commit ts of one table the SQL sinks apply every delete (of a
// deleted row, and of the old image of an update that changes the row's
// key) before every upsert (of an inserted row, and the new image of an
// update). The row changes of one commit ts are one upstream transaction's
// final state of each row (TiDB and TiCDC emit at most one change per row key
// per transaction), so this order is right whatever order they arrive in,
// and it is the only safe one when a transaction moves a row onto a key
// another row left. When every key of a batch compares exactly by its bytes
// (integers, dates and times, binary strings, strings of a _bin collation),
// the batch is reduced further to the last change of each key — deletes,
// then upserts — which gives the same rows in a few large statements; a key
// of a case-insensitive or unknown collation keeps the per-commit-ts order.
//
// # Idempotency ("safe mode", always on)
//
// A log replayed over a downstream that already holds part of it (the
// downstream's own sink ran past the checkpoint before the disaster; an
// apply was interrupted; failover wrote events twice) must end in the same
// state. So every insert, and the new image of every update, is an upsert
// that replaces the row whole — REPLACE INTO (MySQL) and INSERT OR REPLACE
// (SQLite), which both delete any row conflicting on any unique key before
// inserting (an upsert on the primary key alone would fail on a unique key
// that a stale row still holds). A delete finds its row by the columns
// flagged handle key, else by those flagged primary key; an update that
// changes them is a delete of the old row and an upsert of the new one.
// Generated columns are never written.
//
// A table with neither has no key: a delete then matches every column of
// the old image (NULLs by IS NULL; floating-point and JSON columns, which do
// not compare exactly, are left out) and deletes one row (LIMIT 1), and
// every update is a delete and an insert. Identical rows of such a table
// cannot be told apart, so an insert replayed twice is two rows: Run's
// progress keeps a resumed apply exactly-once for them, and copies that
// failover wrote are the reader's to drop (it does, by default).
//
// # Progress and resuming
//
// The SQL sinks record their progress in a table of the downstream,
// redokit_apply_progress (SinkOptions.ProgressTable; for MySQL in the URI's
// database, or "redokit"):
//
//	schema_name  table_name  commit_ts  ddl_count
//	'shop'       'orders'    4471       0          rows of shop.orders with commit ts ≤ 4471 are applied
//	''           ''          4460       1          the first DDL at 4460, and all DDLs before, are applied
//
// A transaction writes the progress rows of its tables (the commit ts of
// each table's last row in it) in the same transaction as the rows, so the
// two commit together or not at all. Because the rows of one table at one
// commit ts are never split across transactions, "applied up to commit ts T"
// is exact: there is never a half-applied commit ts to count. When Run
// starts it reads the progress and skips (Result.Skipped) each row change at
// or below its table's recorded ts or the recorded DDL ts (a DDL is a
// barrier, so every row at or below it was committed before it), and each
// DDL the DDL row covers. Several DDLs at one commit ts are counted
// (ddl_count), in the order the source delivers them.
//
// A commit whose outcome is unknown (the connection broke during COMMIT) is
// checked against the progress rows before it is replayed: replaying a
// transaction that did commit would double the rows of a keyless table.
//
// MySQL commits a DDL implicitly, so its progress row is written just after
// it, and a crash in between runs it again on resume. SQLite runs the DDL and
// its progress row in one transaction. Either way, and for DDLs the
// downstream ran past the log's checkpoint before the disaster, a DDL whose
// effect is already there — MySQL errors 1007, 1008, 1050, 1051, 1060, 1061,
// 1068, 1091; SQLite "already exists", "duplicate column name", and "no such
// table/index/column" for drops — is logged and counted as applied
// (the sink's IgnoredDDLs); SinkOptions.StrictDDL makes it an error.
//
// The progress belongs to one log: applying another log into the same
// downstream needs another progress table.
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
// The SQL sinks bind each codec value as:
//
//	kind            MySQL                         SQLite
//	null            NULL                          NULL
//	int             int64                         INTEGER
//	uint            uint64 (all 64 bits)          INTEGER; above 2^63-1 its decimal TEXT
//	float32/64      DOUBLE (exact for float32)    REAL
//	decimal         its text                      its text (a DECIMAL column makes it a number)
//	string          text                          TEXT
//	bytes           binary (never NULL if empty)  BLOB
//	date            'YYYY-MM-DD'                  TEXT
//	datetime, ts    'YYYY-MM-DD hh:mm:ss[.f]'     TEXT, f with the value's fsp digits
//	duration        '[-]hh:mm:ss[.f]'             TEXT
//	year            integer                       INTEGER
//	bit, set        unsigned integer              INTEGER; above 2^63-1 its decimal TEXT
//	enum            the 1-based index             INTEGER, the index
//	json            text                          TEXT
//
// MySQL converts each to the column's type, exactly (an ENUM or SET column
// takes the number as the member index or bitmap, a BIT column the number).
// TIMESTAMP values are read in the session time zone, which the sink sets to
// UTC (time_zone='+00:00', the zone producers write; override it in the
// URI). SQLite keeps values as bound, except that a column of numeric
// affinity (DECIMAL, BIGINT UNSIGNED, BIT, JSON…) turns text that looks like
// a number into one: an unsigned value above 2^63-1 and a DECIMAL of more
// than 15 digits become REAL there, which is not exact — use MySQL, or TEXT
// columns, where that matters.
//
// # Opening a sink by URI
//
// [Open] takes a URI whose scheme a sink package registered (importing the
// package is enough); the packages' docs give their URIs and parameters:
//
//	mysql://user:password@host[:port]/[database][?param=value&...]
//	sqlite:///absolute/path.db[?param=value&...]   or   sqlite:relative/path.db
//
// A URI that does not parse, or whose scheme nobody registered, fails with
// [ErrBadURI]. The password is never shown: errors and logs use [Redact]ed
// URIs. [SinkOptions] carry what the SQL sinks take (the progress table, the
// statement size, StrictDDL); another sink ignores what it has no use for.
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
