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
// It decides from the listing alone — segment names carry their writer,
// epoch, seq and ts range, and the listing is in key order, which is (writer,
// epoch, seq) order — so one cycle over N segments costs ceil(N/1000) list
// pages and ceil(deleted/1000) batch deletes, and reads no object. Active
// (unsealed) segments are never collected: their range is not final. GC does
// not read the writer states, so it treats every epoch alike: a fenced
// epoch's zombie segments (above its fence) and the segments of an epoch that
// published nothing, which readers ignore, are collected by the same prefix
// rule, once they and everything below them in their epoch are below the
// checkpoint; deleting a segment no reader accepts never shortens a read.
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
	Checkpoint   uint64   // the ts collected below: the log's checkpoint, or Options.Below
	Listed       int      // segment objects listed
	Deleted      int      // segments deleted (or, in a dry run, that would be)
	FreedBytes   int64    // their total size
	KeptByGrace  int      // segments below the checkpoint kept by the grace period
	KeptByChain  int      // segments below the checkpoint kept because a segment below them in their epoch stays
	DeletedKeys  []string // the keys deleted, in key order
	SkippedNames int      // keys under the segment prefix that are not segment names
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
		switch rule.Add(e.Name, a.ModTime) {
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

// DeleteLog removes every object of logID: it writes the delete marker, then
// deletes everything under the log's prefix in batches, the marker last. It
// returns how many objects it deleted (the marker not counted).
func DeleteLog(ctx context.Context, b *blob.Bucket, logID string) (int, error) {
	if err := segment.ValidateID(logID); err != nil {
		return 0, fmt.Errorf("gc: log ID: %w", err)
	}
	if _, err := b.Put(ctx, layout.DeleteMarker(logID), []byte("deleting\n"), nil); err != nil {
		return 0, fmt.Errorf("gc: write delete marker: %w", err)
	}
	return finishDelete(ctx, b, logID)
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
