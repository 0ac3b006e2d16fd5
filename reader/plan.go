package reader

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/internal/chain"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
)

// Source names the segment an event was read from.
type Source struct {
	Key  string       // the object key, relative to the bucket
	Name segment.Name // the key, parsed
	Size int64        // the object's size when it was listed

	// What Open learned of the segment's place in its chain (see
	// proveComplete), for its stream to check.
	header     []byte // its first HeaderSize bytes, when Open read them
	predListed bool   // seq - 1 of its epoch is listed and accepted
	hasDigest  bool   // it ends a published chain: its header CRC must be digest
	digest     uint32
	digestOf   string // where digest was published, for messages
	// capped: the segment is of a fenced epoch, whose fence says the
	// epoch's committed ts (capTs). Events above it are not part of the
	// log: staged (stored before they were resolved, to bound the writer's
	// memory) and never committed, or written after the epoch's last
	// durable progress (a zombie's flush into the segment its fence
	// accepts) and never acknowledged. The stream stops below them, as the
	// fence rule skips whole segments written after the fence.
	capped bool
	capTs  uint64
}

// listed is one object under a log's segment prefix, its name parsed (Err
// when it is not a segment name of the log).
type listed = chain.Entry

// idOf is what identifies a segment apart from its ts range: an active
// segment and its sealed successor share it.
type segID struct {
	writer     string
	epoch, seq uint64
}

func idOf(n segment.Name) segID { return segID{n.WriterID, n.Epoch, n.Seq} }

// listLog lists every object under the log's segment prefix, parsing names.
func listLog(ctx context.Context, b *blob.Bucket, logID string) ([]listed, error) {
	out, err := chain.List(ctx, b, logID, layout.Segments(logID))
	if err != nil {
		return nil, fmt.Errorf("reader: segments of log %q: %w", logID, err)
	}
	return out, nil
}

// fences are the writer states by writer ID. Open reads them twice (see
// planRead): the fences it applies are read after the listing, so that a
// takeover between the two can only make the reader stricter: a zombie
// segment listed before its epoch was fenced is judged by the fence, not let
// through by a state read before it.
type fences map[string]*meta.WriterState

// readFences reads every writer state of the log. A key under the states
// that is not a writer ID stops it (unless SkipBadNames), as a bad segment
// name does.
func readFences(ctx context.Context, b *blob.Bucket, c *config) (fences, error) {
	var o *meta.ListOptions
	if c.SkipBadNames {
		o = &meta.ListOptions{SkipBadName: func(key string, err error) {
			c.Logger.Warn("reader: skipping a key that is not a writer state", "key", key, "err", err)
		}}
	}
	st, err := meta.ListWriterStates(ctx, b, c.LogID, o)
	if err != nil {
		return nil, fmt.Errorf("reader: read the writer states of log %q (set SkipBadNames to read past a key that is not one): %w", c.LogID, err)
	}
	return st, nil
}

// accepts applies the fence rule. A writer without a state object never took
// a lease (a log written without the meta layer, or a writer whose state was
// removed): nothing fences it, so all its segments are accepted.
func (f fences) accepts(n segment.Name) bool {
	st := f[n.WriterID]
	return st == nil || st.Accepts(n)
}

// committedCut returns the committed ts of a fenced epoch, for a segment of
// that epoch; false for a segment of any other epoch (the current epoch
// needs no cut: a read ends at or below what every writer published as
// flushed, and its staged events lie above that). The fence's MaxTs is not
// the cut: it is the largest commit ts of the epoch's chain, staged events
// included, which the completeness proof needs.
func (f fences) committedCut(n segment.Name) (uint64, bool) {
	st := f[n.WriterID]
	if st == nil || n.Epoch >= st.Epoch {
		return 0, false
	}
	fe, ok := st.Fence(n.Epoch)
	return fe.CommittedTs, ok
}

// plan is the segments Open selected, in the order the merge reaches them.
type plan struct {
	// active segments have no ts range in their names: they are opened
	// first, and join the merge with their first event.
	active []*Source
	// sealed segments, sorted by (min ts, point, writer, epoch, seq): the
	// merge opens each when its frontier reaches the min ts, and of the
	// point segments (see isPoint) of one ts one after another, after the
	// others of that min ts.
	sealed []*Source

	listed, badNames, outOfRange, fenced, shadowed int
}

// makePlan selects segments from the listing alone: names carry ts ranges.
func makePlan(c *config, objs []listed, canAppend bool, fen fences) (*plan, error) {
	p := &plan{listed: len(objs)}
	sealedIDs := map[segID]bool{}
	for _, o := range objs {
		if o.Err == nil && !o.Name.Active {
			sealedIDs[idOf(o.Name)] = true
		}
	}
	for _, o := range objs {
		if o.Err != nil {
			p.badNames++
			if !c.SkipBadNames {
				return nil, fmt.Errorf("reader: key %q under the segment prefix is not a segment name (set SkipBadNames to read past it): %w", o.Key, o.Err)
			}
			c.Logger.Warn("reader: skipping a key that is not a segment name", "key", o.Key, "err", o.Err)
			continue
		}
		n := o.Name
		if n.Active {
			if !canAppend {
				// Object stores only ever receive sealed segments: an
				// active name there was not written by a redo writer, or
				// was copied from a file system mid-write.
				return nil, &segment.CorruptionError{Object: o.Key, Part: "segment",
					Detail: "an active (unsealed) segment on a backend that cannot append: only local disk holds active segments"}
			}
			if sealedIDs[idOf(n)] {
				// Sealed by a rename the listing saw both sides of.
				p.shadowed++
				continue
			}
		} else if n.MaxTs <= c.start || n.MinTs > c.end {
			p.outOfRange++
			continue
		}
		if !fen.accepts(n) {
			p.fenced++
			c.Logger.Info("reader: ignoring a segment its writer's fence excludes", "key", o.Key)
			continue
		}
		src := &Source{Key: o.Key, Name: n, Size: o.Size}
		src.capTs, src.capped = fen.committedCut(n)
		if n.Active {
			p.active = append(p.active, src)
		} else {
			p.sealed = append(p.sealed, src)
		}
	}
	slices.SortFunc(p.sealed, func(a, b *Source) int {
		return cmp.Or(cmp.Compare(a.Name.MinTs, b.Name.MinTs), comparePoint(a.Name, b.Name), compareID(a.Name, b.Name))
	})
	return p, nil
}

// isPoint reports whether a segment's name says it holds one commit ts
// only: a piece of a transaction too big for one segment, or of one flush of
// a single ts. The merge opens the point segments of one ts one after
// another instead of all at once (see Reader.top).
func isPoint(n segment.Name) bool { return !n.Active && n.MinTs == n.MaxTs }

// comparePoint orders point segments after the others of the same min ts,
// so that those open when the frontier reaches it, and the point segments
// then one at a time.
func comparePoint(a, b segment.Name) int {
	pa, pb := isPoint(a), isPoint(b)
	switch {
	case pa == pb:
		return 0
	case pa:
		return 1
	}
	return -1
}

// compareID orders segments of equal min ts, so that the merge breaks ties
// the same way on every run.
func compareID(a, b segment.Name) int {
	return cmp.Or(cmp.Compare(a.WriterID, b.WriterID), cmp.Compare(a.Epoch, b.Epoch), cmp.Compare(a.Seq, b.Seq))
}
