//go:build linux

package cli

import (
	"context"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/blob/driver"
)

// warnDriver logs a warning through slog.Default on every put, as the S3
// driver passes on the AWS SDK's WARN records (a retry it could not rewind,
// under torture's faults).
type warnDriver struct{ driver.Driver }

func (d warnDriver) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	slog.Warn("s3: aws sdk: a warning of the store's SDK")
	return d.Driver.Put(ctx, key, r, size, opts)
}

func init() {
	// warnfile:///dir is the local directory with warnDriver's logging;
	// torture's writer processes open it too.
	blob.Register("warnfile", func(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
		b, err := blob.Open(ctx, (&url.URL{Scheme: "file", Path: u.Path}).String())
		if err != nil {
			return nil, err
		}
		return blob.NewBucket(warnDriver{blobtest.BucketDriver(b)}), nil
	})
}

// TestTortureKeepsStoreLogsQuiet: what a store's SDK logs under torture's
// faults is shown only with --verbose, as the writer processes' messages
// are (issue 29, item 7: one AWS SDK WARN line reached stderr during torture
// on S3).
func TestTortureKeepsStoreLogsQuiet(t *testing.T) {
	store := "warnfile://" + t.TempDir()
	var r result
	leaked := captureFD2(t, func() {
		r = cli(t, "torture", "--storage", store, "--seed", "7", "--duration", "500ms", "--json")
	})
	wantCode(t, r, 0)
	if s := leaked + r.stderr; strings.Contains(s, "aws sdk") {
		t.Fatalf("a store's log line reached stderr under torture:\n%.2000s", s)
	}
	r = cli(t, "torture", "--storage", store, "--seed", "7", "--duration", "300ms", "--json", "--verbose")
	wantCode(t, r, 0)
	mustContain(t, "torture --verbose", r.stderr, "aws sdk: a warning of the store's SDK")
}
