package reader

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
)

// proveFresh checks the writer states a read proves its chains with
// against the meta object read before them, and the read's range against
// what they prove: a stale state would prove a chain only up to an old
// seq (a segment lost above it would read silently short), and a range
// above the proven bound holds events no chain requirement covers.
func proveFresh(ctx context.Context, b *blob.Bucket, c *config, pub fences) error {
	if c.meta != nil {
		if err := meta.CheckStates(ctx, b, c.LogID, c.meta, pub); err != nil {
			return fmt.Errorf("reader: the writer states of log %q: %w", c.LogID, err)
		}
	}
	bound, why, ok := provenBound(c.LogID, c.meta, pub)
	if ok && c.end > bound {
		return fmt.Errorf("%w: the read's end ts %d is above %d, %s; read up to it, or wait until the log proves more",
			ErrUnproven, c.end, bound, why)
	}
	return nil
}

// provenBound is the highest ts up to which the chains a read proves hold
// every event: the global resolved ts of the meta object (every writer
// state read after it is at least as new as the states it was computed
// from, so their published chains cover it), or the lowest flushed ts the
// writers published, whichever is higher. ok is false for a log with
// neither (writers without state objects, whose chains only a listing
// shows).
func provenBound(logID string, m *meta.Meta, pub fences) (bound uint64, why string, ok bool) {
	if m != nil {
		bound, ok = m.ResolvedTs, true
		why = fmt.Sprintf("the global resolved ts in %s (generation %d)", layout.Meta(logID), m.Generation)
	}
	if len(pub) == 0 {
		return bound, why, ok
	}
	lowest, at := uint64(0), ""
	for _, id := range slices.Sorted(maps.Keys(pub)) {
		if st := pub[id]; at == "" || st.FlushedTs < lowest {
			lowest, at = st.FlushedTs, id
		}
	}
	if !ok || lowest > bound {
		bound, ok = lowest, true
		why = fmt.Sprintf("the lowest flushed ts the writers published (%s, in %s)", at, layout.WriterState(logID, at))
	}
	return bound, why, ok
}
