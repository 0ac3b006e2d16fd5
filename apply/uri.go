package apply

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// ErrBadURI is wrapped by the error of a sink URI that does not parse. The
// message shows the URI with its password replaced by "xxxxx".
var ErrBadURI = errors.New("bad sink URI")

// sinkTarget is a parsed sink URI.
type sinkTarget struct {
	dialect  Dialect
	mysql    *mysql.Config // MySQL
	sqlite   string        // SQLite: the modernc DSN
	redacted string        // the URI, safe to print
}

// Redact returns uri with the password of its user info (if any) replaced by
// "xxxxx". It works on URIs that do not parse too, so that an error about a
// malformed URI can show it.
func Redact(uri string) string {
	if u, err := url.Parse(uri); err == nil {
		if _, has := u.User.Password(); has {
			return u.Redacted()
		}
		if u.User != nil || !strings.Contains(uri, "@") {
			return uri
		}
	}
	// By hand: scheme://user:password@rest. The user info ends at the last
	// '@' before the path (a password may hold '@' or '/').
	i := strings.Index(uri, "://")
	if i < 0 {
		return uri
	}
	auth := uri[i+3:]
	at := strings.LastIndex(auth, "@")
	if at < 0 {
		return uri
	}
	colon := strings.Index(auth[:at], ":")
	if colon < 0 {
		return uri
	}
	return uri[:i+3] + auth[:colon+1] + "xxxxx" + auth[at:]
}

func badURI(uri, format string, args ...any) error {
	return fmt.Errorf("apply: %w %q: %s", ErrBadURI, Redact(uri), fmt.Sprintf(format, args...))
}

// parseSinkURI parses
//
//	mysql://user:password@host[:port]/[database][?param=value&...]
//	sqlite:///absolute/path.db[?_pragma=...]  or  sqlite:relative/path.db[?...]
//
// For mysql, the params are go-sql-driver/mysql DSN parameters (tls,
// timeout, readTimeout, writeTimeout, or any session variable such as
// time_zone or sql_mode). For sqlite they are modernc.org/sqlite DSN
// parameters.
func parseSinkURI(uri string) (*sinkTarget, error) {
	scheme, rest, ok := strings.Cut(uri, ":")
	if !ok || scheme == "" {
		return nil, badURI(uri, "no scheme: want mysql://… or sqlite://…")
	}
	switch strings.ToLower(scheme) {
	case "mysql", "mariadb", "tidb":
		return parseMySQLURI(uri)
	case "sqlite", "sqlite3":
		return parseSQLiteURI(uri, rest)
	}
	return nil, badURI(uri, "unknown scheme %q: want mysql or sqlite", scheme)
}

func parseMySQLURI(uri string) (*sinkTarget, error) {
	u, err := url.Parse(uri)
	if err != nil {
		// url's errors quote the whole URI, password included: never wrap them.
		return nil, badURI(uri, "does not parse as a URL")
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, badURI(uri, "no host: want mysql://user:password@host:port/database")
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return nil, badURI(uri, "no host")
	}
	if port == "" {
		port = "3306"
	}
	db := strings.TrimPrefix(u.Path, "/")
	if strings.Contains(db, "/") {
		return nil, badURI(uri, "the path must be one database name, got %q", db)
	}
	// Parse everything but the user info with the driver's own DSN parser,
	// so every driver parameter is accepted and checked; the user and
	// password are set on the Config afterwards and never pass through a
	// DSN string.
	dsn := "tcp(" + net.JoinHostPort(host, port) + ")/" + db
	if u.RawQuery != "" {
		dsn += "?" + u.RawQuery
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, badURI(uri, "%v", err)
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
	return &sinkTarget{dialect: MySQL, mysql: cfg, redacted: Redact(uri)}, nil
}

func parseSQLiteURI(uri, rest string) (*sinkTarget, error) {
	var path, query string
	switch {
	case strings.HasPrefix(rest, "//"):
		u, err := url.Parse(uri)
		if err != nil {
			return nil, badURI(uri, "does not parse as a URL")
		}
		if u.User != nil {
			return nil, badURI(uri, "sqlite takes no user or password")
		}
		if u.Host != "" {
			return nil, badURI(uri, "want sqlite:///absolute/path.db or sqlite:relative/path.db, not a host (%q)", u.Host)
		}
		path, query = u.Path, u.RawQuery
	default:
		path, query, _ = strings.Cut(rest, "?")
		var err error
		if path, err = url.PathUnescape(path); err != nil {
			return nil, badURI(uri, "bad escape in the path")
		}
	}
	if path == "" || strings.HasSuffix(path, "/") {
		return nil, badURI(uri, "no database file")
	}
	if path == ":memory:" || strings.HasPrefix(path, "/:memory:") {
		return nil, badURI(uri, "an in-memory database would vanish with the sink")
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, badURI(uri, "bad query: %v", err)
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
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
	return &sinkTarget{dialect: SQLite, sqlite: dsn, redacted: uri}, nil
}
