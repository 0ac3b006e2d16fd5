package writer

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/blob/driver"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
)

func isSegment(c blobtest.Call) bool { return strings.Contains(c.Key, "/"+segment.SegmentDir+"/") }
func isState(c blobtest.Call) bool   { return strings.Contains(c.Key, "/"+meta.WritersDir+"/") }

// signal returns a rule matcher that also reports each match on a channel.
func signal(match func(blobtest.Call) bool) (func(blobtest.Call) bool, chan struct{}) {
	ch := make(chan struct{}, 1000)
	return func(c blobtest.Call) bool {
		if !match(c) {
			return false
		}
		select {
		case ch <- struct{}{}:
		default:
		}
		return true
	}, ch
}

// waitFor waits for cond, polling; it fails the test after a generous bound.
// It replaces a sleep where a condition can only be observed by looking.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func writeRange(t *testing.T, w *Writer, span SpanID, from, to uint64) {
	t.Helper()
	for ts := from; ts <= to; ts++ {
		must(t, w.Write(context.Background(), span, row(span, ts, int64(ts))))
	}
}

// checkIDs checks that the events read back are exactly the rows from..to of
// span 1, once each, in order.
func checkIDs(t *testing.T, gs []got, from, to uint64) {
	t.Helper()
	if len(gs) != int(to-from+1) {
		t.Fatalf("read %d events, want %d (%d..%d):\n%s", len(gs), to-from+1, from, to, describe(gs))
	}
	for i, g := range gs {
		if g.id != int64(from)+int64(i) {
			t.Fatalf("event %d is %v, want id %d:\n%s", i, g, int64(from)+int64(i), describe(gs))
		}
	}
}

// TestRetryFailedPut fails every segment put for a while: the flushed ts
// stays put until a put succeeds, and the data is stored once.
func TestRetryFailedPut(t *testing.T) {
	ctx := context.Background()
	f := blobtest.NewFaulty(mem.NewDriver())
	b := f.Bucket()
	o := testOptions("w")
	o.RetryAttempts = 1000
	w := open(t, b, o)
	must(t, w.AddSpan(1, 0))
	writeRange(t, w, 1, 1, 10)
	must(t, w.AdvanceResolved(1, 10))
	mustFlush(t, w)

	match, attempts := signal(isSegment)
	remove := f.FailWhen(blobtest.OpPut, match, nil)
	writeRange(t, w, 1, 11, 20)
	must(t, w.AdvanceResolved(1, 20))
	done := make(chan flushResult, 1)
	go func() {
		ts, err := w.Flush(ctx)
		done <- flushResult{ts, err}
	}()
	<-attempts
	<-attempts
	<-attempts
	if ts := w.FlushedTs(); ts != 10 {
		t.Fatalf("flushed ts moved to %d while every put failed", ts)
	}
	st, _, err := meta.ReadWriterState(ctx, b, testLog, "w")
	must(t, err)
	if st.FlushedTs != 10 {
		t.Fatalf("published %d while every put failed", st.FlushedTs)
	}
	remove()
	r := <-done
	if r.err != nil || r.ts != 20 {
		t.Fatalf("Flush after the puts recover: %d, %v", r.ts, r.err)
	}
	if s := w.Stats(); s.Retries < 3 {
		t.Fatalf("Stats.Retries = %d, want at least 3", s.Retries)
	}
	must(t, w.Close(ctx))
	checkIDs(t, readLog(t, b, readOpts{}), 1, 20)
}

// TestRetryAmbiguousPut makes a put that succeeded report a failure: the
// retry finds the object with its bytes and counts it as stored.
func TestRetryAmbiguousPut(t *testing.T) {
	ctx := context.Background()
	inner := mem.NewDriver()
	f := blobtest.NewFaulty(newLostAnswer(inner, 1))
	b := f.Bucket()
	w := open(t, b, testOptions("w"))
	must(t, w.AddSpan(1, 0))
	writeRange(t, w, 1, 1, 10)
	must(t, w.AdvanceResolved(1, 10))
	if ts := mustFlush(t, w); ts != 10 {
		t.Fatalf("Flush = %d", ts)
	}
	must(t, w.Close(ctx))
	checkIDs(t, readLog(t, b, readOpts{}), 1, 10)
	if n := len(segmentKeys(t, b)); n != 1 {
		t.Fatalf("%d segments, want 1", n)
	}
}

// lostAnswer stores the first n segment puts and then reports failure, as a
// put whose response was lost does. Puts may run concurrently.
type lostAnswer struct {
	driver.Driver
	fail atomic.Int32
}

func newLostAnswer(d driver.Driver, n int32) *lostAnswer {
	l := &lostAnswer{Driver: d}
	l.fail.Store(n)
	return l
}

func (l *lostAnswer) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	a, err := l.Driver.Put(ctx, key, r, size, opts)
	if err == nil && strings.Contains(key, "/"+segment.SegmentDir+"/") && l.fail.Add(-1) >= 0 {
		return blob.Attrs{}, blobtest.ErrInjected
	}
	return a, err
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
	w := open(t, b, o)
	must(t, w.AddSpan(1, 0))
	writeRange(t, w, 1, 1, 30)
	must(t, w.AdvanceResolved(1, 30))
	mustFlush(t, w)

	f.FailNth(blobtest.OpSync, 1, nil)
	writeRange(t, w, 1, 31, 60)
	must(t, w.AdvanceResolved(1, 60))
	if ts := mustFlush(t, w); ts != 60 {
		t.Fatalf("Flush after a failed sync = %d", ts)
	}
	f.Add(blobtest.Rule{Op: blobtest.OpWrite, Nth: 2, Fail: true, Partial: true})
	writeRange(t, w, 1, 61, 90)
	must(t, w.AdvanceResolved(1, 90))
	if ts := mustFlush(t, w); ts != 90 {
		t.Fatalf("Flush after a torn write = %d", ts)
	}
	if n := f.Count(blobtest.OpTruncate); n < 2 {
		t.Fatalf("%d truncates; the failures should each rewind the segment", n)
	}
	if s := w.Stats(); s.Retries < 2 {
		t.Fatalf("Stats.Retries = %d", s.Retries)
	}
	must(t, w.Close(ctx))
	checkIDs(t, readLog(t, b, readOpts{}), 1, 90)
}

// TestProgressWaitsForSync holds the active segment's fdatasync: the flush
// stages its progress meanwhile (the state object's put reaches its commit
// point), but the progress must not become visible, nor the put's
// BeforeCommit return, until the data is durable.
func TestProgressWaitsForSync(t *testing.T) {
	ctx := context.Background()
	d, err := local.NewDriver(t.TempDir(), nil)
	must(t, err)
	spy := &commitSpy{Driver: d, staged: make(chan struct{}, 16)}
	f := blobtest.NewFaulty(spy)
	b := f.Bucket()
	w := open(t, b, testOptions("w"))
	must(t, w.AddSpan(1, 0))
	writeRange(t, w, 1, 1, 10)
	must(t, w.AdvanceResolved(1, 10))
	if ts := mustFlush(t, w); ts != 10 {
		t.Fatalf("Flush = %d, want 10", ts)
	}
	// Forget the first flush, whose sync nothing held.
	for len(spy.staged) > 0 {
		<-spy.staged
	}
	spy.early.Store(false)

	release := f.Block(blobtest.OpSync)
	defer release()
	writeRange(t, w, 1, 11, 20)
	must(t, w.AdvanceResolved(1, 20))
	flushed := make(chan uint64, 1)
	go func() {
		ts, err := w.Flush(ctx)
		if err != nil {
			t.Errorf("Flush: %v", err)
		}
		flushed <- ts
	}()
	// The progress object is staged and its put is at the commit point; a
	// writer that did not wait for the sync would not get here (no hook)
	// or would return from the hook now (caught below).
	select {
	case <-spy.staged:
	case ts := <-flushed:
		t.Fatalf("Flush returned %d with the data's fdatasync held, its progress put never at a BeforeCommit", ts)
	case <-time.After(30 * time.Second):
		t.Fatal("the progress put never reached a BeforeCommit while the data's fdatasync was held")
	}
	st, _, err := meta.ReadWriterState(ctx, b, testLog, "w")
	must(t, err)
	if st.FlushedTs != 10 {
		t.Fatalf("the progress shows flushed ts %d while the data's fdatasync has not returned", st.FlushedTs)
	}
	select {
	case ts := <-flushed:
		t.Fatalf("Flush returned %d before the data's fdatasync did", ts)
	default:
	}
	spy.synced.Store(true)
	release()
	if ts := <-flushed; ts != 20 {
		t.Fatalf("Flush = %d, want 20", ts)
	}
	if spy.early.Load() {
		t.Fatal("the progress put's BeforeCommit returned while the data's fdatasync was held")
	}
	st, _, err = meta.ReadWriterState(ctx, b, testLog, "w")
	must(t, err)
	if st.FlushedTs != 20 {
		t.Fatalf("progress after the flush: flushed ts %d, want 20", st.FlushedTs)
	}
	must(t, w.Close(ctx))
	checkIDs(t, readLog(t, b, readOpts{}), 1, 20)
}

// commitSpy wraps the local driver and watches the BeforeCommit hooks of the
// writer's state puts: it reports each one reached on staged, and notes a
// hook that returns before the test said the sync is released.
type commitSpy struct {
	*local.Driver
	staged chan struct{}
	synced atomic.Bool // the test released the held fdatasync
	early  atomic.Bool // a hook returned before that
}

func (c *commitSpy) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	if hook := opts.BeforeCommit; hook != nil && strings.Contains(key, "/"+meta.WritersDir+"/") {
		opts.BeforeCommit = func(ctx context.Context) error {
			c.staged <- struct{}{}
			err := hook(ctx)
			if !c.synced.Load() {
				c.early.Store(true)
			}
			return err
		}
	}
	return c.Driver.Put(ctx, key, r, size, opts)
}

// TestRetriesExhausted makes every put fail: the flush fails after its
// retries, and the writer is stopped for good.
func TestRetriesExhausted(t *testing.T) {
	ctx := context.Background()
	f := blobtest.NewFaulty(mem.NewDriver())
	b := f.Bucket()
	o := testOptions("w")
	o.RetryAttempts = 2
	w := open(t, b, o)
	must(t, w.AddSpan(1, 0))
	writeRange(t, w, 1, 1, 10)
	must(t, w.AdvanceResolved(1, 10))
	f.FailWhen(blobtest.OpPut, isSegment, nil)
	_, err := w.Flush(ctx)
	if !errors.Is(err, blobtest.ErrInjected) || !strings.Contains(err.Error(), "2 retries") {
		t.Fatalf("Flush: %v", err)
	}
	if w.FlushedTs() != 0 {
		t.Fatalf("flushed ts %d after a failed flush", w.FlushedTs())
	}
	if err := w.Write(ctx, 1, row(1, 11, 11)); !errors.Is(err, blobtest.ErrInjected) {
		t.Fatalf("Write after the writer failed: %v", err)
	}
	if err := w.Close(ctx); !errors.Is(err, blobtest.ErrInjected) {
		t.Fatalf("Close after the writer failed: %v", err)
	}
	if got := f.Count(blobtest.OpPut); got < 3 {
		t.Fatalf("%d puts, want the first try and 2 retries", got)
	}
}

// TestBackpressure fills a tiny quota while the upload that would free it is
// blocked: Write blocks until its ctx ends, or until the upload goes through.
func TestBackpressure(t *testing.T) {
	ctx := context.Background()
	f := blobtest.NewFaulty(mem.NewDriver())
	b := f.Bucket()
	o := testOptions("w")
	o.MemoryQuota = 12 << 10
	o.FlushBytes = 12 << 10
	reg := prometheus.NewRegistry()
	o.Registerer = reg
	w := open(t, b, o)
	must(t, w.AddSpan(1, 0))
	batch := func(from uint64) []codec.Event {
		var evs []codec.Event
		for ts := from; ts < from+80; ts++ {
			evs = append(evs, row(1, ts, int64(ts)))
		}
		return evs
	}
	must(t, w.Write(ctx, 1, batch(1)...)) // most of the quota
	if used := w.Stats().BufferedBytes; used <= 6<<10 {
		t.Fatalf("a batch takes only %d bytes; the test needs more than half the quota", used)
	}
	gate := make(chan struct{})
	match, reached := signal(isSegment)
	f.Add(blobtest.Rule{Op: blobtest.OpPut, Match: match, Wait: gate})
	must(t, w.AdvanceResolved(1, 80))
	flushed := make(chan flushResult, 1)
	go func() {
		ts, err := w.Flush(ctx)
		flushed <- flushResult{ts, err}
	}()
	<-reached // the upload holds the batch's memory

	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- w.Write(cctx, 1, batch(81)...) }()
	waitFor(t, "a blocked Write", func() bool { return w.Stats().BlockedWrites == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("blocked Write after its ctx ended: %v", err)
	}

	go func() { errc <- w.Write(ctx, 1, batch(81)...) }()
	waitFor(t, "a blocked Write", func() bool { return w.Stats().BlockedWrites == 1 })
	if v := gaugeValue(t, reg, "redokit_writer_blocked_writes"); v != 1 {
		t.Fatalf("blocked_writes gauge = %v", v)
	}
	close(gate)
	if err := <-errc; err != nil {
		t.Fatalf("Write after the upload went through: %v", err)
	}
	if r := <-flushed; r.err != nil || r.ts != 80 {
		t.Fatalf("Flush: %d, %v", r.ts, r.err)
	}
	s := w.Stats()
	if s.Backpressure <= 0 || s.BlockedWrites != 0 {
		t.Fatalf("stats after back-pressure: %+v", s)
	}
	if v := counterValue(t, reg, "redokit_writer_backpressure_seconds_total", nil); v <= 0 {
		t.Fatalf("backpressure_seconds_total = %v", v)
	}
	must(t, w.AdvanceResolved(1, 200))
	must(t, w.Close(ctx))
	checkIDs(t, readLog(t, b, readOpts{}), 1, 160)
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
	w := open(t, b, o)
	must(t, w.AddSpan(1, 0))
	writeRange(t, w, 1, 1, 50)
	must(t, w.AdvanceResolved(1, 50))
	mustFlush(t, w)

	gate := make(chan struct{})
	match, reached := signal(isSegment)
	f.Add(blobtest.Rule{Op: blobtest.OpSync, Match: match, Wait: gate})
	writeRange(t, w, 1, 51, 100)
	must(t, w.AdvanceResolved(1, 100))
	flushed := make(chan error, 1)
	go func() {
		_, err := w.Flush(ctx)
		flushed <- err
	}()
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
	writeRange(t, w2, 1, 51, 100)
	must(t, w2.AdvanceResolved(1, 100))
	mustFlush(t, w2)
	must(t, w2.Close(ctx))
	checkIDs(t, readLog(t, b2, readOpts{fenced: true}), 1, 100)
	ns := names(t, segmentKeys(t, b2))
	if ns[0].Epoch != 1 || ns[len(ns)-1].Epoch != 2 || ns[len(ns)-1].Seq <= ns[0].Seq {
		t.Fatalf("segments %v: want the recovered epoch-1 segment, then epoch 2 with a higher seq", ns)
	}
}

// TestRecoveryDropsUnpublishedBlocks syncs a flush whose progress is never
// published, then reopens: the blocks above the published flushed ts are
// cut from the recovered segment, so the events the CDC system writes again
// are not duplicated.
func TestRecoveryDropsUnpublishedBlocks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f, b := faultyLocal(t, dir)
	o := testOptions("w")
	o.RetryAttempts = 1
	w := open(t, b, o)
	must(t, w.AddSpan(1, 0))
	writeRange(t, w, 1, 1, 50)
	must(t, w.AdvanceResolved(1, 50))
	mustFlush(t, w)
	f.FailWhen(blobtest.OpPut, isState, nil)
	writeRange(t, w, 1, 51, 100)
	must(t, w.AdvanceResolved(1, 100))
	if _, err := w.Flush(ctx); err == nil {
		t.Fatal("Flush succeeded without publishing")
	}
	w.Close(ctx)
	b2 := localBucket(t, dir)
	w2 := open(t, b2, o)
	must(t, w2.Close(ctx))
	checkIDs(t, readLog(t, b2, readOpts{}), 1, 50)
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
	w := open(t, b, o)
	must(t, w.AddSpan(1, 0))
	writeRange(t, w, 1, 1, 50)
	must(t, w.AdvanceResolved(1, 50))
	mustFlush(t, w)
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
	w := open(t, b, o)
	must(t, w.AddSpan(1, 0))
	writeRange(t, w, 1, 1, 5)
	must(t, w.AdvanceResolved(1, 5))
	mustFlush(t, w)
	waitFor(t, "the active segment to be sealed by age", func() bool { return len(activeFiles(t, dir)) == 0 })
	writeRange(t, w, 1, 6, 10)
	must(t, w.AdvanceResolved(1, 10))
	mustFlush(t, w)
	must(t, w.Close(ctx))
	if n := len(segmentKeys(t, b)); n != 2 {
		t.Fatalf("%d segments, want 2", n)
	}
	checkIDs(t, readLog(t, b, readOpts{}), 1, 10)
}

func TestMetrics(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	o := testOptions("w")
	o.Registerer = reg
	w := open(t, localBucket(t, t.TempDir()), o)
	must(t, w.AddSpan(1, 0))
	writeRange(t, w, 1, 1, 20)
	must(t, w.Write(ctx, 1, ddl(1, 21, "CREATE INDEX i ON t1(v)")))
	must(t, w.AdvanceResolved(1, 30))
	mustFlush(t, w)
	lbl := map[string]string{"kind": "row"}
	if v := counterValue(t, reg, "redokit_writer_events_total", lbl); v != 20 {
		t.Errorf("events_total{kind=row} = %v", v)
	}
	if v := counterValue(t, reg, "redokit_writer_events_total", map[string]string{"kind": "ddl"}); v != 1 {
		t.Errorf("events_total{kind=ddl} = %v", v)
	}
	if v := gaugeValue(t, reg, "redokit_writer_flushed_resolved_ts"); v != 30 {
		t.Errorf("flushed_resolved_ts = %v", v)
	}
	if v := gaugeValue(t, reg, "redokit_writer_buffered_bytes"); v != 0 {
		t.Errorf("buffered_bytes = %v", v)
	}
	for _, h := range []string{"redokit_writer_flush_duration_seconds", "redokit_writer_fsync_duration_seconds"} {
		if n := histCount(t, reg, h); n == 0 {
			t.Errorf("%s has no observation", h)
		}
	}
	if v := counterValue(t, reg, "redokit_writer_payload_bytes_total", nil); v != float64(w.Stats().PayloadBytes) || v == 0 {
		t.Errorf("payload_bytes_total = %v, Stats %d", v, w.Stats().PayloadBytes)
	}
	must(t, w.Close(ctx))
	mfs, err := reg.Gather()
	must(t, err)
	if len(mfs) != 0 {
		t.Errorf("%d metric families still registered after Close", len(mfs))
	}
}

func find(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	must(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			if have["log"] != testLog && have["log"] != "bench" {
				continue
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			return m
		}
	}
	t.Fatalf("metric %s%v not found", name, labels)
	return nil
}

func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	return find(t, reg, name, labels).GetCounter().GetValue()
}

func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	return find(t, reg, name, nil).GetGauge().GetValue()
}

func histCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	return find(t, reg, name, nil).GetHistogram().GetSampleCount()
}

// activeFiles lists the active segment files under a local root.
func activeFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(filepath.Join(dir, testLog), func(p string, info os.FileInfo, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if strings.HasSuffix(p, segment.ActiveExt) {
			out = append(out, p)
		}
		return nil
	})
	must(t, err)
	return out
}

// tearTail appends the first half of a copy of the file's last block, as a
// write torn by a power loss leaves it.
func tearTail(t testing.TB, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	must(t, err)
	rec, err := segment.Recover(bytesReader(data), nil)
	must(t, err)
	if len(rec.Blocks) == 0 {
		t.Fatalf("%s has no block to tear", path)
	}
	last := rec.Blocks[len(rec.Blocks)-1]
	frame := data[last.Offset:last.End()]
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = fh.Write(frame[:len(frame)/2])
	must(t, err)
	must(t, fh.Close())
	rec, err = segment.Recover(bytesReader(append(data, frame[:len(frame)/2]...)), nil)
	must(t, err)
	if !rec.Torn() {
		t.Fatal("the torn tail does not read as torn")
	}
}

// TestCloseAbort gives up on Close while a sync hangs: Close returns the
// ctx's error, the active segment stays unsealed, and the next Open recovers
// what was published.
func TestCloseAbort(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f, b := faultyLocal(t, dir)
	w := open(t, b, testOptions("w"))
	must(t, w.AddSpan(1, 0))
	writeRange(t, w, 1, 1, 20)
	must(t, w.AdvanceResolved(1, 20))
	mustFlush(t, w)
	writeRange(t, w, 1, 21, 40)
	must(t, w.AdvanceResolved(1, 40))
	gate := make(chan struct{})
	match, reached := signal(isSegment)
	f.Add(blobtest.Rule{Op: blobtest.OpSync, Match: match, Wait: gate})
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- w.Close(cctx) }()
	<-reached
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("aborted Close: %v", err)
	}
	close(gate)
	<-w.commitDone // the hung sync returns; the pipeline ends
	if err := w.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("second Close: %v, want the first one's result", err)
	}
	if n := len(activeFiles(t, dir)); n != 1 {
		t.Fatalf("%d active segments after an aborted Close", n)
	}
	w2 := open(t, localBucket(t, dir), testOptions("w"))
	if w2.FlushedTs() != 20 {
		t.Fatalf("reopened at %d", w2.FlushedTs())
	}
	must(t, w2.Close(ctx))
	checkIDs(t, readLog(t, localBucket(t, dir), readOpts{fenced: true}), 1, 20)
}
