package cli

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/writer"
)

// deadWriterLog is a log of two writers, w1 and w2, with a coordinator: what
// the tests of 'redokit writer' start from.
type deadWriterLog struct {
	store string
	log   *redokit.Log
	coord *meta.Coordinator
}

func newDeadWriterLog(t *testing.T, name string) *deadWriterLog {
	t.Helper()
	ctx := context.Background()
	store := memName(t)
	b, err := blob.Open(ctx, store)
	flipMust(t, err)
	t.Cleanup(func() { b.Close() })
	log, err := redokit.Open(ctx, b, name)
	flipMust(t, err)
	coord, err := log.OpenCoordinator(ctx, nil)
	flipMust(t, err)
	return &deadWriterLog{store: store, log: log, coord: coord}
}

// open opens writer id with span 1 from ts 100: no flush or publication
// happens unless the test asks for it.
func (d *deadWriterLog) open(t *testing.T, id string) *writer.Writer {
	t.Helper()
	ctx := context.Background()
	flipMust(t, d.coord.AddWriter(ctx, id))
	w, err := d.log.OpenWriter(ctx, id, &writer.Options{FlushInterval: time.Hour, PublishInterval: time.Hour})
	flipMust(t, err)
	// The writer is never closed, as after a SIGKILL; the cleanup only
	// stops its goroutines once the test is over.
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	flipMust(t, w.AddSpan(1, 100))
	return w
}

// write writes one row at each ts of (from, to] and resolves span 1 to to.
func writeUpTo(t *testing.T, w *writer.Writer, from, to uint64) {
	t.Helper()
	r := rand.New(rand.NewPCG(from, to))
	for ts := from + 1; ts <= to; ts++ {
		flipMust(t, w.Write(context.Background(), 1, flipRow(r, 1, ts, int64(ts))))
	}
	flipMust(t, w.AdvanceResolved(1, to))
}

type writerJSON struct {
	Writer     string  `json:"writer"`
	Live       bool    `json:"live"`
	Epoch      uint64  `json:"epoch"`
	FlushedTs  uint64  `json:"flushed_ts,string"`
	AgeSeconds float64 `json:"age_seconds"`
	Stale      bool    `json:"stale"`
}

type writersJSON struct {
	ResolvedTs        uint64       `json:"resolved_ts,string"`
	StaleAfterSeconds float64      `json:"stale_after_seconds"`
	Writers           []writerJSON `json:"writers"`
}

func (v writersJSON) find(t *testing.T, id string) writerJSON {
	t.Helper()
	for _, w := range v.Writers {
		if w.Writer == id {
			return w
		}
	}
	t.Fatalf("no writer %s in %+v", id, v)
	return writerJSON{}
}

// TestDeadWriter: a writer killed (left unclosed) pins the global resolved
// ts; meta and writer ls show it stale past --stale-after; writer rm refuses
// without --yes and while the writer is younger than --stale-after, and with
// --yes fences it and removes it from the live writers, after which a tick
// of the running coordinator moves the global resolved ts past it.
func TestDeadWriter(t *testing.T) {
	ctx := context.Background()
	d := newDeadWriterLog(t, "dead")
	w1, w2 := d.open(t, "w1"), d.open(t, "w2")
	writeUpTo(t, w2, 100, 150)
	_, err := w2.Publish(ctx)
	flipMust(t, err)
	// w2 dies here. w1 goes on.
	writeUpTo(t, w1, 100, 300)
	_, err = w1.Publish(ctx)
	flipMust(t, err)
	m, err := d.coord.Tick(ctx)
	flipMust(t, err)
	if m.ResolvedTs != 150 {
		t.Fatalf("the dead writer should pin the global resolved ts at 150, got %d", m.ResolvedTs)
	}
	args := []string{"--storage", d.store, "--log", "dead"}

	// Fresh: not stale at the default 30s.
	var v writersJSON
	decodeJSON(t, cli(t, append([]string{"meta", "--json"}, args...)...).stdout, &v)
	if v.StaleAfterSeconds != 30 || v.find(t, "w2").Stale {
		t.Fatalf("meta --json right after a publication: want stale_after_seconds 30 and w2 not stale, got %+v", v)
	}
	time.Sleep(20 * time.Millisecond)
	r := cli(t, append([]string{"meta", "--json", "--stale-after", "10ms"}, args...)...)
	wantCode(t, r, 0)
	v = writersJSON{}
	decodeJSON(t, r.stdout, &v)
	if w := v.find(t, "w2"); !w.Stale || w.AgeSeconds < 0.02 || !w.Live || v.StaleAfterSeconds != 0.01 {
		t.Fatalf("meta --json --stale-after 10ms: want w2 live, stale, at least 20ms old, threshold 0.01s, got %+v", v)
	}
	r = cli(t, append([]string{"meta", "--stale-after", "10ms"}, args...)...)
	wantCode(t, r, 0)
	mustContain(t, "meta", r.stdout, "older than 10ms", "AGE", "STALE")
	r = cli(t, append([]string{"writer", "ls", "--stale-after", "10ms"}, args...)...)
	wantCode(t, r, 0)
	mustContain(t, "writer ls", r.stdout, "WRITER", "EPOCH", "FLUSHED TS", "AGE", "STALE", "LIVE", "older than 10ms")
	v = writersJSON{}
	decodeJSON(t, cli(t, append([]string{"writer", "ls", "--json", "--stale-after", "10ms"}, args...)...).stdout, &v)
	if w := v.find(t, "w2"); !w.Stale || w.FlushedTs != 150 || w.Epoch != 1 {
		t.Fatalf("writer ls --json: want w2 stale at flushed ts 150, epoch 1, got %+v", v)
	}

	// Refusals: younger than --stale-after; no --yes; a prompt answered no.
	r = cli(t, append([]string{"writer", "rm", "w2", "--yes"}, args...)...)
	wantCode(t, r, 1)
	mustContain(t, "writer rm of a fresh writer", r.stderr, "writer w2", "dead/", "ago", "--stale-after 30s", "--force")
	r = cli(t, append([]string{"writer", "rm", "w2", "--stale-after", "10ms"}, args...)...)
	wantCode(t, r, 1)
	mustContain(t, "writer rm without --yes", r.stderr, "refusing to remove writer w2", "--yes")
	yes := true
	r = cliIn(t, "n\n", &yes, append([]string{"writer", "rm", "w2", "--stale-after", "10ms"}, args...)...)
	wantCode(t, r, 1)
	mustContain(t, "writer rm answered no", r.stderr, "Fence writer w2", "not confirmed")
	r = cli(t, append([]string{"writer", "rm", "w9", "--yes"}, args...)...)
	wantCode(t, r, 1)
	mustContain(t, "writer rm of an unknown writer", r.stderr, "writer w9", "not a live writer", "meta")
	if st, err := d.log.WriterStates(ctx); err != nil || st["w2"].Epoch != 1 {
		t.Fatalf("a refused rm changed w2's state: %+v, %v", st["w2"], err)
	}

	r = cli(t, append([]string{"writer", "rm", "w2", "--yes", "--stale-after", "10ms"}, args...)...)
	wantCode(t, r, 0)
	mustContain(t, "writer rm", r.stdout, "writer w2 of log dead fenced: epoch 1 → 2", "removed from the live writers")
	v = writersJSON{}
	decodeJSON(t, cli(t, append([]string{"meta", "--json"}, args...)...).stdout, &v)
	if w := v.find(t, "w2"); w.Live || w.Epoch != 2 || w.FlushedTs != 150 {
		t.Fatalf("after writer rm: want w2 not live, at epoch 2, flushed ts 150 kept, got %+v", w)
	}
	m, err = d.coord.Tick(ctx)
	flipMust(t, err)
	if m.ResolvedTs != 300 {
		t.Fatalf("after writer rm, a tick should move the global resolved ts past 150 to w1's 300, got %d", m.ResolvedTs)
	}

	// A live writer that never opened (no state object) holds the global
	// resolved ts at zero: rm removes it, with nothing to fence.
	flipMust(t, d.coord.AddWriter(ctx, "w3"))
	r = cli(t, append([]string{"writer", "rm", "w3"}, args...)...)
	wantCode(t, r, 1)
	mustContain(t, "writer rm w3 without --yes", r.stderr, "refusing to remove writer w3", "--yes")
	r = cli(t, append([]string{"writer", "rm", "w3", "--yes"}, args...)...)
	wantCode(t, r, 0)
	mustContain(t, "writer rm w3", r.stdout, "writer w3 removed from the live writers")
	got, err := d.log.Meta(ctx)
	flipMust(t, err)
	if _, live := got.Writers["w3"]; live {
		t.Fatalf("after writer rm w3: still live in %+v", got.Writers)
	}
	wantCode(t, cli(t, append([]string{"writer", "ls", "--stale-after", "0s"}, args...)...), 2)
	wantCode(t, cli(t, append([]string{"writer"}, args...)...), 2)
}

// TestWriterFence: fence keeps a flush the writer reported durable but had
// not yet published in its state object, and the old epoch can publish
// nothing more.
func TestWriterFence(t *testing.T) {
	ctx := context.Background()
	d := newDeadWriterLog(t, "fenced")
	w := d.open(t, "w1")
	writeUpTo(t, w, 100, 120)
	_, err := w.Publish(ctx)
	flipMust(t, err)
	writeUpTo(t, w, 120, 200)
	flushed, err := w.Flush(ctx) // durable, reported, not published (PublishInterval is an hour)
	flipMust(t, err)
	states, err := d.log.WriterStates(ctx)
	flipMust(t, err)
	before := states["w1"]
	if flushed != 200 || before.FlushedTs != 120 {
		t.Fatalf("want a flush to 200 reported and 120 published, got %d and %d", flushed, before.FlushedTs)
	}

	r := cli(t, "writer", "fence", "w1", "--storage", d.store, "--log", "fenced", "--json")
	wantCode(t, r, 0)
	var res struct {
		Writer          string     `json:"writer"`
		Key             string     `json:"key"`
		EpochBefore     uint64     `json:"epoch_before"`
		FlushedTsBefore uint64     `json:"flushed_ts_before,string"`
		Epoch           uint64     `json:"epoch"`
		FlushedTs       uint64     `json:"flushed_ts,string"`
		Fence           *fenceJSON `json:"fence"`
	}
	decodeJSON(t, r.stdout, &res)
	if res.Writer != "w1" || res.Key != d.log.WriterKey("w1") || res.EpochBefore != before.Epoch || res.Epoch != before.Epoch+1 ||
		res.FlushedTsBefore != 120 || res.FlushedTs != 200 || res.Fence == nil || res.Fence.Epoch != before.Epoch || res.Fence.LastSeq < before.Seq {
		t.Fatalf("writer fence --json: want epoch %d → %d, flushed ts 120 → 200 (the reported flush kept), a fence of epoch %d at seq ≥ %d; got %+v",
			before.Epoch, before.Epoch+1, before.Epoch, before.Seq, res)
	}
	if _, err := w.Publish(ctx); err == nil {
		t.Fatal("the fenced epoch published again")
	}
	states, err = d.log.WriterStates(ctx)
	flipMust(t, err)
	if after := states["w1"]; after.Epoch != before.Epoch+1 || after.FlushedTs != 200 {
		t.Fatalf("after the fence: want epoch %d at flushed ts 200, got %+v", before.Epoch+1, after)
	}
	// Text: the fence as meta shows it; a writer without a state is named
	// with its key.
	r = cli(t, "writer", "fence", "w1", "--storage", d.store, "--log", "fenced")
	wantCode(t, r, 0)
	mustContain(t, "writer fence", r.stdout, "writer w1 of log fenced fenced: epoch 2 → 3", "flushed ts 200 → 200", d.log.WriterKey("w1"))
	r = cli(t, "writer", "fence", "nobody", "--storage", d.store, "--log", "fenced")
	wantCode(t, r, 1)
	mustContain(t, "writer fence nobody", r.stderr, "writer nobody", "no state object", d.log.WriterKey("nobody"))
}
