package segment

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
)

// progressAt is a progress frame the tests write before the record of index
// before (several at one index follow one another; before = len(recs): after
// the last record).
type progressAt struct {
	before int
	spans  []SpanTs
}

// writeWithProgress writes recs with progress frames, returning the bytes
// and the Writer. A progress frame's flushed ts is the ts of the record
// before it (0 before the first).
func writeWithProgress(t testing.TB, hdr Header, opts *WriterOptions, recs []rec, progress []progressAt, seal bool) ([]byte, *Writer) {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, hdr, opts)
	if err != nil {
		t.Fatal(err)
	}
	emit := func(i int) {
		for _, p := range progress {
			if p.before != i {
				continue
			}
			var flushed uint64
			if i > 0 {
				flushed = recs[i-1].ts
			}
			info, err := w.AppendProgress(flushed, p.spans)
			if err != nil {
				t.Fatalf("progress before record %d: %v", i, err)
			}
			if info.Offset+int64(info.Length) != w.Offset() || info.Blocks != len(w.Blocks()) {
				t.Fatalf("progress before record %d: %+v, writer at %d with %d blocks", i, info, w.Offset(), len(w.Blocks()))
			}
		}
	}
	for i, r := range recs {
		emit(i)
		if err := w.Append(r.ts, r.kind, r.payload); err != nil {
			t.Fatal(err)
		}
	}
	emit(len(recs))
	if seal {
		if _, err := w.Seal(); err != nil {
			t.Fatal(err)
		}
	} else if err := w.FlushBlock(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), w
}

func spans(n int, ts uint64) []SpanTs {
	s := make([]SpanTs, n)
	for i := range s {
		s[i] = SpanTs{Span: uint64(10 * (i + 1)), Ts: ts + uint64(i)}
	}
	return s
}

// chainHeader is a test header in the middle of its chain, with a prev chain
// max ts above its first records (a catch-up segment), so that a progress
// frame's chain max ts differs from its blocks' max for a while.
func chainHeader(c Compression, prevMax uint64) Header {
	h := testHeader(c)
	h.Link = Link{PrevSeq: h.Seq - 1, PrevMaxTs: prevMax, PrevHeaderCRC: 1, PrevFooterCRC: 2}
	return h
}

var testProgress = []progressAt{
	{0, nil},
	{0, spans(1, 5)},
	{7, spans(3, 100)},
	{20, spans(2, 200)},
	{20, nil},
	{33, spans(5, 300)},
}

func requireProgress(t testing.TB, what string, got, want []ProgressInfo) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d progress frames, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Offset != w.Offset || g.Length != w.Length || g.Blocks != w.Blocks || g.FlushedTs != w.FlushedTs ||
			g.ChainMaxTs != w.ChainMaxTs || !slices.Equal(g.Spans, w.Spans) {
			t.Fatalf("%s: progress frame %d is %+v, want %+v", what, i, g, w)
		}
	}
}

// TestProgressRoundTrip: progress frames after the header, between blocks,
// in a row and before the footer read back through the Scanner and Recover
// as the Writer wrote them, the footer index has gaps where they are, and
// both read paths return the records.
func TestProgressRoundTrip(t *testing.T) {
	recs := genRecords(31, 40, true)
	prevMax := recs[10].ts // above the first blocks' max: a catch-up segment
	for _, c := range []Compression{CompressionNone, CompressionLZ4} {
		data, w := writeWithProgress(t, chainHeader(c, prevMax), &WriterOptions{BlockSize: 512}, recs, append(testProgress, progressAt{40, spans(2, 900)}), true)
		written := w.Progress()
		if len(written) != len(testProgress)+1 {
			t.Fatalf("%v: writer has %d progress frames", c, len(written))
		}
		got, r, err := readAll(data)
		if err != nil {
			t.Fatal(err)
		}
		requireRecs(t, c.String(), got, recs)
		if r.Header().Version != FormatVersion {
			t.Fatalf("version %d", r.Header().Version)
		}
		got, s, err := scanAll(data, &ScannerOptions{RequireSealed: true})
		if err != nil {
			t.Fatal(err)
		}
		requireRecs(t, c.String()+" scanned", got, recs)
		requireProgress(t, c.String()+" scanned", s.Progress(), written)
		rc, err := Recover(bytes.NewReader(data), nil)
		if err != nil || !rc.Sealed {
			t.Fatalf("recover: %v", err)
		}
		requireProgress(t, c.String()+" recovered", rc.Progress, written)

		// The index's gaps are exactly the progress frames.
		blocks := r.Footer().Blocks
		pos, pi := int64(HeaderSize), 0
		for i, b := range blocks {
			for pi < len(written) && written[pi].Blocks == i {
				if written[pi].Offset != pos {
					t.Fatalf("progress frame %d at %d, want %d", pi, written[pi].Offset, pos)
				}
				pos = written[pi].End()
				pi++
			}
			if b.Offset != pos {
				t.Fatalf("block %d at %d, want %d", i, b.Offset, pos)
			}
			pos = b.End()
		}
		for ; pi < len(written); pi++ {
			pos = written[pi].End()
		}
		if ft := s.ValidSize() - TrailerSize - int64(footerSize(len(blocks))); pos != ft {
			t.Fatalf("frames end at %d, footer at %d", pos, ft)
		}

		// Chain max ts: the link's until the blocks pass it.
		for _, p := range written {
			want := max(prevMax, func() uint64 {
				if p.Blocks == 0 {
					return 0
				}
				return blocks[p.Blocks-1].MaxTs
			}())
			if p.ChainMaxTs != want {
				t.Fatalf("progress frame at %d after %d blocks: chain max ts %d, want %d", p.Offset, p.Blocks, p.ChainMaxTs, want)
			}
		}
	}
}

// TestProgressSealedRanges: the ranged Reader of a segment with gaps reads
// blocks by index and never reads a progress frame.
func TestProgressSealedRanges(t *testing.T) {
	recs := genRecords(32, 1000, false)
	var progress []progressAt
	for i := 0; i < len(recs); i += 17 {
		progress = append(progress, progressAt{i, spans(i%7, recs[i].ts)})
	}
	data, w := writeWithProgress(t, testHeader(CompressionLZ4), &WriterOptions{BlockSize: 4 << 10}, recs, progress, true)
	if len(data) <= tailRead {
		t.Fatalf("segment of %d bytes: want one larger than the tail read", len(data))
	}
	ra := &rangeRecorder{r: bytes.NewReader(data)}
	r, err := NewReader(ra, int64(len(data)), nil)
	if err != nil {
		t.Fatal(err)
	}
	ra.ranges = nil
	var got []rec
	for i := range r.Footer().Blocks {
		b, err := r.ReadBlock(i)
		if err != nil {
			t.Fatal(err)
		}
		for x, ok := b.Next(); ok; x, ok = b.Next() {
			got = append(got, own(x))
		}
	}
	requireRecs(t, "by blocks", got, recs)
	for _, rg := range ra.ranges {
		for _, p := range w.Progress() {
			if rg[0] < p.End() && p.Offset < rg[1] {
				t.Fatalf("read [%d, %d) overlaps the progress frame at %d", rg[0], rg[1], p.Offset)
			}
		}
	}
	// Seeking works across gaps.
	mid := recs[len(recs)/2].ts
	r.SeekTs(mid)
	after := mustCollect(t, r)
	var want []rec
	for _, x := range recs {
		if x.ts > mid {
			want = append(want, x)
		}
	}
	requireRecs(t, "after seek", after, want)
}

type rangeRecorder struct {
	r      io.ReaderAt
	ranges [][2]int64
}

func (r *rangeRecorder) ReadAt(b []byte, off int64) (int, error) {
	r.ranges = append(r.ranges, [2]int64{off, off + int64(len(b))})
	return r.r.ReadAt(b, off)
}

// TestProgressTornTail: an active segment cut anywhere inside its last
// progress frame is torn at the frame's offset, and Recover reports the
// frames before it only; cut right after it, it is whole. A segment that
// ends with a progress frame without spans (the smallest frame) is clean.
func TestProgressTornTail(t *testing.T) {
	recs := genRecords(33, 20, true)
	for _, last := range [][]SpanTs{nil, spans(4, 77)} {
		data, w := writeWithProgress(t, testHeader(CompressionNone), &WriterOptions{BlockSize: 300}, recs,
			[]progressAt{{5, spans(2, 1)}, {20, last}}, false)
		ps := w.Progress()
		lastP := ps[len(ps)-1]
		if lastP.End() != int64(len(data)) {
			t.Fatalf("last progress frame ends at %d of %d", lastP.End(), len(data))
		}
		rc, err := Recover(bytes.NewReader(data), nil)
		if err != nil || rc.Torn() || rc.ValidSize != int64(len(data)) {
			t.Fatalf("whole: %v %+v", err, rc)
		}
		requireProgress(t, "whole", rc.Progress, ps)
		for n := lastP.Offset + 1; n < lastP.End(); n++ {
			rc, err := Recover(bytes.NewReader(data[:n]), nil)
			if err != nil {
				t.Fatalf("cut at %d: %v", n, err)
			}
			if !rc.Torn() || rc.ValidSize != lastP.Offset || rc.TornBytes != n-lastP.Offset || len(rc.Blocks) != len(w.Blocks()) {
				t.Fatalf("cut at %d: torn %v, valid %d, torn bytes %d, %d blocks", n, rc.Torn(), rc.ValidSize, rc.TornBytes, len(rc.Blocks))
			}
			requireProgress(t, "cut", rc.Progress, ps[:len(ps)-1])
			_, _, err = scanAll(data[:n], &ScannerOptions{RequireSealed: true, Object: "x.seg"})
			if ce := requireCorrupt(t, "cut, requiring a seal", err); ce.Part != "progress" || ce.Offset != lastP.Offset || ce.Object != "x.seg" {
				t.Fatalf("cut at %d, requiring a seal: %v", n, err)
			}
		}
		// A CRC failure in the last frame is a torn tail too.
		bad := bytes.Clone(data)
		bad[lastP.Offset+pFlushedTs] ^= 1
		if rc, err := Recover(bytes.NewReader(bad), nil); err != nil || rc.ValidSize != lastP.Offset {
			t.Fatalf("bad CRC in the last frame: %v %+v", err, rc)
		}
		// A span count over the limit is checked before the CRC: torn.
		bad = bytes.Clone(data)
		le.PutUint32(bad[lastP.Offset+pCount:], MaxProgressSpans+1)
		if rc, err := Recover(bytes.NewReader(bad), nil); err != nil || rc.ValidSize != lastP.Offset {
			t.Fatalf("span count over the limit in the last frame: %v %+v", err, rc)
		}
	}
}

// spliceProgress inserts a progress frame at off.
func splice(data []byte, off int64, frame []byte) []byte {
	out := append(bytes.Clone(data[:off]), frame...)
	return append(out, data[off:]...)
}

// TestProgressCorruption: what breaks the rules under a good CRC is
// corruption naming the progress frame and its offset; damage followed by a
// valid progress frame is not a torn tail.
func TestProgressCorruption(t *testing.T) {
	recs := genRecords(34, 20, true)
	data, w := writeWithProgress(t, testHeader(CompressionNone), &WriterOptions{BlockSize: 300}, recs,
		[]progressAt{{5, spans(2, 1)}, {20, spans(3, 9)}}, false)
	p0 := w.Progress()[0]
	prog := func(mod func(b []byte)) []byte {
		b := bytes.Clone(data)
		mod(b[p0.Offset:p0.End()])
		le.PutUint32(b[p0.End()-progressCRCSize:], crc(b[p0.Offset:p0.End()-progressCRCSize]))
		return b
	}
	cases := map[string][]byte{
		"chain max ts": prog(func(b []byte) { le.PutUint64(b[pChainMaxTs:], p0.ChainMaxTs+1) }),
		"reserved":     prog(func(b []byte) { b[pReserved+2] = 1 }),
		"unsorted":     prog(func(b []byte) { le.PutUint64(b[pSpansV4+progressSpanSize:], p0.Spans[0].Span) }),
	}
	for name, bad := range cases {
		_, _, err := scanAll(bad, &ScannerOptions{Object: "w/seg/x.active"})
		ce := requireCorrupt(t, name, err)
		if ce.Part != "progress" || ce.Offset != p0.Offset || ce.Object != "w/seg/x.active" {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// A bad CRC with a valid frame after it is corruption, not a torn tail.
	bad := bytes.Clone(data)
	bad[p0.Offset+pFlushedTs] ^= 1
	if _, _, err := scanAll(bad, nil); !IsCorrupt(err) || !strings.Contains(err.Error(), "follows") {
		t.Fatalf("damaged progress frame before valid frames: %v", err)
	}
	// Damage in the last block followed by a valid progress frame.
	lb := w.Blocks()[len(w.Blocks())-1]
	bad = bytes.Clone(data)
	bad[lb.Offset+BlockHeaderSize] ^= 1
	if _, _, err := scanAll(bad, nil); !IsCorrupt(err) || !strings.Contains(err.Error(), "valid progress frame follows") {
		t.Fatalf("damaged block before a valid progress frame: %v", err)
	}

	// Progress frames after the footer, in a sealed segment.
	sealed, sw := writeWithProgress(t, testHeader(CompressionNone), &WriterOptions{BlockSize: 300}, recs, []progressAt{{5, nil}}, true)
	frame := AppendProgressFrame(nil, Progress{FlushedTs: 1, ChainMaxTs: sw.Blocks()[len(sw.Blocks())-1].MaxTs})
	footerAt := int64(len(sealed)) - TrailerSize - int64(footerSize(len(sw.Blocks())))
	for name, bad := range map[string][]byte{
		"between footer and trailer": splice(sealed, int64(len(sealed))-TrailerSize, frame),
		"after the trailer":          append(bytes.Clone(sealed), frame...),
	} {
		_, _, err := scanAll(bad, nil)
		requireCorrupt(t, name, err)
		if _, _, err := readAll(bad); !IsCorrupt(err) {
			t.Fatalf("%s: Reader: %v", name, err)
		}
	}
	// A progress frame spliced before the footer is not in the index: the
	// footer's CRC holds, but its index does not end... anywhere it says.
	_, _, err := scanAll(splice(sealed, footerAt, frame), nil)
	requireCorrupt(t, "spliced before the footer", err)

	// Type 3 in a version-2 segment (in the layout of the version after
	// it, as a writer confusing the two would write it).
	v2, r := openTestdata(t, "sealed-v2.seg")
	b1 := r.Footer().Blocks[1]
	in2 := splice(v2[:r.Footer().Blocks[2].Offset], b1.End(), appendProgressFrame(nil, Progress{ChainMaxTs: max(r.Header().Link.PrevMaxTs, b1.MaxTs)}, 3))
	_, _, err = scanAll(in2, &ScannerOptions{Object: "v2"})
	if ce := requireCorrupt(t, "progress in v2", err); ce.Part != "progress" || ce.Offset != b1.End() || !strings.Contains(ce.Detail, "version-2") {
		t.Fatalf("progress in v2: %v", err)
	}
}

// TestProgressVersionMismatch: header and trailer versions must agree.
func TestProgressVersionMismatch(t *testing.T) {
	data := writeSegment(t, testHeader(CompressionNone), nil, genRecords(35, 10, true), true)
	bad := bytes.Clone(data)
	at := len(bad) - TrailerSize
	le.PutUint16(bad[at+tVersion:], 2)
	le.PutUint32(bad[at+tCRC:], crc(bad[at:at+tCRC]))
	if _, _, err := readAll(bad); !IsCorrupt(err) || !strings.Contains(err.Error(), fmt.Sprintf("version %d, but the trailer's is 2", FormatVersion)) {
		t.Fatalf("Reader: %v", err)
	}
	_, _, err := scanAll(bad, nil)
	if ce := requireCorrupt(t, "Scanner", err); ce.Part != "trailer" {
		t.Fatalf("Scanner: %v", err)
	}
}

// TestResumeAfterProgress: a segment recovered after a crash that tore a
// progress frame resumes after the last whole frame (a progress frame),
// writes more blocks and progress, and seals with an index that has gaps.
func TestResumeAfterProgress(t *testing.T) {
	recs := genRecords(36, 40, true)
	for _, c := range []Compression{CompressionNone, CompressionLZ4} {
		hdr := chainHeader(c, recs[3].ts)
		opts := &WriterOptions{BlockSize: 400}
		data, w := writeWithProgress(t, hdr, opts, recs[:20], []progressAt{{0, nil}, {10, spans(2, 5)}, {20, spans(1, 6)}, {20, spans(3, 7)}}, false)
		ps := w.Progress()
		cut := data[:ps[len(ps)-1].Offset+5] // torn inside the last progress frame
		rc, err := Recover(bytes.NewReader(cut), nil)
		if err != nil || rc.ValidSize != ps[len(ps)-2].End() {
			t.Fatalf("recover: %v %+v", err, rc)
		}
		buf := bytes.NewBuffer(bytes.Clone(cut[:rc.ValidSize]))
		rw, err := ResumeWriter(buf, rc.Header, rc.Blocks, rc.Progress, rc.ValidSize, opts)
		if err != nil {
			t.Fatal(err)
		}
		requireProgress(t, "resumed", rw.Progress(), ps[:len(ps)-1])
		appendAll(t, rw, recs[20:30], 20)
		if _, err := rw.AppendProgress(recs[29].ts, spans(4, 8)); err != nil {
			t.Fatal(err)
		}
		appendAll(t, rw, recs[30:], 30)
		f, err := rw.Seal()
		if err != nil {
			t.Fatal(err)
		}
		if FooterCRC(f.Blocks) != f.CRC {
			t.Fatal("footer CRC")
		}
		sealed := buf.Bytes()
		got, r, err := readAll(sealed)
		if err != nil {
			t.Fatal(err)
		}
		requireRecs(t, "resumed", got, recs)
		gaps := 0
		for i, b := range r.Footer().Blocks {
			if (i == 0 && b.Offset > HeaderSize) || (i > 0 && b.Offset > r.Footer().Blocks[i-1].End()) {
				gaps++
			}
		}
		if gaps < 2 {
			t.Fatalf("index has %d gaps", gaps)
		}
		_, s, err := scanAll(sealed, &ScannerOptions{RequireSealed: true})
		if err != nil {
			t.Fatal(err)
		}
		requireProgress(t, "resumed and sealed", s.Progress(), rw.Progress())
	}
}

// TestResumeRejectsBadProgress: ResumeWriter checks the progress frames it
// is given against the blocks and the end offset.
func TestResumeRejectsBadProgress(t *testing.T) {
	recs := genRecords(37, 20, true)
	data, _ := writeWithProgress(t, testHeader(CompressionNone), &WriterOptions{BlockSize: 300}, recs, []progressAt{{5, spans(2, 1)}, {12, nil}}, false)
	rc, err := Recover(bytes.NewReader(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ResumeWriter(io.Discard, rc.Header, rc.Blocks, rc.Progress, rc.ValidSize, nil); err != nil {
		t.Fatal(err)
	}
	mod := func(f func(p []ProgressInfo)) []ProgressInfo {
		p := slices.Clone(rc.Progress)
		f(p)
		return p
	}
	for name, p := range map[string][]ProgressInfo{
		"missing":     rc.Progress[:1],
		"chain max":   mod(func(p []ProgressInfo) { p[0].ChainMaxTs++ }),
		"blocks":      mod(func(p []ProgressInfo) { p[1].Blocks-- }),
		"length":      mod(func(p []ProgressInfo) { p[0].Length += 16 }),
		"offset":      mod(func(p []ProgressInfo) { p[1].Offset++ }),
		"unsorted":    mod(func(p []ProgressInfo) { p[0].Spans = []SpanTs{{2, 1}, {1, 1}} }),
		"out of turn": {rc.Progress[1], rc.Progress[0]},
	} {
		if _, err := ResumeWriter(io.Discard, rc.Header, rc.Blocks, p, rc.ValidSize, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := ResumeWriter(io.Discard, rc.Header, rc.Blocks, rc.Progress, rc.ValidSize-1, nil); err == nil {
		t.Error("end before the last frame: accepted")
	}
}

// TestResumeV2: an active segment an older build started (version 2) is
// continued and sealed as version 2, without progress frames.
func TestResumeV2(t *testing.T) {
	v2, r := openTestdata(t, "sealed-v2.seg")
	end := r.Footer().Blocks[2].End()
	rc, err := Recover(bytes.NewReader(v2[:end]), nil)
	if err != nil || rc.Header.Version != 2 {
		t.Fatalf("recover: %v", err)
	}
	buf := bytes.NewBuffer(bytes.Clone(v2[:end]))
	w, err := ResumeWriter(buf, rc.Header, rc.Blocks, nil, rc.ValidSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.AppendProgress(1, nil); err == nil {
		t.Fatal("progress frame in a version-2 segment accepted")
	}
	if _, err := ResumeWriter(io.Discard, rc.Header, rc.Blocks, []ProgressInfo{{Offset: end, Length: MinProgressSize, Blocks: 3}}, end+MinProgressSize, nil); err == nil {
		t.Fatal("resumed a version-2 segment with progress frames")
	}
	if _, err := w.Seal(); err != nil {
		t.Fatal(err)
	}
	got, r2, err := readAll(buf.Bytes())
	if err != nil || r2.Header().Version != 2 {
		t.Fatalf("read back: %v", err)
	}
	var n int
	for _, b := range rc.Blocks {
		n += b.Records
	}
	requireRecs(t, "v2 resumed", got, goldenRecords()[:n])
}

// TestAppendProgressErrors: bad spans are refused without writing or
// breaking the Writer; nothing is appended after Seal.
func TestAppendProgressErrors(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testHeader(CompressionNone), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(5, KindRow, []byte("x")); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]SpanTs{{{2, 1}, {1, 1}}, {{1, 1}, {1, 2}}, make([]SpanTs, MaxProgressSpans+1)} {
		if len(bad) > 2 {
			for i := range bad {
				bad[i].Span = uint64(i)
			}
		}
		if _, err := w.AppendProgress(5, bad); err == nil {
			t.Fatalf("spans %d accepted", len(bad))
		}
	}
	if buf.Len() != HeaderSize || w.Stats().Buffered == 0 {
		t.Fatalf("a refused progress frame wrote %d bytes", buf.Len()-HeaderSize)
	}
	p, err := w.AppendProgress(5, []SpanTs{{1, 5}})
	if err != nil || p.Blocks != 1 || p.ChainMaxTs != 5 {
		t.Fatalf("%+v %v", p, err)
	}
	if _, err := w.Seal(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.AppendProgress(6, nil); !errors.Is(err, ErrSealed) {
		t.Fatalf("after Seal: %v", err)
	}
}

// TestProgressFrameCodec: the encoder and decoder agree, in both layouts,
// and the decoder refuses what it must.
func TestProgressFrameCodec(t *testing.T) {
	p := Progress{FlushedTs: 7, CommittedTs: 8, ChainMaxTs: 9, Spans: spans(3, 1)}
	for _, v := range []uint16{3, 4} {
		b := appendProgressFrame([]byte("prefix"), p, v)
		got, n, err := DecodeProgressFrame(append(b[6:], 0xff), v)
		want := p.CommittedTs
		if v == 3 {
			want = p.ChainMaxTs // a version-3 frame has none
		}
		if err != nil || n != progressSize(3, v) || got.FlushedTs != 7 || got.ChainMaxTs != 9 || got.CommittedTs != want || !slices.Equal(got.Spans, p.Spans) {
			t.Fatalf("v%d: %+v %d %v", v, got, n, err)
		}
		if _, _, err := DecodeProgressFrame(b[6:len(b)-1], v); !IsCorrupt(err) {
			t.Fatalf("v%d: short: %v", v, err)
		}
		bad := appendProgressFrame(nil, Progress{Spans: []SpanTs{{2, 0}, {2, 0}}}, v)
		var ce *CorruptionError
		if _, _, err := DecodeProgressFrame(bad, v); !errors.As(err, &ce) || ce.Part != "progress" {
			t.Fatalf("v%d: unsorted: %v", v, err)
		}
	}
	if b := AppendProgressFrame(nil, p); !bytes.Equal(b, appendProgressFrame(nil, p, FormatVersion)) || len(b) != 36+16*3 {
		t.Fatalf("AppendProgressFrame wrote %d bytes, not the version-%d layout", len(b), FormatVersion)
	}
	// Versions without progress frames of this build's layouts.
	for _, v := range []uint16{1, 2, FormatVersion + 1} {
		if _, _, err := DecodeProgressFrame(AppendProgressFrame(nil, p), v); err == nil || IsCorrupt(err) {
			t.Fatalf("version %d: %v, want an error that is not corruption", v, err)
		}
	}
}

// TestProgressBefore: reading what lies before every block and before the
// footer returns exactly the progress frames the Writer wrote, and every
// single-bit flip inside one of them is a *CorruptionError at or before the
// flipped byte, from ProgressBefore alone: ReadBlock passes progress frames
// by, so a verifier that read only blocks would accept the damage.
func TestProgressBefore(t *testing.T) {
	recs := genRecords(33, 400, false)
	data, w := writeWithProgress(t, chainHeader(CompressionNone, recs[10].ts), &WriterOptions{BlockSize: 2 << 10}, recs, testProgress, true)
	all := func(data []byte) ([]ProgressInfo, error) {
		r, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
		if err != nil {
			return nil, err
		}
		var got []ProgressInfo
		for i := 0; i <= len(r.Footer().Blocks); i++ {
			p, err := r.ProgressBefore(i)
			if err != nil {
				return got, err
			}
			got = append(got, p...)
			if i < len(r.Footer().Blocks) {
				if _, err := r.ReadBlock(i); err != nil {
					t.Fatalf("block %d beside a progress frame: %v", i, err)
				}
			}
		}
		return got, nil
	}
	got, err := all(data)
	if err != nil {
		t.Fatal(err)
	}
	requireProgress(t, "ProgressBefore", got, w.Progress())

	flips := 0
	for _, p := range w.Progress() {
		for off := p.Offset; off < p.End(); off++ {
			for bit := range 8 {
				bad := slices.Clone(data)
				bad[off] ^= 1 << bit
				_, err := all(bad)
				var ce *CorruptionError
				if !errors.As(err, &ce) {
					t.Fatalf("flip of bit %d at %d (progress frame at %d): error %v, want a CorruptionError", bit, off, p.Offset, err)
				}
				if ce.Offset > off {
					t.Fatalf("flip of bit %d at %d: the error names offset %d, past it", bit, off, ce.Offset)
				}
				flips++
			}
		}
	}
	if flips == 0 {
		t.Fatal("no progress frame to flip")
	}

	r, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ProgressBefore(len(r.Footer().Blocks) + 1); err == nil {
		t.Fatal("ProgressBefore past the footer: no error")
	}
}
