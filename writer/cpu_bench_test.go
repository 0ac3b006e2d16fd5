package writer

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/codec"
)

// The CPU benchmarks measure what the writer costs per byte on the local
// path with the disk taken out of the picture as far as a real writer
// allows: 512-byte row events of one BLOB column each, written in batches
// of 1,000 from one goroutine, each batch resolved and flushed (fdatasync)
// before the next. Time spent waiting for the disk is not CPU, so cpu-ns/B
// (user+sys of the whole process, per payload byte) is the figure to
// compare, with prometheus tsdb/wlog on the same encoded bytes (Log of the
// batch, then Sync) as the yardstick.
//
//	go test -run '^$' -bench 'WriterCPU' -count 6 ./writer
const (
	cpuRecSize = 512
	cpuBatch   = 1000
)

// cpuEvents makes n row events of one BLOB column each, whose encodings are
// cpuRecSize bytes; the BLOB holds words, which lz4 compresses about as it
// does real text.
func cpuEvents(n int) []codec.Event {
	r := rand.New(rand.NewPCG(7, 7))
	evs := make([]codec.Event, n)
	for i := range evs {
		ev := codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{
			StartTs: 1, CommitTs: 2,
			Table: codec.TableName{Schema: "bench", Name: "blobs", PhysicalID: 42},
			Columns: []codec.Column{
				{Name: "b", Type: codec.TypeBlob, Value: codec.BytesValue(nil)},
			},
		}}
		base := len(codec.AppendEvent(nil, &ev))
		var sb strings.Builder
		for sb.Len() < cpuRecSize {
			sb.WriteString(benchWords[r.IntN(len(benchWords))])
			sb.WriteByte(' ')
		}
		// The BLOB's length takes two bytes instead of one.
		ev.Row.Columns[0].Value = codec.BytesValue([]byte(sb.String()[:cpuRecSize-base-1]))
		if got := len(codec.AppendEvent(nil, &ev)); got != cpuRecSize {
			panic("cpuEvents: event encodes to the wrong size")
		}
		evs[i] = ev
	}
	return evs
}

// cpuUserSys is the user and system CPU time the process has used, in ns.
func cpuUserSys() (user, sys int64) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return ru.Utime.Nano(), ru.Stime.Nano()
}

func BenchmarkWriterCPU(b *testing.B) {
	for _, c := range []Compression{CompressionNone, CompressionLZ4} {
		b.Run(string(c), func(b *testing.B) { benchWriterCPU(b, c, false) })
		// The same events, encoded by the caller (WriteEncoded checks them).
		b.Run(string(c)+"/encoded", func(b *testing.B) { benchWriterCPU(b, c, true) })
	}
}

// benchWriterCPU writes b.N batches, of events or of their encodings.
func benchWriterCPU(b *testing.B, c Compression, encoded bool) {
	ctx := context.Background()
	bk, err := local.New(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer bk.Close()
	w, err := Open(ctx, bk, &Options{LogID: "bench", WriterID: "w", Compression: c, FlushInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close(ctx)
	if err := w.AddSpan(1, 0); err != nil {
		b.Fatal(err)
	}
	pool := cpuEvents(4 * cpuBatch)
	var encs, batchEnc [][]byte
	if encoded {
		for k := range pool {
			encs = append(encs, codec.AppendEvent(nil, &pool[k]))
		}
	}
	b.SetBytes(cpuBatch * cpuRecSize)
	b.ReportAllocs()
	b.ResetTimer()
	var ru0, ru1 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	u0, s0 := cpuUserSys()
	start := time.Now()
	ts := uint64(1)
	for i := 0; i < b.N; i++ {
		// A producer stamps events it built once; copying them into a
		// batch would cost the benchmark half a payload copy of its own.
		off := (i * cpuBatch) % len(pool)
		batch := pool[off : off+cpuBatch]
		if encoded {
			// The commit ts sits at a fixed offset; the start ts is
			// a delta from it, so it moves along.
			batchEnc = encs[off : off+cpuBatch]
			for _, e := range batchEnc {
				ts++
				binary.LittleEndian.PutUint64(e[2:10], ts)
			}
			if err := w.WriteEncoded(ctx, 1, batchEnc...); err != nil {
				b.Fatal(err)
			}
		} else {
			for k := range batch {
				ts++
				batch[k].Row.CommitTs, batch[k].Row.StartTs = ts, ts-1
			}
			if err := w.Write(ctx, 1, batch...); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.AdvanceResolved(1, ts); err != nil {
			b.Fatal(err)
		}
		if _, err := w.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	u1, s1 := cpuUserSys()
	unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	b.StopTimer()
	bytes := float64(b.N) * cpuBatch * cpuRecSize
	// The system time is mostly the kernel's copy into the page cache and
	// its work for the syncs, which a busy disk inflates: the user time is
	// the steadier figure for the writer's own work.
	b.ReportMetric(float64(u1-u0+s1-s0)/bytes, "cpu-ns/B")
	b.ReportMetric(float64(u1-u0)/bytes, "user-ns/B")
	b.ReportMetric(float64(s1-s0)/bytes, "sys-ns/B")
	// Each thread that sleeps (a goroutine handoff to an idle core, a
	// blocking sync) is a voluntary context switch, paid for in system
	// time; page faults are memory the writer failed to reuse.
	b.ReportMetric(float64(ru1.Nvcsw-ru0.Nvcsw)/float64(b.N), "vcsw/op")
	b.ReportMetric(float64(ru1.Minflt-ru0.Minflt)/float64(b.N), "minflt/op")
	b.ReportMetric(bytes/elapsed.Seconds()/1e6, "MB/s-wall")
}
