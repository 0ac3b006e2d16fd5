package redokit

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/internal/chain"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/reader"
)

// ProblemMeta is the kind Verify gives to what it finds in the meta object
// and the writer states, against each other and the segments (package
// reader checks the segments and their chains).
const ProblemMeta reader.ProblemKind = "meta"

// Verify checks the whole log: every segment, block and chain
// (reader.Verify), then the meta object and the writer states against each
// other and against the segment names — a checkpoint at or below the
// resolved ts, a state for every live writer, no segment from an epoch its
// writer never reached. Problems are sorted errors first.
func (l *Log) Verify(ctx context.Context, opts *reader.VerifyOptions) (*reader.Report, error) {
	rep, err := reader.Verify(ctx, l.b, l.id, opts)
	if err != nil {
		return nil, err
	}
	more, err := l.verifyMeta(ctx, rep)
	if err != nil {
		return nil, err
	}
	rep.Problems = append(rep.Problems, more...)
	slices.SortStableFunc(rep.Problems, func(x, y reader.Problem) int { return int(y.Severity) - int(x.Severity) })
	return rep, nil
}

// verifyMeta checks what reader.Verify does not: the meta object and the
// writer states, against each other and against the segment names.
func (l *Log) verifyMeta(ctx context.Context, rep *reader.Report) ([]reader.Problem, error) {
	b := l.b
	var out []reader.Problem
	add := func(sev reader.Severity, key, format string, args ...any) {
		out = append(out, reader.Problem{Severity: sev, Kind: ProblemMeta, Key: key, Offset: -1, Detail: fmt.Sprintf(format, args...)})
	}
	metaKey := layout.Meta(l.id)
	m, _, err := meta.ReadMeta(ctx, b, l.id)
	switch {
	case blob.IsNotExist(err):
		add(reader.Error, metaKey, "the log has no meta object: no checkpoint or global resolved ts, so a recovery has no range to replay")
	case err != nil && !reported(rep, metaKey):
		add(reader.Error, metaKey, "the meta object cannot be read: %v", err)
	}
	// reader.Verify reports the keys under the states that are not writer
	// IDs, each by name: here they are passed by.
	states, err := meta.ListWriterStates(ctx, b, l.id, &meta.ListOptions{SkipBadName: func(string, error) {}})
	if err != nil {
		// A state that does not decode makes the whole listing fail; it is a
		// finding about the log, not a reason to stop. reader.Verify names
		// each such state.
		if !slices.ContainsFunc(rep.Problems, func(p reader.Problem) bool { return p.Kind == reader.ProblemBadState }) {
			add(reader.Error, layout.Writers(l.id), "the writer states cannot be read: %v", err)
		}
		states = nil
	}
	if m != nil && states != nil {
		// The states were read after the meta object: one older than it
		// accounted, or one that saw a newer meta object or a span it does
		// not know, is what a restored version or a lagging replica serves.
		if err := meta.CheckStates(ctx, b, l.id, m, states); err != nil {
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
			add(reader.Error, key, "%v", err)
		}
	}
	if m != nil {
		if m.LogID != l.id {
			add(reader.Error, metaKey, "the meta object names log %q", m.LogID)
		}
		if m.CheckpointTs > m.ResolvedTs {
			add(reader.Error, metaKey, "checkpoint ts %d is above the global resolved ts %d", m.CheckpointTs, m.ResolvedTs)
		}
		if states != nil {
			for id, epoch := range m.Writers {
				st := states[id]
				if st == nil {
					add(reader.Error, layout.WriterState(l.id, id), "live writer %q of the meta object has no state object", id)
				} else if st.Epoch < epoch {
					add(reader.Error, layout.WriterState(l.id, id), "writer %q is at epoch %d, below the epoch %d the meta object saw", id, st.Epoch, epoch)
				}
			}
		}
	}
	for id, st := range states {
		key := layout.WriterState(l.id, id)
		if st.WriterID != id || st.LogID != l.id {
			add(reader.Error, key, "the state object is of writer %q of log %q", st.WriterID, st.LogID)
		}
		prev := uint64(0)
		for _, f := range st.Fences {
			if f.Epoch >= st.Epoch || f.Epoch <= prev {
				add(reader.Error, key, "fence of epoch %d is out of order (current epoch %d)", f.Epoch, st.Epoch)
			}
			prev = f.Epoch
		}
	}
	// Segments from an epoch their writer never reached mean the state went
	// backwards (restored from a backup, overwritten): fences cannot protect
	// the log from those.
	entries, err := chain.List(ctx, b, l.id, layout.Segments(l.id))
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		// A segment prefix that cannot be listed (on local disk, a seg
		// folder that is a symbolic link) is a finding too.
		add(reader.Error, layout.Segments(l.id), "the segments cannot be listed: %v", err)
	}
	for _, e := range entries {
		if e.Err != nil {
			continue // reader.Verify reported it
		}
		if st := states[e.Name.WriterID]; st != nil && e.Name.Epoch > st.Epoch {
			add(reader.Error, e.Key, "segment of epoch %d, but writer %q is only at epoch %d", e.Name.Epoch, e.Name.WriterID, st.Epoch)
		}
	}
	return out, nil
}

// reported reports whether rep has an error about key.
func reported(rep *reader.Report, key string) bool {
	return slices.ContainsFunc(rep.Problems, func(p reader.Problem) bool { return p.Key == key && p.Severity == reader.Error })
}
