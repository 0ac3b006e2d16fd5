package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/segment"
	"github.com/redokit/redokit/testkit/bench"
	"github.com/redokit/redokit/writer"
)

// benchOptions are the flags of bench.
type benchOptions struct {
	seconds time.Duration
	rowSize int
	flush   time.Duration
	rate    float64 // rows/s of all writers together; 0 is flat out
	comp    string
	writers int
	reps    int
	segment int64
	dir     string
	spans   int
}

// benchFigure is one measured figure over the repetitions.
type benchFigure struct {
	Name    string    `json:"name"`
	Unit    string    `json:"unit"`
	Median  float64   `json:"median"`
	Min     float64   `json:"min"`
	Max     float64   `json:"max"`
	Samples []float64 `json:"samples"`
}

func (a *app) benchCmd() *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the redo writer and reader on a storage, beside raw baselines",
		Long: `bench is the short version of the benchmark program (go run ./benchmarks):
it measures, on one storage, the redo writer (writers × 8 spans writing
transactions of 16 rows for --seconds, flushed every --flush-interval),
the reader's merge of what they wrote, and, in the same run, the baselines that
give those figures a meaning: a raw append of as many payload bytes with as
many syncs (a storage that can append, like local disk) or a raw PUT of
objects of the writer's mean segment size (an object store), through the same
driver, and lz4's own speed on the same rows. Each repetition runs every step;
the table shows the median and the range.

The writers write flat out unless --rate is given: flat out, flushes carry as
much as the store takes and their latency is the store's worst case; with
--rate (rows/s, all writers together, open loop) and your --flush-interval,
the flush latency is the one your changefeed would see.

Without --storage it runs on a temporary directory on local disk (--dir),
removed afterwards. With --storage everything happens under a fresh scratch
prefix (redokit-bench-…/) that is removed afterwards, also on failure; nothing
outside it is read or written.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return a.runBench(cmd.Context(), &o)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.seconds, "seconds", 2*time.Second, "length of each repetition's write phase")
	f.IntVar(&o.rowSize, "row-size", 512, "bytes of each row's encoding (codec), about")
	f.DurationVar(&o.flush, "flush-interval", 100*time.Millisecond, "how often each writer is flushed")
	f.Float64Var(&o.rate, "rate", 0, "rows/s all writers write together, open loop (0: flat out)")
	f.StringVar(&o.comp, "compression", "lz4", "block compression: lz4 or none")
	f.IntVar(&o.writers, "writers", 1, "writers writing the log at once")
	f.IntVar(&o.reps, "reps", 3, "repetitions (the table shows the median and the range)")
	f.Int64Var(&o.segment, "segment-size", 64<<20, "bytes at which a writer starts a new segment")
	f.StringVar(&o.dir, "dir", os.TempDir(), "where the temporary local log goes when --storage is not given")
	return cmd
}

func (o *benchOptions) validate() error {
	o.spans = bench.Spans
	switch {
	case o.seconds <= 0:
		return usageErrorf("--seconds must be positive")
	case o.rowSize < 64 || o.rowSize > 1<<20:
		return usageErrorf("--row-size must be between 64 and 1048576")
	case o.flush <= 0:
		return usageErrorf("--flush-interval must be positive")
	case o.rate < 0 || o.rate > 1e9:
		return usageErrorf("--rate %g: want rows/s between 0 (flat out) and 1e9", o.rate)
	case o.comp != "lz4" && o.comp != "none":
		return usageErrorf("--compression %q: want lz4 or none", o.comp)
	case o.writers < 1 || o.writers > 64:
		return usageErrorf("--writers must be between 1 and 64")
	case o.reps < 1 || o.reps > 100:
		return usageErrorf("--reps must be between 1 and 100")
	case o.segment < 4<<10:
		return usageErrorf("--segment-size must be at least 4096")
	}
	return nil
}

func (a *app) runBench(ctx context.Context, o *benchOptions) (err error) {
	var b *blob.Bucket
	shown := a.storageShown()
	if a.storage == "" {
		dir, err := os.MkdirTemp(o.dir, "redokit-bench-")
		if err != nil {
			return fmt.Errorf("--dir %s: %w", o.dir, err)
		}
		defer os.RemoveAll(dir)
		u, err := storageURL(dir)
		if err != nil {
			return err
		}
		if b, err = blob.Open(ctx, u); err != nil {
			return err
		}
		shown = u + ", a temporary directory,"
	} else if b, err = a.open(ctx); err != nil {
		return err
	}
	defer b.Close()
	sb, _, cleanup, err := openScratch(ctx, b, "bench")
	if err != nil {
		return err
	}
	defer cleanup(&err)

	pools, _ := bench.MakePools(o.writers, o.rowSize, "rows")
	samples := map[string][]float64{}
	bar := a.bar(int64(o.reps), "benchmarking", false)
	for rep := range o.reps {
		m, err := benchOnce(ctx, sb, fmt.Sprintf("bench-%d", rep+1), o, pools)
		if err != nil {
			return fmt.Errorf("repetition %d: %w", rep+1, err)
		}
		for k, v := range m {
			samples[k] = append(samples[k], v)
		}
		_ = bar.Add(1)
	}
	_ = bar.Finish()

	figs := make([]benchFigure, 0, len(benchRows))
	for _, r := range benchRows {
		s, ok := samples[r.key]
		if !ok {
			continue
		}
		sum := bench.Summarize(s)
		name := r.name
		if o.rate > 0 {
			name = strings.Replace(name, "(flat out)", fmt.Sprintf("(at %g rows/s)", o.rate), 1)
		}
		figs = append(figs, benchFigure{Name: name, Unit: r.unit, Median: sum.Median, Min: sum.Min, Max: sum.Max, Samples: s})
	}
	kind := "(an object store: objects per flush, raw PUT baseline)"
	if sb.CanAppend() {
		kind = "(appendable: appends and fdatasync per flush, raw append baseline)"
	}
	if a.jsonOut {
		return a.printJSON(struct {
			Storage     string        `json:"storage"`
			Kind        string        `json:"kind"`
			RowSize     int           `json:"row_size"`
			Compression string        `json:"compression"`
			Writers     int           `json:"writers"`
			FlushMS     int64         `json:"flush_ms"`
			Rate        float64       `json:"rate_rows_s"` // 0: flat out
			Seconds     float64       `json:"seconds"`
			Reps        int           `json:"reps"`
			Figures     []benchFigure `json:"figures"`
		}{shown, kind, o.rowSize, o.comp, o.writers, o.flush.Milliseconds(), o.rate, o.seconds.Seconds(), o.reps, figs})
	}
	pace := "flat out"
	if o.rate > 0 {
		pace = fmt.Sprintf("%g rows/s", o.rate)
	}
	fmt.Fprintf(a.stdout, "redokit bench on %s %s\n%d B rows, %s, %d writer(s) × %d spans, %s, flush every %v, %d × %v\n\n",
		shown, kind, o.rowSize, o.comp, o.writers, o.spans, pace, o.flush, o.reps, o.seconds)
	tw := a.table()
	fmt.Fprintln(tw, "FIGURE\tMEDIAN\tMIN – MAX")
	for _, f := range figs {
		fmt.Fprintf(tw, "%s\t%s\t%s – %s\n", f.Name, benchNum(f.Median, f.Unit), benchNum(f.Min, f.Unit), benchNum(f.Max, f.Unit))
	}
	return tw.Flush()
}

// benchRows are the figures of bench's table, in order.
var benchRows = []struct{ key, name, unit string }{
	{"rows_s", "write rows/s", ""},
	{"payload_mib_s", "write payload MiB/s", ""},
	{"stored_mib_s", "stored MiB/s", ""},
	{"ratio", "compression ratio", "×"},
	{"flush_p50_ms", "flush p50 ms (flat out)", ""},
	{"flush_p99_ms", "flush p99 ms (flat out)", ""},
	{"puts_per_flush", "PUTs per flush (segments + progress)", ""},
	{"read_rows_s", "read (merge, decoded) rows/s", ""},
	{"raw_append_mib_s", "raw append MiB/s (same bytes, same syncs)", ""},
	{"vs_append", "writer payload ÷ raw append", "×"},
	{"raw_put_mib_s", "raw PUT MiB/s (objects of the mean segment size)", ""},
	{"vs_put", "writer stored ÷ raw PUT", "×"},
	{"lz4_compress_mib_s", "lz4 compress MiB/s (1 thread)", ""},
	{"lz4_decompress_mib_s", "lz4 decompress MiB/s (1 thread)", ""},
}

func benchNum(v float64, unit string) string {
	switch {
	case unit == "×":
		return fmt.Sprintf("%.2f×", v)
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// benchOnce is one repetition: the write phase, the read, the baselines.
func benchOnce(ctx context.Context, b *blob.Bucket, logID string, o *benchOptions, pools []*bench.TxnPool) (map[string]float64, error) {
	m := map[string]float64{}
	comp := writer.CompressionLZ4
	if o.comp == "none" {
		comp = writer.CompressionNone
	}
	log, err := redokit.Open(ctx, b, logID)
	if err != nil {
		return nil, err
	}
	ws := make([]*writer.Writer, o.writers)
	for i := range ws {
		w, err := log.OpenWriter(ctx, fmt.Sprintf("w%d", i+1),
			&writer.Options{FlushInterval: time.Hour, Compression: comp, MaxSegmentBytes: o.segment})
		if err != nil {
			return nil, err
		}
		defer w.Close(context.WithoutCancel(ctx))
		for s := range o.spans {
			if err := w.AddSpan(writer.SpanID(i*bench.Spans+s), bench.TsBase); err != nil {
				return nil, err
			}
		}
		ws[i] = w
	}

	// The benchmarks program's driver, flat out or at --rate: the same
	// replay of the same pools, flushed on the same kind of ticker.
	d := bench.NewDriver(ws, pools, o.flush)
	before := b.Stats()
	start := time.Now()
	lat, err := d.Run(ctx, o.seconds, o.rate)
	if err == nil {
		err = d.Finish(ctx)
	}
	elapsed := time.Since(start).Seconds()
	if err != nil {
		return nil, err
	}
	var maxTs uint64
	for _, ts := range d.LastTs {
		maxTs = max(maxTs, ts)
	}
	reqs := b.Stats().Sub(before)
	var st writer.Stats
	for _, w := range ws {
		if err := w.Close(ctx); err != nil {
			return nil, err
		}
		s := w.Stats()
		st.Rows += s.Rows
		st.PayloadBytes += s.PayloadBytes
		st.StoredBytes += s.StoredBytes
		st.Flushes += s.Flushes
		st.Segments += s.Segments
	}
	const mib = 1 << 20
	m["rows_s"] = float64(st.Rows) / elapsed
	m["payload_mib_s"] = float64(st.PayloadBytes) / mib / elapsed
	m["stored_mib_s"] = float64(st.StoredBytes) / mib / elapsed
	if st.StoredBytes > 0 {
		m["ratio"] = float64(st.PayloadBytes) / float64(st.StoredBytes)
	}
	if len(lat) > 0 {
		m["flush_p50_ms"], m["flush_p99_ms"], _ = bench.Percentiles(lat)
	}
	if st.Flushes > 0 {
		m["puts_per_flush"] = float64(reqs.Puts) / float64(st.Flushes)
	}

	// The reader's merge of everything written.
	t0 := time.Now()
	read, _, err := bench.ReadAll(ctx, b, logID, maxTs, false)
	if err != nil {
		return nil, err
	}
	if read != st.Rows {
		return nil, fmt.Errorf("read back %d rows, the writers made %d durable", read, st.Rows)
	}
	m["read_rows_s"] = float64(read) / time.Since(t0).Seconds()

	// Baselines on the same rows.
	raw, ends, _ := pools[0].Payload(max(min(st.PayloadBytes, 64<<20), 1<<20))
	if b.CanAppend() {
		mibs, err := benchAppend(ctx, b, raw, st.PayloadBytes, max(st.Flushes, 1))
		if err != nil {
			return nil, fmt.Errorf("raw append baseline: %w", err)
		}
		m["raw_append_mib_s"] = mibs
		m["vs_append"] = m["payload_mib_s"] / mibs
	} else if st.Segments > 0 {
		mibs, err := benchPut(ctx, b, raw, st.StoredBytes/st.Segments, st.StoredBytes)
		if err != nil {
			return nil, fmt.Errorf("raw PUT baseline: %w", err)
		}
		m["raw_put_mib_s"] = mibs
		m["vs_put"] = m["stored_mib_s"] / mibs
	}
	blocks := bench.Blocks(raw, ends)
	lzBlocks, _, tc, err := bench.LZ4Compress(blocks)
	if err != nil {
		return nil, err
	}
	sizes := make([]int, len(blocks))
	for i, blk := range blocks {
		sizes[i] = len(blk)
	}
	td, err := bench.LZ4Decompress(lzBlocks, sizes, 1)
	if err != nil {
		return nil, err
	}
	m["lz4_compress_mib_s"] = float64(len(raw)) / mib / tc.Seconds()
	m["lz4_decompress_mib_s"] = float64(len(raw)) / mib / td.Seconds()
	return m, nil
}

// benchAppend appends total bytes (raw, repeated) to a scratch object in
// writes of a block, with syncs evenly spread, and returns MiB/s.
func benchAppend(ctx context.Context, b *blob.Bucket, raw []byte, total, syncs int64) (float64, error) {
	f, err := b.OpenAppend(ctx, "raw/append")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	every := max(total/syncs, 1)
	const block = segment.DefaultBlockSize
	start := time.Now()
	var written, since int64
	for written < total {
		off := written % int64(len(raw))
		n := min(int64(block), total-written, int64(len(raw))-off)
		if _, err := f.Write(raw[off : off+n]); err != nil {
			return 0, err
		}
		written += n
		if since += n; since >= every {
			if err := f.Sync(); err != nil {
				return 0, err
			}
			since = 0
		}
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	return float64(total) / (1 << 20) / time.Since(start).Seconds(), nil
}

// benchPut puts objects of size bytes (raw, repeated) until total bytes
// are stored, at least 3 objects and at most 64, and returns MiB/s.
func benchPut(ctx context.Context, b *blob.Bucket, raw []byte, size, total int64) (float64, error) {
	size = max(size, 1<<10)
	n := min(max(total/size, 3), 64)
	obj := make([]byte, size)
	for i := int64(0); i < size; {
		i += int64(copy(obj[i:], raw))
	}
	start := time.Now()
	for i := range n {
		obj[0] = byte(i) // each object differs
		if _, err := b.Put(ctx, fmt.Sprintf("raw/put-%03d", i), obj, nil); err != nil {
			return 0, err
		}
	}
	return float64(n*size) / (1 << 20) / time.Since(start).Seconds(), nil
}
