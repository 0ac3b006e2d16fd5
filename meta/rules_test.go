package meta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/redokit/redokit/segment"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/internal/layout"
)

// The body rules of docs/FORMAT.md ("Writer state", "Meta object"): each
// case takes an object as the package writes it, changes one field of its
// body, seals it again (so the CRC holds) and decodes it.

// storedBody returns the body of the object stored under key, as members.
func storedBody(t *testing.T, b *blob.Bucket, key string) map[string]json.RawMessage {
	t.Helper()
	data, err := b.ReadAll(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	// The body lies between the envelope's fixed text and its final brace.
	_, body, ok := bytes.Cut(data, []byte(envBodyPrefix))
	if !ok || len(body) == 0 {
		t.Fatalf("%s: no body in %s", key, data)
	}
	body = body[:len(body)-1]
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		t.Fatal(err)
	}
	return fields
}

// resealed is base with the given members replaced, sealed in an envelope.
func resealed(t *testing.T, base map[string]json.RawMessage, set map[string]string) []byte {
	t.Helper()
	fields := make(map[string]json.RawMessage, len(base))
	for k, v := range base {
		fields[k] = v
	}
	for k, v := range set {
		fields[k] = json.RawMessage(v)
	}
	body, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return seal(body)
}

type ruleCase struct {
	name string
	set  map[string]string
	ok   bool
}

// coordinatorMeta is a meta object as a coordinator writes it: one writer seen
// by a tick, one added and not seen, a span and a pending barrier.
func coordinatorMeta(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	ctx := context.Background()
	b := mem.New()
	t.Cleanup(func() { b.Close() })
	c, err := OpenCoordinator(ctx, b, "L", &CoordinatorOptions{StartTs: 100})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AcquireWriter(ctx, b, "L", "w1", nil); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{c.AddWriter(ctx, "w1"), c.AddWriter(ctx, "w2"), c.AddSpan(ctx, 1, 100), c.AddBarrier(ctx, "ddl-1", 150)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	return storedBody(t, b, layout.Meta("L"))
}

// leaseState is a writer state as a lease writes it after a publication.
func leaseState(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	ctx := context.Background()
	b := mem.New()
	t.Cleanup(func() { b.Close() })
	l, err := AcquireWriter(ctx, b, "L", "w1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.PublishProgress(ctx, Progress{FlushedTs: 120, Seq: 1, ChainMaxTs: 118, Digest: 7, Spans: []segment.SpanTs{{Span: 1, Ts: 120}}}); err != nil {
		t.Fatal(err)
	}
	return storedBody(t, b, layout.WriterState("L", "w1"))
}

// numberForms are the cases of "Number forms": a JSON integer literal
// without sign, fraction or exponent, within the type's range.
func numberForms(field string, max uint64) []ruleCase {
	return []ruleCase{
		{field + " 0", map[string]string{field: "0"}, true},
		{field + " max", map[string]string{field: fmt.Sprint(max)}, true},
		{field + " max+1", map[string]string{field: fmt.Sprintf("%d0", max/10+1)}, false},
		{field + " 1.0", map[string]string{field: "1.0"}, false},
		{field + " 1e0", map[string]string{field: "1e0"}, false},
		{field + " -1", map[string]string{field: "-1"}, false},
		{field + " -0", map[string]string{field: "-0"}, false},
		{field + " string", map[string]string{field: `"1"`}, false},
	}
}

func TestMetaRules(t *testing.T) {
	base := coordinatorMeta(t)
	if _, err := decodeMeta("L/meta", resealed(t, base, nil)); err != nil {
		t.Fatalf("the coordinator's own object: %v", err)
	}
	cases := []ruleCase{
		// writers: keys are writer IDs; values are epochs as the
		// coordinator stores them, 0 for a writer added and not seen yet.
		{"writer value 0", map[string]string{"writers": `{"w1":0}`}, true},
		{"writer value 7", map[string]string{"writers": `{"w1":7}`}, true},
		{"writer key a/b", map[string]string{"writers": `{"a/b":1}`}, false},
		{"writer key empty", map[string]string{"writers": `{"":1}`}, false},
		{"writer key ..", map[string]string{"writers": `{"..":1}`}, false},
		{"writer key host:port", map[string]string{"writers": `{"h:1":1}`}, false},
		{"writer key 65 bytes", map[string]string{"writers": fmt.Sprintf(`{"%065d":1}`, 0)}, false},
		{"writer value -1", map[string]string{"writers": `{"w1":-1}`}, false},
		{"writer value 1.5", map[string]string{"writers": `{"w1":1.5}`}, false},
		{"writers null", map[string]string{"writers": `null`}, true},
		// spans: keys are unsigned decimal uint64s.
		{"span key 1", map[string]string{"spans": `{"1":120}`}, true},
		{"span key max", map[string]string{"spans": `{"18446744073709551615":120}`}, true},
		{"span key x", map[string]string{"spans": `{"x":120}`}, false},
		{"span key -1", map[string]string{"spans": `{"-1":120}`}, false},
		{"span key +1", map[string]string{"spans": `{"+1":120}`}, false},
		{"span key 1.0", map[string]string{"spans": `{"1.0":120}`}, false},
		{"span key 2^64", map[string]string{"spans": `{"18446744073709551616":120}`}, false},
		{"span key empty", map[string]string{"spans": `{"":120}`}, false},
		{"span value 1e2", map[string]string{"spans": `{"1":1e2}`}, false},
		// barriers: id a non-empty string, once; resolved_ts ≤ commit_ts.
		{"barrier at resolved", map[string]string{"barriers": `[{"id":"d","commit_ts":100}]`}, true},
		{"barrier below resolved", map[string]string{"barriers": `[{"id":"d","commit_ts":99}]`}, false},
		{"barrier id number", map[string]string{"barriers": `[{"id":7,"commit_ts":150}]`}, false},
		{"barrier id empty", map[string]string{"barriers": `[{"id":"","commit_ts":150}]`}, false},
		{"barrier id null", map[string]string{"barriers": `[{"id":null,"commit_ts":150}]`}, false},
		{"barrier id twice", map[string]string{"barriers": `[{"id":"d","commit_ts":150},{"id":"d","commit_ts":160}]`}, false},
		{"two barriers", map[string]string{"barriers": `[{"id":"d","commit_ts":160},{"id":"e","commit_ts":150}]`}, true},
		{"barriers null", map[string]string{"barriers": `null`}, true},
		{"barrier missing commit_ts", map[string]string{"barriers": `[{"id":"d"}]`}, false},
		// updated: RFC 3339, nothing else.
		{"updated with offset", map[string]string{"updated": `"2026-12-03T02:00:01.5+01:00"`}, true},
		{"updated yesterday", map[string]string{"updated": `"yesterday"`}, false},
		{"updated date only", map[string]string{"updated": `"2026-12-03"`}, false},
		{"updated number", map[string]string{"updated": `1764723601`}, false},
		// token: 32 lowercase hex digits.
		{"token upper", map[string]string{"token": `"0E9D8C7B6A5F4E3D2C1B0A9F8E7D6C5B"`}, false},
		{"token short", map[string]string{"token": `"0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5"`}, false},
		{"token x", map[string]string{"token": `"x"`}, false},
		{"token empty", map[string]string{"token": `""`}, false},
		{"token ok", map[string]string{"token": `"0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b"`}, true},
		// checkpoint_ts ≤ resolved_ts.
		{"checkpoint above resolved", map[string]string{"checkpoint_ts": "121", "resolved_ts": "120", "barriers": "[]"}, false},
	}
	for _, c := range numberForms("resolved_ts", 1<<64-1) {
		// Keep checkpoint ≤ resolved ≤ every barrier's commit ts.
		c.set["checkpoint_ts"], c.set["barriers"] = "0", "[]"
		cases = append(cases, c)
	}
	runRuleCases(t, cases, func(set map[string]string) error {
		_, err := decodeMeta("L/meta", resealed(t, base, set))
		return err
	})
}

func TestStateRules(t *testing.T) {
	base := leaseState(t)
	if _, err := decodeWriterState("L/writers/w1", resealed(t, base, nil)); err != nil {
		t.Fatalf("the lease's own object: %v", err)
	}
	cases := []ruleCase{
		{"epoch 0", map[string]string{"epoch": "0"}, false},
		{"updated yesterday", map[string]string{"updated": `"yesterday"`}, false},
		{"token upper", map[string]string{"token": `"6F1C2A9E0B7D4C3F8A5E1D2C3B4A5968"`}, false},
		{"token empty", map[string]string{"token": `""`}, false},
		{"seq without has_seq", map[string]string{"has_seq": "false"}, false},
		{"seq 0 with has_seq", map[string]string{"seq": "0"}, true},
		{"span 1.0", map[string]string{"spans": `[{"span":1.0,"ts":120}]`}, false},
		{"fence at epoch", map[string]string{"fences": `[{"epoch":1,"last_seq":0,"max_ts":0,"digest":0,"committed_ts":0}]`}, false},
		// committed_ts: at least flushed_ts (120 here); a fence's has no
		// rule of its own (it may be below its max_ts, or above it).
		{"committed at flushed", map[string]string{"committed_ts": "120"}, true},
		{"committed above flushed", map[string]string{"committed_ts": "121"}, true},
		{"committed below flushed", map[string]string{"committed_ts": "119"}, false},
		{"committed 0", map[string]string{"committed_ts": "0"}, false},
		{"fence committed below max", map[string]string{"epoch": "2", "fences": `[{"epoch":1,"last_seq":3,"max_ts":131,"digest":0,"committed_ts":120}]`}, true},
		{"fence committed above max", map[string]string{"epoch": "2", "fences": `[{"epoch":1,"last_seq":3,"max_ts":118,"digest":0,"committed_ts":120}]`}, true},
		{"fence committed missing", map[string]string{"epoch": "2", "fences": `[{"epoch":1,"last_seq":3,"max_ts":131,"digest":0}]`}, false},
		{"fence committed -1", map[string]string{"epoch": "2", "fences": `[{"epoch":1,"last_seq":3,"max_ts":131,"digest":0,"committed_ts":-1}]`}, false},
	}
	// flushed_ts with committed_ts kept at or above it, and committed_ts
	// with flushed_ts at 0.
	for _, c := range numberForms("flushed_ts", 1<<64-1) {
		if c.ok {
			c.set["committed_ts"] = c.set["flushed_ts"]
		}
		cases = append(cases, c)
	}
	for _, c := range numberForms("committed_ts", 1<<64-1) {
		c.set["flushed_ts"] = "0"
		cases = append(cases, c)
	}
	cases = append(cases, numberForms("digest", 1<<32-1)...)
	runRuleCases(t, cases, func(set map[string]string) error {
		_, err := decodeWriterState("L/writers/w1", resealed(t, base, set))
		return err
	})
}

func runRuleCases(t *testing.T, cases []ruleCase, decode func(map[string]string) error) {
	t.Helper()
	for _, c := range cases {
		err := decode(c.set)
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case !c.ok && err == nil:
			t.Errorf("%s: accepted", c.name)
		case !c.ok && !errors.Is(err, ErrCorrupt):
			t.Errorf("%s: %v does not match ErrCorrupt", c.name, err)
		}
	}
}

// TestSpanKeyLeadingZeros pins what readers do with a span key with
// leading zeros (docs/FORMAT.md, "Meta object"): writers never write one;
// readers accept it as the span it spells.
func TestSpanKeyLeadingZeros(t *testing.T) {
	// "01" and "1" would be two keys in the JSON and one span in the map:
	// a number key has one form.
	for _, spans := range []string{`{"01":120}`, `{"1":120,"01":130}`, `{"00":1}`} {
		_, err := decodeMeta("L/meta", resealed(t, coordinatorMeta(t), map[string]string{"spans": spans}))
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "leading zeros") {
			t.Fatalf("spans %s: %v, want ErrCorrupt naming the leading zeros", spans, err)
		}
	}
	m, err := decodeMeta("L/meta", resealed(t, coordinatorMeta(t), map[string]string{"spans": `{"0":1,"10":2}`}))
	if err != nil || len(m.Spans) != 2 {
		t.Fatalf("spans 0 and 10: %v, %v", m, err)
	}
}

// TestCoordinatorKeepsBarrierRule drives a coordinator through random
// barriers, releases, progress and ticks and reads its object back after
// every step: the strict reader must accept everything it writes (the
// barrier rule is the coordinator's invariant, so readers may check it).
func TestCoordinatorKeepsBarrierRule(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	c, err := OpenCoordinator(ctx, b, "L", &CoordinatorOptions{StartTs: 10})
	if err != nil {
		t.Fatal(err)
	}
	l, err := AcquireWriter(ctx, b, "L", "w", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{c.AddWriter(ctx, "w"), c.AddSpan(ctx, 1, 10), c.AddSpan(ctx, 2, 10)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(25, 4))
	flushed := map[SpanID]uint64{1: 10, 2: 10}
	var seq uint64
	for step := range 300 {
		m := c.Meta()
		switch rng.IntN(4) {
		case 0:
			id := fmt.Sprintf("b%d", rng.IntN(4))
			ts := m.ResolvedTs + uint64(rng.IntN(40))
			if rng.IntN(5) == 0 && m.ResolvedTs > 0 {
				ts = m.ResolvedTs - 1 // too late: refused
			}
			err := c.AddBarrier(ctx, id, ts)
			if ts < m.ResolvedTs && !errors.Is(err, ErrBarrierTooLate) || ts >= m.ResolvedTs && err != nil {
				t.Fatalf("step %d: barrier %s at %d, resolved %d: %v", step, id, ts, m.ResolvedTs, err)
			}
		case 1:
			if err := c.ReleaseBarrier(ctx, fmt.Sprintf("b%d", rng.IntN(4))); err != nil {
				t.Fatal(err)
			}
		case 2:
			s := SpanID(1 + rng.IntN(2))
			flushed[s] += uint64(rng.IntN(30))
			seq++
			var sp []segment.SpanTs
			for _, id := range []SpanID{1, 2} {
				sp = append(sp, segment.SpanTs{Span: uint64(id), Ts: flushed[id]})
			}
			if err := l.PublishProgress(ctx, Progress{FlushedTs: min(flushed[1], flushed[2]), Seq: seq, Spans: sp}); err != nil {
				t.Fatal(err)
			}
		case 3:
			if _, err := c.Tick(ctx); err != nil {
				t.Fatalf("step %d: tick: %v", step, err)
			}
		}
		got, _, err := ReadMeta(ctx, b, "L")
		if err != nil {
			t.Fatalf("step %d: the coordinator wrote an object its readers refuse: %v", step, err)
		}
		for _, br := range got.Barriers {
			if br.CommitTs < got.ResolvedTs {
				t.Fatalf("step %d: barrier %+v below resolved %d", step, br, got.ResolvedTs)
			}
		}
	}
}
