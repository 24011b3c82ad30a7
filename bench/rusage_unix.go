//go:build unix

package bench

import (
	"syscall"
	"time"
)

// processCPU returns the user and system CPU time of the process so far, or
// -1 where it cannot be read.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
