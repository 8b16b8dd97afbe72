// Package simd holds the float kernels that kvq's hot loops run: dot products,
// axpy, matrix-times-vector/matrix products over float32, IEEE half (F16),
// bfloat16 (BF16) and GGML Q8_0 weights, and bulk conversions between them.
//
// Every kernel has a pure-Go reference twin (the *Generic functions); on amd64
// with AVX2 and FMA the assembly versions are chosen once at package
// initialisation. The purego build tag compiles the assembly out. Tests
// check each assembly kernel against its twin on random sizes with odd tails.
//
// Kernels never allocate and never retain their arguments; they are safe to
// call from many goroutines at once on disjoint destinations.
package simd
