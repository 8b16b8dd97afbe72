//go:build !unix

package serve_test

import "time"

// processCPUTime is 0 where getrusage is missing (the CPU figures of
// BenchmarkServeOverhead are then 0).
func processCPUTime() time.Duration { return 0 }
