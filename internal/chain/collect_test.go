package chain

import (
	"slices"
	"testing"
	"time"

	"github.com/redokit/redokit/segment"
)

func sealedName(writer string, epoch, seq, minTs, maxTs uint64) segment.Name {
	return segment.Name{LogID: "log", WriterID: writer, Epoch: epoch, Seq: seq, MinTs: minTs, MaxTs: maxTs}
}

// entries lists names in key order, as a store does.
func entries(names ...segment.Name) []Entry {
	var out []Entry
	for _, n := range names {
		out = append(out, Entry{Key: n.Format(), Name: n})
	}
	slices.SortFunc(out, func(a, b Entry) int {
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
	return out
}

func keys(es []Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Key)
	}
	return out
}

// TestCollectableIsAPrefixOfEachChain (moved from package gc): the rule
// takes, per writer epoch, only the longest prefix of the chain below the
// checkpoint: a segment below it that sits above one that is not waits
// until its predecessor goes, so that the chain above what is deleted has
// no hole and its lowest link proves what is gone was below the
// checkpoint.
func TestCollectableIsAPrefixOfEachChain(t *testing.T) {
	a1 := sealedName("a", 1, 1, 1, 10)
	a2 := sealedName("a", 1, 2, 11, 100) // above the checkpoint
	a3 := sealedName("a", 1, 3, 5, 20)   // catch-up: below it, but above a2
	a4 := sealedName("a", 1, 4, 101, 110)
	// Epoch 2 of the same writer has its own chain: its first segment
	// starts a new prefix.
	a5 := sealedName("a", 2, 5, 1, 30)
	a6 := sealedName("a", 2, 6, 31, 40)
	// A gap in the listing ends the prefix: b3 is missing, b4 stays.
	b1 := sealedName("b", 1, 1, 1, 10)
	b2 := sealedName("b", 1, 2, 11, 20)
	b4 := sealedName("b", 1, 4, 21, 30)
	// An active segment ends the prefix; the one after it stays.
	c1 := sealedName("c", 1, 1, 1, 10)
	c2 := segment.Name{LogID: "log", WriterID: "c", Epoch: 1, Seq: 2, Active: true}
	c3 := sealedName("c", 1, 3, 11, 20)
	// A chain whose lowest listed seq is not 1 (an earlier cycle deleted
	// the rest) starts its prefix there.
	d7 := sealedName("d", 1, 7, 1, 10)
	d8 := sealedName("d", 1, 8, 11, 20)
	// Strictly below: a segment ending at the checkpoint stays.
	e1 := sealedName("e", 1, 1, 10, 50)
	all := entries(a1, a2, a3, a4, a5, a6, b1, b2, b4, c1, c2, c3, d7, d8, e1)

	gone := Collectable(all, 50)
	if want := keys(entries(a1, a5, a6, b1, b2, c1, d7, d8)); !slices.Equal(keys(gone), want) {
		t.Fatalf("collects\n%v\nwant\n%v", keys(gone), want)
	}
	c := NewCollector(50, 0, time.Time{})
	kept := map[Verdict]int{}
	for _, e := range all {
		kept[c.Add(e.Name, e.ModTime)]++
	}
	if kept[KeepChain] != 3 || kept[Collect] != 8 { // a3, b4, c3
		t.Fatalf("verdicts %v, want 3 kept by their chain", kept)
	}
	// Once the checkpoint passes a2, a3 goes with it. b4 is then the
	// lowest segment of its epoch listed: the next cycle starts its
	// prefix there (its link still holds the largest commit ts of b3, so
	// a loss is still proven by the chain).
	left := entries(a2, a3, a4, b4, c2, c3, e1)
	if got, want := keys(Collectable(left, 101)), keys(entries(a2, a3, b4, e1)); !slices.Equal(got, want) {
		t.Fatalf("second cycle collects %v, want %v", got, want)
	}
}

// TestCollectorGraceAndOrder: a segment modified within the grace period
// stays and ends its prefix; a listing that goes backwards ends it too.
func TestCollectorGraceAndOrder(t *testing.T) {
	now := time.Unix(1000, 0)
	c := NewCollector(100, time.Minute, now)
	if v := c.Add(sealedName("a", 1, 1, 1, 10), now.Add(-time.Hour)); v != Collect {
		t.Fatalf("old segment: %v", v)
	}
	if v := c.Add(sealedName("a", 1, 2, 11, 20), now.Add(-time.Second)); v != KeepGrace {
		t.Fatalf("fresh segment: %v", v)
	}
	if v := c.Add(sealedName("a", 1, 3, 21, 30), now.Add(-time.Hour)); v != KeepChain {
		t.Fatalf("above a fresh one: %v", v)
	}
	c = NewCollector(100, 0, now)
	c.Add(sealedName("b", 1, 5, 1, 10), now)
	if v := c.Add(sealedName("b", 1, 4, 1, 10), now); v != KeepChain {
		t.Fatalf("a listing gone backwards: %v", v)
	}
	if v := c.Add(sealedName("b", 1, 6, 200, 300), now); v != Keep {
		t.Fatalf("above the checkpoint: %v", v)
	}
}
