package codec

import "testing"

// TestDecoderLearnedDamage: a Decoder that has learned an event's table
// decodes every truncation and every one-bit change of that event (and of
// events of the same table with other values) exactly as DecodeEvent does:
// its fast path for known column definitions never accepts what the general
// path rejects, nor reads anything else.
func TestDecoderLearnedDamage(t *testing.T) {
	g := newGen(3)
	srcs := [][]byte{AppendEvent(nil, benchRow())}
	for range 10 {
		srcs = append(srcs, AppendEvent(nil, g.event()))
	}
	for _, alias := range []bool{false, true} {
		for _, src := range srcs {
			d := &Decoder{Alias: alias}
			var into Event
			sameResult(t, d, src, &into)
			for n := range len(src) {
				sameResult(t, d, src[:n], &into)
				sameResult(t, d, src, &into)
			}
			bad := make([]byte, len(src))
			for i := range len(src) * 8 {
				copy(bad, src)
				bad[i/8] ^= 1 << (i % 8)
				sameResult(t, d, bad, &into)
				sameResult(t, d, src, &into)
			}
		}
	}
}

// FuzzDecoderLearned decodes arbitrary input with a Decoder that has
// learned the tables of valid events first, as a reader's Decoder has.
func FuzzDecoderLearned(f *testing.F) {
	g := newGen(5)
	var learn [][]byte
	for range 8 {
		learn = append(learn, AppendEvent(nil, g.event()))
	}
	learn = append(learn, AppendEvent(nil, benchRow()))
	// A table whose columns are the rule seeds' ("c" of every date-time
	// kind, with a charset and a collation): mutations of the seeds then
	// reach the fast path with the values the rules are about.
	learn = append(learn, ruleSeeds()...)
	for _, b := range learn {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := &Decoder{Alias: len(data)%2 == 0}
		var into Event
		for _, b := range learn {
			sameResult(t, d, b, &into)
		}
		sameResult(t, d, data, &into)
		sameResult(t, d, data, &into)
	})
}
