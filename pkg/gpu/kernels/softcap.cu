// softcap.cu: the ops of the Gemma families (backend.SoftcapOps, softcap.go
// launches these): a scale, GeGLU with the tanh GELU, and kvq_cap, the
// attention-logit softcapping that attn.cu's kernels apply to each score
// before the mask and the softmax.
#pragma once
#include "common.cuh"

// kvq_cap caps one attention score: cap·tanh(s/cap), s and cap in the same
// units (the kernels that keep their scores in base 2, s·log2(e), pass
// cap·log2(e): the same value in those units); cap 0 returns s itself, so
// that a model without softcapping gets the kernels' results bit for bit.
static __device__ __forceinline__ float kvq_cap(float s, float cap) { return cap > 0.f ? cap * tanhf(s / cap) : s; }

// x[i] *= s for i < n.
KVQ_KERNEL void kvq_scale(float* x, long long n, float s) {
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (long long)gridDim.x * blockDim.x)
		x[i] *= s;
}
KVQ_REGISTER(kvq_scale)

// gate[i] = gelu(gate[i])·up[i] with the tanh GELU,
// 0.5·x·(1 + tanh(u)) = x / (1 + e^(−2u)), u = √(2/π)·(x + 0.044715·x³),
// u in float and e^(−2u) in double rounded to float, as the CPU computes
// it (x/(1+∞) = 0 at the negative end, x at the positive end).
KVQ_KERNEL void kvq_geglu(float* gate, const float* up, long long n) {
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (long long)gridDim.x * blockDim.x) {
		float x = gate[i];
		float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
		float e = (float)exp(-2.0 * (double)u);
		gate[i] = x / (1.0f + e) * up[i];
	}
}
KVQ_REGISTER(kvq_geglu)
