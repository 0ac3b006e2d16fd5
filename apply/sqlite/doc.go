// Package sqlite is the apply sink for SQLite, over modernc.org/sqlite (pure
// Go). Importing it registers the sqlite: and sqlite3: schemes with
// apply.Open:
//
//	import _ "github.com/redokit/redokit/apply/sqlite"
//
//	sink, err := apply.Open(ctx, "sqlite:///var/lib/replica.db", nil)
//
// or [Open] and [New] give the [*Sink] itself. What it writes — upserts that
// replace whole rows, deletes by key, its progress table, how each codec value
// is bound, the DDLs it tolerates as already applied — is the SQL sinks' spec
// in package apply's doc; this doc gives what is SQLite's own.
//
// # The URI
//
//	sqlite:///absolute/path.db[?param=value&...]   or   sqlite:relative/path.db
//
// Params are modernc.org/sqlite DSN parameters; the sink adds the pragmas
// busy_timeout(10000), journal_mode(WAL), synchronous(NORMAL) — safe here: a
// crash may lose the last commits but never tears one, and the progress rows
// are in the same commits — and _txlock=immediate, each unless given. An
// in-memory database is refused: it would vanish with the sink.
//
// # Statements
//
// Schemas are ignored: a table is named by its name alone, so two schemas'
// tables of one name are one table. SQLite has one writer, so the sink holds
// one connection for its life, runs one transaction at a time
// (apply.TxLimiter: Run uses one worker) and keeps its statements prepared,
// splitting each batch into statements of power-of-two row counts so that the
// few shapes recur. Row statements are INSERT OR REPLACE and DELETE. A DDL
// and its progress row are one transaction.
//
// # DDL
//
// SQLite runs MySQL's DDL text rewritten at the token level (not parsed):
//
//   - CREATE TABLE [IF NOT EXISTS] t (…): table options (ENGINE=, CHARSET=,
//     COMMENT=, …) are dropped; in columns, UNSIGNED, SIGNED, ZEROFILL,
//     AUTO_INCREMENT, AUTO_RANDOM, CHARACTER SET/CHARSET, COLLATE (but BINARY,
//     NOCASE, RTRIM), COMMENT '…', ON UPDATE CURRENT_TIMESTAMP and the
//     precision of CURRENT_TIMESTAMP(n) are dropped; ENUM(…) and SET(…)
//     become INTEGER; a one-column primary key of a signed integer type (or
//     an unsigned one of up to 32 bits) becomes INTEGER, SQLite's rowid;
//     KEY/INDEX and UNIQUE KEY elements become CREATE [UNIQUE] INDEX
//     statements; FULLTEXT and SPATIAL ones are dropped. Types are otherwise
//     kept: SQLite takes any type name and derives an affinity from it.
//   - ALTER TABLE t with ADD [COLUMN] def (no FIRST/AFTER), DROP [COLUMN] c,
//     ADD [UNIQUE] INDEX|KEY, DROP INDEX|KEY, RENAME [TO|AS] u, RENAME COLUMN
//     a TO b, several comma-separated: one SQLite statement each.
//   - CREATE [UNIQUE] INDEX i ON t (cols) (prefix lengths dropped), DROP INDEX
//     i ON t. Index names are per table in MySQL and per file in SQLite, so
//     index i of table t is named "t.i".
//   - DROP TABLE|VIEW [IF EXISTS] a, b (one statement per table), TRUNCATE
//     [TABLE] t (as DELETE FROM t), RENAME TABLE a TO b[, c TO d].
//   - CREATE DATABASE|SCHEMA: nothing to do.
//   - "schema." qualifiers of the DDL's schemas are dropped everywhere.
//   - Anything else runs as logged.
//
// DROP DATABASE, ALTER TABLE … MODIFY/CHANGE/ALTER COLUMN, ADD PRIMARY KEY
// and other forms SQLite has no statement for fail with apply.ErrUnsupportedDDL
// in a *apply.DDLError naming the DDL; so does any DDL SQLite refuses.
//
// # Errors
//
// SQLITE_BUSY and SQLITE_LOCKED are transient (retried by Run). A DDL failing
// with "already exists" or "duplicate column name", or a drop failing with
// "no such table/index/column", had its effect already, and is counted as
// applied unless StrictDDL.
package sqlite
