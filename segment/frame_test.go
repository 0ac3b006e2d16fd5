package segment

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"
)

// TestFrameMatchesWriter checks that blocks built with BlockBuilder, encoded
// on their own and written with AppendFrame give the very bytes Writer.Append
// gives for the same records and block boundaries, for both compressions.
func TestFrameMatchesWriter(t *testing.T) {
	for _, c := range []Compression{CompressionNone, CompressionLZ4} {
		t.Run(c.String(), func(t *testing.T) {
			hdr := Header{LogID: "log", WriterID: "w", Epoch: 1, Seq: 2, Compression: c, Created: time.Unix(1, 0)}
			const blockSize = 1 << 10
			var want, got bytes.Buffer
			ww, err := NewWriter(&want, hdr, &WriterOptions{BlockSize: blockSize})
			if err != nil {
				t.Fatal(err)
			}
			fw, err := NewWriter(&got, hdr, nil)
			if err != nil {
				t.Fatal(err)
			}
			var bb BlockBuilder
			var enc FrameEncoder
			var buf []byte
			emit := func() {
				f, err := enc.Encode(buf, &bb, c)
				if err != nil {
					t.Fatal(err)
				}
				buf = f.Bytes()[:0]
				if err := fw.AppendFrame(&f); err != nil {
					t.Fatal(err)
				}
				bb.Reset()
			}
			for i := range 500 {
				ts := uint64(100 + i/3)
				kind := KindRow
				if i%50 == 49 {
					kind = KindDDL
				}
				payload := []byte(fmt.Sprintf("record %d %s", i, bytes.Repeat([]byte{'x'}, i%40)))
				if err := ww.Append(ts, kind, payload); err != nil {
					t.Fatal(err)
				}
				// Writer.Append closes a block before the record that
				// would take it past the target, and after one that
				// reaches it.
				if bb.Records() > 0 && bb.Len()+bb.RecordSize(ts, len(payload)) > blockSize {
					emit()
				}
				if err := bb.Append(ts, kind, payload); err != nil {
					t.Fatal(err)
				}
				if bb.Len() >= blockSize {
					emit()
				}
			}
			if bb.Records() > 0 {
				emit()
			}
			if _, err := ww.Seal(); err != nil {
				t.Fatal(err)
			}
			if _, err := fw.Seal(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(want.Bytes(), got.Bytes()) {
				t.Fatalf("AppendFrame wrote %d bytes that differ from Append's %d", got.Len(), want.Len())
			}
			r, err := NewReader(bytes.NewReader(got.Bytes()), int64(got.Len()), nil)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for {
				_, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				n++
			}
			if n != 500 {
				t.Fatalf("read %d records, want 500", n)
			}
		})
	}
}

func TestFrameOrderAndMisuse(t *testing.T) {
	var bb BlockBuilder
	if err := bb.Append(10, KindRow, []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := bb.Append(9, KindRow, []byte("b")); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("regression inside a block: got %v, want ErrOutOfOrder", err)
	}
	if err := bb.Append(11, Kind(9), nil); err == nil {
		t.Fatal("unknown kind accepted")
	}
	var enc FrameEncoder
	var empty BlockBuilder
	if _, err := enc.Encode(nil, &empty, CompressionLZ4); err == nil {
		t.Fatal("empty block encoded")
	}
	f, err := enc.Encode(nil, &bb, CompressionLZ4)
	if err != nil {
		t.Fatal(err)
	}
	if bb.Records() != 0 || bb.Len() != 0 {
		t.Fatalf("Encode left %d records (%d bytes) in the builder", bb.Records(), bb.Len())
	}
	var out bytes.Buffer
	w, err := NewWriter(&out, Header{LogID: "l", WriterID: "w", Epoch: 1, Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(20, KindRow, []byte("later")); err != nil {
		t.Fatal(err)
	}
	before := w.Offset()
	if err := w.AppendFrame(&f); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("frame below the last record: got %v, want ErrOutOfOrder", err)
	}
	if ts, ok := w.LastTs(); !ok || ts != 20 {
		t.Fatalf("LastTs = %d, %v; want 20, true", ts, ok)
	}
	// The buffered record was written as its own block before the check.
	if w.Offset() <= before {
		t.Fatalf("buffered record not written before the frame check")
	}
	if _, err := w.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := w.AppendFrame(&f); !errors.Is(err, ErrSealed) {
		t.Fatalf("AppendFrame after Seal: got %v, want ErrSealed", err)
	}
	var zero Frame
	w2, _ := NewWriter(io.Discard, Header{LogID: "l", WriterID: "w", Epoch: 1, Seq: 1}, nil)
	if err := w2.AppendFrame(&zero); err == nil {
		t.Fatal("zero Frame accepted")
	}
}
