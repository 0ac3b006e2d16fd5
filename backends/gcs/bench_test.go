package gcs

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/redokit/redokit/testkit/backendtest"
)

// BenchmarkPut16MiB compares the driver's Put of a 16 MiB object with a raw
// upload of the same bytes through the same client, in the same run:
//
//	driver/resumable  default options: 16 MiB is at the resumable threshold,
//	                  so a resumable session with one 16 MiB chunk
//	raw/resumable     storage.Writer, default ChunkSize (16 MiB)
//	driver/single     ResumableThreshold above the size: one multipart request
//	                  with the CRC32C the driver computes
//	raw/single        storage.Writer with ChunkSize 0
//
// Run with: go test -run '^$' -bench Put16MiB -benchtime 5x ./backends/gcs
func BenchmarkPut16MiB(b *testing.B) {
	const size = 16 << 20
	data := backendtest.Pattern(size, 1)
	c, _ := newClient(b, emulatorHost(b))
	name := newTestBucket(b, c)
	ctx := context.Background()
	report := func(b *testing.B, el time.Duration) {
		b.ReportMetric(float64(size)*float64(b.N)/el.Seconds()/1e6, "MB/s")
	}
	for _, v := range []struct {
		name string
		opts *Options
	}{{"resumable", nil}, {"single", &Options{ResumableThreshold: size + 1}}} {
		b.Run("driver/"+v.name, func(b *testing.B) {
			bkt, err := New(c, name, v.opts)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(size)
			start := time.Now()
			for b.Loop() {
				if _, err := bkt.Put(ctx, "bench/driver", data, nil); err != nil {
					b.Fatal(err)
				}
			}
			report(b, time.Since(start))
		})
		b.Run("raw/"+v.name, func(b *testing.B) {
			obj := c.Bucket(name).Object("bench/raw")
			b.SetBytes(size)
			start := time.Now()
			for b.Loop() {
				w := obj.NewWriter(ctx)
				if v.name == "single" {
					w.ChunkSize = 0
				}
				if _, err := io.Copy(w, bytes.NewReader(data)); err != nil {
					b.Fatal(err)
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
			report(b, time.Since(start))
		})
	}
}
