package apply

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redokit/redokit/codec"
)

// oneWriter is a sink with one transaction open at a time, as SQLite is.
type oneWriter struct{ orderSink }

func (*oneWriter) MaxOpenTxs() int { return 1 }

// scopedOrder is an orderSink that scopes each DDL to its table.
type scopedOrder struct{ orderSink }

func (*scopedOrder) DDLTables(_ context.Context, d *codec.DDL) ([]Table, bool, error) {
	return []Table{TableOf(d.Table)}, true, nil
}

// eventScopedWriter is one writer that scopes each DDL to its table from
// the event alone (EventDDLScoper), as SQLite's sink does: by name, in
// every schema.
type eventScopedWriter struct{ orderSink }

func (*eventScopedWriter) MaxOpenTxs() int { return 1 }

func (*eventScopedWriter) DDLTables(_ context.Context, d *codec.DDL) ([]Table, bool, error) {
	return []Table{{Name: d.Table.Name}}, true, nil
}

func (*eventScopedWriter) ScopesFromEvent() bool { return true }

// orderSink checks, as Run drives it, the order a DDL imposes: when a
// DDL starts, every row of its tables before it in the log is committed;
// no row of its tables after it is applied before it ended; DDLs run one
// at a time, in the log's order. Scoped or not, the tables a DDL touches are
// its own table (scopedOrder) or every table.
type orderSink struct {
	scoped bool
	log    []codec.Event
	// hold, when set, is called inside ApplyDDL.
	hold func(d *codec.DDL) error

	// applied, when not nil, gets a value (if it has room) at every
	// ApplyRows: a hold can wait for another worker to write meanwhile.
	applied chan struct{}

	mu        sync.Mutex
	committed map[Table]uint64 // highest commit ts committed per table
	ddlsDone  int              // DDLs of the log that ended
	inDDL     bool
	errs      []error
}

// newOrderSink returns an orderSink over log: kind 0 a oneWriter, 1 a
// scopedOrder, 2 an eventScopedWriter, 3 none of them.
func newOrderSink(kind int, log []codec.Event) (Sink, *orderSink) {
	switch kind {
	case 0:
		w := &oneWriter{}
		w.log, w.committed = log, map[Table]uint64{}
		return w, &w.orderSink
	case 1:
		w := &scopedOrder{}
		w.log, w.committed, w.scoped = log, map[Table]uint64{}, true
		return w, &w.orderSink
	case 2:
		w := &eventScopedWriter{}
		w.log, w.committed, w.scoped = log, map[Table]uint64{}, true
		return w, &w.orderSink
	}
	s := &orderSink{log: log, committed: map[Table]uint64{}}
	return s, s
}

func (s *orderSink) failf(format string, args ...any) {
	s.errs = append(s.errs, fmt.Errorf(format, args...))
}

func (s *orderSink) touched(d *codec.DDL, t Table) bool {
	return !s.scoped || touches([]Table{TableOf(d.Table)}, t)
}

// ddls returns the log's DDLs, in order.
func (s *orderSink) ddls() []*codec.DDL {
	var out []*codec.DDL
	for i := range s.log {
		if s.log[i].Kind == codec.DDLEvent {
			out = append(out, &s.log[i].DDL)
		}
	}
	return out
}

func (s *orderSink) Progress(context.Context) (Progress, error) { return Progress{}, nil }

func (s *orderSink) Close() error { return nil }

func (s *orderSink) Begin(context.Context) (Tx, error) { return &orderTx{s: s}, nil }

func (s *orderSink) ApplyDDL(_ context.Context, d *codec.DDL, _ DDLMark) error {
	s.mu.Lock()
	if s.inDDL {
		s.failf("DDL at %d started while another ran", d.CommitTs)
	}
	s.inDDL = true
	ddls := s.ddls()
	if s.ddlsDone >= len(ddls) || ddls[s.ddlsDone].CommitTs != d.CommitTs {
		s.failf("DDL at %d ran after %d DDLs of the log, out of order", d.CommitTs, s.ddlsDone)
	}
	for _, ev := range s.log {
		if ev.Kind == codec.RowEvent && ev.Row.CommitTs < d.CommitTs {
			t := TableOf(ev.Row.Table)
			if s.touched(d, t) && s.committed[t] < ev.Row.CommitTs {
				s.failf("DDL at %d started before the row of %s at %d committed", d.CommitTs, t, ev.Row.CommitTs)
			}
		}
	}
	s.mu.Unlock()
	var err error
	if s.hold != nil {
		err = s.hold(d)
	}
	s.mu.Lock()
	s.inDDL = false
	s.ddlsDone++
	s.mu.Unlock()
	return err
}

// orderTx is a transaction of an orderSink. Its snapshot is taken at its
// first statement, as MariaDB's is: began is how many DDLs had ended then.
type orderTx struct {
	s       *orderSink
	started bool
	began   int
}

func (t *orderTx) ApplyRows(_ context.Context, table Table, rows []*codec.RowChange) error {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if !t.started {
		t.started, t.began = true, s.ddlsDone
	}
	if s.applied != nil {
		select {
		case s.applied <- struct{}{}:
		default:
		}
	}
	ddls := s.ddls()
	for _, r := range rows {
		for i, d := range ddls {
			if d.CommitTs < r.CommitTs && s.touched(d, table) && i >= s.ddlsDone {
				s.failf("row of %s at %d applied before the DDL at %d ended", table, r.CommitTs, d.CommitTs)
			}
		}
	}
	// MariaDB refuses a transaction whose snapshot predates a DDL of a
	// table to write that table (error 159): no DDL of this table may have
	// ended since the transaction's first statement.
	for i := t.began; i < s.ddlsDone; i++ {
		if d := ddls[i]; s.touched(d, table) {
			s.failf("a transaction begun before the DDL at %d ended wrote %s after it (MariaDB's error 159)", d.CommitTs, table)
		}
	}
	return nil
}

func (t *orderTx) Commit(_ context.Context, marks []Mark) error {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range marks {
		s.committed[m.Table] = max(s.committed[m.Table], m.CommitTs)
	}
	return nil
}

func (t *orderTx) Rollback() error { return nil }

// orderLog is a random log over a few tables: transactions of rows of one
// or two tables, and now and then a DDL of one table.
func orderLog(rng *rand.Rand, n int) []codec.Event {
	var evs []codec.Event
	ts := uint64(10)
	for range n {
		ts++
		if rng.IntN(8) == 0 {
			name := fmt.Sprint("t", rng.IntN(6))
			evs = append(evs, ddlAt(ts, "s", name, codec.ActionAddColumn, "ALTER TABLE "+name+" ADD c INT"))
			continue
		}
		for range 1 + rng.IntN(2) {
			evs = append(evs, rowAt(ts, "s", fmt.Sprint("t", rng.IntN(6))))
		}
	}
	return evs
}

// TestDDLOrderHolds: on random logs, with DDLs scoped to a table and not
// (and scoped from the event with one worker), over one worker and several,
// small batches and large, the DDLs Run hands
// to its workers keep the order the log gives: a DDL starts after every
// earlier row of its tables committed, runs alone and in order, and no
// later row of its tables is applied before it ended. The DDLs take a
// while, so the loop reads on while they run.
func TestDDLOrderHolds(t *testing.T) {
	for trial := range 60 {
		rng := rand.New(rand.NewPCG(uint64(trial), 7))
		log := orderLog(rng, 300)
		o := &Options{Workers: 1 + trial%4, BatchRows: 1 + rng.IntN(8), TxnRows: 1 + rng.IntN(20)}
		sink, s := newOrderSink(trial%4, log)
		s.hold = func(*codec.DDL) error {
			// The DDL takes a while (other goroutines run), so the loop
			// reads on meanwhile.
			for range rng.IntN(64) {
				runtime.Gosched()
			}
			return nil
		}
		res, err := Run(context.Background(), SliceSource(log), sink, o)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if err := errors.Join(s.errs...); err != nil {
			t.Fatalf("trial %d (%T, %+v): %v", trial, sink, *o, err)
		}
		if want := len(s.ddls()); int(res.DDLs) != want || s.ddlsDone != want {
			t.Fatalf("trial %d: %d DDLs counted, %d ran, want %d", trial, res.DDLs, s.ddlsDone, want)
		}
	}
}

// TestTransactionBegunDuringDDLIsFenced: a worker that holds no
// transaction when a DDL is handed out may begin one (of other tables)
// while the DDL runs, and keep it open. Once the loop has seen the DDL run,
// the DDL's tables go to any worker again, that one too: it must commit
// before it writes one of them, or MariaDB refuses the write (error 159:
// the transaction's snapshot predates the table's DDL). The fences the
// loop sends when it sees a DDL ran are what makes it commit; fences sent
// when the DDL is handed out reach only the transactions open then. Short
// logs of a few tables, DDLs that wait for another worker to write while
// they run, transactions of two or three rows.
func TestTransactionBegunDuringDDLIsFenced(t *testing.T) {
	var hits atomic.Int64
	for trial := range 300 {
		rng := rand.New(rand.NewPCG(uint64(trial), 159))
		var log []codec.Event
		ts := uint64(10)
		for range 24 {
			ts++
			name := fmt.Sprint("t", rng.IntN(4))
			if rng.IntN(5) == 0 {
				log = append(log, ddlAt(ts, "s", name, codec.ActionAddColumn, "ALTER TABLE "+name+" ADD c INT"))
				continue
			}
			log = append(log, rowAt(ts, "s", name))
		}
		o := &Options{Workers: 2 + trial%2, BatchRows: 1, TxnRows: 2 + rng.IntN(2)}
		sink, s := newOrderSink(1, log)
		s.applied = make(chan struct{}, 1)
		s.hold = func(*codec.DDL) error {
			// Let another worker write while the DDL runs, if the log
			// gives it anything to write.
			select {
			case <-s.applied:
			default:
			}
			select {
			case <-s.applied:
				hits.Add(1)
			case <-time.After(2 * time.Millisecond):
			}
			return nil
		}
		if _, err := Run(context.Background(), SliceSource(log), sink, o); err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if err := errors.Join(s.errs...); err != nil {
			t.Fatalf("trial %d (%+v): %v", trial, *o, err)
		}
	}
	if hits.Load() == 0 {
		t.Fatal("no worker wrote while a DDL ran: the test proves nothing")
	}
	t.Logf("%d DDLs saw another worker write while they ran", hits.Load())
}

// TestLoopReadsOnDuringDDL: while a DDL runs, Run keeps reading the log:
// the DDL's ApplyDDL returns only once the source has handed out an event
// after it, which a loop that waits for each DDL never does (it then fails
// after 5 s). Both for one writer (SQLite) and for a DDL scoped to its
// table over several workers.
func TestLoopReadsOnDuringDDL(t *testing.T) {
	log := []codec.Event{rowAt(10, "s", "a"), rowAt(11, "s", "b")}
	log = append(log, ddlAt(12, "s", "a", codec.ActionAddColumn, "ALTER TABLE a ADD c INT"))
	for ts := uint64(13); ts < 20; ts++ {
		log = append(log, rowAt(ts, "s", "b"), rowAt(ts, "s", "a"))
	}
	for _, c := range []struct {
		name    string
		workers int
		scoped  bool
	}{{"one writer", 1, false}, {"scoped, 3 workers", 3, true}} {
		t.Run(c.name, func(t *testing.T) {
			last := make(chan struct{}) // closed as the source hands out its last event
			src := func(yield func(*codec.Event, error) bool) {
				for i := range log {
					if i == len(log)-1 {
						close(last)
					}
					if !yield(&log[i], nil) {
						return
					}
				}
			}
			kind := 0
			if c.scoped {
				kind = 1
			}
			sink, s := newOrderSink(kind, log)
			s.hold = func(d *codec.DDL) error {
				select {
				case <-last:
					return nil
				case <-time.After(5 * time.Second):
					return fmt.Errorf("the source had not handed out its last event 5 s into the DDL at %d: the loop waited for it", d.CommitTs)
				}
			}
			if _, err := Run(context.Background(), src, sink, &Options{Workers: c.workers}); err != nil {
				t.Fatal(err)
			}
			if err := errors.Join(s.errs...); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// txDDLSink is one writer whose transactions run DDLs (DDLTx), and fail
// now and then with a transient error, so that Run replays them, DDLs
// included. Its state changes only at Commit.
type txDDLSink struct {
	log  []codec.Event
	ddls []*codec.DDL
	rng  *rand.Rand
	// scoped: a DDL touches its own table alone (eventScopedTxDDLSink),
	// the only one whose rows it orders.
	scoped bool
	calls  int // ApplyRows calls

	mu        sync.Mutex
	committed map[Table]uint64
	ddlsDone  int
	last      DDLMark
	errs      []error
}

func (s *txDDLSink) MaxOpenTxs() int                            { return 1 }
func (s *txDDLSink) Close() error                               { return nil }
func (s *txDDLSink) Progress(context.Context) (Progress, error) { return Progress{}, nil }
func (s *txDDLSink) Begin(context.Context) (Tx, error) {
	return &txDDLTx{s: s, rows: map[Table]uint64{}}, nil
}
func (s *txDDLSink) ApplyDDL(context.Context, *codec.DDL, DDLMark) error {
	// Run reaches this only for a DDL before its worker began any Tx.
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ddlsDone++
	return nil
}

func newTxDDLSink(log []codec.Event, rng *rand.Rand, scoped bool) *txDDLSink {
	s := &txDDLSink{log: log, rng: rng, scoped: scoped, committed: map[Table]uint64{}}
	for i := range log {
		if log[i].Kind == codec.DDLEvent {
			s.ddls = append(s.ddls, &log[i].DDL)
		}
	}
	return s
}

// eventScopedTxDDLSink is a txDDLSink that scopes each DDL to its table
// from the event (EventDDLScoper), as SQLite's sink does.
type eventScopedTxDDLSink struct{ *txDDLSink }

func (*eventScopedTxDDLSink) DDLTables(_ context.Context, d *codec.DDL) ([]Table, bool, error) {
	return []Table{TableOf(d.Table)}, true, nil
}

func (*eventScopedTxDDLSink) ScopesFromEvent() bool { return true }

// orders reports whether DDL d orders the rows of table tb.
func (s *txDDLSink) orders(d *codec.DDL, tb Table) bool {
	return !s.scoped || touches([]Table{TableOf(d.Table)}, tb)
}

type txDDLTx struct {
	s    *txDDLSink
	rows map[Table]uint64 // highest commit ts applied per table, uncommitted
	ddls int              // DDLs applied, uncommitted
	last DDLMark
}

func (t *txDDLTx) ApplyDDL(_ context.Context, d *codec.DDL, m DDLMark) error {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.ddlsDone + t.ddls
	if i >= len(s.ddls) || s.ddls[i].CommitTs != d.CommitTs {
		s.errs = append(s.errs, fmt.Errorf("DDL at %d ran as the log's DDL #%d, out of order", d.CommitTs, i))
	}
	for _, ev := range s.log {
		if ev.Kind == codec.RowEvent && ev.Row.CommitTs < d.CommitTs {
			tb := TableOf(ev.Row.Table)
			if s.orders(d, tb) && max(s.committed[tb], t.rows[tb]) < ev.Row.CommitTs {
				s.errs = append(s.errs, fmt.Errorf("DDL at %d ran before the row of %s at %d", d.CommitTs, tb, ev.Row.CommitTs))
			}
		}
	}
	t.ddls++
	t.last = m
	return nil
}

func (t *txDDLTx) ApplyRows(_ context.Context, table Table, rows []*codec.RowChange) error {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rng.IntN(100) == 0 {
		return Transient(errors.New("busy"))
	}
	s.calls++
	for _, r := range rows {
		for i, d := range s.ddls {
			if d.CommitTs < r.CommitTs && s.orders(d, table) && i >= s.ddlsDone+t.ddls {
				s.errs = append(s.errs, fmt.Errorf("row of %s at %d applied before the DDL at %d", table, r.CommitTs, d.CommitTs))
			}
		}
		t.rows[table] = max(t.rows[table], r.CommitTs)
	}
	return nil
}

func (t *txDDLTx) Commit(_ context.Context, marks []Mark) error {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range marks {
		if m.CommitTs != t.rows[m.Table] {
			s.errs = append(s.errs, fmt.Errorf("commit marks %s at %d, its rows reach %d", m.Table, m.CommitTs, t.rows[m.Table]))
		}
	}
	for tb, ts := range t.rows {
		s.committed[tb] = max(s.committed[tb], ts)
	}
	s.ddlsDone += t.ddls
	if t.ddls > 0 {
		s.last = t.last
	}
	return nil
}

func (t *txDDLTx) Rollback() error { return nil }

// TestDDLInsideTransactions: a one-writer sink whose transactions run DDLs
// (DDLTx, as SQLite's do) gets each DDL inside the open transaction, in the
// log's order, after every earlier row and before every later one, through
// transient failures that roll back and replay DDLs with rows; the DDLs
// count as applied once committed, and fewer transactions commit than the
// log has DDLs (each DDL committed on its own would need one each). Half
// the trials scope each DDL to its table from the event (EventDDLScoper),
// and then order only that table's rows.
func TestDDLInsideTransactions(t *testing.T) {
	retries := int64(0)
	for trial := range 40 {
		rng := rand.New(rand.NewPCG(uint64(trial), 11))
		log := orderLog(rng, 400)
		s := newTxDDLSink(log, rng, trial%2 == 1)
		var sink Sink = s
		if s.scoped {
			sink = &eventScopedTxDDLSink{s}
		}
		res, err := Run(context.Background(), SliceSource(log), sink, &Options{RetryBackoff: time.Microsecond, MaxRetries: 100, TxnRows: 200})
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if err := errors.Join(s.errs...); err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		lastDDL := s.ddls[len(s.ddls)-1]
		if s.ddlsDone != len(s.ddls) || int(res.DDLs) != len(s.ddls) || res.AppliedDDL.CommitTs != lastDDL.CommitTs {
			t.Fatalf("trial %d: %d DDLs ran, %d counted, last %+v; want %d, last at %d", trial, s.ddlsDone, res.DDLs, res.AppliedDDL, len(s.ddls), lastDDL.CommitTs)
		}
		if res.Transactions >= int64(len(s.ddls)) {
			t.Fatalf("trial %d: %d transactions for %d DDLs: the DDLs did not run inside them", trial, res.Transactions, len(s.ddls))
		}
		retries += res.Retries
	}
	if retries == 0 {
		t.Fatal("no transaction was retried: the replay of DDLs went untested")
	}
}

// TestOneWriterHoldsRowsAcrossOtherTablesDDLs: with one writer whose DDLs
// are scoped from the event (SQLite's sink), a DDL hands out only its own
// table's rows before it; the other tables' rows stay held across it and
// go out in calls of up to BatchRows rows. Without the scope every DDL
// hands out every table's few rows: on a log with a DDL every eight
// transactions over six tables, several times the calls.
func TestOneWriterHoldsRowsAcrossOtherTablesDDLs(t *testing.T) {
	for trial := range 10 {
		log := orderLog(rand.New(rand.NewPCG(uint64(trial), 13)), 2000)
		calls := [2]int{}
		for i, scoped := range []bool{false, true} {
			s := newTxDDLSink(log, rand.New(rand.NewPCG(uint64(trial), 14)), scoped)
			var sink Sink = s
			if scoped {
				sink = &eventScopedTxDDLSink{s}
			}
			res, err := Run(context.Background(), SliceSource(log), sink, &Options{RetryBackoff: time.Microsecond, MaxRetries: 100, BatchRows: 64, TxnRows: 200})
			if err != nil {
				t.Fatalf("trial %d (scoped %v): %v", trial, scoped, err)
			}
			if err := errors.Join(s.errs...); err != nil {
				t.Fatalf("trial %d (scoped %v): %v", trial, scoped, err)
			}
			if int(res.DDLs) != len(s.ddls) {
				t.Fatalf("trial %d (scoped %v): %d DDLs applied, want %d", trial, scoped, res.DDLs, len(s.ddls))
			}
			calls[i] = s.calls
		}
		if calls[1]*3 > calls[0] {
			t.Errorf("trial %d: %d ApplyRows calls scoped from the event, %d not: want under a third", trial, calls[1], calls[0])
		}
		t.Logf("trial %d: %d calls scoped, %d not", trial, calls[1], calls[0])
	}
}
