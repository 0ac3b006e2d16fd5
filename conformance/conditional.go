package conformance

import (
	"errors"
	"fmt"

	"github.com/redokit/redokit/blob"
)

// racers is how many goroutines race a conditional write.
const racers = 16

// conditional runs f as a subtest when the harness declares conditional
// writes, and skips it with the harness's reason otherwise.
func (s *suite) conditional(t T, name string, f func(T)) {
	t.Run(name, func(t T) {
		if !s.h.ConditionalWrites {
			t.Skipf("Harness.ConditionalWrites is false: %s", s.h.ConditionalWritesReason)
		}
		f(t)
	})
}

// wantPrecondition checks that err is a lost conditional write.
func wantPrecondition(t T, err error, what string) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: succeeded; want an error matching blob.ErrPreconditionFailed", what)
	case !errors.Is(err, blob.ErrPreconditionFailed):
		t.Errorf("%s: %v (code %v); want an error matching blob.ErrPreconditionFailed: map the store's 412 (or 409 already-exists) to blob.CodePreconditionFailed", what, err, blob.CodeOf(err))
	}
}

// raceWinner checks the results of racers conditional writes: exactly one nil
// error, every other one ErrPreconditionFailed. It returns the winner, or -1.
func raceWinner(t T, errs []error, what string) int {
	t.Helper()
	winner := -1
	var winners []int
	for i, err := range errs {
		switch {
		case err == nil:
			winners = append(winners, i)
			winner = i
		case !errors.Is(err, blob.ErrPreconditionFailed):
			t.Errorf("%s: racer %d: %v (code %v); a loser must get blob.ErrPreconditionFailed", what, i, err, blob.CodeOf(err))
		}
	}
	if len(winners) != 1 {
		t.Errorf("%s: %d of %d racers won (%v); want exactly one", what, len(winners), len(errs), winners)
		return -1
	}
	return winner
}

// conditionalCreate: IfNotExist has exactly one winner.
func (s *suite) conditionalCreate(t T) {
	if !s.h.ConditionalWrites {
		t.Run("Refused", s.conditionalRefused)
	}
	ifNotExist := &blob.PutOptions{IfNotExist: true}
	s.conditional(t, "Sequential", func(t T) {
		e := s.bucket(t)
		ctx := t.Context()
		const key = "cond/create"
		a, err := e.b.Put(ctx, key, []byte("first"), ifNotExist)
		if err != nil {
			t.Fatalf("Put(%q, IfNotExist) of a new key: %v", key, err)
		}
		if a.ETag == "" {
			t.Errorf("Put(%q) returned no ETag", key)
		}
		_, err = e.b.Put(ctx, key, []byte("second"), ifNotExist)
		wantPrecondition(t, err, fmt.Sprintf("Put(%q, IfNotExist) of an existing key", key))
		wantContent(t, e.b, key, []byte("first"), "after a losing IfNotExist Put")
		if err := e.b.Delete(ctx, key); err != nil {
			t.Fatalf("Delete(%q): %v", key, err)
		}
		if _, err := e.b.Put(ctx, key, []byte("third"), ifNotExist); err != nil {
			t.Errorf("Put(%q, IfNotExist) after the key was deleted: %v", key, err)
		}
		wantContent(t, e.b, key, []byte("third"), "after IfNotExist Put of a deleted key")
	})
	s.conditional(t, "Race", func(t T) {
		e := s.bucket(t)
		for round := range 3 {
			key := fmt.Sprintf("cond/race-%d", round)
			content := func(i int) []byte { return fmt.Appendf(nil, "racer %02d of round %d", i, round) }
			etags := make([]string, racers)
			errs := race(racers, func(i int) error {
				a, err := e.b.Put(t.Context(), key, content(i), ifNotExist)
				etags[i] = a.ETag
				return err
			})
			w := raceWinner(t, errs, fmt.Sprintf("%d racers creating %q with IfNotExist", racers, key))
			if w < 0 {
				continue
			}
			wantContent(t, e.b, key, content(w), fmt.Sprintf("after the race for %q (the winner's content must be kept)", key))
			if st, err := e.b.Stat(t.Context(), key); err != nil {
				t.Errorf("Stat(%q): %v", key, err)
			} else if st.ETag != etags[w] {
				t.Errorf("Stat(%q).ETag = %q, but the winning Put returned %q", key, st.ETag, etags[w])
			}
		}
	})
}

// conditionalRefused: a driver without conditional writes refuses them
// instead of applying them as plain overwrites.
func (s *suite) conditionalRefused(t T) {
	e := s.bucket(t)
	ctx := t.Context()
	const key = "cond/refused"
	a := put(t, e.b, key, []byte("original"))
	_, err := e.b.Put(ctx, key, []byte("ifnotexist"), &blob.PutOptions{IfNotExist: true})
	if err == nil || !(errors.Is(err, blob.ErrNotSupported) || errors.Is(err, blob.ErrPreconditionFailed)) {
		t.Errorf("Put(%q, IfNotExist) of an existing key without conditional writes: %v; want blob.ErrNotSupported (or ErrPreconditionFailed)", key, err)
	}
	_, err = e.b.Put(ctx, key, []byte("ifmatch"), &blob.PutOptions{IfMatch: a.ETag + "-stale"})
	if err == nil || !(errors.Is(err, blob.ErrNotSupported) || errors.Is(err, blob.ErrPreconditionFailed)) {
		t.Errorf("Put(%q, IfMatch a wrong ETag) without conditional writes: %v; want blob.ErrNotSupported (or ErrPreconditionFailed)", key, err)
	}
	wantContent(t, e.b, key, []byte("original"), "after refused conditional Puts")
}

// compareAndSwap: IfMatch by ETag.
func (s *suite) compareAndSwap(t T) {
	s.conditional(t, "Sequence", func(t T) {
		e := s.bucket(t)
		ctx := t.Context()
		const key = "cas/object"
		// Same-length contents: an ETag made from the size (or the key,
		// or a coarse mtime) would not change.
		v1, v2, v3 := []byte("version-1-aaaa"), []byte("version-2-bbbb"), []byte("version-3-cccc")
		a1 := put(t, e.b, key, v1)
		if a1.ETag == "" {
			t.Fatalf("Put(%q) returned no ETag", key)
		}
		if st, err := e.b.Stat(ctx, key); err != nil {
			t.Fatalf("Stat(%q): %v", key, err)
		} else if st.ETag != a1.ETag {
			t.Errorf("Stat(%q).ETag = %q, but Put returned %q: CAS needs one ETag for one version", key, st.ETag, a1.ETag)
		}
		a2, err := e.b.Put(ctx, key, v2, &blob.PutOptions{IfMatch: a1.ETag})
		if err != nil {
			t.Fatalf("Put(%q, IfMatch the current ETag %q): %v", key, a1.ETag, err)
		}
		if a2.ETag == a1.ETag {
			t.Errorf("Put(%q) with new content kept the ETag %q: the ETag must change whenever the content does", key, a1.ETag)
		}
		_, err = e.b.Put(ctx, key, v3, &blob.PutOptions{IfMatch: a1.ETag})
		wantPrecondition(t, err, fmt.Sprintf("Put(%q, IfMatch a stale ETag)", key))
		_, err = e.b.Put(ctx, key, v3, &blob.PutOptions{IfMatch: `"conformance-bogus-etag"`})
		wantPrecondition(t, err, fmt.Sprintf("Put(%q, IfMatch a bogus ETag)", key))
		wantContent(t, e.b, key, v2, "after losing IfMatch Puts")
		if st, err := e.b.Stat(ctx, key); err != nil {
			t.Errorf("Stat(%q): %v", key, err)
		} else if st.ETag != a2.ETag {
			t.Errorf("Stat(%q).ETag = %q after losing IfMatch Puts, want the winner's %q", key, st.ETag, a2.ETag)
		}
		a3 := put(t, e.b, key, v3)
		if a3.ETag == a2.ETag {
			t.Errorf("unconditional Put(%q) with new content kept the ETag %q", key, a2.ETag)
		}
		if _, err := e.b.Put(ctx, key, v1, &blob.PutOptions{IfMatch: a3.ETag}); err != nil {
			t.Errorf("Put(%q, IfMatch the ETag of an unconditional Put): %v", key, err)
		}
		wantContent(t, e.b, key, v1, "after the last IfMatch Put")
	})
	s.conditional(t, "MissingKey", func(t T) {
		e := s.bucket(t)
		ctx := t.Context()
		const other, key = "cas/other", "cas/missing"
		a := put(t, e.b, other, []byte("other"))
		_, err := e.b.Put(ctx, key, []byte("x"), &blob.PutOptions{IfMatch: a.ETag})
		wantPrecondition(t, err, fmt.Sprintf("Put(%q, IfMatch) of a missing key", key))
		_, err = e.b.Stat(ctx, key)
		wantNotExist(t, err, key, fmt.Sprintf("Stat(%q) after a losing IfMatch Put", key))
		// A deleted object's ETag does not match its absence.
		if err := e.b.Delete(ctx, other); err != nil {
			t.Fatalf("Delete(%q): %v", other, err)
		}
		_, err = e.b.Put(ctx, other, []byte("again"), &blob.PutOptions{IfMatch: a.ETag})
		wantPrecondition(t, err, fmt.Sprintf("Put(%q, IfMatch its ETag from before it was deleted)", other))
		s.settle(t, e.b, "", nil, "after losing IfMatch Puts of missing keys")
	})
	s.conditional(t, "Race", func(t T) {
		e := s.bucket(t)
		for round := range 3 {
			key := fmt.Sprintf("cas/race-%d", round)
			base := put(t, e.b, key, fmt.Appendf(nil, "base of round %d", round))
			content := func(i int) []byte { return fmt.Appendf(nil, "swapper %02d of round %d", i, round) }
			etags := make([]string, racers)
			errs := race(racers, func(i int) error {
				a, err := e.b.Put(t.Context(), key, content(i), &blob.PutOptions{IfMatch: base.ETag})
				etags[i] = a.ETag
				return err
			})
			w := raceWinner(t, errs, fmt.Sprintf("%d racers swapping %q IfMatch %q", racers, key, base.ETag))
			if w < 0 {
				continue
			}
			wantContent(t, e.b, key, content(w), fmt.Sprintf("after the CAS race on %q (the winner's content must be kept)", key))
			if st, err := e.b.Stat(t.Context(), key); err != nil {
				t.Errorf("Stat(%q): %v", key, err)
			} else if st.ETag != etags[w] {
				t.Errorf("Stat(%q).ETag = %q, but the winning Put returned %q", key, st.ETag, etags[w])
			}
		}
	})
}
