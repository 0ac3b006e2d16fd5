package redokit_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/reader"
)

// Log.Verify holds the writer states against the meta object read before
// them: a writer state restored to an older version (a restored object
// version, a lagging replica) is an error naming it, where 43d5d0f's
// verify said OK.
func TestVerifyFindsAStaleWriterState(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	log, err := redokit.Open(ctx, b, "cf")
	must(t, err)
	coord, err := log.OpenCoordinator(ctx, &meta.CoordinatorOptions{StartTs: 100})
	must(t, err)
	must(t, coord.AddWriter(ctx, "w"))
	must(t, coord.AddSpan(ctx, 7, 100))
	w, err := log.OpenWriter(ctx, "w", nil)
	must(t, err)
	defer w.Close(ctx)
	must(t, w.AddSpan(7, 100))
	var old []byte
	for ts := uint64(110); ts <= 150; ts += 10 {
		must(t, w.Write(ctx, 7, row(ts, int64(ts))))
		must(t, w.AdvanceResolved(7, ts))
		_, err := w.Publish(ctx)
		must(t, err)
		if ts == 120 {
			old, err = b.ReadAll(ctx, log.WriterKey("w"))
			must(t, err)
		}
	}
	_, err = coord.Tick(ctx)
	must(t, err)
	rep, err := log.Verify(ctx, nil)
	must(t, err)
	if !rep.OK() {
		t.Fatalf("verify before the restore: %v", rep.Problems)
	}
	// The same epoch, an older generation: nothing but the generations
	// tells it from the newest.
	_, err = b.Put(ctx, log.WriterKey("w"), old, nil)
	must(t, err)
	rep, err = log.Verify(ctx, nil)
	must(t, err)
	found := false
	for _, p := range rep.Problems {
		if p.Severity == reader.Error && p.Key == log.WriterKey("w") && strings.Contains(p.Detail, "stale") {
			found = true
		}
	}
	if !found {
		t.Fatalf("verify over a stale writer state: %v; want an error naming %s as stale", rep.Problems, log.WriterKey("w"))
	}
}
