package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/segment"
)

// Object version 4 (docs/FORMAT.md, "Writer state"): a writer state's
// committed_ts and each fence's.

// sealVersion wraps body in the envelope of the given version, as a build
// writing that version did.
func sealVersion(body []byte, version int) []byte {
	return fmt.Appendf(nil, `{"version":%d,"crc32c":"%08x","body":%s}`, version, crcOf(body), body)
}

// bodyOf is st's body as this build encodes it, with the given members
// removed: the body an older version wrote.
func bodyOf(t *testing.T, st *WriterState, drop ...string) []byte {
	t.Helper()
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	for _, d := range drop {
		s = dropMember(t, s, d)
	}
	return []byte(s)
}

// dropMember removes every member "name":<number> from the JSON text s.
func dropMember(t *testing.T, s, name string) string {
	t.Helper()
	for {
		i := strings.Index(s, `"`+name+`":`)
		if i < 0 {
			return s
		}
		j := i + len(name) + 3
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		switch {
		case j < len(s) && s[j] == ',':
			s = s[:i] + s[j+1:]
		case i > 0 && s[i-1] == ',':
			s = s[:i-1] + s[j:]
		default:
			t.Fatalf("cannot drop %q from %s", name, s)
		}
	}
}

// committedState is a version-4 writer state with a committed ts above its
// flushed ts (a span added behind the writer) and fences whose committed
// ts lie below their max ts (staged events, cut by readers).
func committedState() *WriterState {
	return &WriterState{
		Version: StateVersion, LogID: "L", WriterID: "w1", Epoch: 3,
		FlushedTs: 120, Seq: 9, HasSeq: true, ChainMaxTs: 170, Digest: 0xfeedface, CommittedTs: 150,
		Spans: []segment.SpanTs{{Span: 1, Ts: 150}, {Span: 2, Ts: 120}},
		Fences: []Fence{
			{Epoch: 1, LastSeq: 3, MaxTs: 118, Digest: 11, CommittedTs: 100},
			{Epoch: 2, LastSeq: 6, MaxTs: 131, Digest: 22, CommittedTs: 131},
		},
		Generation: 9, MetaGeneration: 4, Owner: "host:1",
		Updated: time.Date(2026, 12, 3, 1, 0, 0, 0, time.UTC), Token: "6f1c2a9e0b7d4c3f8a5e1d2c3b4a5968",
	}
}

// TestStateCommittedRoundTrip: a version-4 state's committed_ts and its
// fences' committed_ts are stored and read back as they are, whatever they
// are beside the flushed ts (at or above it) and the max ts.
func TestStateCommittedRoundTrip(t *testing.T) {
	st := committedState()
	data := encodeWriterState(st)
	for _, want := range []string{`{"version":4,`, `"committed_ts":150,`, `"max_ts":118,"digest":11,"committed_ts":100}`, `"max_ts":131,"digest":22,"committed_ts":131}`} {
		if !strings.Contains(string(data), want) {
			t.Fatalf("encoded state %s lacks %s", data, want)
		}
	}
	got, err := decodeWriterState("L/writers/w1", data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, st) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", got, st)
	}

	// Through a store and a lease: PublishProgress stores the committed
	// ts given, or the flushed ts when that is higher.
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	l, err := AcquireWriter(ctx, b, "L", "w1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := l.State(); s.CommittedTs != 0 || s.FlushedTs != 0 {
		t.Fatalf("a new writer's state: %+v", s)
	}
	for _, c := range []struct {
		flushed, committed, want uint64
	}{{120, 150, 150}, {150, 150, 150}, {160, 0, 160}, {170, 165, 170}, {140, 170, 170}} {
		p := Progress{FlushedTs: c.flushed, CommittedTs: c.committed, Seq: 1, ChainMaxTs: 180, Digest: 1}
		if err := l.PublishProgress(ctx, p); err != nil {
			t.Fatal(err)
		}
		got, _, err := ReadWriterState(ctx, b, "L", "w1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != StateVersion || got.FlushedTs != c.flushed || got.CommittedTs != c.want || l.State().CommittedTs != c.want {
			t.Fatalf("published flushed %d committed %d: stored %+v, want committed ts %d", c.flushed, c.committed, got, c.want)
		}
	}
	// A change of the committed ts alone is a publication.
	gen := l.State().Generation
	if err := l.PublishProgress(ctx, Progress{FlushedTs: 140, CommittedTs: 175, Seq: 1, ChainMaxTs: 180, Digest: 1}); err != nil {
		t.Fatal(err)
	}
	if s := l.State(); s.Generation != gen+1 || s.CommittedTs != 175 {
		t.Fatalf("after publishing a new committed ts alone: %+v", s)
	}
	if err := l.PublishProgress(ctx, Progress{FlushedTs: 140, CommittedTs: 175, Seq: 1, ChainMaxTs: 180, Digest: 1}); err != nil || l.State().Generation != gen+1 {
		t.Fatalf("publishing the same progress again wrote: %v", err)
	}
}

// TestStateOldVersionsCommitted: a version-3 or 2 state has no committed
// ts; it reads as the larger of its chain max ts and flushed ts, and each
// fence's as its max ts (where readers of those versions cut a fenced
// epoch). Those versions may not carry the field.
func TestStateOldVersionsCommitted(t *testing.T) {
	for _, version := range []int{3, 2} {
		for _, c := range []struct {
			name               string
			flushed, chain     uint64
			wantCommitted      uint64
			fenceMax, fenceCTs uint64
		}{
			{"chain max above flushed", 120, 170, 170, 118, 118},
			{"flushed above chain max", 120, 100, 120, 131, 131},
			{"nothing yet", 0, 0, 0, 0, 0},
		} {
			name := fmt.Sprintf("version %d, %s", version, c.name)
			st := committedState()
			st.FlushedTs, st.ChainMaxTs, st.CommittedTs = c.flushed, c.chain, 0
			st.Fences = []Fence{{Epoch: 2, LastSeq: 6, MaxTs: c.fenceMax, Digest: 22}}
			drop := []string{"committed_ts"}
			if version == 2 {
				st.Generation, st.MetaGeneration = 0, 0
				drop = append(drop, "generation", "meta_generation")
			}
			body := bodyOf(t, st, drop...)
			got, err := decodeWriterState("L/writers/w1", sealVersion(body, version))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got.Version != version || got.CommittedTs != c.wantCommitted || got.FlushedTs != c.flushed || got.ChainMaxTs != c.chain ||
				len(got.Fences) != 1 || got.Fences[0] != (Fence{Epoch: 2, LastSeq: 6, MaxTs: c.fenceMax, Digest: 22, CommittedTs: c.fenceCTs}) {
				t.Fatalf("%s: decoded %+v", name, got)
			}
			// Written back, it is today's version, with the committed ts
			// it read as (and, as every write, a generation).
			back := *got
			back.Generation++
			again, err := decodeWriterState("L/writers/w1", encodeWriterState(&back))
			if err != nil || again.Version != StateVersion || again.CommittedTs != c.wantCommitted || again.Fences[0].CommittedTs != c.fenceCTs {
				t.Fatalf("%s: re-encoded: %+v %v", name, again, err)
			}
			// The field is new in version 4: unknown before it.
			for _, bad := range []string{
				strings.Replace(string(body), `"spans"`, `"committed_ts":170,"spans"`, 1),
				strings.Replace(string(body), `"digest":22}`, `"digest":22,"committed_ts":1}`, 1),
			} {
				if bad == string(body) {
					t.Fatalf("%s: the damage changed nothing in %s", name, body)
				}
				if _, err := decodeWriterState("L/writers/w1", sealVersion([]byte(bad), version)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "committed_ts") {
					t.Fatalf("%s: a committed_ts in a version-%d object: %v, want ErrCorrupt naming it", name, version, err)
				}
			}
		}
	}
}

// TestStateCommittedBelowFlushed: a version-4 state whose committed_ts is
// below its flushed_ts is corrupt, naming the key.
func TestStateCommittedBelowFlushed(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	st := committedState()
	key := layout.WriterState("L", "w1")
	for _, c := range [][2]uint64{{120, 119}, {1, 0}, {1<<64 - 1, 1<<64 - 2}} {
		st.FlushedTs, st.CommittedTs = c[0], c[1]
		if _, err := b.Put(ctx, key, encodeWriterState(st), nil); err != nil {
			t.Fatal(err)
		}
		_, _, err := ReadWriterState(ctx, b, "L", "w1")
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), fmt.Sprintf("committed ts %d below the flushed ts %d", c[1], c[0])) {
			t.Fatalf("flushed ts %d, committed ts %d: %v; want ErrCorrupt naming the key and both", c[0], c[1], err)
		}
		if _, err := ListWriterStates(ctx, b, "L", nil); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flushed ts %d, committed ts %d: ListWriterStates: %v", c[0], c[1], err)
		}
	}
}

// TestUnknownObjectVersion: a version this build does not read (5, the one
// after it; 1, never released) is ErrUnsupportedVersion naming the version
// and the key, for a writer state and for the meta object, whatever the
// body.
func TestUnknownObjectVersion(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	stateBody := bodyOf(t, committedState())
	metaBody := []byte(formatMetaV4[strings.Index(formatMetaV4, `"body":`)+7 : len(formatMetaV4)-1])
	for _, version := range []int{StateVersion + 1, 1, 40} {
		for _, c := range []struct {
			key  string
			body []byte
			read func() error
		}{
			{layout.WriterState("L", "w1"), stateBody, func() error { _, _, err := ReadWriterState(ctx, b, "L", "w1"); return err }},
			{layout.Meta("L"), metaBody, func() error { _, _, err := ReadMeta(ctx, b, "L"); return err }},
		} {
			if _, err := b.Put(ctx, c.key, sealVersion(c.body, version), nil); err != nil {
				t.Fatal(err)
			}
			err := c.read()
			if !errors.Is(err, ErrUnsupportedVersion) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("version %d;", version)) || !strings.Contains(err.Error(), c.key) {
				t.Fatalf("version %d of %s: %v; want ErrUnsupportedVersion naming the version and the key", version, c.key, err)
			}
		}
	}
	// Today's version of the same bodies reads.
	if _, err := decodeWriterState("L/writers/w1", sealVersion(stateBody, StateVersion)); err != nil {
		t.Fatal(err)
	}
	if _, err := decodeMeta("L/meta", sealVersion(metaBody, StateVersion)); err != nil {
		t.Fatal(err)
	}
}

// TestAcquireFenceCommitted: a takeover records the fence of the epoch it
// replaces with the committed ts of that epoch's durable progress (what
// AcquireOptions.Durable found beyond the publication, else the published
// state's), never below its flushed ts; the new epoch starts with its
// committed ts at the flushed ts it starts from.
func TestAcquireFenceCommitted(t *testing.T) {
	ctx := context.Background()
	spans := []segment.SpanTs{{Span: 1, Ts: 150}, {Span: 2, Ts: 140}}
	for _, c := range []struct {
		name    string
		durable *Progress // nil: nothing beyond the publication
		fence   Fence
		flushed uint64
	}{
		{"published", nil, Fence{Epoch: 1, LastSeq: 4, MaxTs: 160, Digest: 7, CommittedTs: 150}, 120},
		{"durable beyond", &Progress{FlushedTs: 140, Seq: 6, ChainMaxTs: 190, CommittedTs: 175, Digest: 9, Spans: spans},
			Fence{Epoch: 1, LastSeq: 6, MaxTs: 190, Digest: 9, CommittedTs: 175}, 140},
		{"durable at flushed", &Progress{FlushedTs: 180, Seq: 5, ChainMaxTs: 190, CommittedTs: 180, Digest: 9},
			Fence{Epoch: 1, LastSeq: 5, MaxTs: 190, Digest: 9, CommittedTs: 180}, 180},
		// A progress without a committed ts (a caller that does not
		// set it): the flushed ts.
		{"durable without committed ts", &Progress{FlushedTs: 145, Seq: 5, ChainMaxTs: 190, Digest: 9},
			Fence{Epoch: 1, LastSeq: 5, MaxTs: 190, Digest: 9, CommittedTs: 145}, 145},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := mem.New()
			defer b.Close()
			old, err := AcquireWriter(ctx, b, "L", "w1", nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := old.PublishProgress(ctx, Progress{FlushedTs: 120, CommittedTs: 150, Seq: 4, ChainMaxTs: 160, Digest: 7, Spans: spans}); err != nil {
				t.Fatal(err)
			}
			calls := 0
			l, err := AcquireWriter(ctx, b, "L", "w1", &AcquireOptions{Durable: func(_ context.Context, prev *WriterState) (*Progress, error) {
				calls++
				if prev.Epoch != 1 || prev.CommittedTs != 150 || prev.FlushedTs != 120 {
					t.Errorf("Durable called with %+v", prev)
				}
				return c.durable, nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			if calls == 0 {
				t.Fatal("Durable was not called")
			}
			st, _, err := ReadWriterState(ctx, b, "L", "w1")
			if err != nil {
				t.Fatal(err)
			}
			for what, s := range map[string]WriterState{"stored": *st, "lease": l.State()} {
				if s.Epoch != 2 || len(s.Fences) != 1 || s.Fences[0] != c.fence || s.FlushedTs != c.flushed || s.CommittedTs != c.flushed || s.HasSeq {
					t.Fatalf("%s state %+v; want fence %+v and flushed and committed ts %d", what, s, c.fence, c.flushed)
				}
			}
			// The fence stays as the next takeover records its own.
			if _, err := AcquireWriter(ctx, b, "L", "w1", nil); err != nil {
				t.Fatal(err)
			}
			st, _, err = ReadWriterState(ctx, b, "L", "w1")
			if err != nil || st.Epoch != 3 || len(st.Fences) != 1 || st.Fences[0] != c.fence {
				t.Fatalf("after a takeover of an epoch that published nothing: %+v %v", st, err)
			}
		})
	}

	// A version-3 state taken over: its committed ts is its chain max ts
	// or flushed ts, as the fence's then is.
	b := mem.New()
	defer b.Close()
	v3 := committedState()
	v3.Epoch, v3.Fences, v3.CommittedTs = 1, nil, 0
	v3.FlushedTs, v3.ChainMaxTs = 120, 170
	if _, err := b.Put(ctx, layout.WriterState("L", "w1"), sealVersion(bodyOf(t, v3, "committed_ts"), 3), nil); err != nil {
		t.Fatal(err)
	}
	l, err := AcquireWriter(ctx, b, "L", "w1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := l.State(); s.Epoch != 2 || s.Version != StateVersion || len(s.Fences) != 1 ||
		s.Fences[0] != (Fence{Epoch: 1, LastSeq: v3.Seq, MaxTs: 170, Digest: v3.Digest, CommittedTs: 170}) || s.CommittedTs != 120 {
		t.Fatalf("takeover of a version-3 state: %+v", s)
	}
}
