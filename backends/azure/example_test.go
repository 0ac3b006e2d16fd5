package azure_test

import (
	"context"
	"fmt"
	"log"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/redokit/redokit/backends/azure"
	"github.com/redokit/redokit/blob"
)

// Open an Azure Blob container by URL, with credentials from
// AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT with
// AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN. (Compile-only: it needs a
// server.)
func Example() {
	ctx := context.Background()
	b, err := blob.Open(ctx, "azblob://redo/changefeed-1?put_threshold=32MiB&block_size=8MiB")
	if err != nil {
		log.Fatal(err) // never shows a key or a SAS signature
	}
	defer b.Close()

	// Create the writer's epoch blob only if it does not exist yet; then
	// advance it by compare-and-swap on its ETag.
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

// Use a container client of your own (for example one built on an azidentity
// credential); the escape hatch gives it back.
func ExampleNew() {
	client, err := container.NewClientWithNoCredential("https://myaccount.blob.core.windows.net/redo", nil)
	if err != nil {
		log.Fatal(err)
	}
	b, err := azure.New(client, &azure.Options{Concurrency: 8})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	var c *container.Client
	fmt.Println(b.As(&c))
}

// A URL with an unknown option fails before any request, naming it; the
// signature of a SAS given in the URL by mistake is not printed.
func Example_urlCheck() {
	_, err := blob.Open(context.Background(), "azblob://redo/changefeed-1?sig=c2VjcmV0&blocksize=8MiB")
	fmt.Println(err)
	// Output:
	// blob: open azblob://redo/changefeed-1?blocksize=8MiB&sig=xxxxx: azure: invalid argument: unknown query parameter(s) blocksize, sig (known: endpoint, put_threshold, block_size, concurrency, try_timeout, max_retries, batch_delete)
}
