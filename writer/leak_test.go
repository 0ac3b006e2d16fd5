package writer

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them:
// nothing this package starts may outlive its Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
