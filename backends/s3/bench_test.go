package s3

import (
	"bytes"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// BenchmarkPut16MiB compares, in one run against the same server and with
// the same SDK client, the PUT throughput of 16 MiB objects through the
// driver with a raw PutObject of the same bytes, and reports the HTTP
// requests each costs. Each iteration overwrites one key.
//
//	driver            Bucket.Put of a []byte: one PutObject, the caller's bytes sent as is
//	driver-stream     Bucket.PutReader of a plain io.Reader: copied into pooled buffers first
//	driver-multipart  8 MiB threshold and parts: create, 2 parts in parallel, complete
//	raw               client.PutObject with a bytes.Reader
//
// On plain http every path signs (SHA-256) its payload, the raw one too.
func BenchmarkPut16MiB(b *testing.B) {
	const size = 16 << 20
	data := payload(size, 42)
	cc := newCounting(nil)
	e := newEnv(b, "", &Options{HTTPClient: cc})
	mp := newEnv(b, "", &Options{HTTPClient: cc, PartSize: 8 << 20, MultipartThreshold: 8 << 20})

	report := func(b *testing.B, before int) {
		b.ReportMetric(float64(cc.total()-before)/float64(b.N), "req/op")
		if s := b.Elapsed().Seconds(); s > 0 {
			b.ReportMetric(float64(size)*float64(b.N)/s/(1<<20), "MiB/s")
		}
	}
	b.Run("driver", func(b *testing.B) {
		b.SetBytes(size)
		before := cc.total()
		for b.Loop() {
			if _, err := e.b.Put(b.Context(), "bench/obj", data, nil); err != nil {
				b.Fatal(err)
			}
		}
		report(b, before)
	})
	b.Run("driver-stream", func(b *testing.B) {
		b.SetBytes(size)
		before := cc.total()
		for b.Loop() {
			if _, err := e.b.PutReader(b.Context(), "bench/obj", onlyReader{bytes.NewReader(data)}, size, nil); err != nil {
				b.Fatal(err)
			}
		}
		report(b, before)
	})
	b.Run("driver-multipart", func(b *testing.B) {
		b.SetBytes(size)
		before := cc.total()
		for b.Loop() {
			if _, err := mp.b.Put(b.Context(), "bench/obj", data, nil); err != nil {
				b.Fatal(err)
			}
		}
		report(b, before)
	})
	b.Run("raw", func(b *testing.B) {
		b.SetBytes(size)
		before := cc.total()
		for b.Loop() {
			_, err := e.d.client.PutObject(b.Context(), &awss3.PutObjectInput{
				Bucket: &e.bucket, Key: aws.String("bench/obj"), Body: bytes.NewReader(data), ContentLength: aws.Int64(size),
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		report(b, before)
	})
}
