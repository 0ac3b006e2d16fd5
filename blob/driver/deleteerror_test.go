package driver_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/redokit/redokit/blob/driver"
)

// TestDeleteEach: at most concurrency deletes run at once, every failure is
// reported under its key, and nothing starts after ctx ends.
func TestDeleteEach(t *testing.T) {
	keys := make([]string, 50)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%02d", i)
	}
	boom := errors.New("boom")
	var running, peak atomic.Int32
	failed := driver.DeleteEach(context.Background(), keys, 3, func(ctx context.Context, k string) error {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		if k == "k07" || k == "k42" {
			return boom
		}
		return nil
	})
	if p := peak.Load(); p > 3 {
		t.Errorf("%d deletes at once, want at most 3", p)
	}
	e := driver.NewDeleteError("test", len(keys), failed)
	if len(e.Failed) != 2 || e.Failed[0].Key != "k07" || e.Failed[1].Key != "k42" || !errors.Is(e, boom) {
		t.Errorf("failed %+v", e.Failed)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var started atomic.Int32
	failed = driver.DeleteEach(ctx, keys, 1, func(ctx context.Context, k string) error {
		if started.Add(1) == 5 {
			cancel()
		}
		return nil
	})
	if n := started.Load(); len(failed) != 0 || n != 5 {
		t.Errorf("after cancel: %d started, %d failed; want 5 and 0", n, len(failed))
	}
}
