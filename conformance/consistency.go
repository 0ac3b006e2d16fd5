package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/redokit/redokit/blob"
)

// Read-after-write consistency. A redo reader proves a log complete from a
// listing (no segment it did not list exists) and GC proves what it may
// delete the same way, so an object whose Put has returned must be listed
// by the next listing. The meta objects (writer state, fences, the global
// resolved ts and checkpoint) are small and rewritten in place by
// compare-and-swap: the package meta pairs a Stat's ETag with the body read
// right after it, so a read must return the body of the version a Stat just
// named, never one it replaced. A stale read is a read that returns an
// older version of an object than one a Put has already returned for (or a
// Stat has already shown); the suite fails it, and never retries or waits
// for a read (Harness.ListSettle relaxes listings only).

// metaSize is the size of the suite's metadata-sized objects: what a redo
// log's meta objects weigh, and what a store that serves small objects from
// a lagging tier would lag.
const metaSize = 300

// metaBody is version n of a metadata-sized object under seed: n in its
// first line, the rest determined by seed and n.
func metaBody(seed string, n, size int) []byte {
	head := fmt.Appendf(nil, "%s version %06d\n", seed, n)
	return append(head, payload(int64(max(size-len(head), 0)), uint64(n)<<8|uint64(len(seed)))...)
}

// metaVersion parses the version of a metaBody of seed (and reports whether
// data is one).
func metaVersion(seed string, data []byte, size int) (int, bool) {
	var n int
	if _, err := fmt.Sscanf(string(data), seed+" version %06d\n", &n); err != nil {
		return 0, false
	}
	return n, bytes.Equal(data, metaBody(seed, n, size))
}

// describeBody names the version data is, for a failure message.
func describeBody(seed string, data []byte, size int) string {
	if n, ok := metaVersion(seed, data, size); ok {
		return fmt.Sprintf("version %d", n)
	}
	return fmt.Sprintf("%d bytes that are no version the suite wrote", len(data))
}

// listAfterWrite: an object whose Put has returned is in the next listing,
// from the start or from a cursor before it, created plainly or with
// IfNotExist; a deleted one is not. With Harness.ListSettle the listings
// are polled until then (a store that needs it cannot hold a redo log:
// package conformance/redo refuses it).
func (s *suite) listAfterWrite(t T) {
	const note = "a listing must show every object whose Put has returned: a redo reader proves a log complete from listings"
	t.Run("Create", func(t T) {
		e := s.bucket(t)
		var keys []string
		for i := range 6 {
			// Out of byte order: each new key sorts among the others.
			k := fmt.Sprintf("law/create/%02d", (i*5)%6)
			put(t, e.b, k, metaBody("create", i, metaSize))
			keys = sortedCopy(append(keys, k))
			s.settle(t, e.b, "law/", keys, fmt.Sprintf("right after Put(%q) returned (%s)", k, note))
		}
	})
	t.Run("CreateAfterCursor", func(t T) {
		// A reader lists from the last key it saw; a key put after that
		// key since is in its next listing.
		e := s.bucket(t)
		ctx := t.Context()
		cursor := "law/cursor/00"
		put(t, e.b, cursor, []byte(cursor))
		for i := 1; i <= 5; i++ {
			k := fmt.Sprintf("law/cursor/%02d", i)
			put(t, e.b, k, []byte(k))
			ok, got, err := s.poll(ctx, func(ctx context.Context) (bool, []string, error) {
				var got []string
				for a, err := range e.b.ListFrom(ctx, "law/", cursor) {
					if err != nil {
						return false, got, err
					}
					got = append(got, a.Key)
				}
				return slices.Equal(got, []string{k}), got, nil
			})
			if err != nil {
				t.Fatalf("ListFrom(%q, %q): %v", "law/", cursor, err)
			}
			if !ok {
				t.Fatalf("right after Put(%q) returned, ListFrom(%q, %q): %s (%s)%s", k, "law/", cursor, diffKeys(got, []string{k}), note, s.settleNote())
			}
			cursor = k
		}
	})
	s.conditional(t, "ConditionalCreate", func(t T) {
		// Segments are created with IfNotExist.
		e := s.bucket(t)
		var keys []string
		for i := range 4 {
			k := fmt.Sprintf("law/ifnotexist/%02d", 3-i)
			if _, err := e.b.Put(t.Context(), k, metaBody("ifnotexist", i, metaSize), &blob.PutOptions{IfNotExist: true}); err != nil {
				t.Fatalf("Put(%q, IfNotExist) of a new key: %v", k, err)
			}
			keys = sortedCopy(append(keys, k))
			s.settle(t, e.b, "law/", keys, fmt.Sprintf("right after Put(%q, IfNotExist) returned (%s)", k, note))
		}
	})
	t.Run("Delete", func(t T) {
		// GC deletes what a listing showed; the next listing must not
		// show it again.
		e := s.bucket(t)
		keys := []string{"law/delete/a", "law/delete/b", "law/delete/c"}
		for _, k := range keys {
			put(t, e.b, k, []byte(k))
		}
		s.settle(t, e.b, "law/", keys, "before deleting")
		for i, k := range keys {
			if err := e.b.Delete(t.Context(), k); err != nil {
				t.Fatalf("Delete(%q): %v", k, err)
			}
			s.settle(t, e.b, "law/", keys[i+1:], fmt.Sprintf("right after Delete(%q) returned (a listing must not show an object whose Delete has returned)", k))
		}
	})
}

// readAfterWrite: a read after an overwrite returns the new body, and a
// Stat's ETag pairs with the body read right after it; a compare-and-swap
// IfMatch the ETag a Stat returned wins only when the body read with that
// Stat is the version the ETag names. Its objects are metadata-sized
// (metaSize), like the meta objects redokit rewrites in place, and the
// versions of one object all have one size, so that nothing but the body
// tells them apart. Reads are never retried: a stale read fails.
func (s *suite) readAfterWrite(t T) {
	const stale = "a stale read: the read lags the overwrite"
	t.Run("Overwrite", func(t T) {
		e := s.bucket(t)
		ctx := t.Context()
		const key, seed = "raw/overwrite", "overwrite"
		sizes := []int{metaSize, 200, 600, metaSize, metaSize, 450, metaSize}
		put(t, e.b, key, metaBody(seed, 0, metaSize))
		for i, size := range sizes {
			n := i + 1
			want := metaBody(seed, n, size)
			put(t, e.b, key, want)
			got, err := e.b.ReadAll(ctx, key)
			if err != nil {
				t.Fatalf("ReadAll(%q) after overwrite %d: %v", key, n, err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("ReadAll(%q) right after Put of version %d (%d bytes) returned: %s (%s)", key, n, size, describeBody(seed, got, size), stale)
			}
			part, err := e.b.ReadRange(ctx, key, 16, 64)
			if err != nil {
				t.Fatalf("ReadRange(%q, 16, 64) after overwrite %d: %v", key, n, err)
			}
			if !bytes.Equal(part, want[16:80]) {
				t.Errorf("ReadRange(%q, 16, 64) right after Put of version %d: %s (%s)", key, n, diffBytes(part, want[16:80]), stale)
			}
		}
	})
	t.Run("StatAfterOverwrite", func(t T) {
		// A Stat right after a Put returns that Put's ETag and size,
		// small objects and larger ones alike (a cache in front of HEADs
		// serves the replaced version's): meta conditions its next swap
		// on a Stat's ETag. Independent of CompareAndSwap, which needs
		// conditional writes.
		e := s.bucket(t)
		ctx := t.Context()
		for _, size := range []int{metaSize, 64 << 10} {
			key := fmt.Sprintf("raw/stat-%d", size)
			seed := fmt.Sprintf("stat%d", size)
			for n := range 5 {
				// Sizes alternate so that a stale Size shows too.
				sz := size + n%2
				a := put(t, e.b, key, metaBody(seed, n, sz))
				st, err := e.b.Stat(ctx, key)
				if err != nil {
					t.Fatalf("Stat(%q) after Put of version %d: %v", key, n, err)
				}
				if st.ETag != a.ETag || st.Size != int64(sz) {
					t.Errorf("Stat(%q) right after Put of version %d (%d bytes, ETag %q): ETag %q, size %d: a stale Stat (meta would swap IfMatch a replaced version's ETag)",
						key, n, sz, a.ETag, st.ETag, st.Size)
				}
			}
		}
	})
	t.Run("ReadVersion", func(t T) {
		// A driver with the VersionReader capability pairs the bytes and
		// the ETag from one response: the pair must be the version the
		// last Put stored, with the ETag that Put returned, every time.
		e := s.bucket(t)
		if !e.b.CanReadVersion() {
			t.Skipf("the driver has no VersionReader capability: meta pairs an ETag with a body by Stat, read, Stat (StatPairsWithRead)")
		}
		ctx := t.Context()
		const key, seed = "raw/version", "version"
		if _, _, err := e.b.ReadVersion(ctx, key); !blob.IsNotExist(err) {
			t.Fatalf("ReadVersion(%q) of a missing key: %v, want NotExist", key, err)
		}
		for n := range 6 {
			size := []int{metaSize, 200, 600}[n%3]
			want := metaBody(seed, n, size)
			a := put(t, e.b, key, want)
			data, got, err := e.b.ReadVersion(ctx, key)
			if err != nil {
				t.Fatalf("ReadVersion(%q) after Put of version %d: %v", key, n, err)
			}
			if !bytes.Equal(data, want) {
				t.Errorf("ReadVersion(%q) right after Put of version %d returned %s (%s)", key, n, describeBody(seed, data, size), stale)
			}
			if got.ETag != a.ETag || got.Size != int64(len(want)) {
				t.Errorf("ReadVersion(%q) of version %d: ETag %q size %d, want the Put's ETag %q and size %d", key, n, got.ETag, got.Size, a.ETag, len(want))
			}
			// The ETag it returned is one a compare-and-swap can use.
			if n%2 == 1 && s.h.ConditionalWrites {
				next := metaBody(seed, 100+n, size)
				if _, err := e.b.Put(ctx, key, next, &blob.PutOptions{IfMatch: got.ETag}); err != nil {
					t.Errorf("Put IfMatch the ETag ReadVersion returned (%q): %v", got.ETag, err)
				}
			}
		}
	})
	t.Run("StatPairsWithRead", func(t T) {
		// What meta does to read a version with its ETag: Stat, read,
		// Stat again, and take the pair when the two Stats agree.
		e := s.bucket(t)
		ctx := t.Context()
		const key, seed = "raw/pairs", "pairs"
		version := map[string]int{} // ETag -> the version whose Put returned it
		for n := range 8 {
			a := put(t, e.b, key, metaBody(seed, n, metaSize))
			if prev, dup := version[a.ETag]; dup {
				t.Fatalf("Put(%q) of version %d returned the ETag %q of version %d", key, n, a.ETag, prev)
			}
			version[a.ETag] = n
			if n == 0 {
				continue
			}
			before, err := e.b.Stat(ctx, key)
			if err != nil {
				t.Fatalf("Stat(%q): %v", key, err)
			}
			data, err := e.b.ReadAll(ctx, key)
			if err != nil {
				t.Fatalf("ReadAll(%q): %v", key, err)
			}
			after, err := e.b.Stat(ctx, key)
			if err != nil {
				t.Fatalf("Stat(%q): %v", key, err)
			}
			if before.ETag != a.ETag || after.ETag != a.ETag {
				t.Errorf("Stat(%q) around a read, right after Put of version %d returned ETag %q: %q then %q; want the Put's", key, n, a.ETag, before.ETag, after.ETag)
				continue
			}
			if v, ok := metaVersion(seed, data, metaSize); !ok || v != n {
				t.Errorf("Stat(%q) returned ETag %q (version %d) before and after a read, but the read returned %s: the ETag does not pair with the body (%s)",
					key, before.ETag, n, describeBody(seed, data, metaSize), stale)
			}
		}
	})
	s.conditional(t, "IfMatchPairsWithRead", func(t T) {
		// A meta update: another process overwrites the object, then a
		// compare-and-swap takes the ETag and the body, and writes the
		// next version IfMatch that ETag. If it wins, the ETag was current,
		// so the body read with it must be that version: a stale body
		// makes the swap write an old value over a newer one (a
		// checkpoint moving backwards).
		e := s.bucket(t)
		ctx := t.Context()
		const key, seed = "raw/cas", "cas"
		cur := 0
		put(t, e.b, key, metaBody(seed, cur, metaSize))
		for round := range 6 {
			cur++
			put(t, e.b, key, metaBody(seed, cur, metaSize)) // the other process
			st, err := e.b.Stat(ctx, key)
			if err != nil {
				t.Fatalf("Stat(%q): %v", key, err)
			}
			data, err := e.b.ReadAll(ctx, key)
			if err != nil {
				t.Fatalf("ReadAll(%q): %v", key, err)
			}
			read, ok := metaVersion(seed, data, metaSize)
			if !ok {
				t.Fatalf("ReadAll(%q) returned %s", key, describeBody(seed, data, metaSize))
			}
			a, err := e.b.Put(ctx, key, metaBody(seed, read+1, metaSize), &blob.PutOptions{IfMatch: st.ETag})
			if errors.Is(err, blob.ErrPreconditionFailed) {
				t.Errorf("round %d: Put(%q, IfMatch %q), the ETag Stat had just returned, lost: nothing else wrote the object", round, key, st.ETag)
				continue
			}
			if err != nil {
				t.Fatalf("Put(%q, IfMatch %q): %v", key, st.ETag, err)
			}
			if read != cur {
				t.Errorf("round %d: Put(%q, IfMatch %q) won, so that ETag named the current version %d, but the body read right after the Stat that returned it is version %d (%s): "+
					"the swap wrote version %d, computed from version %d, where version %d was current; a compare-and-swap built on a stale body loses updates or moves a value backwards, as a checkpoint",
					round, key, st.ETag, cur, read, stale, read+1, read, cur)
			}
			cur = read + 1
			got, err := e.b.ReadAll(ctx, key)
			if err != nil {
				t.Fatalf("ReadAll(%q): %v", key, err)
			}
			if !bytes.Equal(got, metaBody(seed, cur, metaSize)) {
				t.Errorf("round %d: ReadAll(%q) right after the winning Put IfMatch of version %d returned %s (%s)", round, key, cur, describeBody(seed, got, metaSize), stale)
			}
			if st, err := e.b.Stat(ctx, key); err != nil {
				t.Fatalf("Stat(%q): %v", key, err)
			} else if st.ETag != a.ETag {
				t.Errorf("round %d: Stat(%q).ETag = %q after a winning Put IfMatch returned %q", round, key, st.ETag, a.ETag)
			}
		}
	})
}
