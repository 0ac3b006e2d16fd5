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
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/sqlsink"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/testkit/testenv"
)

func TestParseURI(t *testing.T) {
	cfg, redacted, tlsDefault, err := parseURI("postgres://u:p%40ss@db.example:6543/shop?application_name=redo", false)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "u" || cfg.Password != "p@ss" || cfg.Host != "db.example" || cfg.Port != 6543 || cfg.Database != "shop" ||
		cfg.RuntimeParams["application_name"] != "redo" || cfg.RuntimeParams["TimeZone"] != "UTC" ||
		cfg.RuntimeParams["session_replication_role"] != "replica" {
		t.Errorf("parsed user %q host %q port %d database %q params %v", cfg.User, cfg.Host, cfg.Port, cfg.Database, cfg.RuntimeParams)
	}
	if strings.Contains(redacted, "p@ss") || strings.Contains(redacted, "p%40ss") || !strings.Contains(redacted, "db.example:6543/shop") {
		t.Errorf("redacted %q", redacted)
	}
	// No sslmode: TLS with the certificate checked against the host name,
	// and no plaintext fallback (pgx's own default, prefer, has one).
	if !tlsDefault || cfg.TLSConfig == nil || cfg.TLSConfig.InsecureSkipVerify || cfg.TLSConfig.ServerName != "db.example" {
		t.Errorf("default TLS: chosen %v, config %+v", tlsDefault, cfg.TLSConfig)
	}
	for _, fb := range cfg.Fallbacks {
		if fb.TLSConfig == nil || fb.TLSConfig.InsecureSkipVerify {
			t.Errorf("default TLS has a fallback without verified TLS: %+v", fb)
		}
	}
	// The environment does not lower it.
	t.Setenv("PGSSLMODE", "disable")
	cfg, _, _, err = parseURI("postgresql://h/db", false)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLSConfig == nil || cfg.TLSConfig.InsecureSkipVerify || len(cfg.Fallbacks) != 0 {
		t.Errorf("PGSSLMODE=disable lowered the default TLS: %+v, %d fallbacks", cfg.TLSConfig, len(cfg.Fallbacks))
	}

	// The URI's sslmode rules.
	cfg, _, tlsDefault, err = parseURI("postgres://h/db?sslmode=disable", false)
	if err != nil {
		t.Fatal(err)
	}
	if tlsDefault || cfg.TLSConfig != nil || len(cfg.Fallbacks) != 0 {
		t.Errorf("sslmode=disable: chosen %v, config %+v, %d fallbacks", tlsDefault, cfg.TLSConfig, len(cfg.Fallbacks))
	}
	cfg, _, _, err = parseURI("postgres://h/db?sslmode=prefer", false)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLSConfig == nil || len(cfg.Fallbacks) != 1 || cfg.Fallbacks[0].TLSConfig != nil {
		t.Errorf("sslmode=prefer: config %+v, fallbacks %+v", cfg.TLSConfig, cfg.Fallbacks)
	}
	cfg, _, _, err = parseURI("postgres://h/db?sslmode=require", false)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLSConfig == nil || len(cfg.Fallbacks) != 0 {
		t.Errorf("sslmode=require: config %+v, fallbacks %+v", cfg.TLSConfig, cfg.Fallbacks)
	}
	// A Unix socket: no TLS, whatever the default.
	cfg, _, _, err = parseURI("postgres:///db?host=/var/run/postgresql", false)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "/var/run/postgresql" || cfg.TLSConfig != nil {
		t.Errorf("socket: host %q TLS %+v", cfg.Host, cfg.TLSConfig)
	}

	// ForeignKeyChecks: the role is left alone (Open checks it is origin).
	cfg, _, _, err = parseURI("POSTGRES://h/db?sslmode=disable", true)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.RuntimeParams["session_replication_role"]; ok {
		t.Errorf("ForeignKeyChecks sent session_replication_role: %v", cfg.RuntimeParams)
	}
	// The URI's TimeZone wins, in any case, once.
	for _, k := range []string{"TimeZone", "timezone"} {
		cfg, _, _, err = parseURI("postgres://h/db?sslmode=disable&"+k+"=Asia/Tokyo", false)
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.RuntimeParams) != 2 || cfg.RuntimeParams[k] != "Asia/Tokyo" {
			t.Errorf("?%s=Asia/Tokyo: params %v", k, cfg.RuntimeParams)
		}
	}
	for _, uri := range []string{
		"postgres://h/db?session_replication_role=origin",
		"postgres://h/db?Session_Replication_Role=replica",
		"mysql://h/db",
		"postgres:db",
		"postgres://h/db#frag",
	} {
		if _, _, _, err := parseURI(uri, false); !errors.Is(err, apply.ErrBadURI) {
			t.Errorf("%s: got %v, want ErrBadURI", uri, err)
		}
	}
}

// TestNoPasswordInErrors: every refused URI's error, and the name the sink
// goes by, hide the password, wherever the URI holds it.
func TestNoPasswordInErrors(t *testing.T) {
	const pw = "s3cr%65t:/@x" // escaped forms differ from the raw one
	raw, _ := url.PathUnescape(pw)
	for _, uri := range []string{
		"postgres://u:" + pw + "@h:notaport/db",
		"postgres://u:" + pw + "@h:99999/db",
		"postgres://u:" + pw + "@h/db?sslmode=bogus",
		"postgres://u:" + pw + "@h/db?target_session_attrs=bogus",
		"postgres://u:" + pw + "@h/db?connect_timeout=soon",
		"postgres://u:" + pw + "@h/db?sslrootcert=/nonexistent/ca.pem",
		"postgres://u:" + pw + "@[::1/db",
		"postgres://u:" + pw + "@h/db?session_replication_role=origin",
		"postgres://u:" + pw + "@h/db#x",
		"postgres://u@h/db?password=" + url.QueryEscape(raw) + "&sslmode=bogus",
		"postgres://u@h/db?sslpassword=" + url.QueryEscape(raw) + "&sslmode=bogus",
		"postgres://u@h/db?password=" + url.QueryEscape(raw) + "&port=x",
		"postgres://u@h/db?PASSWORD=" + url.QueryEscape(raw) + "&sslmode=bogus", // pgx's redaction misses it
		"mysql://u:" + pw + "@h/db",
	} {
		_, _, _, err := parseURI(uri, false)
		if err == nil {
			t.Errorf("%s: parsed", redact(uri))
			continue
		}
		for _, s := range []string{raw, pw, url.QueryEscape(raw), url.PathEscape(raw), "s3cr"} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("the error shows the password (%q): %v", s, err)
			}
		}
		if !errors.Is(err, apply.ErrBadURI) {
			t.Errorf("%v: not ErrBadURI", err)
		}
	}
	for uri, want := range map[string]string{
		"postgres://u:pw@h/db?password=pw2&x=1":     "postgres://u:xxxxx@h/db?password=xxxxx&x=1",
		"postgres://u@h/db?x=1&SSLPassword=k#f":     "postgres://u@h/db?x=1&SSLPassword=xxxxx#f",
		"postgres://u@h/db?pass%77ord=k":            "postgres://u@h/db?pass%77ord=xxxxx",
		"postgres://u@h/db?application_name=secret": "postgres://u@h/db?application_name=secret",
	} {
		if got := redact(uri); got != want {
			t.Errorf("redact(%q) = %q, want %q", uri, got, want)
		}
	}
}

func TestTransient(t *testing.T) {
	pg := func(code string) error { return fmt.Errorf("apply: statement: %w", &pgconn.PgError{Code: code}) }
	for _, err := range []error{
		pg("40001"), pg("40P01"), pg("08006"), pg("08000"), pg("57P01"), pg("57P02"), pg("57P03"), pg("53300"), pg("55P03"),
		driver.ErrBadConn, io.ErrUnexpectedEOF, fmt.Errorf("read: %w", io.EOF), pgconn.ErrConnClosed,
		&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")},
	} {
		if !transient(err) {
			t.Errorf("%v: not transient", err)
		}
	}
	for _, err := range []error{
		pg("23505"), pg("42P01"), pg("42501"), pg("22P02"), pg("57014"), pg("28P01"), errors.New("some error"),
	} {
		if transient(err) {
			t.Errorf("%v: transient", err)
		}
	}
	// A server error is judged by its code, even inside a network error.
	if transient(&net.OpError{Op: "read", Err: &pgconn.PgError{Code: "23505"}}) {
		t.Error("a unique violation wrapped in a net.Error is transient")
	}
	for _, code := range []string{"42P07", "42701", "42P06", "42710", "42P01", "42703", "42704", "3F000"} {
		if alreadyApplied(pg(code), codec.ActionCreateTable) {
			t.Errorf("%s counted as already applied: PostgreSQL cannot go on in the aborted transaction", code)
		}
	}
	if !sqlState("23505")(pg("23505")) || sqlState("23505")(pg("23503")) || sqlState("42P01")(errors.New("42P01")) {
		t.Error("sqlState")
	}
}

// pgDSN returns REDOKIT_POSTGRES_DSN, or skips the test (fails it when
// CI=true).
func pgDSN(t testing.TB) string { return testenv.Postgres(t) }

var seq atomic.Int64

// server is the test's PostgreSQL: the superuser's URI, an admin database
// handle, and a fresh schema for the progress table, dropped at the end.
type server struct {
	t      *testing.T
	dsn    string
	admin  *sql.DB
	schema string
}

func newServer(t *testing.T) *server {
	dsn := pgDSN(t)
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	s := &server{t: t, dsn: dsn, admin: admin, schema: fmt.Sprintf("rk_pg_%d_%d", os.Getpid(), seq.Add(1))}
	t.Cleanup(func() { s.exec("DROP SCHEMA IF EXISTS " + s.schema + " CASCADE") })
	return s
}

func (s *server) exec(q string, args ...any) {
	s.t.Helper()
	if _, err := s.admin.Exec(q, args...); err != nil {
		s.t.Fatalf("%s: %v", q, err)
	}
}

// uri returns the server's URI for another user (and password) with extra
// params.
func (s *server) uri(user, password, params string) string {
	u, err := url.Parse(s.dsn)
	if err != nil {
		s.t.Fatal(err)
	}
	if user != "" {
		u.User = url.User(user)
		if password != "" {
			u.User = url.UserPassword(user, password)
		}
	}
	if params != "" {
		u.RawQuery += "&" + params
	}
	return u.String()
}

// role makes a login role that is no superuser, dropped at the end.
func (s *server) role(name string) string {
	name = fmt.Sprintf("%s_%d_%d", name, os.Getpid(), seq.Add(1))
	s.exec("CREATE ROLE " + name + " LOGIN")
	// The sink runs CREATE SCHEMA IF NOT EXISTS for its progress table,
	// which PostgreSQL checks this right for even when the schema exists.
	s.exec("GRANT CREATE ON DATABASE " + s.database() + " TO " + name)
	s.t.Cleanup(func() {
		s.exec("DROP OWNED BY " + name + " CASCADE")
		s.exec("DROP ROLE " + name)
	})
	return name
}

func (s *server) database() string {
	u, err := url.Parse(s.dsn)
	if err != nil {
		s.t.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}

func (s *server) open(uri string, opts apply.SinkOptions) (*Sink, error) {
	if opts.ProgressSchema == "" {
		opts.ProgressSchema = s.schema
	}
	sink, err := Open(context.Background(), uri, &opts)
	if err == nil {
		s.t.Cleanup(func() { sink.Close() })
	}
	return sink, err
}

// sessions returns SHOW name on n connections of db held at once, so that
// each answer comes from another connection of the pool.
func sessions(t *testing.T, db *sql.DB, n int, name string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	var conns []*sql.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	pids := map[int]bool{}
	for range n {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		var v string
		var pid int
		if err := c.QueryRowContext(ctx, "SELECT current_setting($1), pg_backend_pid()", name).Scan(&v, &pid); err != nil {
			t.Fatal(err)
		}
		pids[pid] = true
		out = append(out, v)
	}
	if len(pids) != n {
		t.Fatalf("%d connections held, %d backends", n, len(pids))
	}
	return out
}

func TestOpenSession(t *testing.T) {
	s := newServer(t)
	sink, err := s.open(s.dsn, apply.SinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range sessions(t, sink.DB(), 3, "TimeZone") {
		if v != "UTC" {
			t.Errorf("TimeZone %q, want UTC", v)
		}
	}
	for _, v := range sessions(t, sink.DB(), 3, "session_replication_role") {
		if v != "replica" {
			t.Errorf("session_replication_role %q, want replica", v)
		}
	}
	if p, err := sink.Progress(context.Background()); err != nil || len(p.Tables) != 0 || p.DDL != (apply.DDLMark{}) {
		t.Errorf("fresh progress %+v, %v", p, err)
	}

	fk, err := s.open(s.uri("", "", "TimeZone=Asia/Tokyo"), apply.SinkOptions{ForeignKeyChecks: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range sessions(t, fk.DB(), 3, "session_replication_role") {
		if v != "origin" {
			t.Errorf("ForeignKeyChecks: session_replication_role %q, want origin", v)
		}
	}
	if v := sessions(t, fk.DB(), 1, "TimeZone"); v[0] != "Asia/Tokyo" {
		t.Errorf("the URI's TimeZone: %q", v[0])
	}
}

// TestReplicaRole: a role that may not set session_replication_role fails
// Open, naming the option; granted the parameter (PostgreSQL 15), it opens.
func TestReplicaRole(t *testing.T) {
	s := newServer(t)
	role := s.role("rk_plain")
	s.exec("CREATE SCHEMA " + s.schema + " AUTHORIZATION " + role)
	_, err := s.open(s.uri(role, "", ""), apply.SinkOptions{})
	if err == nil {
		t.Fatal("a role without the right to set session_replication_role opened the sink with foreign-key checks off")
	}
	for _, w := range []string{"session_replication_role", "ForeignKeyChecks", role, "42501"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error does not say %q: %v", w, err)
		}
	}
	if _, err := s.open(s.uri(role, "", ""), apply.SinkOptions{ForeignKeyChecks: true}); err != nil {
		t.Errorf("with ForeignKeyChecks: %v", err)
	}
	s.exec("GRANT SET ON PARAMETER session_replication_role TO " + role)
	t.Cleanup(func() { s.exec("REVOKE SET ON PARAMETER session_replication_role FROM " + role) })
	sink, err := s.open(s.uri(role, "", ""), apply.SinkOptions{})
	if err != nil {
		t.Fatalf("granted SET ON PARAMETER: %v", err)
	}
	if v := sessions(t, sink.DB(), 2, "session_replication_role"); v[0] != "replica" || v[1] != "replica" {
		t.Errorf("session_replication_role %v", v)
	}
}

// TestRoleDefault: a role whose default session_replication_role is
// replica would silence the triggers ForeignKeyChecks asks for: refused.
func TestRoleDefault(t *testing.T) {
	s := newServer(t)
	role := s.role("rk_dflt")
	s.exec("CREATE SCHEMA " + s.schema + " AUTHORIZATION " + role)
	s.exec("ALTER ROLE " + role + " SET session_replication_role = replica")
	_, err := s.open(s.uri(role, "", ""), apply.SinkOptions{ForeignKeyChecks: true})
	if err == nil || !strings.Contains(err.Error(), "ForeignKeyChecks") || !strings.Contains(err.Error(), `"replica"`) {
		t.Errorf("ForeignKeyChecks with a replica role default: %v", err)
	}
	// options=-c in the URI is another way around the option.
	_, err = s.open(s.uri("", "", "options=-c%20session_replication_role%3Dreplica"), apply.SinkOptions{ForeignKeyChecks: true})
	if err == nil || !strings.Contains(err.Error(), "ForeignKeyChecks") || !strings.Contains(err.Error(), `"replica"`) {
		t.Errorf("options=-c session_replication_role=replica with ForeignKeyChecks: %v", err)
	}
}

// TestServerErrorsHidePassword: a failed login and a failed connect, with
// the password in the user info or in the params, never show it.
func TestServerErrorsHidePassword(t *testing.T) {
	s := newServer(t)
	// redokit_pw is the role scripts/emulators.sh's pg_hba.conf asks a
	// password of; the role is the server's for its life.
	s.exec(`DO $$ BEGIN
		IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'redokit_pw') THEN CREATE ROLE redokit_pw LOGIN; END IF;
	END $$`)
	s.exec("ALTER ROLE redokit_pw PASSWORD 'the-right-one'")
	const pw = "Wr0ng-s3cret"
	u, err := url.Parse(s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	addr := u.Host
	for _, uri := range []string{
		s.uri("redokit_pw", pw, ""),
		s.uri("redokit_pw", "", "password="+pw),
		"postgres://redokit_pw:" + pw + "@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2",
		"postgres://redokit_pw:" + pw + "@" + addr + "/postgres", // no sslmode: TLS refused
	} {
		_, err := s.open(uri, apply.SinkOptions{})
		if err == nil {
			t.Fatalf("%s: opened", redact(uri))
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("the error shows the password: %v", err)
		}
		t.Logf("%v", err)
	}
	// The right password authenticates (the role then may not set
	// session_replication_role: a later error, still without it).
	_, err = s.open(s.uri("redokit_pw", "the-right-one", ""), apply.SinkOptions{})
	if err == nil || !strings.Contains(err.Error(), "session_replication_role") || strings.Contains(err.Error(), "the-right-one") {
		t.Errorf("the right password: %v", err)
	}
}

// TestTLSRequired: without sslmode the sink refuses a server without TLS
// (the test server has none) rather than go on in plaintext, and says how
// to ask for plaintext.
func TestTLSRequired(t *testing.T) {
	s := newServer(t)
	u, err := url.Parse(s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.RawQuery = ""
	_, err = s.open(u.String(), apply.SinkOptions{})
	if err == nil {
		t.Fatal("opened a plaintext connection although the URI sets no sslmode")
	}
	if !strings.Contains(err.Error(), "sslmode=disable") || !strings.Contains(err.Error(), "refused TLS") {
		t.Errorf("the error: %v", err)
	}
	if _, err := s.open(u.String()+"?sslmode=prefer", apply.SinkOptions{}); err != nil {
		t.Errorf("sslmode=prefer: %v", err)
	}
}

// TestDDLTransaction: the rewrite hook's statements and the DDL's progress
// row are one transaction: all or none.
func TestDDLTransaction(t *testing.T) {
	s := newServer(t)
	sink, err := s.open(s.dsn, apply.SinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ddl := &codec.DDL{CommitTs: 100, Table: codec.TableName{Schema: s.schema, Name: "t"}, Type: codec.ActionCreateTable,
		Query: "CREATE TABLE t (id INT PRIMARY KEY)"}

	// A DDL the translator refuses names itself.
	unsupported := &codec.DDL{CommitTs: 100, Table: codec.TableName{Schema: s.schema, Name: "t"}, Type: codec.ActionCreateTable,
		Query: "CREATE TABLE t (id INT PRIMARY KEY) PARTITION BY HASH (id) PARTITIONS 4"}
	err = sink.ApplyDDL(ctx, unsupported, apply.DDLMark{CommitTs: 100, Count: 1})
	var de *apply.DDLError
	if !errors.Is(err, apply.ErrUnsupportedDDL) || !errors.As(err, &de) || de.Query != unsupported.Query {
		t.Errorf("a DDL the translator cannot run: %v", err)
	}

	var mu sync.Mutex
	stmts := []string{}
	old := rewrite
	rewrite = func(_ context.Context, _ sqlsink.Queryer, _ *codec.DDL) ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		return stmts, nil
	}
	t.Cleanup(func() { rewrite = old })
	exists := func(table string) bool {
		var n int
		if err := s.admin.QueryRow("SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename = $2", s.schema, table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}

	// A failing statement undoes the ones before it and records nothing.
	stmts = []string{`CREATE TABLE "` + s.schema + `".a (id int PRIMARY KEY)`, `CREATE TABLE "` + s.schema + `".b (`}
	err = sink.ApplyDDL(ctx, ddl, apply.DDLMark{CommitTs: 100, Count: 1})
	if !errors.As(err, &de) || de.Ran != stmts[1] {
		t.Errorf("a failing statement: %v", err)
	}
	if exists("a") {
		t.Error("table a outlived the failed DDL's transaction")
	}
	if p, err := sink.Progress(ctx); err != nil || p.DDL != (apply.DDLMark{}) {
		t.Errorf("progress after the failed DDL: %+v, %v", p.DDL, err)
	}

	stmts = stmts[:1]
	if err := sink.ApplyDDL(ctx, ddl, apply.DDLMark{CommitTs: 100, Count: 1}); err != nil {
		t.Fatal(err)
	}
	if !exists("a") {
		t.Error("table a missing")
	}
	if p, err := sink.Progress(ctx); err != nil || p.DDL != (apply.DDLMark{CommitTs: 100, Count: 1}) {
		t.Errorf("progress after the DDL: %+v, %v", p.DDL, err)
	}
}

// The pgx database/sql driver is registered by stdlib's import.
var _ = stdlib.OpenDB

// TestForeignKeys: through Run, a child row whose parent the log writes
// later (another table, so another transaction) goes in with the triggers
// off, and is refused with ForeignKeyChecks — the session setting reaches
// the sink's own writes.
func TestForeignKeys(t *testing.T) {
	s := newServer(t)
	s.exec("CREATE SCHEMA " + s.schema)
	s.exec("CREATE TABLE " + s.schema + ".parent (id bigint PRIMARY KEY)")
	s.exec("CREATE TABLE " + s.schema + ".child (id bigint PRIMARY KEY, parent_id bigint REFERENCES " + s.schema + ".parent (id))")
	const pk = codec.FlagPrimaryKey | codec.FlagHandleKey
	col := func(name string, v int64, flags codec.ColumnFlag) codec.Column {
		return codec.Column{Name: name, Type: codec.TypeLonglong, Flags: flags, Value: codec.IntValue(v)}
	}
	row := func(ts uint64, table string, cols ...codec.Column) codec.Event {
		return codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{StartTs: ts - 1, CommitTs: ts,
			Table: codec.TableName{Schema: s.schema, Name: table}, Columns: cols}}
	}
	events := []codec.Event{
		row(10, "child", col("id", 1, pk), col("parent_id", 7, codec.FlagNullable)),
		row(20, "parent", col("id", 7, pk)),
	}
	count := func() (n int) {
		if err := s.admin.QueryRow("SELECT count(*) FROM " + s.schema + ".child").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	fk, err := s.open(s.dsn, apply.SinkOptions{ForeignKeyChecks: true, ProgressTable: "with_fk"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = apply.Run(context.Background(), apply.SliceSource(events), fk, &apply.Options{Workers: 1, TxnRows: 1, BatchRows: 1})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23503" {
		t.Errorf("ForeignKeyChecks: a child before its parent: %v, want a foreign_key_violation", err)
	}
	if n := count(); n != 0 {
		t.Errorf("ForeignKeyChecks: %d child rows", n)
	}

	sink, err := s.open(s.dsn, apply.SinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := apply.Run(context.Background(), apply.SliceSource(events), sink, &apply.Options{Workers: 1, TxnRows: 1, BatchRows: 1}); err != nil {
		t.Fatalf("foreign-key triggers off: %v", err)
	}
	if n := count(); n != 1 {
		t.Errorf("%d child rows, want 1", n)
	}
}
