package writer

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/driver"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/internal/layout"
)

// wanDriver models an object store reached over a network: each segment put
// waits a round trip plus its size at a per-connection bandwidth, so that
// requests in parallel add up, as on S3, GCS or Azure (unlike an emulator
// bound by the host's CPU).
type wanDriver struct {
	driver.Driver
	rtt       time.Duration
	bandwidth float64 // bytes per second, per request
}

func (d *wanDriver) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	if strings.Contains(key, "/"+layout.SegmentDir+"/") || strings.Contains(key, "/raw/") {
		time.Sleep(d.rtt + time.Duration(float64(size)/d.bandwidth*float64(time.Second)))
	}
	return d.Driver.Put(ctx, key, r, size, opts)
}

// BenchmarkObjectUploads writes 4 KiB rows flat out into 4 MiB segment
// objects over a wanDriver and reports the stored MiB/s as a multiple of raw
// sequential PUTs of objects of the writer's mean size ("x-raw").
func BenchmarkObjectUploads(b *testing.B) {
	const total = 96 << 20
	for _, n := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("uploads=%d", n), func(b *testing.B) {
			ctx := context.Background()
			r := newRand(1)
			rows := make([]codec.Event, 64)
			for i := range rows {
				rows[i] = bigRow(r, 1, 1, int64(i), 4000)
			}
			for range b.N {
				d := &wanDriver{Driver: mem.NewDriver(), rtt: 20 * time.Millisecond, bandwidth: 100 << 20}
				bk := blob.NewBucket(d)
				o := testOptions("w")
				o.MaxSegmentBytes = 4 << 20
				o.MemoryQuota = 64 << 20
				o.Compression = CompressionNone
				o.MaxUploads = n
				w, err := Open(ctx, bk, o)
				must(b, err)
				must(b, w.AddSpan(1, 0))
				start := time.Now()
				var written int64
				for ts := uint64(1); written < total; ts++ {
					ev := rows[ts%uint64(len(rows))]
					ev.Row.CommitTs, ev.Row.StartTs = ts, ts-1
					must(b, w.Write(ctx, 1, ev))
					must(b, w.AdvanceResolved(1, ts))
					written += 4000
				}
				_, err = w.Flush(ctx)
				must(b, err)
				elapsed := time.Since(start)
				st := w.Stats()
				must(b, w.Close(ctx))
				mean := int(st.StoredBytes / max(st.Segments, 1))
				data := make([]byte, mean)
				rs := time.Now()
				for i := range 4 {
					_, err := bk.Put(ctx, fmt.Sprintf("x/raw/%d", i), data, &blob.PutOptions{IfNotExist: true})
					must(b, err)
				}
				raw := float64(4*mean) / time.Since(rs).Seconds()
				stored := float64(st.StoredBytes) / elapsed.Seconds()
				b.ReportMetric(stored/(1<<20), "stored-MiB/s")
				b.ReportMetric(stored/raw, "x-raw")
			}
		})
	}
}
