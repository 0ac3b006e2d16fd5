package conformance

import (
	"bytes"
	"fmt"

	"github.com/redokit/redokit/blob"
)

// append: the Appender capability, as declared.
func (s *suite) append(t T) {
	t.Run("Capability", func(t T) {
		e := s.bucket(t)
		switch got := e.b.CanAppend(); {
		case got && !s.h.Append:
			t.Errorf("the driver implements driver.Appender but Harness.Append is false: declare it, so that appends are tested")
		case !got && s.h.Append:
			t.Errorf("Harness.Append is true but the driver does not implement driver.Appender")
		case !got:
			_, err := e.b.OpenAppend(t.Context(), "append/x")
			wantErr(t, err, blob.ErrNotSupported, "OpenAppend without the Appender capability")
		}
	})
	if !s.h.Append {
		return
	}
	// open opens key for appending, closing it when the subtest ends.
	open := func(t T, b *blob.Bucket, key string) blob.AppendFile {
		t.Helper()
		f, err := b.OpenAppend(t.Context(), key)
		if err != nil {
			t.Fatalf("OpenAppend(%q): %v", key, err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	write := func(t T, f blob.AppendFile, p []byte) {
		t.Helper()
		if n, err := f.Write(p); err != nil || n != len(p) {
			t.Fatalf("Write of %d bytes = %d, %v", len(p), n, err)
		}
	}
	sync := func(t T, f blob.AppendFile) {
		t.Helper()
		if err := f.Sync(); err != nil {
			t.Fatalf("Sync: %v", err)
		}
	}
	wantSize := func(t T, f blob.AppendFile, n int) {
		t.Helper()
		if got := f.Size(); got != int64(n) {
			t.Errorf("Size() = %d, want %d", got, n)
		}
	}

	t.Run("WriteSyncRead", func(t T) {
		e := s.bucket(t)
		const key = "append/active"
		f := open(t, e.b, key)
		wantSize(t, f, 0)
		wantContent(t, e.b, key, nil, "after OpenAppend of a new key (it exists, empty)")
		var all []byte
		for i, n := range []int{1, 4096, 100_000} {
			p := payload(int64(n), uint64(i))
			write(t, f, p)
			all = append(all, p...)
			wantSize(t, f, len(all))
			sync(t, f)
			wantContent(t, e.b, key, all, fmt.Sprintf("after append %d and Sync, with the object open", i))
		}
		if err := f.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		wantContent(t, e.b, key, all, "after Close")
		if a, err := e.b.Stat(t.Context(), key); err != nil {
			t.Errorf("Stat(%q): %v", key, err)
		} else if a.Size != int64(len(all)) {
			t.Errorf("Stat(%q).Size = %d, want %d", key, a.Size, len(all))
		}
		s.settle(t, e.b, "", []string{key}, "after appending")
	})
	t.Run("Truncate", func(t T) {
		e := s.bucket(t)
		const key = "append/torn"
		f := open(t, e.b, key)
		data := payload(100, 1)
		write(t, f, data)
		sync(t, f)
		if err := f.Truncate(60); err != nil {
			t.Fatalf("Truncate(60): %v", err)
		}
		wantSize(t, f, 60)
		wantContent(t, e.b, key, data[:60], "after Truncate(60)")
		tail := []byte("0123456789")
		write(t, f, tail)
		sync(t, f)
		wantSize(t, f, 70)
		wantContent(t, e.b, key, append(bytes.Clone(data[:60]), tail...), "after Truncate(60) and appending 10 bytes")
	})
	t.Run("Seal", func(t T) {
		e := s.bucket(t)
		const key, final = "append/active", "append/final"
		f := open(t, e.b, key)
		data := payload(5000, 2)
		write(t, f, data)
		a, err := f.Seal(t.Context(), final)
		if err != nil {
			t.Fatalf("Seal(%q): %v", final, err)
		}
		if a.Key != final || a.Size != int64(len(data)) {
			t.Errorf("Seal(%q) = key %q size %d, want size %d", final, a.Key, a.Size, len(data))
		}
		wantContent(t, e.b, final, data, "after Seal (unsynced bytes included: Seal syncs)")
		_, err = e.b.Stat(t.Context(), key)
		wantNotExist(t, err, key, fmt.Sprintf("Stat(%q) of the active key after Seal moved it", key))
		s.settle(t, e.b, "", []string{final}, "after Seal")
	})
	t.Run("SealOntoExisting", func(t T) {
		e := s.bucket(t)
		const key, taken = "append/active", "append/taken"
		put(t, e.b, taken, []byte("already here"))
		f := open(t, e.b, key)
		write(t, f, []byte("would overwrite"))
		_, err := f.Seal(t.Context(), taken)
		wantPrecondition(t, err, fmt.Sprintf("Seal onto the existing key %q", taken))
		wantContent(t, e.b, taken, []byte("already here"), "after a Seal onto it failed")
	})
	t.Run("Reopen", func(t T) {
		e := s.bucket(t)
		const key, fromPut = "append/reopen", "append/from-put"
		f := open(t, e.b, key)
		write(t, f, []byte("abc"))
		sync(t, f)
		if err := f.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		g := open(t, e.b, key)
		wantSize(t, g, 3)
		write(t, g, []byte("def"))
		sync(t, g)
		if err := g.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		wantContent(t, e.b, key, []byte("abcdef"), "after reopening and appending")
		// An object written by Put keeps its bytes too.
		put(t, e.b, fromPut, []byte("put:"))
		h := open(t, e.b, fromPut)
		wantSize(t, h, 4)
		write(t, h, []byte("appended"))
		sync(t, h)
		wantContent(t, e.b, fromPut, []byte("put:appended"), "after appending to an object written by Put")
	})
}

// isolation: a prefixed view writes under its prefix and sees nothing else.
func (s *suite) isolation(t T) {
	e := s.bucket(t)
	ctx := t.Context()
	data := []byte("inside")
	put(t, e.b, "iso/k", data)
	wantContent(t, e.root, Prefix+"iso/k", data, "through the unprefixed bucket, an object the view wrote")
	if a, err := e.root.Stat(ctx, Prefix+"iso/k"); err != nil {
		t.Errorf("Stat(%q) through the unprefixed bucket: %v", Prefix+"iso/k", err)
	} else if a.Key != Prefix+"iso/k" {
		t.Errorf("Stat(%q).Key = %q through the unprefixed bucket", Prefix+"iso/k", a.Key)
	}
	s.settle(t, e.root, "", sortedCopy(append([]string{Prefix + "iso/k"}, siblings...)), "the whole bucket, through the unprefixed bucket")
	s.settle(t, e.b, "", []string{"iso/k"}, "through the view")
	for _, k := range siblings {
		_, err := e.b.Stat(ctx, k)
		wantNotExist(t, err, k, fmt.Sprintf("Stat(%q) through the view (the sibling is outside it)", k))
	}
	// Deleting through the view the names of the siblings must not touch
	// them (the deferred check in bucket reads them afterwards).
	if err := e.b.Delete(ctx, siblings...); err != nil {
		t.Errorf("Delete of the siblings' names through the view: %v", err)
	}
	if err := e.b.Delete(ctx, "iso/k"); err != nil {
		t.Errorf("Delete(%q) through the view: %v", "iso/k", err)
	}
	s.settle(t, e.root, "", sortedCopy(siblings), "the whole bucket after the view deleted what it holds")
}
