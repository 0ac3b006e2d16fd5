package redo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/conformance"
	"github.com/redokit/redokit/gc"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/segment"
	"github.com/redokit/redokit/writer"
)

// Harness is what the redo suite runs on: the blob suite's harness (the
// same one a backend passes to conformance.RunBucket) and, optionally, a
// network the fault tier can break.
type Harness struct {
	conformance.Harness

	// Network, when set, gives the Network tier a way to the store through
	// faults it turns on and off (a toxiproxy proxy in front of an emulator);
	// it is called once, with the tier's subtest. When nil, the tier injects
	// the same faults in the driver, through a blobtest.Faulty over a bucket
	// from MakeBucket.
	Network func(ctx context.Context, t conformance.TB) (*Network, error)
}

// Run runs the redo-level conformance suite on the buckets h makes: a small
// real redo log, written by the redo writer (on the append path when the
// driver can append, one object per flush otherwise), read back by the
// reader, with the coordinator, fencing, a restart, corruption and GC, then
// the fault tiers. Run it next to conformance.RunBucket, with the same
// conformance.Harness:
//
//	func TestRedo(t *testing.T) { redo.Run(t, redo.Harness{Harness: harness}) }
//
// Every subtest but Network runs once on the bucket ("Plain") and once under
// conformance.Prefix ("Prefixed"), on a new bucket each, and is named after
// what it proves:
//
//	ReadBack    two writers, five spans, DDLs with rows at their commit ts on the
//	            other writer: after every flush each event at or below the flushed
//	            ts reads back in commit-ts order (rows before the DDL of their ts),
//	            nothing above it does though it is buffered; a sub-range returns
//	            exactly its events; Verify finds a healthy log healthy
//	Restart     a writer abandoned mid-log (no Close) restarts under its ID at the
//	            next epoch from its flushed ts; the log reads back whole from both
//	            epochs' segments; the old process's later Close is fenced and harms
//	            nothing
//	Corruption  one byte of one sealed segment changed (by Put): Verify and a read
//	            through it name the segment's key; the read never returns short
//	Fencing     a second Open of a writer ID fences the first: its flush fails with
//	            meta.ErrFenced and changes nothing in the writer's state; a segment
//	            of its epoch above its fence (a zombie's late upload) is skipped by
//	            the reader and reported as fenced by Verify
//	Watermark   with spans advancing unevenly on two writers, the coordinator's
//	            global resolved ts is at most every writer's flushed ts, never goes
//	            backwards, is what the meta object holds, reaches the flushed ts
//	            once every span does; a checkpoint above it is refused
//	GC          at a checkpoint, GC deletes every sealed segment wholly below it and
//	            nothing else; a read from the checkpoint returns everything above it
//	Freshness   an older, valid copy of a metadata object (a restored version)
//	            is refused by name where it would be used: a meta object from
//	            before a span's registration by the next Tick, a writer state
//	            from before a lost segment by a read, a writer state of an
//	            older epoch by the next Open (no epoch number is taken twice)
//	Faults      the lying-store tier: the history checker's workload
//	            (conformance/torture) through a blobtest.Liar that loses answers,
//	            refuses writes, delays and reorders answers on every kind of put;
//	            one subtest per rule of the checker (no acknowledged event lost, no
//	            wrongful fence, no read short without an error, ...), failed with
//	            the evidence and the seed
//	Network     the network tier (once, not per prefix mode): one writer keeps
//	            writing and flushing while the faults of [Faults] come and go
//	            (latency, resets, a stall that clears, a slow link); see
//	            [Network] for what each subtest proves
//
// The store must be read-after-write consistent, in listings and in reads:
// every check looks once, right after the write it depends on, and none
// retries or waits for a store to settle. A harness that sets ListSettle is
// refused (the run fails, naming the reason, before any subtest): a redo
// log proves completeness from listings, and a listing that lags cannot
// prove absence, so every reader and GC would have to wait out the lag on
// every path. A harness without conditional writes is skipped (with its
// reason): a redo log cannot fence its writers there. Each subtest but
// Faults and Network (which bound themselves) has the deadline of
// Harness.Timeout.
func Run(t *testing.T, h Harness) {
	t.Helper()
	RunOn(conformance.Std(t), h)
}

// RunOn is Run on any conformance.T (a conformance.Recorder runs it from a
// program).
func RunOn(t conformance.T, h Harness) {
	t.Helper()
	if h.MakeBucket == nil {
		t.Fatalf("conformance: Harness.MakeBucket is nil")
	}
	if h.ListSettle != 0 {
		t.Fatalf("%s", listSettleRefusal(h.ListSettle))
	}
	if !h.ConditionalWrites {
		if h.ConditionalWritesReason == "" {
			t.Fatalf("conformance: Harness.ConditionalWrites is false but ConditionalWritesReason is empty")
		}
		t.Skipf("a redo log needs conditional writes (writer fencing, meta compare-and-swap); this backend has none: %s", h.ConditionalWritesReason)
	}
	for _, prefixed := range []bool{false, true} {
		name := "Plain"
		if prefixed {
			name = "Prefixed"
		}
		t.Run(name, func(t conformance.T) {
			r := &redoSuite{h: h, prefixed: prefixed}
			r.h.Subtest(t, "ReadBack", r.readBack)
			r.h.Subtest(t, "Restart", r.restart)
			r.h.Subtest(t, "Corruption", r.corruption)
			r.h.Subtest(t, "Fencing", r.fencing)
			r.h.Subtest(t, "Watermark", r.watermark)
			r.h.Subtest(t, "GC", r.gc)
			r.h.Subtest(t, "Freshness", r.freshness)
			t.Run("Faults", r.faultTier)
		})
	}
	t.Run("Network", (&redoSuite{h: h}).networkTier)
}

// listSettleRefusal is why Run refuses a harness that sets ListSettle.
func listSettleRefusal(settle time.Duration) string {
	return fmt.Sprintf("conformance/redo: Harness.ListSettle is %v, and a redo log needs a store whose listings and reads are read-after-write consistent (ListSettle 0). "+
		"A redo log proves completeness from listings: a reader and GC take a segment they did not list to be absent, and a listing that lags cannot prove absence, "+
		"so every reader and GC would have to wait out the lag on every path, which none does (a read would return without error and without acknowledged events). "+
		"The redo suite does not run on such a store; Harness.ListSettle is for the blob suite (conformance.RunBucket) alone", settle)
}

// redoSuite is one run of the subtests, plain or under conformance.Prefix.
type redoSuite struct {
	h        Harness
	prefixed bool
}

// redoLogID is the log every redo subtest writes.
const redoLogID = "conformance-log"

// redoOptions flush only when told, in small blocks and segments, so that a
// small workload makes many blocks, segments and (on an appendable store)
// rotations.
func redoOptions(writerID string) *writer.Options {
	return &writer.Options{
		LogID: redoLogID, WriterID: writerID,
		FlushInterval:   time.Hour,
		MaxSegmentBytes: 4 << 10,
		BlockSize:       1 << 10,
		Workers:         2,
		RetryAttempts:   3,
		RetryBackoff:    time.Millisecond, RetryMaxBackoff: 10 * time.Millisecond,
	}
}

// openWriter opens a writer, closed when the subtest ends.
func openWriter(t conformance.T, b *blob.Bucket, writerID string) *writer.Writer {
	t.Helper()
	w, err := writer.Open(t.Context(), b, redoOptions(writerID))
	if err != nil {
		t.Fatalf("writer.Open(%q): %v", writerID, err)
	}
	// The subtest's context is canceled before cleanups run.
	t.Cleanup(func() { w.Close(context.Background()) })
	return w
}

// workload is what the upstream produced: the events the log must hold.
type workload struct {
	evs  []codec.Event
	next int64
}

// row makes (and records) a row of a span's table with pad bytes of
// payload that lz4 cannot shrink much, so that segments fill and rotate.
func (wl *workload) row(span writer.SpanID, ts uint64, pad int) codec.Event {
	wl.next++
	v := make([]byte, pad)
	r := rand.New(rand.NewPCG(uint64(wl.next), ts))
	for i := range v {
		v[i] = 'a' + byte(r.IntN(26))
	}
	ev := codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{
		StartTs: ts - 1, CommitTs: ts,
		Table: codec.TableName{Schema: "conf", Name: fmt.Sprintf("t%d", span), PhysicalID: int64(span)},
		Columns: []codec.Column{
			{Name: "id", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey | codec.FlagHandleKey, Value: codec.IntValue(wl.next)},
			{Name: "v", Type: codec.TypeBlob, Value: codec.BytesValue(v)},
		},
	}}
	wl.evs = append(wl.evs, ev)
	return ev
}

// ddl makes (and records) a DDL.
func (wl *workload) ddl(ts uint64, query string) codec.Event {
	ev := codec.Event{Kind: codec.DDLEvent, DDL: codec.DDL{
		StartTs: ts - 1, CommitTs: ts, Type: codec.ActionAddColumn, Query: query,
		Table: codec.TableName{Schema: "conf", Name: "t", PhysicalID: 1},
	}}
	wl.evs = append(wl.evs, ev)
	return ev
}

// in returns the events with lo < commit ts ≤ hi.
func (wl *workload) in(lo, hi uint64) []codec.Event {
	var out []codec.Event
	for _, ev := range wl.evs {
		if ts := ev.CommitTs(); ts > lo && ts <= hi {
			out = append(out, ev)
		}
	}
	return out
}

// readRange reads (lo, hi] and checks the reader's promises for any range:
// nothing outside it, commit-ts order, rows before the DDLs of their ts.
func readRange(t conformance.T, b *blob.Bucket, lo, hi uint64) ([]codec.Event, reader.Stats, error) {
	r, err := reader.Open(t.Context(), b, &reader.Options{LogID: redoLogID, StartTs: lo, EndTs: hi})
	if err != nil {
		return nil, reader.Stats{}, err
	}
	defer r.Close()
	var out []codec.Event
	for {
		ev, err := r.Next(t.Context())
		if err == io.EOF {
			return out, r.Stats(), nil
		}
		if err != nil {
			return out, r.Stats(), err
		}
		e := *ev.Event.Clone()
		ts := e.CommitTs()
		if ts <= lo || ts > hi {
			return out, r.Stats(), fmt.Errorf("the read of (%d, %d] returned an event at %d, outside the range", lo, hi, ts)
		}
		if n := len(out); n > 0 {
			prev := &out[n-1]
			if ts < prev.CommitTs() {
				return out, r.Stats(), fmt.Errorf("the read of (%d, %d] returned ts %d after ts %d", lo, hi, ts, prev.CommitTs())
			}
			if ts == prev.CommitTs() && prev.IsDDL() && !e.IsDDL() {
				return out, r.Stats(), fmt.Errorf("the read of (%d, %d] returned a row at %d after the DDL of that ts", lo, hi, ts)
			}
		}
		out = append(out, e)
	}
}

// sameEvents reports how got differs from want, modulo exact duplicates
// (failover and restarts rewrite events; the reader drops exact copies).
func sameEvents(got, want []codec.Event) error {
	key := func(ev *codec.Event) string { return string(codec.AppendEvent(nil, ev)) }
	w := map[string]bool{}
	for i := range want {
		w[key(&want[i])] = true
	}
	g := map[string]bool{}
	var extra []uint64
	for i := range got {
		k := key(&got[i])
		g[k] = true
		if !w[k] {
			extra = append(extra, got[i].CommitTs())
		}
	}
	var missing []uint64
	for i := range want {
		if !g[key(&want[i])] {
			missing = append(missing, want[i].CommitTs())
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return nil
	}
	return fmt.Errorf("%d events missing (commit ts %v), %d unexpected (commit ts %v)", len(missing), firstN(missing), len(extra), firstN(extra))
}

func firstN(ts []uint64) string {
	if len(ts) > 10 {
		return fmt.Sprint(ts[:10]) + "…"
	}
	return fmt.Sprint(ts)
}

// checkRange requires (lo, hi] to read back as exactly want, at once: the
// store is read-after-write consistent (Run refuses ListSettle).
func (r *redoSuite) checkRange(t conformance.T, b *blob.Bucket, lo, hi uint64, want []codec.Event, what string) {
	t.Helper()
	if hi <= lo {
		return // an empty range; the reader refuses to open one
	}
	got, _, err := readRange(t, b, lo, hi)
	if err == nil {
		err = sameEvents(got, want)
	}
	if err != nil {
		t.Fatalf("%s: reading (%d, %d]: %v", what, lo, hi, err)
	}
}

func mustDo(t conformance.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// flush flushes w, waits for the publication (the reads that follow go
// through the state objects) and returns its flushed ts.
func flush(t conformance.T, w *writer.Writer) uint64 {
	t.Helper()
	ts, err := w.Publish(t.Context())
	mustDo(t, "Flush", err)
	return ts
}

// readBack: two writers, five spans (one of them the DDL span), DDLs with
// rows at their commit ts on the other writer, several flushes. After every
// flush each event at or below the writers' flushed ts reads back, in order;
// a sub-range returns exactly its events; after Close, everything does.
func (r *redoSuite) readBack(t conformance.T) {
	b := r.h.Bucket(t, r.prefixed)
	ctx := t.Context()
	const start = 100
	w1, w2 := openWriter(t, b, "w1"), openWriter(t, b, "w2")
	owner := map[writer.SpanID]*writer.Writer{1: w1, 11: w1, 12: w1, 13: w2, 14: w2}
	for span, w := range owner {
		mustDo(t, "AddSpan", w.AddSpan(span, start))
	}
	wl := &workload{}
	ts := uint64(start)
	for round := range 4 {
		for range 24 {
			ts++
			span := writer.SpanID(11 + ts%4)
			mustDo(t, "Write", owner[span].Write(ctx, span, wl.row(span, ts, 300)))
			if ts%7 == 0 {
				// A DDL on w1 and a row of the same ts on w2: the reader
				// must deliver the row first.
				mustDo(t, "Write", w2.Write(ctx, 14, wl.row(14, ts, 10)))
				mustDo(t, "Write", w1.Write(ctx, 1, wl.ddl(ts, fmt.Sprintf("ALTER TABLE t ADD COLUMN c%d INT", ts))))
			}
		}
		for span, w := range owner {
			mustDo(t, "AdvanceResolved", w.AdvanceResolved(span, ts))
		}
		if round == 2 {
			// Some events above the resolved ts stay buffered: they must
			// not be read before they are flushed.
			mustDo(t, "Write", w1.Write(ctx, 11, wl.row(11, ts+1, 10)))
		}
		f := min(flush(t, w1), flush(t, w2))
		if f != ts {
			t.Fatalf("round %d: flushed ts %d, want %d", round, f, ts)
		}
		r.checkRange(t, b, start, f, wl.in(start, f), fmt.Sprintf("after flush %d", round))
		// One ts past the flushed ts: nothing there is durable yet, even
		// what is buffered, and no read may claim it complete.
		if _, _, err := readRange(t, b, start, f+1); !errors.Is(err, reader.ErrUnproven) {
			t.Fatalf("after flush %d: reading (%d, %d], one past what the writers published: %v, want reader.ErrUnproven", round, start, f+1, err)
		}
	}
	ts++
	for span, w := range owner {
		mustDo(t, "AdvanceResolved", w.AdvanceResolved(span, ts))
	}
	mustDo(t, "Close", w1.Close(ctx))
	mustDo(t, "Close", w2.Close(ctx))
	r.checkRange(t, b, start, ts, wl.in(start, ts), "after Close")
	// A sub-range: nothing at or below its start, nothing above its end.
	r.checkRange(t, b, start+30, ts-20, wl.in(start+30, ts-20), "a sub-range")
	rep, err := reader.Verify(ctx, b, redoLogID, nil)
	mustDo(t, "Verify", err)
	if !rep.OK() {
		t.Fatalf("Verify of a healthy log: %v", rep.Errors())
	}
	if rep.Events < int64(len(wl.evs)) || rep.Sealed+rep.Active < 4 {
		t.Fatalf("Verify saw %d events in %d segments, want at least %d events in 4 segments", rep.Events, rep.Sealed+rep.Active, len(wl.evs))
	}
}

// restart: a writer abandoned mid-log (no Close) is restarted under its ID:
// the new epoch starts from the old one's flushed ts, the CDC system writes
// again what the old one had not flushed, and the log reads back whole, from
// segments of both epochs.
func (r *redoSuite) restart(t conformance.T) {
	b := r.h.Bucket(t, r.prefixed)
	ctx := t.Context()
	const start = 100
	wl := &workload{}
	old, err := writer.Open(ctx, b, redoOptions("w"))
	mustDo(t, "writer.Open", err)
	mustDo(t, "AddSpan", old.AddSpan(1, start))
	for ts := uint64(start + 1); ts <= 130; ts++ {
		mustDo(t, "Write", old.Write(ctx, 1, wl.row(1, ts, 200)))
		if ts == 120 {
			mustDo(t, "AdvanceResolved", old.AdvanceResolved(1, ts))
			if f := flush(t, old); f != 120 {
				t.Fatalf("flushed ts %d, want 120", f)
			}
		}
	}
	// old dies here with (120, 130] buffered and never flushed.
	w := openWriter(t, b, "w")
	if w.Epoch() != old.Epoch()+1 || w.FlushedTs() != 120 {
		t.Fatalf("restart: epoch %d flushed ts %d, want epoch %d flushed ts 120", w.Epoch(), w.FlushedTs(), old.Epoch()+1)
	}
	mustDo(t, "AddSpan", w.AddSpan(1, w.FlushedTs()))
	if evs := wl.in(120, 130); len(evs) > 0 {
		mustDo(t, "Write", w.Write(ctx, 1, evs...))
	}
	for ts := uint64(131); ts <= 150; ts++ {
		mustDo(t, "Write", w.Write(ctx, 1, wl.row(1, ts, 200)))
	}
	mustDo(t, "AdvanceResolved", w.AdvanceResolved(1, 150))
	if f := flush(t, w); f != 150 {
		t.Fatalf("flushed ts %d after the restart, want 150", f)
	}
	r.checkRange(t, b, start, 150, wl.in(start, 150), "after the restart")
	epochs := map[uint64]bool{}
	for a, err := range b.List(ctx, layout.Segments(redoLogID)) {
		mustDo(t, "List", err)
		if n, err := segment.ParseName(a.Key); err == nil {
			epochs[n.Epoch] = true
		}
	}
	if !epochs[old.Epoch()] || !epochs[w.Epoch()] {
		t.Fatalf("segments of epochs %v, want both %d and %d", epochs, old.Epoch(), w.Epoch())
	}
	// The old process wakes up, resolves what it had and closes: it is
	// fenced, and the log is unharmed.
	mustDo(t, "AdvanceResolved", old.AdvanceResolved(1, 125))
	if err := old.Close(ctx); !errors.Is(err, meta.ErrFenced) {
		t.Fatalf("Close of the abandoned writer: %v, want an error matching meta.ErrFenced", err)
	}
	mustDo(t, "Close", w.Close(ctx))
	r.checkRange(t, b, start, 150, wl.in(start, 150), "after both closed")
	rep, err := reader.Verify(ctx, b, redoLogID, nil)
	mustDo(t, "Verify", err)
	if !rep.OK() {
		t.Fatalf("Verify after a restart: %v", rep.Errors())
	}
}

// corruption: one byte of one sealed segment is changed (overwritten with
// Put): Verify reports that segment by key, and a read through it fails
// with an error naming it, never a short or altered result.
func (r *redoSuite) corruption(t conformance.T) {
	b := r.h.Bucket(t, r.prefixed)
	ctx := t.Context()
	wl := &workload{}
	w := openWriter(t, b, "w")
	mustDo(t, "AddSpan", w.AddSpan(1, 100))
	for ts := uint64(101); ts <= 160; ts++ {
		mustDo(t, "Write", w.Write(ctx, 1, wl.row(1, ts, 200)))
		if ts%20 == 0 {
			mustDo(t, "AdvanceResolved", w.AdvanceResolved(1, ts))
			flush(t, w)
		}
	}
	mustDo(t, "Close", w.Close(ctx))
	var victim string
	var sealed []string
	for a, err := range b.List(ctx, layout.Segments(redoLogID)) {
		mustDo(t, "List", err)
		// A segment that holds events: one that holds only a flush's
		// progress frame (named with the ts range 0-0) is not read by a
		// read of events, only by Verify.
		if n, err := segment.ParseName(a.Key); err == nil && !n.Active && n.MaxTs != 0 {
			sealed = append(sealed, a.Key)
		}
	}
	if len(sealed) < 2 {
		t.Fatalf("the log has %d sealed segments holding events, want at least 2", len(sealed))
	}
	victim = sealed[len(sealed)/2]
	data, err := b.ReadAll(ctx, victim)
	mustDo(t, "ReadAll", err)
	data[len(data)/2] ^= 0x20
	_, err = b.Put(ctx, victim, data, nil)
	mustDo(t, "Put of the damaged segment", err)

	rep, err := reader.Verify(ctx, b, redoLogID, nil)
	mustDo(t, "Verify", err)
	if !slices.ContainsFunc(rep.Errors(), func(p reader.Problem) bool { return strings.HasSuffix(p.Key, victim) || p.Key == victim }) {
		t.Fatalf("Verify does not name the damaged segment %s: %v", victim, rep.Errors())
	}
	got, _, err := readRange(t, b, 100, 160)
	if err == nil {
		t.Fatalf("a read through the damaged segment %s succeeded with %d of %d events", victim, len(got), len(wl.evs))
	}
	if !strings.Contains(err.Error(), victim) {
		t.Fatalf("the read error does not name the damaged segment %s: %v", victim, err)
	}
}

// fencing: a second process opening the writer ID fences the first: its
// flush fails with meta.ErrFenced and publishes nothing, and a segment its
// epoch commits after the fence is ignored by readers (Verify reports it
// as fenced).
func (r *redoSuite) fencing(t conformance.T) {
	b := r.h.Bucket(t, r.prefixed)
	ctx := t.Context()
	wl := &workload{}
	first := openWriter(t, b, "w")
	mustDo(t, "AddSpan", first.AddSpan(1, 100))
	for ts := uint64(101); ts <= 110; ts++ {
		mustDo(t, "Write", first.Write(ctx, 1, wl.row(1, ts, 50)))
	}
	mustDo(t, "AdvanceResolved", first.AdvanceResolved(1, 110))
	flush(t, first)

	second := openWriter(t, b, "w")
	zombie := &workload{}
	mustDo(t, "Write", first.Write(ctx, 1, zombie.row(1, 111, 50)))
	mustDo(t, "AdvanceResolved", first.AdvanceResolved(1, 111))
	if _, err := first.Publish(ctx); !errors.Is(err, meta.ErrFenced) {
		t.Fatalf("flush of the fenced writer: %v, want an error matching meta.ErrFenced", err)
	}
	st, _, err := meta.ReadWriterState(ctx, b, redoLogID, "w")
	mustDo(t, "ReadWriterState", err)
	if st.Epoch != second.Epoch() || st.FlushedTs != 110 {
		t.Fatalf("after the fenced flush the state says epoch %d flushed ts %d, want %d and 110", st.Epoch, st.FlushedTs, second.Epoch())
	}
	// What a zombie's late upload looks like: a segment of its epoch with a
	// seq above its fence. Readers must skip it.
	var fence uint64
	for _, f := range st.Fences {
		if f.Epoch == first.Epoch() {
			fence = f.LastSeq
		}
	}
	late := zombie.row(1, 112, 50)
	hdr := segment.Header{LogID: redoLogID, WriterID: "w", Epoch: first.Epoch(), Seq: fence + 1}
	var buf bytes.Buffer
	sw, err := segment.NewWriter(&buf, hdr, nil)
	mustDo(t, "segment.NewWriter", err)
	mustDo(t, "segment Append", sw.Append(112, segment.KindRow, codec.AppendEvent(nil, &late)))
	_, err = sw.Seal()
	mustDo(t, "segment Seal", err)
	lateKey := hdr.SealedName(112, 112).Format()
	_, err = b.Put(ctx, lateKey, buf.Bytes(), &blob.PutOptions{IfNotExist: true})
	mustDo(t, "Put of the zombie's late segment", err)

	mustDo(t, "AddSpan", second.AddSpan(1, 110))
	for ts := uint64(111); ts <= 120; ts++ {
		mustDo(t, "Write", second.Write(ctx, 1, wl.row(1, ts, 50)))
	}
	mustDo(t, "AdvanceResolved", second.AdvanceResolved(1, 120))
	mustDo(t, "Close", second.Close(ctx))
	r.checkRange(t, b, 100, 120, wl.in(100, 120), "after the takeover")
	_, stats, err := readRange(t, b, 100, 120)
	mustDo(t, "read", err)
	if stats.SegmentsFenced == 0 {
		t.Fatalf("the reader did not skip the zombie's segment %s as fenced: %+v", lateKey, stats)
	}
	rep, err := reader.Verify(ctx, b, redoLogID, nil)
	mustDo(t, "Verify", err)
	if !rep.OK() || !slices.ContainsFunc(rep.Problems, func(p reader.Problem) bool {
		return p.Kind == reader.ProblemFenced && strings.HasSuffix(p.Key, lateKey)
	}) {
		t.Fatalf("Verify does not report the zombie's segment %s as fenced (and nothing worse): %v", lateKey, rep.Problems)
	}
}

// watermark: with two writers whose spans advance unevenly, the
// coordinator's global resolved ts (over the live writers: no span is
// registered, so this holds whatever the writers report per span) never
// exceeds what every writer flushed, never goes backwards, is what the meta
// object holds, and reaches the writers' flushed ts once every span has.
func (r *redoSuite) watermark(t conformance.T) {
	b := r.h.Bucket(t, r.prefixed)
	ctx := t.Context()
	const start = 100
	coord, err := meta.OpenCoordinator(ctx, b, redoLogID, &meta.CoordinatorOptions{StartTs: start})
	mustDo(t, "OpenCoordinator", err)
	wa, wb := openWriter(t, b, "a"), openWriter(t, b, "b")
	owner := map[writer.SpanID]*writer.Writer{1: wa, 2: wa, 3: wb}
	for _, id := range []string{"a", "b"} {
		mustDo(t, "AddWriter", coord.AddWriter(ctx, id))
	}
	for span, w := range owner {
		mustDo(t, "AddSpan", w.AddSpan(span, start))
	}
	wl := &workload{}
	prev := uint64(start)
	ts := uint64(start)
	for round := range 8 {
		for range 10 {
			ts++
			span := writer.SpanID(1 + ts%3)
			mustDo(t, "Write", owner[span].Write(ctx, span, wl.row(span, ts, 20)))
		}
		// Spans advance unevenly: one lags a round behind.
		for span, w := range owner {
			to := ts
			if int(span) == 1+round%3 {
				to = ts - 10
			}
			mustDo(t, "AdvanceResolved", w.AdvanceResolved(span, to))
		}
		fa, fb := flush(t, wa), flush(t, wb)
		m, err := coord.Tick(ctx)
		mustDo(t, "Tick", err)
		if m.ResolvedTs > min(fa, fb) {
			t.Fatalf("round %d: global resolved ts %d above the writers' flushed ts %d and %d", round, m.ResolvedTs, fa, fb)
		}
		if m.ResolvedTs < prev {
			t.Fatalf("round %d: global resolved ts went backwards: %d → %d", round, prev, m.ResolvedTs)
		}
		prev = m.ResolvedTs
		stored, _, err := meta.ReadMeta(ctx, b, redoLogID)
		mustDo(t, "ReadMeta", err)
		if stored.ResolvedTs != m.ResolvedTs {
			t.Fatalf("round %d: the meta object holds resolved ts %d, the coordinator computed %d", round, stored.ResolvedTs, m.ResolvedTs)
		}
		r.checkRange(t, b, start, m.ResolvedTs, wl.in(start, m.ResolvedTs), fmt.Sprintf("round %d, up to the global resolved ts", round))
	}
	for span, w := range owner {
		mustDo(t, "AdvanceResolved", w.AdvanceResolved(span, ts))
	}
	flush(t, wa)
	flush(t, wb)
	m, err := coord.Tick(ctx)
	mustDo(t, "Tick", err)
	if m.ResolvedTs != ts {
		t.Fatalf("every span flushed to %d, but the global resolved ts is %d", ts, m.ResolvedTs)
	}
	if err := coord.SetCheckpoint(ctx, ts+1); !errors.Is(err, meta.ErrCheckpointAhead) {
		t.Fatalf("a checkpoint above the global resolved ts: %v, want meta.ErrCheckpointAhead", err)
	}
}

// gc: GC at a checkpoint deletes every sealed segment wholly below it and
// nothing else, and a read from the checkpoint still returns everything
// above it.
func (r *redoSuite) gc(t conformance.T) {
	b := r.h.Bucket(t, r.prefixed)
	ctx := t.Context()
	const start = 100
	coord, err := meta.OpenCoordinator(ctx, b, redoLogID, &meta.CoordinatorOptions{StartTs: start})
	mustDo(t, "OpenCoordinator", err)
	mustDo(t, "AddWriter", coord.AddWriter(ctx, "w"))
	w := openWriter(t, b, "w")
	mustDo(t, "AddSpan", w.AddSpan(1, start))
	wl := &workload{}
	for ts := uint64(start + 1); ts <= 200; ts++ {
		mustDo(t, "Write", w.Write(ctx, 1, wl.row(1, ts, 200)))
		if ts%10 == 0 {
			mustDo(t, "AdvanceResolved", w.AdvanceResolved(1, ts))
			flush(t, w)
		}
	}
	mustDo(t, "Close", w.Close(ctx))
	m, err := coord.Tick(ctx)
	mustDo(t, "Tick", err)
	if m.ResolvedTs != 200 {
		t.Fatalf("global resolved ts %d, want 200", m.ResolvedTs)
	}
	const cp = 155
	mustDo(t, "SetCheckpoint", coord.SetCheckpoint(ctx, cp))
	before := segmentNames(t, b)
	res, err := gc.Collect(ctx, b, redoLogID, &gc.Options{Below: cp})
	mustDo(t, "gc.Collect", err)
	if res.Deleted == 0 {
		t.Fatalf("GC at %d deleted nothing among %d segments", cp, len(before))
	}
	for _, k := range res.DeletedKeys {
		n, err := segment.ParseName(k)
		if err != nil || n.Active || n.MaxTs >= cp {
			t.Fatalf("GC at checkpoint %d deleted %s, which holds events at or above it", cp, k)
		}
	}
	var left []string
	after := segmentNames(t, b)
	for k, n := range before {
		_, kept := after[k]
		if !n.Active && n.MaxTs < cp && kept {
			left = append(left, k)
		}
		if (n.Active || n.MaxTs >= cp) && !kept {
			t.Fatalf("GC at checkpoint %d removed %s", cp, k)
		}
	}
	if len(left) > 0 {
		slices.Sort(left)
		t.Fatalf("GC at checkpoint %d left segments wholly below it: %v", cp, left)
	}
	r.checkRange(t, b, cp, 200, wl.in(cp, 200), "from the checkpoint after GC")
}

// segmentNames lists the log's segments by key.
func segmentNames(t conformance.T, b *blob.Bucket) map[string]segment.Name {
	out := map[string]segment.Name{}
	for a, err := range b.List(t.Context(), layout.Segments(redoLogID)) {
		mustDo(t, "List", err)
		if n, err := segment.ParseName(a.Key); err == nil {
			out[a.Key] = n
		}
	}
	return out
}
