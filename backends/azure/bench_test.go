package azure

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"

	"github.com/redokit/redokit/testkit/backendtest"
)

// BenchmarkPut16MiB compares the driver's Put of a 16 MiB object with a raw
// upload of the same bytes through the same container client, in the same
// run:
//
//	driver/put-blob  default options: one Put Blob (below the 32 MiB threshold)
//	raw/put-blob     blockblob.Client.UploadBuffer: one Put Blob
//	driver/staged    PutThreshold 8 MiB: two 8 MiB blocks in parallel + Put Block List
//	raw/staged       blockblob.Client.UploadStream, 8 MiB blocks, concurrency 4
//
// The driver also computes the Content-MD5 of every request body for the
// service to verify, which the raw calls do not. Run with: go test -run '^$' -bench Put16MiB -benchtime 5x ./backends/azure
func BenchmarkPut16MiB(b *testing.B) {
	const size = 16 << 20
	data := backendtest.Pattern(size, 1)
	endpoint, account, key := endpointEnv(b, "REDOKIT_AZURE_ENDPOINT")
	c, _ := newContainerClient(b, endpoint, account, key)
	ctx := context.Background()
	report := func(b *testing.B, el time.Duration) {
		b.ReportMetric(float64(size)*float64(b.N)/el.Seconds()/1e6, "MB/s")
	}
	for _, v := range []struct {
		name string
		opts *Options
	}{{"put-blob", nil}, {"staged", &Options{PutThreshold: 8 << 20, BlockSize: 8 << 20}}} {
		b.Run("driver/"+v.name, func(b *testing.B) {
			bkt, err := New(c, v.opts)
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
			bb := c.NewBlockBlobClient("bench/raw")
			b.SetBytes(size)
			start := time.Now()
			for b.Loop() {
				var err error
				if v.name == "staged" {
					_, err = bb.UploadStream(ctx, bytes.NewReader(data), &blockblob.UploadStreamOptions{BlockSize: 8 << 20, Concurrency: 4})
				} else {
					_, err = bb.UploadBuffer(ctx, data, nil)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			report(b, time.Since(start))
		})
	}
}
