package gcs

import (
	"context"
	"net/url"
	"testing"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/conformance"
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
// coordinator, fencing and GC) on fake-gcs-server.
func TestRedoConformance(t *testing.T) {
	c, _ := newClient(t, emulatorHost(t))
	conformance.RunRedo(t, conformance.Harness{
		MakeBucket: func(ctx context.Context, st conformance.TB) (*blob.Bucket, error) {
			return New(c, newTestBucket(st, c), nil)
		},
		ConditionalWrites: true,
	})
}
