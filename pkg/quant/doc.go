// Package quant defines kvq's KV-cache storage formats: how one head vector
// (head_dim values of one token's key or value) is encoded, how many bytes it
// costs, and how attention reads it back.
//
// A Format is a value describing one storage scheme ("fp16", "q4_0", ...).
// For a concrete head size a Format makes a Codec, which encodes rows into a
// tile — the bytes that hold a run of consecutive tokens of one KV head — and
// computes attention scores and value sums directly on tile bytes, without
// materializing a dequantized copy. Byte accounting comes from the Codec
// (TileBytes, StateBytes) and is the single source of truth used both by the
// runtime cache allocator and by kvq estimate.
//
// A Spec is what users type on the command line (--cache): a K format, a V
// format, optional fp16 sink and residual windows, and per-layer overrides.
//
// The package is a leaf: it imports only the standard library and kvq's
// internal SIMD kernels. It knows nothing about caches, sequences or devices.
// Codecs are safe for concurrent use once constructed.
package quant
