package redo

import (
	"context"
	"errors"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/conformance"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
	"github.com/redokit/redokit/writer"
)

// freshness: an older, valid copy of a metadata object (a restored object
// version, as an operator or a lagging replica would serve it) is refused
// by name, on this store, wherever it would be used:
//
//   - the meta object restored to before a span was registered: the next
//     coordinator's Tick fails with meta.ErrStale or meta.ErrInconsistent
//     and the global resolved ts does not move past the span;
//   - a writer state restored to an older version of its epoch, with a
//     segment lost above the seq it names: a read of (checkpoint, global
//     resolved] fails with meta.ErrStale instead of returning short;
//   - a writer state restored to an older epoch: opening the writer ID
//     fails with meta.ErrStale instead of taking an epoch number again.
func (r *redoSuite) freshness(t conformance.T) {
	b := r.h.Bucket(t, r.prefixed)
	ctx := t.Context()
	c, err := meta.OpenCoordinator(ctx, b, redoLogID, nil)
	mustDo(t, "OpenCoordinator", err)
	mustDo(t, "AddWriter", c.AddWriter(ctx, "w1"))
	mustDo(t, "AddSpan", c.AddSpan(ctx, 1, 100))
	beforeSpan := snapshotObject(t, b, layout.Meta(redoLogID))
	mustDo(t, "AddSpan", c.AddSpan(ctx, 2, 100))

	w := openWriter(t, b, "w1")
	mustDo(t, "AddSpan", w.AddSpan(1, 100))
	mustDo(t, "AddSpan", w.AddSpan(2, 100))
	wl := &workload{}
	stateKey := layout.WriterState(redoLogID, "w1")
	var oldState []byte
	for ts := uint64(101); ts <= 160; ts++ {
		mustDo(t, "Write", w.Write(ctx, 1, wl.row(1, ts, 600)))
		mustDo(t, "Write", w.Write(ctx, 2, wl.row(2, ts, 600)))
		if ts%10 != 0 {
			continue
		}
		// Span 2 lags span 1: the global resolved ts follows span 2.
		mustDo(t, "AdvanceResolved", w.AdvanceResolved(1, ts))
		mustDo(t, "AdvanceResolved", w.AdvanceResolved(2, ts-5))
		flush(t, w)
		if _, err := c.Tick(ctx); err != nil {
			t.Fatalf("Tick: %v", err)
		}
		if ts == 120 {
			oldState = snapshotObject(t, b, stateKey)
		}
	}
	m, err := c.Tick(ctx)
	mustDo(t, "Tick", err)
	if m.ResolvedTs != 155 {
		t.Fatalf("global resolved ts %d, want 155 (span 2's)", m.ResolvedTs)
	}

	// The meta object rolled back to before span 2 existed.
	afterAll := snapshotObject(t, b, layout.Meta(redoLogID))
	restoreObject(t, b, layout.Meta(redoLogID), beforeSpan)
	c2, err := meta.OpenCoordinator(ctx, b, redoLogID, nil)
	if err == nil {
		_, err = c2.Tick(ctx)
	}
	if !errors.Is(err, meta.ErrStale) && !errors.Is(err, meta.ErrInconsistent) {
		t.Fatalf("a coordinator opened (and ticked) on the meta object restored to before span 2: %v, want meta.ErrStale or meta.ErrInconsistent", err)
	}
	// One opened before the restore refuses its next Tick.
	restoreObject(t, b, layout.Meta(redoLogID), afterAll)
	c3, err := meta.OpenCoordinator(ctx, b, redoLogID, nil)
	mustDo(t, "OpenCoordinator", err)
	restoreObject(t, b, layout.Meta(redoLogID), beforeSpan)
	if _, err := c3.Tick(ctx); !errors.Is(err, meta.ErrStale) && !errors.Is(err, meta.ErrInconsistent) {
		t.Fatalf("a Tick over the meta object restored to before span 2: %v, want meta.ErrStale or meta.ErrInconsistent", err)
	}
	if got, err := meta.LoadMeta(ctx, b, redoLogID); err != nil || got.ResolvedTs > 155 {
		t.Fatalf("after the refused Tick the meta object holds resolved ts %v (%v): the stale object was used", resolvedOf(got), err)
	}
	restoreObject(t, b, layout.Meta(redoLogID), afterAll)

	// The writer state rolled back within its epoch, and a segment above
	// the seq it names lost.
	mustDo(t, "Close", w.Close(ctx))
	newest := snapshotObject(t, b, stateKey)
	st, _, err := meta.ReadWriterState(ctx, b, redoLogID, "w1")
	mustDo(t, "ReadWriterState", err)
	restoreObject(t, b, stateKey, oldState)
	old, _, err := meta.ReadWriterState(ctx, b, redoLogID, "w1")
	mustDo(t, "ReadWriterState", err)
	lost := segmentAbove(t, b, "w1", st.Epoch, old.Seq)
	if lost == "" {
		t.Fatalf("no segment of epoch %d above seq %d: the workload wrote too little", st.Epoch, old.Seq)
	}
	lostData := snapshotObject(t, b, lost)
	mustDo(t, "Delete", b.Delete(ctx, lost))
	got, _, err := readRange(t, b, 100, 155)
	if !errors.Is(err, meta.ErrStale) {
		t.Fatalf("a read over a writer state restored to seq %d (published %d) with %s lost: %d events, %v; want meta.ErrStale", old.Seq, st.Seq, lost, len(got), err)
	}
	restoreObject(t, b, lost, lostData)
	restoreObject(t, b, stateKey, newest)

	// The writer state rolled back to an older epoch: the next open must
	// not take an epoch number already used.
	w2 := openWriter(t, b, "w1")
	mustDo(t, "AddSpan", w2.AddSpan(1, 160))
	mustDo(t, "Write", w2.Write(ctx, 1, wl.row(1, 170, 600)))
	mustDo(t, "AdvanceResolved", w2.AdvanceResolved(1, 170))
	flush(t, w2)
	mustDo(t, "Close", w2.Close(ctx))
	restoreObject(t, b, stateKey, newest)
	w3, err := writer.Open(ctx, b, redoOptions("w1"))
	if err == nil {
		epoch := w3.Epoch()
		w3.Close(context.Background())
		t.Fatalf("writer.Open over a state of epoch %d restored below epoch %d: took epoch %d, want meta.ErrStale", st.Epoch, w2.Epoch(), epoch)
	}
	if !errors.Is(err, meta.ErrStale) {
		t.Fatalf("writer.Open over a writer state of an older epoch: %v, want meta.ErrStale", err)
	}
}

func resolvedOf(m *meta.Meta) any {
	if m == nil {
		return "none"
	}
	return m.ResolvedTs
}

// snapshotObject returns the bytes stored under key.
func snapshotObject(t conformance.T, b *blob.Bucket, key string) []byte {
	t.Helper()
	data, err := b.ReadAll(t.Context(), key)
	mustDo(t, "read "+key, err)
	return data
}

// restoreObject puts data back under key, unconditionally: what restoring
// an object version does.
func restoreObject(t conformance.T, b *blob.Bucket, key string, data []byte) {
	t.Helper()
	_, err := b.Put(t.Context(), key, data, nil)
	mustDo(t, "restore "+key, err)
}

// segmentAbove returns the key of a segment of the writer's epoch with a
// seq above seq ("" for none).
func segmentAbove(t conformance.T, b *blob.Bucket, writerID string, epoch, seq uint64) string {
	t.Helper()
	for a, err := range b.List(t.Context(), layout.WriterSegments(redoLogID, writerID)) {
		mustDo(t, "List", err)
		n, err := segment.ParseName(a.Key)
		mustDo(t, "ParseName", err)
		if n.Epoch == epoch && n.Seq > seq {
			return a.Key
		}
	}
	return ""
}
