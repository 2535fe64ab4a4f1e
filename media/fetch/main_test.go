package fetch_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind (servers, idle connections,
// stalled handlers must all stop by themselves).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
