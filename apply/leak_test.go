package apply_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: Run's
// workers end before it returns.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
