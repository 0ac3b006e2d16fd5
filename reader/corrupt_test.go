package reader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/segment"
)

// A damaged block is named by the commit-ts range it held: in the reader's
// error (a *segment.CorruptionError still, naming key and offset) and in
// Verify's problem (Detail, and MinTs/MaxTs/HasTs).

// localAt is a local bucket at dir, whose objects the test edits as files.
func localAt(t *testing.T, dir string) *blob.Bucket {
	t.Helper()
	b, err := local.New(dir, &local.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// editFile applies edit to the bytes of the object key of the local bucket
// at dir.
func editFile(t *testing.T, dir, key string, edit func([]byte) []byte) {
	t.Helper()
	p := filepath.Join(dir, key)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, edit(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// flipIn flips a byte in the middle of the payload of block bi.
func flipIn(bi segment.BlockInfo) func([]byte) []byte {
	return func(data []byte) []byte {
		data[bi.Offset+segment.BlockHeaderSize+int64(bi.Length-segment.BlockHeaderSize)/2] ^= 0xff
		return data
	}
}

// damageFound reads the whole log and verifies it, and checks that both
// name the damaged block at offset off of key with the range [lo, hi] and
// the text says.
func damageFound(t *testing.T, b *blob.Bucket, key string, off int64, lo, hi uint64, says string) {
	t.Helper()
	_, _, err := readAll(t, b, &Options{LogID: testLog, EndTs: 1 << 40})
	var ce *segment.CorruptionError
	if !errors.Is(err, segment.ErrCorrupt) || !errors.As(err, &ce) || ce.Object != key || ce.Offset != off || ce.Part != "block" {
		t.Fatalf("read: want a corrupt block of %s at offset %d, got %v", key, off, err)
	}
	if !strings.Contains(err.Error(), says) {
		t.Fatalf("read: the error does not say %q:\n%v", says, err)
	}
	if gotLo, gotHi, ok := blockRange(err); !ok || gotLo != lo || gotHi != hi {
		t.Fatalf("read: the error's range is [%d, %d] (%v), want [%d, %d]", gotLo, gotHi, ok, lo, hi)
	}
	rep, err := Verify(context.Background(), b, testLog, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems {
		if p.Kind != ProblemCorrupt {
			continue
		}
		if p.Key != key || p.Offset != off || !p.HasTs || p.MinTs != lo || p.MaxTs != hi || !strings.Contains(p.Detail, says) ||
			!strings.Contains(p.String(), says) {
			t.Fatalf("verify: want %s at offset %d holding [%d, %d] (%q), got %+v", key, off, lo, hi, says, p)
		}
		return
	}
	t.Fatalf("verify found no corrupt block: %v", rep.Problems)
}

// activeBlocks writes s (active) and returns its key and whole blocks.
func activeBlocks(t *testing.T, b *blob.Bucket, dir string, s seg) (string, []segment.BlockInfo) {
	t.Helper()
	key := s.write(t, b)
	data, err := os.ReadFile(filepath.Join(dir, key))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := segment.Recover(bytes.NewReader(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Blocks) < 4 {
		t.Fatalf("%s has %d blocks, want 4 or more", key, len(rec.Blocks))
	}
	return key, rec.Blocks
}

func TestDamagedBlockRangeActive(t *testing.T) {
	events := rows(100, 10, 60, "t", 0)
	t.Run("between two blocks", func(t *testing.T) {
		dir := t.TempDir()
		b := localAt(t, dir)
		key, blocks := activeBlocks(t, b, dir, seg{writer: "a", seq: 1, events: events, active: true, raw: true})
		k := len(blocks) / 2
		editFile(t, dir, key, flipIn(blocks[k]))
		lo, hi := blocks[k-1].MaxTs, blocks[k+1].MinTs
		damageFound(t, b, key, blocks[k].Offset, lo, hi,
			fmt.Sprintf("the block holds commit ts in [%d, %d] (the max ts of the block before it, the min ts of the block after it)", lo, hi))
	})
	t.Run("past a progress frame", func(t *testing.T) {
		dir := t.TempDir()
		b := localAt(t, dir)
		// A progress frame after the block that is damaged: the next
		// block's min ts is found past it.
		s := seg{writer: "a", seq: 1, events: events, active: true, raw: true, progress: []frameAt{{After: 30, FlushedTs: 390, CommittedTs: 390}}}
		key, blocks := activeBlocks(t, b, dir, s)
		k := -1
		for i := 0; i+1 < len(blocks); i++ {
			if blocks[i+1].Offset != blocks[i].End() {
				k = i
			}
		}
		if k < 1 {
			t.Fatalf("no progress frame between two blocks after the first: %+v", blocks)
		}
		editFile(t, dir, key, flipIn(blocks[k]))
		lo, hi := blocks[k-1].MaxTs, blocks[k+1].MinTs
		damageFound(t, b, key, blocks[k].Offset, lo, hi, fmt.Sprintf("the block holds commit ts in [%d, %d]", lo, hi))
	})
	t.Run("the first block", func(t *testing.T) {
		dir := t.TempDir()
		b := localAt(t, dir)
		key, blocks := activeBlocks(t, b, dir, seg{writer: "a", seq: 1, events: events, active: true, raw: true})
		editFile(t, dir, key, flipIn(blocks[0]))
		hi := blocks[1].MinTs
		damageFound(t, b, key, blocks[0].Offset, 0, hi, fmt.Sprintf("the block holds commit ts at or below %d (the min ts of the block after it;", hi))
	})
	t.Run("the last block, a progress frame after it", func(t *testing.T) {
		dir := t.TempDir()
		b := localAt(t, dir)
		s := seg{writer: "a", seq: 1, events: events, active: true, raw: true, progress: []frameAt{{After: len(events), FlushedTs: 700, CommittedTs: 700}}}
		key, blocks := activeBlocks(t, b, dir, s)
		n := len(blocks)
		editFile(t, dir, key, flipIn(blocks[n-1]))
		lo := blocks[n-2].MaxTs
		damageFound(t, b, key, blocks[n-1].Offset, lo, math.MaxUint64, fmt.Sprintf("the block holds commit ts at or above %d (the max ts of the block before it; no whole block follows it)", lo))
	})
	t.Run("a whole block out of order", func(t *testing.T) {
		dir := t.TempDir()
		b := localAt(t, dir)
		key, blocks := activeBlocks(t, b, dir, seg{writer: "a", seq: 1, events: events, active: true, raw: true})
		// Blocks of the same header with lower ts appended: each is whole
		// and valid, the first below the previous block's max.
		var more bytes.Buffer
		early := seg{writer: "a", seq: 1, events: rows(10, 1, 10, "t", 1000), raw: true}
		sw := early.encode(t, &more)
		if err := sw.FlushBlock(); err != nil {
			t.Fatal(err)
		}
		first := sw.Blocks()[0]
		editFile(t, dir, key, func(data []byte) []byte { return append(data, more.Bytes()[segment.HeaderSize:]...) })
		off := blocks[len(blocks)-1].End()
		damageFound(t, b, key, off, first.MinTs, first.MaxTs,
			fmt.Sprintf("the block holds commit ts [%d, %d] (its header: its own bytes are whole)", first.MinTs, first.MaxTs))
	})
}

func TestDamagedBlockRangeSealed(t *testing.T) {
	dir := t.TempDir()
	b := localAt(t, dir)
	s := seg{writer: "a", seq: 1, events: rows(100, 10, 60, "t", 0), raw: true}
	key := s.write(t, b)
	data, err := os.ReadFile(filepath.Join(dir, key))
	if err != nil {
		t.Fatal(err)
	}
	sr, err := segment.NewReader(bytes.NewReader(data), int64(len(data)), nil)
	if err != nil {
		t.Fatal(err)
	}
	bi := sr.Footer().Blocks[2]
	editFile(t, dir, key, flipIn(bi))
	damageFound(t, b, key, bi.Offset, bi.MinTs, bi.MaxTs, fmt.Sprintf("the block holds commit ts [%d, %d] (the footer's index)", bi.MinTs, bi.MaxTs))
	// A read that ends below the range does not read the block.
	out, _, err := readAll(t, b, &Options{LogID: testLog, EndTs: bi.MinTs - 1})
	if err != nil || len(out) == 0 {
		t.Fatalf("a read up to %d, below the damaged block: %d events, %v", bi.MinTs-1, len(out), err)
	}
}
