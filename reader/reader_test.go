package reader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/blob/driver"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
)

// scenario is a log with the shapes the reader must handle: three writers,
// several segments each, a catch-up segment overlapping its writer's others,
// DDLs at the ts of rows (in another writer's segment, and before a row of
// the same ts inside one segment), and a failover rewrite duplicating events.
func scenario() []seg {
	a1 := rows(100, 10, 10, "t1", 0)   // 100..190
	a2 := rows(200, 10, 10, "t1", 100) // 200..290
	b1 := append(rows(105, 10, 9, "t2", 1000), ddl(200, "t2", "ALTER TABLE t2 ADD c int"))
	b2 := rows(210, 10, 8, "t2", 2000) // 210..280
	// Writer a again, a catch-up run of span t3 (moved to it from c):
	// overlaps both a1 and a2.
	catchUp := rows(150, 5, 20, "t3", 5000) // 150..245
	// c's original copy of span t3 before it moved: 150..195, so every
	// event of it is also in the catch-up run (a failover rewrite).
	c1 := rows(150, 5, 10, "t3", 5000)
	// A DDL before a row of the same ts in one segment.
	c2 := []*codec.Event{ddl(300, "t4", "CREATE TABLE t4 (id int)"), row(300, "t4", 1, "x"), row(310, "t4", 2, "y")}
	return []seg{
		{writer: "a", seq: 1, events: a1},
		{writer: "a", seq: 2, events: a2},
		{writer: "a", seq: 3, events: catchUp},
		{writer: "b", seq: 1, events: b1},
		{writer: "b", seq: 2, events: b2},
		{writer: "c", seq: 1, events: c1},
		{writer: "c", seq: 2, events: c2},
	}
}

// writeAll writes segs chained (see chained) and returns their keys.
func writeAll(t testing.TB, b *blob.Bucket, segs []seg) []string {
	keys := make([]string, len(segs))
	for i, s := range chained(t, segs) {
		keys[i] = s.write(t, b)
	}
	return keys
}

func TestMergeOrder(t *testing.T) {
	for _, backend := range []string{"mem", "local"} {
		t.Run(backend, func(t *testing.T) {
			b := newMem(t)
			if backend == "local" {
				b = newLocal(t)
			}
			segs := scenario()
			writeAll(t, b, segs)
			for _, rng := range [][2]uint64{{0, 1000}, {99, 100}, {100, 310}, {149, 200}, {199, 200}, {200, 299}, {245, 300}, {290, 309}} {
				opts := &Options{LogID: testLog, StartTs: rng[0], EndTs: rng[1]}
				out, st, err := readAll(t, b, opts)
				if err != nil {
					t.Fatalf("range %v: %v", rng, err)
				}
				w := expect(segs, rng[0], rng[1], false)
				equalGot(t, out, w)
				// Rows before DDLs of the same ts, and never outside the range.
				for i, g := range out {
					if g.ts <= rng[0] || g.ts > rng[1] {
						t.Fatalf("range %v: event at ts %d", rng, g.ts)
					}
					if i > 0 && out[i-1].ts == g.ts && out[i-1].ddl && !g.ddl {
						t.Fatalf("range %v: row after a DDL at ts %d", rng, g.ts)
					}
				}
				if rng == [2]uint64{0, 1000} {
					if st.Duplicates != 10 {
						t.Errorf("dropped %d duplicates, want the 10 events of c's t3 run", st.Duplicates)
					}
					if st.SegmentsSelected != len(segs) {
						t.Errorf("selected %d segments, want %d", st.SegmentsSelected, len(segs))
					}
				}
			}
		})
	}
}

func TestRangeSelectsByName(t *testing.T) {
	b := newMem(t)
	segs := scenario()
	writeAll(t, b, segs)
	before := b.Stats()
	out, st, err := readAll(t, b, &Options{LogID: testLog, StartTs: 290, EndTs: 400})
	if err != nil {
		t.Fatal(err)
	}
	equalGot(t, out, expect(segs, 290, 400, false))
	// Only c2 (300..310) is above 290: a2 ends at 290, and max ts ≤ start
	// is skipped.
	if st.SegmentsSelected != 1 || st.SegmentsOutOfRange != len(segs)-1 || st.SegmentsOpened != 1 {
		t.Errorf("stats %+v: want 1 segment selected and opened", st)
	}
	// The meta object (absent here: still a request), the listing, the
	// writer states, the header of the bottom of each of the three
	// writers' chains (the proof of completeness), one tail read (the
	// segment is small: the tail covers its header), one block stream.
	if d := b.Stats().Sub(before); d.Reads > 6 {
		t.Errorf("%d reads for one small segment", d.Reads)
	}
}

func TestKeepDuplicates(t *testing.T) {
	b := newMem(t)
	segs := scenario()
	writeAll(t, b, segs)
	out, st, err := readAll(t, b, &Options{LogID: testLog, StartTs: 0, EndTs: 1000, KeepDuplicates: true})
	if err != nil {
		t.Fatal(err)
	}
	equalGot(t, out, expect(segs, 0, 1000, true))
	if st.Duplicates != 0 {
		t.Errorf("dropped %d with KeepDuplicates", st.Duplicates)
	}
}

// Copies inside one segment are distinct changes; a copy in another segment
// is a rewrite: the reader delivers the largest per-segment count.
func TestDuplicateMultiplicity(t *testing.T) {
	b := newMem(t)
	x := row(10, "nokey", 1, "same")
	y := row(10, "nokey", 2, "other")
	segs := []seg{
		{writer: "a", seq: 1, events: []*codec.Event{x, x, y}},
		{writer: "b", seq: 1, events: []*codec.Event{x, y, y, x, x}},
		{writer: "c", seq: 1, events: []*codec.Event{x}},
	}
	// Segment order matters inside a ts only through (writer, epoch, seq):
	// sort the events of b so the segment is valid (all at ts 10 anyway).
	writeAll(t, b, segs)
	out, st, err := readAll(t, b, &Options{LogID: testLog, StartTs: 0, EndTs: 100})
	if err != nil {
		t.Fatal(err)
	}
	equalGot(t, out, expect(segs, 0, 100, false))
	nx, ny := 0, 0
	for _, g := range out {
		switch g.payload {
		case want(x).payload:
			nx++
		case want(y).payload:
			ny++
		}
	}
	if nx != 3 || ny != 2 {
		t.Errorf("delivered %d x and %d y, want 3 and 2 (the most any one segment holds)", nx, ny)
	}
	if st.Duplicates != 9-5 {
		t.Errorf("dropped %d, want 4", st.Duplicates)
	}
}

func TestBatchMatchesNext(t *testing.T) {
	b := newLocal(t)
	segs := scenario()
	writeAll(t, b, segs)
	w := expect(segs, 0, 1000, false)
	for _, max := range []int{1, 3, 64, 10000} {
		for _, prefetch := range []int{1, 4} {
			out, _, err := readBatches(t, b, &Options{LogID: testLog, StartTs: 0, EndTs: 1000, Prefetch: prefetch}, max)
			if err != nil {
				t.Fatal(err)
			}
			equalGot(t, out, w)
		}
	}
}

// Events of a batch stay intact until the next call, even when the batch
// spans many recycled chunks.
func TestBatchEventsStayValid(t *testing.T) {
	b := newMem(t)
	segs := scenario()
	writeAll(t, b, segs)
	ctx := context.Background()
	r, err := Open(ctx, b, &Options{LogID: testLog, StartTs: 0, EndTs: 1000, Prefetch: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var all []got
	for {
		evs, err := r.NextBatch(ctx, 1000)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		// Check every event of the batch only now, after the merge went on.
		for _, ev := range evs {
			if enc := codec.AppendEvent(nil, &ev.Event); string(enc) != string(ev.Payload()) {
				t.Fatalf("event at ts %d changed under the caller", ev.CommitTs())
			}
			all = append(all, keep(ev))
		}
	}
	equalGot(t, all, expect(segs, 0, 1000, false))
}

func TestRaw(t *testing.T) {
	b := newMem(t)
	segs := scenario()
	writeAll(t, b, segs)
	out, _, err := readAll(t, b, &Options{LogID: testLog, StartTs: 0, EndTs: 1000, Raw: true})
	if err != nil {
		t.Fatal(err)
	}
	equalGot(t, out, expect(segs, 0, 1000, false))
	if _, err := Open(context.Background(), b, &Options{LogID: testLog, EndTs: 10, Raw: true, TableFilter: func(codec.TableName) bool { return true }}); err == nil {
		t.Error("Raw with TableFilter: no error")
	}
}

// TestRawBatchEventsStayValid: a raw read hands out Events of the Reader's
// own, filled when returned (the chunks hold only ts, kind and payload):
// every Event of a batch, more of them than one slab holds, from overlapping
// segments with DDLs among the rows and a block stored uncompressed, keeps
// its commit ts, kind, payload and source until the next call, and the
// read returns what a decoded one does.
func TestRawBatchEventsStayValid(t *testing.T) {
	b := newMem(t)
	var segs []seg
	for k := range 3 {
		evs := rows(100+uint64(k), 3, 400, fmt.Sprintf("t%d", k), int64(k)*1000)
		evs = append(evs, ddl(1300, fmt.Sprintf("t%d", k), "ALTER TABLE t ADD c int"))
		segs = append(segs, seg{writer: "a", seq: uint64(k + 1), events: evs, blockSize: 4 << 10, raw: k == 1})
	}
	writeAll(t, b, segs)
	exp := expect(segs, 0, 2000, false)
	for _, max := range []int{1, 700, 100000} {
		ctx := context.Background()
		r, err := Open(ctx, b, &Options{LogID: testLog, StartTs: 0, EndTs: 2000, Raw: true})
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
			// Checked only once the whole batch is out.
			for _, ev := range evs {
				var dec codec.Event
				if err := codec.DecodeEvent(ev.Payload(), &dec); err != nil {
					t.Fatalf("event at ts %d: payload does not decode: %v", ev.CommitTs(), err)
				}
				if dec.CommitTs() != ev.CommitTs() || dec.Kind != ev.Kind || ev.Source == nil {
					t.Fatalf("max %d: event says ts %d, %v, source %v; its payload ts %d, %v", max, ev.CommitTs(), ev.Kind, ev.Source, dec.CommitTs(), dec.Kind)
				}
				all = append(all, keep(ev))
			}
		}
		r.Close()
		equalGot(t, all, exp)
	}
}

func TestTableFilter(t *testing.T) {
	b := newMem(t)
	segs := scenario()
	writeAll(t, b, segs)
	only := func(tn codec.TableName) bool { return tn.Name == "t2" || tn.Name == "t4" }
	out, st, err := readAll(t, b, &Options{LogID: testLog, StartTs: 0, EndTs: 1000, TableFilter: only})
	if err != nil {
		t.Fatal(err)
	}
	var filtered []got
	for _, g := range expect(segs, 0, 1000, false) {
		var ev codec.Event
		if err := codec.DecodeEvent([]byte(g.payload), &ev); err != nil {
			t.Fatal(err)
		}
		if only(ev.TableName()) {
			filtered = append(filtered, g)
		}
	}
	equalGot(t, out, filtered)
	if st.Filtered == 0 {
		t.Error("Stats.Filtered is 0")
	}
}

func TestOptionErrors(t *testing.T) {
	b := newMem(t)
	ctx := context.Background()
	if _, err := Open(ctx, b, &Options{LogID: testLog}); !errors.Is(err, ErrNoRange) {
		t.Errorf("no range: %v", err)
	}
	if _, err := Open(ctx, b, nil); err == nil {
		t.Error("nil options: no error")
	}
	if _, err := Open(ctx, b, &Options{LogID: testLog, StartTs: 5, EndTs: 5}); err == nil {
		t.Error("empty range: no error")
	}
	if _, err := Open(ctx, b, &Options{LogID: "bad/id", EndTs: 5}); err == nil {
		t.Error("bad log ID: no error")
	}
	r, err := Open(ctx, b, &Options{LogID: testLog, EndTs: 5})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(ctx); err != io.EOF {
		t.Errorf("empty log: %v, want io.EOF", err)
	}
	r.Close()
}

func TestBadNames(t *testing.T) {
	b := newMem(t)
	segs := scenario()[:2]
	writeAll(t, b, segs)
	bad := testLog + "/seg/a/notes.txt"
	if _, err := b.Put(context.Background(), bad, []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	_, _, err := readAll(t, b, &Options{LogID: testLog, EndTs: 1000})
	if err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("a stray key: %v, want an error naming %q", err, bad)
	}
	out, st, err := readAll(t, b, &Options{LogID: testLog, EndTs: 1000, SkipBadNames: true})
	if err != nil {
		t.Fatal(err)
	}
	equalGot(t, out, expect(segs, 0, 1000, false))
	if st.BadNames != 1 {
		t.Errorf("BadNames %d", st.BadNames)
	}
}

// A zombie: epoch 1 of writer z published seq 1, was fenced by epoch 2, and
// then committed seq 2 anyway. The reader ignores seq 2.
func TestFencedZombie(t *testing.T) {
	ctx := context.Background()
	b := newMem(t)
	l1, err := meta.AcquireWriter(ctx, b, testLog, "z", nil)
	if err != nil {
		t.Fatal(err)
	}
	good := seg{writer: "z", epoch: 1, seq: 1, events: rows(10, 10, 5, "t", 0)}
	good.write(t, b)
	hcrc, _ := good.crcs(t)
	if err := l1.PublishProgress(ctx, meta.Progress{FlushedTs: 50, Seq: 1, ChainMaxTs: good.chainMax(), Digest: hcrc}); err != nil {
		t.Fatal(err)
	}
	l2, err := meta.AcquireWriter(ctx, b, testLog, "z", nil) // epoch 2
	if err != nil {
		t.Fatal(err)
	}
	// Epoch 2 publishes that it is flushed past every ts read here (with
	// no segment of its own named: seq 0), so that the read is proven.
	if err := l2.PublishProgress(ctx, meta.Progress{FlushedTs: 1000}); err != nil {
		t.Fatal(err)
	}
	zombie := seg{writer: "z", epoch: 1, seq: 2, events: rows(60, 10, 5, "t", 100)}
	zombieKey := zombie.write(t, b)
	next := seg{writer: "z", epoch: 2, seq: 1, events: rows(55, 10, 5, "t", 200)}
	next.write(t, b)
	// A writer with no state object: nothing fences it.
	free := seg{writer: "nolease", epoch: 9, seq: 4, events: rows(12, 10, 3, "u", 0)}
	free.write(t, b)

	out, st, err := readAll(t, b, &Options{LogID: testLog, EndTs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	equalGot(t, out, expect([]seg{good, next, free}, 0, 1000, false))
	if st.SegmentsFenced != 1 {
		t.Errorf("SegmentsFenced %d, want 1", st.SegmentsFenced)
	}
	rep, err := Verify(ctx, b, testLog, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || !hasProblem(rep, ProblemFenced, zombieKey) {
		t.Errorf("Verify: %v", rep.Problems)
	}
}

func TestActiveTornTailOnLocal(t *testing.T) {
	b := newLocal(t)
	sealed := seg{writer: "a", seq: 1, events: rows(10, 10, 10, "t", 0)}
	act := seg{writer: "a", seq: 2, events: rows(105, 10, 10, "t", 100), active: true, torn: true}
	other := seg{writer: "b", seq: 1, events: rows(15, 10, 20, "u", 0)}
	segs := []seg{sealed, act, other}
	writeAll(t, b, segs)
	for _, rng := range [][2]uint64{{0, 1000}, {150, 1000}, {0, 100}} {
		out, st, err := readAll(t, b, &Options{LogID: testLog, StartTs: rng[0], EndTs: rng[1]})
		if err != nil {
			t.Fatal(err)
		}
		equalGot(t, out, expect(segs, rng[0], rng[1], false))
		if rng[1] == 1000 && st.TornTails != 1 {
			t.Errorf("TornTails %d", st.TornTails)
		}
	}
}

// An active segment sealed between the listing and the read is read under
// its sealed name.
func TestActiveSealedMeanwhile(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	act := seg{writer: "a", seq: 1, events: rows(10, 10, 10, "t", 0), active: true}
	other := seg{writer: "b", seq: 1, events: rows(15, 10, 10, "u", 0)}
	key := act.write(t, b)
	other.write(t, b)
	c, err := (&Options{LogID: testLog, EndTs: 1000}).resolve(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := listLog(ctx, b, testLog)
	if err != nil {
		t.Fatal(err)
	}
	// The writer seals: the sealed object appears, the active one goes.
	sealed := act
	sealed.active = false
	sealed.write(t, b)
	if err := b.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	p, err := makePlan(c, objs, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := newReader(ctx, b, c, p)
	defer r.Close()
	var out []got
	for ev, err := range r.Events(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, keep(ev))
	}
	equalGot(t, out, expect([]seg{act, other}, 0, 1000, false))
	if out[0].key == key {
		t.Errorf("event read from %q, which no longer exists", key)
	}
}

func TestActiveOnObjectStore(t *testing.T) {
	b := newMem(t)
	act := seg{writer: "a", seq: 1, events: rows(10, 10, 3, "t", 0), active: true}
	key := act.write(t, b)
	_, _, err := readAll(t, b, &Options{LogID: testLog, EndTs: 1000})
	var ce *segment.CorruptionError
	if !errors.As(err, &ce) || ce.Object != key {
		t.Fatalf("active segment on mem: %v, want a corruption error naming %q", err, key)
	}
}

// corrupt flips a byte of the payload of block i of the sealed segment at
// key and returns the block.
func corrupt(t testing.TB, b *blob.Bucket, key string, i int) segment.BlockInfo {
	t.Helper()
	ctx := context.Background()
	data, err := b.ReadAll(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	sr, err := segment.NewReader(bytesReaderAt(data), int64(len(data)), nil)
	if err != nil {
		t.Fatal(err)
	}
	bi := sr.Footer().Blocks[i]
	data[bi.Offset+segment.BlockHeaderSize+2] ^= 0x40
	if _, err := b.Put(ctx, key, data, nil); err != nil {
		t.Fatal(err)
	}
	return bi
}

func TestCorruptSealedSegment(t *testing.T) {
	b := newMem(t)
	segs := scenario()
	keys := writeAll(t, b, segs)
	bi := corrupt(t, b, keys[4], 1) // b2, its second block
	off := bi.Offset
	_, _, err := readAll(t, b, &Options{LogID: testLog, EndTs: 1000})
	var ce *segment.CorruptionError
	if !errors.As(err, &ce) || ce.Object != keys[4] || ce.Offset != off {
		t.Fatalf("got %v, want a corruption error naming %q at offset %d", err, keys[4], off)
	}
	if !strings.Contains(err.Error(), keys[4]) || !strings.Contains(err.Error(), "offset") {
		t.Errorf("message %q does not name the key and offset", err)
	}
	// A range that does not reach the bad block reads fine.
	out, _, err := readAll(t, b, &Options{LogID: testLog, EndTs: bi.MinTs - 1})
	if err != nil {
		t.Fatal(err)
	}
	equalGot(t, out, expect(segs, 0, bi.MinTs-1, false))
}

// A segment whose name claims a range its footer does not hold would make
// the merge open it too late.
func TestNameFooterMismatch(t *testing.T) {
	ctx := context.Background()
	b := newMem(t)
	s := seg{writer: "a", seq: 1, events: rows(10, 10, 5, "t", 0)}
	data, _ := s.sealedBytes(t)
	liar := s.header().SealedName(20, 50).Format()
	if _, err := b.Put(ctx, liar, data, nil); err != nil {
		t.Fatal(err)
	}
	_, _, err := readAll(t, b, &Options{LogID: testLog, EndTs: 1000})
	var ce *segment.CorruptionError
	if !errors.As(err, &ce) || ce.Object != liar || ce.Part != "footer" {
		t.Fatalf("got %v, want a footer corruption error naming %q", err, liar)
	}
}

func TestContextCancel(t *testing.T) {
	b := newMem(t)
	writeAll(t, b, scenario())
	ctx, cancel := context.WithCancel(context.Background())
	r, err := Open(ctx, b, &Options{LogID: testLog, EndTs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Next(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	for {
		_, err := r.Next(context.Background())
		if err == nil {
			continue // already decoded before the cancel
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("after cancel: %v", err)
		}
		break
	}
}

// A canceled call context does not break the reader: the next call goes on.
func TestCallContextNotSticky(t *testing.T) {
	b := newMem(t)
	segs := scenario()
	writeAll(t, b, segs)
	ctx := context.Background()
	r, err := Open(ctx, b, &Options{LogID: testLog, EndTs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	dead, cancel := context.WithCancel(ctx)
	cancel()
	var out []got
	for {
		ev, err := r.Next(dead)
		if errors.Is(err, context.Canceled) {
			ev, err = r.Next(ctx)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, keep(ev))
	}
	equalGot(t, out, expect(segs, 0, 1000, false))
}

func hasProblem(rep *Report, kind ProblemKind, key string) bool {
	for _, p := range rep.Problems {
		if p.Kind == kind && p.Key == key {
			return true
		}
	}
	return false
}

type bytesReaderAt []byte

func (b bytesReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// A sealed segment costs three requests whatever its size and however many
// chunk readers read it: the tail (trailer and footer), the header, and one
// stream over the blocks the range needs.
func TestRequestsPerSegment(t *testing.T) {
	b := newMem(t)
	s := seg{writer: "a", seq: 1, events: rows(1000, 1, 3000, "t", 0), raw: true, blockSize: 4096}
	key := s.write(t, b)
	a, err := b.Stat(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if a.Size < 2*64<<10 {
		t.Fatalf("segment of %d bytes: too small for the test", a.Size)
	}
	var full int64
	for _, start := range []uint64{0, 2500} {
		before := b.Stats()
		out, st, err := readAll(t, b, &Options{LogID: testLog, StartTs: start, EndTs: 1 << 40, Prefetch: 3})
		if err != nil {
			t.Fatal(err)
		}
		equalGot(t, out, expect([]seg{s}, start, 1<<40, false))
		// One read of the meta object (absent here), which every Open
		// makes before the writer states, then the segment's three.
		d := b.Stats().Sub(before)
		if d.Reads != 4 {
			t.Errorf("start %d: %d reads, want 4 (the meta object and the segment's 3)", start, d.Reads)
		}
		if start == 0 {
			full = d.BytesRead
		} else if d.BytesRead > full-a.Size/3 {
			t.Errorf("start %d: read %d bytes, %d from the start: the footer index should skip the blocks below it", start, d.BytesRead, full)
		}
		if st.Blocks < 10 {
			t.Errorf("%d blocks", st.Blocks)
		}
	}
}

// The merge's own guard: were a segment reached after events above its min
// ts were returned (the plan's order is the reader's invariant, so the test
// breaks it by hand), the read stops with an OrderError naming both keys.
func TestOrderGuard(t *testing.T) {
	ctx := context.Background()
	b := newMem(t)
	segs := []seg{
		{writer: "b", seq: 1, events: rows(10, 1, 5, "t", 0)},
		{writer: "c", seq: 1, events: rows(30, 1, 5, "t", 10)},
		{writer: "a", seq: 1, events: rows(5, 1, 3, "t", 20)},
	}
	keys := writeAll(t, b, segs)
	c, err := (&Options{LogID: testLog, EndTs: 100}).resolve(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := listLog(ctx, b, testLog)
	if err != nil {
		t.Fatal(err)
	}
	p, err := makePlan(c, objs, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Sorted by min ts it is a, b, c; make it b, c, a: when b ends, c and
	// a open together, and a (at 5) comes after b returned 14.
	p.sealed = append(p.sealed[1:], p.sealed[0])
	r := newReader(ctx, b, c, p)
	defer r.Close()
	var n int
	for _, err := range r.Events(ctx) {
		if err != nil {
			var oe *OrderError
			if !errors.As(err, &oe) || !errors.Is(err, ErrOrder) || oe.Key != keys[2] || oe.Ts != 5 || oe.PrevTs != 14 {
				t.Fatalf("got %v, want an OrderError for %q", err, keys[2])
			}
			return
		}
		n++
	}
	t.Fatalf("read %d events and no order error", n)
}

func TestDefaultRangeFromMeta(t *testing.T) {
	b := newMem(t)
	ctx := context.Background()
	segs := scenario()
	writeAll(t, b, segs)
	c, err := meta.OpenCoordinator(ctx, b, testLog, &meta.CoordinatorOptions{StartTs: 149})
	if err != nil {
		t.Fatal(err)
	}
	// checkpoint = resolved = 149: an empty range.
	if _, err := Open(ctx, b, &Options{LogID: testLog}); err == nil || !strings.Contains(err.Error(), "empty range") {
		t.Fatalf("empty default range: %v", err)
	}
	// A live writer publishing 245 moves the global resolved ts there: the
	// default range is then (149, 245], and nothing above 245 comes back.
	if err := c.AddWriter(ctx, "pub"); err != nil {
		t.Fatal(err)
	}
	l, err := meta.AcquireWriter(ctx, b, testLog, "pub", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.PublishProgress(ctx, meta.Progress{FlushedTs: 245, Seq: 0}); err != nil {
		t.Fatal(err)
	}
	if m, err := c.Tick(ctx); err != nil || m.ResolvedTs != 245 {
		t.Fatalf("tick: %+v %v", m, err)
	}
	out, _, err := readAll(t, b, &Options{LogID: testLog})
	if err != nil {
		t.Fatal(err)
	}
	equalGot(t, out, expect(segs, 149, 245, false))
}

// A record whose kind or commit ts is not its event's is refused by a raw
// read too, which hands out the record's fields without decoding the event:
// merged and applied under the record's ts, it would silently reorder.
func TestRawChecksRecordAgainstEvent(t *testing.T) {
	for _, tc := range []struct {
		name string
		ts   uint64
		kind segment.Kind
		want string
	}{
		{"commit ts", 11, segment.KindRow, "commit ts is 10"},
		{"kind", 10, segment.KindDDL, "a row"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newMem(t)
			s := seg{writer: "w1", seq: 1}
			var buf bytes.Buffer
			sw := s.encode(t, &buf)
			payload := codec.AppendEvent(nil, row(10, "t", 1, "a"))
			if err := sw.Append(tc.ts, tc.kind, payload); err != nil {
				t.Fatal(err)
			}
			f, err := sw.Seal()
			if err != nil {
				t.Fatal(err)
			}
			key := s.header().SealedName(f.MinTs, f.MaxTs).Format()
			if _, err := b.Put(context.Background(), key, buf.Bytes(), nil); err != nil {
				t.Fatal(err)
			}
			for _, raw := range []bool{true, false} {
				_, _, err := readAll(t, b, &Options{LogID: testLog, EndTs: 100, Raw: raw})
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), key) {
					t.Errorf("raw %v: %v; want an error naming %s and %s", raw, err, tc.want, key)
				}
			}
		})
	}
}

// An active segment sealed after the stream's Stat found it, and before its
// read opened it, is read under its sealed name too (a window the crash
// trials hit: a reader failing loudly where it need not).
func TestActiveSealedBetweenStatAndRead(t *testing.T) {
	ctx := context.Background()
	d, err := local.NewDriver(t.TempDir(), &local.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	f := blobtest.NewFaulty(d)
	b := f.Bucket()
	defer b.Close()
	inner := blob.NewBucket(f.Inner())
	act := seg{writer: "a", seq: 1, events: rows(10, 10, 10, "t", 0), active: true}
	key := act.write(t, b)
	var statted, sealed bool
	f.Add(blobtest.Rule{Op: blobtest.OpStat, Match: func(c blobtest.Call) bool {
		statted = statted || c.Key == key
		return false
	}})
	f.Add(blobtest.Rule{Op: blobtest.OpRead, Match: func(c blobtest.Call) bool {
		if statted && !sealed && c.Key == key {
			// The writer seals now: the sealed object appears, the
			// active one goes, and this read meets the rename.
			s := act
			s.active = false
			s.write(t, inner)
			if err := inner.Delete(ctx, key); err != nil {
				t.Error(err)
			}
			sealed = true
		}
		return false
	}})
	out, _, err := readAll(t, b, &Options{LogID: testLog, EndTs: 1000})
	if err != nil {
		t.Fatalf("read across the seal: %v", err)
	}
	if !sealed {
		t.Fatal("the stream's read never met the seal: the test did not test it")
	}
	equalGot(t, out, expect([]seg{act}, 0, 1000, false))
}

// swapOnRead is a driver whose first read of one key meets a seal under it:
// the read returns the old bytes up to cut, waits for go, and returns the new
// bytes after it, as a read through an open file does while a new epoch's
// recovery cuts the file's torn tail, appends the footer and renames it; the
// sealed object appears and the active one goes when the read goes on.
type swapOnRead struct {
	*local.Driver  // appendable: the reader reads active segments only there
	key, sealedKey string
	old, sealed    []byte
	cut            int
	proceed        chan struct{}
	swapped        bool
}

func (d *swapOnRead) NewRangeReader(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if key != d.key || d.swapped || off != 0 || length != int64(len(d.old)) {
		// Not the stream's read of the whole segment (Open reads the
		// header to prove the chain).
		return d.Driver.NewRangeReader(ctx, key, off, length)
	}
	d.swapped = true
	return io.NopCloser(io.MultiReader(bytes.NewReader(d.old[off:d.cut]), &sealOnRead{d: d, ctx: ctx})), nil
}

// sealOnRead is the rest of the stream: on its first Read it waits for the
// test, seals, and reads on in the sealed bytes.
type sealOnRead struct {
	d    *swapOnRead
	ctx  context.Context
	rest io.Reader
}

func (r *sealOnRead) Read(p []byte) (int, error) {
	if r.rest == nil {
		<-r.d.proceed
		d := r.d
		if _, err := d.Driver.Put(r.ctx, d.sealedKey, bytes.NewReader(d.sealed), int64(len(d.sealed)), driver.PutOptions{}); err != nil {
			return 0, err
		}
		if err := d.Driver.Delete(r.ctx, []string{d.key}); err != nil {
			return 0, err
		}
		r.rest = bytes.NewReader(d.sealed[d.cut:])
	}
	return r.rest.Read(p)
}

// TestActiveRecoveredWhileRead: the stream of an active segment reads its
// torn frame's header from the file before a recovery cut it, and the
// footer the recovery appended after, once the caller has events of the
// segment in hand (so the read cannot start over). The reader proves that
// the blocks it read are the sealed segment's first blocks and reads on from
// the sealed name: every event once, no error. The crash trials met this as
// a read failing with "a valid trailer follows, so this is not a torn tail".
func TestActiveRecoveredWhileRead(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b, err := local.New(dir, &local.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	act := seg{writer: "a", seq: 1, events: rows(10, 10, 10, "t", 0), active: true, torn: true}
	key := act.write(t, b)
	old, err := b.ReadAll(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	whole := act
	whole.active, whole.torn = false, false
	sealed, sealedKey := whole.sealedBytes(t)
	common := 0
	for common < len(old) && common < len(sealed) && old[common] == sealed[common] {
		common++
	}
	if common <= segment.HeaderSize || common >= len(old) {
		t.Fatalf("the torn and the sealed segment share %d of %d bytes: the test builds them wrong", common, len(old))
	}
	d, err := local.NewDriver(dir, &local.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	sw := &swapOnRead{Driver: d, key: key, sealedKey: sealedKey, old: old, sealed: sealed, cut: common + 8, proceed: make(chan struct{})}
	rb := blob.NewBucket(sw)
	defer rb.Close()
	r, err := Open(ctx, rb, &Options{LogID: testLog, EndTs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []got
	for ev, err := range r.Events(ctx) {
		if err != nil {
			t.Fatalf("read across the recovery, after %d events: %v", len(out), err)
		}
		out = append(out, keep(ev))
		if len(out) == 1 {
			close(sw.proceed) // the recovery runs now, under the read
		}
	}
	equalGot(t, out, expect([]seg{whole}, 0, 1000, false))
}
