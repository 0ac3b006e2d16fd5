package chain

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
)

// TestChainMaxOfCatchUp: the chain max ts through a segment is the largest
// commit ts of the epoch up to it, not the segment's own max: a catch-up
// segment with lower ts keeps its predecessor's.
func TestChainMaxOfCatchUp(t *testing.T) {
	segs := chainOf(t, nil, segment.Link{},
		spec{epoch: 1, seq: 1, blocks: [][]uint64{{100, 190}}},
		spec{epoch: 1, seq: 2, blocks: [][]uint64{{10, 20}}},
		spec{epoch: 1, seq: 3, blocks: [][]uint64{{200}}})
	if got := segs[1].next.PrevMaxTs; got != 190 {
		t.Fatalf("chain max through the catch-up segment %d, want 190", got)
	}
	if got := segs[2].next.PrevMaxTs; got != 200 {
		t.Fatalf("chain max through seq 3 %d, want 200", got)
	}
	if l := segs[1].hdr.Link; l.PrevSeq != 1 || l.PrevHeaderCRC != segs[0].hdr.CRC || l.PrevFooterCRC != segment.FooterCRC(segs[0].blocks) {
		t.Fatalf("seq 2 links %+v", l)
	}
}

// TestLinkedPrefix: a sealed predecessor holds exactly what its successor
// links; an active one may hold more (appended after its successor was
// started), and the link names the prefix its writer had then.
func TestLinkedPrefix(t *testing.T) {
	pred := build(t, nil, spec{epoch: 1, seq: 1, blocks: [][]uint64{{1, 2}, {3}, {4, 5}}, active: true}, segment.Link{})
	for k := 0; k <= 3; k++ {
		l := Successor(pred.hdr, pred.blocks[:k])
		if got, ok := LinkedPrefix(pred.hdr, pred.blocks, true, l); !ok || got != k {
			t.Errorf("active, link of %d blocks: %d, %v", k, got, ok)
		}
		_, ok := LinkedPrefix(pred.hdr, pred.blocks, false, l)
		if ok != (k == 3) {
			t.Errorf("sealed, link of %d of 3 blocks accepted: %v", k, ok)
		}
	}
	bad := Successor(pred.hdr, pred.blocks)
	bad.PrevMaxTs++
	if _, ok := LinkedPrefix(pred.hdr, pred.blocks, true, bad); ok {
		t.Error("a link whose chain max ts no prefix has is accepted")
	}
}

// TestLinkMismatchActivePrefix is FORMAT.md gap 11: a link to an active
// predecessor may name a prefix of its whole blocks (recovery seals
// exactly that prefix), and nothing else; one to a sealed predecessor
// names its footer and chain max ts.
func TestLinkMismatchActivePrefix(t *testing.T) {
	pred := build(t, nil, spec{epoch: 1, seq: 1, blocks: [][]uint64{{1, 2}, {3}}, active: true}, segment.Link{})
	p := Pred{Key: pred.key, Header: pred.hdr, Blocks: pred.blocks}
	if msg := LinkMismatch("succ", Successor(pred.hdr, pred.blocks[:1]), p); msg != "" {
		t.Fatalf("a link to a 1-block prefix of a 2-block active predecessor: %s", msg)
	}
	if msg := LinkMismatch("succ", Successor(pred.hdr, pred.blocks), p); msg != "" {
		t.Fatalf("a link to all its blocks: %s", msg)
	}
	other := build(t, nil, spec{epoch: 1, seq: 1, blocks: [][]uint64{{1, 9}}, active: true}, segment.Link{})
	l := Successor(pred.hdr, other.blocks) // the right header, blocks it never held
	if msg := LinkMismatch("succ", l, p); !strings.Contains(msg, "no prefix") {
		t.Fatalf("a link to blocks the active predecessor does not hold: %q", msg)
	}
	// Blocks unknown (a reader's stream): the header CRC alone.
	if msg := LinkMismatch("succ", l, Pred{Key: pred.key, Header: pred.hdr}); msg != "" {
		t.Fatalf("unknown blocks: %s", msg)
	}
	l.PrevHeaderCRC++
	if msg := LinkMismatch("succ", l, Pred{Key: pred.key, Header: pred.hdr}); !strings.Contains(msg, "header CRC") {
		t.Fatalf("a wrong header CRC: %q", msg)
	}

	sealed := build(t, nil, spec{epoch: 1, seq: 1, blocks: [][]uint64{{1, 2}, {3}}}, segment.Link{})
	sp := Pred{Key: sealed.key, Header: sealed.hdr, Sealed: true, HaveFooter: true, FooterCRC: segment.FooterCRC(sealed.blocks), MaxTs: 3, CheckMax: true}
	if msg := LinkMismatch("succ", sealed.next, sp); msg != "" {
		t.Fatalf("the sealed predecessor's own link: %s", msg)
	}
	if msg := LinkMismatch("succ", Successor(sealed.hdr, sealed.blocks[:1]), sp); !strings.Contains(msg, "footer CRC") {
		t.Fatalf("a link to a prefix of a sealed predecessor: %q", msg)
	}
	l = sealed.next
	l.PrevMaxTs = 2
	if msg := LinkMismatch("succ", l, sp); !strings.Contains(msg, "commit ts up to 2") {
		t.Fatalf("a wrong chain max ts: %q", msg)
	}
}

// TestFencedBlocks: of the replaced epoch's unsealed segment, the blocks up
// to the last frame at or below the fence's max ts stay; without frames
// (version 2), those up to the highest ts published; other epochs' keep all.
func TestFencedBlocks(t *testing.T) {
	var buf bytes.Buffer
	sw, err := segment.NewWriter(&buf, segment.Header{LogID: "log", WriterID: "w", Epoch: 1, Seq: 1, Created: time.Unix(1, 0)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range []uint64{10, 20, 30} {
		if err := sw.Append(ts, segment.KindRow, []byte{1}); err != nil {
			t.Fatal(err)
		}
		if err := sw.FlushBlock(); err != nil {
			t.Fatal(err)
		}
		if ts != 30 {
			if _, err := sw.AppendProgress(ts, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	rec, err := segment.Recover(bytes.NewReader(buf.Bytes()), nil)
	if err != nil {
		t.Fatal(err)
	}
	prev := &meta.WriterState{Epoch: 1, FlushedTs: 10}
	st := &meta.WriterState{Epoch: 2, Fences: []meta.Fence{{Epoch: 1, LastSeq: 1, MaxTs: 20}}}
	if k := FencedBlocks(rec, 1, st, prev); k != 2 {
		t.Fatalf("fence at 20: keeps %d blocks, want 2", k)
	}
	if k := FencedBlocks(rec, 0, st, prev); k != 3 {
		t.Fatalf("an older epoch: keeps %d blocks, want all 3", k)
	}
	v2 := *rec
	v2.Progress = nil
	if k := FencedBlocks(&v2, 1, st, prev); k != 1 {
		t.Fatalf("no frames, published 10: keeps %d blocks, want 1", k)
	}
}
