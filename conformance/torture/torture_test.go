package torture_test

import (
	"context"
	"os"
	"testing"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/blob/driver"
	"github.com/redokit/redokit/conformance/torture"
)

func runOn(t *testing.T, inner driver.Driver, seed uint64, s blobtest.Schedule, steps int) *torture.Report {
	t.Helper()
	return runQuota(t, inner, seed, s, steps, 0)
}

// runQuota is runOn with the writers' memory quota (Config.MemoryQuota).
func runQuota(t *testing.T, inner driver.Driver, seed uint64, s blobtest.Schedule, steps int, quota int64) *torture.Report {
	t.Helper()
	l := blobtest.NewLiar(inner, s)
	rep, err := torture.Run(context.Background(), torture.Config{Bucket: l.Bucket(), Clean: blob.NewBucket(inner), Liar: l, Seed: seed, Steps: steps, MemoryQuota: quota})
	if rep == nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Log(err)
	}
	t.Logf("%s\nfaults: %s", rep.Verdict(), rep.Faults)
	return rep
}

// TestNoFaults: without faults, on mem and on local disk, the checker finds
// nothing; so what it finds under faults is the faults' doing.
func TestNoFaults(t *testing.T) {
	d, err := local.NewDriver(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, inner := range map[string]driver.Driver{"mem": mem.NewDriver(), "local": d} {
		t.Run(name, func(t *testing.T) {
			rep := runOn(t, inner, 1, blobtest.Schedule{}, 100)
			if rep.Counts.Flushes == 0 || rep.Counts.Reads == 0 || rep.Counts.Failovers == 0 {
				t.Errorf("the run checked too little: %+v", rep.Counts)
			}
			for _, v := range rep.Violations {
				t.Error(v)
			}
		})
	}
}

// TestStagedNoFaults: with staging forced (torture.StageQuota), on mem and
// on local disk, the writers stage (stage cuts storing events above their
// committed ts before they are resolved) and the checker finds nothing:
// every acknowledged event reads back exactly once, and no read returns an
// event a fenced epoch holds above its committed ts. A run that staged
// nothing fails: it did not test what it says.
func TestStagedNoFaults(t *testing.T) {
	d, err := local.NewDriver(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, inner := range map[string]driver.Driver{"mem": mem.NewDriver(), "local": d} {
		t.Run(name, func(t *testing.T) {
			rep := runQuota(t, inner, 3, blobtest.Schedule{}, 100, torture.StageQuota)
			if rep.Counts.Flushes == 0 || rep.Counts.Reads == 0 || rep.Counts.Failovers == 0 {
				t.Errorf("the run checked too little: %+v", rep.Counts)
			}
			if rep.Counts.StageCuts == 0 || rep.Counts.StagedEvents == 0 {
				t.Errorf("staging was forced, but nothing was staged: %s", rep.Staging())
			}
			for _, v := range rep.Violations {
				t.Error(v)
			}
		})
	}
}

// TestCatchesBrokenStores: the checker fails a store that reports success
// for writes it did not keep, and one whose listings skip objects.
func TestCatchesBrokenStores(t *testing.T) {
	for _, b := range []blobtest.Broken{blobtest.BrokenMisreport, blobtest.BrokenListSkip} {
		t.Run(string(b), func(t *testing.T) {
			// Segments only: a misreported state or meta put may heal (its
			// writer reads the object back); a lost segment cannot.
			rep := runOn(t, mem.NewDriver(), 4, blobtest.Schedule{Seed: 4, LostAnswer: 0.1, Kinds: []blobtest.PutKind{blobtest.KindSegment}, Broken: b, ListSkip: 1, SkipRecent: true}, 100)
			if rep.OK() {
				t.Fatalf("the checker passed a broken store (%s)", b)
			}
			t.Logf("caught: %v", rep.BrokenRules())
		})
	}
}

func TestHistoryRoundTrip(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "history")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, l := range []torture.HistoryLine{
		{Kind: "ack", Writer: "w1", Epoch: 1, Spans: []uint64{1}, From: 1000, To: 1001, StageCuts: 4, StagedEvents: 9},
		{Kind: "ack", Writer: "w1", Epoch: 2, Spans: []uint64{1, 3}, From: 1000, To: 1005, StageCuts: 1, StagedEvents: 2, QuotaOvercommits: 1},
		{Kind: "ack", Writer: "w1", Epoch: 2, Spans: []uint64{1, 3}, From: 1000, To: 1010, StageCuts: 3, StagedEvents: 7, QuotaOvercommits: 2},
		{Kind: "faults", Writer: "w1", Incarnation: 1, Faults: map[string]int{"state/fail": 1}},
		{Kind: "violation", Rule: torture.RuleWrongfulFence, Evidence: "x"},
		{Kind: "faults", Writer: "w1", Incarnation: 1, Faults: map[string]int{"state/fail": 2}},
		{Kind: "faults", Writer: "w1", Incarnation: 2, Faults: map[string]int{"state/fail": 5}},
	} {
		if err := torture.WriteHistoryLine(f, l); err != nil {
			t.Fatal(err)
		}
	}
	// A line torn by a kill.
	f.WriteString(`{"kind":"ack","wri`)
	h, err := torture.ReadHistory(f.Name(), f.Name()+".missing")
	if err != nil || len(h.Acks) != 5 || h.Acks[4].Span != 3 || h.Acks[4].To != 1010 || len(h.Violations) != 1 || h.Faults["state/fail"] != 7 {
		t.Fatalf("ReadHistory = %+v, %v", h, err)
	}
	// The stage counts of each epoch are its last ack's, added up.
	if h.StageCuts != 4+3 || h.StagedEvents != 9+7 || h.QuotaOvercommits != 2 {
		t.Fatalf("ReadHistory: %d stage cuts, %d staged events, %d overcommits; want 7, 16, 2", h.StageCuts, h.StagedEvents, h.QuotaOvercommits)
	}
	// A torn line that is not the last is damage.
	f.WriteString("\n{}\n")
	if _, err := torture.ReadHistory(f.Name()); err == nil {
		t.Fatal("a torn line inside the history was accepted")
	}
}
