// kvwrite.cu: the paged KV cache's storage kernels: writing a step's rows
// into their tiles (every format of kvformats.cuh), copying and poisoning
// blocks, and filling tiles with random data for benchmarks.
//
// Storage layout (kv.go): per layer and side one buffer of KVHeads ×
// Blocks tiles, head-major — the tile of KV head h and block b starts at
// byte (h·Blocks + b)·BlockTokens·kvq_row_bytes — each tile exactly
// pkg/quant's tile for the format (fp16 rows are IEEE binary16 bits, bf16
// rows the top halves of float32s, the quantized formats as
// kvformats.cuh describes).
#pragma once
#include "common.cuh"
#include "kvformats.cuh"

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

// Write ops (kv.go, planMeta): 4 ints each, kind then three operands.
#define KVQ_OP_ENCODE 0 // src, block, slot: row src of x into the slot
#define KVQ_OP_WINDOW 1 // src, win, row: row src of x in fp16 into window row `row` of slot win
#define KVQ_OP_SAVE 2   // entry, win, row: window row `row` of slot win into undo entry `entry`

// kvq_kv_write executes one side's write ops of a step for one layer, op
// i at ops[4i..4i+3], every KV head: OpEncode stores row `src` of x
// (kvHeads·dim float32s) in slot `slot` of block `block` encoded in fmt
// (scales: the side's fp8 scale per KV head, else null); OpWindow stores
// it in fp16 in a window row (win: the side's window buffer, wrows rows
// per slot and KV head); OpSave copies a window row (every KV head) into
// undo entry `entry` (undo: kvHeads·dim fp16 values an entry). The host
// launches a step's saves before its other ops, and gives no two ops of
// one launch the same window row. Grid: one block per op (x); any block
// size: a thread per encoding unit (kvq_units: a value, a GGML block, an
// int group) or per value (window rows).
KVQ_KERNEL void kvq_kv_write(void* base, const float* x, const int* ops, int nops, int kvHeads, int dim, int blocks,
                             int bt, int fmt, const float* scales, unsigned short* win, int wrows,
                             unsigned short* undo) {
	int op = blockIdx.x;
	if (op >= nops) return;
	const int* o = ops + 4 * op;
	int kind = o[0], a = o[1], b = o[2], c = o[3];
	if (kind == KVQ_OP_WINDOW) {
		const float* row = x + (long long)a * kvHeads * dim;
		for (int i = threadIdx.x; i < kvHeads * dim; i += blockDim.x) {
			int h = i / dim, d = i - h * dim;
			win[(((long long)b * kvHeads + h) * wrows + c) * dim + d] = kvq_f32_to_f16_bits(row[i]);
		}
		return;
	}
	if (kind == KVQ_OP_SAVE) {
		for (int i = threadIdx.x; i < kvHeads * dim; i += blockDim.x) {
			int h = i / dim, d = i - h * dim;
			undo[(long long)a * kvHeads * dim + i] = win[(((long long)b * kvHeads + h) * wrows + c) * dim + d];
		}
		return;
	}
	int units = kvq_units(fmt, dim);
	const float* row = x + (long long)a * kvHeads * dim;
	for (int i = threadIdx.x; i < kvHeads * units; i += blockDim.x) {
		int h = i / units, u = i - h * units;
		unsigned char* tile = (unsigned char*)kvq_tile(base, fmt, h, b, blocks, bt, dim);
		kvq_encode_unit(tile, row + (long long)h * dim, fmt, scales ? scales[h] : 1.f, bt, dim, c, u);
	}
}
KVQ_REGISTER(kvq_kv_write)

// kvq_kv_restore writes undo entries back (Storage.Restore): op i of ops
// (4 ints each, the step's saves in kvq_kv_write's form) copies entry
// `entry` into window row `row` of slot win, every KV head. Grid: one
// block per op.
KVQ_KERNEL void kvq_kv_restore(unsigned short* win, const unsigned short* undo, const int* ops, int nops, int kvHeads,
                               int dim, int wrows) {
	int op = blockIdx.x;
	if (op >= nops) return;
	const int* o = ops + 4 * op;
	for (int i = threadIdx.x; i < kvHeads * dim; i += blockDim.x) {
		int h = i / dim, d = i - h * dim;
		win[(((long long)o[2] * kvHeads + h) * wrows + o[3]) * dim + d] = undo[(long long)o[1] * kvHeads * dim + i];
	}
}
KVQ_REGISTER(kvq_kv_restore)

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

// kvq_kv_fill_random fills every tile of a side's buffer (heads·blocks
// tiles of bt rows) with pseudo-random values in [-1, 1) (a hash of seed
// and index) encoded in fmt (fp8 with scale): benchmark data written without a host copy.
// Grid: any (x); a thread per row of a tile.
KVQ_KERNEL void kvq_kv_fill_random(void* base, long long rows, long long seed, int fmt, int bt, int dim,
                                   float scale) {
	float x[256];
	long long step = (long long)gridDim.x * blockDim.x;
	int units = kvq_units(fmt, dim);
	for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += step) {
		for (int d = 0; d < dim && d < 256; d++) {
			unsigned long long z = (unsigned long long)(r * dim + d + seed * 0x9e3779b97f4a7c15ull);
			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
			z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
			z ^= z >> 31;
			x[d] = (float)(z >> 40) * (1.0f / 8388608.0f) - 1.0f; // 24 bits → [-1, 1)
		}
		long long t = r / bt; // tile index h·blocks + b
		unsigned char* tile = (unsigned char*)base + t * bt * (long long)kvq_row_bytes(fmt, dim);
		for (int u = 0; u < units; u++) kvq_encode_unit(tile, x, fmt, scale, bt, dim, (int)(r % bt), u);
	}
}
KVQ_REGISTER(kvq_kv_fill_random)

// kvq_kv_decode writes every row of a side's buffer (rows = heads·blocks·
// bt, tile-major) as float32s, decoded as the attention kernels decode
// them (kvq_tile_value): the tests compare them with pkg/quant's Decode
// bit for bit. Grid: any (x), a thread per value.
KVQ_KERNEL void kvq_kv_decode(float* dst, const void* base, long long rows, int fmt, const float* scales, int blocks,
                              int bt, int dim) {
	long long step = (long long)gridDim.x * blockDim.x;
	long long n = rows * dim;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
		long long r = i / dim;
		int d = (int)(i - r * dim);
		long long t = r / bt; // h·blocks + b
		const unsigned char* tile = (const unsigned char*)base + t * bt * (long long)kvq_row_bytes(fmt, dim);
		dst[i] = kvq_tile_value(tile, fmt, scales ? scales[t / blocks] : 1.f, bt, dim, (int)(r % bt), d);
	}
}
KVQ_REGISTER(kvq_kv_decode)
