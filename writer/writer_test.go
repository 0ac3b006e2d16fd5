package writer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
)

func TestOptionsValidation(t *testing.T) {
	ctx := context.Background()
	b := memBucket()
	cases := []struct {
		name string
		o    *Options
		want string
	}{
		{"nil", nil, "LogID and WriterID are required"},
		{"no log", &Options{WriterID: "w"}, "LogID"},
		{"no writer", &Options{LogID: "l"}, "WriterID"},
		{"bad writer", &Options{LogID: "l", WriterID: "a/b"}, "WriterID"},
		{"interval", &Options{LogID: "l", WriterID: "w", FlushInterval: -1}, "FlushInterval"},
		{"threshold over quota", &Options{LogID: "l", WriterID: "w", FlushBytes: 2 << 20, MemoryQuota: 1 << 20}, "FlushBytes"},
		{"segment", &Options{LogID: "l", WriterID: "w", MaxSegmentBytes: 100}, "MaxSegmentBytes"},
		{"block", &Options{LogID: "l", WriterID: "w", BlockSize: -1}, "BlockSize"},
		{"block over segment", &Options{LogID: "l", WriterID: "w", MaxSegmentBytes: 8 << 10, BlockSize: 16 << 10}, "BlockSize"},
		{"compression", &Options{LogID: "l", WriterID: "w", Compression: "zstd"}, "Compression"},
		{"sync", &Options{LogID: "l", WriterID: "w", Sync: 7}, "Sync"},
		{"quota", &Options{LogID: "l", WriterID: "w", MemoryQuota: -5}, "MemoryQuota"},
		{"workers", &Options{LogID: "l", WriterID: "w", Workers: -1}, "Workers"},
		{"backoff", &Options{LogID: "l", WriterID: "w", RetryBackoff: time.Second, RetryMaxBackoff: time.Millisecond}, "RetryMaxBackoff"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Open(ctx, b, c.o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open: got %v, want an error naming %s", err, c.want)
			}
		})
	}
}

// TestFlushOrderAndGating writes interleaved spans with rows and DDLs, and
// checks that a flush takes exactly the events at or below the writer's
// resolved ts, in commit-ts order with rows before a DDL of the same ts, and
// that the rest stays buffered until the resolved ts passes it.
func TestFlushOrderAndGating(t *testing.T) {
	onBothStores(t, func(t *testing.T, b *blob.Bucket) {
		ctx := context.Background()
		w := open(t, b, testOptions("w1"))
		must(t, w.AddSpan(1, 100))
		must(t, w.AddSpan(2, 100))
		// Span 1: a DDL and then a row at 120 (allowed: non-decreasing);
		// the flush puts the row first.
		must(t, w.Write(ctx, 1, row(1, 110, 1), ddl(1, 120, "ALTER t1"), row(1, 120, 2), row(1, 150, 3)))
		must(t, w.Write(ctx, 2, row(2, 105, 10), row(2, 120, 11), row(2, 130, 12), row(2, 200, 13)))
		must(t, w.AdvanceResolved(1, 140))
		must(t, w.AdvanceResolved(2, 135))
		if r := w.ResolvedTs(); r != 135 {
			t.Fatalf("ResolvedTs = %d, want 135", r)
		}
		flushTo(t, w, 135)
		gs := readLog(t, b, readOpts{})
		want := []string{
			"row(span 2 @105 id 10)", "row(span 1 @110 id 1)",
			// Same ts: rows in arrival order, then the DDL.
			"row(span 1 @120 id 2)", "row(span 2 @120 id 11)", "ddl(span 1 @120 \"ALTER t1\")",
			"row(span 2 @130 id 12)",
		}
		checkGot(t, gs, want)
		// Nothing more is resolved: a flush changes nothing.
		flushTo(t, w, 135)
		checkGot(t, readLog(t, b, readOpts{}), want)

		must(t, w.AdvanceResolved(1, 300))
		must(t, w.AdvanceResolved(2, 300))
		flushTo(t, w, 300)
		must(t, w.Close(ctx))
		want = append(want, "row(span 1 @150 id 3)", "row(span 2 @200 id 13)")
		checkGot(t, readLog(t, b, readOpts{}), want)
		for _, n := range names(t, segmentKeys(t, b)) {
			if n.Active {
				t.Errorf("segment %s is still active after Close", n)
			}
		}
		st, _, err := meta.ReadWriterState(ctx, b, testLog, "w1")
		must(t, err)
		if st.FlushedTs != 300 || !st.HasSeq || st.Seq == 0 {
			t.Fatalf("published state %+v, want flushed ts 300 and a seq", st)
		}
		s := w.Stats()
		if s.Events != 8 || s.DDLs != 1 || s.Rows != 7 || s.FlushedTs != 300 || s.BufferedBytes != 0 {
			t.Fatalf("stats %+v", s)
		}
	})
}

func checkGot(t *testing.T, gs []got, want []string) {
	t.Helper()
	var have []string
	for _, g := range gs {
		have = append(have, g.String())
	}
	if strings.Join(have, "\n") != strings.Join(want, "\n") {
		t.Fatalf("read back:\n%s\nwant:\n%s", strings.Join(have, "\n"), strings.Join(want, "\n"))
	}
}

func TestWriteErrors(t *testing.T) {
	ctx := context.Background()
	w := open(t, memBucket(), testOptions("w"))
	must(t, w.AddSpan(7, 100))
	if err := w.AddSpan(7, 5); !errors.Is(err, ErrSpanExists) {
		t.Fatalf("AddSpan twice: %v", err)
	}
	if err := w.Write(ctx, 8, row(8, 200, 1)); !errors.Is(err, ErrUnknownSpan) {
		t.Fatalf("Write to an unknown span: %v", err)
	}
	err := w.Write(ctx, 7, row(7, 200, 1), row(7, 190, 2))
	if !errors.Is(err, ErrOutOfOrder) || !strings.Contains(err.Error(), "span 7") || !strings.Contains(err.Error(), "190") {
		t.Fatalf("regression within a call: %v", err)
	}
	must(t, w.Write(ctx, 7, row(7, 200, 1)))
	if err := w.Write(ctx, 7, row(7, 199, 2)); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("regression across calls: %v", err)
	}
	// Equal ts is fine.
	must(t, w.Write(ctx, 7, row(7, 200, 3)))
	if err := w.Write(ctx, 7, row(7, 100, 4)); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("regression to the start ts: %v", err)
	}
	must(t, w.AdvanceResolved(7, 250))
	must(t, w.AdvanceResolved(7, 150)) // ignored
	if r := w.ResolvedTs(); r != 250 {
		t.Fatalf("resolved ts went back to %d", r)
	}
	err = w.Write(ctx, 7, row(7, 250, 5))
	if !errors.Is(err, ErrBelowResolved) || !strings.Contains(err.Error(), "250") {
		t.Fatalf("event at the resolved ts: %v", err)
	}
	if err := w.Write(ctx, 7, codec.Event{Kind: 9}); err == nil {
		t.Fatal("event of unknown kind accepted")
	}
	// An event the codec would store but no reader could decode (month 13)
	// is refused before it can be acknowledged.
	bad := row(7, 300, 6)
	bad.Row.Columns = append(bad.Row.Columns, codec.Column{Name: "at", Type: codec.TypeDatetime,
		Value: codec.DatetimeValue(codec.DateTime{Year: 2026, Month: 13, Day: 1})})
	if err := w.Write(ctx, 7, bad); !errors.Is(err, codec.ErrInvalidEvent) || !strings.Contains(err.Error(), "columns[2]") {
		t.Fatalf("undecodable event: %v", err)
	}
	if err := w.AdvanceResolved(9, 1); !errors.Is(err, ErrUnknownSpan) {
		t.Fatalf("AdvanceResolved of an unknown span: %v", err)
	}
	// Nothing of a failed call was written.
	flushTo(t, w, 250)
	if s := w.Stats(); s.Events != 2 {
		t.Fatalf("%d events flushed, want 2", s.Events)
	}
	must(t, w.Close(ctx))
	must(t, w.Close(ctx)) // idempotent
	if err := w.Write(ctx, 7, row(7, 300, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after Close: %v", err)
	}
	if _, err := w.Flush(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Flush after Close: %v", err)
	}
}

// TestResolvedWithoutSpans checks the writer's resolved ts with no spans: the
// highest it has seen, never lower.
func TestResolvedWithoutSpans(t *testing.T) {
	ctx := context.Background()
	w := open(t, memBucket(), testOptions("w"))
	if r := w.ResolvedTs(); r != 0 {
		t.Fatalf("fresh writer resolved ts %d", r)
	}
	must(t, w.AddSpan(1, 100))
	must(t, w.AddSpan(2, 50))
	must(t, w.AdvanceResolved(1, 400))
	if r := w.ResolvedTs(); r != 50 {
		t.Fatalf("resolved ts %d, want the minimum 50", r)
	}
	must(t, w.RemoveSpan(2))
	must(t, w.RemoveSpan(1))
	if r := w.ResolvedTs(); r != 400 {
		t.Fatalf("resolved ts without spans %d, want the highest seen, 400", r)
	}
	flushTo(t, w, 400)
	must(t, w.Close(ctx))
}

// TestRemoveSpan checks that a removed span's resolved events are still
// flushed in order, and its unresolved ones dropped.
func TestRemoveSpan(t *testing.T) {
	ctx := context.Background()
	b := memBucket()
	w := open(t, b, testOptions("w"))
	must(t, w.AddSpan(1, 100))
	must(t, w.AddSpan(2, 100))
	must(t, w.Write(ctx, 1, row(1, 110, 1), row(1, 210, 2)))
	must(t, w.Write(ctx, 2, row(2, 120, 3), row(2, 180, 4)))
	must(t, w.AdvanceResolved(1, 150))
	must(t, w.RemoveSpan(1)) // keeps 110, drops 210
	if err := w.Write(ctx, 1, row(1, 300, 9)); !errors.Is(err, ErrUnknownSpan) {
		t.Fatalf("Write to a removed span: %v", err)
	}
	must(t, w.AdvanceResolved(2, 130))
	mustFlush(t, w)
	checkGot(t, readLog(t, b, readOpts{}), []string{"row(span 1 @110 id 1)", "row(span 2 @120 id 3)"})
	must(t, w.AdvanceResolved(2, 500))
	mustFlush(t, w)
	must(t, w.Close(ctx))
	checkGot(t, readLog(t, b, readOpts{}), []string{"row(span 1 @110 id 1)", "row(span 2 @120 id 3)", "row(span 2 @180 id 4)"})
	if s := w.Stats(); s.BufferedBytes != 0 {
		t.Fatalf("%d bytes still buffered", s.BufferedBytes)
	}
}

// TestSpanAddedBehind adds a span whose start ts is below the flushed ts: its
// catch-up events go to a segment of their own (each segment stays sorted),
// and the flushed ts never goes back.
func TestSpanAddedBehind(t *testing.T) {
	onBothStores(t, func(t *testing.T, b *blob.Bucket) {
		ctx := context.Background()
		w := open(t, b, testOptions("w"))
		must(t, w.AddSpan(1, 100))
		must(t, w.Write(ctx, 1, row(1, 500, 1), row(1, 1000, 2)))
		must(t, w.AdvanceResolved(1, 1000))
		flushTo(t, w, 1000)
		must(t, w.AddSpan(2, 300))
		must(t, w.Write(ctx, 2, row(2, 400, 10), row(2, 900, 11), row(2, 1100, 12)))
		must(t, w.Write(ctx, 1, row(1, 1050, 3)))
		must(t, w.AdvanceResolved(2, 950))
		flushTo(t, w, 950) // catch-up: the behind span's resolved ts
		st, _, err := meta.ReadWriterState(ctx, b, testLog, "w")
		must(t, err)
		// Span 1 has an event at 1050 buffered, resolved 1000: flushed
		// to 1000. Span 2 to its resolved 950.
		if want := []segment.SpanTs{{Span: 1, Ts: 1000}, {Span: 2, Ts: 950}}; !slices.Equal(st.Spans, want) || st.FlushedTs != 950 {
			t.Fatalf("published flushed ts %d, spans %v; want 950, %v", st.FlushedTs, st.Spans, want)
		}
		must(t, w.AdvanceResolved(2, 2000))
		must(t, w.AdvanceResolved(1, 2000))
		flushTo(t, w, 2000)
		must(t, w.Close(ctx))
		gs := readLog(t, b, readOpts{}) // checks each segment's order
		var all []string
		segs := map[string]bool{}
		for _, g := range gs {
			all = append(all, g.String())
			segs[g.seg] = true
		}
		if len(all) != 6 {
			t.Fatalf("read %d events:\n%s", len(all), describe(gs))
		}
		if len(segs) < 2 {
			t.Fatalf("catch-up events share one segment with later-ts events:\n%s", describe(gs))
		}
	})
}

// TestRestartContinuesSeq reopens a writer ID: the new epoch's segments go on
// from the highest seq of the earlier ones, and its flushed ts starts where
// the previous epoch's was published.
func TestRestartContinuesSeq(t *testing.T) {
	onBothStores(t, func(t *testing.T, b *blob.Bucket) {
		ctx := context.Background()
		var maxSeq uint64
		for epoch := uint64(1); epoch <= 3; epoch++ {
			w := open(t, b, testOptions("w"))
			if w.Epoch() != epoch {
				t.Fatalf("epoch %d, want %d", w.Epoch(), epoch)
			}
			base := epoch * 1000
			if want := (epoch-1)*1000 + 250*min(epoch-1, 1); w.FlushedTs() != want {
				t.Fatalf("epoch %d starts at flushed ts %d, want the previous epoch's %d", epoch, w.FlushedTs(), want)
			}
			must(t, w.AddSpan(1, base))
			for i := range 3 {
				must(t, w.Write(ctx, 1, row(1, base+uint64(i)*100+1, int64(i))))
				must(t, w.AdvanceResolved(1, base+uint64(i)*100+50))
				mustFlush(t, w)
			}
			must(t, w.Close(ctx))
			for _, n := range names(t, segmentKeys(t, b)) {
				if n.Epoch == epoch && n.Seq <= maxSeq {
					t.Fatalf("epoch %d wrote seq %d, not above the earlier epochs' %d", epoch, n.Seq, maxSeq)
				}
			}
			for _, n := range names(t, segmentKeys(t, b)) {
				maxSeq = max(maxSeq, n.Seq)
			}
		}
		gs := readLog(t, b, readOpts{fenced: true})
		if len(gs) != 9 {
			t.Fatalf("read %d events, want 9:\n%s", len(gs), describe(gs))
		}
	})
}

// TestFenced opens the same writer ID twice: the first writer's next flush
// fails with meta.ErrFenced, and so does every later call.
func TestFenced(t *testing.T) {
	onBothStores(t, func(t *testing.T, b *blob.Bucket) {
		ctx := context.Background()
		w1 := open(t, b, testOptions("w"))
		must(t, w1.AddSpan(1, 100))
		must(t, w1.Write(ctx, 1, row(1, 110, 1)))
		must(t, w1.AdvanceResolved(1, 120))
		mustFlush(t, w1)

		w2 := open(t, b, testOptions("w"))
		must(t, w1.Write(ctx, 1, row(1, 130, 2)))
		must(t, w1.AdvanceResolved(1, 140))
		if _, err := w1.Publish(ctx); !errors.Is(err, meta.ErrFenced) {
			t.Fatalf("fenced writer's Flush: %v", err)
		}
		if err := w1.Write(ctx, 1, row(1, 150, 3)); !errors.Is(err, meta.ErrFenced) {
			t.Fatalf("fenced writer's Write: %v", err)
		}
		if err := w1.AdvanceResolved(1, 160); !errors.Is(err, meta.ErrFenced) {
			t.Fatalf("fenced writer's AdvanceResolved: %v", err)
		}
		if err := w1.Close(ctx); !errors.Is(err, meta.ErrFenced) {
			t.Fatalf("fenced writer's Close: %v", err)
		}
		if !errors.Is(w1.Err(), meta.ErrFenced) {
			t.Fatalf("Err() = %v", w1.Err())
		}
		st, _, err := meta.ReadWriterState(ctx, b, testLog, "w")
		must(t, err)
		if st.Epoch != w2.Epoch() || st.FlushedTs != 120 {
			t.Fatalf("state after the fence: %+v", st)
		}
		// What the zombie flushed before the fence is accepted; the
		// segments it stored above the fence it deleted when it learnt
		// of it. A block it appended to a segment the fence accepts
		// stays (local): the zombie cannot prove no lost answer made
		// the fence cover it, and the reader drops it as an exact
		// duplicate once the new epoch writes it again.
		want := []string{"row(span 1 @110 id 1)"}
		if b.CanAppend() {
			want = append(want, "row(span 1 @130 id 2)")
		}
		checkGot(t, readLog(t, b, readOpts{fenced: true}), want)
		checkGot(t, readLog(t, b, readOpts{}), want)
		must(t, w2.Close(ctx))
	})
}

func TestCompressionNoneAndLZ4Readable(t *testing.T) {
	for _, c := range []Compression{CompressionNone, CompressionLZ4} {
		t.Run(string(c), func(t *testing.T) {
			ctx := context.Background()
			b := memBucket()
			o := testOptions("w")
			o.Compression = c
			w := openSpan1(t, b, o)
			for ts := uint64(1); ts <= 200; ts++ {
				must(t, w.Write(ctx, 1, row(1, ts, int64(ts))))
			}
			must(t, w.AdvanceResolved(1, 200))
			must(t, w.Close(ctx))
			if gs := readLog(t, b, readOpts{}); len(gs) != 200 {
				t.Fatalf("read %d", len(gs))
			}
			for _, k := range segmentKeys(t, b) {
				data, err := b.ReadAll(ctx, k)
				must(t, err)
				r, err := segment.NewReader(bytesReader(data), int64(len(data)), nil)
				must(t, err)
				if got := r.Header().Compression; got != c.segment() {
					t.Fatalf("segment compression %v, want %v", got, c.segment())
				}
			}
		})
	}
}

// TestConcurrentSpans writes many spans from their own goroutines while
// another goroutine flushes, and reads everything back in order.
func TestConcurrentSpans(t *testing.T) {
	onBothStores(t, func(t *testing.T, b *blob.Bucket) {
		ctx := context.Background()
		o := testOptions("w")
		o.FlushInterval = 2 * time.Millisecond
		o.MemoryQuota = 64 << 10 // back-pressure now and then
		o.FlushBytes = 16 << 10
		o.MaxSegmentBytes = 32 << 10
		o.BlockSize = 1 << 10
		w := open(t, b, o)
		const spans, perSpan = 8, 300
		for s := SpanID(1); s <= spans; s++ {
			must(t, w.AddSpan(s, 0))
		}
		done := make(chan error, spans)
		for s := SpanID(1); s <= spans; s++ {
			go func() {
				for i := 1; i <= perSpan; i++ {
					ts := uint64(i)
					var evs []codec.Event
					evs = append(evs, row(s, ts, int64(s)*10000+int64(i)))
					if i%50 == 0 {
						evs = append(evs, ddl(s, ts, fmt.Sprintf("ALTER t%d %d", s, i)))
					}
					if err := w.Write(ctx, s, evs...); err != nil {
						done <- err
						return
					}
					if err := w.AdvanceResolved(s, ts); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
		}
		flushing := make(chan struct{})
		go func() {
			defer close(flushing)
			for range 20 {
				if _, err := w.Flush(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		for range spans {
			must(t, <-done)
		}
		<-flushing
		must(t, w.Close(ctx))
		gs := readLog(t, b, readOpts{staged: w.Stats().StageCuts > 0})
		if len(gs) != spans*perSpan+spans*perSpan/50 {
			t.Fatalf("read %d events", len(gs))
		}
		// Across segments too, a log written by one writer with
		// resolved spans is in commit-ts order, unless a Write blocked
		// on the quota made the writer stage events above the resolved
		// ts: staged segments overlap later ones (each is sorted, which
		// readLog checks, and readers merge them).
		if w.Stats().StageCuts > 0 {
			return
		}
		for i := 1; i < len(gs); i++ {
			if gs[i].ts < gs[i-1].ts {
				t.Fatalf("%v after %v", gs[i], gs[i-1])
			}
		}
	})
}

// TestLargeEvents writes events larger than a block and than a segment: each
// gets a block (and a segment) of its own, and reads back whole.
func TestLargeEvents(t *testing.T) {
	onBothStores(t, func(t *testing.T, b *blob.Bucket) {
		ctx := context.Background()
		o := testOptions("w")
		o.BlockSize = 1 << 10
		o.MaxSegmentBytes = 8 << 10
		o.Compression = CompressionNone
		w := openSpan1(t, b, o)
		r := newRand(1)
		must(t, w.Write(ctx, 1, row(1, 1, 1), bigRow(r, 1, 2, 2, 3000), bigRow(r, 1, 3, 3, 20000), row(1, 4, 4)))
		must(t, w.AdvanceResolved(1, 10))
		must(t, w.Close(ctx))
		checkIDs(t, readLog(t, b, readOpts{}), 1, 4)
	})
}
