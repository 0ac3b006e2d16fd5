package meta_test

// The split-table DDL scenario with a failover, end to end through the real
// writer, coordinator, GC and reader: the equivalent of TiCDC's
// consistent_ddl_for_split_tables and consistent_ddl_for_split_tables_with_failover
// integration cases, which guard the data losses of tiflow#5486 (the
// watermark passed a table that had no redo writer yet) and tiflow#6277 (the
// watermark passed rows held behind a DDL).
//
// The helpers at the top (truth, readRange, checker) are shared with
// schedule_test.go.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/gc"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/segment"
	"github.com/redokit/redokit/writer"
)

// tev is one genuine upstream event: what the log must hold.
type tev struct {
	span writer.SpanID
	ev   codec.Event
	key  string // its encoding: the identity of an exact duplicate
}

// truth is everything the upstream produced, in the order it produced it.
type truth struct {
	evs []tev
}

func encKey(ev *codec.Event) string { return string(codec.AppendEvent(nil, ev)) }

func (tr *truth) add(span writer.SpanID, ev codec.Event) {
	tr.evs = append(tr.evs, tev{span: span, ev: ev, key: encKey(&ev)})
}

// of returns the events of span with lo < commit ts ≤ hi, in order.
func (tr *truth) of(span writer.SpanID, lo, hi uint64) []codec.Event {
	var out []codec.Event
	for _, e := range tr.evs {
		if ts := e.ev.CommitTs(); e.span == span && ts > lo && ts <= hi {
			out = append(out, e.ev)
		}
	}
	return out
}

// expect returns the keys of the events with lo < commit ts ≤ hi.
func (tr *truth) expect(lo, hi uint64, keep func(tev) bool) map[string]*codec.Event {
	out := map[string]*codec.Event{}
	for i := range tr.evs {
		e := &tr.evs[i]
		if ts := e.ev.CommitTs(); ts > lo && ts <= hi && (keep == nil || keep(*e)) {
			out[e.key] = &e.ev
		}
	}
	return out
}

// describe names an event for failure messages.
func describe(ev *codec.Event) string {
	if ev.IsDDL() {
		return fmt.Sprintf("ddl(%s %q)@%d", ev.DDL.Type, ev.DDL.Query, ev.CommitTs())
	}
	id := int64(-1)
	cols := ev.Row.Columns
	if len(cols) == 0 {
		cols = ev.Row.PreColumns
	}
	if len(cols) > 0 {
		id = cols[0].Value.Int()
	}
	return fmt.Sprintf("%s#%d/%d %s@%d", ev.Row.Table.Name, ev.Row.Table.PhysicalID, id, ev.Row.Op(), ev.CommitTs())
}

// readRange reads (lo, hi] through the reader and checks what the reader
// promises for any range: nothing outside it, commit-ts order, rows before
// the DDLs of their ts. It returns the events (cloned) and the stats.
func readRange(ctx context.Context, b *blob.Bucket, logID string, lo, hi uint64, keepDups bool) ([]*codec.Event, reader.Stats, error) {
	if hi <= lo {
		return nil, reader.Stats{}, nil
	}
	r, err := reader.Open(ctx, b, &reader.Options{LogID: logID, StartTs: lo, EndTs: hi, KeepDuplicates: keepDups})
	if err != nil {
		return nil, reader.Stats{}, err
	}
	defer r.Close()
	var out []*codec.Event
	var prev *codec.Event
	for {
		ev, err := r.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, r.Stats(), err
		}
		e := ev.Event.Clone()
		ts := e.CommitTs()
		if ts <= lo || ts > hi {
			return nil, r.Stats(), fmt.Errorf("invariant 2: read (%d, %d] returned %s outside the range", lo, hi, describe(e))
		}
		if prev != nil {
			switch pts := prev.CommitTs(); {
			case ts < pts:
				return nil, r.Stats(), fmt.Errorf("invariant 2: read (%d, %d] returned %s after %s", lo, hi, describe(e), describe(prev))
			case ts == pts && prev.IsDDL() && !e.IsDDL():
				return nil, r.Stats(), fmt.Errorf("invariant 2: read (%d, %d] returned row %s after the DDL %s of its ts", lo, hi, describe(e), describe(prev))
			}
		}
		prev = e
		out = append(out, e)
	}
	return out, r.Stats(), nil
}

// diff compares what was read with what must be there, modulo exact
// duplicates: every wanted event read, nothing else.
func diff(got []*codec.Event, want map[string]*codec.Event) error {
	seen := map[string]bool{}
	var extra, missing []string
	for _, ev := range got {
		k := encKey(ev)
		seen[k] = true
		if want[k] == nil {
			extra = append(extra, describe(ev))
		}
	}
	for k, ev := range want {
		if !seen[k] {
			missing = append(missing, describe(ev))
		}
	}
	if len(extra) == 0 && len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	slices.Sort(extra)
	return fmt.Errorf("missing %d %s; unexpected %d %s", len(missing), head(missing), len(extra), head(extra))
}

func head(s []string) string {
	if len(s) > 8 {
		return fmt.Sprint(s[:8]) + "…"
	}
	return fmt.Sprint(s)
}

// checker holds a log to invariants 1 to 4 of the design after each step.
// Its methods return errors rather than fail, so that a test can prove a
// check catches a broken rule.
type checker struct {
	b      *blob.Bucket
	logID  string
	truth  *truth
	lastG  uint64
	lastCP uint64
	reads  int // ranges read, for the log
}

// afterTick checks a meta object the coordinator just produced.
func (c *checker) afterTick(ctx context.Context, m meta.Meta) error {
	// Invariant 3.
	if m.ResolvedTs < c.lastG {
		return fmt.Errorf("invariant 3: global resolved ts went backwards: %d → %d", c.lastG, m.ResolvedTs)
	}
	if m.CheckpointTs < c.lastCP {
		return fmt.Errorf("invariant 3: checkpoint went backwards: %d → %d", c.lastCP, m.CheckpointTs)
	}
	if m.CheckpointTs > m.ResolvedTs {
		return fmt.Errorf("invariant 3: checkpoint %d above the global resolved ts %d", m.CheckpointTs, m.ResolvedTs)
	}
	c.lastG, c.lastCP = m.ResolvedTs, m.CheckpointTs
	persisted, _, err := meta.ReadMeta(ctx, c.b, c.logID)
	if err != nil {
		return err
	}
	if persisted.ResolvedTs != m.ResolvedTs || persisted.CheckpointTs != m.CheckpointTs {
		return fmt.Errorf("invariant 3: the meta object holds (%d, %d), the coordinator said (%d, %d)",
			persisted.CheckpointTs, persisted.ResolvedTs, m.CheckpointTs, m.ResolvedTs)
	}
	// Invariant 2: the recovery range reads back whole, ordered, bounded.
	got, _, err := readRange(ctx, c.b, c.logID, m.CheckpointTs, m.ResolvedTs, false)
	c.reads++
	if err != nil {
		return fmt.Errorf("invariant 2: read (%d, %d]: %w", m.CheckpointTs, m.ResolvedTs, err)
	}
	if err := diff(got, c.truth.expect(m.CheckpointTs, m.ResolvedTs, nil)); err != nil {
		return fmt.Errorf("invariant 2: read (checkpoint %d, global resolved %d]: %w", m.CheckpointTs, m.ResolvedTs, err)
	}
	return c.flushedReadable(ctx, m.CheckpointTs, m.ResolvedTs)
}

// flushedReadable is invariant 1: every event at or below a flushed ts a
// writer published for a span, and above the checkpoint, is readable, as
// far as a read can prove the log complete: up to the global resolved ts,
// or the lowest flushed ts the writers published when that is higher (a
// read above it is refused, reader.ErrUnproven).
func (c *checker) flushedReadable(ctx context.Context, cp, resolved uint64) error {
	states, err := meta.ListWriterStates(ctx, c.b, c.logID, nil)
	if err != nil {
		return err
	}
	bound, lowest := resolved, uint64(0)
	for i, st := range slices.Collect(maps.Values(states)) {
		if i == 0 || st.FlushedTs < lowest {
			lowest = st.FlushedTs
		}
	}
	bound = max(bound, lowest)
	claims := map[writer.SpanID]uint64{}
	hi := cp
	for _, st := range states {
		for _, s := range st.Spans {
			id := writer.SpanID(s.Span)
			claims[id] = max(claims[id], min(s.Ts, bound))
			hi = max(hi, min(s.Ts, bound))
		}
	}
	if hi == cp {
		return nil
	}
	got, _, err := readRange(ctx, c.b, c.logID, cp, hi, false)
	c.reads++
	if err != nil {
		return fmt.Errorf("invariant 1: read (%d, %d]: %w", cp, hi, err)
	}
	have := map[string]bool{}
	for _, ev := range got {
		have[encKey(ev)] = true
	}
	for _, span := range slices.Sorted(maps.Keys(claims)) {
		for _, ev := range c.truth.of(span, cp, claims[span]) {
			if !have[encKey(&ev)] {
				return fmt.Errorf("invariant 1: span %d was published flushed to %d, but %s is not readable", span, claims[span], describe(&ev))
			}
		}
	}
	return nil
}

// afterGC is invariant 4: GC deleted only segments wholly below the
// checkpoint, or segments no read from the checkpoint needs by their
// writer's state: segments the fence rule does not accept (a zombie's, or
// an epoch's replaced without a fence), and those of a fenced epoch whose
// chain maximum and committed ts are both below the checkpoint.
func (c *checker) afterGC(cp uint64, deleted []string) error {
	states, err := meta.ListWriterStates(context.Background(), c.b, c.logID, nil)
	if err != nil {
		return err
	}
	for _, k := range deleted {
		n, err := segment.ParseName(k)
		if err != nil {
			return fmt.Errorf("invariant 4: GC deleted %s, not a segment: %w", k, err)
		}
		if !n.Active && n.MaxTs < cp {
			continue
		}
		if st := states[n.WriterID]; st != nil && n.Epoch < st.Epoch {
			if !st.Accepts(n) {
				continue
			}
			if i := slices.IndexFunc(st.Fences, func(f meta.Fence) bool { return f.Epoch == n.Epoch }); i >= 0 && st.Fences[i].MaxTs < cp && st.Fences[i].CommittedTs < cp {
				continue
			}
		}
		return fmt.Errorf("invariant 4: GC at checkpoint %d deleted %s, which holds events up to %d and is accepted by its writer's state", cp, k, n.MaxTs)
	}
	return nil
}

// backends are the stores the scenario and schedule tests run on.
func backends() map[string]func(t testing.TB) *blob.Bucket {
	return map[string]func(t testing.TB) *blob.Bucket{
		"mem": func(t testing.TB) *blob.Bucket {
			b := mem.New()
			t.Cleanup(func() { b.Close() })
			return b
		},
		"local": func(t testing.TB) *blob.Bucket {
			b, err := local.New(t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			return b
		},
	}
}

// writerOptions flush only when told, in small blocks and segments, so that
// a run makes many segments (and, on local disk, rotations).
func writerOptions(logID, writerID string) *writer.Options {
	return &writer.Options{
		LogID: logID, WriterID: writerID,
		FlushInterval:   time.Hour,
		MaxSegmentBytes: 8 << 10,
		BlockSize:       2 << 10,
		Workers:         2,
		RetryAttempts:   2,
		RetryBackoff:    time.Millisecond, RetryMaxBackoff: time.Millisecond,
	}
}

// Table IDs of the scenario. Span IDs: the DDL span, and per table
// 10*physical ID + part.
const (
	ddlSpan  writer.SpanID = 1
	tableT   int64         = 10 // t before TRUNCATE
	tableT2  int64         = 11 // t after TRUNCATE (a new physical ID)
	tableU   int64         = 20 // created mid-run
	scnLogID               = "split-ddl"
)

func spanOf(table int64, part int) writer.SpanID { return writer.SpanID(table*10 + int64(part)) }

// scenario drives one run.
type scenario struct {
	t      *testing.T
	ctx    context.Context
	b      *blob.Bucket
	coord  *meta.Coordinator
	chk    *checker
	tr     *truth
	r      *rand.Rand
	owner  map[writer.SpanID]*writer.Writer
	table  map[writer.SpanID]int64 // the physical table of each row span
	nextID int64
	c2     bool // t has the column added by the first DDL
}

func (s *scenario) must(err error) {
	s.t.Helper()
	if err != nil {
		s.t.Fatal(err)
	}
}

func (s *scenario) open(id string) *writer.Writer {
	s.t.Helper()
	w, err := writer.Open(s.ctx, s.b, writerOptions(scnLogID, id))
	s.must(err)
	s.must(s.coord.AddWriter(s.ctx, id))
	return w
}

// rowEvent makes a row of a table; the first DDL adds column c2 to t.
func (s *scenario) rowEvent(table int64, ts uint64) codec.Event {
	s.nextID++
	name := map[int64]string{tableT: "t", tableT2: "t", tableU: "u"}[table]
	cols := []codec.Column{
		{Name: "id", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey | codec.FlagHandleKey, Value: codec.IntValue(s.nextID)},
		{Name: "v", Type: codec.TypeVarchar, Value: codec.StringValue(fmt.Sprintf("r%d@%d", s.nextID, ts))},
	}
	if name == "t" && s.c2 {
		cols = append(cols, codec.Column{Name: "c2", Type: codec.TypeLong, Flags: codec.FlagNullable, Value: codec.IntValue(int64(ts))})
	}
	return codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{
		StartTs: ts - 1, CommitTs: ts,
		Table:   codec.TableName{Schema: "test", Name: name, PhysicalID: table},
		Columns: cols,
	}}
}

// emit writes the upstream's rows at ts: one or two row spans, chosen at
// random, get a row. The upstream remembers them whether or not a writer
// survives to flush them.
func (s *scenario) emit(ts uint64) {
	s.t.Helper()
	spans := slices.Sorted(maps.Keys(s.table))
	for range 1 + s.r.IntN(2) {
		span := spans[s.r.IntN(len(spans))]
		ev := s.rowEvent(s.table[span], ts)
		s.tr.add(span, ev)
		if w := s.owner[span]; w != nil {
			s.must(w.Write(s.ctx, span, ev))
		}
	}
}

func (s *scenario) ddl(ts uint64, typ codec.ActionType, query string, tables ...codec.DDLTable) {
	s.t.Helper()
	ev := codec.Event{Kind: codec.DDLEvent, DDL: codec.DDL{
		StartTs: ts - 1, CommitTs: ts, Type: typ, Query: query,
		Table: codec.TableName{Schema: "test", Name: tables[0].Name, PhysicalID: tables[0].PhysicalID}, Tables: tables,
	}}
	s.tr.add(ddlSpan, ev)
	s.must(s.owner[ddlSpan].Write(s.ctx, ddlSpan, ev))
}

// resolve advances the spans of the given (live) writers to ts, flushes
// them, ticks the coordinator and checks the invariants. It returns the meta
// object.
func (s *scenario) resolve(ts uint64, writers ...*writer.Writer) meta.Meta {
	s.t.Helper()
	for span, w := range s.owner {
		if slices.Contains(writers, w) {
			s.must(w.AdvanceResolved(span, ts))
		}
	}
	for _, w := range writers {
		_, err := w.Publish(s.ctx)
		s.must(err)
	}
	m, err := s.coord.Tick(s.ctx)
	s.must(err)
	s.must(s.chk.afterTick(s.ctx, m))
	return m
}

// lagCheckpoint moves the checkpoint to lag below G (the downstream applies
// behind the log), runs GC and checks it.
func (s *scenario) lagCheckpoint(m meta.Meta, lag uint64) {
	s.t.Helper()
	if m.ResolvedTs < lag || m.ResolvedTs-lag <= m.CheckpointTs {
		return
	}
	cp := m.ResolvedTs - lag
	s.must(s.coord.SetCheckpoint(s.ctx, cp))
	res, err := gc.Collect(s.ctx, s.b, scnLogID, &gc.Options{Below: cp})
	s.must(err)
	s.must(s.chk.afterGC(cp, res.DeletedKeys))
}

func TestSplitTableDDLWithFailover(t *testing.T) {
	for name, mk := range backends() {
		t.Run(name, func(t *testing.T) { runSplitTableDDL(t, mk(t)) })
	}
}

func runSplitTableDDL(t *testing.T, b *blob.Bucket) {
	ctx := context.Background()
	const start = 100
	coord, err := meta.OpenCoordinator(ctx, b, scnLogID, &meta.CoordinatorOptions{StartTs: start})
	if err != nil {
		t.Fatal(err)
	}
	tr := &truth{}
	s := &scenario{
		t: t, ctx: ctx, b: b, coord: coord, tr: tr, r: rand.New(rand.NewPCG(5486, 6277)),
		chk:   &checker{b: b, logID: scnLogID, truth: tr},
		owner: map[writer.SpanID]*writer.Writer{},
		table: map[writer.SpanID]int64{},
	}
	wa, wb := s.open("A"), s.open("B")
	defer wa.Close(ctx)

	// t is split into three spans: one on A, two on B. A also owns the DDL
	// span (TiCDC's table trigger).
	assign := func(span writer.SpanID, w *writer.Writer, at uint64, table int64) {
		s.must(coord.AddSpan(ctx, span, at))
		s.must(w.AddSpan(span, at))
		s.owner[span] = w
		if table != 0 {
			s.table[span] = table
		}
	}
	assign(ddlSpan, wa, start, 0)
	assign(spanOf(tableT, 1), wa, start, tableT)
	assign(spanOf(tableT, 2), wb, start, tableT)
	assign(spanOf(tableT, 3), wb, start, tableT)

	var m meta.Meta
	for ts := uint64(start + 1); ts < 200; ts++ {
		s.emit(ts)
		if ts%10 == 0 {
			m = s.resolve(ts, wa, wb)
			s.lagCheckpoint(m, 25)
		}
	}
	if m.ResolvedTs != 190 {
		t.Fatalf("global resolved ts %d after every span flushed 190", m.ResolvedTs)
	}

	// From here on the downstream stalls, as TiCDC's consistent_* cases
	// hang the MySQL sink with a failpoint: the checkpoint stays, and the
	// final recovery range holds every DDL below.
	//
	// ALTER TABLE t ADD COLUMN at 200, with a row of the same commit ts
	// (rows come first), on another writer than the DDL.
	s.must(wb.Write(ctx, spanOf(tableT, 2), s.rowEventAt(spanOf(tableT, 2), 200)))
	s.ddl(200, codec.ActionAddColumn, "ALTER TABLE t ADD COLUMN c2 INT", codec.DDLTable{TableName: codec.TableName{Schema: "test", Name: "t", PhysicalID: tableT}})
	s.c2 = true
	for ts := uint64(201); ts < 230; ts++ {
		s.emit(ts)
		if ts%10 == 0 {
			s.resolve(ts, wa, wb)
		}
	}

	// CREATE TABLE u at 230. The barrier goes first: until u's span exists,
	// nothing may let the watermark pass 230, however far the other spans
	// flush (tiflow#5486).
	s.must(coord.AddBarrier(ctx, "create-u", 230))
	s.ddl(230, codec.ActionCreateTable, "CREATE TABLE u (id BIGINT PRIMARY KEY, v VARCHAR(64))",
		codec.DDLTable{TableName: codec.TableName{Schema: "test", Name: "u", PhysicalID: tableU}, Role: codec.RoleCreated})
	for ts := uint64(231); ts <= 245; ts++ {
		s.emit(ts)
	}
	// The upstream already has rows of u in (230, 245]: u's span is not
	// there yet to write them.
	var uRows []codec.Event
	for ts := uint64(232); ts <= 245; ts += 3 {
		ev := s.rowEvent(tableU, ts)
		tr.add(spanOf(tableU, 1), ev)
		uRows = append(uRows, ev)
	}
	m = s.resolve(245, wa, wb)
	if m.ResolvedTs > 230 {
		t.Fatalf("the watermark passed the CREATE TABLE barrier: %d > 230 before u's span exists", m.ResolvedTs)
	}
	// u's span starts at 230 on B, behind B's flushed ts (245): its
	// catch-up events go to segments of their own.
	assign(spanOf(tableU, 1), wb, 230, tableU)
	s.must(wb.Write(ctx, spanOf(tableU, 1), uRows...))
	s.must(coord.ReleaseBarrier(ctx, "create-u"))
	m = s.resolve(245, wa, wb)
	if m.ResolvedTs != 245 {
		t.Fatalf("global resolved ts %d once u caught up to 245, want 245", m.ResolvedTs)
	}

	// B dies at 260 with events in (250, 259] written but never flushed.
	for ts := uint64(246); ts < 260; ts++ {
		s.emit(ts)
		if ts == 250 {
			s.resolve(ts, wa, wb)
		}
	}
	gBefore := s.chk.lastG
	fencer, err := meta.AcquireWriter(ctx, b, scnLogID, "B", nil) // takes B's ID: B is now a zombie
	s.must(err)
	// The zombie flushes what it had: it must not be able to publish.
	for span, w := range s.owner {
		if w == wb {
			s.must(wb.AdvanceResolved(span, 259))
		}
	}
	if _, err := wb.Publish(ctx); !errors.Is(err, meta.ErrFenced) {
		t.Fatalf("the fenced writer's flush: %v, want meta.ErrFenced", err)
	}
	if st, _, err := meta.ReadWriterState(ctx, b, scnLogID, "B"); err != nil || st.Epoch != fencer.Epoch() || st.FlushedTs > 250 {
		t.Fatalf("the zombie changed B's state: %+v, %v", st, err)
	}
	m = s.resolve(259, wa)
	if m.ResolvedTs != gBefore {
		t.Fatalf("with B's spans ownerless the watermark moved: %d → %d", gBefore, m.ResolvedTs)
	}

	// Failover: B's spans move to A at the log's checkpoint, and the
	// upstream replays them from there: A writes again what B had made
	// durable (duplicates) and what B lost.
	s.must(coord.RemoveWriter(ctx, "B"))
	cp := coord.Meta().CheckpointTs
	for span, w := range s.owner {
		if w != wb {
			continue
		}
		s.must(wa.AddSpan(span, cp))
		s.owner[span] = wa
		if evs := tr.of(span, cp, 259); len(evs) > 0 {
			s.must(wa.Write(ctx, span, evs...))
		}
	}
	m = s.resolve(259, wa)
	if m.ResolvedTs != 259 {
		t.Fatalf("global resolved ts %d once A caught up B's spans to 259, want 259", m.ResolvedTs)
	}
	got, st, err := readRange(ctx, b, scnLogID, cp, 259, true)
	s.must(err)
	if dups := len(got) - len(tr.expect(cp, 259, nil)); dups <= 0 {
		t.Fatalf("no duplicates in (%d, 259] after the failover replay (stats %+v)", cp, st)
	}

	for ts := uint64(260); ts < 300; ts++ {
		s.emit(ts)
		if ts%10 == 0 {
			s.resolve(ts, wa)
		}
	}

	// TRUNCATE TABLE t at 300: t's old physical table goes, a new one comes,
	// split in three again; B comes back (a new epoch) to take two of its
	// spans.
	s.must(coord.AddBarrier(ctx, "truncate-t", 300))
	s.ddl(300, codec.ActionTruncateTable, "TRUNCATE TABLE t",
		codec.DDLTable{TableName: codec.TableName{Schema: "test", Name: "t", PhysicalID: tableT}, Role: codec.RoleDropped},
		codec.DDLTable{TableName: codec.TableName{Schema: "test", Name: "t", PhysicalID: tableT2}, Role: codec.RoleCreated})
	m = s.resolve(300, wa)
	for part := 1; part <= 3; part++ {
		span := spanOf(tableT, part)
		if m.Spans[span] < 300 {
			t.Fatalf("old span %d only flushed to %d at the TRUNCATE", span, m.Spans[span])
		}
		s.must(wa.RemoveSpan(span))
		s.must(coord.RemoveSpan(ctx, span))
		delete(s.owner, span)
		delete(s.table, span)
	}
	wb2 := s.open("B")
	defer wb2.Close(ctx)
	if wb2.Epoch() <= fencer.Epoch() {
		t.Fatalf("B restarted at epoch %d, not after the fencer's %d", wb2.Epoch(), fencer.Epoch())
	}
	assign(spanOf(tableT2, 1), wa, 300, tableT2)
	assign(spanOf(tableT2, 2), wb2, 300, tableT2)
	assign(spanOf(tableT2, 3), wb2, 300, tableT2)
	s.must(coord.ReleaseBarrier(ctx, "truncate-t"))
	for ts := uint64(301); ts < 400; ts++ {
		s.emit(ts)
		if ts%10 == 0 {
			s.resolve(ts, wa, wb2)
		}
	}
	m = s.resolve(400, wa, wb2)
	if m.ResolvedTs != 400 {
		t.Fatalf("final global resolved ts %d, want 400", m.ResolvedTs)
	}

	// The recovery read: (checkpoint, final global resolved] is exactly the
	// upstream's events there, in order, modulo exact duplicates.
	got, _, err = readRange(ctx, b, scnLogID, m.CheckpointTs, m.ResolvedTs, false)
	s.must(err)
	s.must(diff(got, tr.expect(m.CheckpointTs, m.ResolvedTs, nil)))
	var ddls []uint64
	for _, ev := range got {
		if ev.IsDDL() {
			ddls = append(ddls, ev.CommitTs())
		}
	}
	if !slices.Equal(ddls, []uint64{200, 230, 300}) {
		t.Fatalf("the recovery range (%d, %d] holds DDLs at %v, want ADD COLUMN, CREATE TABLE and TRUNCATE at 200, 230, 300", m.CheckpointTs, m.ResolvedTs, ddls)
	}
	rep, err := reader.Verify(ctx, b, scnLogID, nil)
	s.must(err)
	if !rep.OK() {
		t.Fatalf("Verify: %v", rep.Errors())
	}
	t.Logf("final: checkpoint %d, resolved %d; %d events read, %d segments, %d fenced or shadowed; %d checks",
		m.CheckpointTs, m.ResolvedTs, len(got), rep.Sealed+rep.Active, rep.Ignored, s.chk.reads)
	if err := wb.Close(ctx); !errors.Is(err, meta.ErrFenced) {
		t.Errorf("closing the zombie: %v, want meta.ErrFenced", err)
	}
}

// rowEventAt records a row of span at ts in the truth and returns it.
func (s *scenario) rowEventAt(span writer.SpanID, ts uint64) codec.Event {
	ev := s.rowEvent(s.table[span], ts)
	s.tr.add(span, ev)
	return ev
}
