package redokit_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
)

// goneBucket is a store whose bucket does not exist: every key reads as
// missing, and a listing fails (as S3's NoSuchBucket, GCS's and Azure's
// missing container do).
type goneBucket struct{ *mem.Driver }

func (goneBucket) List(context.Context, blob.ListOptions) (blob.ListPage, error) {
	return blob.ListPage{}, errors.New("NoSuchBucket: the specified bucket does not exist")
}

// A log in a bucket that does not exist is not reported as a log that does
// not exist: on 43d5d0f meta, dump, apply, gc and checkpoint set all said
// "no log … its meta object does not exist" (issue 29, finding 4).
func TestMetaOfAMissingBucketSaysSo(t *testing.T) {
	ctx := context.Background()
	b := blob.NewBucket(goneBucket{mem.NewDriver()})
	defer b.Close()
	log, err := redokit.Open(ctx, b, "cf")
	must(t, err)
	_, err = log.Meta(ctx)
	if err == nil || errors.Is(err, redokit.ErrNoLog) || !strings.Contains(err.Error(), "NoSuchBucket") {
		t.Fatalf("Meta in a missing bucket: %v; want the listing's error, not ErrNoLog", err)
	}
	// A bucket that exists and holds no such log is ErrNoLog.
	b2 := mem.New()
	defer b2.Close()
	log2, err := redokit.Open(ctx, b2, "cf")
	must(t, err)
	if _, err := log2.Meta(ctx); !errors.Is(err, redokit.ErrNoLog) {
		t.Fatalf("Meta of a log that is not there: %v, want ErrNoLog", err)
	}
}
