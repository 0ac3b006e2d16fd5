package meta

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/segment"
)

// StateVersion is the version of the JSON documents this package writes (the
// writer state and the log meta). A reader refuses a newer one by name.
const StateVersion = 1

// WritersDir is the key element under a log that holds one state object per
// writer.
const WritersDir = "writers"

// WriterKey is the key of a writer's state object.
func WriterKey(logID, writerID string) string { return logID + "/" + WritersDir + "/" + writerID }

// WritersPrefix is the prefix of every writer state object of a log.
func WritersPrefix(logID string) string { return logID + "/" + WritersDir + "/" }

// WriterState is the one small object per writer that holds its lease and
// its progress. Every change to it is a compare-and-swap on its ETag, so a
// process that lost the lease (a zombie) can never publish progress: its next
// write fails with blob.ErrFenced.
type WriterState struct {
	Version  int    `json:"version"`
	LogID    string `json:"log"`
	WriterID string `json:"writer"`
	// Epoch increases by one each time a process opens the writer ID. Segment
	// names carry it.
	Epoch uint64 `json:"epoch"`
	// FlushedTs is the writer's flushed resolved ts: every event of every
	// span of the writer with commit ts ≤ FlushedTs is durable in segments
	// of this epoch with seq ≤ Seq, or of earlier epochs (accepted by Fences).
	FlushedTs uint64 `json:"flushed_ts"`
	// Seq is the highest segment sequence number of this epoch that holds
	// flushed data (0 with HasSeq false: none yet).
	Seq    uint64 `json:"seq"`
	HasSeq bool   `json:"has_seq"`
	// ChainMaxTs is the largest commit ts held by this epoch's segments up
	// to and including Seq, and Digest the header CRC of segment Seq (see
	// segment's chain link). With them a reader proves that the epoch's
	// chain ends where the writer published it, and that segments missing
	// below it held nothing above a given ts.
	ChainMaxTs uint64 `json:"chain_max_ts"`
	Digest     uint32 `json:"digest"`
	// Spans is the flushed resolved ts of each span the writer owns, sorted
	// by span. The coordinator tracks spans across owners with it: a span's
	// effective flushed ts is the highest any of its owners made durable.
	Spans []SpanTs `json:"spans,omitempty"`
	// Fences record, for each earlier epoch that published a segment, the
	// highest sequence number it published before it was fenced. Segments of
	// that epoch with a higher seq were written by a zombie after the fence:
	// readers ignore them. An earlier epoch with no fence published nothing,
	// and readers ignore all its segments.
	Fences []Fence `json:"fences,omitempty"`
	// Owner describes the process holding the lease (host and pid), for
	// operators. Informational only.
	Owner   string    `json:"owner,omitempty"`
	Updated time.Time `json:"updated"`
}

// SpanTs is one span's flushed resolved ts.
type SpanTs struct {
	Span uint64 `json:"span"`
	Ts   uint64 `json:"ts"`
}

// Progress is what a writer publishes after a durable flush.
type Progress struct {
	FlushedTs  uint64   // the writer's flushed resolved ts (min over its spans)
	Seq        uint64   // the highest segment seq holding flushed data
	ChainMaxTs uint64   // the largest commit ts in the epoch's segments up to Seq
	Digest     uint32   // the header CRC of segment Seq
	Spans      []SpanTs // per-span flushed resolved ts; nil keeps the published ones
}

// Fence is the last sequence number an earlier epoch of a writer published.
type Fence struct {
	Epoch   uint64 `json:"epoch"`
	LastSeq uint64 `json:"last_seq"`
	// MaxTs and Digest are the epoch's last published ChainMaxTs and
	// Digest: where its chain must end, and what it held at most.
	MaxTs  uint64 `json:"max_ts"`
	Digest uint32 `json:"digest"`
}

// Accepts reports whether a segment of this writer with the given name is
// part of the log: a segment of the current epoch, or of an earlier epoch at
// or below that epoch's fence.
func (s *WriterState) Accepts(n segment.Name) bool {
	if n.Epoch == s.Epoch {
		return true
	}
	if n.Epoch > s.Epoch {
		// Written by an epoch newer than this state: the state is stale
		// (read before a takeover). Accept; a fresh read decides.
		return true
	}
	for _, f := range s.Fences {
		if f.Epoch == n.Epoch {
			return n.Seq <= f.LastSeq
		}
	}
	return false
}

// ReadWriterState reads and decodes a writer's state object; its ETag comes
// back for compare-and-swap.
func ReadWriterState(ctx context.Context, b *blob.Bucket, logID, writerID string) (*WriterState, string, error) {
	key := WriterKey(logID, writerID)
	attrs, err := b.Stat(ctx, key)
	if err != nil {
		return nil, "", err
	}
	data, err := b.ReadAll(ctx, key)
	if err != nil {
		return nil, "", err
	}
	var st WriterState
	if err := decodeJSON(key, data, &st); err != nil {
		return nil, "", err
	}
	if st.LogID != logID || st.WriterID != writerID {
		return nil, "", fmt.Errorf("meta: %s: holds log %q writer %q", key, st.LogID, st.WriterID)
	}
	return &st, attrs.ETag, nil
}

// ListWriterStates reads the state of every writer of a log, by writer ID.
func ListWriterStates(ctx context.Context, b *blob.Bucket, logID string) (map[string]*WriterState, error) {
	out := map[string]*WriterState{}
	prefix := WritersPrefix(logID)
	for a, err := range b.List(ctx, prefix) {
		if err != nil {
			return nil, err
		}
		id := a.Key[len(prefix):]
		if segment.ValidateID(id) != nil {
			continue // not ours
		}
		st, _, err := ReadWriterState(ctx, b, logID, id)
		if blob.IsNotExist(err) {
			continue // removed between list and read
		}
		if err != nil {
			return nil, err
		}
		out[id] = st
	}
	return out, nil
}

// Lease is a writer's hold on its writer ID for one epoch. It is safe for
// concurrent use.
type Lease struct {
	b    *blob.Bucket
	key  string
	mu   sync.Mutex
	st   WriterState
	etag string
	// fenced is sticky: once a write lost, the lease is gone for good.
	fenced error
	// Previous is the state of the writer ID before this lease took it
	// (nil for a new writer): where its last epoch's progress stood.
	Previous *WriterState
}

// AcquireOptions configure AcquireWriter. Nil means defaults.
type AcquireOptions struct {
	// Owner describes this process in the state object; default host:pid.
	Owner string
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// AcquireWriter takes the lease of writerID in logID: it creates the writer's
// state object (if-not-exists) at epoch 1, or increments the epoch of the
// existing one by compare-and-swap, recording a fence for the epoch it
// replaces. Any process still holding the old epoch is fenced from then on.
// Concurrent acquirers race by conditional write; the losers retry on the
// new state, so each gets its own epoch and the last one holds the lease.
func AcquireWriter(ctx context.Context, b *blob.Bucket, logID, writerID string, opts *AcquireOptions) (*Lease, error) {
	if err := segment.ValidateID(logID); err != nil {
		return nil, fmt.Errorf("meta: log ID: %w", err)
	}
	if err := segment.ValidateID(writerID); err != nil {
		return nil, fmt.Errorf("meta: writer ID: %w", err)
	}
	var o AcquireOptions
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Owner == "" {
		host, _ := os.Hostname()
		o.Owner = host + ":" + strconv.Itoa(os.Getpid())
	}
	key := WriterKey(logID, writerID)
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		prev, etag, err := ReadWriterState(ctx, b, logID, writerID)
		if err != nil && !blob.IsNotExist(err) {
			return nil, err
		}
		next := WriterState{Version: StateVersion, LogID: logID, WriterID: writerID, Epoch: 1, Owner: o.Owner, Updated: o.Now().UTC()}
		put := &blob.PutOptions{IfNotExist: true}
		if prev != nil {
			next.Epoch = prev.Epoch + 1
			next.Fences = slices.Clone(prev.Fences)
			if prev.HasSeq {
				next.Fences = append(next.Fences, Fence{Epoch: prev.Epoch, LastSeq: prev.Seq, MaxTs: prev.ChainMaxTs, Digest: prev.Digest})
			}
			// The new epoch starts where the old one's durable progress
			// stood: that data stays in the log under the old epoch's fence.
			next.FlushedTs = prev.FlushedTs
			next.Spans = prev.Spans
			put = &blob.PutOptions{IfMatch: etag}
		}
		data, _ := json.Marshal(&next)
		attrs, err := b.Put(ctx, key, data, put)
		if blob.IsPreconditionFailed(err) {
			continue // another acquirer won this round; build on its state
		}
		if err != nil {
			return nil, err
		}
		return &Lease{b: b, key: key, st: next, etag: attrs.ETag, Previous: prev}, nil
	}
}

// State returns a copy of the lease's current state.
func (l *Lease) State() WriterState {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.st
	st.Fences = slices.Clone(st.Fences)
	return st
}

// Epoch is the lease's epoch.
func (l *Lease) Epoch() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st.Epoch
}

// Publish records the writer's progress without changing its per-span
// figures: flushedTs is its new flushed resolved ts, seq the highest segment
// sequence number holding flushed data. See PublishProgress.
func (l *Lease) Publish(ctx context.Context, flushedTs, seq uint64) error {
	return l.PublishProgress(ctx, Progress{FlushedTs: flushedTs, Seq: seq})
}

// PublishProgress records the writer's progress by compare-and-swap: if
// another process has taken the writer ID, it fails with an error matching
// blob.ErrFenced, and so does every later call. A seq below the published one
// is an error. The flushed ts may fall: a writer that takes on a span behind
// its own progress (a span moved to it at the log's checkpoint) honestly
// reports the lower ts until the span catches up; the coordinator keeps the
// global watermark from falling. Publishing what is already published writes
// nothing.
func (l *Lease) PublishProgress(ctx context.Context, p Progress) error {
	return l.PublishProgressAfter(ctx, p, nil)
}

// PublishProgressAfter is PublishProgress with a precondition: ready is
// called once before the new progress can become visible (see
// blob.PutOptions.BeforeCommit), and its error abandons the publication.
// A writer passes the wait for the fsync of the data the progress covers,
// so that the state object is staged while the data syncs, yet never
// visible before the data is durable. ready is called even when nothing
// is written (the progress is already published or the lease is lost), so
// the caller can rely on it having run when this returns; it may not run
// when ctx ends first.
func (l *Lease) PublishProgressAfter(ctx context.Context, p Progress, ready func(context.Context) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ready == nil {
		ready = func(context.Context) error { return nil }
	}
	if l.fenced != nil {
		return errors.Join(ready(ctx), l.fenced)
	}
	if l.st.HasSeq && p.Seq < l.st.Seq {
		return errors.Join(ready(ctx), fmt.Errorf("meta: writer %s: segment seq %d is below the published %d", l.st.WriterID, p.Seq, l.st.Seq))
	}
	spans := l.st.Spans
	if p.Spans != nil {
		spans = slices.Clone(p.Spans)
		slices.SortFunc(spans, func(a, b SpanTs) int { return cmp.Compare(a.Span, b.Span) })
	}
	if p.FlushedTs == l.st.FlushedTs && l.st.HasSeq && p.Seq == l.st.Seq && p.ChainMaxTs == l.st.ChainMaxTs && p.Digest == l.st.Digest && slices.Equal(spans, l.st.Spans) {
		return ready(ctx)
	}
	next := l.st
	next.FlushedTs, next.Seq, next.HasSeq, next.Spans, next.Updated = p.FlushedTs, p.Seq, true, spans, time.Now().UTC()
	next.ChainMaxTs, next.Digest = p.ChainMaxTs, p.Digest
	data, _ := json.Marshal(&next)
	called := false
	attrs, err := l.b.Put(ctx, l.key, data, &blob.PutOptions{IfMatch: l.etag, BeforeCommit: func(ctx context.Context) error {
		called = true
		return ready(ctx)
	}})
	if !called && ctx.Err() == nil {
		// The put failed before its commit point (a lost lease among
		// others): ready still runs, as promised.
		err = errors.Join(err, ready(ctx))
	}
	if blob.IsPreconditionFailed(err) || blob.IsNotExist(err) {
		l.fenced = fmt.Errorf("meta: writer %s epoch %d lost its lease: %w", l.st.WriterID, l.st.Epoch, blob.ErrFenced)
		return l.fenced
	}
	if err != nil {
		return err
	}
	l.st, l.etag = next, attrs.ETag
	return nil
}

// Check verifies that the lease is still held, by reading the state object.
// It costs one read; writers call it before committing a segment on stores
// where a zombie's segment would otherwise cost a reader work.
func (l *Lease) Check(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fenced != nil {
		return l.fenced
	}
	st, etag, err := ReadWriterState(ctx, l.b, l.st.LogID, l.st.WriterID)
	if err != nil && !blob.IsNotExist(err) {
		return err
	}
	if err != nil || etag != l.etag || st.Epoch != l.st.Epoch {
		l.fenced = fmt.Errorf("meta: writer %s epoch %d lost its lease: %w", l.st.WriterID, l.st.Epoch, blob.ErrFenced)
		return l.fenced
	}
	return nil
}

func decodeJSON(key string, data []byte, v interface{ version() int }) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("meta: %s: malformed state object: %w", key, err)
	}
	if got := v.version(); got != StateVersion {
		return fmt.Errorf("meta: %s: unsupported state version %d (this build reads %d): %w", key, got, StateVersion, errUnsupported)
	}
	return nil
}

var errUnsupported = errors.New("unsupported version")

func (s *WriterState) version() int { return s.Version }
