package writermetrics_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/codec/codectest"
	"github.com/redokit/redokit/writer"
	"github.com/redokit/redokit/writer/writermetrics"
)

const testLog = "log1"

func options(id string) *writer.Options {
	return &writer.Options{LogID: testLog, WriterID: id, FlushInterval: time.Hour, BlockSize: 4 << 10}
}

func open(t *testing.T, b *blob.Bucket, o *writer.Options) *writer.Writer {
	t.Helper()
	w, err := writer.Open(context.Background(), b, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(context.Background()) })
	return w
}

func row(ts uint64) codec.Event {
	return codectest.Row(ts, codectest.Table("db", "t1", 1), codectest.Key("id", int64(ts)), codectest.Str("v", fmt.Sprintf("value at %d", ts)))
}

// write writes rows from..to on span 1, resolves to, and flushes.
func write(t *testing.T, w *writer.Writer, from, to uint64) {
	t.Helper()
	ctx := context.Background()
	for ts := from; ts <= to; ts++ {
		must(t, w.Write(ctx, 1, row(ts)))
	}
	must(t, w.AdvanceResolved(1, to))
	if _, err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func localBucket(t *testing.T) *blob.Bucket {
	b, err := local.New(t.TempDir(), &local.Options{CreateDir: true})
	must(t, err)
	t.Cleanup(func() { b.Close() })
	return b
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func find(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	must(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			return m
		}
	}
	t.Fatalf("metric %s%v not found", name, labels)
	return nil
}

func TestMetrics(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	c := writermetrics.New()
	must(t, reg.Register(c))
	w := open(t, localBucket(t), options("w"))
	c.Track(w)
	must(t, w.AddSpan(1, 0))
	for ts := uint64(1); ts <= 20; ts++ {
		must(t, w.Write(ctx, 1, row(ts)))
	}
	ddl := codec.Event{Kind: codec.DDLEvent, DDL: codec.DDL{StartTs: 20, CommitTs: 21,
		Table: codec.TableName{Schema: "db", Name: "t1", PhysicalID: 1}, Type: codec.ActionType(5), Query: "CREATE INDEX i ON t1(v)",
		Tables: []codec.DDLTable{{TableName: codec.TableName{Schema: "db", Name: "t1", PhysicalID: 1}, Role: codec.RoleAffected}}}}
	must(t, w.Write(ctx, 1, ddl))
	must(t, w.AdvanceResolved(1, 30))
	if _, err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	lbl := map[string]string{"log": testLog, "writer": "w"}
	with := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for k, v := range lbl {
			m[k] = v
		}
		return m
	}
	if v := find(t, reg, "redokit_writer_events_total", with("kind", "row")).GetCounter().GetValue(); v != 20 {
		t.Errorf("events_total{kind=row} = %v", v)
	}
	if v := find(t, reg, "redokit_writer_events_total", with("kind", "ddl")).GetCounter().GetValue(); v != 1 {
		t.Errorf("events_total{kind=ddl} = %v", v)
	}
	if v := find(t, reg, "redokit_writer_flushed_resolved_ts", lbl).GetGauge().GetValue(); v != 30 {
		t.Errorf("flushed_resolved_ts = %v", v)
	}
	if v := find(t, reg, "redokit_writer_buffered_bytes", lbl).GetGauge().GetValue(); v != 0 {
		t.Errorf("buffered_bytes = %v", v)
	}
	for _, h := range []string{"redokit_writer_flush_duration_seconds", "redokit_writer_fsync_duration_seconds"} {
		if n := find(t, reg, h, lbl).GetHistogram().GetSampleCount(); n == 0 {
			t.Errorf("%s has no observation", h)
		}
	}
	if v := find(t, reg, "redokit_writer_payload_bytes_total", lbl).GetCounter().GetValue(); v != float64(w.Stats().PayloadBytes) || v == 0 {
		t.Errorf("payload_bytes_total = %v, Stats %d", v, w.Stats().PayloadBytes)
	}
	must(t, w.Close(ctx))
	c.Untrack(w)
	mfs, err := reg.Gather()
	must(t, err)
	if len(mfs) != 0 {
		t.Errorf("%d metric families still exported after Untrack", len(mfs))
	}
}

// TestTakeover takes a writer over in the same process: the collector
// exports the new writer's counts, and the old writer, untracked late, does
// not hide them. (Registering each writer's own collectors, the second
// writer's were refused as already registered and never exported.)
func TestTakeover(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	reg := prometheus.NewRegistry()
	c := writermetrics.New()
	must(t, reg.Register(c))

	w1 := open(t, b, options("w"))
	c.Track(w1)
	must(t, w1.AddSpan(1, 0))
	write(t, w1, 1, 20)

	w2 := open(t, b, options("w")) // a new epoch: w1 is fenced
	c.Track(w2)
	must(t, w2.AddSpan(1, 20))
	write(t, w2, 21, 25)
	c.Untrack(w1)
	w1.Close(ctx)

	lbl := map[string]string{"log": testLog, "writer": "w", "kind": "row"}
	if v := find(t, reg, "redokit_writer_events_total", lbl).GetCounter().GetValue(); v != 5 {
		t.Errorf("events_total{kind=row} = %v after the takeover, want the new writer's 5", v)
	}
	delete(lbl, "kind")
	if v := find(t, reg, "redokit_writer_flushed_resolved_ts", lbl).GetGauge().GetValue(); v != 25 {
		t.Errorf("flushed_resolved_ts = %v, want the new writer's 25", v)
	}
	mf, err := reg.Gather()
	must(t, err)
	for _, f := range mf {
		if f.GetName() == "redokit_writer_events_total" && len(f.GetMetric()) != 2 {
			t.Errorf("%d events_total series, want one writer's 2", len(f.GetMetric()))
		}
	}
}
