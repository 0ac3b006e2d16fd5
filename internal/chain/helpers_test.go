package chain

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/driver"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/segment"
)

// built is a segment a test wrote.
type built struct {
	key    string
	name   segment.Name
	hdr    segment.Header
	blocks []segment.BlockInfo
	next   segment.Link // what its successor links
	frame  *segment.ProgressInfo
}

// spec is a segment to build: blocks of commit ts, a progress frame at the
// end (flushed ts frame, 0 for none), stored sealed or active.
type spec struct {
	writer string
	epoch  uint64
	seq    uint64
	blocks [][]uint64
	frame  uint64
	active bool
}

// build writes s linked to link (stored when b is not nil).
func build(t testing.TB, b *blob.Bucket, s spec, link segment.Link) built {
	t.Helper()
	if s.writer == "" {
		s.writer = "w"
	}
	var buf bytes.Buffer
	hdr := segment.Header{LogID: "log", WriterID: s.writer, Epoch: s.epoch, Seq: s.seq, Link: link, Created: time.Unix(1, 0)}
	sw, err := segment.NewWriter(&buf, hdr, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, blk := range s.blocks {
		for _, ts := range blk {
			if err := sw.Append(ts, segment.KindRow, []byte{1}); err != nil {
				t.Fatal(err)
			}
		}
		if err := sw.FlushBlock(); err != nil {
			t.Fatal(err)
		}
	}
	out := built{hdr: sw.Header()}
	if s.frame != 0 {
		p, err := sw.AppendProgress(s.frame, []segment.SpanTs{{Span: 1, Ts: s.frame}})
		if err != nil {
			t.Fatal(err)
		}
		out.frame = &p
	}
	out.blocks = sw.Blocks()
	out.next = Successor(out.hdr, out.blocks)
	if s.active {
		out.name = out.hdr.ActiveName()
	} else {
		f, err := sw.Seal()
		if err != nil {
			t.Fatal(err)
		}
		out.name = out.hdr.SealedName(f.MinTs, f.MaxTs)
	}
	out.key = out.name.Format()
	if b != nil {
		if _, err := b.Put(context.Background(), out.key, buf.Bytes(), nil); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// chainOf builds the specs as one chain of their epoch, each linking the
// one before (the first links nothing, or first when given).
func chainOf(t testing.TB, b *blob.Bucket, first segment.Link, specs ...spec) []built {
	t.Helper()
	var out []built
	link := first
	for _, s := range specs {
		bs := build(t, b, s, link)
		out = append(out, bs)
		link = bs.next
	}
	return out
}

func entryOf(bs built) Entry {
	return Entry{Key: bs.key, Size: segment.HeaderSize, Name: bs.name}
}

// alwaysDrop hides key from every listing of the writer's segments (but not
// from a listing of its epoch).
type alwaysDrop struct {
	driver.Driver
	key string
}

func (d *alwaysDrop) List(ctx context.Context, opts driver.ListOptions) (driver.ListPage, error) {
	p, err := d.Driver.List(ctx, opts)
	if err != nil || opts.Prefix != layout.WriterSegments("log", "w") {
		return p, err
	}
	out := p.Objects[:0:0]
	for _, a := range p.Objects {
		if a.Key != d.key {
			out = append(out, a)
		}
	}
	p.Objects = out
	return p, nil
}
