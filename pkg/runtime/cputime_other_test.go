//go:build !unix

package runtime_test

import "time"

func processCPUTime() (time.Duration, bool) { return 0, false }
