package blobtest

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/driver"
	"github.com/redokit/redokit/internal/layout"
)

// Stale is a driver.Driver that wraps another and, on a seeded schedule,
// answers stats and reads of a log's metadata objects (the meta object
// <log>/meta and the writer states <log>/writers/<W>) from an OLDER version
// of the object than the store holds: what a restored object version, a
// lagging replica or a cache in front of the store serves. Every version is
// valid (it was stored once, and its checksum holds); it is only not the
// newest, which is what a client must not take it for.
//
// The Stale remembers every version of each metadata object it sees: the
// body and attributes of each put it passes on that lands (a lost answer
// of a Liar above it included), and of each whole-object read it passes
// through whose ETag was the same before and after the read (a version
// another process wrote). Segments and every other key pass through
// untouched.
//
// A window is what a stale serve looks like: at a stat or read of a
// metadata key outside a window, the schedule may open one; for that call
// and the next ones on the same key (stats and reads counted together, up
// to StaleSchedule.Calls of them) the Stale answers from one older version
// it remembers, chosen when the window opens and held for the whole of it,
// so that a client's stat, read, stat sees one old version throughout. A
// window is one of two kinds:
//
//   - consistent: a stat answers the old version's attributes (its ETag,
//     size, time) and a read its body, as a restored version or a lagging
//     replica does; a compare-and-swap conditioned on that ETag then fails
//     at the store. A client (told apart by the context of its calls) is
//     answered, at the first stat of a key after a read of it, the
//     attributes of the version it was read (the old one, or the store's
//     own), whenever windows open or close in between: so a stat, read,
//     stat that answers one ETag twice answered that version's body;
//   - torn (StaleSchedule.Torn): a stat answers the current attributes and
//     a read the old body, as a store whose metadata and data replicas lag
//     apart does; a compare-and-swap conditioned on that ETag succeeds and
//     writes back whatever the client derived from the old body.
//
// When the wrapped driver has the VersionReader capability the Stale has it
// too: a ReadVersion is one response, so within a window of either kind it
// answers the old body with that version's own attributes (a torn window
// cannot tear it), and outside one the version read is remembered.
//
// It may serve any version older than the current one, including one older
// than a version it already served the same client: that is the point.
// Every decision (whether a window opens, how long it lasts, its kind, how
// far back it goes) is a function of the seed, the key and how many stats
// and reads of that key were made before, as the Liar's are; which
// versions exist to go back to depends on the writes made so far.
type Stale struct {
	inner driver.Driver
	s     StaleSchedule

	mu       sync.Mutex
	serving  bool
	versions map[string][]staleVersion // by key, in the order they were seen (oldest first)
	calls    map[string]uint64         // stats and reads so far, by key
	windows  map[string]*staleWindow   // the open window of each key
	// owed are the versions of the bodies clients (by context and key)
	// were last read outside torn windows: their next stat of the key
	// answers that version's attributes, even after a window closed or
	// opened in between.
	owed   map[clientKey]owedStat
	counts map[string]int // "<kind>/<action>"
}

type clientKey struct {
	ctx context.Context
	key string
}

type owedStat struct {
	v       staleVersion
	current bool   // the body read was the store's: the stat passes through
	at      uint64 // the key's call count when the read was served
}

// owedFor is how many calls on its key an owed stat waits for its client
// before it is forgotten (a client that reads without a stat).
const owedFor = 64

// StaleSchedule says when a Stale serves an older version.
type StaleSchedule struct {
	Seed uint64
	// Kinds are the objects served stale: KindMeta, KindState (a takeover
	// is a state). nil means both.
	Kinds []PutKind
	// Start is the chance, per stat or read of a metadata object outside a
	// window, that a window opens there (when an older version is known).
	Start float64
	// Calls bounds a window's length in stats and reads of its key: each
	// lasts 1 to Calls of them (default 6).
	Calls int
	// Torn is the share of windows that are torn (the current ETag with an
	// old body) rather than consistent.
	Torn float64
	// Depth, when positive, bounds how many versions back a window goes;
	// 0 means any version remembered.
	Depth int
}

// The Stale's actions, as counted (with the kind of the object).
const (
	// ActStale: a read answered an older body within a consistent window.
	ActStale Action = "stale"
	// ActStaleTorn: a read answered an older body within a torn window (the
	// stats around it answer the current ETag).
	ActStaleTorn Action = "stale-torn"
	// ActStaleStat: a stat answered an older version's attributes.
	ActStaleStat Action = "stale-stat"
	// ActStaleWindow: a window opened.
	ActStaleWindow Action = "stale-window"
)

// DefaultStaleSchedule is the schedule BrokenStale uses when the Liar's
// Schedule gives none: windows open often, and half of them are torn.
func DefaultStaleSchedule(seed uint64) StaleSchedule {
	return StaleSchedule{Seed: seed, Start: 0.25, Calls: 8, Torn: 0.5}
}

type staleVersion struct {
	attrs blob.Attrs
	body  []byte
}

type staleWindow struct {
	end  uint64 // the call count at which it closes
	v    staleVersion
	torn bool
}

var _ driver.Driver = (*Stale)(nil)

// NewStale wraps inner with the schedule s. Serving is on.
func NewStale(inner driver.Driver, s StaleSchedule) *Stale {
	if s.Calls <= 0 {
		s.Calls = 6
	}
	return &Stale{inner: inner, s: s, serving: true, versions: map[string][]staleVersion{},
		calls: map[string]uint64{}, windows: map[string]*staleWindow{}, owed: map[clientKey]owedStat{}, counts: map[string]int{}}
}

// Driver returns the Stale as a driver that implements driver.Appender and
// driver.VersionReader when the wrapped driver does.
func (st *Stale) Driver() driver.Driver {
	_, app := st.inner.(driver.Appender)
	_, ver := st.inner.(driver.VersionReader)
	switch {
	case app && ver:
		return staleAppendingVersioned{staleAppending{st}}
	case app:
		return staleAppending{st}
	case ver:
		return staleVersioned{st}
	}
	return st
}

// Bucket returns a new Bucket over Driver(). Closing it closes the wrapped
// driver.
func (st *Stale) Bucket() *blob.Bucket { return blob.NewBucket(st.Driver()) }

// Inner returns the wrapped driver.
func (st *Stale) Inner() driver.Driver { return st.inner }

// SetServing turns stale serves on or off (a final check runs with them
// off); an open window closes. Versions are remembered either way.
func (st *Stale) SetServing(on bool) {
	st.mu.Lock()
	st.serving = on
	if !on {
		clear(st.windows)
		clear(st.owed)
	}
	st.mu.Unlock()
}

// setStart changes the schedule's Start (BrokenStale's final check).
func (st *Stale) setStart(p float64) {
	st.mu.Lock()
	st.s.Start = p
	st.mu.Unlock()
}

// Counts returns how many times the Stale did each thing, by
// "<kind>/<action>".
func (st *Stale) Counts() map[string]int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return maps.Clone(st.counts)
}

// Serves is how many reads answered an older body (consistent and torn).
func (st *Stale) Serves() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	n := 0
	for k, v := range st.counts {
		if strings.HasSuffix(k, "/"+string(ActStale)) || strings.HasSuffix(k, "/"+string(ActStaleTorn)) {
			n += v
		}
	}
	return n
}

// Versions returns how many versions of key the Stale remembers.
func (st *Stale) Versions(key string) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.versions[key])
}

// MetadataKind classifies a key by the layout of internal/layout: KindMeta
// for a log's meta object, KindState for a writer's state, KindOther for
// anything else (segments included). The key may lie under any prefix.
func MetadataKind(key string) PutKind {
	i := strings.LastIndexByte(key, '/')
	if i <= 0 {
		return KindOther
	}
	dir, base := key[:i], key[i+1:]
	if layout.Meta(dir) == key {
		return KindMeta
	}
	j := strings.LastIndexByte(dir, '/')
	if dir[j+1:] != layout.WritersDir || j <= 0 {
		return KindOther
	}
	if layout.WriterState(dir[:j], base) == key {
		return KindState
	}
	return KindOther
}

func (st *Stale) subject(key string) (PutKind, bool) {
	k := MetadataKind(key)
	if k == KindOther {
		return k, false
	}
	return k, st.s.Kinds == nil || slices.Contains(st.s.Kinds, k) || k == KindState && slices.Contains(st.s.Kinds, KindTakeover)
}

// draw returns the schedule's uniform number in [0, 1) for what of call n
// on key.
func (st *Stale) draw(what, key string, n uint64) float64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d\x00stale/%s\x00%s\x00%d", st.s.Seed, what, key, n)
	v := h.Sum64() * 0x9E3779B97F4A7C15
	return float64(v>>11) / (1 << 53)
}

// remember records a version of key (once per ETag).
func (st *Stale) remember(key string, a blob.Attrs, body []byte) {
	if a.ETag == "" {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, v := range st.versions[key] {
		if v.attrs.ETag == a.ETag {
			return
		}
	}
	a.Key = key
	a.Size = int64(len(body))
	st.versions[key] = append(st.versions[key], staleVersion{attrs: a, body: bytes.Clone(body)})
}

func (st *Stale) known(key, etag string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, v := range st.versions[key] {
		if v.attrs.ETag == etag {
			return true
		}
	}
	return false
}

// window returns the window the next call on key falls in, opening one
// when the schedule says so; nil when the call passes through.
func (st *Stale) window(ctx context.Context, kind PutKind, key string) *staleWindow {
	st.mu.Lock()
	n := st.calls[key]
	st.calls[key] = n + 1
	if !st.serving {
		st.mu.Unlock()
		return nil
	}
	if w := st.windows[key]; w != nil {
		if n < w.end {
			st.mu.Unlock()
			return w
		}
		delete(st.windows, key)
	}
	olds, start := len(st.versions[key]), st.s.Start
	st.mu.Unlock()
	if olds == 0 || st.draw("open", key, n) >= start {
		return nil
	}
	// Which versions are older: every one remembered but the current.
	cur, err := st.inner.Stat(ctx, key)
	if err != nil {
		return nil // gone, or the store failed: nothing to go back from
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.serving {
		return nil
	}
	var older []staleVersion
	for _, v := range st.versions[key] {
		if v.attrs.ETag != cur.ETag {
			older = append(older, v)
		}
	}
	if st.s.Depth > 0 && len(older) > st.s.Depth {
		older = older[len(older)-st.s.Depth:]
	}
	if len(older) == 0 {
		return nil
	}
	w := &staleWindow{
		end:  n + 1 + uint64(st.draw("length", key, n)*float64(st.s.Calls)),
		v:    older[int(st.draw("back", key, n)*float64(len(older)))],
		torn: st.draw("torn", key, n) < st.s.Torn,
	}
	st.windows[key] = w
	st.counts[string(kind)+"/"+string(ActStaleWindow)]++
	return w
}

func (st *Stale) count(kind PutKind, a Action) {
	st.mu.Lock()
	st.counts[string(kind)+"/"+string(a)]++
	st.mu.Unlock()
}

// Put implements driver.Driver. A metadata object's version is remembered
// once the put lands.
func (st *Stale) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	if MetadataKind(key) == KindOther {
		return st.inner.Put(ctx, key, r, size, opts)
	}
	body, err := io.ReadAll(r)
	if err != nil {
		return blob.Attrs{}, err
	}
	a, err := st.inner.Put(ctx, key, bytes.NewReader(body), int64(len(body)), opts)
	if err == nil {
		st.remember(key, a, body)
	}
	return a, err
}

// StagesPuts implements driver.Stager for the wrapped driver.
func (st *Stale) StagesPuts() bool {
	s, ok := st.inner.(driver.Stager)
	return ok && s.StagesPuts()
}

// Stat implements driver.Driver.
func (st *Stale) Stat(ctx context.Context, key string) (blob.Attrs, error) {
	kind, ok := st.subject(key)
	if !ok {
		return st.inner.Stat(ctx, key)
	}
	if o, ok := st.takeOwed(ctx, key); ok {
		if o.current {
			return st.inner.Stat(ctx, key)
		}
		st.count(kind, ActStaleStat)
		return o.v.attrs, nil
	}
	w := st.window(ctx, kind, key)
	if w == nil || w.torn {
		return st.inner.Stat(ctx, key)
	}
	st.count(kind, ActStaleStat)
	return w.v.attrs, nil
}

// comparableCtx reports whether ctx can be a map key (every context of
// package context can).
func comparableCtx(ctx context.Context) bool {
	return ctx != nil && reflect.TypeOf(ctx).Comparable()
}

// owe records the version of the body ctx's client was read: v within a
// consistent window, the store's own when current.
func (st *Stale) owe(ctx context.Context, key string, v staleVersion, current bool) {
	if !comparableCtx(ctx) {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.serving {
		return
	}
	n := st.calls[key]
	for ck, o := range st.owed {
		if ck.key == key && n-o.at > owedFor {
			delete(st.owed, ck)
		}
	}
	st.owed[clientKey{ctx, key}] = owedStat{v: v, current: current, at: n}
}

// forget drops what ctx's client is owed at its next stat of key.
func (st *Stale) forget(ctx context.Context, key string) {
	if !comparableCtx(ctx) {
		return
	}
	st.mu.Lock()
	delete(st.owed, clientKey{ctx, key})
	st.mu.Unlock()
}

// takeOwed returns the version ctx's client is owed at a stat of key.
func (st *Stale) takeOwed(ctx context.Context, key string) (owedStat, bool) {
	if !comparableCtx(ctx) {
		return owedStat{}, false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	ck := clientKey{ctx, key}
	o, ok := st.owed[ck]
	if !ok || !st.serving {
		return owedStat{}, false
	}
	delete(st.owed, ck)
	st.calls[key]++
	return o, true
}

// NewRangeReader implements driver.Driver.
func (st *Stale) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	kind, ok := st.subject(key)
	if !ok {
		if MetadataKind(key) != KindOther && offset == 0 && length < 0 {
			return st.learn(ctx, key)
		}
		return st.inner.NewRangeReader(ctx, key, offset, length)
	}
	w := st.window(ctx, kind, key)
	if w == nil {
		st.owe(ctx, key, staleVersion{}, true)
		if offset == 0 && length < 0 {
			return st.learn(ctx, key)
		}
		return st.inner.NewRangeReader(ctx, key, offset, length)
	}
	if w.torn {
		st.count(kind, ActStaleTorn)
		st.forget(ctx, key) // the window answers its next stat
	} else {
		st.count(kind, ActStale)
		st.owe(ctx, key, w.v, false)
	}
	body := w.v.body
	offset = min(max(offset, 0), int64(len(body)))
	end := int64(len(body))
	if length >= 0 {
		end = min(end, offset+length)
	}
	return io.NopCloser(bytes.NewReader(body[offset:end])), nil
}

// learn reads a whole metadata object through, remembering its version when
// it is one the Stale has not seen (another process wrote it) and the
// object did not change during the read.
func (st *Stale) learn(ctx context.Context, key string) (io.ReadCloser, error) {
	before, err := st.inner.Stat(ctx, key)
	if err != nil || st.known(key, before.ETag) {
		return st.inner.NewRangeReader(ctx, key, 0, -1)
	}
	rc, err := st.inner.NewRangeReader(ctx, key, 0, -1)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return nil, err
	}
	if after, err := st.inner.Stat(ctx, key); err == nil && after.ETag == before.ETag {
		st.remember(key, before, body)
	}
	return io.NopCloser(bytes.NewReader(body)), nil
}

// List implements driver.Driver: listings are the store's own.
func (st *Stale) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	return st.inner.List(ctx, opts)
}

// Delete implements driver.Driver.
func (st *Stale) Delete(ctx context.Context, keys []string) error {
	return st.inner.Delete(ctx, keys)
}

// ErrorCode implements driver.Driver.
func (st *Stale) ErrorCode(err error) blob.Code { return st.inner.ErrorCode(err) }

// Close implements driver.Driver.
func (st *Stale) Close() error { return st.inner.Close() }

// readVersion is ReadVersion (driver.VersionReader): one response, so
// within a window of either kind it answers the old body with its own
// attributes, as the lagging replica that served it would.
func (st *Stale) readVersion(ctx context.Context, key string) ([]byte, blob.Attrs, error) {
	vr := st.inner.(driver.VersionReader)
	kind, ok := st.subject(key)
	var w *staleWindow
	if ok {
		w = st.window(ctx, kind, key)
		st.forget(ctx, key) // nothing pairs this read with a stat
	}
	if w == nil {
		data, a, err := vr.ReadVersion(ctx, key)
		if err == nil && MetadataKind(key) != KindOther {
			st.remember(key, a, data)
		}
		return data, a, err
	}
	st.count(kind, ActStale)
	return bytes.Clone(w.v.body), w.v.attrs, nil
}

// staleVersioned is the Stale with the VersionReader capability.
type staleVersioned struct{ *Stale }

// ReadVersion implements driver.VersionReader.
func (v staleVersioned) ReadVersion(ctx context.Context, key string) ([]byte, blob.Attrs, error) {
	return v.readVersion(ctx, key)
}

// staleAppendingVersioned is the Stale with both capabilities.
type staleAppendingVersioned struct{ staleAppending }

// ReadVersion implements driver.VersionReader.
func (v staleAppendingVersioned) ReadVersion(ctx context.Context, key string) ([]byte, blob.Attrs, error) {
	return v.readVersion(ctx, key)
}

// staleAppending is the Stale with the Appender capability.
type staleAppending struct{ *Stale }

var _ driver.Appender = staleAppending{}

// OpenAppend implements driver.Appender: only segments are appended.
func (a staleAppending) OpenAppend(ctx context.Context, key string) (blob.AppendFile, error) {
	return a.inner.(driver.Appender).OpenAppend(ctx, key)
}
