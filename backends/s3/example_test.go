package s3_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/redokit/redokit/backends/s3"
	"github.com/redokit/redokit/blob"
)

// Open a bucket by URL (credentials come from the AWS chain, here the
// environment), write a segment only if it does not exist yet, and read a
// range of it back. This example needs a server: scripts/emulators.sh start
// s3 runs one and exports REDOKIT_S3_ENDPOINT (and the credentials), and
// the bucket must exist. Without a server it prints why and returns.
func Example() {
	ctx := context.Background()
	endpoint := os.Getenv("REDOKIT_S3_ENDPOINT") // e.g. http://127.0.0.1:7070
	if endpoint == "" {
		fmt.Println("no S3 endpoint: run scripts/emulators.sh start s3")
		return
	}
	b, err := blob.Open(ctx, "s3://redo-bucket/changefeed-1?region=us-east-1&use_path_style=true&endpoint="+endpoint)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	_, err = b.Put(ctx, "seg/0001", []byte("hello, redo"), &blob.PutOptions{IfNotExist: true})
	switch {
	case blob.IsPreconditionFailed(err):
		fmt.Println("segment already written by someone else")
	case err != nil:
		log.Fatal(err)
	}
	data, err := b.ReadRange(ctx, "seg/0001", 7, 4)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", data)
}

// Open from Go, with a client built from the AWS chain and these options,
// larger parts for large objects and SSE-KMS. The keys of the view returned
// live under "changefeed-1/".
func ExampleNew() {
	root, err := s3.New(nil, "redo-bucket", &s3.Options{
		Region:             "eu-west-1",
		PartSize:           16 << 20,
		MultipartThreshold: 64 << 20,
		Concurrency:        8,
		SSE:                "aws:kms",
		SSEKMSKeyID:        "alias/redo",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer root.Close()
	b, err := root.Prefixed("changefeed-1/")
	if err != nil {
		log.Fatal(err)
	}
	_ = b
}
