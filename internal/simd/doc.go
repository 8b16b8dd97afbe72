// Package simd holds the float kernels that kvq's hot loops run: dot products,
// axpy, matrix-times-vector/matrix products over float32, IEEE half (F16),
// bfloat16 (BF16) and GGML Q8_0 weights, and bulk conversions between them.
//
// Every kernel has a pure-Go reference twin (the unexported *Generic
// functions); on amd64 with AVX2, FMA and F16C the assembly versions are chosen
// once at package initialisation. The purego build tag compiles the assembly out. Tests
// check each assembly kernel against its twin on random sizes with odd tails.
//
// Kernels never allocate and never retain their arguments; they are safe to
// call from many goroutines at once on disjoint destinations.
//
// # Layouts
//
// F16 and BF16 values are passed as their raw bits in uint16. A Q8_0 row of n
// values (n a multiple of 32) is n/32 blocks of 34 bytes: a little-endian
// binary16 scale d, then 32 int8 codes, value i being d*code[i] (GGML's
// block_q8_0).
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
// multiply-adds; results agree with an exact sum to about 1e-5 of
// Σ|a_i*b_i| for the lengths used in models. Conversions are exact (widening)
// or correctly rounded to nearest even (narrowing), and the assembly and Go
// paths agree bit for bit, NaN payloads included.
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
// use no AVX-512.
package simd
