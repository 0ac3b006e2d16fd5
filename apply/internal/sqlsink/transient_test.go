package sqlsink_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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

// cancelAtBegin is a sink whose Begin cancels the run's context a moment
// after it calls the sink's, racing the BEGIN.
type cancelAtBegin struct {
	*sqlsink.SQLSink
	cancel func()
	after  time.Duration
}

func (s cancelAtBegin) Begin(ctx context.Context) (apply.Tx, error) {
	time.AfterFunc(s.after, s.cancel)
	return s.SQLSink.Begin(ctx)
}

// TestSQLiteSinkAfterCancelledRuns: runs cancelled as they begin a
// transaction leave the SQLite sink usable — the next run on it begins
// its transactions and ends where one uninterrupted run would. A BEGIN
// whose context ended as it ran may have begun the transaction and still
// report the cancellation; the session kept it open, and every later BEGIN
// failed "within a transaction" (CI met it through a run that failed as
// split too late).
func TestSQLiteSinkAfterCancelledRuns(t *testing.T) {
	e := newEnv(t, sqlsink.SQLite)
	evs := benchEvents(e.schema, 200)
	ref := newEnv(t, sqlsink.SQLite)
	o := &apply.Options{TxnRows: 20, BatchRows: 8}
	ref.run(evs, o)
	s := e.open(nil)
	rng := rand.New(rand.NewPCG(3, 3))
	for i := range 300 {
		ctx, cancel := context.WithCancel(context.Background())
		_, err := apply.Run(ctx, sliceSource(evs), cancelAtBegin{s, cancel, time.Duration(rng.IntN(60)) * time.Microsecond}, o)
		cancel()
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("run %d, cancelled at a BEGIN: %v; want the cancellation's error", i, err)
		}
	}
	if _, err := apply.Run(context.Background(), sliceSource(evs), s, o); err != nil {
		t.Fatalf("the run after 300 cancelled ones: %v", err)
	}
	tables := []string{"orders", "items", "users", "events"}
	if got, want := e.dumpAll(tables...), ref.dumpAll(tables...); !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("the downstream differs from one uninterrupted run's")
	}
}
