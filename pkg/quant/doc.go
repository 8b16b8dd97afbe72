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
// Every Format also describes itself with Traits, as ggml describes its
// types: family, bits, blocks and their axis, scales and zero points, fp8
// variant, rotations, token groups and fp16 windows, and the byte math
// that follows (Traits.TileBytes equals every codec's TileBytes, which a
// test checks for every option of every format). Backends choose kernels
// and tile layouts from the traits; nothing outside this package reads a
// format's name to learn how it stores values. Registry.Variants lists a
// name for every combination of options, for code that must cover them all.
//
// A Spec is what users type on the command line (--cache): a K format, a V
// format, optional fp16 sink and residual windows, and per-layer overrides.
//
// The package is a leaf: it imports only the standard library and kvq's
// internal SIMD kernels. It knows nothing about caches, sequences or devices.
// Codecs are safe for concurrent use once constructed.
package quant
