package sqlsink_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/sqlsink"
	"github.com/redokit/redokit/codec"
)

// faultySink wraps a sink and fails chosen calls. Calls are numbered from 1
// across ApplyRows, Commit and ApplyDDL; fault decides, per call, the error
// to return and whether to return it after doing the call (a commit that
// landed but reported a failure) instead of before.
type faultySink struct {
	apply.Sink
	fault func(n int, op string) (err error, after bool)

	mu    sync.Mutex
	calls int
	hits  int
}

func (f *faultySink) check(op string) (error, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	err, after := f.fault(f.calls, op)
	if err != nil {
		f.hits++
	}
	return err, after
}

// MaxOpenTxs passes the wrapped sink's limit on (SQLite's one writer).
func (f *faultySink) MaxOpenTxs() int {
	if l, ok := f.Sink.(apply.TxLimiter); ok {
		return l.MaxOpenTxs()
	}
	return 0
}

func (f *faultySink) Begin(ctx context.Context) (apply.Tx, error) {
	tx, err := f.Sink.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &faultyTx{Tx: tx, f: f}, nil
}

func (f *faultySink) ApplyDDL(ctx context.Context, ddl *codec.DDL, mark apply.DDLMark) error {
	err, after := f.check("ddl")
	if err == nil {
		return f.Sink.ApplyDDL(ctx, ddl, mark)
	}
	if after {
		if derr := f.Sink.ApplyDDL(ctx, ddl, mark); derr != nil {
			return derr
		}
	}
	return err
}

type faultyTx struct {
	apply.Tx
	f *faultySink
}

func (t *faultyTx) ApplyRows(ctx context.Context, table apply.Table, rows []*codec.RowChange) error {
	err, after := t.f.check("rows")
	if err == nil || after {
		if aerr := t.Tx.ApplyRows(ctx, table, rows); aerr != nil {
			return aerr
		}
	}
	return err
}

func (t *faultyTx) Commit(ctx context.Context, marks []apply.Mark) error {
	err, after := t.f.check("commit")
	if err == nil || after {
		if cerr := t.Tx.Commit(ctx, marks); cerr != nil {
			return cerr
		}
	}
	return err
}

var errInjected = errors.New("injected failure")

// cancelAfter is a source that cancels the apply's context after n events.
func cancelAfter(events []*codec.Event, n int, cancel context.CancelFunc) apply.Source {
	return func(yield func(*codec.Event, error) bool) {
		for i, ev := range events {
			if i == n {
				cancel()
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// TestResume interrupts an apply at random points, by cancelling it or by
// failing the sink, once or several times, then runs it to the end: the
// downstream must equal an uninterrupted apply's, with no row lost and none
// doubled (the keyless table t4 would show a doubled insert).
func TestResume(t *testing.T) {
	forEachDialect(t, func(t *testing.T, ref *env) {
		w := newWorkload(3, ref.schema, 200)
		ref.run(w.events, nil)
		want := ref.dumpAll(workloadTables...)
		if d := diff(want, w.want()); d != "" {
			t.Fatalf("uninterrupted apply differs from the model:\n%s", d)
		}
		trials := 12
		if ref.dialect == sqlsink.MySQL {
			trials = 6
		}
		for trial := range trials {
			rng := rand.New(rand.NewPCG(uint64(trial), 11))
			opts := &apply.Options{Workers: 1 + rng.IntN(4), BatchRows: 1 + rng.IntN(20), TxnRows: 1 + rng.IntN(100)}
			t.Run(fmt.Sprint(trial), func(t *testing.T) {
				e := newEnv(t, ref.dialect)
				w := newWorkload(3, e.schema, 200)
				interruptions := 1 + rng.IntN(3)
				var log []string
				for i := range interruptions {
					sink := e.open(nil)
					var res *apply.Result
					var err error
					switch (trial + i) % 3 {
					case 0: // cancel after n events
						n := rng.IntN(len(w.events))
						ctx, cancel := context.WithCancel(context.Background())
						res, err = apply.Run(ctx, cancelAfter(w.events, n, cancel), sink, opts)
						cancel()
						log = append(log, fmt.Sprintf("cancel after %d events", n))
						if err != nil && !errors.Is(err, context.Canceled) {
							t.Fatalf("%v: err = %v, want context.Canceled", log, err)
						}
					default: // fail the sink at call n
						n := 1 + rng.IntN(60)
						f := &faultySink{Sink: sink, fault: func(c int, op string) (error, bool) {
							if c == n {
								return fmt.Errorf("%w in %s %d", errInjected, op, c), false
							}
							return nil, false
						}}
						res, err = apply.Run(context.Background(), sliceSource(w.events), f, opts)
						log = append(log, fmt.Sprintf("fail sink call %d", n))
						if f.hits > 0 && !errors.Is(err, errInjected) || f.hits == 0 && err != nil {
							t.Fatalf("%v: err = %v (%d faults)", log, err, f.hits)
						}
					}
					t.Logf("%s: %+v, %v", log[len(log)-1], res, err)
					// As a process that stops: database/sql rolls a
					// cancelled transaction back in the background, and
					// Close waits for it, so the next run does not meet
					// its lock (SQLITE_BUSY on a loaded machine).
					if err := sink.Close(); err != nil {
						t.Fatalf("%v: close: %v", log, err)
					}
				}
				res := e.run(w.events, opts)
				if d := diff(e.dumpAll(workloadTables...), want); d != "" {
					t.Fatalf("after %s and a full run (%+v):\n%s", strings.Join(log, ", "), res, d)
				}
			})
		}
	})
}

// TestTransientRetry fails sink calls with transient errors, including
// commits that landed but reported failure: one run succeeds, retrying, and
// ends in the uninterrupted state.
func TestTransientRetry(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e *env) {
		w := newWorkload(5, e.schema, 150)
		f := &faultySink{Sink: e.open(nil), fault: func(n int, op string) (error, bool) {
			if n%7 == 3 {
				return apply.Transient(fmt.Errorf("%w in %s %d", errInjected, op, n)), op == "commit" && n%2 == 0
			}
			return nil, false
		}}
		res, err := apply.Run(context.Background(), sliceSource(w.events), f, &apply.Options{Workers: 3, BatchRows: 5, TxnRows: 20, RetryBackoff: 1})
		if err != nil {
			t.Fatal(err)
		}
		if res.Retries == 0 || res.Retries != int64(f.hits) {
			t.Errorf("retries %d, faults %d", res.Retries, f.hits)
		}
		if d := diff(e.dumpAll(workloadTables...), w.want()); d != "" {
			t.Fatalf("after retries:\n%s", d)
		}
	})
}

// TestRetryGivesUp: a transient error that does not pass stops the apply
// after MaxRetries retries.
func TestRetryGivesUp(t *testing.T) {
	e := newEnv(t, sqlsink.SQLite)
	w := newWorkload(5, e.schema, 20)
	f := &faultySink{Sink: e.open(nil), fault: func(n int, op string) (error, bool) {
		if op == "rows" {
			return apply.Transient(errInjected), false
		}
		return nil, false
	}}
	res, err := apply.Run(context.Background(), sliceSource(w.events), f, &apply.Options{MaxRetries: 3, RetryBackoff: 1})
	if !errors.Is(err, errInjected) || !apply.IsTransient(err) {
		t.Fatalf("err = %v", err)
	}
	if res.Retries != 3 || f.hits != 4 {
		t.Errorf("retries %d, attempts %d; want 3 and 4", res.Retries, f.hits)
	}
	if _, err := apply.Run(context.Background(), sliceSource(w.events), f, &apply.Options{MaxRetries: -1}); !errors.Is(err, errInjected) || f.hits != 5 {
		t.Errorf("MaxRetries -1: err = %v after %d attempts", err, f.hits)
	}
}
