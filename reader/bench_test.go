package reader

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pierrec/lz4/v4"
	"go.uber.org/goleak"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/segment"
)

// The benchmark log: four writers, each writing benchBytes of sealed segments
// (32 MiB each) to local disk, their commit ts interleaved as a changefeed's
// are. REDOKIT_BENCH_SIZE sets the bytes per writer ("1GiB" for the full
// run); the default keeps `go test -bench .` quick.
const (
	benchWriters    = 4
	benchSegment    = 32 << 20
	defaultBenchPer = 64 << 20
)

type benchLog struct {
	dir    string
	b      *blob.Bucket
	keys   []string
	rows   int64 // events in the log
	bytes  int64 // compressed bytes of the segments
	uncomp int64 // uncompressed bytes of their blocks
	err    error
}

var (
	benchOnce sync.Once
	bench     benchLog
)

// TestMain cleans up the shared benchmark log and fails the package's tests
// if any goroutine outlives them: nothing a Reader starts may outlive Close.
func TestMain(m *testing.M) {
	code := m.Run()
	if bench.dir != "" {
		bench.b.Close()
		os.RemoveAll(bench.dir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func benchSize() int64 {
	s := os.Getenv("REDOKIT_BENCH_SIZE")
	if s == "" {
		return defaultBenchPer
	}
	mult := int64(1)
	for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if strings.HasSuffix(s, suffix) {
			s, mult = strings.TrimSuffix(s, suffix), m
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		panic(fmt.Sprintf("REDOKIT_BENCH_SIZE=%q: want bytes, or a number with KiB, MiB or GiB", os.Getenv("REDOKIT_BENCH_SIZE")))
	}
	return n * mult
}

// benchRowGen makes realistic row changes: an insert into a ten-column table
// of mixed types, with values varying as an OLTP table's do.
type benchRowGen struct {
	rng *rand.Rand
	ev  codec.Event
}

var (
	benchNames  = []string{"Alice Johnson", "Bob Smith", "Carol Diaz", "Dan Okafor", "Eve Martin", "Frank Li", "Grace Kim", "Heidi Novak"}
	benchDomain = []string{"example.com", "mail.test", "corp.example", "shop.test"}
	benchNotes  = []string{"", "leave at door", "gift wrap please", "call on arrival", "fragile: glass", "second attempt"}
)

func (g *benchRowGen) next(ts uint64, id int64, table int) *codec.Event {
	r := g.rng
	name := benchNames[r.IntN(len(benchNames))]
	email := fmt.Sprintf("%s.%d@%s", strings.ToLower(strings.Fields(name)[0]), r.IntN(1000), benchDomain[r.IntN(len(benchDomain))])
	const utf8, coll = "utf8mb4", "utf8mb4_bin"
	note := codec.Null()
	if n := benchNotes[r.IntN(len(benchNotes))]; n != "" {
		note = codec.StringValue(n)
	}
	g.ev = codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{
		StartTs: ts - 1 - uint64(r.IntN(1000)), CommitTs: ts,
		Table: codec.TableName{Schema: "shop", Name: fmt.Sprintf("orders_%d", table), PhysicalID: 100 + int64(table)},
		Columns: []codec.Column{
			{Name: "id", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey | codec.FlagHandleKey, Value: codec.IntValue(id)},
			{Name: "account_id", Type: codec.TypeLonglong, Flags: codec.FlagUnsigned | codec.FlagMultipleKey, Value: codec.UintValue(uint64(r.IntN(1_000_000)))},
			{Name: "customer_name", Type: codec.TypeVarchar, Flags: codec.FlagNullable, Charset: utf8, Collation: coll, Value: codec.StringValue(name)},
			{Name: "email", Type: codec.TypeVarchar, Flags: codec.FlagUniqueKey, Charset: utf8, Collation: coll, Value: codec.StringValue(email)},
			{Name: "balance", Type: codec.TypeNewDecimal, Flags: codec.FlagBinary, Value: codec.DecimalValue(fmt.Sprintf("%d.%02d", r.IntN(100000), r.IntN(100)))},
			{Name: "score", Type: codec.TypeDouble, Flags: codec.FlagNullable, Value: codec.Float64Value(float64(r.IntN(10000)) / 100)},
			{Name: "created_at", Type: codec.TypeDatetime, Flags: codec.FlagBinary, Value: codec.DatetimeValue(codec.DateTime{Year: 2025, Month: uint8(1 + r.IntN(12)), Day: uint8(1 + r.IntN(28)), Hour: uint8(r.IntN(24)), Minute: uint8(r.IntN(60)), Second: uint8(r.IntN(60)), Microsecond: uint32(r.IntN(1000000)), Fsp: 6})},
			{Name: "status", Type: codec.TypeEnum, Charset: utf8, Collation: coll, Value: codec.EnumValue(uint64(1 + r.IntN(5)))},
			{Name: "avatar_hash", Type: codec.TypeString, Flags: codec.FlagBinary | codec.FlagNullable, Charset: "binary", Collation: "binary", Value: codec.BytesValue(binary20(r))},
			{Name: "notes", Type: codec.TypeBlob, Flags: codec.FlagNullable, Charset: utf8, Collation: coll, Value: note},
		},
	}}
	return &g.ev
}

func binary20(r *rand.Rand) []byte {
	b := make([]byte, 20)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// buildBenchLog writes the benchmark log once per process.
func buildBenchLog(tb testing.TB) *benchLog {
	benchOnce.Do(func() {
		bench.err = func() error {
			dir, err := os.MkdirTemp("", "redokit-reader-bench-")
			if err != nil {
				return err
			}
			bench.dir = dir
			b, err := local.New(dir, &local.Options{NoSync: true})
			if err != nil {
				return err
			}
			bench.b = b
			per := benchSize()
			var wg sync.WaitGroup
			var mu sync.Mutex
			errs := make([]error, benchWriters)
			for w := range benchWriters {
				wg.Go(func() {
					errs[w] = writeBenchWriter(b, w, per, &mu)
				})
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					return err
				}
			}
			return nil
		}()
	})
	if bench.err != nil {
		tb.Fatal(bench.err)
	}
	return &bench
}

// writeBenchWriter writes one writer's segments: its events take every
// benchWriters-th commit ts, a few rows per ts, so the writers interleave.
func writeBenchWriter(b *blob.Bucket, w int, total int64, mu *sync.Mutex) error {
	ctx := context.Background()
	g := &benchRowGen{rng: rand.New(rand.NewPCG(uint64(w), 99))}
	ts := uint64(400_000_000_000_000_000) + uint64(w)
	id := int64(w) << 40
	var written int64
	var payload []byte
	var link segment.Link // each segment links its predecessor, as a writer's do
	for seq := uint64(1); written < total; seq++ {
		var buf bytes.Buffer
		hdr := segment.Header{LogID: testLog, WriterID: fmt.Sprintf("capture-%d", w), Epoch: 1, Seq: seq,
			Compression: segment.CompressionLZ4, Created: created, Link: link}
		sw, err := segment.NewWriter(&buf, hdr, nil)
		if err != nil {
			return err
		}
		var rows int64
		for sw.Offset() < min(benchSegment, total-written) {
			ts += benchWriters * uint64(1+g.rng.IntN(3))
			for range 1 + g.rng.IntN(4) {
				payload = codec.AppendEvent(payload[:0], g.next(ts, id, g.rng.IntN(8)))
				id++
				if err := sw.Append(ts, segment.KindRow, payload); err != nil {
					return err
				}
				rows++
			}
		}
		f, err := sw.Seal()
		if err != nil {
			return err
		}
		key := hdr.SealedName(f.MinTs, f.MaxTs).Format()
		if _, err := b.Put(ctx, key, buf.Bytes(), &blob.PutOptions{IfNotExist: true}); err != nil {
			return err
		}
		link = segment.Link{PrevSeq: seq, PrevMaxTs: max(link.PrevMaxTs, f.MaxTs), PrevHeaderCRC: sw.HeaderCRC(), PrevFooterCRC: f.CRC}
		written += int64(buf.Len())
		mu.Lock()
		bench.keys = append(bench.keys, key)
		bench.rows += rows
		bench.bytes += int64(buf.Len())
		bench.uncomp += int64(f.Uncompressed)
		mu.Unlock()
	}
	return nil
}

// ceilingPass reads every block of every segment through the bucket and
// lz4-decompresses it, with no CRC, no decoding and no merge: what a reader
// could at best do with the same bytes. par is how many segments are
// decompressed at once.
func ceilingPass(l *benchLog, par int) (time.Duration, error) {
	ctx := context.Background()
	startT := time.Now()
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	errs := make([]error, len(l.keys))
	for i, key := range l.keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = decompressSegment(ctx, l.b, key)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return time.Since(startT), nil
}

func decompressSegment(ctx context.Context, b *blob.Bucket, key string) error {
	a, err := b.Stat(ctx, key)
	if err != nil {
		return err
	}
	ra := &objectReaderAt{ctx: ctx, b: b, key: key}
	defer ra.Close()
	sr, err := segment.NewReader(ra, a.Size, nil)
	if err != nil {
		return err
	}
	blocks := sr.Footer().Blocks
	rc, err := b.NewRangeReader(ctx, key, blocks[0].Offset, blocks[len(blocks)-1].End()-blocks[0].Offset)
	if err != nil {
		return err
	}
	defer rc.Close()
	var frame, out []byte
	for _, bi := range blocks {
		if cap(frame) < bi.Length {
			frame = make([]byte, bi.Length)
		}
		if _, err := io.ReadFull(rc, frame[:bi.Length]); err != nil {
			return err
		}
		if cap(out) < bi.Uncompressed {
			out = make([]byte, bi.Uncompressed)
		}
		if frame[1] == byte(segment.CompressionLZ4) {
			if _, err := lz4.UncompressBlock(frame[segment.BlockHeaderSize:bi.Length], out[:bi.Uncompressed]); err != nil {
				return err
			}
		}
	}
	return nil
}

// BenchmarkMerge reads the whole log of four writers on local disk, and
// reports rows/s, MB/s of uncompressed blocks, and the ratio to the lz4
// decompression ceiling on the same blocks: x_ceiling1 against one core
// decompressing, x_ceilingN against GOMAXPROCS cores (the parallelism the
// reader itself has). The ceilings are measured in the same iterations as
// the merge, so that a shared machine's load weighs on both alike.
func BenchmarkMerge(b *testing.B) {
	l := buildBenchLog(b)
	b.Logf("log: %d writers, %d segments, %d rows, %.1f MiB stored, %.1f MiB uncompressed (lz4 ratio %.2f)",
		benchWriters, len(l.keys), l.rows, float64(l.bytes)/(1<<20), float64(l.uncomp)/(1<<20), float64(l.uncomp)/float64(l.bytes))
	procs := runtime.GOMAXPROCS(0)
	for _, par := range []int{1, procs} {
		b.Run(fmt.Sprintf("ceiling=lz4/goroutines=%d", par), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(l.uncomp)
			cpu0 := cpuTime()
			for b.Loop() {
				if _, err := ceilingPass(l, par); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(l.rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(l.rows*int64(b.N)), "cpu-ns/row")
		})
	}

	run := func(name string, opts Options, batch bool) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(l.uncomp)
			ctx := context.Background()
			opts.LogID, opts.StartTs, opts.EndTs = testLog, 0, 1<<63
			var merge, ceil1, ceilN, mergeCPU, ceilCPU time.Duration
			for range b.N {
				t0, c0 := time.Now(), cpuTime()
				r, err := Open(ctx, l.b, &opts)
				if err != nil {
					b.Fatal(err)
				}
				var n int64
				if batch {
					n = drainBatches(b, r)
				} else {
					for _, err := range r.Events(ctx) {
						if err != nil {
							b.Fatal(err)
						}
						n++
					}
				}
				r.Close()
				merge += time.Since(t0)
				mergeCPU += cpuTime() - c0
				if n != l.rows {
					b.Fatalf("read %d rows, the log has %d", n, l.rows)
				}
				b.StopTimer()
				c1 := cpuTime()
				d1, err := ceilingPass(l, 1)
				if err != nil {
					b.Fatal(err)
				}
				ceilCPU += cpuTime() - c1
				dN, err := ceilingPass(l, procs)
				if err != nil {
					b.Fatal(err)
				}
				ceil1, ceilN = ceil1+d1, ceilN+dN
				b.StartTimer()
			}
			b.ReportMetric(float64(l.rows)*float64(b.N)/merge.Seconds(), "rows/s")
			b.ReportMetric(ceil1.Seconds()/merge.Seconds(), "x_ceiling1")
			b.ReportMetric(ceilN.Seconds()/merge.Seconds(), "x_ceilingN")
			// CPU time, unlike wall time, hardly depends on what else
			// the machine runs: the cost of the merge per row, and the
			// ceiling's CPU over the merge's.
			b.ReportMetric(float64(mergeCPU)/float64(l.rows*int64(b.N)), "cpu-ns/row")
			b.ReportMetric(ceilCPU.Seconds()/mergeCPU.Seconds(), "x_ceiling_cpu")
		})
	}
	run("merge=raw/api=batch", Options{Raw: true}, true)
	run("merge=decoded/api=batch", Options{}, true)
	run("merge=decoded/api=iter", Options{}, false)
}

// cpuTime is the CPU time (user and system) the process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// drainBatches reads r to its end in batches of 1024 and returns how many
// events it read.
func drainBatches(b testing.TB, r *Reader) int64 {
	var n int64
	for {
		evs, err := r.NextBatch(context.Background(), 1024)
		if err == io.EOF {
			return n
		}
		if err != nil {
			b.Fatal(err)
		}
		n += int64(len(evs))
	}
}
