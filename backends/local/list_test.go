//go:build unix

package local

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/redokit/redokit/blob"
)

func TestListByteOrder(t *testing.T) {
	b, _ := newBucket(t, nil)
	keys := []string{
		"a-b", "a.b", "a/b", "a/b-c", "a/b.c", "a/b0", "a/c/d", "a0", "ab", "b",
		"A", " sp", "z~", "é/x", "日本/語", "\u00ff", "a/b\u00e9",
	}
	for _, k := range keys {
		mustPut(t, b, k, []byte(k))
	}
	want := slices.Clone(keys)
	slices.Sort(want) // byte order
	for size := 1; size <= len(keys)+1; size++ {
		if got := listKeys(t, b, "", size); !equal(got, want) {
			t.Fatalf("page size %d: %q\nwant %q", size, got, want)
		}
	}
	// The walk order is not byte order: "a-b" < "a.b" < "a/…" by bytes.
	if i, j := slices.Index(want, "a-b"), slices.Index(want, "a/b"); i > j {
		t.Fatal("the test keys do not exercise '-' < '/'")
	}
}

// TestListModel compares listings of random keys, prefixes, start points and
// page sizes with a sorted slice.
func TestListModel(t *testing.T) {
	ctx := context.Background()
	b, _ := newBucket(t, nil)
	r := rand.New(rand.NewPCG(7, 11))
	segs := []string{"a", "b", "a-", "a.", "-", "é", "0", "ab", "a0"}
	var keys []string
	conflicts := func(k string) bool {
		for _, e := range keys {
			if e == k || strings.HasPrefix(e, k+"/") || strings.HasPrefix(k, e+"/") {
				return true
			}
		}
		return false
	}
	for len(keys) < 80 {
		n := 1 + r.IntN(3)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = segs[r.IntN(len(segs))]
		}
		k := strings.Join(parts, "/")
		if conflicts(k) {
			continue
		}
		keys = append(keys, k)
		mustPut(t, b, k, nil)
	}
	slices.Sort(keys)
	model := func(prefix, after string) []string {
		var out []string
		for _, k := range keys {
			if strings.HasPrefix(k, prefix) && k > after {
				out = append(out, k)
			}
		}
		return out
	}
	randPrefix := func() string {
		switch r.IntN(4) {
		case 0:
			return ""
		case 1:
			k := keys[r.IntN(len(keys))]
			return k[:r.IntN(len(k)+1)]
		case 2:
			return keys[r.IntN(len(keys))] + "/"
		}
		return segs[r.IntN(len(segs))] + "/" + segs[r.IntN(len(segs))][:1]
	}
	for range 300 {
		prefix := randPrefix()
		after := ""
		if r.IntN(2) == 0 {
			after = randPrefix()
		}
		size := 1 + r.IntN(7)
		want := model(prefix, after)
		var got []string
		opts := blob.ListOptions{StartAfter: after, PageSize: size}
		for pages := 0; ; pages++ {
			page, err := b.ListPage(ctx, prefix, opts)
			if err != nil {
				t.Fatal(err)
			}
			if pages == 0 {
				// The first page is exactly the first size keys, and says
				// whether more exist.
				n := min(size, len(want))
				if !equal(keysOf(page.Objects), want[:n]) || (page.NextToken != "") != (len(want) > size) {
					t.Fatalf("list %q after %q size %d: first page %q token %q; want %q of %d", prefix, after, size, keysOf(page.Objects), page.NextToken, want[:n], len(want))
				}
			}
			got = append(got, keysOf(page.Objects)...)
			if page.NextToken == "" {
				break
			}
			opts = blob.ListOptions{Token: page.NextToken, PageSize: size}
		}
		if !equal(got, want) {
			t.Fatalf("list %q after %q size %d:\n got %q\nwant %q", prefix, after, size, got, want)
		}
	}
}

func keysOf(as []blob.Attrs) []string {
	var ks []string
	for _, a := range as {
		ks = append(ks, a.Key)
	}
	return ks
}

// TestListAfterChanges: inserts and deletes inside a page already returned
// do not disturb the next one.
func TestListAfterChanges(t *testing.T) {
	ctx := context.Background()
	b, _ := newBucket(t, nil)
	for _, k := range []string{"k/0", "k/1", "k/2", "k/3", "k/4", "k/5"} {
		mustPut(t, b, k, nil)
	}
	page, err := b.ListPage(ctx, "k/", blob.ListOptions{PageSize: 3})
	if err != nil || page.NextToken != "k/2" {
		t.Fatalf("first page %+v, %v", page, err)
	}
	if err := b.Delete(ctx, "k/1", "k/2"); err != nil {
		t.Fatal(err)
	}
	mustPut(t, b, "k/0a", nil)
	mustPut(t, b, "k/3a", nil)
	page, err = b.ListPage(ctx, "k/", blob.ListOptions{PageSize: 3, Token: page.NextToken})
	if err != nil || !equal(keysOf(page.Objects), []string{"k/3", "k/3a", "k/4"}) || page.NextToken != "k/4" {
		t.Fatalf("second page %q token %q, %v", keysOf(page.Objects), page.NextToken, err)
	}
}

// TestListShowsStrangers is the name part of finding 4 of issue 12: an entry
// that no key can address (a name damaged into invalid UTF-8 or a control
// character, a path longer than any key) or that is not a regular file (a
// link, a FIFO, a linked directory) was left out of listings, so the loss of
// what it held went unseen. Every one is listed now, and reading one fails
// with an error naming it.
func TestListShowsStrangers(t *testing.T) {
	ctx := context.Background()
	b, d := newBucket(t, nil)
	root := d.Root()
	mustPut(t, b, "dir/obj", []byte("x"))
	mk := func(path string) string {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, name := range []string{"dir/bad\xffutf8", "dir/ctl\x01", "dir/bd\xfe/f"} {
		if err := os.WriteFile(mk(name), []byte("stranger"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mkfifo(mk("dir/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("obj", mk("dir/link")); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	if err := os.WriteFile(filepath.Join(elsewhere, "behind"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, mk("dir/seglink")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(mk("dir/empty/deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A path longer than any key.
	long := strings.Join([]string{"dir", strings.Repeat("l", 250), strings.Repeat("l", 250), strings.Repeat("l", 250), strings.Repeat("l", 250), "l"}, "/")
	if err := os.WriteFile(mk(long), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{"dir/bad\xffutf8", "dir/bd\xfe/f", "dir/ctl\x01", "dir/fifo", "dir/link", long, "dir/obj", "dir/seglink"}
	for _, size := range []int{0, 1, 3} {
		if got := listKeys(t, b, "", size); !equal(got, want) {
			t.Fatalf("list in pages of %d = %q\nwant %q", size, got, want)
		}
	}
	// Through a prefixed view, and under a prefix that is no valid key.
	view, err := b.Prefixed("dir/")
	if err != nil {
		t.Fatal(err)
	}
	if got := listKeys(t, view, "b", 0); !equal(got, []string{"bad\xffutf8", "bd\xfe/f"}) {
		t.Errorf("prefixed list = %q", got)
	}
	if got := listKeys(t, b, "dir/bd\xfe/", 0); !equal(got, []string{"dir/bd\xfe/f"}) {
		t.Errorf("list under an invalid directory name = %q", got)
	}
	// A link is described, not followed: its own size, the length of its
	// target's name.
	for a, err := range b.List(ctx, "dir/link") {
		if err != nil || a.Size != int64(len("obj")) {
			t.Errorf("list of the link: %+v, %v", a, err)
		}
	}
	// A listing through the linked directory is an error naming the link,
	// not an empty listing that would hide what it points to.
	if _, err := b.ListPage(ctx, "dir/seglink/", blob.ListOptions{}); !strings.Contains(fmt.Sprint(err), `"dir/seglink" is a symbolic link`) {
		t.Errorf("list through a linked directory: %v", err)
	}
	// Keys that are not valid keys cannot be read or deleted, and the error
	// names them.
	for _, key := range []string{"dir/bad\xffutf8", "dir/ctl\x01"} {
		_, err := b.ReadAll(ctx, key)
		if !errors.Is(err, blob.ErrInvalidKey) || !strings.Contains(err.Error(), strconv.Quote(key)) {
			t.Errorf("read %q: %v", key, err)
		}
		err = b.Delete(ctx, key)
		if !errors.Is(err, blob.ErrInvalidKey) || !strings.Contains(err.Error(), strconv.Quote(key)) {
			t.Errorf("delete %q: %v", key, err)
		}
	}
	// A FIFO is listed but is no object: reading it fails, naming it,
	// without blocking, and not as a missing key (a reader could take that
	// for a deletion).
	_, err = b.ReadAll(ctx, "dir/fifo")
	wantCode(t, err, blob.CodeInvalidArgument, "read a fifo")
	if !strings.Contains(err.Error(), `"dir/fifo" is not a regular file`) {
		t.Errorf("read a fifo: %v", err)
	}
	_, err = b.Stat(ctx, "dir/fifo")
	wantCode(t, err, blob.CodeInvalidArgument, "stat a fifo")
	_, err = b.ReadAll(ctx, "dir/link")
	wantCode(t, err, blob.CodeInvalidArgument, "read a link")
}
