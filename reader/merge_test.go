package reader

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/segment"
)

// Memory is bounded by the segments that overlap the frontier, not by the
// log: four writers with thirty sequential segments each keep at most four
// streams open (five with the lookahead), each with at most Prefetch+2
// decoded blocks.
func TestMemoryBound(t *testing.T) {
	b := newMem(t)
	var segs []seg
	for w := range 4 {
		for k := range 30 {
			base := uint64(1000 + 100*k + w)
			segs = append(segs, seg{writer: fmt.Sprintf("w%d", w), seq: uint64(k + 1),
				events: rows(base, 3, 30, "t", int64(1000*w+100*k))})
		}
	}
	writeAll(t, b, segs)
	for _, prefetch := range []int{1, 2, 5} {
		for _, look := range []int{-1, 1, 3} {
			opts := &Options{LogID: testLog, EndTs: 1 << 40, Prefetch: prefetch, Lookahead: look}
			out, st, err := readAll(t, b, opts)
			if err != nil {
				t.Fatal(err)
			}
			equalGot(t, out, expect(segs, 0, 1<<40, false))
			ahead := max(look, 0)
			if st.MaxOpenStreams > 4+ahead || st.MaxOpenStreams < 4 {
				t.Errorf("prefetch %d lookahead %d: %d streams open at once, want 4 to %d", prefetch, look, st.MaxOpenStreams, 4+ahead)
			}
			if st.MaxChunks > st.MaxOpenStreams*(prefetch+2) {
				t.Errorf("prefetch %d: %d chunks alive at once with %d streams", prefetch, st.MaxChunks, st.MaxOpenStreams)
			}
			if st.SegmentsOpened != len(segs) {
				t.Errorf("opened %d of %d segments", st.SegmentsOpened, len(segs))
			}
			// Many blocks per segment went through far fewer chunks.
			if st.Blocks < int64(2*len(segs)) {
				t.Errorf("only %d blocks for %d segments: the test needs several blocks per segment", st.Blocks, len(segs))
			}
		}
	}
	// The batch API holds no more.
	_, st, err := readBatches(t, b, &Options{LogID: testLog, EndTs: 1 << 40, Prefetch: 2}, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if st.MaxOpenStreams > 5 || st.MaxChunks > st.MaxOpenStreams*4 {
		t.Errorf("batches: %d streams, %d chunks", st.MaxOpenStreams, st.MaxChunks)
	}
}

// Catch-up runs inside one long segment's range are opened one at a time,
// when the frontier reaches each.
func TestCatchUpOpenedLazily(t *testing.T) {
	b := newMem(t)
	segs := []seg{{writer: "a", seq: 1, events: rows(10, 2, 500, "long", 0)}}
	for k := range 10 {
		segs = append(segs, seg{writer: "a", seq: uint64(k + 2), events: rows(uint64(50+90*k), 1, 20, "run", int64(100*k))})
	}
	writeAll(t, b, segs)
	out, st, err := readAll(t, b, &Options{LogID: testLog, EndTs: 1 << 40, Lookahead: -1})
	if err != nil {
		t.Fatal(err)
	}
	equalGot(t, out, expect(segs, 0, 1<<40, false))
	if st.MaxOpenStreams != 2 {
		t.Errorf("%d streams open at once, want 2 (the long segment and one run)", st.MaxOpenStreams)
	}
}

// Property: random segments with random overlapping ranges, random
// duplicates across segments, DDLs among rows, random ranges and options:
// the merged output equals the sort of every event in range.
func TestMergeProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(20250601, 7))
	iters := 60
	if testing.Short() {
		iters = 15
	}
	for it := range iters {
		b := newMem(t)
		local := it%5 == 0
		if local {
			b = newLocal(t)
		}
		segs := randomLog(rng, local)
		writeAll(t, b, segs)
		var lo, hi uint64 = 1 << 62, 0
		for _, s := range segs {
			for _, ev := range s.events {
				lo, hi = min(lo, ev.CommitTs()), max(hi, ev.CommitTs())
			}
		}
		for range 3 {
			start := lo - 1 + uint64(rng.IntN(int(hi-lo+2)))/2
			end := start + 1 + uint64(rng.IntN(int(hi-start+2)))
			keepDups := rng.IntN(3) == 0
			opts := &Options{LogID: testLog, StartTs: start, EndTs: end, KeepDuplicates: keepDups,
				Prefetch: 1 + rng.IntN(4), Lookahead: rng.IntN(3) - 1, Concurrency: 1 + rng.IntN(3), Raw: rng.IntN(4) == 0}
			w := expect(segs, start, end, keepDups)
			var out []got
			var err error
			if rng.IntN(2) == 0 {
				out, _, err = readAll(t, b, opts)
			} else {
				out, _, err = readBatches(t, b, opts, 1+rng.IntN(50))
			}
			if err != nil {
				t.Fatalf("iteration %d, range (%d, %d]: %v", it, start, end, err)
			}
			equalGot(t, out, w)
			if !slices.IsSortedFunc(out, func(a, b got) int { return int(a.ts) - int(b.ts) }) {
				t.Fatal("not sorted")
			}
		}
	}
}

// randomLog makes a few writers' segments: sorted runs with random,
// overlapping ranges, some events at shared ts, some rewritten into other
// segments, some DDLs; on local disk, some active segments, some torn.
func randomLog(rng *rand.Rand, local bool) []seg {
	nw := 1 + rng.IntN(4)
	var pool []*codec.Event // events some later segment may rewrite
	var segs []seg
	id := int64(0)
	for w := range nw {
		writer := fmt.Sprintf("w%d", w)
		nseg := 1 + rng.IntN(5)
		// Seqs go on across epochs, and each epoch's are consecutive (its
		// chain): a takeover may start epoch 2 at any seq.
		epoch := uint64(1)
		for k := range nseg {
			if k > 0 && epoch == 1 && rng.IntN(3) == 0 {
				epoch = 2
			}
			n := 1 + rng.IntN(40)
			base := uint64(10 + rng.IntN(300))
			var evs []*codec.Event
			ts := base
			for range n {
				ts += uint64(rng.IntN(4)) // repeats: several events per ts
				var ev *codec.Event
				switch r := rng.IntN(10); {
				case r == 0:
					ev = ddl(ts, "t", fmt.Sprintf("ALTER %d", id))
				case r <= 2 && len(pool) > 0:
					ev = pool[rng.IntN(len(pool))]
					ts = max(ts, ev.CommitTs())
					if ev.CommitTs() < ts {
						ev = row(ts, "t", id, "fresh")
					}
				default:
					ev = row(ts, fmt.Sprintf("t%d", rng.IntN(3)), id, fmt.Sprintf("v%d", rng.IntN(5)))
				}
				id++
				evs = append(evs, ev)
				pool = append(pool, ev)
			}
			s := seg{writer: writer, epoch: epoch, seq: uint64(k + 1), events: evs,
				blockSize: 100 + rng.IntN(2000), raw: rng.IntN(4) == 0}
			// The duplicate filter's units: a writer epoch's version-4
			// segments, but a catch-up or version-3 segment alone. (Copies
			// from the pool into a segment of the same epoch that is
			// neither are read as distinct changes, as the format says.)
			switch rng.IntN(4) {
			case 0:
				s.flags = segment.FlagCatchUp
			case 1:
				s.version = 3
			}
			if local && k == nseg-1 && rng.IntN(2) == 0 {
				s.active = true
				s.torn = rng.IntN(2) == 0
			}
			segs = append(segs, s)
		}
	}
	return segs
}

// TestEventSize: an Event fills whole cache lines, and what the merge and a
// raw fill touch of it (Source, payload, Kind, a row's commit ts) lies in its
// first line.
func TestEventSize(t *testing.T) {
	var e Event
	if size := unsafe.Sizeof(e); size%cacheLine != 0 {
		t.Errorf("Event is %d bytes, not a multiple of %d: adjust eventPad", size, cacheLine)
	}
	if end := unsafe.Offsetof(e.Event) + unsafe.Offsetof(e.Event.Row) + unsafe.Offsetof(e.Event.Row.CommitTs) + 8; end > cacheLine {
		t.Errorf("a row's commit ts ends at byte %d of an Event", end)
	}
}
