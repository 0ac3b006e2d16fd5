package blobtest

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/driver"
	"github.com/redokit/redokit/internal/retry"
)

// Liar is a driver.Driver that wraps another and, on a seeded schedule, lies
// the way real stores and networks do: it stores a write and then reports an
// error (a lost answer), fails a write without storing it, delays calls, and
// holds answers back so that the answers of concurrent calls come in another
// order than their effects. Every decision is a function of the seed, the
// operation, the key and how many times that operation was made on that key,
// so a schedule replays the same way whatever the goroutines' interleaving.
//
// Besides these honest faults (a correct client survives every one of them
// without losing an acknowledged write), a Schedule can select a Broken mode:
// a store that breaks its contract, to prove that a checker catches it.
//
// With Schedule.Stale (or Broken set to BrokenStale) the Liar puts a Stale
// under itself: stats and reads of the metadata objects are answered, now
// and then, from an older version (see Stale).
//
// A lost answer comes in three forms, chosen by the schedule:
//
//   - a transient error (a reset connection after the request landed);
//   - deadline exceeded (a client timeout after the request landed);
//   - precondition failed, for a conditional write: the request landed and the
//     client's own retry of it lost to the first attempt (what an SDK that
//     retries internally reports).
type Liar struct {
	inner driver.Driver // the driver calls go to: orig, or a Stale over it
	orig  driver.Driver
	stale *Stale
	s     Schedule

	mu     sync.Mutex
	lying  bool
	calls  map[string]uint64 // per op and key: how many calls so far
	counts map[string]int    // "<kind>/<action>": how many
}

// PutKind classifies what a put (or a seal) stores, by its key.
type PutKind string

// The kinds of puts the Liar tells apart.
const (
	KindSegment  PutKind = "segment"  // <log>/seg/...: segment objects, and appends, syncs and seals on local disk
	KindState    PutKind = "state"    // <log>/writers/<ID>: a writer's progress
	KindTakeover PutKind = "takeover" // a writer state put made under a context marked WithTakeover: the lease's epoch change
	KindMeta     PutKind = "meta"     // <log>/meta: the coordinator's object
	KindOther    PutKind = "other"    // anything else (GC markers, ...)
)

// AllKinds are every PutKind.
var AllKinds = []PutKind{KindSegment, KindState, KindTakeover, KindMeta, KindOther}

// Action is what the Liar did with one call.
type Action string

// The Liar's actions, as counted.
const (
	ActLostTransient    Action = "lost-transient"    // stored, then a transient error
	ActLostDeadline     Action = "lost-deadline"     // stored, then deadline exceeded
	ActLostPrecondition Action = "lost-precondition" // stored, then precondition failed (a conditional write)
	ActFail             Action = "fail"              // not stored, a transient error
	ActDelay            Action = "delay"             // waited before the call
	ActReorder          Action = "reorder"           // held the answer after the call
	ActReadFail         Action = "read-fail"         // a read, stat or list failed, transiently
	ActMisreport        Action = "misreport"         // Broken: not stored, success reported
	ActListSkip         Action = "list-skip"         // Broken: a listing left out an object
	ActListLag          Action = "list-lag"          // ListLag: a listing left out one of the newest segments of a writer
)

// Broken selects a way the Liar breaks the blob contract (for tests of
// checkers): these are not faults a correct client can survive.
type Broken string

// Broken modes.
const (
	BrokenNone Broken = ""
	// BrokenMisreport reports success for the writes the schedule would
	// lose an answer of, without storing them (a put is not made; an append
	// drops its bytes).
	BrokenMisreport Broken = "misreport-lost"
	// BrokenListSkip leaves one object out of some listings of segments
	// (ListSkip of them, at least one object listed; see SkipLast).
	BrokenListSkip Broken = "list-skip"
	// BrokenStale serves older versions of the metadata objects (see
	// Stale; Schedule.Stale, or DefaultStaleSchedule) and keeps doing so
	// after SetLying(false), when every stat or read of one opens a window
	// (once an older version is known): a store whose reads of an
	// overwritten object lag behind it for good, which no client can read
	// a whole log from.
	BrokenStale Broken = "stale-meta"
)

// Schedule says what the Liar does. Probabilities are per call, between 0
// and 1; their sum for a put should stay below 1.
type Schedule struct {
	Seed uint64
	// Kinds are the puts that may be lost or failed; nil means all.
	Kinds []PutKind
	// LostAnswer: a write is stored and an error reported. Fail: a write is
	// refused without being stored.
	LostAnswer float64
	Fail       float64
	// Delay: a call waits up to MaxDelay before it is made. Reorder: its
	// answer is held up to MaxDelay after it was made.
	Delay    float64
	Reorder  float64
	MaxDelay time.Duration
	// ReadFail: a read, stat or list fails with a transient error.
	ReadFail float64
	// Syncs makes appends' syncs and seals (KindSegment) subject to
	// LostAnswer and Fail too.
	Syncs bool
	// Broken, when set, breaks the contract (see Broken); ListSkip is the
	// share of segment listings BrokenListSkip cuts (default 0.5).
	Broken   Broken
	ListSkip float64
	// SkipRecent makes BrokenListSkip leave out, instead of a random
	// object, the last but one object of each "directory" (key up to its
	// last '/') of a listing page: a recent write of every writer, below
	// its newest, so that a reader cannot find it by probing past the end
	// of what it listed.
	SkipRecent bool
	// ListLag is the share of segment listings that lag behind the store
	// (outside a takeover: see WithTakeover): each leaves out the two
	// newest objects of every directory (a writer's segments) in its page,
	// as an eventually consistent listing does. It breaks the blob contract, yet
	// SetLying(false) turns it off like an honest fault: a reader proves
	// its chains up to the seqs the writer states publish, so it turns a
	// lagging listing into an error, unless a stale writer state lets the
	// segment go unrequired (see Stale).
	ListLag float64
	// Stale, when set, serves older versions of the metadata objects on
	// its schedule (see Stale): an honest fault, which SetLying(false)
	// turns off, unless Broken is BrokenStale.
	Stale *StaleSchedule
}

// ErrLostAnswer is the error of a write the Liar stored and answered with a
// transient failure; errors.Is finds it in the Bucket's errors.
var ErrLostAnswer = errors.New("blobtest: answer lost (the write was stored)")

// ErrRefused is the error of a write the Liar did not store.
var ErrRefused = errors.New("blobtest: write refused (not stored)")

var _ driver.Driver = (*Liar)(nil)

// NewLiar wraps inner with the schedule s. Lying is on.
func NewLiar(inner driver.Driver, s Schedule) *Liar {
	if s.MaxDelay <= 0 {
		s.MaxDelay = 2 * time.Millisecond
	}
	if s.ListSkip == 0 {
		s.ListSkip = 0.5
	}
	l := &Liar{inner: inner, orig: inner, s: s, lying: true, calls: map[string]uint64{}, counts: map[string]int{}}
	if s.Stale != nil || s.Broken == BrokenStale {
		ss := DefaultStaleSchedule(s.Seed)
		if s.Stale != nil {
			ss = *s.Stale
		}
		l.stale = NewStale(inner, ss)
		l.inner = l.stale.Driver()
	}
	return l
}

// Stale returns the Stale under the Liar (nil without Schedule.Stale or
// BrokenStale).
func (l *Liar) Stale() *Stale { return l.stale }

// Driver returns the Liar as a driver that implements driver.Appender and
// driver.VersionReader when the wrapped driver does.
func (l *Liar) Driver() driver.Driver {
	_, app := l.inner.(driver.Appender)
	_, ver := l.inner.(driver.VersionReader)
	switch {
	case app && ver:
		return liarAppendingVersioned{liarAppending{l}}
	case app:
		return liarAppending{l}
	case ver:
		return liarVersioned{l}
	}
	return l
}

// Bucket returns a new Bucket over Driver(). Closing it closes the wrapped
// driver.
func (l *Liar) Bucket() *blob.Bucket { return blob.NewBucket(l.Driver()) }

// Inner returns the wrapped driver (under the Stale, if any).
func (l *Liar) Inner() driver.Driver { return l.orig }

// SetLying turns the honest faults on or off (a final check runs with them
// off). A Broken mode stays: it models the store itself.
func (l *Liar) SetLying(on bool) {
	l.mu.Lock()
	l.lying = on
	l.mu.Unlock()
	switch {
	case l.stale == nil:
	case l.s.Broken != BrokenStale:
		l.stale.SetServing(on)
	case !on:
		l.stale.setStart(1)
	}
}

// Counts returns how many times the Liar did each thing, by "<kind>/<action>"
// (kind "read" for reads, stats and lists), its Stale's included.
func (l *Liar) Counts() map[string]int {
	l.mu.Lock()
	c := maps.Clone(l.counts)
	l.mu.Unlock()
	if l.stale != nil {
		for k, v := range l.stale.Counts() {
			c[k] += v
		}
	}
	return c
}

// Count returns the total of an action over every kind.
func (l *Liar) Count(a Action) int {
	n := 0
	for k, v := range l.Counts() {
		if strings.HasSuffix(k, "/"+string(a)) {
			n += v
		}
	}
	return n
}

// Summary is Counts as one sorted line.
func (l *Liar) Summary() string {
	c := l.Counts()
	keys := slices.Sorted(maps.Keys(c))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, c[k])
	}
	return strings.Join(parts, " ")
}

type takeoverKey struct{}

// WithTakeover marks ctx: the Liar classifies the writer-state puts made
// under it as KindTakeover (a writer's Open passes its context to the lease's
// acquisition).
func WithTakeover(ctx context.Context) context.Context {
	return context.WithValue(ctx, takeoverKey{}, true)
}

// ClassifyKey returns the kind of a put of key (a takeover is told apart by
// its context, not its key).
func ClassifyKey(key string) PutKind {
	switch {
	case strings.Contains(key, "/seg/") || strings.HasPrefix(key, "seg/"):
		return KindSegment
	case strings.Contains(key, "/writers/") || strings.HasPrefix(key, "writers/"):
		return KindState
	case key == "meta" || strings.HasSuffix(key, "/meta"):
		return KindMeta
	}
	return KindOther
}

func (l *Liar) kindOf(ctx context.Context, key string) PutKind {
	k := ClassifyKey(key)
	if k == KindState && ctx != nil && ctx.Value(takeoverKey{}) != nil {
		return KindTakeover
	}
	return k
}

// draw returns the schedule's uniform number in [0, 1) for the next call of
// op on key, and whether the honest faults are on.
func (l *Liar) draw(op, key string) (float64, bool) {
	l.mu.Lock()
	id := op + "\x00" + key
	n := l.calls[id]
	l.calls[id] = n + 1
	lying := l.lying
	l.mu.Unlock()
	h := fnv.New64a()
	fmt.Fprintf(h, "%d\x00%s\x00%d", l.s.Seed, id, n)
	// fnv's low bits mix poorly: fold them with a multiplier first.
	v := h.Sum64() * 0x9E3779B97F4A7C15
	return float64(v>>11) / (1 << 53), lying
}

func (l *Liar) count(kind PutKind, a Action) {
	l.mu.Lock()
	l.counts[string(kind)+"/"+string(a)]++
	l.mu.Unlock()
}

func (l *Liar) subject(kind PutKind) bool {
	return l.s.Kinds == nil || slices.Contains(l.s.Kinds, kind)
}

// writeFate is what the schedule decided for one write.
type writeFate struct {
	lost, fail, misreport bool
	lostAs                Action
	delay, hold           time.Duration
}

// decide draws the fate of a write of kind on key.
func (l *Liar) decide(op string, kind PutKind, key string, conditional bool) writeFate {
	var f writeFate
	u, lying := l.draw(op, key)
	if l.subject(kind) {
		switch {
		case u < l.s.LostAnswer:
			if l.s.Broken == BrokenMisreport {
				f.misreport = true
				break
			}
			if !lying {
				break
			}
			f.lost = true
			// The form of the loss: the same draw, stretched.
			switch v := u / l.s.LostAnswer; {
			case v < 0.4:
				f.lostAs = ActLostTransient
			case v < 0.7 || !conditional:
				f.lostAs = ActLostDeadline
			default:
				f.lostAs = ActLostPrecondition
			}
		case u < l.s.LostAnswer+l.s.Fail && lying:
			f.fail = true
		}
	}
	if lying {
		u2, _ := l.draw(op+"/time", key)
		switch {
		case u2 < l.s.Delay:
			f.delay = time.Duration(u2 / l.s.Delay * float64(l.s.MaxDelay))
		case u2 < l.s.Delay+l.s.Reorder:
			f.hold = time.Duration((u2 - l.s.Delay) / l.s.Reorder * float64(l.s.MaxDelay))
		}
	}
	return f
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	return retry.Sleep(ctx, d)
}

// lostError is the error a lost answer reports.
func lostError(op, key string, a Action) error {
	switch a {
	case ActLostDeadline:
		return &blob.Error{Op: op, Key: key, Code: blob.CodeDeadlineExceeded, Err: fmt.Errorf("%w: %w", ErrLostAnswer, context.DeadlineExceeded)}
	case ActLostPrecondition:
		return &blob.Error{Op: op, Key: key, Code: blob.CodePreconditionFailed, Err: fmt.Errorf("%w: %w", ErrLostAnswer, blob.ErrPreconditionFailed)}
	}
	return &blob.Error{Op: op, Key: key, Code: blob.CodeTransient, Err: ErrLostAnswer}
}

// Put implements driver.Driver.
func (l *Liar) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	kind := l.kindOf(ctx, key)
	f := l.decide("put", kind, key, opts.IfNotExist || opts.IfMatch != "")
	if f.delay > 0 {
		l.count(kind, ActDelay)
		if err := sleepCtx(ctx, f.delay); err != nil {
			return blob.Attrs{}, err
		}
	}
	switch {
	case f.misreport:
		// Read the body as a store would, keep nothing, claim success.
		n, err := io.Copy(io.Discard, r)
		if err != nil {
			return blob.Attrs{}, err
		}
		l.count(kind, ActMisreport)
		return blob.Attrs{Key: key, Size: n, ETag: fmt.Sprintf("\"liar-%d\"", time.Now().UnixNano()), ModTime: time.Now()}, nil
	case f.fail:
		l.count(kind, ActFail)
		return blob.Attrs{}, &blob.Error{Op: "put", Key: key, Code: blob.CodeTransient, Err: ErrRefused}
	}
	a, err := l.inner.Put(ctx, key, r, size, opts)
	if f.hold > 0 {
		l.count(kind, ActReorder)
		time.Sleep(f.hold)
	}
	if err == nil && f.lost {
		l.count(kind, f.lostAs)
		return blob.Attrs{}, lostError("put", key, f.lostAs)
	}
	return a, err
}

// StagesPuts implements driver.Stager for the wrapped driver.
func (l *Liar) StagesPuts() bool {
	st, ok := l.inner.(driver.Stager)
	return ok && st.StagesPuts()
}

// readFault draws the fate of a read-like call.
func (l *Liar) readFault(ctx context.Context, op, key string) error {
	u, lying := l.draw(op, key)
	if !lying {
		return nil
	}
	if u < l.s.ReadFail {
		l.count("read", ActReadFail)
		return &blob.Error{Op: op, Key: key, Code: blob.CodeTransient, Err: ErrRefused}
	}
	if u < l.s.ReadFail+l.s.Delay {
		l.count("read", ActDelay)
		return sleepCtx(ctx, time.Duration((u-l.s.ReadFail)/l.s.Delay*float64(l.s.MaxDelay)))
	}
	return nil
}

// NewRangeReader implements driver.Driver.
func (l *Liar) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := l.readFault(ctx, "read", key); err != nil {
		return nil, err
	}
	return l.inner.NewRangeReader(ctx, key, offset, length)
}

// readVersion is ReadVersion of the wrapped driver, which fails and is
// delayed as reads are.
func (l *Liar) readVersion(ctx context.Context, key string) ([]byte, blob.Attrs, error) {
	if err := l.readFault(ctx, "read", key); err != nil {
		return nil, blob.Attrs{}, err
	}
	return l.inner.(driver.VersionReader).ReadVersion(ctx, key)
}

// liarVersioned is the Liar with the VersionReader capability.
type liarVersioned struct{ *Liar }

// ReadVersion implements driver.VersionReader.
func (v liarVersioned) ReadVersion(ctx context.Context, key string) ([]byte, blob.Attrs, error) {
	return v.readVersion(ctx, key)
}

// liarAppendingVersioned is the Liar with both capabilities.
type liarAppendingVersioned struct{ liarAppending }

// ReadVersion implements driver.VersionReader.
func (v liarAppendingVersioned) ReadVersion(ctx context.Context, key string) ([]byte, blob.Attrs, error) {
	return v.readVersion(ctx, key)
}

// Stat implements driver.Driver.
func (l *Liar) Stat(ctx context.Context, key string) (blob.Attrs, error) {
	if err := l.readFault(ctx, "stat", key); err != nil {
		return blob.Attrs{}, err
	}
	return l.inner.Stat(ctx, key)
}

// List implements driver.Driver.
func (l *Liar) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	id := opts.Prefix + "\x00" + opts.Token + "\x00" + opts.StartAfter
	if err := l.readFault(ctx, "list", id); err != nil {
		return blob.ListPage{}, err
	}
	page, err := l.inner.List(ctx, opts)
	segments := strings.Contains("/"+opts.Prefix, "/seg/") || strings.HasSuffix("/"+opts.Prefix, "/seg")
	if err == nil && l.s.ListLag > 0 && segments && len(page.Objects) > 0 && ctx.Value(takeoverKey{}) == nil {
		page = l.lag(id, page)
	}
	if err != nil || l.s.Broken != BrokenListSkip || len(page.Objects) == 0 || !segments {
		return page, err
	}
	u, _ := l.draw("list-skip", opts.Prefix)
	if u >= l.s.ListSkip {
		return page, nil
	}
	if l.s.SkipRecent {
		dir := func(k string) string { return k[:strings.LastIndexByte(k, '/')+1] }
		objs := page.Objects
		var kept []blob.Attrs
		for i, a := range objs {
			d := dir(a.Key)
			// The last but one of its folder: the next object is in it,
			// and the one after is not.
			if i+1 < len(objs) && dir(objs[i+1].Key) == d && (i+2 == len(objs) || dir(objs[i+2].Key) != d) {
				l.count(KindSegment, ActListSkip)
				continue
			}
			kept = append(kept, a)
		}
		page.Objects = kept
		return page, nil
	}
	// Which object: the same draw, stretched. A copy, so that the inner
	// driver's page is not changed under it.
	i := int(u / l.s.ListSkip * float64(len(page.Objects)))
	page.Objects = slices.Delete(slices.Clone(page.Objects), i, i+1)
	l.count(KindSegment, ActListSkip)
	return page, nil
}

// lag applies ListLag to a page of a segment listing.
func (l *Liar) lag(id string, page blob.ListPage) blob.ListPage {
	u, lying := l.draw("list-lag", id)
	if !lying || u >= l.s.ListLag {
		return page
	}
	dir := func(k string) string { return k[:strings.LastIndexByte(k, '/')+1] }
	objs := page.Objects
	var kept []blob.Attrs
	for i, a := range objs {
		// One of the two newest of its folder.
		if i+1 == len(objs) || dir(objs[i+1].Key) != dir(a.Key) || i+2 == len(objs) || dir(objs[i+2].Key) != dir(a.Key) {
			l.count("read", ActListLag)
			continue
		}
		kept = append(kept, a)
	}
	page.Objects = kept
	return page
}

// Delete implements driver.Driver.
func (l *Liar) Delete(ctx context.Context, keys []string) error {
	first := ""
	if len(keys) > 0 {
		first = keys[0]
	}
	kind := l.kindOf(ctx, first)
	f := l.decide("delete", kind, first, false)
	if f.delay > 0 {
		l.count(kind, ActDelay)
		if err := sleepCtx(ctx, f.delay); err != nil {
			return err
		}
	}
	if f.fail {
		l.count(kind, ActFail)
		return &blob.Error{Op: "delete", Key: first, Code: blob.CodeTransient, Err: ErrRefused}
	}
	// A misreported delete would be a store that keeps objects; that is
	// not one of the Broken modes.
	err := l.inner.Delete(ctx, keys)
	if err == nil && f.lost {
		l.count(kind, ActLostTransient)
		return &blob.Error{Op: "delete", Key: first, Code: blob.CodeTransient, Err: ErrLostAnswer}
	}
	return err
}

// ErrorCode implements driver.Driver.
func (l *Liar) ErrorCode(err error) blob.Code {
	var be *blob.Error
	if errors.As(err, &be) {
		return be.Code
	}
	return l.inner.ErrorCode(err)
}

// Close implements driver.Driver.
func (l *Liar) Close() error { return l.inner.Close() }

// liarAppending is the Liar with the Appender capability.
type liarAppending struct{ *Liar }

var _ driver.Appender = liarAppending{}

// OpenAppend implements driver.Appender.
func (a liarAppending) OpenAppend(ctx context.Context, key string) (blob.AppendFile, error) {
	if err := a.readFault(ctx, "open-append", key); err != nil {
		return nil, err
	}
	inner, err := a.inner.(driver.Appender).OpenAppend(ctx, key)
	if err != nil {
		return nil, err
	}
	return &liarFile{l: a.Liar, key: key, inner: inner}, nil
}

// liarFile wraps an AppendFile.
type liarFile struct {
	l     *Liar
	key   string
	inner blob.AppendFile
	// dropped counts the bytes a misreported write claimed: Size reports
	// them too, as the broken store would.
	dropped int64
}

func (f *liarFile) Write(p []byte) (int, error) {
	if f.l.s.Broken == BrokenMisreport {
		if fate := f.l.decide("write", KindSegment, f.key, false); fate.misreport {
			f.l.count(KindSegment, ActMisreport)
			f.dropped += int64(len(p))
			return len(p), nil
		}
	}
	return f.inner.Write(p)
}

func (f *liarFile) Size() int64 { return f.inner.Size() + f.dropped }

func (f *liarFile) Sync() error {
	if f.l.s.Syncs {
		fate := f.l.decide("sync", KindSegment, f.key, false)
		if fate.fail {
			f.l.count(KindSegment, ActFail)
			return &blob.Error{Op: "sync", Key: f.key, Code: blob.CodeTransient, Err: ErrRefused}
		}
		if err := f.inner.Sync(); err != nil {
			return err
		}
		if fate.lost {
			f.l.count(KindSegment, ActLostTransient)
			return &blob.Error{Op: "sync", Key: f.key, Code: blob.CodeTransient, Err: ErrLostAnswer}
		}
		return nil
	}
	return f.inner.Sync()
}

func (f *liarFile) Truncate(size int64) error {
	if size > f.inner.Size() {
		// A misreported write: the bytes it claimed are not there; cut
		// what is.
		size = f.inner.Size()
	}
	err := f.inner.Truncate(size)
	if err == nil {
		f.dropped = 0
	}
	return err
}

func (f *liarFile) Seal(ctx context.Context, finalKey string) (blob.Attrs, error) {
	if f.l.s.Syncs {
		fate := f.l.decide("seal", KindSegment, f.key, true)
		if fate.fail {
			f.l.count(KindSegment, ActFail)
			return blob.Attrs{}, &blob.Error{Op: "seal", Key: f.key, Code: blob.CodeTransient, Err: ErrRefused}
		}
		a, err := f.inner.Seal(ctx, finalKey)
		if err == nil && fate.lost {
			f.l.count(KindSegment, fate.lostAs)
			return blob.Attrs{}, lostError("seal", f.key, fate.lostAs)
		}
		return a, err
	}
	return f.inner.Seal(ctx, finalKey)
}

func (f *liarFile) Close() error { return f.inner.Close() }
