package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// rec is a record owned by the test (Record's payload is only borrowed).
type rec struct {
	ts      uint64
	kind    Kind
	payload []byte
}

func (r rec) String() string { return fmt.Sprintf("{%d %v %dB}", r.ts, r.kind, len(r.payload)) }

func own(r Record) rec {
	return rec{ts: r.CommitTs, kind: r.Kind, payload: bytes.Clone(r.Payload)}
}

var fixedCreated = time.Date(2025, 1, 2, 3, 4, 5, 6789, time.UTC)

func testHeader(c Compression) Header {
	return Header{
		LogID: "changefeed-1", WriterID: "capture_10.0.0.7-8300", Epoch: 7, Seq: 42,
		Compression: c, Created: fixedCreated,
	}
}

// Vocabulary of the synthetic rows: an orders table as a CDC system sees it.
var (
	firstNames = []string{"ada", "alan", "grace", "edsger", "barbara", "donald", "margaret", "ken", "dennis", "frances", "john", "leslie"}
	lastNames  = []string{"lovelace", "turing", "hopper", "dijkstra", "liskov", "knuth", "hamilton", "thompson", "ritchie", "allen", "backus", "lamport"}
	statuses   = []string{"pending", "paid", "shipped", "delivered", "cancelled", "refunded"}
	streets    = []string{"Main Street", "Station Road", "Church Lane", "Park Avenue", "High Street", "Mill Road"}
	cities     = []string{"Springfield", "Shelbyville", "Ogdenville", "North Haverbrook", "Capital City"}
	words      = []string{"please", "deliver", "before", "noon", "leave", "at", "door", "gift", "wrap", "fragile", "call", "on", "arrival", "backorder", "express", "second", "attempt"}
	columns    = []string{"id", "customer_id", "status", "amount", "currency", "email", "address", "created_at", "updated_at", "note"}
)

// rowPayload appends a synthetic encoded row change of about 300 bytes: a
// table name, an operation, then (column name, type, value) triples with
// integers, decimals as text, timestamps, emails and free text, the mix a
// codec produces for a typical OLTP row. Not random bytes: lz4's ratio on it
// says something about real logs.
func rowPayload(rng *rand.Rand, id uint64, dst []byte) []byte {
	dst = append(dst, "\x05shop\x06orders"...)
	dst = append(dst, byte(1+rng.IntN(3)))
	col := func(i int, typ byte) {
		dst = append(dst, byte(len(columns[i])))
		dst = append(dst, columns[i]...)
		dst = append(dst, typ)
	}
	str := func(s []byte) {
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	}
	var tmp [128]byte
	col(0, 8)
	dst = binary.AppendVarint(dst, int64(id))
	col(1, 8)
	dst = binary.AppendVarint(dst, int64(rng.IntN(1_000_000)))
	col(2, 15)
	str([]byte(statuses[rng.IntN(len(statuses))]))
	col(3, 246)
	str(fmt.Appendf(tmp[:0], "%d.%02d", rng.IntN(100000), rng.IntN(100)))
	col(4, 254)
	str([]byte([]string{"EUR", "USD", "GBP"}[rng.IntN(3)]))
	first, last := firstNames[rng.IntN(len(firstNames))], lastNames[rng.IntN(len(lastNames))]
	col(5, 15)
	str(fmt.Appendf(tmp[:0], "%s.%s%d@example.com", first, last, rng.IntN(100)))
	col(6, 15)
	str(fmt.Appendf(tmp[:0], "%d %s, %s %05d", 1+rng.IntN(999), streets[rng.IntN(len(streets))], cities[rng.IntN(len(cities))], rng.IntN(100000)))
	ts := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(int64(365 * 24 * time.Hour))))
	col(7, 7)
	str(ts.AppendFormat(tmp[:0], "2006-01-02 15:04:05.000000"))
	col(8, 7)
	str(ts.Add(time.Duration(rng.Int64N(int64(48*time.Hour)))).AppendFormat(tmp[:0], "2006-01-02 15:04:05.000000"))
	col(9, 252)
	note := tmp[:0]
	for n := 3 + rng.IntN(10); n > 0; n-- {
		note = append(note, words[rng.IntN(len(words))]...)
		note = append(note, ' ')
	}
	str(note)
	return dst
}

// genRecords makes n records in commit-ts order: ts steps of 0 to 3 (so
// several records share a ts), one DDL in about 25, row payloads from
// rowPayload or, with small, short ones.
func genRecords(seed uint64, n int, small bool) []rec {
	rng := rand.New(rand.NewPCG(seed, 0x5e6))
	recs := make([]rec, n)
	ts := uint64(400_000_000_000_000_000) + rng.Uint64N(1000)
	for i := range recs {
		ts += rng.Uint64N(4)
		r := rec{ts: ts, kind: KindRow}
		switch {
		case rng.IntN(25) == 0:
			r.kind = KindDDL
			r.payload = fmt.Appendf(nil, "ALTER TABLE shop.orders ADD COLUMN c%d INT", i)
		case small:
			r.payload = fmt.Appendf(nil, "row %d status=%s amount=%d", i, statuses[rng.IntN(len(statuses))], rng.IntN(1000))
		default:
			r.payload = rowPayload(rng, uint64(i), nil)
		}
		recs[i] = r
	}
	return recs
}

// writeSegment writes recs, calling FlushBlock before the records whose index
// is in flushAt, and seals when seal is set.
func writeSegment(t testing.TB, hdr Header, opts *WriterOptions, recs []rec, seal bool, flushAt ...int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, hdr, opts)
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, w, recs, 0, flushAt...)
	if seal {
		if _, err := w.Seal(); err != nil {
			t.Fatal(err)
		}
	} else if err := w.FlushBlock(); err != nil {
		t.Fatal(err)
	}
	if int64(buf.Len()) != w.Offset() {
		t.Fatalf("Offset() = %d, wrote %d bytes", w.Offset(), buf.Len())
	}
	return buf.Bytes()
}

func appendAll(t testing.TB, w *Writer, recs []rec, base int, flushAt ...int) {
	t.Helper()
	for i, r := range recs {
		for _, f := range flushAt {
			if f == base+i {
				if err := w.FlushBlock(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := w.Append(r.ts, r.kind, r.payload); err != nil {
			t.Fatalf("append record %d: %v", base+i, err)
		}
	}
}

// openTestdata reads testdata/name, a sealed segment, and opens a Reader on
// it.
func openTestdata(t testing.TB, name string) ([]byte, *Reader) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
	if err != nil {
		t.Fatal(err)
	}
	return data, r
}

// readAll reads a sealed segment through the ReaderAt path.
func readAll(data []byte) ([]rec, *Reader, error) {
	r, err := NewReader(bytes.NewReader(data), int64(len(data)), &ReaderOptions{Object: "test.seg"})
	if err != nil {
		return nil, nil, err
	}
	out, err := collect(r)
	return out, r, err
}

// scanAll reads a segment through the stream path.
func scanAll(data []byte, opts *ScannerOptions) ([]rec, *Scanner, error) {
	s := NewScanner(bytes.NewReader(data), opts)
	out, err := collect(s)
	return out, s, err
}

// collect reads records until io.EOF: those read, and the error that stopped
// it (nil at io.EOF).
func collect(r interface{ Next() (Record, error) }) ([]rec, error) {
	var out []rec
	for {
		x, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, own(x))
	}
}

// mustCollect is collect, failing the test on an error.
func mustCollect(t testing.TB, r interface{ Next() (Record, error) }) []rec {
	t.Helper()
	out, err := collect(r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func equalRecs(a, b []rec) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ts != b[i].ts || a[i].kind != b[i].kind || !bytes.Equal(a[i].payload, b[i].payload) {
			return false
		}
	}
	return true
}

func requireRecs(t testing.TB, what string, got, want []rec) {
	t.Helper()
	if equalRecs(got, want) {
		return
	}
	if len(got) != len(want) {
		t.Fatalf("%s: got %d records, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i].ts != want[i].ts || got[i].kind != want[i].kind || !bytes.Equal(got[i].payload, want[i].payload) {
			t.Fatalf("%s: record %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

func requireCorrupt(t testing.TB, what string, err error) *CorruptionError {
	t.Helper()
	var ce *CorruptionError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("%s: got %v, want a *CorruptionError", what, err)
	}
	return ce
}

// boundaries lists the offsets at which data's frames end, as the footer
// index of the sealed version would say.
func boundaries(blocks []BlockInfo) []int64 {
	b := []int64{HeaderSize}
	for _, x := range blocks {
		b = append(b, x.End())
	}
	return b
}
