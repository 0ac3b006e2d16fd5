package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/redokit/redokit/backends/local"
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
}
