package client

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine is still running
// once they all passed (goleak retries for a while, so goroutines that are
// exiting are waited for, not reported).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
