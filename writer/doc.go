// Package writer is redokit's redo writer: it takes the row changes and DDLs
// of a CDC system, span by span, and makes them durable in a log's segments,
// sorted by commit ts, before the system writes them downstream.
//
// # Model
//
// A [Writer] serves one writer ID of one log (see segment.Name). The caller
// adds spans ([Writer.AddSpan]: a table or a key range, named by a [SpanID]),
// writes each span's events in non-decreasing commit ts ([Writer.Write], or
// [Writer.WriteEncoded] for events the caller encoded with codec.AppendEvent
// already), and advances each span's resolved ts ([Writer.AdvanceResolved]):
// the promise that no more events at or below it will come for that span.
//
// The writer's resolved ts is the minimum resolved ts of its spans. With no
// spans it is the highest resolved ts the writer has seen (from any span, or
// the previous epoch's flushed ts): a writer with nothing to wait for
// promises as much as it was ever told, and no more, so a span added later
// behind it is a catch-up (below), not a contradiction.
//
// The flushed resolved ts ([Writer.FlushedTs], returned by [Writer.Flush]) is
// the largest ts such that every event at or below it, of every span, is
// durable, and so is a progress frame that says so (segment format: a
// flush's progress is a frame in the same segment as its data). The
// writer's state object publishes it later ([Writer.PublishedTs]; see
// Publication). Each span's own flushed ts is recorded too: every event of the span at or
// below its resolved ts and below its first event still buffered. A span's
// flushed ts never goes backwards; the writer's, the minimum, falls when a
// span is added behind it, and rises again as the span catches up (the
// coordinator keeps the global watermark from falling meanwhile).
//
// # Flushing
//
// A flush runs every FlushInterval, as soon as FlushBytes have been written
// since the last one (and the resolved ts has moved), when a Write is blocked
// on the memory quota, and on [Writer.Flush]. It takes every buffered event
// at or below the writer's resolved ts R, in flush order — commit ts, then
// rows before DDLs of the same ts, then the order the events arrived in —
// and stores them in blocks of about BlockSize (segment format). Events above
// R stay buffered, unless a stage cut stores them (see Staged events and
// the committed ts). After the blocks comes the flush's progress frame
// (flushed ts R, the epoch's committed ts, per-span flushed ts), and only when the blocks and the
// frame are durable does the flushed ts move to R and Flush return.
//
// A flush costs, on local disk, one fdatasync of the active segment (two
// when the flush crosses into a new segment: the full one is synced at
// rotation), and nothing else on its path: no sync inside a flush however
// large it is, and no write of the state object. If the sync fails, the
// segment is cut back to its last durable point and the flush's blocks
// are written again: read back from the segment first, each proven by its
// CRC. (A flush's events leave memory as soon as its blocks are built, so
// that the next events reuse it; the quota counts them until the flush is
// durable.) A segment
// rotated out is sealed afterwards (footer, fsync, rename, directory
// fsync), once per MaxSegmentBytes. On an object store a flush costs one
// put per segment object (one, unless the flush is larger than
// MaxSegmentBytes). A flush with no blocks whose resolved ts moved records
// its progress frame in the active segment when there is one; with none
// (after a seal, and always on an object store) it publishes the state
// object instead and waits for it, since that is then its durable record.
//
// # Publication
//
// The writer's state object (meta.Lease.PublishProgress: flushed ts, the
// seq, chain max ts and digest of the segment holding the newest progress
// frame, per-span flushed ts) is what the coordinator derives the global
// resolved ts from and what readers prove a log's completeness against. It
// is published off the flush path by a publisher goroutine: at most one
// publication in flight, at most one per PublishInterval (default 200 ms),
// each carrying the newest durable progress, so the flushes in between
// coalesce, and on an object store the publication overlaps the next
// flush's uploads. It is never ahead of durable data: only progress whose
// frame is durable is published. [Writer.Publish] flushes and waits for the
// publication; Close publishes before it returns, and so does a seal of the
// active segment (below: Restart). A publication that fails past the retry
// budget, or finds the writer fenced, stops the writer.
//
// Durability depends on the backend; the rest of the writer (the pipeline,
// the chain, retries, publication, fencing) is the same for both:
//
//   - one that can append (driver.Appender: local disk) keeps one active
//     segment, <epoch>-<seq>.active, appends each flush's blocks and
//     progress frame to it and fdatasyncs it (SyncEveryFlush); it is sealed
//     — footer, fsync, rename to its sealed name, directory fsync — when the
//     next block would take it past MaxSegmentBytes (after the flush, once
//     the flush's progress frame is durable in its successor), when it is
//     MaxSegmentAge old, and at Close;
//   - an object store gets one immutable segment object per flush, created
//     with if-not-exists, split at MaxSegmentBytes, the last one ending with
//     the flush's progress frame. A full object is uploaded while the next
//     one is assembled, up to MaxUploads objects at once; the flush is
//     reported only when every object it made is durable, whatever order
//     the uploads finish in.
//
// Each segment is sorted by commit ts. A span added behind the writer (its
// start ts below the flushed ts, as when it moves here from a failed writer)
// has catch-up events below what the active segment already holds: they go
// to a new segment, and the reader merges segments by their ts ranges.
//
// # Pipeline
//
// Write encodes events (codec) on the caller's goroutine straight into
// per-span buffers (sized first, filled outside the writer's lock), so the
// caller may reuse its events and the quota counts exact bytes; that and
// copying is all the caller's goroutine does. WriteEncoded copies events
// encoded already, after checking each one on the caller's goroutine with
// codec.Decoder.Check (the verdict of a decode, without building the event):
// the writer never acknowledges an event no reader could decode, whoever
// encoded it, and a record's commit ts and kind are always its event's. A flush loop cuts jobs and merges each job's per-span runs into
// blocks; a pool of Workers goroutines compresses (lz4) and checksums blocks
// in parallel (a block stored raw is checksummed by the loop as it is built,
// while it is in that core's cache); one committer goroutine appends the finished frames in order,
// and syncs or uploads; a publisher goroutine publishes. What differs
// between the two backends — how the committer makes a flush's blocks and
// progress frame durable, what it seals after, what a fenced writer
// deletes, what it lets go of when it stops — is one small internal
// interface with two implementations: the append path (append.go) and the
// object-store path (object.go). While the committer syncs or
// uploads flush N, flush N+1 is merged and compressed: the blocks waiting
// for the committer are bounded by about FlushBytes, so compression runs
// ahead of storage without unbounded queues. On an object store the
// committer hands each full segment object to an upload goroutine of its own
// and goes on assembling the next; it waits for a free slot when MaxUploads
// objects are on their way, and at the end of each flush for all of them.
//
// # Memory and back-pressure
//
// Events hold MemoryQuota bytes (their encoding plus a small per-event
// overhead) from Write until they are durable, whatever the size of a
// transaction and however long a span stalls. A Write that would pass the
// quota blocks until memory is freed or its ctx ends; the time spent
// blocked is counted (Stats.Backpressure; backpressure_seconds_total in
// package writermetrics). It waits only on storage, never on a resolved
// ts: when nothing in flight will free memory, the blocked Write asks for
// a cut — of the resolved events, when the resolved ts moved, and else a
// stage cut (below) — and waits for that cut to be durable.
//
// # Staged events and the committed ts
//
// Each epoch has a committed ts C: the largest flushed ts of its durable
// progress frames (or the flushed ts it started from). An event of the
// epoch is part of the log iff its segment is accepted by the fence rule
// and its commit ts is at or below C; a progress frame carries C
// (segment.Progress.CommittedTs), the state object publishes it, and a
// takeover records it in the fence, where readers cut the fenced epoch.
//
// A stage cut stores events before the resolved ts covers them: besides
// the resolved events, it takes every buffered event above C (of each
// span whose events above the resolved ts are all above C), merged in flush
// order exactly as a flush's, as blocks of the ordinary chain, followed by
// a progress frame whose flushed and committed ts have not moved (so their
// memory leaves the quota once they are durable). They are staged: stored,
// not committed, until a later frame's C passes them; each span's flushed
// ts stays below its first staged event, so a takeover restarts the span
// there and its next owner writes the staged events again, while readers
// leave the old epoch's copies out. A stage cut happens when a Write is
// blocked on a full quota with nothing in flight (Stats.StageCuts,
// Stats.StagedEvents), and when FlushBytes were written while the writer's
// resolved ts stood still (one span holding it back, or a transaction
// larger than FlushBytes): compression and storage then overlap
// production instead of waiting for the resolved ts. On local disk the
// staged blocks go into the active segment when they sort after it, and
// into a new segment otherwise (each segment stays one sorted run; the
// reader merges overlapping segments of one writer); on an object store
// each cut is its own objects. Rows before DDLs of one ts holds within a
// cut: a later cut may add rows of a ts after DDLs a stage cut stored
// (readers deliver a ts's DDLs after all its rows in any case).
//
// The one case staging cannot take (the known limit): a span added behind
// the writer (a catch-up span) whose events lie at or below C. Staging
// them would let a frame's C take a part of them for committed; they are
// held until the resolved ts covers them, and when the quota is full of
// them with nothing else to cut, a Write is let through over the quota
// (Stats.QuotaOvercommits; quota_overcommits_total) and logged: the
// Writes that would resolve them may be the blocked ones. Such events are
// at most what the span's previous owner flushed above the span's start.
// A span removed while it has staged events keeps them: they count once C
// passes them, and its next owner's copies (written again from the span's
// flushed ts) are exact duplicates that readers drop. Segments that may
// hold copies of events of the same epoch (events at or below C when cut)
// carry segment.FlagCatchUp, and readers drop duplicates within one epoch
// only there.
//
// What stays in memory is less than the quota: a flush's events leave it
// once their blocks are built, and only the quota's count waits for them
// to be durable. On local disk, a Write that finds FlushBytes written
// since the last cut waits for the loop's next cut (its turn, which waits
// only on storage),
// so the events not cut yet and the job being built hold about
// 2 × FlushBytes, however far production runs ahead of a loop held up by
// a sync or scheduled late. On local disk, stage cuts while no resolved
// ts moves come every min(FlushBytes, 4 MiB), unless the last one went
// below the one before it (spans interleaving: each would start a
// segment), which brings that bound down to about 8 MiB. A stage cut is
// lazy (synced with the next flush). A lazy cut records no progress, so it
// leaves a change pending that only a progress frame records (a span added
// or removed, a span's resolved ts moved) for the next cut that syncs; it
// is lazy with a change pending only when a Write asked for it and the
// changes are all spans added (a writer's first events: their first cut
// would otherwise sync, unasked), and an idle writer's ticks, which cut
// only for a change, then record it.
// On an object store the quota alone bounds the events not cut yet: its
// uploads need production to run ahead of a loop that waits for an upload
// slot.
//
// Besides the quota, blocks in flight take up
// to about twice min(FlushBytes, 16 MiB) with lz4 or on an object store
// (the workers compress ahead while the committer syncs or uploads) and
// twice min(FlushBytes, 4 MiB) without lz4 on local disk: a bigger flush
// is written while it is built, each block's buffer reused once written.
// The buffers are kept for reuse (as are the event arena's 1 MiB chunks,
// within the quota, and record lists, up to a sixteenth of it): fresh
// memory costs a page fault per 4 KiB at first touch, which on a virtual
// machine costs many times the copy into it. On an object store the segment objects take
// up to (MaxUploads+1) × MaxSegmentBytes: the one being assembled, and each
// one uploading until it is durable (their buffers are kept for the next
// objects). Objects are only that large when a flush is: with the defaults
// (FlushBytes 16 MiB, MaxSegmentBytes 64 MiB) a flush of less than
// MaxSegmentBytes makes one object, and the bound is reached only when a
// backlog makes flushes of several full objects. Measured
// (TestStagedUnderDataLimit): a 512 MiB transaction at one commit ts,
// written with an 8 MiB quota on local disk, peaks at about 40 MiB RSS.
//
// # Failures
//
// A failed put, append, sync, seal or publication is retried with exponential
// backoff (RetryBackoff doubling to RetryMaxBackoff, at most RetryAttempts
// times per flush); the flushed ts does not move meanwhile. On the local path
// a retry rewinds the active segment to its last successful sync (truncate)
// and appends the frames again, because after a failed fsync the kernel may
// have dropped the pages, and a later fsync that succeeds proves nothing
// about them. The frames are read back before the rewind, and each must
// hold its CRC: a frame the kernel dropped reads as something else, and
// then the writer cuts the segment back to its durable point and stops
// with a segment.CorruptionError naming the segment and offset (the
// events are no longer in memory to build it again); Open with the same
// writer ID goes on from the flushed ts. On an object store a failed upload is tried again with the
// same bytes under the same name, while the flush's other uploads go on; an
// if-not-exists put that finds the object already there reads it back, and
// exactly these bytes mean an earlier attempt whose answer was lost stored
// it. A flush that fails past its retries stops the writer, and so
// does meta.ErrFenced (another process took the writer ID): every later call
// returns that error ([Writer.Err]). Only Open with the same writer ID (a new
// epoch, with recovery) goes on from there.
//
// # Fencing
//
// A writer learns that it was fenced when its progress publication finds,
// by reading its state object, a newer epoch there (meta.FencedError; a
// failed or unanswered compare-and-swap alone never fences). The fence that
// epoch recorded for ours is the last seq of ours the log keeps: segments
// above it readers skip, so before it stops a fenced writer deletes those
// it stored, best effort, within RetractTimeout. A delete
// that fails or runs out of time leaves the segments to GC, and the error
// the writer stops with says so, naming them, besides matching
// meta.ErrFenced. It cuts
// and deletes nothing at or below the fence: a publication whose answer was
// lost may be what the fence covers. Blocks it appended past the fence to
// a segment the fence accepts stay; readers leave out the events of a
// fenced epoch above its fence's max ts. Since publication is lazy, a
// zombie may still report flushes between the takeover and its next
// publication attempt (about PublishInterval at most): their frames lie
// beyond the fence the new epoch took, and count for nothing, as if the
// zombie had reported them after the takeover; the CDC system's new owner
// writes those events again from the new epoch's flushed ts. No flush
// reported before the takeover is lost, and a zombie can never publish
// progress.
//
// # Restart
//
// Open takes the writer's lease (meta.AcquireWriter: a new epoch that fences
// the previous one). The fence comes from what the previous epoch made
// durable, not only from what it published: before its compare-and-swap,
// Open walks the previous epoch's chain up from the published seq (seqs
// consecutive, each linking its predecessor) and takes the newest progress
// frame it finds — unless that frame is in a sealed segment at the
// published seq itself, which a publication always covers (the writer
// publishes before it seals a segment whose last frame is its newest
// progress). The fence is that frame's seq, chain max ts and segment header
// CRC, and the new epoch starts at its flushed ts and span ts: every flush
// the previous epoch reported stays in the log. A missing seq in that walk
// is proven harmless or is an error: a frame is stored only after every
// segment below it in its epoch (an object store launches the object with a
// flush's frame once the others landed), so on an object store segments
// above a gap with no frame are a failed, unreported flush and are fenced
// out; a frame above a gap (or, on local disk, which never skips a seq, any
// gap) means segments are gone: accepted only when GC took them (the bottom
// of the chain, linked below the checkpoint), and otherwise an error naming
// them (see docs/FORMAT.md, "Missing seqs"). Then Open lists the writer's
// segments. Sequence numbers go on
// from the highest seq of any epoch (a new writer starts at 1; seq 0 is never
// used). On local disk each active segment an earlier epoch left is:
// deleted, when the new epoch's fence does not accept it (it was written
// after the last progress its epoch published, so it holds nothing reported);
// left alone, when another process still holds it open (a zombie); otherwise
// recovered with segment.Recover: its torn tail is cut at the last whole
// frame, and — for the previous epoch — so are the blocks after its last
// progress frame within the fence (never reported; the CDC system writes
// those events again; a segment of format version 2, without progress
// frames, is cut above the highest ts its epoch published), and the rest is
// sealed under the segment's own old-epoch name (deleted if empty). When the segment with the next seq of its epoch
// is accepted by the fence, that successor's link decides instead: exactly
// the whole blocks whose footer it names are kept and sealed (even none), and
// no prefix that matches is an error naming both segments. A segment the fence
// accepts is never deleted: one with no whole block left at or below the
// published progress, or torn inside its header while a successor links it,
// makes Open fail naming it. Nothing reported
// flushed is lost; damage anywhere but the tail makes Open fail with an error
// naming the segment.
//
// # The chain
//
// Each epoch's segments form the chain of the segment format (segment.Link):
// seqs consecutive from the epoch's first, which links nothing (PrevSeq 0),
// each next one linking its predecessor's seq, header CRC, footer CRC and the
// largest commit ts of the epoch's segments up to it. A seq is taken only by
// a segment that was created; a local segment dropped before any block of it
// was durable gives its seq back, and the next segment takes it (cutting a
// leftover file under that name first), so no seq is ever skipped — a seq
// that would be is an error, never a link. The link to a predecessor is made
// when its blocks are final: on local disk at rotation (it is sealed later,
// after the next publication, or by recovery: the same blocks make the same
// footer, and sealing checks that the footer is the one linked); on an object
// store when the object is sealed in memory, before its upload, so uploads
// may land in any order. The published progress names the chain's end:
// meta.Progress's Seq, ChainMaxTs (of the blocks durable at publication) and
// Digest (the header CRC of segment Seq), which a reader holds the chain
// against.
//
// # Contexts
//
// No storage call of the writer runs under a context that cannot end. Open
// recovers under its ctx. The pipeline's calls (appends, seals, puts,
// deletes, progress publications) run under the writer's own context,
// which ends when the writer stops for good and when the ctx given to Close
// ends; a fenced writer's deletes are bounded by RetractTimeout besides. The
// ctx of Write, Flush and WriteEncoded bounds the caller's wait only: a
// flush the caller stopped waiting for goes on. (A sync of a local file
// takes no context at all: blob.AppendFile.Sync.)
//
// # Metrics
//
// [Writer.Stats] is the writer's counters, gauges and latency histograms
// ([Latency]). Package writermetrics exports them to Prometheus with a
// collector that reads them at scrape time and follows a takeover in the
// same process; package writer itself does not depend on Prometheus.
//
// # Close
//
// Close flushes what is resolved, publishes the progress, seals the active
// segment and stops the pipeline. It is idempotent. Events above the resolved
// ts at Close are not written: the CDC system's next writer writes them from
// the flushed ts on.
package writer
