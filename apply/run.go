package apply

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/internal/retry"
)

// Options configure Run. nil and zero fields take the defaults.
type Options struct {
	// Workers is how many transactions apply rows at once, each owning a
	// share of the tables. 0 means DefaultWorkers; a sink that is a
	// TxLimiter may lower it.
	Workers int
	// BatchRows is how many rows of a table Run gathers before it hands them
	// to the sink in one ApplyRows call (the SQL sink writes them as
	// multi-row statements). A call holds every row of a commit ts, unless
	// MaxBufferedRows splits it, so a call may hold more. 0 means
	// DefaultBatchRows.
	BatchRows int
	// TxnRows is how many rows a worker's transaction holds before it
	// commits; it commits at the end of the ApplyRows call that reaches it.
	// 0 means DefaultTxnRows.
	TxnRows int
	// MaxBufferedRows bounds the rows Run holds that no worker has taken
	// yet: past it, every table's complete rows are handed out at the next
	// commit ts. The rows of one commit ts of one table are held whole,
	// up to SplitBytes. 0 means 2 × Workers × TxnRows.
	MaxBufferedRows int
	// SplitBytes bounds the memory of the row changes of one commit ts
	// that Run holds, into a sink that takes a commit ts in parts
	// ([CommitTsSplitter], the SQL sinks outside commit order): once the
	// commit ts being read took more, the rows held are handed out, the
	// largest tables' first, those of the commit ts in part, until Run
	// holds half of SplitBytes, so that a transaction of any size passes
	// in bounded memory and a smaller one always goes whole. A commit ts that must be applied whole is held whole
	// (see CommitTsSplitter), or fails with [ErrSplitTooLate] once part of
	// it went out. Into another sink, or in commit order, a commit ts is
	// held whole, and memory grows with the largest transaction. 0 means
	// DefaultSplitBytes.
	SplitBytes int64
	// WholeTs are commit ts Run never hands out in parts, whatever their
	// size: a rerun after a [SplitTooLateError] adds the error's CommitTs,
	// so that the commit ts that had to be applied whole is, and every
	// other commit ts stays within SplitBytes.
	WholeTs []uint64
	// MaxRetries is how often a transaction or DDL that failed with a
	// transient error is retried before Run gives up. 0 means
	// DefaultMaxRetries; negative means never.
	MaxRetries int
	// RetryBackoff is the first wait before a retry; it doubles on each
	// further retry, up to 5 s. 0 means DefaultRetryBackoff.
	RetryBackoff time.Duration
	// Logger receives retries and a summary. nil discards.
	Logger *slog.Logger
}

// Defaults for zero Options fields.
const (
	DefaultWorkers      = 4
	DefaultBatchRows    = 1024
	DefaultTxnRows      = 8192
	DefaultMaxRetries   = 8
	DefaultSplitBytes   = 256 << 20
	DefaultRetryBackoff = 50 * time.Millisecond
	maxRetryBackoff     = 5 * time.Second
)

func (o *Options) withDefaults(sink Sink) Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers
	}
	if l, ok := sink.(TxLimiter); ok {
		if n := l.MaxOpenTxs(); n > 0 && c.Workers > n {
			c.Workers = n
		}
	}
	if co, ok := sink.(CommitOrderer); ok && co.NeedsCommitOrder() {
		c.Workers = 1
	}
	if c.BatchRows <= 0 {
		c.BatchRows = DefaultBatchRows
	}
	if c.TxnRows <= 0 {
		c.TxnRows = DefaultTxnRows
	}
	if c.MaxBufferedRows <= 0 {
		c.MaxBufferedRows = 2 * c.Workers * c.TxnRows
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = DefaultMaxRetries
	}
	if c.SplitBytes <= 0 {
		c.SplitBytes = DefaultSplitBytes
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = DefaultRetryBackoff
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Result counts what Run did. It is returned with the error too, counting
// what was done before it.
type Result struct {
	Events  int64 // events read from the source
	Rows    int64 // row changes applied in committed transactions
	DDLs    int64 // DDLs applied
	Skipped int64 // events skipped as already applied (at or below the recorded progress)
	// SkippedRows counts the row changes of Skipped per table: those the
	// downstream's recorded progress says it holds already.
	SkippedRows  map[Table]int64
	Transactions int64 // row transactions committed
	// Splits counts the times Run handed out the rows of the current
	// commit ts in part, past Options.SplitBytes ([CommitTsSplitter]).
	Splits int64
	// PeakRows is the most row changes Run held at once: read and not yet
	// committed (or let go, CommitTsSplitter). Into a CommitTsSplitter it
	// stays near MaxBufferedRows of complete commit ts, plus SplitBytes'
	// worth of the one being read, plus per worker its queue and TxnRows,
	// unless a commit ts held whole is larger.
	PeakRows int64
	Retries  int64 // transactions and DDLs retried after a transient error
	Duration time.Duration

	// Where Duration went at the DDLs (see "Ordering, batching and
	// parallelism" in the package doc): BarrierTime is the time the loop
	// stood still at DDLs (waiting for the previous DDL to run, for room in
	// the workers' queues, and, at a DDL of every table with several
	// workers, for it to run), DDLTime the time the workers spent in the
	// sink's ApplyDDL (retries included), while the loop read on. The last
	// barrier, at the source's end, is in neither.
	BarrierTime time.Duration
	DDLTime     time.Duration
	// WriteTime and CommitTime add up, over the workers, the time spent in
	// the sink's Begin and ApplyRows (or ApplyGroup), and in its Commit:
	// with several workers they overlap, and may exceed Duration.
	WriteTime, CommitTime time.Duration

	// Applied is the progress after the run, per table: the sink's
	// recorded progress when Run started, raised by every mark Run
	// committed since. After an error it says where the apply stopped:
	// every row change of a table at or below its ts is in the downstream
	// (a table absent has none), none above it that this run applied.
	// It is nil when Run could not read the progress.
	Applied map[Table]uint64
	// AppliedDDL is the DDL progress after the run, the same way: the
	// recorded DDL mark, or the mark of the last DDL Run applied.
	AppliedDDL DDLMark
}

// RowsPerSecond is Rows divided by Duration.
func (r *Result) RowsPerSecond() float64 {
	if r.Duration <= 0 {
		return 0
	}
	return float64(r.Rows) / r.Duration.Seconds()
}

// Run replays src into sink: see the package doc. It returns when the source
// ends and everything is committed, or at the first error that is
// not transient, after rolling back every open transaction; what was
// committed before stays, with its progress, so running again resumes.
func Run(ctx context.Context, src Source, sink Sink, opts *Options) (*Result, error) {
	start := time.Now()
	o := opts.withDefaults(sink)
	res := &Result{}
	prog, err := sink.Progress(ctx)
	if err != nil {
		res.Duration = time.Since(start)
		return res, fmt.Errorf("apply: read progress: %w", err)
	}
	if prog.Tables == nil {
		prog.Tables = map[Table]uint64{}
	}
	// A copy: r.prog is read by the loop alone, applied is written by
	// every worker.
	res.Applied = maps.Clone(prog.Tables)
	res.AppliedDDL = prog.DDL
	r := newRunner(ctx, sink, &o, res, prog)
	if err := r.loop(src); err != nil {
		// A worker's failure cancels the loop, which may then fail on
		// the cancellation: the first error is the cause.
		r.fail(err)
	}
	r.stop()
	err = r.firstErr()
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		// The caller's cancellation came first and broke what was in
		// flight (pgx closes the connection under a cancelled query:
		// "bad connection"): the cancellation is the cause.
		err = fmt.Errorf("%w: %w", context.Cause(ctx), err)
	}
	res.Rows = r.rows.Load()
	res.SkippedRows = r.skips.snapshot()
	res.Transactions = r.txns.Load()
	res.PeakRows = r.peakHeld
	res.Retries += r.retries.Load()
	res.WriteTime = time.Duration(r.writeNs.Load())
	res.CommitTime = time.Duration(r.commitNs.Load())
	res.DDLTime = time.Duration(r.ddlNs.Load())
	res.DDLs = r.ddls.Load()
	// Every worker has stopped: res.Applied is no longer written.
	res.Duration = time.Since(start)
	o.Logger.Info("apply: done", "events", res.Events, "rows", res.Rows, "ddls", res.DDLs,
		"skipped", res.Skipped, "transactions", res.Transactions, "retries", res.Retries,
		"duration", res.Duration, "error", err)
	return res, err
}

// tableBuf holds the rows of one table that no worker has taken yet.
type tableBuf struct {
	table  Table
	worker *worker
	rows   []*codec.RowChange
	copies []*rowCopy // the copies rows point into (rowpool.go)
	bytes  int64      // the memory of copies
	ready  bool       // listed in runner.ready
	listed bool       // listed in runner.order
	// open: the last item handed out ended inside a commit ts, whose
	// other rows follow, so the worker may not commit until an item of
	// the table closes it (workItem.open).
	open   bool
	openTs uint64 // the commit ts of the open item's last row
	// shape is what the row changes of the table at commit ts shapeTs
	// did to keys (splitShape).
	shapeTs uint64
	shape   splitShape
}

type runner struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	sink   Sink
	o      *Options
	res    *Result
	prog   Progress

	tables  map[Table]*tableBuf
	order   []*tableBuf // tables that held rows since it was last emptied, in the order of their first row held (each once)
	ordered bool        // hand out every commit ts whole, in order (CommitOrderer)
	// eventScope: with one worker, a DDL holds back only the rows of the
	// tables the sink names from the event (EventDDLScoper).
	eventScope bool
	ready      []*tableBuf // tables holding ≥ BatchRows rows
	// split: the sink takes a commit ts in parts (CommitTsSplitter), and
	// Run hands out the rows of a commit ts past SplitBytes (splitAll);
	// opened lists the buffers whose last item went out open
	// (tableBuf.open). splitAt: Run hands out in parts once its rows take
	// this much, SplitBytes above what it held when the commit ts began or
	// after the last hand-out in parts, so that only a commit ts of more
	// than SplitBytes goes in parts.
	split    bool
	opened   []*tableBuf
	splitAt  int64
	cands    []*tableBuf // splitAll's
	buffered int         // rows in all tableBufs
	bufBytes int64       // the memory of their copies (Options.SplitBytes)
	drainAll bool        // hand out every table at the next commit ts

	curTs    uint64 // commit ts of the last event read
	ddlAtCur int    // DDLs read at curTs
	ddlTs    uint64 // commit ts of the last DDL read (rows may not follow it at that ts)
	sawDDL   bool

	workers    []*worker
	nextWorker int // where workerFor starts looking
	wg         sync.WaitGroup

	// pending is the DDL handed to a worker that the loop has not seen
	// run; while it is, the tables it touches (pin) go to the worker
	// running it (pinTo), behind it in its queue.
	pending *ddlJob
	pin     []Table
	pinTo   *worker

	rows, txns, retries atomic.Int64
	ddls                atomic.Int64
	writeNs, commitNs   atomic.Int64 // Result.WriteTime, CommitTime
	ddlNs               atomic.Int64 // Result.DDLTime
	errMu               sync.Mutex
	err                 error
	provoked            error // a worker's error that came after a cancellation (fail)

	// appliedMu guards res.Applied and res.AppliedDDL, which the workers
	// raise as their commits and DDLs succeed.
	appliedMu sync.Mutex

	skips skipCounts // the row changes skipped per table, shared with the sink (RunSkipped)

	pool  rowPool    // the row copies committed transactions gave back
	spare []*rowCopy // copies the loop took from pool, not yet used
	// held counts the rows Run holds (copied, not yet given back);
	// peakHeld, the loop's alone, is its highest (Result.PeakRows).
	held     atomic.Int64
	peakHeld int64
}

// skipCounts counts the row changes Run skipped per table. The loop writes
// it; a sink reads it through the context of its transactions
// (RunSkipped).
type skipCounts struct {
	mu sync.Mutex
	n  map[Table]int64
}

func (s *skipCounts) add(t Table) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[Table]int64{}
	}
	s.n[t]++
}

func (s *skipCounts) snapshot() map[Table]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.n)
}

type skipKey struct{}

// RunSkipped reports how many row changes of table t the Run whose context
// ctx is (the context a sink's ApplyRows and ApplyGroup get) has skipped so
// far as already applied, at or below the progress the sink recorded; ok is
// false when ctx is no Run's. Run reads a table's changes in commit-ts
// order and skips those its progress covers before it hands out any other,
// so a sink that asks when it first writes a table learns whether this
// replay overlapped what the progress records (a resume: n > 0), or starts
// past it, where rows the downstream holds beyond the recorded progress
// were written by something else.
func RunSkipped(ctx context.Context, t Table) (n int64, ok bool) {
	s, ok := ctx.Value(skipKey{}).(*skipCounts)
	if !ok {
		return 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[t], true
}

func newRunner(ctx context.Context, sink Sink, o *Options, res *Result, prog Progress) *runner {
	cctx, cancel := context.WithCancelCause(ctx)
	r := &runner{cancel: cancel, sink: sink, o: o, res: res, prog: prog,
		tables: map[Table]*tableBuf{}}
	r.ctx = context.WithValue(cctx, skipKey{}, &r.skips)
	if co, ok := sink.(CommitOrderer); ok && co.NeedsCommitOrder() {
		r.ordered = true
	}
	if sp, ok := sink.(CommitTsSplitter); ok && sp.SplitsCommitTs() && !r.ordered {
		r.split = true
	}
	if es, ok := sink.(EventDDLScoper); ok && es.ScopesFromEvent() && !r.ordered {
		r.eventScope = true
	}
	r.splitAt = o.SplitBytes
	for i := 0; i < o.Workers; i++ {
		w := &worker{r: r, id: i, in: make(chan workItem, 4)}
		r.workers = append(r.workers, w)
		r.wg.Add(1)
		go w.run()
	}
	return r
}

func (r *runner) fail(err error) {
	r.errMu.Lock()
	switch {
	case r.err == nil:
		r.err = err
	case r.provoked == nil && isCancel(r.err) && !isCancel(err):
		// The caller's cancellation reached the loop before the error it
		// provoked in a worker (pgx closes the connection under a
		// cancelled query): that error says what was cut short.
		r.provoked = err
	}
	r.errMu.Unlock()
	r.cancel(err)
}

// isCancel reports whether err is a context's cancellation or deadline.
func isCancel(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func (r *runner) firstErr() error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	if r.provoked != nil {
		return fmt.Errorf("%w: %w", r.err, r.provoked)
	}
	return r.err
}

// stop ends the workers; each rolls back a transaction left open (there is
// none after a successful drain).
func (r *runner) stop() {
	for _, w := range r.workers {
		close(w.in)
	}
	r.wg.Wait()
	r.cancel(nil)
}

func (r *runner) loop(src Source) error {
	if err := r.ctx.Err(); err != nil {
		return context.Cause(r.ctx)
	}
	for ev, err := range src {
		if err != nil {
			if r.ctx.Err() != nil {
				return context.Cause(r.ctx)
			}
			return fmt.Errorf("apply: source: %w", err)
		}
		if err := r.event(ev); err != nil {
			return err
		}
		// A worker's failure cancels r.ctx, which a source that does not
		// watch it never sees: stop pulling here.
		if err := r.ctx.Err(); err != nil {
			return context.Cause(r.ctx)
		}
	}
	return r.barrier()
}

// event takes one event from the source.
func (r *runner) event(ev *codec.Event) error {
	r.res.Events++
	ts := ev.CommitTs()
	if ts < r.curTs {
		return fmt.Errorf("%w: %s event at commit ts %d after commit ts %d", ErrOrder, ev.Kind, ts, r.curTs)
	}
	if ts > r.curTs {
		r.curTs = ts
		r.ddlAtCur = 0
		if err := r.advance(); err != nil {
			return err
		}
	}
	switch ev.Kind {
	case codec.RowEvent:
		if r.sawDDL && ts == r.ddlTs {
			return fmt.Errorf("%w: row change of %s at commit ts %d after a DDL of that commit ts", ErrOrder, ev.Row.Table, ts)
		}
		return r.row(ev)
	case codec.DDLEvent:
		index := r.ddlAtCur
		r.ddlAtCur++
		r.ddlTs, r.sawDDL = ts, true
		if r.prog.DDL.covers(ts, index) {
			r.res.Skipped++
			return nil
		}
		// The rows of ts are all read: the commit ts's handed out in
		// part end here, before the DDL has any worker commit.
		if err := r.closeSplits(); err != nil {
			return err
		}
		return r.ddl(&ev.DDL, DDLMark{CommitTs: ts, Count: index + 1})
	}
	return fmt.Errorf("apply: source returned an event of unknown kind %s at commit ts %d", ev.Kind, ts)
}

func (r *runner) row(ev *codec.Event) error {
	t := TableOf(ev.Row.Table)
	ts := ev.Row.CommitTs
	// Only the table's own mark says what is applied: a DDL waits for the
	// tables it touches alone (DDLScoper), so the rows of another table
	// at or below a recorded DDL's ts may have been in a transaction that
	// never committed.
	if done, ok := r.prog.Tables[t]; ok && ts <= done {
		r.res.Skipped++
		r.skips.add(t)
		return nil
	}
	if ev.Row.Op() == codec.OpNone {
		return fmt.Errorf("apply: row change of %s at commit ts %d has neither image", t, ts)
	}
	b := r.tables[t]
	if b == nil {
		w := r.pinTo
		if w != nil && touches(r.pin, t) {
			w.tables++
		} else {
			w = r.workerFor()
		}
		b = &tableBuf{table: t, worker: w}
		r.tables[t] = b
	}
	if r.split {
		if err := b.noteShape(&ev.Row); err != nil {
			return err
		}
	}
	c := r.copyRow(&ev.Row)
	if !b.listed {
		b.listed = true
		r.order = append(r.order, b)
	}
	b.rows = append(b.rows, &c.row)
	b.copies = append(b.copies, c)
	n := int64(c.size())
	b.bytes += n
	r.bufBytes += n
	r.buffered++
	if len(b.rows) >= r.o.BatchRows && !b.ready {
		b.ready = true
		r.ready = append(r.ready, b)
	}
	if r.buffered >= r.o.MaxBufferedRows {
		r.drainAll = true
	}
	if r.split && r.bufBytes >= r.splitAt && !slices.Contains(r.o.WholeTs, r.curTs) {
		return r.splitAll()
	}
	return nil
}

// workerFor returns the worker a table without a buffer gets: the one
// holding the fewest tables, the next after the last one picked on a tie.
// Such a table has no rows in any open transaction (its buffer was dropped
// only once its worker committed), so it may go to any worker. A hash of
// the name left a worker idle and another with two tables' rows in most
// runs over four tables.
func (r *runner) workerFor() *worker {
	best := r.leastLoaded()
	r.nextWorker = best.id + 1
	best.tables++
	return best
}

// leastLoaded returns the worker holding the fewest tables, the first from
// nextWorker on a tie.
func (r *runner) leastLoaded() *worker {
	n := len(r.workers)
	best := r.workers[r.nextWorker%n]
	for i := range n {
		if w := r.workers[(r.nextWorker+i)%n]; w.tables < best.tables {
			best = w
		}
	}
	return best
}

// dropTable forgets table t's (empty) buffer, from the order list too: a
// log that creates, writes and drops table after table between two full
// barriers would otherwise list every buffer it ever had.
func (r *runner) dropTable(t Table) {
	if b := r.tables[t]; b != nil {
		b.worker.tables--
		delete(r.tables, t)
		if b.listed {
			b.listed = false
			r.order = slices.DeleteFunc(r.order, func(x *tableBuf) bool { return x == b })
		}
	}
}

// advance is called when the commit ts moves on: every row held is then a
// whole commit ts of its table, and may be handed out.
func (r *runner) advance() error {
	defer func() { r.splitAt = r.bufBytes + r.o.SplitBytes }()
	if err := r.closeSplits(); err != nil {
		return err
	}
	if r.drainAll || r.ordered {
		r.drainAll = false
		return r.dispatchAll()
	}
	ready := r.ready
	r.ready = nil
	for _, b := range ready {
		b.ready = false
		if err := r.dispatch(b); err != nil {
			return err
		}
	}
	return nil
}

// dispatchAll hands out every table's rows, in the order their first rows
// came: in ordered mode, the order of the upstream transaction's tables.
func (r *runner) dispatchAll() error {
	r.ready = r.ready[:0]
	if r.ordered {
		return r.dispatchGroup()
	}
	for i, b := range r.order {
		b.ready = false
		if err := r.dispatch(b); err != nil {
			r.order = r.order[i+1:]
			return err
		}
	}
	r.clearOrder()
	return nil
}

// dispatchGroup hands every table's rows held (in ordered mode, one commit
// ts) to the one worker as one item, in the order the tables came.
func (r *runner) dispatchGroup() error {
	var item workItem
	for _, b := range r.order {
		b.ready = false
		if len(b.rows) > 0 {
			item.group = append(item.group, TableRows{Table: b.table, Rows: b.rows})
			item.copies = append(item.copies, b.copies...)
			r.buffered -= len(b.rows)
			r.bufBytes -= b.bytes
			b.rows, b.copies, b.bytes = nil, nil, 0
		}
	}
	r.clearOrder()
	if item.group == nil {
		return nil
	}
	return r.send(r.workers[0], item)
}

// dispatch hands out the rows b holds, which end a commit ts: closing the
// one its last item left open, if it holds none.
func (r *runner) dispatch(b *tableBuf) error { return r.handOutRows(b, false) }

// handOutRows sends b's rows to its worker as one item, open when the
// last commit ts in it may go on (splitAll).
func (r *runner) handOutRows(b *tableBuf, open bool) error {
	if len(b.rows) == 0 {
		if !b.open || open {
			return nil
		}
		b.open = false
		return r.send(b.worker, workItem{table: b.table, closes: true})
	}
	rows, copies := b.rows, b.copies
	r.buffered -= len(b.rows)
	r.bufBytes -= b.bytes
	b.rows, b.copies, b.bytes = nil, nil, 0
	if open && !b.open {
		r.opened = append(r.opened, b)
	}
	b.open = open
	if open {
		b.openTs = rows[len(rows)-1].CommitTs
	}
	if !open {
		return r.send(b.worker, workItem{table: b.table, rows: rows, copies: copies})
	}
	// In items of BatchRows rows: the worker's queue holds a few items,
	// so what it holds is bounded by BatchRows too, not only by
	// MaxBufferedRows.
	for len(rows) > 0 {
		n := min(len(rows), r.o.BatchRows)
		if err := r.send(b.worker, workItem{table: b.table, rows: rows[:n:n], copies: copies[:n:n], open: true}); err != nil {
			return err
		}
		rows, copies = rows[n:], copies[n:]
	}
	return nil
}

// splitAll hands out rows of the commit ts being read, which took more
// than SplitBytes since the commit ts began (splitAt): those of the
// largest tables first, in part (CommitTsSplitter), until what is held is
// at most half of SplitBytes, so that a transaction of any size passes
// through SplitBytes at a time and the small tables of a large transaction
// stay whole. The worker's transaction stays open until the rest of the
// commit ts follows (closeSplits). A table's commit ts that must be
// applied whole (splitShape) is held whole, until the commit ts moves on.
func (r *runner) splitAll() error {
	defer func() { r.splitAt = r.bufBytes + r.o.SplitBytes }()
	cands := r.cands[:0]
	for _, b := range r.order {
		if len(b.rows) == 0 {
			continue
		}
		if b.shapeTs == r.curTs && b.shape&shapeWhole != 0 {
			r.drainAll = true
			continue
		}
		cands = append(cands, b)
	}
	slices.SortStableFunc(cands, func(a, b *tableBuf) int { return cmp.Compare(b.bytes, a.bytes) })
	split := false
	for _, b := range cands {
		if r.bufBytes <= r.o.SplitBytes/2 {
			break
		}
		split = true
		if err := r.handOutRows(b, true); err != nil {
			return err
		}
	}
	clear(cands)
	r.cands = cands[:0]
	if split {
		r.res.Splits++
	}
	return nil
}

// keyFlag returns the flag that marks img's key columns (see
// codec.KeyColumns), 0 when it has none.
func keyFlag(img []codec.Column) codec.ColumnFlag {
	pk := false
	for i := range img {
		if img[i].Flags.Has(codec.FlagHandleKey) {
			return codec.FlagHandleKey
		}
		pk = pk || img[i].Flags.Has(codec.FlagPrimaryKey)
	}
	if pk {
		return codec.FlagPrimaryKey
	}
	return 0
}

// hasFlag reports whether a column of img has flag f.
func hasFlag(img []codec.Column, f codec.ColumnFlag) bool {
	for i := range img {
		if img[i].Flags.Has(f) {
			return true
		}
	}
	return false
}

// keyMoved is codec.KeyChanged without its allocations: the loop runs it
// on every row.
func keyMoved(pre, post []codec.Column) bool {
	fp, fq := keyFlag(pre), keyFlag(post)
	if fp == 0 || fq == 0 {
		return true
	}
	i, j := 0, 0
	for {
		for i < len(pre) && !pre[i].Flags.Has(fp) {
			i++
		}
		for j < len(post) && !post[j].Flags.Has(fq) {
			j++
		}
		if i == len(pre) || j == len(post) {
			return i != len(pre) || j != len(post)
		}
		if pre[i].Name != post[j].Name || !pre[i].Value.Equal(post[j].Value) {
			return true
		}
		i++
		j++
	}
}

// splitShape is what the row changes of one table at one commit ts did to
// keys, as far as Run has read them: whether it may hand them out in parts
// (CommitTsSplitter). A log gives a transaction's changes in one of two
// shapes (each row's final state, or every statement's change in order;
// see the SQL sinks' plan): in parts, a change can be applied only as the
// state the parts before it left, which is right for the second shape, and
// for the first as long as no change deletes (or moves away) a key that an
// earlier one may have written (inserted, or moved a row onto). So a
// commit ts goes in parts only while no keyed pre image came after a keyed
// post image that was not an update of its own key: a bulk load, a large
// DELETE, a large UPDATE that keeps keys, deletes then inserts. A table
// without a key is a multiset, in which inserts and deletes of one row
// each commute: any mix goes in parts. Unless it has a unique index (a
// column flagged codec.FlagUniqueKey: one on columns that may be NULL,
// which is no key): an insert then meets a row holding its value, which
// the sink replaces, and a later part's delete of that row takes the
// inserted one instead (a swap of two rows' values, in parts, lost one).
// There every row image counts as a key: a commit ts goes in parts only
// while no delete came after an insert (an update is both).
type splitShape uint8

const (
	shapeWrote splitShape = 1 << iota // a keyed insert, or a move onto a key
	shapeWhole                        // must be applied whole
)

// noteShape notes row in its table's shape at its commit ts. Once a part
// of the commit ts went out, a change that makes it one to apply whole
// comes too late: Run fails, naming it, rather than apply it in parts.
func (b *tableBuf) noteShape(row *codec.RowChange) error {
	if b.shapeTs != row.CommitTs {
		b.shapeTs, b.shape = row.CommitTs, 0
	}
	pre, post := row.PreColumns, row.Columns
	keyedPre := len(pre) > 0 && keyFlag(pre) != 0
	keyedPost := len(post) > 0 && keyFlag(post) != 0
	moved := len(pre) > 0 && len(post) > 0 && keyMoved(pre, post)
	writes := keyedPost && (len(pre) == 0 || moved)
	deletes := keyedPre && (len(post) == 0 || moved)
	if !keyedPre && !keyedPost && (hasFlag(pre, codec.FlagUniqueKey) || hasFlag(post, codec.FlagUniqueKey)) {
		// A table without a key but with a unique index is no multiset:
		// every row is a key of its own there.
		writes, deletes = len(post) > 0, len(pre) > 0
	}
	if deletes && b.shape&shapeWrote != 0 && b.shape&shapeWhole == 0 {
		b.shape |= shapeWhole
		if b.open && b.openTs == row.CommitTs {
			return &SplitTooLateError{Table: b.table, CommitTs: row.CommitTs}
		}
	}
	if writes {
		b.shape |= shapeWrote
	}
	return nil
}

// clearOrder empties r.order.
func (r *runner) clearOrder() {
	for _, b := range r.order {
		b.listed = false
	}
	clear(r.order)
	r.order = r.order[:0]
}

// closeSplits hands out the rest of every commit ts splitAll left open,
// once it is complete: when the commit ts moves on, at a DDL and at the
// source's end.
func (r *runner) closeSplits() error {
	for i, b := range r.opened {
		if err := r.dispatch(b); err != nil {
			r.opened = r.opened[i+1:]
			return err
		}
	}
	clear(r.opened)
	r.opened = r.opened[:0]
	return nil
}

// barrier hands out every row held and has every worker commit (after the
// DDL handed out before, which is ahead of the commit in its worker's
// queue).
func (r *runner) barrier() error {
	if err := r.closeSplits(); err != nil {
		return err
	}
	if err := r.dispatchAll(); err != nil {
		return err
	}
	if err := r.flush(r.workers); err != nil {
		return err
	}
	if err := r.waitDDL(); err != nil {
		return err
	}
	r.forgetTables()
	return nil
}

// forgetTables drops every table's buffer, all of them empty: tables come
// and go with DDLs.
func (r *runner) forgetTables() {
	clear(r.tables)
	for _, w := range r.workers {
		w.tables = 0
	}
}

// touches reports whether one of tables is t, compared as DDLScoper says.
func touches(tables []Table, t Table) bool {
	return slices.ContainsFunc(tables, func(n Table) bool {
		return (n.Schema == "" || strings.EqualFold(n.Schema, t.Schema)) && strings.EqualFold(n.Name, t.Name)
	})
}

// flush has workers ws commit, and waits for them.
func (r *runner) flush(ws []*worker) error {
	done := make(chan error, len(ws))
	for _, w := range ws {
		if err := r.send(w, workItem{flush: done}); err != nil {
			return err
		}
	}
	for range ws {
		select {
		case err := <-done:
			if err != nil {
				return err
			}
		case <-r.ctx.Done():
			return context.Cause(r.ctx)
		}
	}
	return nil
}

// ddlJob is a DDL handed to a worker: it commits its own transaction, waits
// for flushes commits from the other workers holding rows of the DDL's
// tables, runs the DDL, and reports on done.
type ddlJob struct {
	ddl     *codec.DDL
	mark    DDLMark
	flushes int
	flushed chan error // the other workers' commits, flushes of them
	done    chan error // one send, when the DDL ran or could not
}

// ddl hands DDL d to a worker, after the rows before it of the tables it
// touches, and reads on while it runs: see "Ordering, batching and
// parallelism" in the package doc.
func (r *runner) ddl(ev *codec.DDL, mark DDLMark) error {
	// The worker runs it after the source moved on, which may reuse the
	// event's memory.
	d := *ev
	d.Tables = slices.Clone(ev.Tables)
	return r.handOut(&d, mark)
}

func (r *runner) handOut(d *codec.DDL, mark DDLMark) error {
	t0 := time.Now()
	defer func() { r.res.BarrierTime += time.Since(t0) }()
	if len(r.workers) == 1 {
		return r.handOutInOrder(d, mark)
	}
	// One DDL at a time: the next one's scope is read from a catalog this
	// one may change.
	if err := r.waitDDL(); err != nil {
		return err
	}
	tables, scoped, err := r.ddlScope(d)
	if err != nil {
		return err
	}
	// ws: the workers holding rows of the DDL's tables, which commit before
	// it runs. r.tables lists every table with rows since the last full
	// barrier, so no worker's transaction holds a table it does not list.
	var ws []*worker
	if scoped {
		for t, b := range r.tables {
			if !touches(tables, t) {
				continue
			}
			if err := r.dispatch(b); err != nil {
				return err
			}
			if !slices.Contains(ws, b.worker) {
				ws = append(ws, b.worker)
			}
		}
	} else {
		if err := r.dispatchAll(); err != nil {
			return err
		}
		ws = r.workers
	}
	// The DDL's tables' later rows go to exec: a worker that holds rows of
	// them and commits anyway, or else the one holding the fewest tables
	// (a table a DDL creates would otherwise always land on one worker).
	exec := r.leastLoaded()
	if len(ws) > 0 {
		exec = ws[0]
	}
	job := &ddlJob{ddl: d, mark: mark, flushed: make(chan error, len(ws)), done: make(chan error, 1)}
	for _, w := range ws {
		if w == exec {
			continue
		}
		job.flushes++
		if err := r.send(w, workItem{flush: job.flushed}); err != nil {
			return err
		}
	}
	if err := r.send(exec, workItem{ddl: job}); err != nil {
		return err
	}
	r.pending = job
	if !scoped {
		r.forgetTables()
		return r.waitDDL()
	}
	// The DDL's tables' buffers are empty and no worker but exec will hold
	// their rows from before it: dropped here, the list stays the tables
	// live since the last full barrier, not every table a log ever created
	// and dropped. Their rows from after it go to exec, behind it, until
	// the loop sees it ran.
	for t := range r.tables {
		if touches(tables, t) {
			r.dropTable(t)
		}
	}
	// The other workers keep their transactions open across the DDL; the
	// fences waitDDL sends once it saw the DDL run make each commit before
	// it next writes one of its tables.
	r.pin, r.pinTo = tables, exec
	return nil
}

// handOutInOrder hands DDL d to the one worker, behind every row read
// before it: its queue's order is the log's, so the DDL needs no scope
// (whose catalog read would race the DDLs queued before it) and the loop
// waits for none of them. A DDL that fails fails the run (worker.runDDL),
// and the last one handed out runs after every earlier one, so pending
// need only hold the last.
func (r *runner) handOutInOrder(d *codec.DDL, mark DDLMark) error {
	var tables []Table
	scoped := false
	if r.eventScope {
		var err error
		if tables, scoped, err = r.ddlScope(d); err != nil {
			return err
		}
	}
	if scoped {
		for t, b := range r.tables {
			if touches(tables, t) {
				if err := r.dispatch(b); err != nil {
					return err
				}
			}
		}
	} else if err := r.dispatchAll(); err != nil {
		return err
	}
	w := r.workers[0]
	job := &ddlJob{ddl: d, mark: mark, done: make(chan error, 1)}
	if err := r.send(w, workItem{ddl: job}); err != nil {
		return err
	}
	r.pending = job
	if !scoped {
		r.forgetTables()
		return nil
	}
	for t := range r.tables {
		if touches(tables, t) {
			r.dropTable(t)
		}
	}
	return nil
}

// ddlScope returns the tables DDL d touches, scoped false when it is a
// barrier for every table: when the sink cannot tell (DDLScoper), or in
// commit order.
func (r *runner) ddlScope(d *codec.DDL) (tables []Table, scoped bool, err error) {
	sc, ok := r.sink.(DDLScoper)
	if !ok || r.ordered {
		return nil, false, nil
	}
	return sc.DDLTables(r.ctx, d)
}

// send queues item for worker w.
func (r *runner) send(w *worker, item workItem) error {
	select {
	case w.in <- item:
		return nil
	case <-r.ctx.Done():
		return context.Cause(r.ctx)
	}
}

// waitDDL waits for the pending DDL to run.
func (r *runner) waitDDL() error {
	job := r.pending
	if job == nil {
		return nil
	}
	select {
	case err := <-job.done:
		pin, exec := r.pin, r.pinTo
		r.pending, r.pin, r.pinTo = nil, nil, nil
		if err != nil || pin == nil {
			return err
		}
		// From here on the DDL's tables may go to any worker. A worker
		// whose transaction began before the DDL ended (open when it was
		// handed out, or begun, of other tables, while it ran) commits
		// before it writes one of them: MariaDB refuses a transaction
		// whose snapshot predates a table's DDL to write the table (error
		// 159, "insufficient history for index"). The fence is ahead of
		// every row the loop hands the worker after this.
		for _, w := range r.workers {
			if w == exec {
				continue
			}
			if err := r.send(w, workItem{fence: pin}); err != nil {
				return err
			}
		}
		return nil
	case <-r.ctx.Done():
		return context.Cause(r.ctx)
	}
}

// retry runs f until it succeeds, fails with an error that is not
// transient, or MaxRetries retries were made, waiting RetryBackoff (doubling)
// between attempts.
func (r *runner) retry(f func() error, onRetry func(attempt int, err error)) error {
	b := retry.Backoff{First: r.o.RetryBackoff, Max: max(maxRetryBackoff, r.o.RetryBackoff)}
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil || !IsTransient(err) || attempt > r.o.MaxRetries || r.ctx.Err() != nil {
			return err
		}
		onRetry(attempt, err)
		if retry.Sleep(r.ctx, b.Wait(attempt-1)) != nil {
			return context.Cause(r.ctx)
		}
	}
}

type workItem struct {
	table Table
	rows  []*codec.RowChange
	group []TableRows // ordered mode: every table's rows of one commit ts (table and rows unset)
	// copies are the row copies the rows point into, given back to the
	// pool when the transaction holding them commits.
	copies []*rowCopy
	flush  chan<- error // a commit request when not nil
	// fence, when not nil, names the tables of a DDL that ran while the
	// worker's transaction may have been open: it commits before it
	// writes one of them.
	fence []Table
	ddl   *ddlJob // a DDL to run when not nil
	// open: the last commit ts of rows goes on in the table's next item
	// (runner.splitAll), so the transaction may not commit before it;
	// closes: an item without rows that ends the table's open commit ts.
	open, closes bool
}

// parts returns the tables' rows of an item (none for a DDL's).
func (it *workItem) parts() []TableRows {
	if it.ddl != nil {
		return nil
	}
	if it.group != nil {
		return it.group
	}
	return []TableRows{{Table: it.table, Rows: it.rows}}
}

// worker applies the rows of its tables in one transaction at a time.
type worker struct {
	r  *runner
	id int
	in chan workItem

	tx      Tx
	pending []workItem       // the items of the open transaction, to replay after a transient error
	marks   map[Table]uint64 // the highest commit ts of each table in the open transaction
	txRows  int
	fenced  []Table // tables of DDLs run since the open transaction began (workItem.fence)
	open    []Table // tables whose commit ts the open transaction holds in part (workItem.open)
	// shed: the open transaction outgrew TxnRows while a commit ts was
	// open in it, and its rows were let go (see shedRows); lostTo is the
	// error that then lost it, if one did.
	shed   bool
	lostTo error

	tables int // the runner's table buffers that name this worker (runner.workerFor; the runner's goroutine alone uses it)

	// txDDL says whether the sink's Txs run DDLs (DDLTx), once a Tx was
	// begun (knowsTx); txDDLs counts the DDLs in the open transaction.
	txDDL, knowsTx bool
	txDDLs         int
}

// maxTxDDLs bounds the DDLs one transaction holds (DDLTx): a log of DDLs
// and few rows commits now and then, and a retry replays a bounded list.
const maxTxDDLs = 256

func (w *worker) run() {
	defer w.r.wg.Done()
	defer w.rollback()
	for item := range w.in {
		if item.ddl != nil {
			item.ddl.done <- w.runDDL(item.ddl)
			continue
		}
		if item.flush != nil {
			err := context.Cause(w.r.ctx)
			if err == nil {
				if err = w.commit(); err != nil {
					w.r.fail(err)
				}
			}
			item.flush <- err
			continue
		}
		if w.r.ctx.Err() != nil {
			continue // drain: the runner is stopping
		}
		if item.fence != nil {
			if w.holdsTx() {
				w.fence(item.fence)
			}
			continue
		}
		if item.closes {
			w.setOpen(item.table, false)
			w.commitIfFull()
			continue
		}
		// A transaction that holds a commit ts in part cannot commit to
		// cross a DDL's fence: it commits before the first one opens.
		// Fences come only from a DDL, and the loop closes every open
		// commit ts before a DDL.
		if w.crossesFence(&item) || item.open && len(w.open) == 0 && len(w.fenced) > 0 {
			if len(w.open) > 0 {
				w.r.fail(fmt.Errorf("apply: internal error: worker %d must commit to write %s after a DDL, while the commit ts of %s is open in its transaction", w.id, item.table, w.open[0]))
				continue
			}
			if err := w.commit(); err != nil {
				w.r.fail(err)
				continue
			}
		}
		t0 := time.Now()
		err := w.apply(item)
		w.r.writeNs.Add(int64(time.Since(t0)))
		if err != nil {
			w.r.fail(err)
			continue
		}
		if item.group == nil {
			w.setOpen(item.table, item.open)
		}
		w.commitIfFull()
	}
}

// holdsTx reports whether the worker's transaction holds anything: what
// it has pending, or rows it let go (shedRows).
func (w *worker) holdsTx() bool { return len(w.pending) > 0 || w.shed }

// setOpen notes whether the open transaction holds table t's last commit
// ts in part.
func (w *worker) setOpen(t Table, open bool) {
	i := slices.Index(w.open, t)
	switch {
	case open && i < 0:
		w.open = append(w.open, t)
	case !open && i >= 0:
		w.open = slices.Delete(w.open, i, i+1)
	}
}

// commitIfFull commits the open transaction once it holds TxnRows rows;
// while it holds a commit ts in part, which it cannot commit, it lets go of
// the rows it holds instead (shedRows).
func (w *worker) commitIfFull() {
	if w.txRows < w.r.o.TxnRows {
		return
	}
	if len(w.open) > 0 {
		w.shedRows()
		return
	}
	if err := w.commit(); err != nil {
		w.r.fail(err)
	}
}

// shedRows gives the copies of the open transaction's rows back: a
// transaction that holds a commit ts in part may hold more rows than
// memory, so it keeps them for no replay. An error that loses the
// transaction then loses it for good (replay): the run fails, naming it,
// and a rerun resumes from the progress, which recorded none of it. The
// DDLs it holds (DDLTx) stay listed: they own no copies, and the commit
// counts them.
func (w *worker) shedRows() {
	kept := w.pending[:0]
	for _, it := range w.pending {
		if it.ddl != nil {
			kept = append(kept, it)
			continue
		}
		w.r.release(it.copies)
	}
	clear(w.pending[len(kept):])
	w.pending = kept
	w.shed = true
}

// runDDL runs a DDL: inside the open transaction when the worker is the only
// one and the sink's Txs can (DDLTx); else it commits the worker's
// transaction, waits for the other workers holding rows of the DDL's tables
// to commit theirs, and runs the DDL by itself.
func (w *worker) runDDL(j *ddlJob) error {
	r := w.r
	if err := context.Cause(r.ctx); err != nil {
		return err
	}
	if j.flushes == 0 && len(r.workers) == 1 && !r.ordered && w.knowsTx && w.txDDL {
		return w.ddlInTx(j)
	}
	if err := w.commit(); err != nil {
		r.fail(err)
		return err
	}
	for range j.flushes {
		select {
		case err := <-j.flushed:
			if err != nil {
				return err // the flushing worker failed the run
			}
		case <-r.ctx.Done():
			return context.Cause(r.ctx)
		}
	}
	t0 := time.Now()
	err := r.retry(func() error { return r.sink.ApplyDDL(r.ctx, j.ddl, j.mark) }, func(attempt int, err error) {
		r.retries.Add(1)
		r.o.Logger.Warn("apply: retrying DDL", "commit_ts", j.ddl.CommitTs, "query", j.ddl.Query, "attempt", attempt, "error", err)
	})
	r.ddlNs.Add(int64(time.Since(t0)))
	if err != nil {
		r.fail(err)
		return err
	}
	r.appliedMu.Lock()
	r.res.AppliedDDL = j.mark
	r.appliedMu.Unlock()
	r.ddls.Add(1)
	return nil
}

// ddlInTx runs DDL j in the worker's transaction (DDLTx): it commits with
// the rows around it, at TxnRows rows or maxTxDDLs DDLs, and counts as
// applied then.
func (w *worker) ddlInTx(j *ddlJob) error {
	t0 := time.Now()
	err := w.apply(workItem{ddl: j})
	w.r.ddlNs.Add(int64(time.Since(t0)))
	switch {
	case err == nil && w.txDDLs >= maxTxDDLs:
		err = w.commit()
	case err != nil && !IsTransient(err) && w.r.ctx.Err() == nil:
		// The DDL fails for good, and took the rows before it down with
		// the transaction: commit them without it, as a DDL run on its
		// own would have found them.
		w.pending = w.pending[:len(w.pending)-1]
		w.txDDLs--
		if w.tx != nil {
			_ = w.tx.Rollback()
			w.tx = nil
		}
		if cerr := w.commit(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}
	if err != nil {
		w.r.fail(err)
	}
	return err
}

func (w *worker) rollback() {
	if w.tx != nil {
		_ = w.tx.Rollback()
		w.tx = nil
	}
	w.pending = w.pending[:0]
	clear(w.marks)
	w.txRows = 0
	w.txDDLs = 0
	w.fenced = w.fenced[:0]
	w.open = w.open[:0]
	w.shed, w.lostTo = false, nil
}

// fence notes the tables of a DDL run while the open transaction was, each
// once: a transaction open across thousands of DDLs keeps a list as long as
// the tables they touched, not as the DDLs.
func (w *worker) fence(tables []Table) {
	for _, t := range tables {
		if !touches(w.fenced, t) {
			w.fenced = append(w.fenced, t)
		}
	}
}

// crossesFence reports whether item writes a table of a DDL that ran while
// the open transaction was.
func (w *worker) crossesFence(item *workItem) bool {
	if len(w.fenced) == 0 {
		return false
	}
	for _, p := range item.parts() {
		if touches(w.fenced, p.Table) {
			return true
		}
	}
	return false
}

// apply adds item to the open transaction, replaying the transaction in a new
// one after a transient error.
func (w *worker) apply(item workItem) error {
	w.pending = append(w.pending, item)
	if item.ddl != nil {
		w.txDDLs++
	}
	if w.marks == nil {
		w.marks = map[Table]uint64{}
	}
	for _, p := range item.parts() {
		w.marks[p.Table] = p.Rows[len(p.Rows)-1].CommitTs
		w.txRows += len(p.Rows)
	}
	return w.r.retry(func() error {
		if w.tx == nil {
			// A new transaction, or one lost to a transient error: begin
			// one and apply everything pending (this item included).
			return w.replay()
		}
		// The usual path: only the new item needs applying.
		err := applyItem(w.r.ctx, w.tx, &item)
		if err != nil {
			_ = w.tx.Rollback()
			w.tx = nil
			w.lostTo = err
		}
		return err
	}, w.onRetry)
}

// replay begins a transaction and applies every pending item in it.
func (w *worker) replay() error {
	if w.shed {
		return w.unreplayable()
	}
	tx, err := w.r.sink.Begin(w.r.ctx)
	if err != nil {
		return err
	}
	w.tx = tx
	if !w.knowsTx {
		_, w.txDDL = tx.(DDLTx)
		w.knowsTx = true
	}
	for i := range w.pending {
		if err := applyItem(w.r.ctx, tx, &w.pending[i]); err != nil {
			_ = tx.Rollback()
			w.tx = nil
			return err
		}
	}
	return nil
}

// applyItem applies an item's rows in tx: a group through the Tx's
// GroupApplier when it has one, else table by table in the group's order.
func applyItem(ctx context.Context, tx Tx, it *workItem) error {
	if j := it.ddl; j != nil {
		return tx.(DDLTx).ApplyDDL(ctx, j.ddl, j.mark)
	}
	if it.group != nil {
		if ga, ok := tx.(GroupApplier); ok {
			return ga.ApplyGroup(ctx, it.group)
		}
	}
	for _, p := range it.parts() {
		if err := tx.ApplyRows(ctx, p.Table, p.Rows); err != nil {
			return err
		}
	}
	return nil
}

func (w *worker) commit() error {
	if len(w.open) > 0 {
		// The loop closes every open commit ts before it asks for a
		// commit: committing now would record part of one as applied.
		return fmt.Errorf("apply: internal error: worker %d asked to commit while the commit ts of %s is open in its transaction", w.id, w.open[0])
	}
	if !w.holdsTx() {
		w.fenced = w.fenced[:0]
		return nil
	}
	t0 := time.Now()
	defer func() { w.r.commitNs.Add(int64(time.Since(t0))) }()
	marks := make([]Mark, 0, len(w.marks))
	for t, ts := range w.marks {
		marks = append(marks, Mark{Table: t, CommitTs: ts})
	}
	unsure := false // a Commit failed in a way that may have committed
	err := w.r.retry(func() error {
		if unsure {
			// The progress rows are written in the transaction they
			// describe, so they tell whether it committed: replaying a
			// committed one would insert the rows of a keyless table
			// twice.
			landed, err := w.landed(marks)
			if err != nil || landed {
				return err
			}
			unsure = false
		}
		if w.tx == nil {
			if err := w.replay(); err != nil {
				return err
			}
		}
		err := w.tx.Commit(w.r.ctx, marks)
		if err != nil {
			_ = w.tx.Rollback()
			unsure = IsTransient(err)
			w.lostTo = err
		}
		w.tx = nil
		return err
	}, w.onRetry)
	if err != nil {
		return err
	}
	w.r.recordApplied(marks)
	w.recordDDLs()
	w.r.rows.Add(int64(w.txRows))
	w.r.txns.Add(1)
	for i := range w.pending {
		w.r.release(w.pending[i].copies)
	}
	clear(w.pending)
	w.pending = w.pending[:0]
	clear(w.marks)
	w.txRows = 0
	w.txDDLs = 0
	w.fenced = w.fenced[:0]
	w.shed, w.lostTo = false, nil
	return nil
}

// unreplayable is the error of a transaction lost after it shed its rows.
func (w *worker) unreplayable() error {
	tables := slices.SortedFunc(maps.Keys(w.marks), func(a, b Table) int { return strings.Compare(a.String(), b.String()) })
	var b strings.Builder
	for i, t := range tables {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s up to commit ts %d", t, w.marks[t])
	}
	err := fmt.Errorf("%w: worker %d lost a transaction of %d rows (%s), past Options.TxnRows while a commit ts in it was open, so it kept no copy to replay; none of it committed, and a rerun resumes from the recorded progress",
		ErrTooLargeToReplay, w.id, w.txRows, b.String())
	if w.lostTo != nil {
		// %v: the cause was transient, and this is not (a retry of it
		// fails the same way).
		err = fmt.Errorf("%w: %v", err, w.lostTo)
	}
	return err
}

// recordDDLs counts the DDLs of a committed transaction (DDLTx) as applied.
func (w *worker) recordDDLs() {
	if w.txDDLs == 0 {
		return
	}
	last := w.lastDDL()
	w.r.appliedMu.Lock()
	w.r.res.AppliedDDL = last.mark
	w.r.appliedMu.Unlock()
	w.r.ddls.Add(int64(w.txDDLs))
}

// lastDDL returns the open transaction's last DDL, nil when it holds none.
func (w *worker) lastDDL() *ddlJob {
	for i := len(w.pending) - 1; i >= 0; i-- {
		if j := w.pending[i].ddl; j != nil {
			return j
		}
	}
	return nil
}

// recordApplied raises Result.Applied to the marks of a committed
// transaction.
func (r *runner) recordApplied(marks []Mark) {
	r.appliedMu.Lock()
	defer r.appliedMu.Unlock()
	for _, m := range marks {
		if m.CommitTs > r.res.Applied[m.Table] {
			r.res.Applied[m.Table] = m.CommitTs
		}
	}
}

// landed reports whether the sink recorded every mark: only this worker
// writes its tables' progress, so it then holds this transaction's commit.
func (w *worker) landed(marks []Mark) (bool, error) {
	p, err := w.r.sink.Progress(w.r.ctx)
	if err != nil {
		return false, err
	}
	if j := w.lastDDL(); j != nil && !p.DDL.covers(j.mark.CommitTs, j.mark.Count-1) {
		return false, nil
	}
	for _, m := range marks {
		if ts, ok := p.Tables[m.Table]; !ok || ts < m.CommitTs {
			return false, nil
		}
	}
	return true, nil
}

func (w *worker) onRetry(attempt int, err error) {
	w.r.retries.Add(1)
	w.r.o.Logger.Warn("apply: retrying transaction", "worker", w.id, "rows", w.txRows, "attempt", attempt, "error", err)
}
