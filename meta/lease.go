package meta

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/segment"
)

// StateVersion is the version of the objects this package stores (the
// writer state and the log meta), carried in their envelope (see
// docs/FORMAT.md). Version 4 added the committed ts (a writer state's and
// each fence's: see WriterState.CommittedTs); version 3 added the
// generations (see Freshness in the package doc). Versions 2 and 3 still
// read (generation 0 for version 2; a committed ts equal to the chain max
// ts, which is where readers of those versions cut a fenced epoch) and are
// never written again. A reader refuses any other version by name; version
// 1 was never released and is not readable.
const StateVersion = 4

// oldestStateVersion is the oldest version still read.
const oldestStateVersion = 2

// WriterState is the one small object per writer that holds its lease and
// its progress. Every change to it is a compare-and-swap on its ETag, so a
// process that lost the lease (a zombie) can never publish progress: its next
// write fails with ErrFenced.
type WriterState struct {
	// Version is the envelope's version (StateVersion); it is not part of
	// the body.
	Version  int    `json:"-"`
	LogID    string `json:"log"`
	WriterID string `json:"writer"`
	// Epoch increases by one each time a process opens the writer ID. Segment
	// names carry it.
	Epoch uint64 `json:"epoch"`
	// FlushedTs is the writer's flushed resolved ts: every event of every
	// span of the writer with commit ts ≤ FlushedTs is durable in segments
	// of this epoch with seq ≤ Seq, or of earlier epochs (accepted by Fences).
	FlushedTs uint64 `json:"flushed_ts"`
	// Seq is the highest segment sequence number of this epoch that holds
	// flushed data (0 with HasSeq false: none yet).
	Seq    uint64 `json:"seq"`
	HasSeq bool   `json:"has_seq"`
	// ChainMaxTs is the largest commit ts held by this epoch's segments up
	// to and including Seq, and Digest the header CRC of segment Seq (see
	// segment's chain link). With them a reader proves that the epoch's
	// chain ends where the writer published it, and that segments missing
	// below it held nothing above a given ts.
	ChainMaxTs uint64 `json:"chain_max_ts"`
	Digest     uint32 `json:"digest"`
	// CommittedTs is the epoch's committed ts as its newest published
	// progress frame says (segment.Progress.CommittedTs): events of the
	// epoch above it may be stored (staged) but are not part of the log.
	// At least FlushedTs.
	CommittedTs uint64 `json:"committed_ts" since:"4"`
	// Spans is the flushed resolved ts of each span the writer owns, sorted
	// by span. The coordinator tracks spans across owners with it: a span's
	// effective flushed ts is the highest any of its owners made durable.
	Spans []segment.SpanTs `json:"spans"`
	// Fences record, for each earlier epoch that published a segment, the
	// highest sequence number it published before it was fenced. Segments of
	// that epoch with a higher seq were written by a zombie after the fence:
	// readers ignore them. An earlier epoch with no fence published nothing,
	// and readers ignore all its segments.
	Fences []Fence `json:"fences"`
	// Generation grows by one with every write of the object, across
	// epochs (1 when created; 0 for a version-2 object). A copy with a
	// lower generation than one already seen is stale (ErrStale).
	Generation uint64 `json:"generation" since:"3"`
	// MetaGeneration is the newest generation of the log's meta object the
	// writer had read when it wrote this version: a meta object older than
	// it is stale.
	MetaGeneration uint64 `json:"meta_generation" since:"3"`
	// Owner describes the process holding the lease (host and pid), for
	// operators. Informational only.
	Owner   string    `json:"owner"`
	Updated time.Time `json:"updated"`
	// Token is the random token of the write that stored this version:
	// after a write whose answer was lost, finding its token proves it
	// landed.
	Token string `json:"token"`
}

// Progress is what a writer publishes after a durable flush: the content
// of the flush's progress frame (segment.Progress) and where it lies in the
// epoch's chain (Seq, Digest).
type Progress struct {
	FlushedTs   uint64           // the writer's flushed resolved ts (min over its spans)
	Seq         uint64           // the highest segment seq holding flushed data
	ChainMaxTs  uint64           // the largest commit ts in the epoch's segments up to Seq
	CommittedTs uint64           // the epoch's committed ts (segment.Progress.CommittedTs), at least FlushedTs
	Digest      uint32           // the header CRC of segment Seq
	Spans       []segment.SpanTs // per-span flushed resolved ts; nil keeps the published ones
}

// Fence is the last sequence number an earlier epoch of a writer published.
type Fence struct {
	Epoch   uint64 `json:"epoch"`
	LastSeq uint64 `json:"last_seq"`
	// MaxTs and Digest are the epoch's last published ChainMaxTs and
	// Digest: where its chain must end, and what it held at most.
	MaxTs  uint64 `json:"max_ts"`
	Digest uint32 `json:"digest"`
	// CommittedTs is the epoch's committed ts at the fence: readers leave
	// out the epoch's events above it (staged, never committed). A fence
	// recorded by a version-2 or 3 state has none and reads as MaxTs, the
	// cut those versions made.
	CommittedTs uint64 `json:"committed_ts" since:"4"`
}

// Accepts reports whether a segment of this writer with the given name is
// part of the log: a segment of the current epoch, or of an earlier epoch at
// or below that epoch's fence.
func (s *WriterState) Accepts(n segment.Name) bool {
	if n.Epoch == s.Epoch {
		return true
	}
	if n.Epoch > s.Epoch {
		// Written by an epoch newer than this state: the state is stale
		// (read before a takeover). Accept; a fresh read decides.
		return true
	}
	f, ok := s.Fence(n.Epoch)
	return ok && n.Seq <= f.LastSeq
}

// Fence returns the fence of an earlier epoch, and false for an epoch that
// has none (the current one, a newer one, or one replaced before it
// published anything).
func (s *WriterState) Fence(epoch uint64) (Fence, bool) {
	for _, f := range s.Fences {
		if f.Epoch == epoch {
			return f, true
		}
	}
	return Fence{}, false
}

// ReadWriterState reads and decodes a writer's state object, and its ETag
// for compare-and-swap: the body and the ETag are of one version (see
// readVersion). A damaged object is an error naming the key that matches
// ErrCorrupt or ErrUnsupportedVersion.
func ReadWriterState(ctx context.Context, b *blob.Bucket, logID, writerID string) (*WriterState, string, error) {
	return readWriterState(ctx, b, logID, writerID, true)
}

func readWriterState(ctx context.Context, b *blob.Bucket, logID, writerID string, withETag bool) (*WriterState, string, error) {
	key := layout.WriterState(logID, writerID)
	data, etag, err := readVersion(ctx, b, key, withETag)
	if err != nil {
		return nil, "", err
	}
	st, err := decodeWriterState(key, data)
	if err != nil {
		return nil, "", err
	}
	if st.LogID != logID || st.WriterID != writerID {
		return nil, "", fmt.Errorf("meta: %s: holds log %q writer %q: %w", key, st.LogID, st.WriterID, ErrCorrupt)
	}
	return st, etag, nil
}

// decodeWriterState decodes a stored writer state object and checks the
// rules a valid one keeps.
func decodeWriterState(key string, data []byte) (*WriterState, error) {
	body, version, err := unseal(key, data)
	if err != nil {
		return nil, err
	}
	var st WriterState
	if err := decodeStrict(key, body, &st, version); err != nil {
		return nil, err
	}
	st.Version = version
	if version < 4 {
		// What readers of these versions cut a fenced epoch at: no event
		// was ever staged above it.
		st.CommittedTs = max(st.ChainMaxTs, st.FlushedTs)
		for i := range st.Fences {
			st.Fences[i].CommittedTs = st.Fences[i].MaxTs
		}
	}
	bad := func(format string, args ...any) (*WriterState, error) {
		return nil, fmt.Errorf("meta: %s: %s: %w", key, fmt.Sprintf(format, args...), ErrCorrupt)
	}
	switch {
	case !validToken(st.Token):
		return bad("write token %q is not 32 lowercase hex digits", st.Token)
	case st.Epoch == 0:
		return bad("epoch 0")
	case !st.HasSeq && st.Seq != 0:
		return bad("seq %d without has_seq", st.Seq)
	case version >= 3 && st.Generation == 0:
		return bad("generation 0")
	case st.CommittedTs < st.FlushedTs:
		return bad("committed ts %d below the flushed ts %d", st.CommittedTs, st.FlushedTs)
	}
	for i, f := range st.Fences {
		if f.Epoch >= st.Epoch || i > 0 && f.Epoch <= st.Fences[i-1].Epoch {
			return bad("fence %d (epoch %d) out of order below epoch %d", i, f.Epoch, st.Epoch)
		}
	}
	for i := 1; i < len(st.Spans); i++ {
		if st.Spans[i].Span <= st.Spans[i-1].Span {
			return bad("spans not sorted at %d", i)
		}
	}
	if err := checkStateRules(key, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// encodeWriterState is the stored form of st.
func encodeWriterState(st *WriterState) []byte {
	body, err := json.Marshal(st)
	if err != nil {
		panic(fmt.Sprintf("meta: encode writer state: %v", err)) // plain data: cannot fail
	}
	return seal(body)
}

// ListOptions configure ListWriterStates. Nil means defaults.
type ListOptions struct {
	// SkipBadName, when set, is told of each key under the writer states
	// that is not a writer ID, and the listing goes on past it. When nil,
	// such a key is an error naming it: a state whose name was damaged
	// would leave its writer unfenced and its chain unproven.
	SkipBadName func(key string, err error)
}

// ErrStateGone matches the error of a writer state that a listing returned
// and a read then did not find while the log is not being deleted. Writer
// states are removed only with their log (after its delete marker), so the
// store's listing and reads disagree, or a state was removed by hand; its
// writer would read as one that never took a lease (unfenced), which is not
// something to pass by.
var ErrStateGone = errors.New("meta: a writer state listed is gone")

// ListWriterStates reads the state of every writer of a log, by writer ID.
// It reads each body once (no ETag): it is for readers and the coordinator,
// which never write the objects back. A key that is not a writer ID is an
// error naming it (see ListOptions.SkipBadName); a state listed and gone
// when read is ErrDeleting when the log's delete marker is there, and
// ErrStateGone naming the key otherwise.
func ListWriterStates(ctx context.Context, b *blob.Bucket, logID string, opts *ListOptions) (map[string]*WriterState, error) {
	var o ListOptions
	if opts != nil {
		o = *opts
	}
	out := map[string]*WriterState{}
	prefix := layout.Writers(logID)
	for a, err := range b.List(ctx, prefix) {
		if err != nil {
			return nil, fmt.Errorf("meta: list the writer states of log %q: %w", logID, err)
		}
		id := a.Key[len(prefix):]
		if err := segment.ValidateID(id); err != nil {
			if o.SkipBadName == nil {
				return nil, fmt.Errorf("meta: key %q under the writer states is not a writer's state (a damaged name?): %w", a.Key, err)
			}
			o.SkipBadName(a.Key, err)
			continue
		}
		st, _, err := readWriterState(ctx, b, logID, id, false)
		if blob.IsNotExist(err) {
			if derr := checkNotDeleting(ctx, b, logID); derr != nil {
				return nil, derr
			}
			return nil, fmt.Errorf("%w: %s was listed, and reading it finds nothing (the log has no delete marker)", ErrStateGone, a.Key)
		}
		if err != nil {
			return nil, err
		}
		out[id] = st
	}
	return out, nil
}

// Lease is a writer's hold on its writer ID for one epoch. It is safe for
// concurrent use.
//
// Every write of the lease is a compare-and-swap carrying a fresh token.
// When a write's outcome is unknown (its answer was lost, or a later write
// failed its precondition although the earlier one may have landed), the
// lease re-reads the state object before it decides anything: its token
// there is success; a newer epoch there is ErrFenced, sticky (and the
// only way to it); the lease's own last version there means the write did
// not land (yet), and the lease stays usable; anything else is an error
// naming the key (ErrForeignWrite). Until a re-read settles it, the next
// call settles first.
type Lease struct {
	b    *blob.Bucket
	key  string
	mu   sync.Mutex
	st   WriterState
	etag string
	// pending are the lease's writes whose outcome is open, by token. All
	// were conditioned on etag, so at most one of them can ever land, and
	// none once the object holds another version.
	pending map[string]bool
	// fenced is sticky: once a newer epoch is proven, the lease is gone for
	// good.
	fenced error
	// metaRead is when the lease last read the meta object's generation
	// (see metaGeneration).
	metaRead time.Time
	// Previous is the state of the writer ID before this lease took it
	// (nil for a new writer): where its last epoch's progress stood.
	Previous *WriterState
}

// FencedError is the error of a lease that lost its writer ID to a newer
// epoch. It matches ErrFenced, and carries the state that proves it.
type FencedError struct {
	Key      string
	WriterID string
	Epoch    uint64 // the lease's epoch
	// Newer is the state read with a newer epoch: its fences say what of
	// the lease's epoch the log keeps.
	Newer *WriterState
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("meta: writer %s epoch %d lost its lease: %s holds epoch %d: %v", e.WriterID, e.Epoch, e.Key, e.Newer.Epoch, ErrFenced)
}

// Is makes the error match ErrFenced.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// Fence returns the fence the newer state recorded for the lease's epoch:
// the last seq of that epoch the log keeps. Without one (the epoch had
// published nothing when it was replaced) ok is false.
func (e *FencedError) Fence() (f Fence, ok bool) {
	for _, f := range e.Newer.Fences {
		if f.Epoch == e.Epoch {
			return f, true
		}
	}
	return Fence{}, false
}

// AcquireOptions configure AcquireWriter. Nil means defaults.
type AcquireOptions struct {
	// Owner describes this process in the state object; default host:pid.
	Owner string
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Durable finds what the epoch being replaced made durable beyond what
	// it published: a writer acknowledges a flush once its data and a
	// progress record are durable in its segments, and publishes the state
	// object later (package writer: progress frames). It is called with
	// the state read, before each compare-and-swap attempt, and returns
	// nil when nothing durable is newer than the published progress. The
	// fence recorded for prev's epoch and the new epoch's starting
	// progress (flushed ts, spans) then come from what it returns. Its
	// Seq may not be below prev's published Seq.
	Durable func(ctx context.Context, prev *WriterState) (*Progress, error)
}

// AcquireWriter takes the lease of writerID in logID: it creates the writer's
// state object (if-not-exists) at epoch 1, or increments the epoch of the
// existing one by compare-and-swap, recording a fence for the epoch it
// replaces. Any process still holding the old epoch is fenced from then on.
// Concurrent acquirers race by conditional write; the losers retry on the
// new state, so each gets its own epoch and the last one holds the lease.
//
// Retries are bounded (with backoff and jitter): after losing the
// compare-and-swap 8 times in a row it fails with ErrContended, naming the
// key. A write whose outcome is unknown is settled by re-reading: finding
// its token is success; otherwise its error is returned (should it still
// land later, it made an epoch nobody holds, which the next acquirer
// fences like any other).
func AcquireWriter(ctx context.Context, b *blob.Bucket, logID, writerID string, opts *AcquireOptions) (*Lease, error) {
	if err := segment.ValidateID(logID); err != nil {
		return nil, fmt.Errorf("meta: log ID: %w", err)
	}
	if err := segment.ValidateID(writerID); err != nil {
		return nil, fmt.Errorf("meta: writer ID: %w", err)
	}
	var o AcquireOptions
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Owner == "" {
		host, _ := os.Hostname()
		o.Owner = host + ":" + strconv.Itoa(os.Getpid())
	}
	if err := checkNotDeleting(ctx, b, logID); err != nil {
		return nil, err
	}
	key := layout.WriterState(logID, writerID)
	metaGen, err := acquireWitnesses(ctx, b, logID, writerID)
	if err != nil {
		return nil, err
	}
	witnessRetried := false
	// ours maps the token of each attempt to the state it replaced.
	ours := map[string]*WriterState{}
	adopt := func(st *WriterState, etag string) *Lease {
		return &Lease{b: b, key: key, st: *st, etag: etag, Previous: ours[st.Token], metaRead: time.Now()}
	}
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, attempt-1); err != nil {
				return nil, fmt.Errorf("meta: acquire writer %s: %w", key, err)
			}
		}
		prev, etag, err := ReadWriterState(ctx, b, logID, writerID)
		if err != nil && !blob.IsNotExist(err) {
			return nil, err
		}
		if prev != nil {
			if _, ok := ours[prev.Token]; ok {
				return adopt(prev, etag), nil // an earlier attempt landed
			}
		}
		if err := metaGen.check(ctx, b, prev); err != nil {
			if !witnessRetried {
				// A takeover racing this one writes a newer state and its
				// segments between the reads: read the state again once.
				witnessRetried = true
				continue
			}
			return nil, err
		}
		next := WriterState{Version: StateVersion, LogID: logID, WriterID: writerID, Epoch: 1, Owner: o.Owner, Updated: o.Now().UTC(), Token: newToken(),
			Generation: 1, MetaGeneration: metaGen.gen}
		put := &blob.PutOptions{IfNotExist: true}
		if prev != nil {
			next.Epoch = prev.Epoch + 1
			next.Generation = prev.Generation + 1
			next.MetaGeneration = max(metaGen.gen, prev.MetaGeneration)
			next.Fences = slices.Clone(prev.Fences)
			// The new epoch starts where the old one's durable progress
			// stood: that data stays in the log under the old epoch's fence.
			// What it made durable after its last publication counts too:
			// it may have acknowledged it.
			last := Progress{FlushedTs: prev.FlushedTs, Seq: prev.Seq, ChainMaxTs: prev.ChainMaxTs, CommittedTs: prev.CommittedTs, Digest: prev.Digest, Spans: prev.Spans}
			has := prev.HasSeq
			if o.Durable != nil {
				d, err := o.Durable(ctx, prev)
				if err != nil {
					return nil, fmt.Errorf("meta: acquire writer %s: the durable progress of epoch %d: %w", key, prev.Epoch, err)
				}
				if d != nil {
					if prev.HasSeq && d.Seq < prev.Seq {
						return nil, fmt.Errorf("meta: acquire writer %s: epoch %d's durable progress is in seq %d, below the seq %d it published", key, prev.Epoch, d.Seq, prev.Seq)
					}
					last, has = *d, true
					if last.Spans == nil {
						last.Spans = prev.Spans
					}
				}
			}
			if has {
				next.Fences = append(next.Fences, Fence{Epoch: prev.Epoch, LastSeq: last.Seq, MaxTs: last.ChainMaxTs, Digest: last.Digest,
					CommittedTs: max(last.CommittedTs, last.FlushedTs)})
			}
			next.FlushedTs = last.FlushedTs
			// The new epoch has committed what it starts from (held by the
			// earlier epochs), and nothing of its own yet.
			next.CommittedTs = last.FlushedTs
			next.Spans = last.Spans
			put = &blob.PutOptions{IfMatch: etag}
		}
		ours[next.Token] = prev
		attrs, err := b.Put(ctx, key, encodeWriterState(&next), put)
		if err == nil {
			return adopt(&next, attrs.ETag), nil
		}
		if definitive(err) {
			return nil, err
		}
		if blob.IsPreconditionFailed(err) {
			continue // another acquirer won this round (or an attempt of ours landed): the next read says which
		}
		// The outcome is unknown: settle it.
		st, etag, rerr := ReadWriterState(ctx, b, logID, writerID)
		switch {
		case rerr == nil && st.Token == next.Token:
			return adopt(st, etag), nil
		case rerr != nil && !blob.IsNotExist(rerr):
			return nil, fmt.Errorf("meta: acquire writer %s: put failed and re-reading it failed too (the put may still land): %w", key, errors.Join(err, rerr))
		}
		return nil, err
	}
	return nil, fmt.Errorf("meta: acquire writer %s: compare-and-swap on %s lost %d times in a row; the store may serve stale reads after an overwrite: %w", writerID, key, maxAttempts, ErrContended)
}

// State returns a copy of the lease's current state.
func (l *Lease) State() WriterState {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.st
	st.Fences = slices.Clone(st.Fences)
	st.Spans = slices.Clone(st.Spans)
	return st
}

// Epoch is the lease's epoch.
func (l *Lease) Epoch() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st.Epoch
}

// PublishProgress records the writer's progress by compare-and-swap: if
// another process has taken the writer ID (a newer epoch is proven by a
// read), it fails with a *FencedError matching ErrFenced, and so does
// every later call. A write whose outcome is unknown is settled by a
// re-read as the Lease doc says; an error that is not ErrFenced leaves the
// lease usable, and a later call settles what is open before it writes. A
// seq below the published one is an error. The flushed ts may fall: a
// writer that takes on a span behind its own progress (a span moved to it at
// the log's checkpoint) honestly reports the lower ts until the span catches
// up; the coordinator keeps the global watermark from falling. Publishing
// what is already published writes nothing.
func (l *Lease) PublishProgress(ctx context.Context, p Progress) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fenced != nil {
		return l.fenced
	}
	if len(l.pending) > 0 {
		if _, err := l.settle(ctx); err != nil {
			return err
		}
	}
	if l.st.HasSeq && p.Seq < l.st.Seq {
		return fmt.Errorf("meta: writer %s: segment seq %d is below the published %d", l.st.WriterID, p.Seq, l.st.Seq)
	}
	spans := l.st.Spans
	if p.Spans != nil {
		spans = slices.Clone(p.Spans)
		slices.SortFunc(spans, func(a, b segment.SpanTs) int { return cmp.Compare(a.Span, b.Span) })
	}
	// An epoch's committed ts never falls: a fence cuts the epoch at it.
	committed := max(p.CommittedTs, p.FlushedTs, l.st.CommittedTs)
	if p.FlushedTs == l.st.FlushedTs && l.st.HasSeq && p.Seq == l.st.Seq && p.ChainMaxTs == l.st.ChainMaxTs && committed == l.st.CommittedTs && p.Digest == l.st.Digest && slices.Equal(spans, l.st.Spans) {
		return nil
	}
	next := l.st
	next.FlushedTs, next.Seq, next.HasSeq, next.Spans, next.Updated = p.FlushedTs, p.Seq, true, spans, time.Now().UTC()
	next.ChainMaxTs, next.Digest, next.CommittedTs = p.ChainMaxTs, p.Digest, committed
	next.Token = newToken()
	next.Generation = l.st.Generation + 1
	next.MetaGeneration = l.metaGeneration(ctx, !slices.EqualFunc(spans, l.st.Spans, func(a, b segment.SpanTs) bool { return a.Span == b.Span }))
	if l.pending == nil {
		l.pending = map[string]bool{}
	}
	l.pending[next.Token] = true
	attrs, err := l.b.Put(ctx, l.key, encodeWriterState(&next), &blob.PutOptions{IfMatch: l.etag})
	if err == nil {
		l.st, l.etag, l.pending = next, attrs.ETag, nil
		return nil
	}
	if definitive(err) {
		// Refused: nothing became visible.
		delete(l.pending, next.Token)
		return err
	}
	landed, serr := l.settle(ctx)
	switch {
	case serr != nil && errors.Is(serr, ErrFenced):
		return serr
	case serr != nil:
		return fmt.Errorf("meta: writer %s epoch %d: the put of %s failed and its outcome is still open: %w", l.st.WriterID, l.st.Epoch, l.key, errors.Join(err, serr))
	case landed == next.Token:
		return nil
	}
	// Not this write: an earlier one landed (this progress is not
	// published yet), or nothing did. Either way the lease is usable and a
	// retry can succeed.
	return err
}

// settle re-reads the state object to decide the writes whose outcome is
// open, and returns the token of the one that landed ("" for none). It is
// called with l.mu held. A newer epoch fences the lease (sticky); an error
// that does not match ErrFenced leaves everything open.
func (l *Lease) settle(ctx context.Context) (string, error) {
	st, etag, err := ReadWriterState(ctx, l.b, l.st.LogID, l.st.WriterID)
	if err != nil {
		return "", fmt.Errorf("meta: writer %s epoch %d: re-read %s: %w", l.st.WriterID, l.st.Epoch, l.key, err)
	}
	switch {
	case st.Epoch > l.st.Epoch:
		l.fenced = &FencedError{Key: l.key, WriterID: l.st.WriterID, Epoch: l.st.Epoch, Newer: st}
		l.pending = nil
		return "", l.fenced
	case st.Epoch < l.st.Epoch || st.Generation < l.st.Generation:
		// Older than what this lease wrote: a restored version or a
		// lagging read. Nothing is decided; the next call reads again.
		return "", &StaleError{Key: l.key, Got: st.Generation, Witness: "this writer's lease", Want: l.st.Generation,
			Detail: fmt.Sprintf("it wrote epoch %d generation %d; the read holds epoch %d", l.st.Epoch, l.st.Generation, st.Epoch)}
	case st.Epoch == l.st.Epoch && l.pending[st.Token]:
		l.st, l.etag, l.pending = *st, etag, nil
		return st.Token, nil
	case st.Epoch == l.st.Epoch && st.Token == l.st.Token && etag == l.etag:
		return "", nil
	case st.Epoch == l.st.Epoch && st.Token == l.st.Token:
		// The lease's own version under another ETag: the ETag may be that
		// of a pending write whose body the read did not return yet, so
		// the pair is unproven. Nothing is decided.
		return "", &StaleError{Key: l.key, Got: st.Generation, Witness: "this writer's lease", Want: l.st.Generation + 1,
			Detail: fmt.Sprintf("the read paired the body it wrote last with another ETag (%s, not %s): the body may lag a newer version", etag, l.etag)}
	}
	return "", fmt.Errorf("meta: %s holds epoch %d with token %s, not this lease's epoch %d version (token %s) nor a pending write of it: %w", l.key, st.Epoch, st.Token, l.st.Epoch, l.st.Token, ErrForeignWrite)
}

// Check verifies that the lease is still held, by reading the state object
// (which also settles a write whose outcome was open). It fails with
// ErrFenced only when a newer epoch is there. It costs one read;
// writers call it before committing a segment on stores where a zombie's
// segment would otherwise cost a reader work.
func (l *Lease) Check(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fenced != nil {
		return l.fenced
	}
	_, err := l.settle(ctx)
	return err
}

// metaRefresh is how often a lease reads the meta object's generation into
// its state (MetaGeneration), besides at acquire and when its spans change:
// a meta object older than that is stale, whoever reads it.
const metaRefresh = 5 * time.Second

// metaGeneration returns the MetaGeneration for the lease's next write: the
// meta object's generation read again when due (now, or metaRefresh after
// the last read), else the one held. A failed read keeps the one held: it
// only weakens a cross-check, and the publication must not wait on it.
// Called with l.mu held.
func (l *Lease) metaGeneration(ctx context.Context, now bool) uint64 {
	if !now && time.Since(l.metaRead) < metaRefresh {
		return l.st.MetaGeneration
	}
	// Due again only metaRefresh later, read or not: a store that fails
	// the read costs one attempt per refresh, not one per publication.
	l.metaRead = time.Now()
	m, _, err := readMeta(ctx, l.b, l.st.LogID, false)
	if err != nil {
		return l.st.MetaGeneration
	}
	return max(l.st.MetaGeneration, m.Generation)
}

// witnesses is what AcquireWriter learns of a writer before it takes the
// next epoch, to refuse a stale state: the meta object's record of the
// writer, and the newest epoch named by its segments.
type witnesses struct {
	logID, writerID string
	gen             uint64 // the meta object's generation (0: none)
	stateGen        uint64 // the writer's state generation it accounted
	epoch           uint64 // the writer's epoch when the coordinator last saw it live
}

// acquireWitnesses reads the meta object (one request): its generation
// goes into the new state, and its record of the writer into the checks.
func acquireWitnesses(ctx context.Context, b *blob.Bucket, logID, writerID string) (*witnesses, error) {
	w := &witnesses{logID: logID, writerID: writerID}
	m, _, err := readMeta(ctx, b, logID, false)
	switch {
	case blob.IsNotExist(err):
		return w, nil
	case err != nil:
		return nil, fmt.Errorf("meta: acquire writer %s: read the meta object to check the writer's state against: %w", writerID, err)
	}
	w.gen, w.stateGen, w.epoch = m.Generation, m.WriterGenerations[writerID], m.Writers[writerID]
	return w, nil
}

// check refuses prev, the writer state read (nil: none), when another
// object proves a newer one: the meta object accounted a newer generation
// or saw a newer epoch, or a segment of the writer names an epoch at or
// above the one the lease would take. Taking the next epoch from a stale
// state would reuse an epoch number, after which two epochs' chains share
// names. It costs one listing request.
func (w *witnesses) check(ctx context.Context, b *blob.Bucket, prev *WriterState) error {
	key := layout.WriterState(w.logID, w.writerID)
	metaKey := layout.Meta(w.logID)
	var gen, epoch uint64
	if prev != nil {
		gen, epoch = prev.Generation, prev.Epoch
	}
	switch {
	case w.stateGen > gen:
		return &StaleError{Key: key, Got: gen, Witness: metaKey, Want: w.stateGen,
			Detail: fmt.Sprintf("meta generation %d accounted that generation of the writer's state (a state read as missing has generation 0)", w.gen)}
	case w.epoch > epoch:
		return &StaleError{Key: key, Got: gen, Witness: metaKey, Want: max(w.stateGen, gen+1),
			Detail: fmt.Sprintf("the state read holds epoch %d, and meta generation %d saw the writer live at epoch %d", epoch, w.gen, w.epoch)}
	}
	// Segments of this epoch or newer: names sort by epoch, so one page
	// from past every name of the state's epoch shows the newest.
	prefix := layout.WriterSegments(w.logID, w.writerID)
	opts := blob.ListOptions{StartAfter: prefix + segment.EpochPrefix(epoch) + "~", PageSize: 1}
	if prev == nil {
		opts.StartAfter = ""
	}
	page, err := b.ListPage(ctx, prefix, opts)
	if err != nil {
		return fmt.Errorf("meta: acquire writer %s: list its segments of newer epochs than its state's: %w", w.writerID, err)
	}
	if len(page.Objects) > 0 {
		k := page.Objects[0].Key
		n, err := segment.ParseName(k)
		if err != nil {
			return fmt.Errorf("meta: acquire writer %s: %w", w.writerID, err)
		}
		return &StaleError{Key: key, Got: gen, Witness: k, Want: gen + 1,
			Detail: fmt.Sprintf("the state read holds epoch %d, and the segment was written by epoch %d", epoch, n.Epoch)}
	}
	return nil
}
