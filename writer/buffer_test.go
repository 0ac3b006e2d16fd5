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
		w := open(t, b, o)
		must(t, w.AddSpan(1, 0))
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
	s.publish(cc, numB, offB, []int{len(roomB)}, []uint64{5}, []segment.Kind{segment.KindRow}, 0)
	r, _, retired := s.take(5)
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
	s.publish(cc, numC, offC, []int{1}, []uint64{6}, []segment.Kind{segment.KindRow}, 1)
	if _, _, retired := s.take(6); len(retired) == 0 {
		t.Fatal("retired no chunk once no reservation is open")
	}
}
