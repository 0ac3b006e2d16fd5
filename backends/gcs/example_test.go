package gcs_test

import (
	"context"
	"fmt"
	"log"

	"cloud.google.com/go/storage"

	"github.com/redokit/redokit/backends/gcs"
	"github.com/redokit/redokit/blob"
)

// Open a GCS bucket by URL: Application Default Credentials, or an emulator
// when STORAGE_EMULATOR_HOST is set. (Compile-only: it needs a server.)
func Example() {
	ctx := context.Background()
	b, err := blob.Open(ctx, "gs://my-redo-bucket/changefeed-1?resumable_threshold=16MiB&timeout=30s")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	// Create the writer's epoch object only if it does not exist yet; then
	// advance it by compare-and-swap on the ETag (the object's generation).
	a, err := b.Put(ctx, "meta/epoch", []byte("1"), &blob.PutOptions{IfNotExist: true})
	if blob.IsPreconditionFailed(err) {
		fmt.Println("another writer holds the epoch")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	if _, err := b.Put(ctx, "meta/epoch", []byte("2"), &blob.PutOptions{IfMatch: a.ETag}); err != nil {
		log.Fatal(err)
	}
}

// Use a client of your own; the escape hatch gives it back.
func ExampleNew() {
	ctx := context.Background()
	client, err := storage.NewClient(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close() // New does not take ownership
	b, err := gcs.New(client, "my-redo-bucket", &gcs.Options{Concurrency: 32})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	var bh *storage.BucketHandle
	if b.As(&bh) {
		attrs, err := bh.Attrs(ctx)
		if err == nil {
			fmt.Println(attrs.Location)
		}
	}
}

// A URL with an unknown option fails before any request, naming it.
func Example_urlCheck() {
	_, err := blob.Open(context.Background(), "gs://my-redo-bucket/changefeed-1?chunksize=8MiB")
	fmt.Println(err)
	// Output:
	// blob: open gs://my-redo-bucket/changefeed-1?chunksize=8MiB: gcs: invalid argument: unknown query parameter(s) chunksize (known: chunk_size, resumable_threshold, concurrency, timeout, max_attempts, endpoint, anonymous)
}
