package reader

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

// ErrIncomplete matches every *ChainError: the log cannot prove that a read
// holds every event its writers published.
var ErrIncomplete = errors.New("reader: the log is incomplete")

// ChainError reports a writer epoch whose chain of segments does not prove
// completeness: a segment missing (or not listed) where the chain needs it,
// a chain that ends short of the seq its writer published, or a link or
// digest that names another segment than the one found.
type ChainError struct {
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

func (e *ChainError) Error() string { return "reader: " + e.Detail }

// Is makes errors.Is(err, ErrIncomplete) true.
func (e *ChainError) Is(target error) bool { return target == ErrIncomplete }

// expectedKey is the key pattern of a missing segment: its name up to the ts
// range, which only the segment itself knows.
func expectedKey(logID, writer string, epoch, seq uint64) string {
	n := segment.Name{LogID: logID, WriterID: writer, Epoch: epoch, Seq: seq, Active: true}
	base := n.Base()
	return layout.WriterSegments(logID, writer) + base[:len(base)-len(segment.ActiveExt)] + "-*" + segment.SealedExt
}

// epochKey identifies one writer epoch's chain.
type epochKey struct {
	writer string
	epoch  uint64
}

func (k epochKey) String() string { return fmt.Sprintf("writer %q epoch %d", k.writer, k.epoch) }

// chains is the accepted segments of a listing by writer epoch and seq. Of
// an active and a sealed name of one seq (the two sides of a rename) the
// sealed one stands.
type chains map[epochKey]map[uint64]listed

func makeChains(objs []listed, accepts func(segment.Name) bool) chains {
	ch := chains{}
	for _, o := range objs {
		if o.err != nil || !accepts(o.name) {
			continue
		}
		k := epochKey{o.name.WriterID, o.name.Epoch}
		m := ch[k]
		if m == nil {
			m = map[uint64]listed{}
			ch[k] = m
		}
		if prev, ok := m[o.name.Seq]; ok && !prev.name.Active {
			continue
		}
		m[o.name.Seq] = o
	}
	return ch
}

func (ch chains) has(n segment.Name, seq uint64) bool {
	_, ok := ch[epochKey{n.WriterID, n.Epoch}][seq]
	return ok
}

// chainReq is what one writer epoch must prove: that its accepted segments
// with seq ≤ p form a gapless chain from the first one a read needs up to
// p. strict requirements come from a writer state (its current epoch's
// published seq, or a fence); the others from the listing alone (a writer
// without a state object: p is the highest seq listed), which cannot tell a
// missing last segment from one never written.
type chainReq struct {
	epochKey
	p      uint64
	maxTs  uint64 // the largest commit ts of the chain up to p
	digest uint32 // the header CRC of segment p (strict only)
	strict bool
	source string // where p comes from, for messages
}

// chainReqs derives the requirements from the writer states (published
// seqs, fences) and, for writers without a state, from the listing.
func chainReqs(logID string, states map[string]*meta.WriterState, ch chains) []chainReq {
	var out []chainReq
	for id, st := range states {
		key := layout.WriterState(logID, id)
		if st.HasSeq {
			out = append(out, chainReq{epochKey: epochKey{id, st.Epoch}, p: st.Seq, maxTs: st.ChainMaxTs, digest: st.Digest, strict: true,
				source: fmt.Sprintf("the seq %d published in %s", st.Seq, key)})
		}
		for _, f := range st.Fences {
			out = append(out, chainReq{epochKey: epochKey{id, f.Epoch}, p: f.LastSeq, maxTs: f.MaxTs, digest: f.Digest, strict: true,
				source: fmt.Sprintf("the seq %d of the fence of epoch %d in %s", f.LastSeq, f.Epoch, key)})
		}
	}
	for k, segs := range ch {
		if states[k.writer] != nil {
			// Epochs newer than the state were taken after it was read;
			// what they publish is above the range the state allowed.
			// Older ones without a fence published nothing.
			continue
		}
		p, found := uint64(0), false
		for seq, o := range segs {
			// An active segment shorter than a header was created and
			// not yet written (or torn before its header was durable): it
			// holds nothing, and has no link to prove.
			if !o.name.Active || o.size >= segment.HeaderSize {
				p, found = max(p, seq), true
			}
		}
		if !found {
			continue
		}
		out = append(out, chainReq{epochKey: k, p: p, maxTs: math.MaxUint64,
			source: fmt.Sprintf("the highest seq listed (%d; the writer has no state object, so a lost last segment cannot be told from one never written)", p)})
	}
	slices.SortFunc(out, func(a, b chainReq) int {
		return cmp.Or(cmp.Compare(a.writer, b.writer), cmp.Compare(a.epoch, b.epoch))
	})
	return out
}

// headerFunc returns the header of a listed segment.
type headerFunc func(o listed) (segment.Header, error)

// checkChain applies the completeness rule to one requirement for a read
// above start, and returns what is wrong with the chain. err is an error
// that is not a finding (an I/O error, a vanished object). With digest, the digest of a strict requirement is
// compared when the bottom of the run is its published segment.
func checkChain(logID string, rq chainReq, segs map[uint64]listed, start uint64, header headerFunc, digest bool) (problems []*ChainError, err error) {
	if rq.strict && rq.maxTs <= start {
		return nil, nil // every event of the epoch's chain is at or below start
	}
	bad := func(seq, last uint64, key, format string, args ...any) {
		problems = append(problems, &ChainError{Writer: rq.writer, Epoch: rq.epoch, Seq: seq, LastSeq: last, Key: key,
			Detail: fmt.Sprintf("chain of writer %q epoch %d ", rq.writer, rq.epoch) + fmt.Sprintf(format, args...)})
	}
	if _, ok := segs[rq.p]; !ok {
		top, found := uint64(0), false
		for seq := range segs {
			if seq < rq.p && (!found || seq > top) {
				top, found = seq, true
			}
		}
		want := expectedKey(logID, rq.writer, rq.epoch, rq.p)
		if !found {
			bad(rq.p, rq.p, want, "has no segment listed at or below %s, yet it holds commit ts up to %d, above the read's start %d; missing %s",
				rq.source, rq.maxTs, start, want)
			return problems, nil
		}
		bad(top+1, rq.p, expectedKey(logID, rq.writer, rq.epoch, top+1), "ends at seq %d short of %s; missing seqs %d..%d: %s up to %s",
			top, rq.source, top+1, rq.p, expectedKey(logID, rq.writer, rq.epoch, top+1), want)
		return problems, nil
	}
	m := rq.p
	for m > 0 {
		if _, ok := segs[m-1]; !ok {
			break
		}
		m--
	}
	o := segs[m]
	h, err := header(o)
	if err != nil {
		return problems, err
	}
	if digest && m == rq.p && rq.strict && h.CRC != rq.digest {
		bad(m, m, o.key, "does not end in the segment its writer published: %q has header CRC %#08x, %s has digest %#08x",
			o.key, h.CRC, rq.source, rq.digest)
	}
	if h.Link.First() {
		for seq, below := range segs {
			if seq < m {
				bad(m, m, o.key, "is broken at seq %d: %q claims to be the first segment of its epoch, but %q of the same epoch is listed below it",
					m, o.key, below.key)
				break
			}
		}
	} else if h.Link.PrevMaxTs > start {
		want := expectedKey(logID, rq.writer, rq.epoch, m-1)
		bad(m-1, m-1, want, "is broken below seq %d (%s): seq %d is missing, and the segments up to it held commit ts up to %d, above the read's start %d; missing %s",
			m, o.key, m-1, h.Link.PrevMaxTs, start, want)
	}
	return problems, nil
}

// errVanished is a segment listed and gone before its header was read: GC
// collected it meanwhile, or a rename sealed it. Open lists again.
type errVanished struct{ err error }

func (e *errVanished) Error() string { return e.err.Error() }
func (e *errVanished) Unwrap() error { return e.err }

// maxReplans bounds how many times Open lists again after a segment it
// listed vanished before its header was read.
const maxReplans = 3

// readHeader reads the header of a listed segment with one ranged read.
func readHeader(ctx context.Context, b *blob.Bucket, o listed) (segment.Header, []byte, error) {
	data, err := b.ReadRange(ctx, o.key, 0, segment.HeaderSize)
	if blob.IsNotExist(err) {
		return segment.Header{}, nil, &errVanished{fmt.Errorf("reader: segment %q vanished between the listing and the read of its header: %w", o.key, err)}
	}
	if err != nil {
		return segment.Header{}, nil, fmt.Errorf("reader: read the header of %q: %w", o.key, err)
	}
	h, err := segment.DecodeHeader(data, o.key)
	if err != nil {
		return segment.Header{}, nil, err
	}
	if err := o.name.Check(o.key, h, nil); err != nil {
		return segment.Header{}, nil, err
	}
	return h, data, nil
}

// proveComplete applies the completeness rule to every writer epoch of a
// plan: pub are the writer states read before the listing (everything they
// published was listed, unless GC removed it, which the links prove), fen
// those read after it (the fences the plan applied). It marks the sources
// whose headers it read, and those that end a published chain, so that
// their streams check the digest.
func proveComplete(ctx context.Context, b *blob.Bucket, c *config, objs []listed, pub, fen fences, p *plan) error {
	ch := makeChains(objs, fen.accepts)
	srcs := map[segID]*Source{}
	for _, s := range p.active {
		srcs[idOf(s.Name)] = s
	}
	for _, s := range p.sealed {
		srcs[idOf(s.Name)] = s
	}
	for _, s := range srcs {
		s.predListed = s.Name.Seq > 1 && ch.has(s.Name, s.Name.Seq-1)
	}
	var errs []error
	// Two sealed names of one seq: one of them is not what the writer
	// wrote (a writer seals a seq once), and the read cannot tell which.
	for _, d := range sealedTwice(objs, fen.accepts) {
		if srcs[idOf(d[0].name)] != nil {
			errs = append(errs, twiceError(d))
		}
	}
	// One header read per writer epoch, in parallel: on an object store
	// each is a round trip.
	reqs := chainReqs(c.LogID, pub, ch)
	type result struct {
		probs []*ChainError
		err   error
	}
	results := make([]result, len(reqs))
	sem := make(chan struct{}, headerReads)
	var wg sync.WaitGroup
	for i, rq := range reqs {
		if rq.strict {
			if s := srcs[segID{rq.writer, rq.epoch, rq.p}]; s != nil {
				s.digest, s.hasDigest, s.digestOf = rq.digest, true, rq.source
			}
		}
		header := func(o listed) (segment.Header, error) {
			sem <- struct{}{}
			defer func() { <-sem }()
			h, data, err := readHeader(ctx, b, o)
			if err == nil {
				if s := srcs[idOf(o.name)]; s != nil && !s.Name.Active {
					s.header = data // the stream opens with it, at no request
				}
			}
			return h, err
		}
		wg.Go(func() {
			probs, err := checkChain(c.LogID, rq, ch[rq.epochKey], c.start, header, true)
			results[i] = result{probs, err}
		})
	}
	wg.Wait()
	for _, r := range results {
		if r.err != nil {
			return r.err
		}
		for _, pr := range r.probs {
			errs = append(errs, pr)
		}
	}
	return errors.Join(errs...)
}

// headerReads bounds the header reads Open makes at once.
const headerReads = 16

// sealedTwice returns the pairs of accepted sealed names of one writer,
// epoch and seq.
func sealedTwice(objs []listed, accepts func(segment.Name) bool) [][2]listed {
	first := map[segID]listed{}
	var out [][2]listed
	for _, o := range objs {
		if o.err != nil || o.name.Active || !accepts(o.name) {
			continue
		}
		if f, ok := first[idOf(o.name)]; ok {
			out = append(out, [2]listed{f, o})
			continue
		}
		first[idOf(o.name)] = o
	}
	return out
}

func twiceError(d [2]listed) *ChainError {
	n := d[0].name
	return &ChainError{Writer: n.WriterID, Epoch: n.Epoch, Seq: n.Seq, LastSeq: n.Seq, Key: d[1].key,
		Detail: fmt.Sprintf("chain of writer %q epoch %d holds seq %d twice, %q and %q: a writer seals a seq once, so one of them is not what it wrote",
			n.WriterID, n.Epoch, n.Seq, d[0].key, d[1].key)}
}

// opened is what a stream learned of its segment's place in the chain.
type opened struct {
	key        string
	link       segment.Link
	headerCRC  uint32
	footerCRC  uint32
	haveFooter bool // false for an active segment: its footer is not written
}

// linkBook is where streams meet their neighbours in a chain: each records
// its segment when it opens it and compares its link with its predecessor,
// or its CRCs with its successor's link, whichever opened first.
type linkBook struct {
	mu   sync.Mutex
	seen map[segID]opened
}

// checkOpened checks a segment a stream opened against the chain: its
// digest when it ends a published chain, that it claims to be first of its
// epoch only when no predecessor is listed, and its links with the
// neighbours opened so far.
func (r *Reader) checkOpened(src *Source, h segment.Header, footerCRC uint32, haveFooter bool) error {
	n := src.Name
	fail := func(seq uint64, format string, args ...any) error {
		return &ChainError{Writer: n.WriterID, Epoch: n.Epoch, Seq: seq, LastSeq: seq, Key: src.Key,
			Detail: fmt.Sprintf("chain of writer %q epoch %d ", n.WriterID, n.Epoch) + fmt.Sprintf(format, args...)}
	}
	if src.hasDigest && h.CRC != src.digest {
		return fail(n.Seq, "does not end in the segment its writer published: %q has header CRC %#08x, %s has digest %#08x",
			src.Key, h.CRC, src.digestOf, src.digest)
	}
	if h.Link.First() && src.predListed {
		return fail(n.Seq, "is broken at seq %d: %q claims to be the first segment of its epoch, but seq %d of the epoch is listed",
			n.Seq, src.Key, n.Seq-1)
	}
	me := opened{key: src.Key, link: h.Link, headerCRC: h.CRC, footerCRC: footerCRC, haveFooter: haveFooter}
	b := &r.links
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen == nil {
		b.seen = map[segID]opened{}
	}
	id := idOf(n)
	b.seen[id] = me
	if !h.Link.First() {
		if prev, ok := b.seen[segID{n.WriterID, n.Epoch, n.Seq - 1}]; ok {
			if msg := linkMismatch(me, prev); msg != "" {
				return fail(n.Seq, "is broken at seq %d: %s", n.Seq, msg)
			}
		}
	}
	if next, ok := b.seen[segID{n.WriterID, n.Epoch, n.Seq + 1}]; ok && !next.link.First() {
		if msg := linkMismatch(next, me); msg != "" {
			return fail(n.Seq+1, "is broken at seq %d: %s", n.Seq+1, msg)
		}
	}
	return nil
}

// linkMismatch compares a segment's link with its predecessor, or "".
func linkMismatch(succ, pred opened) string {
	if succ.link.PrevHeaderCRC != pred.headerCRC {
		return fmt.Sprintf("%q links a predecessor with header CRC %#08x, but %q has %#08x",
			succ.key, succ.link.PrevHeaderCRC, pred.key, pred.headerCRC)
	}
	if pred.haveFooter && succ.link.PrevFooterCRC != pred.footerCRC {
		return fmt.Sprintf("%q links a predecessor with footer CRC %#08x, but %q has %#08x",
			succ.key, succ.link.PrevFooterCRC, pred.key, pred.footerCRC)
	}
	return ""
}
