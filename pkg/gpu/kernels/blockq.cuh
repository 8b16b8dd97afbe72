// blockq.cuh: ggml's packed block weight types on the device (pkg/gguf's
// block layouts, docs/weight-formats.md): the per-value decoder that the
// reference product, the decode GEMV below and the tensor-core GEMM's
// tile loader (gemm.cu) share, and the GEMV kernels kvq_gemv_<type>_<n>.
//
// Layout on the device: the file's blocks unchanged, row after row (ld =
// the bytes of one row, cols/values-per-block blocks). Value (r, c) is
// value c % QK of block c / QK of row r, decoded as ggml's
// dequantize_row_* does: the same float32 products in the same order,
// each rounded (kvq_fmul keeps nvcc from fusing a multiply and an add), so
// every weight equals the CPU's pkg/gguf decoding bit for bit.
#pragma once
#include "common.cuh"

// Block weight dtypes (tensor.DType's order, after KVQ_Q80 = 3).
enum {
	KVQ_Q40 = 4, KVQ_Q41, KVQ_Q50, KVQ_Q51, KVQ_Q2K, KVQ_Q3K, KVQ_Q4K, KVQ_Q5K, KVQ_Q6K,
	KVQ_IQ4NL, KVQ_IQ4XS, KVQ_MXFP4
};

// kvq_blk_qk and kvq_blk_bytes are a block type's values and bytes per
// block.
static __device__ __forceinline__ constexpr int kvq_blk_qk(int dt) {
	return dt == KVQ_Q2K || dt == KVQ_Q3K || dt == KVQ_Q4K || dt == KVQ_Q5K || dt == KVQ_Q6K || dt == KVQ_IQ4XS ? 256
	                                                                                                           : 32;
}
static __device__ __forceinline__ constexpr int kvq_blk_bytes(int dt) {
	return dt == KVQ_Q40 ? 18 : dt == KVQ_Q41 ? 20 : dt == KVQ_Q50 ? 22 : dt == KVQ_Q51 ? 24
	     : dt == KVQ_Q2K ? 84 : dt == KVQ_Q3K ? 110 : dt == KVQ_Q4K ? 144 : dt == KVQ_Q5K ? 176
	     : dt == KVQ_Q6K ? 210 : dt == KVQ_IQ4NL ? 18 : dt == KVQ_IQ4XS ? 136 : 17;
}

// kvq_fmul is a·b rounded to float32, never fused with a following add.
static __device__ __forceinline__ float kvq_fmul(float a, float b) {
#if defined(__CUDACC__)
	return __fmul_rn(a, b);
#else
	return a * b;  // the emulator's host build does not contract (no -mfma)
#endif
}

// Little-endian fields at any byte offset (blocks are not aligned).
static __device__ __forceinline__ float kvq_blk_half(const unsigned char* p) {
	return kvq_f16_f32((unsigned short)(p[0] | (p[1] << 8)));
}
static __device__ __forceinline__ unsigned kvq_blk_u32(const unsigned char* p) {
	return (unsigned)p[0] | ((unsigned)p[1] << 8) | ((unsigned)p[2] << 16) | ((unsigned)p[3] << 24);
}

// kvq_iq4_level is ggml's kvalues_iq4nl[q]; kvq_mxfp4_level
// kvalues_mxfp4[q] (the e2m1 values doubled).
static __device__ __forceinline__ int kvq_iq4_level(int q) {
	const signed char k[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
	return k[q];
}
static __device__ __forceinline__ int kvq_mxfp4_level(int q) {
	const signed char k[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
	return k[q];
}

// kvq_scale_min_k4 is ggml's get_scale_min_k4 for group j (0..7) of a
// q4_K or q5_K block's 12 scale bytes.
static __device__ __forceinline__ void kvq_scale_min_k4(int j, const unsigned char* q, int& sc, int& m) {
	if (j < 4) {
		sc = q[j] & 63, m = q[j + 4] & 63;
	} else {
		sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
		m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

// kvq_blk_val returns value i (0 ≤ i < kvq_blk_qk(DT)) of the block at b.
template <int DT>
static __device__ __forceinline__ float kvq_blk_val(const unsigned char* b, int i) {
	if (DT == KVQ_Q40 || DT == KVQ_Q41 || DT == KVQ_IQ4NL) {
		int o = DT == KVQ_Q41 ? 4 : 2, c = b[o + (i & 15)];
		int q = i < 16 ? c & 15 : c >> 4;
		float d = kvq_blk_half(b);
		if (DT == KVQ_Q40) return (float)(q - 8) * d;
		if (DT == KVQ_IQ4NL) return d * (float)kvq_iq4_level(q);
		return kvq_fmul((float)q, d) + kvq_blk_half(b + 2);
	}
	if (DT == KVQ_Q50 || DT == KVQ_Q51) {
		int o = DT == KVQ_Q51 ? 4 : 2;
		unsigned qh = kvq_blk_u32(b + o);
		int c = b[o + 4 + (i & 15)];
		int q = (i < 16 ? c & 15 : c >> 4) | (int)((qh >> i) & 1) << 4;
		float d = kvq_blk_half(b);
		if (DT == KVQ_Q50) return (float)(q - 16) * d;
		return kvq_fmul((float)q, d) + kvq_blk_half(b + 2);
	}
	if (DT == KVQ_MXFP4) {
		unsigned e = b[0];
		float d = kvq_bits_f32(e < 2 ? 0x00200000u << e : (e - 1) << 23);
		int c = b[1 + (i & 15)];
		return (float)kvq_mxfp4_level(i < 16 ? c & 15 : c >> 4) * d;
	}
	if (DT == KVQ_Q2K || DT == KVQ_Q3K) {
		int n = i >> 7, j = (i >> 5) & 3, h = (i >> 4) & 1, l = i & 15;
		int is = 8 * n + 2 * j + h;
		int q = (b[(DT == KVQ_Q2K ? 16 : 32) + 32 * n + 16 * h + l] >> (2 * j)) & 3;
		if (DT == KVQ_Q2K) {
			int sc = b[is];
			float dl = kvq_fmul(kvq_blk_half(b + 80), (float)(sc & 15));
			float ml = kvq_fmul(kvq_blk_half(b + 82), (float)(sc >> 4));
			return kvq_fmul(dl, (float)q) - ml;
		}
		const unsigned char* s = b + 96;
		int lo = (s[is % 8] >> (4 * (is / 8))) & 15, hi = (s[8 + is % 4] >> (2 * (is / 4))) & 3;
		float dl = kvq_blk_half(b + 108) * (float)((lo | hi << 4) - 32);
		if (!(b[16 * h + l] & (1 << (4 * n + j)))) q -= 4;
		return dl * (float)q;
	}
	if (DT == KVQ_Q4K || DT == KVQ_Q5K) {
		int g = i >> 6, hi = (i >> 5) & 1, l = i & 31;
		int sc, m;
		kvq_scale_min_k4(2 * g + hi, b + 4, sc, m);
		float dl = kvq_fmul(kvq_blk_half(b), (float)sc), ml = kvq_fmul(kvq_blk_half(b + 2), (float)m);
		int c = b[(DT == KVQ_Q4K ? 16 : 48) + 32 * g + l];
		int q = hi ? c >> 4 : c & 15;
		if (DT == KVQ_Q5K) q |= ((b[16 + l] >> (2 * g + hi)) & 1) << 4;
		return kvq_fmul(dl, (float)q) - ml;
	}
	if (DT == KVQ_Q6K) {
		int n = i >> 7, k = (i >> 5) & 3, l = i & 31;
		int c = b[64 * n + l + 32 * (k & 1)];
		int q = ((k >= 2 ? c >> 4 : c & 15) | (((b[128 + 32 * n + l] >> (2 * k)) & 3) << 4)) - 32;
		float dl = kvq_fmul(kvq_blk_half(b + 208), (float)(signed char)b[192 + 8 * n + l / 16 + 2 * k]);
		return dl * (float)q;
	}
	// KVQ_IQ4XS
	int ib = i >> 5, j = i & 31;
	unsigned sh = b[2] | (b[3] << 8);
	int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 15) | (int)((sh >> (2 * ib)) & 3) << 4;
	float dl = kvq_blk_half(b) * (float)(ls - 32);
	int c = b[8 + 16 * ib + (j & 15)];
	return dl * (float)kvq_iq4_level(j < 16 ? c & 15 : c >> 4);
}

// kvq_blk_val8 decodes values i0..i0+7 (i0 a multiple of 8) of the block
// at b into v, as kvq_blk_val does value by value (the same products, so
// the same bits) but with each group's scale decoded once for the 8 (they
// share it: every type's groups are 16 or 32 aligned values) for Q4_0,
// Q4_K, Q5_K and Q6_K (the Q4_K_M mix); the other types value by value.
template <int DT>
static __device__ __forceinline__ void kvq_blk_val8(const unsigned char* b, int i0, float* v) {
	if (DT == KVQ_Q40) {
		float d = kvq_blk_half(b);
		const unsigned char* q = b + 2 + (i0 & 15);
		int sh = i0 < 16 ? 0 : 4;
		KVQ_UNROLL for (int j = 0; j < 8; j++) v[j] = (float)(((q[j] >> sh) & 15) - 8) * d;
	} else if (DT == KVQ_Q4K || DT == KVQ_Q5K) {
		int g = i0 >> 6, hi = (i0 >> 5) & 1, l0 = i0 & 31;
		int sc, m;
		kvq_scale_min_k4(2 * g + hi, b + 4, sc, m);
		float dl = kvq_fmul(kvq_blk_half(b), (float)sc), ml = kvq_fmul(kvq_blk_half(b + 2), (float)m);
		const unsigned char* q = b + (DT == KVQ_Q4K ? 16 : 48) + 32 * g + l0;
		KVQ_UNROLL for (int j = 0; j < 8; j++) {
			int c = (q[j] >> (4 * hi)) & 15;
			if (DT == KVQ_Q5K) c |= ((b[16 + l0 + j] >> (2 * g + hi)) & 1) << 4;
			v[j] = kvq_fmul(dl, (float)c) - ml;
		}
	} else if (DT == KVQ_Q6K) {
		int n = i0 >> 7, k = (i0 >> 5) & 3, l0 = i0 & 31;
		float dl = kvq_fmul(kvq_blk_half(b + 208), (float)(signed char)b[192 + 8 * n + l0 / 16 + 2 * k]);
		const unsigned char* ql = b + 64 * n + l0 + 32 * (k & 1);
		const unsigned char* qh = b + 128 + 32 * n + l0;
		int sh = k >= 2 ? 4 : 0;
		KVQ_UNROLL for (int j = 0; j < 8; j++)
			v[j] = dl * (float)((((ql[j] >> sh) & 15) | (((qh[j] >> (2 * k)) & 3) << 4)) - 32);
	} else {
		KVQ_UNROLL for (int j = 0; j < 8; j++) v[j] = kvq_blk_val<DT>(b, i0 + j);
	}
}

// kvq_blk_w returns weight (r, c) of a block matrix with rows of ld bytes.
template <int DT>
static __device__ __forceinline__ float kvq_blk_w(const void* w, int ld, int r, int c) {
	const int QK = kvq_blk_qk(DT), BB = kvq_blk_bytes(DT);
	const unsigned char* b = (const unsigned char*)w + (long long)r * ld + (long long)(c / QK) * BB;
	return kvq_blk_val<DT>(b, c % QK);
}

// ---------------------------------------------------------------------
// kvq_gemv_<type>_<NT>: dst[t·rows + r] = Σ_c x[t·cols + c]·W[r][c] for
// NT ≤ 8 activation rows (decode), W of a block type read packed.
//
// A block of 256 threads gives one warp to each of 8 consecutive weight
// rows; lane i decodes the row's 8-value chunks i, i+32, ... (so a warp
// walks its row's blocks front to back, neighbouring lanes on
// neighbouring bytes), multiplies each decoded value by the NT
// activations in fp32 and keeps NT partial sums, which a warp shuffle
// tree adds up. Weights are decoded exactly (kvq_blk_val), the
// accumulation is fp32: against the CPU's fp32 product only the summation
// order differs. Grid ceil(rows/8), block 256.
//
// This first version decodes 8 values at a time (kvq_blk_val8: one scale
// per 8 for Q4_0, Q4_K, Q5_K and Q6_K, value by value for the other
// types) from byte loads: exact, not yet tuned for bandwidth (wide loads,
// the scales once per group of 32, a device benchmark against the
// weight-streaming limit are left to do).

#define KVQ_BGEMV_THREADS 256
#define KVQ_BGEMV_R (KVQ_BGEMV_THREADS / 32)

template <int DT, int NT>
static __device__ void kvq_gemv_blk(float* dst, const float* x, const void* w, int rows, int cols, int ld) {
	const int QK = kvq_blk_qk(DT), BB = kvq_blk_bytes(DT);
	int lane = threadIdx.x & 31;
	int r = blockIdx.x * KVQ_BGEMV_R + (threadIdx.x >> 5);
	if (r >= rows) return;  // a whole warp leaves together
	const unsigned char* wr = (const unsigned char*)w + (long long)r * ld;
	float acc[NT];
	KVQ_UNROLL for (int t = 0; t < NT; t++) acc[t] = 0;
	int chunks = cols / 8;
	for (int k = lane; k < chunks; k += 32) {
		int c0 = 8 * k;
		const unsigned char* b = wr + (long long)(c0 / QK) * BB;
		int i0 = c0 % QK;
		float v[8];
		kvq_blk_val8<DT>(b, i0, v);
		KVQ_UNROLL for (int t = 0; t < NT; t++) {
			const float* xp = x + (long long)t * cols + c0;
			float s = 0;
			KVQ_UNROLL for (int j = 0; j < 8; j++) s += xp[j] * v[j];
			acc[t] += s;
		}
	}
	KVQ_UNROLL for (int t = 0; t < NT; t++) {
		float s = kvq_warp_sum(acc[t]);
		if (lane == 0) dst[(long long)t * rows + r] = s;
	}
}

// The kernels take the dense GEMV's parameters (sc and xvec unused).
#define KVQ_GEMV_BLK(name, DT, NT)                                                                      \
	KVQ_KERNEL void KVQ_BOUNDS(KVQ_BGEMV_THREADS, 2)                                                      \
	    name(float* dst, const float* x, const void* w, const unsigned short* sc, int rows, int cols,  \
	         int ld, int xvec) {                                                                      \
		kvq_gemv_blk<DT, NT>(dst, x, w, rows, cols, ld);                                              \
	}                                                                                                 \
	KVQ_REGISTER(name)
#define KVQ_GEMV_BLK_ALL(s, DT)                                                                         \
	KVQ_GEMV_BLK(kvq_gemv_##s##_1, DT, 1)                                                               \
	KVQ_GEMV_BLK(kvq_gemv_##s##_2, DT, 2)                                                               \
	KVQ_GEMV_BLK(kvq_gemv_##s##_3, DT, 3)                                                               \
	KVQ_GEMV_BLK(kvq_gemv_##s##_4, DT, 4)                                                               \
	KVQ_GEMV_BLK(kvq_gemv_##s##_5, DT, 5)                                                               \
	KVQ_GEMV_BLK(kvq_gemv_##s##_6, DT, 6)                                                               \
	KVQ_GEMV_BLK(kvq_gemv_##s##_7, DT, 7)                                                               \
	KVQ_GEMV_BLK(kvq_gemv_##s##_8, DT, 8)
