package codec

import "testing"

// EncodedLen must be exact: the redo writer encodes into a buffer of that
// size and treats any other length as a bug.
func TestEncodedLen(t *testing.T) {
	check := func(name string, ev *Event) {
		t.Helper()
		if got, want := EncodedLen(ev), len(AppendEvent(nil, ev)); got != want {
			t.Fatalf("%s: EncodedLen %d, AppendEvent %d bytes", name, got, want)
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
