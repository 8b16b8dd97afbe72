//go:build !cuda && !cudaemu

// Command gpubench needs the GPU backend: build it with -tags cuda (or
// -tags cudaemu for the CPU emulator's smoke run).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "gpubench: built without the GPU backend; run it with go run -tags cuda ./scripts/gpubench (see scripts/gpu-check.sh)")
	os.Exit(2)
}
