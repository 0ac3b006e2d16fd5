package writer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/segment"
)

// Writes of one span from several goroutines, with flushes cutting the span
// while they encode into room of its buffer: every acknowledged event is
// read back once and intact, whatever chunks the cuts retired meanwhile.
func TestConcurrentWritesOneSpanWithFlushes(t *testing.T) {
	onBothStores(t, func(t *testing.T, b *blob.Bucket) {
		ctx := context.Background()
		o := testOptions("w")
		w := openSpan1(t, b, o)
		var (
			ts    atomic.Uint64
			ids   atomic.Int64
			mu    sync.Mutex
			acked = map[int64]bool{}
			wg    sync.WaitGroup
			stop  = make(chan struct{})
		)
		ts.Store(10)
		for g := range 4 {
			wg.Go(func() {
				r := newRand(uint64(g + 1))
				for range 300 {
					n := 1 + r.IntN(20)
					evs := make([]codec.Event, n)
					t0 := ts.Add(uint64(n))
					for k := range evs {
						evs[k] = bigRow(r, 1, t0-uint64(n)+uint64(k)+1, ids.Add(1), r.IntN(3000))
					}
					err := w.Write(ctx, 1, evs...)
					switch {
					case err == nil:
						mu.Lock()
						for k := range evs {
							acked[evs[k].Row.Columns[0].Value.Int()] = true
						}
						mu.Unlock()
					case errors.Is(err, ErrOutOfOrder), errors.Is(err, ErrBelowResolved):
					default:
						t.Error(err)
						return
					}
				}
			})
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if cur := ts.Load(); cur > 40 {
					must(t, w.AdvanceResolved(1, cur-30))
				}
				if _, err := w.Flush(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		wg.Wait()
		close(stop)
		<-done
		must(t, w.AdvanceResolved(1, ts.Load()))
		mustFlush(t, w)
		must(t, w.Close(ctx))
		seen := map[int64]int{}
		for _, g := range readLog(t, b, readOpts{}) {
			seen[g.id]++
		}
		for id := range acked {
			if seen[id] != 1 {
				t.Fatalf("acknowledged event %d read back %d times", id, seen[id])
			}
		}
		if len(seen) != len(acked) {
			t.Fatalf("%d events read back, %d acknowledged", len(seen), len(acked))
		}
		t.Logf("%d events acknowledged", len(acked))
	})
}

// A cut must not retire the chunk a Write is still filling, even when the
// records it takes are all in a later chunk (a concurrent Write of the span
// found no room left and published first).
func TestTakeKeepsChunksOfOpenReservations(t *testing.T) {
	cc := newChunkCache(64 << 20)
	s := &spanBuf{id: 1}
	roomA, _, _ := s.reserve(cc, minChunk/2)
	roomB, numB, offB := s.reserve(cc, minChunk) // no room left: a new chunk
	if len(s.chunks) != 2 {
		t.Fatalf("%d chunks, want 2", len(s.chunks))
	}
	copy(roomB, "b")
	s.publish(cc, numB, offB, 0, []int{len(roomB)}, []uint64{5}, []segment.Kind{segment.KindRow}, 0)
	r, _, retired := s.take(newChunkCache(1<<20), 5)
	if len(r.recs) != 1 {
		t.Fatalf("took %d records, want 1", len(r.recs))
	}
	if len(retired) != 0 {
		t.Fatalf("retired %d chunks while a reservation is open in the first", len(retired))
	}
	copy(roomA, "a") // still the span's
	s.inflight--     // A gives up (buffer does this when its second check fails)
	roomC, numC, offC := s.reserve(cc, 1)
	copy(roomC, "c")
	s.publish(cc, numC, offC, 0, []int{1}, []uint64{6}, []segment.Kind{segment.KindRow}, 1)
	if _, _, retired := s.take(newChunkCache(1<<20), 6); len(retired) == 0 {
		t.Fatal("retired no chunk once no reservation is open")
	}
}

// A batch larger than a chunk is spread over chunks of the recyclable size
// (an event larger than a chunk alone gets one of its own), and a span that
// writes big batches gets recyclable chunks from its first: chunks of other
// sizes are fresh memory for every batch, which is what a writer pays most
// for. Every event is read back, in order, whichever path encoded it.
func TestBigBatchesFillRecyclableChunks(t *testing.T) {
	for _, encoded := range []bool{false, true} {
		t.Run(map[bool]string{false: "Write", true: "WriteEncoded"}[encoded], func(t *testing.T) {
			ctx := context.Background()
			b := memBucket()
			w := openSpan1(t, b, testOptions("w"))
			r := newRand(3)
			var want []int64
			id, ts := int64(0), uint64(10)
			write := func(evs []codec.Event) {
				t.Helper()
				if encoded {
					encs := make([][]byte, len(evs))
					for i := range evs {
						encs[i] = codec.AppendEvent(nil, &evs[i])
					}
					must(t, w.WriteEncoded(ctx, 1, encs...))
				} else {
					must(t, w.Write(ctx, 1, evs...))
				}
				for i := range evs {
					want = append(want, evs[i].Row.Columns[0].Value.Int())
				}
			}
			batch := func(n, size int) []codec.Event {
				evs := make([]codec.Event, n)
				for i := range evs {
					id++
					ts++
					evs[i] = bigRow(r, 1, ts, id, size)
				}
				return evs
			}
			chunkCaps := func() (caps []int) {
				w.mu.Lock()
				defer w.mu.Unlock()
				for _, c := range w.spans[1].chunks {
					caps = append(caps, cap(c.b))
				}
				return caps
			}
			// oddChunks are the chunks of another size than maxChunk that
			// hold more than one event.
			oddChunks := func() (odd []int) {
				w.mu.Lock()
				defer w.mu.Unlock()
				s := w.spans[1]
				events := map[uint32]int{}
				for _, r := range s.recs {
					events[r.chunk]++
				}
				for i, c := range s.chunks {
					if cap(c.b) != maxChunk && events[s.base+uint32(i)] > 1 {
						odd = append(odd, cap(c.b))
					}
				}
				return odd
			}
			write(batch(1000, 400)) // about 500 KiB, half a chunk
			if caps := chunkCaps(); len(caps) != 1 || caps[0] != maxChunk {
				t.Fatalf("the first batch of half a chunk went to chunks of %v bytes, want one of %d", caps, maxChunk)
			}
			write(batch(6000, 500)) // about 3.3 MiB
			write(batch(1, maxChunk+maxChunk/2))
			write(batch(10, 100))
			if odd := oddChunks(); len(odd) > 0 {
				t.Fatalf("chunks of %v bytes hold several events: only an event larger than a chunk may have one of another size than %d", odd, maxChunk)
			}
			must(t, w.AdvanceResolved(1, ts))
			mustFlush(t, w)
			must(t, w.Close(ctx))
			gs := readLog(t, b, readOpts{})
			if len(gs) != len(want) {
				t.Fatalf("%d events read back, %d written", len(gs), len(want))
			}
			for i, g := range gs {
				if g.id != want[i] || g.ts != uint64(10+i+1) {
					t.Fatalf("event %d read back as %v, want id %d at ts %d", i, g, want[i], 10+i+1)
				}
			}
		})
	}
}

// A flush of many blocks on local disk does not hold a frame per block
// until its sync: the committer lets go of each once it is written (a
// repair builds it again) and the job's queue is bounded, so the frame
// buffers are a few, reused, however big the flush.
func TestBigFlushReusesFrames(t *testing.T) {
	ctx := context.Background()
	b := localBucket(t, t.TempDir())
	o := testOptions("w") // 4 KiB blocks
	o.FlushBytes = 256 << 10
	w := openSpan1(t, b, o)
	r := newRand(5)
	const n = 8000 // about 4 MiB: a thousand blocks
	evs := make([]codec.Event, n)
	for i := range evs {
		evs[i] = bigRow(r, 1, uint64(10+i), int64(i), 450)
	}
	must(t, w.Write(ctx, 1, evs...))
	must(t, w.AdvanceResolved(1, uint64(10+n)))
	mustFlush(t, w)
	blocks := w.Stats().Blocks
	made, bound := w.pools.made.Load(), int64(2*w.depth+2*w.o.Workers)
	t.Logf("%d blocks, %d frame buffers made, queue depth %d", blocks, made, w.depth)
	if blocks < 4*bound {
		t.Fatalf("only %d blocks: the flush proves nothing against %d frame buffers", blocks, bound)
	}
	if made > bound {
		t.Fatalf("a flush of %d blocks made %d frame buffers, want at most %d", blocks, made, bound)
	}
	must(t, w.Close(ctx))
	if got := len(readLog(t, b, readOpts{})); got != n {
		t.Fatalf("%d events read back, %d written", got, n)
	}
}

// The record-slice pool holds slices up to its budget in records of
// capacity, not in slices: a big flush's slices must not pin memory beyond
// it, and a slice taken makes room again. It keeps only its classes (powers
// of two), and a slice of a class is what get gives for any n it holds.
func TestRecordPoolBudgetCountsCapacity(t *testing.T) {
	cc := newChunkCache(16 * recOverhead * 256) // a budget of 256 records
	p := &cc.recs
	if p.max != 256 {
		t.Fatalf("budget = %d records, want 256", p.max)
	}
	cc.recycleRecs([]run{{recs: make([]rec, 0, 128)}, {recs: make([]rec, 0, 100)}, {recs: make([]rec, 0, 128)}, {recs: make([]rec, 0, 64)}})
	if p.held != 256 || len(p.classes[7]) != 2 || len(p.classes[6]) != 0 {
		t.Fatalf("held %d records (%d of 128, %d of 64); want the two of 128: 100 is no class, and 64 would pass the budget", p.held, len(p.classes[7]), len(p.classes[6]))
	}
	if r := p.get(65); cap(r) != 128 || len(r) != 0 || p.held != 128 {
		t.Fatalf("get(65): len %d cap %d, held %d after; want an empty slice of 128 from the pool, 128 held", len(r), cap(r), p.held)
	}
	p.put(make([]rec, 0, 64))
	if p.held != 192 {
		t.Fatalf("held %d after a slice of 64 fit the room the get made; want 192", p.held)
	}
	if r := p.get(1); cap(r) != 64 || p.held != 128 {
		t.Fatalf("get(1): cap %d, held %d; want the 64 from the pool", cap(r), p.held)
	}
	if r := p.get(3 << maxRecClass); cap(r) != 3<<maxRecClass {
		t.Fatalf("a slice past the largest class: cap %d, want %d (made to measure)", cap(r), 3<<maxRecClass)
	}
}

// A job's queue holds blocks beyond the quota: at most 16 MiB of them
// compressed or for an object store, 4 MiB raw on local disk, never fewer
// than two per worker, never more than a threshold flush.
func TestQueueDepthBoundsBlocksInFlight(t *testing.T) {
	for _, c := range []struct {
		flush   int64
		workers int
		comp    segment.Compression
		local   bool
		want    int
	}{
		{64 << 20, 2, segment.CompressionLZ4, true, 64},
		{64 << 20, 2, segment.CompressionNone, true, 16},
		{64 << 20, 2, segment.CompressionNone, false, 64},
		{1 << 20, 2, segment.CompressionLZ4, true, 4},
		{1 << 20, 2, segment.CompressionNone, true, 4},
		{64 << 20, 16, segment.CompressionNone, true, 32},
	} {
		o := &Options{FlushBytes: c.flush, BlockSize: 256 << 10, Workers: c.workers}
		if got := queueDepth(o, c.comp, c.local); got != c.want {
			t.Errorf("FlushBytes %d, %d workers, compression %v, appendable %v: depth %d blocks, want %d", c.flush, c.workers, c.comp, c.local, got, c.want)
		}
	}
}

// Spans that take turns at transactions of half a chunk, each flushed on
// its own, reuse one or two arena chunks between them: a span whose every
// event a flush took gives its last chunk back too, instead of keeping its
// unused half for its next turn (8 spans kept 8 chunks and more, touched
// fresh).
func TestSpansTakingTurnsShareChunks(t *testing.T) {
	ctx := context.Background()
	b := localBucket(t, t.TempDir())
	w := open(t, b, testOptions("w"))
	const spans = 8
	for s := SpanID(1); s <= spans; s++ {
		must(t, w.AddSpan(s, 0))
	}
	r := newRand(7)
	ts, id := uint64(10), int64(0)
	const txns = 4 * spans
	for i := range txns {
		s := SpanID(i%spans + 1)
		ts++
		evs := make([]codec.Event, 1000) // about half a chunk
		for k := range evs {
			id++
			evs[k] = bigRow(r, s, ts, id, 450)
		}
		must(t, w.Write(ctx, s, evs...))
		for s := SpanID(1); s <= spans; s++ {
			must(t, w.AdvanceResolved(s, ts))
		}
		mustFlush(t, w)
	}
	made := w.chunks.made.Load()
	t.Logf("%d transactions of 8 spans in turn: %d arena chunks made", txns, made)
	if made > 2 {
		t.Fatalf("%d arena chunks made for %d spans writing half a chunk in turn, want at most 2", made, spans)
	}
	must(t, w.Close(ctx))
	if got := len(readLog(t, b, readOpts{})); got != int(id) {
		t.Fatalf("%d events read back, %d written", got, id)
	}
}
