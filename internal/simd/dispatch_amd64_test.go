//go:build amd64 && gc && !purego

package simd

import (
	"fmt"

	"golang.org/x/sys/cpu"
)

// asmBuilt reports whether this build contains the assembly kernels.
const asmBuilt = true

// cpuRunsAsm states, independently of dispatch_amd64.go's hasAVX2, what the
// generated assembly needs from the CPU: AVX2 (integer 256-bit ops, VPERMPS,
// VPSRLVD), FMA (VFMADD*PS) and F16C (VCVTPH2PS, VCVTPS2PH). x/sys/cpu
// reports each only when the OS also saves the YMM state.
var cpuRunsAsm = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C

// cpuFeatures describes the features cpuRunsAsm looks at, for messages.
func cpuFeatures() string {
	return fmt.Sprintf("AVX2 %v, FMA %v, F16C %v", cpu.X86.HasAVX2, cpu.X86.HasFMA, cpu.X86.HasF16C)
}
