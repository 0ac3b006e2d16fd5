package reader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/redokit/redokit/blob"
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

// manyRuns writes n overlapping segments of one writer epoch, their events
// interleaved by commit ts (run k holds 1000+n*j+k), a DDL in every run,
// several blocks each: with Concurrency 1 more streams are open than read
// ahead, so the merge decodes the events of the cold ones (see chunk).
func manyRuns(t *testing.T, n int) (*blob.Bucket, []seg) {
	b := newMem(t)
	var segs []seg
	for k := range n {
		var evs []*codec.Event
		for j := range 120 {
			ts := uint64(1000 + n*j + k)
			if j == 60 {
				evs = append(evs, ddl(ts, fmt.Sprintf("t%d", k%3), "ALTER TABLE t ADD c int"))
				continue
			}
			evs = append(evs, row(ts, fmt.Sprintf("t%d", k%3), int64(1000*k+j), fmt.Sprintf("v%d", j%7)))
		}
		segs = append(segs, seg{writer: "a", seq: uint64(k + 1), events: evs, blockSize: 2 << 10, raw: k%5 == 0})
	}
	writeAll(t, b, segs)
	return b, segs
}

// TestManyStreamsDecoded: a decoded read of more overlapping segments than
// read ahead returns what the sort of their events says, every event
// decoded and intact until the next call, with or without a table filter
// (which the producers apply), in batches of any size.
func TestManyStreamsDecoded(t *testing.T) {
	b, segs := manyRuns(t, 16)
	exp := expect(segs, 0, 1<<40, false)
	for _, max := range []int{1, 50, 5000} {
		ctx := context.Background()
		r, err := Open(ctx, b, &Options{LogID: testLog, EndTs: 1 << 40, Concurrency: 1, Prefetch: 2})
		if err != nil {
			t.Fatal(err)
		}
		var all []got
		for {
			evs, err := r.NextBatch(ctx, max)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs { // after the whole batch is out
				if enc := codec.AppendEvent(nil, &ev.Event); !bytes.Equal(enc, ev.Payload()) {
					t.Fatalf("batches of %d: the event at ts %d re-encodes to %x, its payload is %x", max, ev.CommitTs(), enc, ev.Payload())
				}
				all = append(all, keep(ev))
			}
		}
		st := r.Stats()
		r.Close()
		equalGot(t, all, exp)
		if st.MaxOpenStreams != len(segs) {
			t.Fatalf("%d streams open at once, want all %d (they overlap)", st.MaxOpenStreams, len(segs))
		}
	}
	only := func(tn codec.TableName) bool { return tn.Name == "t1" }
	out, _, err := readAll(t, b, &Options{LogID: testLog, EndTs: 1 << 40, Concurrency: 1, TableFilter: only})
	if err != nil {
		t.Fatal(err)
	}
	var filtered []got
	for _, g := range exp {
		var ev codec.Event
		if err := codec.DecodeEvent([]byte(g.payload), &ev); err != nil {
			t.Fatal(err)
		}
		if only(ev.TableName()) {
			filtered = append(filtered, g)
		}
	}
	equalGot(t, out, filtered)
}

// TestManyStreamsBadRecord: a record whose event does not decode, in one of
// many overlapping segments, fails the read with a *segment.CorruptionError
// naming the segment, its block's offset and the record's index in the
// block, whether its producer or the merge decodes it, also when the read
// starts inside that block.
func TestManyStreamsBadRecord(t *testing.T) {
	for _, startIn := range []bool{false, true} {
		t.Run(fmt.Sprintf("start_in_block=%v", startIn), func(t *testing.T) {
			b, _ := manyRuns(t, 16)
			// Writer z, with no state (so no chain to prove): events
			// among the others', one of which does not decode. It starts
			// above the others, so that it opens after them, cold: the
			// merge decodes its first chunk (and, unless the forecast
			// heats it, the later ones).
			z := seg{writer: "z", seq: 1, blockSize: 2 << 10}
			var buf bytes.Buffer
			sw := z.encode(t, &buf)
			const badTs = 1000 + 16*80 + 3
			for j := 40; j < 120; j++ {
				ts := uint64(1000 + 16*j + 3)
				p := codec.AppendEvent(nil, row(ts, "t", int64(j), "z"))
				if ts == badTs {
					// Its header (format version, kind, commit ts)
					// intact, so only a full decode finds it.
					p = p[:len(p)-1]
				}
				if err := sw.Append(ts, segment.KindRow, p); err != nil {
					t.Fatal(err)
				}
			}
			f, err := sw.Seal()
			if err != nil {
				t.Fatal(err)
			}
			key := z.header().SealedName(f.MinTs, f.MaxTs).Format()
			if _, err := b.Put(context.Background(), key, buf.Bytes(), nil); err != nil {
				t.Fatal(err)
			}
			// The bad record's block and its index there.
			sr, err := segment.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), nil)
			if err != nil {
				t.Fatal(err)
			}
			var blk segment.BlockInfo
			idx, start := -1, uint64(0)
			for i, bi := range sr.Footer().Blocks {
				if bi.MinTs > badTs || bi.MaxTs < badTs {
					continue
				}
				blk = bi
				bl, err := sr.ReadBlock(i)
				if err != nil {
					t.Fatal(err)
				}
				for k := 0; ; k++ {
					rec, ok := bl.Next()
					if !ok {
						break
					}
					if rec.CommitTs == badTs {
						idx = k
						break
					}
					start = rec.CommitTs
				}
			}
			if idx < 2 {
				t.Fatalf("the bad record is record %d of its block: the test needs records before it", idx)
			}
			if !startIn {
				start = 0
			}
			_, _, err = readAll(t, b, &Options{LogID: testLog, StartTs: start, EndTs: 1 << 40, Concurrency: 1, Prefetch: 1})
			var ce *segment.CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("read: %v; want a *segment.CorruptionError", err)
			}
			if want := fmt.Sprintf("record %d (commit ts %d", idx, uint64(badTs)); ce.Object != key || ce.Offset != blk.Offset || !strings.Contains(ce.Detail, want) {
				t.Fatalf("error %v (object %q, offset %d); want object %q, offset %d, %q", err, ce.Object, ce.Offset, key, blk.Offset, want)
			}
		})
	}
}
