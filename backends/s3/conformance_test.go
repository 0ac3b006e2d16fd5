package s3

import (
	"context"
	"testing"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/conformance"
)

// TestConformance runs the blob conformance suite on versitygw (posix
// backend), plainly and under a key prefix (the suite does both), with a
// fresh bucket for every subtest.
//
// Every capability is on: versitygw checks If-None-Match and If-Match on
// PutObject and CompleteMultipartUpload atomically. Its posix backend maps
// keys to paths, so "x//y" and "x/y" alias and a key cannot also be a
// "directory" of others; blob.ValidateKey forbids the aliasing forms and the
// suite's key layout never needs the other, so neither is declared.
func TestConformance(t *testing.T) {
	ep := endpoint(t)
	admin := adminClient(t, ep)
	conformance.RunBucket(t, conformance.Harness{
		MakeBucket: func(ctx context.Context, t conformance.TB) (*blob.Bucket, error) {
			name, err := createBucket(t, admin)
			if err != nil {
				return nil, err
			}
			// Default sizes: the suite's large object (64 MiB) goes up in
			// 8 MiB parts, its 20 MiB atomic-write objects too.
			return New(nil, name, &Options{Endpoint: ep, UsePathStyle: true, Region: "us-east-1"})
		},
		ConditionalWrites: true,
	})
}

// TestConformanceSmallParts runs the suite again with the smallest parts
// S3 allows and every non-empty object in parts, so that each check also
// runs through the multipart path (conditional completes, aborts).
func TestConformanceSmallParts(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the plain conformance run covers the single-request path")
	}
	ep := endpoint(t)
	admin := adminClient(t, ep)
	conformance.RunBucket(t, conformance.Harness{
		MakeBucket: func(ctx context.Context, t conformance.TB) (*blob.Bucket, error) {
			name, err := createBucket(t, admin)
			if err != nil {
				return nil, err
			}
			return New(nil, name, &Options{Endpoint: ep, UsePathStyle: true, Region: "us-east-1",
				PartSize: MinPartSize, MultipartThreshold: -1})

		},
		ConditionalWrites: true,
		LargeObject:       16 << 20,
		LargeObjectReason: "every object already goes up in 5 MiB parts here; the default-size run covers 64 MiB",
	})
}

// TestRedoConformance runs the redo-level suite (real writer, reader,
// coordinator, fencing and GC) on versitygw.
func TestRedoConformance(t *testing.T) {
	ep := endpoint(t)
	admin := adminClient(t, ep)
	conformance.RunRedo(t, conformance.Harness{
		MakeBucket: func(ctx context.Context, t conformance.TB) (*blob.Bucket, error) {
			name, err := createBucket(t, admin)
			if err != nil {
				return nil, err
			}
			return New(nil, name, &Options{Endpoint: ep, UsePathStyle: true, Region: "us-east-1"})
		},
		ConditionalWrites: true,
	})
}
