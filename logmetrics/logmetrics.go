// Package logmetrics exports a redokit.Service's log-level stats
// (redokit.ServiceStats) as Prometheus metrics: the watermarks its
// coordinator folds, GC's work and its followers' lag. Writers have their
// own collector (writer/writermetrics); a Collector here tracks the
// service's writers through it, so one registration exports both. Like
// writermetrics, it is the only part of its layer that knows Prometheus.
//
// Every metric is labelled with log:
//
//	redokit_log_resolved_ts                 the global resolved ts at the last successful tick
//	redokit_log_checkpoint_ts               the checkpoint
//	redokit_log_ticks_total                 successful coordinator ticks
//	redokit_log_tick_errors_total           failed coordinator ticks
//	redokit_log_last_tick_timestamp_seconds Unix time of the last successful tick
//	redokit_gc_cycles_total                 GC cycles run
//	redokit_gc_errors_total                 GC cycles that failed
//	redokit_gc_deleted_segments_total       segments GC deleted
//	redokit_gc_freed_bytes_total            their bytes
//	redokit_follower_count                  followers started through the service and not closed
//	redokit_follower_lag_ts                 the largest follower lag, in commit ts
//	redokit_follower_lag_seconds            the largest follower lag, in seconds since the oldest event it has not returned was proven complete
//
// A process that follows a log without a Service (redokit apply --follow
// --metrics-addr) exports the three follower metrics of its one follower
// with a FollowerCollector.
package logmetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/writer/writermetrics"
)

// Collector is a prometheus.Collector over one Service and the writers it
// opened. Safe for concurrent use.
type Collector struct {
	svc   *redokit.Service
	logID string
}

// New returns a Collector of svc, a service of the log logID.
func New(logID string, svc *redokit.Service) *Collector {
	return &Collector{svc: svc, logID: logID}
}

func desc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("redokit_"+name, help, []string{"log"}, nil)
}

var (
	descResolved   = desc("log_resolved_ts", "The global resolved ts at the coordinator's last successful tick.")
	descCheckpoint = desc("log_checkpoint_ts", "The log's checkpoint: GC deletes below it.")
	descTicks      = desc("log_ticks_total", "Successful coordinator ticks.")
	descTickErrs   = desc("log_tick_errors_total", "Failed coordinator ticks.")
	descLastTick   = desc("log_last_tick_timestamp_seconds", "Unix time of the coordinator's last successful tick.")
	descGCCycles   = desc("gc_cycles_total", "GC cycles run, failed ones included.")
	descGCErrs     = desc("gc_errors_total", "GC cycles that failed.")
	descGCDeleted  = desc("gc_deleted_segments_total", "Segments GC deleted.")
	descGCFreed    = desc("gc_freed_bytes_total", "Bytes of the segments GC deleted.")
	descFollowers  = desc("follower_count", "Followers started through the service and not closed.")
	descLagTs      = desc("follower_lag_ts", "The largest follower lag behind the newest global resolved ts it saw, in commit ts.")
	descLagSec     = desc("follower_lag_seconds", "The largest follower lag, in seconds since the oldest event it has not returned was proven complete.")

	allDescs = []*prometheus.Desc{descResolved, descCheckpoint, descTicks, descTickErrs, descLastTick,
		descGCCycles, descGCErrs, descGCDeleted, descGCFreed, descFollowers, descLagTs, descLagSec}
)

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
	writermetrics.New().Describe(ch)
}

// Collect implements prometheus.Collector: the service's stats and its
// writers' now.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.svc.Stats()
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, c.logID)
	}
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), c.logID)
	}
	gauge(descResolved, float64(st.ResolvedTs))
	gauge(descCheckpoint, float64(st.CheckpointTs))
	counter(descTicks, st.Ticks)
	counter(descTickErrs, st.TickErrors)
	var last float64
	if !st.LastTick.IsZero() {
		last = float64(st.LastTick.UnixNano()) / 1e9
	}
	gauge(descLastTick, last)
	counter(descGCCycles, st.GCCycles)
	counter(descGCErrs, st.GCErrors)
	counter(descGCDeleted, st.GCDeleted)
	counter(descGCFreed, st.GCFreedBytes)
	var lagTs uint64
	var lagSec float64
	for _, f := range st.Followers {
		lagTs = max(lagTs, f.LagTs)
		lagSec = max(lagSec, f.Lag.Seconds())
	}
	gauge(descFollowers, float64(len(st.Followers)))
	gauge(descLagTs, float64(lagTs))
	gauge(descLagSec, lagSec)

	// The service's writers, as it has them now (a closed service has none).
	writermetrics.New(c.svc.Writers()...).Collect(ch)
}

// FollowerCollector exports one follower of a process that follows a log
// without a Service (redokit apply --follow): redokit_follower_count (1
// until it is closed), redokit_follower_lag_ts and
// redokit_follower_lag_seconds, labelled with log, as a Collector does.
// Register one or the other for a log, not both.
type FollowerCollector struct {
	logID string
	f     *reader.Follower
}

// NewFollower returns a FollowerCollector of f, a follower of logID.
func NewFollower(logID string, f *reader.Follower) *FollowerCollector {
	return &FollowerCollector{logID: logID, f: f}
}

// Describe implements prometheus.Collector.
func (c *FollowerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descFollowers
	ch <- descLagTs
	ch <- descLagSec
}

// Collect implements prometheus.Collector.
func (c *FollowerCollector) Collect(ch chan<- prometheus.Metric) {
	n := 1.0
	if c.f.Closed() {
		n = 0
	}
	ts, d := c.f.Lag()
	ch <- prometheus.MustNewConstMetric(descFollowers, prometheus.GaugeValue, n, c.logID)
	ch <- prometheus.MustNewConstMetric(descLagTs, prometheus.GaugeValue, float64(ts), c.logID)
	ch <- prometheus.MustNewConstMetric(descLagSec, prometheus.GaugeValue, d.Seconds(), c.logID)
}
