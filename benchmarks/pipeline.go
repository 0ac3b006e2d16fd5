package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/redokit/redokit/blob"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/sinkgate"
	"github.com/redokit/redokit/testkit/bench"
	"github.com/redokit/redokit/writer"
)

// The toy CDC pipeline: generator → redo writer → SQLite downstream, with the
// redo gate (sinkgate) on or off.
//
//   - gate on: the generator writes through a sinkgate.Gate; the gate holds
//     each event until the log's global resolved ts (meta.Coordinator ticking
//     every pipeCoordTick, read back by a meta.Watcher polling every
//     pipeWatchPoll) covers it, then hands it to the downstream;
//   - gate off: the generator writes the same events to the same redo writer
//     and hands copies to the downstream at once, without waiting for the log
//     (the downstream takes what is waiting in batches of up to 1024 events,
//     the gate's default batch).
//
// Phase 1 (throughput): the generator runs flat out for Seconds; the figure is
// rows in SQLite per second, until the last row written is downstream.
// Phase 2 (latency): the generator runs open-loop at Rate rows/s for Seconds;
// the end-to-end latency of a transaction is from the moment it was due
// (its creation) to the commit of the downstream transaction that holds it.
const (
	pipeCoordTick = 20 * time.Millisecond
	pipeWatchPoll = 10 * time.Millisecond
	pipeSpans     = bench.Spans
)

func runPipelineCell(ctx context.Context, in childInput, res *Result) error {
	c, be := in.Cell, in.Backend
	b, _, done, err := openBucket(ctx, be, in.Dir)
	if err != nil {
		return err
	}
	defer done()
	logID := "pipe-" + randHex(6)
	res.Info["log"] = logID
	if be.Kind == "object" {
		defer func() {
			dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = deletePrefix(dctx, b, logID+"/")
		}()
	}
	sqlDir, err := os.MkdirTemp(in.Dir, "redokit-pipe-sqlite-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(sqlDir)
	down, err := openSQLiteDown(filepath.Join(sqlDir, "down.db"), pipeSpans)
	if err != nil {
		return err
	}
	defer down.close()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	coord, err := meta.OpenCoordinator(ctx, b, logID, &meta.CoordinatorOptions{StartTs: bench.TsBase})
	if err != nil {
		return err
	}
	if err := coord.AddWriter(ctx, "w0"); err != nil {
		return err
	}
	var bg sync.WaitGroup
	defer bg.Wait()
	defer cancel()
	bg.Go(func() { coord.Run(ctx, pipeCoordTick) })

	comp := writer.CompressionLZ4
	if c.Compression == "none" {
		comp = writer.CompressionNone
	}
	w, err := writer.Open(ctx, b, &writer.Options{LogID: logID, WriterID: "w0",
		FlushInterval: time.Duration(c.FlushMS) * time.Millisecond, Compression: comp})
	if err != nil {
		return err
	}

	// The latency bookkeeping: when each commit ts was due.
	var created sync.Map // ts → time.Time
	var applied atomic.Int64
	var latMu sync.Mutex
	var lat []float64
	downstream := func(ctx context.Context, evs []codec.Event) error {
		if err := down.apply(ctx, evs); err != nil {
			return err
		}
		now := time.Now()
		var rows int64
		last := uint64(0)
		for i := range evs {
			if evs[i].Kind == codec.RowEvent {
				rows++
			}
			if ts := evs[i].CommitTs(); ts != last {
				last = ts
				if t, ok := created.LoadAndDelete(ts); ok {
					latMu.Lock()
					lat = append(lat, float64(now.Sub(t.(time.Time)))/float64(time.Millisecond))
					latMu.Unlock()
				}
			}
		}
		applied.Add(rows)
		return nil
	}

	var write func(span int, evs []codec.Event) error
	var advance func(span int, ts uint64) error
	var finish func() error
	runErr := make(chan error, 1)
	if c.Gate == "on" {
		watcher := meta.NewWatcher(b, logID, pipeWatchPoll)
		// The gate spills to the log when it is full (sinkgate, Eviction).
		g := sinkgate.New(w, watcher, coord, sinkgate.DownstreamFunc(downstream), &sinkgate.Options{Log: gateLog{logID, b}})
		for s := range pipeSpans {
			if err := g.AddSpan(ctx, writer.SpanID(s), bench.TsBase); err != nil {
				return err
			}
		}
		bg.Go(func() { runErr <- g.Run(ctx) })
		write = func(span int, evs []codec.Event) error { return g.Write(ctx, writer.SpanID(span), evs...) }
		advance = func(span int, ts uint64) error { return g.AdvanceResolved(writer.SpanID(span), ts) }
		finish = func() error { return g.Close(ctx) }
	} else {
		for s := range pipeSpans {
			if err := w.AddSpan(writer.SpanID(s), bench.TsBase); err != nil {
				return err
			}
		}
		// The downstream goroutine takes copies in batches, like the gate's.
		ch := make(chan []codec.Event, 64)
		bg.Go(func() {
			// Batches of whole transactions, up to the gate's default
			// MaxBatch (1024 events), of whatever is waiting.
			var err error
			var batch []codec.Event
			for evs := range ch {
				batch = append(batch[:0], evs...)
			more:
				for len(batch) < 1024 {
					select {
					case evs, ok := <-ch:
						if !ok {
							break more
						}
						batch = append(batch, evs...)
					default:
						break more
					}
				}
				if err == nil {
					err = downstream(ctx, batch)
				}
			}
			runErr <- err
		})
		write = func(span int, evs []codec.Event) error {
			if err := w.Write(ctx, writer.SpanID(span), evs...); err != nil {
				return err
			}
			cp := make([]codec.Event, len(evs))
			for i := range evs {
				cp[i] = *evs[i].Clone()
			}
			select {
			case ch <- cp:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		advance = func(span int, ts uint64) error { return w.AdvanceResolved(writer.SpanID(span), ts) }
		finish = func() error { close(ch); return w.Close(ctx) }
	}

	g := bench.NewGen(1, c.RowSize, "rows")
	ts := bench.TsBase
	var written int64
	// run generates transactions for d; pace > 0 spaces them (open loop).
	run := func(d time.Duration, pace time.Duration, record bool) error {
		t0 := time.Now()
		for k := 0; ; k++ {
			due := t0.Add(time.Duration(k) * pace)
			if pace > 0 {
				if wait := time.Until(due); wait > 0 {
					time.Sleep(wait)
				}
			} else {
				due = time.Now()
			}
			if due.Sub(t0) >= d {
				return nil
			}
			ts++
			span := int(ts % pipeSpans)
			if record {
				created.Store(ts, due)
			}
			evs := g.Next(span, ts)
			if err := write(span, evs); err != nil {
				return err
			}
			if err := advance(span, ts); err != nil {
				return err
			}
			written += int64(len(evs))
		}
	}
	// drain advances every span to ts and waits until the downstream holds
	// every row written.
	drain := func() error {
		for s := range pipeSpans {
			if err := advance(s, ts); err != nil {
				return err
			}
		}
		deadline := time.Now().Add(60 * time.Second)
		for applied.Load() < written {
			select {
			case err := <-runErr:
				return fmt.Errorf("release loop stopped: %v", err)
			default:
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("downstream holds %d of %d rows after 60 s", applied.Load(), written)
			}
			time.Sleep(time.Millisecond)
		}
		return nil
	}

	secs := time.Duration(c.Seconds * float64(time.Second))
	t0 := time.Now()
	if err := run(secs, 0, false); err != nil {
		return err
	}
	if err := drain(); err != nil {
		return err
	}
	el := time.Since(t0)
	res.Metrics["pipe_rows_s"] = float64(written) / el.Seconds()
	res.Metrics["pipe_rows"] = float64(written)
	res.Metrics["rss_mib"] = float64(peakRSS()) / mib

	pace := time.Duration(float64(time.Second) * float64(bench.TxnRows) / float64(c.Rate))
	if err := run(secs, pace, true); err != nil {
		return err
	}
	if err := drain(); err != nil {
		return err
	}
	latMu.Lock()
	l := append([]float64(nil), lat...)
	latMu.Unlock()
	res.Samples["e2e_ms"] = append([]float64(nil), l...)
	res.Metrics["e2e_n"] = float64(len(l))
	res.Metrics["e2e_p50_ms"], res.Metrics["e2e_p99_ms"], res.Metrics["e2e_max_ms"] = bench.Percentiles(l)
	res.Metrics["rate_rows_s"] = float64(c.Rate)
	if err := finish(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}

// gateLog is the log a gate evicts to: its ID and bucket (sinkgate.Log).
type gateLog struct {
	id string
	b  *blob.Bucket
}

func (l gateLog) ID() string           { return l.id }
func (l gateLog) Bucket() *blob.Bucket { return l.b }
