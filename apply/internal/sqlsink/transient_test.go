package sqlsink_test

import (
	"context"
	"database/sql"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/sqlsink"
	"github.com/redokit/redokit/codec"
)

// onWarn is a slog handler that calls f for each warning: the tests use the
// retry warning as the moment to release a lock they hold, so that the first
// attempt fails for real and the retry succeeds, with no timing involved.
type onWarn struct{ f func(msg string) }

func (h onWarn) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h onWarn) Handle(_ context.Context, r slog.Record) error {
	h.f(r.Message)
	return nil
}
func (h onWarn) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h onWarn) WithGroup(string) slog.Handler      { return h }

// lockHolder holds a lock in a transaction of its own until released.
type lockHolder struct {
	once sync.Once
	tx   *sql.Tx
	conn *sql.Conn
	q    string // what releases it, on conn
	err  error
}

func (l *lockHolder) release() {
	l.once.Do(func() {
		if l.tx != nil {
			l.err = l.tx.Commit()
		} else {
			_, l.err = l.conn.ExecContext(context.Background(), l.q)
		}
	})
}

// TestRealTransientErrors: a busy SQLite database and a MariaDB lock wait
// timeout are retried.
func TestRealTransientErrors(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		var sink *sqlsink.SQLSink
		var h lockHolder
		var events []*codec.Event
		row := rowEv(20, e.schema, "a", nil, []codec.Column{icol("id", 1, pk), scol("v", "applied")})
		switch e.dialect {
		case sqlsink.SQLite:
			// No busy wait: the lock fails the first BEGIN at once.
			u := e.uri + "?_pragma=busy_timeout(0)"
			s, err := apply.Open(ctx, u, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			sink = s.(*sqlsink.SQLSink)
			conn, err := e.admin.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
				t.Fatal(err)
			}
			h.conn, h.q = conn, "COMMIT"
			events = []*codec.Event{ddlEv(10, e.schema, "a", codec.ActionCreateTable, "CREATE TABLE a (id BIGINT PRIMARY KEY, v VARCHAR(20))"), row}
		case sqlsink.MySQL, sqlsink.Postgres:
			// A short lock wait, so that the held row lock fails the
			// apply's statement (transient) rather than waiting it out.
			uri, opts := e.uri+"?innodb_lock_wait_timeout=1", (*apply.SinkOptions)(nil)
			if e.dialect == sqlsink.Postgres {
				uri, opts = e.uri+"&lock_timeout=1000", &apply.SinkOptions{ProgressSchema: e.schema}
			}
			s, err := apply.Open(ctx, uri, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			sink = s.(*sqlsink.SQLSink)
			e.ddl("CREATE TABLE a (id BIGINT PRIMARY KEY, v VARCHAR(20))")
			e.exec("INSERT INTO " + e.table("a") + " VALUES (1, 'before')")
			tx, err := e.admin.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if _, err := tx.Exec("SELECT * FROM " + e.table("a") + " WHERE id = 1 FOR UPDATE"); err != nil {
				t.Fatal(err)
			}
			h.tx = tx
			events = []*codec.Event{row}
		default:
			t.Fatalf("no lock holder for %v", e.dialect)
		}
		var warnings []string
		logger := slog.New(onWarn{func(msg string) {
			warnings = append(warnings, msg)
			h.release()
		}})
		res, err := apply.Run(ctx, sliceSource(events), sink, &apply.Options{Logger: logger, RetryBackoff: 1})
		h.release()
		if err != nil || h.err != nil {
			t.Fatalf("Run: %v (release: %v)", err, h.err)
		}
		if res.Retries != 1 || len(warnings) != 1 || !strings.Contains(warnings[0], "retrying") {
			t.Errorf("retries %d, warnings %q", res.Retries, warnings)
		}
		if got := e.dump("a"); !slices.Equal(got, []string{"1|applied"}) {
			t.Errorf("a = %q", got)
		}
	})
}
