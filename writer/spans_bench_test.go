package writer

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redokit/redokit/backends/local"
)

// BenchmarkSpansFlush is the many-spans flush: a capture with 5,000 spans
// (tables) each changing one row per flush, the case where a log of per-span
// runs would write 5,000 runs a flush and the progress frame (16 bytes a
// span) outweighs the rows. Each op writes one 512-byte row to every span at
// one new commit ts, moves every span's resolved ts to it and flushes
// (fdatasync on local disk), from one goroutine. flush-ms is the Flush call
// alone; op-ms the whole round, Writes and AdvanceResolved included. It uses
// only the writer's public calls, so that the same file builds at older
// commits for a before-and-after comparison:
//
//	go test -run '^$' -bench SpansFlush -benchtime 200x -count 3 ./writer
func BenchmarkSpansFlush(b *testing.B) {
	for _, spans := range []int{5000} {
		b.Run(fmt.Sprintf("spans=%d", spans), func(b *testing.B) { benchSpansFlush(b, spans) })
	}
}

func benchSpansFlush(b *testing.B, spans int) {
	ctx := context.Background()
	bk, err := local.New(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer bk.Close()
	w, err := Open(ctx, bk, &Options{LogID: "bench", WriterID: "w", FlushInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close(ctx)
	for s := 1; s <= spans; s++ {
		if err := w.AddSpan(SpanID(s), 0); err != nil {
			b.Fatal(err)
		}
	}
	rows := benchRows(spans)
	b.SetBytes(int64(spans) * benchRowSize)
	flushes := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		ts := uint64(i + 1)
		for s := 1; s <= spans; s++ {
			ev := &rows[s-1]
			ev.Row.CommitTs, ev.Row.StartTs = ts, ts-1
			if err := w.Write(ctx, SpanID(s), *ev); err != nil {
				b.Fatal(err)
			}
			if err := w.AdvanceResolved(SpanID(s), ts); err != nil {
				b.Fatal(err)
			}
		}
		t0 := time.Now()
		if _, err := w.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		flushes = append(flushes, time.Since(t0))
	}
	el := time.Since(start)
	b.StopTimer()
	slices.Sort(flushes)
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	b.ReportMetric(ms(flushes[len(flushes)/2]), "flush-p50-ms")
	b.ReportMetric(ms(flushes[len(flushes)*99/100]), "flush-p99-ms")
	b.ReportMetric(ms(el)/float64(b.N), "op-ms")
}
