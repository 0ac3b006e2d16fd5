package conformance

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redokit/redokit/blob"
)

// suite is one run of every subtest: plain, or under Prefix.
type suite struct {
	h        Harness
	prefixed bool
}

// runAll runs the subtests in the order of the package documentation.
func (s *suite) runAll(t T) {
	s.rule(t, "RoundTrip", s.roundTrip)
	s.rule(t, "Concurrent", s.concurrent)
	s.rule(t, "Atomic", s.atomic)
	s.rule(t, "RangedRead", s.rangedRead)
	s.rule(t, "NotExist", s.notExist)
	s.rule(t, "Keys", s.keys)
	s.rule(t, "ListOrder", s.listOrder)
	s.rule(t, "ListPrefix", s.listPrefix)
	s.rule(t, "ListLiteralPrefix", s.listLiteralPrefix)
	s.rule(t, "ListPages", s.listPages)
	s.rule(t, "ListThousands", s.listThousands)
	s.rule(t, "ListStartAfter", s.listStartAfter)
	s.rule(t, "ListWhilePaging", s.listWhilePaging)
	s.rule(t, "ListWhileChanging", s.listWhileChanging)
	s.rule(t, "ListAfterWrite", s.listAfterWrite)
	s.rule(t, "Delete", s.delete)
	s.rule(t, "BatchDelete", s.batchDelete)
	s.rule(t, "ConditionalCreate", s.conditionalCreate)
	s.rule(t, "CompareAndSwap", s.compareAndSwap)
	s.rule(t, "ReadAfterWrite", s.readAfterWrite)
	s.rule(t, "BeforeCommit", s.beforeCommit)
	s.rule(t, "ModTime", s.modTime)
	s.rule(t, "Context", s.context)
	s.rule(t, "Closed", s.closed)
	s.rule(t, "As", s.as)
	s.rule(t, "Append", s.append)
	if s.prefixed {
		s.rule(t, "Isolation", s.isolation)
	}
}

// rule runs f as the subtest name, with the rule's deadline.
func (s *suite) rule(t T, name string, f func(T)) { s.h.Subtest(t, name, f) }

// Bucket returns the bucket a subtest of the suite works on, for suites
// built on a Harness (package conformance/redo): a new one from
// Harness.MakeBucket, checked empty and closed when t ends; with prefixed,
// the Prefix view of it, with the siblings the Prefixed run writes beside the
// prefix checked intact when t ends.
func (h Harness) Bucket(t T, prefixed bool) *blob.Bucket {
	t.Helper()
	return (&suite{h: h, prefixed: prefixed}).bucket(t).b
}

// env is what one subtest works on.
type env struct {
	b    *blob.Bucket // the bucket under test (the view, in a Prefixed run)
	root *blob.Bucket // the harness's bucket (== b in a Plain run)
}

// bucket makes the subtest's bucket: a new one from the harness, closed when
// the subtest ends, checked empty; in a Prefixed run, the Prefix view of it,
// with the siblings written beside it and checked intact at the end.
func (s *suite) bucket(t T) env {
	t.Helper()
	root, err := s.h.MakeBucket(t.Context(), t)
	if err != nil {
		t.Fatalf("Harness.MakeBucket: %v", err)
	}
	if root == nil {
		t.Fatalf("Harness.MakeBucket returned a nil bucket and no error")
	}
	t.Cleanup(func() {
		if err := root.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if got := listKeysNow(t, root, ""); len(got) != 0 {
		t.Fatalf("Harness.MakeBucket returned a bucket that is not empty: it lists %s", quoteKeys(got, 5))
	}
	if !s.prefixed {
		return env{b: root, root: root}
	}
	want := map[string][]byte{}
	for i, k := range siblings {
		want[k] = []byte(fmt.Sprintf("sibling %d outside the prefix", i))
		if _, err := root.Put(t.Context(), k, want[k], nil); err != nil {
			t.Fatalf("Put(%q) of a sibling outside the prefix, through the unprefixed bucket: %v", k, err)
		}
	}
	// Registered after Close, so it runs before it.
	t.Cleanup(func() {
		ctx := context.Background()
		for _, k := range siblings {
			got, err := root.ReadAll(ctx, k)
			switch {
			case errors.Is(err, blob.ErrClosed):
				return // the subtest closed the bucket on purpose
			case err != nil:
				t.Errorf("sibling %q outside the prefix: after the subtest, reading it through the unprefixed bucket: %v (the prefixed view must never delete it)", k, err)
			case !bytes.Equal(got, want[k]):
				t.Errorf("sibling %q outside the prefix was changed by the subtest: %q, want %q", k, got, want[k])
			}
		}
	})
	b, err := root.Prefixed(Prefix)
	if err != nil {
		t.Fatalf("Prefixed(%q): %v", Prefix, err)
	}
	return env{b: b, root: root}
}

// payload returns n bytes determined by seed that a driver cannot get right
// by accident: up to 1 MiB of pseudo-random bytes, tiled beyond that with
// every 4 KiB block stamped with its offset and the seed, so that a dropped,
// repeated or reordered block (a multipart part, a resumed read) shows. Only
// the first MiB is generated, which keeps 64 MiB cheap under the race detector.
func payload(n int64, seed uint64) []byte {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	binary.LittleEndian.PutUint64(s[8:], uint64(n))
	buf := make([]byte, n)
	const tile, block = 1 << 20, 4 << 10
	_, _ = rand.NewChaCha8(s).Read(buf[:min(n, tile)])
	for off := int64(tile); off < n; off += tile {
		copy(buf[off:], buf[:tile])
	}
	for off := int64(tile); off+16 <= n; off += block {
		binary.LittleEndian.PutUint64(buf[off:], uint64(off))
		binary.LittleEndian.PutUint64(buf[off+8:], seed)
	}
	return buf
}

// put stores data under key, failing the subtest if it cannot.
func put(t T, b *blob.Bucket, key string, data []byte) blob.Attrs {
	t.Helper()
	a, err := b.Put(t.Context(), key, data, nil)
	if err != nil {
		t.Fatalf("Put(%q, %d bytes): %v", key, len(data), err)
	}
	return a
}

// wantContent checks that key reads back as exactly want.
func wantContent(t T, b *blob.Bucket, key string, want []byte, when string) {
	t.Helper()
	got, err := b.ReadAll(t.Context(), key)
	if err != nil {
		t.Errorf("%s: ReadAll(%q): %v", when, key, err)
		return
	}
	if d := diffBytes(got, want); d != "" {
		t.Errorf("%s: ReadAll(%q): %s", when, key, d)
	}
}

// diffBytes describes how got differs from want, without dumping megabytes.
func diffBytes(got, want []byte) string {
	if bytes.Equal(got, want) {
		return ""
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	show := func(b []byte) string {
		if i >= len(b) {
			return "end"
		}
		end := min(len(b), i+8)
		return fmt.Sprintf("%x", b[i:end])
	}
	return fmt.Sprintf("got %d bytes, want %d; first difference at byte %d (got %s, want %s)", len(got), len(want), i, show(got), show(want))
}

// wantNotExist checks that err reports the missing key: it matches
// blob.ErrNotExist and its message names the key.
func wantNotExist(t T, err error, key, what string) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: no error, want one matching blob.ErrNotExist", what)
	case !errors.Is(err, blob.ErrNotExist):
		t.Errorf("%s: %v (code %v); want an error matching blob.ErrNotExist: the driver's ErrorCode must map its not-found error to blob.CodeNotExist", what, err, blob.CodeOf(err))
	case !strings.Contains(err.Error(), key):
		t.Errorf("%s: %q does not name the key %q", what, err.Error(), key)
	}
}

// wantCode checks that err matches target.
func wantErr(t T, err, target error, what string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want one matching %v", what, target)
	} else if !errors.Is(err, target) {
		t.Errorf("%s: %v (code %v); want an error matching %v", what, err, blob.CodeOf(err), target)
	}
}

// listKeysNow lists every key under prefix, once, in the order the bucket
// returns them.
func listKeysNow(t T, b *blob.Bucket, prefix string) []string {
	t.Helper()
	keys, err := listKeys(t.Context(), b, prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return keys
}

// listKeys lists every key under prefix through Bucket.List, stopping at an
// impossible number of keys so that a driver whose pages never end cannot
// hang the suite.
func listKeys(ctx context.Context, b *blob.Bucket, prefix string) ([]string, error) {
	var keys []string
	for a, err := range b.List(ctx, prefix) {
		if err != nil {
			return keys, err
		}
		keys = append(keys, a.Key)
		if len(keys) > 100_000 {
			return keys, fmt.Errorf("listing %q did not end after %d keys", prefix, len(keys))
		}
	}
	return keys, nil
}

// settle lists prefix until it is exactly want (sorted), for at most the
// harness's ListSettle, and fails the subtest if it never is.
func (s *suite) settle(t T, b *blob.Bucket, prefix string, want []string, when string) {
	t.Helper()
	ok, got, err := s.poll(t.Context(), func(ctx context.Context) (bool, []string, error) {
		got, err := listKeys(ctx, b, prefix)
		return err == nil && slices.Equal(got, want), got, err
	})
	if ok {
		return
	}
	if err != nil {
		t.Fatalf("%s: List(%q): %v", when, prefix, err)
	}
	t.Fatalf("%s: List(%q): %s%s", when, prefix, diffKeys(got, want), s.settleNote())
}

// settleNote explains, in a failure message, how long the suite waited.
func (s *suite) settleNote() string {
	if s.h.ListSettle == 0 {
		return " (listings must be read-after-write consistent: a store whose listings lag cannot hold a redo log)"
	}
	return fmt.Sprintf(" (after polling for Harness.ListSettle = %v)", s.h.ListSettle)
}

// poll calls check until it reports true, for at most the harness's
// ListSettle; with no ListSettle it looks once. The pause between looks is not
// an assertion: a store that settles later is given until ListSettle.
func (s *suite) poll(ctx context.Context, check func(context.Context) (bool, []string, error)) (bool, []string, error) {
	deadline := time.Now().Add(s.h.ListSettle)
	pause := time.Millisecond
	for {
		ok, got, err := check(ctx)
		if ok || !time.Now().Before(deadline) {
			return ok, got, err
		}
		pause = min(2*pause, 250*time.Millisecond, time.Until(deadline))
		select {
		case <-ctx.Done():
			return ok, got, err
		case <-time.After(pause):
		}
	}
}

// diffKeys describes how the listing got differs from want.
func diffKeys(got, want []string) string {
	if slices.Equal(got, want) {
		return "as expected"
	}
	var notes []string
	seen := map[string]int{}
	for _, k := range got {
		seen[k]++
	}
	var missing, extra, dup []string
	for _, k := range want {
		if seen[k] == 0 {
			missing = append(missing, k)
		}
	}
	wantSet := map[string]bool{}
	for _, k := range want {
		wantSet[k] = true
	}
	for k, n := range seen {
		if !wantSet[k] {
			extra = append(extra, k)
		}
		if n > 1 {
			dup = append(dup, k)
		}
	}
	slices.Sort(extra)
	slices.Sort(dup)
	if len(missing) > 0 {
		notes = append(notes, "missing "+quoteKeys(missing, 5))
	}
	if len(extra) > 0 {
		notes = append(notes, "unexpected "+quoteKeys(extra, 5))
	}
	if len(dup) > 0 {
		notes = append(notes, "listed more than once "+quoteKeys(dup, 5))
	}
	for i := 1; i < len(got); i++ {
		if got[i-1] >= got[i] {
			notes = append(notes, fmt.Sprintf("out of byte order at position %d: %q then %q", i, got[i-1], got[i]))
			break
		}
	}
	if len(notes) == 0 {
		notes = append(notes, "different order")
	}
	return fmt.Sprintf("got %d keys %s, want %d %s: %s", len(got), quoteKeys(got, 8), len(want), quoteKeys(want, 8), strings.Join(notes, "; "))
}

// quoteKeys prints at most n keys.
func quoteKeys(keys []string, n int) string {
	var sb strings.Builder
	sb.WriteByte('[')
	for i, k := range keys {
		if i == n {
			fmt.Fprintf(&sb, " … %d more", len(keys)-n)
			break
		}
		if i > 0 {
			sb.WriteByte(' ')
		}
		fmt.Fprintf(&sb, "%q", k)
	}
	sb.WriteByte(']')
	return sb.String()
}

// race runs f(i) for i in [0, n) on n goroutines released together, and
// returns their errors by i.
func race(n int, f func(i int) error) []error {
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
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

// sortedCopy returns keys sorted in byte order.
func sortedCopy(keys []string) []string {
	out := slices.Clone(keys)
	slices.Sort(out)
	return out
}
