package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/sqlsink"
	"github.com/redokit/redokit/codec"
)

// Sink is the MySQL sink. Besides apply.Sink and apply.TxLimiter (no limit)
// it has DB() *sql.DB, the database it writes, and IgnoredDDLs() int64, the
// DDLs whose effect was found already there (see apply.SinkOptions.StrictDDL).
type Sink = sqlsink.SQLSink

// Schemes are the URI schemes this package registers with apply.Open.
var Schemes = []string{"mysql", "mariadb", "tidb"}

func init() {
	sqlsink.Register(sqlsink.MySQL, &sqlsink.Driver{Transient: transient, AlreadyApplied: alreadyApplied,
		DuplicateKey: mysqlError(1062, 1586), NoSuchTable: mysqlError(1146),
		NoSuchColumn: mysqlError(1054), NoSuchIndex: mysqlError(1176)}, Schemes, Open)
}

// Open opens the sink a URI names:
//
//	mysql://user:password@host[:port]/[database][?param=value&...]
//
// (mariadb:// and tidb:// too). The params are go-sql-driver/mysql DSN
// parameters or session variables; the sink sets interpolateParams=true and
// time_zone='+00:00' unless the URI sets them. Open connects, and creates the
// progress table if it is missing. Errors never show the password.
func Open(ctx context.Context, uri string, opts *apply.SinkOptions) (*Sink, error) {
	cfg, redacted, err := parseURI(uri)
	if err != nil {
		return nil, err
	}
	var o apply.SinkOptions
	if opts != nil {
		o = *opts
	}
	// The driver's default logger prints to stderr on its own ("[mysql] …
	// packets.go:58 …"); its records go to the sink's logger at debug
	// instead, and the last one is kept: it is the cause the driver's
	// "invalid connection" does not say.
	dl := &driverLogger{log: o.Logger, sink: redacted}
	cfg.Logger = dl
	c, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("apply: open %s: %w", redacted, err)
	}
	db := sql.OpenDB(c)
	if o.ProgressSchema == "" {
		o.ProgressSchema = cfg.DBName
	}
	s, err := sqlsink.New(ctx, db, sqlsink.MySQL, &o, redacted, true)
	if err != nil {
		db.Close()
		if last := dl.lastRecord(); last != "" && errors.Is(err, gomysql.ErrInvalidConn) {
			return nil, fmt.Errorf("%w (server %s: %s)", err, cfg.Addr, last)
		}
		return nil, err
	}
	return s, nil
}

// driverLogger is a gomysql.Logger that passes the driver's records to a
// slog.Logger at debug, and remembers the last one.
type driverLogger struct {
	log  *slog.Logger
	sink string // the sink's URI, redacted

	mu   sync.Mutex
	last string
}

func (l *driverLogger) Print(v ...any) {
	msg := strings.TrimSpace(fmt.Sprint(v...))
	// The driver leads with its source position ("packets.go:58 read tcp
	// …: connection reset by peer"): the cause is what follows.
	if pos, rest, ok := strings.Cut(msg, " "); ok && strings.Contains(pos, ".go:") {
		msg = rest
	}
	l.mu.Lock()
	l.last = msg
	l.mu.Unlock()
	if l.log != nil {
		l.log.Debug("mysql driver: "+msg, "sink", l.sink)
	}
}

func (l *driverLogger) lastRecord() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// New makes a MySQL sink over a database the caller opened (and closes).
// Open it with interpolateParams=true for speed, and with the session time
// zone the log's TIMESTAMP values are in (UTC). New creates the progress
// table if it is missing.
func New(ctx context.Context, db *sql.DB, opts *apply.SinkOptions) (*Sink, error) {
	return sqlsink.New(ctx, db, sqlsink.MySQL, opts, "", false)
}

// parseURI turns a mysql:// URI into a driver Config, and the URI safe to
// print.
func parseURI(uri string) (*gomysql.Config, string, error) {
	u, err := url.Parse(uri)
	if err != nil {
		// url's errors quote the whole URI, password included: never wrap them.
		return nil, "", apply.BadURI(uri, "does not parse as a URL")
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "mysql" && scheme != "mariadb" && scheme != "tidb" {
		return nil, "", apply.BadURI(uri, "want mysql://, mariadb:// or tidb://")
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, "", apply.BadURI(uri, "no host: want mysql://user:password@host:port/database")
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return nil, "", apply.BadURI(uri, "no host")
	}
	if port == "" {
		port = "3306"
	}
	db := strings.TrimPrefix(u.Path, "/")
	if strings.Contains(db, "/") {
		return nil, "", apply.BadURI(uri, "the path must be one database name, got %q", db)
	}
	// Parse everything but the user info with the driver's own DSN parser,
	// so every driver parameter is accepted and checked; the user and
	// password are set on the Config afterwards and never pass through a
	// DSN string.
	dsn := "tcp(" + net.JoinHostPort(host, port) + ")/" + db
	if u.RawQuery != "" {
		dsn += "?" + u.RawQuery
	}
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		return nil, "", apply.BadURI(uri, "%v", err)
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	if cfg.User == "" {
		cfg.User = "root"
	}
	q := u.Query()
	if !q.Has("interpolateParams") {
		// One round trip per statement instead of prepare, execute and
		// close: the batches are multi-row statements that are never
		// reused as prepared statements.
		cfg.InterpolateParams = true
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	if _, ok := cfg.Params["time_zone"]; !ok {
		// TIMESTAMP values in a redo log carry no zone; producers write
		// UTC (see codec.TimestampValue). Override with ?time_zone=...
		cfg.Params["time_zone"] = "'+00:00'"
	}
	return cfg, apply.Redact(uri), nil
}

func transient(err error) bool {
	var me *gomysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1205, // ER_LOCK_WAIT_TIMEOUT
			1213,                   // ER_LOCK_DEADLOCK
			1053,                   // ER_SERVER_SHUTDOWN
			1927,                   // ER_CONNECTION_KILLED (MariaDB)
			1040,                   // ER_CON_COUNT_ERROR: too many connections
			1158, 1159, 1160, 1161: // network read/write errors and timeouts
			return true
		}
		return false
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, gomysql.ErrInvalidConn) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// mysqlError returns a test for server errors of the given numbers:
// ER_DUP_ENTRY (1062), ER_DUP_ENTRY_WITH_KEY_NAME (1586), ER_NO_SUCH_TABLE
// (1146).
func mysqlError(numbers ...uint16) func(error) bool {
	return func(err error) bool {
		var me *gomysql.MySQLError
		return errors.As(err, &me) && slices.Contains(numbers, me.Number)
	}
}

func alreadyApplied(err error, _ codec.ActionType) bool {
	var me *gomysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case 1007, // ER_DB_CREATE_EXISTS
		1008, // ER_DB_DROP_EXISTS
		1050, // ER_TABLE_EXISTS_ERROR
		1051, // ER_BAD_TABLE_ERROR (DROP TABLE of a table that is gone)
		1060, // ER_DUP_FIELDNAME
		1061, // ER_DUP_KEYNAME
		1068, // ER_MULTIPLE_PRI_KEY
		1091: // ER_CANT_DROP_FIELD_OR_KEY
		return true
	}
	return false
}
