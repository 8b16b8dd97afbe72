package gpu

// Which KV formats the kernels store, and how, decided from the formats'
// traits (quant.Traits) alone: a format's name only labels an error. This
// file has no build tag, so that the decision is tested by plain
// go test ./pkg/gpu/ (kvformat_test.go) on machines without CUDA.

import (
	"fmt"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// Side format kinds, as the kernels number them (kernels/kvformats.cuh).
// A side's code is kind | group<<8 | flags.
const (
	kvF32 = iota
	kvF16
	kvBF16
	kvE4M3
	kvE5M2
	kvQ80
	kvQ40
	kvQ41
	kvQ50
	kvQ51
	kvIQ4NL
	kvInt8
	kvInt4
	kvInt2
	kvNVFP4
	kvFP4E2M1
)

// Format code flags.
const (
	kvSym   = 1 << 20 // symmetric int groups
	kvNoSat = 1 << 21 // fp8, non-saturating cast
	kvDyn   = 1 << 22 // fp8:dynamic (host-only flag: the kernels see a static scale)
)

// kvGroupMax is the largest int group the code holds (12 bits).
const kvGroupMax = 1<<12 - 1

// blockKinds are the llama.cpp blocks the kernels know, by their traits:
// bits per value, whether blocks carry a minimum, and the codebook.
var blockKinds = []struct {
	bits     int
	zero     bool
	codebook quant.Codebook
	kind     int
}{
	{8, false, quant.CodebookLinear, kvQ80},
	{4, false, quant.CodebookLinear, kvQ40},
	{4, true, quant.CodebookLinear, kvQ41},
	{5, false, quant.CodebookLinear, kvQ50},
	{5, true, quant.CodebookLinear, kvQ51},
	{4, false, quant.CodebookIQ4NL, kvIQ4NL},
}

// kvFmt is a side's format as the kernels see it.
type kvFmt struct {
	code     int  // kind | group<<8 | flags
	rowBytes int  // bytes per row (token) of a tile
	rows     bool // a tile's rows are contiguous (quant.PackRows, PackRowTail: all but the int groups)
	fp8      bool // the codecs hold a scale (fp8's, nvfp4's tensor scale; kernels read it per KV head)
	dynamic  bool // scales learnt from the cache's first step (WriteKV uploads them)
}

func (k kvFmt) kind() int { return k.code & 0xff }

// units is the number of encoding units of one KV head's row (the write
// kernel's threads; kernels/kvformats.cuh, kvq_units).
func (k kvFmt) units(dim int) int {
	switch kind := k.kind(); {
	case kind <= kvE5M2:
		return dim
	case kind == kvNVFP4 || kind == kvFP4E2M1:
		return dim / 16
	case kind >= kvInt8:
		group := k.code >> 8 & 0xfff
		if kind == kvInt4 && group%32 != 0 || kind == kvInt2 && group%4 != 0 {
			return 1
		}
		return dim / group
	}
	return dim / 32
}

// kvRuns lists what the kernels store, for messages.
const kvRuns = "fp32, fp16, bf16, fp8, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, nvfp4, fp4_e2m1 and per-token int8/int4/int2 groups run there, with or without sink and residual windows"

// kvCode classifies one side's traits: the kernels' kind, the int group
// (the traits' Block: 0 for the whole row) and flags, or why no kernel
// stores it.
func kvCode(t quant.Traits) (kind, group, flags int, why string) {
	kind = -1
	switch t.Family {
	case quant.FamilyFloat:
		switch t.Value {
		case quant.DTypeF32:
			kind = kvF32
		case quant.DTypeF16:
			kind = kvF16
		case quant.DTypeBF16:
			kind = kvBF16
		default:
			return 0, 0, 0, fmt.Sprintf("float values of type %v", t.Value)
		}
	case quant.FamilyFP8:
		switch t.Value {
		case quant.DTypeE4M3:
			kind = kvE4M3
		case quant.DTypeE5M2:
			kind = kvE5M2
		default:
			return 0, 0, 0, fmt.Sprintf("fp8 values of type %v", t.Value)
		}
		if t.Scale.InTile() || t.ScaleType != quant.DTypeF32 {
			return 0, 0, 0, fmt.Sprintf("fp8 with %v scales of type %v", t.Scale, t.ScaleType)
		}
		if !t.Saturate {
			flags |= kvNoSat
		}
		if t.Dynamic {
			flags |= kvDyn
		}
	case quant.FamilyBlock:
		for _, bk := range blockKinds {
			if t.Bits == bk.bits && (t.Zero != quant.DTypeNone) == bk.zero && t.Codebook == bk.codebook {
				kind = bk.kind
			}
		}
		if kind < 0 || t.Block != 32 || t.Axis != quant.AxisToken || t.ScaleType != quant.DTypeF16 || t.Zero != quant.DTypeNone && t.Zero != quant.DTypeF16 {
			return 0, 0, 0, fmt.Sprintf("%d-bit blocks of %d values with a %v codebook", t.Bits, t.Block, t.Codebook)
		}
	case quant.FamilyInt:
		switch {
		case t.Axis == quant.AxisChannel:
			return 0, 0, 0, "per-channel int groups span tokens"
		case t.Block > kvGroupMax:
			return 0, 0, 0, fmt.Sprintf("int groups of more than %d values", kvGroupMax)
		case t.Packing != quant.PackSplit || t.ScaleType != quant.DTypeF16 || t.Zero != quant.DTypeNone && t.Zero != quant.DTypeF16:
			return 0, 0, 0, fmt.Sprintf("int groups packed as %v with %v scales and %v zeros", t.Packing, t.ScaleType, t.Zero)
		}
		switch t.Bits {
		case 8:
			kind = kvInt8
		case 4:
			kind = kvInt4
		case 2:
			kind = kvInt2
		default:
			return 0, 0, 0, fmt.Sprintf("%d-bit ints", t.Bits)
		}
		group = t.Block
		if t.Zero == quant.DTypeNone {
			flags |= kvSym
		}
	case quant.FamilyFP4:
		switch {
		case t.Value != quant.DTypeE2M1 || t.Bits != 4 || t.Block != 16 || t.Axis != quant.AxisToken || t.Packing != quant.PackRowTail:
			return 0, 0, 0, fmt.Sprintf("fp4 blocks of %d %v values packed as %v", t.Block, t.Value, t.Packing)
		case t.ScaleType == quant.DTypeE4M3 && t.TensorScale == quant.DTypeF32 && t.Saturate:
			kind = kvNVFP4
		case t.ScaleType == quant.DTypeUE8M0 && t.TensorScale == quant.DTypeNone:
			kind = kvFP4E2M1
		default:
			return 0, 0, 0, fmt.Sprintf("fp4 with %v block scales under a %v tensor scale", t.ScaleType, t.TensorScale)
		}
		if t.Dynamic {
			flags |= kvDyn
		}
	default:
		return 0, 0, 0, kvRuns
	}
	// What every kernel assumes of a row: it is encoded alone, in the
	// order given, as it was written (no rotation or permutation, no fp16
	// window of the format's own, no outliers).
	switch {
	case t.Rotation == quant.RotationHadamard:
		return 0, 0, 0, "Hadamard-rotated rows"
	case t.Rotation != quant.RotationNone:
		return 0, 0, 0, fmt.Sprintf("%v rotations", t.Rotation)
	case t.Interleaved:
		return 0, 0, 0, "keys in GGUF order (--k-order gguf)"
	case t.Flush != 1 || t.PromptFlush || t.Residual > 0:
		return 0, 0, 0, "token groups (staging rows)"
	case t.PreRoPE:
		return 0, 0, 0, "pre-RoPE keys"
	case t.Outliers > 0:
		return 0, 0, 0, "fp16 outliers"
	case t.Packing != quant.PackRows && kind < kvInt8:
		return 0, 0, 0, fmt.Sprintf("%v tiles", t.Packing)
	}
	return kind, group, flags, ""
}

// unsupportedKV is the error for format f, whose traits no kernel stores,
// wrapping backend.ErrUnsupported.
func unsupportedKV(f quant.Format, why string) error {
	return fmt.Errorf("%w: the GPU has no kernel for KV format %s yet (%s; use --device cpu for it)", backend.ErrUnsupported, f.Name(), why)
}

// supportsKV reports whether the kernels store both sides of format f,
// decided from its traits: nil, or an error wrapping
// backend.ErrUnsupported that names f and says why.
func supportsKV(f quant.Format) error {
	for _, key := range []bool{true, false} {
		if _, _, _, why := kvCode(f.Traits(key)); why != "" {
			return unsupportedKV(f, why)
		}
	}
	return nil
}

// kvFormat returns the kernels' view of format f's keys (key true) or
// values for rows of dim values.
func kvFormat(f quant.Format, key bool, dim int) (kvFmt, error) {
	t := f.Traits(key)
	kind, group, flags, why := kvCode(t)
	if why != "" {
		return kvFmt{}, unsupportedKV(f, why)
	}
	k := kvFmt{code: kind | flags&^kvDyn, rows: t.Packing == quant.PackRows || t.Packing == quant.PackRowTail,
		fp8: kind == kvE4M3 || kind == kvE5M2 || kind == kvNVFP4, dynamic: flags&kvDyn != 0}
	if kind >= kvInt8 && kind <= kvInt2 {
		group = t.BlockLen(dim) // the whole row for 0, as pkg/quant's tokenCodec
		if dim%group != 0 || dim*t.Bits%8 != 0 || group > kvGroupMax {
			return kvFmt{}, fmt.Errorf("%w: gpu: %s with head size %d", kvcache.ErrGeometry, f.Name(), dim)
		}
		k.code |= group << 8
	}
	if kind >= kvQ80 && kind <= kvIQ4NL && dim%32 != 0 || (kind == kvNVFP4 || kind == kvFP4E2M1) && dim%16 != 0 {
		return kvFmt{}, fmt.Errorf("%w: gpu: %s with head size %d", kvcache.ErrGeometry, f.Name(), dim)
	}
	k.rowBytes = t.UnitBytes(dim)
	return k, nil
}

// kvLayout returns the kernels' view of every layer side of layout l, or
// an error wrapping backend.ErrUnsupported for a side no kernel stores
// (its format's traits, token groups, pre-RoPE keys, latent attention), or
// kvcache.ErrGeometry for a tile whose bytes the kernels would not fill
// exactly. Sink and residual fp16 windows are the storage's own (any
// format).
func kvLayout(l *kvcache.Layout) ([][2]kvFmt, error) {
	out := make([][2]kvFmt, len(l.Layers))
	for i := range l.Layers {
		for j, side := range [2]*kvcache.Side{&l.Layers[i].K, &l.Layers[i].V} {
			if side.Codecs == nil {
				return nil, fmt.Errorf("%w: gpu: layer %d stores no values (latent attention)", backend.ErrUnsupported, i)
			}
			kf, err := kvFormat(side.Format, j == 0, l.HeadDim)
			if err != nil {
				return nil, fmt.Errorf("layer %d: %w", i, err)
			}
			if sh := side.Shape(); sh.Group > 1 || sh.Staging > 0 || side.PreRoPE {
				return nil, fmt.Errorf("%w: gpu: layer %d %s: token groups (staging rows) and pre-RoPE keys have no CUDA kernel yet", backend.ErrUnsupported, i, side.Format.Name())
			}
			if want := l.BlockTokens * kf.rowBytes; side.TileBytes != want {
				return nil, fmt.Errorf("%w: gpu: layer %d %s tile of %d bytes, want %d", kvcache.ErrGeometry, i, side.Format.Name(), side.TileBytes, want)
			}
			out[i][j] = kf
		}
	}
	return out, nil
}
