package quant

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kvqlabs/kvq/pkg/kvqerr"
)

// Sentinel errors of the package.
var (
	ErrUnknownFormat = kvqerr.New("quant: unknown format")
	ErrBadSpec       = kvqerr.New("quant: bad cache spec")
	ErrDim           = kvqerr.New("quant: unsupported head size")
	ErrOption        = kvqerr.New("quant: bad format option")
)

// MaxHeadDim is the largest head size the formats serve. Released models
// use at most 576 (DeepSeek's MLA latent, as llama.cpp caches it), 256
// otherwise; a rotated format (turbo) at a head size that is not a power
// of two builds a dense dim×dim orthogonal matrix by Gram–Schmidt in
// O(dim³) work, seconds at 1024, which larger head sizes would turn into
// hours.
const MaxHeadDim = 1024

// Format is one KV storage scheme.
type Format interface {
	// Name is the canonical name users type, options included
	// ("fp16", "q4_0:rot", "int4:g32:channel").
	Name() string
	// NewCodec makes the codec for one layer's K or V of one KV head.
	NewCodec(p CodecParams) (Codec, error)
	// Traits describe how the format stores keys (key true) or values:
	// what a backend needs to read and write its tiles without knowing
	// its name.
	Traits(key bool) Traits
}

// Stateful is implemented by formats whose codecs learn state from the data
// they encode (fp8:dynamic scales, set by the first batch and then frozen).
// Fresh returns the same format with new, empty state. A cache calls it
// once per distinct format of its spec before making its codecs, so that
// what one cache learned never reaches another (results would otherwise
// depend on which cache saw data first). Implementations must be
// comparable (pointer types), as callers key fresh copies by format value.
type Stateful interface {
	Format
	Fresh() Format
}

// Describer is implemented by formats that document themselves for kvq formats.
type Describer interface {
	// Describe returns a one-line summary and what the format needs
	// ("calibration", "flash-style kernel", ...).
	Describe() (summary string, needs []string)
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
// any range of encoded rows. Tiles are exactly TileBytes(capacity) bytes for
// the capacity they were allocated with, so a codec may derive its layout
// from len(tile).
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
	// q_i = q[i*Dim:(i+1)*Dim] and j < n (ldd ≥ n when nq > 1).
	Scores(dst []float32, ldd int, q []float32, nq int, tile []byte, row0, n int)
	// Accumulate adds Σ_j w[i*ldw+j] · row_{row0+j} to acc[i*Dim:(i+1)*Dim]
	// for each of nq weight rows (ldw ≥ n when nq > 1).
	Accumulate(acc []float32, w []float32, ldw int, nq int, tile []byte, row0, n int)
}

// Windowed is implemented by codecs whose scheme keeps the most recent tokens
// unquantized (KIVI's value window, for example). The cache keeps at least
// ResidualRows() recent rows in fp16 for them, whatever the spec says.
type Windowed interface {
	ResidualRows() int
}

// Rotator is implemented by codecs that store rows in a rotated basis
// (x ↦ Π·x with Π orthogonal: Hadamard or random rotations). Their plain
// Scores and Accumulate rotate on every call; a cache that attends over many
// tiles uses these methods instead, rotating each query once and un-rotating
// the accumulated values once:
//
//	q·x̂ = (Πq)·(Πx̂)      Σ w x̂ = Πᵀ Σ w (Πx̂)
type Rotator interface {
	// RotateQueries sets dst_i = Π·q_i for nq queries.
	RotateQueries(dst, q []float32, nq int)
	// ScoresRotated is Scores given rotated queries.
	ScoresRotated(dst []float32, ldd int, qr []float32, nq int, tile []byte, row0, n int)
	// AccumulateRotated adds Σ_j w_ij·(Π x̂_j) to racc_i.
	AccumulateRotated(racc []float32, w []float32, ldw int, nq int, tile []byte, row0, n int)
	// UnrotateAdd adds Πᵀ·racc_i to acc_i.
	UnrotateAdd(acc, racc []float32, nq int)
}

// PreRoPE is implemented by codecs that store keys before the rotary position
// embedding (KVQuant). The cache then receives pre-RoPE keys for that layer,
// and applies RoPE to decoded rows when it computes attention.
type PreRoPE interface {
	PreRoPE() bool
}

// PromptFlusher is implemented by codecs that quantize like Hugging Face
// transformers' QuantizedCache: a sequence's prompt (the rows of its first
// step) is quantized at once, and later tokens wait in fp16 until
// TokenGroup() of them have accumulated, counted from the end of the prompt
// (not from position 0). Their rows encode independently: Encode takes any
// row0 and n, so the cache writes them wherever a flush falls.
type PromptFlusher interface {
	FlushesFromPrompt() bool
}

// family makes formats of one base name from options ("int4:g32" has base
// "int4" and options ["g32"]).
type family struct {
	base    string
	aliases []string
	make    func(base string, opts []string) (Format, error)
	// presets are the names kvq formats lists for this family.
	presets []string
	// options holds an example of every option make accepts (g32 for
	// g<N>), except those that name a file (scales@, codebook@).
	options []string
}

// Registry maps names, aliases and options to formats.
type Registry struct {
	families map[string]*family
	aliases  map[string]string
	order    []string // presets in presentation order
}

// Formats returns the registry of every built-in format.
func Formats() *Registry {
	r := &Registry{families: map[string]*family{}, aliases: map[string]string{}}
	for _, fams := range [][]family{floatFamilies(), fp8Families(), fp4Families(), integerFamilies(), blockFamilies(), rotatedFamilies(), kvquantFamilies()} {
		for i := range fams {
			f := &fams[i]
			r.families[f.base] = f
			for _, a := range f.aliases {
				r.aliases[a] = f.base
			}
			r.order = append(r.order, f.presets...)
		}
	}
	return r
}

// Names lists the preset format names in presentation order.
func (r *Registry) Names() []string { return append([]string(nil), r.order...) }

// Bases lists the base names (without options), sorted.
func (r *Registry) Bases() []string {
	var b []string
	for k := range r.families {
		b = append(b, k)
	}
	sort.Strings(b)
	return b
}

// Variants lists names that exercise every option of every family: each
// base name alone, with each option, and with every pair and triple of
// options that makes a valid format (options that name a file, such as
// scales@ and codebook@, are left out). Tools and tests that must cover
// every format the CPU runs, such as a backend's list of what it
// supports, iterate over them.
func (r *Registry) Variants() []string {
	var out []string
	for _, base := range r.Bases() {
		f := r.families[base]
		opts := f.options
		var walk func(chosen []string, from int)
		walk = func(chosen []string, from int) {
			// Invalid sets are skipped, not pruned: a larger set may be
			// valid ("kivi4:g64:r64" but not "kivi4:r96").
			if _, err := f.make(base, chosen); err == nil {
				out = append(out, strings.Join(append([]string{base}, chosen...), ":"))
			}
			if len(chosen) == 3 {
				return
			}
			for i := from; i < len(opts); i++ {
				walk(append(chosen[:len(chosen):len(chosen)], opts[i]), i+1)
			}
		}
		walk(nil, 0)
	}
	return out
}

// Lookup finds a format by name, case-insensitively: a base name or alias,
// optionally followed by ":option" parts.
func (r *Registry) Lookup(name string) (Format, error) {
	n := fold(strings.TrimSpace(name))
	parts := strings.Split(n, ":")
	base := parts[0]
	if a, ok := r.aliases[base]; ok {
		base = a
	}
	f, ok := r.families[base]
	if !ok {
		return nil, fmt.Errorf("%w %q (valid: %s)", ErrUnknownFormat, strings.TrimSpace(name), strings.Join(r.Bases(), ", "))
	}
	// The family's errors name the base format and the option at fault.
	return f.make(base, parts[1:])
}

// fold lower-cases a spec or format name except option values after '@'
// (file paths), which run to the next ':' or ','.
func fold(s string) string {
	b := []byte(s)
	keep := false
	for i, c := range b {
		switch {
		case c == '@':
			keep = true
		case c == ':' || c == ',':
			keep = false
		case !keep && 'A' <= c && c <= 'Z':
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// MustLookup is Lookup for names known to be valid; it panics otherwise.
func (r *Registry) MustLookup(name string) Format {
	f, err := r.Lookup(name)
	if err != nil {
		panic(err)
	}
	return f
}

// noOptions is a family constructor for formats without options.
func noOptions(f Format) func(string, []string) (Format, error) {
	return func(base string, opts []string) (Format, error) {
		if len(opts) > 0 {
			return nil, fmt.Errorf("%w: %s takes no options, got %q", ErrOption, base, strings.Join(opts, ":"))
		}
		return f, nil
	}
}

func floatFamilies() []family {
	return []family{
		{base: "fp32", aliases: []string{"f32", "float32"}, make: noOptions(FP32), presets: []string{"fp32"}},
		{base: "fp16", aliases: []string{"f16", "float16", "half", "auto"}, make: noOptions(FP16), presets: []string{"fp16"}},
		{base: "bf16", aliases: []string{"bfloat16"}, make: noOptions(BF16), presets: []string{"bf16"}},
	}
}
