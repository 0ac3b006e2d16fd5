package gcs

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/redokit/redokit/blob"
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
	c, _ := newClient(b, emulatorHost(b))
	name := newTestBucket(b, c)
	obj := c.Bucket(name).Object("bench/raw")
	raw := func(chunkSize int) func(ctx context.Context, data []byte) error {
		return func(ctx context.Context, data []byte) error {
			w := obj.NewWriter(ctx)
			if chunkSize >= 0 {
				w.ChunkSize = chunkSize
			}
			if _, err := io.Copy(w, bytes.NewReader(data)); err != nil {
				return err
			}
			return w.Close()
		}
	}
	backendtest.PutVsRaw(b, backendtest.Pattern(size, 1),
		backendtest.PutCase{Name: "resumable", Bucket: func() (*blob.Bucket, error) { return New(c, name, nil) }, Raw: raw(-1)},
		backendtest.PutCase{Name: "single", Bucket: func() (*blob.Bucket, error) { return New(c, name, &Options{ResumableThreshold: size + 1}) }, Raw: raw(0)})
}
