package cmdutil

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// PhysicalMemory is the memory this process may use in bytes: the
// machine's RAM, or its cgroup's memory.max when lower; 0 when unknown.
func PhysicalMemory() int64 {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return 0
	}
	total := int64(si.Totalram) * int64(si.Unit)
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && n < total {
			total = n
		}
	}
	return total
}
