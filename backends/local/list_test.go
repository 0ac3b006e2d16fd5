//go:build unix

package local

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
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

func TestListSkipsStrangers(t *testing.T) {
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
	if err := os.WriteFile(mk("dir/bad\xffutf8"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mk("dir/ctl\x01"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(mk("dir/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("obj", mk("dir/link")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(mk("dir/empty/deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A path longer than any key.
	long := strings.Repeat("l", 250)
	if err := os.WriteFile(mk(strings.Join([]string{"dir", long, long, long, long, long}, "/")), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := listKeys(t, b, "", 0); !equal(got, []string{"dir/obj"}) {
		t.Fatalf("list = %q", got)
	}
	// A FIFO is no object, and reading it does not block.
	_, err := b.ReadAll(context.Background(), "dir/fifo")
	wantCode(t, err, blob.CodeNotExist, "read a fifo")
}
