package codec

import (
	"encoding/binary"
	"math/rand/v2"
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

// packedDateTimeOK and packedDurationOK are the decoder's and CheckedLen's
// fast verdicts on a packed date, time or duration: each must accept
// exactly what its check does,
// or the writer would acknowledge a value no reader decodes (or refuse a
// good one). Fields near and past every limit, in every combination drawn.
func TestPackedDateTimeOKAgrees(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	pick := func(limit uint64, width uint) uint64 {
		switch r.IntN(4) {
		case 0:
			return limit
		case 1:
			return min(limit+1, 1<<width-1)
		case 2:
			return r.Uint64N(limit + 1)
		}
		return r.Uint64N(1 << width)
	}
	for range 200_000 {
		p := pick(6, 3) | pick(999999, 20)<<dtUsecShift | pick(59, 6)<<dtSecShift |
			pick(59, 6)<<dtMinShift | pick(23, 5)<<dtHourShift | pick(31, 5)<<dtDayShift |
			pick(12, 4)<<dtMonthShift | pick(9999, 14)<<dtYearShift
		if r.IntN(8) == 0 {
			p |= dtReserved
		}
		if r.IntN(4) == 0 {
			p &^= 1<<dtDayShift - 1 // a plain date
		}
		for _, k := range []Kind{KindDate, KindDatetime, KindTimestamp} {
			if ok, msg := packedDateTimeOK(k, p), checkPackedDateTime(k, p); ok != (msg == "") {
				t.Fatalf("%v %#x: packedDateTimeOK %v, checkPackedDateTime %q", k, p, ok, msg)
			}
		}
	}
	// Durations: fsp, and micros at, inside and past ±838:59:59 and off
	// the fsp's step.
	for range 200_000 {
		m := int64(pick(maxDurationMicros, 42))
		if r.IntN(2) == 0 {
			m = -m
		}
		p := uint64(m)<<3 | pick(6, 3)
		if ok, msg := packedDurationOK(p), checkPackedDuration(p); ok != (msg == "") {
			t.Fatalf("duration %#x: packedDurationOK %v, checkPackedDuration %q", p, ok, msg)
		}
	}
}
