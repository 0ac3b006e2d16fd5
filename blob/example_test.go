package blob_test

import (
	"context"
	"fmt"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
)

// A Bucket is the same on every backend: keys are checked before a driver
// sees them, errors match sentinels and name the key, and conditional writes
// are how redokit coordinates without locks.
func ExampleBucket() {
	ctx := context.Background()
	b := mem.New() // or blob.Open(ctx, "s3://bucket/prefix"), local.New(dir, nil), …
	defer b.Close()

	_, _ = b.Put(ctx, "logs/a", []byte("one"), &blob.PutOptions{IfNotExist: true})
	_, err := b.Put(ctx, "logs/a", []byte("two"), &blob.PutOptions{IfNotExist: true})
	fmt.Println("second create refused:", blob.IsPreconditionFailed(err))

	_, err = b.Put(ctx, "logs/../escape", nil, nil)
	fmt.Println("bad key refused:", err != nil)

	data, _ := b.ReadAll(ctx, "logs/a")
	fmt.Println("read:", string(data))

	_, err = b.ReadAll(ctx, "logs/missing")
	fmt.Println("missing:", blob.IsNotExist(err))

	view, _ := b.Prefixed("logs/")
	for a, err := range view.List(ctx, "") {
		if err == nil {
			fmt.Println("listed under the view:", a.Key)
		}
	}
	// Output:
	// second create refused: true
	// bad key refused: true
	// read: one
	// missing: true
	// listed under the view: a
}
