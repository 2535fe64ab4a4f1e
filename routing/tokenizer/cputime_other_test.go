//go:build !linux

package tokenizer

import "time"

// threadCPU measures the wall time of fn (no per-thread CPU clock here).
func threadCPU(fn func()) time.Duration {
	start := time.Now()
	fn()
	return time.Since(start)
}
