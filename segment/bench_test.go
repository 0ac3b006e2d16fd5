package segment

import (
	"bytes"
	"io"
	"testing"

	"github.com/pierrec/lz4/v4"
)

// benchRecords are about 20,000 synthetic row changes of ~300 bytes each,
// with a DDL now and then: the shape of a busy table's redo.
var benchRecords = genRecords(42, 20000, false)

func payloadBytes(recs []rec) int64 {
	var n int64
	for _, r := range recs {
		n += int64(len(r.payload))
	}
	return n
}

// benchBlock is one DefaultBlockSize block of encoded records, as the writer
// hands it to lz4.
func benchBlock() []byte {
	var ub []byte
	prev := benchRecords[0].ts
	for _, r := range benchRecords {
		next := appendRecord(ub, r.ts-prev, r.kind, r.payload)
		if len(next) > DefaultBlockSize {
			break
		}
		ub, prev = next, r.ts
	}
	return ub
}

func BenchmarkLZ4Block(b *testing.B) {
	raw := benchBlock()
	var c lz4.Compressor
	comp := make([]byte, lz4.CompressBlockBound(len(raw)))
	n, err := c.CompressBlock(raw, comp)
	if err != nil || n == 0 {
		b.Fatal(n, err)
	}
	comp = comp[:n]
	ratio := float64(len(raw)) / float64(n)
	b.Run("compress", func(b *testing.B) {
		dst := make([]byte, len(raw))
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.CompressBlock(raw, dst); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(ratio, "ratio")
	})
	b.Run("decompress", func(b *testing.B) {
		dst := make([]byte, len(raw))
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := lz4.UncompressBlock(comp, dst); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(ratio, "ratio")
	})
}

// BenchmarkWrite writes and seals a segment of benchRecords into a reused
// buffer; MB/s are of record payload, and ratio is payload bytes over
// segment bytes.
func BenchmarkWrite(b *testing.B) {
	for _, c := range []Compression{CompressionNone, CompressionLZ4} {
		b.Run(c.String(), func(b *testing.B) {
			var buf bytes.Buffer
			b.SetBytes(payloadBytes(benchRecords))
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				w, err := NewWriter(&buf, testHeader(c), nil)
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range benchRecords {
					if err := w.Append(r.ts, r.kind, r.payload); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := w.Seal(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(payloadBytes(benchRecords))/float64(buf.Len()), "ratio")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(benchRecords)), "ns/record")
		})
	}
}

// BenchmarkRead reads every record of a sealed segment through the ReaderAt
// path and the stream path; MB/s are of record payload.
func BenchmarkRead(b *testing.B) {
	for _, c := range []Compression{CompressionNone, CompressionLZ4} {
		data := writeSegment(b, testHeader(c), nil, benchRecords, true)
		b.Run(c.String()+"/reader", func(b *testing.B) {
			b.SetBytes(payloadBytes(benchRecords))
			b.ReportAllocs()
			for b.Loop() {
				r, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
				if err != nil {
					b.Fatal(err)
				}
				drain(b, r.Next)
			}
		})
		b.Run(c.String()+"/scanner", func(b *testing.B) {
			b.SetBytes(payloadBytes(benchRecords))
			b.ReportAllocs()
			for b.Loop() {
				drain(b, NewScanner(bytes.NewReader(data), nil).Next)
			}
		})
	}
}

func drain(b *testing.B, next func() (Record, error)) {
	n := 0
	for {
		_, err := next()
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		n++
	}
	if n != len(benchRecords) {
		b.Fatalf("read %d records, want %d", n, len(benchRecords))
	}
}
