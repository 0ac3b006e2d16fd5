package driver

import (
	"context"
	"io"
	"time"
)

// Driver is the interface a storage backend implements. It is deliberately
// narrow: the Bucket over it does key validation, prefixing, error wrapping,
// batching and counting, so a driver only moves bytes and classifies its
// errors.
//
// Keys given to a driver are already valid (see blob.ValidateKey) and already carry
// any prefix. Every method must be safe for concurrent use and must honour
// ctx: when ctx ends, the call returns promptly with an error that wraps
// ctx.Err() (or that ErrorCode maps to CodeCanceled/CodeDeadlineExceeded).
type Driver interface {
	// Put stores the bytes of r (size bytes, or until EOF when size < 0)
	// under key, atomically: readers see the old object (or none) until Put
	// returns successfully, and then the whole new object. A failed or
	// canceled Put leaves nothing visible and, on multipart stores, aborts
	// the upload. With opts.IfNotExist the write fails with a code of
	// CodePreconditionFailed if the key exists; with opts.IfMatch it fails
	// the same way unless the current object's ETag equals opts.IfMatch.
	// Exactly one of concurrent conditional writers wins.
	Put(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions) (Attrs, error)

	// NewRangeReader reads length bytes from offset (length < 0: to the end).
	// offset is never negative. An offset at or past the end yields an empty
	// reader, not an error; a missing key is CodeNotExist.
	NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)

	// Stat returns the attributes of key, CodeNotExist if it is missing.
	Stat(ctx context.Context, key string) (Attrs, error)

	// List returns one page of the objects whose keys start with
	// opts.Prefix, in strictly increasing byte order of key: when
	// opts.Token is set, the page that follows the one whose NextToken it
	// is (the token is the driver's own and opaque to callers; one that
	// encodes the last key returned continues strictly after that key);
	// otherwise from the first key strictly after opts.StartAfter (any
	// string; "" is the start). A page holds at most opts.PageSize objects
	// (1 to DefaultPageSize: Bucket never passes 0) and may hold fewer,
	// even none, with more to come; NextToken is empty on the last page and
	// only there. Listing is flat: there are no directories.
	//
	// A listing never misses an object: it returns every object that exists
	// throughout it (from before its first page is asked for until after its
	// last page returns), whatever else is put, renamed (AppendFile.Seal) or
	// deleted meanwhile. A driver that reads a directory and then looks at
	// each entry must not skip an entry that vanished in between: a rename
	// moves it, and only a fresh read shows where. When the driver cannot be
	// sure it saw everything, List fails; it never returns a short page
	// that looks complete.
	//
	// The prefix matches keys by exact byte prefix: it is no pattern (no SQL
	// LIKE, where "_" and "%" match anything, no glob "*", "?", "[", no "\"
	// escapes), and no case folding or Unicode normalization: "Log/" does
	// not match "log/x".
	//
	// A listing may yield keys that are not valid keys (see ListPage).
	List(ctx context.Context, opts ListOptions) (ListPage, error)

	// Delete removes the keys (at most MaxDeleteBatch of them). A missing key
	// is not an error. When some keys fail, the error names them.
	Delete(ctx context.Context, keys []string) error

	// ErrorCode classifies an error this driver returned.
	ErrorCode(err error) Code

	// Close releases the driver's resources.
	Close() error
}

// PutOptions are the conditions of a Put. The zero value is an unconditional
// overwrite.
type PutOptions struct {
	IfNotExist bool   // fail with CodePreconditionFailed if the key exists
	IfMatch    string // fail with CodePreconditionFailed unless the current ETag equals this

	// BeforeCommit, when set, is called once, before the put can become
	// visible to anyone; if it returns an error the put is abandoned with
	// that error and the key keeps what it held. A driver that stages
	// objects (see Stager) calls it after its staging work, so the caller's
	// own work (the redo writer's fsync of the data the object describes)
	// overlaps it; for any other driver Bucket calls it before Driver.Put.
	// It is called on the goroutine that called Put.
	BeforeCommit func(ctx context.Context) error
}

// Attrs describe a stored object.
type Attrs struct {
	// Key is relative to the bucket that returned it. In a listing it may
	// be a key that is not valid (see ListPage).
	Key  string
	Size int64
	ETag string // opaque; changes whenever the content changes (S3 keeps it for identical bytes, so compare-and-swap users write content that differs)
	// ModTime is the time of the object's last write, by the store's
	// clock; never zero, in listings too (GC's grace period reads it there;
	// the conformance suite allows conformance.ModTimeTolerance of skew).
	ModTime time.Time
}

// ListOptions select a page of a listing.
type ListOptions struct {
	Prefix     string
	StartAfter string // list keys strictly greater than this one
	Token      string // the previous page's ListPage.NextToken: continue after that page; takes precedence over StartAfter
	PageSize   int    // at most this many objects: 1 to DefaultPageSize (Bucket turns a caller's 0 into DefaultPageSize)
}

// ListPage is one page of a listing.
//
// A listing may yield keys that are not valid keys (blob.ValidateKey fails
// on them): objects the store holds that no valid key can address, such as a
// local file whose name is not UTF-8 or holds a control character, or one
// whose path is longer than blob.MaxKeyLen. Callers must report them, not skip
// them: such an object is often a valid one whose name was damaged, and
// skipping it would hide its loss. Bucket passes them through as they are;
// reading or deleting one fails with blob.ErrInvalidKey naming it.
type ListPage struct {
	Objects   []Attrs
	NextToken string // empty on the last page
}

// MaxDeleteBatch is the largest number of keys Bucket passes to one
// Driver.Delete call (S3's DeleteObjects limit).
const MaxDeleteBatch = 1000

// DefaultPageSize is the page size Bucket asks for when the caller gives
// none, and the largest it asks for.
const DefaultPageSize = 1000

// Stager is the optional capability of a driver whose Put stages the
// object's bytes durably before making them visible in one step (the local
// file system: a temporary file, fsync, then rename). Such a driver calls
// PutOptions.BeforeCommit between the two itself, after the staging and
// before anything is visible, and returns its error unchanged. A Put that
// fails before that point need not call it.
type Stager interface {
	// StagesPuts reports whether Put calls PutOptions.BeforeCommit itself
	// (a wrapper answers for the driver it wraps).
	StagesPuts() bool
}

// VersionReader is the optional capability of a driver whose reads say which
// version of an object they served: the ETag comes from the same response
// (on a file system, the same open file) as the bytes, so the two are of one
// version whatever the store's consistency. Package meta pairs a metadata
// object's body with the ETag its next compare-and-swap is conditioned on
// through it; without it, it stats, reads and stats again, which a store
// whose reads lag its stats can defeat.
type VersionReader interface {
	// ReadVersion returns the whole object under key and the attributes
	// (ETag, size) of the version those bytes are; CodeNotExist when it is
	// missing.
	ReadVersion(ctx context.Context, key string) ([]byte, Attrs, error)
}

// Appender is the optional capability of a driver that can append to an open
// object and make the appended bytes durable without rewriting it: the local
// file system has it, object stores do not. The redo writer uses it for its
// active segment.
type Appender interface {
	// OpenAppend opens key for appending, creating it empty if it is missing.
	// An existing object keeps its bytes; writes go after them.
	OpenAppend(ctx context.Context, key string) (AppendFile, error)
}

// AppendFile is an object open for appending. It is not safe for concurrent
// use. After a crash, every byte written before the last successful Sync is
// intact; bytes after it may be missing or torn.
type AppendFile interface {
	io.Writer
	// Size is the object's length including what Write has accepted.
	Size() int64
	// Sync makes every byte written so far durable (fdatasync on a file).
	Sync() error
	// Truncate cuts the object to size bytes (to drop a torn tail) and syncs.
	Truncate(size int64) error
	// Seal syncs, closes, and atomically renames the object to finalKey,
	// failing with CodePreconditionFailed if finalKey exists. The rename is
	// durable when Seal returns.
	Seal(ctx context.Context, finalKey string) (Attrs, error)
	// Close closes the object without sealing it; it stays under its key.
	Close() error
}

// WritebackStarter is an optional fast path of an AppendFile: StartWriteback
// asks the system to begin writing the bytes in [off, off+n) to storage and
// returns without waiting for them. It promises nothing about durability,
// and it must not consume a write-back error (the next Sync still reports
// one). A writer that starts write-back as it appends makes its later Sync
// wait only for what is still in flight, instead of for everything written
// since the last one (sync_file_range(SYNC_FILE_RANGE_WRITE) on Linux, what
// RocksDB's bytes_per_sync does).
type WritebackStarter interface {
	StartWriteback(off, n int64) error
}

// Aser is the optional escape hatch of a driver: As sets i to the driver's
// native client when i is a pointer to that client's type, and reports
// whether it did. Each driver's package doc lists the types it supports.
type Aser interface {
	As(i any) bool
}
