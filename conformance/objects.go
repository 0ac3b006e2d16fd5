package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing/iotest"

	"github.com/redokit/redokit/blob"
)

// roundTrip: bytes come back exactly, with the right size.
func (s *suite) roundTrip(t T) {
	sizes := []struct {
		name string
		n    int64
	}{
		{"Empty", 0},
		{"OneByte", 1},
		{"1MiB", 1 << 20},
		{"Large", s.h.LargeObject},
	}
	for i, c := range sizes {
		t.Run(c.name, func(t T) {
			e := s.bucket(t)
			key := fmt.Sprintf("roundtrip/%s.bin", c.name)
			data := payload(c.n, uint64(i))
			a, err := e.b.PutReader(t.Context(), key, bytes.NewReader(data), c.n, nil)
			if err != nil {
				t.Fatalf("PutReader(%q, %d bytes): %v", key, c.n, err)
			}
			if a.Size != c.n {
				t.Errorf("PutReader(%q) returned Attrs.Size %d, want %d", key, a.Size, c.n)
			}
			st, err := e.b.Stat(t.Context(), key)
			if err != nil {
				t.Fatalf("Stat(%q) after Put: %v", key, err)
			}
			if st.Size != c.n {
				t.Errorf("Stat(%q).Size = %d, want %d", key, st.Size, c.n)
			}
			if st.Key != key {
				t.Errorf("Stat(%q).Key = %q", key, st.Key)
			}
			wantContent(t, e.b, key, data, "after Put")
		})
	}
	t.Run("UnknownSize", func(t T) {
		// size < 0: the driver reads until EOF, from a reader it cannot
		// seek or measure (a multipart upload of unknown length).
		e := s.bucket(t)
		const key = "roundtrip/unknown-size.bin"
		n := min(s.h.LargeObject, 3<<20+17)
		data := payload(n, 99)
		a, err := e.b.PutReader(t.Context(), key, iotest.HalfReader(bytes.NewReader(data)), -1, nil)
		if err != nil {
			t.Fatalf("PutReader(%q, size -1): %v", key, err)
		}
		if a.Size != n {
			t.Errorf("PutReader(%q, size -1) returned Attrs.Size %d, want %d", key, a.Size, n)
		}
		if st, err := e.b.Stat(t.Context(), key); err != nil {
			t.Errorf("Stat(%q): %v", key, err)
		} else if st.Size != n {
			t.Errorf("Stat(%q).Size = %d, want %d", key, st.Size, n)
		}
		wantContent(t, e.b, key, data, "after a Put of unknown size")
	})
	t.Run("Overwrite", func(t T) {
		e := s.bucket(t)
		const key = "roundtrip/overwrite"
		long, short := payload(5000, 1), payload(10, 2)
		put(t, e.b, key, long)
		put(t, e.b, key, short)
		wantContent(t, e.b, key, short, "after overwriting 5000 bytes with 10")
		put(t, e.b, key, short)
		wantContent(t, e.b, key, short, "after putting the same bytes again")
		put(t, e.b, key, nil)
		wantContent(t, e.b, key, nil, "after overwriting with 0 bytes")
		s.settle(t, e.b, "", []string{key}, "after three overwrites")
	})
}

// concurrent: parallel writers and readers of distinct keys.
func (s *suite) concurrent(t T) {
	e := s.bucket(t)
	const n = 16
	key := func(i int) string { return fmt.Sprintf("concurrent/%02d", i) }
	data := func(i int) []byte { return payload(int64(4096+i), uint64(i)) }
	for i, err := range race(n, func(i int) error {
		_, err := e.b.Put(t.Context(), key(i), data(i), nil)
		return err
	}) {
		if err != nil {
			t.Errorf("concurrent Put(%q): %v", key(i), err)
		}
	}
	for i, err := range race(n, func(i int) error {
		got, err := e.b.ReadAll(t.Context(), key(i))
		if err != nil {
			return err
		}
		if d := diffBytes(got, data(i)); d != "" {
			return errors.New(d)
		}
		return nil
	}) {
		if err != nil {
			t.Errorf("concurrent ReadAll(%q): %v", key(i), err)
		}
	}
	var want []string
	for i := range n {
		want = append(want, key(i))
	}
	s.settle(t, e.b, "", want, "after concurrent Puts")
}

// gatedReader hands a Put its first gate bytes, then blocks until released
// (closing reached when it does), then hands over the rest, or fails with err
// if one was set before the release. It lets the suite look at the bucket
// while a Put is in flight, and cancel it there, without timing.
type gatedReader struct {
	data    []byte
	off     int
	gate    int
	passed  bool
	reached chan struct{}
	release chan struct{}
	err     error // set before release is closed
}

func newGatedReader(data []byte, gate int) *gatedReader {
	return &gatedReader{data: data, gate: gate, reached: make(chan struct{}), release: make(chan struct{})}
}

func (r *gatedReader) Read(p []byte) (int, error) {
	if r.off == r.gate && !r.passed {
		r.passed = true
		close(r.reached)
		<-r.release
		if r.err != nil {
			return 0, r.err
		}
	}
	if r.off >= len(r.data) {
		return 0, io.EOF
	}
	end := len(r.data)
	if r.off < r.gate {
		end = r.gate
	}
	n := copy(p, r.data[r.off:end])
	r.off += n
	return n, nil
}

// inFlight is a Put running on its own goroutine over a gatedReader.
type inFlight struct {
	r    *gatedReader
	done chan error
	once bool
}

// startPut starts Put(key, data) and returns once the driver has read the
// gate's bytes and is waiting for more. It fails the subtest if the Put ends
// before that. The Put is released when the subtest ends, whatever happens.
func startPut(t T, ctx context.Context, b *blob.Bucket, key string, data []byte, gate int) *inFlight {
	t.Helper()
	p := &inFlight{r: newGatedReader(data, gate), done: make(chan error, 1)}
	go func() {
		_, err := b.PutReader(ctx, key, p.r, int64(len(data)), nil)
		p.done <- err
	}()
	t.Cleanup(func() { p.finish(nil) })
	select {
	case <-p.r.reached:
	case err := <-p.done:
		t.Fatalf("PutReader(%q, %d bytes) returned (error: %v) after reading only %d bytes of its reader", key, len(data), err, p.r.off)
	}
	return p
}

// finish releases the reader (making it fail with err, if not nil) and
// waits for the Put's result. It may be called more than once.
func (p *inFlight) finish(err error) error {
	if p.once {
		return nil
	}
	p.once = true
	p.r.err = err
	close(p.r.release)
	return <-p.done
}

// atomic: an object is invisible until whole; a canceled or failed Put leaves
// nothing (or the old object) behind.
func (s *suite) atomic(t T) {
	// Large enough that a multipart driver has sent whole parts by the
	// gate at 9 MiB (S3 parts are at least 5 MiB, the transfer manager's
	// 8 MiB), small enough to stay quick.
	size := min(s.h.LargeObject, 12<<20)
	size = max(size, 64<<10)
	gate := int(size * 3 / 4)
	old := payload(777, 7)

	// hidden checks, while a Put of key is in flight, that the bucket shows
	// either nothing under key (oldData nil) or the whole old object.
	hidden := func(t T, b *blob.Bucket, key string, oldData []byte) {
		t.Helper()
		ctx := t.Context()
		when := "while a Put of it is in flight"
		if oldData == nil {
			_, err := b.Stat(ctx, key)
			wantNotExist(t, err, key, fmt.Sprintf("Stat(%q) %s", key, when))
			_, err = b.ReadAll(ctx, key)
			wantNotExist(t, err, key, fmt.Sprintf("ReadAll(%q) %s", key, when))
			if got := listKeysNow(t, b, ""); len(got) != 0 {
				t.Errorf("List %s: %s, want nothing (no partial object, no temporary or upload object under any key)", when, quoteKeys(got, 5))
			}
			return
		}
		if a, err := b.Stat(ctx, key); err != nil {
			t.Errorf("Stat(%q) %s: %v", key, when, err)
		} else if a.Size != int64(len(oldData)) {
			t.Errorf("Stat(%q).Size %s = %d, want the old object's %d", key, when, a.Size, len(oldData))
		}
		wantContent(t, b, key, oldData, when+" (the old object must read whole)")
		if got := listKeysNow(t, b, ""); len(got) != 1 || got[0] != key {
			t.Errorf("List %s: %s, want just [%q]", when, quoteKeys(got, 5), key)
		}
	}
	// after checks that a Put which failed left the bucket as it was.
	after := func(t T, b *blob.Bucket, key string, oldData []byte, why string) {
		t.Helper()
		ctx := t.Context()
		if oldData == nil {
			_, err := b.Stat(ctx, key)
			wantNotExist(t, err, key, fmt.Sprintf("Stat(%q) after %s", key, why))
			if got := listKeysNow(t, b, ""); len(got) != 0 {
				t.Errorf("List after %s: %s, want nothing", why, quoteKeys(got, 5))
			}
			return
		}
		wantContent(t, b, key, oldData, "after "+why+" (the old object must be intact)")
		if got := listKeysNow(t, b, ""); len(got) != 1 || got[0] != key {
			t.Errorf("List after %s: %s, want just [%q]", why, quoteKeys(got, 5), key)
		}
	}

	for _, overwrite := range []bool{false, true} {
		name := map[bool]string{false: "New", true: "Overwrite"}[overwrite]
		setup := func(t T) (env, []byte) {
			e := s.bucket(t)
			if !overwrite {
				return e, nil
			}
			put(t, e.b, "atomic/object", old)
			s.settle(t, e.b, "", []string{"atomic/object"}, "before overwriting")
			return e, old
		}
		t.Run("InvisibleWhileWriting"+name, func(t T) {
			e, oldData := setup(t)
			const key = "atomic/object"
			data := payload(size, 1)
			p := startPut(t, t.Context(), e.b, key, data, gate)
			hidden(t, e.b, key, oldData)
			if err := p.finish(nil); err != nil {
				t.Fatalf("PutReader(%q): %v", key, err)
			}
			wantContent(t, e.b, key, data, "after the Put returned")
		})
		t.Run("Canceled"+name, func(t T) {
			e, oldData := setup(t)
			const key = "atomic/object"
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			// Cancel with the body half read, then hand over the rest:
			// the driver has every byte, but its caller gave up first.
			p := startPut(t, ctx, e.b, key, payload(size, 2), gate)
			cancel()
			err := p.finish(nil)
			switch {
			case err == nil:
				t.Errorf("PutReader(%q) succeeded although its context was canceled before its reader was done; want an error matching context.Canceled and nothing stored", key)
			case !errors.Is(err, context.Canceled):
				t.Errorf("PutReader(%q) with its context canceled mid-body: %v (code %v); want an error matching context.Canceled", key, err, blob.CodeOf(err))
			}
			after(t, e.b, key, oldData, "a canceled Put")
		})
		t.Run("FailedReader"+name, func(t T) {
			e, oldData := setup(t)
			const key = "atomic/object"
			injected := errors.New("conformance: injected reader failure")
			p := startPut(t, t.Context(), e.b, key, payload(size, 3), gate)
			if err := p.finish(injected); err == nil {
				t.Errorf("PutReader(%q) succeeded although its reader failed half way", key)
			}
			after(t, e.b, key, oldData, "a Put whose reader failed")
		})
	}
}

// rangedRead: NewRangeReader's offsets and lengths.
func (s *suite) rangedRead(t T) {
	e := s.bucket(t)
	const key, empty = "ranged/object", "ranged/empty"
	const n = 1000
	data := payload(n, 5)
	put(t, e.b, key, data)
	put(t, e.b, empty, nil)
	cases := []struct {
		name           string
		key            string
		offset, length int64
	}{
		{"Whole", key, 0, -1},
		{"OffsetToEnd", key, 100, -1},
		{"Middle", key, 100, 200},
		{"Head", key, 0, 10},
		{"FirstByte", key, 0, 1},
		{"LastByte", key, n - 1, 1},
		{"LastByteToEnd", key, n - 1, -1},
		{"Exact", key, 0, n},
		{"LengthPastEnd", key, 900, 500},
		{"HugeLength", key, 10, 1 << 40},
		{"ZeroLength", key, 500, 0},
		{"AtEnd", key, n, -1},
		{"AtEndWithLength", key, n, 10},
		{"PastEnd", key, n + 4000, 10},
		{"PastEndToEnd", key, n + 4000, -1},
		{"EmptyWhole", empty, 0, -1},
		{"EmptyWithLength", empty, 0, 10},
		{"EmptyPastEnd", empty, 3, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t T) {
			obj := data
			if c.key == empty {
				obj = nil
			}
			lo := min(c.offset, int64(len(obj)))
			hi := int64(len(obj))
			if c.length >= 0 {
				hi = min(hi, lo+c.length)
			}
			want := obj[lo:hi]
			got, err := e.b.ReadRange(t.Context(), c.key, c.offset, c.length)
			if err != nil {
				t.Fatalf("ReadRange(%q, offset %d, length %d): %v", c.key, c.offset, c.length, err)
			}
			if d := diffBytes(got, want); d != "" {
				t.Errorf("ReadRange(%q, offset %d, length %d): %s", c.key, c.offset, c.length, d)
			}
		})
	}
	t.Run("NegativeOffset", func(t T) {
		_, err := e.b.NewRangeReader(t.Context(), key, -1, 10)
		wantErr(t, err, blob.ErrInvalidArgument, fmt.Sprintf("NewRangeReader(%q, offset -1)", key))
	})
	t.Run("Reader", func(t T) {
		// The reader behaves as io.Reader says: short reads, EOF, reads
		// after EOF.
		for _, r := range [][2]int64{{0, -1}, {123, 456}} {
			rc, err := e.b.NewRangeReader(t.Context(), key, r[0], r[1])
			if err != nil {
				t.Fatalf("NewRangeReader(%q, %d, %d): %v", key, r[0], r[1], err)
			}
			hi := int64(n)
			if r[1] >= 0 {
				hi = r[0] + r[1]
			}
			if err := iotest.TestReader(rc, data[r[0]:hi]); err != nil {
				t.Errorf("NewRangeReader(%q, %d, %d): %v", key, r[0], r[1], err)
			}
			if err := rc.Close(); err != nil {
				t.Errorf("closing the reader of %q: %v", key, err)
			}
		}
	})
}

// notExist: missing keys are ErrNotExist, naming the key.
func (s *suite) notExist(t T) {
	e := s.bucket(t)
	ctx := t.Context()
	// A key only other keys are "under": on a file system it is a
	// directory, which is still not an object.
	put(t, e.b, "notexist/dir/child", []byte("child"))
	for _, key := range []string{"notexist/no such key ✓", "notexist/dir"} {
		_, err := e.b.Stat(ctx, key)
		wantNotExist(t, err, key, fmt.Sprintf("Stat(%q) of a missing key", key))
		_, err = e.b.ReadAll(ctx, key)
		wantNotExist(t, err, key, fmt.Sprintf("ReadAll(%q) of a missing key", key))
		_, err = e.b.ReadRange(ctx, key, 5, 10)
		wantNotExist(t, err, key, fmt.Sprintf("ReadRange(%q, 5, 10) of a missing key", key))
		_, err = e.b.ReadRange(ctx, key, 0, 0)
		wantNotExist(t, err, key, fmt.Sprintf("ReadRange(%q, 0, 0) of a missing key", key))
		if ok, err := e.b.Exists(ctx, key); ok || err != nil {
			t.Errorf("Exists(%q) of a missing key = %v, %v; want false, nil", key, ok, err)
		}
	}
	wantContent(t, e.b, "notexist/dir/child", []byte("child"), "after reading its parent \"directory\"")
	// Keys are bytes: another case of an existing key is a missing key (a
	// case-insensitive store or file system finds the existing one).
	put(t, e.b, "notexist/case/Key", []byte("Key"))
	for _, key := range []string{"notexist/case/key", "notexist/case/KEY", "notexist/Case/Key"} {
		_, err := e.b.Stat(ctx, key)
		wantNotExist(t, err, key, fmt.Sprintf("Stat(%q), where only %q exists (keys are case-sensitive)", key, "notexist/case/Key"))
		_, err = e.b.ReadAll(ctx, key)
		wantNotExist(t, err, key, fmt.Sprintf("ReadAll(%q), where only %q exists (keys are case-sensitive)", key, "notexist/case/Key"))
	}
}

// tricky are keys that break drivers which build paths or URLs from keys
// carelessly. None is a "directory" of another.
var tricky = []string{
	"keys/unicode ✓ 日本語 éà 😀",
	"keys/spaces in  the name",
	"keys/percent%2Fnot-a-slash",
	"keys/percent%zz",
	"keys/plus+is not space",
	"keys/query?x=1&y=2#fragment",
	"keys/quotes'\"`",
	"keys/brackets[]{}()<>",
	"keys/punct!$*,;:=@^|~",
	"keys/.hidden",
	"keys/...three-dots",
	"keys/looks-temporary.tmp",
	"keys/UPPER and lower",
	"keys/deep/er/and/deeper/still",
}

// keys: unusual but valid keys round-trip and list; invalid ones are refused.
func (s *suite) keys(t T) {
	t.Run("Tricky", func(t T) {
		e := s.bucket(t)
		for i, k := range tricky {
			data := fmt.Appendf(nil, "object %d", i)
			a := put(t, e.b, k, data)
			if a.Key != k {
				t.Errorf("Put(%q) returned Attrs.Key %q", k, a.Key)
			}
			if st, err := e.b.Stat(t.Context(), k); err != nil {
				t.Errorf("Stat(%q): %v", k, err)
			} else if st.Key != k || st.Size != int64(len(data)) {
				t.Errorf("Stat(%q) = key %q size %d, want size %d", k, st.Key, st.Size, len(data))
			}
			wantContent(t, e.b, k, data, "after Put")
		}
		s.settle(t, e.b, "", sortedCopy(tricky), "after putting every tricky key")
		if err := e.b.Delete(t.Context(), tricky...); err != nil {
			t.Fatalf("Delete of the tricky keys: %v", err)
		}
		s.settle(t, e.b, "", nil, "after deleting every tricky key")
	})
	t.Run("UnicodeNormalization", func(t T) {
		// Keys are bytes: the NFC and NFD spellings of "é" are two keys
		// (a store or file system that normalizes makes them alias).
		e := s.bucket(t)
		nfc, nfd := "keys/caf\u00e9", "keys/cafe\u0301"
		put(t, e.b, nfc, []byte("nfc"))
		put(t, e.b, nfd, []byte("nfd"))
		wantContent(t, e.b, nfc, []byte("nfc"), "NFC key after putting its NFD twin")
		wantContent(t, e.b, nfd, []byte("nfd"), "NFD key after putting its NFC twin")
		s.settle(t, e.b, "", sortedCopy([]string{nfc, nfd}), "after putting NFC and NFD keys")
	})
	t.Run("Case", func(t T) {
		// Keys are bytes: keys that differ only by case are distinct
		// objects, each with its own content (a case-insensitive store
		// or file system makes them alias, the last Put winning). Checked
		// by reads here, independently of the listings of
		// ListLiteralPrefix.
		e := s.bucket(t)
		ctx := t.Context()
		spellings := []string{"keys/case/Name", "keys/case/name", "keys/case/NAME", "keys/Case/name"}
		for _, k := range spellings {
			put(t, e.b, k, []byte("content of "+k))
		}
		for _, k := range spellings {
			wantContent(t, e.b, k, []byte("content of "+k), "after putting every spelling of the key in another case")
			if st, err := e.b.Stat(ctx, k); err != nil {
				t.Errorf("Stat(%q): %v", k, err)
			} else if st.Size != int64(len("content of "+k)) {
				t.Errorf("Stat(%q).Size = %d, want %d", k, st.Size, len("content of "+k))
			}
		}
		if err := e.b.Delete(ctx, spellings[0]); err != nil {
			t.Fatalf("Delete(%q): %v", spellings[0], err)
		}
		for _, k := range spellings[1:] {
			wantContent(t, e.b, k, []byte("content of "+k), fmt.Sprintf("after deleting %q", spellings[0]))
		}
	})
	t.Run("Long", func(t T) {
		// As long as fits MaxKeyLen with the bucket's prefix and some room
		// (at most 900 bytes), in segments of at most 200 bytes, so a file
		// system's 255-byte name limit with a temporary suffix still fits.
		e := s.bucket(t)
		n := min(900, blob.MaxKeyLen-len(e.b.Prefix())-64)
		var sb strings.Builder
		sb.WriteString("keys/long")
		for seg := 0; sb.Len() < n; seg++ {
			sb.WriteByte('/')
			w := min(200, n-sb.Len())
			sb.WriteString(strings.Repeat(string(rune('a'+seg)), max(w, 1)))
		}
		key := sb.String()
		data := []byte("long key")
		put(t, e.b, key, data)
		wantContent(t, e.b, key, data, fmt.Sprintf("%d-byte key", len(key)))
		s.settle(t, e.b, "", []string{key}, fmt.Sprintf("after putting a %d-byte key", len(key)))
		if err := e.b.Delete(t.Context(), key); err != nil {
			t.Errorf("Delete of a %d-byte key: %v", len(key), err)
		}
	})
	t.Run("Invalid", func(t T) {
		// Bucket refuses these before the driver sees them; the check is
		// here so that a refusal is never mistaken for a missing key.
		e := s.bucket(t)
		for _, k := range []string{"", "/abs", "dir/", "a//b", "a/./b", "a/../b", "nul\x00", strings.Repeat("x", blob.MaxKeyLen+1)} {
			_, err := e.b.Put(t.Context(), k, []byte("x"), nil)
			wantErr(t, err, blob.ErrInvalidKey, fmt.Sprintf("Put(%q)", k))
			_, err = e.b.Stat(t.Context(), k)
			wantErr(t, err, blob.ErrInvalidKey, fmt.Sprintf("Stat(%q)", k))
			if errors.Is(err, blob.ErrNotExist) {
				t.Errorf("Stat(%q) of an invalid key matches ErrNotExist; it must not", k)
			}
		}
		s.settle(t, e.b, "", nil, "after refused Puts of invalid keys")
	})
}
