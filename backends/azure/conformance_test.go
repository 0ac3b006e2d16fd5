package azure

import (
	"context"
	"net/url"
	"os"
	"testing"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/conformance"
)

// conformanceLarge is the large-object size of the runs against Azurite:
// well above the staged-block threshold set below, which is what the large
// round trip must cross, while Azurite (which writes every block to disk and
// keeps deleted extents for 10 minutes) stays small on a shared machine.
const (
	conformanceLarge       = 24 << 20
	conformanceLargeReason = "Azurite stores every staged block on disk and frees deleted ones only after 10 minutes; 24 MiB is 3x the 8 MiB staged-block threshold these runs use, so the large round trip takes the staged path"
)

// TestConformance certifies the driver built with New, with a small put
// threshold so that large objects are staged as blocks. Every subtest gets
// a fresh container; the suite itself runs each check on the container and
// under a key prefix.
func TestConformance(t *testing.T) {
	endpoint, account, key := endpointEnv(t, "REDOKIT_AZURE_ENDPOINT")
	conformance.RunBucket(t, conformance.Harness{
		MakeBucket: func(ctx context.Context, st conformance.TB) (*blob.Bucket, error) {
			c, _ := newContainerClient(st, endpoint, account, key)
			return New(c, &Options{PutThreshold: 8 << 20, BlockSize: 2 << 20})
		},
		ConditionalWrites: true,
		LargeObject:       conformanceLarge,
		LargeObjectReason: conformanceLargeReason,
	})
}

// TestConformanceURL certifies the bucket blob.Open returns for an azblob://
// URL with a key prefix, credentials from the environment.
func TestConformanceURL(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: TestConformance certifies the driver and TestOpenURL the URL opener; this run repeats the suite through a URL with a prefix")
	}
	endpoint, account, key := endpointEnv(t, "REDOKIT_AZURE_ENDPOINT")
	if os.Getenv(EnvConnectionString) == "" {
		need(t, EnvConnectionString+" is not set")
	}
	conformance.RunBucket(t, conformance.Harness{
		MakeBucket: func(ctx context.Context, st conformance.TB) (*blob.Bucket, error) {
			c, _ := newContainerClient(st, endpoint, account, key)
			return blob.Open(ctx, "azblob://"+containerName(st, c)+"/redo/changefeed-1?"+url.Values{
				"put_threshold": {"8MiB"}, "block_size": {"2MiB"},
			}.Encode())
		},
		ConditionalWrites: true,
		LargeObject:       conformanceLarge,
		LargeObjectReason: conformanceLargeReason,
	})
}

// TestRedoConformance runs the redo-level suite (real writer, reader,
// coordinator, fencing and GC) on Azurite.
func TestRedoConformance(t *testing.T) {
	endpoint, account, key := endpointEnv(t, "REDOKIT_AZURE_ENDPOINT")
	conformance.RunRedo(t, conformance.Harness{
		MakeBucket: func(ctx context.Context, st conformance.TB) (*blob.Bucket, error) {
			c, _ := newContainerClient(st, endpoint, account, key)
			return New(c, nil)
		},
		ConditionalWrites: true,
	})
}
