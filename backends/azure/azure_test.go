package azure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/testkit/backendtest"
)

const fakeKey = "c2VjcmV0LWtleS1mb3ItdGVzdHMtb25seS1ub3QtcmVhbC0wMTIzNDU2Nzg5YWJjZGVm" // base64, not a real key

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParseURL(t *testing.T) {
	keyEnv := env(map[string]string{EnvAccount: "acct", EnvKey: fakeKey})
	good := []struct {
		url      string
		env      func(string) string
		cont     string
		prefix   string
		endpoint string
		check    func(Options) bool
	}{
		{"azblob://c", keyEnv, "c", "", "https://acct.blob.core.windows.net", nil},
		{"azblob://c/logs/cf", keyEnv, "c", "logs/cf/", "https://acct.blob.core.windows.net", nil},
		{"azblob://c?endpoint=http%3A%2F%2F127.0.0.1%3A10000%2Fdevstoreaccount1%2F", keyEnv, "c", "", "http://127.0.0.1:10000/devstoreaccount1", nil},
		{"azblob://c?put_threshold=4MiB&block_size=1MiB&concurrency=2&try_timeout=5s&max_retries=0&batch_delete=false", keyEnv, "c", "", "https://acct.blob.core.windows.net", func(o Options) bool {
			return o.PutThreshold == 4<<20 && o.BlockSize == 1<<20 && o.Concurrency == 2 && o.TryTimeout == 5*time.Second && o.MaxRetries < 0 && o.NoBatchDelete
		}},
		{"azblob://c", env(map[string]string{EnvAccount: "acct", EnvSASToken: "?sv=2024&sig=abc"}), "c", "", "https://acct.blob.core.windows.net", nil},
		{"azblob://c", env(map[string]string{EnvConnectionString: "DefaultEndpointsProtocol=http;AccountName=a;AccountKey=" + fakeKey + ";BlobEndpoint=http://127.0.0.1:1/a;"}), "c", "", "http://127.0.0.1:1/a", nil},
		{"azblob://c", env(map[string]string{EnvConnectionString: "AccountName=a;AccountKey=" + fakeKey + ";EndpointSuffix=core.chinacloudapi.cn"}), "c", "", "https://a.blob.core.chinacloudapi.cn", nil},
		{"azblob://c", env(map[string]string{EnvConnectionString: "BlobEndpoint=https://a.blob.core.windows.net/;SharedAccessSignature=sv=2024&sig=abc"}), "c", "", "https://a.blob.core.windows.net", nil},
	}
	for _, g := range good {
		u, _ := url.Parse(g.url)
		c, err := parseURL(u, g.env)
		if err != nil {
			t.Errorf("%s: %v", g.url, err)
			continue
		}
		if c.container != g.cont || c.prefix != g.prefix || c.creds.endpoint != g.endpoint {
			t.Errorf("%s: container %q prefix %q endpoint %q", g.url, c.container, c.prefix, c.creds.endpoint)
		}
		if g.check != nil && !g.check(c.opts) {
			t.Errorf("%s: options %+v", g.url, c.opts)
		}
		if _, err := c.newClient(); err != nil {
			t.Errorf("%s: client: %v", g.url, err)
		}
	}
	secretEnv := env(map[string]string{EnvAccount: "acct", EnvKey: "hunter2-not-base64!!", EnvSASToken: "sig=topsecretsig"})
	bad := []struct {
		url  string
		env  func(string) string
		want string
	}{
		{"azblob://c?bogus=1&block_size=1MiB&zzz=2", keyEnv, "bogus, zzz"},
		{"azblob:///p", keyEnv, "no container"},
		{"azblob://c?block_size=0", keyEnv, "block_size"},
		{"azblob://c?put_threshold=6GiB", keyEnv, "threshold"},
		{"azblob://c?concurrency=-1", keyEnv, "concurrency"},
		{"azblob://c?try_timeout=soon", keyEnv, "try_timeout"},
		{"azblob://c?batch_delete=perhaps", keyEnv, "batch_delete"},
		{"azblob://c?endpoint=ftp://x", keyEnv, "endpoint"},
		{"azblob://c?endpoint=" + url.QueryEscape("https://h/?sig=s3cr3tsig"), keyEnv, "endpoint"},
		{"azblob://user:hunter2@c", keyEnv, "credentials"},
		{"azblob://c", env(nil), "no credentials"},
		{"azblob://c", env(map[string]string{EnvAccount: "a"}), "neither"},
		{"azblob://c", env(map[string]string{EnvConnectionString: "AccountName=a;AccountKey"}), "without '='"},
		{"azblob://c", env(map[string]string{EnvConnectionString: "AccountName=a"}), "neither AccountKey"},
		{"azblob://c", env(map[string]string{EnvConnectionString: "UseDevelopmentStorage=true"}), "UseDevelopmentStorage"},
	}
	for _, b := range bad {
		u, _ := url.Parse(b.url)
		_, err := parseURL(u, b.env)
		if err == nil || !strings.Contains(err.Error(), b.want) || !errors.Is(err, blob.ErrInvalidArgument) {
			t.Errorf("%s: got %v, want an invalid-argument error mentioning %q", b.url, err, b.want)
		}
	}
	// A key that is not base64: the error names the variable, not the value.
	u, _ := url.Parse("azblob://c")
	c, err := parseURL(u, secretEnv)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.newClient()
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), EnvKey) {
		t.Fatalf("bad key: %v", err)
	}
	// Through blob.Open, the URL in the error is redacted.
	_, err = blob.Open(context.Background(), "azblob://user:hunter2@c/p?bogus=1")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("Open leaked the password or accepted the URL: %v", err)
	}
}

func TestOpenURL(t *testing.T) {
	endpoint, account, key := endpointEnv(t, "REDOKIT_AZURE_ENDPOINT")
	c, _ := newContainerClient(t, endpoint, account, key)
	cname := containerName(t, c)
	ctx := context.Background()
	t.Setenv(EnvConnectionString, "")
	b, err := blob.Open(ctx, "azblob://"+cname+"/logs/cf?put_threshold=1MiB&block_size=256KiB&endpoint="+url.QueryEscape(endpoint))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Put(ctx, "k", []byte("hello"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.NewBlobClient("logs/cf/k").GetProperties(ctx, nil); err != nil {
		t.Fatalf("the URL's prefix was not applied: %v", err)
	}
	var cc *container.Client
	if !b.As(&cc) || cc == nil || b.As(new(int)) {
		t.Fatal("As")
	}
	// The connection string alone also works.
	t.Setenv(EnvConnectionString, "DefaultEndpointsProtocol=http;AccountName="+account+";AccountKey="+key+";BlobEndpoint="+endpoint+";")
	t.Setenv(EnvKey, "")
	b2, err := blob.Open(ctx, "azblob://"+cname)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	got, err := b2.ReadAll(ctx, "logs/cf/k")
	if err != nil || string(got) != "hello" {
		t.Fatalf("read through the connection string: %q %v", got, err)
	}
}

func containerName(t tb, c *container.Client) string {
	u, err := url.Parse(c.URL())
	if err != nil {
		t.Fatalf("%v", err)
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	return parts[len(parts)-1]
}

// TestSASNeverPrinted opens with a SAS token, valid and tampered, and checks
// that no error shows the signature.
func TestSASNeverPrinted(t *testing.T) {
	endpoint, account, key := endpointEnv(t, "REDOKIT_AZURE_ENDPOINT")
	c, _ := newContainerClient(t, endpoint, account, key)
	cname := containerName(t, c)
	sasURL, err := c.GetSASURL(sas.ContainerPermissions{Read: true, Add: true, Create: true, Write: true, Delete: true, List: true}, time.Now().Add(time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	su, _ := url.Parse(sasURL)
	token := su.RawQuery
	sig := su.Query().Get("sig")
	ctx := context.Background()
	t.Setenv(EnvConnectionString, "")
	t.Setenv(EnvKey, "")
	t.Setenv(EnvSASToken, token)
	b, err := blob.Open(ctx, "azblob://"+cname+"?max_retries=0&endpoint="+url.QueryEscape(endpoint))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Put(ctx, "k", []byte("x"), nil); err != nil {
		t.Fatalf("put with a SAS: %v", err)
	}
	if err := b.Delete(ctx, "k", "missing"); err != nil {
		t.Fatalf("batch delete with a SAS: %v", err)
	}
	// A tampered signature: 403, and the signature is nowhere in the error.
	bad := strings.Replace(token, url.QueryEscape(sig), url.QueryEscape("AAAA"+sig[4:]), 1)
	t.Setenv(EnvSASToken, bad)
	b2, err := blob.Open(ctx, "azblob://"+cname+"?max_retries=0&endpoint="+url.QueryEscape(endpoint))
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	_, err = b2.Put(ctx, "k", []byte("x"), nil)
	if !errors.Is(err, blob.ErrPermissionDenied) {
		t.Fatalf("tampered SAS: want permission denied, got %v", err)
	}
	for _, e := range []error{err, b2.Delete(ctx, "k"), func() error { _, err := b2.ReadAll(ctx, "k"); return err }()} {
		msg := fmt.Sprint(e)
		if strings.Contains(msg, sig[4:]) || strings.Contains(msg, url.QueryEscape(sig[4:])) || strings.Contains(msg, key) {
			t.Fatalf("an error shows a secret: %s", msg)
		}
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusForbidden {
		t.Fatalf("the SDK error is not reachable: %v", err)
	}
	t.Logf("tampered SAS error: %v", err)
	// Connection errors (a URL with the SAS in it) are redacted too.
	t.Setenv(EnvSASToken, token)
	b3, err := blob.Open(ctx, "azblob://"+cname+"?max_retries=0&endpoint="+url.QueryEscape("http://127.0.0.1:1/devstoreaccount1"))
	if err != nil {
		t.Fatal(err)
	}
	defer b3.Close()
	_, err = b3.Stat(ctx, "k")
	if err == nil || strings.Contains(err.Error(), sig) || strings.Contains(err.Error(), url.QueryEscape(sig)) {
		t.Fatalf("connection error: %v", err)
	}
	if !blob.IsTransient(err) {
		t.Fatalf("connection refused: want transient, got %v", err)
	}
}

func TestRoundTrip(t *testing.T) {
	b, ct := newBucket(t, &Options{PutThreshold: 4 << 20, BlockSize: 1 << 20, Concurrency: 3})
	backendtest.RoundTrip(t, b, []int{0, 1, 1000, 4<<20 - 1, 4 << 20, 10<<20 + 7}, func(t *testing.T, n int) func() {
		pb, pk, pl := ct.putBlob.Load(), ct.putBlock.Load(), ct.putList.Load()
		return func() {
			if n >= 4<<20 {
				wantBlocks := int64((n + 1<<20 - 1) >> 20)
				if ct.putBlock.Load()-pk != wantBlocks || ct.putList.Load()-pl != 1 || ct.putBlob.Load() != pb {
					t.Fatalf("%d bytes: %d blocks, %d block lists, %d put blobs; want %d, 1, 0", n, ct.putBlock.Load()-pk, ct.putList.Load()-pl, ct.putBlob.Load()-pb, wantBlocks)
				}
			} else if ct.putBlob.Load()-pb != 1 || ct.putBlock.Load() != pk {
				t.Fatalf("%d bytes: want one Put Blob", n)
			}
		}
	})
	backendtest.UnknownSize(t, b, 3000, 5<<20+3)
}

func TestWrongSize(t *testing.T) {
	b, _ := newBucket(t, &Options{PutThreshold: 1 << 20, BlockSize: 256 << 10})
	backendtest.WrongSize(t, b)
}

// The ranged reads are the conformance suite's (rangedRead), which covers
// every case this file once restated.

func TestIfNotExistRace(t *testing.T) {
	b, _ := newBucket(t, &Options{PutThreshold: 1 << 20, BlockSize: 256 << 10})
	backendtest.IfNotExistRace(t, b, 1000, 2<<20+5) // Put Blob; staged blocks
}

func TestIfMatch(t *testing.T) {
	b, _ := newBucket(t, &Options{PutThreshold: 1 << 20, BlockSize: 256 << 10})
	backendtest.IfMatch(t, b, `"0x8D000000000000"`, 100, 2<<20) // Put Blob; staged blocks
}

func TestListAndBatchDelete(t *testing.T) {
	for _, batch := range []bool{true, false} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			b, ct := newBucket(t, &Options{NoBatchDelete: !batch})
			n := 2500
			if !batch {
				n = 300 // the per-key path needs no 2,500 keys to be shown right
			}
			backendtest.ListAndDelete(t, b, n, 16, ct.n.Load)
		})
	}
}

// Keys with characters that need escaping survive Put, List and the batch
// delete (whose sub-requests escape names themselves).
func TestWeirdKeys(t *testing.T) {
	b, _ := newBucket(t, nil)
	ctx := context.Background()
	keys := []string{"w/a b", "w/ü/ñ", "w/x%2Fy", "w/q?x=1&y", "w/hash#frag", "w/plus+sign", "w/semi;colon", "w/日本語", "w/tilde~'quote\""}
	// The service turns a backslash into "/", so such a key would alias
	// another: the driver refuses it, naming it, rather than let it.
	if _, err := b.Put(ctx, "w/back\\slash", nil, nil); !errors.Is(err, blob.ErrInvalidKey) || !strings.Contains(err.Error(), "back\\\\slash") {
		t.Fatalf("put of a key with a backslash: %v", err)
	}
	for _, k := range keys {
		if _, err := b.Put(ctx, k, []byte(k), nil); err != nil {
			t.Fatalf("put %q: %v", k, err)
		}
		got, err := b.ReadAll(ctx, k)
		if err != nil || string(got) != k {
			t.Fatalf("read %q: %q %v", k, got, err)
		}
	}
	n := 0
	for a, err := range b.List(ctx, "w/") {
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Stat(ctx, a.Key); err != nil {
			t.Fatalf("listed key %q does not stat: %v", a.Key, err)
		}
		n++
	}
	if n != len(keys) {
		t.Fatalf("listed %d of %d", n, len(keys))
	}
	if err := b.Delete(ctx, keys...); err != nil {
		t.Fatal(err)
	}
	for a, err := range b.List(ctx, "w/") {
		t.Errorf("left after batch delete: %q %v", a.Key, err)
	}
}

func TestDeleteError(t *testing.T) {
	boom := errors.New("boom")
	e := &DeleteError{Total: 10, Failed: []KeyError{{Key: "k1", Err: context.DeadlineExceeded}, {Key: "k2", Err: boom}}}
	msg := e.Error()
	if !strings.Contains(msg, "2 of 10") || !strings.Contains(msg, `"k1"`) || !strings.Contains(msg, `"k2"`) {
		t.Fatalf("message %q", msg)
	}
	if !errors.Is(e, boom) || !errors.Is(e, context.DeadlineExceeded) {
		t.Fatal("does not unwrap")
	}
}

func TestErrorCode(t *testing.T) {
	d := &Driver{}
	re := func(status int, code string) error {
		return &azcore.ResponseError{StatusCode: status, ErrorCode: code}
	}
	backendtest.ErrorCodes(t, d.ErrorCode, []backendtest.CodeCase{
		{Err: re(404, "BlobNotFound"), Want: blob.CodeNotExist},
		{Err: re(404, "ContainerNotFound"), Want: blob.CodeNotExist},
		{Err: re(409, "BlobAlreadyExists"), Want: blob.CodePreconditionFailed},
		{Err: re(412, "ConditionNotMet"), Want: blob.CodePreconditionFailed},
		{Err: re(403, "AuthorizationFailure"), Want: blob.CodePermissionDenied},
		{Err: re(403, "AuthenticationFailed"), Want: blob.CodePermissionDenied},
		{Err: re(403, ""), Want: blob.CodePermissionDenied},
		{Err: re(503, "ServerBusy"), Want: blob.CodeTransient},
		{Err: re(500, "InternalError"), Want: blob.CodeTransient},
		{Err: re(502, ""), Want: blob.CodeTransient},
		{Err: re(429, ""), Want: blob.CodeTransient},
		{Err: re(416, "InvalidRange"), Want: blob.CodeInvalidArgument},
		{Err: re(400, "InvalidBlockList"), Want: blob.CodeInvalidArgument},
		{Err: re(400, "Crc64Mismatch"), Want: blob.CodeTransient},
		{Err: re(409, "LeaseIdMissing"), Want: blob.CodeUnknown},
		{Err: &url.Error{Op: "Put", URL: "http://x", Err: io.EOF}, Want: blob.CodeTransient},
		{Err: io.ErrUnexpectedEOF, Want: blob.CodeTransient},
		{Err: &DeleteError{Total: 1, Failed: []KeyError{{Key: "k", Err: re(503, "ServerBusy")}}}, Want: blob.CodeTransient},
	}...)
}

func TestCancelMidUpload(t *testing.T) {
	b, _ := newBucket(t, &Options{PutThreshold: 1 << 20, BlockSize: 256 << 10})
	backendtest.CancelMidUpload(t, b, map[string]int64{"small": 512 << 10, "staged": 8 << 20})
}

func TestClosed(t *testing.T) {
	d, _ := newDriver(t, nil)
	backendtest.Closed(t, blob.NewBucket(d), d)
}

func TestMissingContainer(t *testing.T) {
	endpoint, account, key := endpointEnv(t, "REDOKIT_AZURE_ENDPOINT")
	cred, _ := container.NewSharedKeyCredential(account, key)
	c, err := container.NewClientWithSharedKeyCredential(endpoint+"/redokit-test-missing-"+backendtest.RandHex(4), cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(c, &Options{MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	backendtest.MissingBucket(t, b)
}

// TestIntegrity corrupts a body in flight: the service must reject it (the
// driver sends a Content-MD5 with every body), and nothing becomes visible;
// with retries (the default), the rejected body is sent again.
func TestIntegrity(t *testing.T) {
	endpoint, account, key := endpointEnv(t, "REDOKIT_AZURE_ENDPOINT")
	dc, _ := newContainerClient(t, endpoint, account, key)
	direct, _ := New(dc, nil)
	cred, _ := container.NewSharedKeyCredential(account, key)
	for _, c := range []struct{ name, comp string }{{"put-blob", ""}, {"put-block", "block"}} {
		t.Run(c.name, func(t *testing.T) {
			// The first request of the given comp ("" for Put Blob,
			// "block" for Put Block).
			ct := &backendtest.Corrupter{Base: http.DefaultTransport, Match: func(r *http.Request) bool {
				return r.Method == http.MethodPut && r.URL.Query().Get("comp") == c.comp && r.ContentLength > 100
			}}
			cl, err := container.NewClientWithSharedKeyCredential(dc.URL(), cred, &container.ClientOptions{ClientOptions: policy.ClientOptions{Transport: ct}})
			if err != nil {
				t.Fatal(err)
			}
			size := 100 << 10
			if c.comp == "block" {
				size = 2 << 20
			}
			b, _ := New(cl, &Options{PutThreshold: 1 << 20, BlockSize: 256 << 10, MaxRetries: -1})
			backendtest.RejectsCorruption(t, b, direct, ct, c.name, size)
			b2, _ := New(cl, &Options{PutThreshold: 1 << 20, BlockSize: 256 << 10})
			backendtest.HealsCorruption(t, b2, direct, ct, c.name, size)
		})
	}
}
