package codec

import (
	"encoding/binary"
	"testing"
)

// uvarintLen must agree with the encoding at every length boundary.
func TestUvarintLen(t *testing.T) {
	for shift := range 64 {
		for _, v := range []uint64{1<<shift - 1, 1 << shift, 1<<shift + 1} {
			if got, want := uvarintLen(v), len(binary.AppendUvarint(nil, v)); got != want {
				t.Fatalf("uvarintLen(%d) = %d, the encoding is %d bytes", v, got, want)
			}
		}
	}
	if got := uvarintLen(^uint64(0)); got != 10 {
		t.Fatalf("uvarintLen(max) = %d, want 10", got)
	}
}

// EncodedLen and CheckedLen must be exact: the redo writer encodes into a buffer of that
// size and treats any other length as a bug.
func TestEncodedLen(t *testing.T) {
	check := func(name string, ev *Event) {
		t.Helper()
		want := len(AppendEvent(nil, ev))
		if got := EncodedLen(ev); got != want {
			t.Fatalf("%s: EncodedLen %d, AppendEvent %d bytes", name, got, want)
		}
		// The writer sizes its buffer with CheckedLen: an event it accepts
		// has the same exact length.
		if got, err := CheckedLen(ev); err != nil || got != want {
			t.Fatalf("%s: CheckedLen %d, %v; AppendEvent %d bytes", name, got, err, want)
		}
	}
	for name, mk := range goldenEvents {
		check(name, mk())
	}
	g := newGen(7)
	g.bigString = true
	for range 5000 {
		check("random", g.event())
	}
}

func BenchmarkEncodedLen(b *testing.B) {
	ev := goldenEvents["row_all_kinds"]()
	for b.Loop() {
		EncodedLen(ev)
	}
}

func BenchmarkCheckedLen(b *testing.B) {
	ev := goldenEvents["row_all_kinds"]()
	for b.Loop() {
		if _, err := CheckedLen(ev); err != nil {
			b.Fatal(err)
		}
	}
}
