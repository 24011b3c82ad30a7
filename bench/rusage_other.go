//go:build !unix

package bench

import "time"

// processCPU returns -1: the CPU time is not read on this platform.
func processCPU() time.Duration { return -1 }
