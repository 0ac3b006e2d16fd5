package azure

import (
	"context"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/testkit/backendtest"
	"github.com/redokit/redokit/testkit/testenv"
)

// endpointEnv returns the value of the endpoint variable name (Azurite,
// directly or through toxiproxy) and the shared key, skipping the test when
// they are unset.
func endpointEnv(t testing.TB, name string) (endpoint, account, key string) {
	t.Helper()
	endpoint = os.Getenv(name)
	account, key = os.Getenv(EnvAccount), os.Getenv(EnvKey)
	if endpoint == "" || account == "" || key == "" {
		testenv.Need(t, name+", "+EnvAccount+" and "+EnvKey+" must be set: start Azurite (scripts/emulators.sh) to run the Azure tests")
	}
	return strings.TrimSuffix(endpoint, "/"), account, key
}

// countingTransport counts requests by kind.
type countingTransport struct {
	base                          http.RoundTripper
	putBlob, putBlock, putList, n atomic.Int64
}

func (c *countingTransport) Do(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	if r.Method == http.MethodPut {
		switch r.URL.Query().Get("comp") {
		case "block":
			c.putBlock.Add(1)
		case "blocklist":
			c.putList.Add(1)
		case "":
			c.putBlob.Add(1)
		}
	}
	return c.base.RoundTrip(r)
}

// tb is what the helpers need of a test.
type tb = backendtest.TB

// newContainerClient returns a client of a fresh, uniquely named container
// at endpoint, and removes the container when the test ends.
func newContainerClient(t tb, endpoint, account, key string) (*container.Client, *countingTransport) {
	t.Helper()
	cred, err := container.NewSharedKeyCredential(account, key)
	if err != nil {
		t.Fatalf("%v", err)
	}
	ct := &countingTransport{base: http.DefaultTransport.(*http.Transport).Clone()}
	name := "redokit-test-" + backendtest.RandHex(6)
	c, err := container.NewClientWithSharedKeyCredential(endpoint+"/"+name, cred, &container.ClientOptions{
		ClientOptions: policy.ClientOptions{Transport: ct},
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Create(ctx, nil); err != nil {
		t.Fatalf("create container %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		// Deleting the container deletes its blobs.
		if _, err := c.Delete(ctx, nil); err != nil {
			t.Logf("cleanup: delete container %s: %v", name, err)
		}
	})
	return c, ct
}

// newBucket returns a Bucket over a fresh Azurite container, with opts.
func newBucket(t testing.TB, opts *Options) (*blob.Bucket, *countingTransport) {
	t.Helper()
	d, ct := newDriver(t, opts)
	return backendtest.Bucket(t, d), ct
}

// newDriver is newBucket's driver, for a test that calls it directly; the
// caller closes it (or a Bucket over it).
func newDriver(t testing.TB, opts *Options) (*Driver, *countingTransport) {
	t.Helper()
	endpoint, account, key := endpointEnv(t, "REDOKIT_AZURE_ENDPOINT")
	c, ct := newContainerClient(t, endpoint, account, key)
	d, err := NewDriver(c, opts)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return d, ct
}
