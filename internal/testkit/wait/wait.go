// Package wait polls a test condition. Only tests import it (it has no dependencies, so tests that
// must not link media can use it).
package wait

import (
	"testing"
	"time"
)

// limit only keeps a broken run from hanging; no timing is asserted.
const limit = 30 * time.Second

// For polls cond every 5 ms until it holds, failing the test ("timed out waiting for WHAT") when
// it does not within 30 s.
func For(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
