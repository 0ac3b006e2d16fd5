package writer

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the writer's Prometheus collectors. They always exist (updating
// an unregistered collector costs next to nothing); they are registered only
// when Options.Registerer is set.
type metrics struct {
	reg        prometheus.Registerer
	registered []prometheus.Collector

	rows, ddls      prometheus.Counter
	payload, stored prometheus.Counter
	segments        prometheus.Counter
	retries         prometheus.Counter
	backpressure    prometheus.Counter
	overcommits     prometheus.Counter
	buffered        prometheus.Gauge
	blocked         prometheus.Gauge
	flushedTs       prometheus.Gauge
	flushDuration   prometheus.Histogram
	fsyncDuration   prometheus.Histogram
	uploadDuration  prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer, logID, writerID string) (*metrics, error) {
	labels := prometheus.Labels{"log": logID, "writer": writerID}
	const ns, sub = "redokit", "writer"
	counter := func(name, help string, extra prometheus.Labels) prometheus.Counter {
		l := prometheus.Labels{}
		for k, v := range labels {
			l[k] = v
		}
		for k, v := range extra {
			l[k] = v
		}
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help, ConstLabels: l})
	}
	// Latencies from a fast local fdatasync (~100 µs) to a slow object
	// store upload (tens of seconds).
	buckets := prometheus.ExponentialBuckets(0.0001, 2.5, 15)
	hist := func(name, help string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help, ConstLabels: labels, Buckets: buckets})
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help, ConstLabels: labels})
	}
	m := &metrics{
		reg:            reg,
		rows:           counter("events_total", "Events made durable, by kind.", prometheus.Labels{"kind": "row"}),
		ddls:           counter("events_total", "Events made durable, by kind.", prometheus.Labels{"kind": "ddl"}),
		payload:        counter("payload_bytes_total", "Encoded event bytes made durable.", nil),
		stored:         counter("stored_bytes_total", "Bytes written to storage (compressed blocks, headers, footers; retries count again).", nil),
		segments:       counter("segments_total", "Segments completed: sealed, or put as objects.", nil),
		retries:        counter("flush_retries_total", "Failed storage or publication attempts that were retried.", nil),
		backpressure:   counter("backpressure_seconds_total", "Time Write calls spent blocked on the memory quota.", nil),
		overcommits:    counter("quota_overcommits_total", "Writes let through over a memory quota full of events no flush could take.", nil),
		buffered:       gauge("buffered_bytes", "Bytes of events held in memory, from Write until durable."),
		blocked:        gauge("blocked_writes", "Write calls blocked on the memory quota now."),
		flushedTs:      gauge("flushed_resolved_ts", "The writer's flushed resolved ts."),
		flushDuration:  hist("flush_duration_seconds", "Time from the start of a flush to its durable, published end."),
		fsyncDuration:  hist("fsync_duration_seconds", "Time of an fdatasync (or seal) of a local segment."),
		uploadDuration: hist("upload_duration_seconds", "Time of one segment object put."),
	}
	if reg == nil {
		return m, nil
	}
	// The two kinds of events_total share a name: register them through
	// one vector-like collector.
	all := []prometheus.Collector{
		multi{m.rows, m.ddls}, m.payload, m.stored, m.segments, m.retries, m.backpressure, m.overcommits,
		m.buffered, m.blocked, m.flushedTs, m.flushDuration, m.fsyncDuration, m.uploadDuration,
	}
	for _, c := range all {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				// Another writer with the same IDs in this process (a
				// takeover in a test): its collectors stay; ours are not
				// exported.
				continue
			}
			m.unregister()
			return nil, err
		}
		m.registered = append(m.registered, c)
	}
	return m, nil
}

func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.registered {
		m.reg.Unregister(c)
	}
	m.registered = nil
}

// multi is a collector made of several metrics of one family.
type multi []prometheus.Collector

func (m multi) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m {
		c.Describe(ch)
	}
}

func (m multi) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m {
		c.Collect(ch)
	}
}
