// Package retry is the one backoff rule of the module's retry loops: a wait
// that starts at First and doubles with each retry up to Max, jittered (when
// asked) within its upper half so that processes racing for one object
// spread out, and a sleep that ends early when its context does.
//
// The loops themselves stay with their callers, which differ in what is
// worth a retry (a transient error, a lost compare-and-swap), how many are
// allowed and what they log; only the waiting is shared.
package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is an exponential backoff.
type Backoff struct {
	First  time.Duration // the wait before the first retry
	Max    time.Duration // the longest wait; doubling stops there
	Jitter bool          // wait a random time in [d/2, d] instead of d
}

// Wait returns the wait before retry number attempt, counted from 0: First
// << attempt, at most Max (and Max where the shift overflows).
func (b Backoff) Wait(attempt int) time.Duration {
	d := b.First << min(max(attempt, 0), 30)
	if d <= 0 || d > b.Max {
		d = b.Max
	}
	if b.Jitter && d > 0 {
		d = d/2 + rand.N(d/2+1)
	}
	return d
}

// Sleep waits d, or until ctx ends, when it returns ctx's error.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
