package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/testkit/bench"
)

// baselineCap bounds the bytes a baseline moves; rates do not need more.
func baselineCap(quick bool) int64 {
	if quick {
		return 16 * mib
	}
	return 256 * mib
}

// baselines measures, in the same child right after the writer, what the
// bytes the writer moved cost without redokit: the same generator's encoded
// events (payload), copied in memory, lz4-compressed and decompressed in
// blocks of the writer's block size, appended to a file on the same file
// system with the same number of fdatasyncs per payload byte (local), or
// PUT and GET as objects of the writer's mean segment size through the same
// blob.Bucket (object stores).
func baselines(ctx context.Context, b *blob.Bucket, be *Backend, dir string, c Cell, wr *writeOutcome, res *Result) error {
	m := res.Metrics
	n := min(wr.payload, baselineCap(res.quick()))
	// The codec alone on writer 0's pool (generated before the clock
	// started): stamping the commit ts and ids the replay stamps, then
	// codec.AppendEvent, the encoding the writer's Write does and that
	// counts in its figures.
	t0 := time.Now()
	buf, ends, rows := wr.pool0.Payload(n)
	m["base_encode_mib_s"] = float64(len(buf)) / mib / time.Since(t0).Seconds()

	// Memory copy.
	dst := make([]byte, len(buf))
	t0 = time.Now()
	var copied int64
	for time.Since(t0) < 200*time.Millisecond || copied < 4*int64(len(buf)) {
		copy(dst, buf)
		copied += int64(len(buf))
		if copied >= 16*int64(len(buf)) {
			break
		}
	}
	m["base_memcpy_mib_s"] = float64(copied) / mib / time.Since(t0).Seconds()
	dst = nil

	// lz4 in blocks cut at event boundaries, as the writer cuts them.
	blocks := bench.Blocks(buf, ends)
	comp, compBytes, tc, err := bench.LZ4Compress(blocks)
	if err != nil {
		return err
	}
	m["base_lz4c_mib_s"] = float64(len(buf)) / mib / tc.Seconds()
	m["base_lz4_ratio"] = float64(len(buf)) / float64(compBytes)

	sizes := make([]int, len(blocks))
	for i, blk := range blocks {
		sizes[i] = len(blk)
	}
	decomp := func(par int) (time.Duration, error) { return bench.LZ4Decompress(comp, sizes, par) }
	td1, err := decomp(1)
	if err != nil {
		return err
	}
	tdN, err := decomp(runtime.GOMAXPROCS(0))
	if err != nil {
		return err
	}
	m["base_lz4d_mib_s"] = float64(len(buf)) / mib / td1.Seconds()
	m["base_lz4d_par_mib_s"] = float64(len(buf)) / mib / tdN.Seconds()
	m["ceiling_rows_s"] = float64(rows) / td1.Seconds()
	m["ceiling_par_rows_s"] = float64(rows) / tdN.Seconds()
	if c.Compression == "lz4" {
		if v := m["read_raw_rows_s"]; v > 0 {
			m["ratio_read_raw_ceiling"] = v / m["ceiling_rows_s"]
			m["ratio_read_raw_ceiling_par"] = v / m["ceiling_par_rows_s"]
		}
		if v := m["read_rows_s"]; v > 0 {
			m["ratio_read_ceiling"] = v / m["ceiling_rows_s"]
		}
	}

	if be.Kind == "local" {
		// The raw appends move as many bytes as the writer did in its
		// throughput phase (the sample repeated, at most 1 GiB) with as
		// many fdatasyncs: the same volume and cadence, so that the page
		// cache and the disk's writeback treat both alike. A small sample
		// with one sync would be all latency and no overlap.
		syncsPerByte := float64(wr.stats.Syncs) / float64(max(wr.payload, 1))
		vol := min(max(wr.payload, int64(len(buf))), 1<<30)
		reps := int((vol + int64(len(buf)) - 1) / int64(max(len(buf), 1)))
		total := float64(reps) * float64(len(buf))
		nSyncs := max(int(total*syncsPerByte+0.5), 1)
		path := filepath.Join(dir, "raw-append.bin")
		ta, err := rawAppend(path, repeatChunks([][]byte{buf}, reps), nSyncs, !be.NoSync)
		if err != nil {
			return err
		}
		os.Remove(path)
		m["base_append_mib_s"] = total / mib / ta.Seconds()
		tac, err := rawAppend(path, repeatChunks(comp, reps), nSyncs, !be.NoSync)
		if err != nil {
			return err
		}
		os.Remove(path)
		m["base_append_lz4_mib_s"] = float64(reps) * float64(compBytes) / mib / tac.Seconds()
		// The naive pipeline: one thread compresses, then appends the
		// compressed bytes with the same syncs (seconds per payload MiB of
		// each step, added).
		m["base_naive_lz4_mib_s"] = 1 / (tc.Seconds()/(float64(len(buf))/mib) + tac.Seconds()/(total/mib))
		m["base_syncs"] = float64(nSyncs)
		m["ratio_raw"] = m["write_mib_s"] / m["base_append_mib_s"]
		if c.Compression == "lz4" {
			m["ratio_naive_lz4"] = m["write_mib_s"] / m["base_naive_lz4_mib_s"]
		}
		return nil
	}

	// Object stores: objects of the writer's mean segment size, through the
	// same Bucket, made of the bytes the writer stored (compressed or not).
	objSize := int(wr.stored / max(wr.segments, 1))
	src := buf
	if c.Compression == "lz4" {
		src = make([]byte, 0, compBytes)
		for _, cb := range comp {
			src = append(src, cb...)
		}
	}
	objSize = max(min(objSize, len(src)), 1)
	// As many objects as the writer made, within the bytes at hand and a
	// time budget; at least minObjs.
	minObjs := 3
	if res.quick() {
		minObjs = 2
	}
	maxObjs := int(max(wr.segments, int64(minObjs)))
	var keys []string
	t0 = time.Now()
	var put int64
	for i := 0; i < maxObjs; i++ {
		if i >= minObjs && time.Since(t0) > putBudget(res.quick()) {
			break
		}
		off := (i * objSize) % max(len(src)-objSize+1, 1)
		key := fmt.Sprintf("%s/raw/obj-%05d", res.Info["log"], i)
		if _, err := b.Put(ctx, key, src[off:off+objSize], &blob.PutOptions{IfNotExist: true}); err != nil {
			return fmt.Errorf("raw put: %w", err)
		}
		keys = append(keys, key)
		put += int64(objSize)
	}
	tp := time.Since(t0)
	m["base_put_mib_s"] = float64(put) / mib / tp.Seconds()
	m["base_put_obj_mib"] = float64(objSize) / mib
	m["base_put_n"] = float64(len(keys))
	t0 = time.Now()
	var got int64
	for _, k := range keys {
		data, err := b.ReadAll(ctx, k)
		if err != nil {
			return fmt.Errorf("raw get: %w", err)
		}
		got += int64(len(data))
	}
	m["base_get_mib_s"] = float64(got) / mib / time.Since(t0).Seconds()
	m["ratio_raw"] = m["write_stored_mib_s"] / m["base_put_mib_s"]
	m["ratio_raw_payload"] = m["write_mib_s"] / m["base_put_mib_s"]
	if v := m["read_raw_mib_s"]; v > 0 && m["comp_ratio"] > 0 {
		// The reader moves stored bytes: compare them with a raw GET.
		m["ratio_read_get"] = v / m["comp_ratio"] / m["base_get_mib_s"]
	}
	return b.Delete(ctx, keys...)
}

func putBudget(quick bool) time.Duration {
	if quick {
		return time.Second
	}
	return 5 * time.Second
}

// rawAppend appends chunks to a new file at path in about nSyncs equal
// writes, each followed by an fdatasync when sync is set, and returns the
// time taken (open to last sync).
func rawAppend(path string, chunks [][]byte, nSyncs int, sync bool) (time.Duration, error) {
	var total int
	for _, c := range chunks {
		total += len(c)
	}
	per := max(total/nSyncs, 1)
	t0 := time.Now()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	pending := 0
	flush := func() error {
		if sync {
			if err := fdatasync(f); err != nil {
				return err
			}
		}
		pending = 0
		return nil
	}
	for _, c := range chunks {
		for len(c) > 0 {
			k := min(len(c), per-pending)
			if _, err := f.Write(c[:k]); err != nil {
				return 0, err
			}
			c = c[k:]
			pending += k
			if pending >= per {
				if err := flush(); err != nil {
					return 0, err
				}
			}
		}
	}
	if pending > 0 {
		if err := flush(); err != nil {
			return 0, err
		}
	}
	return time.Since(t0), nil
}

// repeatChunks is chunks, n times over (the same slices, no copy).
func repeatChunks(chunks [][]byte, n int) [][]byte {
	out := make([][]byte, 0, len(chunks)*n)
	for range n {
		out = append(out, chunks...)
	}
	return out
}
