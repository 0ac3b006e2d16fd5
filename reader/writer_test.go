package reader

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/writer"
)

// End to end with the real writer: two writers, a span that moves from one to
// the other and restarts behind it (catch-up segments, rewritten events), a
// DDL at the ts of rows, small segments and blocks. Reading (0, the lower
// flushed ts] returns every event written there exactly once, in order.
func TestWithWriter(t *testing.T) {
	for _, backend := range []string{"mem", "local"} {
		t.Run(backend, func(t *testing.T) {
			b := newMem(t)
			if backend == "local" {
				b = newLocal(t)
			}
			testWithWriter(t, b)
		})
	}
}

func testWithWriter(t *testing.T, b *blob.Bucket) {
	ctx := context.Background()
	open := func(id string) *writer.Writer {
		w, err := writer.Open(ctx, b, &writer.Options{LogID: testLog, WriterID: id,
			FlushInterval: time.Hour, MaxSegmentBytes: 4 << 10, BlockSize: 512, RetryAttempts: -1})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	wa, wb := open("a"), open("b")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, sp := range []writer.SpanID{1, 2} {
		must(wa.AddSpan(sp, 0))
	}
	must(wb.AddSpan(3, 0))

	// What the downstream must see: each event once.
	var written []*codec.Event
	put := func(w *writer.Writer, sp writer.SpanID, ev *codec.Event, record bool) {
		t.Helper()
		must(w.Write(ctx, sp, *ev))
		if record {
			written = append(written, ev)
		}
	}
	span2 := func(ts uint64) *codec.Event { return row(ts, "t2", int64(ts), "span2") }
	for ts := uint64(10); ts <= 400; ts += 2 {
		put(wa, 1, row(ts, "t1", int64(ts), "span1"), true)
		put(wa, 2, span2(ts+1), true)
		put(wb, 3, row(ts, "t3", int64(ts), fmt.Sprint("span3-", ts)), true)
		if ts%100 == 0 {
			put(wb, 3, ddl(ts, "t3", fmt.Sprint("ALTER ", ts)), true)
		}
		for _, sp := range []writer.SpanID{1, 2} {
			must(wa.AdvanceResolved(sp, ts+1))
		}
		must(wb.AdvanceResolved(3, ts+1))
		if ts%40 == 0 {
			_, err := wa.Flush(ctx)
			must(err)
			_, err = wb.Flush(ctx)
			must(err)
		}
	}
	_, err := wa.Flush(ctx)
	must(err)
	_, err = wb.Flush(ctx)
	must(err)
	// Span 2 moves to b, restarting from a checkpoint behind both writers:
	// b writes (300, 401] of it again, in catch-up segments.
	must(wa.RemoveSpan(2))
	must(wb.AddSpan(2, 300))
	for ts := uint64(301); ts <= 401; ts += 2 {
		put(wb, 2, span2(ts), false) // rewrites of what a wrote
	}
	for ts := uint64(402); ts <= 600; ts += 2 {
		put(wa, 1, row(ts, "t1", int64(ts), "span1"), true)
		put(wb, 2, span2(ts+1), true)
		put(wb, 3, row(ts, "t3", int64(ts), fmt.Sprint("span3-", ts)), true)
		must(wa.AdvanceResolved(1, ts+1))
		must(wb.AdvanceResolved(2, ts+1))
		must(wb.AdvanceResolved(3, ts+1))
		if ts%50 == 0 {
			_, err := wb.Flush(ctx)
			must(err)
		}
	}
	// Read while the writers are live (on local disk their active segments
	// are part of the log), then after they close. The read is proven up
	// to what the writers published: Publish, not Flush.
	_, err = wa.Publish(ctx)
	must(err)
	_, err = wb.Publish(ctx)
	must(err)
	st := check(t, b, written, min(wa.FlushedTs(), wb.FlushedTs()), 500)
	if b.CanAppend() && st.SegmentsActive == 0 {
		t.Error("no active segment while the writers are live")
	}
	must(wa.Close(ctx))
	must(wb.Close(ctx))
	if st := check(t, b, written, min(wa.FlushedTs(), wb.FlushedTs()), 500); st.SegmentsActive != 0 {
		t.Errorf("%d active segments after Close", st.SegmentsActive)
	}

	rep, err := Verify(ctx, b, testLog, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 0 {
		t.Errorf("Verify: %v", rep.Problems)
	}
}

// check reads (0, end] and compares it with the events written there.
func check(t *testing.T, b *blob.Bucket, written []*codec.Event, end, atLeast uint64) Stats {
	t.Helper()
	if end < atLeast {
		t.Fatalf("flushed ts %d, want at least %d", end, atLeast)
	}
	var exp []got
	for _, ev := range written {
		if ev.CommitTs() <= end {
			exp = append(exp, want(ev))
		}
	}
	out, st, err := readAll(t, b, &Options{LogID: testLog, EndTs: end})
	if err != nil {
		t.Fatal(err)
	}
	if st.Duplicates == 0 {
		t.Error("no duplicates dropped: the span move rewrote events")
	}
	if st.SegmentsSelected < 6 {
		t.Errorf("only %d segments: the test wants many small ones", st.SegmentsSelected)
	}
	for i := 1; i < len(out); i++ {
		p, g := out[i-1], out[i]
		if g.ts < p.ts || g.ts == p.ts && p.ddl && !g.ddl {
			t.Fatalf("event %d (%v) after %v", i, g, p)
		}
	}
	sortGot := func(gs []got) {
		slices.SortFunc(gs, func(a, b got) int { return cmp.Or(cmp.Compare(a.ts, b.ts), cmp.Compare(a.payload, b.payload)) })
	}
	sortGot(out)
	sortGot(exp)
	equalGot(t, out, exp)
	return st
}
