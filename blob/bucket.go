package blob

import (
	"github.com/redokit/redokit/blob/driver"

	"bytes"
	"context"
	"io"
	"iter"
	"strings"
	"sync"
	"sync/atomic"
)

// Bucket is the portable handle on a store. Create one with NewBucket over a
// driver, or with Open from a URL. A Bucket is safe for concurrent use.
//
// Keys a caller passes are relative to the bucket's prefix (see Prefixed);
// keys it returns are too.
type Bucket struct {
	shared *shared
	prefix string
}

// shared is the state every prefixed view of one driver has in common.
type shared struct {
	drv    driver.Driver
	closed atomic.Bool
	once   sync.Once
	err    error
	stats  counters
}

// NewBucket returns a Bucket over drv. The Bucket owns drv: Close closes it.
func NewBucket(drv driver.Driver) *Bucket {
	return &Bucket{shared: &shared{drv: drv}}
}

// Prefixed returns a view of b in which every key is prefix+key and nothing
// outside prefix is visible. It shares b's driver: closing either closes both.
// The prefix must be valid as a key, with an optional trailing "/" (add the
// slash yourself: "logs/" and "logs" are different prefixes).
func (b *Bucket) Prefixed(prefix string) (*Bucket, error) {
	full := b.prefix + prefix
	if err := validatePrefix(full); err != nil {
		return nil, &Error{Op: "prefix", Key: prefix, Code: CodeInvalidArgument, Err: err}
	}
	return &Bucket{shared: b.shared, prefix: full}, nil
}

// Prefix returns the key prefix of this view ("" for the whole bucket).
func (b *Bucket) Prefix() string { return b.prefix }

// As sets i to the driver's native client when the driver supports that type
// (see the driver's package doc); it reports whether it did.
func (b *Bucket) As(i any) bool {
	if a, ok := b.shared.drv.(driver.Aser); ok && i != nil {
		return a.As(i)
	}
	return false
}

// CanAppend reports whether the driver has the Appender capability.
func (b *Bucket) CanAppend() bool {
	_, ok := b.shared.drv.(driver.Appender)
	return ok
}

// CanReadVersion reports whether the driver has the VersionReader
// capability: ReadVersion pairs bytes and ETag from one response.
func (b *Bucket) CanReadVersion() bool {
	_, ok := b.shared.drv.(driver.VersionReader)
	return ok
}

// ReadVersion returns the whole object under key and the attributes of the
// version those bytes are, from one response of a driver with the
// VersionReader capability; ErrNotSupported without it (see
// CanReadVersion).
func (b *Bucket) ReadVersion(ctx context.Context, key string) ([]byte, Attrs, error) {
	full, err := b.check("read", key)
	if err != nil {
		return nil, Attrs{}, err
	}
	vr, ok := b.shared.drv.(driver.VersionReader)
	if !ok {
		return nil, Attrs{}, &Error{Op: "read", Key: key, Code: CodeNotSupported, Err: ErrNotSupported}
	}
	b.shared.stats.reads.Add(1)
	data, a, err := vr.ReadVersion(ctx, full)
	if err != nil {
		return nil, Attrs{}, wrap(b.shared.drv, "read", key, err)
	}
	b.shared.stats.bytesRead.Add(int64(len(data)))
	a.Key = key
	return data, a, nil
}

// Close closes the driver. Every later call on b or any view of it fails with
// ErrClosed. Close is idempotent.
func (b *Bucket) Close() error {
	s := b.shared
	s.once.Do(func() {
		s.closed.Store(true)
		s.err = s.drv.Close()
	})
	return s.err
}

// check validates key and the bucket's state, returning the driver key.
func (b *Bucket) check(op, key string) (string, error) {
	if b.shared.closed.Load() {
		return "", &Error{Op: op, Key: key, Code: CodeUnknown, Err: ErrClosed}
	}
	full := b.prefix + key
	if err := ValidateKey(full); err != nil {
		return "", &Error{Op: op, Key: key, Code: CodeInvalidArgument, Err: err}
	}
	return full, nil
}

func (b *Bucket) rel(key string) string { return strings.TrimPrefix(key, b.prefix) }

// Put stores data under key, atomically.
func (b *Bucket) Put(ctx context.Context, key string, data []byte, opts *PutOptions) (Attrs, error) {
	return b.PutReader(ctx, key, bytes.NewReader(data), int64(len(data)), opts)
}

// PutReader stores size bytes of r under key (size < 0: until EOF),
// atomically. opts may be nil. A *bytes.Reader (or any io.ReadSeeker) lets
// drivers that sign payloads avoid a copy.
func (b *Bucket) PutReader(ctx context.Context, key string, r io.Reader, size int64, opts *PutOptions) (Attrs, error) {
	full, err := b.check("put", key)
	if err != nil {
		return Attrs{}, err
	}
	var o PutOptions
	if opts != nil {
		o = *opts
	}
	if o.IfNotExist && o.IfMatch != "" {
		return Attrs{}, errorf("put", key, CodeInvalidArgument, "IfNotExist and IfMatch are exclusive")
	}
	if o.BeforeCommit != nil {
		if st, ok := b.shared.drv.(driver.Stager); !ok || !st.StagesPuts() {
			if err := o.BeforeCommit(ctx); err != nil {
				return Attrs{}, err
			}
			o.BeforeCommit = nil
		}
	}
	b.shared.stats.puts.Add(1)
	a, err := b.shared.drv.Put(ctx, full, r, size, o)
	if err != nil {
		return Attrs{}, wrap(b.shared.drv, "put", key, err)
	}
	if size >= 0 {
		b.shared.stats.bytesWritten.Add(size)
	}
	a.Key = key
	return a, nil
}

// NewRangeReader opens length bytes of key from offset (length < 0: to the
// end). An offset past the end yields an empty reader; a negative offset is
// ErrInvalidArgument.
func (b *Bucket) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	full, err := b.check("read", key)
	if err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, errorf("read", key, CodeInvalidArgument, "negative offset %d", offset)
	}
	if length == 0 {
		// Object stores cannot express an empty range; a stat still reports
		// a missing key.
		b.shared.stats.stats.Add(1)
		if _, err := b.shared.drv.Stat(ctx, full); err != nil {
			return nil, wrap(b.shared.drv, "read", key, err)
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	b.shared.stats.reads.Add(1)
	r, err := b.shared.drv.NewRangeReader(ctx, full, offset, length)
	if err != nil {
		return nil, wrap(b.shared.drv, "read", key, err)
	}
	return &reader{rc: r, b: b, key: key}, nil
}

// NewReader opens the whole object.
func (b *Bucket) NewReader(ctx context.Context, key string) (io.ReadCloser, error) {
	return b.NewRangeReader(ctx, key, 0, -1)
}

// ReadAll returns the whole object.
func (b *Bucket) ReadAll(ctx context.Context, key string) ([]byte, error) {
	return b.ReadRange(ctx, key, 0, -1)
}

// ReadRange returns length bytes of key from offset (fewer at the end of the
// object; length < 0: to the end).
func (b *Bucket) ReadRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	r, err := b.NewRangeReader(ctx, key, offset, length)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var buf bytes.Buffer
	if length > 0 {
		buf.Grow(int(min(length, 64<<20)))
	}
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// reader wraps a driver reader so its errors name the key and are classified.
type reader struct {
	rc  io.ReadCloser
	b   *Bucket
	key string
}

func (r *reader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	r.b.shared.stats.bytesRead.Add(int64(n))
	if err != nil && err != io.EOF {
		err = wrap(r.b.shared.drv, "read", r.key, err)
	}
	return n, err
}

func (r *reader) Close() error {
	if err := r.rc.Close(); err != nil {
		return wrap(r.b.shared.drv, "read", r.key, err)
	}
	return nil
}

// Stat returns the attributes of key.
func (b *Bucket) Stat(ctx context.Context, key string) (Attrs, error) {
	full, err := b.check("stat", key)
	if err != nil {
		return Attrs{}, err
	}
	b.shared.stats.stats.Add(1)
	a, err := b.shared.drv.Stat(ctx, full)
	if err != nil {
		return Attrs{}, wrap(b.shared.drv, "stat", key, err)
	}
	a.Key = key
	return a, nil
}

// Exists reports whether key exists.
func (b *Bucket) Exists(ctx context.Context, key string) (bool, error) {
	_, err := b.Stat(ctx, key)
	switch {
	case err == nil:
		return true, nil
	case IsNotExist(err):
		return false, nil
	}
	return false, err
}

// ListPage returns one page of the keys under prefix (relative to the
// bucket). opts.Prefix is ignored; pass the prefix as an argument. Keys the
// driver lists that are not valid keys are passed through (see ListPage).
func (b *Bucket) ListPage(ctx context.Context, prefix string, opts ListOptions) (ListPage, error) {
	if b.shared.closed.Load() {
		return ListPage{}, &Error{Op: "list", Key: prefix, Code: CodeUnknown, Err: ErrClosed}
	}
	if strings.ContainsRune(prefix, 0) {
		return ListPage{}, errorf("list", prefix, CodeInvalidArgument, "prefix has a NUL byte")
	}
	if opts.PageSize < 0 {
		return ListPage{}, errorf("list", prefix, CodeInvalidArgument, "negative page size %d", opts.PageSize)
	}
	if opts.PageSize == 0 || opts.PageSize > DefaultPageSize {
		opts.PageSize = DefaultPageSize
	}
	opts.Prefix = b.prefix + prefix
	if opts.StartAfter != "" {
		opts.StartAfter = b.prefix + opts.StartAfter
	}
	b.shared.stats.lists.Add(1)
	page, err := b.shared.drv.List(ctx, opts)
	if err != nil {
		return ListPage{}, wrap(b.shared.drv, "list", prefix, err)
	}
	for i := range page.Objects {
		page.Objects[i].Key = b.rel(page.Objects[i].Key)
	}
	return page, nil
}

// List iterates over every object under prefix in key order, fetching pages
// of DefaultPageSize as it goes. It stops at the first error, yielding it.
// It yields every object that exists throughout the iteration, and may yield
// keys that are not valid keys, which the caller must report, not skip (see
// ListPage and driver.Driver.List).
func (b *Bucket) List(ctx context.Context, prefix string) iter.Seq2[Attrs, error] {
	return b.ListFrom(ctx, prefix, "")
}

// ListFrom is List starting strictly after the key startAfter.
func (b *Bucket) ListFrom(ctx context.Context, prefix, startAfter string) iter.Seq2[Attrs, error] {
	return func(yield func(Attrs, error) bool) {
		opts := ListOptions{StartAfter: startAfter}
		for {
			page, err := b.ListPage(ctx, prefix, opts)
			if err != nil {
				yield(Attrs{}, err)
				return
			}
			for _, a := range page.Objects {
				if !yield(a, nil) {
					return
				}
			}
			if page.NextToken == "" {
				return
			}
			opts = ListOptions{Token: page.NextToken}
		}
	}
}

// Delete removes keys, in driver calls of at most MaxDeleteBatch keys. Missing
// keys are not an error. Every key is validated before anything is deleted.
func (b *Bucket) Delete(ctx context.Context, keys ...string) error {
	full := make([]string, len(keys))
	for i, k := range keys {
		f, err := b.check("delete", k)
		if err != nil {
			return err
		}
		full[i] = f
	}
	for len(full) > 0 {
		n := min(len(full), MaxDeleteBatch)
		b.shared.stats.deletes.Add(1)
		b.shared.stats.deletedKeys.Add(int64(n))
		if err := b.shared.drv.Delete(ctx, full[:n]); err != nil {
			key := ""
			if n == 1 {
				key = keys[len(keys)-len(full)]
			}
			return wrap(b.shared.drv, "delete", key, err)
		}
		full = full[n:]
	}
	return nil
}

// OpenAppend opens key for appending (creating it empty if missing). It fails
// with ErrNotSupported when the driver lacks the Appender capability.
func (b *Bucket) OpenAppend(ctx context.Context, key string) (AppendFile, error) {
	full, err := b.check("append", key)
	if err != nil {
		return nil, err
	}
	ap, ok := b.shared.drv.(driver.Appender)
	if !ok {
		return nil, &Error{Op: "append", Key: key, Code: CodeNotSupported, Err: ErrNotSupported}
	}
	b.shared.stats.appendOpens.Add(1)
	f, err := ap.OpenAppend(ctx, full)
	if err != nil {
		return nil, wrap(b.shared.drv, "append", key, err)
	}
	return &appendFile{f: f, b: b, key: key}, nil
}

// appendFile wraps a driver AppendFile: it names the key in errors, keeps
// Seal's target inside the bucket's prefix, and counts syncs.
type appendFile struct {
	f   AppendFile
	b   *Bucket
	key string
}

func (a *appendFile) Write(p []byte) (int, error) {
	n, err := a.f.Write(p)
	a.b.shared.stats.bytesWritten.Add(int64(n))
	return n, wrap(a.b.shared.drv, "append", a.key, err)
}

func (a *appendFile) Size() int64 { return a.f.Size() }

func (a *appendFile) Sync() error {
	a.b.shared.stats.syncs.Add(1)
	return wrap(a.b.shared.drv, "sync", a.key, a.f.Sync())
}

// StartWriteback passes the hint on to the driver's file when it takes it
// (driver.WritebackStarter), and does nothing otherwise: Sync alone makes
// bytes durable.
func (a *appendFile) StartWriteback(off, n int64) error {
	ws, ok := a.f.(driver.WritebackStarter)
	if !ok {
		return nil
	}
	return wrap(a.b.shared.drv, "start write-back", a.key, ws.StartWriteback(off, n))
}

func (a *appendFile) Truncate(size int64) error {
	return wrap(a.b.shared.drv, "truncate", a.key, a.f.Truncate(size))
}

func (a *appendFile) Seal(ctx context.Context, finalKey string) (Attrs, error) {
	full, err := a.b.check("seal", finalKey)
	if err != nil {
		return Attrs{}, err
	}
	attrs, err := a.f.Seal(ctx, full)
	if err != nil {
		return Attrs{}, wrap(a.b.shared.drv, "seal", finalKey, err)
	}
	attrs.Key = finalKey
	return attrs, nil
}

func (a *appendFile) Close() error {
	return wrap(a.b.shared.drv, "close", a.key, a.f.Close())
}

// counters are the request counts of all views of one driver.
type counters struct {
	puts, reads, stats, lists, deletes, deletedKeys, appendOpens, syncs, bytesWritten, bytesRead atomic.Int64
}

// Stats counts the driver requests a Bucket (and every view sharing its
// driver) has made. Tests hold request budgets with it; benchmarks report it.
type Stats struct {
	Puts         int64 // driver.Driver.Put calls
	Reads        int64 // driver.Driver.NewRangeReader calls
	Stats        int64 // driver.Driver.Stat calls
	Lists        int64 // driver.Driver.List calls (pages)
	Deletes      int64 // driver.Driver.Delete calls (batches)
	DeletedKeys  int64 // keys passed to driver.Driver.Delete
	AppendOpens  int64 // Appender.OpenAppend calls
	Syncs        int64 // AppendFile.Sync calls
	BytesWritten int64
	BytesRead    int64
}

// Stats returns the request counters so far.
func (b *Bucket) Stats() Stats {
	c := &b.shared.stats
	return Stats{
		Puts: c.puts.Load(), Reads: c.reads.Load(), Stats: c.stats.Load(), Lists: c.lists.Load(),
		Deletes: c.deletes.Load(), DeletedKeys: c.deletedKeys.Load(), AppendOpens: c.appendOpens.Load(),
		Syncs: c.syncs.Load(), BytesWritten: c.bytesWritten.Load(), BytesRead: c.bytesRead.Load(),
	}
}

// Sub returns s minus an earlier snapshot t.
func (s Stats) Sub(t Stats) Stats {
	return Stats{
		Puts: s.Puts - t.Puts, Reads: s.Reads - t.Reads, Stats: s.Stats - t.Stats, Lists: s.Lists - t.Lists,
		Deletes: s.Deletes - t.Deletes, DeletedKeys: s.DeletedKeys - t.DeletedKeys, AppendOpens: s.AppendOpens - t.AppendOpens,
		Syncs: s.Syncs - t.Syncs, BytesWritten: s.BytesWritten - t.BytesWritten, BytesRead: s.BytesRead - t.BytesRead,
	}
}
