package s3

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/conformance"
	"github.com/redokit/redokit/conformance/redo"
	"github.com/redokit/redokit/testkit/toxinet"
)

// TestConformance runs the blob conformance suite on versitygw (posix
// backend), plainly and under a key prefix (the suite does both), with a
// fresh bucket for every subtest.
//
// Every capability is on: versitygw checks If-None-Match and If-Match on
// PutObject and CompleteMultipartUpload atomically. Its posix backend maps
// keys to paths, so "x//y" and "x/y" alias and a key cannot also be a
// "directory" of others; blob.ValidateKey forbids the aliasing forms and the
// suite's key layout never needs the other, so neither is declared.
func TestConformance(t *testing.T) {
	ep := endpoint(t)
	conformance.RunBucket(t, conformance.Harness{
		// Default sizes: the suite's large object (64 MiB) goes up in 8 MiB
		// parts, its 20 MiB atomic-write objects too.
		MakeBucket:        freshBuckets(adminClient(t, ep), Options{Endpoint: ep}),
		ConditionalWrites: true,
	})
}

// freshBuckets is a Harness.MakeBucket: a bucket over a new versitygw
// bucket each time, opened with o (path-style, us-east-1).
func freshBuckets(admin *awss3.Client, o Options) func(context.Context, conformance.TB) (*blob.Bucket, error) {
	o.UsePathStyle, o.Region = true, "us-east-1"
	return func(ctx context.Context, t conformance.TB) (*blob.Bucket, error) {
		name, err := createBucket(t, admin)
		if err != nil {
			return nil, err
		}
		each := o
		return New(nil, name, &each)
	}
}

// TestConformanceSmallParts runs the suite again with the smallest parts
// S3 allows and every non-empty object in parts, so that each check also
// runs through the multipart path (conditional completes, aborts).
func TestConformanceSmallParts(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the plain conformance run covers the single-request path")
	}
	ep := endpoint(t)
	conformance.RunBucket(t, conformance.Harness{
		MakeBucket:        freshBuckets(adminClient(t, ep), Options{Endpoint: ep, PartSize: MinPartSize, MultipartThreshold: -1}),
		ConditionalWrites: true,
		LargeObject:       16 << 20,
		LargeObjectReason: "every object already goes up in 5 MiB parts here; the default-size run covers 64 MiB",
	})
}

// TestRedoConformance runs the redo-level suite (real writer, reader,
// coordinator, fencing, GC and the fault tiers) on versitygw. Its Network
// tier writes through the toxiproxy proxy "s3" with every segment in
// multipart uploads, and checks that no upload is left behind.
func TestRedoConformance(t *testing.T) {
	ep := endpoint(t)
	admin := adminClient(t, ep)
	redo.Run(t, redo.Harness{
		Harness: conformance.Harness{
			MakeBucket:        freshBuckets(admin, Options{Endpoint: ep}),
			ConditionalWrites: true,
		},
		Network: toxiNetwork(ep, admin),
	})
}

// toxiNetwork is the Network tier's way to versitygw through the toxiproxy
// proxy "s3", or nil (faults in the driver) when the proxy is not set up.
// Through the proxy every segment goes up in parts, over a fresh connection
// per request (so that a reset rolls per request), with short attempts.
func toxiNetwork(ep string, admin *awss3.Client) func(context.Context, conformance.TB) (*redo.Network, error) {
	via, addr := os.Getenv("REDOKIT_S3_TOXI_ENDPOINT"), os.Getenv("TOXIPROXY_ADDR")
	if via == "" || addr == "" {
		return nil
	}
	return func(ctx context.Context, t conformance.TB) (*redo.Network, error) {
		p, err := toxinet.Proxy(t, addr, "s3")
		if err != nil {
			return nil, err
		}
		name, err := createBucket(t, admin)
		if err != nil {
			return nil, err
		}
		faulty, err := New(nil, name, &Options{Endpoint: via, UsePathStyle: true, Region: "us-east-1",
			PartSize: MinPartSize, MultipartThreshold: -1,
			Timeout: 2 * time.Second, MaxAttempts: 3, HTTPClient: noKeepAlive()})
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { faulty.Close() })
		direct, err := New(nil, name, &Options{Endpoint: ep, UsePathStyle: true, Region: "us-east-1"})
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { direct.Close() })
		return &redo.Network{Faulty: faulty, Direct: direct, Inject: toxinet.Inject(p),
			After: func(ctx context.Context, t conformance.TB) {
				if us := uploads(t, admin, name); len(us) != 0 {
					var keys []string
					for _, u := range us {
						keys = append(keys, aws.ToString(u.Key))
					}
					t.Errorf("%d multipart uploads left after the faults: %v", len(us), keys)
				}
			}}, nil
	}
}
