// Package gc removes redo data the downstream no longer needs.
//
// GC is a scheduler of its own: it reads the checkpoint from the log's meta
// object itself (Collect trusts no ts its caller passes, except to keep
// more), and moving the checkpoint never deletes anything inline. A Scheduler
// runs Collect on an interval, and sooner when Kick says the checkpoint
// moved; package meta does not know GC exists.
//
// Collect deletes, for each writer epoch, the longest prefix of its segment
// chain (lowest seq upward, as listed) whose segments are all sealed with a
// max commit ts strictly below the checkpoint ts. Strictly: a DDL at the
// checkpoint ts may not have run downstream yet, so a segment ending at the
// checkpoint stays. Only a prefix: the segments of an epoch form a chain
// (each names its predecessor and the largest commit ts of everything below
// it), and a reader proves that the range it reads is complete by walking
// that chain down from the published seq. Deleting only from the bottom
// keeps the chain gapless above what is gone, and the lowest remaining
// segment's link (PrevMaxTs, below the checkpoint) proves that what is gone
// held nothing a read from the checkpoint needs. So a segment below the
// checkpoint that sits above one that is not — a catch-up segment with low
// commit ts written after one with high ts, an active segment, one kept by
// Grace — waits until its predecessors go. A seq missing from the listing
// also ends the cycle's prefix: it may be a segment the listing did not show,
// and deleting above it would leave a hole below a segment that exists. The
// next cycle starts the prefix at the lowest seq it lists, so a seq that is
// truly gone holds GC back for one cycle only; what it held is still
// proven by the chain, since every link carries the largest commit ts of
// everything below it. A cycle that runs beside another one may stop early
// at the holes that one leaves; the next cycle goes on.
//
// It decides from the listing, the checkpoint and the writer states — segment
// names carry their writer, epoch, seq and ts range, and the listing is in key
// order, which is (writer, epoch, seq) order — so one cycle over N segments
// costs ceil(N/1000) list pages, one listing and one read per writer state,
// and ceil(deleted/1000) batch deletes, and reads no segment. An active
// (unsealed) segment of a writer's current epoch is never collected: its
// range is not final, and its writer may be appending to it.
//
// Superseded epochs are collected by the fence rule, from the writer's state
// (FORMAT.md, "The fence rule" and "The commit rule"), never from a listing
// alone. For a segment of epoch e of writer W whose state's current epoch is
// above e:
//
//   - no fence for e in the state: the epoch published nothing before it was
//     replaced, and a fence is only ever recorded when an epoch is replaced,
//     so none will come. No reader accepts the segment: it is collected
//     whatever its ts, active or sealed;
//   - a fence {e, last_seq} with the segment's seq above last_seq: written by
//     a zombie after the fence; no reader accepts it: collected likewise;
//   - a fence whose max_ts (the chain's maximum, which readers prove the
//     epoch with) and committed_ts (the cut above which readers leave the
//     epoch's events out) are both strictly below the checkpoint: every event
//     of the epoch that counts is below the checkpoint, and a read from the
//     checkpoint does not check the epoch's chain (its M is at or below the
//     read's start), so the epoch's whole chain is collected, its active
//     segment too (a local writer killed before it sealed it).
//
// Only a fence makes an active segment collectable: a dead writer's active
// segment stays until the writer is fenced ('redokit writer rm'), and the
// checkpoint passes its fence. A segment of an epoch newer than the state
// read (a takeover since) is judged by the prefix rule. When the writer
// states cannot be read, the cycle collects by the prefix rule alone
// (Result.FenceRuleErr says why): that only keeps more.
//
// Collect is idempotent and safe to run concurrently with itself (a key
// deleted twice is not an error), with writers (a writer only creates
// segments above the checkpoint, and never rewrites one), and with readers: a
// reader only needs segments above its start ts, which is at or above the
// checkpoint, and one whose chain walk meets a segment GC removed meanwhile
// lists again; a read never comes back silently shortened.
//
// DeleteLog removes a whole log. It first writes a marker object, so a
// removal interrupted by a crash is finished by ResumeDeleteLog
// (redokit.Log.OpenWriter and OpenCoordinator call it first; meta refuses to
// open a writer or a coordinator on a log whose marker is there, with
// meta.ErrDeleting), and a new log with the same ID never mixes with the old
// one's leftovers.
package gc

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/internal/chain"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
)

// ErrAboveCheckpoint is returned by Collect when Options.Below is above the
// log's checkpoint: GC never deletes what the downstream has not applied.
var ErrAboveCheckpoint = errors.New("gc: asked to collect above the log's checkpoint")

// Options configure Collect. Nil means defaults.
type Options struct {
	// Below, when not zero, collects below this ts instead of the log's
	// checkpoint. It may only be lower than the checkpoint read from the
	// meta object (ErrAboveCheckpoint otherwise): a way to keep more, never
	// to delete more.
	Below uint64
	// DryRun lists what would be deleted without deleting it.
	DryRun bool
	// Grace keeps segments modified within this long ago, whatever their ts:
	// a guard for operators who move the checkpoint by hand.
	Grace time.Duration
	// Now is the clock for Grace; default time.Now.
	Now func() time.Time
}

// Result is what one Collect did.
type Result struct {
	Checkpoint  uint64 // the ts collected below: the log's checkpoint, or Options.Below
	Listed      int    // segment objects listed
	Deleted     int    // segments deleted (or, in a dry run, that would be)
	FreedBytes  int64  // their total size
	KeptByGrace int    // segments below the checkpoint kept by the grace period
	KeptByChain int    // segments below the checkpoint kept because a segment below them in their epoch stays
	// Superseded counts the deleted segments (among Deleted) of epochs
	// their writer's state superseded: of an epoch that published nothing
	// before it was replaced, above their epoch's fence, or of a fenced
	// epoch wholly below the checkpoint (see the package doc).
	Superseded int
	// KeptActive counts the active (unsealed) segments kept: of a writer's
	// current epoch or of a writer without a state object (its writer may
	// append to them), or of a fenced epoch whose fence the checkpoint has
	// not passed. A dead writer's active segment goes once the writer is
	// fenced ('redokit writer rm') and the checkpoint passes its fence.
	KeptActive   int
	DeletedKeys  []string // the keys deleted, in key order
	SkippedNames int      // keys under the segment prefix that are not segment names
	// FenceRuleErr is why this cycle collected by the prefix rule alone:
	// the writer states could not be read (nil when they were).
	FenceRuleErr error
}

// Collect reads the checkpoint from logID's meta object and deletes the
// segments that lie in the prefix of their writer epoch's chain below it (see
// the package doc). It trusts no checkpoint but the one the log recorded: a
// log without a meta object is an error naming its key, and a zero
// checkpoint deletes nothing.
func Collect(ctx context.Context, b *blob.Bucket, logID string, opts *Options) (*Result, error) {
	if err := segment.ValidateID(logID); err != nil {
		return nil, fmt.Errorf("gc: log ID: %w", err)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	// One read: GC needs the checkpoint, not an ETag to write back with
	// (the envelope's CRC still proves the body whole).
	m, err := meta.NewWatcher(b, logID, 0).Current(ctx)
	if err != nil {
		return nil, fmt.Errorf("gc: read the checkpoint: %w", err)
	}
	checkpointTs := m.CheckpointTs
	if o.Below != 0 {
		if o.Below > checkpointTs {
			return nil, fmt.Errorf("%w: below %d, checkpoint %d in %s", ErrAboveCheckpoint, o.Below, checkpointTs, layout.Meta(logID))
		}
		checkpointTs = o.Below
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	now := o.Now()
	res := &Result{Checkpoint: checkpointTs}
	// The fences are the proof the fence rule rests on. A state only ever
	// gains epochs and fences, so one read before the listing judges every
	// segment listed after it.
	states, err := meta.ListWriterStates(ctx, b, logID, nil)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return res, fmt.Errorf("gc: read the writer states: %w", err)
		}
		res.FenceRuleErr, states = err, nil
	}
	var batch []string
	flush := func() error {
		if len(batch) == 0 || o.DryRun {
			batch = batch[:0]
			return nil
		}
		err := b.Delete(ctx, batch...)
		batch = batch[:0]
		return err
	}
	// The collectable rule (internal/chain) over the listing, one name at
	// a time: a map of epochs rather than the last group only, so that a
	// store that broke the listing's key order makes GC keep more, not less.
	rule := chain.NewCollector(checkpointTs, o.Grace, now)
	for a, err := range b.List(ctx, layout.Segments(logID)) {
		if err != nil {
			return res, fmt.Errorf("gc: list %s: %w", layout.Segments(logID), err)
		}
		res.Listed++
		e := chain.Parse(logID, a)
		if e.Err != nil {
			res.SkippedNames++
			continue
		}
		graced := o.Grace > 0 && now.Sub(a.ModTime) < o.Grace
		var v chain.Verdict
		switch {
		case !superseded(states[e.Name.WriterID], e.Name, checkpointTs):
			// Not fed to the prefix rule otherwise: a superseded epoch's
			// segments are judged by its fence alone.
			v = rule.Add(e.Name, a.ModTime)
			if v == chain.Keep && e.Name.Active {
				res.KeptActive++
			}
		case graced:
			v = chain.KeepGrace
		default:
			v = chain.Collect
			res.Superseded++
		}
		switch v {
		case chain.KeepGrace:
			res.KeptByGrace++
			continue
		case chain.KeepChain:
			res.KeptByChain++
			continue
		case chain.Keep:
			continue
		}
		res.Deleted++
		res.FreedBytes += a.Size
		res.DeletedKeys = append(res.DeletedKeys, a.Key)
		batch = append(batch, a.Key)
		if len(batch) == blob.MaxDeleteBatch {
			if err := flush(); err != nil {
				return res, fmt.Errorf("gc: delete: %w", err)
			}
		}
	}
	if err := flush(); err != nil {
		return res, fmt.Errorf("gc: delete: %w", err)
	}
	return res, nil
}

// superseded reports whether segment n of a writer whose state is st lies in
// an epoch the state superseded and holds nothing a read from the checkpoint
// needs (the fence rule of the package doc). Without a state nothing is
// superseded: a writer without one was never fenced.
func superseded(st *meta.WriterState, n segment.Name, checkpoint uint64) bool {
	if st == nil || n.Epoch >= st.Epoch {
		return false
	}
	if !st.Accepts(n) {
		// Above its epoch's fence (a zombie's), or of an epoch replaced
		// without a fence (it published nothing).
		return true
	}
	// Part of the log, with nothing a read from the checkpoint needs once
	// both the chain's maximum and the cut are strictly below it.
	f, _ := st.Fence(n.Epoch)
	return max(f.MaxTs, f.CommittedTs) < checkpoint
}

// ErrNoMarker matches the error of a DeleteLog whose delete marker could not
// be written: the removal never started, so nothing refuses the log (writers
// and coordinators only refuse a log whose marker is there). Segments it
// deleted to make room for the marker are counted in its result.
var ErrNoMarker = errors.New("gc: the delete marker could not be written")

// NoSpace reports whether err is a store's "no space left" (ENOSPC) or "disk
// quota exceeded" (EDQUOT): a write that fails for want of room, which only
// a deletion can cure.
func NoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// DeleteLog removes every object of logID: it writes the delete marker, then
// deletes everything under the log's prefix in batches, the marker last. It
// returns how many objects it deleted (the marker not counted).
//
// On a full store (NoSpace) the marker cannot be written, and nothing else
// makes room without a write. So DeleteLog deletes first: segments one at a
// time, lowest key first, trying the marker again after each, until it
// fits. Lowest key first is the bottom of a writer epoch's chain, so until
// the marker is there a read of the log fails on the gap the deletion left
// (reader.ErrIncomplete), as the completeness rule requires, rather than
// returning less; a writer or coordinator is not refused meanwhile, and an
// error then says so (ErrNoMarker).
func DeleteLog(ctx context.Context, b *blob.Bucket, logID string) (int, error) {
	if err := segment.ValidateID(logID); err != nil {
		return 0, fmt.Errorf("gc: log ID: %w", err)
	}
	marker := layout.DeleteMarker(logID)
	put := func() error {
		_, err := b.Put(ctx, marker, []byte("deleting\n"), nil)
		return err
	}
	err := put()
	made := 0
	if NoSpace(err) {
		made, err = makeRoom(ctx, b, logID, put, err)
	}
	if err != nil {
		return made, fmt.Errorf("%w: %s: %w", ErrNoMarker, marker, err)
	}
	n, err := finishDelete(ctx, b, logID)
	return made + n, err
}

// makeRoom deletes the log's segments one at a time, lowest key first, and
// tries put after each, until put stops failing for want of room. It
// returns how many it deleted, and put's last error (full, the error of the
// first put, when there was nothing to delete).
func makeRoom(ctx context.Context, b *blob.Bucket, logID string, put func() error, full error) (int, error) {
	deleted := 0
	for {
		// A fresh listing of one key each time: the previous one is gone.
		page, err := b.ListPage(ctx, layout.Segments(logID), blob.ListOptions{PageSize: 1})
		if err != nil {
			return deleted, errors.Join(full, fmt.Errorf("list %s to make room: %w", layout.Segments(logID), err))
		}
		if len(page.Objects) == 0 {
			return deleted, fmt.Errorf("%w (deleted all %d segments of the log to make room, and it still does not fit)", full, deleted)
		}
		key := page.Objects[0].Key
		if err := b.Delete(ctx, key); err != nil {
			return deleted, errors.Join(full, fmt.Errorf("delete %s to make room: %w", key, err))
		}
		deleted++
		full = put()
		if !NoSpace(full) {
			return deleted, full
		}
	}
}

// ResumeDeleteLog finishes a removal of logID that a crash interrupted, and
// reports whether there was one. Call it before opening a log.
func ResumeDeleteLog(ctx context.Context, b *blob.Bucket, logID string) (bool, error) {
	ok, err := b.Exists(ctx, layout.DeleteMarker(logID))
	if err != nil || !ok {
		return false, err
	}
	_, err = finishDelete(ctx, b, logID)
	return true, err
}

func finishDelete(ctx context.Context, b *blob.Bucket, logID string) (int, error) {
	marker := layout.DeleteMarker(logID)
	deleted := 0
	var batch []string
	for a, err := range b.List(ctx, layout.Log(logID)) {
		if err != nil {
			return deleted, fmt.Errorf("gc: delete log %s: %w", logID, err)
		}
		if a.Key == marker {
			continue
		}
		batch = append(batch, a.Key)
		if len(batch) == blob.MaxDeleteBatch {
			if err := b.Delete(ctx, batch...); err != nil {
				return deleted, fmt.Errorf("gc: delete log %s: %w", logID, err)
			}
			deleted += len(batch)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		if err := b.Delete(ctx, batch...); err != nil {
			return deleted, fmt.Errorf("gc: delete log %s: %w", logID, err)
		}
		deleted += len(batch)
	}
	if err := b.Delete(ctx, marker); err != nil {
		return deleted, fmt.Errorf("gc: remove delete marker: %w", err)
	}
	return deleted, nil
}
