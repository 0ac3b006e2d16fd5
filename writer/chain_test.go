package writer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/blob/driver"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
	"github.com/redokit/redokit/testkit/testenv"
)

// chainSeg is what checkChains learns of one segment.
type chainSeg struct {
	key       string
	hdr       segment.Header
	footerCRC uint32 // of the footer it has or, unsealed, would have
	maxTs     uint64 // of its records; 0 when none
}

// checkChains reads every segment of writer "w" of the test log and checks the
// completeness chain of each epoch: consecutive seqs from the epoch's first
// (which links nothing), every other linking its predecessor's seq, header
// CRC, footer CRC and the chain max ts through it; and that the state's
// progress (Seq, ChainMaxTs, Digest) and the fences of earlier epochs name
// the end of their chain exactly (callers check with everything flushed, so
// the end is the last segment the fences accept). Active segments count with
// the footer their whole blocks would have. It returns the epochs' chains.
func checkChains(t *testing.T, b *blob.Bucket) map[uint64][]chainSeg {
	t.Helper()
	return checkWriterChains(t, b, "w")
}

// checkWriterChains is checkChains for writer writerID.
func checkWriterChains(t *testing.T, b *blob.Bucket, writerID string) map[uint64][]chainSeg {
	t.Helper()
	ctx := context.Background()
	st, _, err := meta.ReadWriterState(ctx, b, testLog, writerID)
	must(t, err)
	chains := map[uint64][]chainSeg{}
	for _, key := range segmentKeys(t, b) {
		n, err := segment.ParseName(key)
		must(t, err)
		// Segments the fences do not accept (a failed epoch's uploads above
		// its last publication) are not part of the log.
		if n.WriterID != writerID || !st.Accepts(n) {
			continue
		}
		data, err := b.ReadAll(ctx, key)
		must(t, err)
		var cs chainSeg
		if n.Active {
			rc, err := segment.Recover(bytes.NewReader(data), &segment.ScannerOptions{Object: key})
			must(t, err)
			if !rc.HasHeader {
				t.Fatalf("%s: no header", key)
			}
			cs = chainSeg{key: key, hdr: rc.Header, footerCRC: segment.FooterCRC(rc.Blocks)}
			if k := len(rc.Blocks); k > 0 {
				cs.maxTs = rc.Blocks[k-1].MaxTs
			}
		} else {
			r, err := segment.NewReader(bytes.NewReader(data), int64(len(data)), &segment.ReaderOptions{Object: key})
			must(t, err)
			f := r.Footer()
			must(t, n.Check(key, r.Header(), &f))
			cs = chainSeg{key: key, hdr: r.Header(), footerCRC: f.CRC, maxTs: f.MaxTs}
		}
		chains[n.Epoch] = append(chains[n.Epoch], cs)
	}
	ends := map[uint64]chainSeg{}
	chainMax := map[uint64]map[uint64]uint64{} // epoch -> seq -> chain max ts through seq
	for epoch, segs := range chains {
		sort.Slice(segs, func(i, j int) bool { return segs[i].hdr.Seq < segs[j].hdr.Seq })
		chainMax[epoch] = map[uint64]uint64{}
		var m uint64
		for i, s := range segs {
			l := s.hdr.Link
			if i == 0 {
				if !l.First() {
					t.Fatalf("epoch %d: its first segment %s links seq %d", epoch, s.key, l.PrevSeq)
				}
			} else {
				p := segs[i-1]
				want := segment.Link{PrevSeq: p.hdr.Seq, PrevMaxTs: m, PrevHeaderCRC: p.hdr.CRC, PrevFooterCRC: p.footerCRC}
				if p.hdr.Seq+1 != s.hdr.Seq {
					t.Fatalf("epoch %d: seq %d follows seq %d (%s after %s): a gap", epoch, s.hdr.Seq, p.hdr.Seq, s.key, p.key)
				}
				if l != want {
					t.Fatalf("epoch %d: %s links %+v, its predecessor %s is %+v", epoch, s.key, l, p.key, want)
				}
			}
			m = max(m, s.maxTs)
			chainMax[epoch][s.hdr.Seq] = m
		}
		chains[epoch] = segs
		ends[epoch] = segs[len(segs)-1]
	}
	check := func(what string, epoch, seq, maxTs uint64, digest uint32) {
		t.Helper()
		if seq == 0 {
			if maxTs != 0 || digest != 0 {
				t.Fatalf("%s: seq 0 with chain max ts %d, digest %#x", what, maxTs, digest)
			}
			return
		}
		// Publication is lazy: what is published may lag the chain's end,
		// and an active segment grows after it.
		if end := ends[epoch]; end.hdr.Seq < seq {
			t.Fatalf("%s: seq %d, but the epoch's chain ends at %s", what, seq, end.key)
		}
		for _, s := range chains[epoch] {
			if s.hdr.Seq == seq {
				if s.hdr.CRC != digest || chainMax[epoch][seq] < maxTs {
					t.Fatalf("%s: seq %d, chain max ts %d, digest %#x; segment %s has header CRC %#x, chain max ts %d",
						what, seq, maxTs, digest, s.key, s.hdr.CRC, chainMax[epoch][seq])
				}
				return
			}
		}
		t.Fatalf("%s: seq %d of epoch %d, which has no segment", what, seq, epoch)
	}
	check(fmt.Sprintf("progress of epoch %d", st.Epoch), st.Epoch, st.Seq, st.ChainMaxTs, st.Digest)
	for _, f := range st.Fences {
		check(fmt.Sprintf("fence of epoch %d", f.Epoch), f.Epoch, f.LastSeq, f.MaxTs, f.Digest)
	}
	return chains
}

// TestChainLocal: on the local path, a run with rotations by size and by a
// span added behind (whose segment holds lower ts than its predecessor, so
// the chain max ts is not the segment's), then a restart: every epoch's chain
// is gapless and linked, the new epoch starts with PrevSeq 0, and the
// published progress and the fence name the chain's end.
func TestChainLocal(t *testing.T) {
	ctx := context.Background()
	b := localBucket(t, t.TempDir())
	o := testOptions("w")
	o.MaxSegmentBytes = 8 << 10
	o.BlockSize = 1 << 10
	o.Compression = CompressionNone
	w := open(t, b, o)
	must(t, w.AddSpan(1, 0))
	for ts := uint64(1); ts <= 400; ts++ {
		must(t, w.Write(ctx, 1, row(1, ts, int64(ts))))
		if ts%50 == 0 {
			must(t, w.AdvanceResolved(1, ts))
			mustFlush(t, w)
			checkChains(t, b) // the active segment and the unsealed full ones too
		}
	}
	// A span behind the writer: its catch-up goes to a new segment.
	must(t, w.AddSpan(2, 100))
	for ts := uint64(101); ts <= 120; ts++ {
		must(t, w.Write(ctx, 2, row(2, ts, int64(1000+ts))))
	}
	must(t, w.AdvanceResolved(2, 400))
	mustFlush(t, w)
	must(t, w.Close(ctx))
	chains := checkChains(t, b)
	segs := chains[1]
	if len(segs) < 4 {
		t.Fatalf("%d segments; expected rotations", len(segs))
	}
	if last := segs[len(segs)-1]; last.maxTs >= last.hdr.Link.PrevMaxTs {
		t.Fatalf("the catch-up segment %s holds ts up to %d, its chain before it %d: no catch-up rotation", last.key, last.maxTs, last.hdr.Link.PrevMaxTs)
	}

	w2 := open(t, b, o)
	must(t, w2.AddSpan(1, 400))
	writeFlushed(t, w2, 1, 401, 600)
	must(t, w2.Close(ctx))
	chains = checkChains(t, b)
	if len(chains[2]) < 2 || chains[2][0].hdr.Seq != segs[len(segs)-1].hdr.Seq+1 {
		t.Fatalf("epoch 2's chain %v does not continue the numbering after epoch 1's", chains[2])
	}
}

// TestChainObject: on the object-store path, flushes split into many objects
// uploaded concurrently, with lost answers (retried uploads of the same
// bytes), then a restart: every epoch's chain is gapless and linked, and the
// progress names its end, whatever order the uploads landed in.
func TestChainObject(t *testing.T) {
	ctx := context.Background()
	b := blob.NewBucket(newLostAnswer(mem.NewDriver(), 3))
	o := testOptions("w")
	o.MaxSegmentBytes = 4 << 10
	o.BlockSize = 1 << 10
	o.MaxUploads = 4
	o.Compression = CompressionNone
	for epoch := uint64(1); epoch <= 2; epoch++ {
		w := open(t, b, o)
		base := (epoch - 1) * 1000
		must(t, w.AddSpan(1, base))
		for f := uint64(0); f < 3; f++ {
			from := base + f*200 + 1
			writeFlushed(t, w, 1, from, from+199)
			checkChains(t, b)
		}
		if epoch == 1 {
			// A catch-up within one flush.
			must(t, w.AddSpan(2, 10))
			writeRange(t, w, 2, 11, 30)
			must(t, w.AdvanceResolved(2, 600))
			mustFlush(t, w)
		}
		must(t, w.Close(ctx))
		chains := checkChains(t, b)
		if len(chains[epoch]) < 6 {
			t.Fatalf("epoch %d: %d objects; expected splits", epoch, len(chains[epoch]))
		}
	}
	if s := b.Stats(); s.Puts == 0 {
		t.Fatal("no puts")
	}
}

// TestChainRecoverySealsRotated: a local writer rotates, publishes, and
// crashes before it seals the rotated-out segment; the next epoch's recovery
// seals it, and the footer it writes is the one its successor linked at the
// rotation.
func TestChainRecoverySealsRotated(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f, b := faultyLocal(t, dir)
	o := testOptions("w")
	o.RetryAttempts = 1
	o.MaxSegmentBytes = 8 << 10
	o.BlockSize = 1 << 10
	o.Compression = CompressionNone
	w := open(t, b, o)
	must(t, w.AddSpan(1, 0))
	writeFlushed(t, w, 1, 1, 40)

	gate, reached, flushed := flushHeld(t, f, w, blobtest.OpSeal, 41, 200)
	select {
	case <-reached: // the progress frame durable, sealing the rotated-out segment
	case err := <-flushed:
		t.Fatalf("the flush returned (%v) before sealing the rotated-out segment", err)
	}
	must(t, f.Crash())
	close(gate)
	<-flushed
	w.Close(ctx)
	if n := len(activeFiles(t, dir)); n < 2 {
		t.Fatalf("%d active segments after the crash; want the rotated-out one and its successor", n)
	}
	b2 := localBucket(t, dir)
	chains := checkChains(t, b2) // unsealed: footers as the blocks make them
	w2 := open(t, b2, o)
	if w2.FlushedTs() != 200 {
		t.Fatalf("the new epoch starts at %d: the seal began before the progress frame of 200 was durable", w2.FlushedTs())
	}
	must(t, w2.Close(ctx))
	if got := activeFiles(t, dir); len(got) != 0 {
		t.Fatalf("active segments left after recovery: %v", got)
	}
	after := checkChains(t, b2)
	if len(after[1]) != len(chains[1]) {
		t.Fatalf("recovery left %d segments of epoch 1, there were %d", len(after[1]), len(chains[1]))
	}
	checkIDs(t, readLog(t, b2, readOpts{fenced: true}), 1, 200)
}

// TestChainRecoveryKeepsLinkedBlocks: a sync fails and the segment cannot be
// cut back (its truncate fails too), so the writer abandons it with frames
// past its durable blocks still in the file, and writes them again to the
// next segment, which it publishes. The next epoch's recovery must keep only
// the blocks the successor's link names: keeping every whole block at or
// below the published ts would store those frames twice, and seal a footer
// that breaks the chain.
func TestChainRecoveryKeepsLinkedBlocks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f, b := faultyLocal(t, dir)
	o := testOptions("w")
	o.BlockSize = 1 << 10
	o.Compression = CompressionNone
	w := open(t, b, o)
	must(t, w.AddSpan(1, 0))
	writeFlushed(t, w, 1, 1, 50)
	first := segmentKeys(t, b)
	if len(first) != 1 {
		t.Fatalf("segments %v", first)
	}
	onFirst := func(c blobtest.Call) bool { return c.Key == first[0] }
	f.Add(blobtest.Rule{Op: blobtest.OpSync, Match: onFirst, Nth: 1, Fail: true})
	f.Add(blobtest.Rule{Op: blobtest.OpTruncate, Match: onFirst, Fail: true})
	writeRange(t, w, 1, 51, 100)
	must(t, w.AdvanceResolved(1, 100))
	if ts := mustFlush(t, w); ts != 100 {
		t.Fatalf("Flush = %d", ts)
	}
	must(t, w.Close(ctx))
	if a := activeFiles(t, dir); len(a) != 1 || !strings.HasSuffix(a[0], strings.TrimPrefix(first[0], testLog)) {
		t.Fatalf("active segments %v: want the abandoned %s", a, first[0])
	}

	b2 := localBucket(t, dir)
	w2 := open(t, b2, o)
	must(t, w2.Close(ctx))
	checkChains(t, b2)
	checkIDs(t, readLog(t, b2, readOpts{fenced: true}), 1, 100)
}

// TestChainSeqReusedAfterDroppedSegment: the first sync of a new segment
// fails with nothing of it durable, and deleting it fails too: the writer
// drops it and writes its frames again under the same seq (cutting the
// leftover file), so the epoch's chain has no gap.
func TestChainSeqReusedAfterDroppedSegment(t *testing.T) {
	ctx := context.Background()
	d, err := local.NewDriver(t.TempDir(), nil)
	must(t, err)
	f := blobtest.NewFaulty(d)
	b := f.Bucket()
	o := testOptions("w")
	w := open(t, b, o)
	must(t, w.AddSpan(1, 0))
	f.FailNth(blobtest.OpSync, 1, nil)
	f.FailWhen(blobtest.OpDelete, isSegment, nil)
	writeRange(t, w, 1, 1, 50)
	must(t, w.AdvanceResolved(1, 50))
	if ts := mustFlush(t, w); ts != 50 {
		t.Fatalf("Flush = %d", ts)
	}
	writeFlushed(t, w, 1, 51, 60)
	must(t, w.Close(ctx))
	if n := f.Count(blobtest.OpDelete); n == 0 {
		t.Fatal("the failed segment was never deleted: the test did not reach the drop")
	}
	chains := checkChains(t, b)
	if len(chains[1]) != 1 || chains[1][0].hdr.Seq != 1 {
		t.Fatalf("epoch 1's chain %v: want seq 1 alone", chains[1])
	}
	checkIDs(t, readLog(t, b, readOpts{}), 1, 60)
}

// heldFirst holds the put of the first segment object of the log until gate
// is closed, and reports every other segment object it stores on done.
type heldFirst struct {
	driver.Driver
	gate <-chan struct{}
	done chan string
}

func (h *heldFirst) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	n, err := segment.ParseName(key)
	seg := err == nil
	if seg && n.Seq == 1 {
		select {
		case <-h.gate:
		case <-ctx.Done():
			return blob.Attrs{}, ctx.Err()
		}
	}
	a, err := h.Driver.Put(ctx, key, r, size, opts)
	if seg && err == nil {
		h.done <- key
	}
	return a, err
}

// TestChainObjectUploadsOutOfOrder: the first object of a split flush lands
// after the objects behind it; the links were made when each object was
// sealed in memory, so the chain is right whatever the order, and the
// progress names its end only once all of it is stored. The flush's last
// object, which holds its progress frame, is stored only after every other:
// a stored frame proves the chain below it was stored.
func TestChainObjectUploadsOutOfOrder(t *testing.T) {
	ctx := context.Background()
	gate := make(chan struct{})
	h := &heldFirst{Driver: mem.NewDriver(), gate: gate, done: make(chan string, 100)}
	b := blob.NewBucket(h)
	w := open(t, b, objectOptions(4))
	must(t, w.AddSpan(1, 0))
	writeBig(t, w, 1, 120)
	flushed := make(chan error, 1)
	go func() {
		_, err := w.Flush(ctx)
		flushed <- err
	}()
	var order []string
	for range 2 {
		select {
		case k := <-h.done:
			order = append(order, k)
		case err := <-flushed:
			t.Fatalf("Flush returned (%v) with the first object held", err)
		}
	}
	if ts := publishedTs(t, b); ts != 0 {
		t.Fatalf("published flushed ts %d with the first object held", ts)
	}
	close(gate)
	must(t, <-flushed)
	must(t, w.Close(ctx))
	chains := checkChains(t, b)
	if len(chains[1]) < 4 {
		t.Fatalf("%d objects; want a split into at least 4", len(chains[1]))
	}
	for more := true; more; {
		select {
		case k := <-h.done:
			order = append(order, k)
		default:
			more = false
		}
	}
	first, last := -1, -1
	for i, k := range order {
		n, err := segment.ParseName(k)
		must(t, err)
		switch n.Seq {
		case 1:
			first = i
		case uint64(len(chains[1])):
			last = i
		}
	}
	if first < 0 || last < first {
		t.Fatalf("objects stored in the order %v: the last (with the progress frame) before the first", order)
	}
}

// TestChainRecoveryRefusesHeaderlessLinkedSegment: an active segment whose
// header is gone, while its successor (accepted by the fence) links it, is
// not deleted as a torn empty file: Open fails naming both.
func TestChainRecoveryRefusesHeaderlessLinkedSegment(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f, b := faultyLocal(t, dir)
	o := testOptions("w")
	o.RetryAttempts = 1
	o.MaxSegmentBytes = 8 << 10
	o.BlockSize = 1 << 10
	o.Compression = CompressionNone
	w := open(t, b, o)
	must(t, w.AddSpan(1, 0))
	gate, reached, flushed := flushHeld(t, f, w, blobtest.OpSeal, 1, 200)
	select {
	case <-reached:
	case err := <-flushed:
		t.Fatalf("the flush returned (%v) before sealing the rotated-out segment", err)
	}
	must(t, f.Crash())
	close(gate)
	<-flushed
	w.Close(ctx)
	active := activeFiles(t, dir)
	sort.Strings(active)
	if len(active) < 2 {
		t.Fatalf("active segments %v", active)
	}
	must(t, os.Truncate(active[0], segment.HeaderSize-1))

	_, err := Open(ctx, localBucket(t, dir), o)
	if err == nil || !errors.Is(err, segment.ErrCorrupt) || !strings.Contains(err.Error(), "successor") {
		t.Fatalf("Open with a linked segment torn inside its header: %v", err)
	}
	if got := activeFiles(t, dir); len(got) != len(active) {
		t.Fatalf("active segments %v after the failed Open, were %v", got, active)
	}
}

// TestRecoveryRefusesAcceptedSegmentWithoutBlocks: an active segment the
// fence accepts (its epoch published it) whose blocks are gone is not
// deleted as if it held nothing reported: Open fails naming it.
func TestRecoveryRefusesAcceptedSegmentWithoutBlocks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d, err := local.NewDriver(dir, nil)
	must(t, err)
	f := blobtest.NewFaulty(d)
	w := open(t, f.Bucket(), testOptions("w"))
	must(t, w.AddSpan(1, 0))
	writeFlushed(t, w, 1, 1, 50)
	must(t, f.Crash())
	w.Close(ctx)
	active := activeFiles(t, dir)
	if len(active) != 1 {
		t.Fatalf("active segments %v", active)
	}
	must(t, os.Truncate(active[0], segment.HeaderSize+10))
	_, err = Open(ctx, localBucket(t, dir), testOptions("w"))
	if !errors.Is(err, segment.ErrCorrupt) || !strings.Contains(err.Error(), "fence accepts") {
		t.Fatalf("Open with a published segment emptied: %v", err)
	}
	if got := activeFiles(t, dir); len(got) != 1 {
		t.Fatalf("active segments %v after the failed Open", got)
	}
}

// chainTrials is how many randomized trials TestChainRandomFaults runs:
// REDOKIT_CHAIN_TRIALS, else 20.
func chainTrials(t *testing.T) int {
	return testenv.Count(t, "REDOKIT_CHAIN_TRIALS", 20)
}

// TestChainRandomFaults runs local writers through random faults on the
// segment files (failed and torn appends, failed syncs, truncates, seals and
// deletes, failed progress puts) over epochs, some of which fail for good
// and are recovered by the next Open, with rotations and catch-ups. After a
// clean last epoch every epoch's chain must be gapless and linked, end where
// its progress or fence says, and every event any epoch reported flushed
// must be read back. Seeded by REDOKIT_CHAIN_SEED (else fixed); the trial
// and the seed are logged on failure.
func TestChainRandomFaults(t *testing.T) {
	seed := testenv.Seed(t, "REDOKIT_CHAIN_SEED", 20261203)
	trials := chainTrials(t)
	failedEpochs := 0
	for trial := range trials {
		rng := newRand(seed + uint64(trial))
		ok := t.Run(fmt.Sprintf("trial%03d", trial), func(t *testing.T) {
			t.Logf("seed %d", seed+uint64(trial))
			failedEpochs += chainTrial(t, rng)
		})
		if !ok {
			break
		}
	}
	t.Logf("%d trials, %d epochs failed for good and were recovered", trials, failedEpochs)
}

func chainTrial(t *testing.T, rng *rand.Rand) (failed int) {
	ctx := context.Background()
	dir := t.TempDir()
	o := testOptions("w")
	o.MaxSegmentBytes = int64(4+rng.IntN(12)) << 10
	o.BlockSize = 1 << 10
	o.RetryAttempts = 1 + rng.IntN(3)
	if rng.IntN(2) == 0 {
		o.Compression = CompressionNone
	}
	var acked uint64 // the highest ts any epoch reported flushed
	epochs := 2 + rng.IntN(3)
	var b *blob.Bucket
	for e := range epochs {
		last := e == epochs-1
		// A fresh driver each epoch: the previous one may have crashed.
		d, err := local.NewDriver(dir, nil)
		must(t, err)
		f := blobtest.NewFaulty(d)
		b = f.Bucket()
		crashAt := -1
		if !last && rng.IntN(3) == 0 {
			crashAt = rng.IntN(6)
		}
		w, err := Open(ctx, b, o)
		must(t, err)
		from := w.FlushedTs()
		if from < acked {
			t.Fatalf("epoch %d starts at flushed ts %d, below the %d reported", e+1, from, acked)
		}
		must(t, w.AddSpan(1, from))
		var removes []func()
		if !last {
			ops := []blobtest.Rule{
				{Op: blobtest.OpSync, Match: isSegment, Fail: true},
				{Op: blobtest.OpTruncate, Match: isSegment, Fail: true},
				{Op: blobtest.OpSeal, Match: isSegment, Fail: true},
				{Op: blobtest.OpDelete, Match: isSegment, Fail: true},
				{Op: blobtest.OpWrite, Match: isSegment, Fail: true, Partial: true},
				{Op: blobtest.OpPut, Match: isState, Fail: true},
			}
			for range 1 + rng.IntN(4) {
				r := ops[rng.IntN(len(ops))]
				r.Nth = 1 + rng.IntN(12)
				removes = append(removes, f.Add(r))
			}
		}
		ts := from
		alive := true
		for fl := 0; alive && fl < 4+rng.IntN(6); fl++ {
			n := 20 + rng.IntN(150)
			for range n {
				ts++
				if err := w.Write(ctx, 1, row(1, ts, int64(ts))); err != nil {
					alive = false
					break
				}
			}
			if !alive || w.AdvanceResolved(1, ts) != nil {
				break
			}
			if e == 0 && fl == 2 {
				// A span behind the writer: a catch-up segment.
				must(t, w.AddSpan(2, 5))
				for c := uint64(6); c <= 15; c++ {
					must(t, w.Write(ctx, 2, row(2, c, int64(1_000_000+c))))
				}
				must(t, w.AdvanceResolved(2, ts))
			}
			if fl == crashAt {
				// Power loss while the flush is under way: what was not
				// synced is gone, and the flush may or may not report.
				flushed := make(chan uint64, 1)
				go func() {
					got, _ := w.Flush(ctx)
					flushed <- got
				}()
				must(t, f.Crash())
				acked = max(acked, <-flushed)
				alive = false
				break
			}
			got, err := w.Flush(ctx)
			if err != nil {
				alive = false
				break
			}
			acked = max(acked, got)
		}
		cerr := w.Close(ctx)
		for _, rm := range removes {
			rm()
		}
		if last && (!alive || cerr != nil) {
			t.Fatalf("the last epoch, without faults, failed: %v", cerr)
		}
		if !alive || cerr != nil {
			failed++
		}
	}
	b = localBucket(t, dir)
	checkChains(t, b)
	seen := map[int64]int{}
	for _, g := range readLog(t, b, readOpts{fenced: true}) {
		seen[g.id]++
	}
	for id := int64(1); id <= int64(acked); id++ {
		if seen[id] == 0 {
			t.Fatalf("event %d was reported flushed (up to %d) and is not in the log", id, acked)
		}
	}
	return failed
}

// TestChainObjectRandomFaults runs object-store writers (mem) over epochs
// with random failed segment puts, lost answers (stored, then reported
// failed: retried with the same bytes), failed progress puts and several
// uploads at once; epochs that fail for good leave objects above their last
// publication, which their fence excludes. After a clean last epoch the
// accepted segments of every epoch form a gapless, linked chain ending at
// its progress or fence, and every reported event is read back.
func TestChainObjectRandomFaults(t *testing.T) {
	trials := chainTrials(t)
	failedEpochs := 0
	for trial := range trials {
		seed := uint64(4242 + trial)
		rng := newRand(seed)
		ok := t.Run(fmt.Sprintf("trial%03d", trial), func(t *testing.T) {
			t.Logf("seed %d", seed)
			failedEpochs += objectChainTrial(t, rng)
		})
		if !ok {
			break
		}
	}
	t.Logf("%d trials, %d epochs failed for good", trials, failedEpochs)
}

func objectChainTrial(t *testing.T, rng *rand.Rand) (failed int) {
	ctx := context.Background()
	lost := newLostAnswer(mem.NewDriver(), 0)
	f := blobtest.NewFaulty(lost)
	b := f.Bucket()
	o := testOptions("w")
	o.MaxSegmentBytes = int64(4+rng.IntN(8)) << 10
	o.BlockSize = 1 << 10
	o.MaxUploads = 1 + rng.IntN(4)
	o.RetryAttempts = 1 + rng.IntN(3)
	var acked uint64
	epochs := 2 + rng.IntN(3)
	for e := range epochs {
		last := e == epochs-1
		w, err := Open(ctx, b, o)
		must(t, err)
		from := w.FlushedTs()
		if from < acked {
			t.Fatalf("epoch %d starts at flushed ts %d, below the %d reported", e+1, from, acked)
		}
		must(t, w.AddSpan(1, from))
		var removes []func()
		if !last {
			lost.fail.Store(int32(rng.IntN(4)))
			for range rng.IntN(4) {
				r := blobtest.Rule{Op: blobtest.OpPut, Match: isSegment, Fail: true, Nth: 1 + rng.IntN(15)}
				if rng.IntN(3) == 0 {
					r.Match = isState
				}
				removes = append(removes, f.Add(r))
			}
		}
		ts := from
		alive := true
		for fl := 0; alive && fl < 3+rng.IntN(5); fl++ {
			for range 20 + rng.IntN(200) {
				ts++
				if err := w.Write(ctx, 1, row(1, ts, int64(ts))); err != nil {
					alive = false
					break
				}
			}
			if !alive || w.AdvanceResolved(1, ts) != nil {
				break
			}
			got, err := w.Flush(ctx)
			if err != nil {
				alive = false
				break
			}
			acked = max(acked, got)
		}
		cerr := w.Close(ctx)
		for _, rm := range removes {
			rm()
		}
		lost.fail.Store(0)
		if last && (!alive || cerr != nil) {
			t.Fatalf("the last epoch, without faults, failed: %v", cerr)
		}
		if !alive || cerr != nil {
			failed++
		}
	}
	checkChains(t, b)
	seen := map[int64]int{}
	for _, g := range readLog(t, b, readOpts{fenced: true}) {
		seen[g.id]++
	}
	for id := int64(1); id <= int64(acked); id++ {
		if seen[id] == 0 {
			t.Fatalf("event %d was reported flushed (up to %d) and is not in the log", id, acked)
		}
	}
	return failed
}
