package reader

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"iter"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
)

// FollowOptions configure Follow. The embedded Options are those of each
// round's reader (Prefetch, Raw, TableFilter, …); their StartTs is where
// the follower starts (events above it; 0 means the log's checkpoint), and
// their EndTs must be 0: a follower has no end.
type FollowOptions struct {
	Options
	// Poll is how often the log's meta object is read while the follower
	// is at the global resolved ts. 0 means DefaultFollowPoll.
	Poll time.Duration
	// OpenTimeout bounds how long a round whose Open cannot prove what it
	// read fresh or consistent (a lagging replica or cache in front of the
	// store serves an older metadata object for a while) or that meets a
	// transient store error is tried again, a poll apart, before the
	// follower fails with the last error. Nothing of the round was
	// returned yet, so trying again is safe. 0 means
	// DefaultFollowOpenTimeout.
	OpenTimeout time.Duration
}

// Defaults for the zero FollowOptions fields.
const (
	DefaultFollowPoll        = 100 * time.Millisecond
	DefaultFollowOpenTimeout = time.Minute
)

// ErrLogGone is returned by a Follower whose log's meta object is gone: the
// log was removed (redokit rm) under it.
var ErrLogGone = errors.New("reader: the log's meta object is gone")

// Follower reads a log as it grows: every event above its start, in
// commit-ts order, without end. It reads in rounds: each round is an
// ordinary bounded read of (position, global resolved ts], opened with
// Open and so proven complete before it returns anything (fences,
// takeovers, staged and catch-up segments, rotation and GC below the
// position are a round's reader's business, exactly as for a recovery);
// at the end of a round the position moves to its end, and the follower
// waits, polling the meta object, for the global resolved ts to move above
// it. A round never reaches above the global resolved ts, so the position
// never passes an event the log may still get, and no round repeats one
// another returned: duplicates are exact copies at one commit ts, and
// rounds split the log between commit ts. Its memory is one reader's at a
// time. It is not safe for concurrent use, except Position, Lag, Reopens and Closed.
type Follower struct {
	// ctx is the life of the rounds' readers (their prefetching): Follow's
	// ctx, until Close. Next's ctx bounds only its own wait.
	ctx    context.Context
	cancel context.CancelFunc

	b           *blob.Bucket
	opts        Options
	poll        time.Duration
	openTimeout time.Duration

	r           *Reader      // the open round, nil between rounds
	bound       uint64       // the open round's end
	roundAt     time.Time    // when the round was opened: how long it may be read again
	at          atTs         // the commit ts of the last event returned, and those returned at it
	skip        *atTs        // after a round was opened again: events at at.ts to pass over
	reopens     int          // rounds read again after a failure part way
	reopenCount atomic.Int64 // the same, for Reopens from any goroutine
	err         error        // sticky: a round failed for good
	closed      atomic.Bool

	mu       sync.Mutex
	pos      uint64 // every event at or below it has been returned
	resolved uint64 // the highest global resolved ts seen
	// seen are the global resolved ts above pos, each with when the
	// meta object first showed it, in order: the first one's age is how
	// long the oldest event the follower has not returned has been in
	// the log, proven complete. At most maxSeen; past that the later ones
	// go, which can only make the lag read longer.
	seen []seenTs
}

type seenTs struct {
	ts uint64
	at time.Time
}

const maxSeen = 4096

// Follow starts a follower of the log o.LogID; ctx bounds its whole life
// (its rounds' reading ahead), and each Next has a ctx of its own. It reads
// the meta object once: a log without one is an error, and StartTs 0
// becomes its checkpoint. A start below the checkpoint is allowed, but GC may have
// deleted segments there: the first round's completeness proof then fails
// with ErrIncomplete, naming the gap, instead of reading short.
func Follow(ctx context.Context, b *blob.Bucket, o *FollowOptions) (*Follower, error) {
	var fo FollowOptions
	if o != nil {
		fo = *o
	}
	if fo.EndTs != 0 {
		return nil, fmt.Errorf("reader: follow: EndTs %d is set; a follower has no end (read a bounded range with Open)", fo.EndTs)
	}
	if fo.Poll <= 0 {
		fo.Poll = DefaultFollowPoll
	}
	if fo.OpenTimeout <= 0 {
		fo.OpenTimeout = DefaultFollowOpenTimeout
	}
	m, err := meta.LoadMeta(ctx, b, fo.LogID)
	if blob.IsNotExist(err) {
		return nil, fmt.Errorf("reader: follow log %s: it has no meta object %s: %w", fo.LogID, layout.Meta(fo.LogID), ErrNoRange)
	}
	if err != nil {
		return nil, fmt.Errorf("reader: follow log %s: %w", fo.LogID, err)
	}
	f := &Follower{b: b, opts: fo.Options, poll: fo.Poll, openTimeout: fo.OpenTimeout, pos: fo.StartTs}
	f.ctx, f.cancel = context.WithCancel(ctx)
	if f.pos == 0 {
		f.pos = m.CheckpointTs
	}
	f.noteResolved(m.ResolvedTs)
	return f, nil
}

// Position is the follower's position: every event at or below it has
// been returned, and of those above it only some of the next commit ts
// may have been (the events of one commit ts come one by one).
func (f *Follower) Position() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pos
}

// Lag is how far the follower is behind the newest global resolved ts it
// has seen: in commit ts, and in time since the log first showed, proven
// complete, the oldest event it has not returned (as the follower measures
// it, whatever a commit ts means). Both are 0 when it is caught up.
func (f *Follower) Lag() (ts uint64, behind time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.resolved <= f.pos || len(f.seen) == 0 {
		return 0, 0
	}
	return f.resolved - f.pos, time.Since(f.seen[0].at)
}

func (f *Follower) noteResolved(ts uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ts <= f.resolved {
		return
	}
	f.resolved = ts
	if ts > f.pos && len(f.seen) < maxSeen {
		f.seen = append(f.seen, seenTs{ts, time.Now()})
	}
}

// passed moves the position to ts, when that is ahead: every event at or
// below it was returned.
func (f *Follower) passed(ts uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ts <= f.pos {
		return
	}
	f.pos = ts
	i := 0
	for i < len(f.seen) && f.seen[i].ts <= ts {
		i++
	}
	f.seen = append(f.seen[:0], f.seen[i:]...)
}

// Next returns the next event, waiting for the log to get one; the event
// is valid until the next call. It returns ctx's error when ctx ends while
// it waits between rounds (the follower stays usable). An error in a round
// is final, ctx's included: the follower returns it from then on, and a
// new one started from Position goes on (repeating the events returned
// at the commit ts above it, if any).
func (f *Follower) Next(ctx context.Context) (*Event, error) {
	for {
		if f.err != nil {
			return nil, f.err
		}
		if f.r != nil {
			ev, err := f.r.Next(ctx)
			switch {
			case err == nil:
				ts := ev.CommitTs()
				if f.skip != nil {
					if ts != f.skip.ts {
						f.skip = nil
					} else if f.skip.take(ev.Payload()) {
						continue // returned before the round was opened again
					}
				}
				f.at.note(ts, ev.Payload())
				// Every event below this one's commit ts is returned.
				f.passed(ts - 1)
				return ev, nil
			case err == io.EOF:
				f.r.Close()
				f.r = nil
				f.skip = nil
				f.passed(f.bound)
				continue
			case ctx.Err() != nil:
				// The round's reader is done for, part way through a
				// commit ts perhaps: going on would skip or repeat
				// events. A new follower from Position goes on.
				f.r.Close()
				f.r = nil
				f.err = fmt.Errorf("reader: follow log %s: interrupted in round (%d, %d]; follow again from position %d: %w", f.opts.LogID, f.Position(), f.bound, f.Position(), err)
				return nil, f.err
			case reopenable(err) && !f.at.full && time.Since(f.roundAt) < f.openTimeout:
				// The log changed under the round (a takeover's recovery
				// cut or sealed a segment it read): the round is read
				// again from the position, without the events of the
				// commit ts at hand that were returned already.
				f.r.Close()
				f.r = nil
				f.reopens++
				f.reopenCount.Add(1)
				if f.opts.Logger != nil {
					f.opts.Logger.Warn("follow: a round failed part way; reading it again", "log", f.opts.LogID, "position", f.Position(), "end", f.bound, "err", err)
				}
				o := f.opts
				o.StartTs, o.EndTs = f.Position(), f.bound
				r, err := f.open(ctx, &o)
				if err != nil {
					return nil, err
				}
				f.r, f.skip = r, f.at.clone()
				continue
			default:
				f.r.Close()
				f.r = nil
				f.err = fmt.Errorf("reader: follow log %s: round (%d, %d]: %w", f.opts.LogID, f.Position(), f.bound, err)
				return nil, f.err
			}
		}
		r, bound, err := f.nextRound(ctx)
		if err != nil {
			return nil, err
		}
		f.r, f.bound, f.roundAt = r, bound, time.Now()
	}
}

// reopenable reports whether a round that failed with err part way may be
// read again: the log changed under it in a way a new read settles (a
// segment sealed, cut or replaced under it by a takeover: not-exist, or a
// chain that no longer proves as it did), or a store or freshness error
// a later read may not meet. Corruption never is.
func reopenable(err error) bool {
	return blob.IsNotExist(err) || errors.Is(err, ErrIncomplete) || errors.Is(err, ErrUnproven) ||
		errors.Is(err, meta.ErrStale) || errors.Is(err, meta.ErrInconsistent) || blob.IsTransient(err)
}

// atTs is the commit ts of the last event a follower returned and the
// events it returned at it, as a multiset of payload hashes: what a round
// read again from below that ts must not return again. Byte-identical
// events each count (the reader may return copies it keeps), so a hash
// counts them. At most maxAtTs distinct events; past that full is set and
// a failure at that ts is final rather than the memory unbounded.
type atTs struct {
	ts   uint64
	seen map[uint64]int
	full bool
}

const maxAtTs = 1 << 20

var followSeed = maphash.MakeSeed()

func (a *atTs) note(ts uint64, payload []byte) {
	if ts != a.ts || a.seen == nil {
		a.ts, a.full = ts, false
		if a.seen == nil {
			a.seen = map[uint64]int{}
		}
		clear(a.seen)
	}
	if len(a.seen) >= maxAtTs {
		a.full = true
		return
	}
	a.seen[maphash.Bytes(followSeed, payload)]++
}

func (a *atTs) clone() *atTs {
	return &atTs{ts: a.ts, seen: maps.Clone(a.seen)}
}

// take consumes one count of payload, if there is one left.
func (a *atTs) take(payload []byte) bool {
	h := maphash.Bytes(followSeed, payload)
	if a.seen[h] == 0 {
		return false
	}
	a.seen[h]--
	return true
}

// NextRound is the follower for a caller that consumes a round whole (an
// apply that commits each round with its progress): it waits until the
// global resolved ts is above the position, and returns a reader of
// (Position, end], proven as Open proves a range, and end. The caller
// reads it and closes it, and calls Finish(end) once it has consumed the
// round; a round not finished is read again by the next NextRound. ctx
// bounds the wait; the reader lives until it is closed or the follower is.
// A follower is driven by Next or by NextRound, not both.
func (f *Follower) NextRound(ctx context.Context) (*Reader, uint64, error) {
	if f.err != nil {
		return nil, 0, f.err
	}
	return f.nextRound(ctx)
}

// Finish moves the position to end, the end of a round NextRound returned,
// once the caller has consumed it.
func (f *Follower) Finish(end uint64) { f.passed(end) }

func (f *Follower) nextRound(ctx context.Context) (*Reader, uint64, error) {
	bound, err := f.wait(ctx)
	if err != nil {
		return nil, 0, err
	}
	o := f.opts
	o.StartTs, o.EndTs = f.Position(), bound
	r, err := f.open(ctx, &o)
	if err != nil {
		return nil, 0, err
	}
	return r, bound, nil
}

// open opens a round's reader, trying again, a poll apart and for at most
// the open timeout, after an error that a later read may not meet.
func (f *Follower) open(ctx context.Context, o *Options) (*Reader, error) {
	start := time.Now()
	for try := 1; ; try++ {
		r, err := Open(f.ctx, f.b, o)
		if err == nil {
			return r, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// Not-exist too: GC deletes what lies below the position while a
		// round lists and opens, and the reader refuses a segment that
		// vanished between the two; a new listing no longer has it (and a
		// segment the round needs that is gone fails the new proof with
		// ErrIncomplete, which is final).
		again := errors.Is(err, meta.ErrStale) || errors.Is(err, meta.ErrInconsistent) || errors.Is(err, ErrUnproven) ||
			blob.IsTransient(err) || blob.IsNotExist(err)
		if !again || time.Since(start) >= f.openTimeout {
			f.err = fmt.Errorf("reader: follow log %s: open round (%d, %d] (try %d, %v): %w", f.opts.LogID, o.StartTs, o.EndTs, try, time.Since(start).Round(time.Millisecond), err)
			return nil, f.err
		}
		if f.opts.Logger != nil {
			f.opts.Logger.Warn("follow: a round could not be opened; trying again", "log", f.opts.LogID, "start", o.StartTs, "end", o.EndTs, "try", try, "err", err)
		}
		t := time.NewTimer(f.poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// wait polls the meta object until the global resolved ts is above the
// position, and returns it. A transient store error is retried at the next
// poll; a missing meta object is ErrLogGone.
func (f *Follower) wait(ctx context.Context) (uint64, error) {
	var t *time.Ticker
	for {
		m, err := meta.LoadMeta(ctx, f.b, f.opts.LogID)
		switch {
		case err == nil:
			f.noteResolved(m.ResolvedTs)
			if m.ResolvedTs > f.Position() {
				if t != nil {
					t.Stop()
				}
				return m.ResolvedTs, nil
			}
		case ctx.Err() != nil:
			return 0, ctx.Err()
		case blob.IsNotExist(err):
			f.err = fmt.Errorf("reader: follow log %s at position %d: %w (%s); it was removed", f.opts.LogID, f.Position(), ErrLogGone, layout.Meta(f.opts.LogID))
			return 0, f.err
		case !blob.IsTransient(err):
			f.err = fmt.Errorf("reader: follow log %s: read its meta object: %w", f.opts.LogID, err)
			return 0, f.err
		}
		if t == nil {
			t = time.NewTicker(f.poll)
			defer t.Stop()
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-t.C:
		}
	}
}

// Events iterates over the events as Next returns them, until ctx ends or
// an error; the error is yielded (ctx's too) with a nil event. Each event
// is valid until the next iteration.
func (f *Follower) Events(ctx context.Context) iter.Seq2[*Event, error] {
	return func(yield func(*Event, error) bool) {
		for {
			ev, err := f.Next(ctx)
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// CodecEvents is Events as codec events.
func (f *Follower) CodecEvents(ctx context.Context) iter.Seq2[*codec.Event, error] {
	return func(yield func(*codec.Event, error) bool) {
		for ev, err := range f.Events(ctx) {
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(&ev.Event, nil) {
				return
			}
		}
	}
}

// Reopens is how many rounds were read again after failing part way
// (the log changed under them).
func (f *Follower) Reopens() int { return int(f.reopenCount.Load()) }

// Closed reports whether Close was called. Safe for concurrent use.
func (f *Follower) Closed() bool { return f.closed.Load() }

// Close stops the open round, if any. The follower returns an error from
// then on.
func (f *Follower) Close() error {
	f.closed.Store(true)
	f.cancel()
	if f.r != nil {
		f.r.Close()
		f.r = nil
	}
	if f.err == nil {
		f.err = errors.New("reader: follower closed")
	}
	return nil
}
