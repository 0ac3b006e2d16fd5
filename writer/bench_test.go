package writer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pierrec/lz4/v4"
	"golang.org/x/sys/unix"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/segment"
)

// The benchmarks write 512-byte rows (their codec encoding) to local disk,
// flushing every second or every 64 MiB with fdatasync, and compare the
// writer with two single-threaded baselines run in the same invocation:
//
//	baseline-append      the same encoded bytes appended to a file in 256 KiB
//	                     writes, fdatasync at the same cadence
//	baseline-lz4-append  the same, each 256 KiB block lz4-compressed first
//
// Run: go test -run '^$' -bench . -benchtime 5s ./writer
//
// The writer runs with one producer goroutine and with two (each writing
// half of the spans, as a CDC system's sink goroutines do).
//
// A sustained run (at least 2 GiB of payload each: 4,400,000 rows of 512 B):
//
//	go test -run '^$' -bench 'WriterLocal' -benchtime 4400000x ./writer

const (
	benchRowSize   = 512
	benchBatch     = 64
	benchSpans     = 8
	benchFlush     = 64 << 20
	benchInterval  = time.Second
	benchBlockSize = segment.DefaultBlockSize
)

var benchWords = strings.Fields(`order shipped pending delivered cancelled refund customer premium standard express
warehouse north south east west priority normal gift wrap note address street avenue road city springfield
riverside lakeside payment card paypal transfer invoice item quantity discount coupon summer winter sale`)

// benchRows makes distinct rows whose encoding is benchRowSize bytes:
// numbers, short strings, a decimal, a datetime and a text column of words,
// which compresses about the way real row data does.
func benchRows(n int) []codec.Event {
	r := rand.New(rand.NewPCG(42, 42))
	rows := make([]codec.Event, n)
	for i := range rows {
		cols := []codec.Column{
			{Name: "id", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey | codec.FlagHandleKey, Value: codec.IntValue(int64(1_000_000 + i))},
			{Name: "customer_id", Type: codec.TypeLonglong, Flags: codec.FlagMultipleKey, Value: codec.IntValue(r.Int64N(5_000_000))},
			{Name: "status", Type: codec.TypeVarchar, Charset: "utf8mb4", Collation: "utf8mb4_bin", Value: codec.StringValue(benchWords[r.IntN(5)])},
			{Name: "amount", Type: codec.TypeNewDecimal, Value: codec.DecimalValue(fmt.Sprintf("%d.%02d", r.IntN(100000), r.IntN(100)))},
			{Name: "created_at", Type: codec.TypeDatetime, Value: codec.DatetimeValue(codec.DateTime{Year: 2025, Month: uint8(1 + r.IntN(12)), Day: uint8(1 + r.IntN(28)), Hour: uint8(r.IntN(24)), Minute: uint8(r.IntN(60)), Second: uint8(r.IntN(60))})},
			{Name: "email", Type: codec.TypeVarchar, Charset: "utf8mb4", Collation: "utf8mb4_bin", Value: codec.StringValue(fmt.Sprintf("user%d@example.com", r.IntN(1_000_000)))},
		}
		ev := codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{
			StartTs: 1, CommitTs: 2,
			Table:   codec.TableName{Schema: "shop", Name: "orders", PhysicalID: 112},
			Columns: cols,
		}}
		base := len(codec.AppendEvent(nil, &ev))
		var sb strings.Builder
		for sb.Len() < benchRowSize {
			sb.WriteString(benchWords[r.IntN(len(benchWords))])
			sb.WriteByte(' ')
			if r.IntN(4) == 0 {
				fmt.Fprintf(&sb, "%d ", r.IntN(100000))
			}
		}
		// Two header bytes for the text column's name and length fields.
		text := sb.String()[:benchRowSize-base-len("notes")-4]
		ev.Row.Columns = append(ev.Row.Columns, codec.Column{Name: "notes", Type: codec.TypeBlob, Charset: "utf8mb4", Collation: "utf8mb4_bin", Value: codec.StringValue(text)})
		rows[i] = ev
	}
	return rows
}

var benchData = sync.OnceValues(func() ([]codec.Event, [][]byte) {
	rows := benchRows(8192)
	enc := make([][]byte, len(rows))
	for i := range rows {
		enc[i] = codec.AppendEvent(nil, &rows[i])
	}
	return rows, enc
})

func BenchmarkWriterLocal(b *testing.B) {
	rows, enc := benchData()
	var total int
	for _, e := range enc {
		total += len(e)
	}
	b.Logf("rows encode to %d bytes on average", total/len(enc))
	for _, c := range []Compression{CompressionLZ4, CompressionNone} {
		b.Run("writer-"+string(c), func(b *testing.B) { benchWriter(b, rows, c, 1) })
	}
	// A CDC system writes its spans from several goroutines; two producers
	// (each with half the spans) spread the encoding over both cores.
	for _, c := range []Compression{CompressionLZ4, CompressionNone} {
		b.Run("writer-"+string(c)+"-2producers", func(b *testing.B) { benchWriter(b, rows, c, 2) })
	}
	b.Run("baseline-append", func(b *testing.B) { benchBaseline(b, enc, false) })
	b.Run("baseline-lz4-append", func(b *testing.B) { benchBaseline(b, enc, true) })
}

// benchWriter writes b.N rows through a writer on local disk, from
// producers goroutines, each writing its own spans.
func benchWriter(b *testing.B, rows []codec.Event, c Compression, producers int) {
	ctx := context.Background()
	dir := b.TempDir()
	bk, err := local.New(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer bk.Close()
	w, err := Open(ctx, bk, &Options{
		LogID: "bench", WriterID: "w",
		FlushInterval: benchInterval, FlushBytes: benchFlush, Compression: c,
	})
	if err != nil {
		b.Fatal(err)
	}
	for s := SpanID(1); s <= benchSpans; s++ {
		if err := w.AddSpan(s, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(benchRowSize)
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	errs := make([]error, producers)
	lastTs := make([]uint64, producers)
	var wg sync.WaitGroup
	for p := range producers {
		share := b.N / producers
		if p == producers-1 {
			share = b.N - share*(producers-1)
		}
		wg.Go(func() {
			batch := make([]codec.Event, benchBatch)
			// Producer p owns spans p+1, p+1+producers, ...; commit ts
			// rise per producer, which is all a span needs.
			ts := uint64(0)
			for i := 0; i < share; {
				ts++
				n := min(benchBatch, share-i)
				for k := range n {
					batch[k] = rows[(p*7919+i+k)%len(rows)]
					batch[k].Row.CommitTs, batch[k].Row.StartTs = ts, ts-1
				}
				span := SpanID(1 + p + producers*int(ts%uint64(benchSpans/producers)))
				if err := w.Write(ctx, span, batch[:n]...); err != nil {
					errs[p] = err
					return
				}
				if err := w.AdvanceResolved(span, ts); err != nil {
					errs[p] = err
					return
				}
				i += n
			}
			lastTs[p] = ts
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	top := slices.Max(lastTs)
	for s := SpanID(1); s <= benchSpans; s++ {
		if err := w.AdvanceResolved(s, top); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := w.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	st := w.Stats()
	payload := st.PayloadBytes
	if err := w.Close(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(payload)/elapsed.Seconds()/(1<<20), "payload-MiB/s")
	b.ReportMetric(float64(st.Rows)/elapsed.Seconds(), "rows/s")
	if st.StoredBytes > 0 {
		b.ReportMetric(float64(payload)/float64(st.StoredBytes), "ratio")
	}
	b.ReportMetric(st.Backpressure.Seconds()/elapsed.Seconds()*100, "%blocked")
	b.ReportMetric(cpu.Seconds()/(float64(payload)/(1<<30)), "cpu-s/GiB")
}

// cpuTime is the CPU time (user and system) the process has used: the
// benchmarks report it per GiB, which the load of other processes on a
// shared machine does not change the way it changes throughput.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchBaseline appends b.N rows' encoded bytes to a file, single-threaded,
// in blocks of the writer's block size (lz4-compressed first when lz4 is
// set), with fdatasync every benchInterval or benchFlush bytes.
func benchBaseline(b *testing.B, enc [][]byte, compress bool) {
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "baseline"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var c lz4.Compressor
	block := make([]byte, 0, benchBlockSize+4096)
	out := make([]byte, lz4.CompressBlockBound(benchBlockSize+4096))
	var payload, stored, sinceSync int64
	lastSync := time.Now()
	emit := func() {
		data := block
		if compress {
			n, err := c.CompressBlock(block, out)
			if err != nil {
				b.Fatal(err)
			}
			if n > 0 {
				data = out[:n]
			}
		}
		if _, err := f.Write(data); err != nil {
			b.Fatal(err)
		}
		stored += int64(len(data))
		sinceSync += int64(len(block))
		block = block[:0]
		if sinceSync >= benchFlush || time.Since(lastSync) >= benchInterval {
			if err := unix.Fdatasync(int(f.Fd())); err != nil {
				b.Fatal(err)
			}
			sinceSync, lastSync = 0, time.Now()
		}
	}
	b.SetBytes(benchRowSize)
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		e := enc[i%len(enc)]
		block = append(block, e...)
		payload += int64(len(e))
		if len(block) >= benchBlockSize {
			emit()
		}
	}
	if len(block) > 0 {
		emit()
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	b.ReportMetric(float64(payload)/elapsed.Seconds()/(1<<20), "payload-MiB/s")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "rows/s")
	b.ReportMetric(float64(payload)/float64(stored), "ratio")
	b.ReportMetric(cpu.Seconds()/(float64(payload)/(1<<30)), "cpu-s/GiB")
}

// BenchmarkFlushLatency writes at a steady rate and calls Flush every 50 ms;
// it reports the p50 and p99 time a Flush takes to make the last 50 ms of
// data durable (merge, compress, append, fdatasync, publish).
func BenchmarkFlushLatency(b *testing.B) {
	const rate = 100_000 * benchRowSize // bytes per second: 100,000 rows/s
	const every = 50 * time.Millisecond
	rows, _ := benchData()
	for _, c := range []Compression{CompressionLZ4, CompressionNone} {
		b.Run(string(c)+"-100krows", func(b *testing.B) {
			ctx := context.Background()
			bk, err := local.New(b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer bk.Close()
			w, err := Open(ctx, bk, &Options{LogID: "bench", WriterID: "w", FlushInterval: benchInterval, FlushBytes: benchFlush, Compression: c})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close(ctx)
			for s := SpanID(1); s <= benchSpans; s++ {
				if err := w.AddSpan(s, 0); err != nil {
					b.Fatal(err)
				}
			}
			stop := make(chan struct{})
			prodDone := make(chan error, 1)
			go func() {
				// The producer: batches of rows at the target rate, every
				// span resolved up to the last batch.
				batch := make([]codec.Event, benchBatch)
				start := time.Now()
				var sent int64
				ts := uint64(0)
				i := 0
				for {
					select {
					case <-stop:
						prodDone <- nil
						return
					default:
					}
					if ahead := time.Duration(float64(sent)/rate*float64(time.Second)) - time.Since(start); ahead > 0 {
						time.Sleep(ahead)
					}
					ts++
					for k := range batch {
						batch[k] = rows[(i+k)%len(rows)]
						batch[k].Row.CommitTs, batch[k].Row.StartTs = ts, ts-1
					}
					i += len(batch)
					span := SpanID(1 + ts%benchSpans)
					if err := w.Write(ctx, span, batch...); err != nil {
						prodDone <- err
						return
					}
					for s := SpanID(1); s <= benchSpans; s++ {
						if err := w.AdvanceResolved(s, ts); err != nil {
							prodDone <- err
							return
						}
					}
					sent += benchBatch * benchRowSize
				}
			}()
			n := max(b.N, 100)
			lat := make([]time.Duration, 0, n)
			b.ResetTimer()
			tick := time.NewTicker(every)
			for range n {
				<-tick.C
				t0 := time.Now()
				if _, err := w.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			tick.Stop()
			b.StopTimer()
			close(stop)
			if err := <-prodDone; err != nil {
				b.Fatal(err)
			}
			slices.Sort(lat)
			pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1e6 }
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}
