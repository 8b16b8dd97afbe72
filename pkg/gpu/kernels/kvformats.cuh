// kvformats.cuh: the quantized KV formats of pkg/quant on the device —
// encoders that write the bytes pkg/quant's Encode writes for the same
// float32 input (byte for byte: same rounding, same order of float32
// operations, no fused multiply-adds), and per-value decoders that give
// exactly its Decode values. docs/gpu-kv.md lists what is covered.
//
// A side's format is one int (kv.go, kvFmtCode):
//   bits 0..7   kind (KVQ_KV_*)
//   bits 8..19  group: values per int group (int8/int4/int2)
//   bit 20      sym: symmetric int groups (fp16 scale only)
//   bit 21      nosat: fp8 with PyTorch's non-saturating cast
// Every format's tile is BlockTokens rows of kvq_row_bytes(fmt, dim)
// bytes; the rows are contiguous except for the int groups, whose tile is
// the fp16 scales of every (row, group), then the fp16 zeros (asymmetric),
// then the packed codes of every row (pkg/quant tokenCodec).
#pragma once
#include "common.cuh"

#define KVQ_KV_F32 0
#define KVQ_KV_F16 1
#define KVQ_KV_BF16 2
#define KVQ_KV_E4M3 3
#define KVQ_KV_E5M2 4
#define KVQ_KV_Q80 5
#define KVQ_KV_Q40 6
#define KVQ_KV_Q41 7
#define KVQ_KV_Q50 8
#define KVQ_KV_Q51 9
#define KVQ_KV_IQ4NL 10
#define KVQ_KV_INT8 11
#define KVQ_KV_INT4 12
#define KVQ_KV_INT2 13
#define KVQ_KV_NVFP4 14
#define KVQ_KV_FP4E2M1 15

// kvq_is_fp4: the FP4 kinds (pkg/quant fp4_format.go), rows of dim/2 code
// bytes then dim/16 scale bytes.
static __device__ __forceinline__ bool kvq_is_fp4(int kind) { return kind == KVQ_KV_NVFP4 || kind == KVQ_KV_FP4E2M1; }

static __device__ __forceinline__ int kvq_fmt_kind(int fmt) { return fmt & 0xff; }
static __device__ __forceinline__ int kvq_fmt_group(int fmt) { return (fmt >> 8) & 0xfff; }
static __device__ __forceinline__ bool kvq_fmt_sym(int fmt) { return (fmt >> 20) & 1; }
static __device__ __forceinline__ bool kvq_fmt_nosat(int fmt) { return (fmt >> 21) & 1; }

// Bytes of one GGML block of 32 values.
static __device__ __forceinline__ int kvq_block_bytes(int kind) {
	switch (kind) {
	case KVQ_KV_Q80: return 34;
	case KVQ_KV_Q40: return 18;
	case KVQ_KV_Q41: return 20;
	case KVQ_KV_Q50: return 22;
	case KVQ_KV_Q51: return 24;
	default: return 18; // iq4_nl
	}
}

static __device__ __forceinline__ int kvq_int_bits(int kind) {
	return kind == KVQ_KV_INT8 ? 8 : kind == KVQ_KV_INT4 ? 4 : 2;
}

// kvq_row_bytes is the bytes per row (token) of a tile.
static __device__ __forceinline__ int kvq_row_bytes(int fmt, int dim) {
	int kind = kvq_fmt_kind(fmt);
	switch (kind) {
	case KVQ_KV_F32: return 4 * dim;
	case KVQ_KV_F16:
	case KVQ_KV_BF16: return 2 * dim;
	case KVQ_KV_E4M3:
	case KVQ_KV_E5M2: return dim;
	case KVQ_KV_NVFP4:
	case KVQ_KV_FP4E2M1: return dim / 2 + dim / 16;
	case KVQ_KV_INT8:
	case KVQ_KV_INT4:
	case KVQ_KV_INT2: {
		int ng = dim / kvq_fmt_group(fmt);
		return dim * kvq_int_bits(kind) / 8 + ng * (kvq_fmt_sym(fmt) ? 2 : 4);
	}
	}
	return dim / 32 * kvq_block_bytes(kind);
}

static __device__ __forceinline__ unsigned short kvq_ld16(const unsigned char* p) {
	return (unsigned short)(p[0] | (p[1] << 8));
}
static __device__ __forceinline__ void kvq_st16(unsigned char* p, unsigned short h) {
	p[0] = (unsigned char)h;
	p[1] = (unsigned char)(h >> 8);
}

// ---------------------------------------------------------------------
// Scalar conversions shared by the formats.

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

static __device__ __forceinline__ float kvq_bf16_bits_to_f32(unsigned short h) {
	return __uint_as_float((unsigned)h << 16);
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

// Go's min and max on float32 (pkg/quant uses them on values without
// NaNs): −0 is below +0, which fminf and fmaxf leave unspecified.
static __device__ __forceinline__ float kvq_go_min(float a, float b) {
	if (a < b) return a;
	if (b < a) return b;
	return (__float_as_uint(a) & 0x80000000u) ? a : b;
}
static __device__ __forceinline__ float kvq_go_max(float a, float b) {
	if (a > b) return a;
	if (b > a) return b;
	return (__float_as_uint(a) & 0x80000000u) ? b : a;
}

static __device__ __forceinline__ float kvq_abs(float x) { return __uint_as_float(__float_as_uint(x) & 0x7fffffffu); }

// ---------------------------------------------------------------------
// fp8 (pkg/quant fp8.go): code = fp8(x/scale), value = value(code)·scale.

// kvq_fp8_encode is pkg/quant's fp8Encode: round to nearest even on the
// mbits stored bits (subnormals too), NaN → 0x7F with the sign, overflow
// to ±max (sat) or NaN (E4M3) / ±Inf (E5M2).
static __device__ __forceinline__ unsigned char kvq_fp8_encode(float x, bool e5m2, bool sat) {
	const unsigned mbits = e5m2 ? 2u : 3u;
	const int bias = e5m2 ? 15 : 7;
	const unsigned maxCode = e5m2 ? 0x7Bu : 0x7Eu;
	unsigned ovf = sat ? maxCode : (e5m2 ? 0x7Cu : 0x7Fu);
	unsigned bits = __float_as_uint(x);
	unsigned sign = (bits >> 24) & 0x80u;
	unsigned a = bits & 0x7fffffffu;
	if (a > 0x7f800000u) return (unsigned char)(sign | 0x7fu);
	if (a == 0x7f800000u) return (unsigned char)(sign | ovf);
	if (a < 0x00800000u) return (unsigned char)sign;
	unsigned m = (a & 0x7fffffu) | 0x800000u;
	int fe = (int)(a >> 23) - 127 + bias;
	unsigned r;
	if (fe >= 1) {
		unsigned shift = 23u - mbits;
		r = ((unsigned)fe << mbits) | ((m & 0x7fffffu) >> shift);
		unsigned rem = m & ((1u << shift) - 1u);
		unsigned half = 1u << (shift - 1u);
		if (rem > half || (rem == half && (r & 1u))) r++;
	} else {
		int shift = 24 - (int)mbits - fe;
		if (shift > 24) return (unsigned char)sign;
		r = m >> shift;
		unsigned rem = m & ((1u << shift) - 1u);
		unsigned half = 1u << (shift - 1);
		if (rem > half || (rem == half && (r & 1u))) r++;
	}
	if (r > maxCode) return (unsigned char)(sign | ovf);
	return (unsigned char)(sign | r);
}

// kvq_fp8_value is the exact value of an fp8 code (a quiet NaN with the
// code's sign for E4M3's 0x7F/0xFF), as internal/simd decodes it.
static __device__ __forceinline__ float kvq_fp8_value(unsigned c, bool e5m2) {
	if (e5m2) return kvq_f16_bits_to_f32((unsigned short)(c << 8));
	if ((c & 0x7fu) == 0x7fu) return __uint_as_float(((c & 0x80u) << 24) | 0x7fc00000u);
	return kvq_f16_bits_to_f32((unsigned short)(((c & 0x80u) << 8) | ((c & 0x7fu) << 7))) * 256.f;
}

// kvq_fp8_decode is value·scale rounded once; a NaN code stays its NaN.
static __device__ __forceinline__ float kvq_fp8_decode(unsigned c, bool e5m2, float scale) {
	float v = kvq_fp8_value(c, e5m2);
	return v != v ? v : __fmul_rn(v, scale);
}

// ---------------------------------------------------------------------
// GGML blocks (pkg/quant block.go): 32 values, fp16 scale first.

// kvq_ggml_scale is pkg/quant's ggmlScale: d's fp16 bits, and the d to
// quantize with (±65504 where fp16 would overflow).
static __device__ __forceinline__ unsigned short kvq_ggml_scale(float d, float* dq) {
	unsigned short h = kvq_f32_to_f16_bits(d);
	*dq = d;
	if ((h & 0x7fffu) == 0x7c00u) {
		h ^= 0x7c00u ^ 0x7bffu;
		*dq = (__float_as_uint(d) & 0x80000000u) ? -65504.f : 65504.f;
	}
	return h;
}

static __device__ __forceinline__ float kvq_inv(float d) { return d == 0.f ? 0.f : __fdiv_rn(1.f, d); }

// kvq_trunc_code is C's (int)v clamped to [0, hi], NaN → 0.
static __device__ __forceinline__ unsigned kvq_trunc_code(float v, unsigned hi) {
	if (!(v >= 0.f)) return 0;
	if (v >= (float)hi) return hi;
	return (unsigned)v;
}

// kvq_signed_max: the element of largest magnitude (first on ties, NaNs
// skipped) and its magnitude.
static __device__ __forceinline__ float kvq_signed_max(const float* x, float* amax) {
	float m = 0.f, a = 0.f;
	for (int j = 0; j < 32; j++) {
		float v = kvq_abs(x[j]);
		if (v > a) {
			a = v;
			m = x[j];
		}
	}
	*amax = a;
	return m;
}

// kvq_iq4nl_level is GGML's kvalues_iq4nl[i] ({-127, -104, -83, -65, -49,
// -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}), from two constants
// rather than a table in memory.
static __device__ __forceinline__ int kvq_iq4nl_level(unsigned i) {
	unsigned long long w = i < 8 ? 0xf6eaddcfbfad9881ull : 0x7159453526190d01ull;
	return (int)(signed char)(unsigned char)(w >> (8 * (i & 7)));
}

static __device__ __forceinline__ void kvq_put_nibbles(unsigned char* qs, const unsigned char* q) {
	for (int j = 0; j < 16; j++) qs[j] = (unsigned char)((q[j] & 0x0f) | (q[j + 16] << 4));
}
static __device__ __forceinline__ void kvq_put_high_bits(unsigned char* qh, const unsigned char* q) {
	unsigned bits = 0;
	for (int j = 0; j < 32; j++) bits |= (unsigned)((q[j] >> 4) & 1) << j;
	qh[0] = (unsigned char)bits;
	qh[1] = (unsigned char)(bits >> 8);
	qh[2] = (unsigned char)(bits >> 16);
	qh[3] = (unsigned char)(bits >> 24);
}

// kvq_block_encode writes one block of kind for the 32 values x.
static __device__ void kvq_block_encode(unsigned char* dst, const float* x, int kind) {
	unsigned char q[32];
	if (kind == KVQ_KV_Q80) {
		float amax;
		kvq_signed_max(x, &amax);
		float d;
		unsigned short h = kvq_ggml_scale(__fdiv_rn(amax, 127.f), &d);
		float id = kvq_inv(d);
		kvq_st16(dst, h);
		for (int j = 0; j < 32; j++) {
			float r = roundf(__fmul_rn(x[j], id)); // ties away from zero
			int c = r > 127.f ? 127 : r < -127.f ? -127 : r != r ? 0 : (int)r;
			dst[2 + j] = (unsigned char)(signed char)c;
		}
		return;
	}
	if (kind == KVQ_KV_Q40 || kind == KVQ_KV_Q50) {
		int levels = kind == KVQ_KV_Q40 ? 16 : 32;
		float amax;
		float m = kvq_signed_max(x, &amax);
		float d;
		unsigned short h = kvq_ggml_scale(__fdiv_rn(m, -(float)(levels / 2)), &d);
		float id = kvq_inv(d);
		float half = (float)(levels / 2) + 0.5f;
		for (int j = 0; j < 32; j++) q[j] = (unsigned char)kvq_trunc_code(__fadd_rn(__fmul_rn(x[j], id), half), levels - 1);
		kvq_st16(dst, h);
		if (kind == KVQ_KV_Q40) {
			kvq_put_nibbles(dst + 2, q);
		} else {
			kvq_put_high_bits(dst + 2, q);
			kvq_put_nibbles(dst + 6, q);
		}
		return;
	}
	if (kind == KVQ_KV_Q41 || kind == KVQ_KV_Q51) {
		int levels = kind == KVQ_KV_Q41 ? 16 : 32;
		float lo = 3.40282346638528859811704183484516925440e+38f, hi = -lo;
		for (int j = 0; j < 32; j++) {
			if (x[j] < lo) lo = x[j];
			if (x[j] > hi) hi = x[j];
		}
		if (hi < lo) lo = hi = 0.f;
		float d, unused;
		unsigned short h = kvq_ggml_scale(__fdiv_rn(__fsub_rn(hi, lo), (float)(levels - 1)), &d);
		unsigned short hm = kvq_ggml_scale(lo, &unused);
		float id = kvq_inv(d);
		for (int j = 0; j < 32; j++)
			q[j] = (unsigned char)kvq_trunc_code(__fadd_rn(__fmul_rn(__fsub_rn(x[j], lo), id), 0.5f), levels - 1);
		kvq_st16(dst, h);
		kvq_st16(dst + 2, hm);
		if (kind == KVQ_KV_Q41) {
			kvq_put_nibbles(dst + 4, q);
		} else {
			kvq_put_high_bits(dst + 4, q);
			kvq_put_nibbles(dst + 8, q);
		}
		return;
	}
	// iq4_nl: pkg/quant's reference quantizer (QuantizeRowIQ4NL).
	float amax;
	float m = kvq_signed_max(x, &amax);
	if (amax < 1e-15f) {
		for (int j = 0; j < 18; j++) dst[j] = 0;
		return;
	}
	float d0 = __fdiv_rn(m, (float)kvq_iq4nl_level(0));
	float id = __fdiv_rn(1.f, d0);
	float sumqx = 0.f, sumq2 = 0.f;
	for (int j = 0; j < 32; j++) {
		float v = __fmul_rn(x[j], id);
		unsigned idx = 0;
		for (int k = 1; k < 16; k++) {
			float mid = (float)(kvq_iq4nl_level(k - 1) + kvq_iq4nl_level(k)) / 2.f;
			if (v >= mid) idx = k;
		}
		q[j] = (unsigned char)idx;
		float l = (float)kvq_iq4nl_level(idx);
		float w = __fmul_rn(x[j], x[j]);
		float wl = __fmul_rn(w, l);
		sumqx = __fadd_rn(sumqx, __fmul_rn(wl, x[j]));
		sumq2 = __fadd_rn(sumq2, __fmul_rn(wl, l));
	}
	float d = d0;
	if (sumq2 > 0.f) {
		float ls = __fdiv_rn(sumqx, sumq2);
		if (kvq_abs(ls) <= 3.40282346638528859811704183484516925440e+38f) d = ls;
	}
	float unused;
	kvq_st16(dst, kvq_ggml_scale(d, &unused));
	kvq_put_nibbles(dst + 2, q);
}

// kvq_block_value is value j of a block, as internal/simd's decoders give
// it.
static __device__ __forceinline__ float kvq_block_value(const unsigned char* blk, int kind, int j) {
	float d = kvq_f16_bits_to_f32(kvq_ld16(blk));
	int k = j & 15, sh = (j >> 4) * 4;
	switch (kind) {
	case KVQ_KV_Q80: return __fmul_rn(d, (float)(signed char)blk[2 + j]);
	case KVQ_KV_Q40: return __fmul_rn(d, (float)((int)((blk[2 + k] >> sh) & 15) - 8));
	case KVQ_KV_Q41: {
		float m = kvq_f16_bits_to_f32(kvq_ld16(blk + 2));
		return __fadd_rn(__fmul_rn(d, (float)((blk[4 + k] >> sh) & 15)), m);
	}
	case KVQ_KV_Q50: {
		unsigned qh = blk[2 + (j >> 3)] >> (j & 7) & 1u;
		return __fmul_rn(d, (float)((int)(((blk[6 + k] >> sh) & 15) | (qh << 4)) - 16));
	}
	case KVQ_KV_Q51: {
		float m = kvq_f16_bits_to_f32(kvq_ld16(blk + 2));
		unsigned qh = blk[4 + (j >> 3)] >> (j & 7) & 1u;
		return __fadd_rn(__fmul_rn(d, (float)(((blk[8 + k] >> sh) & 15) | (qh << 4))), m);
	}
	}
	return __fmul_rn(d, (float)kvq_iq4nl_level((blk[2 + k] >> sh) & 15));
}

// ---------------------------------------------------------------------
// Integer groups (pkg/quant int.go, intmath.go): per-token groups of
// `group` values with fp16 scale s and zero z (asymmetric) or s alone
// (symmetric, codes offset by 2^(b−1)).

static __device__ __forceinline__ float kvq_clamp_f16(float x) {
	if (x > 65504.f) return 65504.f;
	if (x < -65504.f) return -65504.f;
	if (x != x) return 0.f;
	return x;
}

// kvq_f16_step moves a finite fp16 value one ulp up (dir > 0) or down.
static __device__ __forceinline__ unsigned short kvq_f16_step(unsigned short h, int dir) {
	bool neg = (h & 0x8000u) != 0;
	unsigned short mag = h & 0x7fffu;
	if (mag == 0) return dir > 0 ? 0x0001u : 0x8001u;
	if ((dir > 0) != neg) return mag >= 0x7bffu ? h : (unsigned short)(h + 1);
	return (unsigned short)(h - 1);
}

static __device__ __forceinline__ unsigned short kvq_f16_floor(float x, float* v) {
	x = kvq_clamp_f16(x);
	unsigned short h = kvq_f32_to_f16_bits(x);
	*v = kvq_f16_bits_to_f32(h);
	if (*v > x) {
		h = kvq_f16_step(h, -1);
		*v = kvq_f16_bits_to_f32(h);
	}
	return h;
}

static __device__ __forceinline__ unsigned short kvq_f16_ceil(float x, float* v) {
	x = kvq_clamp_f16(x);
	unsigned short h = kvq_f32_to_f16_bits(x);
	*v = kvq_f16_bits_to_f32(h);
	if (*v < x) {
		h = kvq_f16_step(h, +1);
		*v = kvq_f16_bits_to_f32(h);
	}
	return h;
}

// kvq_u4_pos is where 4-bit code i of a run of n codes is (internal/simd
// U4Pos): blocks of 32 codes, byte k holding codes k and k+16 (a last
// block of t < 32 codes pairs k with k+t/2).
static __device__ __forceinline__ int kvq_u4_pos(int i, int n, int* shift) {
	int b = i & ~31;
	int h = min(32, n - b) / 2;
	if (i - b < h) {
		*shift = 0;
		return b / 2 + i - b;
	}
	*shift = 4;
	return b / 2 + i - b - h;
}

static __device__ __forceinline__ void kvq_put_code(unsigned char* row, int j, int n, int bits, unsigned code) {
	if (bits == 8) {
		row[j] = (unsigned char)code;
	} else if (bits == 4) {
		int sh;
		int k = kvq_u4_pos(j, n, &sh);
		row[k] = (unsigned char)((row[k] & ~(0xf << sh)) | (code << sh));
	} else {
		int sh = (j & 3) * 2;
		row[j >> 2] = (unsigned char)((row[j >> 2] & ~(0x3 << sh)) | (code << sh));
	}
}

static __device__ __forceinline__ unsigned kvq_get_code(const unsigned char* row, int j, int n, int bits) {
	if (bits == 8) return row[j];
	if (bits == 4) {
		int sh;
		int k = kvq_u4_pos(j, n, &sh);
		return (row[k] >> sh) & 15u;
	}
	return (row[j >> 2] >> ((j & 3) * 2)) & 3u;
}

// kvq_int_encode writes group g of row `row` (values x[0..group)) of an
// int tile. The group's codes are in bytes no other group writes except
// where groups share bytes (see kvq_units): the caller runs a row's groups
// in one thread then.
static __device__ void kvq_int_encode(unsigned char* tile, const float* x, int fmt, int bt, int dim, int row, int g) {
	int kind = kvq_fmt_kind(fmt), bits = kvq_int_bits(kind), group = kvq_fmt_group(fmt), ng = dim / group;
	bool sym = kvq_fmt_sym(fmt);
	int meta = sym ? 2 : 4, codeBytes = dim * bits / 8;
	unsigned char* codes = tile + bt * ng * meta + row * codeBytes;
	int mi = (row * ng + g) * 2;
	if (sym) {
		float amax = 0.f;
		for (int i = 0; i < group; i++) amax = kvq_go_max(amax, kvq_abs(kvq_clamp_f16(x[i])));
		float levels = (float)((1 << (bits - 1)) - 1);
		unsigned short sb = 0;
		float s = 0.f;
		if (amax > 0.f) {
			sb = kvq_f16_ceil(__fdiv_rn(amax, levels), &s);
			while (__fmul_rn(s, levels) < kvq_clamp_f16(amax) && sb < 0x7bffu) {
				sb = kvq_f16_step(sb, +1);
				s = kvq_f16_bits_to_f32(sb);
			}
		}
		kvq_st16(tile + mi, sb);
		int off = 1 << (bits - 1);
		float lim = (float)(off - 1);
		for (int i = 0; i < group; i++) {
			unsigned code = (unsigned)off;
			if (s != 0.f) {
				float q = rintf(__fdiv_rn(kvq_clamp_f16(x[i]), s));
				q = q > lim ? lim : q < -lim ? -lim : q;
				code = (unsigned)((int)q + off);
			}
			kvq_put_code(codes, g * group + i, dim, bits, code);
		}
		return;
	}
	float lo = __int_as_float(0x7f800000), hi = __int_as_float(0xff800000);
	for (int i = 0; i < group; i++) {
		float v = kvq_clamp_f16(x[i]);
		lo = kvq_go_min(lo, v);
		hi = kvq_go_max(hi, v);
	}
	float z, s = 0.f;
	unsigned short zb = kvq_f16_floor(lo, &z), sb = 0;
	float levels = (float)((1 << bits) - 1);
	float span = __fsub_rn(kvq_clamp_f16(hi), z);
	if (span > 0.f) {
		sb = kvq_f16_ceil(__fdiv_rn(span, levels), &s);
		while (__fadd_rn(z, __fmul_rn(s, levels)) < kvq_clamp_f16(hi) && sb < 0x7bffu) {
			sb = kvq_f16_step(sb, +1);
			s = kvq_f16_bits_to_f32(sb);
		}
	}
	kvq_st16(tile + mi, sb);
	kvq_st16(tile + bt * ng * 2 + mi, zb);
	for (int i = 0; i < group; i++) {
		unsigned code = 0;
		if (s != 0.f) {
			float q = rintf(__fdiv_rn(__fsub_rn(kvq_clamp_f16(x[i]), z), s));
			q = q > levels ? levels : q < 0.f ? 0.f : q;
			code = (unsigned)q;
		}
		kvq_put_code(codes, g * group + i, dim, bits, code);
	}
}

// kvq_int_value is value d of row `row` of an int tile: code·s + z, the
// product rounded before the sum (z = −2^(b−1)·s when symmetric).
static __device__ __forceinline__ float kvq_int_value(const unsigned char* tile, int fmt, int bt, int dim, int row, int d) {
	int kind = kvq_fmt_kind(fmt), bits = kvq_int_bits(kind), group = kvq_fmt_group(fmt), ng = dim / group;
	bool sym = kvq_fmt_sym(fmt);
	int meta = sym ? 2 : 4, codeBytes = dim * bits / 8;
	int mi = (row * ng + d / group) * 2;
	float s = kvq_f16_bits_to_f32(kvq_ld16(tile + mi));
	float z = sym ? __fmul_rn(-(float)(1 << (bits - 1)), s) : kvq_f16_bits_to_f32(kvq_ld16(tile + bt * ng * 2 + mi));
	unsigned code = kvq_get_code(tile + bt * ng * meta + row * codeBytes, d, dim, bits);
	return __fadd_rn(__fmul_rn((float)code, s), z);
}

// ---------------------------------------------------------------------
// FP4 (pkg/quant fp4.go, fp4_format.go): E2M1 codes in blocks of 16, two
// per byte (even element in the low nibble), the row's dim/16 scale bytes
// after its dim/2 code bytes. nvfp4: E4M3 block scales under the side's
// tensor scale sg (the codec-held scale, passed as fp8's is); fp4_e2m1:
// power-of-two scales 2^(b−127).

// kvq_e2m1_value is the value of an E2M1 code (its low nibble).
static __device__ __forceinline__ float kvq_e2m1_value(unsigned c) {
	// Magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 as halves: 0, 1, 2, 3, 4, 6, 8, 12.
	unsigned long long w = 0x0c08060403020100ull;
	float m = (float)(unsigned)((w >> (8 * (c & 7u))) & 0xffu) * 0.5f;
	return (c & 8u) ? -m : m;
}

// kvq_e2m1_rn is pkg/quant's EncodeE2M1: ties to even, ±6 beyond, NaN → 0x7.
static __device__ __forceinline__ unsigned kvq_e2m1_rn(float x) {
	unsigned bits = __float_as_uint(x);
	unsigned sign = (bits >> 28) & 8u;
	float a = __uint_as_float(bits & 0x7fffffffu);
	if (a != a) return 7u;
	unsigned m = a <= 0.25f ? 0u : a < 0.75f ? 1u : a <= 1.25f ? 2u : a < 1.75f ? 3u : a <= 2.5f ? 4u : a < 3.5f ? 5u : a <= 5.f ? 6u : 7u;
	return sign | m;
}

// kvq_e2m1_up is pkg/quant's EncodeE2M1Up (SGLang): ties away from zero.
static __device__ __forceinline__ unsigned kvq_e2m1_up(float x) {
	unsigned sign = x < 0.f ? 8u : 0u;
	float a = kvq_abs(x);
	unsigned m = (a >= 0.25f) + (a >= 0.75f) + (a >= 1.25f) + (a >= 1.75f) + (a >= 2.5f) + (a >= 3.5f) + (a >= 5.f);
	return sign | m;
}

// kvq_fp4_block_scale is the factor of a block with scale byte sb.
static __device__ __forceinline__ float kvq_fp4_block_scale(unsigned sb, int kind, float sg) {
	if (kind == KVQ_KV_NVFP4) return __fmul_rn(kvq_fp8_value(sb, false), sg);
	if (sb == 0u) return __uint_as_float(0x00400000u); // 2^-127
	if (sb == 255u) return __uint_as_float(0x7f800000u); // 2^128 overflows
	return __uint_as_float(sb << 23);
}

// kvq_fp4_encode writes block u (values x[0..16)) of a row of dim values.
static __device__ void kvq_fp4_encode(unsigned char* row, const float* x, int kind, float sg, int dim, int u) {
	float amax = 0.f;
	for (int j = 0; j < 16; j++) {
		float a = kvq_abs(x[j]);
		if (a > amax) amax = a;
	}
	unsigned char* codes = row + 8 * u;
	if (kind == KVQ_KV_NVFP4) {
		unsigned sc = kvq_fp8_encode(__fdiv_rn(__fmul_rn(amax, __uint_as_float(0x3e2aaaabu)), sg), false, true); // amax·fp32(1/6)
		row[dim / 2 + u] = (unsigned char)sc;
		float sd = __fmul_rn(kvq_fp8_value(sc, false), sg), out = 0.f;
		if (sd != 0.f) out = kvq_go_min(__fdiv_rn(1.f, sd), 3.40282346638528859811704183484516925440e+38f);
		for (int j = 0; j < 8; j++)
			codes[j] = (unsigned char)(kvq_e2m1_rn(__fmul_rn(x[2 * j], out)) | (kvq_e2m1_rn(__fmul_rn(x[2 * j + 1], out)) << 4));
		return;
	}
	float v = kvq_go_max(__fdiv_rn(amax, 6.f), 1e-10f);
	int e = 125; // +Inf
	unsigned vb = __float_as_uint(v);
	if (vb < 0x7f800000u) {
		e = (int)(vb >> 23) - 127 + ((vb & 0x7fffffu) != 0u); // ⌈log2 v⌉ (v is normal)
		if (e > 125) e = 125;
	}
	row[dim / 2 + u] = (unsigned char)(e + 127);
	float inv = __uint_as_float((unsigned)(127 - e) << 23);
	for (int j = 0; j < 8; j++)
		codes[j] = (unsigned char)(kvq_e2m1_up(__fmul_rn(x[2 * j], inv)) | (kvq_e2m1_up(__fmul_rn(x[2 * j + 1], inv)) << 4));
}

// kvq_fp4_value is value d of a stored row.
static __device__ __forceinline__ float kvq_fp4_value(const unsigned char* row, int kind, float sg, int dim, int d) {
	unsigned c = (row[d >> 1] >> (4 * (d & 1))) & 15u;
	return __fmul_rn(kvq_e2m1_value(c), kvq_fp4_block_scale(row[dim / 2 + (d >> 4)], kind, sg));
}

// ---------------------------------------------------------------------
// Any format.

// kvq_tile is the first byte of the tile of KV head h and block b.
static __device__ __forceinline__ const unsigned char* kvq_tile(const void* base, int fmt, int h, int b, int blocks,
                                                               int bt, int dim) {
	return (const unsigned char*)base + ((long long)h * blocks + b) * bt * (long long)kvq_row_bytes(fmt, dim);
}

// kvq_tile_value is value d of row `row` of a tile in format fmt (scale:
// the side's fp8 scale of this KV head).
static __device__ __forceinline__ float kvq_tile_value(const unsigned char* tile, int fmt, float scale, int bt, int dim,
                                                       int row, int d) {
	int kind = kvq_fmt_kind(fmt);
	switch (kind) {
	case KVQ_KV_F32: return ((const float*)tile)[row * dim + d];
	case KVQ_KV_F16: return kvq_f16_bits_to_f32(((const unsigned short*)tile)[row * dim + d]);
	case KVQ_KV_BF16: return __uint_as_float((unsigned)((const unsigned short*)tile)[row * dim + d] << 16);
	case KVQ_KV_E4M3:
	case KVQ_KV_E5M2: return kvq_fp8_decode(tile[row * dim + d], kind == KVQ_KV_E5M2, scale);
	case KVQ_KV_INT8:
	case KVQ_KV_INT4:
	case KVQ_KV_INT2: return kvq_int_value(tile, fmt, bt, dim, row, d);
	case KVQ_KV_NVFP4:
	case KVQ_KV_FP4E2M1: return kvq_fp4_value(tile + row * kvq_row_bytes(fmt, dim), kind, scale, dim, d);
	}
	int bb = kvq_block_bytes(kind);
	return kvq_block_value(tile + row * (dim / 32) * bb + (d >> 5) * bb, kind, d & 31);
}

// kvq_kv_value is value d of row `row` of block b's tile of KV head h.
static __device__ __forceinline__ float kvq_kv_value(const void* base, int fmt, const float* scales, int h, int b,
                                                     int row, int d, int blocks, int bt, int dim) {
	return kvq_tile_value(kvq_tile(base, fmt, h, b, blocks, bt, dim), fmt, scales ? scales[h] : 1.f, bt, dim, row, d);
}

// kvq_units is the number of encoding units of a row of one KV head: a
// value (unquantized, fp8), a block of 32 (GGML) or of 16 (FP4), or an int group (a whole
// row where groups share bytes: 4-bit groups of other than a multiple of
// 32 values, 2-bit groups of other than a multiple of 4).
static __device__ __forceinline__ int kvq_units(int fmt, int dim) {
	int kind = kvq_fmt_kind(fmt);
	if (kind <= KVQ_KV_E5M2) return dim;
	if (kvq_is_fp4(kind)) return dim / 16;
	if (kind >= KVQ_KV_INT8) {
		int group = kvq_fmt_group(fmt);
		if ((kind == KVQ_KV_INT4 && group % 32 != 0) || (kind == KVQ_KV_INT2 && group % 4 != 0)) return 1;
		return dim / group;
	}
	return dim / 32;
}

// kvq_encode_unit stores unit u of x (one KV head's row of dim values)
// into row `row` of tile.
static __device__ void kvq_encode_unit(unsigned char* tile, const float* x, int fmt, float scale, int bt, int dim,
                                       int row, int u) {
	int kind = kvq_fmt_kind(fmt);
	switch (kind) {
	case KVQ_KV_F32: ((float*)tile)[row * dim + u] = x[u]; return;
	case KVQ_KV_F16: ((unsigned short*)tile)[row * dim + u] = kvq_f32_to_f16_bits(x[u]); return;
	case KVQ_KV_BF16: ((unsigned short*)tile)[row * dim + u] = kvq_f32_to_bf16_bits(x[u]); return;
	case KVQ_KV_E4M3:
	case KVQ_KV_E5M2:
		tile[row * dim + u] = kvq_fp8_encode(__fdiv_rn(x[u], scale), kind == KVQ_KV_E5M2, !kvq_fmt_nosat(fmt));
		return;
	case KVQ_KV_INT8:
	case KVQ_KV_INT4:
	case KVQ_KV_INT2: {
		int group = kvq_fmt_group(fmt);
		if (kvq_units(fmt, dim) == 1 && dim / group > 1) {
			for (int g = 0; g < dim / group; g++) kvq_int_encode(tile, x + g * group, fmt, bt, dim, row, g);
			return;
		}
		kvq_int_encode(tile, x + u * group, fmt, bt, dim, row, u);
		return;
	}
	case KVQ_KV_NVFP4:
	case KVQ_KV_FP4E2M1: kvq_fp4_encode(tile + row * kvq_row_bytes(fmt, dim), x + 16 * u, kind, scale, dim, u); return;
	}
	int bb = kvq_block_bytes(kind);
	kvq_block_encode(tile + row * (dim / 32) * bb + u * bb, x + 32 * u, kind);
}
