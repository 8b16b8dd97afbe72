// kvwrite.cu: the paged KV cache's storage kernels for the unquantized
// formats (fp32, fp16, bf16): writing a step's rows into their tiles,
// copying and poisoning blocks, and the scalar conversions that attn.cu
// shares.
//
// Storage layout (kv.go): per layer and side one buffer of KVHeads ×
// Blocks tiles, head-major — the tile of KV head h and block b starts at
// element (h·Blocks + b)·BlockTokens·HeadDim — each tile BlockTokens rows
// of HeadDim values, little-endian, exactly pkg/quant's tile for the
// format (fp16 rows are IEEE binary16 bits, bf16 rows the top halves of
// float32s).
#pragma once
#include "common.cuh"

// Formats of a side, as kv.go numbers them.
#define KVQ_KV_F32 0
#define KVQ_KV_F16 1
#define KVQ_KV_BF16 2

// kvq_f32_to_f16_bits narrows f to binary16 bits with round to nearest,
// ties to even: the same bits as pkg/quant's encoder
// (internal/simd.F32ToF16Scalar), NaNs included (a quiet NaN keeping the
// sign and the top payload bits; the hardware conversion would return the
// canonical NaN instead, so the write kernel uses this on the device too).
static __device__ __forceinline__ unsigned short kvq_f32_to_f16_bits(float f) {
	unsigned b = __float_as_uint(f);
	unsigned sign = (b >> 16) & 0x8000u;
	int exp = (int)((b >> 23) & 0xffu);
	unsigned mant = b & 0x7fffffu;
	if (exp == 0xff) return (unsigned short)(mant ? (sign | 0x7e00u | (mant >> 13)) : (sign | 0x7c00u));
	int he = exp - 112; // biased binary16 exponent
	if (he >= 0x1f) return (unsigned short)(sign | 0x7c00u);
	if (he <= 0) {
		if (he < -10) return (unsigned short)sign;
		// Subnormal: the 24-bit significand shifted right by 14-he,
		// rounded to nearest even (a carry gives the smallest normal).
		unsigned m = mant | 0x800000u;
		unsigned shift = (unsigned)(14 - he);
		unsigned r = m >> shift;
		unsigned rem = m & ((1u << shift) - 1u);
		unsigned half = 1u << (shift - 1u);
		if (rem > half || (rem == half && (r & 1u))) r++;
		return (unsigned short)(sign | r);
	}
	unsigned r = ((unsigned)he << 10) | (mant >> 13);
	unsigned rem = mant & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++; // may carry up to Inf: correct
	return (unsigned short)(sign | r);
}

// kvq_f32_to_bf16_bits narrows f to bfloat16 bits, round to nearest even,
// as pkg/quant (internal/simd.F32ToBF16Scalar): NaNs become quiet NaNs
// keeping their sign and top payload bits.
static __device__ __forceinline__ unsigned short kvq_f32_to_bf16_bits(float f) {
	unsigned b = __float_as_uint(f);
	if ((b & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((b >> 16) | 0x0040u);
	b += 0x7fffu + ((b >> 16) & 1u);
	return (unsigned short)(b >> 16);
}

// kvq_f16_bits_to_f32 widens binary16 bits exactly (subnormals included).
static __device__ __forceinline__ float kvq_f16_bits_to_f32(unsigned short h) {
	unsigned sign = ((unsigned)h & 0x8000u) << 16;
	unsigned exp = ((unsigned)h >> 10) & 0x1fu;
	unsigned mant = (unsigned)h & 0x3ffu;
	if (exp == 0x1f) return __uint_as_float(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0u));
	if (exp == 0) return __uint_as_float(sign | __float_as_uint((float)mant * 5.9604644775390625e-8f)); // mant·2^-24
	return __uint_as_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

static __device__ __forceinline__ float kvq_bf16_bits_to_f32(unsigned short h) {
	return __uint_as_float((unsigned)h << 16);
}

// kvq_kv_get reads element i of a side's buffer in format fmt as float32.
static __device__ __forceinline__ float kvq_kv_get(const void* base, int fmt, long long i) {
	if (fmt == KVQ_KV_F32) return ((const float*)base)[i];
	unsigned short h = ((const unsigned short*)base)[i];
	return fmt == KVQ_KV_F16 ? kvq_f16_bits_to_f32(h) : kvq_bf16_bits_to_f32(h);
}

// kvq_kv_index is the element index of row `row` of the tile of KV head h
// and block `block`.
static __device__ __forceinline__ long long kvq_kv_index(int h, int block, int row, int blocks, int bt, int dim) {
	return (((long long)h * blocks + block) * bt + row) * (long long)dim;
}

// kvq_kv_write executes one side's OpEncode ops of a step for one layer:
// op i (ops[3i..3i+2] = activation row, block, slot) stores row `src` of
// x (kvHeads·dim float32s) in slot `slot` of block `block`, every KV head.
// Grid: one block per op (x); any block size.
KVQ_KERNEL void kvq_kv_write(void* base, const float* x, const int* ops, int nops, int kvHeads, int dim, int blocks,
                             int bt, int fmt) {
	int op = blockIdx.x;
	if (op >= nops) return;
	int src = ops[3 * op], block = ops[3 * op + 1], slot = ops[3 * op + 2];
	int kvd = kvHeads * dim;
	const float* row = x + (long long)src * kvd;
	for (int i = threadIdx.x; i < kvd; i += blockDim.x) {
		int h = i / dim, d = i - h * dim;
		long long e = kvq_kv_index(h, block, slot, blocks, bt, dim) + d;
		float v = row[i];
		if (fmt == KVQ_KV_F32)
			((float*)base)[e] = v;
		else if (fmt == KVQ_KV_F16)
			((unsigned short*)base)[e] = kvq_f32_to_f16_bits(v);
		else
			((unsigned short*)base)[e] = kvq_f32_to_bf16_bits(v);
	}
}
KVQ_REGISTER(kvq_kv_write)

// kvq_kv_block copies the tile of block src into block dst (src < 0: fills
// it with 0xFF bytes, Storage.Poison) for every KV head of one layer's
// side: tiles of tileBytes bytes, headStride bytes from one head's tiles
// to the next. Grid: (any, heads).
KVQ_KERNEL void kvq_kv_block(unsigned char* base, long long headStride, long long tileBytes, int dst, int src) {
	unsigned char* d = base + blockIdx.y * headStride + dst * tileBytes;
	const unsigned char* s = base + blockIdx.y * headStride + (src >= 0 ? src : 0) * tileBytes;
	long long step = (long long)gridDim.x * blockDim.x;
	long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (tileBytes % 16 == 0 && headStride % 16 == 0) {
		// 16-byte words (the buffers are 256-byte aligned).
		long long n = tileBytes / 16;
		unsigned* dw = (unsigned*)d;
		const unsigned* sw = (const unsigned*)s;
		for (long long i = first; i < n; i += step)
			for (int j = 0; j < 4; j++) dw[4 * i + j] = src >= 0 ? sw[4 * i + j] : 0xffffffffu;
		return;
	}
	for (long long i = first; i < tileBytes; i += step) d[i] = src >= 0 ? s[i] : (unsigned char)0xff;
}
KVQ_REGISTER(kvq_kv_block)

// kvq_kv_fill_random fills n elements of a side's buffer with
// pseudo-random values in [-1, 1) (a hash of seed and index), encoded in
// fmt: benchmark data written without a host copy. Grid: any (x).
KVQ_KERNEL void kvq_kv_fill_random(void* base, long long n, long long seed, int fmt) {
	long long step = (long long)gridDim.x * blockDim.x;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
		unsigned long long z = (unsigned long long)(i + seed * 0x9e3779b97f4a7c15ull);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z ^= z >> 31;
		float v = (float)(z >> 40) * (1.0f / 8388608.0f) - 1.0f; // 24 bits → [-1, 1)
		if (fmt == KVQ_KV_F32)
			((float*)base)[i] = v;
		else if (fmt == KVQ_KV_F16)
			((unsigned short*)base)[i] = kvq_f32_to_f16_bits(v);
		else
			((unsigned short*)base)[i] = kvq_f32_to_bf16_bits(v);
	}
}
KVQ_REGISTER(kvq_kv_fill_random)
