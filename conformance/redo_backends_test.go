package conformance_test

import (
	"context"
	"testing"

	_ "github.com/redokit/redokit/backends/gocloud" // "gocloud+mem"
	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/conformance"
)

// The redo-level suite on the backends that need no server.

func TestRedoMem(t *testing.T) {
	conformance.RunRedo(t, conformance.Harness{
		MakeBucket: func(ctx context.Context, t conformance.TB) (*blob.Bucket, error) {
			return mem.New(), nil
		},
		ConditionalWrites: true,
	})
}

func TestRedoLocal(t *testing.T) {
	conformance.RunRedo(t, conformance.Harness{
		MakeBucket: func(ctx context.Context, t conformance.TB) (*blob.Bucket, error) {
			return local.New(t.TempDir(), nil)
		},
		Append:            true,
		ConditionalWrites: true,
	})
}

func TestRedoGocloudMem(t *testing.T) {
	conformance.RunRedo(t, conformance.Harness{
		MakeBucket: func(ctx context.Context, t conformance.TB) (*blob.Bucket, error) {
			return blob.Open(ctx, "gocloud+mem://")
		},
		ConditionalWrites: true,
	})
}
