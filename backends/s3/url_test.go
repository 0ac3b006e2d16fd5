package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/testkit/backendtest"
)

// Tests of this file need no server.

func TestParseURL(t *testing.T) {
	cases := []struct {
		url    string
		bucket string
		prefix string
		want   Options
	}{
		{"s3://b", "b", "", Options{}},
		{"s3://b/", "b", "", Options{}},
		{"s3://b/logs/cf1/", "b", "logs/cf1", Options{}},
		{"s3://b/p?region=eu-west-1&endpoint=http://127.0.0.1:9000&use_path_style=true", "b", "p",
			Options{Region: "eu-west-1", Endpoint: "http://127.0.0.1:9000", UsePathStyle: true}},
		{"s3://b?endpoint=minio.local:9000&disable_https=true", "b", "", Options{Endpoint: "minio.local:9000", DisableHTTPS: true}},
		{"s3://b?sse=AES256", "b", "", Options{SSE: "AES256"}},
		{"s3://b?sse_kms_key_id=alias/redo", "b", "", Options{SSEKMSKeyID: "alias/redo"}},
		{"s3://b?part_size=5MiB&multipart_threshold=64MiB&concurrency=8", "b", "",
			Options{PartSize: 5 << 20, MultipartThreshold: 64 << 20, Concurrency: 8}},
		{"s3://b?part_size=6291456&multipart_threshold=0", "b", "", Options{PartSize: 6 << 20, MultipartThreshold: -1}},
		{"s3://b?timeout=30s&max_attempts=5", "b", "", Options{Timeout: 30 * time.Second, MaxAttempts: 5}},
		{"s3://b?timeout=0", "b", "", Options{Timeout: -1}},
	}
	for _, c := range cases {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		bucket, prefix, o, err := parseURL(u)
		if err != nil {
			t.Errorf("parseURL(%s): %v", c.url, err)
			continue
		}
		if bucket != c.bucket || prefix != c.prefix || *o != c.want {
			t.Errorf("parseURL(%s) = %q, %q, %+v; want %q, %q, %+v", c.url, bucket, prefix, *o, c.bucket, c.prefix, c.want)
		}
	}
}

func TestParseURLErrors(t *testing.T) {
	cases := []struct {
		url  string
		want string // in the error
	}{
		{"s3://b?regoin=x", "regoin"},
		{"s3://b?foo=1&bar=2", "bar, foo"},
		{"s3://", "no bucket"},
		{"s3://b?part_size=1MiB", "part size"},
		{"s3://b?part_size=lots", "part_size"},
		{"s3://b?multipart_threshold=6GiB", "threshold"},
		{"s3://b?concurrency=0", "concurrency"},
		{"s3://b?max_attempts=-1", "max_attempts"},
		{"s3://b?timeout=soon", "timeout"},
		{"s3://b?use_path_style=maybe", "use_path_style"},
		{"s3://b?sse=rot13", "server-side encryption"},
		{"s3://b?sse=AES256&sse_kms_key_id=k", "KMS"},
		{"s3://b?endpoint=https://h:1&disable_https=true", "disable_https"},
		{"s3://b?endpoint=ftp://h:1", "scheme"},
		{"s3://b?region=a&region=b", "2 times"},
	}
	for _, c := range cases {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		_, _, _, err = parseURL(u)
		if err == nil {
			t.Errorf("parseURL(%s) succeeded, want an error mentioning %q", c.url, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !errors.Is(err, blob.ErrInvalidArgument) {
			t.Errorf("parseURL(%s) = %v; want ErrInvalidArgument mentioning %q", c.url, err, c.want)
		}
	}
}

// TestURLCredentialsNeverShown: credentials in a URL are refused, and no
// error shows them, through blob.Open or parseURL.
func TestURLCredentialsNeverShown(t *testing.T) {
	const secret = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
	for _, raw := range []string{
		"s3://AKIAEXAMPLE:" + secret + "@bucket/prefix",
		"s3://AKIAEXAMPLE:" + secret + "@bucket/prefix?unknown=1",
		"s3://bucket/prefix?secret_key=" + secret,
	} {
		_, err := blob.Open(context.Background(), raw)
		if err == nil {
			t.Errorf("Open(<url with a secret>) succeeded")
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(fmt.Sprintf("%+v", err), secret) {
			t.Errorf("Open error shows the secret: %v", err)
		}
	}
	u, _ := url.Parse("s3://AKIAEXAMPLE:" + secret + "@bucket")
	if _, _, _, err := parseURL(u); err == nil || !strings.Contains(err.Error(), "credential") {
		t.Errorf("parseURL with user info: %v, want an error about credentials", err)
	}
	// An endpoint with user information is refused without showing it.
	// (blob.Open prints the URL it was given with blob.RedactURL, which
	// does not look inside other parameters' values.)
	u, _ = url.Parse("s3://bucket?endpoint=" + url.QueryEscape("http://u:"+secret+"@127.0.0.1:1"))
	if _, _, _, err := parseURL(u); err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("parseURL with credentials in the endpoint: %v; want an error that does not show them", err)
	}
}

func TestUnknownParamViaOpen(t *testing.T) {
	_, err := blob.Open(context.Background(), "s3://bucket/p?region=x&part_sise=5MiB")
	if err == nil || !strings.Contains(err.Error(), "part_sise") || !errors.Is(err, blob.ErrInvalidArgument) {
		t.Errorf("Open with an unknown parameter: %v; want ErrInvalidArgument naming part_sise", err)
	}
}

func TestEndpointURL(t *testing.T) {
	cases := []struct {
		in      string
		disable bool
		want    string
	}{
		{"", false, ""},
		{"host:9000", false, "https://host:9000"},
		{"host:9000", true, "http://host:9000"},
		{"http://host:9000", false, "http://host:9000"},
		{"http://host:9000", true, "http://host:9000"},
		{"https://host", false, "https://host"},
	}
	for _, c := range cases {
		got, err := endpointURL(c.in, c.disable)
		if err != nil || got != c.want {
			t.Errorf("endpointURL(%q, %v) = %q, %v; want %q", c.in, c.disable, got, err, c.want)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "100": 100, "100B": 100, "4KiB": 4096, "8MiB": 8 << 20, "8mib": 8 << 20, "1GiB": 1 << 30} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "MiB", "1.5MiB", "1TiB", "99999999999GiB"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) succeeded", in)
		}
	}
}

func TestOptionsDefaults(t *testing.T) {
	o, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.PartSize != DefaultPartSize || o.MultipartThreshold != DefaultMultipartThreshold || o.Concurrency != DefaultConcurrency || o.Timeout != DefaultTimeout {
		t.Errorf("defaults: %+v", o)
	}
	if o, _ := (Options{SSEKMSKeyID: "k"}).withDefaults(); o.SSE != "aws:kms" {
		t.Errorf("a KMS key ID without sse gives SSE %q, want aws:kms", o.SSE)
	}
}

func TestErrorCode(t *testing.T) {
	resp := func(status int, err error) error {
		return &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: err}
	}
	api := func(code string) error { return &smithy.GenericAPIError{Code: code, Message: "m"} }
	backendtest.ErrorCodes(t, ErrorCode, []backendtest.CodeCase{
		{Err: resp(404, api("NoSuchKey")), Want: blob.CodeNotExist},
		{Err: resp(404, &types.NotFound{}), Want: blob.CodeNotExist},
		{Err: resp(404, api("NoSuchBucket")), Want: blob.CodeNotExist},
		{Err: resp(404, errors.New("x")), Want: blob.CodeNotExist},
		{Err: resp(412, api("PreconditionFailed")), Want: blob.CodePreconditionFailed},
		{Err: resp(409, api("ConditionalRequestConflict")), Want: blob.CodePreconditionFailed},
		{Err: resp(409, api("BucketNotEmpty")), Want: blob.CodeUnknown},
		{Err: resp(403, api("AccessDenied")), Want: blob.CodePermissionDenied},
		{Err: resp(403, api("SignatureDoesNotMatch")), Want: blob.CodePermissionDenied},
		{Err: resp(503, api("SlowDown")), Want: blob.CodeTransient},
		{Err: resp(500, api("InternalError")), Want: blob.CodeTransient},
		{Err: resp(502, errors.New("bad gateway")), Want: blob.CodeTransient},
		{Err: resp(400, api("RequestTimeout")), Want: blob.CodeTransient},
		{Err: resp(429, errors.New("slow down")), Want: blob.CodeTransient},
		{Err: resp(416, api("InvalidRange")), Want: blob.CodeInvalidArgument},
		{Err: resp(400, api("InvalidArgument")), Want: blob.CodeInvalidArgument},
		{Err: resp(409, api("ObjectParentIsFile")), Want: blob.CodeInvalidArgument},
		{Err: resp(501, api("NotImplemented")), Want: blob.CodeNotSupported},
		{Err: &smithyhttp.RequestSendError{Err: errors.New("read tcp: connection reset by peer")}, Want: blob.CodeTransient},
		{Err: fmt.Errorf("get: %w", io.ErrUnexpectedEOF), Want: blob.CodeTransient},
		{Err: &attemptTimeoutError{timeout: time.Second}, Want: blob.CodeTransient},
		{Err: &smithy.CanceledError{Err: context.Canceled}, Want: blob.CodeCanceled},
		{Err: &DeleteError{Keys: []string{"a"}, Errors: []types.Error{{Code: aws.String("AccessDenied")}}, Total: 2}, Want: blob.CodePermissionDenied},
	}...)
}

func TestDeleteErrorNamesKeys(t *testing.T) {
	e := &DeleteError{Total: 20}
	for i := range 12 {
		e.Keys = append(e.Keys, fmt.Sprintf("seg/%02d", i))
		e.Errors = append(e.Errors, types.Error{Key: aws.String(fmt.Sprintf("seg/%02d", i)), Code: aws.String("AccessDenied"), Message: aws.String("no")})
	}
	msg := e.Error()
	for _, want := range []string{"12 of 20", `"seg/00" (AccessDenied: no)`, `"seg/09"`, "and 2 more"} {
		if !strings.Contains(msg, want) {
			t.Errorf("DeleteError = %q, want it to contain %q", msg, want)
		}
	}
}

func TestChunksReader(t *testing.T) {
	data := payload(1000, 1)
	var parts []*part
	for off := 0; off < len(data); off += 300 {
		parts = append(parts, &part{data: data[off:min(off+300, len(data))]})
	}
	c := newChunksReader(parts)
	for range 2 { // read, rewind, read again: what the SDK does
		got, err := io.ReadAll(c)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read %d bytes, %v; want the 1000 bytes", len(got), err)
		}
		if _, err := c.Seek(0, io.SeekStart); err != nil {
			t.Fatal(err)
		}
	}
	c.Seek(650, io.SeekStart)
	buf := make([]byte, 7)
	if n, _ := c.Read(buf); n != 7 || !bytes.Equal(buf, data[650:657]) {
		t.Errorf("read at 650: %d bytes %x", n, buf[:n])
	}
	if n, _ := c.Seek(0, io.SeekEnd); n != 1000 {
		t.Errorf("Seek(0, End) = %d", n)
	}
}

func TestExactly(t *testing.T) {
	br := bytes.NewReader(payload(100, 1))
	if _, base, ok := exactly(br, 100); !ok || base != 0 {
		t.Errorf("exactly(bytes.Reader of 100, 100) = %d, %v", base, ok)
	}
	br.Seek(40, io.SeekStart)
	if _, base, ok := exactly(br, 60); !ok || base != 40 {
		t.Errorf("exactly(bytes.Reader at 40, 60) = %d, %v", base, ok)
	}
	if pos, _ := br.Seek(0, io.SeekCurrent); pos != 40 {
		t.Errorf("exactly moved the reader to %d", pos)
	}
	for _, size := range []int64{59, 61, -1} {
		if _, _, ok := exactly(br, size); ok {
			t.Errorf("exactly(reader holding 60, %d) = ok", size)
		}
	}
	if _, _, ok := exactly(onlyReader{br}, 60); ok {
		t.Errorf("exactly(plain reader) = ok")
	}
}

func TestPartSizeFor(t *testing.T) {
	d := &Driver{opts: Options{PartSize: 8 << 20}}
	if got := d.partSizeFor(1 << 30); got != 8<<20 {
		t.Errorf("1 GiB: part size %d", got)
	}
	size := int64(200 << 30) // 200 GiB needs > 10,000 parts of 8 MiB
	got := d.partSizeFor(size)
	if got*MaxParts < size || got%(1<<20) != 0 {
		t.Errorf("200 GiB: part size %d does not fit 10,000 whole-MiB parts", got)
	}
}
