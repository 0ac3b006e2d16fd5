package sqlsink

import (
	"slices"
	"testing"

	"github.com/redokit/redokit/apply"
)

// TestUnsureCommitCountsOnceItLanded: the conflicts of a transaction whose
// commit failed in a way that may have committed it count once a progress
// read shows its marks, and only once; while the progress does not show
// them they do not count. Without this, a doubled row of a table without a
// key, counted by a transaction whose commit answer was lost, went uncounted
// (the differential fuzzer under load, seed 589082627): its retry or the
// rerun finds it landed and writes nothing again.
func TestUnsureCommitCountsOnceItLanded(t *testing.T) {
	s := &SQLSink{}
	tbl := apply.Table{Schema: "s", Name: "t"}
	var c apply.Conflicts
	c.Add(tbl, 0, 0, 2)
	s.stashUnsure([]apply.Mark{{Table: tbl, CommitTs: 100}}, c)

	s.settleUnsure(apply.Progress{Tables: map[apply.Table]uint64{tbl: 99}})
	if got := s.Conflicts().DuplicatedKeyless; got != 0 {
		t.Fatalf("counted %d before the progress showed the transaction", got)
	}
	landed := apply.Progress{Tables: map[apply.Table]uint64{tbl: 100}}
	s.settleUnsure(landed)
	s.settleUnsure(landed)
	if got := s.Conflicts().DuplicatedKeyless; got != 2 {
		t.Fatalf("counted %d once the progress showed the transaction, want 2 (once)", got)
	}
	// A transaction with nothing to count is not kept.
	s.stashUnsure([]apply.Mark{{Table: tbl, CommitTs: 200}}, apply.Conflicts{})
	if len(s.unsure) != 0 {
		t.Fatalf("kept %d unsure transactions with nothing to count", len(s.unsure))
	}
}

// A transient commit failure that did not land is retried; the retry's
// commit, with the same marks, counts what it met, and the failed attempt's
// stash goes: a progress read after the retry shows those marks, and
// settling the stash then would count the transaction twice. A later
// transaction, whose marks only cover the unsure one's, leaves it for the
// progress to settle: the unsure one may have landed.
func TestRetriedUnsureCommitCountsOnce(t *testing.T) {
	s := &SQLSink{}
	tbl := apply.Table{Schema: "s", Name: "t"}
	marks := []apply.Mark{{Table: tbl, CommitTs: 100}}
	var c apply.Conflicts
	c.Add(tbl, 1, 0, 2)
	s.stashUnsure(marks, c)
	s.committed(slices.Clone(marks), c) // the retry
	s.settleUnsure(apply.Progress{Tables: map[apply.Table]uint64{tbl: 100}})
	if got := s.Conflicts(); got.DuplicatedKeyless != 2 || got.Replaced != 1 {
		t.Fatalf("counted %+v for a retried transaction, want it once (2 keyless, 1 replaced)", got)
	}

	s = &SQLSink{}
	s.stashUnsure(marks, c)
	s.committed([]apply.Mark{{Table: tbl, CommitTs: 200}}, apply.Conflicts{}) // a later transaction
	s.settleUnsure(apply.Progress{Tables: map[apply.Table]uint64{tbl: 200}})
	if got := s.Conflicts().DuplicatedKeyless; got != 2 {
		t.Fatalf("counted %d keyless duplicates of an unsure transaction a later one followed, want 2", got)
	}
}
