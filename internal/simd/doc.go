// Package simd holds the float kernels that kvq's hot loops run: dot products,
// axpy, elementwise products (MulF32, MulAddF32), matrix-times-vector/matrix
// products over float32, IEEE half (F16), bfloat16 (BF16) and GGML Q8_0
// weights, bulk conversions between them, unpacking of quantized codes (8-,
// 4- and 2-bit with one scale and bias per call, per value or per group of
// values; 4-, 3- and 2-bit codes through a table of levels, a codebook;
// GGML Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL blocks; OCP 8-bit floats
// E5M2 and E4M3 times a scale) to float32, and the two halves of decode
// attention over a chunk of decoded KV rows (ScoresF32, AccumulateF32) or
// of rows of raw 8- or 4-bit codes read in place (ScoresU8, AccumulateU8,
// ScoresU4, AccumulateU4) with the softmax between them (MaxF32, then ExpShiftSum: exp(x*scale - shift)
// in place and its sum).
//
// Every kernel has a pure-Go reference twin (the unexported *Generic
// functions); on amd64 with AVX2, FMA and F16C the assembly versions are chosen
// once at package initialisation, and on CPUs that also have AVX-512 (F, BW,
// VL) the AVX-512 dot products over F32, F16, BF16 and Q8_0 weights, the
// decode hot path, replace their AVX2 ones (Kernels names the selection). The
// purego build tag compiles the assembly out. Tests check each assembly
// kernel against its twin on random sizes with odd tails, with every kernel
// set the CPU runs.
//
// Kernels never allocate and never retain their arguments, and their slice
// arguments do not escape (the dispatch calls each kernel directly, never
// through a function value), so callers may pass stack buffers. They are
// safe to call from many goroutines at once on disjoint destinations.
//
// # Layouts
//
// F16 and BF16 values are passed as their raw bits in uint16. A Q8_0 row of n
// values (n a multiple of 32) is n/32 blocks of 34 bytes: a little-endian
// binary16 scale d, then 32 int8 codes, value i being d*code[i] (GGML's
// block_q8_0).
//
// Packed 4-bit integer codes (U4ToF32, ScoresU4, ...) come in blocks of
// 32 codes in 16 bytes, in GGML Q4_0's order: byte k of a block holds code
// k in its low nibble and code k+16 in its high nibble, so that one
// zero-extension of 8 bytes gives two vectors of 8 codes; a run whose
// length t is not a multiple of 32 ends with a short block of t mod 32
// codes whose byte k holds code k and code k+(t mod 32)/2. Other packed
// codes are little-endian within each byte: a 4-bit codebook run (LUT4ToF32)
// holds code 2k in the low nibble of byte k and code 2k+1 in its high
// nibble, a 2-bit run holds code 4k+m in bits 2m and 2m+1 of byte k, and a
// 3-bit run is a
// little-endian bit stream, 8 codes in each 3 bytes (code j in bits 3j to
// 3j+2 of the stream). A Q4_0 block is 18 bytes, a binary16 d and 16
// bytes qs, values j and j+16 being d*((qs[j]&15)-8) and
// d*((qs[j]>>4)-8); a Q4_1 block is 20 bytes, d and m (binary16) then qs,
// the values d*nibble + m (GGML's block_q4_0 and block_q4_1). Q5_0 (22
// bytes: d, a little-endian uint32 qh, qs) and Q5_1 (24 bytes: d, m, qh,
// qs) add bit j of qh to value j's nibble as its fifth bit, the values
// being d*(code-16) and d*code + m; IQ4_NL (18 bytes, laid out as Q4_0)
// maps each nibble through GGML's fixed table kvalues_iq4nl, the value
// being d*T[nibble]. E5M2 and E4M3 codes are one byte each (OCP 8-bit
// floating point, E4M3 in its FN variant: no infinities, 0x7f and 0xff
// NaN). The grouped unpackers (U8ToF32Groups, ...) read one run of packed
// codes split into groups of group values, group g with its own scale[g]
// and bias[g]: a chunk of KV rows, each row split into groups, in one
// call.
//
// The attention helpers work on a chunk of n decoded rows of dim floats,
// row-major and back to back (a few dozen KV rows at most, so that they stay
// in L1), and nq query rows: ScoresF32 writes the nq×n dot products,
// AccumulateF32 adds the weighted sums of the rows to nq accumulator rows.
// Both keep a block of up to 4 queries' partial sums in registers while
// they run over the rows, so each row, and each accumulator, is loaded once
// per call (per block of 4 queries for the rows). ScoresU8/U4 and
// AccumulateU8/U4 do the same on rows of packed unsigned codes, widened
// and converted in registers and never stored, with strides for the
// queries, accumulators and code rows, so that a call can take one group of
// columns of each row; they compute with the raw codes, and the caller
// applies each group's scale and zero once per row and query.
//
// The matrix products take the weight matrix W row-major as [rows][cols]
// (PyTorch Linear layout, out × in) and nt token rows of cols floats back to
// back, and write dst[t*ldd+r] = Σ_c x[t*cols+c]*W[r][c] for the weight rows
// r0 <= r < r1 only, so callers split the rows across goroutines. Decode
// (nt == 1) reads W once, row after row, as one sequential stream (several
// accumulators per row); prefill (nt >= 4) works on blocks of 4 token rows ×
// 3 weight rows so that each weight element is loaded and converted once per
// 4 tokens.
//
// # Accuracy
//
// Dot and matrix products sum in an unspecified order with fused
// multiply-adds, which differs between kernel sets (the AVX-512 F16 and
// BF16 dot products keep 8 partial sums of 16 lanes, the AVX2 ones 4 of 8;
// DotF32 is the exception, the same bits with either); results agree with an exact sum to about 1e-5 of
// Σ|a_i*b_i| for the lengths used in models. Conversions are exact (widening)
// or correctly rounded to nearest even (narrowing), and the assembly and Go
// paths agree bit for bit, NaN payloads included. Unpacking computes
// code*scale + bias as a rounded product followed by a rounded sum (never a
// fused multiply-add), so it too gives the same bits on every path, and so
// does MulAddF32 (a rounded product, then a rounded sum; AxpyF32's assembly
// fuses instead). The table lookups copy the table's bits. ExpShiftSum's
// exponential (Cephes' expf with fused multiply-adds) is within 1.02 ulp of
// e^x; its results and their float64 sum (added in a fixed order), like
// MaxF32's result, are the same bits on every path.
//
// # Scope
//
// The package does not quantize (pkg/quant owns the formats' codecs), does no
// threading of its own (callers split row ranges; MeasureBandwidthParallel
// is the one exception, for measurement) and keeps no configuration: the
// only package state is the CPU feature selection, which ForceGeneric
// overrides in tests and benchmarks.
//
// # Assembly
//
// kernels_amd64.s and kernels_amd64.go are generated with avo by the nested
// module in _generate (run go generate in this directory); never edit them by
// hand. They need AVX2, FMA and F16C (detected with golang.org/x/sys/cpu) and
// use no AVX-512. kernels_avx512_amd64.s and kernels_avx512_amd64.go, from
// the same generator, hold the AVX-512 kernels, which need AVX-512 F, BW
// and VL and BMI2; they take every element (a tail through masked loads)
// and prefetch the weights ahead of the loads.
//
// Training (internal/train) uses only the float32 kernels: their one
// AVX-512 version, DotF32's, gives the AVX2 kernel's bits (it keeps the same
// partial sums in the halves of its registers), so training's arithmetic is
// the same whichever set runs.
package simd
