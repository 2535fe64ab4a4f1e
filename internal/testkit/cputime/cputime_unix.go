//go:build unix

// Package cputime reads the CPU time of the whole process, for benchmarks that report CPU next
// to wall time (on a shared machine CPU time is the steadier figure).
package cputime

import (
	"syscall"
	"time"
)

// Process returns the CPU time the whole process has used so far (getrusage RUSAGE_SELF: user +
// system of every thread, so the GC's background work counts), or 0 if unavailable.
func Process() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
