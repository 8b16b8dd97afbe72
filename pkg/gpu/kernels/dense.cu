// dense.cu: the dense ops of the forward pass other than the tensor-core
// GEMM (gemm.cu): weight element access, the reference matrix product,
// the small-batch GEMV, embedding, RMSNorm, bias, RoPE, SwiGLU, add,
// gather, and the bandwidth probes.
//
// Weight layouts on the device (pkg/gpu/matmul.go uploads them):
//   F32:        float [rows][ld], ld = cols rounded up to 4, zero padded;
//   F16, BF16:  16-bit values [rows][ld], ld = cols rounded up to 8, zero
//               padded (so every row starts 16-byte aligned);
//   Q8_0:       int8 codes [rows][cols] (cols is a multiple of 32, so rows
//               are 32-byte aligned) and, in a second buffer, the fp16
//               scales [rows][cols/32]: value (r, c) = scale[r][c/32] ·
//               code[r][c].
// Kernels take the weight as (w, sc, ld): sc is the scale buffer (Q8_0
// only, else null).
//   Q4_0 .. MXFP4: the file's blocks unchanged, ld bytes per row
//               (blockq.cuh).
#pragma once
#include "common.cuh"

// KVQ_BOUNDS(threads, blocks) is __launch_bounds__ (the register budget
// that lets blocks blocks of threads reside on an SM); KVQ_UNROLL asks
// nvcc to unroll the next loop fully (its trip count is a compile-time
// constant), so that the small arrays it indexes stay in registers;
// KVQ_NO_UNROLL asks it not to unroll the next loop. All three are
// nothing on the emulator.
#if defined(__CUDACC__)
#define KVQ_BOUNDS(threads, blocks) __launch_bounds__(threads, blocks)
#define KVQ_UNROLL _Pragma("unroll")
#define KVQ_NO_UNROLL _Pragma("unroll 1")
#else
#define KVQ_BOUNDS(threads, blocks)
#define KVQ_UNROLL
#define KVQ_NO_UNROLL
#endif

// Weight dtypes, as the kernels' template parameter (tensor.DType's
// order).
enum { KVQ_F32 = 0, KVQ_F16 = 1, KVQ_BF16 = 2, KVQ_Q80 = 3 };

// Bit casts and conversions of single values.
static __device__ __forceinline__ float kvq_bits_f32(unsigned u) { return __uint_as_float(u); }
static __device__ __forceinline__ float kvq_f16_f32(unsigned short h) { return __half2float(__ushort_as_half(h)); }
static __device__ __forceinline__ float kvq_bf16_f32(unsigned short h) { return kvq_bits_f32((unsigned)h << 16); }

// kvq_i8_f32 converts byte k of v, read as int8, to float exactly: the
// byte (with its sign bit flipped) becomes the low mantissa bits of
// 2^23, and subtracting 2^23 + 128 leaves the code. Two integer ops and
// an add instead of an integer-to-float conversion, whose throughput
// (16 per clock per SM) would otherwise bound the Q8_0 GEMV.
static __device__ __forceinline__ float kvq_i8_f32(unsigned v, int k) {
	unsigned b = ((v >> (8 * k)) & 0xffu) ^ 0x80u;
	return kvq_bits_f32(0x4b000000u | b) - 8388736.0f;
}

// The block weight types (Q4_0 .. MXFP4): their decoder.
#include "blockq.cuh"

// kvq_w returns weight (r, c) as float, exactly.
template <int DT>
static __device__ __forceinline__ float kvq_w(const void* w, const unsigned short* sc, int ld, int r, int c) {
	long long i = (long long)r * ld + c;
	if (DT == KVQ_F32) return ((const float*)w)[i];
	if (DT == KVQ_F16) return kvq_f16_f32(((const unsigned short*)w)[i]);
	if (DT == KVQ_BF16) return kvq_bf16_f32(((const unsigned short*)w)[i]);
	if (DT >= KVQ_Q40) return kvq_blk_w<DT>(w, ld, r, c);
	float d = kvq_f16_f32(sc[(long long)r * (ld / 32) + c / 32]);
	return d * (float)((const signed char*)w)[i];
}

// ---------------------------------------------------------------------
// Reference matrix product: one thread per output, a plain sequential
// fp32 sum. Grid (ceil(rows/128), nt), block 128. The tests' oracle for
// the fast paths on the device.

template <int DT>
static __device__ void kvq_matmul_ref(float* dst, const float* x, const void* w, const unsigned short* sc,
                                      int rows, int cols, int ld) {
	int r = blockIdx.x * blockDim.x + threadIdx.x;
	int t = blockIdx.y;
	if (r >= rows) return;
	const float* xt = x + (long long)t * cols;
	float acc = 0;
	for (int c = 0; c < cols; c++) acc += xt[c] * kvq_w<DT>(w, sc, ld, r, c);
	dst[(long long)t * rows + r] = acc;
}

#define KVQ_MATMUL_REF(name, DT)                                                                            \
	KVQ_KERNEL void name(float* dst, const float* x, const void* w, const unsigned short* sc, int rows, \
	                     int cols, int ld) {                                                               \
		kvq_matmul_ref<DT>(dst, x, w, sc, rows, cols, ld);                                                 \
	}                                                                                                      \
	KVQ_REGISTER(name)
KVQ_MATMUL_REF(kvq_matmul_ref_f32, KVQ_F32)
KVQ_MATMUL_REF(kvq_matmul_ref_f16, KVQ_F16)
KVQ_MATMUL_REF(kvq_matmul_ref_bf16, KVQ_BF16)
KVQ_MATMUL_REF(kvq_matmul_ref_q80, KVQ_Q80)

// ---------------------------------------------------------------------
// GEMV: dst[t·rows + r] = Σ_c x[t·cols + c]·W[r][c] for NT ≤ 8 activation
// rows at once (the decode step and small batches), memory-bound on the
// weights.
//
// Design. Each block of 256 threads owns KVQ_GEMV_R = 4 consecutive weight
// rows and all NT activation rows. Its threads split every row into
// 16-byte chunks (8 F16/BF16 values, 16 Q8_0 codes, 4 F32 values); thread
// i takes chunks i, i+256, ..., so every warp load is 512 contiguous bytes
// of one row (fully coalesced), and each iteration issues 4 independent
// 16-byte weight loads, one per row. The weights are read exactly once;
// the activations (NT·cols floats, at most 8·14336·4 = 458 KB) are read
// once per block through L1/L2 and reused across the block's 4 rows: per
// 16 weight bytes a thread reads 8·NT (F16, BF16), 16·NT (Q8_0) or 4·NT
// (F32) activation bytes, so at NT = 8 L1 serves 4-8 times the HBM's
// share of an SM (about 18 bytes per clock), within its 128 bytes per
// clock except at the edge for Q8_0.
//
// Bandwidth. The H200 streams 4.8 TB/s at a loaded latency of roughly
// 0.6-0.8 µs, so by Little's law about 3-4 MB must be in flight, 25-30
// KB per SM over 132 SMs. One block has 256·4·16 = 16 KB of weight loads
// in flight per iteration (nvcc also issues the next iteration's loads
// before the current one's arithmetic); KVQ_GEMV_MINB sets the register
// budget so that 3-4 blocks fit per SM at NT = 1 (48 registers for F16
// and BF16: 4 blocks, 64 KB in flight; Q8_0: 3 blocks, 48 KB), 2 for
// larger NT (32 KB). A 4096-row matrix gives 1024 blocks, several waves
// over 132 SMs, so the tail wave costs little; smaller matrices (1024
// rows: 256 blocks) still put two blocks on most SMs.
//
// Accumulation is fp32 per thread (one partial sum per row and
// activation row), then a warp shuffle tree and an 8-way sum over the
// block's warps in shared memory. Q8_0 codes are converted with
// kvq_i8_f32, summed against the activations 8 at a time and scaled once
// per 8. Columns past the last whole chunk (cols not a multiple of 8,
// F16/BF16, or 4, F32) are done one by one; xvec = 0 (activation rows not
// 16-byte aligned: cols % 4 != 0) loads the activations one float at a
// time.
// Grid ceil(rows/4), block 256.

#define KVQ_GEMV_THREADS 256
#define KVQ_GEMV_R 4
// KVQ_GEMV_MINB is the resident blocks per SM the register budget must
// allow: for the decode step (NT = 1) 4 (64 KB of loads in flight per
// SM), or 3 for Q8_0 (48 KB; its 16 codes per chunk do not fit 64
// registers, and at 80 nvcc 11.8 spills a few values to L1-resident local
// memory: whether that beats 2 blocks without spills is for the device
// benchmark to tell); 2 for small batches (their NT·4 accumulators need
// the registers; Q8_0 at NT = 7-8 spills up to 104 bytes).
#define KVQ_GEMV_MINB(DT, NT) ((NT) == 1 ? ((DT) == KVQ_Q80 ? 3 : 4) : 2)

// kvq_gemv_x loads n consecutive activations (n a multiple of 4).
static __device__ __forceinline__ void kvq_gemv_x(float* v, const float* p, int n, int xvec) {
	if (xvec) {
		KVQ_UNROLL for (int j = 0; j < n; j += 4) {
			float4 f = *(const float4*)(p + j);
			v[j] = f.x, v[j + 1] = f.y, v[j + 2] = f.z, v[j + 3] = f.w;
		}
	} else {
		KVQ_UNROLL for (int j = 0; j < n; j++) v[j] = p[j];
	}
}

// kvq_gemv_dot returns Σ_j x[j]·w_j over 16 bytes u[0..3] of weights of
// dtype DT (4 F32, 8 F16 or BF16 values), or, for Q8_0, over the 8 codes
// of u[0..1] (without the scale).
template <int DT>
static __device__ __forceinline__ float kvq_gemv_dot(const unsigned* u, const float* x) {
	float s = 0;
	if (DT == KVQ_F32) {
		KVQ_UNROLL for (int j = 0; j < 4; j++) s += x[j] * kvq_bits_f32(u[j]);
	} else if (DT == KVQ_F16) {
		KVQ_UNROLL for (int j = 0; j < 4; j++) {
			s += x[2 * j] * kvq_f16_f32((unsigned short)(u[j] & 0xffffu));
			s += x[2 * j + 1] * kvq_f16_f32((unsigned short)(u[j] >> 16));
		}
	} else if (DT == KVQ_BF16) {
		KVQ_UNROLL for (int j = 0; j < 4; j++) {
			s += x[2 * j] * kvq_bits_f32(u[j] << 16);
			s += x[2 * j + 1] * kvq_bits_f32(u[j] & 0xffff0000u);
		}
	} else {
		KVQ_UNROLL for (int j = 0; j < 2; j++)
			KVQ_UNROLL for (int k = 0; k < 4; k++) s += x[4 * j + k] * kvq_i8_f32(u[j], k);
	}
	return s;
}

template <int DT, int NT>
static __device__ void kvq_gemv(float* dst, const float* x, const void* w, const unsigned short* sc, int rows,
                                int cols, int ld, int xvec) {
	// Values per 16-byte chunk and bytes per value.
	const int per = DT == KVQ_F32 ? 4 : DT == KVQ_Q80 ? 16 : 8;
	const int vb = DT == KVQ_F32 ? 4 : DT == KVQ_Q80 ? 1 : 2;
	const int sub = DT == KVQ_Q80 ? 2 : 1, px = per / sub;
	const int R = KVQ_GEMV_R;
	__shared__ float red[KVQ_GEMV_THREADS / 32][R * NT];

	int r0 = blockIdx.x * R;
	int tid = threadIdx.x;
	float acc[R][NT];
	KVQ_UNROLL for (int i = 0; i < R; i++)
		KVQ_UNROLL for (int t = 0; t < NT; t++) acc[i][t] = 0;

	const char* wr = (const char*)w + (long long)r0 * ld * vb;  // row r0
	long long rb = (long long)ld * vb;                          // bytes per row
	bool live[R];
	KVQ_UNROLL for (int i = 0; i < R; i++) live[i] = r0 + i < rows;
	int chunks = cols / per;
	KVQ_NO_UNROLL for (int ch = tid; ch < chunks; ch += KVQ_GEMV_THREADS) {
		uint4 q[R];
		KVQ_UNROLL for (int i = 0; i < R; i++) {
			q[i] = make_uint4(0, 0, 0, 0);
			if (live[i]) q[i] = *(const uint4*)(wr + i * rb + (long long)ch * 16);
		}
		float d[R];
		if (DT == KVQ_Q80) {
			KVQ_UNROLL for (int i = 0; i < R; i++)
				d[i] = live[i] ? kvq_f16_f32(sc[(long long)(r0 + i) * (cols / 32) + ch / 2]) : 0.0f;
		}
		// A chunk is sub pieces of px values (Q8_0: two of 8 codes, each
		// scaled once), so that at most 8 activations per row are live.
		KVQ_UNROLL for (int h = 0; h < sub; h++) {
			KVQ_UNROLL for (int t = 0; t < NT; t++) {
				float xv[px];
				kvq_gemv_x(xv, x + (long long)t * cols + (long long)ch * per + h * px, px, xvec);
				KVQ_UNROLL for (int i = 0; i < R; i++) {
					unsigned u[4] = {q[i].x, q[i].y, q[i].z, q[i].w};
					float s = kvq_gemv_dot<DT>(u + 2 * h, xv);
					if (DT == KVQ_Q80)
						acc[i][t] += d[i] * s;
					else
						acc[i][t] += s;
				}
			}
		}
	}
	// The columns after the last whole chunk (never for Q8_0).
	int c = chunks * per + tid;
	if (DT != KVQ_Q80 && c < cols) {
		KVQ_UNROLL for (int i = 0; i < R; i++) {
			if (!live[i]) continue;
			float wv = kvq_w<DT>(w, sc, ld, r0 + i, c);
			KVQ_UNROLL for (int t = 0; t < NT; t++) acc[i][t] += x[(long long)t * cols + c] * wv;
		}
	}

	int lane = tid & 31, warp = tid >> 5;
	KVQ_UNROLL for (int i = 0; i < R; i++)
		KVQ_UNROLL for (int t = 0; t < NT; t++) {
			float s = kvq_warp_sum(acc[i][t]);
			if (lane == 0) red[warp][i * NT + t] = s;
		}
	__syncthreads();
	if (tid < R * NT) {
		int i = tid / NT, t = tid % NT;
		float s = 0;
		for (int k = 0; k < KVQ_GEMV_THREADS / 32; k++) s += red[k][tid];
		if (r0 + i < rows) dst[(long long)t * rows + r0 + i] = s;
	}
}

#define KVQ_GEMV(name, DT, NT)                                                                        \
	KVQ_KERNEL void KVQ_BOUNDS(KVQ_GEMV_THREADS, KVQ_GEMV_MINB(DT, NT))                                                    \
	    name(float* dst, const float* x, const void* w, const unsigned short* sc, int rows, int cols, \
	         int ld, int xvec) {                                                                     \
		kvq_gemv<DT, NT>(dst, x, w, sc, rows, cols, ld, xvec);                                       \
	}                                                                                                \
	KVQ_REGISTER(name)
#define KVQ_GEMV_ALL(dt, DT)            \
	KVQ_GEMV(kvq_gemv_##dt##_1, DT, 1) \
	KVQ_GEMV(kvq_gemv_##dt##_2, DT, 2) \
	KVQ_GEMV(kvq_gemv_##dt##_3, DT, 3) \
	KVQ_GEMV(kvq_gemv_##dt##_4, DT, 4) \
	KVQ_GEMV(kvq_gemv_##dt##_5, DT, 5) \
	KVQ_GEMV(kvq_gemv_##dt##_6, DT, 6) \
	KVQ_GEMV(kvq_gemv_##dt##_7, DT, 7) \
	KVQ_GEMV(kvq_gemv_##dt##_8, DT, 8)
KVQ_GEMV_ALL(f32, KVQ_F32)
KVQ_GEMV_ALL(f16, KVQ_F16)
KVQ_GEMV_ALL(bf16, KVQ_BF16)
KVQ_GEMV_ALL(q80, KVQ_Q80)

// ---------------------------------------------------------------------
// Embedding: row t of dst = row ids[t] of the weight, dequantized (the
// same float products as the CPU's, so the values agree exactly).
// Grid n_ids, block 256.

template <int DT>
static __device__ void kvq_embed(float* dst, const void* w, const unsigned short* sc, const int* ids, int cols,
                                 int ld) {
	int t = blockIdx.x, r = ids[t];
	for (int c = threadIdx.x; c < cols; c += blockDim.x)
		dst[(long long)t * cols + c] = kvq_w<DT>(w, sc, ld, r, c);
}

#define KVQ_EMBED(name, DT)                                                                                  \
	KVQ_KERNEL void name(float* dst, const void* w, const unsigned short* sc, const int* ids, int cols, int ld) { \
		kvq_embed<DT>(dst, w, sc, ids, cols, ld);                                                           \
	}                                                                                                       \
	KVQ_REGISTER(name)
KVQ_EMBED(kvq_embed_f32, KVQ_F32)
KVQ_EMBED(kvq_embed_f16, KVQ_F16)
KVQ_EMBED(kvq_embed_bf16, KVQ_BF16)
KVQ_EMBED(kvq_embed_q80, KVQ_Q80)

// ---------------------------------------------------------------------
// RMSNorm: row t of dst = x_t · inv ⊙ w, inv = 1/sqrt(Σx²/d + eps). One
// block of 256 threads per row: strided fp32 partial sums of squares, a
// warp shuffle tree, then a tree over the 8 warps' sums in shared memory.
// inv is computed in double from the fp32 sum and rounded to float, as
// the CPU does, and the products are x·inv then ·w (the CPU's order).
// dst may be x: every thread writes only the values it read itself, after
// the sum (which the barrier orders before any write).
// Grid rows, block 256.

KVQ_KERNEL void kvq_rmsnorm(float* dst, const float* x, const float* w, int d, float eps) {
	__shared__ float part[32];
	const float* xr = x + (long long)blockIdx.x * d;
	float* dr = dst + (long long)blockIdx.x * d;
	float ss = 0;
	for (int i = threadIdx.x; i < d; i += blockDim.x) ss += xr[i] * xr[i];
	ss = kvq_warp_sum(ss);
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
	if (lane == 0) part[warp] = ss;
	__syncthreads();
	if (warp == 0) {
		ss = lane < warps ? part[lane] : 0.0f;
		ss = kvq_warp_sum(ss);
		if (lane == 0) part[0] = ss;
	}
	__syncthreads();
	float inv = (float)(1.0 / sqrt((double)part[0] / d + (double)eps));
	for (int i = threadIdx.x; i < d; i += blockDim.x) {
		float v = xr[i] * inv;
		dr[i] = v * w[i];
	}
}
KVQ_REGISTER(kvq_rmsnorm)

// ---------------------------------------------------------------------
// Element-wise ops over n values, grid-stride loops. Grid ≤ 4096 blocks of
// 256.

// x[i] += b[i % d] over n = rows·d values.
KVQ_KERNEL void kvq_add_bias(float* x, const float* b, long long n, int d) {
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
		x[i] += b[i % d];
}
KVQ_REGISTER(kvq_add_bias)

// dst[i] += src[i].
KVQ_KERNEL void kvq_add(float* dst, const float* src, long long n) {
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
		dst[i] += src[i];
}
KVQ_REGISTER(kvq_add)

// gate[i] = silu(gate[i])·up[i] = g/(1+e^-g)·u, with e^-g computed in
// double and rounded to float, as the CPU does.
KVQ_KERNEL void kvq_swiglu(float* gate, const float* up, long long n) {
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (long long)gridDim.x * blockDim.x) {
		float g = gate[i];
		float e = (float)exp(-(double)g);
		gate[i] = g / (1.0f + e) * up[i];
	}
}
KVQ_REGISTER(kvq_swiglu)

// kvq_swiglu_oai: GPT-OSS's clamped SwiGLU, gate[i] = g'·sigmoid(alpha·g')·(u'+1)
// with g' = min(g, limit), u' = clamp(u, −limit, limit), as the CPU backend's
// ClampedSwiGLU (the exponential in double, rounded).
KVQ_KERNEL void kvq_swiglu_oai(float* gate, const float* up, long long n, float alpha, float limit) {
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (long long)gridDim.x * blockDim.x) {
		float g = fminf(gate[i], limit);
		float u = fminf(fmaxf(up[i], -limit), limit);
		float e = (float)exp(-(double)(alpha * g));
		gate[i] = g / (1.0f + e) * (u + 1.0f);
	}
}
KVQ_REGISTER(kvq_swiglu_oai)

// ---------------------------------------------------------------------
// Gather: row i of dst = row rows[i] of src (width values). Grid n_rows,
// block 256.
KVQ_KERNEL void kvq_gather(float* dst, const float* src, const int* rows, int width) {
	const float* s = src + (long long)rows[blockIdx.x] * width;
	float* d = dst + (long long)blockIdx.x * width;
	for (int j = threadIdx.x; j < width; j += blockDim.x) d[j] = s[j];
}
KVQ_REGISTER(kvq_gather)

// ---------------------------------------------------------------------
// RoPE.

// kvq_rope_angles: dst row t = [cos | sin] of pos[t]·freq[k], k < half,
// the product and the sine and cosine in double, rounded to float (as the
// CPU's math.Sincos; the two agree except where a double result lies
// within an ulp or two of a float rounding boundary). Grid
// (ceil(half/128), n_pos), block 128.
KVQ_KERNEL void kvq_rope_angles(float* dst, const int* pos, const double* freq, int half) {
	int k = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
	if (k >= half) return;
	double a = (double)pos[t] * freq[k];
	float* row = dst + (long long)t * 2 * half;
	row[k] = (float)cos(a);
	row[half + k] = (float)sin(a);
}
KVQ_REGISTER(kvq_rope_angles)

// kvq_mul_rn is a float product that the compiler may not fuse into a
// following add (the CPU rounds each product of RoPE separately).
static __device__ __forceinline__ float kvq_mul_rn(float a, float b) {
#if defined(__CUDACC__)
	return __fmul_rn(a, b);
#else
	return a * b;
#endif
}

// kvq_rope rotates the first rot dims of each of heads vectors of dim
// values in each of nt rows of x, pair k (k < rot/2) being (k, k+rot/2)
// with neox, else (2k, 2k+1), by row t of angles ([cos | sin], rot
// values). One thread per (row, head, pair): grid (ceil(heads·rot/2 /
// 128), nt), block 128.
KVQ_KERNEL void kvq_rope(float* x, const float* angles, int heads, int dim, int rot, int neox) {
	int half = rot / 2;
	int j = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
	if (j >= heads * half) return;
	int h = j / half, k = j % half;
	float* v = x + ((long long)t * heads + h) * dim;
	float c = angles[(long long)t * rot + k], s = angles[(long long)t * rot + half + k];
	int ia = neox ? k : 2 * k, ib = neox ? k + half : 2 * k + 1;
	float a = v[ia], b = v[ib];
	v[ia] = kvq_mul_rn(a, c) - kvq_mul_rn(b, s);
	v[ib] = kvq_mul_rn(a, s) + kvq_mul_rn(b, c);
}
KVQ_REGISTER(kvq_rope)

// ---------------------------------------------------------------------
// Bandwidth probes (Backend.MeasureBandwidth). kvq_bw_read reads n16
// 16-byte words, 4 independent loads per thread per iteration
// (grid-stride), and writes one XOR per block to out so that the loads
// cannot be dropped; kvq_bw_copy copies n16 words. Grid a few blocks per
// SM, block 256.

KVQ_KERNEL void kvq_bw_read(unsigned* out, const uint4* src, long long n16) {
	__shared__ unsigned part[32];
	long long stride = (long long)gridDim.x * blockDim.x;
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	unsigned acc = 0;
	for (; i + 3 * stride < n16; i += 4 * stride) {
		uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
		acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
	}
	for (; i < n16; i += stride) {
		uint4 a = src[i];
		acc ^= a.x ^ a.y ^ a.z ^ a.w;
	}
	for (int o = 16; o > 0; o >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	if (lane == 0) part[warp] = acc;
	__syncthreads();
	if (threadIdx.x == 0) {
		for (int k = 1; k < (int)(blockDim.x >> 5); k++) acc ^= part[k];
		out[blockIdx.x] = acc;
	}
}
KVQ_REGISTER(kvq_bw_read)

KVQ_KERNEL void kvq_bw_copy(uint4* dst, const uint4* src, long long n16) {
	long long stride = (long long)gridDim.x * blockDim.x;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += stride) dst[i] = src[i];
}
KVQ_REGISTER(kvq_bw_copy)
