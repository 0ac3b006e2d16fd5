package writer

import (
	"sync/atomic"
	"time"
)

// LatencyBounds returns the upper bounds of the buckets of a [Latency],
// in increasing order: from a fast local fdatasync (~100 µs) to a slow
// object store upload (tens of seconds), each 2.5 times the last.
func LatencyBounds() []time.Duration {
	out := make([]time.Duration, len(latencyBounds))
	copy(out, latencyBounds[:])
	return out
}

var latencyBounds = func() (b [15]time.Duration) {
	f := 100e-6
	for i := range b {
		b[i] = time.Duration(f * float64(time.Second))
		f *= 2.5
	}
	return b
}()

// Latency is a distribution of durations, as a cumulative histogram over
// [LatencyBounds].
type Latency struct {
	Count uint64
	Sum   time.Duration
	// Buckets[i] counts the observations at or below LatencyBounds()[i];
	// those above the last bound count only in Count.
	Buckets []uint64
}

// latency records durations without a lock: the committer and upload
// goroutines observe while Stats reads. A snapshot taken during an
// observation may see its bucket before its count; a scrape tolerates that.
type latency struct {
	count   atomic.Uint64
	sum     atomic.Int64
	buckets [len(latencyBounds)]atomic.Uint64 // not cumulative
}

func (l *latency) observe(d time.Duration) {
	for i, b := range latencyBounds {
		if d <= b {
			l.buckets[i].Add(1)
			break
		}
	}
	l.sum.Add(int64(d))
	l.count.Add(1)
}

// since observes the time since start.
func (l *latency) since(start time.Time) { l.observe(time.Since(start)) }

func (l *latency) snapshot() Latency {
	s := Latency{Count: l.count.Load(), Sum: time.Duration(l.sum.Load()), Buckets: make([]uint64, len(latencyBounds))}
	var n uint64
	for i := range l.buckets {
		n += l.buckets[i].Load()
		s.Buckets[i] = n
	}
	return s
}
