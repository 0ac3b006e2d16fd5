package cli

import (
	"os"
	"strings"
	"testing"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"

	"github.com/redokit/redokit/testkit/testenv"
)

// redokit check against the GCS and Azure emulators scripts/emulators.sh
// starts: every backend the test script brings up must pass it.

func TestCheckOnGCS(t *testing.T) {
	needServer(t, "STORAGE_EMULATOR_HOST")
	c, err := storage.NewClient(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bucket := testenv.UniqueName("redokit-cli-")
	if err := c.Bucket(bucket).Create(t.Context(), "redokit-test", nil); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
	// The emulator deletes one key per request: BatchDelete's 2,500 keys
	// take minutes on a loaded machine.
	r := cli(t, "check", "--storage", "gs://"+bucket+"/redo", "--timeout", "5m")
	wantCode(t, r, 0)
	mustContain(t, "check", r.stdout, "Plain/ConditionalCreate", "Prefixed/CompareAndSwap", "is fit to hold a redo log")
}

func TestCheckOnAzure(t *testing.T) {
	cs := needServer(t, "AZURE_STORAGE_CONNECTION_STRING")
	c, err := azblob.NewClientFromConnectionString(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	container := testenv.UniqueName("redokit-cli-")
	if _, err := c.CreateContainer(t.Context(), container, nil); err != nil {
		t.Fatalf("create container %s: %v", container, err)
	}
	r := cli(t, "check", "--storage", "azblob://"+container+"/redo")
	wantCode(t, r, 0)
	mustContain(t, "check", r.stdout, "Plain/ConditionalCreate", "Prefixed/CompareAndSwap", "is fit to hold a redo log")
	if key := os.Getenv("AZURE_STORAGE_KEY"); key != "" && strings.Contains(r.stdout+r.stderr, key) {
		t.Fatal("the account key was printed")
	}
}
