package conformance_test

import (
	"context"
	"testing"

	_ "github.com/redokit/redokit/backends/gocloud" // "gocloud+mem"
	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/conformance"
)

// The backends that need no server are certified here, so that
// `go test ./conformance/...` alone proves them; the ones that need an
// emulator run the suite in their own packages.

// TestLocal certifies the file-system backend on a fresh directory per
// subtest.
func TestLocal(t *testing.T) {
	conformance.RunBucket(t, conformance.Harness{
		MakeBucket: func(ctx context.Context, t conformance.TB) (*blob.Bucket, error) {
			return local.New(t.TempDir(), nil)
		},
		Append:            true,
		ConditionalWrites: true,
	})
}

// TestGocloudMem certifies the gocloud adapter over gocloud's memblob, which
// "gocloud+mem" gives compare-and-swap (see gocloud.Options.LocalCAS).
func TestGocloudMem(t *testing.T) {
	conformance.RunBucket(t, conformance.Harness{
		MakeBucket: func(ctx context.Context, t conformance.TB) (*blob.Bucket, error) {
			return blob.Open(ctx, "gocloud+mem://")
		},
		ConditionalWrites: true,
	})
}
