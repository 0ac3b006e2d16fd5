package reader

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/segment"
	"github.com/redokit/redokit/testkit/testenv"
)

// runsLog is one writer epoch's log of overlapping sorted runs, or the same
// events all in one segment.
type runsLog struct {
	b      *blob.Bucket
	rows   int64 // events
	uncomp int64 // uncompressed bytes of the blocks
	bytes  int64 // stored bytes
}

// benchRowBytes is about what an event of benchRowGen encodes to.
const benchRowBytes = 230

// The shapes of overlapping runs.
const (
	// interleaved: the runs' events alternate by commit ts, each run
	// covering the whole range: every run is at the frontier all the
	// time, the worst case for the merge.
	interleaved = "interleaved"
	// spill: what a writer spilling under memory pressure while one span
	// lags writes: each spill holds a few rows of the lagging span at low
	// ts (interleaved across the spills, so every spill starts low) and
	// then its bulk, the fast spans' events of its own window.
	spill = "spill"
	// spillLow is the rows of the lagging span per spill.
	spillLow = 50
)

// runsBucket is an empty local bucket for a runs log, removed with tb.
func runsBucket(tb testing.TB) *blob.Bucket {
	b, err := local.New(tb.TempDir(), &local.Options{NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { b.Close() })
	return b
}

// buildRunsLog writes into b about total uncompressed bytes of events of n runs of
// the given shape. Run k's own generator makes its events, in commit-ts
// order. With one segment, the events of the n runs are merged into it (so
// both logs hold the very same events); otherwise run k is segment k+1,
// linked to segment k as a writer links them.
func buildRunsLog(tb testing.TB, b *blob.Bucket, n int, shape string, one bool, total int64) *runsLog {
	ctx := context.Background()
	l := &runsLog{b: b}
	perRun := int(total / benchRowBytes / int64(n))
	gens := make([]*benchRowGen, n)
	for k := range gens {
		gens[k] = &benchRowGen{rng: rand.New(rand.NewPCG(7, uint64(k)))}
	}
	const base = uint64(400_000_000_000_000_000)
	var payload []byte
	var link segment.Link
	write := func(seq uint64, fill func(sw *segment.Writer)) {
		var buf bytes.Buffer
		hdr := segment.Header{LogID: testLog, WriterID: "spiller", Epoch: 1, Seq: seq, Compression: segment.CompressionLZ4, Created: created, Link: link}
		sw, err := segment.NewWriter(&buf, hdr, nil)
		if err != nil {
			tb.Fatal(err)
		}
		fill(sw)
		f, err := sw.Seal()
		if err != nil {
			tb.Fatal(err)
		}
		key := sw.Header().SealedName(f.MinTs, f.MaxTs).Format()
		if _, err := b.Put(ctx, key, buf.Bytes(), nil); err != nil {
			tb.Fatal(err)
		}
		link = segment.Link{PrevSeq: seq, PrevMaxTs: max(link.PrevMaxTs, f.MaxTs), PrevHeaderCRC: sw.HeaderCRC(), PrevFooterCRC: f.CRC}
		l.uncomp += int64(f.Uncompressed)
		l.bytes += int64(buf.Len())
	}
	// The commit ts of event j of run k.
	tsOf := func(k, j int) uint64 { return base + uint64(j*n+k) }
	if shape == spill {
		tsOf = func(k, j int) uint64 {
			if j < spillLow {
				return base + uint64(j*n+k)
			}
			return base + uint64(spillLow*n+k*perRun+j)
		}
	}
	add := func(sw *segment.Writer, k, j int) {
		ts := tsOf(k, j)
		payload = codec.AppendEvent(payload[:0], gens[k].next(ts, int64(j*n+k), gens[k].rng.IntN(8)))
		if err := sw.Append(ts, segment.KindRow, payload); err != nil {
			tb.Fatal(err)
		}
		l.rows++
	}
	if one {
		write(1, func(sw *segment.Writer) {
			if shape == spill {
				for j := range spillLow {
					for k := range n {
						add(sw, k, j)
					}
				}
				for k := range n {
					for j := spillLow; j < perRun; j++ {
						add(sw, k, j)
					}
				}
				return
			}
			for j := range perRun {
				for k := range n {
					add(sw, k, j)
				}
			}
		})
		return l
	}
	for k := range n {
		write(uint64(k+1), func(sw *segment.Writer) {
			for j := range perRun {
				add(sw, k, j)
			}
		})
	}
	return l
}

// heapPeak samples the heap until stopped: its objects (what the last GC
// kept plus what was allocated since, garbage included) and the live heap
// the last GC marked.
type heapPeak struct {
	peak, live atomic.Uint64
	stop       chan struct{}
	done       sync.WaitGroup
}

func heapNow() (objects, live uint64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

func (h *heapPeak) sample() {
	o, l := heapNow()
	raise64(&h.peak, o)
	raise64(&h.live, l)
}

func watchHeap() *heapPeak {
	h := &heapPeak{stop: make(chan struct{})}
	h.sample()
	h.done.Go(func() {
		t := time.NewTicker(200 * time.Microsecond)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-t.C:
				h.sample()
			}
		}
	})
	return h
}

func (h *heapPeak) end() (peak, live uint64) {
	close(h.stop)
	h.done.Wait()
	h.sample()
	return h.peak.Load(), h.live.Load()
}

func raise64(a *atomic.Uint64, v uint64) {
	for {
		m := a.Load()
		if v <= m || a.CompareAndSwap(m, v) {
			return
		}
	}
}

// readRuns reads the whole log once and returns the time and CPU time, the heap's peak
// and the live heap's (as the GCs during the read marked it) above what the
// heap held before, and the reader's stats.
func readRuns(b testing.TB, l *runsLog, raw bool) (time.Duration, time.Duration, uint64, uint64, Stats) {
	ctx := context.Background()
	runtime.GC()
	base, _ := heapNow()
	h := watchHeap()
	t0, c0 := time.Now(), cpuTime()
	r, err := Open(ctx, l.b, &Options{LogID: testLog, StartTs: 0, EndTs: 1 << 63, Raw: raw})
	if err != nil {
		b.Fatal(err)
	}
	n := drainBatches(b, r)
	st := r.Stats()
	r.Close()
	d, cpu := time.Since(t0), cpuTime()-c0
	peak, live := h.end()
	if n != l.rows {
		b.Fatalf("read %d rows, the log has %d", n, l.rows)
	}
	return d, cpu, peak - min(peak, base), live - min(live, base), st
}

// BenchmarkOverlappingRuns reads one writer epoch's log of 64 and of 400
// overlapping sorted segments, of two shapes (interleaved, spill: see
// there) and, in the same iterations, the same events
// in one segment, and reports the MiB/s of uncompressed blocks of both, their
// ratio (x_one_segment: 1 is as fast as one segment; x_one_segment_cpu, the
// same of CPU time, which a loaded machine sways less), the peak heap of each
// read above the heap before it (peak: sampled, it counts garbage not
// collected yet; live: what the GCs during the read found live) and the most
// chunks alive at once, with the memory of one chunk (chunk-MiB: the one
// segment's peak over its chunks, an upper bound) and the target runs ×
// chunk + 64 MiB (bound-MiB). REDOKIT_BENCH_SIZE sets the uncompressed bytes
// of the log (default 256MiB). Timing is reported, never judged.
func BenchmarkOverlappingRuns(b *testing.B) {
	total := int64(256 << 20)
	if os.Getenv("REDOKIT_BENCH_SIZE") != "" {
		total = benchSize()
	}
	for _, shape := range []string{interleaved, spill} {
		for _, n := range []int{64, 400} {
			benchRuns(b, shape, n, total)
		}
	}
}

func benchRuns(b *testing.B, shape string, n int, total int64) {
	// Built by the first sub-benchmark that runs, so that -bench can pick
	// some without building every log.
	var l, one *runsLog
	lb, ob := runsBucket(b), runsBucket(b)
	logs := func(b *testing.B) {
		if l != nil {
			return
		}
		l = buildRunsLog(b, lb, n, shape, false, total)
		one = buildRunsLog(b, ob, n, shape, true, total)
		if l.rows != one.rows || l.uncomp > one.uncomp*11/10 || one.uncomp > l.uncomp*11/10 {
			b.Fatalf("%d runs: %d rows, %d bytes; in one segment %d rows, %d bytes", n, l.rows, l.uncomp, one.rows, one.uncomp)
		}
		b.Logf("%s, %d runs: %d rows, %.1f MiB uncompressed, %.1f MiB stored (one segment: %.1f MiB, %.1f MiB)", shape, n, l.rows,
			float64(l.uncomp)/(1<<20), float64(l.bytes)/(1<<20), float64(one.uncomp)/(1<<20), float64(one.bytes)/(1<<20))
	}
	for _, raw := range []bool{true, false} {
		mode := "decoded"
		if raw {
			mode = "raw"
		}
		b.Run(fmt.Sprintf("shape=%s/runs=%d/merge=%s", shape, n, mode), func(b *testing.B) {
			logs(b)
			b.SetBytes(l.uncomp)
			var runsT, oneT, runsCPU, oneCPU time.Duration
			var runsPeak, onePeak, runsLive, oneLive uint64
			var runsSt, oneSt Stats
			for range b.N {
				d, cpu, p, lv, st := readRuns(b, l, raw)
				runsT, runsCPU = runsT+d, runsCPU+cpu
				runsPeak, runsLive = max(runsPeak, p), max(runsLive, lv)
				runsSt.MaxChunks, runsSt.MaxOpenStreams = max(runsSt.MaxChunks, st.MaxChunks), max(runsSt.MaxOpenStreams, st.MaxOpenStreams)
				b.StopTimer()
				d, cpu, p, lv, st = readRuns(b, one, raw)
				oneT, oneCPU = oneT+d, oneCPU+cpu
				onePeak, oneLive, oneSt.MaxChunks = max(onePeak, p), max(oneLive, lv), max(oneSt.MaxChunks, st.MaxChunks)
				b.StartTimer()
			}
			chunk := float64(max(oneLive, onePeak)) / float64(oneSt.MaxChunks) / (1 << 20)
			mib := float64(l.uncomp) / (1 << 20) * float64(b.N)
			b.ReportMetric(mib/runsT.Seconds(), "MiB/s")
			b.ReportMetric(mib/oneT.Seconds(), "one-MiB/s")
			b.ReportMetric(oneT.Seconds()/runsT.Seconds(), "x_one_segment")
			// CPU time hardly depends on what else the machine runs: the
			// one segment's CPU over the runs'.
			b.ReportMetric(oneCPU.Seconds()/runsCPU.Seconds(), "x_one_segment_cpu")
			b.ReportMetric(float64(runsPeak)/(1<<20), "peak-MiB")
			b.ReportMetric(float64(runsLive)/(1<<20), "live-MiB")
			b.ReportMetric(float64(onePeak)/(1<<20), "one-peak-MiB")
			b.ReportMetric(chunk, "chunk-MiB")
			b.ReportMetric(float64(n)*chunk+64, "bound-MiB")
			b.ReportMetric(float64(runsSt.MaxChunks), "chunks")
			b.ReportMetric(float64(oneSt.MaxChunks), "one-chunks")
			b.ReportMetric(float64(runsSt.MaxOpenStreams), "streams")
		})
	}
}

// BenchmarkRunsOnly reads only the log of BenchmarkOverlappingRuns's
// overlapping runs (or, with REDOKIT_BENCH_ONE=1, the same events in one
// segment), without the other read between iterations, for profiles that
// show the merge of many runs alone. REDOKIT_BENCH_RUNS sets the runs (default
// 400), REDOKIT_BENCH_SHAPE the shape (interleaved or spill) and
// REDOKIT_BENCH_SIZE the bytes, as there.
func BenchmarkRunsOnly(b *testing.B) {
	total := int64(256 << 20)
	if os.Getenv("REDOKIT_BENCH_SIZE") != "" {
		total = benchSize()
	}
	n := testenv.Count(b, "REDOKIT_BENCH_RUNS", 400)
	shape := os.Getenv("REDOKIT_BENCH_SHAPE")
	if shape == "" {
		shape = interleaved
	}
	one := os.Getenv("REDOKIT_BENCH_ONE") == "1"
	l := buildRunsLog(b, runsBucket(b), n, shape, one, total)
	for _, raw := range []bool{true, false} {
		mode := "decoded"
		if raw {
			mode = "raw"
		}
		b.Run("merge="+mode, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(l.uncomp)
			var cpu time.Duration
			for b.Loop() {
				_, c, _, _, _ := readRuns(b, l, raw)
				cpu += c
			}
			b.ReportMetric(cpu.Seconds()/float64(b.N)/(float64(l.uncomp)/(1<<30)), "cpu-s/GiB")
		})
	}
}
