package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"

	modernc "modernc.org/sqlite" // also registers the "sqlite" database/sql driver

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/sqliteddl"
	"github.com/redokit/redokit/apply/internal/sqlsink"
	"github.com/redokit/redokit/codec"
)

// Sink is the SQLite sink. Besides apply.Sink it has MaxOpenTxs() int, 1
// (apply.TxLimiter: SQLite has one writer), DB() *sql.DB, the database it
// writes, and IgnoredDDLs() int64, the DDLs whose effect was found already
// there (see apply.SinkOptions.StrictDDL).
type Sink = sqlsink.SQLSink

// Schemes are the URI schemes this package registers with apply.Open.
var Schemes = []string{"sqlite", "sqlite3"}

func init() {
	sqlsink.Register(sqlsink.SQLite, &sqlsink.Driver{Transient: transient, AlreadyApplied: alreadyApplied, Rewrite: rewrite,
		DuplicateKey: duplicateKey, NoSuchTable: noSuchTable}, Schemes, Open)
}

// Open opens the sink a URI names:
//
//	sqlite:///absolute/path.db[?param=value&...]
//	sqlite:relative/path.db[?param=value&...]
//
// (sqlite3: too). The params are modernc.org/sqlite DSN parameters; the sink
// adds the pragmas busy_timeout(10000), journal_mode(WAL) and
// synchronous(NORMAL), and _txlock=immediate, each unless the URI sets it.
// Open creates the file and the progress table if they are missing.
func Open(ctx context.Context, uri string, opts *apply.SinkOptions) (*Sink, error) {
	dsn, err := parseURI(uri)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("apply: open %s: %w", uri, err)
	}
	s, err := sqlsink.New(ctx, db, sqlsink.SQLite, opts, uri, true)
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// New makes a SQLite sink over a database the caller opened (with driver
// name "sqlite") and closes. The sink holds one connection of it for its
// life. New creates the progress table if it is missing.
func New(ctx context.Context, db *sql.DB, opts *apply.SinkOptions) (*Sink, error) {
	return sqlsink.New(ctx, db, sqlsink.SQLite, opts, "", false)
}

// parseURI turns a sqlite: URI into a modernc.org/sqlite DSN.
func parseURI(uri string) (string, error) {
	scheme, rest, _ := strings.Cut(uri, ":")
	if s := strings.ToLower(scheme); s != "sqlite" && s != "sqlite3" {
		return "", apply.BadURI(uri, "want sqlite:///absolute/path.db or sqlite:relative/path.db")
	}
	var path, query string
	switch {
	case strings.HasPrefix(rest, "//"):
		u, err := url.Parse(uri)
		if err != nil {
			return "", apply.BadURI(uri, "does not parse as a URL")
		}
		if u.User != nil {
			return "", apply.BadURI(uri, "sqlite takes no user or password")
		}
		if u.Host != "" {
			return "", apply.BadURI(uri, "want sqlite:///absolute/path.db or sqlite:relative/path.db, not a host (%q)", u.Host)
		}
		path, query = u.Path, u.RawQuery
	default:
		path, query, _ = strings.Cut(rest, "?")
		var err error
		if path, err = url.PathUnescape(path); err != nil {
			return "", apply.BadURI(uri, "bad escape in the path")
		}
	}
	if path == "" || strings.HasSuffix(path, "/") {
		return "", apply.BadURI(uri, "no database file")
	}
	if path == ":memory:" || strings.HasPrefix(path, "/:memory:") {
		return "", apply.BadURI(uri, "an in-memory database would vanish with the sink")
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", apply.BadURI(uri, "bad query: %v", err)
	}
	// Defaults, unless the URI sets the same pragma: WAL lets readers look
	// while the apply runs; synchronous=NORMAL is safe with WAL (a crash
	// can lose the last commits but never tears one, and the progress
	// table is in the same commits, so a re-run redoes them).
	set := map[string]bool{}
	for _, p := range q["_pragma"] {
		name := strings.ToLower(strings.TrimSpace(p))
		if i := strings.IndexAny(name, "(= "); i >= 0 {
			name = name[:i]
		}
		set[name] = true
	}
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(NORMAL)"} {
		name, _, _ := strings.Cut(p, "(")
		if !set[name] {
			q.Add("_pragma", p)
		}
	}
	if !q.Has("_txlock") {
		// Take the write lock at BEGIN, so a busy database fails (and is
		// retried) before any statement ran.
		q.Set("_txlock", "immediate")
	}
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode(), nil
}

// rewrite turns a logged MySQL DDL into SQLite statements.
func rewrite(_ context.Context, _ sqlsink.Queryer, ddl *codec.DDL) ([]string, error) {
	return sqliteddl.Rewrite(ddl)
}

// duplicateKey: SQLITE_CONSTRAINT_UNIQUE (2067) or _PRIMARYKEY (1555).
func duplicateKey(err error) bool {
	var se *modernc.Error
	return errors.As(err, &se) && (se.Code() == 2067 || se.Code() == 1555)
}

func noSuchTable(err error) bool {
	var se *modernc.Error
	return errors.As(err, &se) && strings.Contains(se.Error(), "no such table")
}

func transient(err error) bool {
	var se *modernc.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
			return true
		}
	}
	return false
}

func alreadyApplied(err error, action codec.ActionType) bool {
	var se *modernc.Error
	if !errors.As(err, &se) {
		return false
	}
	msg := se.Error()
	if strings.Contains(msg, "already exists") || strings.Contains(msg, "duplicate column name") {
		return true
	}
	switch action {
	case codec.ActionDropTable, codec.ActionDropIndex, codec.ActionDropColumn, codec.ActionDropView:
		return strings.Contains(msg, "no such table") || strings.Contains(msg, "no such index") ||
			strings.Contains(msg, "no such column")
	}
	return false
}
