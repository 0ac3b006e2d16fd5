package writer

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/blob/driver"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/segment"
	"github.com/redokit/redokit/testkit/testenv"
)

// objectOptions make flushes of several small segment objects: rows of about
// 1 KiB (writeBig), uncompressed, in blocks of 4 KiB, a few blocks an object.
func objectOptions(uploads int) *Options {
	o := testOptions("w")
	o.MaxSegmentBytes = 16 << 10
	o.Compression = CompressionNone
	o.MaxUploads = uploads
	return o
}

// writeBig writes rows from..to of span 1 (id = ts), about 1 KiB each, and
// resolves them.
func writeBig(t *testing.T, w *Writer, from, to uint64) {
	t.Helper()
	r := newRand(from)
	for ts := from; ts <= to; ts++ {
		must(t, w.Write(context.Background(), 1, bigRow(r, 1, ts, int64(ts), 1000)))
	}
	must(t, w.AdvanceResolved(1, to))
}

// seqIs matches the puts of the segment object with sequence number seq.
func seqIs(seq uint64) func(blobtest.Call) bool {
	return func(c blobtest.Call) bool {
		if !isSegment(c) {
			return false
		}
		n, err := segment.ParseName(c.Key)
		return err == nil && n.Seq == seq
	}
}

// keyOf returns the stored key of the segment object with sequence number
// seq, or "".
func keyOf(t *testing.T, f *blobtest.Faulty, seq uint64) string {
	t.Helper()
	for _, k := range segmentKeys(t, blob.NewBucket(f.Inner())) {
		if n, err := segment.ParseName(k); err == nil && n.Seq == seq {
			return k
		}
	}
	return ""
}

// publishedTs reads the writer's published flushed ts.
func publishedTs(t *testing.T, b *blob.Bucket) uint64 {
	t.Helper()
	st, _, err := meta.ReadWriterState(context.Background(), b, testLog, "w")
	must(t, err)
	return st.FlushedTs
}

// readIDs reads (0, end] of the log with the reader package, duplicates kept,
// and checks that it holds exactly the rows from..to of span 1, once each, in
// commit-ts order.
func readIDs(t *testing.T, b *blob.Bucket, end, from, to uint64) {
	t.Helper()
	ctx := context.Background()
	r, err := reader.Open(ctx, b, &reader.Options{LogID: testLog, EndTs: end, KeepDuplicates: true})
	must(t, err)
	defer r.Close()
	want := from
	for {
		ev, err := r.Next(ctx)
		if err == io.EOF {
			break
		}
		must(t, err)
		id := ev.Event.Row.Columns[0].Value.Int()
		if id != int64(want) || ev.Event.CommitTs() != want {
			t.Fatalf("read row %d at ts %d, want %d", id, ev.Event.CommitTs(), want)
		}
		want++
	}
	if want != to+1 {
		t.Fatalf("read rows %d..%d, want %d..%d", from, want-1, from, to)
	}
}

// TestObjectSlowSecondUpload holds the upload of a flush's second segment
// object: the objects after it are uploaded meanwhile, but neither the
// flushed ts nor the published progress moves until it is durable.
func TestObjectSlowSecondUpload(t *testing.T) {
	ctx := context.Background()
	f, b := faultyMem()
	w := openSpan1(t, b, objectOptions(3))
	writeBig(t, w, 1, 10)
	flushTo(t, w, 10)

	// The flush's objects are seqs 2, 3, ...: hold the second.
	match, held := signal(seqIs(3))
	gate := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	defer release()
	f.Add(blobtest.Rule{Op: blobtest.OpPut, Match: match, Wait: gate})
	writeBig(t, w, 11, 80) // several objects
	done := make(chan flushResult, 1)
	go func() {
		ts, err := w.Flush(ctx)
		done <- flushResult{ts, err}
	}()
	<-held
	// The first and third objects go up while the second is held.
	testenv.WaitFor(t, "the third upload", func() bool { return keyOf(t, f, 2) != "" && keyOf(t, f, 4) != "" })
	if k := keyOf(t, f, 3); k != "" {
		t.Fatalf("the held upload %s is stored", k)
	}
	// A window for a Flush that did not wait for the held upload to show
	// itself; a correct one cannot return until the release below.
	time.Sleep(20 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("Flush returned %d, %v while an upload was held", r.ts, r.err)
	default:
	}
	if ts := w.FlushedTs(); ts != 10 {
		t.Fatalf("flushed ts %d while an upload is held", ts)
	}
	if ts := publishedTs(t, b); ts != 10 {
		t.Fatalf("published %d while an upload is held", ts)
	}
	release()
	if r := <-done; r.err != nil || r.ts != 80 {
		t.Fatalf("Flush after the upload went through: %d, %v", r.ts, r.err)
	}
	if ts, err := w.Publish(ctx); err != nil || ts != 80 {
		t.Fatalf("Publish after the flush: %d, %v", ts, err)
	}
	if ts := publishedTs(t, b); ts != 80 {
		t.Fatalf("published %d after Publish", ts)
	}
	must(t, w.Close(ctx))
	checkIDs(t, readLog(t, b, readOpts{}), 1, 80)
	readIDs(t, b, 80, 1, 80)
}

// TestObjectUploadRetry fails a flush's second segment object a few times
// while the others go through: the flush waits, retries it with backoff, and
// the data is stored once.
func TestObjectUploadRetry(t *testing.T) {
	ctx := context.Background()
	f, b := faultyMem()
	o := objectOptions(3)
	o.RetryAttempts = 1000
	w := openSpan1(t, b, o)
	writeBig(t, w, 1, 10)
	mustFlush(t, w)

	var (
		mu       sync.Mutex
		failing  = true
		attempts = make(chan struct{}, 100)
		second   = seqIs(3) // the flush's objects are seqs 2, 3, ...
	)
	f.Add(blobtest.Rule{Op: blobtest.OpPut, Fail: true, Match: func(c blobtest.Call) bool {
		mu.Lock()
		defer mu.Unlock()
		if !second(c) || !failing {
			return false
		}
		attempts <- struct{}{}
		return true
	}})
	writeBig(t, w, 11, 80)
	done := make(chan flushResult, 1)
	go func() {
		ts, err := w.Flush(ctx)
		done <- flushResult{ts, err}
	}()
	for range 3 {
		<-attempts
	}
	if ts := w.FlushedTs(); ts != 10 {
		t.Fatalf("flushed ts %d while an upload fails", ts)
	}
	if ts := publishedTs(t, b); ts != 10 {
		t.Fatalf("published %d while an upload fails", ts)
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	if r := <-done; r.err != nil || r.ts != 80 {
		t.Fatalf("Flush after the upload recovers: %d, %v", r.ts, r.err)
	}
	if s := w.Stats(); s.Retries < 3 {
		t.Fatalf("Stats.Retries = %d, want at least 3", s.Retries)
	}
	must(t, w.Close(ctx))
	checkIDs(t, readLog(t, b, readOpts{}), 1, 80)
	readIDs(t, b, 80, 1, 80)
}

// TestObjectUploadLostAnswers stores segment objects but reports failures,
// as puts whose answers were lost: the retries find each object with its
// bytes and count it as stored, once.
func TestObjectUploadLostAnswers(t *testing.T) {
	ctx := context.Background()
	f := blobtest.NewFaulty(newLostAnswer(mem.NewDriver(), 3))
	b := f.Bucket()
	w := openSpan1(t, b, objectOptions(3))
	writeBig(t, w, 1, 80)
	flushTo(t, w, 80)
	s := w.Stats()
	keys := segmentKeys(t, b)
	if s.Segments != int64(len(keys)) || len(keys) < 3 {
		t.Fatalf("Stats.Segments = %d, %d objects stored", s.Segments, len(keys))
	}
	if s.Retries < 1 {
		t.Fatalf("Stats.Retries = %d", s.Retries)
	}
	must(t, w.Close(ctx))
	readIDs(t, b, 80, 1, 80)
}

// TestObjectUploadRetriesExhausted fails one segment object for good: the
// flush fails after its retries, the writer stops, and nothing of the flush
// is published.
func TestObjectUploadRetriesExhausted(t *testing.T) {
	ctx := context.Background()
	f, b := faultyMem()
	o := objectOptions(2)
	o.RetryAttempts = 2
	w := openSpan1(t, b, o)
	writeBig(t, w, 1, 10)
	mustFlush(t, w)

	f.FailWhen(blobtest.OpPut, seqIs(3), nil) // the flush's second object
	writeBig(t, w, 11, 80)
	_, err := w.Flush(ctx)
	if !errors.Is(err, blobtest.ErrInjected) || !strings.Contains(err.Error(), "2 retries") {
		t.Fatalf("Flush: %v", err)
	}
	if ts := w.FlushedTs(); ts != 10 {
		t.Fatalf("flushed ts %d after a failed flush", ts)
	}
	if ts := publishedTs(t, b); ts != 10 {
		t.Fatalf("published %d after a failed flush", ts)
	}
	if err := w.Write(ctx, 1, row(1, 81, 81)); !errors.Is(err, blobtest.ErrInjected) {
		t.Fatalf("Write after the writer failed: %v", err)
	}
	if err := w.Close(ctx); !errors.Is(err, blobtest.ErrInjected) {
		t.Fatalf("Close after the writer failed: %v", err)
	}
	if err := w.Close(ctx); !errors.Is(err, blobtest.ErrInjected) {
		t.Fatalf("second Close: %v", err)
	}
	// The next epoch reads what was published, once.
	b2 := blob.NewBucket(f.Inner())
	w2 := open(t, b2, o)
	if w2.FlushedTs() != 10 {
		t.Fatalf("reopened at %d", w2.FlushedTs())
	}
	must(t, w2.Close(ctx))
	checkIDs(t, readLog(t, b2, readOpts{fenced: true}), 1, 10)
}

// TestObjectFlushOrder runs flushes of several objects each: every flush
// reports a higher ts, publishes it, and the objects' seqs are unique and in
// the order of their data.
func TestObjectFlushOrder(t *testing.T) {
	ctx := context.Background()
	f, b := faultyMem()
	f.Delay(blobtest.OpPut, time.Millisecond) // let uploads finish out of order
	w := openSpan1(t, b, objectOptions(4))
	r := newRand(7)
	var last uint64
	for i := range 12 {
		to := last + 1 + uint64(r.IntN(60))
		writeBig(t, w, last+1, to)
		ts := mustFlush(t, w)
		if ts != to || ts <= last {
			t.Fatalf("flush %d = %d, want %d (after %d)", i, ts, to, last)
		}
		if p := publishedTs(t, b); p != ts {
			t.Fatalf("flush %d: published %d, reported %d", i, p, ts)
		}
		last = ts
	}
	must(t, w.Close(ctx))
	ns := names(t, segmentKeys(t, b))
	if int64(len(ns)) != w.Stats().Segments {
		t.Fatalf("%d objects, Stats.Segments %d", len(ns), w.Stats().Segments)
	}
	var data segment.Name // the last object holding blocks
	for i, n := range ns {
		if i > 0 && n.Seq <= ns[i-1].Seq {
			t.Fatalf("segment %s after %s", n, ns[i-1])
		}
		if n.MinTs == 0 && n.MaxTs == 0 {
			continue // a flush's progress frame alone
		}
		if data.MaxTs != 0 && n.MinTs <= data.MaxTs {
			t.Fatalf("segment %s after %s", n, data)
		}
		data = n
	}
	st, _, err := meta.ReadWriterState(ctx, b, testLog, "w")
	must(t, err)
	if !st.HasSeq || st.Seq != ns[len(ns)-1].Seq {
		t.Fatalf("published seq %d (%v), last object %s", st.Seq, st.HasSeq, ns[len(ns)-1])
	}
	checkIDs(t, readLog(t, b, readOpts{}), 1, last)
	readIDs(t, b, last, 1, last)
}

// concurrency counts the segment puts under way at once.
type concurrency struct {
	driver.Driver
	delay     time.Duration
	now, peak atomic.Int32
}

func (c *concurrency) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	if strings.Contains(key, "/"+layout.SegmentDir+"/") {
		n := c.now.Add(1)
		defer c.now.Add(-1)
		for {
			p := c.peak.Load()
			if n <= p || c.peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(c.delay)
	}
	return c.Driver.Put(ctx, key, r, size, opts)
}

// TestObjectUploadsBounded checks that at most MaxUploads objects are
// uploaded at once, and that more than one are when allowed.
func TestObjectUploadsBounded(t *testing.T) {
	for _, n := range []int{1, 2, 3} {
		t.Run(string(rune('0'+n)), func(t *testing.T) {
			ctx := context.Background()
			d := &concurrency{Driver: mem.NewDriver(), delay: 40 * time.Millisecond}
			b := blob.NewBucket(d)
			w := openSpan1(t, b, objectOptions(n))
			writeBig(t, w, 1, 150)
			flushTo(t, w, 150)
			must(t, w.Close(ctx))
			if p := d.peak.Load(); int(p) != n {
				t.Fatalf("MaxUploads %d: %d uploads at once", n, p)
			}
			readIDs(t, b, 150, 1, 150)
		})
	}
}

// TestObjectFenceDuringUploads fences a writer while one of its uploads is
// held: once it returns, the writer's publication fails with meta.ErrFenced,
// and the writer retracts every object it stored after its last publication.
func TestObjectFenceDuringUploads(t *testing.T) {
	ctx := context.Background()
	f, b := faultyMem()
	w1 := open(t, b, objectOptions(3))
	must(t, w1.AddSpan(1, 0))
	writeBig(t, w1, 1, 10)
	mustFlush(t, w1)
	published := segmentKeys(t, b)

	match, reached := signal(seqIs(3)) // the flush's second object
	gate := make(chan struct{})
	f.Add(blobtest.Rule{Op: blobtest.OpPut, Match: match, Wait: gate})
	writeBig(t, w1, 11, 80)
	done := make(chan error, 1)
	go func() {
		_, err := w1.Publish(ctx)
		done <- err
	}()
	<-reached // the second upload is held
	// Let the others finish, so that there is something to retract.
	testenv.WaitFor(t, "the other uploads", func() bool { return keyOf(t, f, 2) != "" && keyOf(t, f, 4) != "" })
	w2 := open(t, blob.NewBucket(f.Inner()), objectOptions(3))
	close(gate)
	if err := <-done; !errors.Is(err, meta.ErrFenced) {
		t.Fatalf("fenced writer's Flush: %v", err)
	}
	if !errors.Is(w1.Err(), meta.ErrFenced) {
		t.Fatalf("Err() = %v", w1.Err())
	}
	if err := w1.Close(ctx); !errors.Is(err, meta.ErrFenced) {
		t.Fatalf("fenced writer's Close: %v", err)
	}
	if err := w1.Close(ctx); !errors.Is(err, meta.ErrFenced) {
		t.Fatalf("second Close: %v", err)
	}
	if keys := segmentKeys(t, b); !slices.Equal(keys, published) {
		t.Fatalf("objects after the fence: %v, want the published %v", keys, published)
	}
	checkIDs(t, readLog(t, b, readOpts{}), 1, 10)
	if w2.FlushedTs() != 10 {
		t.Fatalf("new epoch at %d", w2.FlushedTs())
	}
	must(t, w2.AddSpan(1, 10))
	writeBig(t, w2, 11, 40)
	mustFlush(t, w2)
	must(t, w2.Close(ctx))
	readIDs(t, b, 40, 1, 40)
}

// TestObjectCloseAbortDuringUpload gives up on Close while an upload hangs:
// Close returns the ctx's error (again when called again), and the next epoch
// reads what was published.
func TestObjectCloseAbortDuringUpload(t *testing.T) {
	ctx := context.Background()
	f := blobtest.NewFaulty(mem.NewDriver())
	cd := &countingPuts{Driver: f.Driver()}
	b := blob.NewBucket(cd)
	w := openSpan1(t, b, objectOptions(3))
	writeBig(t, w, 1, 10)
	mustFlush(t, w)
	writeBig(t, w, 11, 80)
	match, reached := signal(isSegment)
	release := f.Block(blobtest.OpPut) // a Put waits until released or its ctx ends
	defer release()
	f.Add(blobtest.Rule{Op: blobtest.OpPut, Match: match})
	abortClose(t, w, reached)
	<-w.commitDone
	// The held upload was canceled and waited for: nothing of the writer
	// still runs (the Put is still blocked unless its ctx ended).
	if n := cd.inflight.Load(); n != 0 {
		t.Fatalf("%d puts still under way after the writer stopped", n)
	}
	release()
	if err := w.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("second Close: %v", err)
	}
	w2 := open(t, blob.NewBucket(f.Inner()), objectOptions(3))
	if w2.FlushedTs() != 10 {
		t.Fatalf("reopened at %d", w2.FlushedTs())
	}
	must(t, w2.Close(ctx))
	checkIDs(t, readLog(t, b, readOpts{fenced: true}), 1, 10)
}

func TestMaxUploadsOption(t *testing.T) {
	o, err := (&Options{LogID: "l", WriterID: "w"}).withDefaults()
	must(t, err)
	if o.MaxUploads != DefaultMaxUploads {
		t.Fatalf("default MaxUploads %d", o.MaxUploads)
	}
	_, err = (&Options{LogID: "l", WriterID: "w", MaxUploads: -1}).withDefaults()
	if err == nil || !strings.Contains(err.Error(), "MaxUploads") {
		t.Fatalf("negative MaxUploads: %v", err)
	}
}

// countingPuts counts the Puts under way. A Put whose ctx ended lingers a
// little before it returns, as a driver tearing down a connection does, so
// that a writer that did not wait for it would be seen.
type countingPuts struct {
	driver.Driver
	inflight atomic.Int32
}

func (d *countingPuts) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	d.inflight.Add(1)
	defer d.inflight.Add(-1)
	a, err := d.Driver.Put(ctx, key, r, size, opts)
	if ctx.Err() != nil {
		time.Sleep(50 * time.Millisecond)
	}
	return a, err
}
