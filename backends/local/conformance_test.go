//go:build unix

package local_test

import (
	"context"
	"testing"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/conformance"
)

// TestConformance runs the blob suite on a fresh root per subtest. RunBucket
// runs every subtest twice: on the bucket ("Plain") and on a view under
// conformance.Prefix beside sibling keys it must not see ("Prefixed").
func TestConformance(t *testing.T) {
	conformance.RunBucket(t, conformance.Harness{
		MakeBucket: func(ctx context.Context, t conformance.TB) (*blob.Bucket, error) {
			return local.Open(t.TempDir(), nil)
		},
		Append:            true,
		ConditionalWrites: true,
	})
}
