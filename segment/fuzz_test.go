package segment

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// seedSegments adds the golden files, small segments of each kind and a few
// damaged ones to a fuzz corpus.
func seedSegments(f *testing.F) {
	for _, name := range []string{"sealed.seg", "unsealed-torn.seg", "sealed-v3.seg", "unsealed-torn-v3.seg", "sealed-v2.seg"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	recs := genRecords(99, 12, true)
	for _, c := range []Compression{CompressionNone, CompressionLZ4} {
		sealed := writeSegment(f, testHeader(c), &WriterOptions{BlockSize: 128}, recs, true)
		f.Add(sealed)
		f.Add(writeSegment(f, testHeader(c), &WriterOptions{BlockSize: 128}, recs, false))
		f.Add(sealed[:len(sealed)-1])
		f.Add(writeSegment(f, testHeader(c), nil, nil, true))
	}
	for _, seal := range []bool{false, true} {
		data, _ := writeWithProgress(f, chainHeader(CompressionLZ4, recs[3].ts), &WriterOptions{BlockSize: 128}, recs,
			[]progressAt{{0, nil}, {4, spans(2, 1)}, {4, nil}, {12, spans(1, 2)}}, seal)
		f.Add(data)
	}
	// Version 4: header flags, and progress frames whose committed ts is
	// above their flushed ts.
	for _, seal := range []bool{false, true} {
		more := genRecords(98, 40, true)
		h := chainHeader(CompressionNone, more[3].ts)
		h.Flags = FlagStaged | FlagCatchUp
		f.Add(writeGolden(f, h, &WriterOptions{BlockSize: 256}, more, committedProgress(more), seal))
	}
	f.Add([]byte{})
	f.Add(headerMagic[:])
}

// progressVersions are the segment format versions whose progress frames
// this build reads: version 3 (no committed ts, spans at 24) and version 4
// (committed ts at 24, spans at 32).
var progressVersions = []uint16{3, 4}

// FuzzProgressFrame decodes arbitrary bytes as a progress frame of each
// layout (no panic; what decodes re-encodes to the same bytes, and is found
// valid by the torn-tail test), and encodes frames of both layouts built
// from them, which must decode back to what they hold.
func FuzzProgressFrame(f *testing.F) {
	for _, v := range progressVersions {
		f.Add(appendProgressFrame(nil, Progress{}, v))
		f.Add(appendProgressFrame(nil, Progress{FlushedTs: 5, CommittedTs: 5, ChainMaxTs: 9, Spans: spans(3, 4)}, v))
		f.Add(appendProgressFrame(nil, Progress{FlushedTs: 5, CommittedTs: 12, ChainMaxTs: 9, Spans: spans(1, 4)}, v))
	}
	// A version-4 frame whose committed ts is below its flushed ts.
	f.Add(appendProgressFrame(nil, Progress{FlushedTs: 7, CommittedTs: 6, Spans: spans(2, 4)}, 4))
	f.Add([]byte{3, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, v := range progressVersions {
			p, n, err := DecodeProgressFrame(b, v)
			if err != nil {
				if !IsCorrupt(err) {
					t.Fatalf("v%d: error that is not corruption: %v", v, err)
				}
				continue
			}
			if n != progressSize(len(p.Spans), v) || n > len(b) {
				t.Fatalf("v%d: length %d for %d spans in %d bytes", v, n, len(p.Spans), len(b))
			}
			if again := appendProgressFrame(nil, p, v); !bytes.Equal(again, b[:n]) {
				t.Fatalf("v%d: decoded %+v, which encodes differently", v, p)
			}
			switch {
			case v < 4 && p.CommittedTs != p.ChainMaxTs:
				t.Fatalf("v%d: committed ts %d, want the chain max ts %d", v, p.CommittedTs, p.ChainMaxTs)
			case v >= 4 && p.CommittedTs < p.FlushedTs:
				t.Fatalf("v%d: committed ts %d below the flushed ts %d decoded", v, p.CommittedTs, p.FlushedTs)
			}
			if !validProgressAt(b, v) || findValidFrame(append([]byte{0}, b...)) != 1 {
				t.Fatalf("v%d: a frame that decodes is not found valid", v)
			}
		}
		if _, _, err := DecodeProgressFrame(b, 2); err == nil || IsCorrupt(err) {
			t.Fatalf("a version-2 frame: %v, want an error that is not corruption", err)
		}

		// The bytes as a progress frame's content.
		var p Progress
		var lift uint64
		if len(b) >= 24 {
			p.FlushedTs, p.ChainMaxTs, lift = le.Uint64(b), le.Uint64(b[8:]), le.Uint64(b[16:])
			var prev uint64
			for i := 24; i+16 <= len(b); i += 16 {
				span := prev + 1 + le.Uint64(b[i:])%1000
				if span <= prev {
					break
				}
				p.Spans = append(p.Spans, SpanTs{Span: span, Ts: le.Uint64(b[i+8:])})
				prev = span
			}
		}
		// A committed ts at or above the flushed ts (saturating).
		p.CommittedTs = p.FlushedTs + lift
		if p.CommittedTs < p.FlushedTs {
			p.CommittedTs = 1<<64 - 1
		}
		for _, v := range progressVersions {
			enc := appendProgressFrame(nil, p, v)
			got, n, err := DecodeProgressFrame(enc, v)
			want := p.CommittedTs
			if v < 4 {
				want = max(p.ChainMaxTs, p.FlushedTs)
			}
			if err != nil || n != len(enc) || n != progressSize(len(p.Spans), v) || got.FlushedTs != p.FlushedTs || got.ChainMaxTs != p.ChainMaxTs ||
				got.CommittedTs != want || !slices.Equal(got.Spans, p.Spans) {
				t.Fatalf("v%d: %+v decoded as %+v, %d, %v", v, p, got, n, err)
			}
		}
		if bytes.Equal(AppendProgressFrame(nil, p), appendProgressFrame(nil, p, 3)) {
			t.Fatal("AppendProgressFrame writes the version-3 layout")
		}
		// Committed below flushed, under a good CRC: corruption at offset 0.
		if p.FlushedTs > 0 {
			low := p
			low.CommittedTs = p.FlushedTs - 1 - lift%p.FlushedTs
			_, _, err := DecodeProgressFrame(appendProgressFrame(nil, low, 4), 4)
			var ce *CorruptionError
			if !errors.As(err, &ce) || ce.Part != "progress" || ce.Offset != 0 {
				t.Fatalf("committed ts %d below the flushed ts %d: %v", low.CommittedTs, low.FlushedTs, err)
			}
		}
	})
}

// FuzzReadSegment: the ReaderAt path never panics, and whatever it accepts is
// consistent with its own footer.
func FuzzReadSegment(f *testing.F) {
	seedSegments(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRead(t, data)
		// Past the CRCs: the checks made on bytes a writer vouched for.
		checkRead(t, fixCRCs(data))
	})
}

func checkRead(t *testing.T, data []byte) {
	{
		got, r, err := readAll(data)
		if err != nil {
			if !detected(err) {
				t.Fatalf("error that is neither corruption nor version: %v", err)
			}
			return
		}
		ft := r.Footer()
		if uint64(len(got)) != ft.Records {
			t.Fatalf("read %d records, footer says %d", len(got), ft.Records)
		}
		var ddls uint64
		for i, x := range got {
			if i > 0 && x.ts < got[i-1].ts {
				t.Fatalf("record %d: commit ts %d after %d", i, x.ts, got[i-1].ts)
			}
			if x.kind == KindDDL {
				ddls++
			}
		}
		if ddls != ft.DDLs || (len(got) > 0 && (got[0].ts != ft.MinTs || got[len(got)-1].ts != ft.MaxTs)) {
			t.Fatalf("records disagree with footer %+v", ft)
		}
		// A stream over the same bytes must read the same records, unless
		// the index has gaps: the Reader does not read them, the Scanner
		// checks they hold progress frames.
		again, s, err := scanAll(data, &ScannerOptions{RequireSealed: true})
		if err != nil && !detected(err) {
			t.Fatalf("Scanner: error that is neither corruption nor version: %v", err)
		}
		if (err != nil || !s.Sealed()) && !indexHasGaps(ft.Blocks, len(data)) {
			t.Fatalf("Reader accepted what Scanner did not: %v", err)
		}
		if err == nil && !equalRecs(got, again) {
			t.Fatalf("Reader and Scanner read different records")
		}
	}
}

// indexHasGaps reports whether the index of a sealed segment of size bytes
// leaves bytes between the header and the footer that are not blocks.
func indexHasGaps(blocks []BlockInfo, size int) bool {
	end := int64(HeaderSize)
	for _, b := range blocks {
		if b.Offset != end {
			return true
		}
		end = b.End()
	}
	return end != int64(size)-TrailerSize-int64(footerSize(len(blocks)))
}

// FuzzScanSegment: the stream path never panics; when it reports a torn
// tail, the valid prefix alone scans cleanly to the same records.
func FuzzScanSegment(f *testing.F) {
	seedSegments(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkScan(t, data)
		checkScan(t, fixCRCs(data))
	})
}

func checkScan(t *testing.T, data []byte) {
	{
		got, s, err := scanAll(data, nil)
		if err != nil {
			if !detected(err) {
				t.Fatalf("error that is neither corruption nor version: %v", err)
			}
			return
		}
		if s.ValidSize() < 0 || s.ValidSize() > int64(len(data)) || s.ValidSize()+s.TornBytes() != int64(len(data)) {
			t.Fatalf("valid size %d + torn %d, stream %d bytes", s.ValidSize(), s.TornBytes(), len(data))
		}
		for i := 1; i < len(got); i++ {
			if got[i].ts < got[i-1].ts {
				t.Fatalf("record %d: commit ts %d after %d", i, got[i].ts, got[i-1].ts)
			}
		}
		if !s.Torn() {
			return
		}
		again, s2, err := scanAll(data[:s.ValidSize()], nil)
		if err != nil || s2.Torn() || s2.ValidSize() != s.ValidSize() || !equalRecs(got, again) {
			t.Fatalf("prefix of %d bytes: %v, torn %v, %d records vs %d", s.ValidSize(), err, s2.Torn(), len(again), len(got))
		}
		// A writer must be able to resume from what Recover reports.
		rc, err := Recover(bytes.NewReader(data), nil)
		if err != nil {
			t.Fatal(err)
		}
		if rc.HasHeader {
			if _, err := ResumeWriter(io.Discard, rc.Header, rc.Blocks, rc.Progress, rc.ValidSize, nil); err != nil {
				t.Fatalf("cannot resume after recovery: %v", err)
			}
		}
	}
}

// fixCRCs returns a copy of data with the CRC of every structure it can find
// recomputed, walking frames as a scanner would but trusting lengths as far as
// the data goes. Fuzzing through it reaches the checks behind the CRCs.
func fixCRCs(data []byte) []byte {
	b := bytes.Clone(data)
	if len(b) < HeaderSize {
		return b
	}
	le.PutUint32(b[hCRC:], crc(b[:hCRC]))
	version := le.Uint16(b[hVersion:])
	off := HeaderSize
	for off+BlockHeaderSize <= len(b) {
		switch b[off] {
		case frameBlock:
			end := off + BlockHeaderSize + int(le.Uint32(b[off+bStored:]))
			if end > len(b) || end < off {
				return b
			}
			le.PutUint32(b[off+bCRC:], blockCRC(b[off:], b[off+BlockHeaderSize:end]))
			off = end
		case frameProgress:
			if off+MinProgressSize > len(b) {
				return b
			}
			n := int(le.Uint32(b[off+pCount:]))
			if n > MaxProgressSpans {
				return b
			}
			end := off + progressSize(n, version)
			if end > len(b) {
				return b
			}
			le.PutUint32(b[end-progressCRCSize:], crc(b[off:end-progressCRCSize]))
			off = end
		case frameFooter:
			if off+FooterFixedSize > len(b) {
				return b
			}
			end := off + footerSize(int(le.Uint32(b[off+fBlocks:])))
			if end > len(b) || end < off {
				return b
			}
			le.PutUint32(b[end-footerCRCSize:], crc(b[off:end-footerCRCSize]))
			if end+TrailerSize <= len(b) {
				le.PutUint32(b[end+tCRC:], crc(b[end:end+tCRC]))
			}
			return b
		default:
			return b
		}
	}
	return b
}

// FuzzBlock decodes arbitrary bytes as a block frame (no panic; a block that
// decodes is self-consistent), then uses them as records and checks that both
// compressions round-trip them.
func FuzzBlock(f *testing.F) {
	data, r := openTestdata(f, "sealed.seg")
	for _, b := range r.Footer().Blocks {
		f.Add(data[b.Offset:b.End()])
	}
	f.Add([]byte("row 1 status=paid amount=3 row 2 status=paid amount=4"))
	f.Fuzz(func(t *testing.T, frame []byte) {
		var d blockDecoder
		if b, p := d.decode(frame, 0); p == nil {
			n, ddls := 0, 0
			prev := b.Info.MinTs
			for x, ok := b.Next(); ok; x, ok = b.Next() {
				if x.CommitTs < prev || x.CommitTs > b.Info.MaxTs || !x.Kind.valid() {
					t.Fatalf("record %d: %+v in block %+v", n, x, b.Info)
				}
				if x.Kind == KindDDL {
					ddls++
				}
				prev = x.CommitTs
				n++
			}
			if n != b.Info.Records || ddls != b.Info.DDLs || prev != b.Info.MaxTs {
				t.Fatalf("block %+v iterated %d records, %d DDLs, last ts %d", b.Info, n, ddls, prev)
			}
		} else if p.hard && !validBlockAt(frame) {
			t.Fatalf("hard problem %v in a frame whose CRC fails", p.detail)
		}

		// The same bytes as a record stream.
		var recs []rec
		ts := uint64(1) << 40
		for i := 0; i < len(frame); {
			ctl := frame[i]
			n := min(int(ctl>>2), len(frame)-i-1)
			ts += uint64(ctl & 1)
			kind := KindRow
			if ctl&2 != 0 {
				kind = KindDDL
			}
			recs = append(recs, rec{ts: ts, kind: kind, payload: frame[i+1 : i+1+n]})
			i += 1 + n
		}
		for _, c := range []Compression{CompressionNone, CompressionLZ4} {
			seg := writeSegment(t, testHeader(c), &WriterOptions{BlockSize: 64}, recs, true)
			got, _, err := readAll(seg)
			if err != nil {
				t.Fatal(err)
			}
			if !equalRecs(got, recs) {
				t.Fatalf("%v: records did not round-trip", c)
			}
		}
	})
}

// FuzzParseName: any string either parses into a valid name that formats
// back to exactly that string, or is an error wrapping ErrInvalidName.
func FuzzParseName(f *testing.F) {
	for _, n := range []Name{
		testHeader(CompressionLZ4).ActiveName(),
		testHeader(CompressionLZ4).SealedName(400000000000000747, 400000000000000794),
		{LogID: "-", WriterID: "...", Epoch: 1<<64 - 1, Seq: 1<<64 - 1, MinTs: 1<<64 - 1, MaxTs: 1<<64 - 1},
	} {
		f.Add(n.Format())
	}
	f.Add("log/seg/w/00000000000000000000-00000000000000000000-00000000000000000001-00000000000000000000.seg")
	f.Add("a/seg/b/99999999999999999999-00000000000000000000.active")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseName(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidName) {
				t.Fatalf("ParseName(%q): error %v does not wrap ErrInvalidName", s, err)
			}
			return
		}
		if err := n.Validate(); err != nil {
			t.Fatalf("ParseName(%q) = %+v, which does not validate: %v", s, n, err)
		}
		if got := n.Format(); got != s {
			t.Fatalf("ParseName(%q) formats back as %q", s, got)
		}
	})
}

// FuzzParseFrame: any bytes either parse as a frame that decodes as a block
// wherever the full decoder accepts them, or are a CorruptionError; never a
// panic. A frame ParseFrame accepts keeps exactly the bytes it was given.
func FuzzParseFrame(f *testing.F) {
	data, r := openTestdata(f, "sealed.seg")
	for _, b := range r.Footer().Blocks {
		f.Add(data[b.Offset:b.End()])
	}
	f.Add(make([]byte, BlockHeaderSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := ParseFrame("fuzz", 7, b)
		var d blockDecoder
		_, p := d.decode(b, 7)
		switch {
		case err != nil && !IsCorrupt(err):
			t.Fatalf("error %v is not a corruption error", err)
		case err != nil && p == nil:
			t.Fatalf("ParseFrame refused a frame the block decoder accepts: %v", err)
		case err == nil && !bytes.Equal(fr.Bytes(), b):
			t.Fatal("the frame does not hold the bytes it was parsed from")
		case err == nil && fr.Info().Records == 0:
			t.Fatalf("a frame of no record: %+v", fr.Info())
		}
	})
}
