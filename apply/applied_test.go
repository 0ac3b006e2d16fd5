package apply

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redokit/redokit/codec"
)

// progSink records the marks it commits, starts from a given progress, and
// fails the DDL whose query is "FAIL".
type progSink struct {
	recSink
	start Progress
	mu    sync.Mutex
	marks map[Table]uint64
	ddl   DDLMark
}

func (s *progSink) Progress(context.Context) (Progress, error) {
	return Progress{Tables: maps.Clone(s.start.Tables), DDL: s.start.DDL}, nil
}

func (s *progSink) Begin(context.Context) (Tx, error) { return &progTx{s: s}, nil }

func (s *progSink) ApplyDDL(_ context.Context, d *codec.DDL, m DDLMark) error {
	if d.Query == "FAIL" {
		return errors.New("refused")
	}
	s.ddl = m
	return nil
}

type progTx struct{ s *progSink }

func (t *progTx) ApplyRows(context.Context, Table, []*codec.RowChange) error { return nil }
func (t *progTx) Rollback() error                                            { return nil }
func (t *progTx) Commit(_ context.Context, marks []Mark) error {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	for _, m := range marks {
		t.s.marks[m.Table] = m.CommitTs
	}
	return nil
}

// TestResultApplied: after an error, Result.Applied and AppliedDDL are the
// progress the sink holds — what it had at the start, raised by every
// commit.
func TestResultApplied(t *testing.T) {
	start := Progress{Tables: map[Table]uint64{{"s", "old"}: 5, {"s", "a"}: 8}, DDL: DDLMark{CommitTs: 7, Count: 1}}
	s := &progSink{start: start, marks: maps.Clone(start.Tables), ddl: start.DDL}
	var events []codec.Event
	for ts := uint64(10); ts < 200; ts++ {
		events = append(events, rowAt(ts, "s", "a"), rowAt(ts, "s", "b"), rowAt(ts, "s", "c"))
		if ts == 100 {
			events = append(events, ddlAt(ts, "s", "a", codec.ActionAddColumn, "ALTER TABLE a ADD c INT"))
		}
	}
	events = append(events, rowAt(200, "s", "a"), ddlAt(201, "s", "a", codec.ActionAddColumn, "FAIL"), rowAt(202, "s", "a"))
	res, err := Run(context.Background(), SliceSource(events), s, &Options{Workers: 3, BatchRows: 2, TxnRows: 5})
	if err == nil || err.Error() != "refused" {
		t.Fatalf("err = %v", err)
	}
	if !maps.Equal(res.Applied, s.marks) || res.AppliedDDL != s.ddl {
		t.Errorf("Applied %v %+v, the sink holds %v %+v", res.Applied, res.AppliedDDL, s.marks, s.ddl)
	}
	if want := (map[Table]uint64{{"s", "old"}: 5, {"s", "a"}: 200, {"s", "b"}: 199, {"s", "c"}: 199}); !maps.Equal(res.Applied, want) {
		t.Errorf("Applied %v, want %v", res.Applied, want)
	}
	if want := (DDLMark{CommitTs: 100, Count: 1}); res.AppliedDDL != want {
		t.Errorf("AppliedDDL %+v, want %+v", res.AppliedDDL, want)
	}
	// Run must not hand out the sink's own map: it reads it again later.
	if start.Tables[Table{"s", "a"}] != 8 {
		t.Errorf("the progress read was modified")
	}
}

// badConnSink's ApplyRows cancels the caller's context on the nth call and
// fails as pgx does when a cancelled query's connection is closed under it.
type badConnSink struct {
	progSink
	cancel context.CancelFunc
	calls  int
	n      int
	// after, when set, is what the failing call waits for once it
	// cancelled: the source's end, so Run's loop sees the cancellation
	// first.
	after <-chan struct{}
}

func (s *badConnSink) Begin(context.Context) (Tx, error) {
	return &badConnTx{progTx{&s.progSink}, s}, nil
}

type badConnTx struct {
	progTx
	s *badConnSink
}

func (t *badConnTx) ApplyRows(context.Context, Table, []*codec.RowChange) error {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if t.s.calls++; t.s.calls == t.s.n {
		t.s.cancel()
		if t.s.after != nil {
			select {
			case <-t.s.after:
			case <-time.After(10 * time.Second):
				return errors.New("the source was still pulled 10 s after the cancellation")
			}
		}
		return errors.New("driver: bad connection")
	}
	return nil
}

// TestCancelIsTheCause: an error the caller's cancellation provoked is
// reported as the cancellation (errors.Is context.Canceled), with the
// sink's error beside it.
func TestCancelIsTheCause(t *testing.T) {
	// Either may come first: the worker's error, or Run's loop seeing the
	// cancellation (a sink that fails only once the loop stopped pulling
	// the source makes it the loop).
	for _, waits := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		s := &badConnSink{progSink: progSink{marks: map[Table]uint64{}}, cancel: cancel, n: 3}
		var events []codec.Event
		for ts := uint64(10); ts < 100; ts++ {
			events = append(events, rowAt(ts, "s", "a"))
		}
		pulled := make(chan struct{})
		if waits {
			s.after = pulled
		}
		src := func(yield func(*codec.Event, error) bool) {
			defer close(pulled)
			for i := range events {
				if !yield(&events[i], nil) {
					return
				}
			}
		}
		_, err := Run(ctx, src, s, &Options{Workers: 1, BatchRows: 2, TxnRows: 5})
		cancel()
		if !errors.Is(err, context.Canceled) || !strings.Contains(fmt.Sprint(err), "bad connection") {
			t.Fatalf("sink waits for the source's end %v: err = %v, want context.Canceled with the sink's error", waits, err)
		}
	}
}
