package meta

import (
	"context"
	"fmt"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/segment"
)

// MetaKey is the key of a log's meta object.
func MetaKey(logID string) string { return logID + "/meta" }

// Meta is a log's meta object: how far the downstream has applied
// (CheckpointTs), how far the log is complete (ResolvedTs, the global
// resolved ts), and what the coordinator needs to keep computing it. Neither
// ts ever goes backwards, and CheckpointTs ≤ ResolvedTs always.
type Meta struct {
	Version      int    `json:"version"`
	LogID        string `json:"log"`
	CheckpointTs uint64 `json:"checkpoint_ts"`
	ResolvedTs   uint64 `json:"resolved_ts"`
	// Writers are the live writers and the epoch each held when last seen.
	Writers map[string]uint64 `json:"writers"`
	// Spans are the log's spans with their effective flushed ts: the highest
	// ts any owner of the span made durable. A span is registered at a start
	// ts (its Ts until an owner reports more).
	Spans map[uint64]uint64 `json:"spans"`
	// Barriers are pending DDLs that change which spans exist (create table,
	// add partition, ...): each holds ResolvedTs at or below its commit ts
	// until it is released.
	Barriers []Barrier `json:"barriers,omitempty"`
	Updated  time.Time `json:"updated"`
}

// Barrier is a pending DDL barrier.
type Barrier struct {
	ID       string `json:"id"`
	CommitTs uint64 `json:"commit_ts"`
}

func (m *Meta) version() int { return m.Version }

// ReadMeta reads a log's meta object and its ETag.
func ReadMeta(ctx context.Context, b *blob.Bucket, logID string) (*Meta, string, error) {
	if err := segment.ValidateID(logID); err != nil {
		return nil, "", fmt.Errorf("meta: log ID: %w", err)
	}
	key := MetaKey(logID)
	attrs, err := b.Stat(ctx, key)
	if err != nil {
		return nil, "", err
	}
	data, err := b.ReadAll(ctx, key)
	if err != nil {
		return nil, "", err
	}
	var m Meta
	if err := decodeJSON(key, data, &m); err != nil {
		return nil, "", err
	}
	if m.LogID != logID {
		return nil, "", fmt.Errorf("meta: %s: holds log %q", key, m.LogID)
	}
	if m.CheckpointTs > m.ResolvedTs {
		return nil, "", fmt.Errorf("meta: %s: checkpoint ts %d is above resolved ts %d", key, m.CheckpointTs, m.ResolvedTs)
	}
	if m.Writers == nil {
		m.Writers = map[string]uint64{}
	}
	if m.Spans == nil {
		m.Spans = map[uint64]uint64{}
	}
	return &m, attrs.ETag, nil
}

// Watcher polls a log's meta object so sinks can wait for the global resolved
// ts to cover what they want to write. One read per poll.
type Watcher struct {
	b        *blob.Bucket
	logID    string
	interval time.Duration
}

// NewWatcher returns a Watcher polling every interval (default 100 ms).
func NewWatcher(b *blob.Bucket, logID string, interval time.Duration) *Watcher {
	if interval <= 0 {
		interval = 100 * time.Millisecond
	}
	return &Watcher{b: b, logID: logID, interval: interval}
}

// Current reads the meta object once.
func (w *Watcher) Current(ctx context.Context) (*Meta, error) {
	m, _, err := ReadMeta(ctx, w.b, w.logID)
	return m, err
}

// WaitResolved blocks until the log's global resolved ts is at least ts, and
// returns it; or until ctx ends. A missing meta object is waited for.
func (w *Watcher) WaitResolved(ctx context.Context, ts uint64) (uint64, error) {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		m, err := w.Current(ctx)
		switch {
		case err == nil && m.ResolvedTs >= ts:
			return m.ResolvedTs, nil
		case err != nil && !blob.IsNotExist(err):
			return 0, err
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-t.C:
		}
	}
}
