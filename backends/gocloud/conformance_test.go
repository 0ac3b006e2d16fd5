package gocloud

import (
	"context"
	"testing"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/conformance"
)

// memblob through "gocloud+mem://": the bucket is private to the driver, so LocalCAS
// makes IfMatch atomic, and memblob's IfNotExist is atomic under its mutex.
func TestConformanceMem(t *testing.T) {
	conformance.RunBucket(t, conformance.Harness{
		MakeBucket: func(ctx context.Context, t conformance.TB) (*blob.Bucket, error) {
			return blob.Open(ctx, "gocloud+mem://")
		},
		ConditionalWrites: true,
	})
}

// fileblob: a directory per subtest.
func TestConformanceFile(t *testing.T) {
	conformance.RunBucket(t, conformance.Harness{
		MakeBucket: func(ctx context.Context, t conformance.TB) (*blob.Bucket, error) {
			return blob.Open(ctx, "gocloud+file://"+t.TempDir())
		},
		ConditionalWrites: false,
		ConditionalWritesReason: "gocloud.dev/blob v0.49 has no if-match write, so IfMatch is refused (ErrNotSupported); " +
			"fileblob's IfNotExist is a stat and rename under a mutex of one process, not atomic across processes",
	})
}
