package gc

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redokit/redokit/blob"
)

// SchedulerOptions configure Start. Nil means defaults.
type SchedulerOptions struct {
	// Interval between cycles (default DefaultInterval). Kick starts one
	// sooner.
	Interval time.Duration
	// Collect configures each cycle. Below is ignored: a scheduler always
	// collects below the log's own checkpoint.
	Collect Options
	// Logger receives a line per cycle that deleted something (Debug),
	// failed, or could not read the writer states (Warn). nil discards.
	Logger *slog.Logger
	// OnCycle, when set, is called after each cycle with its result, for
	// metrics and tests.
	OnCycle func(*Result, error)
}

// DefaultInterval is how often a Scheduler collects unless told otherwise.
const DefaultInterval = time.Minute

// Scheduler runs Collect on one log in the background until ctx ends or
// Close. A failed cycle is logged and retried at the next one: GC is never
// urgent, and deleting less for a while is always safe.
type Scheduler struct {
	b      *blob.Bucket
	logID  string
	o      SchedulerOptions
	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// Start starts a scheduler for logID. Every cycle runs under ctx, so nothing
// it does outlives ctx or Close.
func Start(ctx context.Context, b *blob.Bucket, logID string, opts *SchedulerOptions) *Scheduler {
	var o SchedulerOptions
	if opts != nil {
		o = *opts
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Collect.Below = 0
	ctx, cancel := context.WithCancel(ctx)
	s := &Scheduler{b: b, logID: logID, o: o, kick: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go s.run(ctx)
	return s
}

// Kick asks for a cycle soon (say, after the checkpoint moved). It never
// blocks; kicks during a cycle fold into one more.
func (s *Scheduler) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Close stops the scheduler and waits for a cycle under way to end (it is
// cancelled). It is idempotent.
func (s *Scheduler) Close() error {
	s.once.Do(s.cancel)
	<-s.done
	return nil
}

func (s *Scheduler) run(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.kick:
		}
		res, err := Collect(ctx, s.b, s.logID, &s.o.Collect)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil:
			s.o.Logger.Warn("gc cycle failed", "log", s.logID, "err", err)
		case res.FenceRuleErr != nil:
			// A degraded cycle: it kept what only the fences free.
			s.o.Logger.Warn("gc cycle could not read the writer states: nothing was collected by their fences", "log", s.logID, "err", res.FenceRuleErr, "deleted", res.Deleted)
		case res.Deleted > 0:
			s.o.Logger.Debug("gc", "log", s.logID, "checkpoint", res.Checkpoint, "deleted", res.Deleted, "freed", res.FreedBytes)
		}
		if s.o.OnCycle != nil {
			s.o.OnCycle(res, err)
		}
	}
}
