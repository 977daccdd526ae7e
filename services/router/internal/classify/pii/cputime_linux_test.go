package pii_test

import (
	"syscall"
	"time"
)

// threadCPU is the CPU time the calling OS thread has used (RUSAGE_THREAD):
// with the goroutine locked to its thread, a benchmark's own work,
// whatever else the machine runs.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
