package reader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/segment"
)

// chunk is one block's worth of events, decoded, filtered and cut to the
// range, as a stream hands it to the merge. Chunks are recycled: the slices,
// the codec.Events in events (their column slices, their byte copies) and
// the payload buffers are reused, so a stream allocates nothing once its
// pool has grown.
//
// What the merge needs of event i is in recs[i] (see mergeRec). Only a
// chunk its producer decoded fills events; for the others (a raw read, and
// the streams of a decoded one while many are open) the merge fills Events
// of the Reader's from the records, decoding them unless the read is raw,
// when it returns them (Reader.event), so that such a chunk is its block's
// bytes and 16 bytes an event, not 20 to 60 times that of an array of
// (decoded) Events, and hundreds of overlapping runs open at once cost
// little more than their blocks.
type chunk struct {
	events  []Event // decoded events, when decoded
	decoded bool
	recs    []mergeRec
	n       int     // events i < n are valid
	ddls    int     // how many of them are DDLs
	src     *Source // the Source of every event of the chunk
	// The block the events are of, and the index in it of the first one
	// (when not decoded, the chunk holds every record of the block from
	// there): what names a record that fails to decode.
	blk   segment.BlockInfo
	first int
	// The payloads of events[:n], and the byte values decoded from them,
	// point into ub, the records of the sealed block the chunk holds (its
	// stream's segment.Reader decompresses each block into the buffer of
	// the chunk that takes it), or, for an active segment (one Scanner
	// reads all its blocks), into raw, a copy.
	ub  []byte
	raw []byte
	// base is ub or raw: what the records' offsets are in.
	base []byte
	// counted: the chunk counts against its stream's limit (stream.out):
	// from when the producer takes it until the merge is through with it.
	counted bool
}

// mergeRec is what the merge needs of an event: its commit ts (which orders
// it), its kind (DDLs wait for the rows of their ts) and where its payload
// (which the duplicate filter hashes) lies in the chunk's base, together
// and small, 16 bytes: a merge of hundreds of streams takes each event from
// another chunk, so each takes a line of memory that is rarely in cache,
// and four records to a line make that a quarter as often.
type mergeRec struct {
	ts  uint64
	off uint32 // the payload is base[off : off+len]
	lk  uint32 // len | kind<<recKindShift
}

// A payload is at most segment.MaxRecordSize bytes, below 1<<recKindShift
// (the array's length would be negative otherwise, and this not compile).
const (
	recKindShift = 27
	recLenMask   = 1<<recKindShift - 1
)

var _ [recLenMask - segment.MaxRecordSize]struct{}

func (c *chunk) kindOf(i int) codec.EventKind { return codec.EventKind(c.recs[i].lk >> recKindShift) }

// payloadOf returns the payload of event i.
func (c *chunk) payloadOf(i int) []byte {
	r := &c.recs[i]
	end := r.off + r.lk&recLenMask
	return c.base[r.off:end:end]
}

// setRec records event c.n: payload p, which lies in c.base.
func (c *chunk) setRec(ts uint64, kind codec.EventKind, p []byte) error {
	off := 0
	if len(p) > 0 {
		off = int(uintptr(unsafe.Pointer(unsafe.SliceData(p))) - uintptr(unsafe.Pointer(unsafe.SliceData(c.base))))
	}
	if off < 0 || off+len(p) > len(c.base) || len(p) > recLenMask {
		return fmt.Errorf("reader: internal error: a payload of %d bytes at %d is not in its chunk's %d bytes", len(p), off, len(c.base))
	}
	c.recs[c.n] = mergeRec{ts: ts, off: uint32(off), lk: uint32(len(p)) | uint32(kind)<<recKindShift}
	return nil
}

// stream is one segment being read. A goroutine (produce) reads its blocks,
// decodes them into chunks and sends them on ch; the merge goroutine owns
// every field below the line.
type stream struct {
	r     *Reader
	src   *Source
	rank  int   // tie-break among events of equal commit ts
	group int32 // the duplicate filter's unit of its writer epoch (see unit)

	// What the segment's header says of its copies (see unit), known once
	// hdrKnown: set before the stream starts by the merge (readHeaders),
	// or by the producer, which closes hdrDone then (or when it ends
	// without reading a header). The merge reads them only before the
	// start, after hdrDone or once it has a chunk of the stream.
	hdrFlags   segment.Flags
	hdrVersion uint16
	hdrKnown   bool
	hdrDone    chan struct{}
	hdrClosed  bool // the producer's: hdrDone is closed

	ch   chan *chunk // decoded chunks, at most Prefetch waiting
	free chan *chunk // chunks the merge is done with
	// The adaptive prefetch (see Reader.heat): the producer takes a chunk to
	// fill only while fewer than limit of its chunks are out (being
	// filled, waiting in ch, or with the merge); out counts them. A chunk
	// the merge is through with may still hold events the caller has,
	// until its next call: it counts until then, except for a stream that
	// reads ahead, whose producer goes on meanwhile (see through). The
	// merge sets limit and wakes the producer when it raises it, is
	// through with a chunk, or gives one back.
	limit atomic.Int32
	out   atomic.Int32
	wake  chan struct{}
	// done: the producer has sent its last chunk and touches neither free
	// nor allocated again, so the merge gives chunks it is done with to
	// the Reader's spares instead (they would wait in free for nothing).
	done atomic.Bool
	// aboveCounted: aboveFence was called for this stream's segment.
	aboveCounted bool
	pool         int // how many chunks the stream may have allocated
	// How many chunks the stream has, wherever they are: changed by the
	// producer when it takes one or gives one to the spares, and by the
	// merge when it gives one to the spares (see recycle).
	allocated atomic.Int32
	err       error
	// dec decodes the stream's events (the producer's only). Its values
	// alias the payloads, which live as long as their chunk.
	dec codec.Decoder

	// ----
	started bool
	point   bool // a point segment the merge opened (Reader.openPoints)
	hotIdx  int  // position in Reader.hot (it may read ahead), -1 when not there
	fcIdx   int  // position in Reader.fc, -1 when not there
	closed  bool // done; its chunks go to the Reader's spares
	cur     *chunk
	pos     int
	ts      uint64 // commit ts of the head event
}

// unit is what the duplicate filter counts copies by. The segments of one
// writer epoch partition its events: two of them never hold copies of each
// other, so identical events in them are distinct changes, counted as one
// segment's are, and a ts that only they hold needs no filter. A segment
// that may hold copies of its epoch's other segments' events (a catch-up
// segment: segment.FlagCatchUp) and one older than format version 4 (whose
// writers did not flag catch-up segments) are units of their own, as is one
// whose header is not known.
func (s *stream) unit() int32 {
	if !s.hdrKnown || s.hdrVersion < 4 || s.hdrFlags&segment.FlagCatchUp != 0 {
		return int32(s.rank)
	}
	return s.group
}

// headerRead records, in the producer, the header of the stream's segment.
func (s *stream) headerRead(h segment.Header) {
	if !s.hdrKnown {
		s.hdrFlags, s.hdrVersion, s.hdrKnown = h.Flags, h.Version, true
	}
	s.headerDone()
}

func (s *stream) headerDone() {
	if !s.hdrClosed {
		s.hdrClosed = true
		close(s.hdrDone)
	}
}

// aboveFence records a segment of a fenced epoch holding events above the
// epoch's committed ts, which the stream leaves out.
func (s *stream) aboveFence() {
	if s.aboveCounted {
		return // an active segment sealed while read: counted already
	}
	s.aboveCounted = true
	s.r.stats.aboveFence.Add(1)
	s.r.c.Logger.Info("reader: leaving out events of a fenced epoch above its committed ts (staged, or written after its last durable progress: never committed)",
		"key", s.src.Key, "committed_ts", s.src.capTs)
}

// end is the last commit ts the stream delivers: the range's end, or below
// it the committed ts of its fenced epoch (see Source.capped).
func (s *stream) end() uint64 {
	if s.src.capped {
		return min(s.r.c.end, s.src.capTs)
	}
	return s.r.c.end
}

// start launches the producer goroutine.
func (s *stream) start() {
	r := s.r
	s.started = true
	s.dec.Alias = true
	s.pool = r.c.Prefetch + 2 // Prefetch queued + 1 being filled + 1 the merge reads
	s.ch = make(chan *chunk, r.c.Prefetch)
	s.free = make(chan *chunk, s.pool)
	s.wake = make(chan struct{}, 1)
	r.started(s)
	r.openStreams(1)
	r.stats.opened.Add(1)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(s.ch)
		defer s.headerDone()
		var err error
		if s.src.Name.Active {
			err = s.produceActive(r.ctx)
		} else {
			err = s.produceSealed(r.ctx, s.src, nil)
		}
		s.err = err
		// Its idle chunks go to the spares now; what the merge gives
		// back from here on goes there too (see recycle).
		s.spareFree()
		s.done.Store(true)
	}()
}

// produceSealed reads a sealed segment: trailer and footer with one ranged
// read, the header with another, then the blocks the range needs, as one
// ranged stream.
//
// The stream's one segment.Reader decompresses each block into the buffer
// of the chunk that takes it, so the events' payloads point straight into
// that buffer, which nothing touches until the chunk comes back: no copy.
// The Reader holds no frame buffer of its own (segment.Reader.ReadBlockInto),
// so a stream costs its chunks and little else.
//
// read are the blocks already read from the active segment src was sealed
// from, while it was being read: they must be the sealed segment's first
// blocks, exactly (a seal only appends a footer, and a new epoch's recovery
// only cuts a torn tail before it does), and the stream goes on after them.
func (s *stream) produceSealed(ctx context.Context, src *Source, read []segment.BlockInfo) error {
	r := s.r
	ra := &objectReaderAt{ctx: ctx, b: r.b, key: src.Key}
	if src.header != nil {
		ra.kept = append(ra.kept, keptRead{0, src.header})
	}
	defer ra.Close()
	sr, err := openSealed(ra, src)
	if err != nil {
		return err
	}
	if err := r.checkOpened(src, sr.Header(), sr.Footer().CRC, true); err != nil {
		return err
	}
	s.headerRead(sr.Header())
	if src.capped && sr.Footer().MaxTs > src.capTs {
		s.aboveFence()
	}
	blocks := sr.Footer().Blocks
	if len(read) > len(blocks) || !slices.Equal(blocks[:len(read)], read) {
		return fmt.Errorf("reader: %s: sealed while its active segment was read, but the %d blocks read before the seal are not its first blocks (it has %d): %w",
			src.Key, len(read), len(blocks), segment.ErrCorrupt)
	}
	first := max(sr.SeekTs(r.c.start), len(read))
	last := first
	for last < len(blocks) && blocks[last].MinTs <= s.end() {
		last++
	}
	if first == last {
		return nil
	}
	ra.window(blocks[first].Offset, blocks[last-1].End())
	var c *chunk
	for i := first; i < last; i++ {
		if c == nil {
			if c, err = s.getChunk(ctx); err != nil {
				return err
			}
		}
		blk, ub, err := sr.ReadBlockInto(i, c.ub)
		if err != nil {
			return sealedBlockDamage(err, blocks[i])
		}
		c.ub = ub
		if _, err := s.fill(c, blk, src, false); err != nil {
			return err
		}
		if c.n > 0 {
			if err := s.send(ctx, c); err != nil {
				return err
			}
			c = nil
		}
	}
	return nil
}

// openSealed opens a sealed segment and checks that its header and footer
// agree with its name: the merge trusts the name's min ts to know when to open
// it, so a segment holding events below it would break the order.
func openSealed(ra io.ReaderAt, src *Source) (*segment.Reader, error) {
	sr, err := segment.NewReader(ra, src.Size, &segment.ReaderOptions{Object: src.Key})
	if err != nil {
		return nil, err
	}
	if err := checkHeader(src, sr.Header()); err != nil {
		return nil, err
	}
	f := sr.Footer()
	if f.MinTs != src.Name.MinTs || f.MaxTs != src.Name.MaxTs {
		return nil, &segment.CorruptionError{Object: src.Key, Offset: sr.Size() - segment.TrailerSize, Part: "footer",
			Detail: fmt.Sprintf("ts range [%d, %d] disagrees with the name's [%d, %d]", f.MinTs, f.MaxTs, src.Name.MinTs, src.Name.MaxTs)}
	}
	return sr, nil
}

// checkHeader compares a segment header with the name it was found under: a
// segment copied or renamed to the wrong key would be fenced, ordered and
// deduplicated as something it is not.
func checkHeader(src *Source, h segment.Header) error {
	n := src.Name
	if h.LogID != n.LogID || h.WriterID != n.WriterID || h.Epoch != n.Epoch || h.Seq != n.Seq {
		return &segment.CorruptionError{Object: src.Key, Part: "header",
			Detail: fmt.Sprintf("header names log %q writer %q epoch %d seq %d, the key log %q writer %q epoch %d seq %d",
				h.LogID, h.WriterID, h.Epoch, h.Seq, n.LogID, n.WriterID, n.Epoch, n.Seq)}
	}
	return nil
}

// produceActive reads an unsealed local segment front to back. Its length is
// taken once, first, so that blocks a live writer appends meanwhile are not
// half-read: the reader sees a prefix, whose torn tail (if any) it drops.
func (s *stream) produceActive(ctx context.Context) error {
	r := s.r
	src := s.src
	attrs, err := r.b.Stat(ctx, src.Key)
	var rc io.ReadCloser
	if err == nil {
		rc, err = r.b.NewRangeReader(ctx, src.Key, 0, attrs.Size)
	}
	if blob.IsNotExist(err) {
		// Sealed since the listing (or since the Stat): read it under its
		// sealed name.
		sealed, serr := findSealed(ctx, r.b, src.Name)
		if serr != nil {
			return serr
		}
		if sealed == nil {
			return fmt.Errorf("reader: active segment %q disappeared and no sealed segment replaced it: %w", src.Key, err)
		}
		sealed.predListed, sealed.hasDigest, sealed.digest, sealed.digestOf = src.predListed, src.hasDigest, src.digest, src.digestOf
		sealed.capped, sealed.capTs = src.capped, src.capTs
		return s.produceSealed(ctx, sealed, nil)
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	sc := segment.NewScanner(rc, &segment.ScannerOptions{Object: src.Key})
	h, err := sc.Header()
	if err == io.EOF {
		return nil // created, torn before its header was durable: holds nothing
	}
	if err != nil {
		return err
	}
	if err := checkHeader(src, h); err != nil {
		return err
	}
	if err := r.checkOpened(src, h, 0, false); err != nil {
		return err
	}
	s.headerRead(h)
	var c *chunk
	above := false
	var read []segment.BlockInfo // every whole block read, in order
	for {
		blk, err := sc.NextBlock()
		if err == io.EOF {
			break
		}
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			// A segment sealed while it is read changes under the read: a
			// new epoch's recovery cuts its torn tail and appends the
			// footer, so the read can meet a torn frame's header followed
			// by the footer's bytes. When the sealed segment is there now,
			// read on from it, after proving that what was read is its
			// prefix; otherwise the error stands.
			sealed, serr := findSealed(ctx, r.b, src.Name)
			if serr != nil || sealed == nil {
				return activeBlockDamage(ctx, r.b, src.Key, attrs.Size, read, err)
			}
			r.c.Logger.Info("reader: active segment sealed while read; reading on from its sealed name",
				"key", src.Key, "sealed", sealed.Key, "blocks_read", len(read), "err", err)
			if c != nil {
				s.unget(c)
			}
			sealed.predListed, sealed.hasDigest, sealed.digest, sealed.digestOf = src.predListed, src.hasDigest, src.digest, src.digestOf
			sealed.capped, sealed.capTs = src.capped, src.capTs
			return s.produceSealed(ctx, sealed, read)
		}
		read = append(read, blk.Info)
		if blk.Info.MaxTs <= r.c.start {
			continue
		}
		if src.capped && blk.Info.MaxTs > src.capTs && !above {
			above = true
			s.aboveFence()
		}
		if blk.Info.MinTs > s.end() {
			break
		}
		if c == nil {
			if c, err = s.getChunk(ctx); err != nil {
				return err
			}
		}
		pastEnd, err := s.fill(c, blk, src, true)
		if err != nil {
			return err
		}
		if c.n > 0 {
			if err := s.send(ctx, c); err != nil {
				return err
			}
			c = nil
		}
		if pastEnd {
			return nil // the rest is above the range
		}
	}
	if sc.Torn() {
		r.stats.torn.Add(1)
		r.c.Logger.Warn("reader: active segment ends with a torn tail; reading its valid prefix",
			"key", src.Key, "valid_size", sc.ValidSize(), "torn_bytes", sc.TornBytes())
	}
	return nil
}

// findSealed looks for the sealed segment an active one became.
func findSealed(ctx context.Context, b *blob.Bucket, active segment.Name) (*Source, error) {
	n := active
	n.Active = false
	// The sealed name begins with the seq's prefix: list from there.
	prefix := segment.SeqPrefix(n.LogID, n.WriterID, n.Epoch, n.Seq)
	for a, err := range b.List(ctx, prefix) {
		if err != nil {
			return nil, err
		}
		sn, perr := segment.ParseName(a.Key)
		if perr != nil || sn.Active || idOf(sn) != idOf(active) {
			continue
		}
		return &Source{Key: a.Key, Name: sn, Size: a.Size}, nil
	}
	return nil, nil
}

// fill decodes the records of blk that fall in the range into c, which is
// empty. With copy, it copies their payloads into c.raw, because blk is
// reused by the next block; without, blk belongs to c. It reports whether blk
// reached past the end ts.
func (s *stream) fill(c *chunk, blk *segment.Block, src *Source, copyPayload bool) (pastEnd bool, err error) {
	r := s.r
	start, end := r.c.start, s.end()
	c.src = src
	// Payload copies never outgrow the block, so sizing raw for it up front
	// keeps the events' slices into it valid while it fills.
	if copyPayload && cap(c.raw) < blk.Info.Uncompressed {
		c.raw = make([]byte, 0, blk.Info.Uncompressed)
	}
	c.base = c.ub
	if copyPayload {
		c.base = c.raw[:cap(c.raw)]
	}
	if n := blk.Info.Records; len(c.recs) < n {
		c.recs = make([]mergeRec, n)
	}
	// Decoded here, in parallel with the merge, unless many streams are
	// open (see Reader.heat): a block's worth of decoded events for each of
	// hundreds of streams would be most of a merge's memory and time. The
	// merge decodes those events as it returns them (Reader.event). Not
	// even the streams that read ahead decode then: a chunk keeps the
	// Events it grew, and every stream reads ahead at some time. A table
	// filter needs the decoded table here.
	c.decoded = !r.c.Raw && (r.c.TableFilter != nil || !r.many.Load())
	c.blk, c.first = blk.Info, -1
	if n := blk.Info.Records; c.decoded && len(c.events) < n {
		// Grown to the block's record count at once: the Events already
		// there keep their decode buffers.
		c.events = append(c.events, make([]Event, n-len(c.events))...)
	}
	if c.decoded {
		r.sem <- struct{}{}
		defer func() { <-r.sem }()
	}
	filtered := 0
	for i := 0; ; i++ {
		rec, ok := blk.Next()
		if !ok {
			break
		}
		if rec.CommitTs <= start {
			continue
		}
		if c.first < 0 {
			c.first = i
		}
		if rec.CommitTs > end {
			pastEnd = true
			break
		}
		payload := rec.Payload
		if copyPayload {
			// Copied before decoding, so that the decoded values alias
			// the bytes the chunk keeps.
			payload = c.copyPayload(rec.Payload)
		}
		if !c.decoded {
			// A raw read hands out the record's kind and ts without decoding:
			// they must still be the event's, or it is merged and applied
			// under the wrong ts. (An event the merge decodes is checked
			// then, as below.)
			if err := codec.CheckRecord(payload, codec.EventKind(rec.Kind), rec.CommitTs); err != nil {
				return false, recordError(src, blk.Info, i, rec.CommitTs, rec.Kind, err.Error())
			}
		} else {
			ev := &c.events[c.n]
			if err := decodeChecked(&s.dec, payload, &ev.Event, src, blk.Info, i, rec.CommitTs, rec.Kind); err != nil {
				return false, err
			}
			if f := r.c.TableFilter; f != nil && !accepts(f, &ev.Event) {
				filtered++
				if copyPayload {
					c.raw = c.raw[:len(c.raw)-len(payload)]
				}
				continue
			}
			ev.payload, ev.Source = payload, src
		}
		if rec.Kind == segment.KindDDL {
			c.ddls++
		}
		if err := c.setRec(rec.CommitTs, codec.EventKind(rec.Kind), payload); err != nil {
			return false, err
		}
		c.n++
	}
	r.stats.blocks.Add(1)
	if filtered > 0 {
		r.stats.filtered.Add(int64(filtered))
	}
	return pastEnd, nil
}

// copyPayload appends p to c.raw and returns the copy.
func (c *chunk) copyPayload(p []byte) []byte {
	off := len(c.raw)
	c.raw = append(c.raw, p...)
	return c.raw[off:len(c.raw):len(c.raw)]
}

// decodeChecked decodes the payload of record i of block blk of src into ev
// and checks that the event's commit ts and kind are the record's.
func decodeChecked(dec *codec.Decoder, payload []byte, ev *codec.Event, src *Source, blk segment.BlockInfo, i int, ts uint64, kind segment.Kind) error {
	if err := dec.Decode(payload, ev); err != nil {
		return recordError(src, blk, i, ts, kind, err.Error())
	}
	if got := ev.CommitTs(); got != ts {
		return recordError(src, blk, i, ts, kind, fmt.Sprintf("the event's commit ts is %d", got))
	}
	if want := codec.EventKind(kind); ev.Kind != want {
		return recordError(src, blk, i, ts, kind, fmt.Sprintf("the record is a %v, the event a %v", kind, ev.Kind))
	}
	return nil
}

func recordError(src *Source, blk segment.BlockInfo, i int, ts uint64, kind segment.Kind, detail string) error {
	return &segment.CorruptionError{Object: src.Key, Offset: blk.Offset, Part: "block",
		Detail: fmt.Sprintf("record %d (commit ts %d, %v): %s; the block holds commit ts [%d, %d]", i, ts, kind, detail, blk.MinTs, blk.MaxTs)}
}

// accepts applies a table filter to a decoded event.
func accepts(f func(codec.TableName) bool, ev *codec.Event) bool {
	if ev.Kind != codec.DDLEvent {
		return f(ev.Row.Table)
	}
	if f(ev.DDL.Table) {
		return true
	}
	for i := range ev.DDL.Tables {
		if f(ev.DDL.Tables[i].TableName) {
			return true
		}
	}
	return false
}

// getChunk returns an empty chunk from the stream's pool, allocating one
// while the pool is below its size, once the stream has fewer chunks out
// than its limit allows (one, while the adaptive prefetch keeps it cold),
// waiting otherwise for the merge to be through with one or to raise the
// limit. Meanwhile it gives its idle chunks beyond the limit to the Reader's
// spares. This wait is what bounds a stream's memory.
func (s *stream) getChunk(ctx context.Context) (*chunk, error) {
	for {
		if s.out.Load() < s.limit.Load() {
			var c *chunk
			select {
			case c = <-s.free:
			default:
				if int(s.allocated.Load()) < s.pool {
					s.allocated.Add(1)
					s.r.chunksLive(1)
					c = s.r.takeSpare()
				}
			}
			if c != nil {
				c.counted = true
				s.out.Add(1)
				return c, nil
			}
		}
		s.shed()
		select {
		case <-s.wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// shed gives idle chunks (given back by the merge) beyond the stream's limit
// to the Reader's spares, for the streams that read ahead: a cold stream
// holds only the chunk the merge reads.
func (s *stream) shed() {
	for s.allocated.Load() > s.limit.Load() {
		select {
		case c := <-s.free:
			s.spare(c)
		default:
			return
		}
	}
}

// spare gives one of the stream's chunks, idle, to the Reader's spares.
func (s *stream) spare(c *chunk) {
	s.allocated.Add(-1)
	s.r.chunksLive(-1)
	s.r.putSpare(c)
}

// unget gives back a chunk the producer took and did not send.
func (s *stream) unget(c *chunk) {
	c.counted = false
	s.free <- c // the stream's own chunk: there is room for it
	s.out.Add(-1)
}

// through records that the merge is through with c: it no longer counts
// against the stream's limit. The caller may still hold events in it.
func (s *stream) through(c *chunk) {
	if c.counted {
		c.counted = false
		s.out.Add(-1)
		s.poke()
	}
}

func (s *stream) send(ctx context.Context, c *chunk) error {
	select {
	case s.ch <- c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// recycle gives a chunk the merge is done with back to the producer, or to
// the Reader's spares when the producer has ended.
func (s *stream) recycle(c *chunk) {
	s.through(c)
	if s.done.Load() || s.out.Load() >= s.limit.Load() {
		// No use for it: the producer has ended, or has as many chunks
		// out as it may (a cold stream whose next chunk was read while
		// the caller held this one's events). It takes another when it
		// may.
		s.spare(c)
		return
	}
	c.n, c.ddls = 0, 0
	c.raw = c.raw[:0]
	select {
	case s.free <- c:
	default:
		// Cannot happen (free holds the whole pool), but never block the
		// merge on it.
	}
	s.poke()
	if s.done.Load() {
		// The producer ended meanwhile, perhaps without seeing c.
		s.spareFree()
	}
}

// spareFree gives the stream's idle chunks to the Reader's spares: the
// producer's, when it ends; the merge's once it has.
func (s *stream) spareFree() {
	for {
		select {
		case c := <-s.free:
			s.spare(c)
		default:
			return
		}
	}
}

// poke wakes the producer if it waits for a chunk or a higher limit.
func (s *stream) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// setLimit sets how many chunks the producer may have out.
func (s *stream) setLimit(n int) {
	if int(s.limit.Load()) != n {
		s.limit.Store(int32(n))
		s.poke()
	}
}

// errWouldBlock is how the merge reports, inside NextBatch, that the next
// event needs a wait: the batch ends there instead.
var errWouldBlock = errors.New("reader: would block")
