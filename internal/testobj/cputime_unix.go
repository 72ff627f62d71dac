//go:build unix

package testobj

import (
	"syscall"
	"time"
)

// CPUTime returns the CPU time (user and system) the process has used so
// far, and whether it could be read. Benchmarks report it per operation
// beside the wall time: on a machine shared with other work the wall time
// of one operation grows with the load, its CPU time much less.
func CPUTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
