// Package sqlsink is the SQL code the apply sinks share: the SQLSink that
// packages apply/mysql and apply/sqlite open, its statements, progress table
// and value binding, for both dialects. Its spec is the SQL sinks' part of
// package apply's doc.
//
// It imports no database driver: what only a driver knows (which errors are
// transient, which say a DDL's effect is already there) is a [Driver] that
// the dialect's package registers from init, and that package opens the
// *sql.DB. So importing apply/sqlite does not link the MySQL driver, nor the
// other way round. The MySQL-to-SQLite DDL rewrite is package sqliteddl.
//
// The tests here run Run and the sink together against SQLite and, when
// REDOKIT_MYSQL_DSN is set (always under CI=true), MariaDB.
package sqlsink
