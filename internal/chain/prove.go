package chain

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
)

// ErrIncomplete matches every *Error: the log cannot prove that a read
// holds every event its writers published. (reader.ErrIncomplete is it.)
var ErrIncomplete = errors.New("reader: the log is incomplete")

// Error reports a writer epoch whose chain of segments does not prove
// completeness: a segment missing (or not listed) where the chain needs it,
// a chain that ends short of the seq its writer published, or a link or
// digest that names another segment than the one found. (reader.ChainError
// is it.)
type Error struct {
	Writer string
	Epoch  uint64
	// Seq is the seq missing or at fault; LastSeq the last of a run of
	// missing seqs (Seq when one).
	Seq, LastSeq uint64
	// Key is the object at fault, or for a missing segment the key it is
	// expected under (a pattern: its ts range is not known).
	Key    string
	Detail string
}

func (e *Error) Error() string { return "reader: " + e.Detail }

// Is makes errors.Is(err, ErrIncomplete) true.
func (e *Error) Is(target error) bool { return target == ErrIncomplete }

// Errorf is an *Error about the chain of writer epoch k at seq.
func Errorf(k EpochKey, seq, last uint64, key, format string, args ...any) *Error {
	return &Error{Writer: k.Writer, Epoch: k.Epoch, Seq: seq, LastSeq: last, Key: key,
		Detail: fmt.Sprintf("chain of writer %q epoch %d ", k.Writer, k.Epoch) + fmt.Sprintf(format, args...)}
}

// ExpectedKey is the key pattern of a missing segment: its name up to the
// ts range, which only the segment itself knows.
func ExpectedKey(logID, writer string, epoch, seq uint64) string {
	return segment.SeqPrefix(logID, writer, epoch, seq) + "-*" + segment.SealedExt
}

// Req is what one writer epoch must prove: that its accepted segments
// with seq ≤ P form a gapless chain from the first one a read needs up to
// P. Strict requirements come from a writer state (its current epoch's
// published seq, or a fence); the others from the listing alone (a writer
// without a state object: P is the highest seq listed), which cannot tell a
// missing last segment from one never written.
type Req struct {
	EpochKey
	P      uint64
	MaxTs  uint64 // the largest commit ts of the chain up to P
	Digest uint32 // the header CRC of segment P (strict only)
	Strict bool
	Source string // where P comes from, for messages
}

// Reqs derives the requirements from the writer states (published seqs,
// fences) and, for writers without a state, from the index.
func Reqs(logID string, states map[string]*meta.WriterState, ix Index) []Req {
	var out []Req
	for id, st := range states {
		key := layout.WriterState(logID, id)
		if st.HasSeq {
			out = append(out, Req{EpochKey: EpochKey{id, st.Epoch}, P: st.Seq, MaxTs: st.ChainMaxTs, Digest: st.Digest, Strict: true,
				Source: fmt.Sprintf("the seq %d published in %s", st.Seq, key)})
		}
		for _, f := range st.Fences {
			out = append(out, Req{EpochKey: EpochKey{id, f.Epoch}, P: f.LastSeq, MaxTs: f.MaxTs, Digest: f.Digest, Strict: true,
				Source: fmt.Sprintf("the seq %d of the fence of epoch %d in %s", f.LastSeq, f.Epoch, key)})
		}
	}
	for k, segs := range ix {
		if states[k.Writer] != nil {
			// Epochs newer than the state were taken after it was read;
			// what they publish is above the range the state allowed.
			// Older ones without a fence published nothing.
			continue
		}
		p, found := uint64(0), false
		for seq, e := range segs {
			// An active segment shorter than a header was created and
			// not yet written (or torn before its header was durable): it
			// holds nothing, and has no link to prove.
			if !e.Name.Active || e.Size >= segment.HeaderSize {
				p, found = max(p, seq), true
			}
		}
		if !found {
			continue
		}
		out = append(out, Req{EpochKey: k, P: p, MaxTs: math.MaxUint64,
			Source: fmt.Sprintf("the highest seq listed (%d; the writer has no state object, so a lost last segment cannot be told from one never written)", p)})
	}
	slices.SortFunc(out, func(a, b Req) int {
		return cmp.Or(cmp.Compare(a.Writer, b.Writer), cmp.Compare(a.Epoch, b.Epoch))
	})
	return out
}

// HeaderFunc returns the header of a listed segment.
type HeaderFunc func(e Entry) (segment.Header, error)

// ProbeFunc lists one seq of the epoch being checked alone, before a seq
// missing from the listing is held against the chain: *MissedError when
// the listing missed it (the caller lists again), nil when it is absent.
// A nil ProbeFunc trusts the listing.
type ProbeFunc func(k EpochKey, seq uint64) error

// Check applies the completeness rule to one requirement for a read above
// start, and returns what is wrong with the chain. err is an error that is
// not a finding (an I/O error, a vanished object, a listing that missed a
// segment). With digest, the digest of a strict requirement is compared
// when the bottom of the run is its published segment.
func Check(logID string, rq Req, segs map[uint64]Entry, start uint64, header HeaderFunc, probe ProbeFunc, digest bool) (problems []*Error, err error) {
	if rq.Strict && rq.MaxTs <= start {
		return nil, nil // every event of the epoch's chain is at or below start
	}
	bad := func(seq, last uint64, key, format string, args ...any) {
		problems = append(problems, Errorf(rq.EpochKey, seq, last, key, format, args...))
	}
	absent := func(seq uint64) error {
		if probe == nil {
			return nil
		}
		return probe(rq.EpochKey, seq)
	}
	if _, ok := segs[rq.P]; !ok {
		top, found := uint64(0), false
		for seq := range segs {
			if seq < rq.P && (!found || seq > top) {
				top, found = seq, true
			}
		}
		first := top + 1
		if !found {
			first = rq.P
		}
		if err := absent(first); err != nil {
			return nil, err
		}
		want := ExpectedKey(logID, rq.Writer, rq.Epoch, rq.P)
		if !found {
			bad(rq.P, rq.P, want, "has no segment listed at or below %s, yet it holds commit ts up to %d, above the read's start %d; missing %s",
				rq.Source, rq.MaxTs, start, want)
			return problems, nil
		}
		bad(top+1, rq.P, ExpectedKey(logID, rq.Writer, rq.Epoch, top+1), "ends at seq %d short of %s; missing seqs %d..%d: %s up to %s",
			top, rq.Source, top+1, rq.P, ExpectedKey(logID, rq.Writer, rq.Epoch, top+1), want)
		return problems, nil
	}
	m := rq.P
	for m > 0 {
		if _, ok := segs[m-1]; !ok {
			break
		}
		m--
	}
	e := segs[m]
	h, err := header(e)
	if err != nil {
		return problems, err
	}
	if digest && m == rq.P && rq.Strict && h.CRC != rq.Digest {
		bad(m, m, e.Key, "does not end in the segment its writer published: %q has header CRC %#08x, %s has digest %#08x",
			e.Key, h.CRC, rq.Source, rq.Digest)
	}
	if h.Link.First() {
		for seq, below := range segs {
			if seq < m {
				bad(m, m, e.Key, "is broken at seq %d: %q claims to be the first segment of its epoch, but %q of the same epoch is listed below it",
					m, e.Key, below.Key)
				break
			}
		}
	} else if h.Link.PrevMaxTs > start {
		if err := absent(m - 1); err != nil {
			return nil, err
		}
		want := ExpectedKey(logID, rq.Writer, rq.Epoch, m-1)
		bad(m-1, m-1, want, "is broken below seq %d (%s): seq %d is missing, and the segments up to it held commit ts up to %d, above the read's start %d; missing %s",
			m, e.Key, m-1, h.Link.PrevMaxTs, start, want)
	}
	return problems, nil
}

// proveReads bounds the header reads Prove makes at once.
const proveReads = 16

// Prove applies the completeness rule of a read above start to every
// writer epoch the states (read before the listing) and the index (the
// accepted segments of the listing) require, one Check per epoch in
// parallel. Before each Check, onReq (when not nil) sees its requirement.
// It returns the findings in the order of Reqs, or the first error that is
// not a finding.
func Prove(logID string, ix Index, states map[string]*meta.WriterState, start uint64, header HeaderFunc, probe ProbeFunc, onReq func(Req)) ([]*Error, error) {
	reqs := Reqs(logID, states, ix)
	type result struct {
		probs []*Error
		err   error
	}
	results := make([]result, len(reqs))
	sem := make(chan struct{}, proveReads)
	var wg sync.WaitGroup
	for i, rq := range reqs {
		if onReq != nil {
			onReq(rq)
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			probs, err := Check(logID, rq, ix[rq.EpochKey], start, header, probe, true)
			results[i] = result{probs, err}
		})
	}
	wg.Wait()
	var out []*Error
	for _, r := range results {
		if r.err != nil {
			return nil, r.err
		}
		out = append(out, r.probs...)
	}
	return out, nil
}

// Probes is the ProbeFunc of log logID on b: Probe of the epoch's seq.
func Probes(ctx context.Context, b *blob.Bucket, logID string) ProbeFunc {
	return func(k EpochKey, seq uint64) error { return Probe(ctx, b, logID, k.Writer, k.Epoch, seq) }
}

// SealedTwice returns the pairs of accepted sealed names of one writer,
// epoch and seq: a writer seals a seq once, so one of each pair is not
// what it wrote.
func SealedTwice(entries []Entry, accepts func(segment.Name) bool) [][2]Entry {
	type id struct {
		EpochKey
		seq uint64
	}
	first := map[id]Entry{}
	var out [][2]Entry
	for _, e := range entries {
		if e.Err != nil || e.Name.Active || accepts != nil && !accepts(e.Name) {
			continue
		}
		k := id{KeyOf(e.Name), e.Name.Seq}
		if f, ok := first[k]; ok {
			out = append(out, [2]Entry{f, e})
			continue
		}
		first[k] = e
	}
	return out
}

// TwiceError is the finding of a pair SealedTwice returned.
func TwiceError(d [2]Entry) *Error {
	n := d[0].Name
	return &Error{Writer: n.WriterID, Epoch: n.Epoch, Seq: n.Seq, LastSeq: n.Seq, Key: d[1].Key,
		Detail: fmt.Sprintf("chain of writer %q epoch %d holds seq %d twice, %q and %q: a writer seals a seq once, so one of them is not what it wrote",
			n.WriterID, n.Epoch, n.Seq, d[0].Key, d[1].Key)}
}
