package redo_test

import (
	"context"
	"fmt"
	"testing"

	_ "github.com/redokit/redokit/backends/gocloud" // "gocloud+mem"
	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/driver"
	"github.com/redokit/redokit/conformance"
	"github.com/redokit/redokit/conformance/redo"
)

// The redo-level suite on the backends that need no server.

func TestRedoMem(t *testing.T) {
	redo.Run(t, redo.Harness{Harness: conformance.Harness{
		MakeBucket: func(ctx context.Context, t conformance.TB) (*blob.Bucket, error) {
			return mem.New(), nil
		},
		ConditionalWrites: true,
	}})
}

func TestRedoLocal(t *testing.T) {
	redo.Run(t, redo.Harness{Harness: conformance.Harness{
		MakeBucket: func(ctx context.Context, t conformance.TB) (*blob.Bucket, error) {
			return local.New(t.TempDir(), nil)
		},
		Append:            true,
		ConditionalWrites: true,
	}})
}

func TestRedoGocloudMem(t *testing.T) {
	redo.Run(t, redo.Harness{Harness: conformance.Harness{
		MakeBucket: func(ctx context.Context, t conformance.TB) (*blob.Bucket, error) {
			return blob.Open(ctx, "gocloud+mem://")
		},
		ConditionalWrites: true,
	}})
}

// TestRedoMemViews runs the suite on buckets that are views under a prefix
// of a shared store, as redokit check makes them: every tier must keep to
// the view's keys.
func TestRedoMemViews(t *testing.T) {
	store := mem.NewDriver()
	n := 0
	redo.Run(t, redo.Harness{Harness: conformance.Harness{
		MakeBucket: func(ctx context.Context, t conformance.TB) (*blob.Bucket, error) {
			n++
			return blob.NewBucket(keepOpen{store}).Prefixed(fmt.Sprintf("view-%03d/", n))
		},
		ConditionalWrites: true,
	}})
}

// keepOpen leaves the shared store open when a subtest closes its view.
type keepOpen struct{ driver.Driver }

func (keepOpen) Close() error { return nil }
