// Package mysql is the apply sink for MySQL-compatible databases (MySQL,
// MariaDB, TiDB), over github.com/go-sql-driver/mysql. Importing it
// registers the mysql:, mariadb: and tidb: schemes with apply.Open:
//
//	import _ "github.com/redokit/redokit/apply/mysql"
//
//	sink, err := apply.Open(ctx, "mysql://user:password@host:3306/shop", nil)
//
// or [Open] and [New] give the [*Sink] itself. What it writes — upserts that
// replace whole rows, deletes by key, its progress table, how each codec value
// is bound, the DDLs it tolerates as already applied — is the SQL sinks' spec
// in package apply's doc; this doc gives what is MySQL's own.
//
// # The URI
//
//	mysql://user:password@host[:port]/[database][?param=value&...]
//
// The port defaults to 3306 and the user to root. Params are
// go-sql-driver/mysql DSN parameters (tls, timeout, readTimeout, …) or
// session variables (sql_mode, innodb_lock_wait_timeout, …); the sink adds
// interpolateParams=true (a statement is one round trip) and
// time_zone='+00:00' (the zone producers write TIMESTAMP values in) unless the
// URI sets them. The progress table lives in the URI's database, or
// apply.SinkOptions.ProgressSchema, or "redokit" (created if missing). Errors
// never show the password.
//
// The URI's database is not where the log's tables go: each table lands in
// the schema the log names it in, so mysql://…/replica applies a log of
// schema shop into shop, and replica receives only the progress table. To
// apply shop into replica, map it (apply.MapSchemas; redokit apply
// --map-schema shop=replica).
//
// # Statements
//
// Tables are named `schema`.`table`, from the log. Row statements are
// multi-row INSERT … ON DUPLICATE KEY UPDATE and DELETE … WHERE key IN (…)
// (or OR-ed key tuples) of up to apply.SinkOptions.MaxStatementRows rows and
// 4 MiB; a row that meets a stale row on another unique key is written
// again alone with REPLACE (see package apply, "Idempotency"). The unique
// keys of a table are read from information_schema.STATISTICS (again after
// each DDL): the rows of a table with another unique key than its key are
// written by units, the rows of the unit's keys deleted first, so that a
// unique value moving between rows never meets the row that held it. A DDL runs as logged,
// on one connection after USE of its schema (not for CREATE/DROP DATABASE),
// which never goes back to the pool: the sink keeps it for the next DDL
// (pinged first), and discards it after an error, at Close, and after each
// DDL when the pool has a connection limit (an idle connection held there
// would take a worker's). MySQL commits a DDL implicitly, so its progress
// row is written just after it. The sink opens as many transactions as Run
// has workers, and one connection more for its DDLs.
// A sink opened from a URI keeps up to 16 connections idle (database/sql's
// default is 2), so that the workers' sessions outlive the commits at each
// DDL rather than connect again.
//
// # Foreign keys
//
// The sink's sessions run with foreign_key_checks=0 (see package apply,
// "Foreign keys"), set at the start of each transaction; with
// apply.SinkOptions.ForeignKeyChecks they run with foreign_key_checks=1, set
// the same way, Run applies each upstream transaction whole and in commit
// order, and the sink writes its tables parents first and deletes children
// first. InnoDB checks each row as it is written, and MySQL has no deferred
// constraints, so no order serves a transaction whose rows reference rows of
// the same table (a report inserted with the manager it reports to; a
// manager deleted with its reports), nor tables that reference each other,
// nor a referenced row that changes while the rows referencing it are
// written (a key that moves with its children, as ON UPDATE CASCADE logs
// it). Such a transaction is applied with foreign_key_checks=0, as MySQL's
// own replication applies its events, and the checks are turned on again
// after it. The sink then checks the transaction's end state itself, one
// query per foreign key it touched (the keys' columns are read from
// information_schema.KEY_COLUMN_USAGE once, and again after each DDL):
// every row the transaction wrote to a child table must find its parent
// row, and no child row may hold a value that a row the transaction deleted
// or updated held and find no parent row. A violation fails the
// transaction, naming the key, the table and the value, and nothing of it
// is committed. The other transactions keep InnoDB's own checks.
//
// The trade-off: for those transactions the check is the sink's reading,
// not InnoDB's: it takes no locks, so a session writing the downstream
// during the apply could delete a parent row between the check and the
// commit (the downstream is the apply's alone while it runs); a row with a
// NULL in its key's columns is not checked, as InnoDB does not check it;
// and a row image that lacks a key's column makes the check read the whole
// child table. With the checks off InnoDB runs no ON DELETE or ON UPDATE
// action, which changes no result: the log holds the changes the upstream's
// own actions made.
//
// # Errors
//
// Transient (retried by Run): lost connections and network errors, and
// errors 1205 (lock wait timeout), 1213 (deadlock), 1053, 1927, 1040 and
// 1158–1161. A DDL failing with 1007, 1008, 1050, 1051, 1060, 1061, 1068 or
// 1091 had its effect already, and is counted as applied unless StrictDDL.
package mysql
