package conformance

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redokit/redokit/blob"
)

// literalKeys hold the characters that pattern languages give a meaning to
// (SQL LIKE's "_" and "%" and its "\" escape, glob's "*", "?" and "["), each
// beside a twin that the pattern would also match, and keys that differ
// from a prefix only by case. No key is a "directory" of another.
var literalKeys = []string{
	"lit/under_score", "lit/underXscore",
	"lit/pct%x", "lit/pctYYx",
	"lit/star*x", "lit/starZx",
	"lit/q?x", "lit/qZx",
	"lit/br[ab]x", "lit/bra",
	"lit/back\\_x", "lit/back_x", "lit/back/_x",
	"lit/Case/x", "lit/case/x", "lit/CASE",
}

// A store may be unable to hold a backslash in a key (Azure Blob Storage turns it
// into "/"): its driver must then refuse such keys with blob.ErrInvalidKey,
// never store them under another name.
const backslash = "\\"

// literalPrefixes are the prefixes listed: a driver that matches them as
// patterns, or case-insensitively, lists a twin too.
var literalPrefixes = []string{
	"lit/under_", "lit/pct%", "lit/star*", "lit/q?", "lit/br[ab]", "lit/br[",
	"lit/back\\_", "lit/back\\", "lit/case/", "lit/Case/", "lit/CASE", "lit/Ca", "lit/c",
}

// listLiteralPrefix: a prefix is matched byte for byte, not as a pattern and
// not ignoring case.
func (s *suite) listLiteralPrefix(t T) {
	e := s.bucket(t)
	keys := literalKeys
	for _, k := range keys {
		if !strings.Contains(k, backslash) {
			continue
		}
		_, err := e.b.Put(t.Context(), k, []byte(k), nil)
		if errors.Is(err, blob.ErrInvalidKey) && strings.Contains(err.Error(), strconv.Quote(k)) {
			t.Logf("the driver refuses keys holding %q (%v): listing the others", backslash, err)
			keys = slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return strings.Contains(k, backslash) })
			break
		}
		if err != nil {
			t.Fatalf("Put(%q): %v (a key the store cannot hold must be refused with blob.ErrInvalidKey naming it)", k, err)
		}
	}
	putShuffled(t, e.b, keys)
	all := sortedCopy(keys)
	s.settle(t, e.b, "", all, "before listing prefixes holding _ % * ? [ \\ and differing by case")
	for _, prefix := range literalPrefixes {
		var want []string
		for _, k := range all {
			if strings.HasPrefix(k, prefix) {
				want = append(want, k)
			}
		}
		for _, size := range []int{1, 1000} {
			got, err := listPaged(t, e.b, prefix, "", size, 2*len(all)+4)
			if err != nil {
				t.Errorf("%v", err)
			} else if !slices.Equal(got, want) {
				t.Errorf("List(%q) in pages of %d: %s (a prefix is matched byte for byte: not as a LIKE or glob pattern, and not ignoring case)", prefix, size, diffKeys(got, want))
			}
		}
	}
}

// listWhileChanging: a listing returns every object that exists throughout
// it, whatever is put, deleted or sealed meanwhile, and an object sealed
// (renamed) during a one-page listing under at least one of its names.
func (s *suite) listWhileChanging(t T) {
	t.Run("Churn", s.listChurn)
	t.Run("Seal", func(t T) {
		if !s.h.Append {
			t.Skipf("the driver has no Appender (Harness.Append is false): nothing is sealed")
		}
		s.listSealRace(t)
	})
}

// The names of the keys of round i of the changes, interleaved in byte order
// with the stable keys. A sealed name sorts just before its active one, as a
// redo segment's does.
func churnStable(i int) string  { return fmt.Sprintf("churn/%03d", i) }
func churnDeleted(i int) string { return fmt.Sprintf("churn/%03d-deleted", i) }
func churnPut(i int) string     { return fmt.Sprintf("churn/%03d-put", i) }
func churnActive(i int) string  { return fmt.Sprintf("churn/%03d.active", i) }
func churnSealed(i int) string  { return fmt.Sprintf("churn/%03d-sealed", i) }

const churnRounds = 24

// listChurn puts, deletes and (with Append) seals keys among stable ones on
// one goroutine while another lists, in pages of 1, 3 and 1000, again and
// again: each listing must hold every stable key exactly once, in byte
// order, and a one-page listing every object being sealed under one of its
// names.
func (s *suite) listChurn(t T) {
	e := s.bucket(t)
	ctx := t.Context()
	var before []string
	for i := range churnRounds {
		before = append(before, churnStable(i), churnDeleted(i))
	}
	putShuffled(t, e.b, before)
	// Active objects exist before the listings start, so each is there
	// throughout them under one name or the other.
	actives := map[int]blob.AppendFile{}
	if s.h.Append {
		for i := range churnRounds {
			af, err := e.b.OpenAppend(ctx, churnActive(i))
			if err != nil {
				t.Fatalf("OpenAppend(%q): %v", churnActive(i), err)
			}
			t.Cleanup(func() { af.Close() })
			if _, err := af.Write([]byte(churnActive(i))); err != nil {
				t.Fatalf("Write(%q): %v", churnActive(i), err)
			}
			actives[i] = af
		}
	}
	var want []string
	for i := range churnRounds {
		want = append(want, churnStable(i), churnDeleted(i))
		if s.h.Append {
			want = append(want, churnActive(i))
		}
	}
	slices.Sort(want)
	s.settle(t, e.b, "churn/", want, "before the changes")

	changes := make(chan error, 1)
	go func() {
		changes <- func() error {
			for i := range churnRounds {
				if _, err := e.b.Put(ctx, churnPut(i), []byte(churnPut(i)), nil); err != nil {
					return fmt.Errorf("Put(%q): %w", churnPut(i), err)
				}
				if err := e.b.Delete(ctx, churnDeleted(i)); err != nil {
					return fmt.Errorf("Delete(%q): %w", churnDeleted(i), err)
				}
				if af := actives[i]; af != nil {
					if _, err := af.Seal(ctx, churnSealed(i)); err != nil {
						return fmt.Errorf("Seal(%q to %q): %w", churnActive(i), churnSealed(i), err)
					}
				}
			}
			return nil
		}()
	}()
	sizes := []int{1, 3, 1000}
	for n, finished := 0, false; !finished || n < len(sizes); n++ {
		if !finished {
			select {
			case err := <-changes:
				if err != nil {
					t.Fatalf("changing keys during the listings: %v", err)
				}
				finished = true
			default:
			}
		}
		size := sizes[n%len(sizes)]
		got, err := listPaged(t, e.b, "churn/", "", size, 10*churnRounds)
		if err != nil {
			t.Fatalf("listing %d, while keys changed: %v", n, err)
		}
		count := map[string]int{}
		for i, k := range got {
			count[k]++
			if i > 0 && got[i-1] >= k {
				t.Fatalf("listing %d in pages of %d, while keys changed: out of byte order or repeated at position %d: %q then %q", n, size, i, got[i-1], k)
			}
		}
		for i := range churnRounds {
			if k := churnStable(i); count[k] != 1 {
				t.Fatalf("listing %d in pages of %d, while other keys were put, deleted and sealed: %q, which existed throughout, is missing (listed %s)", n, size, k, quoteKeys(got, 12))
			}
			if size == 1000 && s.h.Append && count[churnActive(i)]+count[churnSealed(i)] == 0 {
				t.Fatalf("listing %d in one page, while objects were sealed: the object sealed from %q to %q is listed under neither name (listed %s)", n, churnActive(i), churnSealed(i), quoteKeys(got, 12))
			}
		}
	}
	want = want[:0]
	for i := range churnRounds {
		want = append(want, churnStable(i), churnPut(i))
		if s.h.Append {
			want = append(want, churnSealed(i))
		}
	}
	slices.Sort(want)
	s.settle(t, e.b, "churn/", want, "after the changes")
}

// sealRounds is the number of seals raced with a listing.
const sealRounds = 8

// listSealRace seals an object while a one-page listing of its directory
// runs, released at the same moment, round after round: the listing must
// show the object under its active or its sealed name, and the objects
// around it.
func (s *suite) listSealRace(t T) {
	e := s.bucket(t)
	ctx := t.Context()
	for i := range sealRounds {
		put(t, e.b, churnStable(2*i), nil)
		put(t, e.b, churnStable(2*i+1), nil)
		af, err := e.b.OpenAppend(ctx, churnActive(2*i))
		if err != nil {
			t.Fatalf("OpenAppend(%q): %v", churnActive(2*i), err)
		}
		if _, err := af.Write([]byte("sealed while listed")); err != nil {
			t.Fatalf("Write(%q): %v", churnActive(2*i), err)
		}
		if err := af.Sync(); err != nil {
			t.Fatalf("Sync(%q): %v", churnActive(2*i), err)
		}
		var (
			mu  sync.Mutex
			got []string
		)
		errs := race(2, func(j int) error {
			if j == 1 {
				_, err := af.Seal(ctx, churnSealed(2*i))
				return err
			}
			page, err := e.b.ListPage(ctx, "churn/", blob.ListOptions{PageSize: 1000})
			mu.Lock()
			defer mu.Unlock()
			for _, a := range page.Objects {
				got = append(got, a.Key)
			}
			return err
		})
		if errs[0] != nil {
			t.Fatalf("round %d: ListPage while sealing: %v", i, errs[0])
		}
		if errs[1] != nil {
			t.Fatalf("round %d: Seal(%q to %q) while listing: %v", i, churnActive(2*i), churnSealed(2*i), errs[1])
		}
		if !slices.Contains(got, churnActive(2*i)) && !slices.Contains(got, churnSealed(2*i)) {
			t.Fatalf("round %d: a one-page listing during Seal(%q to %q) shows the object under neither name: %s", i, churnActive(2*i), churnSealed(2*i), quoteKeys(got, 12))
		}
		for _, k := range []string{churnStable(2 * i), churnStable(2*i + 1)} {
			if !slices.Contains(got, k) {
				t.Fatalf("round %d: a listing during a Seal misses %q, which existed throughout: %s", i, k, quoteKeys(got, 12))
			}
		}
	}
}
