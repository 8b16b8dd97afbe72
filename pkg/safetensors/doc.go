// Package safetensors reads Hugging Face safetensors files and the indexes of
// sharded safetensors checkpoints, and writes small safetensors files for
// tests and fixtures.
//
// # Scope
//
// [Parse] reads and validates the header of a .safetensors file through an
// [io.ReaderAt] and returns a [File]: the optional string metadata and, for
// every tensor, its dtype, shape and the absolute offset and size of its
// bytes. It does not read tensor data; a caller reads (or maps) TensorInfo.Size
// bytes at TensorInfo.Offset itself, for example with [io.NewSectionReader].
// [ParseIndex] reads a model.safetensors.index.json, which maps each tensor
// of a sharded checkpoint to the shard file that holds it, and [Index.Verify]
// checks an index against its parsed shards. [Writer] builds small files.
//
// The package deliberately does not:
//   - convert or dequantize tensor data (that belongs to pkg/quant);
//   - open files or directories: callers join shard names from an [Index] to
//     the model directory themselves (ParseIndex guarantees the names are
//     plain base names, so the join cannot leave the directory);
//   - interpret tensor names or model architectures.
//
// # Layout
//
// A safetensors file is an 8-byte little-endian unsigned header length N,
// then N bytes of UTF-8 JSON, then the data section. The JSON is an object
// that maps each tensor name to
//
//	{"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
//
// where begin and end are byte offsets from the start of the data section
// (the byte after the header), plus an optional "__metadata__" object whose
// values are all strings. The header may be padded at the end with spaces;
// writers pad it to a multiple of 8 bytes so that the data section is 8-byte
// aligned. The tensors' data regions, taken in offset order, must follow one
// another without gaps or overlaps and cover the whole data section, and each
// region holds exactly prod(shape) elements of its dtype (an empty shape is a
// scalar, one element; a zero dimension means no elements and no bytes).
// Shapes are in PyTorch order, row-major: the last dimension varies fastest.
//
// # Robustness
//
// Parse and ParseIndex never panic on their input and report every malformed
// input as a [*FormatError] wrapping one of the package's sentinel errors
// (ErrHeader, ErrTruncated, ErrJSON, ...). The error gives the byte offset of
// the problem and, inside the JSON, its line and column; errors about one
// tensor name it. The header length is checked against the file size and
// against [MaxHeaderSize] before anything is allocated, so Parse allocates
// at most a small multiple of the header it reads. JSON objects with a key
// given twice are refused rather than resolved in favour of the last value,
// as encoding/json would.
//
// # Concurrency
//
// A File or Index is not modified by this package after it is returned and
// may be read by several goroutines at once. A Writer must not be used
// concurrently.
package safetensors
