package segment

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"sort"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	recs := genRecords(1, 3000, false)
	var total int
	for _, r := range recs {
		total += len(r.payload)
	}
	sizes := map[Compression]int{}
	for _, c := range []Compression{CompressionNone, CompressionLZ4} {
		for _, bs := range []int{1, 4 << 10, DefaultBlockSize, 8 << 20} {
			t.Run(fmt.Sprintf("%v/block=%d", c, bs), func(t *testing.T) {
				data := writeSegment(t, testHeader(c), &WriterOptions{BlockSize: bs}, recs, true, 17, 18, 1000)

				got, r, err := readAll(data)
				if err != nil {
					t.Fatal(err)
				}
				requireRecs(t, "Reader", got, recs)
				if h := r.Header(); h.Version != FormatVersion || h.LogID != "changefeed-1" || h.WriterID != "capture_10.0.0.7-8300" ||
					h.Epoch != 7 || h.Seq != 42 || h.Compression != c || !h.Created.Equal(fixedCreated) {
					t.Fatalf("header read back as %+v", h)
				}
				checkFooter(t, r.Footer(), recs, bs)

				got, s, err := scanAll(data, &ScannerOptions{RequireSealed: true})
				if err != nil {
					t.Fatal(err)
				}
				requireRecs(t, "Scanner", got, recs)
				if !s.Sealed() || s.Torn() || s.ValidSize() != int64(len(data)) {
					t.Fatalf("scanner: sealed %v torn %v valid size %d of %d", s.Sealed(), s.Torn(), s.ValidSize(), len(data))
				}
				if fmt.Sprint(s.Footer()) != fmt.Sprint(r.Footer()) {
					t.Fatalf("scanner footer %+v, reader footer %+v", s.Footer(), r.Footer())
				}
				if bs == DefaultBlockSize {
					sizes[c] = len(data)
				}
			})
		}
	}
	// The payloads are realistic rows: lz4 must pay for itself on them.
	if sizes[CompressionLZ4] == 0 || sizes[CompressionLZ4]*2 > sizes[CompressionNone] {
		t.Fatalf("lz4 segment %d bytes, raw %d (payload %d): expected at least 2x smaller", sizes[CompressionLZ4], sizes[CompressionNone], total)
	}
}

// checkFooter recomputes the footer's totals and block bounds from recs.
func checkFooter(t *testing.T, f Footer, recs []rec, blockSize int) {
	t.Helper()
	var ddls uint64
	for _, r := range recs {
		if r.kind == KindDDL {
			ddls++
		}
	}
	if f.Records != uint64(len(recs)) || f.DDLs != ddls || f.Rows != uint64(len(recs))-ddls ||
		f.MinTs != recs[0].ts || f.MaxTs != recs[len(recs)-1].ts {
		t.Fatalf("footer totals %+v, want %d records, %d DDLs, ts [%d, %d]", f, len(recs), ddls, recs[0].ts, recs[len(recs)-1].ts)
	}
	i := 0
	for bi, b := range f.Blocks {
		in := recs[i : i+b.Records]
		if b.MinTs != in[0].ts || b.MaxTs != in[len(in)-1].ts {
			t.Fatalf("block %d ts [%d, %d], records [%d, %d]", bi, b.MinTs, b.MaxTs, in[0].ts, in[len(in)-1].ts)
		}
		if b.Uncompressed > blockSize && b.Records > 1 {
			t.Fatalf("block %d holds %d records in %d bytes, over the %d target", bi, b.Records, b.Uncompressed, blockSize)
		}
		i += b.Records
	}
	if i != len(recs) {
		t.Fatalf("blocks hold %d records, want %d", i, len(recs))
	}
}

func TestReadBlock(t *testing.T) {
	recs := genRecords(2, 500, false)
	data := writeSegment(t, testHeader(CompressionLZ4), &WriterOptions{BlockSize: 8 << 10}, recs, true)
	r, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
	if err != nil {
		t.Fatal(err)
	}
	blocks := r.Footer().Blocks
	if len(blocks) < 4 {
		t.Fatalf("only %d blocks", len(blocks))
	}
	// Blocks out of order, each alone.
	start := make([]int, len(blocks)+1)
	for i, b := range blocks {
		start[i+1] = start[i] + b.Records
	}
	for _, i := range []int{3, 0, len(blocks) - 1, 1} {
		b, err := r.ReadBlock(i)
		if err != nil {
			t.Fatal(err)
		}
		if b.Info != blocks[i] {
			t.Fatalf("block %d info %+v, index %+v", i, b.Info, blocks[i])
		}
		var got []rec
		for x, ok := b.Next(); ok; x, ok = b.Next() {
			got = append(got, own(x))
		}
		requireRecs(t, fmt.Sprintf("block %d", i), got, recs[start[i]:start[i+1]])
		b.Rewind()
		if x, ok := b.Next(); !ok || own(x).ts != recs[start[i]].ts {
			t.Fatalf("block %d: Rewind did not restart", i)
		}
	}
	// Next continues after the block ReadBlock loaded.
	if _, err := r.ReadBlock(1); err != nil {
		t.Fatal(err)
	}
	x, err := r.Next()
	if err != nil || own(x).ts != recs[start[1]].ts || !bytes.Equal(x.Payload, recs[start[1]].payload) {
		t.Fatalf("Next after ReadBlock(1) = %v, %v; want record %d", x, err, start[1])
	}
	if _, err := r.ReadBlock(len(blocks)); err == nil {
		t.Fatal("ReadBlock past the index succeeded")
	}
}

// TestReadBlockInto: the records of every block read into a buffer of its
// own stay valid while the Reader reads other blocks, compressed or not (a
// block stored uncompressed is the Reader's frame, which the next read
// overwrites unless copied).
func TestReadBlockInto(t *testing.T) {
	for _, c := range []Compression{CompressionNone, CompressionLZ4} {
		t.Run(c.String(), func(t *testing.T) {
			recs := genRecords(4, 500, false)
			data := writeSegment(t, testHeader(c), &WriterOptions{BlockSize: 8 << 10}, recs, true)
			r, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
			if err != nil {
				t.Fatal(err)
			}
			blocks := r.Footer().Blocks
			if len(blocks) < 4 {
				t.Fatalf("only %d blocks", len(blocks))
			}
			var got []rec // payloads alias the buffers
			for i := range blocks {
				b, ub, err := r.ReadBlockInto(i, nil)
				if err != nil {
					t.Fatal(err)
				}
				if b.Info != blocks[i] || len(ub) < blocks[i].Uncompressed {
					t.Fatalf("block %d: info %+v (index %+v), buffer of %d bytes", i, b.Info, blocks[i], len(ub))
				}
				for x, ok := b.Next(); ok; x, ok = b.Next() {
					got = append(got, rec{ts: x.CommitTs, kind: x.Kind, payload: x.Payload})
				}
			}
			// The Reader's own buffers, and the shared frame, are
			// overwritten by every block again.
			for i := range blocks {
				if _, err := r.ReadBlock(i); err != nil {
					t.Fatal(err)
				}
				if _, _, err := r.ReadBlockInto(len(blocks)-1-i, nil); err != nil {
					t.Fatal(err)
				}
			}
			requireRecs(t, "blocks read into buffers of their own", got, recs)
			if _, _, err := r.ReadBlockInto(len(blocks), nil); err == nil {
				t.Fatal("ReadBlockInto past the index succeeded")
			}
		})
	}
}

func TestSeekTs(t *testing.T) {
	recs := genRecords(3, 2000, true)
	data := writeSegment(t, testHeader(CompressionLZ4), &WriterOptions{BlockSize: 1 << 10}, recs, true)
	r, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
	if err != nil {
		t.Fatal(err)
	}
	blocks := r.Footer().Blocks
	var probes []uint64
	probes = append(probes, 0, recs[0].ts-1, math.MaxUint64)
	for _, b := range blocks {
		probes = append(probes, b.MinTs-1, b.MinTs, b.MaxTs-1, b.MaxTs, b.MaxTs+1)
	}
	for i := 0; i < len(recs); i += 37 {
		probes = append(probes, recs[i].ts)
	}
	for _, ts := range probes {
		want := sort.Search(len(recs), func(i int) bool { return recs[i].ts > ts })
		wantBlock := sort.Search(len(blocks), func(i int) bool { return blocks[i].MaxTs > ts })
		if got := r.SeekTs(ts); got != wantBlock {
			t.Fatalf("SeekTs(%d) = block %d, want %d", ts, got, wantBlock)
		}
		got := mustCollect(t, r)
		requireRecs(t, fmt.Sprintf("after SeekTs(%d)", ts), got, recs[want:])
	}
}

func TestAppendErrors(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testHeader(CompressionLZ4), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(100, KindRow, []byte("a")); err != nil {
		t.Fatal(err)
	}
	err = w.Append(99, KindRow, []byte("b"))
	if !errors.Is(err, ErrOutOfOrder) || !strings.Contains(err.Error(), "99") || !strings.Contains(err.Error(), "100") {
		t.Fatalf("regression: %v", err)
	}
	if err := w.Append(100, Kind(3), nil); err == nil {
		t.Fatal("unknown kind accepted")
	}
	if err := w.Append(100, KindRow, make([]byte, MaxRecordSize+1)); err == nil {
		t.Fatal("oversized payload accepted")
	}
	if err := w.Append(100, KindDDL, []byte("c")); err != nil {
		t.Fatalf("same ts after a rejected record: %v", err)
	}
	f, err := w.Seal()
	if err != nil {
		t.Fatal(err)
	}
	if f.Records != 2 || f.DDLs != 1 || f.Rows != 1 {
		t.Fatalf("footer %+v, want the two accepted records", f)
	}
	if err := w.Append(101, KindRow, nil); !errors.Is(err, ErrSealed) {
		t.Fatalf("append after seal: %v", err)
	}
	if _, err := w.Seal(); !errors.Is(err, ErrSealed) {
		t.Fatalf("second seal: %v", err)
	}
	got, _, err := readAll(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	requireRecs(t, "read", got, []rec{{100, KindRow, []byte("a")}, {100, KindDDL, []byte("c")}})
}

func TestHeaderValidation(t *testing.T) {
	bad := []func(*Header){
		func(h *Header) { h.LogID = "" },
		func(h *Header) { h.LogID = "a/b" },
		func(h *Header) { h.WriterID = ".." },
		func(h *Header) { h.WriterID = strings.Repeat("w", MaxIDLen+1) },
		func(h *Header) { h.WriterID = "host:8300" },
		func(h *Header) { h.Compression = 9 },
		func(h *Header) { h.Version = FormatVersion + 1 },
		func(h *Header) { h.Version = 1 },
		func(h *Header) { h.Link = Link{PrevSeq: h.Seq} },
		func(h *Header) { h.Link = Link{PrevSeq: h.Seq - 2, PrevMaxTs: 5} },
		func(h *Header) { h.Link = Link{PrevMaxTs: 5} },
		func(h *Header) { h.Link = Link{PrevHeaderCRC: 1} },
		func(h *Header) { h.Link = Link{PrevFooterCRC: 1} },
	}
	for i, mut := range bad {
		h := testHeader(CompressionNone)
		mut(&h)
		if _, err := NewWriter(io.Discard, h, nil); err == nil {
			t.Errorf("case %d: header %+v accepted", i, h)
		}
	}
	if _, err := NewWriter(io.Discard, testHeader(CompressionNone), &WriterOptions{BlockSize: MaxBlockSize + 1}); err == nil {
		t.Error("block size over the limit accepted")
	}
	h := testHeader(CompressionNone)
	h.LogID, h.WriterID = strings.Repeat("L", MaxIDLen), "."+strings.Repeat("-", MaxIDLen-1)
	data := writeSegment(t, h, nil, genRecords(4, 3, true), true)
	_, r, err := readAll(data)
	if err != nil {
		t.Fatal(err)
	}
	if r.Header().LogID != h.LogID || r.Header().WriterID != h.WriterID {
		t.Fatalf("IDs of the longest length read back as %q, %q", r.Header().LogID, r.Header().WriterID)
	}
}

func TestEmptySegment(t *testing.T) {
	data := writeSegment(t, testHeader(CompressionLZ4), nil, nil, true)
	if want := HeaderSize + minFooterSize + TrailerSize; len(data) != want {
		t.Fatalf("empty sealed segment is %d bytes, want %d", len(data), want)
	}
	got, r, err := readAll(data)
	if err != nil || len(got) != 0 || r.Footer().Records != 0 || len(r.Footer().Blocks) != 0 {
		t.Fatalf("empty segment: %v, %d records, footer %+v", err, len(got), r.Footer())
	}
	got, s, err := scanAll(data, &ScannerOptions{RequireSealed: true})
	if err != nil || len(got) != 0 || !s.Sealed() {
		t.Fatalf("empty segment scan: %v, %d records, sealed %v", err, len(got), s.Sealed())
	}
	if r.SeekTs(0) != 0 {
		t.Fatal("SeekTs on an empty segment")
	}
}

func TestWriteErrorIsSticky(t *testing.T) {
	fw := &failWriter{failAt: 2}
	w, err := NewWriter(fw, testHeader(CompressionNone), &WriterOptions{BlockSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	var first error
	for i := range 100 {
		if err := w.Append(uint64(i), KindRow, bytes.Repeat([]byte{'x'}, 40)); err != nil {
			first = err
			break
		}
	}
	if first == nil || !errors.Is(first, errBoom) {
		t.Fatalf("write failure not reported: %v", first)
	}
	if err := w.Append(1000, KindRow, nil); !errors.Is(err, errBoom) {
		t.Fatalf("append after a failed write: %v", err)
	}
	if _, err := w.Seal(); !errors.Is(err, errBoom) {
		t.Fatalf("seal after a failed write: %v", err)
	}
}

var errBoom = errors.New("boom")

type failWriter struct {
	n, failAt int
}

func (f *failWriter) Write(p []byte) (int, error) {
	f.n++
	if f.n >= f.failAt {
		return len(p) / 2, errBoom
	}
	return len(p), nil
}

// TestTruncateEveryOffset cuts an unsealed segment at every byte and checks
// that recovery keeps exactly the whole blocks before the cut, reports the
// rest as a torn tail, and that resuming there and sealing gives back every
// record.
func TestTruncateEveryOffset(t *testing.T) {
	recs := genRecords(5, 60, true)
	for _, c := range []Compression{CompressionNone, CompressionLZ4} {
		t.Run(c.String(), func(t *testing.T) {
			opts := &WriterOptions{BlockSize: 256}
			data := writeSegment(t, testHeader(c), opts, recs, false, 5, 6)
			full, err := Recover(bytes.NewReader(data), nil)
			if err != nil {
				t.Fatal(err)
			}
			if full.Torn() || full.Sealed || full.ValidSize != int64(len(data)) || len(full.Blocks) < 5 {
				t.Fatalf("whole unsealed segment: %+v", full)
			}
			ends := boundaries(full.Blocks)
			for n := 0; n <= len(data); n++ {
				rc, err := Recover(bytes.NewReader(data[:n]), nil)
				if err != nil {
					t.Fatalf("cut at %d: %v", n, err)
				}
				var want int64
				nblocks, nrecs := 0, 0
				for i, e := range ends {
					if e <= int64(n) {
						want = e
						if i > 0 {
							nblocks++
							nrecs += full.Blocks[i-1].Records
						}
					}
				}
				if rc.ValidSize != want || rc.Torn() != (int64(n) != want) || rc.TornBytes != int64(n)-want ||
					len(rc.Blocks) != nblocks || rc.HasHeader != (n >= HeaderSize) {
					t.Fatalf("cut at %d: valid %d torn %d blocks %d header %v; want valid %d, %d blocks",
						n, rc.ValidSize, rc.TornBytes, len(rc.Blocks), rc.HasHeader, want, nblocks)
				}
				got, _, err := scanAll(data[:n], nil)
				if err != nil {
					t.Fatalf("cut at %d: scan: %v", n, err)
				}
				requireRecs(t, fmt.Sprintf("cut at %d", n), got, recs[:nrecs])
				if _, _, err := scanAll(data[:n], &ScannerOptions{RequireSealed: true}); !IsCorrupt(err) {
					t.Fatalf("cut at %d: scan requiring a seal: %v", n, err)
				}

				// Resume: truncate to the valid size, append the rest, seal.
				var buf bytes.Buffer
				buf.Write(data[:rc.ValidSize])
				var w *Writer
				if rc.HasHeader {
					w, err = ResumeWriter(&buf, rc.Header, rc.Blocks, rc.Progress, rc.ValidSize, opts)
				} else {
					buf.Reset()
					w, err = NewWriter(&buf, testHeader(c), opts)
				}
				if err != nil {
					t.Fatalf("cut at %d: resume: %v", n, err)
				}
				if w.Offset() != int64(buf.Len()) {
					t.Fatalf("cut at %d: resumed writer at offset %d, file has %d bytes", n, w.Offset(), buf.Len())
				}
				if st := w.Stats(); st.Records != int64(nrecs) || st.Blocks != nblocks {
					t.Fatalf("cut at %d: resumed stats %+v, want %d records in %d blocks", n, st, nrecs, nblocks)
				}
				if nrecs > 0 {
					if err := w.Append(recs[nrecs-1].ts-1, KindRow, nil); !errors.Is(err, ErrOutOfOrder) {
						t.Fatalf("cut at %d: resumed writer accepted a ts below the kept blocks: %v", n, err)
					}
				}
				appendAll(t, w, recs[nrecs:], nrecs)
				f, err := w.Seal()
				if err != nil {
					t.Fatal(err)
				}
				got, r, err := readAll(buf.Bytes())
				if err != nil {
					t.Fatalf("cut at %d: read resumed segment: %v", n, err)
				}
				requireRecs(t, fmt.Sprintf("cut at %d, resumed", n), got, recs)
				if fmt.Sprint(f) != fmt.Sprint(r.Footer()) || f.Records != uint64(len(recs)) {
					t.Fatalf("cut at %d: Seal returned %+v, footer reads %+v", n, f, r.Footer())
				}
			}
		})
	}
}

// TestTruncateSealed cuts a sealed segment at every byte: the ReaderAt path
// and a scan that requires a seal must fail on every cut; a plain scan must
// recover the whole blocks before the cut.
func TestTruncateSealed(t *testing.T) {
	recs := genRecords(6, 40, true)
	data := writeSegment(t, testHeader(CompressionLZ4), &WriterOptions{BlockSize: 300}, recs, true)
	_, r, err := readAll(data)
	if err != nil {
		t.Fatal(err)
	}
	ends := boundaries(r.Footer().Blocks)
	for n := 0; n < len(data); n++ {
		if _, _, err := readAll(data[:n]); !IsCorrupt(err) {
			t.Fatalf("cut at %d: Reader: %v", n, err)
		}
		if _, _, err := scanAll(data[:n], &ScannerOptions{RequireSealed: true}); !IsCorrupt(err) {
			t.Fatalf("cut at %d: Scanner requiring a seal: %v", n, err)
		}
		got, s, err := scanAll(data[:n], nil)
		if err != nil {
			t.Fatalf("cut at %d: %v", n, err)
		}
		nrecs := 0
		var want int64
		for i, e := range ends {
			if e <= int64(n) {
				want = e
				if i > 0 {
					nrecs += r.Footer().Blocks[i-1].Records
				}
			}
		}
		if s.Sealed() || s.ValidSize() != want {
			t.Fatalf("cut at %d: sealed %v, valid size %d, want %d", n, s.Sealed(), s.ValidSize(), want)
		}
		requireRecs(t, fmt.Sprintf("cut at %d", n), got, recs[:nrecs])
	}
}

// TestDamageBeforeValidData: a bad block followed by a good one is corruption,
// not a torn tail, and the error names the bad block's offset.
func TestDamageBeforeValidData(t *testing.T) {
	recs := genRecords(7, 100, true)
	data := writeSegment(t, testHeader(CompressionLZ4), &WriterOptions{BlockSize: 512}, recs, false)
	rc, err := Recover(bytes.NewReader(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	victim, last := rc.Blocks[2], rc.Blocks[len(rc.Blocks)-1]
	spots := []func(BlockInfo) int64{
		func(b BlockInfo) int64 { return b.Offset + 5 },
		func(b BlockInfo) int64 { return b.Offset + BlockHeaderSize + 3 },
		func(b BlockInfo) int64 { return b.End() - 1 },
	}
	for _, spot := range spots {
		at := spot(victim)
		bad := bytes.Clone(data)
		bad[at] ^= 0x10
		_, err := Recover(bytes.NewReader(bad), &ScannerOptions{Object: "w1/active"})
		ce := requireCorrupt(t, fmt.Sprintf("flip at %d", at), err)
		if ce.Offset != victim.Offset || ce.Part != "block" || ce.Object != "w1/active" {
			t.Fatalf("flip at %d: error %+v, want block at offset %d", at, ce, victim.Offset)
		}
		if !strings.Contains(err.Error(), fmt.Sprint(victim.Offset)) || !strings.Contains(err.Error(), "w1/active") {
			t.Fatalf("error %q does not name the object and offset", err)
		}
		// The same damage in the last block is a torn tail.
		bad = bytes.Clone(data)
		bad[spot(last)] ^= 0x10
		tail, err := Recover(bytes.NewReader(bad), nil)
		if err != nil || tail.ValidSize != last.Offset || !tail.Torn() {
			t.Fatalf("flip in the last block: %v, %+v", err, tail)
		}
	}
	// Zeros where a crash left an unwritten page are a torn tail too.
	z := append(bytes.Clone(data), make([]byte, 4096)...)
	if rc, err := Recover(bytes.NewReader(z), nil); err != nil || rc.ValidSize != int64(len(data)) || rc.TornBytes != 4096 {
		t.Fatalf("zero tail: %v %+v", err, rc)
	}
}

func TestUnknownVersion(t *testing.T) {
	data := writeSegment(t, testHeader(CompressionNone), nil, genRecords(8, 10, true), true)
	hdr := bytes.Clone(data)
	le.PutUint16(hdr[hVersion:], FormatVersion+1)
	le.PutUint32(hdr[hCRC:], crc(hdr[:hCRC]))
	var ve *VersionError
	if _, _, err := scanAll(hdr, nil); !errors.As(err, &ve) || ve.Version != FormatVersion+1 || !errors.Is(err, ErrUnsupportedVersion) || !strings.Contains(err.Error(), fmt.Sprintf("version %d", FormatVersion+1)) {
		t.Fatalf("scanner on a v%d header: %v", FormatVersion+1, err)
	}
	if _, _, err := readAll(hdr); !errors.As(err, &ve) || ve.Version != FormatVersion+1 {
		t.Fatalf("reader on a v%d header: %v", FormatVersion+1, err)
	}
	// Version 1 was never released: its segments are refused like any
	// unknown version, whatever bytes follow the version field.
	v1 := bytes.Clone(data)
	le.PutUint16(v1[hVersion:], 1)
	if _, _, err := scanAll(v1, nil); !errors.As(err, &ve) || ve.Version != 1 {
		t.Fatalf("scanner on a v1 header: %v", err)
	}
	if _, err := DecodeHeader(v1, "x"); !errors.As(err, &ve) || ve.Version != 1 || ve.Object != "x" {
		t.Fatalf("DecodeHeader on a v1 header: %v", err)
	}
	tr := bytes.Clone(data)
	at := len(tr) - TrailerSize
	le.PutUint16(tr[at+tVersion:], 1)
	le.PutUint32(tr[at+tCRC:], crc(tr[at:at+tCRC]))
	if _, _, err := readAll(tr); !errors.As(err, &ve) || ve.Version != 1 || ve.Offset != int64(at) {
		t.Fatalf("reader on a v1 trailer: %v", err)
	}
}

// TestCorruptLengthsAreBounded: lengths read from a corrupt stream must not
// make the scanner allocate far more than the stream holds.
func TestCorruptLengthsAreBounded(t *testing.T) {
	data := writeSegment(t, testHeader(CompressionNone), nil, genRecords(9, 5, true), false)
	frame := make([]byte, BlockHeaderSize)
	bh := blockHeader{codec: CompressionNone, stored: MaxBlockSize, uncompressed: MaxBlockSize, records: 1, minTs: 1, maxTs: 1}
	encodeBlockHeader(frame, &bh, nil)
	in := append(bytes.Clone(data), frame...)
	in = append(in, make([]byte, 1000)...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rc, err := Recover(bytes.NewReader(in), nil)
	runtime.ReadMemStats(&after)
	if err != nil || rc.ValidSize != int64(len(data)) {
		t.Fatalf("torn huge block: %v %+v", err, rc)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Fatalf("scanning a %d-byte stream allocated %d bytes", len(in), alloc)
	}
	le.PutUint32(frame[bStored:], MaxBlockSize+1)
	le.PutUint32(frame[bUncomp:], MaxBlockSize+1)
	if _, p := parseBlockHeader(frame, 0); p == nil {
		t.Fatal("a block over MaxBlockSize passed the header check")
	}
}

// TestZeroAllocs: appending and reading records costs no allocation once the
// buffers have grown.
func TestZeroAllocs(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("instrumented build")
	}
	recs := genRecords(10, 512, false)
	for _, c := range []Compression{CompressionNone, CompressionLZ4} {
		w, err := NewWriter(io.Discard, testHeader(c), &WriterOptions{BlockSize: 16 << 10})
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		ts := uint64(1)
		appendOne := func() {
			r := recs[i%len(recs)]
			i++
			ts++
			if err := w.Append(ts, r.kind, r.payload); err != nil {
				t.Fatal(err)
			}
		}
		for range 20000 {
			appendOne()
		}
		if a := testing.AllocsPerRun(20000, appendOne); a != 0 {
			t.Errorf("%v: %v allocations per Append", c, a)
		}

		data := writeSegment(t, testHeader(c), &WriterOptions{BlockSize: 16 << 10}, genRecords(11, 20000, false), true)
		r, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
		if err != nil {
			t.Fatal(err)
		}
		s := NewScanner(bytes.NewReader(data), nil)
		for range 1000 {
			_, _ = r.Next()
			_, _ = s.Next()
		}
		readOne := func() {
			if _, err := r.Next(); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Next(); err != nil {
				t.Fatal(err)
			}
		}
		if a := testing.AllocsPerRun(10000, readOne); a != 0 {
			t.Errorf("%v: %v allocations per Next", c, a)
		}
	}
}

// TestResumeRejectsBadIndex: ResumeWriter checks the index it is given.
func TestResumeRejectsBadIndex(t *testing.T) {
	data := writeSegment(t, testHeader(CompressionLZ4), &WriterOptions{BlockSize: 256}, genRecords(12, 50, true), false)
	rc, err := Recover(bytes.NewReader(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	gap := append([]BlockInfo{rc.Blocks[0]}, rc.Blocks[2:]...)
	back := append([]BlockInfo(nil), rc.Blocks...)
	back[1].MinTs, back[1].MaxTs = 0, 0
	for name, idx := range map[string][]BlockInfo{"gap": gap, "ts regression": back} {
		if _, err := ResumeWriter(io.Discard, rc.Header, idx, nil, rc.ValidSize, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestReaderReset: one Reader reset from segment to segment reads each as a
// new Reader would, its Object naming the current one, a failed Reset
// included; reading blocks of slightly different sizes, and Resets between
// segments of the same shape, allocate nothing once its buffers have grown.
func TestReaderReset(t *testing.T) {
	segs := [][]byte{
		writeSegment(t, testHeader(CompressionLZ4), &WriterOptions{BlockSize: 16 << 10}, genRecords(31, 3000, false), true),
		writeSegment(t, testHeader(CompressionNone), &WriterOptions{BlockSize: 4 << 10}, genRecords(32, 500, true), true),
		writeSegment(t, testHeader(CompressionLZ4), &WriterOptions{BlockSize: 64 << 10}, genRecords(33, 2000, false), true),
	}
	var r *Reader
	for round := range 2 {
		for i, data := range segs {
			want, _, err := readAll(data)
			if err != nil {
				t.Fatal(err)
			}
			obj := fmt.Sprintf("seg-%d", i)
			if r == nil {
				r, err = NewReader(bytes.NewReader(data), int64(len(data)), &ReaderOptions{Object: obj})
			} else {
				err = r.Reset(bytes.NewReader(data), int64(len(data)), &ReaderOptions{Object: obj})
			}
			if err != nil {
				t.Fatal(err)
			}
			got := mustCollect(t, r)
			requireRecs(t, fmt.Sprintf("round %d segment %d", round, i), got, want)
		}
		// A corrupt segment: the Reset fails, naming it, and so does Next.
		bad := bytes.Clone(segs[0])
		bad[len(bad)-1] ^= 0xff
		err := r.Reset(bytes.NewReader(bad), int64(len(bad)), &ReaderOptions{Object: "bad"})
		if ce := requireCorrupt(t, "reset to a corrupt segment", err); ce.Object != "bad" {
			t.Fatalf("error names %q", ce.Object)
		}
		if _, err := r.Next(); err == nil {
			t.Fatal("Next after a failed Reset succeeded")
		}
	}

	if testing.CoverMode() != "" || raceEnabled {
		return
	}
	data := segs[0]
	ra := bytes.NewReader(data)
	reset := func() {
		if err := r.Reset(ra, int64(len(data)), nil); err != nil {
			t.Fatal(err)
		}
	}
	readBlocks := func() {
		for i := range r.Footer().Blocks {
			if _, err := r.ReadBlock(i); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A first read of blocks of varying sizes grows the two buffers (frame
	// and decompressed block) once or twice, not block after block.
	reset()
	r.frame, r.dec.ub = nil, nil
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	readBlocks()
	runtime.ReadMemStats(&m1)
	if a := m1.Mallocs - m0.Mallocs; a > 2 {
		t.Errorf("%d allocations for a first read of %d blocks", a, len(r.Footer().Blocks))
	}
	// What a Reset allocates is what it decodes (the index, the IDs), not
	// buffers.
	if a := testing.AllocsPerRun(20, reset); a > 4 {
		t.Errorf("%v allocations per Reset", a)
	}
	if a := testing.AllocsPerRun(20, readBlocks); a != 0 {
		t.Errorf("%v allocations per read of %d blocks", a, len(r.Footer().Blocks))
	}
}
