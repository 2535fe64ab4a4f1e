//go:build linux

package tokenizer

import (
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// threadCPU measures the CPU time of fn on a locked OS thread
// (CLOCK_THREAD_CPUTIME_ID), so time spent waiting for a CPU on a loaded
// machine does not count. It falls back to wall time if the clock fails.
func threadCPU(fn func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID
	now := func() (time.Duration, bool) {
		var ts syscall.Timespec
		_, _, errno := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0)
		return time.Duration(ts.Nano()), errno == 0
	}
	before, ok1 := now()
	wall := time.Now()
	fn()
	after, ok2 := now()
	if !ok1 || !ok2 {
		return time.Since(wall)
	}
	return after - before
}
