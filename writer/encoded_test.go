package writer

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/segment"
)

func encode(evs ...codec.Event) [][]byte {
	out := make([][]byte, len(evs))
	for i := range evs {
		out[i] = codec.AppendEvent(nil, &evs[i])
	}
	return out
}

// TestWriteEncoded writes a span's events partly as events and partly
// encoded: the log holds them all, in order, as if all had been Written.
func TestWriteEncoded(t *testing.T) {
	onBothStores(t, func(t *testing.T, b *blob.Bucket) {
		ctx := context.Background()
		w := openSpan1(t, b, testOptions("w"))
		writeRange(t, w, 1, 1, 10)
		var evs []codec.Event
		for ts := uint64(11); ts <= 20; ts++ {
			evs = append(evs, row(1, ts, int64(ts)))
		}
		must(t, w.WriteEncoded(ctx, 1, encode(evs...)...))
		must(t, w.WriteEncoded(ctx, 1, encode(ddl(1, 20, "CREATE INDEX i ON t1(v)"))...))
		writeFlushed(t, w, 1, 21, 30)
		if s := w.Stats(); s.Rows != 30 || s.DDLs != 1 {
			t.Fatalf("stats %+v: want 30 rows and a DDL", s)
		}
		must(t, w.Close(ctx))
		gs := readLog(t, b, readOpts{})
		var rows []got
		for _, g := range gs {
			if g.kind == segment.KindRow {
				rows = append(rows, g)
			}
		}
		checkIDs(t, rows, 1, 30)
		if len(gs) != 31 || gs[20].ddl != "CREATE INDEX i ON t1(v)" || gs[20].ts != 20 {
			t.Fatalf("read back:\n%s\nwant the DDL after the rows at 20", describe(gs))
		}
	})
}

// TestWriteEncodedRefusesCorrupt gives WriteEncoded bytes no reader could
// decode, or an event out of the span's order: each call is refused whole,
// naming the span, the event and (for bad bytes) the offset, and nothing of
// it is written.
func TestWriteEncodedRefusesCorrupt(t *testing.T) {
	ctx := context.Background()
	w := open(t, memBucket(), testOptions("w"))
	must(t, w.AddSpan(7, 100))
	good := encode(row(7, 110, 1), row(7, 120, 2))
	must(t, w.WriteEncoded(ctx, 7, good...))

	monthThirteen := row(7, 130, 3)
	monthThirteen.Row.Columns = append(monthThirteen.Row.Columns, codec.Column{Name: "at", Type: codec.TypeDatetime,
		Value: codec.DatetimeValue(codec.DateTime{Year: 2026, Month: 13, Day: 1})})
	ok := encode(row(7, 130, 4))[0]
	truncated := encode(row(7, 130, 5))[0]
	truncated = truncated[:len(truncated)-3]
	badKind := encode(row(7, 130, 6))[0]
	badKind[1] = 9
	trailing := append(encode(row(7, 130, 7))[0], 0)
	for name, c := range map[string][]byte{
		"truncated": truncated, "kind": badKind, "trailing": trailing, "month 13": encode(monthThirteen)[0],
	} {
		err := w.WriteEncoded(ctx, 7, ok, c)
		if err == nil {
			t.Fatalf("%s: accepted", name)
		}
		t.Logf("%s: %v", name, err)
		if !strings.Contains(err.Error(), "span 7") || !strings.Contains(err.Error(), "encoded event 1") {
			t.Errorf("%s: error %q does not name the span and the event", name, err)
		}
		var de *codec.DecodeError
		if errors.As(err, &de) {
			if !strings.Contains(err.Error(), "offset") {
				t.Errorf("%s: error %q does not name the offset", name, err)
			}
		} else if !errors.Is(err, codec.ErrInvalidEvent) {
			t.Errorf("%s: error %v is neither a decode error nor an invalid event", name, err)
		}
	}
	// Bad first: its header is read before the room is taken, the rest
	// in its copy.
	for name, c := range map[string][]byte{"truncated": truncated, "kind": badKind} {
		if err := w.WriteEncoded(ctx, 7, c, ok); err == nil || !strings.Contains(err.Error(), "encoded event 0") {
			t.Fatalf("%s first: %v; want an error naming encoded event 0", name, err)
		}
	}
	must(t, w.AddSpan(9, 100))
	if err := w.WriteEncoded(ctx, 9, encode(row(9, 100, 8))...); !errors.Is(err, ErrBelowResolved) {
		t.Fatalf("encoded event at the resolved ts: %v", err)
	}
	if err := w.WriteEncoded(ctx, 7, encode(row(7, 115, 9))...); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("encoded event going back: %v", err)
	}
	// Out of order further into a call: found in the copy, the call refused whole.
	if err := w.WriteEncoded(ctx, 7, encode(row(7, 140, 10), row(7, 150, 11), row(7, 145, 12))...); !errors.Is(err, ErrOutOfOrder) ||
		!strings.Contains(err.Error(), "event 2") {
		t.Fatalf("third encoded event going back: %v", err)
	}
	if err := w.WriteEncoded(ctx, 8, good...); !errors.Is(err, ErrUnknownSpan) {
		t.Fatalf("unknown span: %v", err)
	}
	if s := w.Stats(); s.WrittenEvents != 2 {
		t.Fatalf("%d events written, want only the good call's 2", s.WrittenEvents)
	}
	must(t, w.AdvanceResolved(7, 200))
	must(t, w.AdvanceResolved(9, 200))
	mustFlush(t, w)
	// A refused call gave back the memory it took: its events were copied
	// (and found bad in the copy) before anything was published.
	if s := w.Stats(); s.BufferedBytes != 0 {
		t.Fatalf("%d bytes still buffered after refused calls", s.BufferedBytes)
	}
	must(t, w.Close(ctx))
}
