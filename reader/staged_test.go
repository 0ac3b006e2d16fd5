package reader

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
)

// Staged runs (format version 4): a writer epoch may store events above its
// committed ts before they are resolved; they count only once a durable
// progress frame's committed ts covers them. A fenced epoch's events above
// its fence's committed ts were staged and never committed: no read returns
// them, though its chain (and the fence's MaxTs) holds them, and Verify
// counts them as information.
func TestFencedEpochCutAtCommittedTs(t *testing.T) {
	for _, backend := range []string{"mem", "local"} {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			b := newMem(t)
			if backend == "local" {
				b = newLocal(t)
			}
			l1, err := meta.AcquireWriter(ctx, b, testLog, "z", nil)
			if err != nil {
				t.Fatal(err)
			}
			committed := rows(10, 10, 5, "t", 0) // 10..50, committed at 50
			staged1 := rows(60, 10, 4, "big", 100)
			staged2 := rows(100, 10, 3, "big", 200)
			// Seq 1: the committed rows and a frame committing them, then
			// staged rows of an unresolved transaction and a frame that
			// makes them durable but commits nothing more. Seq 2, begun
			// for staged events, more of them.
			segs := chained(t, []seg{
				{writer: "z", seq: 1, events: slices.Concat(committed, staged1),
					progress: []frameAt{{After: 5, FlushedTs: 50, CommittedTs: 50}, {After: 9, FlushedTs: 50, CommittedTs: 50}}},
				{writer: "z", seq: 2, flags: segment.FlagStaged, events: staged2,
					progress: []frameAt{{After: 3, FlushedTs: 50, CommittedTs: 50}}},
			})
			var keys []string
			for _, s := range segs {
				keys = append(keys, s.write(t, b))
			}
			hcrc, _ := segs[1].crcs(t)
			if err := l1.PublishProgress(ctx, meta.Progress{FlushedTs: 50, Seq: 2, ChainMaxTs: segs[1].chainMax(), CommittedTs: 50, Digest: hcrc}); err != nil {
				t.Fatal(err)
			}
			// Epoch 2 fences epoch 1 at seq 2: chain max 120, committed 50.
			l2, err := meta.AcquireWriter(ctx, b, testLog, "z", nil)
			if err != nil {
				t.Fatal(err)
			}
			st, _, err := meta.ReadWriterState(ctx, b, testLog, "z")
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Fences) != 1 || st.Fences[0].MaxTs != 120 || st.Fences[0].CommittedTs != 50 {
				t.Fatalf("fences %+v, want epoch 1 at max ts 120, committed ts 50", st.Fences)
			}
			if err := l2.PublishProgress(ctx, meta.Progress{FlushedTs: 1000}); err != nil {
				t.Fatal(err)
			}
			// The new epoch writes the transaction again, from its
			// flushed ts 50.
			again := seg{writer: "z", epoch: 2, seq: 3, events: rows(60, 10, 7, "big", 100)}
			writeAll(t, b, []seg{again})

			wantOut := expect([]seg{{writer: "z", seq: 1, events: committed}, again}, 0, 1000, false)
			for _, opts := range []Options{{}, {Raw: true}, {KeepDuplicates: true}, {StartTs: 55}} {
				opts.LogID, opts.EndTs = testLog, 1000
				out, st, err := readAll(t, b, &opts)
				if err != nil {
					t.Fatal(err)
				}
				equalGot(t, out, expect([]seg{{writer: "z", seq: 1, events: committed}, again}, opts.StartTs, 1000, false))
				for _, g := range out {
					if strings.HasPrefix(g.key, testLog+"/seg/z/0000000000000001-") {
						if g.ts > 50 {
							t.Fatalf("returned %v of fenced epoch 1, above its committed ts 50", g)
						}
					}
				}
				if opts.StartTs == 0 && st.AboveFence != 2 {
					t.Errorf("AboveFence %d, want 2", st.AboveFence)
				}
			}
			out, _, err := readBatches(t, b, &Options{LogID: testLog, EndTs: 1000}, 3)
			if err != nil {
				t.Fatal(err)
			}
			equalGot(t, out, wantOut)

			rep, err := Verify(ctx, b, testLog, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK() {
				t.Fatalf("Verify: %v", rep.Problems)
			}
			if rep.Uncommitted != 7 {
				t.Errorf("Verify counts %d uncommitted events, want 7", rep.Uncommitted)
			}
			var found bool
			for _, p := range rep.Problems {
				if p.Kind == ProblemStaged {
					found = p.Severity == Info && p.Key == layout.WriterState(testLog, "z") &&
						strings.Contains(p.Detail, "epoch 1 ") && strings.Contains(p.Detail, "holds 7 events above its committed ts 50")
				}
			}
			if !found || !hasProblemSev(rep, ProblemFenced, keys[0], Info) || !hasProblemSev(rep, ProblemFenced, keys[1], Info) {
				t.Errorf("Verify does not report the staged events of epoch 1: %v", rep.Problems)
			}
		})
	}
}

// bigTxn is one writer epoch's log around a transaction at commit ts 100
// split into n point segments [100, 100] (a writer's size split, or staged
// runs): seq 1 holds 10..50, seqs 2..n+1 the transaction (a DDL of ts 100
// among the rows of one of them), seq n+2 holds 110..150.
func bigTxn(writer string, epoch uint64, n int) []seg {
	segs := []seg{{writer: writer, epoch: epoch, seq: 1, events: rows(10, 10, 5, "t", 0)}}
	for k := range n {
		evs := rows(100, 0, 40, "big", int64(1000+100*k))
		if k == 2 {
			// A DDL of ts 100 before rows of it: delivered after every row
			// of 100, whatever segment holds them.
			evs = append([]*codec.Event{ddl(100, "big", "ALTER TABLE big ADD c int")}, evs...)
		}
		segs = append(segs, seg{writer: writer, epoch: epoch, seq: uint64(k + 2), events: evs, blockSize: 1 << 10})
	}
	return append(segs, seg{writer: writer, epoch: epoch, seq: uint64(n + 2), events: rows(110, 10, 5, "t", 100)})
}

// The point segments of one commit ts are opened one after another (plus
// Lookahead), not all at once: a transaction split into any number of
// segments costs the streams of one.
func TestEqualTsFanIn(t *testing.T) {
	const n = 16
	b := newMem(t)
	segs := bigTxn("w", 1, n)
	writeAll(t, b, segs)
	for _, look := range []int{-1, 1, 3} {
		for _, batch := range []bool{false, true} {
			opts := &Options{LogID: testLog, EndTs: 1000, Lookahead: look, Prefetch: 1}
			var out []got
			var st Stats
			var err error
			if batch {
				out, st, err = readBatches(t, b, opts, 7)
			} else {
				out, st, err = readAll(t, b, opts)
			}
			if err != nil {
				t.Fatal(err)
			}
			equalGot(t, out, expect(segs, 0, 1000, false))
			if want := 1 + max(look, 0); st.MaxOpenStreams > want {
				t.Errorf("lookahead %d: %d streams open at once, want at most %d", look, st.MaxOpenStreams, want)
			}
			if st.SegmentsOpened != len(segs) || st.Events != int64(len(out)) || st.Events != int64(5+5+40*n+1) {
				t.Errorf("lookahead %d: %+v", look, st)
			}
			// The segments of one writer epoch partition its events: the
			// duplicate filter has nothing to do.
			if st.Hashed != 0 || st.Duplicates != 0 {
				t.Errorf("lookahead %d: %d events hashed, %d duplicates, want none", look, st.Hashed, st.Duplicates)
			}
		}
	}
}

// Point segments of a ts among other segments holding it: every event once,
// in order, rows before the DDLs of each ts.
func TestEqualTsFanInAmongOthers(t *testing.T) {
	b := newMem(t)
	segs := bigTxn("w", 1, 6)
	// Writer v: a segment whose range spans ts 100, holding rows and a DDL
	// of it, and point segments of 100 of its own.
	segs = append(segs,
		seg{writer: "v", seq: 1, events: slices.Concat(rows(90, 5, 3, "u", 0), rows(100, 0, 3, "u", 10), []*codec.Event{ddl(100, "u", "ALTER TABLE u ADD d int")}, rows(105, 5, 3, "u", 20))},
		seg{writer: "v", seq: 2, events: rows(100, 0, 5, "u", 30)},
		seg{writer: "v", seq: 3, events: rows(100, 0, 5, "u", 40)},
	)
	writeAll(t, b, segs)
	for _, look := range []int{-1, 1} {
		out, st, err := readAll(t, b, &Options{LogID: testLog, EndTs: 1000, Lookahead: look})
		if err != nil {
			t.Fatal(err)
		}
		equalGot(t, out, expect(segs, 0, 1000, false))
		if st.MaxOpenStreams > 2+max(look, 0) {
			t.Errorf("%d streams open at once", st.MaxOpenStreams)
		}
	}
}

// Copies across point segments of one ts that are opened one after another
// are still duplicates: whether the ts needs the duplicate filter is decided
// with the point segments not yet opened counted in.
func TestEqualTsDedupAcrossWriters(t *testing.T) {
	b := newMem(t)
	segs := bigTxn("w", 1, 4)
	// Writer x rewrote the part of the transaction w's seq 3 holds (a
	// failover), in a point segment of its own.
	segs = append(segs, seg{writer: "x", seq: 1, events: segs[2].events})
	writeAll(t, b, segs)
	for _, look := range []int{-1, 1} {
		out, st, err := readAll(t, b, &Options{LogID: testLog, EndTs: 1000, Lookahead: look})
		if err != nil {
			t.Fatal(err)
		}
		equalGot(t, out, expect(segs, 0, 1000, false))
		if st.Duplicates != int64(len(segs[2].events)) {
			t.Errorf("%d duplicates dropped, want %d", st.Duplicates, len(segs[2].events))
		}
	}
}

// The duplicate filter runs at a ts only across units that can hold copies
// of each other: segments of different writer epochs, a catch-up segment,
// a segment older than format version 4. Within one epoch the other
// segments partition its events, so identical events there are distinct
// changes.
func TestDedupScope(t *testing.T) {
	const n = 6
	txn := bigTxn("w", 1, n) // seq 1, the transaction in seqs 2..7, seq 8
	copyOf := func(s seg, writer string, epoch, seq uint64) seg {
		return seg{writer: writer, epoch: epoch, seq: seq, events: s.events, blockSize: s.blockSize}
	}
	// Identical rows in two segments of epoch 1: two changes.
	twice := row(100, "nokey", 1, "same")
	withTwice := slices.Clone(txn)
	withTwice[1].events = append(slices.Clone(withTwice[1].events), twice)
	withTwice[4].events = append(slices.Clone(withTwice[4].events), twice)

	cases := []struct {
		name   string
		segs   []seg
		hashed bool
		dups   int
	}{
		{name: "one epoch", segs: txn},
		{name: "one epoch, identical rows in two segments", segs: withTwice},
		{
			// Epoch 2 of w wrote the transaction again (a restart from the
			// checkpoint): its copies are duplicates.
			name:   "two epochs",
			segs:   append(slices.Clone(txn), copyOf(txn[2], "w", 2, 1), copyOf(txn[3], "w", 2, 2), copyOf(txn[4], "w", 2, 3)),
			hashed: true, dups: 3*40 + 1,
		},
		{
			// The same with the rows written twice by epoch 1: epoch 2's
			// one copy is a duplicate, epoch 1's two are two changes.
			name:   "two epochs, identical rows in two segments",
			segs:   append(slices.Clone(withTwice), seg{writer: "w", epoch: 2, seq: 1, events: []*codec.Event{twice}}),
			hashed: true, dups: 1,
		},
		{
			// A catch-up segment of epoch 1 (seq 9, a span re-added behind
			// the writer) holding copies of what seq 3 holds.
			name:   "catch-up segment",
			segs:   append(slices.Clone(txn), seg{writer: "w", seq: 9, events: txn[2].events, flags: segment.FlagCatchUp}),
			hashed: true, dups: 40,
		},
		{
			// The catch-up segment is one of the point segments of ts 100
			// the merge opens one after another: their headers decide.
			name: "catch-up point segment among the transaction's",
			segs: func() []seg {
				segs := slices.Clone(txn)
				segs[5].flags, segs[5].events = segment.FlagCatchUp, segs[2].events
				return segs
			}(),
			hashed: true, dups: 40,
		},
		{
			// Format version 3: every segment a unit of its own, as before.
			name: "version 3",
			segs: func() []seg {
				segs := slices.Clone(txn)
				for i := range segs {
					segs[i].version = 3
				}
				return append(segs, seg{writer: "w", seq: uint64(len(segs) + 1), version: 3, events: txn[2].events})
			}(),
			hashed: true, dups: 40,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newMem(t)
			writeAll(t, b, tc.segs)
			for _, look := range []int{-1, 1, 3} {
				for _, batch := range []bool{false, true} {
					opts := &Options{LogID: testLog, EndTs: 1000, Lookahead: look}
					var out []got
					var st Stats
					var err error
					if batch {
						out, st, err = readBatches(t, b, opts, 5)
					} else {
						out, st, err = readAll(t, b, opts)
					}
					if err != nil {
						t.Fatal(err)
					}
					equalGot(t, out, expect(tc.segs, 0, 1000, false))
					if (st.Hashed > 0) != tc.hashed || st.Duplicates != int64(tc.dups) {
						t.Errorf("lookahead %d: %d events hashed, %d duplicates; want hashing %v, %d duplicates", look, st.Hashed, st.Duplicates, tc.hashed, tc.dups)
					}
				}
			}
		})
	}
}

// Many overlapping segments of one writer epoch (a writer spilling while a
// span lags): each stream holds the chunk the merge reads and no more, but
// the few the forecast says the merge needs next, which read one chunk
// ahead. Memory is about one chunk per segment, not Prefetch+2.
func TestAdaptivePrefetch(t *testing.T) {
	const runs = 40
	b := newMem(t)
	var segs []seg
	for k := range runs {
		// Run k holds ts 1000+k, 1000+k+runs, ...: every run is at the
		// frontier all the time.
		segs = append(segs, seg{writer: "w", seq: uint64(k + 1), events: rows(uint64(1000+k), runs, 60, "t", int64(1000*k)), blockSize: 1 << 10})
	}
	writeAll(t, b, segs)
	for _, prefetch := range []int{1, 4} {
		for _, batch := range []bool{false, true} {
			opts := &Options{LogID: testLog, EndTs: 1 << 40, Prefetch: prefetch, Concurrency: 1}
			var out []got
			var st Stats
			var err error
			const batchLen = 10
			if batch {
				out, st, err = readBatches(t, b, opts, batchLen)
			} else {
				out, st, err = readAll(t, b, opts)
			}
			if err != nil {
				t.Fatal(err)
			}
			equalGot(t, out, expect(segs, 0, 1<<40, false))
			if st.MaxOpenStreams != runs {
				t.Errorf("%d streams open at once, want %d", st.MaxOpenStreams, runs)
			}
			// hotStreams is 6 at Concurrency 1: each reads one chunk
			// ahead (and may have read further while the streams were
			// few); and the events a call returns may hold a chunk each
			// that their stream is through with.
			bound := runs + 3*6 + 1
			if batch {
				bound += batchLen
			}
			if st.MaxChunks > bound {
				t.Errorf("prefetch %d batch %v: %d chunks alive at once, want at most %d (%d streams)", prefetch, batch, st.MaxChunks, bound, runs)
			}
			if st.Blocks < int64(4*runs) {
				t.Errorf("only %d blocks: the test needs several per segment", st.Blocks)
			}
		}
	}
}
