package chain

import (
	"time"

	"github.com/redokit/redokit/segment"
)

// Verdict is what the collectable rule says of one listed segment.
type Verdict uint8

const (
	// Collect: the segment lies in the bottom prefix of its epoch's chain
	// below the checkpoint; GC deletes it.
	Collect Verdict = iota
	// Keep: not below the checkpoint (or active), or above the prefix.
	Keep
	// KeepGrace: below the checkpoint, modified within the grace period.
	KeepGrace
	// KeepChain: below the checkpoint, but a segment below it in its epoch
	// stays (or a seq below it is missing from the listing).
	KeepChain
)

// Collector applies GC's collectable rule to a listing, one name at a
// time in listing order: per writer epoch, the longest prefix of the
// listed segments (from the lowest seq listed upward, consecutive) whose
// names are sealed with a max ts strictly below the checkpoint. It stops
// at the first segment that stays and at a seq missing from its listing,
// so the chain above what it removes stays gapless, and the lowest
// remaining segment's link (its prev max ts, below the checkpoint) proves
// that what is gone held nothing a read from the checkpoint needs.
type Collector struct {
	checkpoint uint64
	grace      time.Duration
	now        time.Time
	prefixes   map[EpochKey]*prefix
}

type prefix struct {
	next   uint64 // the seq the prefix continues with
	closed bool   // a segment that stays ended it
}

// NewCollector returns the rule for one cycle below checkpoint. Segments
// modified within grace before now stay (grace 0: none).
func NewCollector(checkpoint uint64, grace time.Duration, now time.Time) *Collector {
	return &Collector{checkpoint: checkpoint, grace: grace, now: now, prefixes: map[EpochKey]*prefix{}}
}

// Add judges the next listed segment. The listing is in key order, which
// is (writer, epoch, seq) order; a listing that breaks that promise makes
// the rule keep more, never less.
func (c *Collector) Add(n segment.Name, modTime time.Time) Verdict {
	k := KeyOf(n)
	p := c.prefixes[k]
	if p == nil {
		// The lowest listed seq of the epoch: what is below it is gone
		// (an earlier cycle) or was never of this epoch.
		p = &prefix{next: n.Seq}
		c.prefixes[k] = p
	}
	below := !n.Active && n.MaxTs < c.checkpoint
	graced := below && c.grace > 0 && c.now.Sub(modTime) < c.grace
	if !p.closed && (n.Seq != p.next || !below || graced) {
		// A segment that stays, a gap, or a listing that went backwards:
		// the prefix ends here.
		p.closed = true
	}
	if p.closed {
		switch {
		case graced:
			return KeepGrace
		case below:
			return KeepChain
		}
		return Keep
	}
	p.next = n.Seq + 1
	return Collect
}

// Collectable returns the entries of a listing (in key order) that the
// rule collects below checkpoint, with no grace period.
func Collectable(entries []Entry, checkpoint uint64) []Entry {
	c := NewCollector(checkpoint, 0, time.Time{})
	var out []Entry
	for _, e := range entries {
		if e.Err == nil && c.Add(e.Name, e.ModTime) == Collect {
			out = append(out, e)
		}
	}
	return out
}
