package reader

import (
	"context"
	"errors"
	"io"
	"testing"
)

// TestCodecEvents: CodecEvents yields the same stream as Events, as the
// codec.Events apply.Run takes, stops when the consumer does, and ends with
// a failure of the read (not io.EOF) as its last pair.
func TestCodecEvents(t *testing.T) {
	b := newMem(t)
	evs := append(rows(10, 10, 5, "a", 1), ddl(60, "a", "ALTER TABLE a ADD c INT"))
	(seg{writer: "w1", epoch: 1, seq: 1, events: evs}).write(t, b)
	ctx := context.Background()
	open := func() *Reader {
		r, err := Open(ctx, b, &Options{LogID: testLog, StartTs: 0, EndTs: 100})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}

	var have []got
	for ev, err := range open().CodecEvents(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		have = append(have, want(ev))
	}
	var exp []got
	for ev, err := range open().Events(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		exp = append(exp, keep(ev))
	}
	equalGot(t, have, exp)
	if len(have) != len(evs) {
		t.Fatalf("%d events, want %d", len(have), len(evs))
	}

	n := 0
	for range open().CodecEvents(ctx) {
		if n++; n == 2 {
			break
		}
	}
	if n != 2 {
		t.Errorf("iterated %d events after a break at 2", n)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	var last error
	var seen int
	for ev, err := range open().CodecEvents(cctx) {
		seen++
		if err != nil && ev != nil {
			t.Errorf("an error came with an event")
		}
		last = err
	}
	if !errors.Is(last, context.Canceled) || seen != 1 {
		t.Errorf("cancelled: %d pairs, last error %v", seen, last)
	}
}

// TestNextHonoursAnEndedContext: a ctx that has ended is Next's error even
// when the next event is decoded and waiting in memory (the producers read
// ahead), and it does not break the reader: the next call with a live ctx
// goes on where the read stood. Before, a read under a cancelled ctx could
// run to its end and report io.EOF, as TestCodecEvents met now and then.
func TestNextHonoursAnEndedContext(t *testing.T) {
	b := newMem(t)
	evs := rows(10, 10, 5, "a", 1)
	(seg{writer: "w1", epoch: 1, seq: 1, events: evs}).write(t, b)
	ctx := context.Background()
	r, err := Open(ctx, b, &Options{LogID: testLog, StartTs: 0, EndTs: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	first, err := r.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	firstTs := first.Event.CommitTs()
	// The one segment is read and decoded ahead by now: what follows is in
	// memory, and no wait would notice the ctx.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	for range 3 {
		if ev, err := r.Next(cctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Next under an ended ctx: %v, %v; want context.Canceled", ev, err)
		}
		if evs, err := r.NextBatch(cctx, 4); !errors.Is(err, context.Canceled) {
			t.Fatalf("NextBatch under an ended ctx: %d events, %v; want context.Canceled", len(evs), err)
		}
	}
	n := 1
	for {
		ev, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ev.Event.CommitTs() < firstTs {
			t.Fatalf("after the ended ctx the read went back to ts %d", ev.Event.CommitTs())
		}
		n++
	}
	if n != len(evs) {
		t.Fatalf("read %d events in all, want %d", n, len(evs))
	}
}
