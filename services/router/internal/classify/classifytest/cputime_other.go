//go:build !linux

package classifytest

import "time"

// ThreadCPU is 0: the thread's CPU time is read on Linux alone.
func ThreadCPU() time.Duration { return 0 }
