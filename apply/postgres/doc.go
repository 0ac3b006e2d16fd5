// Package postgres is the apply sink for PostgreSQL, over
// github.com/jackc/pgx/v5 (its database/sql driver). Importing it registers
// the postgres: and postgresql: schemes with apply.Open:
//
//	import _ "github.com/redokit/redokit/apply/postgres"
//
//	sink, err := apply.Open(ctx, "postgres://user:password@host:5432/shop", nil)
//
// or [Open] and [New] give the [*Sink] itself. What it writes — upserts that
// replace whole rows, deletes by key, its progress table, how each codec value
// is bound — is the SQL sinks' spec in package apply's doc; this doc gives
// what is PostgreSQL's own.
//
// # The URI
//
//	postgres://user:password@host[:port]/database[?param=value&...]
//	postgres:///database?host=/var/run/postgresql      (a Unix socket)
//
// (postgresql:// too). The port defaults to 5432. Params are libpq's
// connection parameters as pgx reads them (sslmode, sslrootcert,
// connect_timeout, application_name, target_session_attrs, …, and pgx's own
// such as default_query_exec_mode), and any other param is a session
// parameter sent at connect (search_path, lock_timeout, …). As with libpq,
// the environment (PGPASSWORD, PGPASSFILE and ~/.pgpass, PGHOST, …) fills
// what the URI leaves out — except sslmode, below. Errors never show a
// password, of the user info or of the password and sslpassword params.
//
// TLS: pgx and libpq default to sslmode=prefer, which tries TLS without
// checking the server's certificate and silently goes on in plaintext when
// the server offers none. The sink instead uses sslmode=verify-full when the
// URI sets no sslmode (PGSSLMODE is not consulted): TLS is required, and the
// certificate is checked against the system's roots (or sslrootcert) and the
// host name. Set sslmode=require for TLS without that check, and
// sslmode=disable (or allow, prefer) to connect in plaintext, to a server on
// 127.0.0.1 say. A Unix socket never uses TLS.
//
// # The session
//
// Every connection of the sink starts with:
//
//   - TimeZone=UTC, the zone producers write TIMESTAMP values in (see
//     codec.TimestampValue), unless the URI sets TimeZone;
//   - session_replication_role=replica unless
//     apply.SinkOptions.ForeignKeyChecks: triggers, and so the foreign-key
//     checks and cascades, do not fire for the apply's writes, as for
//     logical replication (the log holds every change the upstream's own
//     cascades made). Setting it takes a superuser, or on PostgreSQL 15 and
//     later a role granted SET ON PARAMETER session_replication_role; Open
//     fails naming the role and the option otherwise. The URI may not set
//     it. With ForeignKeyChecks, Open checks the session is "origin" (a
//     role or database default could say otherwise). Note that replica
//     mode also silences the downstream's ordinary triggers, unless they
//     are ENABLE REPLICA or ENABLE ALWAYS.
//
// # Statements
//
// A MySQL database of the log is a PostgreSQL schema in the URI's database:
// tables are named "schema"."table". A DDL runs translated, in one
// transaction with its progress row (PostgreSQL's DDL is transactional), so
// a crash never leaves a DDL run and unrecorded. The sink opens as many
// transactions as Run has workers.
// A sink opened from a URI keeps up to 16 connections idle (database/sql's
// default is 2), so that the workers' sessions outlive the commits at each
// DDL rather than connect again.
//
// pgx prepares each statement on its first run on a connection and keeps
// it by its text; PostgreSQL fixes a prepared statement's parameter types
// when it is prepared, and keeps them across a DDL. So every row statement
// carries, in a trailing comment (/* ddl n */), which DDL of the sinks of
// the process last named its table (as the DDL's table, among its tables,
// or on either side of a rename; a DDL whose tables cannot be told, such as
// a schema's, counts for every table): a statement written after a DDL of
// its table is prepared anew, and a VARCHAR column that was an integer gets
// '0031', not 31, while the statements of the other tables stay prepared.
// (A DDL run on the downstream by another client during the apply is not
// counted.)
//
// An upsert is INSERT … ON CONFLICT (key) DO UPDATE, which updates the row
// holding its key but fails (23505) on a row holding another of its unique
// values. The row changes of one commit ts come in no particular order, and
// a batch is reduced to each key's last change, so a unique value that
// moves from one row to another (a chain of them, a swap) would meet the
// row that held it, although the log is legal. The upserts of a table with
// a unique key besides its key (read from pg_index, again after a DDL of
// the table) therefore go by units — the batch's, or one commit ts's when
// the batch is not reduced — and a unit holding an update or a row inserted
// again first deletes the rows of every key it writes, then writes them:
// the same rows in the end, in one more statement (the MySQL and SQLite
// sinks do the same). A unit of new rows alone is written as is. The delete fires no
// foreign-key action (session_replication_role is replica); with
// apply.SinkOptions.ForeignKeyChecks a table that a foreign key references
// is written as is, and a unique value moving inside it fails, naming the
// statement, rather than cascade. Triggers enabled ALWAYS or REPLICA see a
// delete and an insert where such a row was updated.
//
// A row that still meets another row on a unique key is a stale one, left
// by changes the replay overlaps (the downstream ran past the checkpoint).
// The statements of a table with such a key run under a savepoint (SAVEPOINT
// and RELEASE, two round trips a statement); when one fails with 23505 the
// sink rolls back to it, deletes for each of its rows the rows that hold one
// of its unique values and are not the row of its key, counting the row as
// replaced (apply.Conflicts.Replaced), and writes the statement again: what
// MySQL's REPLACE does. A batch ending in a part of a large commit ts (see
// apply.CommitTsSplitter) may hold two rows meeting on a unique value
// themselves — a row as an earlier commit ts left it, and a row taking its
// value whose move away comes in the next part — and the statement then
// fails again: its rows go one at a time in commit-ts order, the later
// replacing the earlier, which the next part writes back. A unique index on an expression, or partial, cannot
// be matched by columns: a row holding its value stops the apply, naming
// the table. With apply.SinkOptions.ForeignKeyChecks no row is deleted: the
// duplicate key stops the apply, naming the table.
//
// New rows go by COPY: a run of at least 32 inserts of one table in a batch,
// each of a key no other change of the batch has, is sent as one COPY …
// FROM STDIN (text format) under a savepoint, which costs the server about a
// quarter of an upsert's time a row and the client a fifth. COPY only
// inserts; whatever it fails on — a row the downstream holds already (a
// replay over a downstream that ran ahead, a resumed apply), a stale row
// holding a unique value, a value the column refuses — the sink rolls back
// to the savepoint and writes the same rows by the upserts above, with their
// results, conflict counts and errors; the table's next 16 runs then go by
// upserts. The new rows of the batch's last commit ts go after its other
// upserts of earlier ones, in case that commit ts is a part (see above).
// Each field is the text a text parameter of the upsert would be
// (the column's input function reads it); an integer, a float or a byte
// string, which pgx binds in binary, goes by COPY only into a column whose
// type reads its text as the same value (integer and numeric, real and
// double precision, bytea), else the rows go by upserts; so does a text
// holding a NUL (the upsert's error names it), a table with rules (which
// COPY ignores), a key no unique index backs (ON CONFLICT needs one), a table
// without a key whose inserts are checked for duplicates, a dry run, and
// every table with apply.SinkOptions.ForeignKeyChecks. Triggers enabled
// ALWAYS or REPLICA fire for COPY's rows as for an INSERT's.
//
// # DDL and types
//
// The log's DDLs are MySQL's. The sink translates each into PostgreSQL
// statements (package apply/internal/pgddl has the whole rule) and runs them
// with the DDL's progress row in one transaction. A MySQL database is a
// schema; index i of table t is "t.i" (MySQL names indexes per table), and
// a rename carries its indexes along; statements say IF [NOT] EXISTS where
// a replay may find their effect there, but a DROP INDEX of an index its
// existing table lacks is an error. A form the translator does not know
// (partitions, spatial and fulltext indexes, triggers, procedures, a MODIFY
// whose conversion PostgreSQL would do differently…) is an
// *apply.DDLError wrapping apply.ErrUnsupportedDDL, naming the clause.
//
// Types (and so the values the sink binds):
//
//	MySQL                                   PostgreSQL
//	TINYINT [UNSIGNED], SMALLINT, BOOL      smallint
//	SMALLINT UNSIGNED, MEDIUMINT, INT       integer
//	INT UNSIGNED, BIGINT                    bigint
//	BIGINT UNSIGNED                         numeric(20,0)
//	BIT(n)                                  bigint (n ≤ 63), numeric(20,0) (n = 64)
//	FLOAT / DOUBLE                          real / double precision (-0 kept)
//	DECIMAL(p,s)                            numeric(p,s)
//	CHAR(n), VARCHAR(n) / TEXT types        varchar(n) / text (a NUL fails the statement)
//	BINARY, VARBINARY, BLOB types           bytea
//	DATE                                    date (a zero date fails the statement)
//	DATETIME(f) / TIMESTAMP(f)              timestamp(f) / timestamptz(f) (the session is UTC)
//	TIME(f)                                 interval (±838:59:59)
//	YEAR                                    smallint
//	ENUM / SET                              smallint, the member number / bigint, the bitmap
//	JSON                                    json (the text as given)
//
// # Errors
//
// Transient (retried by Run): SQLSTATE 40001 (serialization failure),
// 40P01 (deadlock), class 08 (connection exceptions), 57P01, 57P02, 57P03
// (shutdown, crash, starting up), 53300 (too many connections) and 55P03
// (lock not available), and lost connections and network errors.
//
// No DDL error counts as already applied (apply.SinkOptions.StrictDDL
// changes nothing here): PostgreSQL aborts a transaction at its first
// error, so the sink cannot step over one; the translated statements say
// IF [NOT] EXISTS where the effect may already be there instead, and any
// other failure is an *apply.DDLError.
//
// # Not supported
//
//   - DDLs the translator cannot express: an error naming the DDL, never a
//     skip.
//   - Identifiers longer than 63 bytes (PostgreSQL's limit; it would
//     truncate them, and two names could become one).
//   - PgBouncer in transaction or statement pooling mode: the session
//     parameters above, and pgx's cached prepared statements, need a
//     session of their own (session pooling works).
package postgres
