package conformance

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/driver"
)

// Each broken driver is mem.Driver (or appendMem) with one rule of the blob
// contract broken the way real drivers break it. Embedding keeps every other
// method healthy, so each driver's failures point at its own bug.

// nonAtomicPut streams the body into the store as it arrives (as a naive
// file driver that writes in place does) and ignores its context: the object
// is visible while being written, a failed Put leaves a partial object, and
// a canceled one completes.
// lateCommitHook claims to stage puts but calls BeforeCommit after the
// object is stored.
type lateCommitHook struct{ *mem.Driver }

func (lateCommitHook) StagesPuts() bool { return true }

func (d lateCommitHook) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	hook := opts.BeforeCommit
	opts.BeforeCommit = nil
	a, err := d.Driver.Put(ctx, key, r, size, opts)
	if err == nil && hook != nil {
		err = hook(ctx)
	}
	return a, err
}

type nonAtomicPut struct{ *mem.Driver }

func (d nonAtomicPut) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	if opts.IfNotExist || opts.IfMatch != "" {
		return d.Driver.Put(ctx, key, r, size, opts)
	}
	var written []byte
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			written = append(written, buf[:n]...)
			if _, perr := d.Driver.Put(context.Background(), key, bytes.NewReader(written), -1, blob.PutOptions{}); perr != nil {
				return blob.Attrs{}, perr
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return blob.Attrs{}, err
		}
	}
	// An empty body never reached the loop's Put.
	return d.Driver.Put(context.Background(), key, bytes.NewReader(written), -1, blob.PutOptions{})
}

// unmappedNotFound classifies nothing: its not-found error is CodeUnknown.
type unmappedNotFound struct{ *mem.Driver }

func (unmappedNotFound) ErrorCode(error) blob.Code { return blob.CodeUnknown }

// walkOrderList lists in the order of a file-system walk that sorts each
// directory's names and descends into subdirectories in place: "a/b" comes
// before "a-b" because the name "a" sorts before "a-b".
type walkOrderList struct{ *mem.Driver }

func walkCompare(a, b string) int {
	return slices.Compare(strings.Split(a, "/"), strings.Split(b, "/"))
}

func (d walkOrderList) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	var all []string
	inner := blob.ListOptions{Prefix: opts.Prefix, PageSize: blob.DefaultPageSize}
	for {
		page, err := d.Driver.List(ctx, inner)
		if err != nil {
			return blob.ListPage{}, err
		}
		for _, a := range page.Objects {
			all = append(all, a.Key)
		}
		if page.NextToken == "" {
			break
		}
		inner.Token = page.NextToken
	}
	slices.SortFunc(all, walkCompare)
	after := cmp.Or(opts.Token, opts.StartAfter)
	var out blob.ListPage
	for i, k := range all {
		if after != "" && walkCompare(k, after) <= 0 {
			continue
		}
		if len(out.Objects) == opts.PageSize {
			out.NextToken = all[i-1]
			break
		}
		a, err := d.Driver.Stat(ctx, k)
		if err != nil {
			return blob.ListPage{}, err
		}
		out.Objects = append(out.Objects, a)
	}
	return out, nil
}

// droppingPages loses the first key of every page after the first: a
// continuation that starts one key too late.
type droppingPages struct{ *mem.Driver }

func (d droppingPages) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	page, err := d.Driver.List(ctx, opts)
	if err == nil && opts.Token != "" && len(page.Objects) > 0 {
		page.Objects = page.Objects[1:]
	}
	return page, err
}

// prefixAsDirectory lists a prefix as a directory (as a file-system driver
// that opens the directory the prefix names does): "order/a" lists only
// "order/a/...", missing "order/a-b".
type prefixAsDirectory struct{ *mem.Driver }

func (d prefixAsDirectory) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	if opts.Prefix != "" && !strings.HasSuffix(opts.Prefix, "/") {
		opts.Prefix += "/"
	}
	return d.Driver.List(ctx, opts)
}

// listPastPrefix does not stop at the end of the prefix: it lists every key
// from the prefix on.
type listPastPrefix struct{ *mem.Driver }

func (d listPastPrefix) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	after, prefix := cmp.Or(opts.Token, opts.StartAfter), opts.Prefix
	if after < prefix {
		// Start at the prefix: the key before it in byte order is not
		// known, so list from the start and skip.
		opts.StartAfter, opts.Token = "", ""
	}
	opts.Prefix = ""
	page, err := d.Driver.List(ctx, opts)
	if err != nil {
		return page, err
	}
	var kept []blob.Attrs
	for _, a := range page.Objects {
		if a.Key >= prefix && a.Key > after {
			kept = append(kept, a)
		}
	}
	page.Objects = kept
	return page, nil
}

// deleteMissingFails reports a missing key as an error (as S3 drivers that
// HEAD before DELETE, and os.Remove, do).
type deleteMissingFails struct{ *mem.Driver }

func (d deleteMissingFails) Delete(ctx context.Context, keys []string) error {
	for _, k := range keys {
		if _, err := d.Driver.Stat(ctx, k); err != nil {
			return fmt.Errorf("delete %q: %w", k, err)
		}
	}
	return d.Driver.Delete(ctx, keys)
}

// ignoredIfNotExist drops IfNotExist (as a store that ignores If-None-Match
// does): a conditional create overwrites.
type ignoredIfNotExist struct{ *mem.Driver }

func (d ignoredIfNotExist) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	opts.IfNotExist = false
	return d.Driver.Put(ctx, key, r, size, opts)
}

// offByOneRange reads one byte too many: the HTTP Range "bytes=o-(o+n)"
// instead of "bytes=o-(o+n-1)".
type offByOneRange struct{ *mem.Driver }

func (d offByOneRange) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if length >= 0 {
		length++
	}
	return d.Driver.NewRangeReader(ctx, key, offset, length)
}

// sizeETag makes ETags from the key and size (as a driver that hashes file
// metadata might): rewriting same-size content keeps the ETag, so a stale
// compare-and-swap wins. Its IfMatch is atomic, against its own ETags.
type sizeETag struct {
	*mem.Driver
	mu *sync.Mutex
}

func fakeETag(key string, size int64) string {
	h := fnv.New64a()
	h.Write([]byte(key))
	return fmt.Sprintf(`"%x-%d"`, h.Sum64(), size)
}

func (d sizeETag) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if opts.IfMatch != "" {
		cur, err := d.Driver.Stat(ctx, key)
		if err != nil || fakeETag(key, cur.Size) != opts.IfMatch {
			return blob.Attrs{}, blob.ErrPreconditionFailed
		}
		opts.IfMatch = ""
	}
	a, err := d.Driver.Put(ctx, key, r, size, opts)
	a.ETag = fakeETag(key, a.Size)
	return a, err
}

func (d sizeETag) Stat(ctx context.Context, key string) (blob.Attrs, error) {
	a, err := d.Driver.Stat(ctx, key)
	a.ETag = fakeETag(key, a.Size)
	return a, err
}

// ignoresContext passes context.Background() down instead of its context.
type ignoresContext struct{ *mem.Driver }

func (d ignoresContext) Put(_ context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	return d.Driver.Put(context.Background(), key, r, size, opts)
}
func (d ignoresContext) NewRangeReader(_ context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	return d.Driver.NewRangeReader(context.Background(), key, offset, length)
}
func (d ignoresContext) Stat(_ context.Context, key string) (blob.Attrs, error) {
	return d.Driver.Stat(context.Background(), key)
}
func (d ignoresContext) List(_ context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	return d.Driver.List(context.Background(), opts)
}
func (d ignoresContext) Delete(_ context.Context, keys []string) error {
	return d.Driver.Delete(context.Background(), keys)
}

// sealOverwrites renames over an existing final key (os.Rename does).
type sealOverwrites struct{ appendMem }

func (d sealOverwrites) OpenAppend(ctx context.Context, key string) (blob.AppendFile, error) {
	f, err := d.appendMem.OpenAppend(ctx, key)
	if err != nil {
		return nil, err
	}
	return overwritingSeal{f.(*memAppendFile)}, nil
}

type overwritingSeal struct{ *memAppendFile }

func (f overwritingSeal) Seal(ctx context.Context, finalKey string) (blob.Attrs, error) {
	if err := f.d.Delete(ctx, []string{finalKey}); err != nil {
		return blob.Attrs{}, err
	}
	return f.memAppendFile.Seal(ctx, finalKey)
}

// reopenTruncates opens an existing object empty (O_TRUNC instead of
// O_APPEND).
type reopenTruncates struct{ appendMem }

func (d reopenTruncates) OpenAppend(ctx context.Context, key string) (blob.AppendFile, error) {
	if err := d.Driver.Delete(ctx, []string{key}); err != nil {
		return nil, err
	}
	return d.appendMem.OpenAppend(ctx, key)
}

// endsAtFullPage ends a listing at the first full page of 1,000 objects (the
// largest page size): a store's truncation flag misread, so that a listing
// of more keys than one page holds stops after the first page, without an
// error.
type endsAtFullPage struct{ *mem.Driver }

func (d endsAtFullPage) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	page, err := d.Driver.List(ctx, opts)
	if err == nil && len(page.Objects) == blob.DefaultPageSize {
		page.NextToken = ""
	}
	return page, err
}

// staleStat answers Stat from a cache of the last Stat of the key, for a
// second, as a cache in front of HEAD requests that overwrites do not
// invalidate (deletes do): reads are current, a Stat's ETag and size may be
// a replaced version's.
type staleStat struct {
	*mem.Driver
	mu    *sync.Mutex
	cache map[string]cachedStat
}

type cachedStat struct {
	a     blob.Attrs
	until time.Time
}

func newStaleStat() staleStat {
	return staleStat{mem.NewDriver(), new(sync.Mutex), map[string]cachedStat{}}
}

func (d staleStat) Stat(ctx context.Context, key string) (blob.Attrs, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c, ok := d.cache[key]; ok && time.Now().Before(c.until) {
		return c.a, nil
	}
	a, err := d.Driver.Stat(ctx, key)
	if err == nil {
		d.cache[key] = cachedStat{a, time.Now().Add(time.Second)}
	}
	return a, err
}

func (d staleStat) Delete(ctx context.Context, keys []string) error {
	d.mu.Lock()
	for _, k := range keys {
		delete(d.cache, k)
	}
	d.mu.Unlock()
	return d.Driver.Delete(ctx, keys)
}

// caseInsensitive is a case-insensitive, case-preserving store (a file
// system on macOS or Windows): a key is stored under the spelling it was
// first put with, and any spelling in another case reaches that object.
// Listings are byte-exact over the stored spellings.
type caseInsensitive struct {
	*mem.Driver
	mu       *sync.Mutex
	spelling map[string]string // lower case -> the stored spelling
}

func newCaseInsensitive() caseInsensitive {
	return caseInsensitive{mem.NewDriver(), new(sync.Mutex), map[string]string{}}
}

func (d caseInsensitive) name(key string, create bool) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.spelling[strings.ToLower(key)]; ok {
		return s
	}
	if create {
		d.spelling[strings.ToLower(key)] = key
	}
	return key
}

func (d caseInsensitive) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	return d.Driver.Put(ctx, d.name(key, true), r, size, opts)
}

func (d caseInsensitive) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	return d.Driver.NewRangeReader(ctx, d.name(key, false), offset, length)
}

func (d caseInsensitive) Stat(ctx context.Context, key string) (blob.Attrs, error) {
	return d.Driver.Stat(ctx, d.name(key, false))
}

func (d caseInsensitive) Delete(ctx context.Context, keys []string) error {
	stored := make([]string, len(keys))
	d.mu.Lock()
	for i, k := range keys {
		stored[i] = k
		if s, ok := d.spelling[strings.ToLower(k)]; ok {
			stored[i] = s
			delete(d.spelling, strings.ToLower(k))
		}
	}
	d.mu.Unlock()
	return d.Driver.Delete(ctx, stored)
}

// zeroListModTime lists objects without their ModTime (as a driver that
// fills only Key and Size from a listing response); Put and Stat have it.
type zeroListModTime struct{ *mem.Driver }

func (d zeroListModTime) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	page, err := d.Driver.List(ctx, opts)
	for i := range page.Objects {
		page.Objects[i].ModTime = time.Time{}
	}
	return page, err
}

// shiftedModTime reports every ModTime two hours late: a store's local
// time read as UTC.
type shiftedModTime struct{ *mem.Driver }

func (d shiftedModTime) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	a, err := d.Driver.Put(ctx, key, r, size, opts)
	a.ModTime = a.ModTime.Add(2 * time.Hour)
	return a, err
}

func (d shiftedModTime) Stat(ctx context.Context, key string) (blob.Attrs, error) {
	a, err := d.Driver.Stat(ctx, key)
	a.ModTime = a.ModTime.Add(2 * time.Hour)
	return a, err
}

func (d shiftedModTime) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	page, err := d.Driver.List(ctx, opts)
	for i := range page.Objects {
		page.Objects[i].ModTime = page.Objects[i].ModTime.Add(2 * time.Hour)
	}
	return page, err
}

// brokenCase is a broken driver and the subtests that must catch it.
type brokenCase struct {
	name     string
	append   bool
	driver   func() driver.Driver
	mustFail []string // under both Plain and Prefixed
	mustPass []string // under both: the bug is not blamed on unrelated rules
	timeout  time.Duration
}

var brokenCases = []brokenCase{
	{
		name:   "NonAtomicPut",
		driver: func() driver.Driver { return nonAtomicPut{mem.NewDriver()} },
		mustFail: []string{
			"Atomic/InvisibleWhileWritingNew", "Atomic/InvisibleWhileWritingOverwrite",
			"Atomic/CanceledNew", "Atomic/CanceledOverwrite",
			"Atomic/FailedReaderNew", "Atomic/FailedReaderOverwrite",
		},
		mustPass: []string{"RoundTrip", "ListPages", "ConditionalCreate"},
	},
	{
		name:     "UnmappedNotFound",
		driver:   func() driver.Driver { return unmappedNotFound{mem.NewDriver()} },
		mustFail: []string{"NotExist", "Delete/ReadAfterDelete", "CompareAndSwap/MissingKey"},
		mustPass: []string{"RoundTrip", "ListOrder", "ConditionalCreate"},
	},
	{
		name:     "WalkOrderList",
		driver:   func() driver.Driver { return walkOrderList{mem.NewDriver()} },
		mustFail: []string{"ListOrder"},
		mustPass: []string{"RoundTrip", "RangedRead", "ListStartAfter"},
	},
	{
		name:     "DroppingPages",
		driver:   func() driver.Driver { return droppingPages{mem.NewDriver()} },
		mustFail: []string{"ListPages", "ListStartAfter", "ListWhilePaging"},
		mustPass: []string{"RoundTrip", "Keys"},
	},
	{
		name:     "PrefixAsDirectory",
		driver:   func() driver.Driver { return prefixAsDirectory{mem.NewDriver()} },
		mustFail: []string{"ListPrefix"},
		mustPass: []string{"RoundTrip", "ListOrder", "ListPages"},
	},
	{
		name:     "ListPastPrefix",
		driver:   func() driver.Driver { return listPastPrefix{mem.NewDriver()} },
		mustFail: []string{"ListPrefix", "ListPages"},
		mustPass: []string{"RangedRead", "NotExist", "ConditionalCreate"},
	},
	{
		name:     "DeleteMissingFails",
		driver:   func() driver.Driver { return deleteMissingFails{mem.NewDriver()} },
		mustFail: []string{"Delete/Missing", "Delete/Twice", "Delete/MixedBatch"},
		mustPass: []string{"RoundTrip", "BatchDelete"},
	},
	{
		name:     "IgnoredIfNotExist",
		driver:   func() driver.Driver { return ignoredIfNotExist{mem.NewDriver()} },
		mustFail: []string{"ConditionalCreate/Sequential", "ConditionalCreate/Race"},
		mustPass: []string{"RoundTrip", "CompareAndSwap"},
	},
	{
		name:     "OffByOneRange",
		driver:   func() driver.Driver { return offByOneRange{mem.NewDriver()} },
		mustFail: []string{"RangedRead/Middle", "RangedRead/Head", "RangedRead/Reader"},
		mustPass: []string{"RoundTrip", "RangedRead/OffsetToEnd", "RangedRead/LengthPastEnd"},
	},
	{
		name:     "SizeETag",
		driver:   func() driver.Driver { return sizeETag{mem.NewDriver(), new(sync.Mutex)} },
		mustFail: []string{"CompareAndSwap/Sequence"},
		mustPass: []string{"RoundTrip", "ConditionalCreate"},
	},
	{
		name:     "IgnoresContext",
		driver:   func() driver.Driver { return ignoresContext{mem.NewDriver()} },
		mustFail: []string{"Context/DeadlineExceeded", "Context/Canceled", "Atomic/CanceledNew"},
		mustPass: []string{"RoundTrip", "Atomic/InvisibleWhileWritingNew"},
	},
	{
		name:     "SealOverwrites",
		append:   true,
		driver:   func() driver.Driver { return sealOverwrites{appendMem{mem.NewDriver()}} },
		mustFail: []string{"Append/SealOntoExisting"},
		mustPass: []string{"Append/Seal", "Append/Reopen"},
	},
	{
		name:     "ReopenTruncates",
		append:   true,
		driver:   func() driver.Driver { return reopenTruncates{appendMem{mem.NewDriver()}} },
		mustFail: []string{"Append/Reopen"},
		mustPass: []string{"Append/Seal", "Append/WriteSyncRead"},
	},
	{
		name:     "LateCommitHook",
		driver:   func() driver.Driver { return lateCommitHook{mem.NewDriver()} },
		mustFail: []string{"BeforeCommit/InvisibleNew", "BeforeCommit/InvisibleOverwrite", "BeforeCommit/AbandonNew", "BeforeCommit/AbandonOverwrite"},
		mustPass: []string{"RoundTrip", "Atomic", "CompareAndSwap"},
	},
	{
		name:     "LikeList",
		driver:   func() driver.Driver { return likeList{mem.NewDriver()} },
		mustFail: []string{"ListLiteralPrefix"},
		mustPass: []string{"RoundTrip", "ListOrder", "ListPages", "ListWhileChanging"},
	},
	{
		name:     "CaseFoldList",
		driver:   func() driver.Driver { return caseFoldList{mem.NewDriver()} },
		mustFail: []string{"ListLiteralPrefix"},
		mustPass: []string{"RoundTrip", "ListOrder", "ListPages", "ListWhileChanging"},
	},
	{
		name:     "SealRaceList",
		append:   true,
		driver:   func() driver.Driver { return newSealRaceList() },
		mustFail: []string{"ListWhileChanging/Seal"},
		mustPass: []string{"RoundTrip", "ListOrder", "ListPages", "ListLiteralPrefix", "Append/Seal"},
	},
	{
		name:     "HangingList",
		driver:   func() driver.Driver { return hangingList{mem.NewDriver()} },
		timeout:  10 * time.Second,
		mustFail: []string{"ListPages"},
		mustPass: []string{"RoundTrip", "RangedRead", "ConditionalCreate", "ListOrder", "ListStartAfter"},
	},
	{
		// New objects are missing from listings for a second (on a
		// harness that declares no ListSettle).
		name:     "LagList",
		driver:   func() driver.Driver { return newLagList(time.Second) },
		mustFail: []string{"ListAfterWrite/Create", "ListAfterWrite/CreateAfterCursor", "ListAfterWrite/ConditionalCreate", "Concurrent", "ListOrder"},
		mustPass: []string{"ReadAfterWrite", "RangedRead", "NotExist", "CompareAndSwap/Sequence"},
	},
	{
		// Reads of metadata-sized objects return the replaced body for a
		// second after an overwrite, while Stat shows the new ETag.
		name:     "StaleSmallRead",
		driver:   func() driver.Driver { return newStaleSmallRead(time.Second) },
		mustFail: []string{"ReadAfterWrite/Overwrite", "ReadAfterWrite/StatPairsWithRead", "ReadAfterWrite/IfMatchPairsWithRead"},
		mustPass: []string{"RoundTrip", "Atomic", "CompareAndSwap", "BeforeCommit", "ListAfterWrite"},
	},
	{
		// Each rule below is caught by at least two independent
		// assertions: a listing cut at a full page of 1,000 by
		// ListThousands and by BatchDelete's listings.
		name:     "EndsAtFullPage",
		driver:   func() driver.Driver { return endsAtFullPage{mem.NewDriver()} },
		mustFail: []string{"ListThousands", "BatchDelete"},
		mustPass: []string{"RoundTrip", "ListPages", "ListStartAfter", "ListWhileChanging", "Delete"},
	},
	{
		// A stale Stat by ReadAfterWrite/StatAfterOverwrite (no
		// conditional write needed) and by CompareAndSwap/Sequence.
		name:     "StaleStat",
		driver:   func() driver.Driver { return newStaleStat() },
		mustFail: []string{"ReadAfterWrite/StatAfterOverwrite", "CompareAndSwap/Sequence"},
		mustPass: []string{"ReadAfterWrite/Overwrite", "ListPages", "ConditionalCreate", "Delete"},
	},
	{
		// Case-insensitive keys by reads (Keys/Case), by Stat of another
		// case (NotExist) and by listings (ListLiteralPrefix, and
		// ListOrder's "order/Z" beside "order/z").
		name:     "CaseInsensitiveKeys",
		driver:   func() driver.Driver { return newCaseInsensitive() },
		mustFail: []string{"Keys/Case", "NotExist", "ListLiteralPrefix", "ListOrder"},
		mustPass: []string{"RoundTrip", "ListPages", "ListStartAfter", "Keys/Tricky", "Keys/UnicodeNormalization", "ReadAfterWrite"},
	},
	{
		name:     "ZeroListModTime",
		driver:   func() driver.Driver { return zeroListModTime{mem.NewDriver()} },
		mustFail: []string{"ModTime"},
		mustPass: []string{"RoundTrip", "ListPages", "ListAfterWrite"},
	},
	{
		name:     "ShiftedModTime",
		driver:   func() driver.Driver { return shiftedModTime{mem.NewDriver()} },
		mustFail: []string{"ModTime"},
		mustPass: []string{"RoundTrip", "ListPages", "ReadAfterWrite"},
	},
	{
		// A correct driver that its harness does not declare appendable.
		name:     "UndeclaredAppender",
		driver:   func() driver.Driver { return appendMem{mem.NewDriver()} },
		mustFail: []string{"Append/Capability"},
		mustPass: []string{"RoundTrip"},
	},
}

// TestBrokenDrivers proves that the suite catches each violation: every
// broken driver fails the subtests named for the rule it breaks, and passes
// some it does not break.
func TestBrokenDrivers(t *testing.T) {
	for _, c := range brokenCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := Harness{
				MakeBucket: func(ctx context.Context, t TB) (*blob.Bucket, error) {
					return blob.NewBucket(c.driver()), nil
				},
				ConditionalWrites: true,
				Append:            c.append,
				LargeObject:       256 << 10,
				LargeObjectReason: "broken-driver runs check the suite, not the store",
				Timeout:           c.timeout,
			}
			rec := NewRecorder()
			rec.Run(func(t T) { RunBucketOn(t, h) })
			rec.Expect(t, c.mustFail, c.mustPass)
		})
	}
}

// TestConditionalWritesUndeclared: without ConditionalWrites, the conditional
// subtests skip with the harness's reason, and a driver that silently
// applies conditional Puts as overwrites still fails.
func TestConditionalWritesUndeclared(t *testing.T) {
	reason := "this store ignores If-None-Match"
	for _, c := range []struct {
		name   string
		driver func() driver.Driver
		fail   bool
	}{
		{"Refusing", func() driver.Driver { return refusesConditions{mem.NewDriver()} }, false},
		{"Ignoring", func() driver.Driver { return ignoredIfNotExist{mem.NewDriver()} }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := small(Harness{
				MakeBucket: func(ctx context.Context, t TB) (*blob.Bucket, error) {
					return blob.NewBucket(c.driver()), nil
				},
				ConditionalWritesReason: reason,
			})
			rec := NewRecorder()
			rec.Run(func(t T) { RunBucketOn(t, h) })
			for _, name := range []string{"Plain/ConditionalCreate/Sequential", "Plain/ConditionalCreate/Race", "Plain/CompareAndSwap/Sequence"} {
				if res := rec.Get(name); res == nil || !res.Skipped {
					t.Errorf("%s was not skipped", name)
				}
			}
			res := rec.Get("Plain/ConditionalCreate/Refused")
			if res == nil || res.Failed != c.fail {
				t.Errorf("Plain/ConditionalCreate/Refused: %+v, want failed = %v", res, c.fail)
			}
			if !c.fail {
				if f := rec.Failed(); len(f) > 0 {
					t.Errorf("failed: %v\n%s", f, strings.Join(rec.Messages(""), "\n"))
				}
			}
		})
	}
	t.Run("NoReason", func(t *testing.T) {
		rec := NewRecorder()
		rec.Run(func(t T) { RunBucketOn(t, Harness{MakeBucket: memHarness.MakeBucket}) })
		if res := rec.Get(""); !res.Failed || !strings.Contains(res.Errors[0], "ConditionalWritesReason") {
			t.Errorf("a harness with neither ConditionalWrites nor a reason: %+v", res)
		}
	})
}

// refusesConditions is a driver without conditional writes that says so.
type refusesConditions struct{ *mem.Driver }

func (d refusesConditions) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	if opts.IfNotExist || opts.IfMatch != "" {
		return blob.Attrs{}, fmt.Errorf("conditional writes: %w", blob.ErrNotSupported)
	}
	return d.Driver.Put(ctx, key, r, size, opts)
}

// laggyList is eventually consistent: a new key is missing from the next
// lag List calls after its Put, as on a store with list-after-write lag.
type laggyList struct {
	*mem.Driver
	lag    int
	mu     *sync.Mutex
	calls  *int
	hidden map[string]int // key -> the List call from which it shows
}

func newLaggyList(lag int) laggyList {
	return laggyList{mem.NewDriver(), lag, new(sync.Mutex), new(int), map[string]int{}}
}

func (d laggyList) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	_, statErr := d.Driver.Stat(ctx, key)
	a, err := d.Driver.Put(ctx, key, r, size, opts)
	if err == nil && statErr != nil {
		d.mu.Lock()
		d.hidden[key] = *d.calls + d.lag + 1
		d.mu.Unlock()
	}
	return a, err
}

func (d laggyList) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	d.mu.Lock()
	*d.calls++
	call := *d.calls
	d.mu.Unlock()
	page, err := d.Driver.List(ctx, opts)
	if err != nil {
		return page, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	page.Objects = slices.DeleteFunc(page.Objects, func(a blob.Attrs) bool { return call < d.hidden[a.Key] })
	return page, nil
}

// TestListSettle: an eventually consistent listing fails the suite when the
// harness claims consistency, and passes when it declares ListSettle (the
// suite then polls listings until they settle: the blob suite's own timing;
// the redo suite refuses such a harness, and such a store cannot hold a redo
// log).
func TestListSettle(t *testing.T) {
	for _, settle := range []time.Duration{0, time.Minute} {
		t.Run(fmt.Sprintf("ListSettle=%v", settle), func(t *testing.T) {
			h := small(Harness{
				MakeBucket: func(ctx context.Context, t TB) (*blob.Bucket, error) {
					return blob.NewBucket(newLaggyList(2)), nil
				},
				ConditionalWrites: true,
				ListSettle:        settle,
			})
			rec := NewRecorder()
			rec.Run(func(t T) { RunBucketOn(t, h) })
			failed := rec.Failed()
			if settle > 0 && len(failed) > 0 {
				t.Errorf("failed with ListSettle: %v\n%s", failed, strings.Join(rec.Messages(""), "\n"))
			}
			if settle == 0 {
				for _, name := range []string{"Plain/Concurrent", "Plain/ListPages", "Plain/BatchDelete"} {
					if !slices.Contains(failed, name) {
						t.Errorf("%s passed on a lagging listing without ListSettle", name)
					}
				}
			}
		})
	}
}

// filterList lists the keys of inner that match opts.Prefix by match, as a
// driver that filters a whole listing itself does, paged by last key.
func filterList(ctx context.Context, inner driver.Driver, opts blob.ListOptions, match func(key, prefix string) bool) (blob.ListPage, error) {
	var all []blob.Attrs
	in := blob.ListOptions{PageSize: blob.DefaultPageSize}
	for {
		page, err := inner.List(ctx, in)
		if err != nil {
			return blob.ListPage{}, err
		}
		for _, a := range page.Objects {
			if match(a.Key, opts.Prefix) {
				all = append(all, a)
			}
		}
		if page.NextToken == "" {
			break
		}
		in.Token = page.NextToken
	}
	after := cmp.Or(opts.Token, opts.StartAfter)
	var out blob.ListPage
	for _, a := range all {
		if a.Key <= after {
			continue
		}
		if len(out.Objects) == opts.PageSize {
			out.NextToken = out.Objects[opts.PageSize-1].Key
			break
		}
		out.Objects = append(out.Objects, a)
	}
	return out, nil
}

// likeList matches prefixes as a SQL store does with `key LIKE prefix||'%'`
// and "\" as the escape: "_" matches any one character, "%" any run.
type likeList struct{ *mem.Driver }

func (d likeList) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	return filterList(ctx, d.Driver, opts, func(key, prefix string) bool { return like(key, prefix+"%") })
}

// like reports whether s matches the LIKE pattern p (escape "\").
func like(s, p string) bool {
	if p == "" {
		return s == ""
	}
	switch c, size := utf8.DecodeRuneInString(p); {
	case c == '%':
		for i := 0; ; {
			if like(s[i:], p[size:]) {
				return true
			}
			if i == len(s) {
				return false
			}
			_, n := utf8.DecodeRuneInString(s[i:])
			i += n
		}
	case c == '_':
		if s == "" {
			return false
		}
		_, n := utf8.DecodeRuneInString(s)
		return like(s[n:], p[size:])
	case c == '\\' && len(p) > size:
		p = p[size:]
		fallthrough
	default:
		c, size = utf8.DecodeRuneInString(p)
		r, n := utf8.DecodeRuneInString(s)
		return s != "" && r == c && like(s[n:], p[size:])
	}
}

// caseFoldList matches prefixes ignoring case (as a store on a
// case-insensitive collation or file system does).
type caseFoldList struct{ *mem.Driver }

func (d caseFoldList) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	return filterList(ctx, d.Driver, opts, func(key, prefix string) bool {
		return strings.HasPrefix(strings.ToLower(key), strings.ToLower(prefix))
	})
}

// sealRaceList has the bug of a file-system driver that reads a directory,
// then stats each entry and skips those that fail: an object sealed
// (renamed) between the two is listed under neither name. It makes the race
// certain: a listing whose snapshot holds an active object waits for that
// object's seal, and a Seal waits for a listing to have taken its snapshot
// (each for at most a second, so that a lone call proceeds). The listing
// waits only when it holds a single active object, as the Seal subtest's
// rounds do, so that the other subtests stay fast.
type sealRaceList struct {
	appendMem
	mu      *sync.Mutex
	snapped map[string]chan struct{} // closed when a listing holds the key in its snapshot
	sealed  map[string]chan struct{} // closed when the key has been sealed
}

func newSealRaceList() sealRaceList {
	return sealRaceList{appendMem{mem.NewDriver()}, new(sync.Mutex), map[string]chan struct{}{}, map[string]chan struct{}{}}
}

// signal returns the channel of key in m, and closes it when close is set.
func (d sealRaceList) signal(m map[string]chan struct{}, key string, close_ bool) chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	ch, ok := m[key]
	if !ok {
		ch = make(chan struct{})
		m[key] = ch
	}
	if close_ {
		select {
		case <-ch:
		default:
			close(ch)
		}
	}
	return ch
}

func waitBriefly(ch <-chan struct{}) {
	select {
	case <-ch:
	case <-time.After(time.Second):
	}
}

func (d sealRaceList) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	snap, err := filterList(ctx, d.Driver, opts, strings.HasPrefix)
	if err != nil {
		return snap, err
	}
	var actives []string
	for _, a := range snap.Objects {
		if strings.HasSuffix(a.Key, ".active") {
			d.signal(d.snapped, a.Key, true)
			actives = append(actives, a.Key)
		}
	}
	if len(actives) == 1 {
		// One object being sealed at a time, as in a redo writer's
		// directory: wait for its seal.
		waitBriefly(d.signal(d.sealed, actives[0], false))
	}
	kept := snap.Objects[:0]
	for _, a := range snap.Objects {
		if _, err := d.Stat(ctx, a.Key); err == nil {
			kept = append(kept, a)
		}
	}
	snap.Objects = kept
	return snap, nil
}

func (d sealRaceList) OpenAppend(ctx context.Context, key string) (blob.AppendFile, error) {
	f, err := d.appendMem.OpenAppend(ctx, key)
	if err != nil {
		return nil, err
	}
	return racingSeal{f.(*memAppendFile), d}, nil
}

type racingSeal struct {
	*memAppendFile
	d sealRaceList
}

func (f racingSeal) Seal(ctx context.Context, finalKey string) (blob.Attrs, error) {
	waitBriefly(f.d.signal(f.d.snapped, f.key, false))
	defer f.d.signal(f.d.sealed, f.key, true)
	return f.memAppendFile.Seal(ctx, finalKey)
}

// hangsOn reports whether a hanging driver hangs on this List call: a
// continuation of a listing of "pages/" (ListPages lists it), so that the
// other subtests stay fast whatever the deadline.
func hangsOn(opts blob.ListOptions) bool {
	return opts.Token != "" && strings.HasSuffix(opts.Prefix, "pages/")
}

// hangingList never answers a request for a page after the first of a
// listing of "pages/" (as a server that drops some continuations), until the
// request's context ends.
type hangingList struct{ *mem.Driver }

func (d hangingList) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	if hangsOn(opts) {
		<-ctx.Done()
		return blob.ListPage{}, ctx.Err()
	}
	return d.Driver.List(ctx, opts)
}

// stuckList is hangingList ignoring its context: only unstick frees it.
type stuckList struct {
	*mem.Driver
	unstick chan struct{}
}

func (d stuckList) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	if hangsOn(opts) {
		<-d.unstick
		return blob.ListPage{}, errors.New("stuck listing freed by the test")
	}
	return d.Driver.List(ctx, opts)
}

// TestHungSubtest: a driver call that ignores its context is reported, naming
// the subtest, once the subtest has run past its deadline by the grace; the
// subtest is abandoned and the suite goes on: every later rule still runs
// and reports (the stuck calls are freed only when the test ends).
func TestHungSubtest(t *testing.T) {
	unstick := make(chan struct{})
	t.Cleanup(func() { close(unstick) })
	var hung []string
	var mu sync.Mutex
	h := small(Harness{
		MakeBucket: func(ctx context.Context, t TB) (*blob.Bucket, error) {
			return blob.NewBucket(stuckList{mem.NewDriver(), unstick}), nil
		},
		ConditionalWrites: true,
		Timeout:           2 * time.Second,
		hangGrace:         50 * time.Millisecond,
		onHang: func(t TB, msg string) {
			mu.Lock()
			hung = append(hung, t.Name())
			mu.Unlock()
		},
	})
	rec := NewRecorder()
	rec.Run(func(t T) { RunBucketOn(t, h) })
	for _, name := range []string{"Plain/ListPages", "Prefixed/ListPages"} {
		res := rec.Get(name)
		if res == nil || !res.Failed || !strings.Contains(strings.Join(res.Errors, "\n"), name+" is still running") ||
			!strings.Contains(strings.Join(res.Errors, "\n"), "abandoned") {
			t.Fatalf("%s, stuck in a List that ignores its context: %+v", name, res)
		}
	}
	mu.Lock()
	if !slices.Equal(hung, []string{"Plain/ListPages", "Prefixed/ListPages"}) {
		t.Errorf("reported hung: %v, want Plain/ListPages and Prefixed/ListPages", hung)
	}
	mu.Unlock()
	// The rules before and after the hung one ran and passed, in both
	// modes: the run went on.
	for _, name := range []string{"Plain/RoundTrip", "Plain/ListStartAfter", "Plain/Closed", "Prefixed/RoundTrip", "Prefixed/BatchDelete", "Prefixed/Isolation"} {
		if res := rec.Get(name); res == nil || res.Failed {
			t.Errorf("%s after an abandoned subtest: %+v", name, res)
		}
	}
	if f := rec.Failed(); !slices.Equal(f, []string{"Plain", "Plain/ListPages", "Prefixed", "Prefixed/ListPages"}) {
		t.Errorf("failed: %v, want only the two ListPages (and their modes)", f)
	}
}

// hungChildEnv makes TestHungSubtestStd's child run the suite on a driver
// that hangs.
const hungChildEnv = "CONFORMANCE_HUNG_CHILD"

// TestHungSubtestStd: under go test itself (a *testing.T, where the suite
// once ended the binary with a panic), a subtest stuck in a call that
// ignores its context fails naming its rule and the run goes on to report
// every later rule. The suite runs in a child go test process, whose test
// fails on purpose; this test reads its -test.v output.
func TestHungSubtestStd(t *testing.T) {
	if os.Getenv(hungChildEnv) == "1" {
		RunBucket(t, small(Harness{
			MakeBucket: func(ctx context.Context, t TB) (*blob.Bucket, error) {
				return blob.NewBucket(stuckList{mem.NewDriver(), make(chan struct{})}), nil
			},
			ConditionalWrites: true,
			Timeout:           3 * time.Second,
			hangGrace:         50 * time.Millisecond,
		}))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHungSubtestStd$", "-test.v", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), hungChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("the child go test: %v, want exit 1 (its suite fails on purpose)\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{
		"--- FAIL: TestHungSubtestStd/Plain/ListPages",
		"Plain/ListPages is still running",
		"--- FAIL: TestHungSubtestStd/Prefixed/ListPages",
		"--- PASS: TestHungSubtestStd/Plain/ListStartAfter",
		"--- PASS: TestHungSubtestStd/Prefixed/Isolation",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the child's output lacks %q", want)
		}
	}
	if strings.Contains(text, "panic:") {
		t.Errorf("the child panicked")
	}
	if t.Failed() {
		t.Logf("the child's output:\n%s", text)
	}
}

// lagList is a store whose listing index lags object creation: a key a Put
// creates (not one it overwrites) is missing from every listing for lag
// after the Put returns, as on a store that updates its listing index
// asynchronously. Reads, Stat and deletes are consistent.
type lagList struct {
	*mem.Driver
	lag   time.Duration
	mu    *sync.Mutex
	shows map[string]time.Time // created key -> when listings show it
}

func newLagList(lag time.Duration) lagList {
	return lagList{mem.NewDriver(), lag, new(sync.Mutex), map[string]time.Time{}}
}

func (d lagList) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	_, statErr := d.Driver.Stat(ctx, key)
	a, err := d.Driver.Put(ctx, key, r, size, opts)
	if err == nil && statErr != nil {
		d.mu.Lock()
		d.shows[key] = time.Now().Add(d.lag)
		d.mu.Unlock()
	}
	return a, err
}

func (d lagList) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	page, err := d.Driver.List(ctx, opts)
	if err != nil {
		return page, err
	}
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	page.Objects = slices.DeleteFunc(page.Objects, func(a blob.Attrs) bool { return now.Before(d.shows[a.Key]) })
	return page, nil
}

// Metadata-sized objects: what staleSmallRead serves from its lagging tier.
const smallReadMin, smallReadMax = 128, 1 << 10

// staleSmallRead is a store whose reads of small objects lag overwrites:
// for lag after a Put replaces a metadata-sized object (smallReadMin to
// smallReadMax bytes, before and after) with another, reads return the body
// it replaced, while Stat, like the Put's answer, already shows the new ETag
// and size: a store that serves small objects from a replica that applies
// overwrites late, and answers HEAD from the primary. Creates, deletes and
// listings are consistent.
type staleSmallRead struct {
	*mem.Driver
	lag   time.Duration
	mu    *sync.Mutex
	stale map[string]staleBody
}

type staleBody struct {
	body  []byte
	until time.Time
}

func newStaleSmallRead(lag time.Duration) staleSmallRead {
	return staleSmallRead{mem.NewDriver(), lag, new(sync.Mutex), map[string]staleBody{}}
}

func metadataSized(n int) bool { return n >= smallReadMin && n <= smallReadMax }

func (d staleSmallRead) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	body, err := io.ReadAll(r)
	if err != nil {
		return blob.Attrs{}, err
	}
	old, oldErr := d.Driver.NewRangeReader(ctx, key, 0, -1)
	var prev []byte
	if oldErr == nil {
		prev, oldErr = io.ReadAll(old)
		old.Close()
	}
	a, err := d.Driver.Put(ctx, key, bytes.NewReader(body), int64(len(body)), opts)
	if err == nil && oldErr == nil && metadataSized(len(prev)) && metadataSized(len(body)) {
		d.mu.Lock()
		d.stale[key] = staleBody{prev, time.Now().Add(d.lag)}
		d.mu.Unlock()
	}
	return a, err
}

func (d staleSmallRead) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	d.mu.Lock()
	s, ok := d.stale[key]
	d.mu.Unlock()
	if !ok || !time.Now().Before(s.until) {
		return d.Driver.NewRangeReader(ctx, key, offset, length)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	body := s.body[min(offset, int64(len(s.body))):]
	if length >= 0 {
		body = body[:min(length, int64(len(body)))]
	}
	return io.NopCloser(bytes.NewReader(body)), nil
}

func (d staleSmallRead) Delete(ctx context.Context, keys []string) error {
	err := d.Driver.Delete(ctx, keys)
	if err == nil {
		d.mu.Lock()
		for _, k := range keys {
			delete(d.stale, k)
		}
		d.mu.Unlock()
	}
	return err
}
