// Package s3test gives tests buckets on the S3 server the project's scripts
// start (scripts/emulators.sh exports REDOKIT_S3_ENDPOINT,
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY): a test that needs one skips
// without the server, or fails under CI=true (testenv.Need).
package s3test

import (
	"fmt"
	"net/url"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/redokit/redokit/testkit/testenv"
)

// Endpoint returns REDOKIT_S3_ENDPOINT.
func Endpoint(t testing.TB) string {
	t.Helper()
	return testenv.Server(t, "REDOKIT_S3_ENDPOINT", "S3", "versitygw")
}

// Client returns a client of the S3 server at endpoint, with the
// environment's keys.
func Client(endpoint string) *awss3.Client {
	return awss3.New(awss3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), ""),
	})
}

// StorageURL is redokit's storage URL of bucket on the server at endpoint,
// under the prefix "redo".
func StorageURL(bucket, endpoint string) string {
	return fmt.Sprintf("s3://%s/redo?endpoint=%s&use_path_style=true&region=us-east-1", bucket, url.QueryEscape(endpoint))
}

// NewBucket creates a fresh bucket named prefix and random digits and
// returns its storage URL (StorageURL).
func NewBucket(t testing.TB, prefix string) string {
	t.Helper()
	ep := Endpoint(t)
	bucket := testenv.UniqueName(prefix)
	CreateBucket(t, Client(ep), bucket)
	return StorageURL(bucket, ep)
}

// BucketOf returns the bucket of a storage URL of NewBucket, and a client
// of its server.
func BucketOf(t testing.TB, store string) (string, *awss3.Client) {
	t.Helper()
	u, err := url.Parse(store)
	if err != nil {
		t.Fatalf("storage URL: %v", err)
	}
	return u.Host, Client(u.Query().Get("endpoint"))
}

// CreateBucket creates bucket, or fails the test.
func CreateBucket(t testing.TB, c *awss3.Client, bucket string) {
	t.Helper()
	if _, err := c.CreateBucket(t.Context(), &awss3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
}

// DeleteBucket deletes bucket, or fails the test.
func DeleteBucket(t testing.TB, c *awss3.Client, bucket string) {
	t.Helper()
	if _, err := c.DeleteBucket(t.Context(), &awss3.DeleteBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("delete bucket %s: %v", bucket, err)
	}
}
