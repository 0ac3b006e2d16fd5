package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/segment"
	"github.com/redokit/redokit/testkit/bench"
	"github.com/redokit/redokit/writer"
)

// readCell is a reader-memory cell: a log of writers × logMiB MiB of
// payload on local disk, read back whole.
func readCell(writers, logMiB int) Cell {
	return Cell{ID: fmt.Sprintf("read/local/row512/lz4/w%dx%dMiB", writers, logMiB), Kind: "read", Backend: "local-nosync",
		RowSize: 512, Compression: "lz4", Writers: writers, Mix: "rows", LogMiB: logMiB}
}

// runReadCell builds a log of Writers × LogMiB MiB of payload on local disk
// (writers in parallel, flat out, without fsync: the log is only read
// back), then reads it whole four times, raw and decoded with redokit's
// reader, with the sort-then-merge baseline (sortmerge.go) and with the
// same baseline on TiCDC-format files of the same events (ticdcmerge.go,
// converted untimed), each read after freeing what the process can and
// resetting its peak RSS, and last decompresses the stored lz4 blocks on
// one thread: the ceiling.
func runReadCell(ctx context.Context, in childInput, res *Result) error {
	c, be := in.Cell, in.Backend
	if be.Kind != "local" {
		return fmt.Errorf("read cells run on a local backend, not %s", be.Name)
	}
	b, dir, done, err := openBucket(ctx, be, in.Dir)
	if err != nil {
		return err
	}
	defer done()
	m := res.Metrics
	const logID = "read"

	t0 := time.Now()
	lw, err := buildLog(ctx, b, logID, c)
	if err != nil {
		return fmt.Errorf("build the log: %w", err)
	}
	m["build_s"] = time.Since(t0).Seconds()
	m["build_mib_s"] = float64(lw.payload) / mib / m["build_s"]
	m["rows"] = float64(lw.rows)
	m["payload_mib"] = float64(lw.payload) / mib
	m["stored_mib"] = float64(lw.stored) / mib
	m["segments"] = float64(lw.segments)
	if lw.stored > 0 {
		m["comp_ratio"] = float64(lw.payload) / float64(lw.stored)
	}
	m["rss_build_mib"] = float64(peakRSS()) / mib

	// What redokit's decoded read yielded, for the sort-then-merge
	// baseline to be checked against.
	var want *eventDigest
	for _, raw := range []bool{true, false} {
		name := "read"
		if raw {
			name = "read_raw"
		}
		var rows, ddls int64
		d, err := measureRead(res, name, func() (err error) {
			if raw {
				rows, ddls, err = bench.ReadAll(ctx, b, logID, lw.maxTs, true)
				return err
			}
			want, err = readDecoded(ctx, b, logID, lw.maxTs)
			if want != nil {
				rows, ddls = want.rows, want.ddls
			}
			return err
		})
		if err != nil {
			return err
		}
		if rows != lw.rows || ddls != 0 {
			return fmt.Errorf("%s: %d rows and %d DDLs read back, the writers made %d rows durable", name, rows, ddls, lw.rows)
		}
		m[name+"_rows_s"] = float64(rows) / d
		m[name+"_mib_s"] = float64(lw.payload) / mib / d
		m[name+"_s"] = d
	}

	// The sort-then-merge baseline (a model of TiCDC's redo apply reader)
	// on the same log and range, with its sorted files beside the log.
	if err := runBaseline(res, "sortmerge", lw.payload, want, func() (*eventDigest, sortMergeStats, error) {
		return sortMergeRead(ctx, b, logID, 0, lw.maxTs, filepath.Join(dir, "sortmerge"))
	}); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(dir, "sortmerge")); err != nil {
		return err
	}

	// The same model on TiCDC-format files of the same events (the closer
	// model: msgp records, lz4 files, ticdcmerge.go), converted before the
	// clock starts into a folder beside the log.
	tdir := filepath.Join(dir, "ticdc")
	t2 := time.Now()
	tf, err := convertToTicdc(ctx, b, logID, lw.maxTs, tdir)
	if err != nil {
		return fmt.Errorf("convert to TiCDC's format: %w", err)
	}
	if tf.rows != lw.rows {
		return fmt.Errorf("convert to TiCDC's format: %d rows, the writers made %d", tf.rows, lw.rows)
	}
	m["ticdc_convert_s"] = time.Since(t2).Seconds()
	m["ticdc_files"] = float64(tf.files)
	m["ticdc_msgp_mib"] = float64(tf.msgpBytes) / mib
	m["ticdc_stored_mib"] = float64(tf.stored) / mib
	if err := runBaseline(res, "ticdcmerge", lw.payload, want, func() (*eventDigest, sortMergeStats, error) {
		return ticdcSortMergeRead(tdir, 0, lw.maxTs, filepath.Join(dir, "ticdcmerge"))
	}); err != nil {
		return err
	}
	if err := errors.Join(os.RemoveAll(tdir), os.RemoveAll(filepath.Join(dir, "ticdcmerge"))); err != nil {
		return err
	}

	// The ceiling: the stored blocks, decompressed on one thread, one
	// segment at a time; only the decompression is timed.
	freeMemory()
	t1, rows, err := storedCeiling(ctx, b, logID)
	if err != nil {
		return fmt.Errorf("ceiling: %w", err)
	}
	if rows != lw.rows {
		return fmt.Errorf("ceiling: the segments' footers count %d rows, the writers made %d", rows, lw.rows)
	}
	m["ceiling_rows_s"] = float64(rows) / t1.Seconds()
	m["ceiling_mib_s"] = float64(lw.payload) / mib / t1.Seconds()
	m["ratio_read_raw_ceiling"] = m["read_raw_rows_s"] / m["ceiling_rows_s"]
	m["ratio_read_ceiling"] = m["read_rows_s"] / m["ceiling_rows_s"]
	return nil
}

// measureRead runs read, named name in the metrics, after freeing what the
// process can and resetting its peak RSS, and records the read's peak RSS,
// the RSS at its start and the growth above it. It returns the read's
// seconds.
func measureRead(res *Result, name string, read func() error) (float64, error) {
	m := res.Metrics
	freeMemory()
	how, err := resetPeakRSS()
	if err != nil {
		res.Info["rss_reset"] = "could not reset VmHWM (" + err.Error() + "): the peak RSS is sampled every 2 ms instead"
		m["rss_hwm_reset"] = 0
	} else {
		res.Info["rss_reset"] = how
		m["rss_hwm_reset"] = 1
	}
	m[name+"_rss_start_mib"] = float64(currentRSS()) / mib
	var smp *rssSampler
	if err != nil {
		smp = sampleRSS(2 * time.Millisecond)
	}
	t0 := time.Now()
	err = read()
	d := time.Since(t0).Seconds()
	if smp != nil {
		m[name+"_rss_mib"] = float64(smp.stop()) / mib
	} else {
		m[name+"_rss_mib"] = float64(peakRSS()) / mib
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	m[name+"_rss_grow_mib"] = m[name+"_rss_mib"] - m[name+"_rss_start_mib"]
	return d, nil
}

// runBaseline measures one sort-then-merge baseline's read (read), named
// name in the metrics (sortmerge, ticdcmerge), checks that it yielded the
// events redokit's decoded read did (want), and records its rate over the
// log's payload bytes, its phases and its ratios to redokit's decoded read:
// the same measurement and metric names for both models.
func runBaseline(res *Result, name string, payload int64, want *eventDigest, read func() (*eventDigest, sortMergeStats, error)) error {
	m := res.Metrics
	var got *eventDigest
	var st sortMergeStats
	d, err := measureRead(res, name, func() (err error) {
		got, st, err = read()
		return err
	})
	if err != nil {
		return err
	}
	if err := got.sameAs(want); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	m[name+"_rows_s"] = float64(got.events) / d
	m[name+"_mib_s"] = float64(payload) / mib / d
	m[name+"_s"] = d
	m[name+"_sort_s"] = st.sortPhase.Seconds()
	m[name+"_merge_s"] = st.mergePhase.Seconds()
	m[name+"_sorted_mib"] = float64(st.sortedBytes) / mib
	m[name+"_objects"] = float64(st.objects)
	m["ratio_read_"+name] = m["read_rows_s"] / m[name+"_rows_s"]
	m["ratio_rss_"+name+"_read"] = m[name+"_rss_mib"] / m["read_rss_mib"]
	return nil
}

// readDecoded is bench.ReadAll's decoded read, folding every event into
// a digest as it goes (a few multiplications per event), so that the
// sort-then-merge baseline can be checked to read the same events in the
// same commit-ts order.
func readDecoded(ctx context.Context, b *blob.Bucket, logID string, maxTs uint64) (*eventDigest, error) {
	r, err := reader.Open(ctx, b, &reader.Options{LogID: logID, StartTs: 0, EndTs: maxTs})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	d := &eventDigest{}
	for {
		evs, err := r.NextBatch(ctx, 1024)
		if err == io.EOF {
			return d, nil
		}
		if err != nil {
			return d, err
		}
		for _, ev := range evs {
			d.add(&ev.Event)
		}
	}
}

type builtLog struct {
	rows, payload, stored, segments int64
	maxTs                           uint64
}

// buildLog writes the read cell's log: Writers writers in parallel, each
// replaying its transaction pool flat out until LogMiB MiB of payload, with
// the writer's default flush triggers, then closed.
func buildLog(ctx context.Context, b *blob.Bucket, logID string, c Cell) (*builtLog, error) {
	W := max(c.Writers, 1)
	pools, _ := bench.MakePools(W, c.RowSize, c.Mix)
	ws := make([]*writer.Writer, W)
	for i := range W {
		w, err := openCellWriter(ctx, b, &writer.Options{LogID: logID, WriterID: fmt.Sprintf("w%d", i), Compression: writer.CompressionLZ4}, i)
		if err != nil {
			return nil, err
		}
		defer w.Close(context.Background())
		ws[i] = w
	}
	target := int64(c.LogMiB) * mib
	lastTs := make([]uint64, W)
	errs := make([]error, W)
	var wg sync.WaitGroup
	for i := range W {
		wg.Go(func() {
			w, p := ws[i], pools[i]
			var written int64
			ts := bench.TsBase
			for k := uint64(0); written < target; k++ {
				ts = bench.TsBase + 1 + k*uint64(W) + uint64(i)
				span := writer.SpanID(i*bench.Spans + int(k%bench.Spans))
				if err := w.Write(ctx, span, p.Txn(k, ts)...); err != nil {
					errs[i] = err
					return
				}
				if err := w.AdvanceResolved(span, ts); err != nil {
					errs[i] = err
					return
				}
				written += int64(p.Bytes(k))
			}
			for s := range bench.Spans {
				if err := w.AdvanceResolved(writer.SpanID(i*bench.Spans+s), ts); err != nil {
					errs[i] = err
					return
				}
			}
			lastTs[i] = ts
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// Every writer resolves its spans up to the last ts any of them wrote
	// before it closes: a read of the whole log, (0, that ts], is then
	// proven by what each writer published (a reader refuses a range above
	// the lowest flushed ts the writers published).
	last := slices.Max(lastTs)
	for i, w := range ws {
		for s := range bench.Spans {
			if err := w.AdvanceResolved(writer.SpanID(i*bench.Spans+s), last); err != nil {
				return nil, err
			}
		}
		if err := w.Close(ctx); err != nil {
			return nil, err
		}
	}
	out := &builtLog{}
	for i, w := range ws {
		st := w.Stats()
		out.rows += st.Rows
		out.payload += st.PayloadBytes
		out.stored += st.StoredBytes
		out.segments += st.Segments
		out.maxTs = max(out.maxTs, lastTs[i])
	}
	return out, nil
}

// storedCeiling decompresses every lz4 block the log stores, segment by
// segment (each read whole into memory first, untimed), on one thread, and
// returns the decompression time and the rows the segments' footers count.
func storedCeiling(ctx context.Context, b *blob.Bucket, logID string) (t1 time.Duration, rows int64, err error) {
	log, err := redokit.Open(ctx, b, logID)
	if err != nil {
		return 0, 0, err
	}
	for a, err := range log.Segments(ctx) {
		if err != nil {
			return 0, 0, err
		}
		if a.NameErr != nil {
			continue
		}
		data, err := b.ReadAll(ctx, a.Key)
		if err != nil {
			return 0, 0, err
		}
		sr, err := segment.NewReader(bytes.NewReader(data), int64(len(data)), &segment.ReaderOptions{Object: a.Key})
		if err != nil {
			return 0, 0, err
		}
		f := sr.Footer()
		rows += int64(f.Rows)
		var comp [][]byte
		var sizes []int
		for _, bi := range f.Blocks {
			// The block frame: a header (its byte 1 is the block's codec),
			// then the stored payload.
			if segment.Compression(data[bi.Offset+1]) != segment.CompressionLZ4 {
				continue // stored raw: nothing to decompress
			}
			comp = append(comp, data[bi.Offset+segment.BlockHeaderSize:bi.End()])
			sizes = append(sizes, bi.Uncompressed)
		}
		d1, err := bench.LZ4Decompress(comp, sizes, 1)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", a.Key, err)
		}
		t1 += d1
	}
	return t1, rows, nil
}

// freeMemory returns what the process can to the OS before a measured read.
func freeMemory() {
	runtime.GC()
	debug.FreeOSMemory()
}

// resetPeakRSS resets the process's peak RSS (VmHWM) to its current RSS:
// Linux does it on a write of "5" to /proc/self/clear_refs.
func resetPeakRSS() (string, error) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return "", err
	}
	return "VmHWM reset through /proc/self/clear_refs before each read", nil
}

// currentRSS is the process's resident set size (VmRSS) in bytes, 0 when
// /proc is missing.
func currentRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// rssSampler is the fallback when VmHWM cannot be reset: the highest VmRSS
// seen by a goroutine polling it (a lower bound of the true peak).
type rssSampler struct {
	done chan struct{}
	wg   sync.WaitGroup
	max  int64
}

func sampleRSS(every time.Duration) *rssSampler {
	s := &rssSampler{done: make(chan struct{}), max: currentRSS()}
	s.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				s.max = max(s.max, currentRSS())
			}
		}
	})
	return s
}

func (s *rssSampler) stop() int64 {
	close(s.done)
	s.wg.Wait()
	return max(s.max, currentRSS())
}
