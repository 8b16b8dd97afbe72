// common.cuh: what every kvq kernel source includes. The same sources are
// compiled two ways:
//   - by nvcc to PTX (make ptx), embedded in the cuda build;
//   - by the host C++ compiler against emu.cuh (the cudaemu build), which
//     provides the CUDA built-ins on the CPU so that tests can run the
//     kernels without a GPU.
// Kernels therefore use only what emu.cuh provides (listed there), declare
// themselves with KVQ_KERNEL, register with KVQ_REGISTER(name) after their
// definition, use KVQ_DYN_SMEM for dynamic shared memory and the kvq_mma_*
// wrappers below for tensor cores (no other inline PTX outside #ifdef
// __CUDA_ARCH__ blocks that have a portable #else).
//
// Kernel parameters: pointers, int, long long, float and unsigned only —
// the host passes each in an 8-byte slot.
#pragma once

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math_constants.h> // CUDART_INF_F and friends (emu.cuh defines them too)
#define KVQ_DYN_SMEM(T, name) extern __shared__ __align__(16) T name[]
#define KVQ_REGISTER(name)
#else
#include "emu.cuh"
#endif

#define KVQ_KERNEL extern "C" __global__

// Two halves (or bfloat16s) packed in one 32-bit register, lo in the low
// 16 bits: the operand layout of mma.sync.
static __device__ __forceinline__ unsigned kvq_pack_h2(__half lo, __half hi) {
	return (unsigned)__half_as_ushort(lo) | ((unsigned)__half_as_ushort(hi) << 16);
}
static __device__ __forceinline__ unsigned kvq_pack_bf2(__nv_bfloat16 lo, __nv_bfloat16 hi) {
	return (unsigned)__bfloat16_as_ushort(lo) | ((unsigned)__bfloat16_as_ushort(hi) << 16);
}

// kvq_mma_f16_16816: d += a·b on one warp's m16n8k16 tile, fp16 inputs,
// fp32 accumulators (mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32).
// Fragments, with g = lane/4 and t = lane%4 (PTX ISA, "Matrix Fragments
// for mma.m16n8k16"):
//   a[0]: A[g][2t..2t+1]      a[1]: A[g+8][2t..2t+1]
//   a[2]: A[g][2t+8..2t+9]    a[3]: A[g+8][2t+8..2t+9]
//   b[0]: B[2t..2t+1][g]      b[1]: B[2t+8..2t+9][g]      (B is k × n)
//   d[0..1]: D[g][2t..2t+1]   d[2..3]: D[g+8][2t..2t+1]
// Every lane of the warp must call it together (it is warp-collective).
// kvq_mma_bf16_16816 is the same with bfloat16 inputs.
#if defined(__CUDACC__)
static __device__ __forceinline__ void kvq_mma_f16_16816(float d[4], const unsigned a[4], const unsigned b[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
	asm volatile(
	    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
	    "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
	    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}
static __device__ __forceinline__ void kvq_mma_bf16_16816(float d[4], const unsigned a[4], const unsigned b[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
	asm volatile(
	    "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
	    "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
	    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}
#endif

// Warp-level sums and maxima over all 32 lanes (every lane gets the
// result).
static __device__ __forceinline__ float kvq_warp_sum(float v) {
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}
static __device__ __forceinline__ float kvq_warp_max(float v) {
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}
