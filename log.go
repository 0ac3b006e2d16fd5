// Package redokit is the handle a CDC system wires in: a Log opened from a
// bucket and a log ID. It owns what the packages beneath it must agree on —
// where the log's objects lie, which span type names a table or key range,
// and which read ranges the log guarantees — and hands out each part. A
// Service runs the loops a CDC process needs around its writers (Example is
// the whole wiring, runnable):
//
//	log, err := redokit.Open(ctx, bucket, "changefeed-1")
//	svc, err := log.Start(ctx, nil)                    // coordinator tick, GC, checkpoint fan-in; Close stops them
//	w, err := svc.OpenWriter(ctx, "capture-1", nil)    // events per span, flushed durably
//	err = svc.AddSpan(ctx, w, span, startTs)           // registered on the coordinator, then the writer
//	cp := svc.Checkpoints().Join("sink-1", startTs)    // a gate's Checkpointer (sinkgate.New): min of applied ts → checkpoint → GC
//	f, err := svc.Follow(ctx, nil)                     // a warm standby: every event as the log proves it
//	r, err := log.OpenReader(ctx, nil)                 // after a disaster: (checkpoint, global resolved], proven complete
//
// Each part is also there alone (OpenCoordinator, OpenWriter, StartGC,
// OpenReader, Follow), and the packages beneath (blob, segment, codec,
// meta, writer, reader, gc) stay usable on their own; this one adds no
// behaviour of its own beyond the range rules, the order of opening (an
// interrupted removal is finished first) and the Service's wiring.
package redokit

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/gc"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/segment"
	"github.com/redokit/redokit/writer"
)

// SpanID identifies a span: a table, or a key range of a split table.
type SpanID = meta.SpanID

// Sentinel errors. Match them with errors.Is.
var (
	// ErrNoLog: the log has no meta object, so nothing says how far it is
	// complete. A coordinator creates it (OpenCoordinator).
	ErrNoLog = errors.New("redokit: no such log")
	// ErrAboveResolved: a read range ends (or starts) above the global
	// resolved ts, where the log does not yet hold every event.
	ErrAboveResolved = errors.New("redokit: read range above the global resolved ts")
	// ErrBelowCheckpoint: a read range starts below the checkpoint, where GC
	// may already have deleted segments.
	ErrBelowCheckpoint = errors.New("redokit: read range below the checkpoint")
	// ErrEmptyRange: the range (start, end] holds no ts.
	ErrEmptyRange = errors.New("redokit: empty read range")
)

// Log is one redo log in a bucket. It holds no state beyond its bucket and
// ID, so it is cheap, safe for concurrent use, and needs no Close; what it
// opens is closed on its own.
type Log struct {
	b  *blob.Bucket
	id string
}

// Open returns the handle of log logID in b. It reads and writes nothing:
// reading through the handle never changes the log. The calls that write
// (OpenWriter, OpenCoordinator) first finish a removal of the log that a
// crash interrupted, so a new log never mixes with an old one's leftovers.
func Open(ctx context.Context, b *blob.Bucket, logID string) (*Log, error) {
	if err := segment.ValidateID(logID); err != nil {
		return nil, fmt.Errorf("redokit: log ID: %w", err)
	}
	return &Log{b: b, id: logID}, nil
}

// finishRemoval finishes a removal of the log that a crash interrupted.
func (l *Log) finishRemoval(ctx context.Context) error {
	if _, err := gc.ResumeDeleteLog(ctx, l.b, l.id); err != nil {
		return fmt.Errorf("redokit: finish an interrupted removal of log %s: %w", l.id, err)
	}
	return nil
}

// ID is the log's ID.
func (l *Log) ID() string { return l.id }

// Bucket is the bucket the log lives in.
func (l *Log) Bucket() *blob.Bucket { return l.b }

// MetaKey is the key of the log's meta object, for messages that must name
// it.
func (l *Log) MetaKey() string { return layout.Meta(l.id) }

// WriterKey is the key of one writer's state object, for messages.
func (l *Log) WriterKey(writerID string) string { return layout.WriterState(l.id, writerID) }

// SegmentPrefix is the prefix every segment key of the log starts with.
func (l *Log) SegmentPrefix() string { return layout.Segments(l.id) }

// OpenWriter opens writer writerID of the log (see package writer). opts may
// be nil; its LogID and WriterID are set from the handle.
func (l *Log) OpenWriter(ctx context.Context, writerID string, opts *writer.Options) (*writer.Writer, error) {
	var o writer.Options
	if opts != nil {
		o = *opts
	}
	o.LogID, o.WriterID = l.id, writerID
	if err := l.finishRemoval(ctx); err != nil {
		return nil, err
	}
	return writer.Open(ctx, l.b, &o)
}

// OpenCoordinator opens (creating it when absent) the log's meta object, and
// the coordinator that moves its global resolved ts and checkpoint.
func (l *Log) OpenCoordinator(ctx context.Context, opts *meta.CoordinatorOptions) (*meta.Coordinator, error) {
	if err := l.finishRemoval(ctx); err != nil {
		return nil, err
	}
	return meta.OpenCoordinator(ctx, l.b, l.id, opts)
}

// Watcher polls the log's global resolved ts, for sink gates.
func (l *Log) Watcher(interval time.Duration) *meta.Watcher {
	return meta.NewWatcher(l.b, l.id, interval)
}

// Meta reads the log's meta object. A log without one is ErrNoLog naming
// its key; but when the store cannot even list the log's prefix (a bucket or
// container that does not exist reads every key as missing), that error is
// returned instead: "no such log" would send an operator looking for the
// wrong thing.
func (l *Log) Meta(ctx context.Context) (*meta.Meta, error) {
	m, _, err := meta.ReadMeta(ctx, l.b, l.id)
	if blob.IsNotExist(err) {
		if _, lerr := l.b.ListPage(ctx, layout.Log(l.id), blob.ListOptions{PageSize: 1}); lerr != nil {
			return nil, fmt.Errorf("redokit: log %s: its meta object %s reads as missing, and the store cannot list the log either (a missing bucket or container?): %w", l.id, l.MetaKey(), lerr)
		}
		return nil, fmt.Errorf("%w: log %s has no meta object %s", ErrNoLog, l.id, l.MetaKey())
	}
	return m, err
}

// WriterStates reads every writer's state object, by writer ID.
func (l *Log) WriterStates(ctx context.Context) (map[string]*meta.WriterState, error) {
	return meta.ListWriterStates(ctx, l.b, l.id, nil)
}

// Segment is one object listed under the log's segment prefix: its attributes
// and its parsed name, or why the key is not a segment name.
type Segment struct {
	blob.Attrs
	Name    segment.Name
	NameErr error
}

// Segments lists the log's segment objects in key order ((writer, epoch,
// seq) order). A key that is not a segment name is yielded with NameErr set,
// never hidden.
func (l *Log) Segments(ctx context.Context) iter.Seq2[Segment, error] {
	return func(yield func(Segment, error) bool) {
		for a, err := range l.b.List(ctx, l.SegmentPrefix()) {
			if err != nil {
				yield(Segment{}, fmt.Errorf("redokit: list %s: %w", l.SegmentPrefix(), err))
				return
			}
			s := Segment{Attrs: a}
			s.Name, s.NameErr = segment.ParseName(a.Key)
			if s.NameErr == nil && s.Name.LogID != l.id {
				s.NameErr = fmt.Errorf("%w: %s names log %q", segment.ErrInvalidName, a.Key, s.Name.LogID)
			}
			if !yield(s, nil) {
				return
			}
		}
	}
}

// ReadOptions configure OpenReader. Nil means defaults: the range
// (checkpoint, global resolved ts], the one a recovery replays.
type ReadOptions struct {
	// Options are the reader's (package reader); LogID, StartTs and EndTs
	// are set by OpenReader from the fields below.
	reader.Options
	// Start and End bound the range (Start, End]; 0 means the checkpoint
	// and the global resolved ts.
	Start, End uint64
	// AllowAboveResolved lets the range reach above the global resolved ts,
	// where writers may still hold events the log does not have yet.
	AllowAboveResolved bool
	// AllowBelowCheckpoint lets Start go below the checkpoint, and makes a
	// Start of 0 mean 0. GC may have deleted segments there: the reader's
	// chain proof then fails with reader.ErrIncomplete instead of reading
	// short.
	AllowBelowCheckpoint bool
}

// Range resolves o's range against the log's meta object and checks it (see
// CheckRange).
func (l *Log) Range(ctx context.Context, o *ReadOptions) (start, end uint64, err error) {
	m, err := l.Meta(ctx)
	if err != nil {
		return 0, 0, err
	}
	return CheckRange(m, o)
}

// CheckRange resolves o's range against a log's meta object m and checks it:
// an end above the global resolved ts is ErrAboveResolved and a start below
// the checkpoint ErrBelowCheckpoint, unless o allows it; each error says
// which bound, by how much, and which object holds the log's values.
func CheckRange(m *meta.Meta, o *ReadOptions) (start, end uint64, err error) {
	var opts ReadOptions
	if o != nil {
		opts = *o
	}
	start, end = m.CheckpointTs, m.ResolvedTs
	if opts.Start != 0 || opts.AllowBelowCheckpoint {
		start = opts.Start
	}
	if opts.End != 0 {
		end = opts.End
	}
	metaKey := layout.Meta(m.LogID)
	switch {
	case !opts.AllowAboveResolved && end > m.ResolvedTs:
		return 0, 0, fmt.Errorf("%w: end ts %d is above the global resolved ts %d of log %s (in %s): events up to it may not all be in the log yet", ErrAboveResolved, end, m.ResolvedTs, m.LogID, metaKey)
	case !opts.AllowAboveResolved && start > m.ResolvedTs:
		return 0, 0, fmt.Errorf("%w: start ts %d is above the global resolved ts %d of log %s (in %s): the log is not complete there", ErrAboveResolved, start, m.ResolvedTs, m.LogID, metaKey)
	case !opts.AllowBelowCheckpoint && start < m.CheckpointTs:
		return 0, 0, fmt.Errorf("%w: start ts %d is below the checkpoint ts %d of log %s (in %s): GC may have deleted segments below it", ErrBelowCheckpoint, start, m.CheckpointTs, m.LogID, metaKey)
	case start >= end:
		return 0, 0, fmt.Errorf("%w: start ts %d (exclusive) is not below end ts %d (inclusive)", ErrEmptyRange, start, end)
	}
	return start, end, nil
}

// OpenReader opens a reader of the range Range resolves from o (see package
// reader: a k-way merge in commit-ts order that proves the range complete
// before it returns anything).
func (l *Log) OpenReader(ctx context.Context, o *ReadOptions) (*reader.Reader, error) {
	start, end, err := l.Range(ctx, o)
	if err != nil {
		return nil, err
	}
	var ro reader.Options
	if o != nil {
		ro = o.Options
	}
	ro.LogID, ro.StartTs, ro.EndTs = l.id, start, end
	return reader.Open(ctx, l.b, &ro)
}

// Follow starts a follower of the log (see reader.Follower): every event
// above o.StartTs (0: the checkpoint), in commit-ts order, as the global
// resolved ts moves, each round of it proven complete as a recovery's read
// is. o.LogID is set to the log's; nil means defaults.
func (l *Log) Follow(ctx context.Context, o *reader.FollowOptions) (*reader.Follower, error) {
	var fo reader.FollowOptions
	if o != nil {
		fo = *o
	}
	fo.LogID = l.id
	return reader.Follow(ctx, l.b, &fo)
}

// Collect runs one GC cycle below the log's checkpoint (see package gc).
func (l *Log) Collect(ctx context.Context, opts *gc.Options) (*gc.Result, error) {
	return gc.Collect(ctx, l.b, l.id, opts)
}

// StartGC starts GC on its own schedule; Close the scheduler to stop it.
// Kick it after moving the checkpoint to collect sooner.
func (l *Log) StartGC(ctx context.Context, opts *gc.SchedulerOptions) *gc.Scheduler {
	return gc.Start(ctx, l.b, l.id, opts)
}

// Size counts the log's objects and their bytes (every key under the log's
// prefix).
func (l *Log) Size(ctx context.Context) (objects int, bytes int64, err error) {
	for a, err := range l.b.List(ctx, layout.Log(l.id)) {
		if err != nil {
			return objects, bytes, fmt.Errorf("redokit: list log %s: %w", l.id, err)
		}
		objects++
		bytes += a.Size
	}
	return objects, bytes, nil
}

// Delete removes every object of the log, crash-safely (see gc.DeleteLog),
// and returns how many it deleted.
func (l *Log) Delete(ctx context.Context) (int, error) {
	return gc.DeleteLog(ctx, l.b, l.id)
}

// FenceWriter takes writer writerID's next epoch without writing under it,
// so that a process that still holds an earlier epoch (a zombie after a
// failover) can publish nothing more: the failover step of a CDC system
// whose dead capture's spans move to another writer. The fence is where the
// old epoch's durable progress ends (writer.Fence), not only its last
// publication: every flush it reported stays in the log.
func (l *Log) FenceWriter(ctx context.Context, writerID string) error {
	if err := writer.Fence(ctx, l.b, l.id, writerID, nil); err != nil {
		return fmt.Errorf("redokit: fence writer %s: %w", writerID, err)
	}
	return nil
}
