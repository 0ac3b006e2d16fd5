package sinkgate

import (
	"context"
	"fmt"
	"sync"
)

// Checkpoints folds the applied ts of several gates of one log into the
// log's checkpoint: the minimum over its members. One gate's applied ts says
// nothing about the others' spans, and the checkpoint lets GC delete what
// every span's downstream holds, so no single gate may set it.
//
// Each member starts at the ts it joins with and holds the checkpoint there
// until it reports more. A member may report a lower ts (a span joined its
// gate behind it); the checkpoint itself never goes backwards: Checkpoints
// forwards only a minimum above the last one forwarded. For a failover, add
// the dead gate's spans to their new gates (Gate.AddSpan lowers each new
// gate's report at once) before the dead member leaves, so the minimum never
// skips a span that is catching up.
type Checkpoints struct {
	target Checkpointer

	mu      sync.Mutex
	members map[string]uint64
	fwd     uint64 // last minimum forwarded
	hasFwd  bool
}

// NewCheckpoints returns an aggregate that forwards to target.
func NewCheckpoints(target Checkpointer) *Checkpoints {
	return &Checkpoints{target: target, members: map[string]uint64{}}
}

// Join adds a member at startTs and returns its Checkpointer. Joining an ID
// again replaces it.
func (c *Checkpoints) Join(id string, startTs uint64) Checkpointer {
	c.mu.Lock()
	c.members[id] = startTs
	c.mu.Unlock()
	return member{c: c, id: id}
}

// Leave removes a member (its gate is gone and its spans have new gates).
// The minimum over the others is forwarded at the next report.
func (c *Checkpoints) Leave(id string) {
	c.mu.Lock()
	delete(c.members, id)
	c.mu.Unlock()
}

// Min returns the minimum over the members now, and false with none.
func (c *Checkpoints) Min() (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.minLocked()
}

func (c *Checkpoints) minLocked() (uint64, bool) {
	lowest, any := uint64(0), false
	for _, ts := range c.members {
		if !any || ts < lowest {
			lowest, any = ts, true
		}
	}
	return lowest, any
}

// Forward sends the minimum to the target if it passed the last one sent.
// Reports call it; call it after Leave to forward at once.
func (c *Checkpoints) Forward(ctx context.Context) error {
	// Held across the call so that forwards reach the target in order.
	c.mu.Lock()
	defer c.mu.Unlock()
	lowest, any := c.minLocked()
	if !any || c.hasFwd && lowest <= c.fwd {
		return nil
	}
	if err := c.target.SetCheckpoint(ctx, lowest); err != nil {
		return err
	}
	c.fwd, c.hasFwd = lowest, true
	return nil
}

type member struct {
	c  *Checkpoints
	id string
}

func (m member) SetCheckpoint(ctx context.Context, ts uint64) error {
	m.c.mu.Lock()
	if _, ok := m.c.members[m.id]; !ok {
		m.c.mu.Unlock()
		return fmt.Errorf("sinkgate: checkpoint member %q has left", m.id)
	}
	m.c.members[m.id] = ts
	m.c.mu.Unlock()
	return m.c.Forward(ctx)
}
