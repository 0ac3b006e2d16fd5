package mapblob_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/conformance"
	mapblob "github.com/redokit/redokit/examples/thirdparty-backend"
)

// TestConformance certifies the driver: a fresh service per subtest, with
// the capabilities it has (conditional writes) and has not (append).
func TestConformance(t *testing.T) {
	conformance.RunBucket(t, conformance.Harness{
		MakeBucket: func(ctx context.Context, t conformance.TB) (*blob.Bucket, error) {
			return mapblob.New(mapblob.NewService(), nil)
		},
		ConditionalWrites: true,
	})
}

// TestConformanceURL certifies what blob.Open returns, with a store page
// limit below what the suite asks for (drivers may return short pages) and a
// key prefix from the URL.
func TestConformanceURL(t *testing.T) {
	n := 0
	conformance.RunBucket(t, conformance.Harness{
		MakeBucket: func(ctx context.Context, t conformance.TB) (*blob.Bucket, error) {
			n++
			return blob.Open(ctx, fmt.Sprintf("mapblob://conformance-%d/redo?page_size=7", n))
		},
		ConditionalWrites: true,
		LargeObject:       1 << 20,
		LargeObjectReason: "TestConformance runs the full-size round trip on the same driver",
	})
}

func TestOpenURLRejectsUnknownParameters(t *testing.T) {
	_, err := blob.Open(context.Background(), "mapblob://x?page_size=3&secret_key=hunter2")
	if !errors.Is(err, blob.ErrInvalidArgument) || !strings.Contains(err.Error(), "secret_key") {
		t.Fatalf("Open with an unknown parameter: %v; want ErrInvalidArgument naming it", err)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("the error prints a secret: %v", err)
	}
}

func Example() {
	ctx := context.Background()
	b, err := blob.Open(ctx, "mapblob://example/logs?page_size=100")
	if err != nil {
		panic(err)
	}
	defer b.Close()

	if _, err := b.Put(ctx, "meta", []byte("epoch 1"), &blob.PutOptions{IfNotExist: true}); err != nil {
		panic(err)
	}
	_, err = b.Put(ctx, "meta", []byte("epoch 1 again"), &blob.PutOptions{IfNotExist: true})
	fmt.Println("second create:", blob.IsPreconditionFailed(err))

	_, err = b.Stat(ctx, "missing")
	fmt.Println("missing:", blob.IsNotExist(err), err)

	var svc *mapblob.Service
	fmt.Println("native client:", b.As(&svc) && svc != nil)
	// Output:
	// second create: true
	// missing: true blob: stat "missing": not exist: mapblob service: status 404 for "logs/missing"
	// native client: true
}
