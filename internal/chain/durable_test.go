package chain

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
)

var quiet = slog.New(slog.DiscardHandler)

func walkAt(t *testing.T, b *blob.Bucket, prev *meta.WriterState, appendable bool, cp uint64) (*meta.Progress, error) {
	t.Helper()
	return durable(context.Background(), b, prev, appendable, quiet, func() (uint64, error) { return cp, nil })
}

func unpublished(epoch uint64) *meta.WriterState {
	return &meta.WriterState{LogID: "log", WriterID: "w", Epoch: epoch}
}

// TestDurableTakesTheNewestFrame: the walk goes up from the published seq
// while each segment links its predecessor, and takes the newest frame;
// a frame in a sealed segment at the published seq is as old as the
// publication (nil), one in an active segment there is not.
func TestDurableTakesTheNewestFrame(t *testing.T) {
	b := mem.New()
	segs := chainOf(t, b, segment.Link{},
		spec{epoch: 1, seq: 1, blocks: [][]uint64{{10}}, frame: 10},
		spec{epoch: 1, seq: 2, blocks: [][]uint64{{20}}, frame: 20},
		spec{epoch: 1, seq: 3, blocks: [][]uint64{{30}}, frame: 30})
	prev := &meta.WriterState{LogID: "log", WriterID: "w", Epoch: 1, HasSeq: true, Seq: 1, FlushedTs: 10, ChainMaxTs: 10, Digest: segs[0].hdr.CRC}
	p, err := walkAt(t, b, prev, false, 0)
	if err != nil || p == nil || p.Seq != 3 || p.FlushedTs != 30 || p.ChainMaxTs != 30 || p.Digest != segs[2].hdr.CRC {
		t.Fatalf("%+v %v, want seq 3 flushed 30", p, err)
	}
	prev.Seq, prev.FlushedTs, prev.Digest = 3, 30, segs[2].hdr.CRC
	if p, err := walkAt(t, b, prev, false, 0); err != nil || p != nil {
		t.Fatalf("published the newest, sealed: %+v %v", p, err)
	}
	b2 := mem.New()
	act := build(t, b2, spec{epoch: 1, seq: 1, blocks: [][]uint64{{10}}, frame: 10, active: true}, segment.Link{})
	prev = &meta.WriterState{LogID: "log", WriterID: "w", Epoch: 1, HasSeq: true, Seq: 1, FlushedTs: 10, Digest: act.hdr.CRC}
	if p, err := walkAt(t, b2, prev, true, 0); err != nil || p == nil || p.Seq != 1 {
		t.Fatalf("an active segment at the published seq: %+v %v", p, err)
	}
}

// TestDurableNeedsTheEpochsFirstSegment (the rule behind writer's
// TestDurableWalkNeedsTheEpochsFirstSegment): an epoch that never
// published is missing its first segment. A frame above the gap is stored
// only after everything below it, so the missing segment was durable:
// the walk fails naming the gap, unless GC can have taken it (its link
// says everything below lies at or below the checkpoint). With no frame
// above the gap, the segments there are uploads of a flush that failed
// and was never reported: fenced out.
func TestDurableNeedsTheEpochsFirstSegment(t *testing.T) {
	b := mem.New()
	segs := chainOf(t, nil, segment.Link{},
		spec{epoch: 1, seq: 1, blocks: [][]uint64{{10}}},
		spec{epoch: 1, seq: 2, blocks: [][]uint64{{20}}},
		spec{epoch: 1, seq: 3, blocks: [][]uint64{{30}}, frame: 30})
	// Seqs 2 and 3 stored, seq 1 never.
	chainOf(t, b, segs[0].next, spec{epoch: 1, seq: 2, blocks: [][]uint64{{20}}}, spec{epoch: 1, seq: 3, blocks: [][]uint64{{30}}, frame: 30})
	_, err := walkAt(t, b, unpublished(1), false, 0)
	if err == nil || !strings.Contains(err.Error(), "the epoch's first segments (below seq 2)") || !errors.Is(err, segment.ErrCorrupt) {
		t.Fatalf("a frame above the missing first segment: %v", err)
	}
	// GC can have taken seq 1 when its ts are at or below the checkpoint.
	if p, err := walkAt(t, b, unpublished(1), false, 10); err != nil || p == nil || p.Seq != 3 {
		t.Fatalf("below the checkpoint: %+v %v", p, err)
	}
	// No frame above the gap: an upload that failed in a flush never
	// reported; fenced out.
	b2 := mem.New()
	chainOf(t, b2, segs[0].next, spec{epoch: 1, seq: 2, blocks: [][]uint64{{20}}})
	if p, err := walkAt(t, b2, unpublished(1), false, 0); err != nil || p != nil {
		t.Fatalf("no frame above the gap: %+v %v", p, err)
	}
	// On local disk a seq is never skipped: the same gap is an error.
	if _, err := walkAt(t, b2, unpublished(1), true, 0); err == nil {
		t.Fatal("a gap on local disk is accepted")
	}
}

// TestDurableRefusesABadName: a key under the writer's segments that is
// not a segment name could be a damaged segment of the chain; the walk
// refuses, naming it.
func TestDurableRefusesABadName(t *testing.T) {
	b := mem.New()
	chainOf(t, b, segment.Link{}, spec{epoch: 1, seq: 1, blocks: [][]uint64{{10}}, frame: 10})
	bad := layout.WriterSegments("log", "w") + "00000000000000000001-0000000000000000000x.seg"
	if _, err := b.Put(context.Background(), bad, []byte("?"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := walkAt(t, b, unpublished(1), false, 0); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("%v, want an error naming %s", err, bad)
	}
}

// TestDurableBrokenLink: a segment that does not link its listed
// predecessor is an error naming it.
func TestDurableBrokenLink(t *testing.T) {
	b := mem.New()
	chainOf(t, b, segment.Link{}, spec{epoch: 1, seq: 1, blocks: [][]uint64{{10}}, frame: 10})
	other := build(t, nil, spec{epoch: 1, seq: 1, blocks: [][]uint64{{11}}}, segment.Link{})
	s2 := build(t, b, spec{epoch: 1, seq: 2, blocks: [][]uint64{{20}}, frame: 20}, other.next)
	if _, err := walkAt(t, b, unpublished(1), false, 0); err == nil || !strings.Contains(err.Error(), s2.key) {
		t.Fatalf("%v, want an error naming %s", err, s2.key)
	}
}

// TestDurableLinkToActivePrefix: a successor linking a prefix of its active
// predecessor's blocks cuts the frames after that prefix: they were never
// reported.
func TestDurableLinkToActivePrefix(t *testing.T) {
	b := mem.New()
	// Seq 1 active as its successor linked it: one block.
	p1 := build(t, nil, spec{epoch: 1, seq: 1, blocks: [][]uint64{{10}}, frame: 10, active: true}, segment.Link{})
	build(t, b, spec{epoch: 1, seq: 1, blocks: [][]uint64{{10}, {15}}, frame: 15, active: true}, segment.Link{})
	build(t, b, spec{epoch: 1, seq: 2, blocks: [][]uint64{{20}}}, p1.next)
	// Stored, seq 1 holds two blocks and one frame after both; seq 2
	// links its first block only, so that frame was never reported, and
	// the epoch made nothing durable beyond what it published.
	p, err := walkAt(t, b, unpublished(1), true, 0)
	if err != nil || p != nil {
		t.Fatalf("a frame after the linked prefix counts: %+v %v", p, err)
	}
	// Linking both blocks, the frame counts.
	b2 := mem.New()
	p1 = build(t, b2, spec{epoch: 1, seq: 1, blocks: [][]uint64{{10}, {15}}, frame: 15, active: true}, segment.Link{})
	build(t, b2, spec{epoch: 1, seq: 2, blocks: [][]uint64{{20}}}, p1.next)
	if p, err := walkAt(t, b2, unpublished(1), true, 0); err != nil || p == nil || p.FlushedTs != 15 {
		t.Fatalf("the frame inside the linked prefix: %+v %v", p, err)
	}
}

// TestDurableListingPolicy: a listing that misses a segment is found by
// the epoch's probe and listed again; one that keeps missing it fails,
// naming the key.
func TestDurableListingPolicy(t *testing.T) {
	drv := &dropDriver{Driver: mem.NewDriver()}
	b := blob.NewBucket(drv)
	segs := chainOf(t, b, segment.Link{},
		spec{epoch: 1, seq: 1, blocks: [][]uint64{{10}}, frame: 10},
		spec{epoch: 1, seq: 2, blocks: [][]uint64{{20}}, frame: 20})
	drv.arm(segs[1].key)
	p, err := walkAt(t, b, unpublished(1), false, 0)
	if err != nil || p == nil || p.Seq != 2 || drv.hits != 1 {
		t.Fatalf("one listing missed seq 2: %+v %v (%d drops)", p, err, drv.hits)
	}
	always := &alwaysDrop{Driver: mem.NewDriver(), key: segs[1].key}
	b2 := blob.NewBucket(always)
	chainOf(t, b2, segment.Link{},
		spec{epoch: 1, seq: 1, blocks: [][]uint64{{10}}, frame: 10},
		spec{epoch: 1, seq: 2, blocks: [][]uint64{{20}}, frame: 20})
	_, err = walkAt(t, b2, unpublished(1), false, 0)
	if err == nil || !strings.Contains(err.Error(), segs[1].key) || !strings.Contains(err.Error(), "listings in a row were stale") {
		t.Fatalf("every listing misses seq 2: %v", err)
	}
}
