package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	_ "github.com/redokit/redokit/backends/azure"
	_ "github.com/redokit/redokit/backends/gcs"
	_ "github.com/redokit/redokit/backends/gocloud"
	"github.com/redokit/redokit/backends/local"
	_ "github.com/redokit/redokit/backends/s3"
	"github.com/redokit/redokit/blob"
)

// Backend is one store the matrix runs on.
type Backend struct {
	Name string `json:"name"`
	// Kind is "local" (a fresh directory per cell, appendable) or "object"
	// (URL; one segment object per flush).
	Kind   string `json:"kind"`
	URL    string `json:"url,omitempty"` // redacted in the report
	NoSync bool   `json:"no_sync,omitempty"`
	// What the backend is, for the report.
	Desc      string `json:"desc"`
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"` // why not available
	// Custom is a --storage URI: used as it is, never created or removed.
	Custom bool `json:"custom,omitempty"`

	cleanup func(context.Context) error
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// discoverBackends lists every backend, available or not, and creates the
// buckets of the emulators it finds in the environment.
func discoverBackends(ctx context.Context, storages []string) []*Backend {
	bs := []*Backend{
		{Name: "local-fsync", Kind: "local", Desc: "local disk, fdatasync every flush (writer default)", Available: true},
		{Name: "local-nosync", Kind: "local", NoSync: true, Desc: "local disk, no fsync (local.Options.NoSync: UNSAFE, measures all but the disk)", Available: true},
		{Name: "gocloud-mem", Kind: "object", URL: "gocloud+mem://", Desc: "gocloud.dev memblob through backends/gocloud, in-process", Available: true},
	}
	name := "redokit-bench-" + randHex(4)

	s3b := &Backend{Name: "s3", Kind: "object", Desc: "S3 API: versitygw on 127.0.0.1 (scripts/emulators.sh)"}
	if ep := os.Getenv("REDOKIT_S3_ENDPOINT"); ep == "" {
		s3b.Reason = "REDOKIT_S3_ENDPOINT is not set (start the servers: source scripts/emulators.sh && emulators_start s3 gcs azure)"
	} else {
		s3b.URL = "s3://" + name + "?endpoint=" + url.QueryEscape(ep) + "&use_path_style=true&region=us-east-1"
		setupObject(ctx, s3b, func(b *blob.Bucket) (func(context.Context) error, error) {
			var c *awss3.Client
			if !b.As(&c) {
				return nil, errors.New("s3 driver has no *s3.Client")
			}
			if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
				return nil, err
			}
			return func(ctx context.Context) error {
				_, err := c.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: aws.String(name)})
				return err
			}, nil
		})
	}
	bs = append(bs, s3b)

	gcsb := &Backend{Name: "gcs", Kind: "object", Desc: "GCS API: fake-gcs-server (memory backend) on 127.0.0.1"}
	if os.Getenv("STORAGE_EMULATOR_HOST") == "" {
		gcsb.Reason = "STORAGE_EMULATOR_HOST is not set (start the servers: source scripts/emulators.sh && emulators_start s3 gcs azure)"
	} else {
		gcsb.URL = "gs://" + name
		setupObject(ctx, gcsb, func(b *blob.Bucket) (func(context.Context) error, error) {
			var c *storage.Client
			if !b.As(&c) {
				return nil, errors.New("gcs driver has no *storage.Client")
			}
			if err := c.Bucket(name).Create(ctx, "redokit-bench", nil); err != nil {
				return nil, err
			}
			return func(ctx context.Context) error { return c.Bucket(name).Delete(ctx) }, nil
		})
	}
	bs = append(bs, gcsb)

	azb := &Backend{Name: "azure", Kind: "object", Desc: "Azure Blob API: Azurite on 127.0.0.1"}
	if ep := os.Getenv("REDOKIT_AZURE_ENDPOINT"); ep == "" {
		azb.Reason = "REDOKIT_AZURE_ENDPOINT is not set (start the servers: source scripts/emulators.sh && emulators_start s3 gcs azure)"
	} else {
		azb.URL = "azblob://" + name
		if os.Getenv("AZURE_STORAGE_CONNECTION_STRING") == "" {
			azb.URL += "?endpoint=" + url.QueryEscape(ep)
		}
		setupObject(ctx, azb, func(b *blob.Bucket) (func(context.Context) error, error) {
			var c *container.Client
			if !b.As(&c) {
				return nil, errors.New("azure driver has no *container.Client")
			}
			if _, err := c.Create(ctx, nil); err != nil {
				return nil, err
			}
			return func(ctx context.Context) error { _, err := c.Delete(ctx, nil); return err }, nil
		})
	}
	bs = append(bs, azb)

	for i, s := range storages {
		cb := &Backend{Name: fmt.Sprintf("custom-%d", i+1), Kind: "object", URL: s, Custom: true,
			Desc: "--storage " + blob.RedactURL(s)}
		b, err := blob.Open(ctx, s)
		if err != nil {
			cb.Reason = err.Error()
		} else {
			if b.CanAppend() {
				cb.Desc += " (appendable)"
			}
			cb.Available = true
			b.Close()
		}
		bs = append(bs, cb)
	}
	return bs
}

// setupObject opens an emulator's bucket URL and creates the bucket; on any
// failure the backend is marked unavailable with the error as the reason.
func setupObject(ctx context.Context, be *Backend, create func(*blob.Bucket) (func(context.Context) error, error)) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b, err := blob.Open(ctx, be.URL)
	if err != nil {
		be.Reason = "open: " + err.Error()
		return
	}
	drop, err := create(b)
	if err != nil {
		b.Close()
		be.Reason = "create bucket: " + err.Error()
		return
	}
	be.Available = true
	be.cleanup = func(ctx context.Context) error {
		defer b.Close()
		if err := deletePrefix(ctx, b, ""); err != nil {
			return err
		}
		return drop(ctx)
	}
}

// openBucket opens the bucket of a backend in a cell: a fresh directory
// under dir for local backends (removed by the returned func), the URL
// otherwise.
func openBucket(ctx context.Context, be *Backend, dir string) (*blob.Bucket, string, func(), error) {
	if be.Kind == "local" {
		d, err := os.MkdirTemp(dir, "redokit-bench-")
		if err != nil {
			return nil, "", nil, err
		}
		b, err := local.New(d, &local.Options{NoSync: be.NoSync})
		if err != nil {
			os.RemoveAll(d)
			return nil, "", nil, err
		}
		return b, d, func() { b.Close(); os.RemoveAll(d) }, nil
	}
	b, err := blob.Open(ctx, be.URL)
	if err != nil {
		return nil, "", nil, err
	}
	return b, "", func() { b.Close() }, nil
}

// deletePrefix deletes every object under prefix.
func deletePrefix(ctx context.Context, b *blob.Bucket, prefix string) error {
	var keys []string
	for a, err := range b.List(ctx, prefix) {
		if err != nil {
			return err
		}
		keys = append(keys, a.Key)
	}
	if len(keys) == 0 {
		return nil
	}
	return b.Delete(ctx, keys...)
}

// redactedURL is what the report shows of a backend's URL.
func (be *Backend) redactedURL() string {
	if be.URL == "" {
		return ""
	}
	u := blob.RedactURL(be.URL)
	return strings.ReplaceAll(u, "%3A", ":")
}
