package writer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
	"github.com/redokit/redokit/testkit/testenv"
)

// TestLocalRotation writes enough through small segments that the writer
// rotates by size, and reads everything back.
func TestLocalRotation(t *testing.T) {
	ctx := context.Background()
	b := localBucket(t, t.TempDir())
	o := testOptions("w")
	o.MaxSegmentBytes = 16 << 10
	o.BlockSize = 2 << 10
	o.Compression = CompressionNone
	w := openSpan1(t, b, o)
	must(t, w.AddSpan(2, 0))
	n := 0
	for ts := uint64(1); ts <= 1000; ts++ {
		span := SpanID(1 + ts%2)
		must(t, w.Write(ctx, span, row(span, ts, int64(ts))))
		n++
		if ts%40 == 0 {
			must(t, w.AdvanceResolved(1, ts))
			must(t, w.AdvanceResolved(2, ts))
			mustFlush(t, w)
		}
	}
	must(t, w.Close(ctx))
	gs := readLog(t, b, readOpts{})
	if len(gs) != n {
		t.Fatalf("read %d events, want %d", len(gs), n)
	}
	for i, g := range gs {
		if g.id != int64(i+1) {
			t.Fatalf("event %d is %v", i, g)
		}
	}
	ns := names(t, segmentKeys(t, b))
	if len(ns) < 3 {
		t.Fatalf("%d segments; expected rotation by size", len(ns))
	}
	for i, nm := range ns {
		if nm.Active {
			t.Errorf("%s active after Close", nm)
		}
		if i > 0 && nm.Seq <= ns[i-1].Seq {
			t.Errorf("seq %d after %d", nm.Seq, ns[i-1].Seq)
		}
	}
	if s := w.Stats(); s.Segments != int64(len(ns)) {
		t.Errorf("Stats.Segments = %d, %d segments exist", s.Segments, len(ns))
	}
}

// TestRetrySyncAndTornWrite fails an fdatasync and tears an append on the
// local path: the writer rewinds the active segment and appends again, and
// every event is stored once.
func TestRetrySyncAndTornWrite(t *testing.T) {
	ctx := context.Background()
	d, err := local.NewDriver(t.TempDir(), nil)
	must(t, err)
	f := blobtest.NewFaulty(d)
	b := f.Bucket()
	o := testOptions("w")
	o.BlockSize = 512
	w := openSpan1(t, b, o)
	writeFlushed(t, w, 1, 1, 30)

	f.FailNth(blobtest.OpSync, 1, nil)
	writeRange(t, w, 1, 31, 60)
	must(t, w.AdvanceResolved(1, 60))
	flushTo(t, w, 60) // after a failed sync
	f.Add(blobtest.Rule{Op: blobtest.OpWrite, Nth: 2, Fail: true, Partial: true})
	writeRange(t, w, 1, 61, 90)
	must(t, w.AdvanceResolved(1, 90))
	flushTo(t, w, 90) // after a torn write
	if n := f.Count(blobtest.OpTruncate); n < 2 {
		t.Fatalf("%d truncates; the failures should each rewind the segment", n)
	}
	if s := w.Stats(); s.Retries < 2 {
		t.Fatalf("Stats.Retries = %d", s.Retries)
	}
	must(t, w.Close(ctx))
	checkIDs(t, readLog(t, b, readOpts{}), 1, 90)
}

// TestSyncThatDropsPagesStopsTheWriter fails an fdatasync the way a kernel
// whose writeback failed does: the flush's unsynced pages are dropped (every
// other page reads as zeros). The writer let go of the frames it wrote and
// of their events, so a repair reads the frames back; their CRCs show they
// are not what it wrote, and it must stop with an error naming the segment
// and offset, never store them again or go on. A new epoch then recovers
// the durable prefix, exactly, and the same events written again read back
// once. TestRetrySyncAndTornWrite is the same failure with the pages kept:
// the read-back repair goes on.
func TestSyncThatDropsPagesStopsTheWriter(t *testing.T) {
	ctx := context.Background()
	f, b := faultyLocal(t, t.TempDir())
	o := testOptions("w")
	o.BlockSize = 16 << 10 // blocks of several pages: the first one's header survives, its body does not
	w := openSpan1(t, b, o)
	writeFlushed(t, w, 1, 1, 30)

	f.Add(blobtest.Rule{Op: blobtest.OpSync, Nth: 1, Fail: true, Drop: true})
	writeRange(t, w, 1, 31, 1000) // ~70 KiB: pages dropped and pages kept
	must(t, w.AdvanceResolved(1, 1000))
	_, err := w.Flush(ctx)
	var ce *segment.CorruptionError
	if err == nil || !errors.As(err, &ce) || !strings.Contains(err.Error(), "not what was written") || !strings.Contains(err.Error(), "/seg/") {
		t.Fatalf("Flush after a sync that dropped pages = %v; want the writer stopped on a corruption error naming the segment", err)
	}
	// The first frame after the sync point begins in the page kept: its
	// header reads well, and only its CRC shows its body is gone.
	if synced, ok := f.SyncedSize(ce.Object); !ok || ce.Offset != synced || !strings.Contains(ce.Detail, "CRC32C") {
		t.Fatalf("the error names offset %d (%s), want the first frame after the sync point, at %d, by its CRC", ce.Offset, ce.Detail, synced)
	}
	if !errors.Is(w.Err(), err) && w.Err() == nil {
		t.Fatalf("the writer goes on after %v", err)
	}
	if w.FlushedTs() != 30 {
		t.Fatalf("flushed ts %d, want 30: nothing after the failed sync is durable", w.FlushedTs())
	}
	w.Close(ctx)
	checkIDs(t, readLog(t, b, readOpts{}), 1, 30)

	w = openSpan1(t, b, o)
	writeFlushed(t, w, 1, 31, 1000)
	must(t, w.Close(ctx))
	checkIDs(t, readLog(t, b, readOpts{}), 1, 1000)
}

// TestFlushWaitsForSync holds the active segment's fdatasync: Flush must
// not return, nor the state object move, until the sync that makes the
// flush's blocks and its progress frame durable returns.
func TestFlushWaitsForSync(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f, b := faultyLocal(t, dir)
	w := openSpan1(t, b, testOptions("w"))
	writeFlushed(t, w, 1, 1, 10)
	gate, reached, flushed := flushHeld(t, f, w, blobtest.OpSync, 11, 20)
	<-reached
	select {
	case err := <-flushed:
		t.Fatalf("Flush returned (%v) with the data's fdatasync held", err)
	case <-time.After(50 * time.Millisecond):
	}
	st, _, err := meta.ReadWriterState(ctx, b, testLog, "w")
	must(t, err)
	if st.FlushedTs != 10 {
		t.Fatalf("the state object shows flushed ts %d while the data's fdatasync has not returned", st.FlushedTs)
	}
	close(gate)
	must(t, <-flushed)
	if w.FlushedTs() != 20 {
		t.Fatalf("flushed ts %d after the sync, want 20", w.FlushedTs())
	}
	if ts, err := w.Publish(ctx); err != nil || ts != 20 {
		t.Fatalf("Publish = %d, %v; want 20", ts, err)
	}
	must(t, w.Close(ctx))
	checkIDs(t, readLog(t, b, readOpts{}), 1, 20)
}

// TestCrashRecoversTornTail crashes a local writer while a flush is appended
// but not synced, leaves a torn block at the end of its active segment, and
// reopens the writer ID: the new epoch seals the old segment at its last
// whole block, everything flushed before the crash is there once, and the
// writer goes on.
func TestCrashRecoversTornTail(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f, b := faultyLocal(t, dir)
	o := testOptions("w")
	o.RetryAttempts = 1
	w := openSpan1(t, b, o)
	writeFlushed(t, w, 1, 1, 50)

	gate, reached, flushed := flushHeld(t, f, w, blobtest.OpSync, 51, 100)
	<-reached // appended, not synced
	must(t, f.Crash())
	close(gate)
	if err := <-flushed; err == nil {
		t.Fatal("a flush whose sync never happened succeeded")
	}
	w.Close(ctx)

	// The crash cut the unsynced flush; now tear a block onto the end, as
	// a write torn by power loss leaves it.
	active := activeFiles(t, dir)
	if len(active) != 1 {
		t.Fatalf("active segments after the crash: %v", active)
	}
	tearTail(t, active[0])

	b2 := localBucket(t, dir)
	w2 := open(t, b2, o)
	if w2.FlushedTs() != 50 {
		t.Fatalf("new epoch starts at %d, want the published 50", w2.FlushedTs())
	}
	if got := activeFiles(t, dir); len(got) != 0 {
		t.Fatalf("active segments left after recovery: %v", got)
	}
	checkIDs(t, readLog(t, b2, readOpts{fenced: true}), 1, 50)
	must(t, w2.AddSpan(1, 50))
	writeFlushed(t, w2, 1, 51, 100)
	must(t, w2.Close(ctx))
	checkIDs(t, readLog(t, b2, readOpts{fenced: true}), 1, 100)
	ns := names(t, segmentKeys(t, b2))
	if ns[0].Epoch != 1 || ns[len(ns)-1].Epoch != 2 || ns[len(ns)-1].Seq <= ns[0].Seq {
		t.Fatalf("segments %v: want the recovered epoch-1 segment, then epoch 2 with a higher seq", ns)
	}
}

// TestRecoveryKeepsDurableProgress reports a flush (its blocks and progress
// frame durable) whose publication never lands, and reopens: the new epoch's
// fence comes from the progress frame, so the reported events stay in the
// log and the new epoch starts where the flush ended. Without reading the
// frames, the new epoch would start at the published 50 and its recovery
// would cut the reported events 51..100.
func TestRecoveryKeepsDurableProgress(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	o := flushUnpublished(t, dir)
	b2 := localBucket(t, dir)
	w2 := open(t, b2, o)
	if w2.FlushedTs() != 100 {
		t.Fatalf("the new epoch starts at %d, want the reported 100", w2.FlushedTs())
	}
	st, _, err := meta.ReadWriterState(ctx, b2, testLog, "w")
	must(t, err)
	if len(st.Fences) != 1 || st.Fences[0].MaxTs != 100 {
		t.Fatalf("fences %+v, want epoch 1's at max ts 100", st.Fences)
	}
	must(t, w2.Close(ctx))
	checkIDs(t, readLog(t, b2, readOpts{fenced: true}), 1, 100)
}

// flushUnpublished leaves in dir a writer "w" whose epoch published events
// 1..50 and reported the flush of 51..100, whose publication failed: the
// options to reopen it with.
func flushUnpublished(t *testing.T, dir string) *Options {
	t.Helper()
	ctx := context.Background()
	f, b := faultyLocal(t, dir)
	o := testOptions("w")
	o.RetryAttempts = 1
	w := openSpan1(t, b, o)
	writeFlushed(t, w, 1, 1, 50)
	f.FailWhen(blobtest.OpPut, isState, nil)
	writeRange(t, w, 1, 51, 100)
	must(t, w.AdvanceResolved(1, 100))
	if ts, err := w.Flush(ctx); err != nil || ts != 100 {
		t.Fatalf("Flush = %d, %v: a durable flush is reported before its publication", ts, err)
	}
	if _, err := w.Publish(ctx); err == nil {
		t.Fatal("Publish succeeded with every state put failing")
	}
	w.Close(ctx)
	return o
}

// TestRecoveryDeletesUnfencedActive leaves an active segment that its epoch
// never published (written after the last publication): it is deleted.
func TestRecoveryDeletesUnfencedActive(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := localBucket(t, dir)
	// An epoch-1 writer that published nothing, with an active segment.
	_, err := meta.AcquireWriter(ctx, b, testLog, "w", nil)
	must(t, err)
	hdr := segment.Header{LogID: testLog, WriterID: "w", Epoch: 1, Seq: 4, Compression: segment.CompressionLZ4}
	af, err := b.OpenAppend(ctx, hdr.ActiveName().Format())
	must(t, err)
	sw, err := segment.NewWriter(af, hdr, nil)
	must(t, err)
	must(t, sw.Append(10, segment.KindRow, []byte("never reported")))
	must(t, sw.FlushBlock())
	must(t, af.Sync())
	must(t, af.Close())

	w := open(t, b, testOptions("w"))
	if keys := segmentKeys(t, b); len(keys) != 0 {
		t.Fatalf("segments after recovery: %v", keys)
	}
	// Numbering still goes on past the deleted segment's seq.
	must(t, w.AddSpan(1, 0))
	writeRange(t, w, 1, 1, 3)
	must(t, w.AdvanceResolved(1, 3))
	must(t, w.Close(ctx))
	for _, n := range names(t, segmentKeys(t, b)) {
		if n.Seq <= 4 {
			t.Fatalf("new segment %s reuses a seq at or below 4", n)
		}
	}
}

// TestRecoveryRefusesCorruption damages an active segment in its middle:
// Open fails naming it, and deletes nothing.
func TestRecoveryRefusesCorruption(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := localBucket(t, dir)
	o := testOptions("w")
	o.BlockSize = 256
	w := openSpan1(t, b, o)
	writeFlushed(t, w, 1, 1, 50)
	// Abandon the writer without sealing: a crash.
	w.cancel()
	<-w.commitDone
	active := activeFiles(t, dir)
	if len(active) != 1 {
		t.Fatalf("active files %v", active)
	}
	data, err := os.ReadFile(active[0])
	must(t, err)
	data[segment.HeaderSize+segment.BlockHeaderSize+3] ^= 0xff // inside the first block
	must(t, os.WriteFile(active[0], data, 0o644))
	_, err = Open(ctx, localBucket(t, dir), o)
	if !errors.Is(err, segment.ErrCorrupt) || !strings.Contains(err.Error(), filepath.Base(active[0])) {
		t.Fatalf("Open over a corrupt active segment: %v", err)
	}
	if _, err := os.Stat(active[0]); err != nil {
		t.Fatalf("the corrupt segment is gone: %v", err)
	}
}

// TestAgeRotation seals an idle active segment once it is old enough.
func TestAgeRotation(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := localBucket(t, dir)
	o := testOptions("w")
	o.MaxSegmentAge = 20 * time.Millisecond
	w := openSpan1(t, b, o)
	writeFlushed(t, w, 1, 1, 5)
	testenv.WaitFor(t, "the active segment to be sealed by age", func() bool { return len(activeFiles(t, dir)) == 0 })
	writeFlushed(t, w, 1, 6, 10)
	must(t, w.Close(ctx))
	if n := len(segmentKeys(t, b)); n != 2 {
		t.Fatalf("%d segments, want 2", n)
	}
	checkIDs(t, readLog(t, b, readOpts{}), 1, 10)
}

// TestCloseAbort gives up on Close while a sync hangs: Close returns the
// ctx's error, the active segment stays unsealed, and the next Open recovers
// what was published.
func TestCloseAbort(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f, b := faultyLocal(t, dir)
	w := openSpan1(t, b, testOptions("w"))
	writeFlushed(t, w, 1, 1, 20)
	writeRange(t, w, 1, 21, 40)
	must(t, w.AdvanceResolved(1, 40))
	gate := make(chan struct{})
	match, reached := signal(isSegment)
	f.Add(blobtest.Rule{Op: blobtest.OpSync, Match: match, Wait: gate})
	abortClose(t, w, reached)
	close(gate)
	<-w.commitDone // the hung sync returns; the pipeline ends
	if err := w.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("second Close: %v, want the first one's result", err)
	}
	if n := len(activeFiles(t, dir)); n != 1 {
		t.Fatalf("%d active segments after an aborted Close", n)
	}
	// The held sync returned after Close gave up: the final flush's blocks
	// and progress frame are durable, so the next epoch starts at 40 (it
	// would start at 20 had the sync failed).
	w2 := open(t, localBucket(t, dir), testOptions("w"))
	if w2.FlushedTs() != 40 {
		t.Fatalf("reopened at %d, want 40", w2.FlushedTs())
	}
	must(t, w2.Close(ctx))
	checkIDs(t, readLog(t, localBucket(t, dir), readOpts{fenced: true}), 1, 40)
}

// TestAppendStore drives the local path through the store interface: a
// catch-up frame rotates the active segment, which is synced at once but
// sealed only by the settle after the progress frame that covers it is
// durable; the new active segment is sealed by a final settle, which
// publishes the progress first.
func TestAppendStore(t *testing.T) {
	b := localBucket(t, t.TempDir())
	c := newStoreHarness(t, b, testOptions("w"))
	s, ok := c.store.(*appendStore)
	if !ok {
		t.Fatalf("store on local disk is a %T", c.store)
	}
	defer c.store.abandon()
	must(t, c.store.add(storedFrame(t, c.w, 1, 1, tsRange(11, 20)...)))
	must(t, c.store.add(storedFrame(t, c.w, 2, 11, tsRange(1, 10)...))) // below the segment's last ts
	if len(s.full) != 1 || s.act == nil || s.act.hdr.Seq != 2 {
		t.Fatalf("after a catch-up frame: %d rotated segments, active %+v", len(s.full), s.act)
	}
	if s.full[0].syncedBlocks != 1 || !s.full[0].linked {
		t.Fatalf("rotated segment not synced and linked: %+v", s.full[0])
	}
	must(t, c.store.record(20, 20, []segment.SpanTs{{Span: 1, Ts: 20}, {Span: 2, Ts: 20}}))
	must(t, c.store.persist())
	if d := c.dur; d.FlushedTs != 20 || d.Seq != 2 || d.ChainMaxTs != 20 || d.Digest != s.act.hdr.CRC {
		t.Fatalf("durable progress %+v, want ts 20 through seq 2 (chain max 20, digest %#x)", d, s.act.hdr.CRC)
	}
	sealed := func() (n int) {
		for _, k := range segmentKeys(t, b) {
			if !strings.HasSuffix(k, segment.ActiveExt) {
				n++
			}
		}
		return n
	}
	if n := sealed(); n != 0 {
		t.Fatalf("%d segments sealed before settle", n)
	}
	must(t, c.store.settle(false))
	if n := sealed(); n != 1 || s.act == nil {
		t.Fatalf("settle sealed %d segments (active %v), want the rotated one only", n, s.act != nil)
	}
	must(t, c.store.settle(true))
	if n := sealed(); n != 2 || s.act != nil {
		t.Fatalf("final settle left %d sealed segments (active %v)", n, s.act != nil)
	}
	st, _, err := meta.ReadWriterState(context.Background(), b, testLog, "w")
	must(t, err)
	if st.FlushedTs != 20 || st.Seq != 2 {
		t.Fatalf("published %+v before the seal of the active segment, want ts 20 through seq 2", st)
	}
	checkIDs(t, readLog(t, b, readOpts{}), 1, 20)
}
