package gcs

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"testing"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/conformance"
	"github.com/redokit/redokit/conformance/redo"
	"github.com/redokit/redokit/testkit/toxinet"
)

// conformanceLarge is the large-object size of the runs against
// fake-gcs-server: well above the resumable threshold set below, which is what
// the large round trip must cross, while the emulator (which holds every
// object in memory, about 8x its size in RSS after an upload) stays small on
// a shared 2-core machine.
const (
	conformanceLarge       = 24 << 20
	conformanceLargeReason = "fake-gcs-server holds objects in memory; 24 MiB is 3x the 8 MiB resumable threshold these runs use, so the large round trip takes the resumable path"
)

// TestConformance certifies the driver built with New, with a small
// resumable threshold so that large objects go through resumable uploads.
// Every subtest gets a fresh bucket; the suite itself runs each check on the
// bucket and under a key prefix.
func TestConformance(t *testing.T) {
	c, _ := newClient(t, emulatorHost(t))
	conformance.RunBucket(t, conformance.Harness{
		MakeBucket: func(ctx context.Context, st conformance.TB) (*blob.Bucket, error) {
			return New(c, newTestBucket(st, c), &Options{ResumableThreshold: 8 << 20, ChunkSize: 2 << 20})
		},
		ConditionalWrites: true,
		LargeObject:       conformanceLarge,
		LargeObjectReason: conformanceLargeReason,
	})
}

// TestConformanceURL certifies the bucket blob.Open returns for a gs:// URL
// with a key prefix (STORAGE_EMULATOR_HOST routes it to the emulator).
func TestConformanceURL(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: TestConformance certifies the driver and TestOpenURL the URL opener; this run repeats the suite through a URL with a prefix")
	}
	c, _ := newClient(t, emulatorHost(t))
	conformance.RunBucket(t, conformance.Harness{
		MakeBucket: func(ctx context.Context, st conformance.TB) (*blob.Bucket, error) {
			name := newTestBucket(st, c)
			return blob.Open(ctx, "gs://"+name+"/redo/changefeed-1?"+url.Values{
				"resumable_threshold": {"8MiB"}, "chunk_size": {"2MiB"}, "concurrency": {"32"},
			}.Encode())
		},
		ConditionalWrites: true,
		LargeObject:       conformanceLarge,
		LargeObjectReason: conformanceLargeReason,
	})
}

// TestRedoConformance runs the redo-level suite (real writer, reader,
// coordinator, fencing, GC and the fault tiers) on fake-gcs-server. Its
// Network tier writes through the toxiproxy proxy "gcs" with every segment
// in a resumable upload.
func TestRedoConformance(t *testing.T) {
	c, _ := newClient(t, emulatorHost(t))
	redo.Run(t, redo.Harness{
		Harness: conformance.Harness{
			MakeBucket: func(ctx context.Context, st conformance.TB) (*blob.Bucket, error) {
				return New(c, newTestBucket(st, c), nil)
			},
			ConditionalWrites: true,
		},
		Network: toxiNetwork(c),
	})
}

// toxiNetwork is the Network tier's way to fake-gcs-server through the
// toxiproxy proxy "gcs", or nil (faults in the driver) when the proxy is not
// set up. Through the proxy every segment goes up as a resumable upload, over
// a fresh connection per request (so that a reset rolls per request), with
// short attempts.
func toxiNetwork(direct *storage.Client) func(context.Context, conformance.TB) (*redo.Network, error) {
	addr, toxi := os.Getenv("TOXIPROXY_ADDR"), os.Getenv("REDOKIT_GCS_TOXI_HOST")
	if addr == "" || toxi == "" {
		return nil
	}
	return func(ctx context.Context, t conformance.TB) (*redo.Network, error) {
		p, err := toxinet.Proxy(t, addr, "gcs")
		if err != nil {
			return nil, err
		}
		name := newTestBucket(t, direct)
		db, err := New(direct, name, nil)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { db.Close() })
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DisableKeepAlives = true
		tc, err := storage.NewClient(ctx,
			option.WithEndpoint("http://"+toxi+"/storage/v1/"),
			option.WithoutAuthentication(),
			option.WithHTTPClient(&http.Client{Transport: tr}),
			storage.WithDisabledClientMetrics(),
		)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { tc.Close() })
		opts := faultOptions()
		opts.ResumableThreshold = 1 // every segment in a resumable upload
		fb, err := New(tc, name, opts)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { fb.Close() })
		return &redo.Network{Faulty: fb, Direct: db, Inject: toxinet.Inject(p)}, nil
	}
}
