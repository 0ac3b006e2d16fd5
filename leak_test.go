package redokit

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: what a
// Log opens (GC schedulers, writers, readers) ends with its Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
