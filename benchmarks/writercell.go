package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/testkit/bench"
	"github.com/redokit/redokit/writer"
)

const mib = 1 << 20

// runWriterCell writes the cell's workload for Seconds with W writers into
// one log, then reads it back, then measures the baselines on the same bytes.
//
// Flush cadence: the harness calls Writer.Flush every FlushMS on a ticker of
// its own (the writer's own interval timer is set to an hour so it does not
// compete), and the flush latency is the time of that call, from the call to
// durable and published. The writer's size trigger (FlushBytes, 16 MiB)
// stays on.
func runWriterCell(ctx context.Context, in childInput, res *Result) error {
	c, be := in.Cell, in.Backend
	b, dir, done, err := openBucket(ctx, be, in.Dir)
	if err != nil {
		return err
	}
	defer done()
	logID := "bench-" + randHex(6)
	res.Info["log"] = logID
	defer func() {
		if be.Kind == "object" {
			dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = deletePrefix(dctx, b, logID+"/")
		}
	}()

	t0 := time.Now()
	wr, err := writePhase(ctx, b, logID, c, res)
	if err != nil {
		return err
	}
	res.Metrics["rss_write_mib"] = float64(peakRSS()) / mib
	res.Metrics["t_write_s"] = time.Since(t0).Seconds()

	t0 = time.Now()
	// The raw read (for the decompression-ceiling target) on local disk
	// only: on object stores both reads wait on the same GETs.
	if err := readPhase(ctx, b, logID, wr, res, be.Kind == "local"); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	res.Metrics["t_read_s"] = time.Since(t0).Seconds()
	t0 = time.Now()
	err = baselines(ctx, b, be, dir, c, wr, res)
	res.Metrics["t_baseline_s"] = time.Since(t0).Seconds()
	return err
}

// writeOutcome is what the write phase tells the read phase and baselines.
type writeOutcome struct {
	rows, ddls, payload, stored, flushes, segments int64
	// Totals after the latency phase too: what the log holds.
	rows2, ddls2, payload2 int64
	elapsed                time.Duration
	stats                  blob.Stats // requests of the write phase
	maxTs                  uint64
	pool0                  *bench.TxnPool // writer 0's pool, replayed again by the baselines
}

func writePhase(ctx context.Context, b *blob.Bucket, logID string, c Cell, res *Result) (*writeOutcome, error) {
	W := max(c.Writers, 1)
	interval := time.Duration(c.FlushMS) * time.Millisecond
	comp := writer.CompressionLZ4
	if c.Compression == "none" {
		comp = writer.CompressionNone
	}
	ws := make([]*writer.Writer, W)
	// The transactions are generated here, before anything is timed, and
	// replayed by the driver with fresh commit ts and ids.
	pools, poolBytes := bench.MakePools(W, c.RowSize, c.Mix)
	res.Metrics["gen_pool_mib"] = float64(poolBytes) / mib
	res.Metrics["gen_pool_txns"] = float64(pools[0].Len())
	for i := range W {
		o := &writer.Options{LogID: logID, WriterID: fmt.Sprintf("w%d", i), FlushInterval: time.Hour, Compression: comp}
		if c.SegmentMiB > 0 {
			o.MaxSegmentBytes = int64(c.SegmentMiB) * mib
		}
		if c.QuotaMiB > 0 {
			o.MemoryQuota = int64(c.QuotaMiB) * mib
		}
		w, err := openCellWriter(ctx, b, o, i)
		if err != nil {
			return nil, err
		}
		defer w.Close(context.Background())
		ws[i] = w
	}

	d := bench.NewDriver(ws, pools, interval)
	before := b.Stats()
	start := time.Now()
	satLat, err := d.Run(ctx, time.Duration(c.Seconds*float64(time.Second)), 0)
	if err != nil {
		return nil, err
	}
	if err := d.Finish(ctx); err != nil {
		return nil, err
	}
	out := &writeOutcome{elapsed: time.Since(start), pool0: pools[0]}
	out.stats = b.Stats().Sub(before)
	for _, w := range ws {
		st := w.Stats()
		out.rows += st.Rows
		out.ddls += st.DDLs
		out.payload += st.PayloadBytes
		out.stored += st.StoredBytes
		out.flushes += st.Flushes
		out.segments += st.Segments
	}
	// The latency phase: the same writers, open loop at half the
	// throughput just measured, flushed on the same cadence.
	rate := float64(out.rows) / out.elapsed.Seconds() / 2
	// At least 2.5 flush intervals, so that a 1 s cadence has samples.
	latSecs := c.LatencySeconds
	if latSecs == 0 {
		latSecs = c.Seconds
	}
	lat, err := d.Run(ctx, max(time.Duration(latSecs*float64(time.Second)), 2*interval+interval/2), rate)
	if err != nil {
		return nil, err
	}
	if err := d.Finish(ctx); err != nil {
		return nil, err
	}
	res.Metrics["latency_rate_rows_s"] = rate
	for _, w := range ws {
		st := w.Stats()
		out.rows2 += st.Rows
		out.ddls2 += st.DDLs
		out.payload2 += st.PayloadBytes
	}
	for _, w := range ws {
		if err := w.Close(ctx); err != nil {
			return nil, fmt.Errorf("close: %w", err)
		}
	}
	for _, ts := range d.LastTs {
		out.maxTs = max(out.maxTs, ts)
	}

	sec := out.elapsed.Seconds()
	m := res.Metrics
	m["write_rows_s"] = float64(out.rows) / sec
	m["write_mib_s"] = float64(out.payload) / mib / sec
	m["write_stored_mib_s"] = float64(out.stored) / mib / sec
	m["rows"] = float64(out.rows)
	m["ddls"] = float64(out.ddls)
	m["payload_mib"] = float64(out.payload) / mib
	m["stored_mib"] = float64(out.stored) / mib
	m["row_bytes"] = float64(out.payload) / float64(max(out.rows+out.ddls, 1))
	if out.stored > 0 {
		m["comp_ratio"] = float64(out.payload) / float64(out.stored)
	}
	m["flushes"] = float64(out.flushes)
	m["segments"] = float64(out.segments)
	if out.flushes > 0 {
		f := float64(out.flushes)
		m["put_per_flush"] = float64(out.stats.Puts) / f
		m["list_per_flush"] = float64(out.stats.Lists) / f
		m["delete_per_flush"] = float64(out.stats.Deletes) / f
		m["read_per_flush"] = float64(out.stats.Reads+out.stats.Stats) / f
		m["sync_per_flush"] = float64(out.stats.Syncs) / f
	}
	m["syncs"] = float64(out.stats.Syncs)
	m["puts"] = float64(out.stats.Puts)
	res.Samples["flush_ms"] = append([]float64(nil), lat...)
	res.Samples["flush_sat_ms"] = append([]float64(nil), satLat...)
	m["flush_n"] = float64(len(lat))
	m["flush_p50_ms"], m["flush_p99_ms"], m["flush_max_ms"] = bench.Percentiles(lat)
	m["flush_sat_p50_ms"], m["flush_sat_p99_ms"], m["flush_sat_max_ms"] = bench.Percentiles(satLat)
	for k, v := range m {
		if math.IsNaN(v) {
			delete(m, k)
		}
	}
	return out, nil
}

// openCellWriter opens the i-th writer of a cell with options o and adds
// its bench.Spans spans, its own, from bench.TsBase.
func openCellWriter(ctx context.Context, b *blob.Bucket, o *writer.Options, i int) (*writer.Writer, error) {
	w, err := writer.Open(ctx, b, o)
	if err != nil {
		return nil, err
	}
	for s := range bench.Spans {
		if err := w.AddSpan(writer.SpanID(i*bench.Spans+s), bench.TsBase); err != nil {
			w.Close(context.Background())
			return nil, err
		}
	}
	return w, nil
}

// readPhase reads the whole log back in commit-ts order, decoded (what
// apply needs) and raw (the merge without the codec), and checks the count.
func readPhase(ctx context.Context, b *blob.Bucket, logID string, wr *writeOutcome, res *Result, withRaw bool) error {
	for _, raw := range []bool{false, true} {
		if raw && !withRaw {
			break
		}
		t0 := time.Now()
		r, err := reader.Open(ctx, b, &reader.Options{LogID: logID, StartTs: 0, EndTs: wr.maxTs, Raw: raw})
		if err != nil {
			return err
		}
		var rows, ddls int64
		for {
			evs, err := r.NextBatch(ctx, 1024)
			if err == io.EOF {
				break
			}
			if err != nil {
				r.Close()
				return err
			}
			for _, ev := range evs {
				if ev.Kind == codec.RowEvent {
					rows++
				} else {
					ddls++
				}
			}
		}
		r.Close()
		d := time.Since(t0).Seconds()
		if rows != wr.rows2 || ddls != wr.ddls2 {
			return fmt.Errorf("read %d rows and %d DDLs back (raw=%v), the writers made %d and %d durable", rows, ddls, raw, wr.rows2, wr.ddls2)
		}
		name := "read"
		if raw {
			name = "read_raw"
		}
		res.Metrics[name+"_rows_s"] = float64(rows) / d
		res.Metrics[name+"_mib_s"] = float64(wr.payload2) / mib / d
	}
	return nil
}
