package azure

import (
	"bytes"
	"context"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"

	"github.com/redokit/redokit/blob"
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
	endpoint, account, key := endpointEnv(b, "REDOKIT_AZURE_ENDPOINT")
	c, _ := newContainerClient(b, endpoint, account, key)
	bb := c.NewBlockBlobClient("bench/raw")
	backendtest.PutVsRaw(b, backendtest.Pattern(16<<20, 1),
		backendtest.PutCase{
			Name:   "put-blob",
			Bucket: func() (*blob.Bucket, error) { return New(c, nil) },
			Raw: func(ctx context.Context, data []byte) error {
				_, err := bb.UploadBuffer(ctx, data, nil)
				return err
			},
		},
		backendtest.PutCase{
			Name:   "staged",
			Bucket: func() (*blob.Bucket, error) { return New(c, &Options{PutThreshold: 8 << 20, BlockSize: 8 << 20}) },
			Raw: func(ctx context.Context, data []byte) error {
				_, err := bb.UploadStream(ctx, bytes.NewReader(data), &blockblob.UploadStreamOptions{BlockSize: 8 << 20, Concurrency: 4})
				return err
			},
		})
}
