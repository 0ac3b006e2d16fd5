package segment

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/redokit/redokit/codec"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// goldenRecords are the records of the golden segments: real codec events
// (row changes of shop.orders, CREATE TABLE DDLs), runs of one commit ts, and
// one row whose BLOB column is incompressible, so that the lz4 golden also
// holds a block stored raw. Each record's kind and commit ts are its event's,
// as the format requires.
func goldenRecords() []rec {
	recs := genRecords(2025, 36, true)
	rng := rand.New(rand.NewPCG(7, 7))
	noise := make([]byte, 400)
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	for i := range recs {
		ts := recs[i].ts
		var ev codec.Event
		switch i {
		case 4, 12, 13, 35:
			name := codec.TableName{Schema: "shop", Name: fmt.Sprintf("t%d", i), PhysicalID: int64(200 + i)}
			ev = codec.Event{Kind: codec.DDLEvent, DDL: codec.DDL{
				StartTs: ts - 3, CommitTs: ts, Table: name, Type: codec.ActionCreateTable,
				Query:  fmt.Sprintf("CREATE TABLE shop.t%d (id BIGINT PRIMARY KEY, v TEXT)", i),
				Tables: []codec.DDLTable{{TableName: name, Role: codec.RoleCreated}},
			}}
		default:
			cols := []codec.Column{
				{Name: "id", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey | codec.FlagHandleKey, Value: codec.IntValue(int64(i))},
				{Name: "status", Type: codec.TypeVarchar, Charset: "utf8mb4", Collation: "utf8mb4_bin", Value: codec.StringValue(statuses[rng.IntN(len(statuses))])},
				{Name: "amount", Type: codec.TypeNewDecimal, Value: codec.DecimalValue(fmt.Sprintf("%d.%02d", rng.IntN(1000), rng.IntN(100)))},
			}
			if i == 20 {
				cols = append(cols, codec.Column{Name: "blob", Type: codec.TypeBlob, Flags: codec.FlagBinary | codec.FlagNullable, Value: codec.BytesValue(noise)})
			}
			ev = codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{
				StartTs: ts - 3, CommitTs: ts, Table: codec.TableName{Schema: "shop", Name: "orders", PhysicalID: 101}, Columns: cols,
			}}
		}
		recs[i].kind = Kind(ev.Kind)
		recs[i].payload = codec.AppendEvent(nil, &ev)
	}
	return recs
}

// goldenHeader is the golden segments' header: a segment in the middle of its
// epoch's chain, so that every link field holds something to see.
func goldenHeader(c Compression) Header {
	h := testHeader(c)
	h.Link = Link{PrevSeq: h.Seq - 1, PrevMaxTs: 400_000_000_000_000_700, PrevHeaderCRC: 0x1badb002, PrevFooterCRC: 0xcafef00d}
	return h
}

// goldenProgress is where the golden segments hold progress frames: before
// the record of each index, in order (so that two at one index follow one
// another), with these flushed ts, committed ts (0: the flushed ts) and
// spans.
type goldenProgress struct {
	before      int
	flushedTs   uint64
	committedTs uint64
	spans       []SpanTs
}

// committed is the committed ts the writer is given for p.
func (p goldenProgress) committed() uint64 { return max(p.committedTs, p.flushedTs) }

// goldenSealedProgress: a progress frame right after the header, one between
// blocks whose blocks before it hold events staged above its committed ts,
// and two in a row before the raw block's successor, the second after a span
// was added behind the writer (its flushed ts falls, its committed ts does
// not).
var goldenSealedProgress = []goldenProgress{
	{0, 400_000_000_000_000_700, 0, nil},
	{9, 400_000_000_000_000_745, 0, []SpanTs{{101, 400_000_000_000_000_745}, {204, 400_000_000_000_000_745}}},
	{21, 400_000_000_000_000_777, 0, []SpanTs{{101, 400_000_000_000_000_777}}},
	{21, 400_000_000_000_000_770, 400_000_000_000_000_777, []SpanTs{{101, 400_000_000_000_000_777}, {204, 400_000_000_000_000_777}, {212, 400_000_000_000_000_777}, {213, 400_000_000_000_000_770}}},
}

// goldenUnsealedProgress: one progress frame between blocks, whose committed
// ts is above its flushed ts.
var goldenUnsealedProgress = []goldenProgress{
	{18, 400_000_000_000_000_764, 400_000_000_000_000_772, []SpanTs{{101, 400_000_000_000_000_772}, {212, 400_000_000_000_000_764}, {213, 400_000_000_000_000_767}}},
}

// goldenSealedProgressV3 and goldenUnsealedProgressV3 are the progress
// frames of the version-3 goldens (sealed-v3.seg, unsealed-torn-v3.seg),
// which the last version-3 build wrote: no committed ts, which reads as
// each frame's chain max ts.
var (
	goldenSealedProgressV3 = []goldenProgress{
		{0, 400_000_000_000_000_700, 0, nil},
		{9, 400_000_000_000_000_757, 0, []SpanTs{{101, 400_000_000_000_000_757}, {204, 400_000_000_000_000_748}}},
		{21, 400_000_000_000_000_776, 0, []SpanTs{{101, 400_000_000_000_000_777}}},
		{21, 400_000_000_000_000_777, 0, []SpanTs{{101, 400_000_000_000_000_777}, {204, 400_000_000_000_000_777}, {212, 400_000_000_000_000_777}}},
	}
	goldenUnsealedProgressV3 = []goldenProgress{
		{18, 400_000_000_000_000_772, 0, []SpanTs{{101, 400_000_000_000_000_772}, {212, 400_000_000_000_000_764}, {213, 400_000_000_000_000_767}}},
	}
)

// goldenUnsealedV3Whole is how many records unsealed-torn-v3.seg holds in
// whole blocks (the 36th is in the torn one).
const goldenUnsealedV3Whole = 35

// writeGolden writes recs as writeSegment does, with progress frames (those
// before len(recs) after the last record).
func writeGolden(t testing.TB, hdr Header, opts *WriterOptions, recs []rec, progress []goldenProgress, seal bool, flushAt ...int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, hdr, opts)
	if err != nil {
		t.Fatal(err)
	}
	emit := func(i int) {
		for _, p := range progress {
			if p.before == i {
				if _, err := w.AppendProgressCommitted(p.flushedTs, p.committed(), p.spans); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for i, r := range recs {
		if slices.Contains(flushAt, i) {
			if err := w.FlushBlock(); err != nil {
				t.Fatal(err)
			}
		}
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
	return buf.Bytes()
}

// goldenSealed is a small sealed lz4 segment: header, blocks (one of them
// raw) with progress frames among them, footer, trailer.
func goldenSealed(t testing.TB) []byte {
	return writeGolden(t, goldenHeader(CompressionLZ4), &WriterOptions{BlockSize: 900}, goldenRecords(), goldenSealedProgress, true, 20, 21)
}

// goldenUnsealed is an unsealed segment without compression whose last block
// was cut short, as a crash leaves the active segment; its header carries
// FlagStaged (its blocks after the progress frame are above the frame's
// committed ts). It returns the data and how many records are in its whole
// blocks.
func goldenUnsealed(t testing.TB) ([]byte, int) {
	recs := goldenRecords()
	hdr := goldenHeader(CompressionNone)
	hdr.Flags = FlagStaged
	data := writeGolden(t, hdr, &WriterOptions{BlockSize: 700}, recs, goldenUnsealedProgress, false)
	rc, err := Recover(bytes.NewReader(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	last := rc.Blocks[len(rc.Blocks)-1]
	return data[:last.Offset+int64(last.Length)/2], len(recs) - last.Records
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGolden -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: output differs from the golden file at byte %d (got %d bytes, golden %d); if the format changed on purpose, bump FormatVersion or run with -update and explain why in the commit",
			path, i, len(got), len(want))
	}
}

func TestGolden(t *testing.T) {
	sealed := goldenSealed(t)
	checkGolden(t, "sealed.seg", sealed)
	checkGolden(t, "sealed.txt", []byte(dump(t, sealed)))
	unsealed, whole := goldenUnsealed(t)
	checkGolden(t, "unsealed-torn.seg", unsealed)
	checkGolden(t, "unsealed-torn.txt", []byte(dump(t, unsealed)))

	// sealed-v2.seg was written by the last version-2 build (it is the
	// version-2 sealed.seg): version-2 segments, without progress frames,
	// must still read, through both paths.
	v2, err := os.ReadFile(filepath.Join("testdata", "sealed-v2.seg"))
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "sealed-v2.txt", []byte(dump(t, v2)))
	if got, r, err := readAll(v2); err != nil || r.Header().Version != 2 {
		t.Fatalf("sealed-v2.seg: Reader: %v", err)
	} else {
		requireRecs(t, "sealed-v2.seg", got, goldenRecords())
	}
	if got, s, err := scanAll(v2, &ScannerOptions{RequireSealed: true}); err != nil || len(s.Progress()) != 0 {
		t.Fatalf("sealed-v2.seg: Scanner: %v", err)
	} else {
		requireRecs(t, "sealed-v2.seg (scanned)", got, goldenRecords())
	}

	// The files on disk, not just today's writer, must read back: this is
	// what catches a reader that stops understanding old segments.
	// sealed-v3.seg and unsealed-torn-v3.seg were written by the last
	// version-3 build (they are the version-3 sealed.seg and
	// unsealed-torn.seg): their dumps must not change, and their progress
	// frames read with the committed ts a version-3 frame has, its chain
	// max ts.
	for _, name := range []string{"sealed-v3", "unsealed-torn-v3"} {
		data, err := os.ReadFile(filepath.Join("testdata", name+".seg"))
		if err != nil {
			t.Fatal(err)
		}
		checkGolden(t, name+".txt", []byte(dump(t, data)))
	}
	checkGoldenSealed(t, "sealed.seg", FormatVersion, 0, goldenSealedProgress)
	checkGoldenSealed(t, "sealed-v3.seg", 3, 0, goldenSealedProgressV3)
	checkGoldenUnsealed(t, "unsealed-torn.seg", FormatVersion, FlagStaged, whole, goldenUnsealedProgress)
	checkGoldenUnsealed(t, "unsealed-torn-v3.seg", 3, 0, goldenUnsealedV3Whole, goldenUnsealedProgressV3)
}

// requireGoldenProgress checks the progress frames read from a golden of
// the given version against what its writer was given: a version-3 frame's
// committed ts is its chain max ts, a later one's what was given.
func requireGoldenProgress(t testing.TB, what string, version uint16, got []ProgressInfo, want []goldenProgress) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d progress frames, want %d", what, len(got), len(want))
	}
	for i, p := range got {
		g := want[i]
		committed := g.committed()
		if version < 4 {
			committed = p.ChainMaxTs
		}
		if p.FlushedTs != g.flushedTs || p.CommittedTs != committed || !slices.Equal(p.Spans, g.spans) || p.Length != progressSize(len(g.spans), version) {
			t.Fatalf("%s: progress frame %d is %+v, want %+v (committed ts %d, %d bytes)", what, i, p, g, committed, progressSize(len(g.spans), version))
		}
	}
}

// checkGoldenSealed reads the sealed golden testdata/name through both
// paths: its header, records, raw and lz4 blocks, and progress frames (by
// the Scanner and by Reader.ProgressBefore).
func checkGoldenSealed(t *testing.T, name string, version uint16, flags Flags, progress []goldenProgress) {
	t.Helper()
	want := goldenRecords()
	file, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	got, r, err := readAll(file)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if h := r.Header(); h.Version != version || h.Flags != flags {
		t.Fatalf("%s: header version %d flags %#02x, want %d and %#02x", name, h.Version, h.Flags, version, flags)
	}
	requireRecs(t, name, got, want)
	raw := 0
	var before []ProgressInfo
	for i := range r.Footer().Blocks {
		ps, err := r.ProgressBefore(i)
		if err != nil {
			t.Fatalf("%s: progress before block %d: %v", name, i, err)
		}
		before = append(before, ps...)
		b, err := r.ReadBlock(i)
		if err != nil {
			t.Fatal(err)
		}
		if b.Codec == CompressionNone {
			raw++
		}
	}
	ps, err := r.ProgressBefore(len(r.Footer().Blocks))
	if err != nil {
		t.Fatalf("%s: progress before the footer: %v", name, err)
	}
	before = append(before, ps...)
	requireGoldenProgress(t, name+" (Reader)", version, before, progress)
	if raw == 0 || raw == len(r.Footer().Blocks) {
		t.Fatalf("%s has %d raw blocks of %d: want both kinds", name, raw, len(r.Footer().Blocks))
	}
	got, s, err := scanAll(file, &ScannerOptions{RequireSealed: true})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	requireRecs(t, name+" (scanned)", got, want)
	requireGoldenProgress(t, name+" (scanned)", version, s.Progress(), progress)
}

// checkGoldenUnsealed scans the torn unsealed golden testdata/name.
func checkGoldenUnsealed(t *testing.T, name string, version uint16, flags Flags, whole int, progress []goldenProgress) {
	t.Helper()
	file, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	got, s, err := scanAll(file, nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if h, _ := s.Header(); h.Version != version || h.Flags != flags {
		t.Fatalf("%s: header version %d flags %#02x, want %d and %#02x", name, h.Version, h.Flags, version, flags)
	}
	requireRecs(t, name, got, goldenRecords()[:whole])
	requireGoldenProgress(t, name, version, s.Progress(), progress)
	if !s.Torn() || s.Sealed() || s.ValidSize() >= int64(len(file)) || s.ValidSize() != boundaries(s.Blocks())[len(s.Blocks())] {
		t.Fatalf("%s: torn %v sealed %v valid size %d of %d", name, s.Torn(), s.Sealed(), s.ValidSize(), len(file))
	}
}

// dump describes a segment structure by structure, for the golden .txt files
// that let a reviewer see what the bytes hold.
func dump(t testing.TB, data []byte) string {
	var b strings.Builder
	s := NewScanner(bytes.NewReader(data), nil)
	h, err := s.Header()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "header @0 (%d bytes): version %d, log %q, writer %q, epoch %d, seq %d, compression %v, created %s\n",
		HeaderSize, h.Version, h.LogID, h.WriterID, h.Epoch, h.Seq, h.Compression, h.Created.Format("2006-01-02T15:04:05.999999999Z07:00"))
	if h.Version >= 4 {
		fmt.Fprintf(&b, "  flags @%d: %#02x%s\n", hFlags, uint8(h.Flags), describeFlags(h.Flags))
	}
	fmt.Fprintf(&b, "  link @%d: prev seq %d, prev chain max ts %d, prev header CRC %#08x, prev footer CRC %#08x\n",
		hPrevSeq, h.Link.PrevSeq, h.Link.PrevMaxTs, h.Link.PrevHeaderCRC, h.Link.PrevFooterCRC)
	fmt.Fprintf(&b, "  header CRC @%d: %#08x (the segment's digest)\n", hCRC, h.CRC)
	shown := 0
	showProgress := func() {
		for _, p := range s.Progress()[shown:] {
			if h.Version >= 4 {
				fmt.Fprintf(&b, "progress @%d (%d bytes, after %d blocks): flushed ts %d, chain max ts %d, committed ts %d, %d spans\n",
					p.Offset, p.Length, p.Blocks, p.FlushedTs, p.ChainMaxTs, p.CommittedTs, len(p.Spans))
			} else {
				fmt.Fprintf(&b, "progress @%d (%d bytes, after %d blocks): flushed ts %d, chain max ts %d, %d spans\n",
					p.Offset, p.Length, p.Blocks, p.FlushedTs, p.ChainMaxTs, len(p.Spans))
			}
			for _, sp := range p.Spans {
				fmt.Fprintf(&b, "  span %d: ts %d\n", sp.Span, sp.Ts)
			}
			fmt.Fprintf(&b, "  progress CRC @%d: %#08x\n", p.End()-progressCRCSize, le.Uint32(data[p.End()-progressCRCSize:]))
		}
		shown = len(s.Progress())
	}
	for {
		blk, err := s.NextBlock()
		showProgress()
		if err != nil {
			if err != io.EOF {
				t.Fatal(err)
			}
			break
		}
		i := blk.Info
		fmt.Fprintf(&b, "block @%d (%d bytes, %v, %d uncompressed): %d records, %d DDLs, ts [%d, %d]\n",
			i.Offset, i.Length, blk.Codec, i.Uncompressed, i.Records, i.DDLs, i.MinTs, i.MaxTs)
		for r, ok := blk.Next(); ok; r, ok = blk.Next() {
			fmt.Fprintf(&b, "  %d %v %d bytes: %s\n", r.CommitTs, r.Kind, len(r.Payload), describeEvent(t, r))
		}
	}
	if s.Sealed() {
		f := s.Footer()
		end := s.ValidSize() - TrailerSize
		fmt.Fprintf(&b, "footer @%d (%d bytes): %d blocks, %d records, %d rows, %d DDLs, ts [%d, %d], %d uncompressed bytes\n",
			end-int64(footerSize(len(f.Blocks))), footerSize(len(f.Blocks)), len(f.Blocks), f.Records, f.Rows, f.DDLs, f.MinTs, f.MaxTs, f.Uncompressed)
		fmt.Fprintf(&b, "  footer CRC @%d: %#08x (a successor's prev footer CRC)\n", end-footerCRCSize, f.CRC)
		fmt.Fprintf(&b, "trailer @%d (%d bytes): footer at %d, %d bytes, version %d\n", end, TrailerSize,
			end-int64(footerSize(len(f.Blocks))), footerSize(len(f.Blocks)), h.Version)
	} else {
		fmt.Fprintf(&b, "unsealed: valid size %d, torn tail of %d bytes\n", s.ValidSize(), s.TornBytes())
	}
	return b.String()
}

// describeFlags names the header flags set in f, for dumps.
func describeFlags(f Flags) string {
	var names []string
	if f&FlagStaged != 0 {
		names = append(names, "staged")
	}
	if f&FlagCatchUp != 0 {
		names = append(names, "catch-up")
	}
	if len(names) == 0 {
		return ""
	}
	return " (" + strings.Join(names, ", ") + ")"
}

// TestBitFlips flips every bit of the sealed golden segments (today's and
// the version-3 one), one at a time. Each flip must be detected: an error
// from the ReaderAt path (except in a progress frame, which that path does
// not read: there it must read the records unchanged) and from a scan that
// requires a seal, and from a plain scan either an error or a segment that
// no longer reads as sealed and holds a prefix of the records. Nothing may
// ever read back as different records.
func TestBitFlips(t *testing.T) {
	v3, err := os.ReadFile(filepath.Join("testdata", "sealed-v3.seg"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"v4": goldenSealed(t), "v3": v3} {
		t.Run(name, func(t *testing.T) { checkBitFlips(t, data) })
	}
}

func checkBitFlips(t *testing.T, data []byte) {
	want := goldenRecords()
	rc, err := Recover(bytes.NewReader(data), nil)
	if err != nil || len(rc.Progress) == 0 {
		t.Fatalf("golden: %v, %d progress frames", err, len(rc.Progress))
	}
	inProgress := func(i int) bool {
		for _, p := range rc.Progress {
			if int64(i) >= p.Offset && int64(i) < p.End() {
				return true
			}
		}
		return false
	}
	bad := bytes.Clone(data)
	for bit := range len(data) * 8 {
		i, mask := bit/8, byte(1)<<(bit%8)
		bad[i] ^= mask
		if got, _, err := readAll(bad); inProgress(i) {
			if err != nil || !equalRecs(got, want) {
				t.Fatalf("flip of bit %d (byte %d, in a progress frame): Reader: %v, %d records", bit, i, err, len(got))
			}
		} else if !detected(err) {
			t.Fatalf("flip of bit %d (byte %d): Reader: %v", bit, i, err)
		}
		if _, _, err := scanAll(bad, &ScannerOptions{RequireSealed: true}); !detected(err) {
			t.Fatalf("flip of bit %d (byte %d): Scanner requiring a seal: %v", bit, i, err)
		}
		got, s, err := scanAll(bad, nil)
		switch {
		case err != nil && !detected(err):
			t.Fatalf("flip of bit %d (byte %d): Scanner: unexpected error %v", bit, i, err)
		case err == nil && (s.Sealed() || !equalRecs(got, want[:len(got)])):
			t.Fatalf("flip of bit %d (byte %d): Scanner read %d records, sealed %v", bit, i, len(got), s.Sealed())
		}
		bad[i] ^= mask
	}
}

// TestBitFlipsUnsealed does the same to the torn unsealed golden: a flip may
// move the torn tail earlier, but never yields a record that was not written.
func TestBitFlipsUnsealed(t *testing.T) {
	data, whole := goldenUnsealed(t)
	want := goldenRecords()[:whole]
	bad := bytes.Clone(data)
	for bit := range len(data) * 8 {
		i, mask := bit/8, byte(1)<<(bit%8)
		bad[i] ^= mask
		got, s, err := scanAll(bad, nil)
		switch {
		case err != nil && !detected(err):
			t.Fatalf("flip of bit %d (byte %d): unexpected error %v", bit, i, err)
		case err == nil && (!s.Torn() || len(got) > len(want) || !equalRecs(got, want[:len(got)])):
			t.Fatalf("flip of bit %d (byte %d): read %d records, torn %v", bit, i, len(got), s.Torn())
		}
		bad[i] ^= mask
	}
}

func detected(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnsupportedVersion)
}

// describeEvent decodes a golden record's payload as a codec event and says
// what it holds, failing when its kind or commit ts is not the record's.
func describeEvent(t testing.TB, r Record) string {
	var ev codec.Event
	if err := codec.DecodeEvent(r.Payload, &ev); err != nil {
		t.Fatalf("record at ts %d: payload is not an event: %v", r.CommitTs, err)
	}
	if Kind(ev.Kind) != r.Kind || ev.CommitTs() != r.CommitTs {
		t.Fatalf("record (ts %d, %v) holds an event (ts %d, %v)", r.CommitTs, r.Kind, ev.CommitTs(), ev.Kind)
	}
	if ev.IsDDL() {
		q := ev.DDL.Query
		if len(q) > 40 {
			q = q[:40] + "..."
		}
		return fmt.Sprintf("DDL start ts %d table %d %q", ev.DDL.StartTs, ev.DDL.Table.PhysicalID, q)
	}
	var vals []string
	for _, c := range ev.Row.Columns {
		v := c.Value.String()
		if len(v) > 24 {
			v = v[:24] + "..."
		}
		vals = append(vals, c.Name+"="+v)
	}
	return fmt.Sprintf("%v start ts %d %s.%s (%d) %s", ev.Row.Op(), ev.Row.StartTs, ev.Row.Table.Schema, ev.Row.Table.Name, ev.Row.Table.PhysicalID, strings.Join(vals, " "))
}
