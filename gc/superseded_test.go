package gc

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
)

func active(writer string, epoch, seq uint64) segment.Name {
	return segment.Name{LogID: "log", WriterID: writer, Epoch: epoch, Seq: seq, Active: true}
}

// takeOver acquires writer id's next epoch: when published is not nil, the
// epoch being replaced first publishes it, and the takeover fences it there.
func takeOver(t *testing.T, b *blob.Bucket, id string, published *meta.Progress) {
	t.Helper()
	ctx := context.Background()
	l, err := meta.AcquireWriter(ctx, b, "log", id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if published != nil {
		if err := l.PublishProgress(ctx, *published); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := meta.AcquireWriter(ctx, b, "log", id, nil); err != nil {
		t.Fatal(err)
	}
}

// TestCollectSupersededEpochs: a fenced epoch's segments go by its fence,
// from the writer's state: zombie segments above the fence whatever their
// ts, the whole chain (its active segment too) once the fence's max ts and
// committed ts are both below the checkpoint, and every segment of an epoch
// replaced without a fence. An active segment of a current epoch, of a
// writer without a state, or of a fenced epoch not yet below the
// checkpoint stays.
func TestCollectSupersededEpochs(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	// a: epoch 1 published seq 3 (chain max 30, committed 30), then was
	// fenced there; seq 4 and 5 are a zombie's. Epoch 2 is current.
	takeOver(t, b, "a", &meta.Progress{FlushedTs: 30, Seq: 3, ChainMaxTs: 30, CommittedTs: 30})
	a1, a2, a3 := sealed("a", 1, 1, 1, 10), sealed("a", 1, 2, 11, 20), active("a", 1, 3)
	a4, a5, a21 := active("a", 1, 4), sealed("a", 1, 5, 31, 500), active("a", 2, 1)
	// b: epoch 1 published nothing before epoch 2 replaced it.
	takeOver(t, b, "b", nil)
	b1, b21 := sealed("b", 1, 1, 100, 200), sealed("b", 2, 1, 100, 200)
	// c: no state object (written outside a lease): never fenced.
	c1 := active("c", 1, 1)
	// d: fenced with a chain max above its committed ts (staged events).
	takeOver(t, b, "d", &meta.Progress{FlushedTs: 20, Seq: 1, ChainMaxTs: 40, CommittedTs: 20})
	d1 := active("d", 1, 1)
	putNames(t, b, a1, a2, a3, a4, a5, a21, b1, b21, c1, d1)

	// At 30 the fence of a's epoch 1 (max 30, committed 30) is not below
	// the checkpoint: its chain goes by the prefix rule (a1, a2; the active
	// a3 ends the prefix); the zombie's a4 and a5 go by the fence, as does
	// b's unfenced epoch 1 whatever its ts.
	res, err := collectBelow(t, ctx, b, "log", 30, &Options{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := keysOf(a1, a2, a4, a5, b1); !slices.Equal(res.DeletedKeys, want) {
		t.Fatalf("dry run at 30 deletes\n%v\nwant\n%v", res.DeletedKeys, want)
	}
	// a4, a5 and b1 by the fence; active and kept: a21 and c1 (current
	// epoch, no state), a3 and d1 (fences not below the checkpoint).
	if res.Superseded != 3 || res.KeptActive != 4 || res.FenceRuleErr != nil {
		t.Fatalf("dry run at 30: %+v", res)
	}
	if got := survivors(t, b); len(got) != 10 {
		t.Fatalf("a dry run deleted: %v", got)
	}

	// --grace keeps what the fence would free as it keeps the rest.
	res, err = collectBelow(t, ctx, b, "log", 1000, &Options{DryRun: true, Grace: time.Hour})
	// Below 1000 every fence is passed: a's epoch 1 (5), b1, d1 by their
	// fences and b21 by the prefix rule would go; a21 and c1 are active.
	if err != nil || res.Deleted != 0 || res.KeptByGrace != 8 || res.KeptActive != 2 {
		t.Fatalf("dry run with an hour of grace: %+v, %v", res, err)
	}

	// At 31 the whole epoch 1 of a goes, its active segment too; d's
	// fence has a chain max of 40: its active segment stays.
	res, err = collectBelow(t, ctx, b, "log", 31, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := keysOf(a1, a2, a3, a4, a5, b1); !slices.Equal(res.DeletedKeys, want) {
		t.Fatalf("at 31 deletes\n%v\nwant\n%v", res.DeletedKeys, want)
	}
	if got, want := survivors(t, b), keysOf(a21, b21, c1, d1); !slices.Equal(got, want) {
		t.Fatalf("left %v, want %v", got, want)
	}
	// At 41 d's epoch 1 is wholly below the checkpoint.
	res, err = collectBelow(t, ctx, b, "log", 41, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := keysOf(d1); !slices.Equal(res.DeletedKeys, want) || res.Superseded != 1 {
		t.Fatalf("at 41: %+v, want %v deleted", res, want)
	}
}

// TestCollectWithoutStatesKeepsMore: a writer state that cannot be read
// turns the fence rule off for the cycle (the result says why): what only
// the fence made collectable stays.
func TestCollectWithoutStatesKeepsMore(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	takeOver(t, b, "a", &meta.Progress{FlushedTs: 30, Seq: 1, ChainMaxTs: 30, CommittedTs: 30})
	a1, a2 := active("a", 1, 1), sealed("a", 1, 2, 31, 40)
	putNames(t, b, a1, a2)
	if _, err := b.Put(ctx, "log/writers/a", []byte("damaged"), nil); err != nil {
		t.Fatal(err)
	}
	res, err := collectBelow(t, ctx, b, "log", 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != 0 || res.FenceRuleErr == nil || res.KeptActive != 1 {
		t.Fatalf("with a damaged state: %+v", res)
	}
	if got := survivors(t, b); !slices.Equal(got, keysOf(a1, a2)) {
		t.Fatalf("left %v", got)
	}
}
