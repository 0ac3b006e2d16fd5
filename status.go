package redokit

import (
	"context"
	"maps"
	"slices"

	"github.com/redokit/redokit/meta"
)

// Status is a log as its coordination objects describe it: the meta object
// and every writer, seen from both sides.
type Status struct {
	Meta *meta.Meta
	// Writers are every writer with a state object or listed as live in the
	// meta object, sorted by ID.
	Writers []WriterStatus
}

// WriterStatus is one writer as the log sees it.
type WriterStatus struct {
	ID string
	// Live: the meta object lists the writer; MetaEpoch is the epoch the
	// coordinator last saw it at (0 when not live).
	Live      bool
	MetaEpoch uint64
	// State is the writer's own state object: its epoch, progress and
	// fences. nil when it has none (a live writer without one is a problem
	// Verify reports).
	State *meta.WriterState
}

// Status reads the meta object (ErrNoLog when there is none) and the writer
// states, and pairs them by writer.
func (l *Log) Status(ctx context.Context) (*Status, error) {
	m, err := l.Meta(ctx)
	if err != nil {
		return nil, err
	}
	states, err := l.WriterStates(ctx)
	if err != nil {
		return nil, err
	}
	ids := slices.Collect(maps.Keys(states))
	for id := range m.Writers {
		if states[id] == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	st := &Status{Meta: m}
	for _, id := range ids {
		epoch, live := m.Writers[id]
		st.Writers = append(st.Writers, WriterStatus{ID: id, Live: live, MetaEpoch: epoch, State: states[id]})
	}
	return st, nil
}
