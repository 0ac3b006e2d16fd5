// Package gocloud is a redokit driver.Driver over any gocloud.dev/blob bucket,
// so that every store gocloud opens by URL can hold a redo log. It is the
// compatibility backend: for local disk, S3, GCS and Azure, redokit's own
// backends (backends/local, s3, gcs, azure) give guarantees this adapter
// cannot, listed below. Use this one for a store only gocloud reaches, or to
// try redokit against an existing gocloud setup.
//
// # Opening
//
// [New] wraps a *gcblob.Bucket you opened ([NewDriver] its driver, for
// wrapping). blob.Open opens a gocloud URL through gocloud's default URL mux
// by one rule: the redokit URL "gocloud+<scheme>://rest" opens the gocloud
// URL "<scheme>://rest". "gocloud+mem" and "gocloud+file" are registered here (the
// package imports gocloud's memblob and fileblob); for others, blank-import
// the gocloud driver and call [RegisterScheme]:
//
//	import _ "gocloud.dev/blob/s3blob"
//	func init() { gocloud.RegisterScheme("s3") }
//	// blob.Open(ctx, "gocloud+s3://bucket?region=eu-west-1&prefix=logs/")
//
// This package deliberately does not import s3blob, gcsblob or azureblob:
// each pulls in a whole cloud SDK. In a redokit URL the "prefix" parameter
// makes a redokit prefix view (validated like any key prefix); gocloud's "key"
// parameter is refused; every other parameter goes to the gocloud driver,
// which rejects those it does not know.
//
// # What maps to what
//
//   - Put streams through gocloud's Bucket.Upload with a fixed content type.
//     PutOptions.IfNotExist is gocloud's WriterOptions.IfNotExist. A failed or
//     canceled Put cancels the writer's context before gocloud closes the
//     writer, which is what makes gocloud discard the object: gocloud commits
//     whatever a writer holds at Close unless its context is done.
//     The Attrs Put returns come from a Stat after the write: one extra
//     request per Put.
//   - NewRangeReader is gocloud's; an offset at or past the end is an empty
//     reader (S3 and GCS answer that with 416, so after such an error a Stat
//     decides).
//   - Stat is gocloud's Attributes. The ETag is the store's followed by
//     ";md5=<hex>" when the store keeps an MD5 (memblob and fileblob build
//     their ETag from a time and a size only, and fileblob's repeats across
//     same-size writes within one clock tick); if a driver gives no ETag, it
//     is synthesized as W/"<modtime ns>-<size>[-<md5>]". Either way it changes
//     only when one of those parts does.
//   - List is gocloud's flat listing (empty Delimiter). gocloud has no
//     start-after: keys at or below StartAfter are fetched and skipped. Listed
//     Attrs carry no ETag (gocloud's ListObject has none).
//   - Delete removes one key a request (gocloud has no batch delete), up to
//     [Options].DeleteConcurrency (default 16) at once; a missing key is not an
//     error, and neither is a key that names no object but fails to delete
//     (fileblob: a key that is only the directory of others), which a Stat
//     confirms on that error path only.
//   - Every operation first checks its context: memblob and fileblob ignore
//     the context of reads, stats and lists.
//   - Errors map from gcerrors codes: NotFound → not exist; FailedPrecondition
//     and AlreadyExists → precondition failed; PermissionDenied,
//     InvalidArgument; Unimplemented → not supported; ResourceExhausted and
//     Internal → transient; Canceled; DeadlineExceeded. Errors gocloud leaves
//     Unknown are transient if the SDK error reports HTTP 429 or 5xx.
//   - As: a **gcblob.Bucket receives the gocloud bucket itself; other types
//     go to gocloud's Bucket.As and are those the gocloud driver's package doc
//     lists (*s3.Client for s3blob, *storage.Client for gcsblob,
//     *container.Client for azureblob, os.FileInfo for fileblob, none for
//     memblob).
//
// # Guarantees gocloud v0.49 lacks
//
// Compare-and-swap. gocloud's WriterOptions has IfNotExist but no if-match,
// so PutOptions.IfMatch fails with blob.ErrNotSupported, and redokit's meta
// (epochs, progress, checkpoint) cannot be fenced through this adapter on a
// shared store. The native clients could do it through the BeforeWrite hook
// (s3blob exposes *transfermanager.UploadObjectInput, azureblob
// *azblob.UploadStreamOptions, gcsblob **storage.ObjectHandle, which takes a
// generation rather than an ETag); that is what redokit's native backends are
// for. memblob's hook exposes nothing and fileblob's only the temporary
// *os.File. For a bucket no other process or code can write, [Options].LocalCAS
// emulates if-match with a per-key lock in this process; "gocloud+mem://"
// turns it on for memblob, whose buckets are private to the
// one URL open.
//
// fileblob ("file://"):
//   - no fsync of the file or of its directory: a Put that returned can be
//     lost, or seen empty, after a power failure (redokit's local backend
//     fsyncs both);
//   - IfNotExist is a stat then rename under a mutex of this process: atomic
//     among the goroutines of one process, not across processes;
//   - its ETag is the file's modification time and size, and file times are
//     as coarse as the kernel's clock tick: two same-size writes close together
//     share it. The MD5 this driver appends (from fileblob's sidecar) tells
//     them apart unless the bytes are equal too; with metadata=skip there is
//     no sidecar and no MD5;
//   - it writes temporary files to os.TempDir and renames them in: on another
//     file system than the bucket the rename fails (set TMPDIR, or
//     no_tmp_dir=1, which leaves temporary files beside the objects where List
//     can see them); it keeps a ".attrs" sidecar per object (keys ending in
//     ".attrs" are refused) unless metadata=skip;
//   - it lists by walking directories, which is not byte order of key ("a-b"
//     sorts before "a/c" but is walked after it), so this adapter lists a
//     fileblob bucket by reading the whole prefix and sorting it on every page
//     ([Options].UnorderedList, set automatically); unreadable directories
//     are skipped silently by fileblob, and an object deleted while it walks
//     fails its listing with a not-found error, which this adapter answers by
//     listing the page again, whole (at most 16 times), never by skipping;
//   - a key cannot be both an object and a directory ("a" and "a/b").
//
// memblob ("mem://"): process-local, and every open of "mem://" is a new empty
// bucket, so two URL opens do not share objects (redokit's own "mem://name"
// does). Its ETag is the write time in nanoseconds and the size.
//
// azureblob: gocloud v0.47 panicked when a conditional write failed on the
// Writer path; fixed in v0.48 and later (this module uses v0.49.0).
//
// s3blob: each Delete first HEADs the key to report NotFound, two requests a
// key, and needs read permission; gcsblob reports 403 as NotFound.
//
// No gocloud driver can append, so this driver has no driver.Appender: the redo
// writer seals one object per flush on it.
package gocloud
