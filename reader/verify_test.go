package reader

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
)

func TestVerifyCleanLog(t *testing.T) {
	b := newMem(t)
	segs := scenario()
	writeAll(t, b, segs)
	rep, err := Verify(context.Background(), b, testLog, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 0 {
		t.Fatalf("problems in a clean log: %v", rep.Problems)
	}
	var events, ddls int64
	for _, s := range segs {
		for _, ev := range s.events {
			events++
			if ev.Kind == codec.DDLEvent {
				ddls++
			}
		}
	}
	if rep.Sealed != len(segs) || rep.Objects != len(segs) || rep.Events != events || rep.DDLs != ddls || rep.Rows != events-ddls {
		t.Errorf("totals %+v, want %d segments, %d events, %d DDLs", rep, len(segs), events, ddls)
	}
	if rep.MinTs != 100 || rep.MaxTs != 310 || rep.Bytes == 0 || rep.Blocks < int64(len(segs)) {
		t.Errorf("totals %+v", rep)
	}
}

// Verify reports every problem, not just the first.
func TestVerifyReportsEveryProblem(t *testing.T) {
	ctx := context.Background()
	b := newMem(t)
	segs := scenario()
	keys := writeAll(t, b, segs)

	// Two bad blocks in one segment: both are reported.
	bad1 := corrupt(t, b, keys[0], 0)
	bad2 := corrupt(t, b, keys[0], 2)
	// A name that does not parse.
	badName := testLog + "/seg/a/00000000000000000001.seg"
	if _, err := b.Put(ctx, badName, []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	// A name whose range disagrees with the footer.
	s := seg{writer: "d", seq: 1, events: rows(10, 10, 5, "t", 0)}
	data, _ := s.sealedBytes(t)
	liar := s.header().SealedName(10, 999).Format()
	if _, err := b.Put(ctx, liar, data, nil); err != nil {
		t.Fatal(err)
	}
	// A segment under another writer's name.
	moved := seg{writer: "e", seq: 7, events: rows(10, 10, 2, "t", 0)}.header().SealedName(10, 20).Format()
	data, _ = seg{writer: "d", seq: 7, events: rows(10, 10, 2, "t", 0)}.sealedBytes(t)
	if _, err := b.Put(ctx, moved, data, nil); err != nil {
		t.Fatal(err)
	}
	// An active segment on an object store.
	activeKey := seg{writer: "f", seq: 1, events: rows(10, 10, 3, "t", 0), active: true}.write(t, b)
	// A record whose event does not decode (two of them in one block).
	var buf bytes.Buffer
	g := seg{writer: "g", seq: 1}
	sw, err := segment.NewWriter(&buf, g.header(), nil)
	if err != nil {
		t.Fatal(err)
	}
	good := codec.AppendEvent(nil, row(5, "t", 1, "ok"))
	for i, p := range [][]byte{good, {0x7f, 1, 2}, good[:len(good)-1]} {
		if err := sw.Append(5+uint64(i), segment.KindRow, p); err != nil {
			t.Fatal(err)
		}
	}
	f, err := sw.Seal()
	if err != nil {
		t.Fatal(err)
	}
	badEventKey := g.header().SealedName(f.MinTs, f.MaxTs).Format()
	if _, err := b.Put(ctx, badEventKey, buf.Bytes(), nil); err != nil {
		t.Fatal(err)
	}
	// A zombie's segment: information only.
	if _, err := meta.AcquireWriter(ctx, b, testLog, "z", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := meta.AcquireWriter(ctx, b, testLog, "z", nil); err != nil {
		t.Fatal(err)
	}
	zombie := seg{writer: "z", epoch: 1, seq: 1, events: rows(10, 10, 2, "t", 0)}.write(t, b)

	rep, err := Verify(ctx, b, testLog, &VerifyOptions{Concurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems {
		t.Log(p)
	}
	wantProblems := []struct {
		kind ProblemKind
		key  string
		off  int64
		sev  Severity
	}{
		{ProblemCorrupt, keys[0], bad1.Offset, Error},
		{ProblemCorrupt, keys[0], bad2.Offset, Error},
		{ProblemBadName, badName, -1, Error},
		{ProblemRangeMismatch, liar, -1, Error},
		{ProblemHeaderMismatch, moved, 0, Error},
		{ProblemActiveOnStore, activeKey, -1, Error},
		{ProblemBadEvent, badEventKey, segment.HeaderSize, Error},
		{ProblemFenced, zombie, -1, Info},
	}
	for _, w := range wantProblems {
		found := false
		for _, p := range rep.Problems {
			if p.Kind == w.kind && p.Key == w.key && p.Offset == w.off && p.Severity == w.sev {
				found = true
			}
		}
		if !found {
			t.Errorf("no %v problem %v for %q at %d", w.sev, w.kind, w.key, w.off)
		}
	}
	if len(rep.Problems) != len(wantProblems) {
		t.Errorf("%d problems, want %d", len(rep.Problems), len(wantProblems))
	}
	if rep.OK() || len(rep.Errors()) != len(wantProblems)-1 {
		t.Errorf("OK %v with %d errors", rep.OK(), len(rep.Errors()))
	}
	// The bad events' block: "and 1 more".
	for _, p := range rep.Problems {
		if p.Kind == ProblemBadEvent && !bytes.Contains([]byte(p.Detail), []byte("1 more")) {
			t.Errorf("bad-event detail %q does not count the second bad record", p.Detail)
		}
	}
}

func TestVerifyLocalTornTail(t *testing.T) {
	b := newLocal(t)
	sealed := seg{writer: "a", seq: 1, events: rows(10, 10, 10, "t", 0)}
	act := seg{writer: "a", seq: 2, events: rows(105, 10, 10, "t", 100), active: true, torn: true}
	writeAll(t, b, []seg{sealed, act})
	rep, err := Verify(context.Background(), b, testLog, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || len(rep.Problems) != 1 || rep.Problems[0].Kind != ProblemTornTail || rep.Problems[0].Offset <= 0 {
		t.Fatalf("problems %v, want one torn-tail info with its offset", rep.Problems)
	}
	if rep.Active != 1 || rep.Sealed != 1 || rep.Events != 20 {
		t.Errorf("totals %+v", rep)
	}
}

// Damage inside an active segment that is not at its tail is an error.
func TestVerifyActiveDamageNotTail(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	act := seg{writer: "a", seq: 1, events: rows(10, 10, 30, "t", 0), active: true}
	key := act.write(t, b)
	data, err := b.ReadAll(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	off := int64(segment.HeaderSize)
	data[off+segment.BlockHeaderSize+1] ^= 1
	if err := b.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	af, err := b.OpenAppend(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := af.Write(data); err != nil {
		t.Fatal(err)
	}
	af.Close()
	rep, err := Verify(ctx, b, testLog, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || !hasProblem(rep, ProblemCorrupt, key) || rep.Problems[0].Offset != off {
		t.Fatalf("problems %v, want corruption at %d", rep.Problems, off)
	}
	_, _, err = readAll(t, b, &Options{LogID: testLog, EndTs: 1000})
	if !segment.IsCorrupt(err) {
		t.Fatalf("read: %v, want a corruption error", err)
	}
}

// Records going backwards inside a segment: blocks of a later range followed
// by blocks of an earlier one, each block valid on its own. The segment
// format's order check finds it; Verify reports it at the block that goes
// back, and a read fails there.
func TestVerifyOrderInsideSegment(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	late := seg{writer: "a", seq: 1, events: rows(100, 1, 10, "t", 0)}
	early := seg{writer: "a", seq: 1, events: rows(10, 1, 10, "t", 100)}
	var lb, eb bytes.Buffer
	for _, x := range []struct {
		s   seg
		buf *bytes.Buffer
	}{{late, &lb}, {early, &eb}} {
		w := x.s.encode(t, x.buf)
		if err := w.FlushBlock(); err != nil {
			t.Fatal(err)
		}
	}
	spliced := append(bytes.Clone(lb.Bytes()), eb.Bytes()[segment.HeaderSize:]...)
	key := late.header().ActiveName().Format()
	af, err := b.OpenAppend(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := af.Write(spliced); err != nil {
		t.Fatal(err)
	}
	af.Close()
	rep, err := Verify(ctx, b, testLog, nil)
	if err != nil {
		t.Fatal(err)
	}
	back := int64(lb.Len()) // where the early blocks start
	if len(rep.Errors()) != 1 || rep.Problems[0].Offset != back || !strings.Contains(rep.Problems[0].Detail, "below") {
		t.Fatalf("problems %v, want one at offset %d about commit ts going back", rep.Problems, back)
	}
	_, _, err = readAll(t, b, &Options{LogID: testLog, EndTs: 1000})
	var ce *segment.CorruptionError
	if !errors.As(err, &ce) || ce.Object != key || ce.Offset != back {
		t.Fatalf("read: %v, want a corruption error at %d", err, back)
	}
}
