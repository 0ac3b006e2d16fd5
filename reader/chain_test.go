package reader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/driver"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/internal/chain"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
)

// chainLog is writer w's sequence of segments 1..n of epoch 1, each holding
// 10 rows at increasing ts: segment i holds commit ts 100i .. 100i+90.
func chainLog(writer string, n int) []seg {
	var segs []seg
	for i := 1; i <= n; i++ {
		segs = append(segs, seg{writer: writer, seq: uint64(i), events: rows(uint64(100*i), 10, 10, "t_"+writer, int64(1000*i))})
	}
	return segs
}

// flushedAll is the flushed ts publish claims: above every ts the tests
// read (a read above the lowest published flushed ts is refused).
const flushedAll = 1 << 40

// publish writes segs (one writer epoch, chained) and, when withState, takes
// the writer's lease and publishes its last segment as a writer would: its
// seq, the chain's largest commit ts and its header CRC.
func publish(t *testing.T, b *blob.Bucket, segs []seg, withState bool) []string {
	t.Helper()
	ctx := context.Background()
	var lease *meta.Lease
	if withState {
		var err error
		if lease, err = meta.AcquireWriter(ctx, b, testLog, segs[0].writer, nil); err != nil {
			t.Fatal(err)
		}
		if lease.Epoch() != segs[0].header().Epoch {
			t.Fatalf("lease epoch %d, segments of epoch %d", lease.Epoch(), segs[0].header().Epoch)
		}
	}
	keys := writeAll(t, b, segs)
	if lease != nil {
		last := chained(t, segs)[len(segs)-1]
		hcrc, _ := last.crcs(t)
		// The log is written whole: the writer is flushed up to every ts
		// these tests read, so reads are proven by the chain alone.
		p := meta.Progress{FlushedTs: flushedAll, Seq: last.seq, ChainMaxTs: last.chainMax(), Digest: hcrc}
		if err := lease.PublishProgress(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// A segment deleted from the start, the middle or the end of a writer's
// sequence is an error naming the writer, the epoch, the missing seq and the
// key expected, never a read that silently lacks its events. Without a
// state object the end of a chain cannot be told from a writer that wrote
// no more (the weaker rule), so that case needs the state.
func TestMissingSegmentIsIncomplete(t *testing.T) {
	for _, backend := range []string{"mem", "local"} {
		for _, withState := range []bool{true, false} {
			for _, victim := range []int{1, 3, 5} {
				if victim == 5 && !withState {
					continue
				}
				name := fmt.Sprintf("%s/state=%v/seq%d", backend, withState, victim)
				t.Run(name, func(t *testing.T) {
					ctx := context.Background()
					b := newMem(t)
					if backend == "local" {
						b = newLocal(t)
					}
					segs := chainLog("w", 5)
					keys := publish(t, b, segs, withState)
					// Another writer, complete, so the read has something to
					// return before the hole.
					publish(t, b, chainLog("v", 2), withState)
					if _, _, err := readAll(t, b, &Options{LogID: testLog, EndTs: 10000}); err != nil {
						t.Fatalf("the whole log: %v", err)
					}
					if err := b.Delete(ctx, keys[victim-1]); err != nil {
						t.Fatal(err)
					}
					out, _, err := readAll(t, b, &Options{LogID: testLog, EndTs: 10000})
					if err == nil {
						t.Fatalf("read %d events without an error after deleting %s", len(out), keys[victim-1])
					}
					wantIncomplete(t, err, "w", 1, uint64(victim))

					rep, err := Verify(ctx, b, testLog, nil)
					if err != nil {
						t.Fatal(err)
					}
					if rep.OK() || !hasProblem(rep, ProblemIncomplete, expectedKey(testLog, "w", 1, uint64(victim))) {
						t.Fatalf("Verify missed the deleted seq %d: %v", victim, rep.Problems)
					}
				})
			}
		}
	}
}

// wantIncomplete checks that err is a ChainError naming the writer, epoch
// and missing seq, and the key expected for it.
func wantIncomplete(t *testing.T, err error, writer string, epoch, seq uint64) {
	t.Helper()
	var ce *ChainError
	if !errors.Is(err, ErrIncomplete) || !errors.As(err, &ce) {
		t.Fatalf("got %v, want an error matching ErrIncomplete", err)
	}
	if ce.Writer != writer || ce.Epoch != epoch || seq < ce.Seq || seq > ce.LastSeq {
		t.Fatalf("got %+v, want writer %q epoch %d missing seq %d", ce, writer, epoch, seq)
	}
	want := expectedKey(testLog, writer, epoch, ce.Seq)
	if ce.Key != want || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fmt.Sprintf("writer %q epoch %d", writer, epoch)) {
		t.Fatalf("error %q (key %q) does not name the expected key %q", err, ce.Key, want)
	}
}

// A writer state published seq 5, and a segment replaced under its name
// (another segment's bytes, same name) no longer ends the chain the writer
// published: the digest says so.
func TestReplacedLastSegmentIsIncomplete(t *testing.T) {
	ctx := context.Background()
	b := newMem(t)
	segs := chainLog("w", 5)
	keys := publish(t, b, segs, true)
	forged := chained(t, segs)[4]
	forged.events = forged.events[:5] // fewer rows, same seq and link,
	forged.raw = true                 // and a header of its own
	data, _ := forged.sealedBytes(t)
	if err := b.Delete(ctx, keys[4]); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, forged.header().SealedName(500, 540).Format(), data, nil); err != nil {
		t.Fatal(err)
	}
	// Any read the forged segment is part of: its stream checks the digest
	// when it opens it.
	for _, start := range []uint64{0, 490} {
		_, _, err := readAll(t, b, &Options{LogID: testLog, StartTs: start, EndTs: 10000})
		var ce *ChainError
		if !errors.As(err, &ce) || ce.Seq != 5 || !strings.Contains(err.Error(), "digest") {
			t.Fatalf("start %d: got %v, want a digest mismatch at seq 5", start, err)
		}
	}
	rep, err := Verify(ctx, b, testLog, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() {
		t.Fatalf("Verify missed the forged last segment: %v", rep.Problems)
	}
}

// GC deletes the bottom of the chain below the checkpoint; a read from the
// checkpoint is still proven complete by the lowest remaining link, and a
// read from below it is an error (what it needs is gone), not a short read.
func TestReadAfterGC(t *testing.T) {
	for _, withState := range []bool{true, false} {
		t.Run(fmt.Sprintf("state=%v", withState), func(t *testing.T) {
			ctx := context.Background()
			b := newMem(t)
			segs := chainLog("w", 5)
			// A catch-up segment below the checkpoint above one that is
			// not: it stays, and the read does not need it.
			segs = append(segs, seg{writer: "w", seq: 6, events: rows(150, 10, 3, "catchup", 9000)})
			publish(t, b, segs, withState)
			const checkpoint = 300 // segments 1 and 2 (up to 290) go
			res, err := gcBelow(t, ctx, b, checkpoint)
			if err != nil {
				t.Fatal(err)
			}
			if res.Deleted != 2 || res.KeptByChain != 1 {
				t.Fatalf("GC %+v: want 2 deleted, the catch-up segment kept by its chain", res)
			}
			out, _, err := readAll(t, b, &Options{LogID: testLog, StartTs: checkpoint, EndTs: 10000})
			if err != nil {
				t.Fatalf("read from the checkpoint after GC: %v", err)
			}
			equalGot(t, out, expect(segs, checkpoint, 10000, false))
			_, _, err = readAll(t, b, &Options{LogID: testLog, StartTs: 0, EndTs: 10000})
			wantIncomplete(t, err, "w", 1, 2)
		})
	}
}

// hookDriver runs a hook before each ranged read.
type hookDriver struct {
	driver.Driver
	before func(key string, off, n int64)
}

func (d *hookDriver) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if d.before != nil {
		d.before(key, off, n)
	}
	return d.Driver.NewRangeReader(ctx, key, off, n)
}

// A GC that runs between the reader's listing and its read of the header of
// the bottom of a chain: the reader lists again and proves the chain with
// what is left.
func TestReadRacingGC(t *testing.T) {
	ctx := context.Background()
	drv := &hookDriver{Driver: mem.NewDriver()}
	b := blob.NewBucket(drv)
	defer b.Close()
	var segs []seg
	for _, w := range []string{"a", "b", "c"} {
		s := chainLog(w, 6)
		segs = append(segs, s...)
		publish(t, b, s, w != "c")
	}
	const checkpoint = 350
	var once sync.Once
	ran := false
	drv.before = func(key string, off, n int64) {
		if off == 0 && n == segment.HeaderSize {
			once.Do(func() {
				ran = true
				if _, err := gcBelow(t, ctx, b, checkpoint); err != nil {
					t.Error(err)
				}
			})
		}
	}
	out, _, err := readAll(t, b, &Options{LogID: testLog, StartTs: checkpoint, EndTs: 10000})
	if err != nil {
		t.Fatalf("read racing GC: %v", err)
	}
	if !ran {
		t.Fatal("the hook never ran GC")
	}
	equalGot(t, out, expect(segs, checkpoint, 10000, false))

	// A store where every header read finds its segment gone: the reader
	// lists again a bounded number of times, then fails naming the key.
	drv.before = func(key string, off, n int64) {
		if off == 0 && n == segment.HeaderSize {
			_ = b.Delete(ctx, key)
		}
	}
	_, _, err = readAll(t, b, &Options{LogID: testLog, StartTs: checkpoint, EndTs: 10000})
	if err == nil || !blob.IsNotExist(err) || !strings.Contains(err.Error(), "vanished") {
		t.Fatalf("got %v, want the vanished segment named", err)
	}
}

// Concurrent GC cycles and reads from the checkpoint: every read succeeds
// with exactly the events above the checkpoint.
func TestReadsDuringGC(t *testing.T) {
	ctx := context.Background()
	b := newMem(t)
	var segs []seg
	for _, w := range []string{"a", "b"} {
		s := chainLog(w, 30)
		segs = append(segs, s...)
		publish(t, b, s, w == "a")
	}
	const checkpoint = 2000
	want := expect(segs, checkpoint, 1<<20, false)
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 5 {
			if _, err := gcBelow(t, ctx, b, checkpoint); err != nil {
				t.Error(err)
			}
		}
	})
	for range 10 {
		out, _, err := readAll(t, b, &Options{LogID: testLog, StartTs: checkpoint, EndTs: 1 << 20, Lookahead: -1})
		if err != nil {
			t.Fatalf("read during GC: %v", err)
		}
		equalGot(t, out, want)
	}
	wg.Wait()
}

// A segment whose link names a predecessor other than the one listed (its
// header CRC differs) is caught when the reader opens both.
func TestBrokenLinkBetweenOpenedSegments(t *testing.T) {
	ctx := context.Background()
	b := newMem(t)
	segs := chained(t, chainLog("w", 3))
	segs[2].link.PrevHeaderCRC ^= 1
	for _, s := range segs {
		s.write(t, b)
	}
	_, _, err := readAll(t, b, &Options{LogID: testLog, EndTs: 10000})
	var ce *ChainError
	if !errors.As(err, &ce) || ce.Seq != 3 || !strings.Contains(err.Error(), "header CRC") {
		t.Fatalf("got %v, want a broken link at seq 3", err)
	}
	rep, err := Verify(ctx, b, testLog, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !hasProblem(rep, ProblemLink, segs[2].header().SealedName(300, 390).Format()) {
		t.Fatalf("Verify missed the broken link: %v", rep.Problems)
	}
}

// Everything under the log's prefix that is not a key the log writes is a
// finding (it may be a segment or a state a damaged name hides from every
// reader), and so is a state or meta object that does not decode: Verify
// names each and goes on.
func TestVerifyReportsStrayAndDamagedObjects(t *testing.T) {
	ctx := context.Background()
	drv := mem.NewDriver()
	b := blob.NewBucket(drv)
	defer b.Close()
	publish(t, b, chainLog("w", 2), true)
	put := func(key, body string) {
		t.Helper()
		// Through the driver: the bucket refuses to write the invalid
		// names a damaged store can hold.
		if _, err := drv.Put(ctx, key, strings.NewReader(body), int64(len(body)), blob.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	junk := testLog + "/seg/junk"
	notUTF8 := testLog + "/seg/w/\xff00000000000000000001-00000000000000000003-00000000000000000300-00000000000000000390.seg"
	control := testLog + "/writers/w\x01"
	segLink := testLog + "/seg" // a seg folder that is a symbolic link, as the local List shows it
	stray := testLog + "/notes.txt"
	badState := layout.WriterState(testLog, "broken")
	put(junk, "x")
	put(notUTF8, "x")
	put(control, "x")
	put(segLink, "")
	put(stray, "x")
	put(badState, `{"version":2,"crc32c":"00000000","body":{}}`)
	put(layout.Meta(testLog), "not a meta object")

	rep, err := Verify(ctx, b, testLog, nil)
	if err != nil {
		t.Fatalf("Verify stopped instead of reporting: %v", err)
	}
	for _, w := range []struct {
		kind ProblemKind
		key  string
	}{
		{ProblemBadName, junk},
		{ProblemBadName, notUTF8},
		{ProblemStray, control},
		{ProblemStray, segLink},
		{ProblemStray, stray},
		{ProblemBadState, badState},
		{ProblemBadState, layout.Meta(testLog)},
	} {
		if !hasProblemSev(rep, w.kind, w.key, Error) {
			t.Errorf("no %s error for %q in %v", w.kind, w.key, rep.Problems)
		}
	}
	if rep.Sealed != 2 {
		t.Errorf("checked %d segments, want the 2 good ones", rep.Sealed)
	}
}

func hasProblemSev(rep *Report, kind ProblemKind, key string, sev Severity) bool {
	for _, p := range rep.Problems {
		if p.Kind == kind && p.Key == key && p.Severity == sev {
			return true
		}
	}
	return false
}

// An active segment created but holding no header yet (a writer that just
// rolled over, or a crash right after the create) holds nothing and has no
// link: it does not end a chain that must be proven.
func TestEmptyActiveSegmentEndsNoChain(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	segs := chainLog("w", 2)
	publish(t, b, segs, false)
	// After a writer's last segment, and as the only segment of another.
	for _, s := range []seg{{writer: "w", seq: 3}, {writer: "x", seq: 1}} {
		af, err := b.OpenAppend(ctx, s.header().ActiveName().Format())
		if err != nil {
			t.Fatal(err)
		}
		if err := af.Close(); err != nil {
			t.Fatal(err)
		}
	}
	out, _, err := readAll(t, b, &Options{LogID: testLog, EndTs: 10000})
	if err != nil {
		t.Fatal(err)
	}
	equalGot(t, out, expect(segs, 0, 10000, false))
}

// Verify checks every link it can: a link whose CRCs are right but whose
// largest commit ts below is not what the chain below holds (a GC trusting
// it would delete what a read needs), and a published chain max that the
// segments contradict.
func TestVerifyChecksChainMaxima(t *testing.T) {
	ctx := context.Background()
	b := newMem(t)
	segs := chained(t, chainLog("w", 3))
	segs[2].link.PrevMaxTs = 150 // the chain below holds up to 290
	// The lease first: a writer's segments never precede its state (an
	// open over segments and no state refuses to take epoch 1 again).
	lease, err := meta.AcquireWriter(ctx, b, testLog, "w", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		s.write(t, b)
	}
	hcrc, _ := segs[2].crcs(t)
	// The writer claims its chain ends at 1000; the segments hold up to 390.
	if err := lease.PublishProgress(ctx, meta.Progress{FlushedTs: 390, Seq: 3, ChainMaxTs: 1000, Digest: hcrc}); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(ctx, b, testLog, nil)
	if err != nil {
		t.Fatal(err)
	}
	key := segs[2].header().SealedName(300, 390).Format()
	var below, published bool
	for _, p := range rep.Problems {
		if p.Kind == ProblemLink && p.Key == key && p.Severity == Error {
			below = below || strings.Contains(p.Detail, "predecessor chain holding commit ts up to 150")
			published = published || strings.Contains(p.Detail, "up to 1000")
		}
	}
	if !below || !published {
		t.Fatalf("Verify missed a wrong link max ts (%v) or published chain max (%v): %v", below, published, rep.Problems)
	}
}

// A zombie's flush into the segment its fence accepts (on local disk the
// active segment the fence's last seq names): its events lie above the
// largest commit ts the epoch published, were never acknowledged, and are
// left out, as a zombie's later segments are.
func TestEventsAboveFenceAreLeftOut(t *testing.T) {
	ctx := context.Background()
	b := newMem(t)
	lease, err := meta.AcquireWriter(ctx, b, testLog, "z", nil)
	if err != nil {
		t.Fatal(err)
	}
	published := rows(10, 10, 5, "t", 0) // 10..50
	zombieRow := row(111, "t", 99, "zombie")
	s := chained(t, []seg{{writer: "z", seq: 1, events: append(slices.Clone(published), zombieRow)}})[0]
	key := s.write(t, b)
	hcrc, _ := s.crcs(t)
	if err := lease.PublishProgress(ctx, meta.Progress{FlushedTs: 50, Seq: 1, ChainMaxTs: 50, Digest: hcrc}); err != nil {
		t.Fatal(err)
	}
	l2, err := meta.AcquireWriter(ctx, b, testLog, "z", nil) // epoch 2 fences epoch 1 at seq 1, max ts 50
	if err != nil {
		t.Fatal(err)
	}
	// Epoch 2 publishes that it is flushed past every ts read here (with
	// no segment of its own named: seq 0), so that the read is proven.
	if err := l2.PublishProgress(ctx, meta.Progress{FlushedTs: 1000}); err != nil {
		t.Fatal(err)
	}
	next := seg{writer: "z", epoch: 2, seq: 2, events: []*codec.Event{row(111, "t", 1, "new owner")}}
	writeAll(t, b, []seg{next})
	out, st, err := readAll(t, b, &Options{LogID: testLog, EndTs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	equalGot(t, out, expect([]seg{{writer: "z", seq: 1, events: published}, next}, 0, 1000, false))
	if st.AboveFence != 1 {
		t.Errorf("AboveFence %d, want 1", st.AboveFence)
	}
	rep, err := Verify(ctx, b, testLog, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || !hasProblemSev(rep, ProblemFenced, key, Info) {
		t.Errorf("Verify: %v", rep.Problems)
	}
}

// A writer state whose key was damaged would leave its writer unfenced and
// its chain proven only by the weaker rule: Open refuses the log, naming the
// key, unless told to skip bad names.
func TestDamagedStateKeyStopsOpen(t *testing.T) {
	ctx := context.Background()
	drv := mem.NewDriver()
	b := blob.NewBucket(drv)
	defer b.Close()
	segs := chainLog("w", 2)
	publish(t, b, segs, true)
	data, err := b.ReadAll(ctx, layout.WriterState(testLog, "w"))
	if err != nil {
		t.Fatal(err)
	}
	damaged := layout.WriterState(testLog, "w\x01")
	if _, err := drv.Put(ctx, damaged, strings.NewReader(string(data)), int64(len(data)), blob.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, layout.WriterState(testLog, "w")); err != nil {
		t.Fatal(err)
	}
	_, _, err = readAll(t, b, &Options{LogID: testLog, EndTs: 10000})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", damaged)) {
		t.Fatalf("got %v, want an error naming %q", err, damaged)
	}
	out, _, err := readAll(t, b, &Options{LogID: testLog, EndTs: 10000, SkipBadNames: true})
	if err != nil {
		t.Fatal(err)
	}
	equalGot(t, out, expect(segs, 0, 10000, false))
}

// A seq sealed under two names (its range differs): a writer seals a seq
// once, so one is not what it wrote; a read that needs it fails naming both.
func TestSeqSealedTwice(t *testing.T) {
	ctx := context.Background()
	b := newMem(t)
	segs := chained(t, chainLog("w", 3))
	keys := writeAll(t, b, segs)
	other := segs[1]
	other.events = other.events[:4]
	data, key := other.sealedBytes(t)
	if _, err := b.Put(ctx, key, data, nil); err != nil {
		t.Fatal(err)
	}
	_, _, err := readAll(t, b, &Options{LogID: testLog, EndTs: 10000})
	var ce *ChainError
	if !errors.As(err, &ce) || ce.Seq != 2 || !strings.Contains(err.Error(), keys[1]) || !strings.Contains(err.Error(), key) {
		t.Fatalf("got %v, want seq 2 named twice, %q and %q", err, keys[1], key)
	}
	rep, err := Verify(ctx, b, testLog, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() {
		t.Fatalf("Verify missed seq 2 sealed twice: %v", rep.Problems)
	}
}

// TestVerifyLinkToActivePrefix is FORMAT.md gap 11: a successor may link a
// prefix of its active predecessor's whole blocks (the blocks it had when
// its writer moved on; recovery seals exactly that prefix), and Verify
// accepts exactly such a prefix and nothing else.
func TestVerifyLinkToActivePrefix(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		bend func(l *segment.Link)
		ok   bool
	}{
		{"prefix", func(*segment.Link) {}, true},
		{"not a prefix", func(l *segment.Link) { l.PrevMaxTs++ }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newLocal(t)
			s1 := seg{writer: "w", seq: 1, events: rows(100, 10, 40, "t", 1), active: true}
			key := s1.write(t, b)
			rd, err := b.NewReader(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			rec, err := segment.Recover(rd, nil)
			rd.Close()
			if err != nil || len(rec.Blocks) < 2 {
				t.Fatalf("%v: %d blocks, want several", err, len(rec.Blocks))
			}
			l := chain.Successor(rec.Header, rec.Blocks[:1])
			tc.bend(&l)
			s2 := seg{writer: "w", seq: 2, events: rows(1000, 10, 5, "t", 100), link: l}
			k2 := s2.write(t, b)
			rep, err := Verify(ctx, b, testLog, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := hasProblem(rep, ProblemLink, k2); got == tc.ok {
				t.Fatalf("link problem reported: %v, want %v: %v", got, !tc.ok, rep.Problems)
			}
		})
	}
}

// dropList hides key from listings of the log's segments: once (times 1),
// or always (times < 0). A listing of one seq alone shows it.
type dropList struct {
	driver.Driver
	mu    sync.Mutex
	key   string
	times int
}

func (d *dropList) List(ctx context.Context, opts driver.ListOptions) (driver.ListPage, error) {
	p, err := d.Driver.List(ctx, opts)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil || d.times == 0 || opts.Prefix != layout.Segments(testLog) && opts.Prefix != testLog+"/" {
		return p, err
	}
	out := p.Objects[:0:0]
	for _, a := range p.Objects {
		if a.Key == d.key {
			d.times--
			continue
		}
		out = append(out, a)
	}
	p.Objects = out
	return p, nil
}

// TestOpenListsAgainWhenAListingMissesASegment: the reader (Open and
// Verify) follows the one listing policy of internal/chain, as the
// writer's recovery does: a seq
// the proof needs that the listing lacks is probed, and when a listing of
// that seq alone finds it, the reader lists again instead of failing; a
// listing that keeps missing it fails after chain.Relists new listings,
// naming the key, and matching ErrIncomplete.
func TestOpenListsAgainWhenAListingMissesASegment(t *testing.T) {
	for _, times := range []int{1, -1} {
		t.Run(fmt.Sprint("times=", times), func(t *testing.T) {
			d := &dropList{Driver: mem.NewDriver()}
			b := blob.NewBucket(d)
			segs := chainLog("w", 3)
			keys := publish(t, b, segs, true)
			d.mu.Lock()
			d.key, d.times = keys[2], times
			d.mu.Unlock()
			out, _, err := readAll(t, b, &Options{LogID: testLog, EndTs: segs[2].chainMax()})
			if times > 0 {
				if err != nil || len(out) != 30 {
					t.Fatalf("one listing missed %s: %d events, %v", keys[2], len(out), err)
				}
				return
			}
			if !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), keys[2]) {
				t.Fatalf("every listing misses %s: %v", keys[2], err)
			}
		})
		// Verify follows the same policy.
		t.Run(fmt.Sprint("verify/times=", times), func(t *testing.T) {
			d := &dropList{Driver: mem.NewDriver()}
			b := blob.NewBucket(d)
			keys := publish(t, b, chainLog("w", 3), true)
			d.mu.Lock()
			d.key, d.times = keys[2], times
			d.mu.Unlock()
			rep, err := Verify(context.Background(), b, testLog, nil)
			if err != nil {
				t.Fatal(err)
			}
			if times > 0 {
				if !rep.OK() {
					t.Fatalf("one listing missed %s: %v", keys[2], rep.Problems)
				}
				return
			}
			if rep.OK() || !hasProblem(rep, ProblemIncomplete, keys[2]) {
				t.Fatalf("every listing misses %s: %v", keys[2], rep.Problems)
			}
		})
	}
}
