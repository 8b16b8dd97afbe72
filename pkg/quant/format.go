package quant

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Sentinel errors of the package.
var (
	ErrUnknownFormat = errors.New("quant: unknown format")
	ErrBadSpec       = errors.New("quant: bad cache spec")
	ErrDim           = errors.New("quant: unsupported head size")
)

// Format is one KV storage scheme.
type Format interface {
	// Name is the canonical name users type ("fp16", "q8_0", "kivi2").
	Name() string
	// NewCodec makes the codec for one layer's K or V of one KV head.
	NewCodec(p CodecParams) (Codec, error)
}

// CodecParams locate a codec in the model. Formats with per-layer or
// per-head state (scales, codebooks) use Layer, Head and Key.
type CodecParams struct {
	Dim   int  // values per row (head_dim)
	Layer int  // layer index
	Head  int  // KV head index
	Key   bool // true for keys, false for values
}

// Codec encodes rows of Dim values into tiles and computes attention on
// tiles. A tile holds consecutive rows (tokens) of one KV head. Rows are
// encoded in groups of TokenGroup() rows (1 for per-token formats); row0 and n
// of Encode are multiples of it. Reads (Decode, Scores, Accumulate) may cover
// any range of encoded rows.
//
// Methods panic when slices are too short: that is a programmer error.
type Codec interface {
	// TokenGroup is the number of rows that are encoded together.
	TokenGroup() int
	// TileBytes is the size of a tile of rows rows (a multiple of TokenGroup).
	TileBytes(rows int) int
	// StateBytes is the fixed memory the codec itself holds (scales,
	// codebooks), independent of the number of tokens.
	StateBytes() int
	// Encode stores n rows from src (n·Dim values) at rows [row0, row0+n).
	Encode(tile []byte, row0 int, src []float32, n int)
	// Decode writes rows [row0, row0+n) as float32 into dst (n·Dim values).
	Decode(dst []float32, tile []byte, row0, n int)
	// Scores sets dst[i*ldd+j] = q_i · row_{row0+j} for nq queries
	// q_i = q[i*Dim:(i+1)*Dim] and j < n.
	Scores(dst []float32, ldd int, q []float32, nq int, tile []byte, row0, n int)
	// Accumulate adds Σ_j w[i*ldw+j] · row_{row0+j} to acc[i*Dim:(i+1)*Dim]
	// for each of nq weight rows.
	Accumulate(acc []float32, w []float32, ldw int, nq int, tile []byte, row0, n int)
}

// Registry maps names and aliases to formats.
type Registry struct {
	byName  map[string]Format
	aliases map[string]string
	order   []string
}

// Formats returns the registry of every built-in format.
func Formats() *Registry {
	r := &Registry{byName: map[string]Format{}, aliases: map[string]string{}}
	for _, f := range []Format{FP32, FP16, BF16} {
		r.byName[f.Name()] = f
		r.order = append(r.order, f.Name())
	}
	r.aliases["f32"] = "fp32"
	r.aliases["float32"] = "fp32"
	r.aliases["f16"] = "fp16"
	r.aliases["float16"] = "fp16"
	r.aliases["half"] = "fp16"
	r.aliases["auto"] = "fp16"
	r.aliases["bfloat16"] = "bf16"
	return r
}

// Names lists the canonical format names in presentation order.
func (r *Registry) Names() []string { return append([]string(nil), r.order...) }

// Lookup finds a format by name or alias, case-insensitively.
func (r *Registry) Lookup(name string) (Format, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	if a, ok := r.aliases[n]; ok {
		n = a
	}
	if f, ok := r.byName[n]; ok {
		return f, nil
	}
	names := r.Names()
	sort.Strings(names)
	return nil, fmt.Errorf("%w %q (valid: %s)", ErrUnknownFormat, name, strings.Join(names, ", "))
}
