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
// in-memory database is refused: it would vanish with the sink. On its one
// writing connection it also sets temp_store=MEMORY (statement journals),
// cache_size=-65536 (64 MiB of pages) and wal_autocheckpoint=16384 (a
// checkpoint every 64 MiB of WAL), whatever the URI says: the settings of a
// bulk writer, on no other connection.
//
// # Statements
//
// Schemas are ignored: a table is named by its name alone, so two schemas'
// tables of one name are one table. SQLite has one writer, so the sink holds
// one connection for its life, runs one transaction at a time
// (apply.TxLimiter: Run uses one worker) and keeps its statements prepared,
// splitting each batch into statements of power-of-two row counts so that the
// few shapes recur. Row statements are INSERT … ON CONFLICT DO UPDATE and
// DELETE; a row that meets a stale row on another unique key is written
// again alone with INSERT OR REPLACE (see package apply, "Idempotency"). The
// rows of a table with another unique key than its key (pragma_index_list,
// read again after each DDL) are written by units, the rows of the unit's
// keys deleted first. A DDL and its progress row run in the writer's open
// transaction, with the rows before and after it (apply.DDLTx): a log with a
// DDL every thousand rows commits every Options.TxnRows rows, as one
// without DDLs does. A DDL that fails is taken out of the transaction, and
// the rows before it commit. Run hands the writer only the rows of the
// tables a DDL names before it (apply.EventDDLScoper; by name, in every
// schema): SQLite expires every prepared statement at any DDL, and the
// other tables' rows, held across it, go out in calls of many rows, whose
// statements are prepared once for many rows rather than for a few.
//
// # Values
//
// SQLite derives a column's affinity from its declared type, and a numeric
// affinity converts what is stored: text that reads as a number becomes an
// INTEGER or a REAL (which keeps 15 digits), and a REAL column stores an
// integral value as an integer, losing the sign of -0. So the DDL rewrite
// declares each column with a type whose affinity keeps the value the sink
// binds (apply's doc, "Values"), and SQLite holds every value exactly:
//
//	MySQL type                         declared     affinity  stored as
//	BIGINT UNSIGNED, SERIAL            TEXT         TEXT      decimal text ('18446744073709551615', '7')
//	DECIMAL, NUMERIC, DEC, FIXED       TEXT         TEXT      the exact text, scale kept ('1.50')
//	BIT(64); SET of 64 members         TEXT         TEXT      decimal text of the bits
//	JSON                               TEXT         TEXT      the JSON text ('12' stays text)
//	LONG (MEDIUMTEXT)                  TEXT         TEXT      TEXT
//	FLOAT, FLOAT4                      FLOAT BLOB   BLOB      REAL, -0 kept
//	DOUBLE [PRECISION], REAL, FLOAT8   DOUBLE BLOB  BLOB      REAL, -0 kept
//	BINARY, VARBINARY, LONG VARBINARY  BLOB         BLOB      BLOB
//	ENUM; SET of up to 63 members      INTEGER      INTEGER   the index; the bitmap
//	BIT(n), n < 64                     BIT(n)       NUMERIC   INTEGER
//	other integers                     as is        INTEGER   INTEGER (a signed whole key: the rowid)
//	DATE, DATETIME, TIMESTAMP, TIME    as is        NUMERIC   TEXT, never read as a number
//	YEAR                               as is        NUMERIC   INTEGER
//	CHAR, VARCHAR, TEXT…, BLOB…        as is        TEXT/BLOB TEXT/BLOB
//
// Dates and times are bound as text with '-' or ':' between the digits
// ('2038-01-19 03:14:07.999999', '-838:59:59'), which never reads as a
// number, so NUMERIC affinity leaves it alone.
//
// A TEXT key compares as text: a bound integer is made text before it is
// compared (a parameter takes the column's TEXT affinity), so keys match and
// never collide; but ORDER BY sorts those columns as text. Only a signed
// integer (or unsigned of up to 32 bits) that is the whole primary key
// becomes the rowid (INTEGER PRIMARY KEY); a TEXT key never does. A DEFAULT
// is converted to what MySQL stores (ADD COLUMN gives it to every existing
// row): 1.5 of a DECIMAL(5,2) is '1.50', an ENUM's member its index, a SET's
// members their bitmap, b'…' and 0x… their number, a MySQL string (with
// backslash escapes) the same string. Tables made by an older redokit keep
// the types they were declared with.
//
// # DDL
//
// SQLite runs MySQL's DDL text rewritten at the token level (not parsed):
//
//   - CREATE TABLE [IF NOT EXISTS] t (…): table options (ENGINE=, CHARSET=,
//     COMMENT=, …) are dropped; columns are declared as in "Values"; in
//     columns, UNSIGNED, SIGNED, ZEROFILL, AUTO_INCREMENT, AUTO_RANDOM,
//     CHARACTER SET/CHARSET, COLLATE (but BINARY, NOCASE, RTRIM), COMMENT
//     '…', ON UPDATE CURRENT_TIMESTAMP and the precision of
//     CURRENT_TIMESTAMP(n) are dropped; a one-column primary key of a signed
//     integer type (or an unsigned one of up to 32 bits) becomes INTEGER,
//     SQLite's rowid; KEY/INDEX, UNIQUE KEY, CONSTRAINT … UNIQUE, FULLTEXT
//     and SPATIAL elements, and UNIQUE or SERIAL columns, become CREATE
//     [UNIQUE] INDEX statements (FULLTEXT and SPATIAL as plain indexes).
//   - ALTER TABLE t with ADD [COLUMN] def (no FIRST/AFTER), DROP [COLUMN] c,
//     ADD [UNIQUE|FULLTEXT|SPATIAL] INDEX|KEY, ADD CONSTRAINT … UNIQUE, DROP
//     INDEX|KEY, RENAME INDEX|KEY a TO b, RENAME [TO|AS] u, RENAME COLUMN a
//     TO b, several comma-separated: one SQLite statement each (RENAME INDEX
//     two), a RENAME of the table last (the others name the table by its old
//     name).
//   - CREATE [UNIQUE|FULLTEXT|SPATIAL] INDEX i ON t (cols) (prefix lengths
//     dropped), DROP INDEX i ON t.
//   - DROP TABLE|VIEW [IF EXISTS] a, b (one statement per table), TRUNCATE
//     [TABLE] t (as DELETE FROM t), RENAME TABLE a TO b[, c TO d].
//   - CREATE DATABASE|SCHEMA: nothing to do.
//   - "schema." qualifiers of the DDL's schemas are dropped everywhere.
//   - Anything else runs as logged.
//
// Index names are per table in MySQL and per file in SQLite, so index i of
// table t is named "t.i", and an index without a name in the DDL takes the
// name MySQL gives it (its first column's, or the first of _2, _3, … the
// table lacks), so that a later DROP INDEX finds it. SQLite renames no
// index: RENAME INDEX drops the index and creates it again, and a rename of
// a table (RENAME TABLE, ALTER TABLE … RENAME) also drops each of its
// "old.i" indexes and creates it again as "new.i" from its SQL in
// sqlite_master, in the same transaction (the rename first, so the index
// SQL already names the new table); several renames in one DDL (a TO b, b
// TO c; swaps through a third name) each move the indexes the table holds
// at that point.
//
// SQLite refuses to drop a column an index holds. MySQL drops the column
// from each index that holds it, and an index whose only column it was; so
// DROP COLUMN c first drops each index holding c, then the column, then
// creates again, under its name and from its SQL in sqlite_master less c's
// key part, each index that keeps other columns (a unique one stays unique
// on them; an upstream whose rows broke that could not have run the DDL),
// all in the DDL's transaction. A column of the primary key is refused with
// apply.ErrUnsupportedDDL: MySQL takes it out of the key, and SQLite alters
// no key.
//
// DROP DATABASE, ALTER TABLE … MODIFY/CHANGE/ALTER COLUMN, ADD or DROP
// PRIMARY KEY (DROP INDEX `PRIMARY`) and other forms SQLite has no statement
// for fail with apply.ErrUnsupportedDDL in a *apply.DDLError naming the DDL;
// so does a DEFAULT the rewrite cannot convert exactly, and any DDL SQLite
// refuses (a DROP COLUMN of a column a view, a CHECK constraint or a
// foreign key reads, say: MySQL would leave the view broken, or refuse too).
//
// # Foreign keys
//
// The sink's connection runs with SQLite's foreign_keys pragma off, whatever
// the URI says (see package apply, "Foreign keys"), unless
// apply.SinkOptions.ForeignKeyChecks: then it is on, Run applies each
// upstream transaction whole and in commit order, and the sink writes its
// tables parents first and deletes children first. SQLite checks a key at
// the end of each statement, and the sink splits a batch into several
// statements, so no order serves a transaction whose rows reference rows of
// the same table (a report inserted with the manager it reports to; a
// manager deleted with its reports), nor tables that reference each other,
// nor a referenced row that changes while the rows referencing it are
// written (a key that moves with its children, as ON UPDATE CASCADE logs
// it). Such a transaction is applied with PRAGMA defer_foreign_keys = ON:
// SQLite checks every key at COMMIT, against the end state, which is the
// state the upstream's own commit left. A COMMIT refused so fails the apply
// naming the rows that break a key (from pragma_foreign_key_check, read only
// then), and nothing of the transaction is committed.
//
// The trade-off: SQLite cannot turn the deferral off within a transaction
// without forgetting the violations counted so far, so the rest of the
// database transaction (up to Run's TxnRows rows) is checked at its COMMIT
// too, and a violation is named by its rows, not by the statement that
// wrote them. Deferring changes no result: an end state the immediate
// checks accept, the deferred one does. ON DELETE and ON UPDATE actions
// (CASCADE, SET NULL) still act at once, as they do without the deferral;
// the log's own deletes of rows a cascade removed then count as
// Conflicts.DeletesMissed.
//
// # Errors
//
// SQLITE_BUSY and SQLITE_LOCKED are transient (retried by Run). A DDL failing
// with "already exists" or "duplicate column name", or a drop failing with
// "no such table/index/column", had its effect already, and is counted as
// applied unless StrictDDL — except a DROP INDEX of an index its table does
// not have: SQLite commits a DDL with its progress row, so with the table
// there the drop cannot have run; it fails with an error naming the index
// (the rewrite reads the catalog to tell). Nor is SQLite's refusal of an
// ALTER TABLE that would break another object ("error in index i after drop
// column: no such column: c", "error in view v after rename: …") ever taken
// for an effect already there: it fails, naming the DDL and the object.
package sqlite
