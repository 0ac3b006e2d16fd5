package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestWaitDoublesUpToMax(t *testing.T) {
	b := Backoff{First: 100 * time.Millisecond, Max: time.Second}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		if got := b.Wait(i); got != w*time.Millisecond {
			t.Errorf("Wait(%d) = %v, want %v", i, got, w*time.Millisecond)
		}
	}
	// A shift past the duration's range is the maximum, never 0 or negative.
	if got := b.Wait(1 << 20); got != time.Second {
		t.Errorf("Wait(huge) = %v, want the maximum", got)
	}
	if got := (Backoff{First: time.Hour, Max: time.Hour}).Wait(40); got != time.Hour {
		t.Errorf("an overflowing shift gave %v", got)
	}
}

func TestJitterStaysInTheUpperHalf(t *testing.T) {
	b := Backoff{First: 8 * time.Millisecond, Max: 64 * time.Millisecond, Jitter: true}
	seen := map[time.Duration]bool{}
	for range 200 {
		d := b.Wait(2) // 32 ms before jitter
		if d < 16*time.Millisecond || d > 32*time.Millisecond {
			t.Fatalf("jittered wait %v outside [16ms, 32ms]", d)
		}
		seen[d] = true
	}
	if len(seen) < 2 {
		t.Fatal("jitter gave the same wait 200 times")
	}
}

func TestSleepEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled context: %v", err)
	}
	if time.Since(start) > time.Second {
		t.Fatal("Sleep waited past its context")
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep: %v", err)
	}
}
