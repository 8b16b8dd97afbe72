//go:build !amd64 || !gc || purego

package simd

// asmBuilt reports whether this build contains the assembly kernels: not
// under purego, nor off amd64, nor with a compiler other than gc.
const asmBuilt = false

// cpuRunsAsm is false: without the assembly there is nothing to run.
var cpuRunsAsm = false

// cpuFeatures describes the features cpuRunsAsm looks at, for messages.
func cpuFeatures() string { return "no assembly in this build" }

// cpuRunsAVX512 is false: without the assembly there is nothing to run.
var cpuRunsAVX512 = false

// cpuFeatures512 describes the features cpuRunsAVX512 looks at.
func cpuFeatures512() string { return "no assembly in this build" }
