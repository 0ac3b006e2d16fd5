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

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/blob/driver"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/segment"
	"github.com/redokit/redokit/testkit/testenv"
)

func isSegment(c blobtest.Call) bool { return strings.Contains(c.Key, "/"+layout.SegmentDir+"/") }
func isState(c blobtest.Call) bool   { return strings.Contains(c.Key, "/"+layout.WritersDir+"/") }

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

func writeRange(t *testing.T, w *Writer, span SpanID, from, to uint64) {
	t.Helper()
	for ts := from; ts <= to; ts++ {
		must(t, w.Write(context.Background(), span, row(span, ts, int64(ts))))
	}
}

// writeFlushed writes rows from..to of span, resolves the span at to and
// flushes: the events are durable and published when it returns.
func writeFlushed(t *testing.T, w *Writer, span SpanID, from, to uint64) {
	t.Helper()
	writeRange(t, w, span, from, to)
	must(t, w.AdvanceResolved(span, to))
	mustFlush(t, w)
}

// abortClose closes w with a ctx it cancels once reached fires (something
// holds the close there): Close must return the ctx's error.
func abortClose(t *testing.T, w *Writer, reached <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Close(ctx) }()
	<-reached
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("aborted Close: %v", err)
	}
}

// flushHeld holds the first op (OpSync, OpSeal, …) on a segment at a gate,
// writes rows from..to of span 1, resolves the span at to and flushes in the
// background: reached fires when the op is held, closing gate lets it go on,
// and flushed gets the flush's error.
func flushHeld(t *testing.T, f *blobtest.Faulty, w *Writer, op blobtest.Op, from, to uint64) (gate chan struct{}, reached <-chan struct{}, flushed <-chan error) {
	t.Helper()
	gate = make(chan struct{})
	match, held := signal(isSegment)
	f.Add(blobtest.Rule{Op: op, Match: match, Wait: gate})
	writeRange(t, w, 1, from, to)
	must(t, w.AdvanceResolved(1, to))
	done := make(chan error, 1)
	go func() {
		_, err := w.Flush(context.Background())
		done <- err
	}()
	return gate, held, done
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
	if err == nil && strings.Contains(key, "/"+layout.SegmentDir+"/") && l.fail.Add(-1) >= 0 {
		return blob.Attrs{}, blobtest.ErrInjected
	}
	return a, err
}

// TestBackpressure fills a tiny quota while the upload that would free it is
// blocked: Write blocks until its ctx ends, or until the upload goes through.
func TestBackpressure(t *testing.T) {
	ctx := context.Background()
	f, b := faultyMem()
	o := testOptions("w")
	o.MemoryQuota = 12 << 10
	o.FlushBytes = 12 << 10
	w := openSpan1(t, b, o)
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
	testenv.WaitFor(t, "a blocked Write", func() bool { return w.Stats().BlockedWrites == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("blocked Write after its ctx ended: %v", err)
	}

	go func() { errc <- w.Write(ctx, 1, batch(81)...) }()
	testenv.WaitFor(t, "a blocked Write", func() bool { return w.Stats().BlockedWrites == 1 })
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
	must(t, w.AdvanceResolved(1, 200))
	must(t, w.Close(ctx))
	checkIDs(t, readLog(t, b, readOpts{}), 1, 160)
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
