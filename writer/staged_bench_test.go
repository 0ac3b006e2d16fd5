package writer

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
)

// BenchmarkStagedTransaction writes one transaction of 64 quotas (8 MiB
// each) at one commit ts, on local disk and on the object-store path (mem),
// with Write and WriteEncoded, and reports its throughput beside what bounds
// memory: the peak buffered bytes (at most the quota), the peak heap in use
// sampled every millisecond (on mem, less the bytes the memory store
// holds), the stage cuts and the overcommits (0).
//
//	go test ./writer -run '^$' -bench StagedTransaction -benchtime 1x
func BenchmarkStagedTransaction(b *testing.B) {
	const quota = 8 << 20
	for _, store := range []string{"local", "mem"} {
		for _, encoded := range []bool{false, true} {
			name := store + "/Write"
			if encoded {
				name = store + "/WriteEncoded"
			}
			b.Run(name, func(b *testing.B) {
				ctx := context.Background()
				r := newRand(1)
				batch := make([]codec.Event, 64)
				enc := make([][]byte, 64)
				for i := range batch {
					batch[i] = bigRow(r, 1, 100, int64(i), 4000)
					enc[i] = codec.AppendEvent(nil, &batch[i])
				}
				size := int64(0)
				for i := range enc {
					size += int64(len(enc[i]))
				}
				rounds := 64 * quota / size
				b.SetBytes(rounds * size)
				for range b.N {
					var bk *blob.Bucket
					if store == "local" {
						bk = localBucket(b, b.TempDir())
					} else {
						bk = memBucket()
					}
					o := stagedOptions(quota)
					o.BlockSize = 64 << 10
					o.MaxSegmentBytes = 64 << 20
					w := openSpan1(b, bk, o)
					q := watchQuota(w)
					var heap peakHeap
					heap.start()
					start := time.Now()
					for range rounds {
						var err error
						if encoded {
							err = w.WriteEncoded(ctx, 1, enc...)
						} else {
							err = w.Write(ctx, 1, batch...)
						}
						must(b, err)
					}
					must(b, w.AdvanceResolved(1, 100))
					must(b, w.Close(ctx))
					elapsed := time.Since(start)
					peak := q.end()
					st := w.Stats()
					b.ReportMetric(float64(rounds*size)/elapsed.Seconds()/(1<<20), "MiB/s")
					b.ReportMetric(float64(peak)/(1<<20), "peak-buffered-MiB")
					ph := int64(heap.stop())
					if store == "mem" {
						// The memory store holds what was stored: count the
						// writer's heap only.
						ph -= st.StoredBytes
					}
					b.ReportMetric(float64(ph)/(1<<20), "peak-heap-MiB")
					b.ReportMetric(float64(st.StageCuts), "stage-cuts")
					b.ReportMetric(float64(st.QuotaOvercommits), "overcommits")
				}
			})
		}
	}
}

// peakHeap samples the heap in use every millisecond.
type peakHeap struct {
	peak  uint64
	stopc chan struct{}
	done  chan struct{}
}

func (p *peakHeap) start() {
	p.stopc, p.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.done)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			p.peak = max(p.peak, ms.HeapInuse)
			select {
			case <-p.stopc:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
}

func (p *peakHeap) stop() uint64 {
	close(p.stopc)
	<-p.done
	return p.peak
}
