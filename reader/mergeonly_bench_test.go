package reader

import (
	"context"
	"testing"

	"github.com/redokit/redokit/testkit/testenv"
)

// BenchmarkMergeOnly runs only the merge of BenchmarkMerge's log, without the
// ceiling passes between iterations, for profiles that show the reader alone.
// REDOKIT_BENCH_PREFETCH sets Options.Prefetch.
func BenchmarkMergeOnly(b *testing.B) {
	l := buildBenchLog(b)
	pf := testenv.Count(b, "REDOKIT_BENCH_PREFETCH", 0)
	for _, raw := range []bool{true, false} {
		name := "merge=decoded"
		if raw {
			name = "merge=raw"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(l.uncomp)
			ctx := context.Background()
			opts := Options{LogID: testLog, StartTs: 0, EndTs: 1 << 63, Raw: raw, Prefetch: pf}
			cpu0 := cpuTime()
			for b.Loop() {
				r, err := Open(ctx, l.b, &opts)
				if err != nil {
					b.Fatal(err)
				}
				n := drainBatches(b, r)
				r.Close()
				if n != l.rows {
					b.Fatalf("read %d rows, the log has %d", n, l.rows)
				}
			}
			b.ReportMetric(float64(l.rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(l.rows*int64(b.N)), "cpu-ns/row")
		})
	}
}
