package segment

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// TestCRCVector pins the CRC the spec names: CRC-32C, unmasked.
func TestCRCVector(t *testing.T) {
	if got := crc([]byte("123456789")); got != 0xe3069283 {
		t.Fatalf("CRC-32C check value %#08x, want 0xe3069283", got)
	}
}

// TestHeaderEpochSeqZero: epochs and seqs count from 1 (docs/FORMAT.md,
// Header), so a header holding epoch 0 or seq 0 under a CRC that holds was
// not written by a writer: corruption, whether the header is decoded alone,
// read by ranges or scanned front to back (never a torn tail), and a writer
// refuses to write one.
func TestHeaderEpochSeqZero(t *testing.T) {
	for _, c := range []struct {
		name string
		off  int
	}{{"epoch", hEpoch}, {"seq", hSeq}} {
		h := testHeader(CompressionNone)
		sealed := writeSegment(t, h, nil, genRecords(3, 2, false), true)
		active := writeSegment(t, h, nil, genRecords(3, 2, false), false)
		for _, data := range [][]byte{sealed, active} {
			le.PutUint64(data[c.off:], 0)
			le.PutUint32(data[hCRC:], crc(data[:hCRC]))
		}
		var ce *CorruptionError
		if _, err := DecodeHeader(sealed, "x.seg"); !errors.As(err, &ce) || ce.Part != "header" || ce.Offset != 0 {
			t.Errorf("%s 0: DecodeHeader: %v, want a corrupt header at offset 0", c.name, err)
		}
		if _, _, err := readAll(sealed); !errors.As(err, &ce) || ce.Part != "header" {
			t.Errorf("%s 0: ranged read: %v, want a corrupt header", c.name, err)
		}
		if _, err := Recover(bytes.NewReader(active), nil); !errors.As(err, &ce) || ce.Part != "header" {
			t.Errorf("%s 0: recovery of an unsealed segment: %v, want a corrupt header (not a torn tail)", c.name, err)
		}
		h0 := h
		if c.name == "epoch" {
			h0.Epoch = 0
		} else {
			h0.Seq = 0
		}
		if _, err := NewWriter(io.Discard, h0, nil); err == nil {
			t.Errorf("%s 0: NewWriter accepted the header", c.name)
		}
	}
}
