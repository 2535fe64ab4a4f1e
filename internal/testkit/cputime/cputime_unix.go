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

// MinorFaults returns the minor page faults of the whole process so far (getrusage ru_minflt),
// or 0 if unavailable. A page the process touches for the first time, or again after the Go
// scavenger returned it to the OS, costs one: on large fresh buffers this is most of a copy's time.
func MinorFaults() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Minflt
}
