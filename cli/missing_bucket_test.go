package cli

import (
	"strings"
	"testing"

	"github.com/redokit/redokit/testkit/s3test"
	"github.com/redokit/redokit/testkit/testenv"
)

// A log in an S3 bucket that does not exist: every command that reads the
// meta object says so, naming the bucket's error, instead of "no log …
// its meta object does not exist" (issue 29, finding 4: on 43d5d0f meta,
// dump, apply, gc and checkpoint set all said the latter, while ls, verify,
// rm and check said NoSuchBucket).
func TestMissingBucketIsNotAMissingLog(t *testing.T) {
	store := s3test.StorageURL(testenv.UniqueName("redokit-missing-"), s3test.Endpoint(t))
	for _, args := range [][]string{
		{"meta"},
		{"dump"},
		{"gc", "--yes"},
		{"checkpoint", "set", "100", "--yes"},
		{"apply", "--sink", "sqlite://" + t.TempDir() + "/x.db"},
	} {
		r := cli(t, append(append(args, "--storage", store), "--log", "x")...)
		wantCode(t, r, 1)
		if strings.Contains(r.stderr, "no log") || !strings.Contains(r.stderr, "NoSuchBucket") {
			t.Errorf("%s in a missing bucket: stderr %q; want the bucket's NoSuchBucket, not \"no log\"", args[0], r.stderr)
		}
	}
}
