//go:build race

package testutil

// Race reports whether the binary was built with the race detector, under
// which sync.Pool drops items at random and allocation counts mean nothing.
const Race = true
