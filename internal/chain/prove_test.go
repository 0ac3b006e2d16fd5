package chain

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
)

// fiveSegs is writer w's epoch 1, seqs 1..5, segment i holding commit ts
// 100i..100i+90, stored on b.
func fiveSegs(t *testing.T, b *blob.Bucket) []built {
	var specs []spec
	for i := uint64(1); i <= 5; i++ {
		specs = append(specs, spec{epoch: 1, seq: i, blocks: [][]uint64{{100 * i, 100*i + 90}}})
	}
	return chainOf(t, b, segment.Link{}, specs...)
}

// published is the state of a writer whose epoch 1 published segs' last.
func published(segs []built) map[string]*meta.WriterState {
	last := segs[len(segs)-1]
	return map[string]*meta.WriterState{"w": {LogID: "log", WriterID: "w", Epoch: 1, HasSeq: true, Seq: last.name.Seq, ChainMaxTs: last.next.PrevMaxTs, Digest: last.hdr.CRC}}
}

// proveOn runs the proof over b's listing, listing again on a stale one.
func proveOn(t *testing.T, b *blob.Bucket, states map[string]*meta.WriterState, start uint64) ([]*Error, error) {
	t.Helper()
	ctx := context.Background()
	header := func(e Entry) (segment.Header, error) {
		h, _, err := ReadHeader(ctx, b, e)
		return h, err
	}
	accepts := func(n segment.Name) bool { st := states[n.WriterID]; return st == nil || st.Accepts(n) }
	for i := 0; ; i++ {
		entries, err := List(ctx, b, "log", "log/seg/")
		if err != nil {
			t.Fatal(err)
		}
		probs, err := Prove("log", NewIndex(entries, accepts), states, start, header, Probes(ctx, b, "log"), nil)
		if Stale(err) && i < Relists {
			continue
		}
		return probs, err
	}
}

// A segment deleted from the start, the middle or the end of a chain is an
// *Error naming the writer, the epoch, the missing seq and the key
// expected, never a silent pass; from a start at or above everything below
// it, a missing bottom is fine (GC's case).
func TestProveMissingSegment(t *testing.T) {
	ctx := context.Background()
	for _, victim := range []int{1, 3, 5} {
		b := mem.New()
		segs := fiveSegs(t, b)
		if err := b.Delete(ctx, segs[victim-1].key); err != nil {
			t.Fatal(err)
		}
		probs, err := proveOn(t, b, published(segs), 0)
		if err != nil || len(probs) != 1 {
			t.Fatalf("seq %d gone: %v %v, want one finding", victim, err, probs)
		}
		e := probs[0]
		want := ExpectedKey("log", "w", 1, uint64(victim))
		if !errors.Is(e, ErrIncomplete) || e.Writer != "w" || e.Epoch != 1 || e.Seq != uint64(victim) || e.Key != want || !strings.Contains(e.Error(), want) {
			t.Fatalf("seq %d gone: %+v, want one naming %s", victim, e, want)
		}
		if victim < 5 {
			// From the chain max through the victim on, nothing below is
			// needed.
			probs, err := proveOn(t, b, published(segs), segs[victim-1].next.PrevMaxTs)
			if err != nil || len(probs) != 0 {
				t.Fatalf("seq %d gone, read from above it: %v %v", victim, err, probs)
			}
		}
	}
}

// TestProveWithoutState: a writer without a state object proves its chain
// up to the highest seq listed (the weaker rule): a hole is found, a lost
// last segment cannot be; an active segment shorter than a header ends no
// chain.
func TestProveWithoutState(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	segs := fiveSegs(t, b)
	if err := b.Delete(ctx, segs[4].key); err != nil {
		t.Fatal(err)
	}
	if probs, err := proveOn(t, b, nil, 0); err != nil || len(probs) != 0 {
		t.Fatalf("last segment gone, no state: %v %v", err, probs)
	}
	if err := b.Delete(ctx, segs[2].key); err != nil {
		t.Fatal(err)
	}
	if probs, err := proveOn(t, b, nil, 0); err != nil || len(probs) != 1 || probs[0].Seq != 3 {
		t.Fatalf("seq 3 gone, no state: %v %v", err, probs)
	}
	// An empty active seq 6 above a hole-free chain.
	b2 := mem.New()
	segs = fiveSegs(t, b2)
	empty := segment.Name{LogID: "log", WriterID: "w", Epoch: 1, Seq: 6, Active: true}
	if _, err := b2.Put(ctx, empty.Format(), nil, nil); err != nil {
		t.Fatal(err)
	}
	ix := NewIndex([]Entry{entryOf(segs[4]), {Key: empty.Format(), Name: empty}}, nil)
	reqs := Reqs("log", nil, ix)
	if len(reqs) != 1 || reqs[0].P != 5 || reqs[0].Strict || reqs[0].MaxTs != math.MaxUint64 {
		t.Fatalf("requirements %+v, want seq 5 from the listing", reqs)
	}
}

// TestProveReplacedLastSegment: a segment P whose header CRC is not the
// published digest is another segment than the one published. (The proof
// reads the header at the bottom of the run down from P; when that is not
// P, the reader's stream of P compares it.)
func TestProveReplacedLastSegment(t *testing.T) {
	b := mem.New()
	segs := chainOf(t, b, segment.Link{}, spec{epoch: 1, seq: 1, blocks: [][]uint64{{100, 190}}})
	states := published(segs)
	if probs, err := proveOn(t, b, states, 0); err != nil || len(probs) != 0 {
		t.Fatalf("the published segment: %v %v", err, probs)
	}
	states["w"].Digest++
	probs, err := proveOn(t, b, states, 0)
	if err != nil || len(probs) != 1 || !strings.Contains(probs[0].Detail, "does not end in the segment its writer published") {
		t.Fatalf("%v %v", err, probs)
	}
}

// TestProveFirstClaimAboveListed: the bottom of the run down from P
// claiming to be first of its epoch while a lower seq of it is listed
// breaks the chain.
func TestProveFirstClaimAboveListed(t *testing.T) {
	b := mem.New()
	ctx := context.Background()
	segs := fiveSegs(t, b)
	for _, s := range segs[1:] {
		if err := b.Delete(ctx, s.key); err != nil {
			t.Fatal(err)
		}
	}
	// Seqs 3..5 again, seq 3 claiming to be the epoch's first.
	top := chainOf(t, b, segment.Link{}, spec{epoch: 1, seq: 3, blocks: [][]uint64{{300, 390}}},
		spec{epoch: 1, seq: 4, blocks: [][]uint64{{400, 490}}}, spec{epoch: 1, seq: 5, blocks: [][]uint64{{500, 590}}})
	probs, err := proveOn(t, b, published(top), 0)
	if err != nil || len(probs) != 1 || !strings.Contains(probs[0].Detail, "claims to be the first segment") || probs[0].Seq != 3 {
		t.Fatalf("%v %v", err, probs)
	}
}

// TestProveProbesAMissedKey: a listing that misses a segment the proof
// needs is stale (the probe finds it), never a finding; listed again, the
// proof passes. A listing that keeps missing it fails naming the key, and
// still matches ErrIncomplete.
func TestProveProbesAMissedKey(t *testing.T) {
	b := mem.New()
	segs := fiveSegs(t, b)
	ix := NewIndex([]Entry{entryOf(segs[0]), entryOf(segs[1]), entryOf(segs[3]), entryOf(segs[4])}, nil)
	ctx := context.Background()
	header := func(e Entry) (segment.Header, error) {
		h, _, err := ReadHeader(ctx, b, e)
		return h, err
	}
	_, err := Prove("log", ix, published(segs), 0, header, Probes(ctx, b, "log"), nil)
	var missed *MissedError
	if !errors.As(err, &missed) || missed.Key != segs[2].key || !Stale(err) {
		t.Fatalf("a listing without seq 3: %v, want the probe to find %s", err, segs[2].key)
	}
	ex := Exhausted("reader: log log", err)
	if !errors.Is(ex, ErrIncomplete) || !strings.Contains(ex.Error(), segs[2].key) {
		t.Fatalf("exhausted: %v", ex)
	}
	// Without a probe (Verify's single listing), the hole is a finding.
	probs, err := Prove("log", ix, published(segs), 0, header, nil, nil)
	if err != nil || len(probs) != 1 || probs[0].Seq != 3 {
		t.Fatalf("no probe: %v %v", err, probs)
	}
}

// TestSealedTwice: two sealed names of one seq are found, an active and a
// sealed one are the two sides of a rename.
func TestSealedTwice(t *testing.T) {
	a := build(t, nil, spec{epoch: 1, seq: 2, blocks: [][]uint64{{1, 5}}}, segment.Link{})
	c := build(t, nil, spec{epoch: 1, seq: 2, blocks: [][]uint64{{1, 6}}}, segment.Link{})
	act := build(t, nil, spec{epoch: 1, seq: 2, blocks: [][]uint64{{1, 5}}, active: true}, segment.Link{})
	d := SealedTwice([]Entry{entryOf(a), entryOf(act), entryOf(c)}, nil)
	if len(d) != 1 || d[0][0].Key != a.key || d[0][1].Key != c.key {
		t.Fatalf("%v", d)
	}
	if e := TwiceError(d[0]); !errors.Is(e, ErrIncomplete) || e.Key != c.key {
		t.Fatalf("%+v", e)
	}
	ix := NewIndex([]Entry{entryOf(act), entryOf(a)}, nil)
	if got := ix[EpochKey{"w", 1}][2]; got.Key != a.key {
		t.Fatalf("of an active and a sealed name the index keeps %s", got.Key)
	}
}
