package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/segment"
)

// ErrDeleting reports a log whose removal started and has not finished (its
// delete marker is there). Opening it would mix a new log with the old one's
// leftovers; gc.ResumeDeleteLog finishes the removal.
var ErrDeleting = errors.New("meta: log is being deleted")

// checkNotDeleting proves that no removal of logID is under way, or returns
// ErrDeleting naming the marker.
func checkNotDeleting(ctx context.Context, b *blob.Bucket, logID string) error {
	marker := layout.DeleteMarker(logID)
	ok, err := b.Exists(ctx, marker)
	switch {
	case err != nil:
		return fmt.Errorf("meta: check for an unfinished removal of log %s: %w", logID, err)
	case ok:
		return fmt.Errorf("meta: log %s: %w: the marker %s is there; finish the removal first", logID, ErrDeleting, marker)
	}
	return nil
}

// Meta is a log's meta object: how far the downstream has applied
// (CheckpointTs), how far the log is complete (ResolvedTs, the global
// resolved ts), and what the coordinator needs to keep computing it. Neither
// ts ever goes backwards, and CheckpointTs ≤ ResolvedTs always.
type Meta struct {
	// Version is the envelope's version (StateVersion); it is not part of
	// the body.
	Version      int    `json:"-"`
	LogID        string `json:"log"`
	CheckpointTs uint64 `json:"checkpoint_ts"`
	ResolvedTs   uint64 `json:"resolved_ts"`
	// Writers are the live writers and the epoch each held when last seen.
	Writers map[string]uint64 `json:"writers"`
	// Spans are the log's spans with their effective flushed ts: the highest
	// ts any owner of the span made durable. A span is registered at a start
	// ts (its Ts until an owner reports more).
	Spans map[SpanID]uint64 `json:"spans"`
	// Barriers are pending DDLs that change which spans exist (create table,
	// add partition, ...): each holds ResolvedTs at or below its commit ts
	// until it is released.
	Barriers []Barrier `json:"barriers"`
	// RemovedSpans are spans RemoveSpan unregistered that a writer state
	// still publishes, with the effective flushed ts each had: a writer
	// that still lists such a span is no sign of a stale meta object. Tick
	// forgets one once no writer state lists it.
	RemovedSpans map[SpanID]uint64 `json:"removed_spans" since:"3"`
	// Generation grows by one with every write of the object (1 when
	// created; 0 for a version-2 object, which had none). A copy with a
	// lower generation than one already seen is stale (ErrStale).
	Generation uint64 `json:"generation" since:"3"`
	// WriterGenerations is, per writer, the newest generation of its state
	// object the coordinator accounted: a reader that then reads an older
	// state is reading a stale one.
	WriterGenerations map[string]uint64 `json:"writer_generations" since:"3"`
	Updated           time.Time         `json:"updated"`
	// Token is the random token of the write that stored this version (see
	// Lease).
	Token string `json:"token"`
}

// Barrier is a pending DDL barrier.
type Barrier struct {
	ID       string `json:"id"`
	CommitTs uint64 `json:"commit_ts"`
}

// ReadMeta reads a log's meta object and its ETag, both of one version (see
// readVersion). A damaged object is an error naming the key that matches
// ErrCorrupt or ErrUnsupportedVersion.
func ReadMeta(ctx context.Context, b *blob.Bucket, logID string) (*Meta, string, error) {
	return readMeta(ctx, b, logID, true)
}

func readMeta(ctx context.Context, b *blob.Bucket, logID string, withETag bool) (*Meta, string, error) {
	if err := segment.ValidateID(logID); err != nil {
		return nil, "", fmt.Errorf("meta: log ID: %w", err)
	}
	key := layout.Meta(logID)
	data, etag, err := readVersion(ctx, b, key, withETag)
	if err != nil {
		return nil, "", err
	}
	m, err := decodeMeta(key, data)
	if err != nil {
		return nil, "", err
	}
	if m.LogID != logID {
		return nil, "", fmt.Errorf("meta: %s: holds log %q: %w", key, m.LogID, ErrCorrupt)
	}
	return m, etag, nil
}

// decodeMeta decodes a stored meta object and checks the rules a valid one
// keeps.
func decodeMeta(key string, data []byte) (*Meta, error) {
	body, version, err := unseal(key, data)
	if err != nil {
		return nil, err
	}
	var m Meta
	if err := decodeStrict(key, body, &m, version); err != nil {
		return nil, err
	}
	m.Version = version
	switch {
	case !validToken(m.Token):
		return nil, fmt.Errorf("meta: %s: write token %q is not 32 lowercase hex digits: %w", key, m.Token, ErrCorrupt)
	case m.CheckpointTs > m.ResolvedTs:
		return nil, fmt.Errorf("meta: %s: checkpoint ts %d is above resolved ts %d: %w", key, m.CheckpointTs, m.ResolvedTs, ErrCorrupt)
	}
	if m.Writers == nil {
		m.Writers = map[string]uint64{}
	}
	if m.Spans == nil {
		m.Spans = map[SpanID]uint64{}
	}
	if m.RemovedSpans == nil {
		m.RemovedSpans = map[SpanID]uint64{}
	}
	if m.WriterGenerations == nil {
		m.WriterGenerations = map[string]uint64{}
	}
	if version >= 3 && m.Generation == 0 {
		return nil, fmt.Errorf("meta: %s: generation 0: %w", key, ErrCorrupt)
	}
	if err := checkMetaRules(key, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// encodeMeta is the stored form of m.
func encodeMeta(m *Meta) []byte {
	body, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("meta: encode meta: %v", err)) // plain data: cannot fail
	}
	return seal(body)
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

// Current reads the meta object once (one request: no ETag).
func (w *Watcher) Current(ctx context.Context) (*Meta, error) {
	m, _, err := readMeta(ctx, w.b, w.logID, false)
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
