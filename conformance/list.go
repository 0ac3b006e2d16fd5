package conformance

import (
	"fmt"
	"slices"
	"strings"

	"github.com/redokit/redokit/blob"
)

// orderKeys sort differently by bytes than by a file-system walk that lists
// each directory's names in order and descends into subdirectories in place:
// such a walk puts "order/a/b" before "order/a b" and "order/a-b", because
// the directory "a" sorts before "a b" and "a-b" as a name. Bytes put
// " " (0x20) < "!" < "-" < "." < "/" (0x2f) < "0" < "B" < "a" < "~" < any
// multi-byte UTF-8. None is a "directory" of another.
var orderKeys = []string{
	"order/a b", "order/a!b", "order/a-b", "order/a.b",
	"order/a/b", "order/a/b-c", "order/a/c-d", "order/a/c/d", "order/a/c0",
	"order/a0", "order/aB", "order/a~",
	"order/B", "order/Z", "order/z", "order/~", "order/é", "order/日本", "order/😀",
}

// putShuffled puts keys (each holding its own name) in an order unrelated to
// their sort order, so that a driver cannot pass by listing in insertion order.
func putShuffled(t T, b *blob.Bucket, keys []string) {
	t.Helper()
	n := len(keys)
	for i := range n {
		k := keys[(i*7+3)%n]
		if n%7 == 0 {
			k = keys[n-1-i]
		}
		put(t, b, k, []byte(k))
	}
}

// listPaged lists prefix through ListPage with pages of size, starting after
// startAfter, checking each page's length and that the listing ends. It
// returns every key it saw, in order, and an error describing the first
// violation.
func listPaged(t T, b *blob.Bucket, prefix, startAfter string, size, limit int) ([]string, error) {
	t.Helper()
	var keys []string
	opts := blob.ListOptions{StartAfter: startAfter, PageSize: size}
	for pages := 1; ; pages++ {
		page, err := b.ListPage(t.Context(), prefix, opts)
		if err != nil {
			return keys, fmt.Errorf("ListPage(%q, page %d of size %d): %w", prefix, pages, size, err)
		}
		if len(page.Objects) > size {
			return keys, fmt.Errorf("ListPage(%q, size %d) returned a page of %d objects", prefix, size, len(page.Objects))
		}
		for _, a := range page.Objects {
			if !strings.HasPrefix(a.Key, prefix) {
				return keys, fmt.Errorf("ListPage(%q, size %d) returned %q, which is outside the prefix (after %s)", prefix, size, a.Key, quoteKeys(keys, 5))
			}
			keys = append(keys, a.Key)
		}
		if page.NextToken == "" {
			return keys, nil
		}
		if pages > limit {
			return keys, fmt.Errorf("ListPage(%q, size %d) had not ended after %d pages", prefix, size, pages)
		}
		opts = blob.ListOptions{Token: page.NextToken, PageSize: size}
	}
}

// listOrder: List is in byte order, within and across pages.
func (s *suite) listOrder(t T) {
	e := s.bucket(t)
	putShuffled(t, e.b, orderKeys)
	want := sortedCopy(orderKeys)
	s.settle(t, e.b, "", want, "listing keys that sort differently by bytes and by file-system walk")
	for _, size := range []int{1, 2, 3, 1000} {
		got, err := listPaged(t, e.b, "", "", size, 2*len(want)+4)
		if err != nil {
			t.Errorf("%v", err)
		} else if !slices.Equal(got, want) {
			t.Errorf("listing in pages of %d: %s", size, diffKeys(got, want))
		}
	}
	// Attrs in a listing describe the object.
	for a, err := range e.b.List(t.Context(), "order/a/") {
		if err != nil {
			t.Fatalf("List(%q): %v", "order/a/", err)
		}
		if a.Size != int64(len(a.Key)) {
			t.Errorf("List: object %q has Size %d, want %d", a.Key, a.Size, len(a.Key))
		}
	}
}

// listPrefix: a prefix is a string, not a directory.
func (s *suite) listPrefix(t T) {
	e := s.bucket(t)
	putShuffled(t, e.b, orderKeys)
	s.settle(t, e.b, "", sortedCopy(orderKeys), "before listing prefixes")
	for _, prefix := range []string{
		"order/", "order/a", "order/a/", "order/a/c", "order/a/c/", "order/a/b",
		"order/a b", "order/é", "order/日", "order/zz", "orde", "nothing", "order/a/c/d",
	} {
		var want []string
		for _, k := range sortedCopy(orderKeys) {
			if strings.HasPrefix(k, prefix) {
				want = append(want, k)
			}
		}
		for _, size := range []int{1, 1000} {
			got, err := listPaged(t, e.b, prefix, "", size, 2*len(orderKeys)+4)
			if err != nil {
				t.Errorf("%v", err)
			} else if !slices.Equal(got, want) {
				t.Errorf("List(%q) in pages of %d: %s", prefix, size, diffKeys(got, want))
			}
		}
	}
}

// pagesKeys are 25 keys under "pages/" whose byte order is not their
// numeric order, and decoys that sort just before and after "pages/".
func pagesKeys() (keys, decoys []string) {
	for i := range 25 {
		keys = append(keys, fmt.Sprintf("pages/%x", (i*7919)%1000))
	}
	return keys, []string{"pages-decoy", "pages0decoy"}
}

// listPages: every page size gives the same listing.
func (s *suite) listPages(t T) {
	e := s.bucket(t)
	keys, decoys := pagesKeys()
	putShuffled(t, e.b, keys)
	putShuffled(t, e.b, decoys)
	want := sortedCopy(keys)
	all := sortedCopy(append(slices.Clone(keys), decoys...))
	s.settle(t, e.b, "", all, "before paging")
	for size := 1; size <= len(want)+1; size++ {
		got, err := listPaged(t, e.b, "pages/", "", size, 2*len(want)+4)
		if err != nil {
			t.Errorf("%v", err)
		} else if !slices.Equal(got, want) {
			t.Errorf("List(%q) in pages of %d: %s", "pages/", size, diffKeys(got, want))
		}
	}
	for _, size := range []int{1, 4, len(all), 1000} {
		got, err := listPaged(t, e.b, "", "", size, 2*len(all)+4)
		if err != nil {
			t.Errorf("%v", err)
		} else if !slices.Equal(got, all) {
			t.Errorf("List(\"\") in pages of %d: %s", size, diffKeys(got, all))
		}
	}
	if got := listKeysNow(t, e.b, "pages/"); !slices.Equal(got, want) {
		t.Errorf("List(%q) through Bucket.List: %s", "pages/", diffKeys(got, want))
	}
}

// thousandsKeys is more keys than a page of the largest size holds
// (blob.DefaultPageSize), and not a multiple of it.
const thousandsKeys = blob.DefaultPageSize + 9

// listThousands: a listing of more keys than the largest page holds is
// whole: through Bucket.List (pages of 1,000), through ListPage in pages of
// 1,000 (none longer), and from a cursor at the end of the first page. A
// redo log's segment listing runs past 1,000 keys, and a store that ends a
// listing at a full page (a truncation flag misread) loses every segment
// after it without an error. BatchDelete, which lists 2,500 keys before and
// after deleting them, catches that too, independently.
func (s *suite) listThousands(t T) {
	e := s.bucket(t)
	keys := make([]string, thousandsKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("thousands/%05d", (i*7919)%thousandsKeys)
	}
	putMany(t, e.b, keys)
	want := sortedCopy(keys)
	s.settle(t, e.b, "thousands/", want, fmt.Sprintf("after putting %d keys (Bucket.List, pages of %d)", len(keys), blob.DefaultPageSize))
	got, err := listPaged(t, e.b, "thousands/", "", blob.DefaultPageSize, 2*len(want)+4)
	if err != nil {
		t.Errorf("%v", err)
	} else if !slices.Equal(got, want) {
		t.Errorf("List(%q) of %d keys in pages of %d: %s", "thousands/", len(want), blob.DefaultPageSize, diffKeys(got, want))
	}
	cursor := want[blob.DefaultPageSize-1]
	var rest []string
	for a, err := range e.b.ListFrom(t.Context(), "thousands/", cursor) {
		if err != nil {
			t.Fatalf("ListFrom(%q, %q): %v", "thousands/", cursor, err)
		}
		rest = append(rest, a.Key)
	}
	if !slices.Equal(rest, want[blob.DefaultPageSize:]) {
		t.Errorf("ListFrom(%q, %q), the last key of a first page of %d: %s", "thousands/", cursor, blob.DefaultPageSize, diffKeys(rest, want[blob.DefaultPageSize:]))
	}
}

// listStartAfter: StartAfter starts strictly after any string.
func (s *suite) listStartAfter(t T) {
	e := s.bucket(t)
	var keys []string
	for i := range 10 {
		keys = append(keys, fmt.Sprintf("after/k%02d", i))
	}
	putShuffled(t, e.b, keys)
	s.settle(t, e.b, "", keys, "before listing with StartAfter")
	cases := []struct {
		name, after string
		want        []string
	}{
		{"BeforeAll", "aft", keys},
		{"Prefix", "after/", keys},
		{"First", keys[0], keys[1:]},
		{"Middle", keys[4], keys[5:]},
		{"BetweenKeys", "after/k035", keys[4:]},
		{"JustBeforeKey", "after/k03", keys[4:]},
		{"Last", keys[9], nil},
		{"AfterAll", "after/zzz", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t T) {
			for _, size := range []int{1, 3, 1000} {
				got, err := listPaged(t, e.b, "after/", c.after, size, 2*len(keys)+4)
				if err != nil {
					t.Errorf("%v", err)
				} else if !slices.Equal(got, c.want) {
					t.Errorf("List(%q) StartAfter %q in pages of %d: %s", "after/", c.after, size, diffKeys(got, c.want))
				}
			}
			var got []string
			for a, err := range e.b.ListFrom(t.Context(), "", c.after) {
				if err != nil {
					t.Fatalf("ListFrom(\"\", %q): %v", c.after, err)
				}
				got = append(got, a.Key)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("ListFrom(\"\", %q): %s", c.after, diffKeys(got, c.want))
			}
		})
	}
}

// listWhilePaging: a listing in progress sees the changes after its cursor
// and not the ones before it, with no key twice and none lost.
func (s *suite) listWhilePaging(t T) {
	for _, size := range []int{1, 2, 5} {
		t.Run(fmt.Sprintf("PageSize%d", size), func(t T) {
			e := s.bucket(t)
			ctx := t.Context()
			name := func(n int) string { return fmt.Sprintf("paging/%04d", n) }
			var original []string
			for n := 0; n < 200; n += 10 {
				original = append(original, name(n))
			}
			putShuffled(t, e.b, original)
			s.settle(t, e.b, "paging/", original, "before paging")

			state := map[string]bool{} // the keys that exist now
			for _, k := range original {
				state[k] = true
			}
			listed := map[string]bool{}
			var got []string
			var insertedBefore, deletedBefore []string
			opts := blob.ListOptions{PageSize: size}
			for pages := 1; ; pages++ {
				page, err := e.b.ListPage(ctx, "paging/", opts)
				if err != nil {
					t.Fatalf("ListPage(page %d): %v", pages, err)
				}
				if len(page.Objects) > size {
					t.Errorf("ListPage returned %d objects in a page of %d", len(page.Objects), size)
				}
				for _, a := range page.Objects {
					got = append(got, a.Key)
					listed[a.Key] = true
				}
				if page.NextToken == "" {
					break
				}
				if pages > 100 {
					t.Fatalf("ListPage had not ended after %d pages", pages)
				}
				opts = blob.ListOptions{Token: page.NextToken, PageSize: size}
				if len(got) == 0 {
					continue
				}
				last := got[len(got)-1]
				var cursor int
				if _, err := fmt.Sscanf(strings.TrimPrefix(last, "paging/"), "%d", &cursor); err != nil {
					t.Fatalf("listing returned %q, a key the suite never wrote", last)
				}
				// After the cursor: a new key right after it (it must
				// be listed), and the deletion of an unlisted original
				// (it must not be): on odd pages the one the next page
				// would start with.
				if ins := name(cursor + 5); !state[ins] && !listed[ins] {
					put(t, e.b, ins, []byte(ins))
					state[ins] = true
				}
				step := 10
				if pages%2 == 0 {
					step = 20
				}
				if del := name(cursor/10*10 + step); state[del] && !listed[del] {
					if err := e.b.Delete(ctx, del); err != nil {
						t.Fatalf("Delete(%q): %v", del, err)
					}
					delete(state, del)
				}
				// Before the cursor: a new key (it must not be listed),
				// and the deletion of a listed key, on odd pages the
				// cursor's own key (the continuation must not depend on
				// it still existing).
				if before := name(cursor - 3); cursor >= 3 && !state[before] && !listed[before] {
					put(t, e.b, before, []byte(before))
					state[before] = true
					insertedBefore = append(insertedBefore, before)
				}
				gone := last
				if pages%2 == 0 {
					gone = got[len(got)/2]
				}
				if state[gone] {
					if err := e.b.Delete(ctx, gone); err != nil {
						t.Fatalf("Delete(%q): %v", gone, err)
					}
					delete(state, gone)
					deletedBefore = append(deletedBefore, gone)
				}
				s.settleChanges(t, e.b, state)
			}
			// Want: the keys there now, less those inserted behind the
			// cursor, plus those deleted after the listing passed them.
			var want []string
			for k := range state {
				if !slices.Contains(insertedBefore, k) {
					want = append(want, k)
				}
			}
			want = append(want, deletedBefore...)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("listing in pages of %d while inserting and deleting keys before and after the cursor: %s", size, diffKeys(got, want))
			}
		})
	}
}

// settleChanges waits (for at most ListSettle) until the listing is exactly
// the keys of state, so that an eventually consistent store's lag is not
// taken for a pagination bug.
func (s *suite) settleChanges(t T, b *blob.Bucket, state map[string]bool) {
	t.Helper()
	if s.h.ListSettle == 0 {
		return
	}
	want := make([]string, 0, len(state))
	for k := range state {
		want = append(want, k)
	}
	slices.Sort(want)
	s.settle(t, b, "paging/", want, "waiting for inserts and deletes to list")
}
