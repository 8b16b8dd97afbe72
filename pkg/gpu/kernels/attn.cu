// attn.cu: attention over the paged KV cache (attention.go launches
// these).
//
// Every kernel reads a step's metadata (kv.go, planMeta): the sequence
// table, KVQ_SEQ_INTS ints per sequence —
//   [0] row: the first activation row of its N new tokens
//   [1] n:   the tokens of this step
//   [2] pos: the position of the first of them
//   [3] exact: positions ≥ pos are read from the step's k and v rows
//   [4] tab: the offset of its block table in the tables
//   [5] win: its fp16 window slot (-1 without windows)
// — and per side a block table (the block of positions [i·bt, (i+1)·bt)
// at tab+i) or the plan's runs themselves (the reference kernel). q, k, v
// and dst are float32 rows: q and dst heads·dim values per token, k and v
// kvHeads·dim. Query head qh reads KV head qh/(heads/kvHeads). A token at
// position p attends to [from(p), p], from(p) = max(0, p+1-window) with a
// window, else 0. Every kernel takes softcap last: > 0 caps each score
// (softcap·tanh(scale·q·k/softcap), Gemma 2) before the mask and the
// softmax (softcap.cu, kvq_cap); 0 leaves the scores as they are.
//
// Kernels:
//   kvq_attn_ref: one block (one thread) per query row, fp32, walking the
//     runs: the test oracle of the two fast kernels.
//   kvq_attn_prefill_d<D>: flash attention on CUDA cores in fp32, one block
//     per (query-row tile, KV head, sequence), for sequences with more than
//     `limit` query rows per KV head.
//   kvq_attn_decode_<f16|bf16>_d<D> + kvq_attn_merge: split-K flash
//     decoding with tensor cores for sequences with at most `limit` query
//     rows per KV head (see the comment at kvq_attn_decode).
//   kvq_attn_qdecode_d<D> + kvq_attn_merge: the same on CUDA cores in
//     fp32 for quantized caches, dequantizing the packed tiles as it reads
//     them.
#pragma once
#include "common.cuh"
#include "kvwrite.cu"
#include "softcap.cu"

#define KVQ_SEQ_INTS 8
#define KVQ_LOG2E 1.4426950408889634f
#define KVQ_NEG_INF __int_as_float(0xff800000)
// The reference kernel keeps one row's accumulator in local memory.
#define KVQ_REF_MAX_DIM 256

struct kvq_seq {
	int row, n, pos, exact, tab, win;
};

static __device__ __forceinline__ kvq_seq kvq_load_seq(const int* seqs, int s) {
	const int* e = seqs + s * KVQ_SEQ_INTS;
	kvq_seq q;
	q.row = e[0];
	q.n = e[1];
	q.pos = e[2];
	q.exact = e[3];
	q.tab = e[4];
	q.win = e[5];
	return q;
}

// The fp16 windows (sink rows, residual ring; kv.go): each sequence's
// block table of a shape is preceded by KVQ_WIN_INTS ints: the number of
// its window runs, then (pos, n, row) per run — positions [pos, pos+n)
// are window rows [row, row+n) of its slot. A side's window buffer holds
// per slot and KV head wrows fp16 rows of dim values.
#define KVQ_WIN_INTS 20
#define KVQ_WIN_RUNS 6

// kvq_win_row is the window row holding position p of the sequence whose
// block table is tab, or -1.
static __device__ __forceinline__ int kvq_win_row(const int* tab, int p) {
	const int* w = tab - KVQ_WIN_INTS;
	int n = w[0];
	for (int i = 0; i < n; i++) {
		const int* r = w + 1 + 3 * i;
		if (p >= r[0] && p < r[0] + r[1]) return r[2] + p - r[0];
	}
	return -1;
}

// kvq_win_value is element d of window row `row` of slot win, KV head h.
static __device__ __forceinline__ float kvq_win_value(const unsigned short* wbuf, int win, int h, int row, int d,
                                                      int wrows, int kvHeads, int dim) {
	return kvq_f16_bits_to_f32(wbuf[(((long long)win * kvHeads + h) * wrows + row) * dim + d]);
}

// kvq_cache_value is element d of position p's row (KV head h) in the
// cache: from the sequence's window when its runs hold p (wbuf non-null:
// the side has windows), else from the block's tile.
static __device__ __forceinline__ float kvq_cache_value(const void* base, int fmt, const float* scales, const int* tab,
                                                        const unsigned short* wbuf, int wrows, const kvq_seq& sq,
                                                        int p, int h, int d, int blocks, int bt, int dim, int kvHeads) {
	if (wbuf) {
		int r = kvq_win_row(tab + sq.tab, p);
		if (r >= 0) return kvq_win_value(wbuf, sq.win, h, r, d, wrows, kvHeads, dim);
	}
	return kvq_kv_value(base, fmt, scales, h, tab[sq.tab + p / bt], p % bt, d, blocks, bt, dim);
}

static __device__ __forceinline__ int kvq_from(int p, int window) { return window > 0 ? max(0, p + 1 - window) : 0; }

// ---------------------------------------------------------------------
// Reference attention.

// kvq_attn_ref computes one query row (token blockIdx.x of sequence
// blockIdx.z, query head blockIdx.y) in the plainest way: an online
// softmax in fp32 over the positions in order, each key and value read
// through the runs (runsK[4r..4r+3] = pos, n, block, row; the runs of
// sequence s are [runIdx[s], runIdx[s+1])). Exact steps read positions ≥
// pos from kx and vx. One thread per block: slow, and only for tests.
KVQ_KERNEL void kvq_attn_ref(float* dst, const float* q, const float* kx, const float* vx, const void* kbase,
                             const void* vbase, int kfmt, int vfmt, const float* kscales, const float* vscales,
                             int blocks, int bt, const int* seqs,
                             const int* runsK, const int* runIdxK, const int* runsV, const int* runIdxV, int heads,
                             int kvHeads, int dim, int window, float scale, const unsigned short* kwin,
                             const unsigned short* vwin, int kwr, int vwr, float softcap, const float* sinks) {
	if (threadIdx.x != 0) return;
	int s = blockIdx.z, qh = blockIdx.y, i = blockIdx.x;
	kvq_seq sq = kvq_load_seq(seqs, s);
	if (i >= sq.n || dim > KVQ_REF_MAX_DIM) return;
	int nq = heads / kvHeads, h = qh / nq, kvd = kvHeads * dim;
	int p1 = sq.pos + i; // the token's position (inclusive end)
	int p0 = kvq_from(p1, window);
	int cached = sq.exact ? min(p1 + 1, sq.pos) : p1 + 1; // [p0, cached) from the cache
	const float* qr = q + (long long)(sq.row + i) * heads * dim + (long long)qh * dim;
	float acc[KVQ_REF_MAX_DIM];
	for (int d = 0; d < dim; d++) acc[d] = 0.f;
	float m = KVQ_NEG_INF, l = 0.f;
	int vr = runIdxV[s], ve = runIdxV[s + 1];
	for (int r = runIdxK[s]; r < runIdxK[s + 1]; r++) {
		const int* run = runsK + 4 * r;
		int a = max(p0, run[0]), b = min(cached, run[0] + run[1]);
		for (int p = a; p < b; p++) {
			while (vr < ve && runsV[4 * vr] + runsV[4 * vr + 1] <= p) vr++;
			if (vr >= ve) return; // runs must cover the positions
			const int* vrun = runsV + 4 * vr;
			int krow = run[3] + p - run[0], vrow = vrun[3] + p - vrun[0];
			float sc = 0.f;
			for (int d = 0; d < dim; d++)
				sc += qr[d] * (run[2] < 0 ? kvq_win_value(kwin, sq.win, h, krow, d, kwr, kvHeads, dim)
				                          : kvq_kv_value(kbase, kfmt, kscales, h, run[2], krow, d, blocks, bt, dim));
			sc = kvq_cap(sc * scale, softcap);
			float mn = fmaxf(m, sc);
			float c = expf(m - mn), w = expf(sc - mn);
			for (int d = 0; d < dim; d++)
				acc[d] = acc[d] * c + w * (vrun[2] < 0 ? kvq_win_value(vwin, sq.win, h, vrow, d, vwr, kvHeads, dim)
				                                       : kvq_kv_value(vbase, vfmt, vscales, h, vrun[2], vrow, d, blocks, bt, dim));
			l = l * c + w;
			m = mn;
		}
	}
	if (sq.exact) {
		for (int p = max(p0, sq.pos); p <= p1; p++) {
			const float* kr = kx + (long long)(sq.row + p - sq.pos) * kvd + (long long)h * dim;
			const float* vrw = vx + (long long)(sq.row + p - sq.pos) * kvd + (long long)h * dim;
			float sc = 0.f;
			for (int d = 0; d < dim; d++) sc += qr[d] * kr[d];
			sc = kvq_cap(sc * scale, softcap);
			float mn = fmaxf(m, sc);
			float c = expf(m - mn), w = expf(sc - mn);
			for (int d = 0; d < dim; d++) acc[d] = acc[d] * c + w * vrw[d];
			l = l * c + w;
			m = mn;
		}
	}
	if (sinks) { // attention sink: a logit joining the max and the normaliser, no value
		float mn = fmaxf(m, sinks[qh]), c = expf(m - mn);
		for (int d = 0; d < dim; d++) acc[d] *= c;
		l = l * c + expf(sinks[qh] - mn);
	}
	float* out = dst + (long long)(sq.row + i) * heads * dim + (long long)qh * dim;
	for (int d = 0; d < dim; d++) out[d] = acc[d] / l;
}
KVQ_REGISTER(kvq_attn_ref)

// ---------------------------------------------------------------------
// Prefill: flash attention in fp32 on CUDA cores.
//
// The query rows of one KV head are the (token, head) pairs of its nq
// query heads, row r = token·nq + j; a block takes a tile of KVQ_PF_TQ of
// them (several tokens, all sharing each K/V tile loaded to shared memory:
// GQA reads every key once per tile of rows) and walks the positions they
// see in tiles of KVQ_PF_TK, with the online softmax of flash attention.
// 128 threads: thread (ty, tx) = (tid/8, tid%8) owns rows 4ty..4ty+3, the
// scores of columns tx+8c and the output dimensions tx+8e. Tiles are
// launched longest first (blockIdx.x counts down the row tiles) so the
// causal tail is short.

#define KVQ_PF_TQ 64
#define KVQ_PF_TK 32
#define KVQ_PF_THREADS 128

// kvq_load_kv_f32 reads element d of position p's key or value row of KV
// head h: from the cache through the block table (decoded from any
// format of kvformats.cuh, exactly as pkg/quant's Decode), or, for an
// exact step's own positions, from the activations.
static __device__ __forceinline__ float kvq_load_kv_f32(const void* base, int fmt, const float* scales, const int* tab,
                                                        const unsigned short* wbuf, int wrows, const float* x,
                                                        const kvq_seq& sq, int p, int h, int d, int blocks, int bt,
                                                        int dim, int kvd) {
	if (sq.exact && p >= sq.pos) return x[(long long)(sq.row + p - sq.pos) * kvd + (long long)h * dim + d];
	return kvq_cache_value(base, fmt, scales, tab, wbuf, wrows, sq, p, h, d, blocks, bt, dim, kvd / dim);
}

template <int D>
static __device__ __forceinline__ void kvq_attn_prefill(float* dst, const float* q, const float* kx, const float* vx,
                                                        const void* kbase, const void* vbase, int kfmt, int vfmt,
                                                        const float* kscales, const float* vscales,
                                                        int blocks, int bt, const int* seqs, const int* tabK,
                                                        const int* tabV, int heads, int kvHeads, int window,
                                                        float scale, int limit, int maxTiles,
                                                        const unsigned short* kwin, const unsigned short* vwin,
                                                        int kwr, int vwr, float softcap, const float* sinks) {
	KVQ_DYN_SMEM(float, kvq_pf_smem);
	float* sm = kvq_pf_smem;
	const int LQ = D + 1, LK = D + 1, LP = KVQ_PF_TK + 1;
	float* Qs = sm;                  // [TQ][D+1]
	float* Ks = Qs + KVQ_PF_TQ * LQ; // [TK][D+1]
	float* Vs = Ks + KVQ_PF_TK * LK; // [TK][D]
	float* Ps = Vs + KVQ_PF_TK * D;  // [TQ][TK+1]

	int s = blockIdx.z, h = blockIdx.y, tile = maxTiles - 1 - (int)blockIdx.x;
	kvq_seq sq = kvq_load_seq(seqs, s);
	int nq = heads / kvHeads, rows = sq.n * nq, kvd = kvHeads * D;
	if (rows <= limit) return; // the decode kernels' sequence
	int r0 = tile * KVQ_PF_TQ;
	if (r0 >= rows) return;
	int tid = threadIdx.x, ty = tid >> 3, tx = tid & 7;

	for (int e = tid; e < KVQ_PF_TQ * D; e += KVQ_PF_THREADS) {
		int r = e / D, d = e - r * D, rr = r0 + r;
		float v = 0.f;
		if (rr < rows) {
			int tok = rr / nq, j = rr - tok * nq;
			v = q[(long long)(sq.row + tok) * heads * D + (long long)(h * nq + j) * D + d];
		}
		Qs[r * LQ + d] = v;
	}
	int lastRow = min(rows, r0 + KVQ_PF_TQ) - 1;
	int lo = kvq_from(sq.pos + r0 / nq, window), hi = sq.pos + lastRow / nq + 1;

	int from[4], to[4];
	float m[4], l[4], acc[4][D / 8];
#pragma unroll
	for (int i = 0; i < 4; i++) {
		int rr = r0 + ty * 4 + i;
		if (rr < rows) {
			to[i] = sq.pos + rr / nq;
			from[i] = kvq_from(to[i], window);
		} else {
			from[i] = 0x7fffffff;
			to[i] = -1;
		}
		m[i] = KVQ_NEG_INF;
		l[i] = 0.f;
#pragma unroll
		for (int e = 0; e < D / 8; e++) acc[i][e] = 0.f;
	}
	float sl = scale * KVQ_LOG2E, cap = softcap * KVQ_LOG2E;

	for (int p0 = lo; p0 < hi; p0 += KVQ_PF_TK) {
		__syncthreads(); // the previous tile's readers are done
		for (int e = tid; e < KVQ_PF_TK * D; e += KVQ_PF_THREADS) {
			int c = e / D, d = e - c * D, p = p0 + c;
			float kv = 0.f, vv = 0.f;
			if (p < hi) {
				kv = kvq_load_kv_f32(kbase, kfmt, kscales, tabK, kwin, kwr, kx, sq, p, h, d, blocks, bt, D, kvd);
				vv = kvq_load_kv_f32(vbase, vfmt, vscales, tabV, vwin, vwr, vx, sq, p, h, d, blocks, bt, D, kvd);
			}
			Ks[c * LK + d] = kv;
			Vs[c * D + d] = vv;
		}
		__syncthreads();
		float sc[4][4];
#pragma unroll
		for (int i = 0; i < 4; i++)
#pragma unroll
			for (int c = 0; c < 4; c++) sc[i][c] = 0.f;
		for (int d = 0; d < D; d++) {
			float qv[4], kv[4];
#pragma unroll
			for (int i = 0; i < 4; i++) qv[i] = Qs[(ty * 4 + i) * LQ + d];
#pragma unroll
			for (int c = 0; c < 4; c++) kv[c] = Ks[(tx + 8 * c) * LK + d];
#pragma unroll
			for (int i = 0; i < 4; i++)
#pragma unroll
				for (int c = 0; c < 4; c++) sc[i][c] += qv[i] * kv[c];
		}
#pragma unroll
		for (int i = 0; i < 4; i++) {
			float mx = KVQ_NEG_INF;
#pragma unroll
			for (int c = 0; c < 4; c++) {
				int p = p0 + tx + 8 * c;
				sc[i][c] = (p >= from[i] && p <= to[i] && p < hi) ? kvq_cap(sc[i][c] * sl, cap) : KVQ_NEG_INF;
				mx = fmaxf(mx, sc[i][c]);
			}
			// The row's 32 columns are spread over the 8 lanes tx.
			mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
			mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
			mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
			float mn = fmaxf(m[i], mx);
			float corr = mn == KVQ_NEG_INF ? 1.f : exp2f(m[i] - mn);
			float base = mn == KVQ_NEG_INF ? 0.f : mn;
			float sum = 0.f;
#pragma unroll
			for (int c = 0; c < 4; c++) {
				float pv = exp2f(sc[i][c] - base);
				Ps[(ty * 4 + i) * LP + tx + 8 * c] = pv;
				sum += pv;
			}
			l[i] = l[i] * corr + sum;
			m[i] = mn;
#pragma unroll
			for (int e = 0; e < D / 8; e++) acc[i][e] *= corr;
		}
		__syncthreads();
		for (int c = 0; c < KVQ_PF_TK; c++) {
			float pv[4];
#pragma unroll
			for (int i = 0; i < 4; i++) pv[i] = Ps[(ty * 4 + i) * LP + c];
#pragma unroll
			for (int e = 0; e < D / 8; e++) {
				float vv = Vs[c * D + tx + 8 * e];
#pragma unroll
				for (int i = 0; i < 4; i++) acc[i][e] += pv[i] * vv;
			}
		}
	}
#pragma unroll
	for (int i = 0; i < 4; i++) {
		float li = l[i];
		li += __shfl_xor_sync(0xffffffffu, li, 1);
		li += __shfl_xor_sync(0xffffffffu, li, 2);
		li += __shfl_xor_sync(0xffffffffu, li, 4);
		int rr = r0 + ty * 4 + i;
		if (rr >= rows) continue;
		int tok = rr / nq, j = rr - tok * nq;
		float* out = dst + (long long)(sq.row + tok) * heads * D + (long long)(h * nq + j) * D;
		float inv = 1.f / li;
		if (sinks) { // attention sink (base 2, as m): joins the max and the normaliser, no value
			float s2 = sinks[h * nq + j] * KVQ_LOG2E, mn = fmaxf(m[i], s2), c = exp2f(m[i] - mn);
			inv = c / (li * c + exp2f(s2 - mn));
		}
#pragma unroll
		for (int e = 0; e < D / 8; e++) out[tx + 8 * e] = acc[i][e] * inv;
	}
}

// The prefill kernels; dynamic shared memory
// 4·(TQ·(D+1) + TK·(D+1) + TK·D + TQ·(TK+1)) bytes (attention.go,
// prefillShared).
#define KVQ_PREFILL(D)                                                                                                 \
	KVQ_KERNEL void kvq_attn_prefill_d##D(float* dst, const float* q, const float* kx, const float* vx,                \
	                                      const void* kbase, const void* vbase, int kfmt, int vfmt,                     \
	                                      const float* kscales, const float* vscales, int blocks, int bt,               \
	                                      const int* seqs, const int* tabK, const int* tabV, int heads, int kvHeads,    \
	                                      int window, float scale, int limit, int maxTiles,                             \
	                                      const unsigned short* kwin, const unsigned short* vwin, int kwr, int vwr,     \
	                                      float softcap, const float* sinks) {                                                              \
		kvq_attn_prefill<D>(dst, q, kx, vx, kbase, vbase, kfmt, vfmt, kscales, vscales, blocks, bt, seqs, tabK,     \
		                    tabV, heads, kvHeads, window, scale, limit, maxTiles, kwin, vwin, kwr, vwr, softcap,     \
		                    sinks);                                                                     \
	}                                                                                                                  \
	KVQ_REGISTER(kvq_attn_prefill_d##D)

KVQ_PREFILL(64)
KVQ_PREFILL(96)
KVQ_PREFILL(128)
KVQ_PREFILL(256)

// ---------------------------------------------------------------------
// Decode: split-K flash decoding on tensor cores.
//
// A block takes one chunk of `chunk` positions of one sequence, for one
// KV head and a group of up to 64 of its query rows (the (token, head)
// pairs of its nq query heads: every K/V row is read once for all of
// them), and writes the chunk's partial softmax state — per row the
// maximum m and sum l of the exponentiated scores (base 2) and the
// unnormalized sum of the weighted values — to scratch; kvq_attn_merge
// combines the chunks. Grid (maxChunks, kvHeads·groups, sequences); the
// partial of row r of (sequence s, chunk c, y) is entry
// ((s·maxChunks + c)·kvHeads·groups + y)·rstride + r of part (dim
// values) and ml (m, l), rstride ≥ the rows of every group.
//
// The K/V rows of a tile of 64 positions travel to shared memory as they
// are stored (fp16 or bf16 bits), 16 bytes per thread and copy, with
// cp.async into one stage while the other is computed on (two stages).
// 4 warps: with up to 16 rows, each warp takes 16 positions of the tile
// against all rows; with 17-32, two warps per 16 rows and 32 positions
// each; up to 64, one warp per 16 rows. The scores S = Q·Kᵀ and the
// output O += P·V are m16n8k16 mma's with fp32 accumulators. To keep fp32
// accuracy with 16-bit operands, the queries are split into 2 (fp16:
// 11+11 bits) or 3 (bf16: 8+8+8 bits) 16-bit terms, each multiplied by
// the exact K tile, and the weights P into 2; the stored K and V need no
// split: they are exactly 16-bit. Each query row is first scaled by a
// power of two so that its largest value is below 2^15 (no fp16
// overflow; the factor is folded back into the score scale), and P is
// scaled by 2^14 for fp16 (subnormal terms lose nothing).
//
// Why this reaches HBM bandwidth: a decode step reads every K/V byte once
// per (chunk, KV head, group) and does about 2·nq·dim·(splits) tensor
// flops per position — tens of flops per byte, far below the tensor
// cores' rate — so the kernel is bound by the bytes in flight. The grid
// has about 4 blocks per SM (the chunk size is chosen so on the host: 512
// positions for one 32K sequence with 8 KV heads on 132 SMs) and each
// block keeps one 64-position tile (32 KiB at dim 128) in flight while it
// computes the other, which with 2 resident blocks per SM is ~64 KiB per
// SM in flight, above the ~25 KiB that 4.8 TB/s × ~700 ns latency / 132
// SMs needs.

#define KVQ_DC_TK 64
#define KVQ_DC_THREADS 128
#define KVQ_DC_ROWS 64 // query rows per group

struct alignas(16) kvq_v4 {
	unsigned x, y, z, w;
};

// 16-byte global-to-shared copy (zero fill when !valid), asynchronous on
// sm_80 and later; kvq_cp_commit/kvq_cp_wait<N> wait for all but the
// last N committed groups.
static __device__ __forceinline__ void kvq_cp16(void* smem, const void* gmem, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
	unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
	int n = valid ? 16 : 0;
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(sa), "l"(gmem), "r"(n));
#else
	kvq_v4* d = (kvq_v4*)smem;
	if (valid) {
		*d = *(const kvq_v4*)gmem;
	} else {
		d->x = d->y = d->z = d->w = 0u;
	}
#endif
}
static __device__ __forceinline__ void kvq_cp_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
	asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
static __device__ __forceinline__ void kvq_cp_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// The 16-bit operand types: rounding (RNE) and widening, the mma, the
// number of query terms and the scale of P.
template <int T>
struct kvq_lp;
template <>
struct kvq_lp<KVQ_KV_F16> {
	enum { QSPLIT = 2 };
	static __device__ __forceinline__ float pscale() { return 16384.f; }
	static __device__ __forceinline__ unsigned short rn(float x) {
#ifdef __CUDA_ARCH__
		return __half_as_ushort(__float2half_rn(x));
#else
		return kvq_f32_to_f16_bits(x);
#endif
	}
	static __device__ __forceinline__ float wide(unsigned short h) {
#ifdef __CUDA_ARCH__
		return __half2float(__ushort_as_half(h));
#else
		return kvq_f16_bits_to_f32(h);
#endif
	}
	static __device__ __forceinline__ void mma(float d[4], const unsigned a[4], const unsigned b[2]) {
		kvq_mma_f16_16816(d, a, b);
	}
};
template <>
struct kvq_lp<KVQ_KV_BF16> {
	enum { QSPLIT = 3 };
	static __device__ __forceinline__ float pscale() { return 1.f; }
	static __device__ __forceinline__ unsigned short rn(float x) {
#ifdef __CUDA_ARCH__
		return __bfloat16_as_ushort(__float2bfloat16_rn(x));
#else
		return kvq_f32_to_bf16_bits(x);
#endif
	}
	static __device__ __forceinline__ float wide(unsigned short h) { return kvq_bf16_bits_to_f32(h); }
	static __device__ __forceinline__ void mma(float d[4], const unsigned a[4], const unsigned b[2]) {
		kvq_mma_bf16_16816(d, a, b);
	}
};

// kvq_split2 writes x ≈ hi + lo as two packed 16-bit terms (x0 in the low
// halves).
template <int T>
static __device__ __forceinline__ void kvq_split2(float x0, float x1, unsigned& hi, unsigned& lo) {
	unsigned short h0 = kvq_lp<T>::rn(x0), h1 = kvq_lp<T>::rn(x1);
	unsigned short l0 = kvq_lp<T>::rn(x0 - kvq_lp<T>::wide(h0)), l1 = kvq_lp<T>::rn(x1 - kvq_lp<T>::wide(h1));
	hi = (unsigned)h0 | ((unsigned)h1 << 16);
	lo = (unsigned)l0 | ((unsigned)l1 << 16);
}

// Shared memory of the decode kernel (attention.go, decodeShared):
// two stages of K and V tiles (64 rows of D+8 halves each: the pad keeps
// the fragment loads free of bank conflicts), the per-row data, then the
// query fragments (wr·QSPLIT·(D/16)·32 16-byte entries).
template <int D>
struct kvq_dc_smem {
	enum {
		LD = D + 8,                                     // halves per K/V row in shared memory
		STAGE = 2 * KVQ_DC_TK * LD,                     // halves per stage (K then V)
		ROWINFO = 2 * STAGE * 2,                        // byte offset of the row data
		QFRAG = ROWINFO + KVQ_DC_ROWS * 16,             // byte offset of the query fragments
	};
};

template <int D, int T>
static __device__ __forceinline__ void kvq_attn_decode(const void* kbase, const void* vbase, int blocks, int bt,
                                                       const int* seqs, const int* tabK, const int* tabV,
                                                       const float* q, float* part, float* ml, int heads,
                                                       int kvHeads, int window, float scale, int chunk, int maxChunks,
                                                       int groups, int limit, int rstride, float softcap) {
	typedef kvq_lp<T> lp;
	typedef kvq_dc_smem<D> L;
	const int KS = D / 16, NS = lp::QSPLIT, LD = L::LD;
	KVQ_DYN_SMEM(unsigned char, kvq_dc_smem_);
	unsigned char* sm = kvq_dc_smem_;
	unsigned short* stages = (unsigned short*)sm;
	int* rowFrom = (int*)(sm + L::ROWINFO);
	int* rowTo = rowFrom + KVQ_DC_ROWS;
	float* rowF = (float*)(rowTo + KVQ_DC_ROWS);  // score factor of the row
	float* rowQs = rowF + KVQ_DC_ROWS;            // power-of-two query scale
	kvq_v4* Qf = (kvq_v4*)(sm + L::QFRAG);

	int s = blockIdx.z, y = blockIdx.y, cx = blockIdx.x;
	int h = y / groups, grp = y - h * groups;
	kvq_seq sq = kvq_load_seq(seqs, s);
	int nq = heads / kvHeads, rows = sq.n * nq;
	if (rows > limit) return; // a prefill kernel's sequence
	int r0 = grp * KVQ_DC_ROWS;
	if (r0 >= rows) return;
	int nrows = min(KVQ_DC_ROWS, rows - r0);
	int lo = kvq_from(sq.pos, window), hiC = sq.exact ? sq.pos : sq.pos + sq.n;
	int nch = hiC > lo ? (hiC - lo + chunk - 1) / chunk : 0;
	if (cx >= nch) return;
	int c0 = lo + cx * chunk, c1 = min(hiC, c0 + chunk);
	long long item = ((long long)s * maxChunks + cx) * kvHeads * groups + y;

	int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
	int WR = nrows <= 16 ? 1 : nrows <= 32 ? 2 : 4, WP = 4 / WR;
	int wr = warp / WP, wp = warp - wr * WP;
	const float* qbase = q + (long long)sq.row * heads * D + (long long)h * nq * D;
	long long qtok = (long long)heads * D; // floats from one token's queries to the next

	// Per-row data; each warp finds the scale of rows warp, warp+4, ...
	for (int r = tid; r < KVQ_DC_ROWS; r += KVQ_DC_THREADS) {
		int rr = r0 + r;
		if (r < nrows) {
			rowTo[r] = sq.pos + rr / nq;
			rowFrom[r] = kvq_from(rowTo[r], window);
		} else {
			rowFrom[r] = 0x7fffffff;
			rowTo[r] = -1;
		}
	}
	for (int r = warp; r < WR * 16; r += 4) {
		float amax = 0.f;
		int rr = r0 + r;
		if (r < nrows) {
			const float* qr = qbase + (rr / nq) * qtok + (rr % nq) * D;
			for (int d = lane; d < D; d += 32) amax = fmaxf(amax, fabsf(qr[d]));
		}
		amax = kvq_warp_max(amax);
		int e = 0;
		if (amax > 0.f) {
			frexpf(amax, &e); // amax < 2^e
			e -= 15;
		}
		if (lane == 0) {
			rowQs[r] = ldexpf(1.f, -e);
			rowF[r] = ldexpf(scale * KVQ_LOG2E, e);
		}
	}
	__syncthreads();
	// Query fragments (A operands: a[j] holds row g+8·(j&1), columns
	// 2t+8·(j>>1) and the next), split into NS terms.
	for (int idx = tid; idx < WR * KS * 32; idx += KVQ_DC_THREADS) {
		int ln = idx & 31, ks = (idx >> 5) % KS, w = idx / (KS * 32);
		int gg = ln >> 2, tt = ln & 3;
		unsigned part_[4][3];
		for (int j = 0; j < 4; j++) {
			int r = w * 16 + gg + (j & 1) * 8, col = ks * 16 + 2 * tt + (j >> 1) * 8;
			float x0 = 0.f, x1 = 0.f;
			if (r < nrows) {
				int rr = r0 + r;
				const float* qr = qbase + (rr / nq) * qtok + (rr % nq) * D;
				x0 = qr[col] * rowQs[r];
				x1 = qr[col + 1] * rowQs[r];
			}
			for (int sp = 0; sp < NS; sp++) {
				unsigned short a0 = lp::rn(x0), a1 = lp::rn(x1);
				part_[j][sp] = (unsigned)a0 | ((unsigned)a1 << 16);
				x0 -= lp::wide(a0);
				x1 -= lp::wide(a1);
			}
		}
		for (int sp = 0; sp < NS; sp++) {
			kvq_v4 v;
			v.x = part_[0][sp];
			v.y = part_[1][sp];
			v.z = part_[2][sp];
			v.w = part_[3][sp];
			Qf[((w * NS + sp) * KS + ks) * 32 + ln] = v;
		}
	}

	// issue copies tile `it` (positions c0+64·it ...) into stage it&1.
	const int VPR = D / 8; // 16-byte vectors per row
	const unsigned short* kb = (const unsigned short*)kbase;
	const unsigned short* vb = (const unsigned short*)vbase;
	int ntiles = (c1 - c0 + KVQ_DC_TK - 1) / KVQ_DC_TK;
#define KVQ_DC_ISSUE(it)                                                                              \
	do {                                                                                              \
		unsigned short* st_ = stages + ((it) & 1) * L::STAGE;                                         \
		int pt_ = c0 + (it) * KVQ_DC_TK;                                                              \
		for (int v_ = tid; v_ < KVQ_DC_TK * VPR; v_ += KVQ_DC_THREADS) {                              \
			int row_ = v_ / VPR, col_ = (v_ - row_ * VPR) * 8, p_ = pt_ + row_;                       \
			bool ok_ = p_ < c1;                                                                       \
			const unsigned short* ks_ = kb;                                                           \
			const unsigned short* vs_ = vb;                                                           \
			if (ok_) {                                                                                \
				ks_ = kb + kvq_kv_index(h, tabK[sq.tab + p_ / bt], p_ % bt, blocks, bt, D) + col_;    \
				vs_ = vb + kvq_kv_index(h, tabV[sq.tab + p_ / bt], p_ % bt, blocks, bt, D) + col_;    \
			}                                                                                         \
			kvq_cp16(st_ + row_ * LD + col_, ks_, ok_);                                               \
			kvq_cp16(st_ + KVQ_DC_TK * LD + row_ * LD + col_, vs_, ok_);                              \
		}                                                                                             \
		kvq_cp_commit();                                                                              \
	} while (0)

	// This lane's rows: a = wr·16+g, b = a+8.
	int ra = wr * 16 + g, rb = ra + 8;
	float fa = rowF[ra], fb = rowF[rb];
	int fromA = rowFrom[ra], toA = rowTo[ra], fromB = rowFrom[rb], toB = rowTo[rb];
	float mA = KVQ_NEG_INF, mB = KVQ_NEG_INF, lA = 0.f, lB = 0.f;
	float acc[D / 8][4];
#pragma unroll
	for (int n = 0; n < D / 8; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
	const kvq_v4* Qw = Qf + wr * NS * KS * 32 + lane;
	float ps = lp::pscale(), cap = softcap * KVQ_LOG2E;

	if (ntiles > 0) KVQ_DC_ISSUE(0);
	for (int it = 0; it < ntiles; it++) {
		if (it + 1 < ntiles) {
			KVQ_DC_ISSUE(it + 1);
			kvq_cp_wait<1>();
		} else {
			kvq_cp_wait<0>();
		}
		__syncthreads();
		const unsigned short* Ks = stages + (it & 1) * L::STAGE;
		const unsigned short* Vs = Ks + KVQ_DC_TK * LD;
		int pt = c0 + it * KVQ_DC_TK;
		for (int sub = wp; sub < KVQ_DC_TK / 16; sub += WP) {
			int pb = pt + sub * 16;
			if (pb >= c1) break;
			float s0[4] = {0.f, 0.f, 0.f, 0.f}, s1[4] = {0.f, 0.f, 0.f, 0.f};
			const unsigned short* k0 = Ks + (sub * 16 + g) * LD + 2 * t;
			const unsigned short* k1 = k0 + 8 * LD;
#pragma unroll
			for (int ks = 0; ks < KS; ks++) {
				unsigned b0[2], b1[2];
				b0[0] = *(const unsigned*)(k0 + ks * 16);
				b0[1] = *(const unsigned*)(k0 + ks * 16 + 8);
				b1[0] = *(const unsigned*)(k1 + ks * 16);
				b1[1] = *(const unsigned*)(k1 + ks * 16 + 8);
#pragma unroll
				for (int sp = 0; sp < NS; sp++) {
					kvq_v4 a4 = Qw[(sp * KS + ks) * 32];
					unsigned a[4] = {a4.x, a4.y, a4.z, a4.w};
					lp::mma(s0, a, b0);
					lp::mma(s1, a, b1);
				}
			}
			// Scores in base 2, masked: s0[j] is at position pb+2t+(j&1),
			// s1[j] 8 later; j < 2 row a, else row b.
			int pa = pb + 2 * t;
#pragma unroll
			for (int j = 0; j < 4; j++) {
				int p = pa + (j & 1);
				bool a_ = j < 2;
				int f = a_ ? fromA : fromB, e = a_ ? toA : toB;
				float fac = a_ ? fa : fb;
				s0[j] = (p >= f && p <= e && p < c1) ? kvq_cap(s0[j] * fac, cap) : KVQ_NEG_INF;
				s1[j] = (p + 8 >= f && p + 8 <= e && p + 8 < c1) ? kvq_cap(s1[j] * fac, cap) : KVQ_NEG_INF;
			}
			float xa = fmaxf(fmaxf(s0[0], s0[1]), fmaxf(s1[0], s1[1]));
			float xb = fmaxf(fmaxf(s0[2], s0[3]), fmaxf(s1[2], s1[3]));
			xa = fmaxf(xa, __shfl_xor_sync(0xffffffffu, xa, 1));
			xa = fmaxf(xa, __shfl_xor_sync(0xffffffffu, xa, 2));
			xb = fmaxf(xb, __shfl_xor_sync(0xffffffffu, xb, 1));
			xb = fmaxf(xb, __shfl_xor_sync(0xffffffffu, xb, 2));
			float na = fmaxf(mA, xa), nb = fmaxf(mB, xb);
			float ca = na == KVQ_NEG_INF ? 1.f : exp2f(mA - na), cb = nb == KVQ_NEG_INF ? 1.f : exp2f(mB - nb);
			float ba = na == KVQ_NEG_INF ? 0.f : na, bb = nb == KVQ_NEG_INF ? 0.f : nb;
			mA = na;
			mB = nb;
			float p0[4], p1[4];
#pragma unroll
			for (int j = 0; j < 4; j++) {
				float bse = j < 2 ? ba : bb;
				p0[j] = exp2f(s0[j] - bse);
				p1[j] = exp2f(s1[j] - bse);
			}
			lA = lA * ca + (p0[0] + p0[1] + p1[0] + p1[1]);
			lB = lB * cb + (p0[2] + p0[3] + p1[2] + p1[3]);
#pragma unroll
			for (int n = 0; n < D / 8; n++) {
				acc[n][0] *= ca;
				acc[n][1] *= ca;
				acc[n][2] *= cb;
				acc[n][3] *= cb;
			}
			// P as the A operand of P·V (k = the 16 positions).
			unsigned ah[4], al[4];
			kvq_split2<T>(p0[0] * ps, p0[1] * ps, ah[0], al[0]);
			kvq_split2<T>(p0[2] * ps, p0[3] * ps, ah[1], al[1]);
			kvq_split2<T>(p1[0] * ps, p1[1] * ps, ah[2], al[2]);
			kvq_split2<T>(p1[2] * ps, p1[3] * ps, ah[3], al[3]);
			const unsigned short* vc = Vs + (sub * 16 + 2 * t) * LD + g;
#pragma unroll
			for (int n = 0; n < D / 8; n++) {
				const unsigned short* vv = vc + n * 8;
				unsigned b[2];
				b[0] = (unsigned)vv[0] | ((unsigned)vv[LD] << 16);
				b[1] = (unsigned)vv[8 * LD] | ((unsigned)vv[9 * LD] << 16);
				lp::mma(acc[n], ah, b);
				lp::mma(acc[n], al, b);
			}
		}
		__syncthreads(); // the stage is free for tile it+2
	}
#undef KVQ_DC_ISSUE

	// Combine the warps that share rows, through shared memory (the
	// stages are free): per warp 16 rows of [m, l, acc[D]].
	lA += __shfl_xor_sync(0xffffffffu, lA, 1);
	lA += __shfl_xor_sync(0xffffffffu, lA, 2);
	lB += __shfl_xor_sync(0xffffffffu, lB, 1);
	lB += __shfl_xor_sync(0xffffffffu, lB, 2);
	float* W = (float*)sm;
	const int WS = D + 2;
	float* wa = W + (warp * 16 + g) * WS;
	float* wb = wa + 8 * WS;
	if (t == 0) {
		wa[0] = mA;
		wa[1] = lA;
		wb[0] = mB;
		wb[1] = lB;
	}
#pragma unroll
	for (int n = 0; n < D / 8; n++) {
		wa[2 + n * 8 + 2 * t] = acc[n][0];
		wa[3 + n * 8 + 2 * t] = acc[n][1];
		wb[2 + n * 8 + 2 * t] = acc[n][2];
		wb[3 + n * 8 + 2 * t] = acc[n][3];
	}
	__syncthreads();
	float pinv = 1.f / ps;
	for (int e = tid; e < nrows * D; e += KVQ_DC_THREADS) {
		int r = e / D, d = e - r * D, w0 = (r >> 4) * WP, rl = r & 15;
		float M = KVQ_NEG_INF;
		for (int k = 0; k < WP; k++) M = fmaxf(M, W[((w0 + k) * 16 + rl) * WS]);
		float A = 0.f, Lsum = 0.f;
		if (M != KVQ_NEG_INF) {
			for (int k = 0; k < WP; k++) {
				const float* wr_ = W + ((w0 + k) * 16 + rl) * WS;
				float c = exp2f(wr_[0] - M);
				A += c * wr_[2 + d];
				Lsum += c * wr_[1];
			}
		}
		part[(item * rstride + r) * D + d] = A * pinv;
		if (d == 0) {
			ml[(item * rstride + r) * 2] = M;
			ml[(item * rstride + r) * 2 + 1] = Lsum;
		}
	}
}

// The decode kernels (dynamic shared memory: attention.go,
// decodeShared).
#define KVQ_DECODE(NAME, T, D)                                                                                   \
	KVQ_KERNEL void kvq_attn_decode_##NAME##_d##D(const void* kbase, const void* vbase, int blocks, int bt,     \
	                                              const int* seqs, const int* tabK, const int* tabV,            \
	                                              const float* q, float* part, float* ml, int heads, int kvHeads, \
	                                              int window, float scale, int chunk, int maxChunks, int groups,  \
	                                              int limit, int rstride, float softcap) {                        \
		kvq_attn_decode<D, T>(kbase, vbase, blocks, bt, seqs, tabK, tabV, q, part, ml, heads, kvHeads, window,   \
		                      scale, chunk, maxChunks, groups, limit, rstride, softcap);                         \
	}                                                                                                            \
	KVQ_REGISTER(kvq_attn_decode_##NAME##_d##D)

KVQ_DECODE(f16, KVQ_KV_F16, 64)
KVQ_DECODE(f16, KVQ_KV_F16, 96)
KVQ_DECODE(f16, KVQ_KV_F16, 128)
KVQ_DECODE(bf16, KVQ_KV_BF16, 64)
KVQ_DECODE(bf16, KVQ_KV_BF16, 96)
KVQ_DECODE(bf16, KVQ_KV_BF16, 128)

// kvq_attn_merge finishes the decode kernels' rows (groups of groupRows
// rows: KVQ_DC_ROWS, or KVQ_QD_ROWS after kvq_attn_qdecode): one block
// per query row (token blockIdx.x of sequence blockIdx.z, query head
// blockIdx.y), thread t for output dimensions t and t+128. It combines
// the row's chunk partials and, for an exact step, the step's own
// positions from kx and vx (in fp32, scores reduced across the block),
// and writes dst's row. 128 threads, dim ≤ 256.
#define KVQ_MG_DIMS 2
KVQ_KERNEL void kvq_attn_merge(float* dst, const float* q, const float* kx, const float* vx, const float* part,
                               const float* ml, const int* seqs, int heads, int kvHeads, int dim, int window,
                               float scale, int chunk, int maxChunks, int groups, int limit, int rstride,
                               int groupRows, float softcap, const float* sinks) {
	__shared__ float red[KVQ_DC_THREADS];
	int s = blockIdx.z, qh = blockIdx.y, i = blockIdx.x, d = threadIdx.x;
	kvq_seq sq = kvq_load_seq(seqs, s);
	int nq = heads / kvHeads, h = qh / nq, j = qh - h * nq, kvd = kvHeads * dim;
	if (sq.n * nq > limit || i >= sq.n) return;
	int r = i * nq + j, grp = r / groupRows, rl = r - grp * groupRows, y = h * groups + grp;
	int lo = kvq_from(sq.pos, window), hiC = sq.exact ? sq.pos : sq.pos + sq.n;
	int nch = hiC > lo ? (hiC - lo + chunk - 1) / chunk : 0;
	float M = KVQ_NEG_INF, L = 0.f, A[KVQ_MG_DIMS];
#pragma unroll
	for (int e = 0; e < KVQ_MG_DIMS; e++) A[e] = 0.f;
	for (int c = 0; c < nch; c++) {
		long long item = ((long long)s * maxChunks + c) * kvHeads * groups + y;
		float m = ml[(item * rstride + rl) * 2];
		if (m == KVQ_NEG_INF) continue;
		float mn = fmaxf(M, m), a = exp2f(M - mn), b = exp2f(m - mn);
#pragma unroll
		for (int e = 0; e < KVQ_MG_DIMS; e++) {
			int dd = d + e * KVQ_DC_THREADS;
			float v = dd < dim ? part[(item * rstride + rl) * dim + dd] : 0.f;
			A[e] = A[e] * a + b * v;
		}
		L = L * a + b * ml[(item * rstride + rl) * 2 + 1];
		M = mn;
	}
	if (sq.exact) {
		const float* qr = q + (long long)(sq.row + i) * heads * dim + (long long)qh * dim;
		int p1 = sq.pos + i;
		float sl = scale * KVQ_LOG2E, cap = softcap * KVQ_LOG2E;
		for (int p = max(kvq_from(p1, window), sq.pos); p <= p1; p++) {
			long long xr = (long long)(sq.row + p - sq.pos) * kvd + (long long)h * dim;
			float part0 = 0.f;
#pragma unroll
			for (int e = 0; e < KVQ_MG_DIMS; e++) {
				int dd = d + e * KVQ_DC_THREADS;
				part0 += dd < dim ? qr[dd] * kx[xr + dd] : 0.f;
			}
			red[d] = part0;
			__syncthreads();
			for (int o = KVQ_DC_THREADS / 2; o > 0; o >>= 1) {
				if (d < o) red[d] += red[d + o];
				__syncthreads();
			}
			float sc = kvq_cap(red[0] * sl, cap);
			__syncthreads(); // red is rewritten by the next position
			float mn = fmaxf(M, sc), a = exp2f(M - mn), b = exp2f(sc - mn);
#pragma unroll
			for (int e = 0; e < KVQ_MG_DIMS; e++) {
				int dd = d + e * KVQ_DC_THREADS;
				A[e] = A[e] * a + b * (dd < dim ? vx[xr + dd] : 0.f);
			}
			L = L * a + b;
			M = mn;
		}
	}
	if (sinks) { // attention sink, once per row after every chunk (base 2, as M)
		float s2 = sinks[qh] * KVQ_LOG2E, mn = fmaxf(M, s2), a = exp2f(M - mn);
#pragma unroll
		for (int e = 0; e < KVQ_MG_DIMS; e++) A[e] *= a;
		L = L * a + exp2f(s2 - mn);
	}
#pragma unroll
	for (int e = 0; e < KVQ_MG_DIMS; e++) {
		int dd = d + e * KVQ_DC_THREADS;
		if (dd < dim) dst[(long long)(sq.row + i) * heads * dim + (long long)qh * dim + dd] = A[e] / L;
	}
}
KVQ_REGISTER(kvq_attn_merge)

// ---------------------------------------------------------------------
// Decode over quantized caches: split-K flash decoding on CUDA cores in
// fp32 (K and V each in its own format).
//
// The grid and the partials are the tensor-core decode's (kvq_attn_merge
// combines them), with groups of KVQ_QD_ROWS query rows. A block walks its
// chunk in tiles of KVQ_QD_TK positions aligned to multiples of
// KVQ_QD_TK (positions outside the chunk are masked), in three phases per
// tile: the tile's K and V rows are dequantized into fp32 in shared
// memory (the values pkg/quant's Decode gives), then the scores (a thread
// per (row, position) pair), the online softmax in base 2 (a warp per
// row, a lane per position) and the weighted values (a thread per output
// dimension, for every 128/D-th row). Queries are pre-scaled by
// scale·log2(e).
//
// Two loaders fill the fp32 tiles:
//   - kvq_attn_qdecode_<family>_d<D>: one instantiation per format family
//     (the same kind on both sides; int groups and sym, fp8 scales are
//     parameters). The tile's packed bytes travel to shared memory with
//     16-byte cp.async copies, coalesced, double-buffered (the next tile's
//     bytes are in flight while this one is decoded and used), laid out
//     as a tile of 32 rows of the format ("the virtual tile"); then each
//     thread dequantizes units of 8 values (a warp per unit, a lane per
//     row) with the family's code inlined: one scale per unit, no switch
//     on the format. Needs 16-byte aligned segments: BlockTokens 8, 16 or
//     a multiple of 32 (kv.go, qdecodeVector).
//   - kvq_attn_qdecode_d<D>: any formats (K ≠ V families, other block
//     sizes): every value read from global memory through the per-value
//     decoder with its runtime switch.
#define KVQ_QD_TK 32
#define KVQ_QD_ROWS 16
#define KVQ_QD_THREADS 128
#define KVQ_QD_GENERIC (-1)

// The shared memory of kvq_attn_qdecode (kv.go's qdecodeShared): fp32
// Qs[16][D], Ks[32][D+1], Vs[32][D+1], Ps[16][33], Ms, Ls, Cs[16], a
// lookup table of 272 floats (fp8 values, iq4_nl levels), then (vector
// loaders) two stages of the K and V virtual tiles.
template <int D>
struct kvq_qd_smem {
	static constexpr int LD = D + 1;
	static constexpr int QS = 0, KS = QS + KVQ_QD_ROWS * D, VS = KS + KVQ_QD_TK * LD, PS = VS + KVQ_QD_TK * LD;
	static constexpr int MS = PS + KVQ_QD_ROWS * (KVQ_QD_TK + 1), LS = MS + KVQ_QD_ROWS, CS = LS + KVQ_QD_ROWS;
	static constexpr int LUT = CS + KVQ_QD_ROWS;
	static constexpr int FLOATS = (LUT + 272 + 3) / 4 * 4; // raw bytes start 16-byte aligned
};

// kvq_qregion_issue starts the 16-byte copies of one region of the rows
// of positions [p0, p0+32) (p0 a multiple of 32) of KV head h into the
// virtual tile: rb bytes a row, at src + row·rb in a real tile and at dst
// + row·rb in the virtual one (a tile of 32 rows); segments of min(bt, 32)
// rows, each from its block; segments starting at or past c1 are
// zero-filled (their blocks may not exist).
static __device__ __forceinline__ void kvq_qregion_issue(unsigned char* dst, const unsigned char* base, long long tileBytes,
                                                         int src, int rb, const int* tab, int p0, int c1, int h,
                                                         int blocks, int bt, int tid) {
	int sr = min(bt, KVQ_QD_TK), n16 = sr * rb / 16, nseg = KVQ_QD_TK / sr;
	for (int e = tid; e < nseg * n16; e += KVQ_QD_THREADS) {
		int seg = e / n16, o = e - seg * n16, p = p0 + seg * sr;
		bool valid = p < c1;
		const unsigned char* g = base;
		if (valid) g += ((long long)h * blocks + tab[p / bt]) * tileBytes + src + (long long)(p % bt) * rb + 16 * o;
		kvq_cp16(dst + seg * sr * rb + 16 * o, g, valid);
	}
}

// kvq_qtile_issue starts the copies of a 32-position tile of format fmt
// into the virtual tile raw: the rows of the row formats, or the int
// groups' regions (scales, zeros when asymmetric, codes).
static __device__ __forceinline__ void kvq_qtile_issue(unsigned char* raw, const void* base, int fmt, const int* tab,
                                                       int p0, int c1, int h, int blocks, int bt, int dim, int tid) {
	const unsigned char* g = (const unsigned char*)base;
	int kind = kvq_fmt_kind(fmt), rowBytes = kvq_row_bytes(fmt, dim);
	long long tileBytes = (long long)bt * rowBytes;
	if (kind < KVQ_KV_INT8) {
		kvq_qregion_issue(raw, g, tileBytes, 0, rowBytes, tab, p0, c1, h, blocks, bt, tid);
		return;
	}
	int ng = dim / kvq_fmt_group(fmt), meta = kvq_fmt_sym(fmt) ? 2 : 4;
	kvq_qregion_issue(raw, g, tileBytes, 0, 2 * ng, tab, p0, c1, h, blocks, bt, tid);
	if (meta == 4) kvq_qregion_issue(raw + KVQ_QD_TK * ng * 2, g, tileBytes, bt * ng * 2, 2 * ng, tab, p0, c1, h, blocks, bt, tid);
	kvq_qregion_issue(raw + KVQ_QD_TK * ng * meta, g, tileBytes, bt * ng * meta, dim * kvq_int_bits(kind) / 8, tab, p0, c1,
	                  h, blocks, bt, tid);
}

// kvq_q4x8 expands 4 bytes of nibbles (byte i: values i and i+16 of a
// 32-value run, GGML order) into the 8 codes lo[0..3], hi[0..3].
static __device__ __forceinline__ void kvq_q4x8(const unsigned char* b, unsigned lo[4], unsigned hi[4]) {
#pragma unroll
	for (int i = 0; i < 4; i++) {
		lo[i] = b[i] & 15u;
		hi[i] = b[i] >> 4;
	}
}

// kvq_int_sz is the fp16 scale and the zero of group g of row r of an int
// virtual tile (the zero −2^(bits−1)·s when symmetric).
static __device__ __forceinline__ void kvq_int_sz(const unsigned char* raw, int r, int g, int ng, bool sym, int bits,
                                                  float* s, float* z) {
	*s = kvq_f16_bits_to_f32(kvq_ld16(raw + (r * ng + g) * 2));
	*z = sym ? __fmul_rn(-(float)(1 << (bits - 1)), *s)
	         : kvq_f16_bits_to_f32(kvq_ld16(raw + KVQ_QD_TK * ng * 2 + (r * ng + g) * 2));
}

// kvq_int_quad stores the values of 4 consecutive dimensions d0.. of row
// r of an int virtual tile from their codes c[0..3].
static __device__ __forceinline__ void kvq_int_quad(float* out, const unsigned char* raw, int r, int d0,
                                                    const unsigned* c, int group, int ng, bool sym, int bits) {
	float s, z;
	if (group % 4 == 0) { // one group
		kvq_int_sz(raw, r, d0 / group, ng, sym, bits, &s, &z);
#pragma unroll
		for (int i = 0; i < 4; i++) out[d0 + i] = __fadd_rn(__fmul_rn((float)c[i], s), z);
		return;
	}
	for (int i = 0; i < 4; i++) {
		kvq_int_sz(raw, r, (d0 + i) / group, ng, sym, bits, &s, &z);
		out[d0 + i] = __fadd_rn(__fmul_rn((float)c[i], s), z);
	}
}

// kvq_qdec_unit dequantizes unit u (8 values) of row r of virtual tile
// raw (format family F, format fmt) into out, the row's fp32 values:
// exactly kvq_tile_value's values.
template <int F, int D>
static __device__ __forceinline__ void kvq_qdec_unit(float* out, const unsigned char* raw, int r, int u, int fmt,
                                                     float scale, const float* lut) {
	if (F == KVQ_KV_E4M3 || F == KVQ_KV_E5M2) {
		const unsigned char* b = raw + r * D + 8 * u;
		uint2 w = *(const uint2*)b;
#pragma unroll
		for (int i = 0; i < 8; i++) {
			float v = lut[((i < 4 ? w.x : w.y) >> (8 * (i & 3))) & 0xffu];
			out[8 * u + i] = v != v ? v : __fmul_rn(v, scale);
		}
		return;
	}
	if (F >= KVQ_KV_Q80 && F <= KVQ_KV_IQ4NL) {
		constexpr int BB = F == KVQ_KV_Q80 ? 34 : F == KVQ_KV_Q41 ? 20 : F == KVQ_KV_Q50 ? 22 : F == KVQ_KV_Q51 ? 24 : 18;
		int k = u >> 2, t = u & 3;
		const unsigned char* blk = raw + r * (D / 32 * BB) + k * BB;
		float d = kvq_f16_bits_to_f32(kvq_ld16(blk));
		float* o = out + 32 * k;
		if (F == KVQ_KV_Q80) {
#pragma unroll
			for (int i = 0; i < 8; i++) o[8 * t + i] = __fmul_rn(d, (float)(signed char)blk[2 + 8 * t + i]);
			return;
		}
		constexpr int QS = F == KVQ_KV_Q40 || F == KVQ_KV_IQ4NL ? 2 : F == KVQ_KV_Q41 ? 4 : F == KVQ_KV_Q50 ? 6 : 8;
		unsigned lo[4], hi[4];
		kvq_q4x8(blk + QS + 4 * t, lo, hi);
		if (F == KVQ_KV_Q50 || F == KVQ_KV_Q51) {
			constexpr int QH = F == KVQ_KV_Q50 ? 2 : 4;
			unsigned qh = (unsigned)kvq_ld16(blk + QH) | ((unsigned)kvq_ld16(blk + QH + 2) << 16);
#pragma unroll
			for (int i = 0; i < 4; i++) {
				lo[i] |= ((qh >> (4 * t + i)) & 1u) << 4;
				hi[i] |= ((qh >> (16 + 4 * t + i)) & 1u) << 4;
			}
		}
		float m = F == KVQ_KV_Q41 || F == KVQ_KV_Q51 ? kvq_f16_bits_to_f32(kvq_ld16(blk + 2)) : 0.f;
#pragma unroll
		for (int i = 0; i < 4; i++) {
			float a, b;
			if (F == KVQ_KV_Q40) {
				a = __fmul_rn(d, (float)((int)lo[i] - 8)), b = __fmul_rn(d, (float)((int)hi[i] - 8));
			} else if (F == KVQ_KV_Q50) {
				a = __fmul_rn(d, (float)((int)lo[i] - 16)), b = __fmul_rn(d, (float)((int)hi[i] - 16));
			} else if (F == KVQ_KV_IQ4NL) {
				a = __fmul_rn(d, lut[lo[i]]), b = __fmul_rn(d, lut[hi[i]]);
			} else { // q4_1, q5_1
				a = __fadd_rn(__fmul_rn(d, (float)lo[i]), m), b = __fadd_rn(__fmul_rn(d, (float)hi[i]), m);
			}
			o[4 * t + i] = a;
			o[16 + 4 * t + i] = b;
		}
		return;
	}
	// Int groups: codes after the scales (and zeros).
	constexpr int BITS = F == KVQ_KV_INT8 ? 8 : F == KVQ_KV_INT4 ? 4 : 2;
	int group = kvq_fmt_group(fmt), ng = D / group;
	bool sym = kvq_fmt_sym(fmt);
	const unsigned char* codes = raw + KVQ_QD_TK * ng * (sym ? 2 : 4) + r * (D * BITS / 8);
	unsigned c0[4], c1[4];
	int d0, d1;
	if (F == KVQ_KV_INT8) {
		uint2 w = *(const uint2*)(codes + 8 * u);
#pragma unroll
		for (int i = 0; i < 4; i++) c0[i] = (w.x >> (8 * i)) & 0xffu, c1[i] = (w.y >> (8 * i)) & 0xffu;
		d0 = 8 * u, d1 = 8 * u + 4;
	} else if (F == KVQ_KV_INT4) {
		int k = u >> 2, t = u & 3;
		kvq_q4x8(codes + 16 * k + 4 * t, c0, c1);
		d0 = 32 * k + 4 * t, d1 = d0 + 16;
	} else {
		unsigned w = kvq_ld16(codes + 2 * u);
#pragma unroll
		for (int i = 0; i < 4; i++) c0[i] = (w >> (2 * i)) & 3u, c1[i] = (w >> (8 + 2 * i)) & 3u;
		d0 = 8 * u, d1 = 8 * u + 4;
	}
	kvq_int_quad(out, raw, r, d0, c0, group, ng, sym, BITS);
	kvq_int_quad(out, raw, r, d1, c1, group, ng, sym, BITS);
}

// kvq_qdec_tile fills the fp32 tile dst (rows of ld floats) from the
// virtual tile raw: row cc (position p0+cc) decoded when it lies in
// [c0, c1), zeros otherwise. A warp per unit, a lane per row.
template <int F, int D>
static __device__ __forceinline__ void kvq_qdec_tile(float* dst, int ld, const unsigned char* raw, int fmt, float scale,
                                                     const float* lut, int p0, int c0, int c1, int tid) {
	for (int e = tid; e < KVQ_QD_TK * (D / 8); e += KVQ_QD_THREADS) {
		int u = e / KVQ_QD_TK, r = e - u * KVQ_QD_TK, p = p0 + r;
		float* o = dst + r * ld;
		if (p >= c0 && p < c1) {
			kvq_qdec_unit<F, D>(o, raw, r, u, fmt, scale, lut);
		} else {
#pragma unroll
			for (int i = 0; i < 8; i++) o[8 * u + i] = 0.f;
		}
	}
}

template <int D, int F>
static __device__ __forceinline__ void kvq_attn_qdecode(const void* kbase, const void* vbase, int kfmt, int vfmt,
                                                        const float* kscales, const float* vscales, int blocks, int bt,
                                                        const int* seqs, const int* tabK, const int* tabV,
                                                        const float* q, float* part, float* ml, int heads,
                                                        int kvHeads, int window, float scale, int chunk,
                                                        int maxChunks, int groups, int limit, int rstride,
                                                        const unsigned short* kwin, const unsigned short* vwin,
                                                        int kwr, int vwr, float softcap) {
	typedef kvq_qd_smem<D> L;
	KVQ_DYN_SMEM(float, kvq_qd_smem_);
	float* sm = kvq_qd_smem_;
	float* Qs = sm + L::QS;
	float* Ks = sm + L::KS;
	float* Vs = sm + L::VS;
	float* Ps = sm + L::PS;
	float *Ms = sm + L::MS, *Ls = sm + L::LS, *Cs = sm + L::CS, *lut = sm + L::LUT;
	unsigned char* raw = (unsigned char*)(sm + L::FLOATS);
	constexpr bool VEC = F != KVQ_QD_GENERIC;
	// Output mapping: thread (orow, od) takes dimensions od + 128·n of
	// rows orow + RS·k.
	constexpr int RS = D < KVQ_QD_THREADS ? KVQ_QD_THREADS / D : 1, NR = KVQ_QD_ROWS / RS;
	constexpr int ND = (D + KVQ_QD_THREADS - 1) / KVQ_QD_THREADS;
	int s = blockIdx.z, y = blockIdx.y, c = blockIdx.x, tid = threadIdx.x;
	kvq_seq sq = kvq_load_seq(seqs, s);
	int nq = heads / kvHeads, rows = sq.n * nq;
	if (rows > limit) return; // the prefill kernel's sequence
	int h = y / groups, r0 = (y - h * groups) * KVQ_QD_ROWS;
	if (r0 >= rows) return;
	int nrows = min(KVQ_QD_ROWS, rows - r0);
	int lo = kvq_from(sq.pos, window), hiC = sq.exact ? sq.pos : sq.pos + sq.n;
	int c0 = lo + c * chunk, c1 = min(hiC, c0 + chunk);
	if (c0 >= c1) return; // kvq_attn_merge reads only the sequence's chunks
	long long item = ((long long)s * maxChunks + c) * kvHeads * groups + y;
	float sl = scale * KVQ_LOG2E, cap = softcap * KVQ_LOG2E;
	const int* tk = tabK + sq.tab;
	const int* tv = tabV + sq.tab;
	int kraw = KVQ_QD_TK * kvq_row_bytes(kfmt, D), vraw = KVQ_QD_TK * kvq_row_bytes(vfmt, D);
	int pt0 = c0 / KVQ_QD_TK * KVQ_QD_TK;
	if (VEC) { // the first tile's bytes, in flight while the queries load
		kvq_qtile_issue(raw, kbase, kfmt, tk, pt0, c1, h, blocks, bt, D, tid);
		kvq_qtile_issue(raw + kraw, vbase, vfmt, tv, pt0, c1, h, blocks, bt, D, tid);
		kvq_cp_commit();
	}
	for (int e = tid; e < KVQ_QD_ROWS * D; e += KVQ_QD_THREADS) {
		int r = e / D, d = e - r * D, rr = r0 + r;
		float v = 0.f;
		if (r < nrows) {
			int tok = rr / nq, j = rr - tok * nq;
			v = q[(long long)(sq.row + tok) * heads * D + (long long)(h * nq + j) * D + d] * sl;
		}
		Qs[r * D + d] = v;
	}
	if (tid < KVQ_QD_ROWS) {
		Ms[tid] = KVQ_NEG_INF;
		Ls[tid] = 0.f;
	}
	if (F == KVQ_KV_E4M3 || F == KVQ_KV_E5M2) {
		for (int i = tid; i < 256; i += KVQ_QD_THREADS) lut[i] = kvq_fp8_value(i, F == KVQ_KV_E5M2);
	} else if (F == KVQ_KV_IQ4NL) {
		if (tid < 16) lut[tid] = (float)kvq_iq4nl_level(tid);
	}
	int od = D < KVQ_QD_THREADS ? tid % D : tid, orow = D < KVQ_QD_THREADS ? tid / D : 0;
	bool oact = orow < RS;
	float acc[NR][ND];
#pragma unroll
	for (int k = 0; k < NR; k++)
#pragma unroll
		for (int n = 0; n < ND; n++) acc[k][n] = 0.f;
	float ks = kscales ? kscales[h] : 1.f, vs = vscales ? vscales[h] : 1.f;
	int stage = 0;
	for (int p0 = pt0; p0 < c1; p0 += KVQ_QD_TK) {
		if (VEC) kvq_cp_wait<0>(); // this tile's bytes have landed
		__syncthreads();           // and are visible; the previous tile's readers are done
		if (VEC) {
			unsigned char* rk = raw + stage * (kraw + vraw);
			if (p0 + KVQ_QD_TK < c1) { // the next tile's bytes, into the other stage
				unsigned char* nk = raw + (stage ^ 1) * (kraw + vraw);
				kvq_qtile_issue(nk, kbase, kfmt, tk, p0 + KVQ_QD_TK, c1, h, blocks, bt, D, tid);
				kvq_qtile_issue(nk + kraw, vbase, vfmt, tv, p0 + KVQ_QD_TK, c1, h, blocks, bt, D, tid);
			}
			kvq_cp_commit();
			kvq_qdec_tile<(VEC ? F : KVQ_KV_Q80), D>(Ks, L::LD, rk, kfmt, ks, lut, p0, c0, c1, tid);
			kvq_qdec_tile<(VEC ? F : KVQ_KV_Q80), D>(Vs, L::LD, rk + kraw, vfmt, vs, lut, p0, c0, c1, tid);
			stage ^= 1;
		} else {
			for (int e = tid; e < KVQ_QD_TK * D; e += KVQ_QD_THREADS) {
				int cc = e / D, d = e - cc * D, p = p0 + cc;
				float kv = 0.f, vv = 0.f;
				if (p >= c0 && p < c1) {
					kv = kvq_cache_value(kbase, kfmt, kscales, tabK, kwin, kwr, sq, p, h, d, blocks, bt, D, kvHeads);
					vv = kvq_cache_value(vbase, vfmt, vscales, tabV, vwin, vwr, sq, p, h, d, blocks, bt, D, kvHeads);
				}
				Ks[cc * L::LD + d] = kv;
				Vs[cc * L::LD + d] = vv;
			}
		}
		__syncthreads();
		for (int e = tid; e < nrows * KVQ_QD_TK; e += KVQ_QD_THREADS) {
			int r = e / KVQ_QD_TK, cc = e - r * KVQ_QD_TK, p = p0 + cc;
			int tp = sq.pos + (r0 + r) / nq; // the row's token's position
			const float* qr = Qs + r * D;
			const float* kr = Ks + cc * L::LD;
			float sc = 0.f;
#pragma unroll 8
			for (int d = 0; d < D; d++) sc += qr[d] * kr[d];
			Ps[r * (KVQ_QD_TK + 1) + cc] = (p >= c0 && p < c1 && p <= tp && p >= kvq_from(tp, window)) ? kvq_cap(sc, cap) : KVQ_NEG_INF;
		}
		__syncthreads();
		int warp = tid >> 5, lane = tid & 31;
		for (int r = warp; r < nrows; r += KVQ_QD_THREADS / 32) {
			float* pr = Ps + r * (KVQ_QD_TK + 1);
			float v = pr[lane];
			float mn = fmaxf(Ms[r], kvq_warp_max(v));
			float pv = mn == KVQ_NEG_INF ? 0.f : exp2f(v - mn);
			float corr = mn == KVQ_NEG_INF ? 1.f : exp2f(Ms[r] - mn);
			float sum = kvq_warp_sum(pv);
			pr[lane] = pv;
			__syncwarp();
			if (lane == 0) {
				Ls[r] = Ls[r] * corr + sum;
				Ms[r] = mn;
				Cs[r] = corr;
			}
		}
		__syncthreads();
		if (oact) {
#pragma unroll
			for (int k = 0; k < NR; k++) {
				int r = orow + k * RS;
				if (r < nrows) {
					const float* pr = Ps + r * (KVQ_QD_TK + 1);
#pragma unroll
					for (int n = 0; n < ND; n++) {
						int d = od + n * KVQ_QD_THREADS;
						if (d < D) {
							float a = acc[k][n] * Cs[r];
#pragma unroll 8
							for (int cc = 0; cc < KVQ_QD_TK; cc++) a += pr[cc] * Vs[cc * L::LD + d];
							acc[k][n] = a;
						}
					}
				}
			}
		}
	}
	if (!oact) return;
#pragma unroll
	for (int k = 0; k < NR; k++) {
		int r = orow + k * RS;
		if (r < nrows) {
#pragma unroll
			for (int n = 0; n < ND; n++) {
				int d = od + n * KVQ_QD_THREADS;
				if (d < D) part[(item * rstride + r) * D + d] = acc[k][n];
			}
			if (od == 0) {
				ml[(item * rstride + r) * 2] = Ms[r];
				ml[(item * rstride + r) * 2 + 1] = Ls[r];
			}
		}
	}
}

#define KVQ_QDECODE(NAME, F, D)                                                                                  \
	KVQ_KERNEL void kvq_attn_qdecode##NAME##_d##D(const void* kbase, const void* vbase, int kfmt, int vfmt,      \
	                                              const float* kscales, const float* vscales, int blocks, int bt, \
	                                              const int* seqs, const int* tabK, const int* tabV,            \
	                                              const float* q, float* part, float* ml, int heads,            \
	                                              int kvHeads, int window, float scale, int chunk,              \
	                                              int maxChunks, int groups, int limit, int rstride,            \
	                                              const unsigned short* kwin, const unsigned short* vwin, int kwr, \
	                                              int vwr, float softcap) {                                     \
		kvq_attn_qdecode<D, F>(kbase, vbase, kfmt, vfmt, kscales, vscales, blocks, bt, seqs, tabK, tabV, q, part,  \
		                       ml, heads, kvHeads, window, scale, chunk, maxChunks, groups, limit, rstride, kwin,  \
		                       vwin, kwr, vwr, softcap);                                                           \
	}                                                                                                            \
	KVQ_REGISTER(kvq_attn_qdecode##NAME##_d##D)

// The vector loaders for the common head sizes (64, 128); 96 and 256 go
// through the generic loader (each instantiation adds about 350 KB of PTX
// and seconds of JIT compilation at module load).
#define KVQ_QDECODE_DIMS(NAME, F) \
	KVQ_QDECODE(NAME, F, 64)      \
	KVQ_QDECODE(NAME, F, 128)

KVQ_QDECODE(, KVQ_QD_GENERIC, 64)
KVQ_QDECODE(, KVQ_QD_GENERIC, 96)
KVQ_QDECODE(, KVQ_QD_GENERIC, 128)
KVQ_QDECODE(, KVQ_QD_GENERIC, 256)
KVQ_QDECODE_DIMS(_e4m3, KVQ_KV_E4M3)
KVQ_QDECODE_DIMS(_e5m2, KVQ_KV_E5M2)
KVQ_QDECODE_DIMS(_q8_0, KVQ_KV_Q80)
KVQ_QDECODE_DIMS(_q4_0, KVQ_KV_Q40)
KVQ_QDECODE_DIMS(_q4_1, KVQ_KV_Q41)
KVQ_QDECODE_DIMS(_q5_0, KVQ_KV_Q50)
KVQ_QDECODE_DIMS(_q5_1, KVQ_KV_Q51)
KVQ_QDECODE_DIMS(_iq4_nl, KVQ_KV_IQ4NL)
KVQ_QDECODE_DIMS(_int8, KVQ_KV_INT8)
KVQ_QDECODE_DIMS(_int4, KVQ_KV_INT4)
KVQ_QDECODE_DIMS(_int2, KVQ_KV_INT2)
