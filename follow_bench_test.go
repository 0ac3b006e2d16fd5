package redokit_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/codec/codectest"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/writer"
)

// BenchmarkFollowerLag measures a warm standby's lag at a steady load on
// local disk: a writer writes 100,000 rows/s (a transaction of 1,000 rows
// every 10 ms, each its own commit ts) with a flush every 100 ms, a
// Service ticks every 50 ms, and a follower (polling every 20 ms) reads
// every event. The lag of an event is the time from its Write until the
// follower returns it; reported: p50, p99 and max, the rows followed per
// second, and the process's RSS at the start and the end (flat memory).
// REDOKIT_FOLLOW_LAG_DURATION sets how long the load runs (default 10s;
// the figure is over 10m). Timing is reported, never judged.
//
//	go test -run '^$' -bench FollowerLag -benchtime 1x .
func BenchmarkFollowerLag(b *testing.B) {
	dur := 10 * time.Second
	if v := os.Getenv("REDOKIT_FOLLOW_LAG_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("REDOKIT_FOLLOW_LAG_DURATION=%q: %v", v, err)
		}
		dur = d
	}
	for range b.N {
		followerLag(b, dur)
	}
}

func followerLag(b *testing.B, dur time.Duration) {
	ctx := context.Background()
	bk, err := local.New(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer bk.Close()
	lg, err := redokit.Open(ctx, bk, "lag")
	if err != nil {
		b.Fatal(err)
	}
	svc, err := lg.Start(ctx, &redokit.ServiceOptions{Coordinator: &meta.CoordinatorOptions{StartTs: 1}, TickInterval: 50 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	defer svc.Close(ctx)
	w, err := svc.OpenWriter(ctx, "w", &writer.Options{FlushInterval: 100 * time.Millisecond, PublishInterval: 50 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	const span redokit.SpanID = 1
	if err := svc.AddSpan(ctx, w, span, 1); err != nil {
		b.Fatal(err)
	}
	f, err := svc.Follow(ctx, &reader.FollowOptions{Poll: 20 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	const batch = 1000
	total := int(dur / (10 * time.Millisecond))
	written := make([]time.Time, total+2) // by commit ts
	var mu sync.Mutex
	lags := make([]time.Duration, 0, total)
	rssStart := rssMiB()
	var rssMid float64
	done := make(chan error, 1)
	go func() {
		seen := uint64(1)
		for rows := 0; rows < total*batch; rows++ {
			ev, err := f.Next(ctx)
			if err != nil {
				done <- err
				return
			}
			if ts := ev.CommitTs(); ts != seen {
				seen = ts
				mu.Lock()
				lags = append(lags, time.Since(written[ts]))
				if len(lags) == total/2 {
					rssMid = rssMiB()
				}
				mu.Unlock()
			}
		}
		done <- nil
	}()
	evs := make([]codec.Event, batch)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	for i := range total {
		<-tick.C
		ts := uint64(i + 2)
		for j := range evs {
			evs[j] = codectest.Row(ts, codectest.Table("bench", "t", 1), codectest.Key("id", int64(i*batch+j)), codectest.Str("v", "a row of about a hundred bytes of text, as a narrow table's rows are, no more"))
		}
		mu.Lock()
		written[ts] = time.Now()
		mu.Unlock()
		if err := w.Write(ctx, span, evs...); err != nil {
			b.Fatal(err)
		}
		if err := w.AdvanceResolved(span, ts); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	rssEnd := rssMiB()
	slices.Sort(lags)
	q := func(p float64) time.Duration { return lags[min(len(lags)-1, int(p*float64(len(lags))))] }
	b.ReportMetric(float64(total*batch)/elapsed.Seconds(), "rows/s")
	b.ReportMetric(q(0.5).Seconds()*1000, "lag-p50-ms")
	b.ReportMetric(q(0.99).Seconds()*1000, "lag-p99-ms")
	b.ReportMetric(lags[len(lags)-1].Seconds()*1000, "lag-max-ms")
	b.ReportMetric(rssStart, "rss-start-MiB")
	b.ReportMetric(rssMid, "rss-mid-MiB")
	b.ReportMetric(rssEnd, "rss-end-MiB")
	b.Logf("%d rows in %v, GOMAXPROCS %d: lag p50 %v, p99 %v, max %v; RSS %.0f MiB at the start, %.0f half way, %.0f at the end",
		total*batch, elapsed.Round(time.Millisecond), runtime.GOMAXPROCS(0), q(0.5).Round(time.Millisecond), q(0.99).Round(time.Millisecond),
		lags[len(lags)-1].Round(time.Millisecond), rssStart, rssMid, rssEnd)
}

// rssMiB is the process's resident set size now, from /proc (0 where
// there is none).
func rssMiB() float64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, res int64
	if _, err := fmt.Sscan(string(b), &size, &res); err != nil {
		return 0
	}
	return float64(res*int64(os.Getpagesize())) / (1 << 20)
}
