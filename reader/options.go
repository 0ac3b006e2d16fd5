package reader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
)

// Options configure Open. LogID and the range are required; every other field
// has a default when zero.
type Options struct {
	// LogID is the log (changefeed) to read.
	LogID string

	// StartTs and EndTs bound the range read: events with
	// StartTs < commit ts ≤ EndTs. A recovery reads (checkpoint ts, global
	// resolved ts]. EndTs 0 means "up to the global resolved ts" and
	// StartTs 0 "from the checkpoint", both from the log's meta object; a
	// StartTs given with EndTs 0 is kept. An EndTs above what the writer
	// states prove (the global resolved ts, or the lowest flushed ts the
	// writers published when that is higher) is ErrUnproven;
	// redokit.Log.OpenReader also refuses, unless asked, an end above the
	// global resolved ts and a start below the checkpoint.
	StartTs uint64
	EndTs   uint64

	// Prefetch is how many decoded blocks each open segment stream may hold
	// ready ahead of the merge. 0 means DefaultPrefetch.
	Prefetch int

	// Concurrency bounds how many blocks are decoded (package codec) at
	// once across all streams, the costliest step, so that the merge keeps a
	// core. 0 means GOMAXPROCS. Reading and decompressing are bounded by the
	// open streams instead: each has one goroutine and at most one request in
	// flight.
	Concurrency int

	// Lookahead is how many segments beyond those the merge has reached start
	// their prefetch early, so that the next segment of a writer is ready
	// when the previous one ends. 0 means DefaultLookahead; negative means
	// none.
	Lookahead int

	// KeepDuplicates turns off the dropping of exact duplicates (see the
	// package doc). Leave it false unless a table without a primary or
	// unique key can hold byte-identical rows in one transaction.
	KeepDuplicates bool

	// TableFilter, when not nil, keeps only the events it accepts: a row
	// change when it accepts the row's table, a DDL when it accepts the
	// DDL's Table or any table in DDL.Tables (a schema-level DDL has only
	// Schema set in Table). Filtered events are decoded, then dropped.
	TableFilter func(codec.TableName) bool

	// Raw skips decoding: events carry their kind, commit ts and encoded
	// Payload, and nothing else of codec.Event is filled in. For tools that
	// copy or re-ship events, or decode them on workers of their own. It
	// cannot be combined with TableFilter.
	Raw bool

	// SkipBadNames makes keys under the log's segment prefix that do not
	// parse as segment names, and keys under its writer states that are not
	// writer IDs, a logged warning instead of an error. By default such a
	// key stops Open: it may be a segment whose data the range needs, or the
	// state that fences a writer and proves its chain.
	SkipBadNames bool

	// Logger receives warnings (torn tails, skipped keys) and a summary of
	// the segments selected. nil discards.
	Logger *slog.Logger
}

// Defaults for the zero Options fields.
const (
	DefaultPrefetch  = 4
	DefaultLookahead = 1
)

// ErrNoRange is returned by Open when Options.EndTs is 0 and the log has
// no meta object to take the range from.
var ErrNoRange = errors.New("reader: no range given and the log has no meta object: set Options.StartTs and Options.EndTs")

// ErrUnproven is returned by Open for a range that reaches above what the
// log can prove complete: the global resolved ts of its meta object, or
// the lowest flushed ts its writers published (see provenBound). Events
// up there may be durable, but a listing cannot show that every one of
// them is: a read of it could return short with no error.
var ErrUnproven = errors.New("reader: range above what the log proves complete")

// config is Options after defaults and checks.
type config struct {
	Options
	start, end uint64
	// meta is the log's meta object, read before the writer states (nil
	// when the log has none): the states are checked against it, and its
	// resolved ts bounds what a read may prove.
	meta *meta.Meta
}

func (o *Options) resolve(ctx context.Context, b *blob.Bucket) (*config, error) {
	c := &config{}
	if o != nil {
		c.Options = *o
	}
	if err := segment.ValidateID(c.LogID); err != nil {
		return nil, fmt.Errorf("reader: log ID: %w", err)
	}
	c.start, c.end = c.StartTs, c.EndTs
	m, err := meta.LoadMeta(ctx, b, c.LogID)
	switch {
	case err == nil:
		c.meta = m
	case !blob.IsNotExist(err):
		return nil, fmt.Errorf("reader: read the log's meta object: %w", err)
	case c.end == 0:
		return nil, ErrNoRange
	}
	if c.end == 0 {
		// (checkpoint ts, global resolved ts]: a recovery never reads above
		// the global resolved ts (invariant 2) or below the checkpoint (GC
		// may have deleted it).
		c.end = m.ResolvedTs
		if c.start == 0 {
			c.start = m.CheckpointTs
		}
	}
	if c.start >= c.end {
		return nil, fmt.Errorf("reader: empty range: start ts %d (exclusive) is not below end ts %d (inclusive)", c.start, c.end)
	}
	switch {
	case c.Prefetch < 0:
		return nil, fmt.Errorf("reader: negative Prefetch %d", c.Prefetch)
	case c.Prefetch == 0:
		c.Prefetch = DefaultPrefetch
	}
	switch {
	case c.Concurrency < 0:
		return nil, fmt.Errorf("reader: negative Concurrency %d", c.Concurrency)
	case c.Concurrency == 0:
		c.Concurrency = runtime.GOMAXPROCS(0)
	}
	switch {
	case c.Lookahead < 0:
		c.Lookahead = 0
	case c.Lookahead == 0:
		c.Lookahead = DefaultLookahead
	}
	if c.Raw && c.TableFilter != nil {
		return nil, errors.New("reader: Raw cannot be combined with TableFilter (filtering needs the decoded table)")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}
