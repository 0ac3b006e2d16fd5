package redo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/conformance"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/writer"
)

// Fault is one fault of the Network tier, injected by Network.Inject.
type Fault string

// The faults, in the order the tier injects them. Each names what the
// network does while it is on; the tier turns it off before the next.
const (
	// FaultLatency delays every request and every answer (toxiproxy:
	// about 100 ms ± 50 down, 30 ms up).
	FaultLatency Fault = "latency"
	// FaultReset resets about half of the requests as they go up (toxiproxy:
	// reset_peer on half of the connections, which the Network's bucket
	// must not reuse).
	FaultReset Fault = "reset"
	// FaultStall lets nothing through until it is turned off: the tier turns
	// it off after StallFor, while the writer works through it.
	FaultStall Fault = "stall"
	// FaultBandwidth is a slow link (toxiproxy: 256 KB/s each way).
	FaultBandwidth Fault = "bandwidth"
)

// Faults are the faults the Network tier injects, in order.
var Faults = []Fault{FaultLatency, FaultReset, FaultStall, FaultBandwidth}

// StallFor is how long FaultStall stays on.
const StallFor = 3 * time.Second

// Network is a way to one store through faults the Network tier turns on and
// off, and a way to it without them.
//
// The tier opens a writer through Faulty, writes and flushes through every
// fault of [Faults] in turn (the first phase with none), and proves, as
// subtests of Network:
//
//	none, latency, reset, stall, bandwidth
//	          during the phase, every Write, AdvanceResolved and Flush either
//	          succeeds or fails with a clear error (a message, classified
//	          transient, deadline or canceled); a flushed ts never goes
//	          backwards and is the resolved ts written; a writer stopped by
//	          the fault is reopened under its ID (a new epoch that fences the
//	          old one) once the fault is off, and writes again from the last
//	          flushed ts
//	Final     with the faults off, a last Flush and Close succeed and the
//	          flushed ts is everything written
//	ReadBack  on Direct, every event at or below the final flushed ts reads
//	          back exactly once, byte-exact, in commit-ts order
//	Verify    reader.Verify on Direct finds no error
//	After     Network.After (what only the backend can see: no multipart
//	          upload left, no uncommitted block visible)
type Network struct {
	// Faulty reaches the store through the faults; Direct reaches the same
	// keys without them. Both are the caller's to close.
	Faulty, Direct *blob.Bucket
	// Inject turns f on and returns what turns it off; the tier calls off
	// once, also from another goroutine (FaultStall).
	Inject func(t conformance.TB, f Fault) (off func())
	// After, when set, runs last, with the faults off: checks only the
	// backend can make.
	After func(ctx context.Context, t conformance.TB)
}

// driverNetwork injects the faults in the driver: a blobtest.Faulty over a
// bucket from MakeBucket. Its faults are what the driver's callers see of a
// network's (a delay, a transient failure of a request that never reached
// the store, a wait); a slow link is a delay on every call.
func (r *redoSuite) driverNetwork(t conformance.T) *Network {
	b := r.h.Bucket(t, false)
	// The faults wrap a driver that calls through b, so the faulty bucket
	// sees b's keys, under b's prefix when a harness makes its buckets as
	// views, with b's key checks and counters.
	f := blobtest.NewFaulty(blobtest.BucketDriver(b))
	fb := blob.NewBucket(f.Driver())
	// Requests, not the writes and syncs of an open append file: those
	// cross no network.
	request := func(c blobtest.Call) bool {
		switch c.Op {
		case blobtest.OpWrite, blobtest.OpSync, blobtest.OpTruncate, blobtest.OpSeal:
			return false
		}
		return true
	}
	var mu sync.Mutex
	rnd := rand.New(rand.NewPCG(FaultSeed, 0))
	inject := func(_ conformance.TB, fault Fault) func() {
		switch fault {
		case FaultLatency:
			return f.Add(blobtest.Rule{Match: request, Delay: 100 * time.Millisecond})
		case FaultReset:
			return f.Add(blobtest.Rule{Fail: true, Match: func(c blobtest.Call) bool {
				mu.Lock()
				defer mu.Unlock()
				return request(c) && rnd.IntN(2) == 0
			}})
		case FaultStall:
			return f.Block("")
		case FaultBandwidth:
			return f.Add(blobtest.Rule{Match: request, Delay: 20 * time.Millisecond})
		}
		return func() {}
	}
	return &Network{Faulty: fb, Direct: b, Inject: func(t conformance.TB, fault Fault) func() {
		var once sync.Once
		off := inject(t, fault)
		return func() { once.Do(off) }
	}}
}

// The Network tier's log: one writer ID, three spans, an event per span per
// commit ts, a flush every netFlushEach rounds.
const (
	netLog       = "net-log"
	netWriterID  = "w1"
	netRounds    = 12 // rounds of writes per phase
	netFlushEach = 3
	netValueSize = 1500
)

var netSpans = []writer.SpanID{1, 2, 3}

// netEvent is the deterministic event of span sp at commit ts: what was
// written can be told from any event read.
func netEvent(sp writer.SpanID, ts uint64) codec.Event {
	v := make([]byte, netValueSize)
	x := uint64(sp)*0x9e3779b97f4a7c15 ^ ts*0xbf58476d1ce4e5b9 | 1
	for i := range v {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		v[i] = byte(x)
	}
	return codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{
		StartTs: ts - 1, CommitTs: ts,
		Table: codec.TableName{Schema: "db", Name: fmt.Sprintf("t%d", sp), PhysicalID: int64(sp)},
		Columns: []codec.Column{
			{Name: "id", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey | codec.FlagHandleKey, Value: codec.IntValue(int64(ts))},
			{Name: "v", Type: codec.TypeBlob, Value: codec.BytesValue(v)},
		},
	}}
}

// netWriter drives one writer ID through the faults.
type netWriter struct {
	b        *blob.Bucket // through the faults
	w        *writer.Writer
	next     uint64 // the next commit ts to write
	flushed  uint64 // the last flushed ts a Flush returned
	failures int
	reopens  int
}

// netOptions make many small segments, each in several blocks, and retry
// enough to get through most faults but not all: some flushes fail, and
// their writers are reopened.
func netOptions() *writer.Options {
	return &writer.Options{
		LogID: netLog, WriterID: netWriterID,
		FlushInterval: time.Hour, MaxSegmentBytes: 8 << 10, BlockSize: 2 << 10,
		Compression: writer.CompressionLZ4, RetryAttempts: 4,
		RetryBackoff: 100 * time.Millisecond, RetryMaxBackoff: time.Second,
	}
}

// open opens the writer (a new epoch) and adds the spans at the last
// flushed ts; writing goes on from there. Only called with no fault on.
func (n *netWriter) open(t conformance.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	w, err := writer.Open(ctx, n.b, netOptions())
	if err != nil {
		t.Fatalf("writer.Open: %v", err)
	}
	for _, sp := range netSpans {
		if err := w.AddSpan(sp, n.flushed); err != nil {
			t.Fatalf("AddSpan(%d, %d): %v", sp, n.flushed, err)
		}
	}
	n.w, n.next = w, n.flushed+1
}

// reopen closes a stopped writer and opens the writer ID again.
func (n *netWriter) reopen(t conformance.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	err := n.w.Close(ctx)
	cancel()
	t.Logf("closing the stopped writer (epoch %d): %v", n.w.Epoch(), err)
	n.reopens++
	n.open(t)
	t.Logf("reopened as epoch %d, writing again from ts %d", n.w.Epoch(), n.next)
}

// clearErr fails t unless err is a clear error: a message, and a transient,
// deadline or cancellation classification.
func clearErr(t conformance.T, what string, err error) {
	t.Helper()
	t.Logf("%s failed during the fault: %v (code %v)", what, err, blob.CodeOf(err))
	switch blob.CodeOf(err) {
	case blob.CodeTransient, blob.CodeDeadlineExceeded, blob.CodeCanceled:
	default:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: unclear error %v (code %v), want a transient or deadline error", what, err, blob.CodeOf(err))
		}
	}
	if err.Error() == "" {
		t.Errorf("%s: empty error message", what)
	}
}

// flush flushes and records the flushed ts; it reports whether the writer
// is still usable.
func (n *netWriter) flush(t conformance.T, phase string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	start := time.Now()
	ts, err := n.w.Flush(ctx)
	if err != nil {
		n.failures++
		clearErr(t, phase+": Flush", err)
		return n.w.Err() == nil
	}
	if ts < n.flushed {
		t.Errorf("%s: Flush returned %d, below the %d an earlier Flush returned", phase, ts, n.flushed)
	}
	if want := n.next - 1; ts != want {
		t.Errorf("%s: Flush returned %d, want the resolved ts %d", phase, ts, want)
	}
	n.flushed = max(n.flushed, ts)
	t.Logf("%s: flushed %d in %v", phase, ts, time.Since(start).Round(time.Millisecond))
	return true
}

// phase writes netRounds rounds (one event per span per round, each round
// one commit ts) with a Flush every netFlushEach rounds. It stops early when
// the writer stops; the caller reopens it once the fault is gone.
func (n *netWriter) phase(t conformance.T, name string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for r := 1; r <= netRounds && time.Now().Before(deadline); r++ {
		ts := n.next
		for _, sp := range netSpans {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			err := n.w.Write(ctx, sp, netEvent(sp, ts))
			cancel()
			if err != nil {
				n.failures++
				clearErr(t, name+": Write", err)
				if n.w.Err() != nil {
					return
				}
				t.Fatalf("%s: Write failed but the writer goes on: %v", name, err)
			}
			if err := n.w.AdvanceResolved(sp, ts); err != nil {
				if n.w.Err() != nil {
					clearErr(t, name+": AdvanceResolved", err)
					return
				}
				t.Fatalf("%s: AdvanceResolved: %v", name, err)
			}
		}
		n.next++
		if r%netFlushEach == 0 && !n.flush(t, name) {
			return
		}
	}
}

// networkTier is the Network tier of Run (see Network).
func (r *redoSuite) networkTier(t conformance.T) {
	var nw *Network
	if r.h.Network != nil {
		var err error
		if nw, err = r.h.Network(t.Context(), t); err != nil {
			t.Fatalf("Harness.Network: %v", err)
		}
	} else {
		nw = r.driverNetwork(t)
		t.Logf("faults injected in the driver (blobtest.Faulty): the harness gives no Network")
	}
	n := &netWriter{b: nw.Faulty}
	ok := t.Run("open", func(t conformance.T) { n.open(t) })
	if !ok {
		return
	}
	for _, f := range append([]Fault{"none"}, Faults...) {
		t.Run(string(f), func(t conformance.T) {
			off := func() {}
			if f != "none" {
				off = nw.Inject(t, f)
			}
			var timer *time.Timer
			if f == FaultStall {
				timer = time.AfterFunc(StallFor, off)
			}
			start := time.Now()
			n.phase(t, string(f))
			if timer != nil {
				timer.Stop()
			}
			off()
			t.Logf("phase %s: %v, flushed ts %d", f, time.Since(start).Round(time.Millisecond), n.flushed)
			if n.w.Err() != nil {
				t.Logf("phase %s stopped the writer: %v", f, n.w.Err())
				n.reopen(t)
			}
		})
	}
	var end uint64
	if !t.Run("Final", func(t conformance.T) {
		// The faults are gone: a last flush and Close must succeed.
		if !n.flush(t, "final") || n.w.Err() != nil {
			t.Fatalf("final Flush failed with no fault: %v", n.w.Err())
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := n.w.Close(ctx); err != nil {
			t.Fatalf("Close: %v", err)
		}
		end = n.w.FlushedTs()
		if end < n.flushed || end != n.next-1 {
			t.Errorf("flushed ts %d after Close, want %d (last Flush returned %d)", end, n.next-1, n.flushed)
		}
		end = min(end, n.flushed)
		st := n.w.Stats()
		t.Logf("writer: %d flushes, %d segments, %d retries, %d failed calls, %d reopens", st.Flushes, st.Segments, st.Retries, n.failures, n.reopens)
	}) {
		return
	}
	t.Run("ReadBack", func(t conformance.T) { netReadBack(t, nw.Direct, end) })
	t.Run("Verify", func(t conformance.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		rep, err := reader.Verify(ctx, nw.Direct, netLog, nil)
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		if errs := rep.Errors(); len(errs) != 0 {
			t.Errorf("Verify: %v", errs)
		}
		t.Logf("verify: %d objects, %d sealed, %d ignored, %d events, %d problems", rep.Objects, rep.Sealed, rep.Ignored, rep.Events, len(rep.Problems))
	})
	if nw.After != nil {
		t.Run("After", func(t conformance.T) { nw.After(t.Context(), t) })
	}
}

// netReadBack reads (0, end] of the log and checks that every event written
// at or below end is there exactly once, byte-exact, in commit-ts order.
func netReadBack(t conformance.T, direct *blob.Bucket, end uint64) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	rd, err := reader.Open(ctx, direct, &reader.Options{LogID: netLog, StartTs: 0, EndTs: end})
	if err != nil {
		t.Fatalf("reader.Open: %v", err)
	}
	defer rd.Close()
	seen := map[[2]uint64]int{}
	var prev uint64
	n, limit := 0, int(end)*len(netSpans)*2+10
	for ; n <= limit; n++ {
		ev, err := rd.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reader: after %d events: %v", n, err)
		}
		ts := ev.CommitTs()
		if ts < prev {
			t.Errorf("event %d: commit ts %d after %d", n, ts, prev)
		}
		prev = ts
		sp := writer.SpanID(ev.Row.Table.PhysicalID)
		want := netEvent(sp, ts)
		if !ev.Event.Equal(&want) {
			t.Errorf("event %d (ts %d, table %v) differs from what was written", n, ts, ev.Row.Table)
		}
		seen[[2]uint64{uint64(sp), ts}]++
	}
	missing, dup := 0, 0
	for ts := uint64(1); ts <= end; ts++ {
		for _, sp := range netSpans {
			switch c := seen[[2]uint64{uint64(sp), ts}]; {
			case c == 0:
				missing++
			case c > 1:
				dup++
			}
		}
	}
	if want := int(end) * len(netSpans); n != want || missing != 0 || dup != 0 {
		t.Errorf("read %d events, want %d: %d missing, %d duplicated", n, want, missing, dup)
	}
	t.Logf("read back %d events up to ts %d", n, end)
}
