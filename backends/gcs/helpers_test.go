package gcs

import (
	"context"
	"errors"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/testkit/backendtest"
	"github.com/redokit/redokit/testkit/testenv"
)

// emulatorHost returns STORAGE_EMULATOR_HOST (fake-gcs-server), skipping
// the test when it is unset.
func emulatorHost(t testing.TB) string {
	t.Helper()
	h := os.Getenv("STORAGE_EMULATOR_HOST")
	if h == "" {
		testenv.Need(t, "STORAGE_EMULATOR_HOST is not set: start fake-gcs-server (scripts/emulators.sh) to run the GCS tests")
	}
	return h
}

// countingTransport counts requests by upload kind.
type countingTransport struct {
	base                             http.RoundTripper
	multipart, resumable, allUploads atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	switch r.URL.Query().Get("uploadType") {
	case "multipart":
		c.multipart.Add(1)
		c.allUploads.Add(1)
	case "resumable":
		c.resumable.Add(1)
		c.allUploads.Add(1)
	}
	return c.base.RoundTrip(r)
}

// newClient returns a client of the emulator at host ("127.0.0.1:port"),
// with its requests counted.
func newClient(t testing.TB, host string) (*storage.Client, *countingTransport) {
	t.Helper()
	ct := &countingTransport{base: http.DefaultTransport.(*http.Transport).Clone()}
	c, err := storage.NewClient(context.Background(),
		option.WithEndpoint("http://"+host+"/storage/v1/"),
		option.WithoutAuthentication(),
		option.WithHTTPClient(&http.Client{Transport: ct}),
		storage.WithDisabledClientMetrics(),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, ct
}

// tb is what the helpers need of a test.
type tb = backendtest.TB

// newTestBucket creates a uniquely named bucket on the emulator and removes
// it, with everything in it, when the test ends.
func newTestBucket(t tb, c *storage.Client) string {
	t.Helper()
	name := "redokit-test-" + backendtest.RandHex(6)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Bucket(name).Create(ctx, "redokit-test", nil); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	t.Cleanup(func() { removeBucket(t, c, name) })
	return name
}

func removeBucket(t tb, c *storage.Client, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := c.Bucket(name)
	it := b.Objects(ctx, nil)
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Logf("cleanup: list %s: %v", name, err)
			return
		}
		if err := b.Object(a.Name).Delete(ctx); err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
			t.Logf("cleanup: delete %s/%s: %v", name, a.Name, err)
		}
	}
	if err := b.Delete(ctx); err != nil {
		t.Logf("cleanup: delete bucket %s: %v", name, err)
	}
}

// newBucket returns a Bucket over a fresh emulator bucket, with opts.
func newBucket(t testing.TB, opts *Options) (*blob.Bucket, *countingTransport) {
	t.Helper()
	d, ct := newDriver(t, opts)
	return backendtest.Bucket(t, d), ct
}

// newDriver is newBucket's driver, for a test that calls it directly; the
// caller closes it (or a Bucket over it).
func newDriver(t testing.TB, opts *Options) (*Driver, *countingTransport) {
	t.Helper()
	c, ct := newClient(t, emulatorHost(t))
	d, err := NewDriver(c, newTestBucket(t, c), opts)
	if err != nil {
		t.Fatal(err)
	}
	return d, ct
}
