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

// cpuRunsAVX512 states what the AVX-512 kernels need beyond cpuRunsAsm:
// AVX-512 F (ZMM registers, masks), BW (VPMOVZXWD on ZMM), VL (EVEX forms
// on XMM and YMM) and BMI2 (SHLX, for the tail mask).
var cpuRunsAVX512 = cpuRunsAsm && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasBMI2

// cpuFeatures512 describes the features cpuRunsAVX512 looks at.
func cpuFeatures512() string {
	return fmt.Sprintf("AVX512F %v, AVX512BW %v, AVX512VL %v, BMI2 %v", cpu.X86.HasAVX512F, cpu.X86.HasAVX512BW, cpu.X86.HasAVX512VL, cpu.X86.HasBMI2)
}
