package segment

import (
	"bytes"
	"errors"
	"testing"
)

// TestParseFrame: every block of a sealed segment parses back into a frame
// that appends to a new segment as the same bytes; one flipped byte anywhere
// in it is a CorruptionError naming the object and the offset.
func TestParseFrame(t *testing.T) {
	data, r := openTestdata(t, "sealed.seg")
	var out bytes.Buffer
	w, err := NewWriter(&out, r.Header(), nil)
	if err != nil {
		t.Fatal(err)
	}
	blocks := r.Footer().Blocks
	for _, bi := range blocks {
		b := bytes.Clone(data[bi.Offset:bi.End()])
		f, err := ParseFrame("seg", bi.Offset, b)
		if err != nil {
			t.Fatalf("block at %d: %v", bi.Offset, err)
		}
		if got := f.Info(); got.Records != bi.Records || got.MinTs != bi.MinTs || got.MaxTs != bi.MaxTs || got.Length != bi.Length {
			t.Fatalf("block at %d: info %+v, footer says %+v", bi.Offset, got, bi)
		}
		if err := w.AppendFrame(&f); err != nil {
			t.Fatal(err)
		}
	}
	// (The test segment has progress frames between its blocks, so
	// offsets differ; each block's bytes must not.)
	for i, got := range w.Blocks() {
		if !bytes.Equal(out.Bytes()[got.Offset:got.End()], data[blocks[i].Offset:blocks[i].End()]) {
			t.Fatalf("block %d did not append to the same bytes", i)
		}
	}
	bi := blocks[0]
	for i := range bi.Length {
		b := bytes.Clone(data[bi.Offset:bi.End()])
		b[i] ^= 0x10
		_, err := ParseFrame("seg", bi.Offset, b)
		var ce *CorruptionError
		if !errors.As(err, &ce) || ce.Object != "seg" || ce.Offset != bi.Offset {
			t.Fatalf("byte %d flipped: %v, want a CorruptionError of seg at %d", i, err, bi.Offset)
		}
	}
	if _, err := ParseFrame("seg", 0, data[bi.Offset:bi.End()-1]); !IsCorrupt(err) {
		t.Fatalf("a short frame: %v", err)
	}
}
