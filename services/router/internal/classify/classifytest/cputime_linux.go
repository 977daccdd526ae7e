package classifytest

import (
	"syscall"
	"time"
)

// ThreadCPU is the CPU time the calling OS thread has used (RUSAGE_THREAD):
// with the goroutine locked to its thread, a benchmark's own work,
// whatever else the machine runs. It is 0 where it cannot be read.
func ThreadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
