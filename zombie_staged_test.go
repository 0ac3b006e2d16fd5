package redokit_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/codec/codectest"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/writer"
)

// TestZombieStagedEventsNeverRead: a writer stages a transaction that it
// never commits (its span 2 lags), is taken over, and keeps staging as a
// zombie. None of its staged events is ever read (the takeover's fence cuts
// its epoch at the committed ts, below the transaction; what it stages
// after the takeover lies above the fence's seq), Verify counts them as
// staged and never committed, and GC removes its segments once the
// checkpoint passes them.
func TestZombieStagedEventsNeverRead(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	log, err := redokit.Open(ctx, b, "cf")
	must(t, err)
	coord, err := log.OpenCoordinator(ctx, &meta.CoordinatorOptions{StartTs: 100})
	must(t, err)
	must(t, coord.AddWriter(ctx, "w"))
	must(t, coord.AddSpan(ctx, 1, 100))
	must(t, coord.AddSpan(ctx, 2, 100))
	o := &writer.Options{MemoryQuota: 64 << 10, FlushBytes: 16 << 10, BlockSize: 4 << 10}
	zombie, err := log.OpenWriter(ctx, "w", o)
	must(t, err)
	for _, s := range []writer.SpanID{1, 2} {
		must(t, zombie.AddSpan(s, 100))
	}
	must(t, zombie.Write(ctx, 2, codectest.Row(110, codectest.Table("shop", "t2", 2), codectest.Key("id", 1))))
	must(t, zombie.AdvanceResolved(1, 150))
	must(t, zombie.AdvanceResolved(2, 150))
	if _, err := zombie.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	// The zombie's transaction at 200: span 1 resolves it, span 2 lags.
	const T = 200
	txn := func(w *writer.Writer, from, n int64) {
		t.Helper()
		for id := from; id < from+n; id++ {
			ev := codectest.Row(T, codectest.Table("shop", "t1", 1), codectest.Key("id", id), codectest.Str("pad", strings.Repeat("z", 200)))
			must(t, w.Write(ctx, 1, ev))
		}
	}
	txn(zombie, 0, 2000)
	must(t, zombie.AdvanceResolved(1, T))
	if _, err := zombie.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	if st := zombie.Stats(); st.StagedEvents == 0 || st.CommittedTs >= T {
		t.Fatalf("zombie stats %+v: want staged events and a committed ts below %d", st, T)
	}

	// The takeover. The new epoch writes the transaction as ids from
	// 10000, so that the zombie's are told apart.
	w, err := log.OpenWriter(ctx, "w", o)
	must(t, err)
	defer w.Close(ctx)
	for _, s := range []writer.SpanID{1, 2} {
		must(t, w.AddSpan(s, w.FlushedTs()))
	}
	// The zombie goes on staging: it does not know yet.
	for id := int64(5000); id < 7000; id++ {
		ev := codectest.Row(T, codectest.Table("shop", "t1", 1), codectest.Key("id", id), codectest.Str("pad", strings.Repeat("z", 200)))
		if err := zombie.Write(ctx, 1, ev); err != nil {
			break // it learnt of the fence
		}
	}
	txn(w, 10000, 100)
	must(t, w.AdvanceResolved(1, 300))
	must(t, w.AdvanceResolved(2, 300))
	if _, err := w.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := coord.Tick(ctx); err != nil {
		t.Fatal(err)
	}

	read := func() (n int) {
		t.Helper()
		rd, err := log.OpenReader(ctx, &redokit.ReadOptions{Options: reader.Options{KeepDuplicates: true}})
		must(t, err)
		defer rd.Close()
		for {
			ev, err := rd.Next(ctx)
			if errors.Is(err, io.EOF) {
				return n
			}
			must(t, err)
			if ev.Kind == codec.RowEvent && ev.CommitTs() == T {
				if id := ev.Row.Columns[0].Value.Int(); id < 10000 {
					t.Fatalf("read the zombie's staged event %d at ts %d from %s", id, T, ev.Source.Key)
				}
				n++
			}
		}
	}
	if n := read(); n != 100 {
		t.Fatalf("read %d events at ts %d, want the new epoch's 100", n, T)
	}
	rep, err := log.Verify(ctx, nil)
	must(t, err)
	if rep.Uncommitted == 0 {
		t.Fatalf("verify counted no staged, never committed events: %+v", rep)
	}
	if !rep.OK() {
		t.Fatalf("verify: %v", rep.Errors())
	}

	// The checkpoint passes the transaction: GC removes every segment of
	// the zombie's epoch.
	must(t, coord.SetCheckpoint(ctx, 300))
	if _, err := log.Collect(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for sg, err := range log.Segments(ctx) {
		must(t, err)
		if sg.Name.Epoch == 1 && sg.Name.MaxTs < 300 {
			t.Errorf("GC left the zombie's segment %s (max ts %d) below the checkpoint", sg.Key, sg.Name.MaxTs)
		}
	}
	zombie.Close(ctx)
}
