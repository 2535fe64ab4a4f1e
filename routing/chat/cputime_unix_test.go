//go:build unix

package chat_test

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time the whole process has used so far (getrusage RUSAGE_SELF:
// user + system of every thread, so the GC's background work counts), or 0 if unavailable.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
