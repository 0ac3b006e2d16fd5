package sqlsink

import (
	"context"
	"sync"
	"time"
)

// commitGrace is how long a COMMIT already sent may go on after the
// apply's context ends, before the connection is given up on.
const commitGrace = 30 * time.Second

// commitGuard keeps the end of an apply's context from cutting a COMMIT
// short. A transaction is begun with the guard's context, which ends with
// the apply's until the COMMIT is sent: a statement or a transaction not
// committing yet is cancelled (and rolled back) as before. From the COMMIT
// on, it stays open until the server answers, or commitGrace after the
// apply's context ended. Without it, a Run that fails on one worker
// cancelled another's COMMIT in flight: pgx dropped the connection and sent
// a cancel request, too late for a COMMIT the server had done or was
// flushing, so Commit failed for a transaction that committed
// (TestCommitOutlivesCancel, with the answer held by a proxy). Apply took
// it as not applied, and the next Run, reading the progress before that
// commit was visible, replayed it and doubled the rows of a keyless table
// (TestResume under CI's load).
type commitGuard struct {
	ctx    context.Context
	cancel context.CancelFunc
	stop   func() bool

	mu         sync.Mutex
	committing bool
	grace      *time.Timer
}

func newCommitGuard(ctx context.Context) *commitGuard {
	g := &commitGuard{}
	g.ctx, g.cancel = context.WithCancel(context.WithoutCancel(ctx))
	g.stop = context.AfterFunc(ctx, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.committing {
			g.grace = time.AfterFunc(commitGrace, g.cancel)
			return
		}
		g.cancel()
	})
	return g
}

// commit marks the COMMIT as about to be sent. Either outcome is certain:
// if the guard has already seen the apply's context end, its own has ended
// and database/sql refuses the COMMIT (the transaction rolls back); if it
// sees the end only from here on, the COMMIT goes on under the grace.
func (g *commitGuard) commit() {
	g.mu.Lock()
	g.committing = true
	g.mu.Unlock()
}

// release ends the guard once its transaction has ended.
func (g *commitGuard) release() {
	g.stop()
	g.mu.Lock()
	if g.grace != nil {
		g.grace.Stop()
	}
	g.mu.Unlock()
	g.cancel()
}
