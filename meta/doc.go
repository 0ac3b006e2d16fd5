// Package meta holds the small, strongly consistent state of a redo log:
// each writer's lease and progress, the log's checkpoint and global resolved
// ts, and the coordination that computes them.
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
//	{"version":2,"crc32c":"<8 lowercase hex digits>","body":<compact JSON>}
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
// for a lease, a newer epoch there is blob.ErrFenced (a [*FencedError]
// carrying the state that proves it), and nothing else is; the lease's own
// epoch under another token is [ErrForeignWrite]; the previous version
// still there returns the original error and leaves the lease usable. When
// the re-read fails too, the error says so and the next write re-reads
// first. Reads that return an ETag pair it with the body of the same
// version (stat, read, stat again). Every compare-and-swap loop makes at
// most 8 attempts with jittered exponential backoff, honours its context,
// and then fails with [ErrContended] naming the key: a store whose reads lag
// an overwrite ends a loop instead of spinning it.
//
// # Epochs and fencing
//
// Opening a writer ID takes its lease ([AcquireWriter]): epoch+1 by
// compare-and-swap. The new epoch records a [Fence] for the epoch it
// replaced: the last segment seq that epoch had published. From then on the
// old process (a zombie, if it still runs) fails every progress publication
// with blob.ErrFenced, and readers ignore any segment it commits later
// (seq above its fence): see [WriterState.Accepts]. The fence records the
// last version of the old epoch's state the new one replaced, which may be
// a publication whose answer the zombie never got: so a zombie may delete
// its segments above the fence ([FencedError.Fence]), and nothing else.
package meta
