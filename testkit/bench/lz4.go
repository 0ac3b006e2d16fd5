package bench

import (
	"fmt"
	"sync"
	"time"

	"github.com/pierrec/lz4/v4"

	"github.com/redokit/redokit/segment"
)

// Blocks cuts buf, encoded events ending at the offsets ends, into blocks of
// at least the writer's block size at event boundaries, as the writer cuts
// them.
func Blocks(buf []byte, ends []int) [][]byte {
	var blocks [][]byte
	start := 0
	for _, e := range ends {
		if e-start >= segment.DefaultBlockSize {
			blocks = append(blocks, buf[start:e])
			start = e
		}
	}
	if start < len(buf) {
		blocks = append(blocks, buf[start:])
	}
	return blocks
}

// LZ4Compress compresses each block on one thread and returns the
// compressed blocks, their total size and the time taken.
func LZ4Compress(blocks [][]byte) (comp [][]byte, compBytes int64, took time.Duration, err error) {
	var lzc lz4.Compressor
	comp = make([][]byte, len(blocks))
	t0 := time.Now()
	for i, blk := range blocks {
		out := make([]byte, lz4.CompressBlockBound(len(blk)))
		k, err := lzc.CompressBlock(blk, out)
		if err != nil {
			return nil, 0, 0, err
		}
		comp[i] = out[:k]
		compBytes += int64(k)
	}
	return comp, compBytes, time.Since(t0), nil
}

// LZ4Decompress decompresses lz4 blocks (comp[i] into sizes[i] bytes) on
// par goroutines, block i on goroutine i%par, and returns the time taken:
// the decompression ceiling of a reader of those blocks.
func LZ4Decompress(comp [][]byte, sizes []int, par int) (time.Duration, error) {
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, par)
	for p := range par {
		wg.Go(func() {
			out := make([]byte, segment.DefaultBlockSize+64<<10)
			for i := p; i < len(comp); i += par {
				if cap(out) < sizes[i] {
					out = make([]byte, sizes[i])
				}
				k, err := lz4.UncompressBlock(comp[i], out[:sizes[i]])
				if err == nil && k != sizes[i] {
					err = fmt.Errorf("lz4 block of %d bytes decompressed to %d, want %d", len(comp[i]), k, sizes[i])
				}
				if err != nil {
					errs[p] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return time.Since(t0), nil
}
