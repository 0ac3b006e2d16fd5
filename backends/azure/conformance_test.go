package azure

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/conformance"
	"github.com/redokit/redokit/conformance/redo"
	"github.com/redokit/redokit/testkit/testenv"
	"github.com/redokit/redokit/testkit/toxinet"
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
		testenv.Need(t, EnvConnectionString+" is not set")
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
// coordinator, fencing, GC and the fault tiers) on Azurite. Its Network tier
// writes through the toxiproxy proxy "azure" with every segment in staged
// blocks, and checks that no blob left with only uncommitted blocks (a
// staged upload a fault cut off) is visible.
func TestRedoConformance(t *testing.T) {
	endpoint, account, key := endpointEnv(t, "REDOKIT_AZURE_ENDPOINT")
	redo.Run(t, redo.Harness{
		Harness: conformance.Harness{
			MakeBucket: func(ctx context.Context, st conformance.TB) (*blob.Bucket, error) {
				c, _ := newContainerClient(st, endpoint, account, key)
				return New(c, nil)
			},
			ConditionalWrites: true,
		},
		Network: toxiNetwork(endpoint, account, key),
	})
}

// toxiNetwork is the Network tier's way to Azurite through the toxiproxy
// proxy "azure", or nil (faults in the driver) when the proxy is not set up.
// Through the proxy every segment goes up as staged blocks, over a fresh
// connection per request (so that a reset rolls per request), with short
// tries.
func toxiNetwork(endpoint, account, key string) func(context.Context, conformance.TB) (*redo.Network, error) {
	addr, toxiEndpoint := os.Getenv("TOXIPROXY_ADDR"), os.Getenv("REDOKIT_AZURE_TOXI_ENDPOINT")
	if addr == "" || toxiEndpoint == "" {
		return nil
	}
	return func(ctx context.Context, t conformance.TB) (*redo.Network, error) {
		p, err := toxinet.Proxy(t, addr, "azure")
		if err != nil {
			return nil, err
		}
		dc, _ := newContainerClient(t, endpoint, account, key)
		direct, err := New(dc, nil)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { direct.Close() })
		cred, err := container.NewSharedKeyCredential(account, key)
		if err != nil {
			return nil, err
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DisableKeepAlives = true
		tcl, err := container.NewClientWithSharedKeyCredential(toxiEndpoint+"/"+containerName(t, dc), cred, &container.ClientOptions{
			ClientOptions: policy.ClientOptions{Transport: &http.Client{Transport: tr}},
		})
		if err != nil {
			return nil, err
		}
		faulty, err := New(tcl, &Options{
			PutThreshold: 2 << 10, BlockSize: 2 << 10, Concurrency: 4, // every segment in staged blocks
			TryTimeout: 2 * time.Second, MaxRetries: 2, RetryDelay: 50 * time.Millisecond, MaxRetryDelay: 500 * time.Millisecond,
		})
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { faulty.Close() })
		return &redo.Network{Faulty: faulty, Direct: direct, Inject: toxinet.Inject(p),
			After: func(ctx context.Context, t conformance.TB) { noVisibleUncommitted(ctx, t, dc, direct) }}, nil
	}
}

// noVisibleUncommitted checks what a staged upload cut off by a fault leaves:
// uncommitted blocks, which Azure cannot abort, keeps invisible and discards
// after a week (documented in the package). No such name may be visible as
// an object.
func noVisibleUncommitted(ctx context.Context, t conformance.TB, c *container.Client, direct *blob.Bucket) {
	names := func(uncommitted bool) []string {
		var out []string
		pager := c.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Include: container.ListBlobsInclude{UncommittedBlobs: uncommitted}})
		for i := 0; i < 100 && pager.More(); i++ { // bounded: 100 pages
			page, err := pager.NextPage(ctx)
			if err != nil {
				t.Fatalf("list blobs (uncommitted %v): %v", uncommitted, err)
			}
			for _, b := range page.Segment.BlobItems {
				out = append(out, *b.Name)
			}
		}
		slices.Sort(out)
		return out
	}
	committed, all := names(false), names(true)
	var orphans []string
	for _, n := range all {
		if _, found := slices.BinarySearch(committed, n); !found {
			orphans = append(orphans, n)
		}
	}
	for _, n := range orphans {
		if _, err := direct.Stat(ctx, n); !blob.IsNotExist(err) {
			t.Errorf("blob %s with only uncommitted blocks is visible: Stat = %v", n, err)
		}
	}
	t.Logf("%d committed blobs; %d names with only uncommitted blocks (invisible, left to the service's GC): %v", len(committed), len(orphans), orphans)
}
