package bench

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redokit/redokit/writer"
)

// MakePools generates the transaction pools of W writers (writer i's seed
// is i+1, its spans start at i*Spans) and returns them with the heap
// they take, which counts in the cell's peak RSS.
func MakePools(W, rowSize int, mix string) ([]*TxnPool, uint64) {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	pools := make([]*TxnPool, W)
	var wg sync.WaitGroup
	for i := range W {
		wg.Go(func() { pools[i] = NewTxnPool(uint64(i+1), rowSize, mix, i*Spans) })
	}
	wg.Wait()
	runtime.GC()
	runtime.ReadMemStats(&m1)
	return pools, m1.HeapAlloc - min(m0.HeapAlloc, m1.HeapAlloc)
}

// Driver replays the transaction pools of writers and flushes them on a
// cadence. Writer i has the spans i*Spans to i*Spans+Spans-1, added at
// TsBase, and pools[i] (MakePools).
type Driver struct {
	ws       []*writer.Writer
	pools    []*TxnPool
	interval time.Duration
	// LastTs is the last commit ts each writer wrote.
	LastTs []uint64
	k      uint64 // transactions so far, per writer
}

// NewDriver drives ws with pools, flushing every interval.
func NewDriver(ws []*writer.Writer, pools []*TxnPool, interval time.Duration) *Driver {
	return &Driver{ws: ws, pools: pools, interval: interval, LastTs: make([]uint64, len(ws))}
}

// Run writes for dur: flat out when rate is 0, else open loop at rate rows/s
// (all writers together). It returns the latencies (ms) of the interval
// flushes.
func (d *Driver) Run(ctx context.Context, dur time.Duration, rate float64) ([]float64, error) {
	W := len(d.ws)
	var stop atomic.Bool
	var mu sync.Mutex
	var lat []float64
	errs := make([]error, 2*W)
	var gwg, fwg sync.WaitGroup
	fdone := make(chan struct{})
	k0 := d.k
	ks := make([]uint64, W)
	txnRate := rate / float64(W) / float64(TxnRows)
	t0 := time.Now()
	for i := range W {
		gwg.Go(func() {
			w, p := d.ws[i], d.pools[i]
			for k := k0; !stop.Load(); k++ {
				if txnRate > 0 {
					// Open loop: write what is due, then wait a little.
					for float64(k-k0) >= time.Since(t0).Seconds()*txnRate {
						if stop.Load() {
							ks[i] = k
							return
						}
						time.Sleep(500 * time.Microsecond)
					}
				}
				ts := TsBase + 1 + k*uint64(W) + uint64(i)
				span := i*Spans + int(k%Spans)
				if err := w.Write(ctx, writer.SpanID(span), p.Txn(k, ts)...); err != nil {
					errs[i] = err
					return
				}
				if err := w.AdvanceResolved(writer.SpanID(span), ts); err != nil {
					errs[i] = err
					return
				}
				d.LastTs[i] = ts
				ks[i] = k + 1
			}
		})
		fwg.Go(func() {
			t := time.NewTicker(d.interval)
			defer t.Stop()
			for {
				select {
				case <-fdone:
					return
				case <-t.C:
					t1 := time.Now()
					if _, err := d.ws[i].Flush(ctx); err != nil {
						errs[W+i] = err
						return
					}
					el := time.Since(t1)
					mu.Lock()
					lat = append(lat, float64(el)/float64(time.Millisecond))
					mu.Unlock()
				}
			}
		})
	}
	select {
	case <-time.After(dur):
	case <-ctx.Done():
	}
	stop.Store(true)
	gwg.Wait()
	close(fdone)
	fwg.Wait()
	for _, k := range ks {
		d.k = max(d.k, k)
	}
	return lat, errors.Join(errs...)
}

// Finish advances every span to its writer's last ts and flushes every
// writer, so that everything written is durable.
func (d *Driver) Finish(ctx context.Context) error {
	errs := make([]error, len(d.ws))
	var wg sync.WaitGroup
	// Every writer resolves up to the last ts any of them wrote, so that a
	// read of the whole log, up to that ts, is proven by what each writer
	// publishes (a reader refuses a range above the lowest of them).
	last := slices.Max(d.LastTs)
	for i, w := range d.ws {
		for s := range Spans {
			if err := w.AdvanceResolved(writer.SpanID(i*Spans+s), last); err != nil {
				return err
			}
		}
		wg.Go(func() { _, errs[i] = w.Flush(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
