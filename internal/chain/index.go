package chain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/segment"
)

// Entry is one object listed under a log's segment prefix.
type Entry struct {
	Key     string
	Size    int64
	ModTime time.Time
	Name    segment.Name // the key, parsed (zero when Err)
	Err     error        // the key is not a segment name of the log
}

// Parse turns a listed object of log logID into an Entry. A key that does
// not parse, or names another log, has Err set.
func Parse(logID string, a blob.Attrs) Entry {
	n, err := segment.ParseName(a.Key)
	if err == nil && n.LogID != logID {
		err = fmt.Errorf("%w: %q belongs to log %q", segment.ErrInvalidName, a.Key, n.LogID)
	}
	return Entry{Key: a.Key, Size: a.Size, ModTime: a.ModTime, Name: n, Err: err}
}

// List lists every object under prefix (a log's or one writer's segment
// prefix), parsed.
func List(ctx context.Context, b *blob.Bucket, logID, prefix string) ([]Entry, error) {
	var out []Entry
	for a, err := range b.List(ctx, prefix) {
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", prefix, err)
		}
		out = append(out, Parse(logID, a))
	}
	return out, nil
}

// EpochKey identifies one writer epoch's chain.
type EpochKey struct {
	Writer string
	Epoch  uint64
}

func (k EpochKey) String() string { return fmt.Sprintf("writer %q epoch %d", k.Writer, k.Epoch) }

// KeyOf is the epoch a segment name belongs to.
func KeyOf(n segment.Name) EpochKey { return EpochKey{n.WriterID, n.Epoch} }

// Index is a listing grouped by writer epoch and seq. Of an active and a
// sealed name of one seq (the two sides of a rename) the sealed one stands.
type Index map[EpochKey]map[uint64]Entry

// NewIndex indexes the entries whose names parse and that accepts admits
// (nil admits all).
func NewIndex(entries []Entry, accepts func(segment.Name) bool) Index {
	ix := Index{}
	for _, e := range entries {
		if e.Err != nil || accepts != nil && !accepts(e.Name) {
			continue
		}
		k := KeyOf(e.Name)
		m := ix[k]
		if m == nil {
			m = map[uint64]Entry{}
			ix[k] = m
		}
		if old, ok := m[e.Name.Seq]; ok && !old.Name.Active {
			continue
		}
		m[e.Name.Seq] = e
	}
	return ix
}

// Has reports whether seq of n's epoch is listed.
func (ix Index) Has(n segment.Name, seq uint64) bool {
	_, ok := ix[KeyOf(n)][seq]
	return ok
}

// Seqs returns the seqs listed of one epoch, ascending.
func Seqs(segs map[uint64]Entry) []uint64 {
	out := make([]uint64, 0, len(segs))
	for s := range segs {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Relists bounds how many times a caller lists again after its listing
// proved stale (Stale): a seq it lacks that a narrower listing finds, or a
// segment listed and gone when read. Then it fails, naming the key.
const Relists = 3

// MissedError is a listing that lacks a segment a listing of its seq alone
// (Probe) finds. The caller lists again (Relists).
type MissedError struct {
	Key    string // the key the narrow listing found
	Prefix string // the narrow listing
}

// Is makes errors.Is(err, ErrIncomplete) true: a listing that keeps
// missing a segment cannot prove a read complete.
func (e *MissedError) Is(target error) bool { return target == ErrIncomplete }

func (e *MissedError) Error() string {
	return fmt.Sprintf("the listing missed %s, which a listing of %s finds", e.Key, e.Prefix)
}

// VanishedError is a segment listed and gone before it was read: GC
// collected it meanwhile, or a rename sealed it. The caller lists again.
type VanishedError struct{ Err error }

func (e *VanishedError) Error() string { return e.Err.Error() }
func (e *VanishedError) Unwrap() error { return e.Err }

// Stale reports whether err says the listing it came from is stale, and a
// new listing may settle it (at most Relists times).
func Stale(err error) bool {
	var m *MissedError
	var v *VanishedError
	return errors.As(err, &m) || errors.As(err, &v)
}

// Exhausted is the error after Relists new listings were all stale: it
// names what the last one missed or lost.
func Exhausted(what string, err error) error {
	return fmt.Errorf("%s: %d listings in a row were stale, the store's listing cannot be trusted to show every segment: %w", what, Relists+1, err)
}

// Probe lists seq of one writer epoch alone: a key there is one a wider
// listing missed (*MissedError); nil proves the seq absent.
func Probe(ctx context.Context, b *blob.Bucket, logID, writer string, epoch, seq uint64) error {
	narrow := segment.SeqPrefix(logID, writer, epoch, seq)
	for a, err := range b.List(ctx, narrow) {
		if err != nil {
			return fmt.Errorf("list %s: %w", narrow, err)
		}
		n, perr := segment.ParseName(a.Key)
		if perr != nil || n.Epoch != epoch || n.Seq != seq {
			continue
		}
		return &MissedError{Key: a.Key, Prefix: narrow}
	}
	return nil
}

// ProbeEpoch lists one writer epoch alone and compares it with have, the
// epoch's segments by seq as a wider listing showed them: a seq there that
// have lacks is one the wider listing missed (*MissedError); nil proves
// that every seq the wider listing lacks is absent, above, below and
// between the seqs it shows. A walk whose conclusions rest on a whole run
// of missing seqs (the writer's recovery) needs this; a proof that fails on
// any one missing seq needs only Probe of that seq.
func ProbeEpoch(ctx context.Context, b *blob.Bucket, logID, writer string, epoch uint64, have map[uint64]Entry) error {
	narrow := layout.WriterSegments(logID, writer) + segment.EpochPrefix(epoch)
	for a, err := range b.List(ctx, narrow) {
		if err != nil {
			return fmt.Errorf("list %s: %w", narrow, err)
		}
		n, perr := segment.ParseName(a.Key)
		if perr != nil || n.Epoch != epoch {
			continue
		}
		if _, ok := have[n.Seq]; !ok {
			return &MissedError{Key: a.Key, Prefix: narrow}
		}
	}
	return nil
}

// ReadHeader reads the header of a listed segment with one ranged read and
// checks it against the name. A segment gone is *VanishedError.
func ReadHeader(ctx context.Context, b *blob.Bucket, e Entry) (segment.Header, []byte, error) {
	data, err := b.ReadRange(ctx, e.Key, 0, segment.HeaderSize)
	if blob.IsNotExist(err) {
		return segment.Header{}, nil, &VanishedError{fmt.Errorf("reader: segment %q vanished between the listing and the read of its header: %w", e.Key, err)}
	}
	if err != nil {
		return segment.Header{}, nil, fmt.Errorf("reader: read the header of %q: %w", e.Key, err)
	}
	h, err := segment.DecodeHeader(data, e.Key)
	if err != nil {
		return segment.Header{}, nil, err
	}
	if err := e.Name.Check(e.Key, h, nil); err != nil {
		return segment.Header{}, nil, err
	}
	return h, data, nil
}
