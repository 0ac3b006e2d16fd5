package reader

import (
	"context"
	"errors"
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
