package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestInterruptedGenReleasesItsWriters: gen interrupted once its writers are
// live closes and releases them, as at its end, so the meta object lists no
// live writer and rm needs no --force (issue 29, item 7: they stayed live).
func TestInterruptedGenReleasesItsWriters(t *testing.T) {
	store := memName(t)
	liveWriters := func() int {
		var out, errb bytes.Buffer
		if newApp(strings.NewReader(""), &out, &errb).execute(context.Background(),
			[]string{"meta", "--storage", store, "--log", "g", "--json"}) != 0 {
			return -1 // no log yet
		}
		var info struct {
			Writers []struct {
				Live bool `json:"live"`
			} `json:"writers"`
		}
		if err := json.Unmarshal(out.Bytes(), &info); err != nil {
			return -1
		}
		n := 0
		for _, w := range info.Writers {
			if w.Live {
				n++
			}
		}
		return n
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sawLive := make(chan int, 1)
	go func() {
		// Interrupt once all three writers are live and writing: they
		// register one after another, and on a loaded machine the first
		// can be live well before the third.
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if n := liveWriters(); n == 3 {
				time.Sleep(50 * time.Millisecond)
				sawLive <- n
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		sawLive <- liveWriters()
		cancel()
	}()
	var out, errb bytes.Buffer
	code := newApp(strings.NewReader(""), &out, &errb).execute(ctx,
		[]string{"gen", "--storage", store, "--log", "g", "--rows", "100000000", "--writers", "3", "--flush-interval", "20ms"})
	if n := <-sawLive; n != 3 {
		t.Fatalf("saw %d live writers before the interrupt, want 3", n)
	}
	if code != 1 || !strings.Contains(errb.String(), "interrupted: redokit gen stopped before it finished") {
		t.Fatalf("interrupted gen: exit %d\n%s", code, errb.String())
	}
	if n := liveWriters(); n != 0 {
		t.Fatalf("after an interrupted gen the meta object lists %d live writers, want 0", n)
	}
	r := cli(t, "rm", "--storage", store, "--log", "g", "--yes")
	wantCode(t, r, 0)
}
