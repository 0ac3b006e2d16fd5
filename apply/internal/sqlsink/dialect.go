package sqlsink

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"math"
	"strconv"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
)

// Dialect is the SQL dialect of a SQL sink.
type Dialect uint8

// Dialects.
const (
	MySQL    Dialect = 1 // MySQL, MariaDB, TiDB (package apply/mysql)
	SQLite   Dialect = 2 // SQLite (package apply/sqlite)
	Postgres Dialect = 3 // PostgreSQL (package apply/postgres)
)

func (d Dialect) String() string {
	switch d {
	case MySQL:
		return "mysql"
	case SQLite:
		return "sqlite"
	case Postgres:
		return "postgres"
	}
	return "dialect(" + strconv.Itoa(int(d)) + ")"
}

// quote appends an identifier quoted for d.
func (d Dialect) quote(b []byte, name string) []byte {
	q := byte('"')
	if d == MySQL {
		q = '`'
	}
	b = append(b, q)
	for i := 0; i < len(name); i++ {
		if name[i] == q {
			b = append(b, q)
		}
		b = append(b, name[i])
	}
	return append(b, q)
}

// param appends the placeholder of the n-th (from 1) argument of a
// statement: ? for MySQL and SQLite, $n for PostgreSQL.
func (d Dialect) param(b []byte, n int) []byte {
	if d == Postgres {
		return strconv.AppendInt(append(b, '$'), int64(n), 10)
	}
	return append(b, '?')
}

// params appends n comma-separated placeholders, the first for argument
// number from (from 1).
func (d Dialect) params(b []byte, from, n int) []byte {
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = d.param(b, from+i)
	}
	return b
}

// schemaWord is what the dialect calls a namespace of tables.
func (d Dialect) schemaWord() string {
	if d == Postgres {
		return "SCHEMA"
	}
	return "DATABASE"
}

// duplicateKey reports whether err is a unique-key violation.
func (d Dialect) duplicateKey(err error) bool {
	drv := drivers[d]
	return drv != nil && drv.DuplicateKey != nil && drv.DuplicateKey(err)
}

// noSuchTable reports whether err says a table does not exist.
func (d Dialect) noSuchTable(err error) bool {
	drv := drivers[d]
	return drv != nil && drv.NoSuchTable != nil && drv.NoSuchTable(err)
}

// Quote returns an identifier quoted for d.
func (d Dialect) Quote(name string) string { return string(d.quote(nil, name)) }

// table appends the downstream name of t: `schema`.`name` for MySQL,
// "schema"."name" for PostgreSQL, and "name" alone for SQLite, which has one
// namespace per file.
func (d Dialect) table(b []byte, t apply.Table) []byte {
	if d != SQLite && t.Schema != "" {
		b = d.quote(b, t.Schema)
		b = append(b, '.')
	}
	return d.quote(b, t.Name)
}

// maxParams is the most placeholders one statement may hold: MySQL's
// prepared-statement limit (the sink interpolates, but the driver falls back
// to a prepared statement for a query beyond max_allowed_packet), and
// SQLite's SQLITE_MAX_VARIABLE_NUMBER default since 3.32.
func (d Dialect) maxParams() int {
	if d == MySQL {
		return 65535
	}
	return 32766
}

// arg converts a value to the argument the dialect's driver binds. Byte
// payloads are copied: the row's memory is Run's.
//
//	kind            MySQL                         SQLite
//	null            NULL                          NULL
//	int             int64                         INTEGER
//	uint            uint64 (all 64 bits)          INTEGER, or its decimal TEXT above 2^63-1
//	float32/64      float64 (exact for float32)   REAL
//	decimal         its text                      its text (column affinity decides)
//	string          string                        TEXT
//	bytes           []byte (never nil)            BLOB
//	date            'YYYY-MM-DD'                  TEXT
//	datetime/ts     'YYYY-MM-DD hh:mm:ss[.f]'     TEXT (fsp fraction digits)
//	duration        '[-]hh:mm:ss[.f]'             TEXT
//	year            int64                         INTEGER
//	bit, set        uint64                        INTEGER (decimal TEXT above 2^63-1)
//	enum            uint64, the 1-based index     INTEGER, the index
//	json            string                        TEXT
func (d Dialect) arg(v codec.Value) any {
	switch v.Kind() {
	case codec.KindNull:
		return nil
	case codec.KindInt:
		return v.Int()
	case codec.KindUint, codec.KindBit, codec.KindEnum, codec.KindSet:
		u := v.Uint()
		if d == MySQL {
			return u
		}
		if u > math.MaxInt64 {
			return strconv.FormatUint(u, 10)
		}
		return int64(u)
	case codec.KindFloat32:
		return float64(v.Float32())
	case codec.KindFloat64:
		return v.Float64()
	case codec.KindDecimal, codec.KindString, codec.KindJSON:
		return string(v.Bytes())
	case codec.KindBytes:
		b := make([]byte, len(v.Bytes()), max(len(v.Bytes()), 1))
		copy(b, v.Bytes())
		return b
	case codec.KindDate:
		return v.DateTime().String()[:10]
	case codec.KindDatetime, codec.KindTimestamp:
		return v.DateTime().String()
	case codec.KindDuration:
		return v.Duration().String()
	case codec.KindYear:
		return int64(v.Year())
	}
	// An unknown kind cannot come out of the codec; bind its text so the
	// statement fails visibly rather than writing a wrong value.
	return v.String()
}

// argSize estimates the bytes an argument adds to an interpolated statement.
func argSize(a any) int {
	switch x := a.(type) {
	case string:
		return len(x) + 3
	case []byte:
		return 2*len(x) + 10
	}
	return 21
}

// Driver is what a dialect's driver package knows that the shared SQL code
// does not: how its errors read. Packages apply/mysql and apply/sqlite
// register theirs, so this package imports no database driver.
type Driver struct {
	// Transient reports whether err may pass (a lost connection, a
	// deadlock, a busy database): Run then retries.
	Transient func(err error) bool
	// AlreadyApplied reports whether err says that a DDL of the action's
	// kind had its effect already: the table, column, index or database
	// exists, or is already gone. The downstream may have run DDLs past the
	// log's checkpoint before the disaster (TiCDC's sink records its own DDL
	// progress, which redo apply cannot see), and a MySQL DDL that
	// succeeded just before a crash is not recorded (its implicit commit
	// cannot include the progress row).
	AlreadyApplied func(err error, action codec.ActionType) bool
	// Rewrite turns a logged (MySQL) DDL into the statements the dialect
	// runs, in one transaction with the DDL's progress row; q queries that
	// transaction (a rewrite may read the catalog). nil means the dialect
	// runs the DDL as logged (MySQL, which commits a DDL implicitly). A DDL
	// it cannot translate is an error wrapping apply.ErrUnsupportedDDL.
	Rewrite func(ctx context.Context, q Queryer, ddl *codec.DDL) ([]string, error)
	// DuplicateKey reports whether err is a unique-key violation: an
	// upsert met a second row on another unique key (see sqlTx.upsert).
	DuplicateKey func(err error) bool
	// NoSuchTable reports whether err says a table does not exist.
	NoSuchTable func(err error) bool
	// NoSuchColumn and NoSuchIndex report whether err says a column or an
	// index does not exist: MySQL's DDL run again after a crash before its
	// progress row, when it renames one (see renamedAlready). nil on
	// dialects whose DDLs commit with their progress row.
	NoSuchColumn, NoSuchIndex func(err error) bool
	// CopyFrom runs query, a COPY … FROM STDIN in the text format, on conn
	// (the driver's connection, as sql.Conn.Raw gives it) inside the
	// transaction open on it, sending data; it returns the rows copied.
	// nil: the dialect writes no COPY (see copy.go).
	CopyFrom func(ctx context.Context, conn any, query string, data io.Reader) (int64, error)
}

// Queryer reads inside the transaction a DDL runs in.
type Queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

var drivers [Postgres + 1]*Driver

// Register makes d's driver known and registers open under each of the
// sink's URI schemes with apply.Open. It is called from the init of the
// dialect's sink package.
func Register(d Dialect, drv *Driver, schemes []string, open func(ctx context.Context, uri string, opts *apply.SinkOptions) (*SQLSink, error)) {
	if d != MySQL && d != SQLite && d != Postgres {
		panic("sqlsink: Register of an unknown dialect")
	}
	drivers[d] = drv
	for _, s := range schemes {
		apply.Register(s, func(ctx context.Context, uri string, opts *apply.SinkOptions) (apply.Sink, error) {
			return open(ctx, uri, opts)
		})
	}
}

// classify marks errors worth retrying with apply.Transient.
func (d Dialect) classify(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if drv := drivers[d]; drv != nil && drv.Transient(err) {
		return apply.Transient(err)
	}
	return err
}

// ddlAlreadyApplied reports whether err says that the DDL's effect is
// already there (see Driver.AlreadyApplied).
func (d Dialect) ddlAlreadyApplied(err error, action codec.ActionType) bool {
	drv := drivers[d]
	return drv != nil && drv.AlreadyApplied(err, action)
}
