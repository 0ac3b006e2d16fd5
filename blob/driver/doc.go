// Package driver is what a redokit storage backend implements and uses: the
// [Driver] interface, the optional capabilities ([Appender], [Stager],
// [Aser]), the error [Code]s a driver classifies its errors into, and a few
// helpers for request bodies, batch deletes, classifying errors
// ([ContextCode], [HTTPStatusCode]) and telling a Put whose answer was lost
// by its own write ([NewPutID], [MayHaveLanded]). Users of a store need none of
// it: they hold a *blob.Bucket, which a backend's constructor returns.
//
// The split follows gocloud.dev/blob/driver. A driver only moves bytes and
// says what its errors mean; the Bucket over it does everything that must
// behave the same on every store, once. So a driver may rely on this:
//
//   - every key it is given is valid (see blob.ValidateKey) and already
//     carries the bucket's prefix; listing prefixes are full prefixes too;
//   - NewRangeReader never gets a negative offset or a length of 0, Put never
//     gets IfNotExist together with IfMatch, List gets a page size of 1 to
//     [DefaultPageSize], and Delete at most [MaxDeleteBatch] keys;
//   - Close is called once (calls in flight, and readers and append files
//     opened before it, may still run; they must fail, not misbehave);
//   - PutOptions.BeforeCommit reaches Put only if the driver is a [Stager]
//     that says it stages puts.
//
// And it must guarantee what each method's doc says, which the conformance
// package proves: run conformance.RunBucket against a Bucket over a new
// driver before trusting it with a redo log.
//
// Errors: a driver returns its native errors (wrapped as it likes) and
// classifies them in ErrorCode; where it has none of its own it wraps one of
// the sentinels here ([ErrNotExist], [ErrPreconditionFailed], ...), which
// classify themselves. Errors that wrap ctx.Err() are classified as
// CodeCanceled or CodeDeadlineExceeded whatever ErrorCode says.
//
// Constructors: a backend package exports New, returning a *blob.Bucket
// (blob.NewBucket over its driver), and NewDriver, returning its driver for
// those who decorate drivers (fault injection, metrics) before handing them
// to blob.NewBucket; docs/BACKENDS.md shows the shape.
package driver
