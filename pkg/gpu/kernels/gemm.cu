// gemm.cu: the prefill matrix products, dst[t·rows + r] = Σ_c x[t·cols +
// c]·W[r][c] for many activation rows t (nt above the GEMV's 8):
//   - kvq_gemm_{f16,q80,bf16}_{64,128}: tensor cores (mma.sync m16n8k16,
//     fp32 accumulators) over tiles staged in shared memory;
//   - kvq_sgemm_f32: a plain tiled fp32 GEMM for F32 weights, which stay
//     exact (small models).
//   - kvq_gemm_<block type>_{64,128} (instantiated in blockq.cu): the
//     same tensor-core GEMM for ggml's block types, each thread decoding
//     its 16 weights of a step from the packed blocks (kvq_blk_val8, exact)
//     and rounding them to fp16 into the shared-memory tile, as Q8_0's
//     codes are: the weights stay packed in device memory.
// Weight layouts: see dense.cu.
#pragma once
#include "common.cuh"
#include "dense.cu"

// ---------------------------------------------------------------------
// Tensor-core GEMM.
//
// In the mma's terms M is the activation rows (tokens), N the weight rows,
// K the columns: A = x (M × K, row-major, "row"), B[k][n] = W[n][k] (K × N
// with K contiguous per n, "col"), D[m][n] = dst[m·rows + n].
//
// A block of 256 threads (8 warps, 2 along M × 4 along N) computes a BM ×
// 128 tile of D (BM = 128, or 64 for short batches), each warp a BM/2 × 32
// sub-tile: BM/32 m16 tiles × 4 n8 tiles, 4·BM/32·4 fp32 accumulators per
// thread. K advances 32 columns per step (two k16 mma steps; one Q8_0
// block). Per step every thread
//   - loads the next step's A slice (BM × 32 floats: BM/32 float4) and B
//     slice (128 × 32: two 16-byte chunks of 8 F16/BF16 values, or one of
//     16 Q8_0 codes plus the row's scale) into registers,
//   - runs the mma on the current shared-memory buffers,
//   - converts the registers (A to fp16, or bf16 for BF16 weights, round to
//     nearest; Q8_0 codes to fp16 as scale·code rounded to nearest) and
//     stores them into the other buffer; one barrier per step.
// Shared memory: 2 buffers × (BM + 128) rows × 40 halves (32 + 8 of
// padding: a row is 20 banks, so the 8 rows × 4 words of a fragment load
// hit 32 distinct banks, and rows stay 16-byte aligned) = 40 KB at BM =
// 128, under the 48 KB of static shared memory.
//
// Tails: activation rows past nt and weight rows past rows are loaded as
// zeros and not stored; columns past cols are zeros: for A by predicated
// loads (one float at a time when cols % 4 != 0: xvec = 0), for B by the
// upload's zero padding up to ld (a multiple of 8) and a predicate per
// 8-value chunk beyond ld. Grid (ceil(rows/128), ceil(nt/BM)).
//
// Rounding: the products are exact and summed in fp32, so the only
// errors beyond fp32 summation are the rounding of each activation to
// fp16 (relative 2^-11) or bf16 (2^-8), and, for Q8_0, of each dequantized
// weight to fp16 (2^-11): |error| ≤ (2^-11 or 2^-8, plus 2^-11 for Q8_0)
// · Σ|x·w| + fp32 summation.

#define KVQ_GEMM_THREADS 256
#define KVQ_GEMM_BN 128
#define KVQ_GEMM_BK 32
#define KVQ_GEMM_LDS 40  // halves per shared-memory row

// kvq_cvt2 packs two floats as fp16 (BF = false) or bf16 (BF = true)
// rounded to nearest, lo in the low half.
template <bool BF>
static __device__ __forceinline__ unsigned kvq_cvt2(float lo, float hi) {
	if (BF) return kvq_pack_bf2(__float2bfloat16_rn(lo), __float2bfloat16_rn(hi));
	return kvq_pack_h2(__float2half_rn(lo), __float2half_rn(hi));
}

template <int DT, int BM>
static __device__ void kvq_gemm(float* dst, const float* x, const void* w, const unsigned short* sc, int nt,
                                int rows, int cols, int ld, int xvec) {
	const bool BF = DT == KVQ_BF16;
	const int MT = BM / 32;  // m16 tiles per warp
	const int AV = BM / 32;  // float4 of A per thread per step
	const int BV = DT == KVQ_Q80 ? 1 : 2;  // 16-byte B chunks per thread per step
	__shared__ __align__(16) unsigned short As[2][BM][KVQ_GEMM_LDS];
	__shared__ __align__(16) unsigned short Bs[2][KVQ_GEMM_BN][KVQ_GEMM_LDS];

	int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	int g = lane >> 2, q = lane & 3;
	int wm = warp >> 2, wn = warp & 3;  // warp position: 2 along M, 4 along N
	int n0 = blockIdx.x * KVQ_GEMM_BN, m0 = blockIdx.y * BM;

	float acc[MT][4][4];
	KVQ_UNROLL for (int i = 0; i < MT; i++)
		KVQ_UNROLL for (int j = 0; j < 4; j++)
			KVQ_UNROLL for (int k = 0; k < 4; k++) acc[i][j][k] = 0;

	// Staging registers for one step.
	float4 ar[AV];
	uint4 br[BV];
	float bs = 0;  // Q8_0: the scale of this thread's B chunk

	// The loads of step k0 into the staging registers.
	auto load = [&](int k0) {
		KVQ_UNROLL for (int v = 0; v < AV; v++) {
			int idx = tid + v * KVQ_GEMM_THREADS;
			int m = m0 + idx / 8, c = k0 + (idx % 8) * 4;
			float4 f = make_float4(0, 0, 0, 0);
			if (m < nt) {
				const float* p = x + (long long)m * cols + c;
				if (xvec) {
					if (c < cols) f = *(const float4*)p;
				} else {
					if (c < cols) f.x = p[0];
					if (c + 1 < cols) f.y = p[1];
					if (c + 2 < cols) f.z = p[2];
					if (c + 3 < cols) f.w = p[3];
				}
			}
			ar[v] = f;
		}
		if (DT == KVQ_Q80) {
			int n = n0 + tid / 2, c = k0 + (tid % 2) * 16;
			br[0] = make_uint4(0, 0, 0, 0);
			bs = 0;
			if (n < rows) {
				br[0] = *(const uint4*)((const signed char*)w + (long long)n * ld + c);
				bs = kvq_f16_f32(sc[(long long)n * (ld / 32) + k0 / 32]);
			}
		} else if (DT >= KVQ_Q40) {
			// Block types: the 16 values decoded exactly, rounded to fp16.
			int n = n0 + tid / 2, c = k0 + (tid % 2) * 16;
			br[0] = br[1] = make_uint4(0, 0, 0, 0);
			if (n < rows) {
				const int QK = kvq_blk_qk(DT);
				const unsigned char* blk =
				    (const unsigned char*)w + (long long)n * ld + (long long)(c / QK) * kvq_blk_bytes(DT);
				float v[16];
				kvq_blk_val8<DT>(blk, c % QK, v);
				kvq_blk_val8<DT>(blk, c % QK + 8, v + 8);
				unsigned h[8];
				KVQ_UNROLL for (int j = 0; j < 8; j++) h[j] = kvq_cvt2<false>(v[2 * j], v[2 * j + 1]);
				br[0] = make_uint4(h[0], h[1], h[2], h[3]);
				br[1] = make_uint4(h[4], h[5], h[6], h[7]);
			}
		} else {
			KVQ_UNROLL for (int v = 0; v < BV; v++) {
				int idx = tid + v * KVQ_GEMM_THREADS;
				int n = n0 + idx / 4, c = k0 + (idx % 4) * 8;
				br[v] = make_uint4(0, 0, 0, 0);
				if (n < rows && c < ld) br[v] = *(const uint4*)((const unsigned short*)w + (long long)n * ld + c);
			}
		}
	};
	// The staging registers, converted, into buffer b.
	auto store = [&](int b) {
		KVQ_UNROLL for (int v = 0; v < AV; v++) {
			int idx = tid + v * KVQ_GEMM_THREADS;
			unsigned* p = (unsigned*)&As[b][idx / 8][(idx % 8) * 4];
			p[0] = kvq_cvt2<BF>(ar[v].x, ar[v].y);
			p[1] = kvq_cvt2<BF>(ar[v].z, ar[v].w);
		}
		if (DT == KVQ_Q80) {
			unsigned u[4] = {br[0].x, br[0].y, br[0].z, br[0].w}, h[8];
			KVQ_UNROLL for (int j = 0; j < 4; j++) {
				h[2 * j] = kvq_cvt2<false>(bs * kvq_i8_f32(u[j], 0), bs * kvq_i8_f32(u[j], 1));
				h[2 * j + 1] = kvq_cvt2<false>(bs * kvq_i8_f32(u[j], 2), bs * kvq_i8_f32(u[j], 3));
			}
			uint4* p = (uint4*)&Bs[b][tid / 2][(tid % 2) * 16];
			p[0] = make_uint4(h[0], h[1], h[2], h[3]);
			p[1] = make_uint4(h[4], h[5], h[6], h[7]);
		} else if (DT >= KVQ_Q40) {
			uint4* p = (uint4*)&Bs[b][tid / 2][(tid % 2) * 16];
			p[0] = br[0];
			p[1] = br[1];
		} else {
			KVQ_UNROLL for (int v = 0; v < BV; v++) {
				int idx = tid + v * KVQ_GEMM_THREADS;
				*(uint4*)&Bs[b][idx / 4][(idx % 4) * 8] = br[v];
			}
		}
	};

	int steps = (cols + KVQ_GEMM_BK - 1) / KVQ_GEMM_BK;
	load(0);
	store(0);
	__syncthreads();
	for (int s = 0; s < steps; s++) {
		int cur = s & 1;
		if (s + 1 < steps) load((s + 1) * KVQ_GEMM_BK);
		KVQ_UNROLL for (int kk = 0; kk < KVQ_GEMM_BK; kk += 16) {
			unsigned a[MT][4], bf[4][2];
			KVQ_UNROLL for (int i = 0; i < MT; i++) {
				int m = wm * (BM / 2) + i * 16 + g;
				a[i][0] = *(const unsigned*)&As[cur][m][kk + 2 * q];
				a[i][1] = *(const unsigned*)&As[cur][m + 8][kk + 2 * q];
				a[i][2] = *(const unsigned*)&As[cur][m][kk + 2 * q + 8];
				a[i][3] = *(const unsigned*)&As[cur][m + 8][kk + 2 * q + 8];
			}
			KVQ_UNROLL for (int j = 0; j < 4; j++) {
				int n = wn * 32 + j * 8 + g;
				bf[j][0] = *(const unsigned*)&Bs[cur][n][kk + 2 * q];
				bf[j][1] = *(const unsigned*)&Bs[cur][n][kk + 2 * q + 8];
			}
			KVQ_UNROLL for (int i = 0; i < MT; i++)
				KVQ_UNROLL for (int j = 0; j < 4; j++) {
					if (BF)
						kvq_mma_bf16_16816(acc[i][j], a[i], bf[j]);
					else
						kvq_mma_f16_16816(acc[i][j], a[i], bf[j]);
				}
		}
		if (s + 1 < steps) store(cur ^ 1);
		__syncthreads();
	}

	// d[0..1] = D[g][2q..2q+1], d[2..3] = D[g+8][2q..2q+1].
	KVQ_UNROLL for (int i = 0; i < MT; i++)
		KVQ_UNROLL for (int j = 0; j < 4; j++) {
			int m = m0 + wm * (BM / 2) + i * 16 + g;
			int n = n0 + wn * 32 + j * 8 + 2 * q;
			KVQ_UNROLL for (int h = 0; h < 2; h++) {
				int mm = m + 8 * h;
				if (mm >= nt) continue;
				float* out = dst + (long long)mm * rows;
				if (n < rows) out[n] = acc[i][j][2 * h];
				if (n + 1 < rows) out[n + 1] = acc[i][j][2 * h + 1];
			}
		}
}

#define KVQ_GEMM(name, DT, BM)                                                                          \
	KVQ_KERNEL void KVQ_BOUNDS(KVQ_GEMM_THREADS, 2)                                                        \
	    name(float* dst, const float* x, const void* w, const unsigned short* sc, int nt, int rows,     \
	         int cols, int ld, int xvec) {                                                             \
		kvq_gemm<DT, BM>(dst, x, w, sc, nt, rows, cols, ld, xvec);                                     \
	}                                                                                                  \
	KVQ_REGISTER(name)
KVQ_GEMM(kvq_gemm_f16_64, KVQ_F16, 64)
KVQ_GEMM(kvq_gemm_f16_128, KVQ_F16, 128)
KVQ_GEMM(kvq_gemm_bf16_64, KVQ_BF16, 64)
KVQ_GEMM(kvq_gemm_bf16_128, KVQ_BF16, 128)
KVQ_GEMM(kvq_gemm_q80_64, KVQ_Q80, 64)
KVQ_GEMM(kvq_gemm_q80_128, KVQ_Q80, 128)

// ---------------------------------------------------------------------
// kvq_sgemm_f32: the same product for F32 weights in fp32 (no tensor
// cores: exact inputs, fp32 fused multiply-adds). A block of 256 threads
// computes a 64 × 64 tile of D (tokens × weight rows), each thread 4 × 4
// outputs strided by 16 (so that its stores and shared-memory reads are
// conflict-free and coalesced), over K steps of 16 staged in shared memory
// k-major. Grid (ceil(rows/64), ceil(nt/64)), block 256.

#define KVQ_SGEMM_T 64
#define KVQ_SGEMM_K 16

KVQ_KERNEL void KVQ_BOUNDS(256, 2)
    kvq_sgemm_f32(float* dst, const float* x, const float* w, int nt, int rows, int cols, int ld) {
	__shared__ float As[KVQ_SGEMM_K][KVQ_SGEMM_T + 1];
	__shared__ float Bs[KVQ_SGEMM_K][KVQ_SGEMM_T + 1];
	int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
	int n0 = blockIdx.x * KVQ_SGEMM_T, m0 = blockIdx.y * KVQ_SGEMM_T;
	float acc[4][4];
	KVQ_UNROLL for (int i = 0; i < 4; i++)
		KVQ_UNROLL for (int j = 0; j < 4; j++) acc[i][j] = 0;
	for (int k0 = 0; k0 < cols; k0 += KVQ_SGEMM_K) {
		// 64 rows × 16 columns of each operand: 4 values per thread, read
		// along the columns (coalesced 64-byte runs).
		KVQ_UNROLL for (int v = 0; v < 4; v++) {
			int idx = tid + v * 256, r = idx / KVQ_SGEMM_K, k = idx % KVQ_SGEMM_K, c = k0 + k;
			int m = m0 + r, n = n0 + r;
			As[k][r] = m < nt && c < cols ? x[(long long)m * cols + c] : 0.0f;
			Bs[k][r] = n < rows && c < cols ? w[(long long)n * ld + c] : 0.0f;
		}
		__syncthreads();
		KVQ_UNROLL for (int k = 0; k < KVQ_SGEMM_K; k++) {
			float a[4], b[4];
			KVQ_UNROLL for (int i = 0; i < 4; i++) a[i] = As[k][ty + 16 * i];
			KVQ_UNROLL for (int j = 0; j < 4; j++) b[j] = Bs[k][tx + 16 * j];
			KVQ_UNROLL for (int i = 0; i < 4; i++)
				KVQ_UNROLL for (int j = 0; j < 4; j++) acc[i][j] += a[i] * b[j];
		}
		__syncthreads();
	}
	KVQ_UNROLL for (int i = 0; i < 4; i++) {
		int m = m0 + ty + 16 * i;
		if (m >= nt) continue;
		KVQ_UNROLL for (int j = 0; j < 4; j++) {
			int n = n0 + tx + 16 * j;
			if (n < rows) dst[(long long)m * rows + n] = acc[i][j];
		}
	}
}
KVQ_REGISTER(kvq_sgemm_f32)
