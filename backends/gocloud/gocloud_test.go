package gocloud

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gcblob "gocloud.dev/blob"
	"gocloud.dev/blob/driver"
	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/testkit/backendtest"
)

// store opens a fresh bucket of one gocloud driver.
type store struct {
	name string
	open func(t *testing.T) *blob.Bucket
}

func stores() []store {
	return []store{
		{"mem", func(t *testing.T) *blob.Bucket {
			return mustOpen(t, "mem://")
		}},
		{"file", func(t *testing.T) *blob.Bucket {
			return mustOpen(t, "file://"+t.TempDir())
		}},
	}
}

func mustOpen(t *testing.T, u string) *blob.Bucket {
	t.Helper()
	b, err := openURL(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// openURL opens a gocloud URL (not a redokit one) as "gocloud+" URLs do.
func openURL(ctx context.Context, rawURL string) (*blob.Bucket, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	return open(ctx, u)
}

// mustDriver is NewDriver for a bucket that is not nil.
func mustDriver(b *gcblob.Bucket, opts *Options) *Driver {
	d, err := NewDriver(b, opts)
	if err != nil {
		panic(err)
	}
	return d
}

// mustOpenDriver opens a gocloud URL as a "gocloud+" URL does, keeping the driver for
// a look at what it detected.
func mustOpenDriver(t *testing.T, rawURL string) *Driver {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	d, err := openDriver(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func forEach(t *testing.T, f func(t *testing.T, b *blob.Bucket)) {
	for _, s := range stores() {
		t.Run(s.name, func(t *testing.T) { f(t, s.open(t)) })
	}
}

func pattern(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7 + i/251)
	}
	return p
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	forEach(t, func(t *testing.T, b *blob.Bucket) {
		for _, n := range []int{0, 1, 511, 512, 4096, 1<<20 + 3} {
			key := fmt.Sprintf("rt/%d", n)
			data := pattern(n)
			a, err := b.Put(ctx, key, data, nil)
			if err != nil {
				t.Fatalf("put %d bytes: %v", n, err)
			}
			if a.Size != int64(n) || a.Key != key || a.ETag == "" || a.ModTime.IsZero() {
				t.Errorf("put %d bytes returned %+v", n, a)
			}
			got, err := b.ReadAll(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("%d bytes: read back %d bytes that differ", n, len(got))
			}
			st, err := b.Stat(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if st.Size != int64(n) || st.ETag != a.ETag {
				t.Errorf("stat %+v, put said %+v", st, a)
			}
		}
		// An overwrite replaces the bytes and changes the ETag, also for a
		// same-size write right after (fileblob's own ETag would not).
		a1, _ := b.Put(ctx, "rt/over", []byte("one"), nil)
		a2, err := b.Put(ctx, "rt/over", []byte("two"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if a1.ETag == a2.ETag {
			t.Errorf("ETag %q did not change on overwrite", a1.ETag)
		}
		if got, _ := b.ReadAll(ctx, "rt/over"); string(got) != "two" {
			t.Errorf("after overwrite read %q", got)
		}
		// A reader of unknown size (size < 0) is read to EOF.
		if _, err := b.PutReader(ctx, "rt/stream", strings.NewReader("streamed"), -1, nil); err != nil {
			t.Fatal(err)
		}
		if got, _ := b.ReadAll(ctx, "rt/stream"); string(got) != "streamed" {
			t.Errorf("streamed put read %q", got)
		}
	})
}

// fileblob's own ETag is the file's modification time and size, which file
// systems keep only to the clock tick: two same-size writes in one tick share
// it. Pinning the time makes that happen every run; the ETag this driver
// reports must still change.
func TestFileETagSameTick(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := mustOpen(t, "file://"+dir)
	tick := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var etags []string
	for _, v := range []string{"one", "two"} {
		if _, err := b.Put(ctx, "k", []byte(v), nil); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(dir, "k"), tick, tick); err != nil {
			t.Fatal(err)
		}
		a, err := b.Stat(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		etags = append(etags, a.ETag)
	}
	if etags[0] == etags[1] {
		t.Errorf("two writes in one tick share the ETag %q", etags[0])
	}
}

// Ranged reads are the conformance suite's rangedRead, which
// TestConformanceMem and TestConformanceFile run on the same two stores.

// The driver itself (not only Bucket) answers an offset past the end with an
// empty reader.
func TestDriverOffsetPastEnd(t *testing.T) {
	ctx := context.Background()
	d := mustDriver(memblob.OpenBucket(nil), nil)
	defer d.Close()
	if _, err := d.Put(ctx, "k", strings.NewReader("abc"), 3, blob.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{3, 4, 1 << 40} {
		r, err := d.NewRangeReader(ctx, "k", off, -1)
		if err != nil {
			t.Fatalf("offset %d: %v", off, err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || len(got) != 0 {
			t.Errorf("offset %d: read %q, %v", off, got, err)
		}
	}
}

func TestNotExist(t *testing.T) {
	ctx := context.Background()
	forEach(t, func(t *testing.T, b *blob.Bucket) {
		p, err := b.Prefixed("pre/")
		if err != nil {
			t.Fatal(err)
		}
		for _, bk := range []*blob.Bucket{b, p} {
			const key = "no/such-key"
			_, err := bk.ReadAll(ctx, key)
			checkNotExist(t, "read", key, err)
			_, err = bk.Stat(ctx, key)
			checkNotExist(t, "stat", key, err)
			_, err = bk.ReadRange(ctx, key, 5, 0)
			checkNotExist(t, "empty range", key, err)
			ok, err := bk.Exists(ctx, key)
			if ok || err != nil {
				t.Errorf("Exists(missing) = %v, %v", ok, err)
			}
		}
	})
}

func checkNotExist(t *testing.T, op, key string, err error) {
	t.Helper()
	if !blob.IsNotExist(err) {
		t.Errorf("%s of a missing key: %v, want ErrNotExist", op, err)
		return
	}
	if blob.CodeOf(err) != blob.CodeNotExist {
		t.Errorf("%s: code %v", op, blob.CodeOf(err))
	}
	if !strings.Contains(err.Error(), key) {
		t.Errorf("%s: error %q does not name the key %q", op, err, key)
	}
}

// Keys chosen so that a directory walk (fileblob) and byte order disagree:
// '-' and '.' sort before '/', but fileblob walks "a/" before "a-b".
var listKeys = []string{"a/c", "a-b", "a/d", "a.e", "a0", "b/1", "b/2", "b-x", "ba", "c-1/z", "c/y"}

// objectAndDirKeys are keys that are also another key's directory: fine on an
// object store, impossible on a file system (see the package doc).
var objectAndDirKeys = []string{"a/c/x", "b"}

func TestListPagesStartAfter(t *testing.T) {
	ctx := context.Background()
	forEach(t, func(t *testing.T, b *blob.Bucket) {
		keys := slices.Clone(listKeys)
		if !strings.Contains(t.Name(), "file") {
			keys = append(keys, objectAndDirKeys...)
		}
		for _, k := range keys {
			if _, err := b.Put(ctx, k, []byte(k), nil); err != nil {
				t.Fatal(err)
			}
		}
		want := slices.Sorted(slices.Values(keys))

		for _, prefix := range []string{"", "a", "a/", "b", "c", "zzz"} {
			var wantP []string
			for _, k := range want {
				if strings.HasPrefix(k, prefix) {
					wantP = append(wantP, k)
				}
			}
			for _, size := range []int{1, 2, 3, 5, 1000} {
				for _, after := range []string{"", "a", "a/c", "a0", "b/", "zz"} {
					var wantA []string
					for _, k := range wantP {
						if k > after {
							wantA = append(wantA, k)
						}
					}
					got := listAll(t, b, prefix, after, size)
					if !slices.Equal(got, wantA) {
						t.Errorf("prefix %q after %q pages of %d: got %q, want %q", prefix, after, size, got, wantA)
					}
				}
			}
		}

		// The same listing through a prefixed view.
		p, _ := b.Prefixed("b/")
		var got []string
		for a, err := range p.List(ctx, "") {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, a.Key)
		}
		if !slices.Equal(got, []string{"1", "2"}) {
			t.Errorf("prefixed view lists %q", got)
		}
	})
}

// listAll pages through a listing by tokens and checks each page's size.
func listAll(t *testing.T, b *blob.Bucket, prefix, after string, size int) []string {
	t.Helper()
	var out []string
	opts := blob.ListOptions{StartAfter: after, PageSize: size}
	for i := 0; ; i++ {
		if i > 100 {
			t.Fatal("listing does not end")
		}
		page, err := b.ListPage(context.Background(), prefix, opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Objects) > size {
			t.Fatalf("page of %d objects, asked for %d", len(page.Objects), size)
		}
		for _, a := range page.Objects {
			if a.Size != int64(len(prefix+a.Key)) && a.Size != int64(len(a.Key)) {
				t.Errorf("listed %q with size %d", a.Key, a.Size)
			}
			out = append(out, a.Key)
		}
		if page.NextToken == "" {
			return out
		}
		opts = blob.ListOptions{Token: page.NextToken, PageSize: size}
	}
}

func TestListAfterChanges(t *testing.T) {
	ctx := context.Background()
	forEach(t, func(t *testing.T, b *blob.Bucket) {
		for _, k := range []string{"k1", "k3", "k5", "k7"} {
			b.Put(ctx, k, nil, nil)
		}
		page, err := b.ListPage(ctx, "", blob.ListOptions{PageSize: 2})
		if err != nil || len(page.Objects) != 2 || page.NextToken == "" {
			t.Fatalf("first page %+v, %v", page, err)
		}
		// An insert inside the returned page and a delete of the next key
		// must not disturb the next page.
		b.Put(ctx, "k2", nil, nil)
		b.Delete(ctx, "k5")
		b.Put(ctx, "k6", nil, nil)
		var got []string
		opts := blob.ListOptions{Token: page.NextToken, PageSize: 2}
		for i := 0; ; i++ {
			if i > 10 {
				t.Fatal("listing does not end")
			}
			p, err := b.ListPage(ctx, "", opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range p.Objects {
				got = append(got, a.Key)
			}
			if p.NextToken == "" {
				break
			}
			opts.Token = p.NextToken
		}
		if !slices.Equal(got, []string{"k6", "k7"}) && !slices.Equal(got, []string{"k3", "k6", "k7"}) {
			t.Errorf("after changes the rest of the listing is %q", got)
		}
		if slices.Contains(got, "k2") || slices.Contains(got, "k1") {
			t.Errorf("a later page repeated or went back: %q", got)
		}
	})
}

func TestListBadToken(t *testing.T) {
	ctx := context.Background()
	forEach(t, func(t *testing.T, b *blob.Bucket) {
		for _, tok := range []string{"garbage", "!!.!!", ".", "YQ"} {
			_, err := b.ListPage(ctx, "", blob.ListOptions{Token: tok})
			if !errors.Is(err, blob.ErrInvalidArgument) {
				t.Errorf("token %q: %v, want ErrInvalidArgument", tok, err)
			}
		}
	})
}

func TestIfNotExistRace(t *testing.T) {
	ctx := context.Background()
	// fileblob's IfNotExist is atomic only inside one process (see the
	// package doc); these goroutines share one, so both must hold here.
	forEach(t, func(t *testing.T, b *blob.Bucket) {
		const racers = 16
		w := backendtest.RaceWinners(t, b, "race", 9, racers, func(int) *blob.PutOptions { return &blob.PutOptions{IfNotExist: true} })
		if len(w) != 1 {
			t.Fatalf("winners %v of %d, want exactly one", w, racers)
		}
		got, _ := b.ReadAll(ctx, "race")
		if !bytes.Equal(got, backendtest.Pattern(9, byte(w[0]+1))) {
			t.Errorf("winner's object reads %q", got)
		}
		// A lost create leaves the winner's bytes alone.
		_, err := b.Put(ctx, "race", []byte("late"), &blob.PutOptions{IfNotExist: true})
		if !blob.IsPreconditionFailed(err) {
			t.Errorf("create over an existing key: %v", err)
		}
		if again, _ := b.ReadAll(ctx, "race"); !bytes.Equal(again, got) {
			t.Errorf("lost create changed the object to %q", again)
		}
	})
}

func TestIfMatch(t *testing.T) {
	ctx := context.Background()
	t.Run("unsupported", func(t *testing.T) {
		b := mustOpen(t, "file://"+t.TempDir())
		b.Put(ctx, "m", []byte("v1"), nil)
		a, _ := b.Stat(ctx, "m")
		_, err := b.Put(ctx, "m", []byte("v2"), &blob.PutOptions{IfMatch: a.ETag})
		if !errors.Is(err, blob.ErrNotSupported) {
			t.Fatalf("IfMatch without LocalCAS: %v, want ErrNotSupported", err)
		}
		if got, _ := b.ReadAll(ctx, "m"); string(got) != "v1" {
			t.Errorf("refused IfMatch wrote: %q", got)
		}
	})
	t.Run("localcas", func(t *testing.T) {
		b := mustOpen(t, "mem://") // "gocloud+mem" turns LocalCAS on for memblob
		_, err := b.Put(ctx, "m", []byte("v0"), &blob.PutOptions{IfMatch: `"nope"`})
		if !blob.IsPreconditionFailed(err) {
			t.Errorf("IfMatch on a missing key: %v", err)
		}
		a1, _ := b.Put(ctx, "m", []byte("v1"), nil)
		a2, err := b.Put(ctx, "m", []byte("v2"), &blob.PutOptions{IfMatch: a1.ETag})
		if err != nil {
			t.Fatalf("IfMatch with the current ETag: %v", err)
		}
		if _, err := b.Put(ctx, "m", []byte("v3"), &blob.PutOptions{IfMatch: a1.ETag}); !blob.IsPreconditionFailed(err) {
			t.Errorf("IfMatch with a stale ETag: %v", err)
		}
		if got, _ := b.ReadAll(ctx, "m"); string(got) != "v2" {
			t.Errorf("after CAS read %q", got)
		}

		// Racers holding the same ETag: exactly one swaps.
		const racers = 16
		if w := backendtest.RaceWinners(t, b, "m", 3, racers, func(int) *blob.PutOptions { return &blob.PutOptions{IfMatch: a2.ETag} }); len(w) != 1 {
			t.Fatalf("CAS winners %v of %d, want exactly one", w, racers)
		}
	})
	t.Run("shared-bucket", func(t *testing.T) {
		// Two Drivers over one gocloud bucket share its key locks.
		gb := memblob.OpenBucket(nil)
		d1 := mustDriver(gb, &Options{LocalCAS: true})
		d2 := mustDriver(gb, &Options{LocalCAS: true})
		if d1.cas != d2.cas {
			t.Fatal("two LocalCAS drivers over one bucket have different lock tables")
		}
		d2.closed.Store(true) // keep gb open for d1; release by hand
		releaseCAS(gb)
		d1.Close()
		casTables.mu.Lock()
		_, left := casTables.m[gb]
		casTables.mu.Unlock()
		if left {
			t.Error("lock table outlived its drivers")
		}
	})
}

func TestDelete(t *testing.T) {
	ctx := context.Background()
	forEach(t, func(t *testing.T, b *blob.Bucket) {
		if err := b.Delete(ctx, "missing"); err != nil {
			t.Errorf("delete of a missing key: %v", err)
		}
		var keys []string
		for i := range 150 {
			k := fmt.Sprintf("d/%03d", i)
			keys = append(keys, k)
			if i%3 != 0 { // every third key is missing
				if _, err := b.Put(ctx, k, []byte("x"), nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		b.Put(ctx, "keep", []byte("x"), nil)
		if err := b.Delete(ctx, keys...); err != nil {
			t.Fatalf("batch delete: %v", err)
		}
		for a, err := range b.List(ctx, "") {
			if err != nil {
				t.Fatal(err)
			}
			if a.Key != "keep" {
				t.Errorf("%q survived the delete", a.Key)
			}
		}
		if err := b.Delete(ctx, keys...); err != nil {
			t.Errorf("deleting them again: %v", err)
		}
	})
}

func TestDeleteCanceled(t *testing.T) {
	b := mustOpen(t, "mem://")
	b.Put(context.Background(), "a", []byte("x"), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Delete(ctx, "a", "b"); !errors.Is(err, context.Canceled) {
		t.Fatalf("delete with a canceled context: %v", err)
	}
	if ok, _ := b.Exists(context.Background(), "a"); !ok {
		t.Error("a delete with a canceled context deleted")
	}
}

func TestDeleteErrorNamesKeys(t *testing.T) {
	e := &DeleteError{Failed: []keyError{{"k1", errors.New("boom")}, {"k2", context.DeadlineExceeded}}}
	if !slices.Equal(e.Keys(), []string{"k1", "k2"}) {
		t.Errorf("Keys() = %q", e.Keys())
	}
	if msg := e.Error(); !strings.Contains(msg, `"k1": boom`) || !strings.Contains(msg, `"k2"`) {
		t.Errorf("message %q", msg)
	}
	if !errors.Is(e, context.DeadlineExceeded) {
		t.Error("DeleteError does not unwrap to its causes")
	}
}

// A Put whose context is canceled while it is still reading leaves nothing:
// not while it runs, not after.
func TestCancelMidPut(t *testing.T) {
	forEach(t, func(t *testing.T, b *blob.Bucket) {
		for _, existing := range []bool{false, true} {
			key := fmt.Sprintf("cancel-%v", existing)
			if existing {
				b.Put(context.Background(), key, []byte("old"), nil)
			}
			ctx, cancel := context.WithCancel(context.Background())
			pr, pw := io.Pipe()
			done := make(chan error, 1)
			go func() {
				_, err := b.PutReader(ctx, key, pr, -1, nil)
				done <- err
			}()
			if _, err := pw.Write(pattern(64 << 10)); err != nil {
				t.Fatal(err)
			}
			checkOld(t, b, key, existing, "while the put reads")
			cancel()
			// The write after the cancel ends the driver's read; what it
			// reads after that must not matter.
			go func() { pw.Write(pattern(1024)); pw.Close() }()
			err := <-done
			if err == nil {
				t.Fatal("put succeeded after its context was canceled")
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("canceled put: %v, want context.Canceled", err)
			}
			checkOld(t, b, key, existing, "after the canceled put")
		}
	})
}

func checkOld(t *testing.T, b *blob.Bucket, key string, existing bool, when string) {
	t.Helper()
	got, err := b.ReadAll(context.Background(), key)
	switch {
	case existing && (err != nil || string(got) != "old"):
		t.Errorf("%s: old object reads %q, %v", when, got, err)
	case !existing && !blob.IsNotExist(err):
		t.Errorf("%s: a partial object is visible (%d bytes, %v)", when, len(got), err)
	}
}

type failingReader struct {
	data []byte
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

// Every way a Put can fail leaves the key as it was.
func TestFailedPutLeavesNothing(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("boom")
	forEach(t, func(t *testing.T, b *blob.Bucket) {
		cases := []struct {
			name string
			r    io.Reader
			size int64
			want error
		}{
			{"reader error", &failingReader{pattern(5000), boom}, -1, boom},
			{"short reader", bytes.NewReader(pattern(10)), 11, blob.ErrInvalidArgument},
			{"long reader", bytes.NewReader(pattern(12)), 11, blob.ErrInvalidArgument},
			{"empty but sized", bytes.NewReader(nil), 1, blob.ErrInvalidArgument},
		}
		for _, c := range cases {
			for _, existing := range []bool{false, true} {
				key := strings.ReplaceAll(c.name, " ", "-") + fmt.Sprint(existing)
				if existing {
					b.Put(ctx, key, []byte("old"), nil)
				}
				_, err := b.PutReader(ctx, key, c.r, c.size, nil)
				if !errors.Is(err, c.want) {
					t.Errorf("%s: %v, want %v", c.name, err, c.want)
				}
				checkOld(t, b, key, existing, c.name)
				if s, ok := c.r.(io.Seeker); ok {
					s.Seek(0, io.SeekStart)
				}
			}
		}
	})
}

func TestErrorCode(t *testing.T) {
	ctx := context.Background()
	gb := memblob.OpenBucket(nil)
	d := mustDriver(gb, nil)
	defer d.Close()

	_, notFound := gb.Attributes(ctx, "x")
	gb.WriteAll(ctx, "k", []byte("v"), nil)
	exists := gb.WriteAll(ctx, "k", []byte("v"), &gcblob.WriterOptions{IfNotExist: true})
	_, unimplemented := gb.SignedURL(ctx, "k", nil)
	_, _, invalid := gb.ListPage(ctx, gcblob.FirstPageToken, 0, nil)
	closedGB := memblob.OpenBucket(nil)
	closedGB.Close()
	_, closedErr := closedGB.Attributes(ctx, "k")

	for _, c := range []struct {
		name string
		err  error
		want blob.Code
	}{
		{"NotFound", notFound, blob.CodeNotExist},
		{"FailedPrecondition", exists, blob.CodePreconditionFailed},
		{"Unimplemented", unimplemented, blob.CodeNotSupported},
		{"InvalidArgument", invalid, blob.CodeInvalidArgument},
		{"gocloud closed", closedErr, blob.CodeUnknown},
		{"canceled", context.Canceled, blob.CodeCanceled},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), blob.CodeDeadlineExceeded},
		{"http 503", httpErr(503), blob.CodeTransient},
		{"http 429", httpErr(429), blob.CodeTransient},
		{"http 412", httpErr(412), blob.CodePreconditionFailed},
		{"http 400", httpErr(400), blob.CodeUnknown},
		{"redokit sentinel", blob.ErrNotSupported, blob.CodeNotSupported},
		{"plain", errors.New("x"), blob.CodeUnknown},
	} {
		if c.err == nil {
			t.Errorf("%s: no error to classify", c.name)
			continue
		}
		if got := d.ErrorCode(c.err); got != c.want {
			t.Errorf("%s (%v): code %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

type httpErr int

func (e httpErr) Error() string       { return fmt.Sprintf("http status %d", int(e)) }
func (e httpErr) HTTPStatusCode() int { return int(e) }

func TestAs(t *testing.T) {
	b := mustOpen(t, "file://"+t.TempDir())
	var gb *gcblob.Bucket
	if !b.As(&gb) || gb == nil {
		t.Fatal("As(**gcblob.Bucket) failed")
	}
	var fi os.FileInfo
	if !b.As(&fi) || !fi.IsDir() {
		t.Error("As(*os.FileInfo) not forwarded to fileblob")
	}
	if b.As(nil) {
		t.Error("As(nil) = true")
	}
	var s *string
	if b.As(&s) {
		t.Error("As(unsupported type) = true")
	}
	if !mustOpenDriver(t, "file://"+t.TempDir()).unordered {
		t.Error("fileblob not detected as unordered")
	}
	if mustOpenDriver(t, "mem://").unordered {
		t.Error("memblob taken for unordered")
	}
}

func TestClosed(t *testing.T) {
	d := mustDriver(memblob.OpenBucket(nil), nil)
	backendtest.Closed(t, blob.NewBucket(d), d)
}

func TestURLs(t *testing.T) {
	ctx := context.Background()
	if !slices.Contains(blob.Schemes(), "gocloud+mem") || !slices.Contains(blob.Schemes(), "gocloud+file") {
		t.Fatalf("schemes registered: %q", blob.Schemes())
	}

	if mustOpenDriver(t, "mem://").cas == nil {
		t.Error("gocloud+mem:// has no LocalCAS")
	}

	dir := t.TempDir()
	b, err := blob.Open(ctx, "gocloud+file://"+dir+"/sub?create_dir=1&prefix=logs/")
	if err != nil {
		t.Fatal(err)
	}
	if b.Prefix() != "logs/" {
		t.Errorf("prefix %q", b.Prefix())
	}
	if mustOpenDriver(t, "file://"+t.TempDir()).cas != nil {
		t.Error("file bucket got LocalCAS")
	}
	if _, err := b.Put(ctx, "k", []byte("v"), nil); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if got, err := os.ReadFile(dir + "/sub/logs/k"); err != nil || string(got) != "v" {
		t.Errorf("file on disk: %q, %v", got, err)
	}

	// Each is a mistake in the URL (blob.ErrInvalidArgument: the CLI's exit
	// 2), whether our own wrapper or gocloud's driver refuses it.
	for _, c := range []struct{ url, want string }{
		{"gocloud+file://" + dir + "?bogus=1", "bogus"},
		{"gocloud+mem://?bogus=1", "bogus"},
		{"gocloud+file://" + dir + "?key=k", "key"},
		{"gocloud+file://" + dir + "?prefix=/abs", "absolute"},
		{"gocloud+mem://?nomd5=1&key=x", "key"},
	} {
		_, err := blob.Open(ctx, c.url)
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, blob.ErrInvalidArgument) {
			t.Errorf("open %s: %v, want an invalid argument naming %q", c.url, err, c.want)
		}
	}

	// A scheme gocloud has no driver for says what to import.
	RegisterScheme("gocloud-test-none")
	_, err = blob.Open(ctx, "gocloud+gocloud-test-none://bucket")
	if err == nil || !strings.Contains(err.Error(), "blank-import") {
		t.Errorf("open of a scheme without a gocloud driver: %v", err)
	}
	if _, err := openURL(ctx, "nope://x"); err == nil || !strings.Contains(err.Error(), "blank-import") {
		t.Errorf("open of an unknown gocloud scheme: %v", err)
	}

	mustPanic(t, "duplicate", func() { RegisterScheme("mem") })
	mustPanic(t, "empty", func() { RegisterScheme("") })
	mustPanic(t, "upper case", func() { RegisterScheme("S3") })
	mustPanic(t, "slash", func() { RegisterScheme("s3/x") })
}

// Credentials in a URL never reach an open error, even when gocloud's own
// error quotes the URL.
func TestOpenErrorRedacted(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, u := range []string{
		"gocloud+file://user:hunter2@localhost" + dir + "?bogus=1",
		"gocloud+file://localhost" + dir + "?secret_key_path=/x&bogus=1&token=hunter2",
	} {
		_, err := blob.Open(ctx, u)
		if err == nil {
			t.Fatalf("open %s succeeded", u)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("open error shows a secret: %v", err)
		}
	}
	_, err := openURL(ctx, "file://user:hunter2@localhost"+dir+"?bogus=1")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("open error: %v", err)
	}
}

func mustPanic(t *testing.T, name string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: no panic", name)
		}
	}()
	f()
}

func TestTokenRoundTrip(t *testing.T) {
	for _, c := range []struct {
		after string
		tok   []byte
	}{{"a", nil}, {"a/b.c", []byte("first page")}, {"ü/\x7f", []byte{0, 1, '.', 255}}} {
		a, g, err := decodeToken(encodeToken(c.after, c.tok))
		if err != nil || a != c.after || !bytes.Equal(g, c.tok) {
			t.Errorf("token (%q, %q) came back as (%q, %q, %v)", c.after, c.tok, a, g, err)
		}
	}
}

// rangeStore is a gocloud driver that behaves like S3 or GCS where memblob
// and fileblob do not: a read at or past the end of an object is an error
// (HTTP 416), and Attributes has no ETag. Methods it does not override panic.
type rangeStore struct {
	driver.Bucket
	size int64
	mod  time.Time
	md5  []byte
}

var errRange = errors.New("InvalidRange: the requested range is not satisfiable")

func (s *rangeStore) NewRangeReader(ctx context.Context, key string, offset, length int64, opts *driver.ReaderOptions) (driver.Reader, error) {
	return nil, errRange
}

func (s *rangeStore) Attributes(ctx context.Context, key string) (*driver.Attributes, error) {
	if key != "k" {
		return nil, os.ErrNotExist
	}
	return &driver.Attributes{Size: s.size, ModTime: s.mod, MD5: s.md5}, nil
}

func (s *rangeStore) ErrorCode(err error) gcerrors.ErrorCode {
	if errors.Is(err, os.ErrNotExist) {
		return gcerrors.NotFound
	}
	return gcerrors.Unknown
}

func (s *rangeStore) As(any) bool  { return false }
func (s *rangeStore) Close() error { return nil }

func TestOffsetPastEndOnStoreError(t *testing.T) {
	ctx := context.Background()
	d := mustDriver(gcblob.NewBucket(&rangeStore{size: 10}), nil)
	defer d.Close()
	for _, off := range []int64{10, 11, 1 << 40} {
		r, err := d.NewRangeReader(ctx, "k", off, -1)
		if err != nil {
			t.Fatalf("offset %d: %v", off, err)
		}
		if got, err := io.ReadAll(r); len(got) != 0 || err != nil {
			t.Errorf("offset %d: read %q, %v", off, got, err)
		}
		r.Close()
	}
	// Inside the object the store's error stands.
	if _, err := d.NewRangeReader(ctx, "k", 5, -1); !errors.Is(err, errRange) {
		t.Errorf("offset inside the object: %v, want the store's error", err)
	}
	if _, err := d.NewRangeReader(ctx, "k", 0, -1); !errors.Is(err, errRange) {
		t.Errorf("offset 0: %v, want the store's error", err)
	}
	// A missing key is still missing.
	if _, err := d.NewRangeReader(ctx, "other", 20, -1); d.ErrorCode(err) != blob.CodeNotExist {
		t.Errorf("missing key past its end: %v", err)
	}
}

func TestSynthesizedETag(t *testing.T) {
	ctx := context.Background()
	mod := time.Unix(1700000000, 5)
	s := &rangeStore{size: 3, mod: mod}
	d := mustDriver(gcblob.NewBucket(s), nil)
	defer d.Close()
	a, err := d.Stat(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if a.ETag == "" || a.Size != 3 || !a.ModTime.Equal(mod) {
		t.Fatalf("stat %+v", a)
	}
	seen := map[string]bool{a.ETag: true}
	for _, change := range []func(){
		func() { s.mod = mod.Add(1) },
		func() { s.size = 4 },
		func() { s.md5 = []byte{1, 2, 3} },
		func() { s.md5 = []byte{1, 2, 4} },
	} {
		change()
		a, _ := d.Stat(ctx, "k")
		if seen[a.ETag] {
			t.Errorf("ETag %q repeats after a change", a.ETag)
		}
		seen[a.ETag] = true
	}
}
