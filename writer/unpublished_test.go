package writer

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/redokit/redokit/segment"
)

// TestReportedAfterEmptyPublication: an epoch that starts above seq 1 (an
// earlier epoch used seq 1), publishes a flush that wrote no segment (seq 0:
// "no segment yet"), then reports flushes in its first segment before the
// lazy publisher names it, and fails. The next epoch must take the fence
// from that segment's progress frames: the flushes were reported. The fault
// schedules found this (seed 51 on a loaded machine): the durable walk read
// the published seq 0 as a segment, the epoch's first segment as lying past
// a gap above it, fenced it out, and the acknowledged events were gone
// without an error.
func TestReportedAfterEmptyPublication(t *testing.T) {
	for _, backend := range []string{"mem", "local"} {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			f, b, o := unpublishedStore(t, backend)
			w := openSpan1(t, b, o)
			writeFlushed(t, w, 1, 1, 10)
			must(t, w.Close(ctx))

			w = open(t, b, o)
			must(t, w.AddSpan(1, 10))
			must(t, w.AdvanceResolved(1, 11))
			if ts, err := w.Publish(ctx); err != nil || ts != 11 {
				t.Fatalf("publish: %d, %v", ts, err)
			}
			st, _, err := meta.ReadWriterState(ctx, b, testLog, "w")
			must(t, err)
			if !st.HasSeq || st.Seq != 0 || st.Epoch != 2 {
				t.Fatalf("state after an empty publication: %+v, want epoch 2 with the published seq 0", st)
			}
			// Rows 11..20 at ts 12..21: the ids stay consecutive across the
			// empty flush.
			for ts := uint64(12); ts <= 21; ts++ {
				must(t, w.Write(ctx, 1, row(1, ts, int64(ts-1))))
			}
			must(t, w.AdvanceResolved(1, 21))
			if ts, err := w.Flush(ctx); err != nil || ts != 21 {
				t.Fatalf("flush: %d, %v", ts, err)
			}
			// The next flush's segment write fails: the writer stops before
			// it publishes the reported flush.
			failing := failSegmentWrites(f)
			must(t, w.Write(ctx, 1, row(1, 22, 21)))
			must(t, w.AdvanceResolved(1, 22))
			if _, err := w.Flush(ctx); err == nil {
				t.Fatal("a flush whose segment write fails succeeded")
			}
			w.Close(ctx)
			failing.Store(false)
			if st, _, err := meta.ReadWriterState(ctx, b, testLog, "w"); err != nil || st.Seq != 0 {
				t.Fatalf("the failed writer published: %+v, %v", st, err)
			}

			w = open(t, b, o)
			// The failed flush's frame may be in the file (a failed sync on
			// local disk, whose bytes are still there): taking it is no
			// loss, just more than was reported.
			got := w.FlushedTs()
			if got != 21 && got != 22 {
				t.Errorf("epoch 3 starts at flushed ts %d, not at the 21 epoch 2 reported", got)
			}
			must(t, w.Close(ctx))
			checkIDs(t, readLog(t, b, readOpts{fenced: true}), 1, 20+got-21)
		})
	}
}

// gapWriter writes an epoch whose first flush is published and whose next
// flushes are reported but not (the lazy publisher waits an hour), each
// flush filling more than a segment, and then fails a flush: the state
// names only the first flush. It returns the faulty store, the bucket, the
// options and the last flushed ts reported.
func gapWriter(t *testing.T, backend string, flushes int) (*blobtest.Faulty, *blob.Bucket, *Options, uint64) {
	ctx := context.Background()
	f, b, o := unpublishedStore(t, backend)
	o.MaxSegmentBytes = 6 << 10
	o.BlockSize = 1 << 10
	o.MaxUploads = 4
	w := openSpan1(t, b, o)
	r := newRand(7)
	var reported uint64
	for i := range flushes {
		// Ts 10i+1..10i+5, resolved at 10i+9: the rows of a flush lie
		// below its flushed ts.
		for ts := uint64(10*i + 1); ts <= uint64(10*i+5); ts++ {
			must(t, w.Write(ctx, 1, bigRow(r, 1, ts, int64(ts), 2<<10)))
		}
		must(t, w.AdvanceResolved(1, uint64(10*i+9)))
		var err error
		if i == 0 {
			reported, err = w.Publish(ctx)
		} else {
			reported, err = w.Flush(ctx)
		}
		must(t, err)
	}
	failing := failSegmentWrites(f)
	must(t, w.Write(ctx, 1, row(1, uint64(10*flushes+1), 0)))
	must(t, w.AdvanceResolved(1, uint64(10*flushes+1)))
	if _, err := w.Flush(ctx); err == nil {
		t.Fatal("a flush whose segment write fails succeeded")
	}
	w.Close(ctx)
	failing.Store(false)
	return f, b, o, reported
}

// framedSegments returns the epoch-1 segments of the log by seq, and which
// of them hold a progress frame.
func framedSegments(t *testing.T, b *blob.Bucket) (keys map[uint64]string, framed map[uint64]bool) {
	keys, framed = map[uint64]string{}, map[uint64]bool{}
	for _, k := range segmentKeys(t, b) {
		n, err := segment.ParseName(k)
		must(t, err)
		data, err := b.ReadAll(context.Background(), k)
		must(t, err)
		rec, err := segment.Recover(bytesReader(data), nil)
		must(t, err)
		keys[n.Seq], framed[n.Seq] = k, len(rec.Progress) > 0
	}
	return keys, framed
}

// TestMissingSegmentBelowFrames deletes a segment that holds reported
// progress from below another one that does (a disaster, or an operator's
// mistake): the next epoch cannot tell what the missing one held, and must
// refuse to open, naming it. Before, the walk stopped at the gap and fenced
// the later segments out: the reported flushes in them were dropped
// without an error.
func TestMissingSegmentBelowFrames(t *testing.T) {
	for _, backend := range []string{"mem", "local"} {
		t.Run(backend, func(t *testing.T) {
			_, b, o, _ := gapWriter(t, backend, 6)
			keys, framed := framedSegments(t, b)
			st, _, err := meta.ReadWriterState(context.Background(), b, testLog, "w")
			must(t, err)
			// The lowest framed segment above the published seq with a
			// framed segment above it.
			var victim uint64
			for seq := st.Seq + 1; keys[seq] != ""; seq++ {
				if framed[seq] {
					for up := seq + 1; keys[up] != ""; up++ {
						if framed[up] {
							victim = seq
						}
					}
					break
				}
			}
			if victim == 0 {
				t.Fatalf("no framed segment above the published seq %d with another above it: %v", st.Seq, framed)
			}
			must(t, b.Delete(context.Background(), keys[victim]))
			_, err = Open(context.Background(), b, o)
			if !errors.Is(err, segment.ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("seq %d missing", victim)) {
				t.Fatalf("Open after seq %d (%s) was deleted: %v; want an error naming the seq", victim, keys[victim], err)
			}
		})
	}
}

// TestCollectedBelowFrames: GC took the bottom of the epoch's chain,
// published seq included, below the checkpoint: the link of the lowest
// segment left proves it, and the next epoch takes its fence from the
// frames above. With the checkpoint below what was taken, the same listing
// is segments lost: an error.
func TestCollectedBelowFrames(t *testing.T) {
	for _, backend := range []string{"mem", "local"} {
		for _, proven := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/proven=%v", backend, proven), func(t *testing.T) {
				ctx := context.Background()
				_, b, o, reported := gapWriter(t, backend, 6)
				keys, framed := framedSegments(t, b)
				// Delete the seqs below the second framed one above the
				// published seq, as GC would.
				st, _, err := meta.ReadWriterState(ctx, b, testLog, "w")
				must(t, err)
				var cut uint64
				for seq := st.Seq + 1; keys[seq] != ""; seq++ {
					if framed[seq] {
						cut = seq + 1
						break
					}
				}
				if cut == 0 || keys[cut] == "" {
					t.Fatalf("no segment above the first framed one above the published seq %d: %v", st.Seq, framed)
				}
				var below uint64
				for seq := uint64(1); seq < cut; seq++ {
					n, err := segment.ParseName(keys[seq])
					must(t, err)
					below = max(below, n.MaxTs)
					must(t, b.Delete(ctx, keys[seq]))
				}
				cp := below
				if !proven {
					cp = below - 1
				}
				writeCheckpoint(t, b, cp)
				w, err := Open(ctx, b, o)
				if !proven {
					if !errors.Is(err, segment.ErrCorrupt) || !strings.Contains(err.Error(), "above the checkpoint") {
						t.Fatalf("Open with seqs 1..%d gone and the checkpoint %d below their max ts %d: %v; want an error", cut-1, cp, below, err)
					}
					return
				}
				must(t, err)
				if got := w.FlushedTs(); got != reported && got != reported+2 {
					t.Errorf("epoch 2 starts at flushed ts %d, not at the %d epoch 1 reported", got, reported)
				}
				must(t, w.Close(ctx))
			})
		}
	}
}

// writeCheckpoint stores a meta object for testLog whose checkpoint is cp.
func writeCheckpoint(t *testing.T, b *blob.Bucket, cp uint64) {
	ctx := context.Background()
	_, err := meta.OpenCoordinator(ctx, b, testLog, &meta.CoordinatorOptions{StartTs: cp})
	must(t, err)
	m, _, err := meta.ReadMeta(ctx, b, testLog)
	must(t, err)
	if m.CheckpointTs != cp {
		t.Fatalf("meta checkpoint %d, want %d", m.CheckpointTs, cp)
	}
}

// TestFailedUploadBelowNoFrame: on an object store, an upload fails for good
// while the next object of the same flush lands. The flush is not
// reported, and the flush's last object, with its progress frame, must not
// be stored either (it waits for the others), so the next epoch reads the
// gap as a failed upload: it opens, fencing the stray object out. Without
// the wait the frame lands above the gap, and the gap reads as segments
// lost.
func TestFailedUploadBelowNoFrame(t *testing.T) {
	ctx := context.Background()
	// The flush's first object (seq 2) fails once the next (seq 3) is
	// stored.
	d := &failAfterNext{Driver: mem.NewDriver(), next: make(chan struct{})}
	b := blob.NewBucket(d)
	defer b.Close()
	o := testOptions("w")
	o.RetryAttempts = -1
	o.MaxSegmentBytes = 6 << 10
	o.BlockSize = 1 << 10
	o.MaxUploads = 4
	w := openSpan1(t, b, o)
	writeFlushed(t, w, 1, 1, 3)
	r := newRand(3)
	for ts := uint64(4); ts <= 12; ts++ {
		must(t, w.Write(ctx, 1, bigRow(r, 1, ts, int64(ts), 2<<10)))
	}
	must(t, w.AdvanceResolved(1, 12))
	if _, err := w.Flush(ctx); err == nil {
		t.Fatal("a flush whose first object fails succeeded")
	}
	w.Close(ctx)
	keys, _ := framedSegments(t, b)
	if keys[2] != "" || keys[3] == "" {
		t.Fatalf("want seq 3 stored and seq 2 not: %v", keys)
	}
	w, err := Open(ctx, b, o)
	must(t, err)
	if got := w.FlushedTs(); got != 3 {
		t.Errorf("epoch 2 starts at flushed ts %d, want 3", got)
	}
	must(t, w.Close(ctx))
	checkIDs(t, readLog(t, b, readOpts{fenced: true}), 1, 3)
}

// unpublishedStore is a faulty mem or local store, and writer options with
// no retries whose lazy publisher waits an hour: only Publish publishes.
func unpublishedStore(t *testing.T, backend string) (*blobtest.Faulty, *blob.Bucket, *Options) {
	f := blobtest.NewFaulty(backendDriver(t, backend))
	b := f.Bucket()
	t.Cleanup(func() { b.Close() })
	o := testOptions("w")
	o.PublishInterval = time.Hour
	o.RetryAttempts = -1
	return f, b, o
}

// failSegmentWrites fails every segment put and sync until the flag it
// returns is cleared.
func failSegmentWrites(f *blobtest.Faulty) *atomic.Bool {
	failing := new(atomic.Bool)
	failing.Store(true)
	f.Add(blobtest.Rule{Fail: true, Match: func(c blobtest.Call) bool {
		return failing.Load() && strings.Contains(c.Key, "/seg/") && (c.Op == blobtest.OpPut || c.Op == blobtest.OpSync)
	}})
	return failing
}

// TestLocalMissingSegmentBelowNoFrame: on local disk segments are written in
// order, so a missing seq was deleted even when nothing above it holds a
// progress frame. Here a framed segment and everything above its frameless
// successor are deleted: on an object store that listing reads as a failed
// upload (fenced out), but on local disk it can only be lost data, and
// Open must refuse, naming the seq. Before, the walk fenced the frameless
// segment out and the flushes reported in the deleted ones were dropped
// without an error.
func TestLocalMissingSegmentBelowNoFrame(t *testing.T) {
	_, b, o, _ := gapWriter(t, "local", 6)
	keys, framed := framedSegments(t, b)
	st, _, err := meta.ReadWriterState(context.Background(), b, testLog, "w")
	must(t, err)
	var victim uint64
	for seq := st.Seq + 1; keys[seq+1] != ""; seq++ {
		if framed[seq] && !framed[seq+1] {
			victim = seq
			break
		}
	}
	if victim == 0 {
		t.Fatalf("no framed segment with a frameless successor above the published seq %d: %v", st.Seq, framed)
	}
	for seq, k := range keys {
		if seq == victim || seq > victim+1 {
			must(t, b.Delete(context.Background(), k))
		}
	}
	_, err = Open(context.Background(), b, o)
	if !errors.Is(err, segment.ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("seq %d missing", victim)) {
		t.Fatalf("Open after seq %d and those above %d were deleted: %v; want an error naming the seq", victim, victim+1, err)
	}
}

// failAfterNext fails the put of segment seq 2 once the put of seq 3 has
// stored it, and stores every other put.
type failAfterNext struct {
	driver.Driver
	next chan struct{}
	once sync.Once
}

func (d *failAfterNext) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	n, err := segment.ParseName(key)
	switch {
	case err != nil:
	case n.Seq == 2:
		select {
		case <-d.next:
		case <-ctx.Done():
			return blob.Attrs{}, ctx.Err()
		}
		// A window for a frame launched beside the others to land
		// first, as it did before the fix; the fixed writer launches
		// none while seq 2 is pending, whatever the wait.
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
		return blob.Attrs{}, &blob.Error{Op: "put", Key: key, Code: blob.CodeTransient, Err: errors.New("refused")}
	case n.Seq == 3:
		a, err := d.Driver.Put(ctx, key, r, size, opts)
		d.once.Do(func() { close(d.next) })
		return a, err
	}
	return d.Driver.Put(ctx, key, r, size, opts)
}

// hidingLister drops key from the first hide listings of exactly prefix, as
// a store whose listing lags or races a rename would; a listing of a
// narrower prefix shows it.
type hidingLister struct {
	driver.Driver
	prefix, key string
	mu          sync.Mutex
	hide        int
}

func (h *hidingLister) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	page, err := h.Driver.List(ctx, opts)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil || opts.Prefix != h.prefix || h.hide == 0 {
		return page, err
	}
	h.hide--
	page.Objects = slices.DeleteFunc(slices.Clone(page.Objects), func(a blob.Attrs) bool { return a.Key == h.key })
	return page, nil
}

// TestListingMissesReportedSegment: the listing the next epoch reads lacks
// the segment holding the newest reported progress (the top of the chain,
// so no gap shows it). The walk proves "nothing above" with a listing of
// the next seq alone, finds it, and lists again: the new epoch starts at
// the reported ts. A listing that keeps missing it is an error naming the
// key. Before, the walk ended below it and the reported flushes were
// fenced out without an error.
func TestListingMissesReportedSegment(t *testing.T) {
	for _, always := range []bool{false, true} {
		t.Run(fmt.Sprintf("always=%v", always), func(t *testing.T) {
			f, b0, o, reported := gapWriter(t, "mem", 4)
			keys, framed := framedSegments(t, b0)
			var top uint64
			for seq := range keys {
				top = max(top, seq)
			}
			if !framed[top] {
				t.Fatalf("the top segment %s holds no frame: %v", keys[top], framed)
			}
			// The same objects, behind a lister that hides the top one.
			h := &hidingLister{Driver: f, prefix: layout.WriterSegments(testLog, "w"), key: keys[top], hide: 1}
			if always {
				h.hide = 1 << 30
			}
			b := blob.NewBucket(h)
			w, err := Open(context.Background(), b, o)
			if always {
				if err == nil || !strings.Contains(err.Error(), keys[top]) {
					t.Fatalf("Open with a listing that always misses %s: %v; want an error naming it", keys[top], err)
				}
				return
			}
			must(t, err)
			if got := w.FlushedTs(); got != reported {
				t.Errorf("epoch 2 starts at flushed ts %d, not at the %d epoch 1 reported", got, reported)
			}
			must(t, w.Close(context.Background()))
		})
	}
}
