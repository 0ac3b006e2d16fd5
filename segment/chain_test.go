package segment

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestHeaderLinkRoundTrip: a header's link and CRC read back as written, from
// DecodeHeader, the Scanner and the Reader, and the Writer reports the CRC it
// wrote.
func TestHeaderLinkRoundTrip(t *testing.T) {
	for _, l := range []Link{
		{},
		{PrevSeq: 41, PrevMaxTs: 1<<64 - 1, PrevHeaderCRC: 0xffffffff, PrevFooterCRC: 1},
		{PrevSeq: 41, PrevMaxTs: 0, PrevHeaderCRC: 0, PrevFooterCRC: 0}, // a predecessor that held nothing, CRCs of 0 by chance
	} {
		h := testHeader(CompressionLZ4)
		h.Link = l
		var buf bytes.Buffer
		w, err := NewWriter(&buf, h, nil)
		if err != nil {
			t.Fatal(err)
		}
		appendAll(t, w, genRecords(3, 20, true), 0)
		if _, err := w.Seal(); err != nil {
			t.Fatal(err)
		}
		data := buf.Bytes()
		if got, want := w.HeaderCRC(), le.Uint32(data[hCRC:]); got != want || w.Header().CRC != want {
			t.Fatalf("HeaderCRC() = %#x, Header().CRC = %#x, stored %#x", got, w.Header().CRC, want)
		}
		want := h
		want.Version, want.CRC = FormatVersion, w.HeaderCRC()
		got, err := DecodeHeader(data, "k")
		if err != nil || got != want {
			t.Fatalf("DecodeHeader: %+v, %v; want %+v", got, err, want)
		}
		if got, err := NewScanner(bytes.NewReader(data), nil).Header(); err != nil || got != want {
			t.Fatalf("Scanner: %+v, %v; want %+v", got, err, want)
		}
		if _, r, err := readAll(data); err != nil || r.Header() != want {
			t.Fatalf("Reader: %+v, %v; want %+v", r.Header(), err, want)
		}
		if got.Link.First() != (l.PrevSeq == 0) {
			t.Fatalf("First() = %v for %+v", got.Link.First(), l)
		}
	}
}

// TestDecodeHeaderBitFlips: every single-bit flip of a header is an error from
// DecodeHeader naming the object, never another header.
func TestDecodeHeaderBitFlips(t *testing.T) {
	h := goldenHeader(CompressionLZ4)
	var buf bytes.Buffer
	if _, err := NewWriter(&buf, h, nil); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	if _, err := DecodeHeader(data, "k"); err != nil {
		t.Fatal(err)
	}
	for bit := range HeaderSize * 8 {
		bad := bytes.Clone(data)
		bad[bit/8] ^= 1 << (bit % 8)
		got, err := DecodeHeader(bad, "log/seg/w/key")
		if !detected(err) || !strings.Contains(err.Error(), `"log/seg/w/key"`) {
			t.Fatalf("flip of bit %d (byte %d): %+v, %v", bit, bit/8, got, err)
		}
	}
	if _, err := DecodeHeader(data[:HeaderSize-1], "k"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short header: %v", err)
	}
}

// TestDecodeHeaderBrokenLink: a link that breaks the chain rules is
// corruption even when the header's CRC holds: the writer never wrote it.
func TestDecodeHeaderBrokenLink(t *testing.T) {
	var buf bytes.Buffer
	if _, err := NewWriter(&buf, testHeader(CompressionNone), nil); err != nil {
		t.Fatal(err)
	}
	for _, l := range []Link{{PrevSeq: 42}, {PrevSeq: 40}, {PrevMaxTs: 1}, {PrevHeaderCRC: 1}, {PrevFooterCRC: 1}} {
		b := bytes.Clone(buf.Bytes())
		le.PutUint64(b[hPrevSeq:], l.PrevSeq)
		le.PutUint64(b[hPrevMax:], l.PrevMaxTs)
		le.PutUint32(b[hPrevHCRC:], l.PrevHeaderCRC)
		le.PutUint32(b[hPrevFCRC:], l.PrevFooterCRC)
		le.PutUint32(b[hCRC:], crc(b[:hCRC]))
		if _, err := DecodeHeader(b, "k"); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "link") {
			t.Fatalf("link %+v: %v", l, err)
		}
		// A header whose CRC holds was written that way: never a torn tail.
		if _, err := Recover(bytes.NewReader(b), nil); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("link %+v: Recover: %v", l, err)
		}
	}
}

// TestFooterCRCBeforeSeal: the footer CRC a writer computes when it stops
// appending (for its successor's link) is the CRC of the footer written when
// the segment is sealed: by the same Writer, by one resumed after a crash, or
// computed from the blocks Recover finds.
func TestFooterCRCBeforeSeal(t *testing.T) {
	for _, c := range []Compression{CompressionNone, CompressionLZ4} {
		for _, n := range []int{0, 1, 40} {
			var buf bytes.Buffer
			w, err := NewWriter(&buf, testHeader(c), &WriterOptions{BlockSize: 500})
			if err != nil {
				t.Fatal(err)
			}
			recs := genRecords(uint64(n), n, true)
			appendAll(t, w, recs, 0)
			if n > 0 {
				if _, err := w.FooterCRC(); !errors.Is(err, ErrBuffered) {
					t.Fatalf("FooterCRC with buffered records: %v", err)
				}
			}
			if err := w.FlushBlock(); err != nil {
				t.Fatal(err)
			}
			before, err := w.FooterCRC()
			if err != nil {
				t.Fatal(err)
			}
			if before != FooterCRC(w.Blocks()) {
				t.Fatalf("Writer.FooterCRC %#x, FooterCRC(blocks) %#x", before, FooterCRC(w.Blocks()))
			}
			unsealed := bytes.Clone(buf.Bytes())

			f, err := w.Seal()
			if err != nil {
				t.Fatal(err)
			}
			_, r, err := readAll(buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			if f.CRC != before || r.Footer().CRC != before {
				t.Fatalf("%v, %d records: CRC before seal %#x, Seal's footer %#x, read back %#x", c, n, before, f.CRC, r.Footer().CRC)
			}

			// A crash after the rotation: recovery seals the unsealed
			// prefix with a resumed Writer.
			rc, err := Recover(bytes.NewReader(unsealed), nil)
			if err != nil {
				t.Fatal(err)
			}
			if FooterCRC(rc.Blocks) != before {
				t.Fatalf("FooterCRC of the recovered blocks %#x, want %#x", FooterCRC(rc.Blocks), before)
			}
			out := bytes.NewBuffer(bytes.Clone(unsealed))
			rw, err := ResumeWriter(out, rc.Header, rc.Blocks, rc.Progress, rc.ValidSize, nil)
			if err != nil {
				t.Fatal(err)
			}
			if rw.HeaderCRC() != w.HeaderCRC() {
				t.Fatalf("resumed HeaderCRC %#x, want %#x", rw.HeaderCRC(), w.HeaderCRC())
			}
			rf, err := rw.Seal()
			if err != nil {
				t.Fatal(err)
			}
			if _, r, err := readAll(out.Bytes()); err != nil || rf.CRC != before || r.Footer().CRC != before {
				t.Fatalf("resumed seal: footer CRC %#x, read back %#x (%v), want %#x", rf.CRC, r.Footer().CRC, err, before)
			}
		}
	}
}

// TestResumeWriterHeaderCRC: a header that is not the one on disk (its CRC
// field says otherwise) is refused, rather than linking a successor to a
// digest no reader will find.
func TestResumeWriterHeaderCRC(t *testing.T) {
	data := writeSegment(t, testHeader(CompressionNone), nil, genRecords(5, 5, true), false)
	rc, err := Recover(bytes.NewReader(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := rc.Header
	h.CRC ^= 1
	if _, err := ResumeWriter(io.Discard, h, rc.Blocks, rc.Progress, rc.ValidSize, nil); err == nil {
		t.Fatal("resumed with a header CRC that is not the header's")
	}
}

// TestNameCheck: a name must match the header (log, writer, epoch, seq) and,
// sealed, the footer's ts range; an empty sealed segment is named [0, 0].
func TestNameCheck(t *testing.T) {
	h := testHeader(CompressionNone)
	data := writeSegment(t, h, nil, genRecords(5, 5, true), true)
	_, r, err := readAll(data)
	if err != nil {
		t.Fatal(err)
	}
	f := r.Footer()
	n := h.SealedName(f.MinTs, f.MaxTs)
	if err := n.Check(n.Format(), r.Header(), &f); err != nil {
		t.Fatal(err)
	}
	if err := h.ActiveName().Check("a", r.Header(), nil); err != nil {
		t.Fatal(err)
	}
	for i, mut := range []func(*Name){
		func(n *Name) { n.LogID = "other" },
		func(n *Name) { n.WriterID = "other" },
		func(n *Name) { n.Epoch++ },
		func(n *Name) { n.Seq++ },
		func(n *Name) { n.MinTs-- },
		func(n *Name) { n.MaxTs++ },
	} {
		m := n
		mut(&m)
		if err := m.Check(m.Format(), r.Header(), &f); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), m.Format()) {
			t.Errorf("case %d: %v", i, err)
		}
	}
	empty := writeSegment(t, h, nil, nil, true)
	_, r, err = readAll(empty)
	if err != nil {
		t.Fatal(err)
	}
	f = r.Footer()
	if err := h.SealedName(0, 0).Check("e", r.Header(), &f); err != nil {
		t.Fatal(err)
	}
}

// TestReservedBytesWithGoodCRC: a frame whose CRC holds over non-zero
// reserved bytes was written that way, so it is corruption, never a torn
// tail that recovery would silently cut, even as the last frame.
func TestReservedBytesWithGoodCRC(t *testing.T) {
	data := writeSegment(t, testHeader(CompressionNone), &WriterOptions{BlockSize: 300}, genRecords(11, 30, true), false)
	rc, err := Recover(bytes.NewReader(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	last := rc.Blocks[len(rc.Blocks)-1]
	b := bytes.Clone(data)
	fr := b[last.Offset:last.End()]
	fr[bReserved+1] = 1
	le.PutUint32(fr[bCRC:], blockCRC(fr, fr[BlockHeaderSize:]))
	if _, err := Recover(bytes.NewReader(b), nil); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("block with reserved bytes under a good CRC: %v", err)
	}

	sealed := writeSegment(t, testHeader(CompressionNone), &WriterOptions{BlockSize: 300}, genRecords(11, 30, true), true)
	_, r, err := readAll(sealed)
	if err != nil {
		t.Fatal(err)
	}
	foff := r.Footer().Blocks[len(r.Footer().Blocks)-1].End()
	b = bytes.Clone(sealed)
	ft := b[foff : len(b)-TrailerSize]
	ft[fReserved] = 1
	le.PutUint32(ft[len(ft)-footerCRCSize:], crc(ft[:len(ft)-footerCRCSize]))
	if _, _, err := readAll(b); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("Reader: footer with reserved bytes under a good CRC: %v", err)
	}
	if _, err := Recover(bytes.NewReader(b), nil); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("Recover: footer with reserved bytes under a good CRC: %v", err)
	}
}

// TestLZ4BlockUnderPolicyNone: a segment whose policy is none holds raw
// blocks only; an lz4 block in it (CRCs intact) is corruption.
func TestLZ4BlockUnderPolicyNone(t *testing.T) {
	data := writeSegment(t, testHeader(CompressionLZ4), nil, genRecords(12, 200, false), true)
	b := bytes.Clone(data)
	b[hCompress] = byte(CompressionNone)
	le.PutUint32(b[hCRC:], crc(b[:hCRC]))
	if _, _, err := readAll(b); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "policy is none") {
		t.Fatalf("Reader: %v", err)
	}
	if _, _, err := scanAll(b, nil); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "policy is none") {
		t.Fatalf("Scanner: %v", err)
	}
}
