// Package blob is redokit's storage abstraction: a concrete, portable
// [Bucket] type over the narrow driver.Driver interface that each backend
// implements (package blob/driver holds what only driver authors need).
//
// The split follows gocloud.dev/blob and database/sql. A driver only moves
// bytes: whole-object puts (optionally conditional), ranged reads, stat,
// paged listing, batch delete, and the classification of its own errors into
// a small closed set of [Code]s. Everything that must behave the same on every
// backend lives once, in Bucket:
//
//   - key validation (see [ValidateKey]): empty, non-UTF-8, absolute keys,
//     empty, "." and ".." segments, a trailing "/", NUL and other control
//     characters, and keys longer than [MaxKeyLen] are rejected with
//     [ErrInvalidKey] before a driver sees them;
//   - error wrapping: every error returned by a Bucket method is an [*Error]
//     naming the operation and the key, and matches the sentinels
//     [ErrNotExist], [ErrPreconditionFailed], [ErrInvalidKey], [ErrClosed],
//     [ErrNotSupported], [ErrPermissionDenied] with errors.Is; context errors
//     stay matchable with errors.Is(err, context.Canceled) and friends;
//   - the closed state: every call after [Bucket.Close] fails with ErrClosed;
//   - key-prefix views ([Bucket.Prefixed]) that see nothing outside their
//     prefix;
//   - batching of deletes (at most [MaxDeleteBatch] keys a driver call) and
//     request counters ([Bucket.Stats]) used to hold request budgets.
//
// Optional capabilities are separate interfaces found by type assertion, as in
// gocloud: a driver that implements driver.Appender lets the redo writer
// append to an open object and sync it (the local file system does);
// [Bucket.CanAppend] reports it.
//
// Backends register a URL scheme with [Register] from their init function, and
// [Open] opens a bucket from a URL such as "file:///var/redo" or
// "s3://bucket/prefix?region=eu-west-1". Unknown query parameters are an error
// that names them ([CheckQuery]); credentials never appear in an error
// ([RedactURL]).
//
// The contract every driver must meet is proven by the conformance package:
// run conformance.RunBucket against a new driver before trusting it with a
// redo log.
package blob
