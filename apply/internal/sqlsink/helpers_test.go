package sqlsink_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/sqlsink"
	_ "github.com/redokit/redokit/apply/mysql"
	_ "github.com/redokit/redokit/apply/postgres"
	_ "github.com/redokit/redokit/apply/sqlite"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/codec/codectest"
	"github.com/redokit/redokit/testkit/testenv"
)

// env is one downstream for a test: a fresh SQLite file, or fresh databases
// on the MariaDB server of REDOKIT_MYSQL_DSN.
type env struct {
	t       testing.TB
	dialect sqlsink.Dialect
	schema  string // the schema of the test's events (and of the MySQL progress table)
	uri     string
	admin   *sql.DB // for setup and dumps
}

// mysqlDSN returns REDOKIT_MYSQL_DSN parsed, or skips the test (fails it
// when CI=true).
func mysqlDSN(t testing.TB) *mysql.Config {
	t.Helper()
	dsn := testenv.MySQL(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("REDOKIT_MYSQL_DSN: %v", err)
	}
	return cfg
}

var schemaSeq atomic.Int64

var nonWord = regexp.MustCompile(`[^a-z0-9]+`)

// newEnv makes a fresh downstream of dialect d.
func newEnv(t testing.TB, d sqlsink.Dialect) *env {
	t.Helper()
	e := &env{t: t, dialect: d}
	switch d {
	case sqlsink.SQLite:
		e.schema = "db"
		path := filepath.Join(t.TempDir(), "down.sqlite")
		e.uri = "sqlite://" + path
		db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		e.admin = db
	case sqlsink.Postgres:
		dsn := postgresDSN(t)
		e.schema = testSchemaName(t)
		e.uri = dsn
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if _, err := db.Exec("CREATE SCHEMA " + d.Quote(e.schema)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := db.Exec("DROP SCHEMA IF EXISTS " + d.Quote(e.schema) + " CASCADE"); err != nil {
				t.Errorf("drop test schema: %v", err)
			}
		})
		e.admin = db
	case sqlsink.MySQL:
		cfg := mysqlDSN(t)
		e.schema = testSchemaName(t)
		u := url.URL{Scheme: "mysql", Host: cfg.Addr, Path: "/" + e.schema}
		if cfg.Passwd != "" {
			u.User = url.UserPassword(cfg.User, cfg.Passwd)
		} else {
			u.User = url.User(cfg.User)
		}
		e.uri = u.String()
		acfg := cfg.Clone()
		acfg.DBName = ""
		acfg.MultiStatements = true
		acfg.ParseTime = false // dumps compare the server's text
		if acfg.Params == nil {
			acfg.Params = map[string]string{}
		}
		acfg.Params["time_zone"] = "'+00:00'"
		c, err := mysql.NewConnector(acfg)
		if err != nil {
			t.Fatal(err)
		}
		db := sql.OpenDB(c)
		t.Cleanup(func() { db.Close() })
		if _, err := db.Exec("CREATE DATABASE " + d.Quote(e.schema)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := db.Exec("DROP DATABASE IF EXISTS " + d.Quote(e.schema)); err != nil {
				t.Errorf("drop test database: %v", err)
			}
		})
		e.admin = db
	}
	return e
}

// testSchemaName is a fresh schema name for a test on a shared server.
func testSchemaName(t testing.TB) string {
	name := nonWord.ReplaceAllString(strings.ToLower(t.Name()), "_")
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return fmt.Sprintf("rk%d_%d_%s", os.Getpid()%100000, schemaSeq.Add(1), strings.Trim(name, "_"))
}

// postgresDSN returns REDOKIT_POSTGRES_DSN, or skips the test (fails it when
// CI=true).
func postgresDSN(t testing.TB) string { return testenv.Postgres(t) }

// allDialects are the sinks the shared tests run against.
var allDialects = []sqlsink.Dialect{sqlsink.SQLite, sqlsink.MySQL, sqlsink.Postgres}

// forEachDialect runs f against SQLite, MariaDB and PostgreSQL.
func forEachDialect(t *testing.T, f func(t *testing.T, e *env)) {
	for _, d := range allDialects {
		t.Run(d.String(), func(t *testing.T) { f(t, newEnv(t, d)) })
	}
}

func (e *env) open(opts *apply.SinkOptions) *sqlsink.SQLSink {
	e.t.Helper()
	if e.dialect == sqlsink.Postgres {
		// The tests share one database: each keeps its progress in its
		// own schema.
		var o apply.SinkOptions
		if opts != nil {
			o = *opts
		}
		if o.ProgressSchema == "" {
			o.ProgressSchema = e.schema
		}
		opts = &o
	}
	s, err := apply.Open(context.Background(), e.uri, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { s.Close() })
	return s.(*sqlsink.SQLSink)
}

// table is the downstream name of table name, for the admin connection.
func (e *env) table(name string) string {
	return e.dialect.Table(apply.Table{Schema: e.schema, Name: name})
}

func (e *env) exec(q string, args ...any) {
	e.t.Helper()
	if _, err := e.admin.Exec(q, args...); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
}

// ddl runs a MySQL DDL the way the sink would, for setting up a table
// outside a log.
func (e *env) ddl(q string) {
	e.t.Helper()
	s := e.open(nil)
	if err := s.ApplyDDL(context.Background(), &codec.DDL{Table: codec.TableName{Schema: e.schema}, Query: q}, apply.DDLMark{}); err != nil {
		e.t.Fatal(err)
	}
}

// exists reports whether the table exists downstream.
func (e *env) exists(name string) bool {
	e.t.Helper()
	var n int
	var err error
	if e.dialect == sqlsink.SQLite {
		err = e.admin.QueryRow("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", name).Scan(&n)
	} else {
		q := "SELECT count(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?"
		if e.dialect == sqlsink.Postgres {
			q = "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = $2"
		}
		err = e.admin.QueryRow(q, e.schema, name).Scan(&n)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return n > 0
}

// dump returns the rows of a table, each as its values joined by "|" (NULL
// as "NULL", bytes as text), sorted; nil when the table does not exist.
func (e *env) dump(name string) []string {
	e.t.Helper()
	if !e.exists(name) {
		return nil
	}
	rows, err := e.admin.Query("SELECT * FROM " + e.table(name))
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	types, _ := rows.ColumnTypes()
	var out []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			e.t.Fatal(err)
		}
		parts := make([]string, len(cols))
		for i, v := range vals {
			if v.Valid {
				parts[i] = v.String
				if e.dialect == sqlsink.Postgres && i < len(types) && types[i].DatabaseTypeName() == "FLOAT4" {
					// pgx hands a real over as the float64 it widens
					// to: print it as the float32 it is, as MariaDB does.
					if f, err := strconv.ParseFloat(v.String, 64); err == nil {
						parts[i] = strconv.FormatFloat(f, 'g', -1, 32)
					}
				}
			} else {
				parts[i] = "NULL"
			}
		}
		out = append(out, strings.Join(parts, "|"))
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// dumpImages formats row images of integers, text and NULLs as env.dump
// formats what a table holds, sorted: a model's side of a comparison.
func dumpImages[K comparable](rows map[K][]codec.Column) []string {
	var out []string
	for _, img := range rows {
		parts := make([]string, len(img))
		for i, c := range img {
			switch c.Value.Kind() {
			case codec.KindNull:
				parts[i] = "NULL"
			case codec.KindInt:
				parts[i] = strconv.FormatInt(c.Value.Int(), 10)
			default:
				parts[i] = c.Value.Text()
			}
		}
		out = append(out, strings.Join(parts, "|"))
	}
	slices.Sort(out)
	return out
}

// dumpAll dumps the given tables.
func (e *env) dumpAll(tables ...string) map[string][]string {
	m := map[string][]string{}
	for _, t := range tables {
		m[t] = e.dump(t)
	}
	return m
}

// progressRows returns the progress table's rows.
func (e *env) progress() apply.Progress {
	e.t.Helper()
	p, err := e.open(nil).Progress(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// sliceSource is apply.SliceSource over the tests' event pointers.
func sliceSource(events []*codec.Event) apply.Source {
	evs := make([]codec.Event, len(events))
	for i, ev := range events {
		evs[i] = *ev
	}
	return apply.SliceSource(evs)
}

// run applies events into a fresh sink of e and fails the test on error.
func (e *env) run(events []*codec.Event, opts *apply.Options) *apply.Result {
	e.t.Helper()
	s := e.open(nil)
	res, err := apply.Run(context.Background(), sliceSource(events), s, opts)
	if err != nil {
		e.t.Fatalf("Run: %v", err)
	}
	return res
}

// --- events -------------------------------------------------------------------

func tn(schema, name string) codec.TableName {
	return codec.TableName{Schema: schema, Name: name, PhysicalID: int64(len(name))}
}

func ddlEv(ts uint64, schema, table string, action codec.ActionType, q string) *codec.Event {
	ev := codectest.DDL(ts, tn(schema, table), action, q, codectest.Affected(tn(schema, table)))
	return &ev
}

func rowEv(ts uint64, schema, table string, pre, post []codec.Column) *codec.Event {
	ev := codectest.Update(ts, tn(schema, table), pre, post)
	return &ev
}

const pk = codec.FlagPrimaryKey | codec.FlagHandleKey

func icol(name string, v int64, flags codec.ColumnFlag) codec.Column {
	return codec.Column{Name: name, Type: codec.TypeLonglong, Flags: flags, Value: codec.IntValue(v)}
}

func scol(name, v string) codec.Column {
	return codec.Column{Name: name, Type: codec.TypeVarchar, Flags: codec.FlagNullable, Charset: "utf8mb4", Value: codec.StringValue(v)}
}

func nullCol(name string, t codec.Type) codec.Column {
	return codec.Column{Name: name, Type: t, Flags: codec.FlagNullable}
}

// scanJoined scans the current row as text joined by "|" (NULL as "NULL").
func scanJoined(t testing.TB, rows *sql.Rows) string {
	t.Helper()
	cols, _ := rows.Columns()
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		t.Fatal(err)
	}
	parts := make([]string, len(cols))
	for i, v := range vals {
		parts[i] = "NULL"
		if v.Valid {
			parts[i] = v.String
		}
	}
	return strings.Join(parts, "|")
}

// mysqlDSNOrEmpty returns the address of the test MariaDB, or "".
func mysqlDSNOrEmpty() string {
	cfg, err := mysql.ParseDSN(os.Getenv("REDOKIT_MYSQL_DSN"))
	if os.Getenv("REDOKIT_MYSQL_DSN") == "" || err != nil {
		return ""
	}
	return cfg.Addr
}
