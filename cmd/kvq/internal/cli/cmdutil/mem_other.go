//go:build !linux

package cmdutil

// PhysicalMemory is the memory this process may use in bytes; 0 (unknown)
// outside Linux.
func PhysicalMemory() int64 { return 0 }
