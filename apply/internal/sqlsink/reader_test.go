package sqlsink_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/sqlsink"
	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/segment"
)

// writeSegment stores events (in commit-ts order) as one sealed segment of
// writer w.
func writeSegment(t *testing.T, b *blob.Bucket, logID, w string, seq uint64, events []*codec.Event) {
	t.Helper()
	h := segment.Header{LogID: logID, WriterID: w, Epoch: 1, Seq: seq, Compression: segment.CompressionLZ4,
		Created: time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)}
	var out bytes.Buffer
	sw, err := segment.NewWriter(&out, h, &segment.WriterOptions{BlockSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	var buf []byte
	for _, ev := range events {
		k := segment.KindRow
		if ev.IsDDL() {
			k = segment.KindDDL
		}
		buf = codec.AppendEvent(buf[:0], ev)
		if err := sw.Append(ev.CommitTs(), k, buf); err != nil {
			t.Fatal(err)
		}
	}
	f, err := sw.Seal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(context.Background(), h.SealedName(f.MinTs, f.MaxTs).Format(), out.Bytes(), &blob.PutOptions{IfNotExist: true}); err != nil {
		t.Fatal(err)
	}
}

// TestFromReader applies a log through the ordered reader, whose
// CodecEvents is a Source: the workload split over two writers, plus a third that wrote a
// stretch of it again (a failover rewrite, which the reader drops).
func TestFromReader(t *testing.T) {
	e := newEnv(t, sqlsink.SQLite)
	w := newWorkload(4, e.schema, 200)
	b := mem.New()
	t.Cleanup(func() { b.Close() })
	const logID = "cf-apply"
	half := len(w.events) / 2
	for half < len(w.events) && w.events[half].CommitTs() == w.events[half-1].CommitTs() {
		half++
	}
	writeSegment(t, b, logID, "w1", 1, w.events[:half])
	writeSegment(t, b, logID, "w2", 1, w.events[half:])
	writeSegment(t, b, logID, "w3", 1, w.events[half/2:half])

	ctx := context.Background()
	r, err := reader.Open(ctx, b, &reader.Options{LogID: logID, StartTs: 0, EndTs: w.ts})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	res, err := apply.Run(ctx, r.CodecEvents(ctx), e.open(nil), &apply.Options{BatchRows: 16, TxnRows: 100})
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(e.dumpAll(workloadTables...), w.want()); d != "" {
		t.Fatalf("applied through the reader:\n%s", d)
	}
	if st := r.Stats(); st.Duplicates == 0 || res.Events != int64(len(w.events)) {
		t.Errorf("reader dropped %d duplicates; apply read %d events of %d", st.Duplicates, res.Events, len(w.events))
	}
}
