//go:build !linux

package cpu_test

import "time"

// threadCPUTime is not available here.
func threadCPUTime() (time.Duration, bool) { return 0, false }
