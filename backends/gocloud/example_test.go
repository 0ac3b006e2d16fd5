package gocloud_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	gcblob "gocloud.dev/blob"

	"github.com/redokit/redokit/backends/gocloud"
	"github.com/redokit/redokit/blob"
)

// Open a gocloud bucket by a redokit URL, create an object only if it is
// absent, and list it back. For S3, GCS or Azure, blank-import the gocloud
// driver and call gocloud.RegisterScheme("s3") (or "gs", "azblob") first.
func Example() {
	ctx := context.Background()
	b, err := blob.Open(ctx, "gocloud+mem://?prefix=logs/cf1/")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	if _, err := b.Put(ctx, "seg/0001", []byte("first"), &blob.PutOptions{IfNotExist: true}); err != nil {
		log.Fatal(err)
	}
	_, err = b.Put(ctx, "seg/0001", []byte("again"), &blob.PutOptions{IfNotExist: true})
	fmt.Println("second create lost:", blob.IsPreconditionFailed(err))

	data, err := b.ReadAll(ctx, "seg/0001")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("read %q\n", data)

	for a, err := range b.List(ctx, "seg/") {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("listed", a.Key, a.Size)
	}

	// The gocloud bucket underneath, for anything redokit does not cover.
	var gb *gcblob.Bucket
	if b.As(&gb) {
		ok, _ := gb.Exists(ctx, "logs/cf1/seg/0001")
		fmt.Println("gocloud sees it:", ok)
	}
	// Output:
	// second create lost: true
	// read "first"
	// listed seg/0001 5
	// gocloud sees it: true
}

// Wrap a gocloud bucket opened elsewhere.
func ExampleNew() {
	ctx := context.Background()
	gb, err := gcblob.OpenBucket(ctx, "mem://")
	if err != nil {
		log.Fatal(err)
	}
	b, err := gocloud.New(gb, nil) // b owns gb now
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	_, err = b.Put(ctx, "meta", []byte("v1"), &blob.PutOptions{IfMatch: `"x"`})
	fmt.Println("if-match without LocalCAS:", errors.Is(err, blob.ErrNotSupported))
	// Output:
	// if-match without LocalCAS: true
}
