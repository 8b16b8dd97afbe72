//go:build linux

package cpu_test

import (
	"syscall"
	"time"
)

// threadCPUTime returns the CPU time of the calling OS thread.
func threadCPUTime() (time.Duration, bool) {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
