// emutest.cu: the CPU emulator's self-test kernels (emu_test.go). Only
// the emulator build compiles them (emu.cpp includes this file after
// kvq.cu); they are valid CUDA as well (nvcc -ptx checks them), so that
// they could run on a GPU for comparison.
#include "common.cuh"

// emutest_vadd: c = a + b over a 1-D grid.
KVQ_KERNEL void emutest_vadd(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) c[i] = a[i] + b[i];
}
KVQ_REGISTER(emutest_vadd)

// emutest_index: every thread writes its threadIdx and blockIdx at its
// linear position (blocks x fastest, threads x fastest); thread 0 of each
// block also records the order in which blocks ran.
KVQ_KERNEL void emutest_index(int* out, int* order, unsigned* counter) {
	unsigned nt = blockDim.x * blockDim.y * blockDim.z;
	unsigned b = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
	unsigned t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
	int* o = out + 6 * (b * nt + t);
	o[0] = threadIdx.x, o[1] = threadIdx.y, o[2] = threadIdx.z;
	o[3] = blockIdx.x, o[4] = blockIdx.y, o[5] = blockIdx.z;
	if (t == 0) order[b] = int(atomicAdd(counter, 1u));
}
KVQ_REGISTER(emutest_index)

// emutest_block_sum: out[block] = the sum of the block's slice of x, by a
// tree reduction in shared memory (blockDim.x a power of two ≤ 1024).
KVQ_KERNEL void emutest_block_sum(const float* __restrict__ x, float* __restrict__ out, int n) {
	__shared__ float s[1024];
	int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
	s[t] = i < n ? x[i] : 0.0f;
	__syncthreads();
	for (int o = blockDim.x / 2; o > 0; o >>= 1) {
		if (t < o) s[t] += s[t + o];
		__syncthreads();
	}
	if (t == 0) out[blockIdx.x] = s[0];
}
KVQ_REGISTER(emutest_block_sum)

// emutest_syncvotes: every thread writes what __syncthreads_count, _and
// and _or returned to it.
KVQ_KERNEL void emutest_syncvotes(int* out) {
	int t = threadIdx.x;
	out[3 * t + 0] = __syncthreads_count(t % 3 == 0);
	out[3 * t + 1] = __syncthreads_and(t >= 0);
	out[3 * t + 2] = __syncthreads_or(t == 5);
}
KVQ_REGISTER(emutest_syncvotes)

// emutest_shfl: each kind of shuffle and vote of in[t] (one block, any
// size: the last warp may be partial), into 9 rows of blockDim.x.
KVQ_KERNEL void emutest_shfl(const int* __restrict__ in, int* __restrict__ out, int width, int delta) {
	int t = threadIdx.x, nt = blockDim.x;
	int v = in[t];
	out[0 * nt + t] = __shfl_sync(0xffffffffu, v, delta, width);
	out[1 * nt + t] = __shfl_up_sync(0xffffffffu, v, unsigned(delta), width);
	out[2 * nt + t] = __shfl_down_sync(0xffffffffu, v, unsigned(delta), width);
	out[3 * nt + t] = __shfl_xor_sync(0xffffffffu, v, delta, width);
	out[4 * nt + t] = int(__shfl_xor_sync(0xffffffffu, float(v), delta, width));
	out[5 * nt + t] = int(__shfl_down_sync(0xffffffffu, unsigned(v), unsigned(delta), width));
	out[6 * nt + t] = int(__ballot_sync(0xffffffffu, v & 1));
	out[7 * nt + t] = __any_sync(0xffffffffu, v > 1000);
	out[8 * nt + t] = __all_sync(0xffffffffu, v >= 0);
}
KVQ_REGISTER(emutest_shfl)

// emutest_warp_sum: out[warp] = kvq_warp_sum and kvq_warp_max of x over
// each full warp.
KVQ_KERNEL void emutest_warp_sum(const float* __restrict__ x, float* __restrict__ out) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	float s = kvq_warp_sum(x[i]), m = kvq_warp_max(x[i]);
	__syncwarp();
	if ((threadIdx.x & 31) == 0) {
		out[2 * (i / 32)] = s;
		out[2 * (i / 32) + 1] = m;
	}
}
KVQ_REGISTER(emutest_warp_sum)

// emutest_dynsmem: fills n floats of dynamic shared memory, then writes
// them reversed.
KVQ_KERNEL void emutest_dynsmem(float* out, int n) {
	KVQ_DYN_SMEM(float, s);
	for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = float(i + blockIdx.x);
	__syncthreads();
	for (int i = threadIdx.x; i < n; i += blockDim.x) out[blockIdx.x * n + i] = s[n - 1 - i];
}
KVQ_REGISTER(emutest_dynsmem)

// emutest_atomics: counters over n threads of a grid.
//   c[0] += 1, c[1] += 2 (unsigned), c[2] = max of (7i mod n), c[3]: CAS
//   increments, c[4]: atomicExch of i (ends as some i), f[0] += 0.5.
KVQ_KERNEL void emutest_atomics(int* c, float* f, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	atomicAdd(&c[0], 1);
	atomicAdd(reinterpret_cast<unsigned*>(&c[1]), 2u);
	atomicMax(&c[2], int((7LL * i) % n));
	int old = c[3], seen;
	do {
		seen = old;
		old = atomicCAS(&c[3], seen, seen + 1);
	} while (old != seen);
	atomicExch(&c[4], i);
	atomicAdd(&f[0], 0.5f);
}
KVQ_REGISTER(emutest_atomics)

// emutest_f2h: float → half and bfloat16, round to nearest even (every
// spelling of the conversion), and the pair forms.
KVQ_KERNEL void emutest_f2h(const float* __restrict__ in, unsigned short* __restrict__ h, unsigned short* __restrict__ bf,
                            int* __restrict__ bad, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	float x = in[i];
	unsigned short hv = __half_as_ushort(__float2half_rn(x)), bv = __bfloat16_as_ushort(__float2bfloat16_rn(x));
	h[i] = hv;
	bf[i] = bv;
	__half2 h2 = __floats2half2_rn(x, -x);
	__nv_bfloat162 b2 = __floats2bfloat162_rn(x, -x);
	if (__half_as_ushort(__float2half(x)) != hv || __bfloat16_as_ushort(__float2bfloat16(x)) != bv ||
	    __half_as_ushort(h2.x) != hv || __half_as_ushort(h2.y) != __half_as_ushort(__float2half_rn(-x)) ||
	    __bfloat16_as_ushort(b2.x) != bv || __bfloat16_as_ushort(b2.y) != __bfloat16_as_ushort(__float2bfloat16_rn(-x)))
		atomicAdd(bad, 1);
}
KVQ_REGISTER(emutest_f2h)

// emutest_h2f: 16-bit patterns → float as half and as bfloat16, and the
// half round trip.
KVQ_KERNEL void emutest_h2f(const unsigned short* __restrict__ in, float* __restrict__ hf, float* __restrict__ bff,
                            unsigned short* __restrict__ round, int* __restrict__ bad, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	__half h = __ushort_as_half(in[i]);
	float f = __half2float(h);
	hf[i] = f;
	bff[i] = __bfloat162float(__ushort_as_bfloat16(in[i]));
	round[i] = __half_as_ushort(__float2half_rn(f));
	float2 p = __half22float2(__halves2half2(h, h));
	unsigned packed = kvq_pack_h2(h, __float2half_rn(1.0f));
	if (__float_as_uint(p.x) != __float_as_uint(f) || __float_as_uint(p.y) != __float_as_uint(f) ||
	    packed != (unsigned(in[i]) | 0x3c000000u))
		atomicAdd(bad, 1);
}
KVQ_REGISTER(emutest_h2f)

// emutest_mma: one m16n8k16 tile per warp: D = C + A·B, with A 16×16,
// B 16×8 (k × n) and C, D 16×8, row-major, 16-bit patterns (fp16, or
// bf16 when bf16 != 0); tile w of the grid at A + 256w, B, C, D + 128w.
KVQ_KERNEL void emutest_mma(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                            const float* __restrict__ C, float* __restrict__ D, int bf16) {
	int w = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
	const unsigned short* a = A + 256 * w;
	const unsigned short* b = B + 128 * w;
	const float* c = C + 128 * w;
	float* d = D + 128 * w;
	unsigned af[4] = {
	    unsigned(a[g * 16 + 2 * t]) | unsigned(a[g * 16 + 2 * t + 1]) << 16,
	    unsigned(a[(g + 8) * 16 + 2 * t]) | unsigned(a[(g + 8) * 16 + 2 * t + 1]) << 16,
	    unsigned(a[g * 16 + 2 * t + 8]) | unsigned(a[g * 16 + 2 * t + 9]) << 16,
	    unsigned(a[(g + 8) * 16 + 2 * t + 8]) | unsigned(a[(g + 8) * 16 + 2 * t + 9]) << 16,
	};
	unsigned bfr[2] = {
	    unsigned(b[(2 * t) * 8 + g]) | unsigned(b[(2 * t + 1) * 8 + g]) << 16,
	    unsigned(b[(2 * t + 8) * 8 + g]) | unsigned(b[(2 * t + 9) * 8 + g]) << 16,
	};
	float acc[4] = {c[g * 8 + 2 * t], c[g * 8 + 2 * t + 1], c[(g + 8) * 8 + 2 * t], c[(g + 8) * 8 + 2 * t + 1]};
	if (bf16)
		kvq_mma_bf16_16816(acc, af, bfr);
	else
		kvq_mma_f16_16816(acc, af, bfr);
	d[g * 8 + 2 * t] = acc[0];
	d[g * 8 + 2 * t + 1] = acc[1];
	d[(g + 8) * 8 + 2 * t] = acc[2];
	d[(g + 8) * 8 + 2 * t + 1] = acc[3];
}
KVQ_REGISTER(emutest_mma)

// emutest_params: parameters of every slot type, written back.
KVQ_KERNEL void emutest_params(long long* out, int a, long long b, float c, unsigned d, const float* p) {
	if (threadIdx.x != 0) return;
	out[0] = a;
	out[1] = b;
	out[2] = __float_as_uint(c);
	out[3] = d;
	out[4] = (long long)p;
}
KVQ_REGISTER(emutest_params)

// emutest_flag: the last thread waits (with __nanosleep) for a flag
// thread 0 sets: threads may wait for one another without a barrier.
KVQ_KERNEL void emutest_flag(int* out) {
	__shared__ volatile int flag;
	if (threadIdx.x == 0) flag = 0;
	__syncthreads();
	if (threadIdx.x == blockDim.x - 1) {
		int spins = 0;
		while (!flag) {
			__nanosleep(100);
			spins++;
		}
		out[0] = 1 + (spins > 0);
	} else if (threadIdx.x == 0) {
		flag = 1;
	}
}
KVQ_REGISTER(emutest_flag)

// emutest_bad: kernels that are wrong in a given way (mode), for the
// emulator to report:
//   0: thread 0 returns, the others reach __syncthreads
//   1: half a warp waits at __syncwarp, the other half at __syncthreads
//   2: a shuffle after half the warp returned
//   3: a write past the end of out (n floats)
//   4: __trap
//   5: __nanosleep forever with no other thread able to run
//   6: an mma in a partial warp (block of 48)
//   7: a write past the end of n floats of dynamic shared memory
//   8: a write through a null pointer
//   9: a 1 MiB local array (a stack overflow)
//  10: an integer division by zero (n - 16 with n = 16)
static __device__ __noinline__ float emutest_big_frame() {
	volatile float big[1 << 18];
	big[0] = 1.0f;
	return big[0];
}

KVQ_KERNEL void emutest_bad(float* out, int n, int mode) {
	int t = threadIdx.x;
	switch (mode) {
	case 0:
		if (t == 0) return;
		__syncthreads();
		break;
	case 1:
		if ((t & 31) < 16)
			__syncwarp();
		else
			__syncthreads();
		break;
	case 2:
		if ((t & 31) >= 16) return;
		out[t] = __shfl_xor_sync(0xffffffffu, float(t), 1);
		break;
	case 3:
		if (t == 0) out[n] = 1.0f;
		break;
	case 4:
		if (t == 3) __trap();
		break;
	case 5:
		if (t == 0)
			for (;;) __nanosleep(1000);
		break;
	case 6: {
		float d[4] = {0, 0, 0, 0};
		unsigned a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
		kvq_mma_f16_16816(d, a, b);
		out[t] = d[0];
		break;
	}
	case 7: {
		KVQ_DYN_SMEM(float, s);
		if (t == 0) s[n] = 1.0f;
		break;
	}
	case 8:
		if (t == 5) *reinterpret_cast<volatile float*>(out[0] == 12345.0f ? out : nullptr) = 1.0f;
		break;
	case 9:
		if (t == 2) out[t] = emutest_big_frame();
		break;
	case 10:
		out[t] = float(t / (n - 16));
		break;
	}
}
KVQ_REGISTER(emutest_bad)

// emutest_spin: iters rounds of a warp sum and a block barrier per
// thread (a long launch full of fiber switches).
KVQ_KERNEL void emutest_spin(float* out, int iters) {
	float v = float(threadIdx.x);
	for (int i = 0; i < iters; i++) {
		v = v * 0.5f + kvq_warp_sum(v) * 1e-3f;
		__syncthreads();
	}
	out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}
KVQ_REGISTER(emutest_spin)

// emutest_barriers: iters block barriers per thread, nothing else (the
// cost of a fiber switch).
KVQ_KERNEL void emutest_barriers(int iters) {
	for (int i = 0; i < iters; i++) __syncthreads();
}
KVQ_REGISTER(emutest_barriers)

// emutest_stack: a 16 KiB local array per thread.
KVQ_KERNEL void emutest_stack(float* out) {
	volatile float buf[4096];
	for (int i = 0; i < 4096; i++) buf[i] = float(i + threadIdx.x);
	__syncthreads();
	float s = 0.0f;
	for (int i = 0; i < 4096; i++) s += buf[i];
	out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
KVQ_REGISTER(emutest_stack)

// emutest_racy: thread 0 writes a shared value the others read without a
// barrier (a bug that thread-ID order hides).
KVQ_KERNEL void emutest_racy(int* out) {
	__shared__ int x;
	if (threadIdx.x == 0) x = 1000 + int(blockIdx.x);
	out[blockIdx.x * blockDim.x + threadIdx.x] = x;
}
KVQ_REGISTER(emutest_racy)

// emutest_harith: __hadd, __hmul, __hfma and the paired __hadd2 of
// 16-bit patterns (fp16, or bf16 when bf16 != 0): out[4i..4i+3].
KVQ_KERNEL void emutest_harith(const unsigned short* __restrict__ a, const unsigned short* __restrict__ b,
                               const unsigned short* __restrict__ c, unsigned short* __restrict__ out, int n, int bf16) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	unsigned short* o = out + 4 * i;
	if (bf16) {
		__nv_bfloat16 x = __ushort_as_bfloat16(a[i]), y = __ushort_as_bfloat16(b[i]), z = __ushort_as_bfloat16(c[i]);
		o[0] = __bfloat16_as_ushort(__hadd(x, y));
		o[1] = __bfloat16_as_ushort(__hmul(x, y));
		o[2] = __bfloat16_as_ushort(__hfma(x, y, z));
		o[3] = __bfloat16_as_ushort(__hadd2(__halves2bfloat162(x, z), __halves2bfloat162(y, z)).x);
	} else {
		__half x = __ushort_as_half(a[i]), y = __ushort_as_half(b[i]), z = __ushort_as_half(c[i]);
		o[0] = __half_as_ushort(__hadd(x, y));
		o[1] = __half_as_ushort(__hmul(x, y));
		o[2] = __half_as_ushort(__hfma(x, y, z));
		o[3] = __half_as_ushort(__hadd2(__halves2half2(x, z), __halves2half2(y, z)).x);
	}
}
KVQ_REGISTER(emutest_harith)
