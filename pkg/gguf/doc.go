// Package gguf reads and writes GGUF files, the container format of ggml and
// llama.cpp models.
//
// # Scope
//
// [Parse] reads the header, the metadata key/value pairs and the tensor infos
// of a GGUF version 2 or 3 file through an [io.ReaderAt], validates them and
// returns a [File]. It does not read tensor data: a tensor's bytes are
// TensorInfo.Size bytes at the absolute offset TensorInfo.Offset, which a
// caller reads (or maps) itself, for example with [io.NewSectionReader].
// [Writer] builds small GGUF files for tests and fixtures.
//
// The package deliberately does not:
//   - dequantize or convert tensor data (that belongs to pkg/quant);
//   - interpret model architectures beyond typed metadata look-ups;
//   - read GGUF version 1 (32-bit counts) or big-endian files; both are
//     refused with [ErrUnsupportedVersion].
//
// # Layout
//
// A GGUF file is, in order: the magic "GGUF", a uint32 version, a uint64 tensor
// count, a uint64 metadata count, the metadata (key string, uint32 value type,
// value), the tensor infos (name string, uint32 n_dims, n_dims uint64
// dimensions, uint32 ggml type, uint64 offset relative to the data section),
// padding up to the alignment (metadata key general.alignment, default 32),
// and the tensor data. Strings are a uint64 byte length followed by the bytes;
// everything is little-endian.
//
// Dimensions are in ggml order: Dims[0] (ne[0]) varies fastest and is the row
// length, so a PyTorch matrix of shape [out, in] is stored with Dims [in, out].
//
// # Robustness
//
// Parse never panics on file contents and reports every malformed input as an
// error that wraps one of the package's sentinel errors (ErrBadMagic,
// ErrTruncated, ...) inside a [*FormatError] giving the byte offset and the
// field. Every count and length read from the file is checked against the
// bytes that remain before anything is allocated, and slices grow only as
// their elements are actually read, so the memory Parse uses is a small
// multiple of the bytes it reads, whatever the header claims.
//
// # Concurrency
//
// A File is not modified by this package after Parse returns and may be read
// by several goroutines at once. A Writer must not be used concurrently.
package gguf
