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
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// goldenRecords are the records of the golden segments: short rows, DDLs,
// runs of one commit ts, and one incompressible payload so that the lz4
// golden also holds a block stored raw.
func goldenRecords() []rec {
	recs := genRecords(2025, 36, true)
	rng := rand.New(rand.NewPCG(7, 7))
	noise := make([]byte, 180)
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	recs[20].payload = noise
	for _, i := range []int{4, 12, 13, 35} {
		recs[i].kind = KindDDL
		recs[i].payload = fmt.Appendf(nil, "CREATE TABLE shop.t%d (id BIGINT PRIMARY KEY, v TEXT)", i)
	}
	return recs
}

// goldenSealed is a small sealed lz4 segment: header, blocks (one of them
// raw), footer, trailer.
func goldenSealed(t testing.TB) []byte {
	return writeSegment(t, testHeader(CompressionLZ4), &WriterOptions{BlockSize: 400}, goldenRecords(), true, 20, 21)
}

// goldenUnsealed is an unsealed segment without compression whose last block
// was cut short, as a crash leaves the active segment. It returns the data
// and how many records are in its whole blocks.
func goldenUnsealed(t testing.TB) ([]byte, int) {
	recs := goldenRecords()
	data := writeSegment(t, testHeader(CompressionNone), &WriterOptions{BlockSize: 300}, recs, false)
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

	// The files on disk, not just today's writer, must read back: this is
	// what catches a reader that stops understanding old segments.
	want := goldenRecords()
	file, err := os.ReadFile(filepath.Join("testdata", "sealed.seg"))
	if err != nil {
		t.Fatal(err)
	}
	got, r, err := readAll(file)
	if err != nil {
		t.Fatal(err)
	}
	requireRecs(t, "sealed.seg", got, want)
	raw := 0
	for i := range r.Footer().Blocks {
		b, err := r.ReadBlock(i)
		if err != nil {
			t.Fatal(err)
		}
		if b.Codec == CompressionNone {
			raw++
		}
	}
	if raw == 0 || raw == len(r.Footer().Blocks) {
		t.Fatalf("sealed.seg has %d raw blocks of %d: want both kinds", raw, len(r.Footer().Blocks))
	}

	file, err = os.ReadFile(filepath.Join("testdata", "unsealed-torn.seg"))
	if err != nil {
		t.Fatal(err)
	}
	got, s, err := scanAll(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	requireRecs(t, "unsealed-torn.seg", got, want[:whole])
	if !s.Torn() || s.Sealed() || s.ValidSize() >= int64(len(file)) || s.ValidSize() != boundaries(s.Blocks())[len(s.Blocks())] {
		t.Fatalf("unsealed-torn.seg: torn %v sealed %v valid size %d of %d", s.Torn(), s.Sealed(), s.ValidSize(), len(file))
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
	for {
		blk, err := s.NextBlock()
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
			p := string(r.Payload)
			if len(p) > 48 {
				p = p[:48] + "..."
			}
			fmt.Fprintf(&b, "  %d %v %d bytes %q\n", r.CommitTs, r.Kind, len(r.Payload), p)
		}
	}
	if s.Sealed() {
		f := s.Footer()
		end := s.ValidSize() - TrailerSize
		fmt.Fprintf(&b, "footer @%d (%d bytes): %d blocks, %d records, %d rows, %d DDLs, ts [%d, %d], %d uncompressed bytes\n",
			end-int64(footerSize(len(f.Blocks))), footerSize(len(f.Blocks)), len(f.Blocks), f.Records, f.Rows, f.DDLs, f.MinTs, f.MaxTs, f.Uncompressed)
		fmt.Fprintf(&b, "trailer @%d (%d bytes)\n", end, TrailerSize)
	} else {
		fmt.Fprintf(&b, "unsealed: valid size %d, torn tail of %d bytes\n", s.ValidSize(), s.TornBytes())
	}
	return b.String()
}

// TestBitFlips flips every bit of the sealed golden segment, one at a time.
// Each flip must be detected: an error from the ReaderAt path and from a
// scan that requires a seal, and from a plain scan either an error or a
// segment that no longer reads as sealed and holds a prefix of the records.
// Nothing may ever read back as different records.
func TestBitFlips(t *testing.T) {
	data := goldenSealed(t)
	want := goldenRecords()
	bad := bytes.Clone(data)
	for bit := range len(data) * 8 {
		i, mask := bit/8, byte(1)<<(bit%8)
		bad[i] ^= mask
		if _, _, err := readAll(bad); !detected(err) {
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
