package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/driver"
	"github.com/redokit/redokit/testkit/backendtest"
)

// Tests of this file run against the S3 server at REDOKIT_S3_ENDPOINT, each
// in a bucket of its own.

func TestRoundTrip(t *testing.T) {
	e := newEnv(t, "", &Options{PartSize: MinPartSize, MultipartThreshold: MinPartSize})
	ctx := t.Context()
	for _, n := range []int{0, 1, 1000, MinPartSize - 1, MinPartSize, MinPartSize + 1} {
		for _, how := range []string{"bytes", "stream", "unknown-size"} {
			key := fmt.Sprintf("rt/%s/%d", how, n)
			data := payload(n, byte(n))
			var r io.Reader = bytes.NewReader(data)
			size := int64(n)
			switch how {
			case "stream":
				r = onlyReader{r}
			case "unknown-size":
				r, size = onlyReader{r}, -1
			}
			a, err := e.b.PutReader(ctx, key, r, size, nil)
			if err != nil {
				t.Fatalf("PutReader(%s): %v", key, err)
			}
			if a.Size != int64(n) || a.ETag == "" || a.ModTime.IsZero() {
				t.Errorf("PutReader(%s) attrs = %+v", key, a)
			}
			wantSame(t, mustRead(t, e.b, key), data, key)
			st, err := e.b.Stat(ctx, key)
			if err != nil || st.Size != int64(n) || st.ETag != a.ETag {
				t.Errorf("Stat(%s) = %+v, %v; Put said %+v", key, st, err, a)
			}
		}
	}
}

// TestMultipart: above the threshold, objects go up in parts (a multipart
// ETag ends in -N), byte-exact, through each way of giving the bytes.
func TestMultipart(t *testing.T) {
	cc := newCounting(nil)
	e := newEnv(t, "", &Options{PartSize: 5 << 20, MultipartThreshold: 5 << 20, HTTPClient: cc})
	data := payload(12<<20, 9)
	for _, how := range []string{"bytes", "stream", "unknown-size"} {
		key := "mp/" + how
		var r io.Reader = bytes.NewReader(data)
		size := int64(len(data))
		switch how {
		case "stream":
			r = onlyReader{r}
		case "unknown-size":
			r, size = onlyReader{r}, -1
		}
		before := cc.snapshot()
		a, err := e.b.PutReader(t.Context(), key, r, size, nil)
		if err != nil {
			t.Fatalf("PutReader(%s, 12 MiB): %v", key, err)
		}
		after := cc.snapshot()
		// Create + 3 parts + Complete = 2 POSTs and 3 PUTs.
		if puts, posts := after["PUT"]-before["PUT"], after["POST"]-before["POST"]; puts != 3 || posts != 2 {
			t.Errorf("PutReader(%s): %d PUT and %d POST requests, want 3 parts and create+complete", key, puts, posts)
		}
		if !strings.HasSuffix(strings.Trim(a.ETag, `"`), "-3") {
			t.Errorf("PutReader(%s): ETag %s, want a 3-part multipart ETag", key, a.ETag)
		}
		if a.Size != int64(len(data)) {
			t.Errorf("PutReader(%s): Size %d", key, a.Size)
		}
		wantSame(t, mustRead(t, e.b, key), data, key)
	}
	wantNoUploads(t, e.admin, e.bucket, "after multipart puts")
}

// TestSizeMismatch: a reader holding fewer or more bytes than declared
// fails the Put and leaves nothing, on both paths.
func TestSizeMismatch(t *testing.T) {
	e := newEnv(t, "", &Options{PartSize: 5 << 20, MultipartThreshold: 5 << 20})
	for _, c := range []struct {
		name     string
		have     int
		declared int64
	}{{"ShortSingle", 1000, 1001}, {"LongSingle", 1001, 1000}, {"ShortMultipart", 11 << 20, 12 << 20}, {"LongMultipart", 12<<20 + 1, 12 << 20}} {
		key := "mismatch/" + c.name
		_, err := e.b.PutReader(t.Context(), key, onlyReader{bytes.NewReader(payload(c.have, 1))}, c.declared, nil)
		wantCode(t, err, blob.CodeInvalidArgument, "PutReader("+key+")")
		if ok, _ := e.b.Exists(t.Context(), key); ok {
			t.Errorf("%s exists after a failed Put", key)
		}
	}
	wantNoUploads(t, e.admin, e.bucket, "after size mismatches")
}

// TestAbort: a multipart Put whose context is canceled while it reads, or
// before it completes, or whose reader fails, aborts its upload: nothing
// visible, no upload left on the server.
func TestAbort(t *testing.T) {
	const partSize = 5 << 20
	data := payload(15<<20, 3)
	t.Run("CancelMidBody", func(t *testing.T) {
		e := newEnv(t, "", &Options{PartSize: partSize, MultipartThreshold: partSize})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		r := newGated(data, 11<<20)
		done := make(chan error, 1)
		go func() {
			_, err := e.b.PutReader(ctx, "abort/cancel", r, int64(len(data)), nil)
			done <- err
		}()
		select {
		case <-r.reached:
		case err := <-done:
			t.Fatalf("Put ended before its reader was half read: %v", err)
		}
		// The upload exists now (it is created before the first read).
		if us := uploads(t, e.admin, e.bucket); len(us) != 1 {
			t.Errorf("%d uploads in flight, want 1", len(us))
		}
		cancel()
		close(r.release)
		err := <-done
		if !errors.Is(err, context.Canceled) {
			t.Errorf("canceled Put: %v, want context.Canceled", err)
		}
		wantNothingLeft(t, e, "after a canceled Put")
	})
	t.Run("CancelBeforeComplete", func(t *testing.T) {
		e := newEnv(t, "", &Options{PartSize: partSize, MultipartThreshold: partSize})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		setHook(t, &testHook.complete, func(context.Context) { cancel() })
		_, err := e.b.Put(ctx, "abort/complete", data, nil)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Put canceled before completing: %v, want context.Canceled", err)
		}
		wantNothingLeft(t, e, "after a Put canceled before completing")
	})
	t.Run("ReaderFails", func(t *testing.T) {
		e := newEnv(t, "", &Options{PartSize: partSize, MultipartThreshold: partSize})
		r := newGated(data, 11<<20)
		r.err = errInjected
		close(r.release)
		_, err := e.b.PutReader(t.Context(), "abort/reader", r, -1, nil)
		if !errors.Is(err, errInjected) {
			t.Errorf("Put with a failing reader: %v, want the reader's error", err)
		}
		wantNothingLeft(t, e, "after a Put whose reader failed")
	})
	t.Run("OldObjectKept", func(t *testing.T) {
		e := newEnv(t, "", &Options{PartSize: partSize, MultipartThreshold: partSize})
		old := payload(100, 7)
		if _, err := e.b.Put(t.Context(), "abort/old", old, nil); err != nil {
			t.Fatal(err)
		}
		r := newGated(data, 11<<20)
		r.err = errInjected
		close(r.release)
		if _, err := e.b.PutReader(t.Context(), "abort/old", r, int64(len(data)), nil); err == nil {
			t.Fatal("Put with a failing reader succeeded")
		}
		wantSame(t, mustRead(t, e.b, "abort/old"), old, "the old object after a failed overwrite")
		wantNoUploads(t, e.admin, e.bucket, "after a failed overwrite")
	})
}

// setHook sets a test hook for the duration of the test.
func setHook(t *testing.T, f *func(context.Context), to func(context.Context)) {
	testHook.mu.Lock()
	*f = to
	testHook.mu.Unlock()
	t.Cleanup(func() {
		testHook.mu.Lock()
		*f = nil
		testHook.mu.Unlock()
	})
}

// race runs n functions at once and returns their errors.
func race(n int, f func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = f(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// oneWinner checks that exactly one of errs is nil and the rest are
// precondition failures; it returns the winner.
func oneWinner(t *testing.T, errs []error, what string) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("%s: racers %d and %d both won", what, winner, i)
		case err == nil:
			winner = i
		case !blob.IsPreconditionFailed(err):
			t.Errorf("%s: racer %d: %v (code %v), want a precondition failure", what, i, err, blob.CodeOf(err))
		}
	}
	if winner < 0 {
		t.Fatalf("%s: nobody won", what)
	}
	return winner
}

// bothPaths runs f on a fresh env whose parts are 5 MiB with an object of
// each size that takes a path: "Single" (4 KiB, one PutObject) and
// "Multipart" (6 MiB, two parts).
func bothPaths(t *testing.T, f func(t *testing.T, e *testEnv, size int)) {
	for _, c := range []struct {
		name string
		size int
	}{{"Single", 4 << 10}, {"Multipart", 6 << 20}} {
		t.Run(c.name, func(t *testing.T) {
			f(t, newEnv(t, "", &Options{PartSize: 5 << 20, MultipartThreshold: 5 << 20}), c.size)
		})
	}
}

// TestConditionalCreateRace: 8 racers create one key with IfNotExist;
// exactly one wins and its bytes stay. Single PutObject and multipart.
func TestConditionalCreateRace(t *testing.T) {
	bothPaths(t, func(t *testing.T, e *testEnv, size int) {
		const key = "race/create"
		errs := race(8, func(i int) error {
			_, err := e.b.Put(t.Context(), key, payload(size, byte(i)), &blob.PutOptions{IfNotExist: true})
			return err
		})
		w := oneWinner(t, errs, "IfNotExist race")
		wantSame(t, mustRead(t, e.b, key), payload(size, byte(w)), "the winner's object")
		_, err := e.b.Put(t.Context(), key, []byte("late"), &blob.PutOptions{IfNotExist: true})
		wantCode(t, err, blob.CodePreconditionFailed, "a late IfNotExist Put")
		wantNoUploads(t, e.admin, e.bucket, "after the race (losers must abort)")
	})
}

// TestCompareAndSwap: IfMatch with the current ETag wins, a stale one
// loses, on both paths; 8 racers on one ETag: one winner.
func TestCompareAndSwap(t *testing.T) {
	bothPaths(t, func(t *testing.T, e *testEnv, size int) {
		ctx := t.Context()
		const key = "cas/meta"
		a1, err := e.b.Put(ctx, key, payload(size, 1), &blob.PutOptions{IfNotExist: true})
		if err != nil {
			t.Fatal(err)
		}
		a2, err := e.b.Put(ctx, key, payload(size, 2), &blob.PutOptions{IfMatch: a1.ETag})
		if err != nil {
			t.Fatalf("IfMatch the current ETag: %v", err)
		}
		if a2.ETag == a1.ETag {
			t.Errorf("ETag unchanged by new content: %s", a2.ETag)
		}
		_, err = e.b.Put(ctx, key, payload(size, 3), &blob.PutOptions{IfMatch: a1.ETag})
		wantCode(t, err, blob.CodePreconditionFailed, "IfMatch a stale ETag")
		_, err = e.b.Put(ctx, "cas/missing", payload(size, 3), &blob.PutOptions{IfMatch: a1.ETag})
		wantCode(t, err, blob.CodePreconditionFailed, "IfMatch on a missing key")
		wantSame(t, mustRead(t, e.b, key), payload(size, 2), "after a lost CAS")

		errs := race(8, func(i int) error {
			_, err := e.b.Put(ctx, key, payload(size, byte(10+i)), &blob.PutOptions{IfMatch: a2.ETag})
			return err
		})
		w := oneWinner(t, errs, "IfMatch race")
		wantSame(t, mustRead(t, e.b, key), payload(size, byte(10+w)), "the CAS winner's object")
		wantNoUploads(t, e.admin, e.bucket, "after the CAS race")
	})
}

// TestResolveLostResponse: a conditional Put that fails its precondition
// against its own object (an earlier attempt succeeded, its response was
// lost) is a success; against another writer's object it is not.
func TestResolveLostResponse(t *testing.T) {
	e := newEnv(t, "", nil)
	ctx := t.Context()
	p := &putReq{key: "resolve/k", opts: blob.PutOptions{IfNotExist: true}, id: driver.NewPutID()}
	a, err := e.d.putObject(ctx, p, bytes.NewReader([]byte("mine")), 4)
	if err != nil {
		t.Fatal(err)
	}
	// The retry of the same request fails its precondition ...
	_, err = e.d.client.PutObject(ctx, &awss3.PutObjectInput{Bucket: &e.bucket, Key: &p.key, Body: bytes.NewReader([]byte("mine")), IfNoneMatch: aws.String("*")})
	if ErrorCode(err) != blob.CodePreconditionFailed {
		t.Fatalf("second create: %v, want a precondition failure", err)
	}
	// ... and resolve finds the Put's own ID.
	got, ok := e.d.resolve(ctx, p, err)
	if !ok || got.ETag != a.ETag || got.Size != 4 {
		t.Errorf("resolve(own object) = %+v, %v; want the object's attributes", got, ok)
	}
	other := &putReq{key: p.key, opts: p.opts, id: driver.NewPutID()}
	if _, ok := e.d.resolve(ctx, other, err); ok {
		t.Errorf("resolve(another Put's object) = ok")
	}
	unconditional := &putReq{key: p.key, id: p.id}
	if _, ok := e.d.resolve(ctx, unconditional, err); ok {
		t.Errorf("resolve(unconditional Put) = ok")
	}
}

// TestBatchDelete: 2,500 keys (and some missing ones) go in three
// DeleteObjects calls and are all gone.
func TestBatchDelete(t *testing.T) {
	cc := newCounting(nil)
	e := newEnv(t, "", &Options{HTTPClient: cc})
	ctx := t.Context()
	const n = 2500
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("gc/%05d", i)
	}
	backendtest.PutKeys(t, e.b, keys, 16)
	all := append(keys, "gc/missing-1", "gc/missing-2")
	before, stats := cc.snapshot(), e.b.Stats()
	if err := e.b.Delete(ctx, all...); err != nil {
		t.Fatalf("Delete(%d keys): %v", len(all), err)
	}
	if got := e.b.Stats().Sub(stats).Deletes; got != 3 {
		t.Errorf("%d driver delete calls for %d keys, want 3", got, len(all))
	}
	if got := cc.snapshot()["POST"] - before["POST"]; got != 3 {
		t.Errorf("%d DeleteObjects requests, want 3", got)
	}
	if left := objectKeys(t, e.admin, e.bucket); len(left) != 0 {
		t.Errorf("%d keys left after the batch delete, e.g. %q", len(left), left[0])
	}
	// Missing keys, alone and in a batch, are fine.
	if err := e.b.Delete(ctx, "gc/00001"); err != nil {
		t.Errorf("Delete(missing key): %v", err)
	}
	if err := e.b.Delete(ctx, "gc/00001", "gc/00002"); err != nil {
		t.Errorf("Delete(missing keys): %v", err)
	}
}

// Ranged reads (offsets at, past and before the end, lengths past it, the
// empty object, missing keys) are the conformance suite's rangedRead and
// notExist, which TestConformance runs on this driver.

func TestListPages(t *testing.T) {
	e := newEnv(t, "", nil)
	ctx := t.Context()
	var keys []string
	for i := range 25 {
		keys = append(keys, fmt.Sprintf("l/%03d", i))
	}
	for _, k := range append([]string{"k-before", "m-after"}, keys...) {
		if _, err := e.b.Put(ctx, k, []byte(k), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, ps := range []int{1, 7, 25, 26, 1000} {
		var got []string
		opts := blob.ListOptions{PageSize: ps}
		for range 100 {
			page, err := e.b.ListPage(ctx, "l/", opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Objects) > ps {
				t.Errorf("page size %d: a page of %d", ps, len(page.Objects))
			}
			for _, a := range page.Objects {
				got = append(got, a.Key)
				if a.Size != int64(len(a.Key)) || a.ETag == "" || a.ModTime.IsZero() {
					t.Errorf("listed attrs %+v", a)
				}
			}
			if page.NextToken == "" {
				break
			}
			opts = blob.ListOptions{PageSize: ps, Token: page.NextToken}
		}
		if strings.Join(got, ",") != strings.Join(keys, ",") {
			t.Errorf("page size %d: listed %v", ps, got)
		}
	}
	page, err := e.b.ListPage(ctx, "l/", blob.ListOptions{StartAfter: "l/019"})
	if err != nil || len(page.Objects) != 5 || page.Objects[0].Key != "l/020" {
		t.Errorf("StartAfter l/019: %+v, %v", page.Objects, err)
	}
}

// TestSSEHeaders: the encryption settings reach the requests that create
// objects. versitygw ignores or refuses them, so this looks at what is sent.
func TestSSEHeaders(t *testing.T) {
	rec := &recordingClient{base: http.DefaultClient}
	e := newEnv(t, "", &Options{SSE: "aws:kms", SSEKMSKeyID: "alias/redo", HTTPClient: rec, PartSize: 5 << 20, MultipartThreshold: 5 << 20})
	_, err := e.b.Put(t.Context(), "sse/single", []byte("x"), nil)
	t.Logf("single Put with SSE-KMS on this server: %v", err)
	_, err = e.b.Put(t.Context(), "sse/multi", payload(6<<20, 1), nil)
	t.Logf("multipart Put with SSE-KMS on this server: %v", err)
	for _, want := range []string{"PUT /sse/single", "POST /sse/multi?uploads"} {
		// Paths carry the bucket first (path style); queries may carry more.
		h, ok := rec.find(want)
		if !ok {
			t.Errorf("no request %q sent", want)
			continue
		}
		if h.Get("X-Amz-Server-Side-Encryption") != "aws:kms" || h.Get("X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id") != "alias/redo" {
			t.Errorf("%s: SSE headers %q / %q", want, h.Get("X-Amz-Server-Side-Encryption"), h.Get("X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id"))
		}
	}
}

// recordingClient records the method, path and headers of each request.
type recordingClient struct {
	base *http.Client
	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	what   string
	header http.Header
}

func (c *recordingClient) Do(req *http.Request) (*http.Response, error) {
	what := req.Method + " " + req.URL.Path
	if req.URL.RawQuery != "" {
		what += "?" + req.URL.RawQuery
	}
	c.mu.Lock()
	c.reqs = append(c.reqs, recorded{what, req.Header.Clone()})
	c.mu.Unlock()
	return c.base.Do(req)
}

// find returns the headers of the first request "METHOD /path[?query]"
// whose path ends with path and whose query starts with query.
func (c *recordingClient) find(what string) (http.Header, bool) {
	method, rest, _ := strings.Cut(what, " ")
	path, query, _ := strings.Cut(rest, "?")
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.reqs {
		m, rrest, _ := strings.Cut(r.what, " ")
		rpath, rquery, _ := strings.Cut(rrest, "?")
		if m == method && strings.HasSuffix(rpath, path) && strings.HasPrefix(rquery, query) {
			return r.header, true
		}
	}
	return nil, false
}

// TestClosed: after Close every call fails with ErrClosed; Close of a
// bucket from Open closes the idle connections.
func TestClosed(t *testing.T) {
	e := newEnv(t, "", nil)
	backendtest.Closed(t, e.b, e.d)
}

func TestAs(t *testing.T) {
	e := newEnv(t, "", nil)
	var c *awss3.Client
	if !e.b.As(&c) || c == nil {
		t.Errorf("As(**s3.Client) = false")
	}
	var name string
	if !e.b.As(&name) || name != e.bucket {
		t.Errorf("As(*string) = %q, want %q", name, e.bucket)
	}
	var n *int
	if e.b.As(&n) || e.b.As(nil) {
		t.Errorf("As of an unknown type or nil = true")
	}
}

// TestOpenURL opens the server through blob.Open with a prefix.
func TestOpenURL(t *testing.T) {
	ep := endpoint(t)
	admin := adminClient(t, ep)
	name := makeBucket(t, admin)
	b, err := blob.Open(t.Context(), "s3://"+name+"/logs/cf1?region=us-east-1&use_path_style=true&endpoint="+ep)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Put(t.Context(), "seg", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	if keys := objectKeys(t, admin, name); len(keys) != 1 || keys[0] != "logs/cf1/seg" {
		t.Errorf("keys in the bucket: %v, want [logs/cf1/seg]", keys)
	}
}

// TestMissingBucket: a bucket that does not exist is ErrNotExist, also for
// a delete (which must not mistake it for a missing key).
func TestMissingBucket(t *testing.T) {
	ep := endpoint(t)
	b, err := New(nil, newBucketName(t), &Options{Endpoint: ep, UsePathStyle: true, Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = b.Put(t.Context(), "k", []byte("x"), nil)
	wantCode(t, err, blob.CodeNotExist, "Put into a missing bucket")
	_, err = b.ListPage(t.Context(), "", blob.ListOptions{})
	wantCode(t, err, blob.CodeNotExist, "List of a missing bucket")
	err = b.Delete(t.Context(), "k")
	wantCode(t, err, blob.CodeNotExist, "Delete in a missing bucket")
}
