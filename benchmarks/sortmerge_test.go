package main

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/benchmarks/internal/msgpbench"
	"github.com/redokit/redokit/testkit/bench"
)

// The sort-then-merge baseline must read exactly the events redokit's
// reader reads, in commit-ts order, or the read cells' ratio compares
// different work; and the digest must notice when it does not.
func TestSortMergeReadsWhatTheReaderReads(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b, err := local.New(t.TempDir(), &local.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	lw, err := buildLog(ctx, b, "read", readCell(3, 1))
	if err != nil {
		t.Fatal(err)
	}
	want, err := readDecoded(ctx, b, "read", lw.maxTs)
	if err != nil {
		t.Fatal(err)
	}
	if want.rows != lw.rows || want.outOfOrder != 0 {
		t.Fatalf("reader: %d rows (%d out of order), the writers made %d", want.rows, want.outOfOrder, lw.rows)
	}
	got, st, err := sortMergeRead(ctx, b, "read", 0, lw.maxTs, filepath.Join(dir, "sortmerge"))
	if err != nil {
		t.Fatal(err)
	}
	if err := got.sameAs(want); err != nil {
		t.Fatal(err)
	}
	if st.objects == 0 || st.sortedBytes == 0 {
		t.Fatalf("stats %+v", st)
	}

	// A narrower range reads fewer events: the check fails.
	short, _, err := sortMergeRead(ctx, b, "read", 0, lw.maxTs-1, filepath.Join(dir, "short"))
	if err != nil {
		t.Fatal(err)
	}
	if short.sameAs(want) == nil {
		t.Fatal("a read without the last commit ts passed as the reader's")
	}
	// The same count and ts, another event: the check fails.
	other := *got
	other.idSum++
	if other.sameAs(want) == nil {
		t.Fatal("other events passed as the reader's")
	}

	// The TiCDC-format variant: the log's events converted into TiCDC's
	// files (msgp records, lz4), read by the same model, decoded with msgp:
	// the same events, in the same order, by the same digest.
	tdir := filepath.Join(dir, "ticdc")
	tf, err := convertToTicdc(ctx, b, "read", lw.maxTs, tdir)
	if err != nil {
		t.Fatal(err)
	}
	if tf.rows != lw.rows || tf.files < 3 || tf.msgpBytes == 0 || tf.stored == 0 || tf.stored >= tf.msgpBytes {
		t.Fatalf("converted %+v, the writers made %d rows (3 writers: a file each at least, lz4 smaller)", tf, lw.rows)
	}
	tgot, tst, err := ticdcSortMergeRead(tdir, 0, lw.maxTs, filepath.Join(dir, "ticdcmerge"))
	if err != nil {
		t.Fatal(err)
	}
	if err := tgot.sameAs(want); err != nil {
		t.Fatal(err)
	}
	if *tgot != *got {
		t.Fatalf("the two variants' digests differ: %+v, %+v", *tgot, *got)
	}
	if tst.objects != tf.files || tst.sortedBytes == 0 {
		t.Fatalf("stats %+v, %d files converted", tst, tf.files)
	}
	// Narrower at either end: the check fails.
	tshort, _, err := ticdcSortMergeRead(tdir, 0, lw.maxTs-1, filepath.Join(dir, "tshort"))
	if err != nil {
		t.Fatal(err)
	}
	if tshort.sameAs(want) == nil {
		t.Fatal("a TiCDC-format read without the last commit ts passed as the reader's")
	}
	tlate, _, err := ticdcSortMergeRead(tdir, bench.TsBase+1, lw.maxTs, filepath.Join(dir, "tlate"))
	if err != nil {
		t.Fatal(err)
	}
	if tlate.sameAs(want) == nil || tlate.events >= want.events {
		t.Fatal("a TiCDC-format read without the first commit ts passed as the reader's")
	}
}

// A TiCDC frame decodes back to the record it was made of, through both
// decoders (whole file in memory, and a stream), and its padding keeps
// frames 8-byte aligned.
func TestTicdcFrameRoundTrips(t *testing.T) {
	ev := makeRow10(rand.New(rand.NewPCG(1, 2)), 300)
	stamp(&ev, 7)
	rl := msgpbench.FromEvent(&ev)
	var file []byte
	var n int
	for range 3 {
		file, n = appendTicdcFrame(file, rl)
	}
	if len(file)%8 != 0 || n != len(msgpbench.Append(nil, rl)) {
		t.Fatalf("3 frames of %d bytes: %d bytes", n, len(file))
	}
	var want, got, fromStream eventDigest
	want.add(&ev)
	rest := file
	for range 3 {
		var rec []byte
		var err error
		if rec, rest, err = nextTicdcFrame(rest); err != nil {
			t.Fatal(err)
		}
		var back msgpbench.RedoLog
		if err := unmarshalTicdcRecord(rec, &back); err != nil {
			t.Fatal(err)
		}
		got.addRedoLog(&back)
	}
	if _, _, err := nextTicdcFrame(rest); err != io.EOF {
		t.Fatalf("after the last frame: %v", err)
	}
	r := bytes.NewReader(file)
	var buf []byte
	for {
		var rec []byte
		var err error
		buf, rec, err = readTicdcFrame(r, buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var back msgpbench.RedoLog
		if err := unmarshalTicdcRecord(rec, &back); err != nil {
			t.Fatal(err)
		}
		fromStream.addRedoLog(&back)
	}
	if got.events != 3 || got != fromStream || got.idSum != 3*want.idSum {
		t.Fatalf("digests: %+v from memory, %+v from a stream, one event %+v", got, fromStream, want)
	}
	torn := file[:len(file)-1]
	var err error
	for err == nil {
		_, torn, err = nextTicdcFrame(torn)
	}
	if err == io.EOF {
		t.Fatal("a torn last frame read as the end of the file")
	}
}

// A read cell (a tiny one) runs both sort-then-merge variants on its log,
// checks them and reports their figures beside redokit's.
func TestReadCellRunsBothBaselines(t *testing.T) {
	dir := t.TempDir()
	in := childInput{Cell: readCell(2, 1), Backend: &Backend{Name: "local-nosync", Kind: "local", NoSync: true}, Dir: dir}
	res := newResult()
	if err := runReadCell(context.Background(), in, res); err != nil {
		t.Fatal(err)
	}
	m := res.Metrics
	for _, k := range []string{"read_rows_s", "sortmerge_rows_s", "ticdcmerge_rows_s", "ratio_read_sortmerge", "ratio_read_ticdcmerge",
		"sortmerge_rss_mib", "ticdcmerge_rss_mib", "ratio_rss_ticdcmerge_read", "ticdc_files", "ticdc_stored_mib", "ticdcmerge_sorted_mib"} {
		if !(m[k] > 0) {
			t.Errorf("%s = %v", k, m[k])
		}
	}
	if m["ticdc_msgp_mib"] <= m["ticdc_stored_mib"] {
		t.Errorf("TiCDC-format files: %v MiB of records stored in %v MiB (lz4)", m["ticdc_msgp_mib"], m["ticdc_stored_mib"])
	}
}
