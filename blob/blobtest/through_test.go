package blobtest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/blob/driver"
)

// TestBucketDriver: a wrapper put in front of a bucket through BucketDriver
// stays inside the bucket's prefix, is counted in its stats, and cannot reach
// a key the bucket refuses.
func TestBucketDriver(t *testing.T) {
	ctx := context.Background()
	root := mem.New()
	view, err := root.Prefixed("p/")
	if err != nil {
		t.Fatal(err)
	}
	f := blobtest.NewFaulty(blobtest.BucketDriver(view))
	b := f.Bucket()
	if _, err := b.Put(ctx, "k", []byte("v"), nil); err != nil {
		t.Fatal(err)
	}
	if got, err := root.ReadAll(ctx, "p/k"); err != nil || string(got) != "v" {
		t.Fatalf("p/k under the root: %q, %v", got, err)
	}
	if n := view.Stats().Puts; n != 1 {
		t.Errorf("the view counted %d puts, want 1", n)
	}
	if _, err := b.Put(ctx, "../k", nil, nil); !errors.Is(err, blob.ErrInvalidKey) {
		t.Errorf("put ../k: %v, want ErrInvalidKey", err)
	}
	if _, err := b.Stat(ctx, "missing"); !blob.IsNotExist(err) {
		t.Errorf("stat missing: %v, want ErrNotExist", err)
	}
	var keys []string
	for a, err := range b.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, a.Key)
	}
	if len(keys) != 1 || keys[0] != "k" {
		t.Errorf("listed %q, want [k]", keys)
	}
	if _, ok := blobtest.BucketDriver(view).(driver.Appender); ok {
		t.Error("a driver through a mem bucket appends")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Stat(ctx, "p/k"); !errors.Is(err, blob.ErrClosed) {
		t.Errorf("closing the wrapper's bucket left the bucket under it open: %v", err)
	}
}
