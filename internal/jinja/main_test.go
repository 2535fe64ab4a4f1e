package jinja

import (
	"os"
	"strings"
	"testing"
)

// TestMain gives the test binaries that upstream's TestRangeIntegerBoundaries and
// TestCircularValues start (this binary again, one per case, each with a 2 s budget) no exit
// delay under -race: a race-enabled process sleeps GORACE's atexit_sleep_ms (1000 by default)
// before it exits, which took half the budget (1.3-1.4 s per case on a loaded 2-core machine,
// 0.07 s of it CPU). An atexit_sleep_ms already in GORACE is kept.
func TestMain(m *testing.M) {
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
	os.Exit(m.Run())
}
