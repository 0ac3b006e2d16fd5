package segment

import (
	"cmp"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/redokit/redokit/internal/layout"
)

const idAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"

func randID(rng *rand.Rand) string {
	for {
		b := make([]byte, 1+rng.IntN(MaxIDLen))
		if rng.IntN(4) == 0 {
			b = b[:min(len(b), 1+rng.IntN(3))] // short IDs hit ".", ".." and friends
		}
		for i := range b {
			b[i] = idAlphabet[rng.IntN(len(idAlphabet))]
		}
		if id := string(b); id != "." && id != ".." {
			return id
		}
	}
}

func randNum(rng *rand.Rand) uint64 {
	switch rng.IntN(5) {
	case 0:
		return 0
	case 1:
		return math.MaxUint64 - rng.Uint64N(3)
	case 2:
		return rng.Uint64N(1000)
	}
	return rng.Uint64()
}

func randName(rng *rand.Rand) Name {
	n := Name{LogID: randID(rng), WriterID: randID(rng), Epoch: randNum(rng), Seq: randNum(rng)}
	if rng.IntN(3) == 0 {
		n.Active = true
		return n
	}
	n.MinTs, n.MaxTs = randNum(rng), randNum(rng)
	if n.MinTs > n.MaxTs {
		n.MinTs, n.MaxTs = n.MaxTs, n.MinTs
	}
	return n
}

// TestNameRoundTrip: ParseName(Format(x)) == x for valid names, and the key
// is a valid portable key of bounded length.
func TestNameRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		n := randName(rng)
		if err := n.Validate(); err != nil {
			t.Fatalf("%+v: %v", n, err)
		}
		key := n.Format()
		got, err := ParseName(key)
		if err != nil {
			t.Fatalf("ParseName(%q): %v", key, err)
		}
		if got != n {
			t.Fatalf("ParseName(%q) = %+v, want %+v", key, got, n)
		}
		if !strings.HasPrefix(key, layout.WriterSegments(n.LogID, n.WriterID)) || !strings.HasPrefix(key, layout.Segments(n.LogID)) {
			t.Fatalf("%q is not under its prefixes", key)
		}
		if len(key) > 2*MaxIDLen+len(layout.SegmentDir)+3+4*numWidth+3+len(SealedExt) {
			t.Fatalf("%q is %d bytes", key, len(key))
		}
	}
}

// TestNameOrder: within one writer, the byte order of keys is (epoch, seq)
// order, an active segment after the sealed ones of its (epoch, seq).
func TestNameOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		names := make([]Name, 50)
		for i := range names {
			n := randName(rng)
			n.LogID, n.WriterID = "log", "w"
			n.Epoch, n.Seq = rng.Uint64N(3)*(math.MaxUint64/3), rng.Uint64N(4)*rng.Uint64N(1<<40)
			names[i] = n
		}
		byKey := slices.Clone(names)
		slices.SortFunc(byKey, func(a, b Name) int { return strings.Compare(a.Format(), b.Format()) })
		byField := slices.Clone(names)
		slices.SortFunc(byField, func(a, b Name) int {
			rank := func(n Name) int {
				if n.Active {
					return 1
				}
				return 0
			}
			return cmp.Or(cmp.Compare(a.Epoch, b.Epoch), cmp.Compare(a.Seq, b.Seq), cmp.Compare(rank(a), rank(b)),
				cmp.Compare(a.MinTs, b.MinTs), cmp.Compare(a.MaxTs, b.MaxTs))
		})
		if !slices.Equal(byKey, byField) {
			t.Fatalf("key order differs from (epoch, seq) order:\n%v\n%v", byKey, byField)
		}
	}
}

// TestNoKeyIsADirectory: no key is a prefix-directory of another, whatever
// the IDs.
func TestNoKeyIsADirectory(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	keys := []string{}
	for range 300 {
		keys = append(keys, randName(rng).Format())
	}
	keys = append(keys,
		Name{LogID: "seg", WriterID: "seg", Active: true}.Format(),
		Name{LogID: "a", WriterID: "seg"}.Format(),
		Name{LogID: "a.seg", WriterID: "b"}.Format(),
	)
	for _, a := range keys {
		for _, b := range keys {
			if strings.HasPrefix(b, a+"/") {
				t.Fatalf("%q is a directory of %q", a, b)
			}
		}
	}
}

func TestParseNameRejects(t *testing.T) {
	z := strings.Repeat("0", 20)
	one := strings.Repeat("0", 19) + "1"
	good := "log/seg/w/" + z + "-" + z + "-" + z + "-" + one + ".seg"
	if _, err := ParseName(good); err != nil {
		t.Fatalf("%q: %v", good, err)
	}
	if _, err := ParseName("log/seg/w/" + z + "-" + one + ".active"); err != nil {
		t.Fatal(err)
	}
	bad := []string{
		"",
		"/",
		"log/seg/w",
		"log/seg/w/",
		"/log/seg/w/" + z + "-" + z + ".active",
		"log/seg/w/x/" + z + "-" + z + ".active",
		"log/SEG/w/" + z + "-" + z + ".active",
		"log/segs/w/" + z + "-" + z + ".active",
		"./seg/w/" + z + "-" + z + ".active",
		"log/seg/../" + z + "-" + z + ".active",
		"log/seg//" + z + "-" + z + ".active",
		"lo g/seg/w/" + z + "-" + z + ".active",
		"log/seg/w:1/" + z + "-" + z + ".active",
		"log/seg/" + strings.Repeat("w", MaxIDLen+1) + "/" + z + "-" + z + ".active",
		"log/seg/w/" + z + "-" + z + ".seg",                                     // sealed without ts
		"log/seg/w/" + z + "-" + z + "-" + z + "-" + z + ".active",              // active with ts
		"log/seg/w/" + z + "-" + z + "-" + one + "-" + z + ".seg",               // min > max
		"log/seg/w/" + z[1:] + "-" + z + "-" + z + "-" + z + "0.seg",            // 19 + 21 digits
		"log/seg/w/" + z + "-" + z + "-" + z + "-" + z + ".SEG",                 // extension case
		"log/seg/w/" + z + "-" + z + "-" + z + "-" + z + ".seg.tmp",             // suffix
		"log/seg/w/" + z + "_" + z + "-" + z + "-" + z + ".seg",                 // separator
		"log/seg/w/" + z + "-" + z + "-" + z + "--" + z[1:] + ".seg",            // sign
		"log/seg/w/" + z + "-" + z + "-" + z + "-" + "18446744073709551616.seg", // 2^64
		"log/seg/w/" + z + "-" + z + "-" + z + "-" + "99999999999999999999.seg",
		"log/seg/w/" + z + "-" + "+0000000000000000001.active",
		"log/seg/w/" + z + "-" + "0000000000000000000١.active", // Arabic-Indic digit
		"log/seg/w/" + z + "-" + z + "-" + z + "-" + z + ".seg\x00",
	}
	for _, s := range bad {
		if n, err := ParseName(s); err == nil || !errors.Is(err, ErrInvalidName) {
			t.Errorf("ParseName(%q) = %+v, %v; want ErrInvalidName", s, n, err)
		}
	}
	max := "log/seg/w/" + z + "-" + z + "-" + z + "-" + "18446744073709551615.seg"
	if n, err := ParseName(max); err != nil || n.MaxTs != math.MaxUint64 {
		t.Fatalf("ParseName(%q) = %+v, %v", max, n, err)
	}
}

func TestHeaderNames(t *testing.T) {
	h := testHeader(CompressionLZ4)
	a, s := h.ActiveName(), h.SealedName(5, 9)
	for _, n := range []Name{a, s} {
		got, err := ParseName(n.Format())
		if err != nil || got != n || got.Epoch != h.Epoch || got.Seq != h.Seq || got.LogID != h.LogID || got.WriterID != h.WriterID {
			t.Fatalf("%v: %+v, %v", n, got, err)
		}
	}
	if !a.Active || s.Active || s.MinTs != 5 || s.MaxTs != 9 {
		t.Fatalf("active %+v, sealed %+v", a, s)
	}
	if !(s.Format() < a.Format()) {
		t.Fatalf("sealed %q does not sort before active %q", s.Format(), a.Format())
	}
	next := h
	next.Seq++
	if !(a.Format() < next.SealedName(0, 0).Format()) {
		t.Fatal("active name does not sort before the next sequence number")
	}
}

// TestNameEpochSeqZero pins docs/FORMAT.md, Segment names: a key whose
// epoch or seq is 0 parses (every 20-digit number is in the grammar, and
// parse(format(x)) = x), but no segment can be stored under it, since a
// header holding epoch 0 or seq 0 is corruption (TestHeaderEpochSeqZero).
func TestNameEpochSeqZero(t *testing.T) {
	for _, n := range []Name{
		{LogID: "l", WriterID: "w", Epoch: 0, Seq: 1, MinTs: 1, MaxTs: 2},
		{LogID: "l", WriterID: "w", Epoch: 1, Seq: 0, Active: true},
	} {
		got, err := ParseName(n.Format())
		if err != nil || got != n {
			t.Errorf("%s: parsed %+v, %v", n.Format(), got, err)
		}
	}
}

// A bad ID's error names the character that is not allowed, whole: the
// first byte of "é" alone would print as 'Ã'.
func TestValidateIDNamesTheCharacter(t *testing.T) {
	for _, c := range []struct{ id, want string }{
		{"log/1", `has '/' at byte 3`},
		{"caf\u00e9", `has 'é' at byte 3`},
		{"bad\xffid", `has byte 0xff at byte 3`},
	} {
		err := ValidateID(c.id)
		if !errors.Is(err, ErrInvalidName) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ValidateID(%q) = %v, want ErrInvalidName saying %s", c.id, err, c.want)
		}
	}
}
