// Package backendtest holds the checks the cloud backends' own tests share
// beyond the conformance suite: each runs on a bucket the backend's test
// configures so that the check crosses the SDK path it is there for (a
// single request or a staged, resumable or multipart upload), which the
// suite, on its own thresholds, does not choose.
package backendtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/driver"
)

// Pattern returns n deterministic bytes that differ per seed.
func Pattern(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7+i/251) ^ seed
	}
	return p
}

// MustNotExist fails the test unless key is missing from b, with an error
// that names it.
func MustNotExist(t testing.TB, b *blob.Bucket, key string) {
	t.Helper()
	_, err := b.Stat(context.Background(), key)
	if !blob.IsNotExist(err) {
		t.Fatalf("stat %q: want not exist, got %v", key, err)
	}
	if !strings.Contains(err.Error(), key) {
		t.Fatalf("not-exist error does not name the key %q: %v", key, err)
	}
}

// UnknownSize puts objects of each size through a reader of unknown size
// and reads them back, and checks that a missing key is missing.
func UnknownSize(t testing.TB, b *blob.Bucket, sizes ...int) {
	t.Helper()
	ctx := context.Background()
	for _, n := range sizes {
		data := Pattern(n, 9)
		key := fmt.Sprintf("unknown/%d", n)
		if _, err := b.PutReader(ctx, key, io.MultiReader(bytes.NewReader(data)), -1, nil); err != nil {
			t.Fatal(err)
		}
		got, err := b.ReadAll(ctx, key)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("unknown size %d: read back %d bytes, err %v", n, len(got), err)
		}
	}
	MustNotExist(t, b, "missing/key")
	if _, err := b.ReadAll(ctx, "missing/key"); !blob.IsNotExist(err) {
		t.Fatalf("read missing: %v", err)
	}
}

// WrongSize: a reader that lies about its size, shorter or longer, below
// and above a 1 MiB threshold, is refused as an invalid argument and leaves
// no object behind.
func WrongSize(t testing.TB, b *blob.Bucket) {
	t.Helper()
	ctx := context.Background()
	for _, c := range []struct {
		name       string
		have, said int
	}{{"small-short", 100, 200}, {"small-long", 300, 200}, {"large-short", 2 << 20, 3 << 20}, {"large-long", 3<<20 + 1, 3 << 20}} {
		_, err := b.PutReader(ctx, c.name, bytes.NewReader(Pattern(c.have, 1)), int64(c.said), nil)
		if !errors.Is(err, blob.ErrInvalidArgument) {
			t.Errorf("%s: want invalid argument, got %v", c.name, err)
		}
		MustNotExist(t, b, c.name)
	}
}

// RaceWinners runs n conditional Puts of distinct contents (Pattern(size,
// i+1)) at once and returns the indexes that won; a loser must fail its
// precondition.
func RaceWinners(t testing.TB, b *blob.Bucket, key string, size, n int, opts func(i int) *blob.PutOptions) []int {
	t.Helper()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []int
		start   = make(chan struct{})
	)
	for i := range n {
		wg.Go(func() {
			<-start
			_, err := b.Put(context.Background(), key, Pattern(size, byte(i+1)), opts(i))
			switch {
			case err == nil:
				mu.Lock()
				winners = append(winners, i)
				mu.Unlock()
			case !blob.IsPreconditionFailed(err):
				t.Errorf("racer %d: want precondition failed, got %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	return winners
}

// IfNotExistRace: of 8 conditional creates of each size at once, exactly
// one wins, and its content is stored.
func IfNotExistRace(t *testing.T, b *blob.Bucket, sizes ...int) {
	for _, size := range sizes {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			key := fmt.Sprintf("race/%d", size)
			w := RaceWinners(t, b, key, size, 8, func(int) *blob.PutOptions { return &blob.PutOptions{IfNotExist: true} })
			if len(w) != 1 {
				t.Fatalf("winners %v, want exactly one", w)
			}
			got, err := b.ReadAll(context.Background(), key)
			if err != nil || !bytes.Equal(got, Pattern(size, byte(w[0]+1))) {
				t.Fatalf("the stored object is not the winner's: %v", err)
			}
		})
	}
}

// IfMatch runs the compare-and-swap cycle on objects of each size: IfMatch
// on a missing key (with missingETag, an ETag of the backend's form) fails,
// a second create fails, a swap changes the ETag, a stale or foreign ETag
// fails, Stat agrees with the Put, and of 8 swaps from one ETag exactly one
// wins.
func IfMatch(t *testing.T, b *blob.Bucket, missingETag string, sizes ...int) {
	ctx := context.Background()
	for _, size := range sizes {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			key := fmt.Sprintf("cas/%d", size)
			if _, err := b.Put(ctx, key, Pattern(size, 1), &blob.PutOptions{IfMatch: missingETag}); !blob.IsPreconditionFailed(err) {
				t.Fatalf("if-match on a missing key: %v", err)
			}
			a1, err := b.Put(ctx, key, Pattern(size, 1), &blob.PutOptions{IfNotExist: true})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.Put(ctx, key, Pattern(size, 9), &blob.PutOptions{IfNotExist: true}); !blob.IsPreconditionFailed(err) {
				t.Fatalf("second create: %v", err)
			}
			a2, err := b.Put(ctx, key, Pattern(size, 2), &blob.PutOptions{IfMatch: a1.ETag})
			if err != nil {
				t.Fatal(err)
			}
			if a2.ETag == a1.ETag {
				t.Fatal("the ETag did not change")
			}
			if _, err := b.Put(ctx, key, Pattern(size, 3), &blob.PutOptions{IfMatch: a1.ETag}); !blob.IsPreconditionFailed(err) {
				t.Fatalf("stale if-match: %v", err)
			}
			if _, err := b.Put(ctx, key, Pattern(size, 3), &blob.PutOptions{IfMatch: `"not-a-generation"`}); !blob.IsPreconditionFailed(err) {
				t.Fatalf("foreign ETag: %v", err)
			}
			s, _ := b.Stat(ctx, key)
			if s.ETag != a2.ETag {
				t.Fatalf("stat ETag %q, put said %q", s.ETag, a2.ETag)
			}
			// CAS race: of 8 writers holding the same ETag, one wins.
			w := RaceWinners(t, b, key, size, 8, func(int) *blob.PutOptions { return &blob.PutOptions{IfMatch: a2.ETag} })
			if len(w) != 1 {
				t.Fatalf("CAS winners %v, want exactly one", w)
			}
			got, _ := b.ReadAll(ctx, key)
			if !bytes.Equal(got, Pattern(size, byte(w[0]+1))) {
				t.Fatal("the stored object is not the CAS winner's")
			}
		})
	}
}

// PutKeys puts each key (its name as content), parallel at a time.
func PutKeys(t testing.TB, b *blob.Bucket, keys []string, parallel int) {
	t.Helper()
	var wg sync.WaitGroup
	var failed atomic.Int64
	sem := make(chan struct{}, parallel)
	for _, k := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := b.Put(context.Background(), k, []byte(k), nil); err != nil {
				failed.Add(1)
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.FailNow()
	}
}

// ListAndDelete puts n keys d/00000… (parallel at a time) and one outside
// the prefix, lists them in pages of 7 and through the iterator, from
// StartAfter an existing key and one between keys, in small pages after
// StartAfter, with ListFrom, then deletes them all with two missing keys in
// one call: nothing of the prefix is left and the key outside it stays.
// requests, if not nil, counts the bucket's requests, for the log.
func ListAndDelete(t testing.TB, b *blob.Bucket, n, parallel int, requests func() int64) {
	t.Helper()
	ctx := context.Background()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("d/%05d", i)
	}
	PutKeys(t, b, keys, parallel)
	if _, err := b.Put(ctx, "e/outside", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	// Pages of 7 (50 of them), then the iterator.
	var listed []string
	opts := blob.ListOptions{PageSize: 7}
	for pages := 0; pages < 50; pages++ {
		p, err := b.ListPage(ctx, "d/", opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Objects) > 7 {
			t.Fatalf("page of %d", len(p.Objects))
		}
		for _, o := range p.Objects {
			listed = append(listed, o.Key)
		}
		if p.NextToken == "" {
			break
		}
		opts = blob.ListOptions{PageSize: 7, Token: p.NextToken}
	}
	for i, k := range listed {
		if k != keys[i] {
			t.Fatalf("listed[%d] = %q, want %q", i, k, keys[i])
		}
	}
	listed = listed[:0]
	for a, err := range b.List(ctx, "d/") {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, a.Key)
	}
	if len(listed) != n || listed[0] != keys[0] || listed[n-1] != keys[n-1] {
		t.Fatalf("listed %d keys", len(listed))
	}
	// StartAfter: an existing key and one between keys.
	p, err := b.ListPage(ctx, "d/", blob.ListOptions{StartAfter: "d/00010", PageSize: 3})
	if err != nil || len(p.Objects) == 0 || p.Objects[0].Key != "d/00011" {
		t.Fatalf("start after an existing key: %+v %v", p.Objects, err)
	}
	p, err = b.ListPage(ctx, "d/", blob.ListOptions{StartAfter: "d/00010x", PageSize: 3})
	if err != nil || len(p.Objects) != 3 || p.Objects[0].Key != "d/00011" {
		t.Fatalf("start after a key between keys: %+v %v", p.Objects, err)
	}
	var after []string
	last := keys[n-10]
	for a, err := range b.ListFrom(ctx, "d/", last) {
		if err != nil {
			t.Fatal(err)
		}
		after = append(after, a.Key)
	}
	if len(after) != 9 || after[0] != keys[n-9] {
		t.Fatalf("ListFrom(%s): %v", last, after)
	}
	// Small pages after StartAfter: the token keeps the bound.
	after = after[:0]
	opts = blob.ListOptions{StartAfter: keys[20], PageSize: 2}
	for range 3 {
		p, err := b.ListPage(ctx, "d/", opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range p.Objects {
			after = append(after, o.Key)
		}
		opts = blob.ListOptions{Token: p.NextToken, PageSize: 2}
	}
	if len(after) == 0 || after[0] != keys[21] {
		t.Fatalf("paged StartAfter: %v", after)
	}

	var n0 int64
	if requests != nil {
		n0 = requests()
	}
	del := append(append([]string{}, keys...), "d/missing-1", "d/missing-2")
	if err := b.Delete(ctx, del...); err != nil {
		t.Fatal(err)
	}
	if requests != nil {
		t.Logf("deleting %d keys took %d requests", len(del), requests()-n0)
	}
	for a, err := range b.List(ctx, "d/") {
		t.Fatalf("left after delete: %v %v", a.Key, err)
	}
	if _, err := b.Stat(ctx, "e/outside"); err != nil {
		t.Fatalf("a key outside the batch went: %v", err)
	}
}

// Closed: once b, the bucket over d, is closed, a second Close of the
// driver is harmless, the bucket refuses Put and Stat, and the driver
// itself refuses Put, Stat, List, Delete and reads, with blob.ErrClosed
// (the suite sees only the bucket's refusal, which the bucket could give
// alone).
func Closed(t testing.TB, b *blob.Bucket, d driver.Driver) {
	t.Helper()
	ctx := context.Background()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("a second Close of the driver: %v", err)
	}
	if _, err := b.Put(ctx, "k", nil, nil); !errors.Is(err, blob.ErrClosed) {
		t.Errorf("Put after Close: %v", err)
	}
	if _, err := b.Stat(ctx, "k"); !errors.Is(err, blob.ErrClosed) {
		t.Errorf("Stat after Close: %v", err)
	}
	if _, err := d.Put(ctx, "k", bytes.NewReader(nil), 0, blob.PutOptions{}); !errors.Is(err, blob.ErrClosed) {
		t.Errorf("driver Put after Close: %v", err)
	}
	if _, err := d.Stat(ctx, "k"); !errors.Is(err, blob.ErrClosed) {
		t.Errorf("driver Stat after Close: %v", err)
	}
	if _, err := d.List(ctx, blob.ListOptions{}); !errors.Is(err, blob.ErrClosed) {
		t.Errorf("driver List after Close: %v", err)
	}
	if err := d.Delete(ctx, []string{"k"}); !errors.Is(err, blob.ErrClosed) {
		t.Errorf("driver Delete after Close: %v", err)
	}
	if _, err := d.NewRangeReader(ctx, "k", 0, -1); !errors.Is(err, blob.ErrClosed) {
		t.Errorf("driver read after Close: %v", err)
	}
}

// CancelMidUpload cancels a PutReader of each named size when three
// quarters of it are read: the Put fails as canceled, and nothing is
// stored or listed.
func CancelMidUpload(t *testing.T, b *blob.Bucket, sizes map[string]int64) {
	for name, size := range sizes {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// Deliver part of the object, then cancel and stall.
			r := &cancelingReader{data: Pattern(int(size), 5), cancelAt: int(size) * 3 / 4, cancel: cancel, ctx: ctx}
			_, err := b.PutReader(ctx, name, r, size, nil)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("want canceled, got %v", err)
			}
			MustNotExist(t, b, name)
			for a, err := range b.List(context.Background(), "") {
				if err != nil {
					t.Fatal(err)
				}
				if a.Key == name {
					t.Fatal("a canceled upload is listed")
				}
			}
		})
	}
}

type cancelingReader struct {
	data     []byte
	off      int
	cancelAt int
	cancel   func()
	ctx      context.Context
}

func (r *cancelingReader) Read(p []byte) (int, error) {
	if r.off >= r.cancelAt {
		r.cancel()
		<-r.ctx.Done()
		return 0, r.ctx.Err()
	}
	n := copy(p, r.data[r.off:r.cancelAt])
	r.off += n
	return n, nil
}

// MissingBucket: on a bucket whose container does not exist, a listing and
// a Put fail with blob.ErrNotExist.
func MissingBucket(t testing.TB, b *blob.Bucket) {
	t.Helper()
	ctx := context.Background()
	if _, err := b.ListPage(ctx, "", blob.ListOptions{}); !blob.IsNotExist(err) {
		t.Errorf("list of a missing bucket: want not exist, got %v", err)
	}
	if _, err := b.Put(ctx, "k", []byte("x"), nil); !blob.IsNotExist(err) {
		t.Errorf("put into a missing bucket: want not exist, got %v", err)
	}
}

// Corrupter flips one byte in the middle of the body of the first request
// Match accepts (after Reset, of the next one), on its way to Base. It is
// an http.RoundTripper, and has the Do of the Azure SDK's transport.
type Corrupter struct {
	Base  http.RoundTripper
	Match func(*http.Request) bool
	done  atomic.Bool
}

func (c *Corrupter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil && c.Match(r) && c.done.CompareAndSwap(false, true) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body.Close()
		body[len(body)/2] ^= 0x40
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.GetBody = nil
	}
	return c.Base.RoundTrip(r)
}

// Do is RoundTrip.
func (c *Corrupter) Do(r *http.Request) (*http.Response, error) { return c.RoundTrip(r) }

// Corrupted reports whether a body was corrupted.
func (c *Corrupter) Corrupted() bool { return c.done.Load() }

// Reset makes the next matching request the one to corrupt.
func (c *Corrupter) Reset() { c.done.Store(false) }

// RejectsCorruption: a Put of size bytes at key through b, a bucket without
// retries whose transport is c, is corrupted in flight, refused as a
// transient error (worth sending again), and leaves nothing visible through
// direct.
func RejectsCorruption(t testing.TB, b, direct *blob.Bucket, c *Corrupter, key string, size int) {
	t.Helper()
	_, err := b.Put(context.Background(), key, Pattern(size, 1), nil)
	if !c.Corrupted() {
		t.Fatal("nothing was corrupted")
	}
	if err == nil {
		t.Fatal("a corrupted body was accepted")
	}
	if !blob.IsTransient(err) {
		t.Fatalf("a checksum mismatch should be transient (worth sending again): %v", err)
	}
	t.Logf("corrupted %s: %v", key, err)
	MustNotExist(t, direct, key)
}

// HealsCorruption: a conditional create of size bytes at key through b, a
// bucket with retries whose transport is c, has a body corrupted, sends it
// again and succeeds, with the right bytes visible through direct.
func HealsCorruption(t testing.TB, b, direct *blob.Bucket, c *Corrupter, key string, size int) {
	t.Helper()
	c.Reset()
	data := Pattern(size, 2)
	if _, err := b.Put(context.Background(), key, data, &blob.PutOptions{IfNotExist: true}); err != nil {
		t.Fatalf("the retry after a rejected corrupted body: %v", err)
	}
	if !c.Corrupted() {
		t.Fatal("nothing was corrupted")
	}
	got, err := direct.ReadAll(context.Background(), key)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes: %v", len(got), err)
	}
}

// TB is what a backend's test helpers need of a test: testing.TB and
// conformance.TB both have it.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
}

// RandHex returns 2n random hex digits, for names no other test uses.
func RandHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// RoundTrip puts an object of each size, checks the attributes Put returns,
// reads it back and stats it. paths is called before each Put; the check it
// returns, called after, asserts the requests the Put took (the driver's
// choice of a single or a staged upload for that size).
func RoundTrip(t *testing.T, b *blob.Bucket, sizes []int, paths func(t *testing.T, n int) (check func())) {
	ctx := context.Background()
	for _, n := range sizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			key := fmt.Sprintf("obj/%d", n)
			data := Pattern(n, byte(n))
			check := paths(t, n)
			a, err := b.Put(ctx, key, data, nil)
			if err != nil {
				t.Fatal(err)
			}
			if a.Size != int64(n) || a.ETag == "" || a.ModTime.IsZero() {
				t.Fatalf("attrs %+v", a)
			}
			check()
			got, err := b.ReadAll(ctx, key)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read back %d bytes, err %v", len(got), err)
			}
			s, err := b.Stat(ctx, key)
			if err != nil || s.Size != int64(n) || s.ETag != a.ETag {
				t.Fatalf("stat %+v %v (put said %+v)", s, err, a)
			}
		})
	}
}

// CodeCase is an error and the code a driver must classify it as.
type CodeCase struct {
	Err  error
	Want blob.Code
}

// ErrorCodes checks a driver's error classification (its ErrorCode) on
// cases, and on what every driver classifies alike: nil, the caller's
// context canceled or past its deadline (wrapped), and an error of no kind
// it knows.
func ErrorCodes(t *testing.T, code func(error) blob.Code, cases ...CodeCase) {
	t.Helper()
	common := []CodeCase{
		{nil, blob.CodeUnknown},
		{context.Canceled, blob.CodeCanceled},
		{fmt.Errorf("op: %w", context.DeadlineExceeded), blob.CodeDeadlineExceeded},
		{errors.New("something else"), blob.CodeUnknown},
	}
	for _, c := range append(common, cases...) {
		if got := code(c.Err); got != c.Want {
			t.Errorf("ErrorCode(%v) = %v, want %v", c.Err, got, c.Want)
		}
	}
}

// PutCase is one way a backend's benchmark uploads: the bucket the driver
// puts through, and the raw upload of the same bytes through the store's own
// client.
type PutCase struct {
	Name   string
	Bucket func() (*blob.Bucket, error)
	Raw    func(ctx context.Context, data []byte) error
}

// PutVsRaw benchmarks, for each case, the driver's Put of data
// (driver/NAME) against the raw upload (raw/NAME), in the same run, and
// reports MB/s beside the time per upload.
func PutVsRaw(b *testing.B, data []byte, cases ...PutCase) {
	ctx := context.Background()
	run := func(b *testing.B, put func() error) {
		b.SetBytes(int64(len(data)))
		start := time.Now()
		for b.Loop() {
			if err := put(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(data))*float64(b.N)/time.Since(start).Seconds()/1e6, "MB/s")
	}
	for _, c := range cases {
		b.Run("driver/"+c.Name, func(b *testing.B) {
			bkt, err := c.Bucket()
			if err != nil {
				b.Fatal(err)
			}
			run(b, func() error {
				_, err := bkt.Put(ctx, "bench/driver", data, nil)
				return err
			})
		})
		b.Run("raw/"+c.Name, func(b *testing.B) { run(b, func() error { return c.Raw(ctx, data) }) })
	}
}

// Bucket is blob.NewBucket over d, closed when the test ends.
func Bucket(t testing.TB, d driver.Driver) *blob.Bucket {
	b := blob.NewBucket(d)
	t.Cleanup(func() { b.Close() })
	return b
}
