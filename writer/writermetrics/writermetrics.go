// Package writermetrics exports the stats of redo writers (writer.Stats) as
// Prometheus metrics. It is the only part of the writer that knows
// Prometheus: package writer keeps its own counters, and a [Collector] reads
// them at scrape time.
//
// A Collector tracks writers by log and writer ID. Tracking a writer with
// the IDs of one already tracked replaces it: after a takeover in the same
// process (a new Writer with the same IDs, a new epoch) the collector
// exports the new writer, whose counters start again at zero, which
// Prometheus reads as a counter reset. A writer stays exported after Close,
// with its final counts, until it is untracked or replaced.
//
// Every metric is labelled with log and writer:
//
//	redokit_writer_events_total{kind="row"|"ddl"}  events made durable
//	redokit_writer_payload_bytes_total             their encoded bytes
//	redokit_writer_stored_bytes_total              bytes written to storage (retries count again)
//	redokit_writer_segments_total                  segments sealed, or put as objects
//	redokit_writer_flush_retries_total             storage or publication attempts retried
//	redokit_writer_backpressure_seconds_total      time Writes spent blocked on the memory quota
//	redokit_writer_quota_overcommits_total         Writes let through over a quota full of a catch-up span's events
//	redokit_writer_stage_cuts_total                cuts that staged events above the resolved ts to free the quota
//	redokit_writer_staged_events_total             events stored before the resolved ts covered them (staged)
//	redokit_writer_committed_ts                    the epoch's committed ts (durable)
//	redokit_writer_buffered_bytes                  bytes of events in memory, from Write until durable
//	redokit_writer_blocked_writes                  Writes blocked on the memory quota now
//	redokit_writer_flushed_resolved_ts             the flushed resolved ts (durable)
//	redokit_writer_published_resolved_ts           the flushed resolved ts the state object publishes
//	redokit_writer_publications_total              writes of the state object that published progress
//	redokit_writer_flush_duration_seconds          histogram: flush start to durable end (data and progress frame)
//	redokit_writer_publish_duration_seconds        histogram: one publication of the state object
//	redokit_writer_fsync_duration_seconds          histogram: fdatasync or seal of a local segment
//	redokit_writer_upload_duration_seconds         histogram: one segment object put
package writermetrics

import (
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redokit/redokit/writer"
)

// Collector is a prometheus.Collector over the writers it tracks. It is safe
// for concurrent use. The zero value is not usable; call [New].
type Collector struct {
	mu      sync.Mutex
	writers map[id]*writer.Writer
}

type id struct{ log, writer string }

// New returns a Collector tracking ws.
func New(ws ...*writer.Writer) *Collector {
	c := &Collector{writers: map[id]*writer.Writer{}}
	for _, w := range ws {
		c.Track(w)
	}
	return c
}

// Track exports w from the next scrape on, in place of any writer tracked
// with the same log and writer ID (its predecessor after a takeover).
func (c *Collector) Track(w *writer.Writer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writers[id{w.LogID(), w.ID()}] = w
}

// Untrack stops exporting w. A successor tracked in its place stays: a
// writer untracked late, after its takeover, must not hide the new one.
func (c *Collector) Untrack(w *writer.Writer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := id{w.LogID(), w.ID()}
	if c.writers[k] == w {
		delete(c.writers, k)
	}
}

const ns, sub = "redokit", "writer"

var labels = []string{"log", "writer"}

func desc(name, help string, extra ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(ns, sub, name), help, append(extra, labels...), nil)
}

var (
	descEvents       = desc("events_total", "Events made durable, by kind.", "kind")
	descPayload      = desc("payload_bytes_total", "Encoded event bytes made durable.")
	descStored       = desc("stored_bytes_total", "Bytes written to storage (compressed blocks, headers, footers; retries count again).")
	descSegments     = desc("segments_total", "Segments completed: sealed, or put as objects.")
	descRetries      = desc("flush_retries_total", "Failed storage or publication attempts that were retried.")
	descBackpressure = desc("backpressure_seconds_total", "Time Write calls spent blocked on the memory quota.")
	descOvercommits  = desc("quota_overcommits_total", "Writes let through over a memory quota full of a catch-up span's events at or below the committed ts, which no flush or stage cut could take.")
	descStageCuts    = desc("stage_cuts_total", "Cuts that staged events above the writer's resolved ts (a Write blocked on the quota, or FlushBytes written while the resolved ts stood still).")
	descStaged       = desc("staged_events_total", "Events stored before the resolved ts covered them (staged; part of the log once the committed ts passes them).")
	descCommittedTs  = desc("committed_ts", "The writer epoch's committed ts of its newest durable progress.")
	descBuffered     = desc("buffered_bytes", "Bytes of events held in memory, from Write until durable.")
	descBlocked      = desc("blocked_writes", "Write calls blocked on the memory quota now.")
	descFlushedTs    = desc("flushed_resolved_ts", "The writer's flushed resolved ts.")
	descPublishedTs  = desc("published_resolved_ts", "The flushed resolved ts the writer's state object publishes.")
	descPubs         = desc("publications_total", "Writes of the writer's state object that published progress.")
	descFlush        = desc("flush_duration_seconds", "Time from the start of a flush to its durable end (data and progress frame).")
	descPublish      = desc("publish_duration_seconds", "Time of one publication of the writer's state object.")
	descFsync        = desc("fsync_duration_seconds", "Time of an fdatasync (or seal) of a local segment.")
	descUpload       = desc("upload_duration_seconds", "Time of one segment object put.")

	allDescs = []*prometheus.Desc{descEvents, descPayload, descStored, descSegments, descRetries, descBackpressure,
		descOvercommits, descStageCuts, descStaged, descCommittedTs, descBuffered, descBlocked, descFlushedTs, descPublishedTs, descPubs, descFlush, descFsync, descUpload, descPublish}
)

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector: it reads the stats of every
// tracked writer now.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	ids := make([]id, 0, len(c.writers))
	ws := make(map[id]*writer.Writer, len(c.writers))
	for k, w := range c.writers {
		ids = append(ids, k)
		ws[k] = w
	}
	c.mu.Unlock()
	sort.Slice(ids, func(i, j int) bool {
		if ids[i].log != ids[j].log {
			return ids[i].log < ids[j].log
		}
		return ids[i].writer < ids[j].writer
	})
	for _, k := range ids {
		collect(ch, ws[k].Stats(), k.log, k.writer)
	}
}

func collect(ch chan<- prometheus.Metric, s writer.Stats, lv ...string) {
	counter := func(d *prometheus.Desc, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, append(extra, lv...)...)
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	counter(descEvents, float64(s.Rows), "row")
	counter(descEvents, float64(s.DDLs), "ddl")
	counter(descPayload, float64(s.PayloadBytes))
	counter(descStored, float64(s.StoredBytes))
	counter(descSegments, float64(s.Segments))
	counter(descRetries, float64(s.Retries))
	counter(descBackpressure, s.Backpressure.Seconds())
	counter(descOvercommits, float64(s.QuotaOvercommits))
	counter(descStageCuts, float64(s.StageCuts))
	counter(descStaged, float64(s.StagedEvents))
	gauge(descCommittedTs, float64(s.CommittedTs))
	gauge(descBuffered, float64(s.BufferedBytes))
	gauge(descBlocked, float64(s.BlockedWrites))
	gauge(descFlushedTs, float64(s.FlushedTs))
	gauge(descPublishedTs, float64(s.PublishedTs))
	counter(descPubs, float64(s.Publications))
	histogram(ch, descFlush, s.FlushDuration, lv)
	histogram(ch, descFsync, s.SyncDuration, lv)
	histogram(ch, descUpload, s.UploadDuration, lv)
	histogram(ch, descPublish, s.PublishDuration, lv)
}

var bounds = writer.LatencyBounds()

func histogram(ch chan<- prometheus.Metric, d *prometheus.Desc, l writer.Latency, lv []string) {
	buckets := make(map[float64]uint64, len(bounds))
	for i, b := range bounds {
		if i < len(l.Buckets) {
			// A snapshot may catch an observation in its bucket and not
			// yet in its count; a histogram's buckets never pass it.
			buckets[b.Seconds()] = min(l.Buckets[i], l.Count)
		}
	}
	ch <- prometheus.MustNewConstHistogram(d, l.Count, l.Sum.Seconds(), buckets, lv...)
}
