package testenv

import (
	"testing"
	"time"
)

// WaitFor polls cond until it holds, failing the test after 30 s: a wait for
// a condition that can only be observed by looking, where a test would
// otherwise sleep; not a timing assertion.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
