//go:build unix

package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/testkit/backendtest"
)

// newBucket returns a bucket over a driver on a fresh root.
func newBucket(t *testing.T, opts *Options) (*blob.Bucket, *Driver) {
	t.Helper()
	d, err := NewDriver(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return backendtest.Bucket(t, d), d
}

func mustPut(t *testing.T, b *blob.Bucket, key string, data []byte) blob.Attrs {
	t.Helper()
	a, err := b.Put(context.Background(), key, data, nil)
	if err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
	return a
}

func mustRead(t *testing.T, b *blob.Bucket, key string) []byte {
	t.Helper()
	data, err := b.ReadAll(context.Background(), key)
	if err != nil {
		t.Fatalf("read %q: %v", key, err)
	}
	return data
}

func wantCode(t *testing.T, err error, code blob.Code, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %v", what, code)
	}
	if got := blob.CodeOf(err); got != code {
		t.Fatalf("%s: code %v, want %v (err: %v)", what, got, code, err)
	}
}

// tmpFiles lists the driver's temporary directory.
func tmpFiles(t *testing.T, root string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(root, internalName, "tmp"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		root string
		want string
		is   error
	}{
		{"", "empty root", blob.ErrInvalidArgument},
		{"rel/dir", `"rel/dir" is not an absolute path`, blob.ErrInvalidArgument},
		{filepath.Join(dir, "missing"), "missing", fs.ErrNotExist},
		{file, "is not a directory", blob.ErrInvalidArgument},
	} {
		_, err := NewDriver(tc.root, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, tc.is) {
			t.Errorf("NewDriver(%q) = %v, want an error containing %q matching %v", tc.root, err, tc.want, tc.is)
		}
	}
	nested := filepath.Join(dir, "a", "b", "c")
	d, err := NewDriver(nested, &Options{CreateDir: true})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if st, err := os.Stat(nested); err != nil || !st.IsDir() {
		t.Fatalf("CreateDir did not create %s: %v", nested, err)
	}
}

func TestOpenURL(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b, err := blob.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, b, "k", []byte("v"))
	b.Close()
	if data, err := os.ReadFile(filepath.Join(dir, "k")); err != nil || string(data) != "v" {
		t.Fatalf("file %s/k = %q, %v", dir, data, err)
	}
	created := filepath.Join(dir, "x", "y")
	b, err = blob.Open(ctx, "file://"+created+"?create_dir=true")
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	if _, err := os.Stat(created); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ url, want string }{
		{"file://" + dir + "?bogus=1", "bogus"},
		{"file://" + dir + "?create_dir=maybe", `create_dir="maybe"`},
		{"file:rel/dir", `"rel/dir" is relative`},
		{"file://host/dir", `host "host"`},
		{"file://", "empty path"},
		{"file://" + filepath.Join(dir, "nope"), "nope"},
	} {
		b, err := blob.Open(ctx, tc.url)
		if err == nil {
			b.Close()
			t.Errorf("Open(%q) succeeded", tc.url)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v, want it to mention %q", tc.url, err, tc.want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	b, d := newBucket(t, nil)
	r := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, 4097, 1<<20 + 3} {
		key := fmt.Sprintf("dir/sub/obj-%d", size)
		data := randBytes(r, size)
		a := mustPut(t, b, key, data)
		if a.Size != int64(size) || a.Key != key || a.ETag == "" || a.ModTime.IsZero() {
			t.Fatalf("put attrs %+v", a)
		}
		if got := mustRead(t, b, key); !bytes.Equal(got, data) {
			t.Fatalf("%s: read back %d bytes, differ", key, len(got))
		}
		st, err := b.Stat(ctx, key)
		if err != nil || st != a {
			t.Fatalf("stat %+v, %v; put returned %+v", st, err, a)
		}
		for _, rg := range [][2]int64{{0, 0}, {0, 1}, {1, 3}, {int64(size) - 1, -1}, {int64(size), -1}, {int64(size) + 10, 5}, {int64(size) / 2, int64(size)}} {
			if rg[0] < 0 {
				continue
			}
			got, err := b.ReadRange(ctx, key, rg[0], rg[1])
			if err != nil {
				t.Fatalf("%s range %v: %v", key, rg, err)
			}
			lo := min(rg[0], int64(size))
			hi := int64(size)
			if rg[1] >= 0 {
				hi = min(lo+rg[1], hi)
			}
			if !bytes.Equal(got, data[lo:hi]) {
				t.Fatalf("%s range %v: got %d bytes, want %d", key, rg, len(got), hi-lo)
			}
		}
	}
	// An unknown size reads to EOF.
	if _, err := b.PutReader(ctx, "unsized", strings.NewReader("abc"), -1, nil); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, b, "unsized"); string(got) != "abc" {
		t.Fatalf("unsized: %q", got)
	}
	// A reader shorter or longer than its size is refused, leaving nothing.
	for _, size := range []int64{2, 4} {
		_, err := b.PutReader(ctx, "badsize", strings.NewReader("abc"), size, nil)
		wantCode(t, err, blob.CodeInvalidArgument, fmt.Sprintf("put 3 bytes as %d", size))
		if _, err := b.Stat(ctx, "badsize"); !blob.IsNotExist(err) {
			t.Fatalf("after a bad size, stat: %v", err)
		}
	}
	if names := tmpFiles(t, d.Root()); len(names) != 0 {
		t.Fatalf("temporary files left: %v", names)
	}
}

func TestNotExist(t *testing.T) {
	ctx := context.Background()
	b, _ := newBucket(t, nil)
	mustPut(t, b, "a/b", []byte("x"))
	for _, key := range []string{"missing", "a", "a/b/c", "a/missing", "q/r/s"} {
		_, err := b.Stat(ctx, key)
		wantCode(t, err, blob.CodeNotExist, "stat "+key)
		if !strings.Contains(err.Error(), strconv.Quote(key)) {
			t.Errorf("stat %q: %v does not name the key", key, err)
		}
		_, err = b.NewReader(ctx, key)
		wantCode(t, err, blob.CodeNotExist, "read "+key)
		_, err = b.ReadRange(ctx, key, 0, 0)
		wantCode(t, err, blob.CodeNotExist, "read 0 bytes of "+key)
	}
}

func TestETags(t *testing.T) {
	ctx := context.Background()
	// NoSync makes the Puts quick, which is what makes ETag collisions likely.
	b, _ := newBucket(t, &Options{NoSync: true})
	seen := map[string]int{}
	data := []byte("same bytes every time")
	for i := range 200 {
		// Deleting first frees the inode, which the next Put may reuse at
		// once, with the same size and, on a coarse clock, the same time.
		if i%2 == 1 {
			if err := b.Delete(ctx, "k"); err != nil {
				t.Fatal(err)
			}
		}
		a := mustPut(t, b, "k", data)
		if j, dup := seen[a.ETag]; dup {
			t.Fatalf("put %d got the ETag %s of put %d", i, a.ETag, j)
		}
		seen[a.ETag] = i
		if strings.ContainsAny(a.ETag, `"' `) {
			t.Fatalf("ETag %q is not a bare token", a.ETag)
		}
		st, err := b.Stat(ctx, "k")
		if err != nil || st.ETag != a.ETag {
			t.Fatalf("stat ETag %q, %v; put said %q", st.ETag, err, a.ETag)
		}
	}
	page, err := b.ListPage(ctx, "", blob.ListOptions{})
	if err != nil || len(page.Objects) != 1 {
		t.Fatalf("list: %+v, %v", page, err)
	}
	if st, _ := b.Stat(ctx, "k"); page.Objects[0] != st {
		t.Fatalf("list attrs %+v, stat attrs %+v", page.Objects[0], st)
	}
}

func TestIfNotExist(t *testing.T) {
	ctx := context.Background()
	b, _ := newBucket(t, nil)
	first, err := b.Put(ctx, "once", []byte("first"), &blob.PutOptions{IfNotExist: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Put(ctx, "once", []byte("second"), &blob.PutOptions{IfNotExist: true})
	wantCode(t, err, blob.CodePreconditionFailed, "second create")
	if got := mustRead(t, b, "once"); string(got) != "first" {
		t.Fatalf("after a lost create: %q", got)
	}
	if st, _ := b.Stat(ctx, "once"); st.ETag != first.ETag {
		t.Fatal("a lost create changed the ETag")
	}
	// Racing goroutines: exactly one winner per key.
	for round := range 10 {
		key := fmt.Sprintf("race/%d", round)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var winners []int
		for g := range 16 {
			wg.Go(func() {
				_, err := b.Put(ctx, key, []byte(strconv.Itoa(g)), &blob.PutOptions{IfNotExist: true})
				switch {
				case err == nil:
					mu.Lock()
					winners = append(winners, g)
					mu.Unlock()
				case !blob.IsPreconditionFailed(err):
					t.Errorf("racer %d: %v", g, err)
				}
			})
		}
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("%s: winners %v, want exactly one", key, winners)
		}
		if got := mustRead(t, b, key); string(got) != strconv.Itoa(winners[0]) {
			t.Fatalf("%s holds %q, the winner was %d", key, got, winners[0])
		}
	}
}

func TestIfMatch(t *testing.T) {
	ctx := context.Background()
	b, d := newBucket(t, nil)
	a1 := mustPut(t, b, "m", []byte("1"))
	a2, err := b.Put(ctx, "m", []byte("2"), &blob.PutOptions{IfMatch: a1.ETag})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Put(ctx, "m", []byte("3"), &blob.PutOptions{IfMatch: a1.ETag})
	wantCode(t, err, blob.CodePreconditionFailed, "put with a stale ETag")
	if got := mustRead(t, b, "m"); string(got) != "2" {
		t.Fatalf("after a lost swap: %q", got)
	}
	_, err = b.Put(ctx, "missing", []byte("x"), &blob.PutOptions{IfMatch: a2.ETag})
	wantCode(t, err, blob.CodePreconditionFailed, "put IfMatch on a missing key")
	if _, err := b.Stat(ctx, "missing"); !blob.IsNotExist(err) {
		t.Fatalf("a lost IfMatch created the key: %v", err)
	}
	_, err = b.Put(ctx, "no/such/dir", []byte("x"), &blob.PutOptions{IfMatch: a2.ETag})
	wantCode(t, err, blob.CodePreconditionFailed, "put IfMatch under a missing directory")
	if _, err := os.Stat(filepath.Join(d.Root(), "no")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a lost IfMatch created directories: %v", err)
	}
	// Compare-and-swap increments from racing goroutines are all counted.
	mustPut(t, b, "counter", []byte("0"))
	const workers, incs = 8, 20
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range incs {
				if err := increment(ctx, b, "counter"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := mustRead(t, b, "counter"); string(got) != strconv.Itoa(workers*incs) {
		t.Fatalf("counter = %s, want %d", got, workers*incs)
	}
}

// increment adds one to the decimal counter at key by compare-and-swap.
func increment(ctx context.Context, b *blob.Bucket, key string) error {
	for {
		st, err := b.Stat(ctx, key)
		if err != nil {
			return err
		}
		data, err := b.ReadAll(ctx, key)
		if err != nil {
			if blob.IsNotExist(err) {
				continue
			}
			return err
		}
		// The read may see a newer object than the stat: then the swap
		// below fails and the loop starts over.
		n, err := strconv.Atoi(string(data))
		if err != nil {
			return fmt.Errorf("counter holds %q", data)
		}
		_, err = b.Put(ctx, key, []byte(strconv.Itoa(n+1)), &blob.PutOptions{IfMatch: st.ETag})
		if err == nil {
			return nil
		}
		if !blob.IsPreconditionFailed(err) {
			return err
		}
	}
}

func TestConflicts(t *testing.T) {
	ctx := context.Background()
	b, d := newBucket(t, nil)
	mustPut(t, b, "a", []byte("object a"))
	for _, opts := range []*blob.PutOptions{nil, {IfNotExist: true}} {
		_, err := b.Put(ctx, "a/b", []byte("x"), opts)
		wantCode(t, err, blob.CodeInvalidArgument, "put a/b over object a")
		if msg := err.Error(); !strings.Contains(msg, `"a/b"`) || !strings.Contains(msg, `object "a"`) {
			t.Fatalf("the conflict error %q does not name both keys", msg)
		}
	}
	_, err := b.OpenAppend(ctx, "a/c")
	wantCode(t, err, blob.CodeInvalidArgument, "append a/c under object a")
	if got := mustRead(t, b, "a"); string(got) != "object a" {
		t.Fatalf("a conflict changed a: %q", got)
	}

	mustPut(t, b, "x/y/z", []byte("deep"))
	for _, opts := range []*blob.PutOptions{nil, {IfNotExist: true}} {
		_, err := b.Put(ctx, "x", []byte("x"), opts)
		wantCode(t, err, blob.CodeInvalidArgument, "put x over keys x/...")
		if msg := err.Error(); !strings.Contains(msg, `"x"`) || !strings.Contains(msg, `"x/y/z"`) {
			t.Fatalf("the conflict error %q does not name both keys", msg)
		}
	}
	_, err = b.OpenAppend(ctx, "x/y")
	wantCode(t, err, blob.CodeInvalidArgument, "append x/y over keys x/y/...")
	if got := mustRead(t, b, "x/y/z"); string(got) != "deep" {
		t.Fatalf("a conflict changed x/y/z: %q", got)
	}

	// Empty directories (a prune that lost a race) give way to an object;
	// a directory of empty directories is reported, not removed.
	if err := os.MkdirAll(filepath.Join(d.Root(), "e", "f"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = b.Put(ctx, "e", []byte("e"), nil)
	wantCode(t, err, blob.CodeInvalidArgument, "put e over e/f/")
	if !strings.Contains(err.Error(), "only empty directories") {
		t.Fatalf("error %q does not explain the empty directories", err)
	}
	mustPut(t, b, "e/f", []byte("f"))
	if _, err := b.Put(ctx, "g", nil, &blob.PutOptions{IfNotExist: true}); err != nil {
		t.Fatal(err)
	}
}

func TestReservedNames(t *testing.T) {
	ctx := context.Background()
	b, _ := newBucket(t, nil)
	mustPut(t, b, "obj", []byte("x")) // creates the internal directories
	for _, key := range []string{".redokit", ".redokit/tmp/x", ".redokit/lock/00"} {
		_, err := b.Put(ctx, key, []byte("x"), nil)
		if !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("put %q: %v, want ErrInvalidKey", key, err)
		}
		_, err = b.Stat(ctx, key)
		wantCode(t, err, blob.CodeInvalidArgument, "stat "+key)
		if err := b.Delete(ctx, key); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("delete %q: %v, want ErrInvalidKey", key, err)
		}
	}
	// Only the root entry is reserved.
	mustPut(t, b, ".redokitx", []byte("x"))
	mustPut(t, b, "p/.redokit", []byte("x"))
	mustPut(t, b, ".hidden", []byte("x"))
	for prefix, want := range map[string][]string{
		"":           {".hidden", ".redokitx", "obj", "p/.redokit"},
		".redo":      {".redokitx"},
		".redokit/":  nil,
		".redokit/t": nil,
	} {
		if got := listKeys(t, b, prefix, 0); !equal(got, want) {
			t.Errorf("list %q = %q, want %q", prefix, got, want)
		}
	}
}

func TestSymlinksAreNeverFollowed(t *testing.T) {
	ctx := context.Background()
	b, d := newBucket(t, nil)
	root := d.Root()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustPut(t, b, "real/obj", []byte("x"))
	for link, target := range map[string]string{
		"link":     outside,
		"flink":    filepath.Join(outside, "secret"),
		"real/ln":  outside,
		"real/fln": filepath.Join(outside, "secret"),
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range []string{"link/secret", "real/ln/secret", "flink", "real/fln"} {
		_, err := b.Stat(ctx, key)
		wantCode(t, err, blob.CodeInvalidArgument, "stat "+key)
		if !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("stat %q: %v does not say why", key, err)
		}
		_, err = b.ReadAll(ctx, key)
		wantCode(t, err, blob.CodeInvalidArgument, "read "+key)
	}
	for _, key := range []string{"link/new", "real/ln/new", "link/deep/new"} {
		for _, opts := range []*blob.PutOptions{nil, {IfNotExist: true}} {
			_, err := b.Put(ctx, key, []byte("escaped"), opts)
			wantCode(t, err, blob.CodeInvalidArgument, "put "+key)
		}
		_, err := b.OpenAppend(ctx, key)
		wantCode(t, err, blob.CodeInvalidArgument, "append "+key)
	}
	err := b.Delete(ctx, "link/secret", "real/ln/secret")
	wantCode(t, err, blob.CodeInvalidArgument, "delete through links")
	if !strings.Contains(err.Error(), `"link/secret"`) || !strings.Contains(err.Error(), `"real/ln/secret"`) {
		t.Errorf("delete error %q does not name the keys", err)
	}
	af, err := b.OpenAppend(ctx, "seg")
	if err != nil {
		t.Fatal(err)
	}
	_, err = af.Seal(ctx, "link/sealed")
	wantCode(t, err, blob.CodeInvalidArgument, "seal through a link")
	af.Close()
	// Links are listed as what they are (see TestListShowsStrangers), and
	// a listing never goes through one: it fails, naming the link.
	if got, want := listKeys(t, b, "", 0), []string{"flink", "link", "real/fln", "real/ln", "real/obj", "seg"}; !equal(got, want) {
		t.Errorf("list = %q, want %q", got, want)
	}
	for _, prefix := range []string{"link/", "real/ln/", "link/secret"} {
		if _, err := b.ListPage(ctx, prefix, blob.ListOptions{}); !strings.Contains(fmt.Sprint(err), "symbolic link") {
			t.Errorf("list %q through a link: %v", prefix, err)
		}
	}
	// A link as the final component is replaced, not followed.
	mustPut(t, b, "flink", []byte("replaced"))
	if err := b.Delete(ctx, "real/fln"); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(outside)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "secret" {
		t.Fatalf("outside the root: %v", ents)
	}
	if data, _ := os.ReadFile(filepath.Join(outside, "secret")); string(data) != "secret" {
		t.Fatalf("the file outside the root was changed: %q", data)
	}

	// A link in place of the internal directory is not followed either.
	root2 := t.TempDir()
	outside2 := t.TempDir()
	if err := os.Symlink(outside2, filepath.Join(root2, internalName)); err != nil {
		t.Fatal(err)
	}
	b2, err := New(root2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	_, err = b2.Put(ctx, "k", []byte("x"), nil)
	wantCode(t, err, blob.CodeInvalidArgument, "put with a linked internal directory")
	if ents, _ := os.ReadDir(outside2); len(ents) != 0 {
		t.Fatalf("the driver wrote through the link: %v", ents)
	}
}

// chunkReader yields its data in chunks and calls after once the first chunk
// has been read.
type chunkReader struct {
	data  []byte
	chunk int
	after func()
	reads int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	if r.reads == 1 && r.after != nil {
		r.after()
	}
	r.reads++
	n := copy(p[:min(len(p), r.chunk)], r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestCanceledPut(t *testing.T) {
	b, d := newBucket(t, nil)
	mustPut(t, b, "old", []byte("old content"))
	for _, key := range []string{"new", "old"} {
		ctx, cancel := context.WithCancel(context.Background())
		r := &chunkReader{data: make([]byte, 1<<20), chunk: 4096, after: cancel}
		_, err := b.PutReader(ctx, key, r, 1<<20, nil)
		cancel()
		if !errors.Is(err, context.Canceled) || blob.CodeOf(err) != blob.CodeCanceled {
			t.Fatalf("canceled put of %s: %v", key, err)
		}
	}
	if _, err := b.Stat(context.Background(), "new"); !blob.IsNotExist(err) {
		t.Fatalf("a canceled put left an object: %v", err)
	}
	if got := mustRead(t, b, "old"); string(got) != "old content" {
		t.Fatalf("a canceled put changed the old object: %q", got)
	}
	ctx, cancel := context.WithDeadline(context.Background(), unixEpoch)
	defer cancel()
	_, err := b.Put(ctx, "late", []byte("x"), nil)
	if blob.CodeOf(err) != blob.CodeDeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("put after the deadline: %v", err)
	}
	for _, op := range []func() error{
		func() error { _, err := b.Stat(ctx, "old"); return err },
		func() error { _, err := b.ReadAll(ctx, "old"); return err },
		func() error { _, err := b.ListPage(ctx, "", blob.ListOptions{}); return err },
		func() error { return b.Delete(ctx, "old") },
		func() error { _, err := b.OpenAppend(ctx, "app"); return err },
	} {
		if err := op(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("an operation after the deadline: %v", err)
		}
	}
	if names := tmpFiles(t, d.Root()); len(names) != 0 {
		t.Fatalf("temporary files left: %v", names)
	}
}

func TestClose(t *testing.T) {
	ctx := context.Background()
	b, d := newBucket(t, nil)
	mustPut(t, b, "k", []byte("x"))
	af, err := b.OpenAppend(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	for name, op := range map[string]func() error{
		"put":    func() error { _, err := d.Put(ctx, "k", strings.NewReader("y"), 1, blob.PutOptions{}); return err },
		"read":   func() error { _, err := d.NewRangeReader(ctx, "k", 0, -1); return err },
		"stat":   func() error { _, err := d.Stat(ctx, "k"); return err },
		"list":   func() error { _, err := d.List(ctx, blob.ListOptions{}); return err },
		"delete": func() error { return d.Delete(ctx, []string{"k"}) },
		"append": func() error { _, err := d.OpenAppend(ctx, "k2"); return err },
		"write":  func() error { _, err := af.Write([]byte("x")); return err },
		"sync":   af.Sync,
		"seal":   func() error { _, err := af.Seal(ctx, "sealed"); return err },
	} {
		if err := op(); !errors.Is(err, blob.ErrClosed) {
			t.Errorf("%s after close: %v, want ErrClosed", name, err)
		}
	}
	if err := af.Close(); err != nil {
		t.Errorf("closing an append file after the driver: %v", err)
	}
}

func TestErrorCode(t *testing.T) {
	d := &Driver{}
	for _, tc := range []struct {
		err  error
		want blob.Code
	}{
		{fs.ErrNotExist, blob.CodeNotExist},
		{&os.PathError{Op: "open", Path: "x", Err: unix.ENOENT}, blob.CodeNotExist},
		{unix.ENOTDIR, blob.CodeNotExist},
		{notExist("k"), blob.CodeNotExist},
		{unix.EEXIST, blob.CodePreconditionFailed},
		{preconditionf("x"), blob.CodePreconditionFailed},
		{&os.PathError{Op: "open", Path: "x", Err: unix.EACCES}, blob.CodePermissionDenied},
		{unix.EPERM, blob.CodePermissionDenied},
		{unix.EROFS, blob.CodePermissionDenied},
		{fmt.Errorf("wrapped: %w", context.Canceled), blob.CodeCanceled},
		{context.DeadlineExceeded, blob.CodeDeadlineExceeded},
		{unix.ENAMETOOLONG, blob.CodeInvalidArgument},
		{symlinkError("l"), blob.CodeInvalidArgument},
		{conflictError("a/b", `object "a"`), blob.CodeInvalidArgument},
		{checkKey(".redokit/x"), blob.CodeInvalidArgument},
		{checkKey("a/../b"), blob.CodeInvalidArgument},
		{errors.New("other"), blob.CodeUnknown},
	} {
		if got := d.ErrorCode(tc.err); got != tc.want {
			t.Errorf("ErrorCode(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if !errors.Is(notExist("k"), fs.ErrNotExist) || !errors.Is(notExist("k"), blob.ErrNotExist) {
		t.Error("notExist does not match the not-exist sentinels")
	}
}

func TestLongSegment(t *testing.T) {
	b, _ := newBucket(t, nil)
	key := "d/" + strings.Repeat("s", 300)
	_, err := b.Put(context.Background(), key, []byte("x"), nil)
	wantCode(t, err, blob.CodeInvalidArgument, "put a 300-byte segment")
}

func TestPermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores permissions")
	}
	ctx := context.Background()
	b, d := newBucket(t, nil)
	mustPut(t, b, "ro/k", []byte("x"))
	ro := filepath.Join(d.Root(), "ro")
	if err := os.Chmod(ro, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(ro, 0o755)
	_, err := b.Put(ctx, "ro/new", []byte("x"), nil)
	wantCode(t, err, blob.CodePermissionDenied, "put into a read-only directory")
}

func TestSweepsOrphanedTempFiles(t *testing.T) {
	ctx := context.Background()
	b, d := newBucket(t, nil)
	mustPut(t, b, "k", []byte("x"))
	tmp := filepath.Join(d.Root(), internalName, "tmp")
	for _, name := range []string{"orphan.tmp", "live.tmp", "notmine"} {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte("junk"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A live writer holds the flock of its temporary file.
	live, err := os.Open(filepath.Join(tmp, "live.tmp"))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := unix.Flock(int(live.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	b2, err := New(d.Root(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	mustPut(t, b2, "k2", []byte("y"))
	got := tmpFiles(t, d.Root())
	if !equal(got, []string{"live.tmp", "notmine"}) {
		t.Fatalf("after the sweep, tmp holds %v; want live.tmp and notmine", got)
	}
	if keys := listKeys(t, b2, "", 0); !equal(keys, []string{"k", "k2"}) {
		t.Fatalf("list = %v", keys)
	}
	_ = ctx
}

func TestDeletePrunes(t *testing.T) {
	ctx := context.Background()
	b, d := newBucket(t, nil)
	root := d.Root()
	for _, k := range []string{"a/b/c/d", "a/b/e", "f"} {
		mustPut(t, b, k, []byte(k))
	}
	if err := b.Delete(ctx, "a/b/c/d"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "a/b/c")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a/b/c was not pruned: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "a/b/e")); err != nil {
		t.Fatal(err)
	}
	// Missing keys, keys under an object, and directories are not errors.
	if err := b.Delete(ctx, "a/b/e", "missing", "a/zz/q", "f/under", "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a was not pruned: %v", err)
	}
	if err := b.Delete(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); err != nil {
		t.Fatalf("the root went: %v", err)
	}
	if keys := listKeys(t, b, "", 0); len(keys) != 0 {
		t.Fatalf("left: %v", keys)
	}
	mustPut(t, b, "a/b/c/d", []byte("again"))
	// Many keys over several directories in one call, in no particular
	// order (without syncs, for speed: creating files is slow enough).
	b, _ = newBucket(t, &Options{NoSync: true})
	var keys []string
	for i := range 300 {
		keys = append(keys, fmt.Sprintf("many/%02d/%04d", i%7, i))
		mustPut(t, b, keys[i], nil)
	}
	if err := b.Delete(ctx, keys...); err != nil {
		t.Fatal(err)
	}
	if got := listKeys(t, b, "many/", 0); len(got) != 0 {
		t.Fatalf("left %d keys", len(got))
	}
}

// TestPutRacesPrune has Puts create keys in a directory that Deletes of its
// other keys keep pruning: a Put whose directory vanishes must retry, not
// fail.
func TestPutRacesPrune(t *testing.T) {
	ctx := context.Background()
	b, _ := newBucket(t, nil)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			key := fmt.Sprintf("d/e/%d", g)
			for i := range 100 {
				if _, err := b.Put(ctx, key, []byte("x"), &blob.PutOptions{IfNotExist: i%2 == 0}); err != nil {
					t.Errorf("put %s: %v", key, err)
					return
				}
				if err := b.Delete(ctx, key); err != nil {
					t.Errorf("delete %s: %v", key, err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 100 {
			af, err := b.OpenAppend(ctx, "d/e/app")
			if err != nil {
				t.Errorf("append: %v", err)
				return
			}
			af.Write([]byte("x"))
			if _, err := af.Seal(ctx, "d/f/sealed"); err != nil {
				t.Errorf("seal: %v", err)
				return
			}
			if err := b.Delete(ctx, "d/f/sealed"); err != nil {
				t.Errorf("delete: %v", err)
				return
			}
		}
	})
	wg.Wait()
}

// unixEpoch is a deadline long past.
var unixEpoch = time.Unix(1, 0)

func listKeys(t *testing.T, b *blob.Bucket, prefix string, pageSize int) []string {
	t.Helper()
	var keys []string
	opts := blob.ListOptions{PageSize: pageSize}
	for {
		page, err := b.ListPage(context.Background(), prefix, opts)
		if err != nil {
			t.Fatalf("list %q: %v", prefix, err)
		}
		for _, a := range page.Objects {
			keys = append(keys, a.Key)
		}
		if page.NextToken == "" {
			return keys
		}
		if len(page.Objects) == 0 {
			t.Fatalf("list %q: an empty page with a token", prefix)
		}
		opts = blob.ListOptions{PageSize: pageSize, Token: page.NextToken}
	}
}

func equal(a, b []string) bool {
	return len(a) == len(b) && (len(a) == 0 || strings.Join(a, "\x00") == strings.Join(b, "\x00"))
}

// TestLockWaitHonoursContext: a Put waiting for a stripe lock that another
// process holds gives up when its context ends, and the lock it would have
// taken is released for later writers.
func TestLockWaitHonoursContext(t *testing.T) {
	root := t.TempDir()
	d, err := NewDriver(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := blob.NewBucket(d)
	defer b.Close()
	mustPut(t, b, "warm", nil) // creates the lock directory
	// Another open file description of the key's stripe file stands for
	// another process.
	name := filepath.Join(root, internalName, "lock", fmt.Sprintf("%02x", stripeOf("k")))
	f, err := os.OpenFile(name, os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waited := false
	d.hook = func(op, path string) error {
		if op == "lock-wait" {
			waited = true
			cancel() // the Put is about to block: end its context now
		}
		return nil
	}
	_, err = b.Put(ctx, "k", []byte("x"), nil)
	if !waited || !errors.Is(err, context.Canceled) {
		t.Fatalf("put behind a held lock: waited %v, err %v", waited, err)
	}
	if _, err := b.Stat(context.Background(), "k"); !blob.IsNotExist(err) {
		t.Fatalf("the abandoned put wrote: %v", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	// The abandoned waiter takes the lock and gives it back; then this Put
	// gets it (it would block forever if the stripe leaked).
	d.hook = nil
	mustPut(t, b, "k", []byte("y"))
}

func TestPermissions(t *testing.T) {
	b, d := newBucket(t, &Options{FilePerm: 0o600, DirPerm: 0o700})
	mustPut(t, b, "dir/k", []byte("x"))
	af, err := b.OpenAppend(context.Background(), "dir/app")
	if err != nil {
		t.Fatal(err)
	}
	af.Close()
	for p, want := range map[string]fs.FileMode{"dir": 0o700, "dir/k": 0o600, "dir/app": 0o600} {
		st, err := os.Stat(filepath.Join(d.Root(), p))
		if err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, %v; want %v", p, st.Mode().Perm(), err, want)
		}
	}
}
