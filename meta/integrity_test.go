package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/redokit/redokit/segment"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/blob/driver"
	"github.com/redokit/redokit/internal/layout"
)

// errLost is what a lying driver reports for a put it stored.
var errLost = errors.New("test: connection reset after the request was sent")

// lying stores the puts that lose matches and then reports a failure, as a
// put whose answer was lost does. The rest passes through.
type lying struct {
	driver.Driver
	mu   sync.Mutex
	lose func(key string, opts blob.PutOptions) bool
	lost int
}

func (l *lying) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	a, err := l.Driver.Put(ctx, key, r, size, opts)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil && l.lose != nil && l.lose(key, opts) {
		l.lost++
		return blob.Attrs{}, errLost
	}
	return a, err
}

// loseNth loses the answer of the nth put (1-based, from now on) that match
// accepts.
func (l *lying) loseNth(n int, match func(key string, opts blob.PutOptions) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := 0
	l.lose = func(key string, opts blob.PutOptions) bool {
		if !match(key, opts) {
			return false
		}
		seen++
		return seen == n
	}
}

func conditional(key string, opts blob.PutOptions) bool { return opts.IfMatch != "" }
func creates(key string, opts blob.PutOptions) bool     { return opts.IfNotExist }

// staleReads serves, for every key that was overwritten, the version before
// the last overwrite (body and ETag): a store whose reads lag its writes.
type staleReads struct {
	driver.Driver
	mu   sync.Mutex
	prev map[string]staleObject
}

type staleObject struct {
	data  []byte
	attrs blob.Attrs
}

func newStaleReads(d driver.Driver) *staleReads {
	return &staleReads{Driver: d, prev: map[string]staleObject{}}
}

func (s *staleReads) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, serr := s.Driver.Stat(ctx, key)
	var oldData []byte
	if serr == nil {
		rc, err := s.Driver.NewRangeReader(ctx, key, 0, -1)
		if err != nil {
			return blob.Attrs{}, err
		}
		oldData, err = io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return blob.Attrs{}, err
		}
	}
	a, err := s.Driver.Put(ctx, key, r, size, opts)
	if err == nil && serr == nil {
		s.prev[key] = staleObject{oldData, old}
	}
	return a, err
}

func (s *staleReads) Stat(ctx context.Context, key string) (blob.Attrs, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.prev[key]; ok {
		return o.attrs, nil
	}
	return s.Driver.Stat(ctx, key)
}

func (s *staleReads) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.prev[key]; ok {
		d := o.data[min(offset, int64(len(o.data))):]
		if length >= 0 {
			d = d[:min(length, int64(len(d)))]
		}
		return io.NopCloser(bytes.NewReader(d)), nil
	}
	return s.Driver.NewRangeReader(ctx, key, offset, length)
}

// TestLeaseLostAnswer loses the answer of a progress put that was stored:
// the lease finds its token by a re-read, counts it as published, and the
// next publication builds on it. Before write tokens, the retry failed its
// precondition and the lease called itself fenced although no newer epoch
// existed (finding 1 of issue 12).
func TestLeaseLostAnswer(t *testing.T) {
	ctx := context.Background()
	drv := &lying{Driver: mem.NewDriver()}
	b := blob.NewBucket(drv)
	defer b.Close()
	l, err := AcquireWriter(ctx, b, "log", "w", nil)
	if err != nil {
		t.Fatal(err)
	}
	drv.loseNth(1, conditional)
	err = l.PublishProgress(ctx, Progress{FlushedTs: 10, Seq: 1})
	if err != nil && errors.Is(err, ErrFenced) {
		t.Fatalf("publish whose answer was lost: %v: fenced without a newer epoch", err)
	}
	// The writer retries what failed (or moves on); neither is fenced.
	if err := l.PublishProgress(ctx, Progress{FlushedTs: 10, Seq: 1}); err != nil {
		t.Fatalf("retry of the publication: %v", err)
	}
	if err := l.PublishProgress(ctx, Progress{FlushedTs: 20, Seq: 2}); err != nil {
		t.Fatalf("next publication: %v", err)
	}
	if drv.lost != 1 {
		t.Fatalf("%d answers lost, want 1", drv.lost)
	}
	st, _, err := ReadWriterState(ctx, b, "log", "w")
	if err != nil || st.Epoch != 1 || st.FlushedTs != 20 || st.Seq != 2 {
		t.Fatalf("state %+v, %v; want epoch 1 at ts 20 seq 2", st, err)
	}
	if err := l.Check(ctx); err != nil {
		t.Fatalf("Check after the lost answer: %v", err)
	}
}

// TestLeaseOutcomeStaysOpen: a put fails without storing anything and the
// re-read fails too. The error is not a fence; the lease stays usable; the
// next publication settles the open write first (here it had not landed)
// and then succeeds.
func TestLeaseOutcomeStaysOpen(t *testing.T) {
	ctx := context.Background()
	f := blobtest.NewFaulty(mem.NewDriver())
	b := f.Bucket()
	defer b.Close()
	l, err := AcquireWriter(ctx, b, "log", "w", nil)
	if err != nil {
		t.Fatal(err)
	}
	removePut := f.FailNth(blobtest.OpPut, 1, nil)
	removeStat := f.FailNth(blobtest.OpStat, 1, nil)
	err = l.PublishProgress(ctx, Progress{FlushedTs: 10, Seq: 1})
	if err == nil || errors.Is(err, ErrFenced) || !strings.Contains(err.Error(), layout.WriterState("log", "w")) {
		t.Fatalf("publish with a failed put and a failed re-read: %v; want an error naming the key, not a fence", err)
	}
	removePut()
	removeStat()
	stats := f.Count(blobtest.OpStat)
	if err := l.PublishProgress(ctx, Progress{FlushedTs: 10, Seq: 1}); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if f.Count(blobtest.OpStat) == stats {
		t.Fatal("the retry wrote without settling the open write first")
	}
	st, _, err := ReadWriterState(ctx, b, "log", "w")
	if err != nil || st.FlushedTs != 10 || st.Seq != 1 {
		t.Fatalf("state %+v, %v", st, err)
	}
}

// TestLeaseOpenOutcomeLanded: the put is stored, its answer lost, and the
// re-read fails: the next publication (of more progress) settles first,
// adopts the landed write, and publishes on top of it.
func TestLeaseOpenOutcomeLanded(t *testing.T) {
	ctx := context.Background()
	drv := &lying{Driver: mem.NewDriver()}
	f := blobtest.NewFaulty(drv)
	b := f.Bucket()
	defer b.Close()
	l, err := AcquireWriter(ctx, b, "log", "w", nil)
	if err != nil {
		t.Fatal(err)
	}
	drv.loseNth(1, conditional)
	remove := f.FailNth(blobtest.OpStat, 1, nil)
	if err := l.PublishProgress(ctx, Progress{FlushedTs: 10, Seq: 1}); err == nil || errors.Is(err, ErrFenced) {
		t.Fatalf("publish: %v; want an error that is not a fence", err)
	}
	remove()
	if err := l.PublishProgress(ctx, Progress{FlushedTs: 20, Seq: 2}); err != nil {
		t.Fatalf("next publication: %v", err)
	}
	if st := l.State(); st.FlushedTs != 20 || st.Seq != 2 {
		t.Fatalf("lease state %+v", st)
	}
}

// TestLeaseForeignWrite: the object holds the lease's epoch written by
// someone else. That proves no newer epoch: an error naming the key, not a
// fence.
func TestLeaseForeignWrite(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	l, err := AcquireWriter(ctx, b, "log", "w", nil)
	if err != nil {
		t.Fatal(err)
	}
	other := l.State()
	other.Token, other.FlushedTs, other.CommittedTs = newToken(), 99, 99
	if _, err := b.Put(ctx, layout.WriterState("log", "w"), encodeWriterState(&other), nil); err != nil {
		t.Fatal(err)
	}
	err = l.PublishProgress(ctx, Progress{FlushedTs: 10, Seq: 1})
	if !errors.Is(err, ErrForeignWrite) || errors.Is(err, ErrFenced) || !strings.Contains(err.Error(), layout.WriterState("log", "w")) {
		t.Fatalf("publish over a foreign write of the same epoch: %v", err)
	}
}

// TestLeaseFencedCarriesTheFence: a newer epoch is the one way to
// ErrFenced, and the error carries the fence it recorded.
func TestLeaseFencedCarriesTheFence(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	old, err := AcquireWriter(ctx, b, "log", "w", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.PublishProgress(ctx, Progress{FlushedTs: 10, Seq: 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := AcquireWriter(ctx, b, "log", "w", nil); err != nil {
		t.Fatal(err)
	}
	err = old.PublishProgress(ctx, Progress{FlushedTs: 20, Seq: 5})
	var fe *FencedError
	if !errors.Is(err, ErrFenced) || !errors.As(err, &fe) {
		t.Fatalf("zombie publish: %v", err)
	}
	if f, ok := fe.Fence(); !ok || f.Epoch != 1 || f.LastSeq != 4 {
		t.Fatalf("fence of the zombie's epoch: %+v %v", f, ok)
	}
}

// TestAcquireLostAnswers loses the answer of the create and of the
// takeover: each acquire finds its token and succeeds with the epoch it
// wrote.
func TestAcquireLostAnswers(t *testing.T) {
	ctx := context.Background()
	drv := &lying{Driver: mem.NewDriver()}
	b := blob.NewBucket(drv)
	defer b.Close()
	drv.loseNth(1, creates)
	l, err := AcquireWriter(ctx, b, "log", "w", nil)
	if err != nil || l.Epoch() != 1 {
		t.Fatalf("acquire with a lost create answer: %v", err)
	}
	if err := l.PublishProgress(ctx, Progress{FlushedTs: 10, Seq: 3}); err != nil {
		t.Fatal(err)
	}
	drv.loseNth(1, conditional)
	l2, err := AcquireWriter(ctx, b, "log", "w", nil)
	if err != nil || l2.Epoch() != 2 || l2.Previous == nil || l2.Previous.Seq != 3 {
		t.Fatalf("takeover with a lost answer: %v", err)
	}
	if err := l2.PublishProgress(ctx, Progress{FlushedTs: 20, Seq: 1}); err != nil {
		t.Fatal(err)
	}
	if drv.lost != 2 {
		t.Fatalf("%d answers lost, want 2", drv.lost)
	}
}

// TestAcquireStaleReadsEnds: on a store whose reads lag an overwrite,
// AcquireWriter's compare-and-swap can never win. It must fail, naming the
// key and the reason, within its bounded attempts, not spin until the
// caller's deadline (finding 5 of issue 12).
func TestAcquireStaleReadsEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := newStaleReads(mem.NewDriver())
	b := blob.NewBucket(s)
	defer b.Close()
	l, err := AcquireWriter(ctx, b, "log", "w", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.PublishProgress(ctx, Progress{FlushedTs: 10, Seq: 1}); err != nil {
		t.Fatal(err) // the first overwrite: reads are stale from now on
	}
	_, err = AcquireWriter(ctx, b, "log", "w", nil)
	if !errors.Is(err, ErrContended) || !strings.Contains(err.Error(), layout.WriterState("log", "w")) || !strings.Contains(err.Error(), "stale") {
		t.Fatalf("acquire on stale reads: %v; want ErrContended naming the key", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the acquire ran until the test's deadline")
	}
	// The same store makes the coordinator's loop end the same way, once
	// a second coordinator has overwritten the object.
	c, err := OpenCoordinator(ctx, b, "log", nil)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := OpenCoordinator(ctx, b, "log", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.AddWriter(ctx, "w"); err != nil {
		t.Fatal(err) // the first overwrite
	}
	err = c.AddSpan(ctx, 1, 0)
	if !errors.Is(err, ErrContended) || !strings.Contains(err.Error(), layout.Meta("log")) {
		t.Fatalf("coordinator update on stale reads: %v", err)
	}
}

// overwriting overwrites key with data (once) when it is read, between the
// Stat and the read of a reader that does both: a concurrent writer.
type overwriting struct {
	driver.Driver
	key  string
	data []byte
	done atomic.Bool
}

func (o *overwriting) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if key == o.key && o.done.CompareAndSwap(false, true) {
		if _, err := o.Driver.Put(ctx, key, bytes.NewReader(o.data), int64(len(o.data)), blob.PutOptions{}); err != nil {
			return nil, err
		}
	}
	return o.Driver.NewRangeReader(ctx, key, offset, length)
}

// TestReadPairsBodyAndETag: an overwrite between the reads of a state or
// meta object must not pair one version's body with another's ETag (a
// compare-and-swap with such a pair acts on a body it never read).
func TestReadPairsBodyAndETag(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{"state", "meta"} {
		t.Run(kind, func(t *testing.T) {
			inner := mem.NewDriver()
			o := &overwriting{Driver: inner}
			b := blob.NewBucket(o)
			defer b.Close()
			var token string
			switch kind {
			case "state":
				l, err := AcquireWriter(ctx, b, "log", "w", nil)
				if err != nil {
					t.Fatal(err)
				}
				next := l.State()
				next.Token, next.FlushedTs, next.CommittedTs = newToken(), 42, 42
				o.key, o.data, token = layout.WriterState("log", "w"), encodeWriterState(&next), next.Token
			case "meta":
				c, err := OpenCoordinator(ctx, b, "log", nil)
				if err != nil {
					t.Fatal(err)
				}
				next := c.Meta()
				next.Token, next.ResolvedTs = newToken(), 42
				o.key, o.data, token = layout.Meta("log"), encodeMeta(&next), next.Token
			}
			var got, etag string
			var err error
			if kind == "state" {
				var st *WriterState
				st, etag, err = ReadWriterState(ctx, b, "log", "w")
				if st != nil {
					got = st.Token
				}
			} else {
				var m *Meta
				m, etag, err = ReadMeta(ctx, b, "log")
				if m != nil {
					got = m.Token
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			cur, err := inner.Stat(ctx, o.key)
			if err != nil {
				t.Fatal(err)
			}
			if got != token || etag != cur.ETag {
				t.Fatalf("read body of token %s with ETag %s; the object holds token %s under ETag %s", got, etag, token, cur.ETag)
			}
		})
	}
}

// TestCoordinatorLostAnswers loses the answer of the meta object's create
// and of an update: each is found by its token and counts as done; the next
// update builds on it.
func TestCoordinatorLostAnswers(t *testing.T) {
	ctx := context.Background()
	drv := &lying{Driver: mem.NewDriver()}
	b := blob.NewBucket(drv)
	defer b.Close()
	drv.loseNth(1, func(key string, o blob.PutOptions) bool { return key == layout.Meta("log") && o.IfNotExist })
	c, err := OpenCoordinator(ctx, b, "log", &CoordinatorOptions{StartTs: 5})
	if err != nil {
		t.Fatalf("open with a lost create answer: %v", err)
	}
	drv.loseNth(1, func(key string, o blob.PutOptions) bool { return key == layout.Meta("log") && o.IfMatch != "" })
	if err := c.AddSpan(ctx, 1, 5); err != nil {
		t.Fatalf("update whose answer was lost: %v", err)
	}
	if err := c.AddSpan(ctx, 2, 5); err != nil {
		t.Fatalf("next update: %v", err)
	}
	if drv.lost != 2 {
		t.Fatalf("%d answers lost, want 2", drv.lost)
	}
	m, _, err := ReadMeta(ctx, b, "log")
	if err != nil || len(m.Spans) != 2 || m.ResolvedTs != 5 {
		t.Fatalf("meta %+v, %v", m, err)
	}
}

// TestCoordinatorOpenUpdateSettles: an update whose put failed and whose
// re-read failed returns an error; the next update settles first and finds
// that the write landed.
func TestCoordinatorOpenUpdateSettles(t *testing.T) {
	ctx := context.Background()
	drv := &lying{Driver: mem.NewDriver()}
	f := blobtest.NewFaulty(drv)
	b := f.Bucket()
	defer b.Close()
	c, err := OpenCoordinator(ctx, b, "log", nil)
	if err != nil {
		t.Fatal(err)
	}
	drv.loseNth(1, conditional)
	remove := f.FailNth(blobtest.OpStat, 1, nil)
	if err := c.AddSpan(ctx, 1, 0); err == nil || !strings.Contains(err.Error(), layout.Meta("log")) {
		t.Fatalf("update with a lost answer and a failed re-read: %v", err)
	}
	remove()
	if err := c.AddSpan(ctx, 2, 0); err != nil {
		t.Fatalf("next update: %v", err)
	}
	if m := c.Meta(); len(m.Spans) != 2 {
		t.Fatalf("spans %v: the landed update was lost or applied twice", m.Spans)
	}
}

// storedState is a state object with every kind of field filled, and its
// stored bytes.
func storedState(t *testing.T) (*blob.Bucket, []byte) {
	t.Helper()
	ctx := context.Background()
	b := mem.New()
	t.Cleanup(func() { b.Close() })
	l, err := AcquireWriter(ctx, b, "log", "w", &AcquireOptions{Owner: "h:1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.PublishProgress(ctx, Progress{FlushedTs: 10, Seq: 3, ChainMaxTs: 11, Digest: 0xdeadbeef, Spans: []segment.SpanTs{{Span: 1, Ts: 10}, {Span: 2, Ts: 12}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := AcquireWriter(ctx, b, "log", "w", &AcquireOptions{Owner: "h:2"}); err != nil {
		t.Fatal(err)
	}
	data, err := b.ReadAll(ctx, layout.WriterState("log", "w"))
	if err != nil {
		t.Fatal(err)
	}
	return b, data
}

// storedMeta is a meta object with every kind of field filled, and its
// stored bytes.
func storedMeta(t *testing.T) (*blob.Bucket, []byte) {
	t.Helper()
	ctx := context.Background()
	b := mem.New()
	t.Cleanup(func() { b.Close() })
	c, err := OpenCoordinator(ctx, b, "log", &CoordinatorOptions{StartTs: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{c.AddWriter(ctx, "w"), c.AddSpan(ctx, 7, 3), c.AddBarrier(ctx, "ddl-1", 9)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	data, err := b.ReadAll(ctx, layout.Meta("log"))
	if err != nil {
		t.Fatal(err)
	}
	return b, data
}

// readers are the ways the package reads each kind of object.
func stateReaders(b *blob.Bucket) map[string]func() error {
	ctx := context.Background()
	return map[string]func() error{
		"ReadWriterState": func() error { _, _, err := ReadWriterState(ctx, b, "log", "w"); return err },
		"ListWriterStates": func() error {
			_, err := ListWriterStates(ctx, b, "log", nil)
			return err
		},
	}
}

func metaReaders(b *blob.Bucket) map[string]func() error {
	ctx := context.Background()
	return map[string]func() error{
		"ReadMeta": func() error { _, _, err := ReadMeta(ctx, b, "log"); return err },
		"Watcher":  func() error { _, err := NewWatcher(b, "log", 0).Current(ctx); return err },
	}
}

// TestEveryBitFlipIsCaught flips every bit of a stored state object and of
// a meta object, one at a time: every read fails with an error naming the
// key (none decodes to something else), and the intact object still reads
// (finding 4 of issue 12, metadata part).
func TestEveryBitFlipIsCaught(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{"state", "meta"} {
		t.Run(kind, func(t *testing.T) {
			var b *blob.Bucket
			var data []byte
			var key string
			var readers map[string]func() error
			if kind == "state" {
				b, data = storedState(t)
				key, readers = layout.WriterState("log", "w"), stateReaders(b)
			} else {
				b, data = storedMeta(t)
				key, readers = layout.Meta("log"), metaReaders(b)
			}
			for name, read := range readers {
				if err := read(); err != nil {
					t.Fatalf("%s of the intact object: %v", name, err)
				}
			}
			for i := range len(data) * 8 {
				flipped := bytes.Clone(data)
				flipped[i/8] ^= 1 << (i % 8)
				if _, err := b.Put(ctx, key, flipped, nil); err != nil {
					t.Fatal(err)
				}
				for name, read := range readers {
					err := read()
					if err == nil {
						t.Fatalf("bit %d (byte %d %q→%q): %s read the damaged object without an error", i, i/8, data[i/8], flipped[i/8], name)
					}
					if !strings.Contains(err.Error(), key) || !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupportedVersion) {
						t.Fatalf("bit %d: %s: %v; want ErrCorrupt or ErrUnsupportedVersion naming %s", i, name, err, key)
					}
				}
			}
		})
	}
}

// TestStrictBody stores bodies under a valid envelope (right version, right
// CRC) that a lenient decoder would accept: an unknown field (a field name
// with a flipped bit), a missing one, one given twice, a null, data after
// the body, a damaged name inside a fence. Each is an error naming the key.
func TestStrictBody(t *testing.T) {
	ctx := context.Background()
	b, data := storedState(t)
	key := layout.WriterState("log", "w")
	body, _, err := unseal(key, data)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(string) string{
		"unknown field":        func(s string) string { return strings.Replace(s, `"fences"`, `"fencez"`, 1) },
		"unknown nested field": func(s string) string { return strings.Replace(s, `"last_seq"`, `"last_sek"`, 1) },
		"missing field":        func(s string) string { return strings.Replace(s, `"owner":"h:2",`, ``, 1) },
		"missing nested field": func(s string) string { return strings.Replace(s, `"max_ts":11,`, ``, 1) },
		"field twice":          func(s string) string { return strings.Replace(s, `"epoch":2,`, `"epoch":2,"epoch":3,`, 1) },
		"null scalar":          func(s string) string { return strings.Replace(s, `"epoch":2`, `"epoch":null`, 1) },
		"null in a list":       func(s string) string { return strings.Replace(s, `"fences":[`, `"fences":[null,`, 1) },
		"trailing data":        func(s string) string { return s + ` {}` },
		"wrong type":           func(s string) string { return strings.Replace(s, `"has_seq":false`, `"has_seq":0`, 1) },
		"empty token":          func(s string) string { return s[:strings.Index(s, `"token":"`)+9] + `"}` },
		"missing committed_ts": func(s string) string { return strings.Replace(s, `"committed_ts":10,"spans"`, `"spans"`, 1) },
		"missing fence's committed_ts": func(s string) string {
			return strings.Replace(s, `"digest":3735928559,"committed_ts":10}`, `"digest":3735928559}`, 1)
		},
		"committed_ts twice": func(s string) string {
			return strings.Replace(s, `"committed_ts":10,"spans"`, `"committed_ts":10,"committed_ts":10,"spans"`, 1)
		},
		"committed_ts null": func(s string) string {
			return strings.Replace(s, `"committed_ts":10,"spans"`, `"committed_ts":null,"spans"`, 1)
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			bad := damage(string(body))
			if bad == string(body) {
				t.Fatalf("the damage changed nothing in %s", body)
			}
			if _, err := b.Put(ctx, key, seal([]byte(bad)), nil); err != nil {
				t.Fatal(err)
			}
			for rname, read := range stateReaders(b) {
				err := read()
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), key) {
					t.Fatalf("%s of %s: %v; want ErrCorrupt naming the key", rname, bad, err)
				}
			}
		})
	}
	// And the envelope as FORMAT.md spells it, byte for byte.
	want := fmt.Sprintf(`{"version":%d,"crc32c":"%08x","body":%s}`, StateVersion, crcOf(body), body)
	if string(data) != want {
		t.Fatalf("stored object\n%s\nis not the documented envelope\n%s", data, want)
	}
}

func crcOf(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

// The examples docs/FORMAT.md gives, byte for byte: the objects as this
// build writes them (version 4), and as versions 3 and 2 wrote them.
const (
	formatStateV4 = `{"version":4,"crc32c":"06406232","body":{"log":"L","writer":"w1","epoch":2,"flushed_ts":120,"seq":0,"has_seq":false,"chain_max_ts":0,"digest":0,"committed_ts":120,"spans":[{"span":1,"ts":120}],"fences":[{"epoch":1,"last_seq":3,"max_ts":131,"digest":2596996162,"committed_ts":120}],"generation":7,"meta_generation":4,"owner":"host:4242","updated":"2026-12-03T01:00:00Z","token":"6f1c2a9e0b7d4c3f8a5e1d2c3b4a5968"}}`
	formatMetaV4  = `{"version":4,"crc32c":"d92d490f","body":{"log":"L","checkpoint_ts":100,"resolved_ts":120,"writers":{"w1":2},"spans":{"1":120},"barriers":[],"removed_spans":{},"generation":5,"writer_generations":{"w1":7},"updated":"2026-12-03T01:00:01Z","token":"0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b"}}`
	formatStateV3 = `{"version":3,"crc32c":"718df24a","body":{"log":"L","writer":"w1","epoch":2,"flushed_ts":120,"seq":0,"has_seq":false,"chain_max_ts":0,"digest":0,"spans":[{"span":1,"ts":120}],"fences":[{"epoch":1,"last_seq":3,"max_ts":118,"digest":2596996162}],"generation":7,"meta_generation":4,"owner":"host:4242","updated":"2026-12-03T01:00:00Z","token":"6f1c2a9e0b7d4c3f8a5e1d2c3b4a5968"}}`
	formatMetaV3  = `{"version":3,"crc32c":"d92d490f","body":{"log":"L","checkpoint_ts":100,"resolved_ts":120,"writers":{"w1":2},"spans":{"1":120},"barriers":[],"removed_spans":{},"generation":5,"writer_generations":{"w1":7},"updated":"2026-12-03T01:00:01Z","token":"0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b"}}`
	formatStateV2 = `{"version":2,"crc32c":"22c82b34","body":{"log":"L","writer":"w1","epoch":2,"flushed_ts":120,"seq":0,"has_seq":false,"chain_max_ts":0,"digest":0,"spans":[{"span":1,"ts":120}],"fences":[{"epoch":1,"last_seq":3,"max_ts":118,"digest":2596996162}],"owner":"host:4242","updated":"2026-12-03T01:00:00Z","token":"6f1c2a9e0b7d4c3f8a5e1d2c3b4a5968"}}`
	formatMetaV2  = `{"version":2,"crc32c":"b682c375","body":{"log":"L","checkpoint_ts":100,"resolved_ts":120,"writers":{"w1":2},"spans":{"1":120},"barriers":[],"updated":"2026-12-03T01:00:01Z","token":"0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b"}}`
)

// readFormatMD returns docs/FORMAT.md, which gives the examples above.
func readFormatMD(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "FORMAT.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFormatExamples decodes the examples docs/FORMAT.md gives, byte for
// byte, so that the spec and the code cannot drift apart: the version-4
// objects, which re-encode to the same bytes, and the version-3 and 2
// examples of the releases before, which still read (version 2 as
// generation 0; both with the committed ts normalized: the state's the
// larger of its chain max ts and flushed ts, each fence's its max ts) and
// are written back as version 4.
func TestFormatExamples(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	doc := readFormatMD(t)
	for _, ex := range []string{formatStateV4, formatMetaV4, formatStateV3, formatMetaV3, formatStateV2, formatMetaV2} {
		if !strings.Contains(doc, ex) {
			t.Fatalf("docs/FORMAT.md does not give the example\n%s", ex)
		}
	}
	for _, tc := range []struct {
		name           string
		state, meta    string
		stateGen, mGen uint64
		fence          Fence
	}{
		{"version 4", formatStateV4, formatMetaV4, 7, 5, Fence{Epoch: 1, LastSeq: 3, MaxTs: 131, Digest: 2596996162, CommittedTs: 120}},
		{"version 3", formatStateV3, formatMetaV3, 7, 5, Fence{Epoch: 1, LastSeq: 3, MaxTs: 118, Digest: 2596996162, CommittedTs: 118}},
		{"version 2", formatStateV2, formatMetaV2, 0, 0, Fence{Epoch: 1, LastSeq: 3, MaxTs: 118, Digest: 2596996162, CommittedTs: 118}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := b.Put(ctx, layout.WriterState("L", "w1"), []byte(tc.state), nil); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Put(ctx, layout.Meta("L"), []byte(tc.meta), nil); err != nil {
				t.Fatal(err)
			}
			st, _, err := ReadWriterState(ctx, b, "L", "w1")
			if err != nil {
				t.Fatal(err)
			}
			if st.Epoch != 2 || st.FlushedTs != 120 || st.CommittedTs != 120 || len(st.Fences) != 1 || st.Fences[0] != tc.fence || len(st.Spans) != 1 || st.Owner != "host:4242" || st.Generation != tc.stateGen {
				t.Fatalf("state example decoded to %+v", st)
			}
			m, _, err := ReadMeta(ctx, b, "L")
			if err != nil {
				t.Fatal(err)
			}
			if m.CheckpointTs != 100 || m.ResolvedTs != 120 || m.Writers["w1"] != 2 || m.Spans[1] != 120 || m.Generation != tc.mGen {
				t.Fatalf("meta example decoded to %+v", m)
			}
			if tc.name != "version 4" {
				// Older versions are read, never written: the fields
				// new since are refused there, and the re-encoding is
				// today's version.
				withNew := strings.Replace(tc.state, `"spans"`, `"committed_ts":120,"spans"`, 1)
				if tc.stateGen == 0 {
					withNew = strings.Replace(tc.state, `"owner"`, `"generation":1,"owner"`, 1)
				}
				if _, err := b.Put(ctx, layout.WriterState("L", "w1"), []byte(withNew), nil); err != nil {
					t.Fatal(err)
				}
				if _, _, err := ReadWriterState(ctx, b, "L", "w1"); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("a %s state with a newer field: %v, want ErrCorrupt", tc.name, err)
				}
				for what, got := range map[string][]byte{"state": encodeWriterState(st), "meta": encodeMeta(m)} {
					if !strings.HasPrefix(string(got), fmt.Sprintf(`{"version":%d,`, StateVersion)) {
						t.Fatalf("%s %s re-encoded as %s", tc.name, what, got)
					}
				}
				return
			}
			if got := encodeWriterState(st); string(got) != tc.state {
				t.Fatalf("state example re-encoded to\n%s\nwant\n%s", got, tc.state)
			}
			if got := encodeMeta(m); string(got) != tc.meta {
				t.Fatalf("meta example re-encoded to\n%s\nwant\n%s", got, tc.meta)
			}
		})
	}
}

// delayed answers the first conditional put at once with a failure, and
// stores it only when the next conditional put arrives, just before passing
// that one on: a request still in flight after its caller gave up on it,
// landing between the caller's re-read and its next write.
type delayed struct {
	driver.Driver
	mu   sync.Mutex
	n    int
	held []byte
	opts blob.PutOptions
}

func (d *delayed) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	if opts.IfMatch == "" {
		return d.Driver.Put(ctx, key, r, size, opts)
	}
	d.mu.Lock()
	d.n++
	n := d.n
	d.mu.Unlock()
	switch n {
	case 1:
		data, err := io.ReadAll(r)
		if err != nil {
			return blob.Attrs{}, err
		}
		d.held, d.opts = data, opts
		return blob.Attrs{}, errLost
	case 2:
		if _, err := d.Driver.Put(ctx, key, bytes.NewReader(d.held), int64(len(d.held)), d.opts); err != nil {
			return blob.Attrs{}, fmt.Errorf("the late put: %w", err)
		}
	}
	return d.Driver.Put(ctx, key, r, size, opts)
}

// TestLeaseLateLanding: a put the lease gave up on (the re-read found the
// object unchanged) lands just before the next publication's put, which
// fails its precondition. The lease re-reads, recognises the late write as
// its own, and is not fenced; a retry publishes on top of it.
func TestLeaseLateLanding(t *testing.T) {
	ctx := context.Background()
	d := &delayed{Driver: mem.NewDriver()}
	b := blob.NewBucket(d)
	defer b.Close()
	l, err := AcquireWriter(ctx, b, "log", "w", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.PublishProgress(ctx, Progress{FlushedTs: 10, Seq: 1}); err == nil || errors.Is(err, ErrFenced) {
		t.Fatalf("publish whose put is still in flight: %v", err)
	}
	err = l.PublishProgress(ctx, Progress{FlushedTs: 20, Seq: 2})
	if err == nil || errors.Is(err, ErrFenced) || !blob.IsPreconditionFailed(err) {
		t.Fatalf("publish across the late landing: %v; want its precondition failure, not a fence", err)
	}
	if st := l.State(); st.FlushedTs != 10 || st.Seq != 1 {
		t.Fatalf("lease state %+v: the late write was not adopted", st)
	}
	if err := l.PublishProgress(ctx, Progress{FlushedTs: 20, Seq: 2}); err != nil {
		t.Fatalf("retry: %v", err)
	}
	st, _, err := ReadWriterState(ctx, b, "log", "w")
	if err != nil || st.Epoch != 1 || st.FlushedTs != 20 || st.Seq != 2 {
		t.Fatalf("state %+v, %v", st, err)
	}
}
