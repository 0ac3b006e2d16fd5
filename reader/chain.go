package reader

import (
	"context"
	"errors"
	"sync"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/internal/chain"
	"github.com/redokit/redokit/segment"
)

// The rules of the chain are package internal/chain's; the reader wires
// them to its plan and its streams.

// ErrIncomplete matches every *ChainError: the log cannot prove that a read
// holds every event its writers published.
var ErrIncomplete = chain.ErrIncomplete

// ChainError reports a writer epoch whose chain of segments does not prove
// completeness: a segment missing (or not listed) where the chain needs it,
// a chain that ends short of the seq its writer published, or a link or
// digest that names another segment than the one found. Its fields are
// Writer, Epoch, Seq and LastSeq (the seq missing or at fault, the last of
// a run of missing seqs), Key (the object at fault, or for a missing
// segment the key pattern it is expected under) and Detail.
type ChainError = chain.Error

// expectedKey is the key pattern of a missing segment.
func expectedKey(logID, writer string, epoch, seq uint64) string {
	return chain.ExpectedKey(logID, writer, epoch, seq)
}

// proveComplete applies the completeness rule (chain.Prove) to every
// writer epoch of a plan: pub are the writer states read before the
// listing (everything they published was listed, unless GC removed it,
// which the links prove), fen those read after it (the fences the plan
// applied). A seq the proof needs that the listing lacks is probed first:
// a listing that missed it is stale (chain.Stale), and Open lists again. It
// marks the sources whose headers it read, and those that end a published
// chain, so that their streams check the digest.
func proveComplete(ctx context.Context, b *blob.Bucket, c *config, objs []listed, pub, fen fences, p *plan) error {
	ix := chain.NewIndex(objs, fen.accepts)
	srcs := map[segID]*Source{}
	for _, s := range p.active {
		srcs[idOf(s.Name)] = s
	}
	for _, s := range p.sealed {
		srcs[idOf(s.Name)] = s
	}
	for _, s := range srcs {
		s.predListed = s.Name.Seq > 1 && ix.Has(s.Name, s.Name.Seq-1)
	}
	var errs []error
	// Two sealed names of one seq: one of them is not what the writer
	// wrote (a writer seals a seq once), and the read cannot tell which.
	for _, d := range chain.SealedTwice(objs, fen.accepts) {
		if srcs[idOf(d[0].Name)] != nil {
			errs = append(errs, chain.TwiceError(d))
		}
	}
	var mu sync.Mutex // srcs' headers are set by parallel header reads
	header := func(o listed) (segment.Header, error) {
		h, data, err := chain.ReadHeader(ctx, b, o)
		if err == nil {
			mu.Lock()
			if s := srcs[idOf(o.Name)]; s != nil && !s.Name.Active {
				s.header = data // the stream opens with it, at no request
			}
			mu.Unlock()
		}
		return h, err
	}
	mark := func(rq chain.Req) {
		if s := srcs[segID{rq.Writer, rq.Epoch, rq.P}]; rq.Strict && s != nil {
			s.digest, s.hasDigest, s.digestOf = rq.Digest, true, rq.Source
		}
	}
	probs, err := chain.Prove(c.LogID, ix, pub, c.start, header, chain.Probes(ctx, b, c.LogID), mark)
	if err != nil {
		return err
	}
	for _, pr := range probs {
		errs = append(errs, pr)
	}
	return errors.Join(errs...)
}

// opened is what a stream learned of its segment's place in the chain.
type opened struct {
	key        string
	header     segment.Header
	footerCRC  uint32
	maxTs      uint64
	haveFooter bool // false for an active segment: its footer is not written
}

// linkBook is where streams meet their neighbours in a chain: each records
// its segment when it opens it and compares its link with its predecessor,
// or its CRCs with its successor's link, whichever opened first.
type linkBook struct {
	mu   sync.Mutex
	seen map[segID]opened
}

// pred is what the link check knows of an opened predecessor: an active
// one's blocks are still being read, so its header CRC alone is compared.
func (o opened) pred() chain.Pred {
	return chain.Pred{Key: o.key, Header: o.header, Sealed: o.haveFooter, HaveFooter: o.haveFooter, FooterCRC: o.footerCRC, MaxTs: o.maxTs}
}

// checkOpened checks a segment a stream opened against the chain: its
// digest when it ends a published chain, that it claims to be first of its
// epoch only when no predecessor is listed, and its links with the
// neighbours opened so far.
func (r *Reader) checkOpened(src *Source, h segment.Header, footerCRC uint32, haveFooter bool) error {
	n := src.Name
	k := chain.KeyOf(n)
	fail := func(seq uint64, format string, args ...any) error {
		return chain.Errorf(k, seq, seq, src.Key, format, args...)
	}
	if src.hasDigest && h.CRC != src.digest {
		return fail(n.Seq, "does not end in the segment its writer published: %q has header CRC %#08x, %s has digest %#08x",
			src.Key, h.CRC, src.digestOf, src.digest)
	}
	if h.Link.First() && src.predListed {
		return fail(n.Seq, "is broken at seq %d: %q claims to be the first segment of its epoch, but seq %d of the epoch is listed",
			n.Seq, src.Key, n.Seq-1)
	}
	me := opened{key: src.Key, header: h, footerCRC: footerCRC, haveFooter: haveFooter}
	b := &r.links
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen == nil {
		b.seen = map[segID]opened{}
	}
	b.seen[idOf(n)] = me
	if !h.Link.First() {
		if prev, ok := b.seen[segID{n.WriterID, n.Epoch, n.Seq - 1}]; ok {
			if msg := chain.LinkMismatch(me.key, h.Link, prev.pred()); msg != "" {
				return fail(n.Seq, "is broken at seq %d: %s", n.Seq, msg)
			}
		}
	}
	if next, ok := b.seen[segID{n.WriterID, n.Epoch, n.Seq + 1}]; ok && !next.header.Link.First() {
		if msg := chain.LinkMismatch(next.key, next.header.Link, me.pred()); msg != "" {
			return fail(n.Seq+1, "is broken at seq %d: %s", n.Seq+1, msg)
		}
	}
	return nil
}
