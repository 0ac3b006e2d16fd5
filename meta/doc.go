// Package meta holds the small, strongly consistent state of a redo log:
// each writer's lease and progress, the log's checkpoint and global resolved
// ts, and the coordination that computes them.
//
// # Objects
//
// Under a log ID L the package owns two kinds of keys, beside the segments
// (L/seg/...):
//
//	L/writers/<writer ID>   one WriterState (JSON) per writer: its epoch, its
//	                        flushed resolved ts, its last published segment
//	                        seq, and the fences of its earlier epochs
//	L/meta                  the log's Meta (JSON): checkpoint ts, global
//	                        resolved ts, live writers and their epochs
//
// Every write to either is a conditional write: if-not-exists to create,
// compare-and-swap on the ETag to change. That is the whole concurrency
// story: no locks, no clocks, and it works on every store the blob
// conformance suite certifies.
//
// # Epochs and fencing
//
// Opening a writer ID takes its lease ([AcquireWriter]): epoch+1 by
// compare-and-swap. The new epoch records a [Fence] for the epoch it
// replaced: the last segment seq that epoch had published. From then on the
// old process (a zombie, if it still runs) fails every progress publication
// with blob.ErrFenced, and readers ignore any segment it commits later
// (seq above its fence): see [WriterState.Accepts].
package meta
