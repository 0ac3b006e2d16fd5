package reader

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
)

// metaView is what one pass of Verify read of the metadata: the meta
// object (read once, after the listing and before the states) and the
// writer states the listing named (each read once).
type metaView struct {
	m        *meta.Meta // nil when missing or unreadable
	missing  bool       // the meta object does not exist (and VerifyOptions.RequireMeta)
	states   fences     // the states read, by writer ID
	statesOK bool       // every state listed was read and decoded
	gone     []string   // states listed that a read then did not find
}

// verifyMeta holds the meta object and the writer states against each
// other and against the segment names of the listing: the freshness rules
// (meta.CheckStates), a checkpoint at or below the resolved ts, a state for
// every live writer at or above the epoch the meta object saw, fences in
// order, and no segment of an epoch its writer never reached. It reads
// nothing but what CheckStates reads again to settle a meta object that
// may be behind a state. Its problems are of kind ProblemMeta; what fails
// to read or decode was reported already (ProblemBadState).
func verifyMeta(ctx context.Context, b *blob.Bucket, logID string, mv *metaView, objs []listed, rep *Report) ([]Problem, error) {
	var out []Problem
	add := func(key, format string, args ...any) {
		out = append(out, Problem{Severity: Error, Kind: ProblemMeta, Key: key, Offset: -1, Detail: fmt.Sprintf(format, args...)})
	}
	metaKey := layout.Meta(logID)
	if mv.missing {
		add(metaKey, "the log has no meta object: no checkpoint or global resolved ts, so a recovery has no range to replay")
	}
	// A state that does not decode is named by its ProblemBadState; with
	// one, the states are not held against the meta object, as a reader
	// would refuse them.
	states := mv.states
	if !mv.statesOK {
		states = nil
		if len(mv.gone) > 0 && !hasKind(rep, ProblemBadState) {
			add(layout.Writers(logID), "the writer states cannot be read: %s was listed, and reading it finds nothing: %v", layout.WriterState(logID, mv.gone[0]), meta.ErrStateGone)
		}
	}
	m := mv.m
	if m != nil && states != nil {
		// The states were read after the meta object: one older than it
		// accounted, or one that saw a newer meta object or a span it does
		// not know, is what a restored version or a lagging replica serves.
		if err := meta.CheckStates(ctx, b, logID, m, states); err != nil {
			key := metaKey
			var se *meta.StaleError
			var ie *meta.InconsistentError
			switch {
			case errors.As(err, &se):
				key = se.Key
			case errors.As(err, &ie):
				key = ie.Key
			case ctx.Err() != nil:
				return nil, ctx.Err()
			}
			add(key, "%v", err)
		}
	}
	if m != nil {
		if m.LogID != logID {
			add(metaKey, "the meta object names log %q", m.LogID)
		}
		if m.CheckpointTs > m.ResolvedTs {
			add(metaKey, "checkpoint ts %d is above the global resolved ts %d", m.CheckpointTs, m.ResolvedTs)
		}
		if states != nil {
			for id, epoch := range m.Writers {
				st := states[id]
				switch {
				case st == nil && epoch == 0 && !hasSegments(objs, id):
					// Added (AddWriter) and never opened: the meta object
					// records no epoch it saw, and the writer wrote nothing.
					out = append(out, Problem{Severity: Info, Kind: ProblemMeta, Key: layout.WriterState(logID, id), Offset: -1,
						Detail: fmt.Sprintf("live writer %q of the meta object has not opened: no state object, no segment, and no epoch the coordinator saw", id)})
				case st == nil:
					add(layout.WriterState(logID, id), "live writer %q of the meta object has no state object", id)
				case st.Epoch < epoch:
					add(layout.WriterState(logID, id), "writer %q is at epoch %d, below the epoch %d the meta object saw", id, st.Epoch, epoch)
				}
			}
		}
	}
	for id, st := range states {
		key := layout.WriterState(logID, id)
		if st.WriterID != id || st.LogID != logID {
			add(key, "the state object is of writer %q of log %q", st.WriterID, st.LogID)
		}
		prev := uint64(0)
		for _, f := range st.Fences {
			if f.Epoch >= st.Epoch || f.Epoch <= prev {
				add(key, "fence of epoch %d is out of order (current epoch %d)", f.Epoch, st.Epoch)
			}
			prev = f.Epoch
		}
	}
	// Segments from an epoch their writer never reached mean the state went
	// backwards (restored from a backup, overwritten): fences cannot protect
	// the log from those.
	for _, e := range objs {
		if e.Err != nil {
			continue // a ProblemBadName
		}
		if st := states[e.Name.WriterID]; st != nil && e.Name.Epoch > st.Epoch {
			add(e.Key, "segment of epoch %d, but writer %q is only at epoch %d", e.Name.Epoch, e.Name.WriterID, st.Epoch)
		}
	}
	return out, nil
}

// hasSegments reports whether objs hold a segment of writer id.
func hasSegments(objs []listed, id string) bool {
	return slices.ContainsFunc(objs, func(e listed) bool { return e.Err == nil && e.Name.WriterID == id })
}

// hasKind reports whether rep has a problem of kind k.
func hasKind(rep *Report, k ProblemKind) bool {
	for _, p := range rep.Problems {
		if p.Kind == k {
			return true
		}
	}
	return false
}
