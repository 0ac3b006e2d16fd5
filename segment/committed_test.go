package segment

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Format version 4 (docs/FORMAT.md): the progress frame's committed ts and
// the header's flags byte.

// committedProgress: frames of a version-4 segment whose committed ts is
// the flushed ts, above it (a span added behind the writer), and the
// largest ts there is; after the header, between blocks, in a row and
// before the footer.
func committedProgress(recs []rec) []goldenProgress {
	return []goldenProgress{
		{0, 0, 0, nil},
		{7, recs[6].ts, 0, spans(2, recs[6].ts)},
		{20, recs[5].ts, recs[19].ts, spans(3, recs[5].ts)},
		{20, recs[19].ts - 1, recs[19].ts, nil},
		{33, recs[32].ts, recs[32].ts + 1000, spans(1, recs[32].ts)},
		{len(recs), recs[len(recs)-1].ts, 1<<64 - 1, spans(4, recs[len(recs)-1].ts)},
	}
}

// TestProgressCommittedRoundTrip: the committed ts a Writer is given is in
// its ProgressInfo, at offset 24 of the frame (the spans at 32), and reads
// back through the Scanner, Recover and the ranged Reader's ProgressBefore,
// sealed or not; AppendProgress writes a committed ts equal to the flushed
// ts.
func TestProgressCommittedRoundTrip(t *testing.T) {
	recs := genRecords(41, 40, true)
	progress := committedProgress(recs)
	for _, c := range []Compression{CompressionNone, CompressionLZ4} {
		for _, seal := range []bool{false, true} {
			name := fmt.Sprintf("%v sealed %v", c, seal)
			var buf bytes.Buffer
			w, err := NewWriter(&buf, chainHeader(c, recs[10].ts), &WriterOptions{BlockSize: 512})
			if err != nil {
				t.Fatal(err)
			}
			emit := func(i int) {
				for _, p := range progress {
					if p.before != i {
						continue
					}
					var info ProgressInfo
					var err error
					if p.committedTs == 0 {
						info, err = w.AppendProgress(p.flushedTs, p.spans)
					} else {
						info, err = w.AppendProgressCommitted(p.flushedTs, p.committedTs, p.spans)
					}
					if err != nil {
						t.Fatalf("%s: progress before record %d: %v", name, i, err)
					}
					if info.CommittedTs != p.committed() || info.FlushedTs != p.flushedTs || info.Length != 36+16*len(p.spans) {
						t.Fatalf("%s: progress before record %d: %+v, want committed ts %d", name, i, info, p.committed())
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
			data := buf.Bytes()
			written := w.Progress()

			// The bytes, as FORMAT.md lays them out.
			for i, p := range written {
				f := data[p.Offset:p.End()]
				if f[0] != frameProgress || int(le.Uint32(f[4:])) != len(p.Spans) || le.Uint64(f[8:]) != p.FlushedTs ||
					le.Uint64(f[16:]) != p.ChainMaxTs || le.Uint64(f[24:]) != progress[i].committed() ||
					le.Uint32(f[len(f)-4:]) != crc(f[:len(f)-4]) {
					t.Fatalf("%s: frame %d at %d: % x", name, i, p.Offset, f)
				}
				for j, sp := range p.Spans {
					if le.Uint64(f[32+16*j:]) != sp.Span || le.Uint64(f[40+16*j:]) != sp.Ts {
						t.Fatalf("%s: frame %d: span %d not at offset %d", name, i, j, 32+16*j)
					}
				}
			}

			got, s, err := scanAll(data, &ScannerOptions{RequireSealed: seal})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			requireRecs(t, name, got, recs)
			requireGoldenProgress(t, name+" scanned", FormatVersion, s.Progress(), progress)
			requireCommitted(t, name+" scanned", s.Progress(), written)
			rc, err := Recover(bytes.NewReader(data), nil)
			if err != nil || rc.Torn() {
				t.Fatalf("%s: recover: %v", name, err)
			}
			requireCommitted(t, name+" recovered", rc.Progress, written)
			if !seal {
				// A resumed segment goes on with what Recover reported.
				rw, err := ResumeWriter(io.Discard, rc.Header, rc.Blocks, rc.Progress, rc.ValidSize, nil)
				if err != nil {
					t.Fatalf("%s: resume: %v", name, err)
				}
				requireCommitted(t, name+" resumed", rw.Progress(), written)
				continue
			}
			r, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
			if err != nil {
				t.Fatal(err)
			}
			var before []ProgressInfo
			for i := 0; i <= len(r.Footer().Blocks); i++ {
				ps, err := r.ProgressBefore(i)
				if err != nil {
					t.Fatalf("%s: ProgressBefore(%d): %v", name, i, err)
				}
				before = append(before, ps...)
			}
			requireCommitted(t, name+" ProgressBefore", before, written)
			got, _, err = readAll(data)
			if err != nil {
				t.Fatal(err)
			}
			requireRecs(t, name+" by ranges", got, recs)
		}
	}
}

// requireCommitted is requireProgress, comparing the committed ts too.
func requireCommitted(t testing.TB, what string, got, want []ProgressInfo) {
	t.Helper()
	requireProgress(t, what, got, want)
	for i := range got {
		if got[i].CommittedTs != want[i].CommittedTs {
			t.Fatalf("%s: progress frame %d: committed ts %d, want %d", what, i, got[i].CommittedTs, want[i].CommittedTs)
		}
	}
}

// TestProgressCommittedBelowFlushed: a version-4 frame whose committed ts
// is below its flushed ts, under a CRC that holds, was written that way:
// corruption naming the frame's offset, wherever it is (the last frame of
// an active segment included: never a torn tail), on every read path that
// reads progress frames.
func TestProgressCommittedBelowFlushed(t *testing.T) {
	recs := genRecords(42, 30, true)
	progress := []goldenProgress{{5, recs[4].ts, 0, spans(2, 1)}, {12, recs[11].ts, recs[20].ts, nil}, {30, recs[29].ts, 0, spans(1, 3)}}
	lower := func(data []byte, p ProgressInfo) []byte {
		b := bytes.Clone(data)
		le.PutUint64(b[p.Offset+pCommittedTs:], p.FlushedTs-1)
		le.PutUint32(b[p.End()-progressCRCSize:], crc(b[p.Offset:p.End()-progressCRCSize]))
		return b
	}
	want := func(what string, err error, p ProgressInfo) {
		t.Helper()
		ce := requireCorrupt(t, what, err)
		if ce.Part != "progress" || ce.Offset != p.Offset || ce.Object != "L/seg/w/x.seg" ||
			!strings.Contains(err.Error(), fmt.Sprintf("at offset %d", p.Offset)) || !strings.Contains(ce.Detail, "committed ts") {
			t.Fatalf("%s: %v; want corruption of the progress frame at offset %d naming the committed ts", what, err, p.Offset)
		}
	}
	opts := &ScannerOptions{Object: "L/seg/w/x.seg"}
	for _, seal := range []bool{false, true} {
		data := writeGolden(t, testHeader(CompressionNone), &WriterOptions{BlockSize: 300}, recs, progress, seal)
		rc, err := Recover(bytes.NewReader(data), nil)
		if err != nil || len(rc.Progress) != len(progress) {
			t.Fatalf("intact: %v", err)
		}
		for i, p := range rc.Progress {
			what := fmt.Sprintf("sealed %v, frame %d", seal, i)
			bad := lower(data, p)
			_, _, err := scanAll(bad, opts)
			want(what+": Scanner", err, p)
			_, err = Recover(bytes.NewReader(bad), opts)
			want(what+": Recover", err, p)
			if seal {
				_, _, err = scanAll(bad, &ScannerOptions{Object: opts.Object, RequireSealed: true})
				want(what+": Scanner requiring a seal", err, p)
				r, err := NewReader(bytes.NewReader(bad), int64(len(bad)), &ReaderOptions{Object: opts.Object})
				if err != nil {
					t.Fatal(err)
				}
				var found error
				for b := 0; b <= len(r.Footer().Blocks) && found == nil; b++ {
					_, found = r.ProgressBefore(b)
				}
				want(what+": ProgressBefore", found, p)
			}
			_, _, err = DecodeProgressFrame(bad[p.Offset:], 4)
			var ce *CorruptionError
			if !errors.As(err, &ce) || ce.Part != "progress" || ce.Offset != 0 {
				t.Fatalf("%s: DecodeProgressFrame: %v", what, err)
			}
		}
	}
}

// TestAppendProgressCommittedErrors: a committed ts below the flushed ts is
// refused without writing anything or breaking the Writer; in a resumed
// version-3 segment, whose frames have no committed ts, so is any committed
// ts but the flushed ts; in a resumed version-2 segment every progress
// frame.
func TestAppendProgressCommittedErrors(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testHeader(CompressionNone), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(5, KindRow, []byte("x")); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]uint64{{5, 4}, {1, 0}, {1<<64 - 1, 1<<64 - 2}} {
		if _, err := w.AppendProgressCommitted(c[0], c[1], nil); err == nil {
			t.Fatalf("flushed ts %d, committed ts %d: accepted", c[0], c[1])
		}
	}
	if buf.Len() != HeaderSize || w.Stats().Buffered == 0 || len(w.Progress()) != 0 {
		t.Fatalf("a refused progress frame wrote %d bytes", buf.Len()-HeaderSize)
	}
	for _, c := range [][2]uint64{{5, 5}, {5, 6}, {0, 1<<64 - 1}} {
		p, err := w.AppendProgressCommitted(c[0], c[1], nil)
		if err != nil || p.FlushedTs != c[0] || p.CommittedTs != c[1] || p.ChainMaxTs != 5 {
			t.Fatalf("flushed ts %d, committed ts %d: %+v %v", c[0], c[1], p, err)
		}
	}

	// A version-3 segment an older build started.
	v3, err := os.ReadFile(filepath.Join("testdata", "unsealed-torn-v3.seg"))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := Recover(bytes.NewReader(v3), nil)
	if err != nil || rc.Header.Version != 3 || len(rc.Progress) != 1 {
		t.Fatalf("recover the version-3 golden: %v", err)
	}
	out := bytes.NewBuffer(bytes.Clone(v3[:rc.ValidSize]))
	rw, err := ResumeWriter(out, rc.Header, rc.Blocks, rc.Progress, rc.ValidSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	last := rc.Blocks[len(rc.Blocks)-1].MaxTs
	for _, committed := range []uint64{last + 1, last - 1, 1<<64 - 1} {
		if _, err := rw.AppendProgressCommitted(last, committed, nil); err == nil || !strings.Contains(err.Error(), "version-3") {
			t.Fatalf("committed ts %d, flushed ts %d in a version-3 segment: %v", committed, last, err)
		}
	}
	if int64(out.Len()) != rc.ValidSize {
		t.Fatalf("a refused progress frame wrote %d bytes", int64(out.Len())-rc.ValidSize)
	}
	p, err := rw.AppendProgressCommitted(last, last, spans(2, last))
	if err != nil || p.Length != progressSize(2, 3) || p.CommittedTs != max(p.ChainMaxTs, p.FlushedTs) {
		t.Fatalf("a version-3 frame: %+v %v", p, err)
	}
	p, err = rw.AppendProgress(last, nil)
	if err != nil || p.Length != MinProgressSize || p.CommittedTs != max(p.ChainMaxTs, p.FlushedTs) {
		t.Fatalf("a version-3 frame without spans: %+v %v", p, err)
	}
	if _, err := rw.Seal(); err != nil {
		t.Fatal(err)
	}
	got, r, err := readAll(out.Bytes())
	if err != nil || r.Header().Version != 3 {
		t.Fatalf("the resumed version-3 segment: %v", err)
	}
	requireRecs(t, "resumed v3", got, goldenRecords()[:goldenUnsealedV3Whole])
	_, s, err := scanAll(out.Bytes(), &ScannerOptions{RequireSealed: true})
	if err != nil {
		t.Fatal(err)
	}
	requireCommitted(t, "resumed v3", s.Progress(), rw.Progress())
	for _, p := range s.Progress() {
		if p.CommittedTs != max(p.ChainMaxTs, p.FlushedTs) {
			t.Fatalf("a version-3 frame read with committed ts %d, chain max ts %d", p.CommittedTs, p.ChainMaxTs)
		}
	}

	// A version-2 segment.
	v2, r2 := openTestdata(t, "sealed-v2.seg")
	end := r2.Footer().Blocks[1].End()
	rc, err = Recover(bytes.NewReader(v2[:end]), nil)
	if err != nil {
		t.Fatal(err)
	}
	w2, err := ResumeWriter(io.Discard, rc.Header, rc.Blocks, nil, rc.ValidSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w2.AppendProgressCommitted(1, 1, nil); err == nil {
		t.Fatal("progress frame in a version-2 segment accepted")
	}
}

// TestHeaderFlags: the flags a writer is given are byte 13 of the header
// and read back on every path; bytes 14 and 15 stay zero. An unknown flag
// bit, a flag in a version-3 header and a non-zero reserved byte, under a
// CRC that holds, are corruption of the header (never a torn tail), and a
// writer refuses to write them.
func TestHeaderFlags(t *testing.T) {
	recs := genRecords(43, 12, true)
	for _, f := range []Flags{0, FlagStaged, FlagCatchUp, FlagStaged | FlagCatchUp} {
		h := testHeader(CompressionLZ4)
		h.Flags = f
		var buf bytes.Buffer
		w, err := NewWriter(&buf, h, nil)
		if err != nil {
			t.Fatalf("flags %#02x: %v", f, err)
		}
		appendAll(t, w, recs, 0)
		if _, err := w.AppendProgress(recs[len(recs)-1].ts, nil); err != nil {
			t.Fatal(err)
		}
		active := bytes.Clone(buf.Bytes())
		if _, err := w.Seal(); err != nil {
			t.Fatal(err)
		}
		sealed := buf.Bytes()
		if sealed[13] != byte(f) || sealed[14] != 0 || sealed[15] != 0 || w.Header().Flags != f {
			t.Fatalf("flags %#02x: header bytes 13-15 are % x", f, sealed[13:16])
		}
		dh, err := DecodeHeader(sealed, "x")
		if err != nil || dh.Flags != f || dh.Version != FormatVersion {
			t.Fatalf("flags %#02x: DecodeHeader: %+v %v", f, dh, err)
		}
		if _, r, err := readAll(sealed); err != nil || r.Header().Flags != f {
			t.Fatalf("flags %#02x: Reader: %v", f, err)
		}
		s := NewScanner(bytes.NewReader(sealed), &ScannerOptions{RequireSealed: true})
		if sh, err := s.Header(); err != nil || sh.Flags != f {
			t.Fatalf("flags %#02x: Scanner: %+v %v", f, sh, err)
		}
		rc, err := Recover(bytes.NewReader(active), nil)
		if err != nil || rc.Header.Flags != f {
			t.Fatalf("flags %#02x: Recover: %v", f, err)
		}
		// Resuming keeps them: the header must encode to the CRC on disk.
		out := bytes.NewBuffer(bytes.Clone(active))
		rw, err := ResumeWriter(out, rc.Header, rc.Blocks, rc.Progress, rc.ValidSize, nil)
		if err != nil {
			t.Fatalf("flags %#02x: resume: %v", f, err)
		}
		if _, err := rw.Seal(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), sealed) {
			t.Fatalf("flags %#02x: resumed and sealed, the segment differs", f)
		}
	}

	// What no writer writes, under a good CRC.
	sealed := writeSegment(t, testHeader(CompressionNone), nil, recs, true)
	active := writeSegment(t, testHeader(CompressionNone), nil, recs, false)
	v3, err := os.ReadFile(filepath.Join("testdata", "sealed-v3.seg"))
	if err != nil {
		t.Fatal(err)
	}
	type damage struct {
		name string
		data [][]byte // the segments to damage: sealed ones first
		off  int
		val  byte
	}
	var cases []damage
	for bit := 2; bit < 8; bit++ {
		cases = append(cases, damage{fmt.Sprintf("unknown flag bit %d", bit), [][]byte{sealed, active}, hFlags, 1 << bit})
	}
	cases = append(cases,
		damage{"every flag bit", [][]byte{sealed, active}, hFlags, 0xff},
		damage{"reserved byte 14", [][]byte{sealed, active}, hReserved, 1},
		damage{"reserved byte 15", [][]byte{sealed, active}, hReserved + 1, 0x80},
		damage{"FlagStaged in a version-3 header", [][]byte{v3}, hFlags, byte(FlagStaged)},
		damage{"FlagCatchUp in a version-3 header", [][]byte{v3}, hFlags, byte(FlagCatchUp)},
	)
	for _, c := range cases {
		for i, data := range c.data {
			bad := bytes.Clone(data)
			bad[c.off] = c.val
			le.PutUint32(bad[hCRC:], crc(bad[:hCRC]))
			var ce *CorruptionError
			if _, err := DecodeHeader(bad, "x.seg"); !errors.As(err, &ce) || ce.Part != "header" || ce.Offset != 0 || ce.Object != "x.seg" {
				t.Fatalf("%s: DecodeHeader: %v, want a corrupt header at offset 0", c.name, err)
			}
			if _, err := Recover(bytes.NewReader(bad), nil); !errors.As(err, &ce) || ce.Part != "header" {
				t.Fatalf("%s: Recover: %v, want a corrupt header (not a torn tail)", c.name, err)
			}
			if i == 0 {
				if _, _, err := readAll(bad); !errors.As(err, &ce) || ce.Part != "header" {
					t.Fatalf("%s: Reader: %v, want a corrupt header", c.name, err)
				}
			}
		}
	}

	// A writer refuses them.
	for bit := 2; bit < 8; bit++ {
		h := testHeader(CompressionNone)
		h.Flags = 1 << bit
		if _, err := NewWriter(io.Discard, h, nil); err == nil {
			t.Fatalf("NewWriter accepted flag bit %d", bit)
		}
	}
	rc, err := Recover(bytes.NewReader(v3[:HeaderSize]), nil)
	if err != nil || rc.Header.Version != 3 {
		t.Fatalf("the version-3 header: %v", err)
	}
	for _, f := range []Flags{FlagStaged, FlagCatchUp} {
		h := rc.Header
		h.Flags, h.CRC = f, 0
		if _, err := ResumeWriter(io.Discard, h, nil, nil, HeaderSize, nil); err == nil {
			t.Fatalf("ResumeWriter accepted flags %#02x in a version-3 header", f)
		}
	}
	if _, err := ResumeWriter(io.Discard, rc.Header, nil, nil, HeaderSize, nil); err != nil {
		t.Fatalf("ResumeWriter of the version-3 header: %v", err)
	}
}

// TestV3FrameInV4Segment: the two layouts are not interchangeable. A
// version-3 frame spliced into a version-4 segment is read as a version-4
// frame, whose CRC then fails: damage, and corruption when valid frames
// follow it.
func TestV3FrameInV4Segment(t *testing.T) {
	recs := genRecords(44, 20, true)
	data, w := writeWithProgress(t, testHeader(CompressionNone), &WriterOptions{BlockSize: 300}, recs, []progressAt{{10, spans(2, 1)}}, false)
	b := w.Blocks()[0]
	frame := appendProgressFrame(nil, Progress{FlushedTs: 1, ChainMaxTs: b.MaxTs, Spans: spans(2, 1)}, 3)
	bad := splice(data, b.End(), frame)
	if _, _, err := scanAll(bad, nil); !IsCorrupt(err) {
		t.Fatalf("a version-3 frame inside a version-4 segment: %v", err)
	}
	if !slices.Equal(frame, appendProgressFrame(nil, Progress{FlushedTs: 1, CommittedTs: 99, ChainMaxTs: b.MaxTs, Spans: spans(2, 1)}, 3)) {
		t.Fatal("the version-3 layout holds a committed ts")
	}
}
