package redokit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/redokit/redokit/gc"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/sinkgate"
	"github.com/redokit/redokit/writer"
)

// ServiceOptions configure Log.Start. Nil means defaults.
type ServiceOptions struct {
	// Coordinator configures the log's coordinator (nil: defaults).
	Coordinator *meta.CoordinatorOptions
	// TickInterval is how often the coordinator ticks (folds the writers'
	// published progress into the global resolved ts). 0 means
	// DefaultTickInterval.
	TickInterval time.Duration
	// GC configures the GC scheduler; besides its interval, every move of
	// the checkpoint through the service starts a cycle. OnCycle is called
	// after the service has counted the cycle.
	GC *gc.SchedulerOptions
	// NoGC leaves GC to someone else (another process, or none).
	NoGC bool
	// Logger receives the loops' warnings (a failed tick, a failed GC
	// cycle). nil discards.
	Logger *slog.Logger
}

// DefaultTickInterval is the coordinator's tick interval when none is given:
// the writers' default PublishInterval, so that a publication is folded in
// about as soon as it lands.
const DefaultTickInterval = 200 * time.Millisecond

// Service runs what a CDC process needs around its writers, so that the
// caller wires nothing by hand: the coordinator's tick, GC on its schedule
// and whenever the checkpoint moves, and the checkpoint's fan-in from the
// downstream's progress (Checkpoints: the minimum over the gates, forwarded
// to the coordinator, then GC kicked). It registers spans on both sides at
// once (AddSpan) and writers with the coordinator as it opens them; Close
// stops everything it started and closes what it opened. Stats feeds the
// log-level metrics (package logmetrics). Safe for concurrent use.
type Service struct {
	log   *Log
	coord *meta.Coordinator
	gcs   *gc.Scheduler
	o     ServiceOptions

	cancel   context.CancelFunc
	loopDone chan struct{}

	cpOnce sync.Once
	cps    *sinkgate.Checkpoints

	mu        sync.Mutex
	writers   []*writer.Writer
	followers []*reader.Follower
	closed    bool
	stats     ServiceStats
}

// ServiceStats are a Service's counters and the log's watermarks as its
// last tick saw them.
type ServiceStats struct {
	ResolvedTs   uint64 // the global resolved ts at the last successful tick
	CheckpointTs uint64 // the checkpoint at the last successful tick or move
	Ticks        int64  // successful ticks
	TickErrors   int64  // failed ticks
	LastTick     time.Time

	GCCycles     int64 // GC cycles run (failed ones included)
	GCErrors     int64 // failed GC cycles
	GCDeleted    int64 // segments GC deleted
	GCFreedBytes int64 // their bytes

	// Followers are the followers started through Follow and not closed:
	// each one's lag behind the newest global resolved ts it saw.
	Followers []FollowerLag
}

// FollowerLag is one follower's position and lag (reader.Follower.Lag).
type FollowerLag struct {
	Position uint64
	LagTs    uint64
	Lag      time.Duration
}

// Start opens the log's coordinator (creating the meta object if the log
// has none) and starts its loops: a tick every TickInterval and, unless
// NoGC, a GC scheduler. ctx bounds the loops' life; Close stops them
// sooner.
func (l *Log) Start(ctx context.Context, o *ServiceOptions) (*Service, error) {
	var so ServiceOptions
	if o != nil {
		so = *o
	}
	if so.TickInterval <= 0 {
		so.TickInterval = DefaultTickInterval
	}
	if so.Logger == nil {
		so.Logger = slog.New(slog.DiscardHandler)
	}
	coord, err := l.OpenCoordinator(ctx, so.Coordinator)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(ctx)
	s := &Service{log: l, coord: coord, o: so, cancel: cancel, loopDone: make(chan struct{})}
	s.noteMeta(coord.Meta())
	if !so.NoGC {
		var g gc.SchedulerOptions
		if so.GC != nil {
			g = *so.GC
		}
		if g.Logger == nil {
			g.Logger = so.Logger
		}
		user := g.OnCycle
		g.OnCycle = func(res *gc.Result, err error) {
			s.noteGC(res, err)
			if user != nil {
				user(res, err)
			}
		}
		s.gcs = l.StartGC(lctx, &g)
	}
	go s.tickLoop(lctx)
	return s, nil
}

func (s *Service) tickLoop(ctx context.Context) {
	defer close(s.loopDone)
	t := time.NewTicker(s.o.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := s.Tick(ctx); err != nil && ctx.Err() == nil {
			s.o.Logger.Warn("coordinator tick failed", "log", s.log.id, "err", err)
		}
	}
}

// Tick ticks the coordinator now (the loop does it every TickInterval) and
// returns the log's meta object as the tick left it.
func (s *Service) Tick(ctx context.Context) (meta.Meta, error) {
	m, err := s.coord.Tick(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.stats.TickErrors++
		return m, err
	}
	s.stats.Ticks++
	s.stats.LastTick = time.Now()
	s.noteMetaLocked(m)
	return m, nil
}

func (s *Service) noteMeta(m meta.Meta) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noteMetaLocked(m)
}

func (s *Service) noteMetaLocked(m meta.Meta) {
	s.stats.ResolvedTs = max(s.stats.ResolvedTs, m.ResolvedTs)
	s.stats.CheckpointTs = max(s.stats.CheckpointTs, m.CheckpointTs)
}

func (s *Service) noteGC(res *gc.Result, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.GCCycles++
	if err != nil {
		s.stats.GCErrors++
	}
	if res != nil {
		s.stats.GCDeleted += int64(res.Deleted)
		s.stats.GCFreedBytes += res.FreedBytes
	}
}

// Coordinator is the log's coordinator, for what the service does not wrap
// (barriers, removing a dead writer).
func (s *Service) Coordinator() *meta.Coordinator { return s.coord }

// Meta is the log's meta object as the coordinator last wrote or read it.
func (s *Service) Meta() meta.Meta { return s.coord.Meta() }

// OpenWriter registers writerID as a live writer of the log and opens it
// (Log.OpenWriter). Close closes it.
func (s *Service) OpenWriter(ctx context.Context, writerID string, opts *writer.Options) (*writer.Writer, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if err := s.coord.AddWriter(ctx, writerID); err != nil {
		return nil, err
	}
	w, err := s.log.OpenWriter(ctx, writerID, opts)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.Join(ErrServiceClosed, w.Close(ctx))
	}
	s.writers = append(s.writers, w)
	return w, nil
}

// Writers are the writers opened through the service and not closed by
// it, for metrics (writermetrics.Collector.Track).
func (s *Service) Writers() []*writer.Writer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.writers)
}

// AddSpan registers span at startTs on the coordinator, which then holds
// the global resolved ts at startTs until w reports more, and then on w.
// The coordinator comes first: the other order lets a tick move the
// watermark past a span it does not know yet. If w refuses the span, the
// registration is left (a span the coordinator holds only holds the
// watermark back, which is safe) and the error says so.
func (s *Service) AddSpan(ctx context.Context, w *writer.Writer, span SpanID, startTs uint64) error {
	if err := s.coord.AddSpan(ctx, span, startTs); err != nil {
		return err
	}
	if err := w.AddSpan(span, startTs); err != nil {
		return fmt.Errorf("redokit: span %d is registered on the coordinator but its writer refused it (the watermark stays at %d until it is added or removed): %w", span, startTs, err)
	}
	return nil
}

// RemoveSpan removes span from w and then from the coordinator (its table
// was dropped): the writer first, so that no event of it is written after
// the coordinator forgets it.
func (s *Service) RemoveSpan(ctx context.Context, w *writer.Writer, span SpanID) error {
	if err := w.RemoveSpan(span); err != nil {
		return err
	}
	return s.coord.RemoveSpan(ctx, span)
}

// SetCheckpoint records that the downstream applied everything up to ts
// (meta.Coordinator.SetCheckpoint) and starts a GC cycle. It is a
// sinkgate.Checkpointer.
func (s *Service) SetCheckpoint(ctx context.Context, ts uint64) error {
	if err := s.coord.SetCheckpoint(ctx, ts); err != nil {
		return err
	}
	s.mu.Lock()
	s.stats.CheckpointTs = max(s.stats.CheckpointTs, ts)
	s.mu.Unlock()
	if s.gcs != nil {
		s.gcs.Kick()
	}
	return nil
}

// Checkpoints is the log's checkpoint fan-in: each gate of the downstream
// joins it (Join returns the gate's Checkpointer), and the minimum of their
// applied ts is forwarded to SetCheckpoint. One per service.
func (s *Service) Checkpoints() *sinkgate.Checkpoints {
	s.cpOnce.Do(func() { s.cps = sinkgate.NewCheckpoints(s) })
	return s.cps
}

// Follow starts a follower of the log (Log.Follow) whose lag the service's
// Stats report until it is closed (the follower's Close, or the service's).
func (s *Service) Follow(ctx context.Context, o *reader.FollowOptions) (*reader.Follower, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	f, err := s.log.Follow(ctx, o)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.followers = append(s.followers, f)
	return f, nil
}

// Stats returns the service's counters now.
func (s *Service) Stats() ServiceStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Followers = nil
	live := s.followers[:0]
	for _, f := range s.followers {
		if f.Closed() {
			continue
		}
		live = append(live, f)
		ts, d := f.Lag()
		st.Followers = append(st.Followers, FollowerLag{Position: f.Position(), LagTs: ts, Lag: d})
	}
	clear(s.followers[len(live):])
	s.followers = live
	return st
}

// ErrServiceClosed is returned by a Service's calls after Close.
var ErrServiceClosed = errors.New("redokit: service closed")

func (s *Service) usable() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrServiceClosed
	}
	return nil
}

// Close closes the writers the service opened (each publishes its final
// progress), ticks once more so that the meta object holds it, and stops
// the loops and the followers. It returns every error met, joined. ctx
// bounds the writers' closing and the last tick.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	ws, fs := s.writers, s.followers
	s.writers, s.followers = nil, nil
	s.mu.Unlock()

	var errs []error
	for _, w := range ws {
		if err := w.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("redokit: close writer: %w", err))
		}
	}
	for _, f := range fs {
		f.Close()
	}
	s.cancel()
	<-s.loopDone
	if s.gcs != nil {
		s.gcs.Close()
	}
	if len(ws) > 0 {
		if _, err := s.Tick(ctx); err != nil {
			errs = append(errs, fmt.Errorf("redokit: last tick: %w", err))
		}
	}
	return errors.Join(errs...)
}
