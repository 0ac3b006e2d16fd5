// Package meta is the coordination of a redo log: the small, strongly
// consistent state beside its segments — each writer's lease and progress,
// the log's checkpoint and global resolved ts — and the rules that move
// them. This doc is the manual; redokit.Log opens everything it describes.
//
// # Writers
//
// A writer is one process (or goroutine) that appends a share of the log's
// events under a writer ID it chooses, such as a capture's name. Opening a
// writer ID takes its lease: the next epoch of the ID, by compare-and-swap on
// its state object (see Epochs and fencing). After each durable flush the
// writer publishes its progress there: its flushed resolved ts (below it,
// every event of its spans is durable), the last segment seq and where that
// segment's chain ends. The coordinator learns of a writer by AddWriter and
// forgets it by RemoveWriter; a writer whose progress stops moving is
// reported by Stale, never dropped silently.
//
// # Spans
//
// A span ([SpanID]) is a table, or a key range of a split table: the unit a
// writer owns and the unit the watermark is computed over. AddSpan registers
// a span at a start ts (its checkpoint); from then on its effective flushed
// ts is the highest ts any writer that owned it published for it, so a span
// that moves between writers keeps what its dead owner made durable until
// the new owner passes it. RemoveSpan ends it (a dropped table).
//
// # The global resolved ts
//
// Tick reads every writer's state and moves the global resolved ts to
//
//	max(previous, min(min over spans of their effective flushed ts,
//	                  min over pending barriers of their commit ts))
//
// (with no span, the live writers' flushed ts instead). Below it the log
// holds every event of every span: a downstream may apply up to it and no
// further (package sinkgate), and a recovery replays (checkpoint, global
// resolved]. It never goes backwards.
//
// # Barriers
//
// A DDL that changes which spans exist (a CREATE TABLE, a new partition)
// must not let the watermark pass it before the new spans are registered,
// or a reader would skip their first events. AddBarrier holds the global
// resolved ts at or below the DDL's commit ts until ReleaseBarrier, which the
// CDC system calls once the new spans exist. A barrier below the current
// watermark is refused (ErrBarrierTooLate): it could not hold anything.
//
// # Failover
//
// When a writer dies, its spans move to another writer at the log's
// checkpoint: the heir AddSpans them there and writes their events again
// from it (the downstream, written idempotently, absorbs the overlap). The
// dead writer ID is fenced first (redokit.Log.FenceWriter, or opening a
// writer under the same ID): its next epoch records where the old epoch's
// chain ends, so a zombie that wakes can publish nothing and readers ignore
// what it writes past the fence. Then RemoveWriter.
//
// # Checkpoint
//
// SetCheckpoint records how far the downstream has applied. It never goes
// backwards ([ErrBackwards]) and never passes the global resolved ts
// ([ErrCheckpointAhead]). It deletes nothing: garbage collection below the
// checkpoint is package gc's, which reads the checkpoint on its own schedule.
//
// # Removal
//
// A log whose removal started and did not finish (its delete marker is
// there) is refused by OpenCoordinator and AcquireWriter with
// [ErrDeleting]; gc.ResumeDeleteLog finishes the removal, and
// redokit.Log.OpenWriter and OpenCoordinator call it first.
//
// # Objects
//
// Under a log ID L the package owns two kinds of keys, beside the segments
// (L/seg/...):
//
//	L/writers/<writer ID>   one WriterState per writer: its epoch, its
//	                        flushed resolved ts, its last published segment
//	                        seq, and the fences of its earlier epochs
//	L/meta                  the log's Meta: checkpoint ts, global resolved
//	                        ts, live writers and their epochs
//
// Every write to either is a conditional write: if-not-exists to create,
// compare-and-swap on the ETag to change. That is the whole concurrency
// story: no locks, no clocks, and it works on every store the blob
// conformance suite certifies.
//
// # The stored form
//
// Both are stored in one envelope, byte for byte
//
//	{"version":4,"crc32c":"<8 lowercase hex digits>","body":<compact JSON>}
//
// where the CRC-32C (Castagnoli) covers the exact body bytes (see
// docs/FORMAT.md). Decoding is strict: a damaged envelope, a CRC mismatch,
// an unknown, missing, duplicate or misplaced-null field, trailing data or a
// body that breaks the object's rules is an error naming the key that
// matches [ErrCorrupt]; another version matches [ErrUnsupportedVersion]
// (version 1 was never released and is not readable). No damaged object
// decodes to something else.
//
// # Write tokens and unknown outcomes
//
// Every write carries a fresh random token in the body. A write whose
// outcome is unknown (any failure other than a refusal before the request
// left, and a precondition failure after an attempt that may have landed)
// is never guessed at: the object is re-read. Its token there is success;
// for a lease, a newer epoch there is [ErrFenced] (a [*FencedError]
// carrying the state that proves it), and nothing else is; the lease's own
// epoch under another token is [ErrForeignWrite]; the previous version
// still there returns the original error and leaves the lease usable. When
// the re-read fails too, the error says so and the next write re-reads
// first. Reads that return an ETag pair it with the body of the same
// version: from one response on a driver with blob/driver.VersionReader,
// else by stat, read, stat again. Every compare-and-swap loop makes at
// most 8 attempts with jittered exponential backoff, honours its context,
// and then fails with [ErrContended] naming the key: a store whose reads lag
// an overwrite ends a loop instead of spinning it.
//
// # Freshness
//
// A valid object is not necessarily the newest: a restored object version,
// or a read served by a lagging replica or cache, returns an older copy
// whose envelope and CRC hold. Such a copy is never used, and never
// "repaired" by writing its content back. Every object carries a
// generation that grows by one with every write of it (a writer state's
// across epochs), and each object that depends on another records the
// generation it saw:
//
//   - the meta object's writer_generations names, per writer, the newest
//     state generation a Tick accounted;
//   - a writer state's meta_generation is the newest meta generation its
//     writer had read (at AcquireWriter, when its spans change, and at most
//     every 5 s while it publishes).
//
// The cross-checks: a writer state older than the meta object accounted is
// stale; a meta object older than a generation a writer state saw is
// stale; in a log with registered spans, a span a writer state publishes
// that the meta object neither registers nor removed (RemovedSpans keeps a
// removed span while a state still lists it) contradicts it. The
// coordinator applies them at every Tick (nothing is written from a stale
// object), readers and verify through CheckStates, AcquireWriter before it
// takes an epoch; a coordinator or a lease also refuses a re-read older
// than the version it holds itself, or its own version paired with another
// ETag (a body that may lag the version the ETag names). Each refusal is a
// *StaleError (ErrStale) or *InconsistentError (ErrInconsistent) naming
// both objects and generations. A read that may race a newer write (the
// other object was read later) is settled by reading again first, and so
// is a writer state behind the meta object, up to three times after
// back-offs of about 10, 20 and 40 ms, since a lagging replica serves the
// current copy again after a while; a restored version stays behind and is
// refused.
//
// Epochs are never reused: AcquireWriter refuses a state when the meta
// object accounted a newer generation of it or saw the writer at a newer
// epoch, or when a segment of the writer names an epoch newer than the
// state's (one listing request from past the state's epoch).
//
// # Epochs and fencing
//
// Opening a writer ID takes its lease ([AcquireWriter]): epoch+1 by
// compare-and-swap. The new epoch records a [Fence] for the epoch it
// replaced: the last segment seq that epoch had published. From then on the
// old process (a zombie, if it still runs) fails every progress publication
// with [ErrFenced], and readers ignore any segment it commits later
// (seq above its fence): see [WriterState.Accepts]. The fence records the
// last version of the old epoch's state the new one replaced, which may be
// a publication whose answer the zombie never got: so a zombie may delete
// its segments above the fence ([FencedError.Fence]), and nothing else.
package meta
