package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/logmetrics"
	"github.com/redokit/redokit/reader"
)

// followRound is one round of apply --follow: a JSON line with --json.
type followRound struct {
	Log        string  `json:"log"`
	StartTs    uint64  `json:"start_ts,string"`
	EndTs      uint64  `json:"end_ts,string"`
	Events     int64   `json:"events"`
	Rows       int64   `json:"rows"`
	DDLs       int64   `json:"ddls"`
	Skipped    int64   `json:"skipped"`
	Seconds    float64 `json:"seconds"`
	LagTs      uint64  `json:"lag_ts,string"` // behind the newest global resolved ts seen, after the round
	LagSeconds float64 `json:"lag_seconds"`
}

// followSummary is what apply --follow prints when it stops.
type followSummary struct {
	Log      string   `json:"log"`
	Sink     string   `json:"sink"`
	StartTs  uint64   `json:"start_ts,string"`
	Position uint64   `json:"position_ts,string"` // every event at or below it is applied
	Rounds   int64    `json:"rounds"`
	Events   int64    `json:"events"`
	Rows     int64    `json:"rows"`
	DDLs     int64    `json:"ddls"`
	Seconds  float64  `json:"seconds"`
	Stopped  string   `json:"stopped"` // why: "signal", or the error
	Last     *applied `json:"applied,omitempty"`
}

type applied = appliedJSON

// applyFollow keeps the sink at the log's global resolved ts: rounds of
// (position, global resolved ts], each read as apply reads a range (proven
// complete first) and replayed by apply.Run, which commits the sink's
// progress with the rows; the position moves past a round only once Run
// has applied all of it. A restart starts from start (the checkpoint, or
// --start-ts) and the sink's progress skips what it holds, so a SIGKILL
// loses nothing and applies nothing twice. ctx ending (SIGINT, SIGTERM)
// stops it: between rounds at once; inside one at the next commit ts, once
// the transaction in hand is applied and committed with its progress. A
// stop, not a failure (exit 0).
func (a *app) applyFollow(ctx context.Context, b *blob.Bucket, sinkURI string, start uint64, poll time.Duration, metricsAddr string, opts *apply.Options, sopts *apply.SinkOptions, ctl *applyControls) error {
	sink, err := a.openSink(ctx, sinkURI, sopts)
	if err != nil {
		return err
	}
	defer sink.Close()
	// The follower's reading ahead lives as long as the command; each
	// wait is bounded by ctx.
	lg, err := redokit.Open(ctx, b, a.logID)
	if err != nil {
		return err
	}
	f, err := lg.Follow(context.WithoutCancel(ctx), &reader.FollowOptions{
		Options: reader.Options{StartTs: start, Logger: a.logger()}, Poll: poll})
	if err != nil {
		return err
	}
	defer f.Close()
	if metricsAddr != "" {
		stopMetrics, err := a.serveMetrics(metricsAddr, logmetrics.NewFollower(a.logID, f))
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	began := time.Now()
	sum := &followSummary{Log: a.logID, Sink: apply.Redact(sinkURI), StartTs: start, Position: start}
	stop := func(why string, err error) error {
		sum.Position, sum.Seconds, sum.Stopped = f.Position(), time.Since(began).Seconds(), why
		if a.jsonOut {
			if perr := a.printJSONLine(sum); perr != nil {
				return errors.Join(err, perr)
			}
		} else {
			fmt.Fprintf(a.stdout, "apply --follow stopped (%s) at %s: %d rounds, %d rows, %d DDLs in %.1fs\n",
				why, tsDesc(sum.Position), sum.Rounds, sum.Rows, sum.DDLs, sum.Seconds)
		}
		return err
	}
	if !a.jsonOut {
		fmt.Fprintf(a.stderr, "redokit: following log %s from %s into %s (stop with Ctrl-C)\n", a.logID, tsDesc(start), sum.Sink)
	}
	for {
		r, end, err := f.NextRound(ctx)
		if ctx.Err() != nil {
			return stop("signal", nil)
		}
		if err != nil {
			return stop(err.Error(), err)
		}
		rs := a.newApplySummary(sinkURI, f.Position(), end, sopts, ctl)
		// A signal ends the round at the next commit ts: the transaction
		// in hand is applied and committed, with its progress.
		rs, err = a.applyReaderUntil(context.WithoutCancel(ctx), ctx, r, sink, rs, opts, ctl)
		r.Close()
		for o := a.holdWhole(err, opts); o != nil && ctx.Err() == nil; o = a.holdWhole(err, o) {
			// The round again, from its start (Run resumes from the
			// sink's progress), holding that commit ts whole. What the
			// attempt committed counts; the rerun skips it.
			sum.Rows, sum.DDLs = sum.Rows+rs.Rows, sum.DDLs+rs.DDLs
			var again *reader.Reader
			if again, err = openRange(ctx, b, a.logID, rs.StartTs, end, reader.Options{Logger: a.logger()}); err != nil {
				break
			}
			rs, err = a.applyReaderUntil(context.WithoutCancel(ctx), ctx, again, sink, a.newApplySummary(sinkURI, rs.StartTs, end, sopts, ctl), o, ctl)
			again.Close()
		}
		if rs.Applied != nil {
			sum.Last = rs.Applied
		}
		sum.Events, sum.Rows, sum.DDLs = sum.Events+rs.Events, sum.Rows+rs.Rows, sum.DDLs+rs.DDLs
		if err != nil {
			if ctx.Err() != nil {
				// Stopped inside the round: what Run committed is in
				// the downstream with its progress, and a rerun goes
				// on from there.
				return stop("signal", nil)
			}
			return stop(err.Error(), err)
		}
		if ctx.Err() != nil {
			// The round ended early at rs.EndTs (or just ended): what it
			// applied is committed; a rerun goes on from there.
			if rs.EndTs == end {
				f.Finish(end)
			}
			sum.Rounds++
			return stop("signal", nil)
		}
		f.Finish(end)
		sum.Rounds++
		lagTs, lag := f.Lag()
		if a.jsonOut {
			if err := a.printJSONLine(&followRound{Log: a.logID, StartTs: rs.StartTs, EndTs: end, Events: rs.Events, Rows: rs.Rows,
				DDLs: rs.DDLs, Skipped: rs.Skipped, Seconds: rs.Seconds, LagTs: lagTs, LagSeconds: lag.Seconds()}); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(a.stdout, "applied (%d, %d]: %d rows, %d DDLs in %.3fs; behind the global resolved ts by %d (%.1fs)\n",
				rs.StartTs, end, rs.Rows, rs.DDLs, rs.Seconds, lagTs, lag.Seconds())
		}
	}
}

// serveMetrics serves Prometheus metrics of c on addr (/metrics) until the
// returned function is called. The listener is open when it returns, so a
// port already taken is an error before anything runs.
func (a *app) serveMetrics(addr string, c prometheus.Collector) (stop func(), err error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, usageErrorf("--metrics-addr %s: %v", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	if !a.jsonOut {
		fmt.Fprintf(a.stderr, "redokit: metrics on http://%s/metrics\n", ln.Addr())
	}
	return func() { srv.Close() }, nil
}

// followStopped is err, unless ctx ended (a signal): --follow has no end,
// so a signal is how it stops, even before it began to apply.
func followStopped(ctx context.Context, err error) error {
	var ee *exitErr
	if err != nil && ctx.Err() != nil && !(errors.As(err, &ee) && ee.code == exitUsage) {
		return nil
	}
	return err
}

// printJSONLine prints v as one line of JSON (a stream of objects).
func (a *app) printJSONLine(v any) error {
	a.printedJSON = true
	return json.NewEncoder(a.stdout).Encode(v)
}
