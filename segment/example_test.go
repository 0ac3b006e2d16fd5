package segment_test

import (
	"bytes"
	"fmt"
	"io"
	"time"

	"github.com/redokit/redokit/segment"
)

// Write a sealed segment into memory (as for an object store), then read it
// back from a commit ts on.
func Example() {
	hdr := segment.Header{
		LogID: "orders-cf", WriterID: "capture-1", Epoch: 3, Seq: 1,
		Compression: segment.CompressionLZ4,
		Created:     time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC),
	}
	var buf bytes.Buffer
	w, err := segment.NewWriter(&buf, hdr, nil)
	if err != nil {
		panic(err)
	}
	for ts := uint64(100); ts < 105; ts++ {
		if err := w.Append(ts, segment.KindRow, fmt.Appendf(nil, "row at %d", ts)); err != nil {
			panic(err)
		}
	}
	if err := w.Append(105, segment.KindDDL, []byte("ALTER TABLE t ADD c INT")); err != nil {
		panic(err)
	}
	f, err := w.Seal()
	if err != nil {
		panic(err)
	}
	fmt.Println(hdr.SealedName(f.MinTs, f.MaxTs).Format())

	r, err := segment.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), &segment.ReaderOptions{Object: "example"})
	if err != nil {
		panic(err)
	}
	r.SeekTs(102) // records with commit ts > 102
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			panic(err)
		}
		fmt.Printf("%d %v %s\n", rec.CommitTs, rec.Kind, rec.Payload)
	}
	// Output:
	// orders-cf/seg/capture-1/00000000000000000003-00000000000000000001-00000000000000000100-00000000000000000105.seg
	// 103 row row at 103
	// 104 row row at 104
	// 105 ddl ALTER TABLE t ADD c INT
}

// After a crash, find the valid prefix of the active segment, cut the torn
// tail and carry on appending.
func ExampleRecover() {
	hdr := segment.Header{LogID: "orders-cf", WriterID: "capture-1", Epoch: 3, Seq: 2, Created: time.Unix(0, 0)}
	var file bytes.Buffer
	w, _ := segment.NewWriter(&file, hdr, nil)
	_ = w.Append(200, segment.KindRow, []byte("synced"))
	_ = w.FlushBlock() // the redo writer fsyncs here
	_ = w.Append(201, segment.KindRow, []byte("lost in the crash"))
	_ = w.FlushBlock()
	file.Truncate(file.Len() - 5) // the crash tore the last block

	rc, err := segment.Recover(bytes.NewReader(file.Bytes()), nil)
	if err != nil {
		panic(err)
	}
	fmt.Printf("valid %d bytes, torn tail %d bytes, %d block(s)\n", rc.ValidSize, rc.TornBytes, len(rc.Blocks))

	file.Truncate(int(rc.ValidSize))
	w, err = segment.ResumeWriter(&file, rc.Header, rc.Blocks, rc.Progress, rc.ValidSize, nil)
	if err != nil {
		panic(err)
	}
	_ = w.Append(201, segment.KindRow, []byte("written again"))
	f, _ := w.Seal()
	fmt.Printf("sealed: %d records, ts [%d, %d]\n", f.Records, f.MinTs, f.MaxTs)
	// Output:
	// valid 245 bytes, torn tail 55 bytes, 1 block(s)
	// sealed: 2 records, ts [200, 201]
}
