package sqlsink

import (
	"strconv"
	"sync/atomic"
)

// What the PostgreSQL sink knows of a table's columns is true only until the
// next DDL: the statements pgx prepared for it (and, on every dialect, the
// unique keys the sink read from the catalog: see units.go).

// pgDDLs counts the DDLs the PostgreSQL sinks of this process ran (or
// tried). Every row statement carries the count in a comment (see query),
// so a statement written after a DDL is never one written before it, even
// when their text is otherwise the same.
//
// pgx's database/sql connections prepare each statement once, on its first
// run, and run it again by its text from a cache of their own. PostgreSQL
// fixes a prepared statement's parameter types at its preparation: after a
// DDL changed a column from an integer to a VARCHAR, the statement written
// for the integer column binds '0031' as the integer 31, which the server
// then stores as '31' (and a delete by that column finds no text equal to
// an integer, or the wrong row). The server re-plans a prepared statement
// after a DDL, but it never retypes its parameters, and pgx's cache keeps
// the old description; neither can be reached on every pooled connection,
// so the text itself changes. One count for every table and every sink
// (two sinks may share a *sql.DB given to New): DDLs are rare, and a
// statement prepared again costs one round trip on each connection. DDLs
// run on the downstream by others than the sink are not counted.
var pgDDLs atomic.Uint64

// query is the text the statement in t.buf runs as: the same, except on
// PostgreSQL after a DDL (see pgDDLs).
func (t *sqlTx) query() string { return t.text(t.buf) }

// text is the text statement b runs as (see query).
func (t *sqlTx) text(b []byte) string {
	if t.s.d != Postgres {
		return string(b)
	}
	n := pgDDLs.Load()
	if n == 0 {
		return string(b)
	}
	// Past len(b): what an error shows of b stays as it was.
	b = append(b, " /* ddl "...)
	b = strconv.AppendUint(b, n, 10)
	b = append(b, " */"...)
	return string(b)
}
