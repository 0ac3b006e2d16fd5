package apply

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/codec/codectest"
	"github.com/redokit/redokit/testkit/testenv"
)

// bigTxSource yields a log with two upstream transactions far larger than
// Run's bounds, in one Event it overwrites for each row as the reader does:
//
//	ts 10–19   40 rows each over a, b, c
//	ts 20      big rows over a, a, b, …, then a DDL of c
//	ts 21–40   40 rows each over a, b, c
//	ts 41      big/2 rows of c, the source's end
//
// Each row's id is its place in the log.
func bigTxSource(big int) Source {
	return func(yield func(*codec.Event, error) bool) {
		var ev codec.Event
		id := int64(0)
		row := func(ts uint64, table string) bool {
			ev.Kind = codec.RowEvent
			ev.Row = codec.RowChange{CommitTs: ts, Table: codec.TableName{Schema: "s", Name: table},
				Columns: append(ev.Row.Columns[:0],
					codec.Column{Name: "id", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey | codec.FlagHandleKey, Value: codec.IntValue(id)})}
			id++
			return yield(&ev, nil)
		}
		small := func(from, to uint64) bool {
			for ts := from; ts <= to; ts++ {
				for i := range 40 {
					if !row(ts, []string{"a", "b", "c"}[i%3]) {
						return false
					}
				}
			}
			return true
		}
		if !small(10, 19) {
			return
		}
		for i := range big {
			if !row(20, []string{"a", "a", "b"}[i%3]) {
				return
			}
		}
		ddl := ddlAt(20, "s", "c", codec.ActionAddColumn, "ALTER TABLE c ADD COLUMN x INT")
		if !yield(&ddl, nil) || !small(21, 40) {
			return
		}
		for range big / 2 {
			if !row(41, "c") {
				return
			}
		}
	}
}

// splitSink models a downstream that records progress: its transactions
// note each row's table, commit ts and id as ApplyRows sees it (keeping
// nothing of the rows), and commit them with their marks. It fails the
// ApplyRows call that sees row id failAt, once, as a lost connection.
type splitSink struct {
	split  bool
	failAt int64
	id     func(*codec.RowChange) int64 // a row change's id

	mu        sync.Mutex
	committed map[Table][]int64 // ids, in commit order
	commitOf  map[string]int    // "table ts" → the commit that held its rows
	commits   int
	marks     map[Table]uint64
	ddl       DDLMark
	failed    bool
}

func newSplitSink(split bool) *splitSink {
	return &splitSink{split: split, failAt: -1, id: func(r *codec.RowChange) int64 { return r.Columns[0].Value.Int() }, committed: map[Table][]int64{}, commitOf: map[string]int{}, marks: map[Table]uint64{}}
}

func (s *splitSink) SplitsCommitTs() bool { return s.split }
func (s *splitSink) Close() error         { return nil }

func (s *splitSink) Progress(context.Context) (Progress, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Progress{Tables: maps.Clone(s.marks), DDL: s.ddl}, nil
}

func (s *splitSink) ApplyDDL(_ context.Context, _ *codec.DDL, m DDLMark) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ddl = m
	return nil
}

func (s *splitSink) Begin(context.Context) (Tx, error) { return &splitTx{s: s}, nil }

type splitRow struct {
	table Table
	ts    uint64
	id    int64
}

type splitTx struct {
	s    *splitSink
	rows []splitRow
}

func (t *splitTx) ApplyRows(_ context.Context, table Table, rows []*codec.RowChange) error {
	for _, r := range rows {
		id := t.s.id(r)
		t.s.mu.Lock()
		fail := id == t.s.failAt && !t.s.failed
		t.s.failed = t.s.failed || fail
		t.s.mu.Unlock()
		if fail {
			return Transient(fmt.Errorf("lost connection at row %d", id))
		}
		t.rows = append(t.rows, splitRow{table, r.CommitTs, id})
	}
	return nil
}

func (t *splitTx) Commit(_ context.Context, marks []Mark) error {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commits++
	last := map[Table]uint64{}
	for _, r := range t.rows {
		key := fmt.Sprint(r.table, " ", r.ts)
		if c, ok := s.commitOf[key]; ok && c != s.commits {
			return fmt.Errorf("the rows of %s at commit ts %d went into two transactions (%d and %d)", r.table, r.ts, c, s.commits)
		}
		s.commitOf[key] = s.commits
		s.committed[r.table] = append(s.committed[r.table], r.id)
		last[r.table] = r.ts
	}
	for _, m := range marks {
		if last[m.Table] != m.CommitTs {
			return fmt.Errorf("commit %d marks %s at commit ts %d, but its last row of it is at %d", s.commits, m.Table, m.CommitTs, last[m.Table])
		}
		s.marks[m.Table] = m.CommitTs
	}
	return nil
}

func (t *splitTx) Rollback() error { return nil }

// wantIDs returns the ids bigTxSource(big) gives each table, in order.
func wantIDs(t *testing.T, big int) map[Table][]int64 {
	t.Helper()
	want := map[Table][]int64{}
	for ev, err := range bigTxSource(big) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == codec.RowEvent {
			tb := TableOf(ev.Row.Table)
			want[tb] = append(want[tb], ev.Row.Columns[0].Value.Int())
		}
	}
	return want
}

func checkIDs(t *testing.T, s *splitSink, want map[Table][]int64) {
	t.Helper()
	for tb, ids := range want {
		if got := s.committed[tb]; !slices.Equal(got, ids) {
			t.Fatalf("%s: committed %d rows, want the log's %d in order", tb, len(got), len(ids))
		}
	}
}

// copyBytes is the memory Run counts for a copy of row (Options.SplitBytes).
func copyBytes(row *codec.RowChange) int64 {
	var c rowCopy
	c.arena = codec.CopyRow(&c.row, row, c.arena)
	return int64(c.size())
}

// TestSplitBoundsMemory: two upstream transactions of 120,000 and 60,000
// rows pass through Run with SplitBytes of 2,000 rows into a sink that
// takes a commit ts in parts. Run holds at most those 2,000, plus per
// worker its queue (4 items and the one it applies, of BatchRows rows, or
// the rest of a commit ts that went in parts), and the TxnRows rows and
// one item it keeps to replay, at once; every row is committed once, in
// order, and no commit ts of a table is split across two transactions.
// Into a sink that does not split, Run holds a whole commit ts (the bound
// fails), and commits the same rows.
func TestSplitBoundsMemory(t *testing.T) {
	const big, split = 120000, 2000
	var one codec.Event
	for ev := range bigTxSource(1) {
		one = *ev
		break
	}
	o := &Options{Workers: 2, BatchRows: 64, TxnRows: 1000, MaxBufferedRows: split, SplitBytes: split * copyBytes(&one.Row)}
	bound := int64(2*split + o.Workers*(6*o.BatchRows+o.TxnRows))
	want := wantIDs(t, big)
	for _, split := range []bool{true, false} {
		t.Run(fmt.Sprint("split=", split), func(t *testing.T) {
			s := newSplitSink(split)
			res, err := Run(context.Background(), bigTxSource(big), s, o)
			if err != nil {
				t.Fatal(err)
			}
			checkIDs(t, s, want)
			t.Logf("peak %d rows held (bound %d), %d splits, %d transactions", res.PeakRows, bound, res.Splits, res.Transactions)
			if split {
				if res.PeakRows > bound || res.Splits == 0 {
					t.Fatalf("Run held up to %d rows with %d splits; want at most %d", res.PeakRows, res.Splits, bound)
				}
			} else if res.PeakRows < big/3 || res.Splits != 0 {
				t.Fatalf("Run held up to %d rows with %d splits into a sink that takes every commit ts whole; want a whole one held (%d), unsplit", res.PeakRows, res.Splits, big/3)
			}
		})
	}
}

// TestSplitTransientFailsByName: a transient error inside a split commit ts,
// once the transaction let its rows go, cannot be replayed: Run fails with
// ErrTooLargeToReplay, naming the table and the error, having committed
// nothing of that transaction; a rerun resumes from the progress and
// commits every row once. An error before the transaction let go is
// retried as any other.
func TestSplitTransientFailsByName(t *testing.T) {
	const big = 30000
	want := wantIDs(t, big)
	o := &Options{Workers: 1, BatchRows: 64, TxnRows: 1000, SplitBytes: 1 << 16, RetryBackoff: 1}
	s := newSplitSink(true)
	s.failAt = want[Table{"s", "a"}][len(want[Table{"s", "a"}])/2] // deep inside ts 20
	_, err := Run(context.Background(), bigTxSource(big), s, o)
	if !errors.Is(err, ErrTooLargeToReplay) || IsTransient(err) {
		t.Fatalf("Run: %v; want ErrTooLargeToReplay, not transient", err)
	}
	for _, part := range []string{"s.a", "lost connection at row"} {
		if !strings.Contains(err.Error(), part) {
			t.Fatalf("Run: %v; want it to name %q", err, part)
		}
	}
	if ts := s.marks[Table{"s", "a"}]; ts >= 20 {
		t.Fatalf("s.a recorded as applied to commit ts %d after its commit ts 20 was lost", ts)
	}
	if _, err := Run(context.Background(), bigTxSource(big), s, o); err != nil {
		t.Fatalf("rerun: %v", err)
	}
	checkIDs(t, s, want)

	// Early in the commit ts, before anything was let go: retried.
	s = newSplitSink(true)
	for _, id := range want[Table{"s", "a"}] {
		if id >= 400 { // the first row of ts 20 of s.a
			s.failAt = id
			break
		}
	}
	res, err := Run(context.Background(), bigTxSource(big), s, o)
	if err != nil || res.Retries == 0 {
		t.Fatalf("Run: %v after %d retries; want the error early in a split commit ts retried", err, res.Retries)
	}
	checkIDs(t, s, want)
}

// scopedSplitSink is a splitSink whose DDLs touch the table they name
// alone (DDLScoper), so workers keep transactions open across them.
type scopedSplitSink struct{ *splitSink }

func (scopedSplitSink) DDLTables(_ context.Context, d *codec.DDL) ([]Table, bool, error) {
	return []Table{TableOf(d.Table)}, true, nil
}

// txDDLSplitSink is a splitSink whose transactions run DDLs (DDLTx), as
// SQLite's do.
type txDDLSplitSink struct{ *splitSink }

func (s txDDLSplitSink) Begin(context.Context) (Tx, error) {
	return &txDDLSplitTx{splitTx{s: s.splitSink}, nil}, nil
}

type txDDLSplitTx struct {
	splitTx
	ddl *DDLMark
}

func (t *txDDLSplitTx) ApplyDDL(_ context.Context, _ *codec.DDL, m DDLMark) error {
	t.ddl = &m
	return nil
}

func (t *txDDLSplitTx) Commit(ctx context.Context, marks []Mark) error {
	if err := t.splitTx.Commit(ctx, marks); err != nil {
		return err
	}
	if t.ddl != nil {
		t.s.mu.Lock()
		t.s.ddl = *t.ddl
		t.s.mu.Unlock()
	}
	return nil
}

// randomBigTxLog returns a log of commit ts holding from one row change
// to thousands, over four tables, some followed by DDLs of one of them.
// The changes are inserts, deletes, updates and key moves of made-up rows
// (the sinks here keep ids, not rows); each change's id is its place.
func randomBigTxLog(rng *rand.Rand) []codec.Event {
	var evs []codec.Event
	id := int64(0)
	tables := []string{"a", "b", "c", "d"}
	img := func(k int64) []codec.Column {
		return []codec.Column{codectest.Int("k", k, codec.FlagPrimaryKey|codec.FlagHandleKey), codectest.Int("id", id, 0)}
	}
	for ts := uint64(10); ts < uint64(10+rng.IntN(60)); ts++ {
		n := 1 + rng.IntN(40)
		if rng.IntN(6) == 0 {
			n = 500 + rng.IntN(5000)
		}
		spread := 1 + rng.IntN(len(tables))
		// Most commit ts hold one kind of change; some mix them.
		kinds := 1 + rng.IntN(4)
		if rng.IntN(3) == 0 {
			kinds = 0
		}
		for range n {
			var pre, post []codec.Column
			k := kinds
			if k == 0 {
				k = 1 + rng.IntN(4)
			}
			switch key := rng.Int64N(1000); k {
			case 1:
				post = img(key)
			case 2:
				pre = img(key)
			case 3:
				pre, post = img(key), img(key)
			default:
				pre, post = img(key), img(key+1)
			}
			ev := codectest.Update(ts, tname("s", tables[rng.IntN(spread)]), pre, post)
			evs = append(evs, ev)
			id++
		}
		for range rng.IntN(3) / 2 {
			name := tables[rng.IntN(len(tables))]
			evs = append(evs, ddlAt(ts, "s", name, codec.ActionAddColumn, "ALTER TABLE "+name+" ADD COLUMN x INT"))
		}
	}
	return evs
}

// rowID is the id of a row change of randomBigTxLog.
func rowID(r *codec.RowChange) int64 {
	img := r.Columns
	if len(img) == 0 {
		img = r.PreColumns
	}
	return img[1].Value.Int()
}

// TestSplitRandomLogs: random logs of small and large commit ts of every
// kind of change, DDLs scoped and not, run in DDLTx and not, over 1–3
// workers and small bounds: every row change is committed once, in order,
// no commit ts of a table goes into two transactions, and the marks agree
// with the rows. A commit ts that went in parts and then turned out one to
// apply whole fails the run with ErrSplitTooLate, having committed none
// of it; a rerun that holds it whole resumes and ends the same.
func TestSplitRandomLogs(t *testing.T) {
	histories := testenv.Count(t, "REDOKIT_APPLY_SPLIT_HISTORIES", 150)
	tooLate := 0
	for seed := range histories {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		evs := randomBigTxLog(rng)
		want := map[Table][]int64{}
		for _, ev := range evs {
			if ev.Kind == codec.RowEvent {
				want[TableOf(ev.Row.Table)] = append(want[TableOf(ev.Row.Table)], rowID(&ev.Row))
			}
		}
		if len(evs) == 0 {
			continue
		}
		rowBytes := copyBytes(&evs[0].Row)
		splitRows := 1 + rng.IntN(1000)
		o := &Options{Workers: 1 + rng.IntN(3), BatchRows: 1 + rng.IntN(200), TxnRows: 1 + rng.IntN(1500),
			MaxBufferedRows: 1 + rng.IntN(1000), SplitBytes: int64(splitRows) * rowBytes}
		base := newSplitSink(true)
		base.id = rowID
		var sink Sink = base
		switch rng.IntN(3) {
		case 1:
			sink = scopedSplitSink{base}
		case 2:
			sink = txDDLSplitSink{base}
			o.Workers = 1
		}
		what := fmt.Sprintf("seed %d (%T, %+v)", seed, sink, *o)
		res, err := Run(context.Background(), SliceSource(evs), sink, o)
		if errors.Is(err, ErrSplitTooLate) {
			tooLate++
			for tb, ids := range want {
				if got := base.committed[tb]; len(got) > len(ids) || !slices.Equal(got, ids[:len(got)]) {
					t.Fatalf("%s: %v; then %s holds %d rows, not the log's first", what, err, tb, len(got))
				}
			}
			whole := *o
			whole.SplitBytes = 1 << 40
			if res, err = Run(context.Background(), SliceSource(evs), sink, &whole); err != nil {
				t.Fatalf("%s: the rerun that holds every commit ts whole: %v", what, err)
			}
		} else if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for tb, ids := range want {
			if got := base.committed[tb]; !slices.Equal(got, ids) {
				t.Fatalf("%s: %s: committed %d rows, want the log's %d in order", what, tb, len(got), len(ids))
			}
		}
		// Where no commit ts is held whole: the loop holds up to
		// MaxBufferedRows of complete commit ts and SplitBytes' worth of
		// the one being read; a worker, its queue and the item it applies
		// (each of BatchRows rows, or of the rows a table held when its
		// commit ts ended, up to the loop's), and the rows it keeps to
		// replay.
		loop := o.MaxBufferedRows + splitRows
		if bound := int64(loop + o.Workers*(6*max(o.BatchRows, loop)+o.TxnRows)); wholeRows(evs) == 0 && res.PeakRows > bound {
			t.Fatalf("%s: held up to %d rows, want at most %d", what, res.PeakRows, bound)
		}
	}
	t.Logf("%d histories, %d of them failed as split too late and were rerun whole", histories, tooLate)
}

// wholeRows returns the rows of the largest commit ts of a table in evs that
// Run holds whole (tableBuf.noteShape).
func wholeRows(evs []codec.Event) int {
	most := 0
	bufs := map[Table]*tableBuf{}
	n := map[Table]int{}
	for i := range evs {
		if evs[i].Kind != codec.RowEvent {
			continue
		}
		r := &evs[i].Row
		tb := TableOf(r.Table)
		b := bufs[tb]
		if b == nil {
			b = &tableBuf{}
			bufs[tb] = b
		}
		if b.shapeTs != r.CommitTs {
			n[tb] = 0
		}
		_ = b.noteShape(r)
		n[tb]++
		if b.shape&shapeWhole != 0 {
			most = max(most, n[tb])
		}
	}
	return most
}

// TestSplitTooLateOnlyForItsCommitTs: a table whose earlier, complete rows
// went out in an open item (another table's transaction filled SplitBytes)
// and whose next commit ts must be applied whole is held whole, not failed:
// no part of that commit ts went out. The commit ts that did go in parts
// and then turned out so fails, naming it.
func TestSplitTooLateOnlyForItsCommitTs(t *testing.T) {
	key := func(k int64) []codec.Column {
		return []codec.Column{codectest.Int("k", k, codec.FlagPrimaryKey|codec.FlagHandleKey), codectest.Int("id", k, 0)}
	}
	var evs []codec.Event
	add := func(ts uint64, table string, pre, post []codec.Column) {
		evs = append(evs, codectest.Update(ts, tname("s", table), pre, post))
	}
	for k := range int64(80) {
		// Fewer than BatchRows, and than SplitBytes holds: held at 6,
		// more than half of SplitBytes: handed out with y's part.
		add(5, "x", nil, key(3000+k))
	}
	for k := range int64(400) {
		add(6, "y", nil, key(100+k)) // past SplitBytes: x's ts 5 goes out open
	}
	add(6, "x", nil, key(2))
	add(6, "x", key(2), nil) // x at 6 must be applied whole
	s := newSplitSink(true)
	s.id = rowID
	o := &Options{Workers: 1, BatchRows: 1000, SplitBytes: 100 * copyBytes(&evs[0].Row)}
	res, err := Run(context.Background(), SliceSource(evs), s, o)
	if err != nil || res.Splits == 0 {
		t.Fatalf("Run: %v with %d splits; want x's commit ts 6 held whole, after a split", err, res.Splits)
	}
	// y's ts 6, in parts, then a delete after its inserts: too late.
	add(7, "y", nil, key(1000))
	for k := range int64(400) {
		add(8, "y", nil, key(2000+k))
	}
	add(8, "y", key(2000), nil)
	s = newSplitSink(true)
	s.id = rowID
	_, err = Run(context.Background(), SliceSource(evs), s, o)
	if !errors.Is(err, ErrSplitTooLate) || !strings.Contains(err.Error(), "s.y at commit ts 8") {
		t.Fatalf("Run: %v; want ErrSplitTooLate naming s.y at commit ts 8", err)
	}
	// The rerun redokit apply makes: that commit ts held whole, the others
	// still in parts.
	var late *SplitTooLateError
	if !errors.As(err, &late) || late.CommitTs != 8 || late.Table != (Table{Schema: "s", Name: "y"}) {
		t.Fatalf("Run: %#v; want a *SplitTooLateError of s.y at 8", err)
	}
	again, held := HoldWhole(o, err)
	if again == nil || held != late || !slices.Equal(again.WholeTs, []uint64{8}) || len(o.WholeTs) != 0 {
		t.Fatalf("HoldWhole: %+v, %v; want a copy of the options holding 8 whole", again, held)
	}
	if more, _ := HoldWhole(again, err); more != nil {
		t.Fatalf("HoldWhole of options holding 8 whole already: %+v; want nil (a rerun would fail the same way)", more)
	}
	s = newSplitSink(true)
	s.id = rowID
	o = again
	res, err = Run(context.Background(), SliceSource(evs), s, o)
	if err != nil || res.Splits == 0 {
		t.Fatalf("Run with WholeTs %v: %v with %d splits; want it applied, ts 6 still in parts", o.WholeTs, err, res.Splits)
	}
	if got := len(s.committed[Table{Schema: "s", Name: "y"}]); got != 400+1+400+1 {
		t.Fatalf("s.y: %d row changes committed, want every one of them", got)
	}
	if m := s.marks[Table{Schema: "s", Name: "y"}]; m != 8 {
		t.Fatalf("s.y's mark at %d, want 8", m)
	}
}

// TestOnlyLargeCommitTsSplit: rows of earlier commit ts held past
// SplitBytes (each table's below BatchRows, all below MaxBufferedRows) do
// not make a small transaction go in parts: only a commit ts of more than
// SplitBytes does. Else a small transaction that deletes what it inserted
// would fail as split too late.
func TestOnlyLargeCommitTsSplit(t *testing.T) {
	key := func(k int64) []codec.Column {
		return []codec.Column{codectest.Int("k", k, codec.FlagPrimaryKey|codec.FlagHandleKey), codectest.Int("id", k, 0)}
	}
	var evs []codec.Event
	for ts := uint64(10); ts < 60; ts++ {
		for i := range int64(10) {
			k := int64(ts)*100 + i
			evs = append(evs, codectest.Update(ts, tname("s", fmt.Sprint("z", i)), nil, key(k)))
		}
	}
	evs = append(evs, codectest.Update(100, tname("s", "w"), nil, key(1)), codectest.Update(100, tname("s", "w"), key(1), nil))
	s := newSplitSink(true)
	s.id = rowID
	o := &Options{Workers: 2, BatchRows: 1000, MaxBufferedRows: 1 << 20, SplitBytes: 100 * copyBytes(&evs[0].Row)}
	res, err := Run(context.Background(), SliceSource(evs), s, o)
	if err != nil || res.Splits != 0 {
		t.Fatalf("Run: %v, %d splits; want none: no commit ts holds SplitBytes", err, res.Splits)
	}
}

// TestKeyMovedIsKeyChanged: the loop's allocation-free keyMoved answers as
// codec.KeyChanged on random images (keys of handle and primary flags,
// several columns, values equal and not), and allocates nothing.
func TestKeyMovedIsKeyChanged(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	img := func() []codec.Column {
		var cols []codec.Column
		for i := range rng.IntN(4) {
			var f codec.ColumnFlag
			switch rng.IntN(4) {
			case 0:
				f = codec.FlagHandleKey
			case 1:
				f = codec.FlagPrimaryKey
			}
			cols = append(cols, codec.Column{Name: fmt.Sprint("c", i+rng.IntN(2)), Flags: f, Value: codec.IntValue(rng.Int64N(2))})
		}
		return cols
	}
	for range 20000 {
		pre, post := img(), img()
		if got, want := keyMoved(pre, post), codec.KeyChanged(pre, post); got != want {
			t.Fatalf("keyMoved(%v, %v) = %v, codec.KeyChanged %v", pre, post, got, want)
		}
	}
	pre := []codec.Column{{Name: "k", Flags: codec.FlagPrimaryKey, Value: codec.IntValue(1)}, {Name: "v"}}
	if n := testing.AllocsPerRun(100, func() { keyMoved(pre, pre) }); n != 0 {
		t.Fatalf("keyMoved allocates %v times", n)
	}
}
