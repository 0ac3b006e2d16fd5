package reader

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/testkit/testenv"
)

// TestNoSilentLoss deletes one random segment of a random chained log (and
// sometimes GCs first) and reads a random range: the read either fails or
// returns every event the range holds, never fewer. Writers with a state
// object publish their last seq; for writers without one the last segment
// is not deleted (the weaker rule cannot see it: a writer that wrote no
// more looks the same). REDOKIT_LOSS_TRIALS sets the number of trials
// (default 100).
func TestNoSilentLoss(t *testing.T) {
	trials := testenv.Count(t, "REDOKIT_LOSS_TRIALS", 100)
	if testing.Short() {
		trials = min(trials, 20)
	}
	rng := rand.New(rand.NewPCG(20261203, 12))
	caught := 0
	for trial := range trials {
		ctx := context.Background()
		b := newMem(t)
		if trial%4 == 0 {
			b = newLocal(t)
		}
		var all []seg
		var keys []string
		var deletable []int
		for w := range 1 + rng.IntN(3) {
			writer := fmt.Sprintf("w%d", w)
			withState := rng.IntN(3) > 0
			var segs []seg
			ts := uint64(10 + rng.IntN(20))
			for k := range 2 + rng.IntN(6) {
				base := ts
				if k > 0 && rng.IntN(4) == 0 {
					base = uint64(5 + rng.IntN(int(ts))) // a catch-up run below what came before
				}
				n := 1 + rng.IntN(6)
				var evs []*codec.Event
				for i := range n {
					evs = append(evs, row(base+uint64(i*3), "t"+writer, int64(trial*1000+k*10+i), "v"))
				}
				ts = max(ts, base+uint64(n*3)+1)
				segs = append(segs, seg{writer: writer, seq: uint64(k + 1), events: evs, raw: rng.IntN(2) == 0})
			}
			ks := publish(t, b, segs, withState)
			for i := range segs {
				if withState || i < len(segs)-1 {
					deletable = append(deletable, len(all)+i)
				}
			}
			all = append(all, segs...)
			keys = append(keys, ks...)
		}
		victim := deletable[rng.IntN(len(deletable))]
		if err := b.Delete(ctx, keys[victim]); err != nil {
			t.Fatal(err)
		}
		var lo, hi uint64 = 1 << 62, 0
		for _, s := range all {
			for _, ev := range s.events {
				lo, hi = min(lo, ev.CommitTs()), max(hi, ev.CommitTs())
			}
		}
		start := lo - 1 + uint64(rng.IntN(int(hi-lo+2)))
		end := hi + 1
		if start >= end {
			start = end - 1
		}
		if rng.IntN(3) == 0 && start > 0 {
			// GC below a checkpoint at or below the read's start, as in
			// normal use: what it removes, the read does not need.
			cp := 1 + uint64(rng.IntN(int(start)))
			if _, err := gcBelow(t, ctx, b, cp); err != nil {
				t.Fatal(err)
			}
		}
		// Verify proves the chains from 0 (no meta object): the deleted
		// segment is always missing there.
		rep, err := Verify(ctx, b, testLog, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK() {
			t.Fatalf("trial %d: Verify is clean after deleting %s", trial, keys[victim])
		}
		full := expect(all, start, end, false)
		out, _, err := readAll(t, b, &Options{LogID: testLog, StartTs: start, EndTs: end})
		if err != nil {
			if !errors.Is(err, ErrIncomplete) && !blob.IsNotExist(err) {
				t.Fatalf("trial %d: deleting %s, reading (%d, %d]: unexpected error %v", trial, keys[victim], start, end, err)
			}
			caught++
			continue
		}
		if len(out) != len(full) {
			t.Fatalf("trial %d: deleting %s, reading (%d, %d]: %d events without an error, want %d", trial, keys[victim], start, end, len(out), len(full))
		}
		equalGot(t, out, full)
	}
	t.Logf("%d trials, %d reads refused, the others complete", trials, caught)
}
