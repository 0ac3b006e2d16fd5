package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/pgddl"
	"github.com/redokit/redokit/apply/internal/sqlsink"
	"github.com/redokit/redokit/codec"
)

// Sink is the PostgreSQL sink. Besides apply.Sink and apply.TxLimiter (no
// limit) it has DB() *sql.DB, the database it writes.
type Sink = sqlsink.SQLSink

// Schemes are the URI schemes this package registers with apply.Open.
var Schemes = []string{"postgres", "postgresql"}

func init() {
	sqlsink.Register(sqlsink.Postgres, &sqlsink.Driver{
		Transient:      transient,
		AlreadyApplied: alreadyApplied,
		DuplicateKey:   sqlState("23505"), // unique_violation
		NoSuchTable:    sqlState("42P01"), // undefined_table
		CopyFrom:       copyFrom,
		// Through a function, not the variable's value at init: the
		// translator may be set after this init runs.
		Rewrite: func(ctx context.Context, q sqlsink.Queryer, ddl *codec.DDL) ([]string, error) {
			return rewrite(ctx, q, ddl)
		},
	}, Schemes, Open)
}

// rewrite translates a logged MySQL DDL into PostgreSQL statements, reading
// the catalog in the DDL's transaction where a translation needs it
// (renames carry their indexes along). A variable, so a test can put
// statements of its own in its place.
var rewrite = func(ctx context.Context, q sqlsink.Queryer, ddl *codec.DDL) ([]string, error) {
	return pgddl.RewriteWith(ctx, q, ddl)
}

// Open opens the sink a URI names:
//
//	postgres://user:password@host[:port]/database[?param=value&...]
//
// (postgresql:// too). The params are libpq's connection parameters as
// github.com/jackc/pgx/v5 reads them, or session parameters. The sink
// requires verified TLS unless the URI sets sslmode, sets the session's
// TimeZone to UTC unless the URI sets it, and turns foreign-key triggers off
// (session_replication_role=replica) unless opts.ForeignKeyChecks. Open
// connects, and creates the progress table if it is missing. Errors never
// show the password.
func Open(ctx context.Context, uri string, opts *apply.SinkOptions) (*Sink, error) {
	var o apply.SinkOptions
	if opts != nil {
		o = *opts
	}
	cfg, redacted, tlsDefault, err := parseURI(uri, o.ForeignKeyChecks)
	if err != nil {
		return nil, err
	}
	db := stdlib.OpenDB(*cfg)
	if err := checkSession(ctx, db, cfg, redacted, tlsDefault, o.ForeignKeyChecks); err != nil {
		db.Close()
		return nil, err
	}
	s, err := sqlsink.New(ctx, db, sqlsink.Postgres, &o, redacted, true)
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// New makes a PostgreSQL sink over a database the caller opened (with
// pgx's database/sql driver) and closes. Open it with the session settings
// Open sets: TimeZone=UTC (the zone producers write TIMESTAMP values in),
// and session_replication_role=replica unless the downstream's foreign-key
// triggers are to fire. New creates the progress table if it is missing.
func New(ctx context.Context, db *sql.DB, opts *apply.SinkOptions) (*Sink, error) {
	return sqlsink.New(ctx, db, sqlsink.Postgres, opts, "", false)
}

// secretParams are the URI parameters that carry secrets: never shown.
var secretParams = []string{"password", "sslpassword"}

// parseURI turns a postgres:// URI into a pgx connection config, the URI
// safe to print, and whether the sink chose the URI's TLS mode (the URI set
// no sslmode).
func parseURI(uri string, fkChecks bool) (*pgx.ConnConfig, string, bool, error) {
	redacted := redact(uri)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("apply: %w %q: %s", apply.ErrBadURI, redacted, fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(uri)
	if err != nil {
		// url's errors quote the whole URI, password included: never wrap them.
		return nil, "", false, bad("does not parse as a URL")
	}
	if s := strings.ToLower(u.Scheme); s != "postgres" && s != "postgresql" {
		return nil, "", false, bad("want postgres:// or postgresql://")
	}
	if u.Opaque != "" {
		return nil, "", false, bad("want postgres://user:password@host:port/database")
	}
	if u.Fragment != "" {
		return nil, "", false, bad("a URI fragment (#...) means nothing here")
	}
	q := u.Query()
	for k := range q {
		switch strings.ToLower(k) {
		case "session_replication_role":
			// The option is the one switch: a URI that set the role too
			// could contradict it.
			return nil, "", false, bad("session_replication_role is the sink's to set: keep foreign-key checks on with apply.SinkOptions.ForeignKeyChecks")
		}
	}
	// pgx, like libpq, defaults to sslmode=prefer: TLS without checking
	// the server's certificate, and plaintext when the server offers no
	// TLS, both silently. A downstream reached over a network gets the
	// whole log's data and the password, so without an sslmode of its own
	// the URI gets verify-full (TLS, the certificate checked against the
	// system's roots and the host name). PGSSLMODE is not read for this:
	// what the URI says is what the sink does. A Unix socket never uses TLS.
	connString := uri
	tlsDefault := !q.Has("sslmode") && !q.Has("ssl")
	if tlsDefault {
		sep := "?"
		if strings.Contains(connString, "?") {
			sep = "&"
		}
		connString += sep + "sslmode=verify-full"
	}
	// pgx wants the scheme in lower case to take the string as a URI.
	connString = strings.ToLower(u.Scheme) + connString[len(u.Scheme):]
	cfg, err := pgx.ParseConfig(connString)
	if err != nil {
		return nil, "", false, bad("%s", parseError(err))
	}
	setParam := func(name, value string) {
		for k := range cfg.RuntimeParams {
			if strings.EqualFold(k, name) {
				return
			}
		}
		cfg.RuntimeParams[name] = value
	}
	// TIMESTAMP values in a redo log carry no zone; producers write UTC
	// (see codec.TimestampValue). Override with ?TimeZone=...
	setParam("TimeZone", "UTC")
	if !fkChecks {
		// As replication tools do: the log holds every change the
		// upstream's own cascades made; see apply.SinkOptions.ForeignKeyChecks.
		cfg.RuntimeParams["session_replication_role"] = "replica"
	}
	return cfg, redacted, tlsDefault, nil
}

// parseError is the text of a pgx parse error without the connection
// string: pgx masks the passwords it recognises there, but not a param it
// does not take for one (PASSWORD=, a runtime parameter to pgx), which
// redact masks too. The rest of pgx's message quotes no password: pgx
// builds it so.
func parseError(err error) string {
	msg := err.Error()
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		if rest, ok := strings.CutPrefix(msg, "cannot parse `"); ok {
			// The last "`: " is at or past the string's end, whatever it holds.
			if i := strings.LastIndex(rest, "`: "); i >= 0 {
				return rest[i+3:]
			}
			return "does not parse"
		}
	}
	return msg
}

func isSecretParam(k string) bool {
	if uk, err := url.QueryUnescape(k); err == nil {
		k = uk
	}
	for _, s := range secretParams {
		if strings.EqualFold(k, s) {
			return true
		}
	}
	return false
}

// redact is apply.Redact, and masks the password and sslpassword
// parameters too (pgx takes a password from the query).
func redact(uri string) string {
	r := apply.Redact(uri)
	head, query, ok := strings.Cut(r, "?")
	if !ok {
		return r
	}
	query, frag, hasFrag := strings.Cut(query, "#")
	parts := strings.Split(query, "&")
	for i, p := range parts {
		if k, _, _ := strings.Cut(p, "="); isSecretParam(k) {
			parts[i] = k + "=xxxxx"
		}
	}
	r = head + "?" + strings.Join(parts, "&")
	if hasFrag {
		r += "#" + frag
	}
	return r
}

// checkSession connects once and checks that the session is what the sink
// asked for: a server or a role setting may override a startup parameter
// (ALTER ROLE … SET), and options=-c … in the URI may too.
func checkSession(ctx context.Context, db *sql.DB, cfg *pgx.ConnConfig, redacted string, tlsDefault, fkChecks bool) error {
	want := "replica"
	if fkChecks {
		want = "origin"
	}
	var role string
	err := db.QueryRowContext(ctx, "SHOW session_replication_role").Scan(&role)
	if err == nil && role != want {
		if fkChecks {
			return fmt.Errorf("apply: %s: the session's session_replication_role is %q (a role or database setting?), not origin: "+
				"foreign-key triggers would not fire although apply.SinkOptions.ForeignKeyChecks asks for them", redacted, role)
		}
		return fmt.Errorf("apply: %s: the session's session_replication_role is %q, not replica: foreign-key triggers would fire "+
			"(keep them on knowingly with apply.SinkOptions.ForeignKeyChecks)", redacted, role)
	}
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if !fkChecks && errors.As(err, &pe) && pe.Code == "42501" && strings.Contains(pe.Message, "session_replication_role") {
		return fmt.Errorf("apply: connect to %s: role %q may not set session_replication_role=replica, which the sink sets "+
			"to turn the downstream's foreign-key triggers off during the apply: it takes a superuser, or on PostgreSQL 15 and "+
			"later GRANT SET ON PARAMETER session_replication_role TO %s; or keep the checks on with "+
			"apply.SinkOptions.ForeignKeyChecks: %w", redacted, cfg.User, sqlsink.Postgres.Quote(cfg.User), err)
	}
	if tlsDefault && looksTLS(err) {
		return fmt.Errorf("apply: connect to %s: %w (the sink requires TLS with a verified certificate unless the URI sets "+
			"sslmode: sslmode=require for TLS without the check, sslmode=disable for none)", redacted, err)
	}
	return fmt.Errorf("apply: connect to %s: %w", redacted, err)
}

func looksTLS(err error) bool {
	s := err.Error()
	for _, w := range []string{"TLS", "tls:", "x509", "certificate"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// transient reports errors worth retrying. A server error is decided by its
// SQLSTATE alone; anything else by whether the connection failed.
func transient(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40001", // serialization_failure
			"40P01", // deadlock_detected
			"57P01", // admin_shutdown
			"57P02", // crash_shutdown
			"57P03", // cannot_connect_now (starting up, recovering)
			"53300", // too_many_connections
			"55P03": // lock_not_available (lock_timeout)
			return true
		}
		return strings.HasPrefix(pe.Code, "08") // connection_exception
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, pgconn.ErrConnClosed) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// copyFrom runs a COPY … FROM STDIN on the pgx connection under the
// database/sql one, in the transaction open on it.
func copyFrom(ctx context.Context, conn any, query string, data io.Reader) (int64, error) {
	c, ok := conn.(*stdlib.Conn)
	if !ok {
		return 0, fmt.Errorf("apply: COPY: the connection is a %T, not pgx's", conn)
	}
	// pgx reads data on a goroutine of its own, and after some errors (the
	// connection lost while the server answers) returns without waiting
	// for it: the caller, which then reuses the rows' buffer for its next
	// try, would write it while that goroutine may still read it (the race
	// detector caught it in the differential fuzzer, seed 935803717).
	src := &detachable{r: data}
	defer src.detach()
	tag, err := c.Conn().PgConn().CopyFrom(ctx, src, query)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// errDetached is what a COPY's source reads once its COPY has returned.
var errDetached = errors.New("apply: COPY: the statement already returned")

// detachable is a reader whose reads all end before detach returns, and
// fail after it: whatever still reads it cannot see its buffer change.
type detachable struct {
	mu       sync.Mutex
	r        io.Reader
	detached bool
}

func (d *detachable) Read(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.detached {
		return 0, errDetached
	}
	return d.r.Read(p)
}

func (d *detachable) detach() {
	d.mu.Lock()
	d.detached = true
	d.mu.Unlock()
}

// sqlState returns a test for server errors of one SQLSTATE.
func sqlState(code string) func(error) bool {
	return func(err error) bool {
		var pe *pgconn.PgError
		return errors.As(err, &pe) && pe.Code == code
	}
}

// alreadyApplied is never true. PostgreSQL aborts the whole transaction at
// an error, and a DDL runs in one transaction with its progress row, so the
// sink cannot go on past a failed statement (it tolerates errors for SQLite
// alone). The translator makes the statements idempotent instead, with IF
// [NOT] EXISTS, where the effect being there already is certain: a 42P07
// duplicate_table or 42703 undefined_column reaching the sink means the
// downstream is not what the log says, which is an error.
func alreadyApplied(error, codec.ActionType) bool { return false }
