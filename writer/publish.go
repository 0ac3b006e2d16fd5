package writer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redokit/redokit/internal/retry"
	"github.com/redokit/redokit/meta"
)

// publisher publishes the writer's durable progress to its state object
// (meta.Lease.PublishProgress), off the flush path. A flush is acknowledged
// once its data and its progress frame are durable in a segment; the state
// object, which the coordinator and readers consult, follows lazily: at
// most one publication is in flight, and one starts at most every
// PublishInterval, carrying the newest durable progress (the requests
// between two publications coalesce). A request that cannot wait (urgent:
// Close, a seal that would leave the newest progress frame in a sealed
// segment, a flush with no segment to hold its progress) is published at
// once.
//
// It never publishes ahead of durable data: every request is of progress
// that is durable already. A failed publication is retried with the
// writer's backoff and budget; a fence or a failure past the budget stops
// the publisher for good, and the committer stops the writer with it.
type publisher struct {
	w        *Writer
	interval time.Duration

	mu      sync.Mutex
	want    meta.Progress // the newest durable progress
	wantN   uint64        // requests made
	doneN   uint64        // the newest request published
	urgentN uint64        // the newest request that must not wait for the interval
	// sleeping: run waits out the interval with a request pending, and
	// will take the newest request when it ends; a request that is not
	// urgent need not wake it (at GOMAXPROCS 2 and above, a wake per flush
	// is another thread woken, to start a new timer, each flush).
	sleeping bool
	wakes    atomic.Int64  // wakes during an interval: for tests
	pubTs    uint64        // the flushed ts published
	pubSeq   uint64        // the seq published
	err      error         // sticky
	changed  chan struct{} // closed and replaced at each publication and at err
	kick     chan struct{}
	failed   chan error // the publisher's fatal error, for the committer
	finished chan struct{}
}

func newPublisher(w *Writer, published meta.WriterState) *publisher {
	return &publisher{
		w: w, interval: w.o.PublishInterval, pubTs: published.FlushedTs, pubSeq: published.Seq,
		changed: make(chan struct{}), kick: make(chan struct{}, 1),
		failed: make(chan error, 1), finished: make(chan struct{}),
	}
}

// request asks for p, which is durable, to be published; it returns the
// request's number.
func (p *publisher) request(pr meta.Progress, urgent bool) uint64 {
	p.mu.Lock()
	p.want = pr
	p.wantN++
	n := p.wantN
	if urgent {
		p.urgentN = n
	}
	wake := urgent || !p.sleeping
	p.mu.Unlock()
	if wake {
		p.wake()
	}
	return n
}

// hurry makes the newest request urgent and returns its number.
func (p *publisher) hurry() uint64 {
	p.mu.Lock()
	n := p.wantN
	p.urgentN = n
	p.mu.Unlock()
	p.wake()
	return n
}

// wake tells run that there is a request; a wake already pending will do.
func (p *publisher) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// wait waits until request n (or a newer one) is published.
func (p *publisher) wait(ctx context.Context, n uint64) error {
	for {
		p.mu.Lock()
		done, err, ch := p.doneN, p.err, p.changed
		p.mu.Unlock()
		if done >= n {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-p.finished:
			p.mu.Lock()
			done, err = p.doneN, p.err
			p.mu.Unlock()
			if done >= n {
				return nil
			}
			if err == nil {
				err = p.w.stoppedErr()
			}
			return err
		}
	}
}

// publishedTs is the flushed ts the state object holds (as far as this
// writer knows).
func (p *publisher) publishedTs() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pubTs
}

// publishedSeq is the segment seq the state object names.
func (p *publisher) publishedSeq() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pubSeq
}

// run publishes until the writer's context ends.
func (p *publisher) run() {
	defer close(p.finished)
	ctx := p.w.ctx
	var next time.Time // the earliest start of a publication that may wait
	for {
		select {
		case <-p.kick:
		case <-ctx.Done():
			return
		}
		for {
			p.mu.Lock()
			if p.wantN == p.doneN || p.err != nil {
				p.sleeping = false
				p.mu.Unlock()
				break
			}
			wait := time.Until(next)
			p.sleeping = p.urgentN <= p.doneN && wait > 0
			sleep := p.sleeping
			p.mu.Unlock()
			if sleep {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-p.kick:
					t.Stop()
					p.wakes.Add(1)
					continue // urgent now, or a kick left from before
				case <-ctx.Done():
					t.Stop()
					return
				}
			}
			p.mu.Lock()
			p.sleeping = false
			pr, n := p.want, p.wantN
			p.mu.Unlock()
			start := time.Now()
			next = start.Add(p.interval)
			err := p.publish(ctx, pr)
			p.mu.Lock()
			if err != nil {
				if ctx.Err() != nil && !errors.Is(err, meta.ErrFenced) {
					p.mu.Unlock()
					return // stopping: Close published what it needed already
				}
				p.err = err
				close(p.changed)
				p.changed = make(chan struct{})
				p.mu.Unlock()
				p.failed <- err
				return
			}
			p.doneN, p.pubTs, p.pubSeq = n, pr.FlushedTs, pr.Seq
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
			p.w.stats.publications.Add(1)
			p.w.stats.publish.since(start)
		}
	}
}

// publish makes one publication, retried with backoff within the writer's
// retry budget. A fence ends it at once.
func (p *publisher) publish(ctx context.Context, pr meta.Progress) error {
	w := p.w
	for attempt := 0; ; attempt++ {
		err := w.lease.PublishProgress(ctx, pr)
		if err == nil || errors.Is(err, meta.ErrFenced) || ctx.Err() != nil {
			return err
		}
		if attempt >= w.o.RetryAttempts {
			return fmt.Errorf("writer: publish progress failed after %d retries: %w", attempt, err)
		}
		wait := w.backoff().Wait(attempt)
		w.stats.retries.Add(1)
		w.log.Warn("publishing progress failed; retrying", "err", err, "attempt", attempt+1, "backoff", wait)
		if err := retry.Sleep(ctx, wait); err != nil {
			return err
		}
	}
}
