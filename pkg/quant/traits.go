package quant

import "math"

// Traits describe how a format stores one side (keys or values) of a
// cache, as ggml's type traits describe its types: the scheme's family,
// its codes, its blocks and the axis they run along, where scales and zero
// points live, and what the codec does around the codes (rotations,
// windows, token groups). A backend chooses kernels and byte layouts from
// them and never from a format's name; kvq's own byte accounting agrees
// with them (TileBytes equals every codec's TileBytes, as traits_test.go
// checks for every format and option).
//
// Traits do not depend on the head size; the methods that count bytes
// take it. The zero value describes nothing (FamilyUnknown): a format
// defined outside this package that a backend should not try to read.
type Traits struct {
	Family Family
	// Value is the type of each stored value for the float and fp8
	// families (F32, F16, BF16, E4M3, E5M2); DTypeNone for integer codes.
	Value DType
	// Bits is the width of one value's code: 32 or 16 for floats, 8 for
	// fp8 and q8_0, 5 for q5_0, 4 for q4_0 and int4, ...
	Bits int
	// Codebook says what an integer code means (CodebookNone for floats).
	Codebook Codebook

	// Axis is the direction a block runs in: along head_dim within one
	// token (AxisToken) or along tokens within one channel (AxisChannel).
	Axis Axis
	// Block is the number of values that share in-tile parameters: 32 for
	// the llama.cpp blocks, the group size for int groups (tokens, for
	// AxisChannel), 1 for element-wise formats (floats, fp8), 0 for the
	// whole row. A block longer than the row is the row (see BlockLen).
	Block int
	// Packing is the order of a tile's bytes.
	Packing Packing

	// Scale is what one scale covers, ScaleType its type. Scales of
	// ScaleTensor and ScaleHead are held by the codecs (Codec.StateBytes),
	// the others are stored in the tile, one per block.
	Scale     Granularity
	ScaleType DType
	// TensorScale is the type of a second-level scale held by the codecs,
	// one per layer side, that multiplies every in-tile block scale
	// (nvfp4's fp32 per-tensor scale); DTypeNone when there is none.
	TensorScale DType
	// Zero is the type of each block's zero point or minimum, stored in
	// the tile next to its scale; DTypeNone for symmetric codes.
	Zero DType
	// Outliers is the fraction of each block's values kept exactly in
	// fp16 with their index (KVQuant's dense-and-sparse split).
	Outliers float64

	// Saturate: fp8 values beyond the range become ±max (CUDA's cast);
	// otherwise NaN (E4M3) or ±Inf (E5M2), as PyTorch's cast.
	Saturate bool
	// Dynamic: the scales are learnt from the first data the cache sees
	// (vLLM's calculate_kv_scales) and then frozen; the format is Stateful.
	Dynamic bool
	// Rotation is an orthogonal transform applied to rows before they are
	// encoded (and to queries at attention); Seed picks a random one.
	Rotation Rotation
	Seed     uint64
	// NormCorrected: TurboQuant's stored norm is rescaled so that the
	// decoded row keeps the original norm.
	NormCorrected bool
	// Interleaved: rows are stored with their RoPE pairs adjacent, in
	// GGUF order (InterleaveKeys; keys only, head sizes that are even).
	Interleaved bool
	// PreRoPE: keys are stored before the rotary embedding (quant.PreRoPE).
	PreRoPE bool

	// Flush is the number of rows encoded together (Codec.TokenGroup): 1
	// for per-token formats; rows wait in fp16 until a group is complete.
	Flush int
	// PromptFlush: groups are counted from the end of each sequence's
	// prompt (quant.PromptFlusher).
	PromptFlush bool
	// Residual is the number of most recent rows the format itself keeps
	// in fp16 (quant.Windowed), besides a spec's sink and residual windows.
	Residual int
}

// Family is the kind of scheme a format belongs to.
type Family uint8

// The families of the built-in formats.
const (
	FamilyUnknown Family = iota // a format that describes nothing
	FamilyFloat                 // fp32, fp16, bf16
	FamilyFP8                   // fp8-e4m3, fp8-e5m2
	FamilyBlock                 // llama.cpp blocks: q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl
	FamilyInt                   // int8, int4, int2 groups
	FamilyKIVI                  // kivi4, kivi2
	FamilyQuanto                // quanto4, quanto2
	FamilyTurbo                 // turbo4, turbo3, turbo2
	FamilyKVQuant               // kvquant4, kvquant3, kvquant2
	FamilyFP4                   // nvfp4, fp4_e2m1: E2M1 values in 16-value blocks
)

var familyNames = [...]string{"unknown", "float", "fp8", "block", "int", "kivi", "quanto", "turbo", "kvquant", "fp4"}

func (f Family) String() string { return enumName(familyNames[:], int(f)) }

// DType is the type of a stored number: a value, a scale or a zero point.
type DType uint8

// The types of stored numbers.
const (
	DTypeNone DType = iota
	DTypeF32
	DTypeF16
	DTypeBF16
	DTypeE4M3
	DTypeE5M2
	DTypeE2M1  // OCP fp4: 1 sign, 2 exponent, 1 mantissa bit (a value, never a scale)
	DTypeUE8M0 // an unsigned power of two 2^(b−127) in one byte (OCP MX scales)
)

var dtypeNames = [...]string{"none", "f32", "f16", "bf16", "e4m3", "e5m2", "e2m1", "ue8m0"}

func (d DType) String() string { return enumName(dtypeNames[:], int(d)) }

// Size is the number of bytes of one number of type d (0 for DTypeNone).
func (d DType) Size() int {
	switch d {
	case DTypeF32:
		return 4
	case DTypeF16, DTypeBF16:
		return 2
	case DTypeE4M3, DTypeE5M2, DTypeUE8M0:
		return 1
	}
	return 0 // DTypeNone, and DTypeE2M1 (half a byte: Bits counts it)
}

// Axis is the direction a block runs in.
type Axis uint8

// The axes.
const (
	AxisToken   Axis = iota // along head_dim, within one token's row
	AxisChannel             // along tokens, within one channel
)

func (a Axis) String() string { return enumName([]string{"token", "channel"}, int(a)) }

// Granularity is what one scale covers.
type Granularity uint8

// The granularities.
const (
	ScaleNone    Granularity = iota // no scale (floats)
	ScaleTensor                     // one per layer side (all KV heads)
	ScaleHead                       // one per layer side and KV head
	ScaleBlock                      // one per fixed-size block (llama.cpp)
	ScaleGroup                      // one per group of a chosen size
	ScaleToken                      // one per token row
	ScaleChannel                    // one per channel and token group
)

var granularityNames = [...]string{"none", "tensor", "head", "block", "group", "token", "channel"}

func (g Granularity) String() string { return enumName(granularityNames[:], int(g)) }

// InTile reports whether scales of granularity g are stored in the tile,
// one per block (rather than held by the codec).
func (g Granularity) InTile() bool { return g >= ScaleBlock }

// Codebook is what an integer code means.
type Codebook uint8

// The codebooks.
const (
	CodebookNone       Codebook = iota // values are floats, not codes
	CodebookLinear                     // evenly spaced levels: scale·code (+ zero)
	CodebookIQ4NL                      // llama.cpp's fixed non-linear iq4_nl table
	CodebookNormal                     // NormalFloat-style levels (KVQuant's nuq)
	CodebookLloydMax                   // Lloyd–Max levels of a rotated unit vector's coordinate (TurboQuant)
	CodebookCalibrated                 // levels fitted offline, per layer side (codebook@FILE)
)

var codebookNames = [...]string{"none", "linear", "iq4_nl", "normal", "lloyd-max", "calibrated"}

func (c Codebook) String() string { return enumName(codebookNames[:], int(c)) }

// Rotation is an orthogonal transform of rows before encoding.
type Rotation uint8

// The rotations.
const (
	RotationNone     Rotation = iota
	RotationHadamard          // llama.cpp's block Walsh–Hadamard (attn_rot)
	RotationRandom            // a seeded random orthogonal matrix (TurboQuant)
)

func (r Rotation) String() string { return enumName([]string{"none", "hadamard", "random"}, int(r)) }

// Packing is the order of a tile's bytes.
type Packing uint8

// The packings.
const (
	// PackRows: each row's bytes together, row after row; a block's
	// parameters sit in front of its codes (llama.cpp's blocks), so rows
	// can be read or written alone.
	PackRows Packing = iota
	// PackSplit: the parameters of every row of the tile (scales, then
	// zeros, then outliers), then the codes of every row.
	PackSplit
	// PackGroups: group after group of Block tokens, each the parameters
	// of its channels, then its codes row by row.
	PackGroups
	// PackRowTail: each row's bytes together, row after row, its codes
	// first and then its blocks' scales (vLLM's nvfp4 head rows:
	// head_size/2 bytes of codes, then head_size/16 scale bytes).
	PackRowTail
)

func (p Packing) String() string {
	return enumName([]string{"rows", "split", "groups", "row-tail"}, int(p))
}

func enumName(names []string, i int) string {
	if i < len(names) {
		return names[i]
	}
	return "invalid"
}

// BlockLen is the number of values of one block at head size dim: along
// head_dim for AxisToken (Block, or dim when Block is 0 or longer than
// the row), along tokens for AxisChannel.
func (t Traits) BlockLen(dim int) int {
	if t.Axis == AxisToken && (t.Block <= 0 || t.Block > dim) {
		return dim
	}
	return t.Block
}

// BlockMeta is the number of bytes of parameters one block stores in the
// tile at head size dim: its scale, its zero point and its outliers (an
// fp16 value and an index of one byte, or two past 256 values).
func (t Traits) BlockMeta(dim int) int {
	n := t.Zero.Size()
	if t.Scale.InTile() {
		n += t.ScaleType.Size()
	}
	if t.Outliers > 0 {
		m := t.BlockLen(dim)
		idx := 1
		if m > 256 {
			idx = 2
		}
		n += outlierCount(t.Outliers, m) * (2 + idx)
	}
	return n
}

// BlockBytes is the size of one block at head size dim, codes (rounded up
// to whole bytes) and parameters: ggml's type size (18 for q4_0).
func (t Traits) BlockBytes(dim int) int {
	return (t.BlockLen(dim)*t.Bits+7)/8 + t.BlockMeta(dim)
}

// UnitRows is the number of rows a tile grows by: the block length for
// AxisChannel (a block spans tokens), else 1.
func (t Traits) UnitRows(dim int) int {
	if t.Axis == AxisChannel {
		return max(1, t.BlockLen(dim))
	}
	return 1
}

// UnitBytes is the size of UnitRows rows at head size dim: the codes of
// every value and the parameters of every block.
func (t Traits) UnitBytes(dim int) int {
	rows := t.UnitRows(dim)
	blocks := dim // AxisChannel: one block per channel
	if t.Axis == AxisToken {
		blocks = dim / max(1, t.BlockLen(dim))
	}
	return rows*dim*t.Bits/8 + blocks*t.BlockMeta(dim)
}

// TileBytes is the size of a tile of rows rows at head size dim (rows
// rounded up to whole units): what Codec.TileBytes returns.
func (t Traits) TileBytes(dim, rows int) int {
	u := t.UnitRows(dim)
	return (rows + u - 1) / u * t.UnitBytes(dim)
}

// outlierCount is the number of outliers of a block of m values at
// fraction p (at most m).
func outlierCount(p float64, m int) int {
	return min(m, int(math.Ceil(p*float64(m)-1e-9)))
}
