package reader

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/codec/codectest"
	"github.com/redokit/redokit/gc"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
)

const testLog = "cf-1"

var created = time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)

// row builds a row change: an insert of (id, val) into table.
func row(ts uint64, table string, id int64, val string) *codec.Event {
	v := codectest.Str("val", val)
	v.Charset, v.Collation = "utf8mb4", "utf8mb4_bin"
	ev := codectest.Row(ts, dbTable(table), codectest.Int("id", id, codec.FlagPrimaryKey|codec.FlagHandleKey), v)
	return &ev
}

// ddl builds a DDL on table.
func ddl(ts uint64, table, query string) *codec.Event {
	ev := codectest.DDL(ts, dbTable(table), codec.ActionAddColumn, query)
	return &ev
}

// dbTable is db.table, with the length of its name as its physical ID.
func dbTable(table string) codec.TableName { return codectest.Table("db", table, int64(len(table))) }

// seg describes a segment to write.
type seg struct {
	writer     string
	epoch, seq uint64
	events     []*codec.Event // in commit-ts order
	blockSize  int            // 0: tiny blocks (a few events each), to exercise block boundaries
	active     bool           // write it as an active segment (local only)
	torn       bool           // end an active segment with half a block
	raw        bool           // no compression
	link       segment.Link   // its link to its predecessor (chained fills it in)
	flags      segment.Flags  // header flags (format version 4)
	version    uint16         // format version; 0 is segment.FormatVersion, 3 writes a version-3 segment
	progress   []frameAt      // progress frames, each after a prefix of events
}

// frameAt is a progress frame written after the first After events.
type frameAt struct {
	After                  int
	FlushedTs, CommittedTs uint64
}

func (s seg) header() segment.Header {
	c := segment.CompressionLZ4
	if s.raw {
		c = segment.CompressionNone
	}
	epoch := s.epoch
	if epoch == 0 {
		epoch = 1
	}
	return segment.Header{LogID: testLog, WriterID: s.writer, Epoch: epoch, Seq: s.seq, Compression: c, Created: created, Link: s.link,
		Flags: s.flags, Version: s.version}
}

// chained returns segs with the links a writer would have given them: each
// segment whose seq - 1 of the same writer epoch is in segs links it (its
// header and footer CRCs, and the largest commit ts of the epoch's segments
// up to it); the others are the first of their epoch.
func chained(t testing.TB, segs []seg) []seg {
	t.Helper()
	out := slices.Clone(segs)
	order := make([]int, len(out))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int {
		a, b := out[i], out[j]
		return cmp.Or(cmp.Compare(a.writer, b.writer), cmp.Compare(a.header().Epoch, b.header().Epoch), cmp.Compare(a.seq, b.seq))
	})
	type done struct {
		hcrc, fcrc uint32
		chainMax   uint64
	}
	type id struct {
		writer     string
		epoch, seq uint64
	}
	seen := map[id]done{}
	for _, i := range order {
		s := &out[i]
		h := s.header()
		s.link = segment.Link{}
		if prev, ok := seen[id{s.writer, h.Epoch, s.seq - 1}]; ok {
			s.link = segment.Link{PrevSeq: s.seq - 1, PrevMaxTs: prev.chainMax, PrevHeaderCRC: prev.hcrc, PrevFooterCRC: prev.fcrc}
		}
		hcrc, fcrc := s.crcs(t)
		chainMax := s.link.PrevMaxTs
		for _, ev := range s.events {
			chainMax = max(chainMax, ev.CommitTs())
		}
		seen[id{s.writer, h.Epoch, s.seq}] = done{hcrc, fcrc, chainMax}
	}
	return out
}

// crcs returns the header and footer CRC fields the segment has once
// written (an active segment's footer CRC being that of its blocks).
func (s seg) crcs(t testing.TB) (header, footer uint32) {
	t.Helper()
	sw := s.encode(t, io.Discard)
	if err := sw.FlushBlock(); err != nil {
		t.Fatal(err)
	}
	f, err := sw.FooterCRC()
	if err != nil {
		t.Fatal(err)
	}
	return sw.HeaderCRC(), f
}

// chainMax is the largest commit ts of the epoch's segments up to s (its
// link's, and its own events').
func (s seg) chainMax() uint64 {
	m := s.link.PrevMaxTs
	for _, ev := range s.events {
		m = max(m, ev.CommitTs())
	}
	return m
}

func kindOf(ev *codec.Event) segment.Kind {
	if ev.Kind == codec.DDLEvent {
		return segment.KindDDL
	}
	return segment.KindRow
}

// encode writes the segment's events to w and returns the writer.
func (s seg) encode(t testing.TB, w io.Writer) *segment.Writer {
	t.Helper()
	bs := s.blockSize
	if bs == 0 {
		bs = 300
	}
	opts := &segment.WriterOptions{BlockSize: bs}
	var sw *segment.Writer
	var err error
	if v := s.version; v != 0 && v != segment.FormatVersion {
		sw, err = resumeOld(w, s.header(), opts)
	} else {
		sw, err = segment.NewWriter(w, s.header(), opts)
	}
	if err != nil {
		t.Fatal(err)
	}
	var buf []byte
	frames := s.progress
	for i, ev := range s.events {
		for len(frames) > 0 && frames[0].After == i {
			if _, err := sw.AppendProgressCommitted(frames[0].FlushedTs, frames[0].CommittedTs, nil); err != nil {
				t.Fatal(err)
			}
			frames = frames[1:]
		}
		buf = codec.AppendEvent(buf[:0], ev)
		if err := sw.Append(ev.CommitTs(), kindOf(ev), buf); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range frames {
		if _, err := sw.AppendProgressCommitted(f.FlushedTs, f.CommittedTs, nil); err != nil {
			t.Fatal(err)
		}
	}
	return sw
}

// resumeOld starts a segment of an older format version (hdr.Version), as
// an older build wrote it: NewWriter writes only the current version, so
// the header is written in its layout with the version patched (and its CRC
// made again), and a Writer resumes after it.
func resumeOld(w io.Writer, hdr segment.Header, opts *segment.WriterOptions) (*segment.Writer, error) {
	cur := hdr
	cur.Version, cur.Flags = 0, 0
	var head bytes.Buffer
	if _, err := segment.NewWriter(&head, cur, opts); err != nil {
		return nil, err
	}
	b := head.Bytes()[:segment.HeaderSize]
	binary.LittleEndian.PutUint16(b[8:], hdr.Version)
	binary.LittleEndian.PutUint32(b[segment.HeaderSize-4:], crc32.Checksum(b[:segment.HeaderSize-4], crc32.MakeTable(crc32.Castagnoli)))
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	return segment.ResumeWriter(w, hdr, nil, nil, segment.HeaderSize, opts)
}

// sealedBytes returns the bytes of the sealed segment and its key.
func (s seg) sealedBytes(t testing.TB) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	sw := s.encode(t, &buf)
	f, err := sw.Seal()
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), s.header().SealedName(f.MinTs, f.MaxTs).Format()
}

// write stores the segment in b and returns its key.
func (s seg) write(t testing.TB, b *blob.Bucket) string {
	t.Helper()
	ctx := context.Background()
	if !s.active {
		data, key := s.sealedBytes(t)
		if _, err := b.Put(ctx, key, data, &blob.PutOptions{IfNotExist: true}); err != nil {
			t.Fatal(err)
		}
		return key
	}
	key := s.header().ActiveName().Format()
	if !b.CanAppend() {
		// What a misplaced active segment on an object store looks like.
		var buf bytes.Buffer
		sw := s.encode(t, &buf)
		if err := sw.FlushBlock(); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Put(ctx, key, buf.Bytes(), nil); err != nil {
			t.Fatal(err)
		}
		return key
	}
	af, err := b.OpenAppend(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	sw := s.encode(t, af)
	if err := sw.FlushBlock(); err != nil {
		t.Fatal(err)
	}
	if s.torn {
		// Half of the frame of one more block, as a crash mid-write leaves.
		var more bytes.Buffer
		extra := seg{writer: s.writer, epoch: s.epoch, seq: s.seq, events: []*codec.Event{row(1<<40, "torn", 1, "lost")}}
		ew := extra.encode(t, &more)
		if err := ew.FlushBlock(); err != nil {
			t.Fatal(err)
		}
		frame := more.Bytes()[segment.HeaderSize:]
		if _, err := af.Write(frame[:len(frame)/2]); err != nil {
			t.Fatal(err)
		}
	}
	if err := af.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := af.Close(); err != nil {
		t.Fatal(err)
	}
	return key
}

func newMem(t testing.TB) *blob.Bucket {
	b := mem.New()
	t.Cleanup(func() { b.Close() })
	return b
}

func newLocal(t testing.TB) *blob.Bucket {
	b, err := local.New(t.TempDir(), &local.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// got is an event as a test keeps it.
type got struct {
	ts      uint64
	ddl     bool
	payload string
	key     string
}

func (g got) String() string {
	k := "row"
	if g.ddl {
		k = "ddl"
	}
	return fmt.Sprintf("%d/%s/%x", g.ts, k, g.payload[len(g.payload)-min(6, len(g.payload)):])
}

func keep(ev *Event) got {
	return got{ts: ev.CommitTs(), ddl: ev.IsDDL(), payload: string(ev.Payload()), key: ev.Source.Key}
}

func want(ev *codec.Event) got {
	return got{ts: ev.CommitTs(), ddl: ev.Kind == codec.DDLEvent, payload: string(codec.AppendEvent(nil, ev))}
}

// readAll reads a whole range with Next, checking each decoded event against
// its payload.
func readAll(t testing.TB, b *blob.Bucket, opts *Options) ([]got, Stats, error) {
	t.Helper()
	ctx := context.Background()
	r, err := Open(ctx, b, opts)
	if err != nil {
		return nil, Stats{}, err
	}
	defer r.Close()
	var out []got
	for ev, err := range r.Events(ctx) {
		if err != nil {
			return out, r.Stats(), err
		}
		if !opts.Raw {
			if enc := codec.AppendEvent(nil, &ev.Event); !bytes.Equal(enc, ev.Payload()) {
				t.Fatalf("decoded event %v re-encodes to %x, payload is %x", keep(ev), enc, ev.Payload())
			}
		}
		out = append(out, keep(ev))
	}
	return out, r.Stats(), nil
}

// readBatches reads a whole range with NextBatch.
func readBatches(t testing.TB, b *blob.Bucket, opts *Options, max int) ([]got, Stats, error) {
	t.Helper()
	ctx := context.Background()
	r, err := Open(ctx, b, opts)
	if err != nil {
		return nil, Stats{}, err
	}
	defer r.Close()
	var out []got
	for {
		evs, err := r.NextBatch(ctx, max)
		if err == io.EOF {
			return out, r.Stats(), nil
		}
		if err != nil {
			return out, r.Stats(), err
		}
		if len(evs) == 0 || len(evs) > max {
			t.Fatalf("NextBatch(%d) returned %d events", max, len(evs))
		}
		for _, ev := range evs {
			out = append(out, keep(ev))
		}
	}
}

// expect computes what a read of (start, end] must return from the accepted
// segments: by commit ts; at one ts the rows, then the DDLs; among equal
// (ts, kind), by segment (writer, epoch, seq), then in segment order; exact
// duplicates dropped by the per-unit multiplicity rule unless keepDups,
// where a unit is a writer epoch's version-4 segments without the catch-up
// flag, or any other segment alone.
func expect(segs []seg, start, end uint64, keepDups bool) []got {
	type item struct {
		g         got
		rank, pos int
		unit      string
	}
	sorted := slices.Clone(segs)
	slices.SortFunc(sorted, func(a, b seg) int {
		return cmp.Or(cmp.Compare(a.writer, b.writer), cmp.Compare(a.header().Epoch, b.header().Epoch), cmp.Compare(a.seq, b.seq))
	})
	var items []item
	for rank, s := range sorted {
		unit := fmt.Sprintf("segment %d", rank)
		if (s.version == 0 || s.version >= 4) && s.flags&segment.FlagCatchUp == 0 {
			unit = fmt.Sprintf("epoch %s/%d", s.writer, s.header().Epoch)
		}
		for pos, ev := range s.events {
			if ts := ev.CommitTs(); ts > start && ts <= end {
				items = append(items, item{g: want(ev), rank: rank, pos: pos, unit: unit})
			}
		}
	}
	slices.SortStableFunc(items, func(a, b item) int {
		ka, kb := 0, 0
		if a.g.ddl {
			ka = 1
		}
		if b.g.ddl {
			kb = 1
		}
		return cmp.Or(cmp.Compare(a.g.ts, b.g.ts), cmp.Compare(ka, kb), cmp.Compare(a.rank, b.rank), cmp.Compare(a.pos, b.pos))
	})
	var out []got
	type dk struct {
		payload string
		unit    string
	}
	var delivered map[string]int
	var seen map[dk]int
	var curTs uint64
	for i, it := range items {
		if i == 0 || it.g.ts != curTs {
			curTs, delivered, seen = it.g.ts, map[string]int{}, map[dk]int{}
		}
		if !keepDups {
			k := dk{it.g.payload, it.unit}
			seen[k]++
			if seen[k] <= delivered[it.g.payload] {
				continue
			}
			delivered[it.g.payload] = seen[k]
		}
		out = append(out, it.g)
	}
	return out
}

// equalGot compares without the keys (the expectation does not know them).
func equalGot(t testing.TB, have, exp []got) {
	t.Helper()
	strip := func(gs []got) []got {
		out := make([]got, len(gs))
		for i, g := range gs {
			g.key = ""
			out[i] = g
		}
		return out
	}
	g, w := strip(have), strip(exp)
	if slices.Equal(g, w) {
		return
	}
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			t.Fatalf("event %d: got %v, want %v (got %d events, want %d)", i, g[i], w[i], len(g), len(w))
		}
	}
	t.Fatalf("got %d events, want %d", len(g), len(w))
}

// rows returns n rows of table at consecutive ts from ts0, step apart.
func rows(ts0, step uint64, n int, table string, id0 int64) []*codec.Event {
	out := make([]*codec.Event, n)
	for i := range out {
		out[i] = row(ts0+uint64(i)*step, table, id0+int64(i), fmt.Sprintf("v%d", id0+int64(i)))
	}
	return out
}

// gcBelow runs GC below cp. GC reads the checkpoint from the log's meta
// object and only collects below it; the logs of these tests have none (the
// reader and Verify then prove chains from 0), so one is recorded at cp for
// the GC and removed after it.
func gcBelow(t testing.TB, ctx context.Context, b *blob.Bucket, cp uint64) (*gc.Result, error) {
	t.Helper()
	if _, err := meta.OpenCoordinator(ctx, b, testLog, &meta.CoordinatorOptions{StartTs: cp}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.Delete(ctx, layout.Meta(testLog)); err != nil {
			t.Fatal(err)
		}
	}()
	return gc.Collect(ctx, b, testLog, nil)
}
