package writer

import (
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/redokit/redokit/segment"
)

// Compression selects how blocks are compressed. The zero value means lz4.
type Compression string

// Compression values.
const (
	CompressionLZ4  Compression = "lz4"
	CompressionNone Compression = "none"
)

// SyncPolicy says when the active segment of an appendable backend is synced.
type SyncPolicy int

// Sync policies.
const (
	// SyncEveryFlush syncs (fdatasync) the active segment before a flush
	// reports its resolved ts: the default, and the only policy under which
	// a reported flushed ts survives a power loss.
	SyncEveryFlush SyncPolicy = iota
	// SyncNever never syncs the active segment before reporting a flush
	// (sealing still syncs it). UNSAFE: a power loss or kernel crash can
	// lose data below the reported flushed ts. For benchmarks that measure
	// everything but the disk.
	SyncNever
)

func (p SyncPolicy) String() string {
	switch p {
	case SyncEveryFlush:
		return "every-flush"
	case SyncNever:
		return "never"
	}
	return fmt.Sprintf("SyncPolicy(%d)", int(p))
}

// Defaults of Options.
const (
	DefaultFlushInterval   = time.Second
	DefaultFlushBytes      = 16 << 20
	DefaultMaxSegmentBytes = 64 << 20
	DefaultMaxSegmentAge   = 10 * time.Minute
	DefaultMemoryQuota     = 256 << 20
	DefaultMaxUploads      = 2
	DefaultRetryAttempts   = 10
	DefaultRetryBackoff    = 100 * time.Millisecond
	DefaultRetryMaxBackoff = 10 * time.Second
	DefaultRetractTimeout  = 30 * time.Second
	DefaultPublishInterval = 200 * time.Millisecond
)

// minSegmentBytes is the smallest MaxSegmentBytes: a header, a small block
// and a footer.
const minSegmentBytes = 4 << 10

// Options configure a Writer. LogID and WriterID are required; every other
// zero field takes its default.
type Options struct {
	// LogID is the log (changefeed) the writer writes; WriterID names this
	// writer within it. Both must pass segment.ValidateID.
	LogID    string
	WriterID string

	// FlushInterval is how often buffered, resolved events are flushed.
	// Default 1 s.
	FlushInterval time.Duration
	// FlushBytes starts a flush as soon as this many bytes of events have
	// been written since the last one: of the resolved events when the
	// resolved ts has moved, else a stage cut of those above the committed
	// ts. On local disk, while no resolved ts moves, stage cuts come every
	// min(FlushBytes, 4 MiB) instead: appended without a sync of their own
	// (the next flush's makes them durable), they bound the memory a big
	// transaction holds and cost no fdatasync.
	// Default 16 MiB; at most MemoryQuota.
	FlushBytes int64
	// MaxSegmentBytes is the size at which a segment is closed and the next
	// one started (before the block that would take it past the limit; a
	// segment always holds at least one block). Default 64 MiB; at least
	// 4 KiB.
	MaxSegmentBytes int64
	// MaxSegmentAge seals the active segment of an appendable backend once
	// it is this old, so that readers and GC see sealed segments even when
	// the writer is slow. Default 10 minutes; negative: no age limit. On an
	// object store every flush is its own segment and this does not apply.
	MaxSegmentAge time.Duration
	// BlockSize is the target uncompressed size of a block. Default
	// segment.DefaultBlockSize (256 KiB); at most segment.MaxBlockSize and
	// at most MaxSegmentBytes.
	BlockSize int
	// Compression of blocks: CompressionLZ4 (default) or CompressionNone.
	Compression Compression
	// Sync is the sync policy of appendable backends. Default SyncEveryFlush.
	Sync SyncPolicy
	// MemoryQuota bounds the bytes of buffered events, from Write until
	// they are durable. A Write that would pass it blocks (back-pressure)
	// until a flush or a stage cut frees memory: only on storage, never on
	// a resolved ts (see Memory and back-pressure in the package doc).
	// Default 256 MiB.
	MemoryQuota int64
	// Workers is the number of goroutines that compress and checksum
	// blocks. Default GOMAXPROCS. With CompressionNone there are none: the
	// flush loop checksums each block itself as it builds it.
	Workers int
	// MaxUploads bounds the segment objects an object-store writer uploads
	// at once: a full segment object is uploaded while the next one is
	// assembled, and a flush of several objects uploads them side by side.
	// Each one holds up to MaxSegmentBytes of memory until it is durable
	// (see the package doc's Memory section). 1 uploads one object at a
	// time. Default 2; unused on an appendable backend.
	MaxUploads int

	// RetryAttempts bounds how many times a failed flush (a failed put,
	// append, sync, seal or progress publication) is tried again before the
	// writer gives up and fails for good. Default 10; negative: no retry.
	RetryAttempts int
	// RetryBackoff is the wait before the first retry; each next wait
	// doubles, up to RetryMaxBackoff. Defaults 100 ms and 10 s.
	RetryBackoff    time.Duration
	RetryMaxBackoff time.Duration

	// Owner describes this process in the writer's lease (default
	// host:pid).
	Owner string
	// Logger receives the writer's log records. Default: discard.
	Logger *slog.Logger
	// PublishInterval is the least time between two publications of the
	// writer's progress to its state object (meta.Lease.PublishProgress).
	// A flush is durable, and Flush returns, before its progress is
	// published: the state object follows lazily, at most one publication
	// in flight, the ones in between coalesced. What it delays is the
	// global resolved ts the coordinator derives from the states (and so
	// what readers may read), not the durability of flushed data.
	// Writer.Publish waits for it.
	PublishInterval time.Duration
	// RetractTimeout bounds the deletes of a fenced writer (see the
	// package doc's Fencing section): the store may hang, and the writer
	// must still stop and report. Default 30 s.
	RetractTimeout time.Duration
}

// withDefaults returns a copy of o (nil: the zero Options) with every zero
// field set to its default, or an error naming the first invalid option.
func (o *Options) withDefaults() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	bad := func(format string, args ...any) (Options, error) {
		return Options{}, fmt.Errorf("writer: invalid options: "+format, args...)
	}
	if o == nil {
		return bad("LogID and WriterID are required (got nil Options)")
	}
	if err := segment.ValidateID(r.LogID); err != nil {
		return bad("LogID: %v", err)
	}
	if err := segment.ValidateID(r.WriterID); err != nil {
		return bad("WriterID: %v", err)
	}
	switch {
	case r.FlushInterval == 0:
		r.FlushInterval = DefaultFlushInterval
	case r.FlushInterval < 0:
		return bad("FlushInterval %v is negative", r.FlushInterval)
	}
	switch {
	case r.MemoryQuota == 0:
		r.MemoryQuota = DefaultMemoryQuota
	case r.MemoryQuota < 0:
		return bad("MemoryQuota %d is negative", r.MemoryQuota)
	}
	switch {
	case r.FlushBytes == 0:
		r.FlushBytes = min(DefaultFlushBytes, r.MemoryQuota)
	case r.FlushBytes < 0:
		return bad("FlushBytes %d is negative", r.FlushBytes)
	case r.FlushBytes > r.MemoryQuota:
		return bad("FlushBytes %d exceeds MemoryQuota %d: the threshold could never be reached", r.FlushBytes, r.MemoryQuota)
	}
	switch {
	case r.MaxSegmentBytes == 0:
		r.MaxSegmentBytes = DefaultMaxSegmentBytes
	case r.MaxSegmentBytes < minSegmentBytes:
		return bad("MaxSegmentBytes %d is below the minimum %d", r.MaxSegmentBytes, minSegmentBytes)
	}
	if r.MaxSegmentAge == 0 {
		r.MaxSegmentAge = DefaultMaxSegmentAge
	}
	switch {
	case r.BlockSize == 0:
		r.BlockSize = int(min(segment.DefaultBlockSize, r.MaxSegmentBytes/2))
	case r.BlockSize < 0 || r.BlockSize > segment.MaxBlockSize:
		return bad("BlockSize %d is outside [1, %d]", r.BlockSize, segment.MaxBlockSize)
	case int64(r.BlockSize) > r.MaxSegmentBytes:
		return bad("BlockSize %d exceeds MaxSegmentBytes %d", r.BlockSize, r.MaxSegmentBytes)
	}
	switch r.Compression {
	case "":
		r.Compression = CompressionLZ4
	case CompressionLZ4, CompressionNone:
	default:
		return bad("Compression %q is neither %q nor %q", r.Compression, CompressionLZ4, CompressionNone)
	}
	switch r.Sync {
	case SyncEveryFlush, SyncNever:
	default:
		return bad("Sync %d is not a known policy", int(r.Sync))
	}
	switch {
	case r.Workers == 0:
		r.Workers = runtime.GOMAXPROCS(0)
	case r.Workers < 0:
		return bad("Workers %d is negative", r.Workers)
	}
	switch {
	case r.MaxUploads == 0:
		r.MaxUploads = DefaultMaxUploads
	case r.MaxUploads < 0:
		return bad("MaxUploads %d is negative", r.MaxUploads)
	}
	switch {
	case r.RetryAttempts == 0:
		r.RetryAttempts = DefaultRetryAttempts
	case r.RetryAttempts < 0:
		r.RetryAttempts = 0
	}
	switch {
	case r.RetryBackoff == 0:
		r.RetryBackoff = DefaultRetryBackoff
	case r.RetryBackoff < 0:
		return bad("RetryBackoff %v is negative", r.RetryBackoff)
	}
	switch {
	case r.RetryMaxBackoff == 0:
		r.RetryMaxBackoff = max(DefaultRetryMaxBackoff, r.RetryBackoff)
	case r.RetryMaxBackoff < r.RetryBackoff:
		return bad("RetryMaxBackoff %v is below RetryBackoff %v", r.RetryMaxBackoff, r.RetryBackoff)
	}
	switch {
	case r.PublishInterval == 0:
		r.PublishInterval = DefaultPublishInterval
	case r.PublishInterval < 0:
		return bad("PublishInterval %v is negative", r.PublishInterval)
	}
	switch {
	case r.RetractTimeout == 0:
		r.RetractTimeout = DefaultRetractTimeout
	case r.RetractTimeout < 0:
		return bad("RetractTimeout %v is negative", r.RetractTimeout)
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	return r, nil
}

func (c Compression) segment() segment.Compression {
	if c == CompressionNone {
		return segment.CompressionNone
	}
	return segment.CompressionLZ4
}
