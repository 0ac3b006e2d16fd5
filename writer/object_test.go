package writer

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
)

// TestObjectSplit checks that a flush larger than the segment size limit is
// split into several objects.
func TestObjectSplit(t *testing.T) {
	ctx := context.Background()
	b := memBucket()
	o := testOptions("w")
	o.MaxSegmentBytes = 8 << 10
	o.BlockSize = 1 << 10
	o.Compression = CompressionNone
	w := openSpan1(t, b, o)
	for ts := uint64(1); ts <= 300; ts++ {
		must(t, w.Write(ctx, 1, row(1, ts, int64(ts))))
	}
	must(t, w.AdvanceResolved(1, 300))
	mustFlush(t, w)
	must(t, w.Close(ctx))
	keys := segmentKeys(t, b)
	if len(keys) < 3 {
		t.Fatalf("%d objects for one big flush; want a split", len(keys))
	}
	for _, k := range keys {
		a, err := b.Stat(ctx, k)
		must(t, err)
		if a.Size > o.MaxSegmentBytes {
			t.Errorf("%s is %d bytes, over the limit %d", k, a.Size, o.MaxSegmentBytes)
		}
	}
	if gs := readLog(t, b, readOpts{}); len(gs) != 300 {
		t.Fatalf("read %d events", len(gs))
	}
}

// TestRetryFailedPut fails every segment put for a while: the flushed ts
// stays put until a put succeeds, and the data is stored once.
func TestRetryFailedPut(t *testing.T) {
	ctx := context.Background()
	f, b := faultyMem()
	o := testOptions("w")
	o.RetryAttempts = 1000
	w := openSpan1(t, b, o)
	writeFlushed(t, w, 1, 1, 10)

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
	w := openSpan1(t, b, testOptions("w"))
	writeRange(t, w, 1, 1, 10)
	must(t, w.AdvanceResolved(1, 10))
	flushTo(t, w, 10)
	must(t, w.Close(ctx))
	checkIDs(t, readLog(t, b, readOpts{}), 1, 10)
	if n := len(segmentKeys(t, b)); n != 1 {
		t.Fatalf("%d segments, want 1", n)
	}
}

// TestRetriesExhausted makes every put fail: the flush fails after its
// retries, and the writer is stopped for good.
func TestRetriesExhausted(t *testing.T) {
	ctx := context.Background()
	f, b := faultyMem()
	o := testOptions("w")
	o.RetryAttempts = 2
	w := openSpan1(t, b, o)
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

// TestObjectStore drives the object-store path through the store
// interface: a catch-up frame seals the object being assembled and starts
// its upload while the next is assembled; the progress frame ends the last
// object, or, when the first upload had not landed yet, goes into an object
// of its own (seq 3), launched after the others landed; persist waits for
// all; settle has nothing left to seal.
func TestObjectStore(t *testing.T) {
	b := memBucket()
	c := newStoreHarness(t, b, testOptions("w"))
	s, ok := c.store.(*objectStore)
	if !ok {
		t.Fatalf("store on mem is a %T", c.store)
	}
	defer c.store.abandon()
	must(t, c.store.add(storedFrame(t, c.w, 1, 1, tsRange(11, 20)...)))
	must(t, c.store.add(storedFrame(t, c.w, 2, 11, tsRange(1, 10)...))) // below the object's last ts
	if len(s.uploads) != 1 || s.obj == nil || s.obj.hdr.Seq != 2 {
		t.Fatalf("after a catch-up frame: %d uploads, assembling %+v", len(s.uploads), s.obj)
	}
	must(t, c.store.record(20, 20, []segment.SpanTs{{Span: 1, Ts: 20}, {Span: 2, Ts: 20}}))
	must(t, c.store.persist())
	last := uint64(len(s.stored)) // 2, or 3 with the frame alone
	if len(s.uploads) != 0 || s.obj != nil || last < 2 || last > 3 {
		t.Fatalf("after persist: %d uploads, %d stored, assembling %v", len(s.uploads), len(s.stored), s.obj != nil)
	}
	if d := c.dur; d.FlushedTs != 20 || d.Seq != last || d.ChainMaxTs != 20 {
		t.Fatalf("durable progress %+v, want ts 20 through seq %d", d, last)
	}
	must(t, c.publishNow())
	st, _, err := meta.ReadWriterState(context.Background(), b, testLog, "w")
	must(t, err)
	if st.FlushedTs != 20 || st.Seq != last || st.ChainMaxTs != 20 {
		t.Fatalf("published %+v, want ts 20 through seq %d", st, last)
	}
	must(t, c.store.settle(true))
	ns := names(t, segmentKeys(t, b))
	if uint64(len(ns)) != last {
		t.Fatalf("segments %v, want sealed seqs 1..%d", ns, last)
	}
	for i, n := range ns {
		if n.Seq != uint64(i+1) || n.Active {
			t.Fatalf("segments %v, want sealed seqs 1..%d", ns, last)
		}
	}
	if got := c.store.doomed(st.Epoch, 0); len(got) != 0 {
		t.Fatalf("published objects offered for deletion: %v", got)
	}
	checkIDs(t, readLog(t, b, readOpts{}), 1, 20)
}

// TestRetractHungStore fences an object-store writer whose store hangs on
// Delete: the zombie's flush must still fail within RetractTimeout, fenced,
// naming the object above the fence it could not delete.
func TestRetractHungStore(t *testing.T) {
	ctx := context.Background()
	f, b := faultyMem()
	o := testOptions("w")
	o.RetractTimeout = 100 * time.Millisecond
	w1 := open(t, b, o)
	must(t, w1.AddSpan(1, 100))
	must(t, w1.Write(ctx, 1, row(1, 110, 1)))
	must(t, w1.AdvanceResolved(1, 120))
	mustFlush(t, w1)

	w2 := open(t, b, testOptions("w"))
	hang := make(chan struct{}) // never closed: only the ctx ends the wait
	f.Add(blobtest.Rule{Op: blobtest.OpDelete, Match: isSegment, Wait: hang})
	must(t, w1.Write(ctx, 1, row(1, 130, 2)))
	must(t, w1.AdvanceResolved(1, 140))
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := w1.Publish(fctx)
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("fenced flush took %v with RetractTimeout %v", el, o.RetractTimeout)
	}
	if !errors.Is(err, meta.ErrFenced) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("fenced flush over a hung delete: %v, want ErrFenced and the delete's deadline", err)
	}
	var doomed string
	for _, k := range segmentKeys(t, b) {
		if n := names(t, []string{k})[0]; n.Epoch == w1.Epoch() && n.Seq == 2 {
			doomed = k
		}
	}
	if doomed == "" || !strings.Contains(err.Error(), doomed) {
		t.Fatalf("error %q does not name the segment above the fence (%q)", err, doomed)
	}
	must(t, w2.Close(ctx))
}
