//go:build unix

package index_test

import (
	"syscall"
	"time"
)

// processCPU returns the process's user+system CPU time, so throughput can be reported per CPU
// second: on a shared, oversubscribed machine wall time includes time the benchmark was not running.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
