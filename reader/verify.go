package reader

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/internal/chain"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
)

// Severity says whether a Problem makes the log unreadable.
type Severity uint8

const (
	// Info is a finding that does not stop a read: a torn tail the reader
	// drops, a segment its writer's fence excludes.
	Info Severity = iota
	// Error is a finding that makes Open or the read fail (or, for a segment
	// outside every range read so far, would).
	Error
)

func (s Severity) String() string {
	if s == Error {
		return "error"
	}
	return "info"
}

// ProblemKind classifies a Problem.
type ProblemKind string

// Problem kinds.
const (
	ProblemBadName        ProblemKind = "bad-name"        // a key under the segment prefix that is not a segment name
	ProblemCorrupt        ProblemKind = "corrupt"         // a CRC or structure check failed (at Offset); order violations inside a segment are found here, by the format's own checks
	ProblemVersion        ProblemKind = "version"         // a segment format version this build does not read
	ProblemBadEvent       ProblemKind = "bad-event"       // a record whose event does not decode or disagrees with the record (commit ts, kind)
	ProblemOrder          ProblemKind = "order"           // records going backwards in commit ts inside a segment
	ProblemRangeMismatch  ProblemKind = "range-mismatch"  // a sealed segment's footer ts range differs from its name's
	ProblemHeaderMismatch ProblemKind = "header-mismatch" // the header's log, writer, epoch or seq differ from the name's
	ProblemActiveOnStore  ProblemKind = "active-on-store" // an active segment on a backend that cannot append
	ProblemUnreadable     ProblemKind = "unreadable"      // the object could not be read (an I/O error, not a finding about its bytes)
	ProblemTornTail       ProblemKind = "torn-tail"       // info: an active segment ends torn; the reader drops the tail
	ProblemUnsealed       ProblemKind = "unsealed"        // info: an active segment holds a whole footer and trailer (a crash between seal and rename)
	ProblemFenced         ProblemKind = "fenced"          // info: a segment its writer's fence excludes (a zombie's late segment); not checked further
	ProblemShadowed       ProblemKind = "shadowed"        // info: an active segment listed beside its sealed successor; not checked
	ProblemIncomplete     ProblemKind = "incomplete"      // a writer epoch's chain has a hole or ends short of its published seq (Key: the key expected)
	ProblemLink           ProblemKind = "link"            // a link or digest names another segment than the one found: between neighbours, or against the writer state or fence
	ProblemStray          ProblemKind = "stray"           // an object under the log's prefix that is not a key the log writes
	ProblemBadState       ProblemKind = "bad-state"       // a writer state or the meta object fails to read or decode
	ProblemDeleting       ProblemKind = "deleting"        // info: the log's delete marker: a removal started and has not finished
	ProblemMeta           ProblemKind = "meta"            // the meta object and the writer states disagree with each other or with the segment names, or the log has no meta object
	ProblemStaged         ProblemKind = "staged"          // info: a fenced writer epoch holds events above its committed ts (staged, never committed), which readers leave out (Key: its writer state)
)

// Problem is one finding of Verify.
type Problem struct {
	Severity Severity
	Kind     ProblemKind
	Key      string // the object
	Offset   int64  // byte offset in the object, -1 when the problem has no position
	Detail   string
	// MinTs and MaxTs bound, both included, the commit ts of the events of
	// a damaged block (ProblemCorrupt of a block, ProblemBadEvent) when
	// HasTs: in a sealed segment the block's entry in the footer's index,
	// in an active one the max ts of the whole block before it and the min
	// ts of the whole block after it (0 and math.MaxUint64 when there is
	// none). A read whose range ends below MinTs does not need the block.
	// Detail says the range too.
	MinTs, MaxTs uint64
	HasTs        bool
}

func (p Problem) String() string {
	at := ""
	if p.Offset >= 0 {
		at = " at offset " + strconv.FormatInt(p.Offset, 10)
	}
	return fmt.Sprintf("%s: %s: %q%s: %s", p.Severity, p.Kind, p.Key, at, p.Detail)
}

// Report is what Verify found in a log.
type Report struct {
	LogID string
	// ChainsFrom is the start ts the chains were proven for: the
	// checkpoint of the meta object (what GC may have collected below), or
	// 0 without one.
	ChainsFrom uint64
	Objects    int   // keys under the log's segment prefix
	Bytes      int64 // their total size
	Sealed     int   // sealed segments checked
	Active     int   // active segments checked
	Ignored    int   // fenced or shadowed segments, not checked
	Blocks     int64 // blocks read
	Events     int64 // records read (rows plus DDLs)
	Rows       int64
	DDLs       int64
	MinTs      uint64 // smallest commit ts read; 0 when none
	MaxTs      uint64 // largest commit ts read
	// Uncommitted counts the events (of Events) that fenced writer epochs
	// hold above their committed ts: staged, never committed, left out by
	// readers. ProblemStaged reports them per epoch.
	Uncommitted int64
	Problems    []Problem

	seg  *segInfo  // of a partial report of one segment
	meta []Problem // of a whole report: the ProblemMeta findings, placed last
}

// OK reports whether the report has no Error problem.
func (r *Report) OK() bool { return len(r.Errors()) == 0 }

// Errors returns the problems of Error severity.
func (r *Report) Errors() []Problem {
	var out []Problem
	for _, p := range r.Problems {
		if p.Severity == Error {
			out = append(out, p)
		}
	}
	return out
}

// VerifyOptions configure Verify. nil means the defaults.
type VerifyOptions struct {
	// Concurrency is how many segments are checked at once; 0 means
	// GOMAXPROCS.
	Concurrency int
	// Logger receives progress; nil discards.
	Logger *slog.Logger
	// RequireMeta makes a log without a meta object an error (ProblemMeta):
	// a recovery has no range to replay. Without it, such a log (one
	// written without the meta layer) has its chains proven from 0.
	// redokit.Log.Verify sets it.
	RequireMeta bool
}

// Verify checks the whole log and reports every problem it finds, not just
// the first, errors first. It reads every segment (whatever its ts range):
// every block of every sealed segment is read and its CRC checked, even
// after an earlier block failed; every event is decoded and compared with
// its record. It proves every writer epoch's chain complete from the
// checkpoint of the meta object (0 without one), and checks every link
// between neighbours (header and footer CRCs, the largest commit ts below)
// and every published digest. It reports every object under the log's
// prefix that is not a key the log writes, and every writer state or meta
// object that fails to read or decode. And it holds the meta object and
// the writer states against each other and against the segment names
// (ProblemMeta): the freshness rules of meta.CheckStates, a checkpoint at
// or below the resolved ts, a state for every live writer, no segment from
// an epoch its writer never reached.
//
// One pass lists the log once (the listing policy of Open may list again
// when a listing misses a segment), then reads the meta object once, then
// each writer state once: the states after the meta object, as the
// freshness rules need.
//
// It returns an error only when it cannot walk the log at all (the listing
// fails, or ctx ends); a segment it cannot read is a ProblemUnreadable.
func Verify(ctx context.Context, b *blob.Bucket, logID string, opts *VerifyOptions) (*Report, error) {
	if err := segment.ValidateID(logID); err != nil {
		return nil, fmt.Errorf("reader: log ID: %w", err)
	}
	var o VerifyOptions
	if opts != nil {
		o = *opts
	}
	if o.Concurrency <= 0 {
		o.Concurrency = runtime.GOMAXPROCS(0)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	// A listing that missed a segment the chains need (a listing of its
	// seq alone finds it) is stale: Verify starts over, as Open and the
	// writer's recovery list again, at most chain.Relists times; then the
	// report names the key every listing missed.
	for i := 0; ; i++ {
		rep, err := verifyOnce(ctx, b, logID, &o)
		var missed *chain.MissedError
		switch {
		case err == nil:
			return rep.finish(), nil
		case !errors.As(err, &missed):
			if rep != nil {
				rep.finish() // what was found before a segment vanished
			}
			return rep, err
		case i == chain.Relists:
			rep.add(Error, ProblemIncomplete, missed.Key, -1, chain.Exhausted("the chain of its writer epoch", err).Error())
			return rep.finish(), nil
		}
		o.Logger.Info("reader: verify: the listing missed a segment a listing of its seq finds; listing again", "key", missed.Key)
	}
}

// finish places the ProblemMeta findings after the others, and the errors
// first.
func (r *Report) finish() *Report {
	r.Problems, r.meta = append(r.Problems, r.meta...), nil
	slices.SortStableFunc(r.Problems, func(x, y Problem) int { return int(y.Severity) - int(x.Severity) })
	return r
}

// verifyOnce is Verify over one listing: the listing, then one read of the
// meta object, then one of each writer state listed. A stale listing
// (chain.Stale) is an error, returned with the report.
func verifyOnce(ctx context.Context, b *blob.Bucket, logID string, o *VerifyOptions) (*Report, error) {
	rep := &Report{LogID: logID}
	objs, stateIDs, err := listWhole(ctx, b, logID, rep)
	if err != nil {
		return nil, err
	}
	// The meta object before the states: meta.CheckStates holds states read
	// after it. It is read after the listing, so that the checkpoint the
	// chains are proven from is at least the one GC had collected below
	// when the listing was made.
	mv := &metaView{}
	m, err := meta.LoadMeta(ctx, b, logID)
	switch {
	case err == nil:
		mv.m = m
		rep.ChainsFrom = m.CheckpointTs
	case blob.IsNotExist(err):
		mv.missing = true
	case ctx.Err() != nil:
		return nil, ctx.Err()
	default:
		// The chains are then proven from 0: stricter, never looser.
		rep.add(Error, ProblemBadState, layout.Meta(logID), -1, "the meta object cannot be read: "+err.Error())
	}
	fen := readStates(ctx, b, logID, stateIDs, rep, mv)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep.Objects = len(objs)
	sealedIDs := map[segID]bool{}
	for _, ob := range objs {
		rep.Bytes += ob.Size
		if ob.Err == nil && !ob.Name.Active {
			sealedIDs[idOf(ob.Name)] = true
		}
	}
	var jobs []listed
	for _, ob := range objs {
		switch {
		case ob.Err != nil:
			rep.add(Error, ProblemBadName, ob.Key, -1, ob.Err.Error())
		case !fen.accepts(ob.Name):
			rep.Ignored++
			rep.add(Info, ProblemFenced, ob.Key, -1, fmt.Sprintf("epoch %d seq %d is excluded by the fences of writer %q: its epoch was fenced before it published this seq", ob.Name.Epoch, ob.Name.Seq, ob.Name.WriterID))
		case ob.Name.Active && sealedIDs[idOf(ob.Name)]:
			rep.Ignored++
			rep.add(Info, ProblemShadowed, ob.Key, -1, "a sealed segment with the same epoch and seq exists; readers use that")
		default:
			if ob.Name.Active && !b.CanAppend() {
				rep.add(Error, ProblemActiveOnStore, ob.Key, -1, "an active (unsealed) segment on a backend that cannot append: readers refuse the log")
			}
			jobs = append(jobs, ob)
		}
	}

	var mu sync.Mutex
	infos := map[string]*segInfo{}
	work := make(chan listed)
	var wg sync.WaitGroup
	for range min(o.Concurrency, max(len(jobs), 1)) {
		wg.Go(func() {
			for ob := range work {
				cut, capped := fen.committedCut(ob.Name)
				part := verifySegment(ctx, b, ob, cut, capped)
				mu.Lock()
				rep.merge(part)
				infos[ob.Key] = part.seg
				mu.Unlock()
				o.Logger.Debug("reader: verified segment", "key", ob.Key, "problems", len(part.Problems))
			}
		})
	}
feed:
	for _, ob := range jobs {
		select {
		case work <- ob:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	stale := verifyChains(chain.Probes(ctx, b, logID), logID, objs, fen, infos, rep)
	slices.SortStableFunc(rep.Problems, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Offset, b.Offset))
	})
	mv.missing = mv.missing && o.RequireMeta
	if rep.meta, err = verifyMeta(ctx, b, logID, mv, objs, rep); err != nil {
		return nil, err
	}
	return rep, stale
}

// listWhole lists everything under the log's prefix: the segments (parsed),
// the writer state keys, and, as problems, every other key. The keys a log
// writes are <log>/meta, <log>/writers/<writer ID>, <log>/seg/<segment
// name> and <log>/~deleting; anything else is a stray, which may be a
// segment or a state a damaged name hides from every reader.
func listWhole(ctx context.Context, b *blob.Bucket, logID string, rep *Report) ([]listed, []string, error) {
	var objs []listed
	var states []string
	segPrefix, statePrefix := layout.Segments(logID), layout.Writers(logID)
	for a, err := range b.List(ctx, layout.Log(logID)) {
		if err != nil {
			return nil, nil, fmt.Errorf("reader: list log %q: %w", logID, err)
		}
		k := a.Key
		switch {
		case strings.HasPrefix(k, segPrefix):
			objs = append(objs, chain.Parse(logID, a))
		case k == layout.Meta(logID):
		case k == layout.DeleteMarker(logID):
			rep.add(Info, ProblemDeleting, k, -1, "the log's removal started and did not finish: the next writer or coordinator to open the log finishes it")
		case strings.HasPrefix(k, statePrefix) && segment.ValidateID(k[len(statePrefix):]) == nil:
			states = append(states, k[len(statePrefix):])
		default:
			rep.add(Error, ProblemStray, k, -1, strayDetail(logID, k))
		}
	}
	return objs, states, nil
}

// strayDetail says why a key is not one the log writes.
func strayDetail(logID, k string) string {
	why := ""
	switch {
	case !utf8.ValidString(k):
		why = "its name is not valid UTF-8; "
	case strings.ContainsFunc(k, unicode.IsControl):
		why = "its name holds a control character; "
	}
	switch rest := k[len(logID)+1:]; {
	case rest == layout.SegmentDir || rest == layout.WritersDir:
		why += fmt.Sprintf("%q is an object, not a folder of them (a symbolic link?): what it leads to is invisible to readers; ", rest)
	case strings.HasPrefix(rest, layout.WritersDir+"/"):
		why += "not a valid writer ID; "
	}
	return why + "not a key the log writes (meta, writers/<writer ID>, seg/<segment name>, ~deleting): readers never see it, and if it held data, that data is lost to them"
}

// readStates reads every writer state listed, once, and records in mv
// what it found. One that fails to read or decode is a problem naming its
// key; its writer is then judged without a state (no fences, the weaker
// chain rule), which the problem already fails.
func readStates(ctx context.Context, b *blob.Bucket, logID string, ids []string, rep *Report, mv *metaView) fences {
	fen := fences{}
	mv.statesOK = true
	for _, id := range ids {
		st, _, err := meta.ReadWriterState(ctx, b, logID, id)
		switch {
		case err == nil:
			fen[id] = st
		case ctx.Err() != nil:
			mv.statesOK = false
		case blob.IsNotExist(err):
			mv.statesOK = false
			mv.gone = append(mv.gone, id)
		default:
			mv.statesOK = false
			rep.add(Error, ProblemBadState, layout.WriterState(logID, id), -1, "the writer state cannot be read: "+err.Error())
		}
	}
	mv.states = fen
	return fen
}

// segInfo is what Verify learned of a segment for the chain checks.
type segInfo struct {
	header     segment.Header
	haveHeader bool
	sealed     bool
	footerCRC  uint32              // of its footer (sealed)
	blocks     []segment.BlockInfo // its whole blocks (active)
	maxTs      uint64              // the largest commit ts it holds
	// above counts its events above its fenced epoch's committed ts
	// (capped): staged, never committed.
	above  int64
	capped bool
	cut    uint64
}

// pred is what the link check knows of a segment as a predecessor: a
// sealed one's footer, an active one's whole blocks (its successor links a
// prefix of them).
func (in *segInfo) pred(key string) chain.Pred {
	return chain.Pred{Key: key, Header: in.header, Sealed: in.sealed, HaveFooter: in.sealed, FooterCRC: in.footerCRC, MaxTs: in.maxTs, CheckMax: true,
		Blocks: in.blocks}
}

// verifyChains applies the completeness rule to every writer epoch from
// rep.ChainsFrom, and checks every link and digest it can. A seq the rule
// needs that the listing lacks is probed first: when a listing of it alone
// finds it, the listing is stale, and that is returned.
func verifyChains(probe chain.ProbeFunc, logID string, objs []listed, fen fences, infos map[string]*segInfo, rep *Report) error {
	ix := chain.NewIndex(objs, fen.accepts)
	for _, d := range chain.SealedTwice(objs, fen.accepts) {
		e := chain.TwiceError(d)
		rep.add(Error, ProblemLink, e.Key, -1, e.Detail)
	}
	header := func(o listed) (segment.Header, error) {
		if in := infos[o.Key]; in != nil && in.haveHeader {
			return in.header, nil
		}
		return segment.Header{}, errNoHeader // reported as corrupt or unreadable already
	}
	for _, rq := range chain.Reqs(logID, fen, ix) {
		segs := ix[rq.EpochKey]
		// Another error is a header that could not be read: reported (as
		// corrupt or unreadable) already, and failing the report.
		probs, err := chain.Check(logID, rq, segs, rep.ChainsFrom, header, probe, false)
		switch {
		case chain.Stale(err):
			return err
		case err != nil && !errors.Is(err, errNoHeader):
			// A probe that failed: the chain is not proven.
			rep.add(Error, ProblemIncomplete, chain.ExpectedKey(logID, rq.Writer, rq.Epoch, rq.P), -1,
				fmt.Sprintf("the chain of writer %q epoch %d cannot be proven: %v", rq.Writer, rq.Epoch, err))
		}
		for _, pr := range probs {
			rep.add(Error, ProblemIncomplete, pr.Key, -1, pr.Detail)
		}
		if rq.Strict {
			verifyDigest(rq, segs, infos, rep)
		}
	}
	type epochKey struct {
		writer string
		epoch  uint64
	}
	type staged struct {
		events, segments int64
		cut              uint64
	}
	uncommitted := map[epochKey]*staged{}
	for _, segs := range ix {
		for seq, o := range segs {
			verifyLink(o, seq, segs, infos, rep)
			if in := infos[o.Key]; in != nil && in.capped && in.above > 0 {
				k := epochKey{o.Name.WriterID, o.Name.Epoch}
				st := uncommitted[k]
				if st == nil {
					st = &staged{cut: in.cut}
					uncommitted[k] = st
				}
				st.events += in.above
				st.segments++
			}
		}
	}
	// Per fenced epoch, in a stable order: what it staged and never
	// committed. Information: a fenced epoch's staged events are the
	// expected remains of a writer that died mid-transaction.
	keys := slices.SortedFunc(maps.Keys(uncommitted), func(a, b epochKey) int {
		return cmp.Or(cmp.Compare(a.writer, b.writer), cmp.Compare(a.epoch, b.epoch))
	})
	for _, k := range keys {
		st := uncommitted[k]
		rep.Uncommitted += st.events
		rep.add(Info, ProblemStaged, layout.WriterState(logID, k.writer), -1,
			fmt.Sprintf("fenced epoch %d of writer %q holds %d events above its committed ts %d, in %d segments: staged, never committed; readers leave them out",
				k.epoch, k.writer, st.events, st.cut, st.segments))
	}
	return nil
}

// verifyDigest holds segment P of a strict requirement to its digest and
// chain max ts.
func verifyDigest(rq chain.Req, segs map[uint64]listed, infos map[string]*segInfo, rep *Report) {
	o, ok := segs[rq.P]
	if !ok {
		return
	}
	in := infos[o.Key]
	if in == nil || !in.haveHeader {
		return
	}
	if in.header.CRC != rq.Digest {
		rep.add(Error, ProblemLink, o.Key, 0, fmt.Sprintf("header CRC %#08x, but %s has digest %#08x: the segment is not the one its writer published",
			in.header.CRC, rq.Source, rq.Digest))
	}
	if below := in.header.Link.PrevMaxTs; rq.MaxTs < below || (in.sealed || in.blocks != nil) && rq.MaxTs > max(below, in.maxTs) {
		rep.add(Error, ProblemLink, o.Key, -1, fmt.Sprintf("%s says the chain holds commit ts up to %d, but the chain up to this segment holds up to %d (%d below it)",
			rq.Source, rq.MaxTs, max(below, in.maxTs), below))
	}
}

// verifyLink checks one segment's link against its listed predecessor, and
// reports events of a fenced epoch above its committed ts.
func verifyLink(o listed, seq uint64, segs map[uint64]listed, infos map[string]*segInfo, rep *Report) {
	in := infos[o.Key]
	if in == nil || !in.haveHeader {
		return
	}
	if in.capped && in.above > 0 {
		rep.add(Info, ProblemFenced, o.Key, -1, fmt.Sprintf("holds %d events above commit ts %d (up to %d), the committed ts of its epoch when writer %q fenced it: staged, or written after the epoch's last durable progress, never committed; readers leave them out",
			in.above, in.cut, in.maxTs, o.Name.WriterID))
	}
	l := in.header.Link
	po, listedPrev := segs[seq-1]
	switch {
	case !listedPrev:
	case l.First():
		rep.add(Error, ProblemLink, o.Key, 0, fmt.Sprintf("claims to be the first segment of writer %q epoch %d, but seq %d of the epoch is listed: %q",
			o.Name.WriterID, o.Name.Epoch, seq-1, po.Key))
	default:
		pin := infos[po.Key]
		if pin == nil || !pin.haveHeader {
			return
		}
		if msg := chain.LinkMismatch(o.Key, l, pin.pred(po.Key)); msg != "" {
			rep.add(Error, ProblemLink, o.Key, 0, msg)
		}
	}
}

var errNoHeader = errors.New("the header of its lowest segment cannot be read")

func (r *Report) add(sev Severity, kind ProblemKind, key string, off int64, detail string) {
	r.Problems = append(r.Problems, Problem{Severity: sev, Kind: kind, Key: key, Offset: off, Detail: detail})
}

// addErr classifies an error from the segment package.
func (r *Report) addErr(key string, err error) {
	var ce *segment.CorruptionError
	var ve *segment.VersionError
	switch {
	case errors.As(err, &ce):
		r.add(Error, ProblemCorrupt, key, ce.Offset, ce.Part+": "+ce.Detail)
		if lo, hi, ok := blockRange(err); ok {
			r.setRange(lo, hi)
		}
	case errors.As(err, &ve):
		r.add(Error, ProblemVersion, key, ve.Offset, fmt.Sprintf("format version %d (this build reads %d to %d)", ve.Version, segment.MinReadVersion, segment.FormatVersion))
	default:
		r.add(Error, ProblemUnreadable, key, -1, err.Error())
	}
}

// setRange gives the last problem added the commit-ts range [lo, hi].
func (r *Report) setRange(lo, hi uint64) {
	p := &r.Problems[len(r.Problems)-1]
	p.MinTs, p.MaxTs, p.HasTs = lo, hi, true
}

func (r *Report) merge(p *Report) {
	r.Sealed += p.Sealed
	r.Active += p.Active
	r.Blocks += p.Blocks
	r.Events += p.Events
	r.Rows += p.Rows
	r.DDLs += p.DDLs
	if p.Events > 0 {
		if r.Events == p.Events || p.MinTs < r.MinTs {
			r.MinTs = p.MinTs
		}
		r.MaxTs = max(r.MaxTs, p.MaxTs)
	}
	r.Problems = append(r.Problems, p.Problems...)
}

// segChecker checks the records of one segment's blocks.
type segChecker struct {
	rep *Report
	key string
	// capped: the segment is of a fenced epoch, whose events above cut
	// are counted (rep.seg.above).
	capped  bool
	cut     uint64
	ev      codec.Event
	dec     codec.Decoder // aliasing: ev is not used past its record
	prevTs  uint64
	started bool
}

func (c *segChecker) block(blk *segment.Block) {
	c.rep.Blocks++
	bad, firstBad := 0, ""
	for i := 0; ; i++ {
		rec, ok := blk.Next()
		if !ok {
			break
		}
		if c.started && rec.CommitTs < c.prevTs {
			c.rep.add(Error, ProblemOrder, c.key, blk.Info.Offset,
				fmt.Sprintf("record %d has commit ts %d, below the previous record's %d", i, rec.CommitTs, c.prevTs))
		}
		c.prevTs, c.started = rec.CommitTs, true
		if c.capped && rec.CommitTs > c.cut {
			c.rep.seg.above++
		}
		if c.rep.Events == 0 || rec.CommitTs < c.rep.MinTs {
			c.rep.MinTs = rec.CommitTs
		}
		c.rep.MaxTs = max(c.rep.MaxTs, rec.CommitTs)
		c.rep.Events++
		if rec.Kind == segment.KindDDL {
			c.rep.DDLs++
		} else {
			c.rep.Rows++
		}
		detail := ""
		if err := c.dec.Decode(rec.Payload, &c.ev); err != nil {
			detail = err.Error()
		} else if got := c.ev.CommitTs(); got != rec.CommitTs {
			detail = fmt.Sprintf("the record says commit ts %d, the event %d", rec.CommitTs, got)
		} else if want := codec.EventKind(rec.Kind); c.ev.Kind != want {
			detail = fmt.Sprintf("the record is a %v, the event a %v", rec.Kind, c.ev.Kind)
		}
		if detail != "" {
			if bad == 0 {
				firstBad = fmt.Sprintf("record %d (commit ts %d): %s", i, rec.CommitTs, detail)
			}
			bad++
		}
	}
	if bad > 0 {
		if bad > 1 {
			firstBad += fmt.Sprintf(" (and %d more records of the block)", bad-1)
		}
		firstBad += fmt.Sprintf("; the block holds commit ts [%d, %d]", blk.Info.MinTs, blk.Info.MaxTs)
		c.rep.add(Error, ProblemBadEvent, c.key, blk.Info.Offset, firstBad)
		c.rep.setRange(blk.Info.MinTs, blk.Info.MaxTs)
	}
}

// verifySegment checks one segment; its findings come back as a partial
// report. capped says that it is of a fenced epoch whose committed ts is
// cut: its events above cut are counted.
func verifySegment(ctx context.Context, b *blob.Bucket, ob listed, cut uint64, capped bool) *Report {
	rep := &Report{seg: &segInfo{capped: capped, cut: cut}}
	c := &segChecker{rep: rep, key: ob.Key, dec: codec.Decoder{Alias: true}, capped: capped, cut: cut}
	src := &Source{Key: ob.Key, Name: ob.Name, Size: ob.Size}
	if ob.Name.Active {
		rep.Active++
		verifyActive(ctx, b, src, c)
		return rep
	}
	rep.Sealed++
	ra := &objectReaderAt{ctx: ctx, b: b, key: ob.Key}
	defer ra.Close()
	sr, err := segment.NewReader(ra, ob.Size, &segment.ReaderOptions{Object: ob.Key})
	if err != nil {
		rep.addErr(ob.Key, err)
		return rep
	}
	if err := checkHeader(src, sr.Header()); err != nil {
		rep.add(Error, ProblemHeaderMismatch, ob.Key, 0, err.(*segment.CorruptionError).Detail)
	} else {
		rep.seg.header, rep.seg.haveHeader = sr.Header(), true
	}
	f := sr.Footer()
	rep.seg.footerCRC, rep.seg.sealed, rep.seg.maxTs = f.CRC, true, f.MaxTs
	if f.MinTs != ob.Name.MinTs || f.MaxTs != ob.Name.MaxTs {
		rep.add(Error, ProblemRangeMismatch, ob.Key, -1,
			fmt.Sprintf("the footer's ts range [%d, %d] disagrees with the name's [%d, %d]", f.MinTs, f.MaxTs, ob.Name.MinTs, ob.Name.MaxTs))
	}
	if n := len(f.Blocks); n > 0 {
		ra.window(segment.HeaderSize, f.Blocks[n-1].End())
	}
	// Every byte is checked, in order: the progress frames before each
	// block (a ranged read of the blocks alone passes them by), the block,
	// and at the end those before the footer.
	for i := 0; i <= len(f.Blocks); i++ {
		if _, err := sr.ProgressBefore(i); err != nil {
			if ctx.Err() != nil {
				return rep
			}
			rep.addErr(ob.Key, err)
			if !segment.IsCorrupt(err) {
				return rep
			}
		}
		if i == len(f.Blocks) {
			break
		}
		blk, err := sr.ReadBlock(i)
		if err != nil {
			if ctx.Err() != nil {
				return rep
			}
			rep.addErr(ob.Key, sealedBlockDamage(err, f.Blocks[i]))
			if !segment.IsCorrupt(err) {
				return rep // an I/O error: the rest would fail the same way
			}
			continue // the index says where the next block is
		}
		c.block(blk)
	}
	return rep
}

func verifyActive(ctx context.Context, b *blob.Bucket, src *Source, c *segChecker) {
	rep := c.rep
	rc, err := b.NewRangeReader(ctx, src.Key, 0, src.Size)
	if err != nil {
		rep.addErr(src.Key, err)
		return
	}
	defer rc.Close()
	sc := segment.NewScanner(rc, &segment.ScannerOptions{Object: src.Key})
	h, err := sc.Header()
	switch {
	case err == io.EOF:
	case err != nil:
		rep.addErr(src.Key, err)
		return
	default:
		if err := checkHeader(src, h); err != nil {
			rep.add(Error, ProblemHeaderMismatch, src.Key, 0, err.(*segment.CorruptionError).Detail)
		} else {
			rep.seg.header, rep.seg.haveHeader = h, true
		}
	}
	for {
		blk, err := sc.NextBlock()
		if err == io.EOF {
			break
		}
		if err != nil {
			// A scanner cannot resynchronise after damage that is not a
			// torn tail: what follows is reported as part of this error,
			// with the ts range the blocks around the damage bound.
			rep.addErr(src.Key, activeBlockDamage(ctx, b, src.Key, src.Size, sc.Blocks(), err))
			return
		}
		c.block(blk)
		rep.seg.maxTs = max(rep.seg.maxTs, blk.Info.MaxTs)
	}
	// A successor links a prefix of the whole blocks: those written
	// before it (recovery seals exactly that prefix).
	rep.seg.blocks = append([]segment.BlockInfo{}, sc.Blocks()...)
	switch {
	case sc.Torn():
		rep.add(Info, ProblemTornTail, src.Key, sc.ValidSize(),
			fmt.Sprintf("%d torn bytes after the last whole block; readers drop them, the writer truncates them on restart", sc.TornBytes()))
	case sc.Sealed():
		rep.add(Info, ProblemUnsealed, src.Key, -1, "holds a whole footer and trailer but was not renamed to its sealed name; the writer renames it on restart")
	}
}
