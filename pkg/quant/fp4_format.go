package quant

import (
	"fmt"
	"math"
	"strings"

	"github.com/kvqlabs/kvq/internal/simd"
)

// FP4 KV storage as the engines ship it (docs/quant-schemes.md §9): E2M1
// codes in blocks of 16 values along head_dim, one scale byte per block.
// A row of dim values (dim a multiple of 16) takes dim/2 bytes of codes,
// element 2j in the low nibble of byte j and element 2j+1 in the high one,
// then dim/16 scale bytes: vLLM's nvfp4 head row (head_size/2 +
// head_size/16 bytes) and SGLang's fp4_e2m1 buffers (codes [.., dim/2],
// uint8 scales [.., dim/16]), 4.5 bits per value.
//
//   - nvfp4 (vLLM, TensorRT-LLM): E4M3 block scales under an fp32
//     per-tensor scale sg, held by the codec (1.0: vLLM's k_scale and
//     v_scale when the checkpoint has none; "nvfp4:dynamic" sets it from the
//     first data a layer side sees to amax/(448·6), NVIDIA's global scale,
//     then freezes it, as fp8:dynamic does). Per block, sf =
//     E4M3(fp32(amax·(1/6))/sg) (saturating at 448), codes =
//     E2M1(x · 1/(sf·sg)) rounded to nearest even (saturating at ±6);
//     x̂ = code · (sf·sg).
//   - fp4_e2m1 (SGLang): power-of-two scales, one byte e+127 with e =
//     ⌈log2 max(amax/6, 1e−10)⌉, codes = E2M1(x/2^e) with ties away
//     from zero; x̂ = code · 2^e.
var (
	NVFP4   Format = &fp4Format{}
	FP4E2M1 Format = &fp4Format{mx: true}
)

type fp4Format struct {
	mx  bool           // SGLang's power-of-two scales; false: nvfp4
	dyn *fp8ScaleTable // nvfp4:dynamic's tensor scales, nil otherwise
}

var (
	_ Format    = (*fp4Format)(nil)
	_ Describer = (*fp4Format)(nil)
	_ Stateful  = (*fp4Format)(nil)
)

// NVFP4DynamicDivisor is what nvfp4:dynamic divides the first data's
// largest magnitude by to get the tensor scale: 448·6, so that the largest
// block scale lands on E4M3's largest value.
const NVFP4DynamicDivisor = 448 * 6

// Name is "nvfp4", "nvfp4:dynamic" or "fp4_e2m1", as the engines spell them.
func (f *fp4Format) Name() string {
	switch {
	case f.mx:
		return "fp4_e2m1"
	case f.dyn != nil:
		return "nvfp4:dynamic"
	}
	return "nvfp4"
}

// Fresh implements Stateful: nvfp4:dynamic gets an empty scale table; the
// other fp4 formats hold no learned state and return themselves.
func (f *fp4Format) Fresh() Format {
	if f.dyn == nil {
		return f
	}
	return &fp4Format{dyn: &fp8ScaleTable{}}
}

// tensorScale is the shared tensor scale of one layer side.
func (f *fp4Format) tensorScale(layer int, key bool) *fp8Scale {
	if f.dyn == nil {
		return newStaticScale(1)
	}
	return f.dyn.get(fp8ScaleKey{layer: layer, head: -1, key: key}, NVFP4DynamicDivisor, 0x1p127/NVFP4DynamicDivisor)
}

// Traits implements Format: E2M1 codes in 16-value blocks along head_dim,
// each row's codes then its block scales (E4M3 under a codec-held f32
// tensor scale for nvfp4, UE8M0 for fp4_e2m1).
func (f *fp4Format) Traits(bool) Traits {
	t := Traits{Family: FamilyFP4, Value: DTypeE2M1, Bits: 4, Block: fp4Block, Packing: PackRowTail,
		Scale: ScaleBlock, ScaleType: DTypeE4M3, TensorScale: DTypeF32, Saturate: true, Flush: 1}
	if f.mx {
		t.ScaleType, t.TensorScale, t.Saturate = DTypeUE8M0, DTypeNone, false
	}
	t.Dynamic = f.dyn != nil
	return t
}

func (f *fp4Format) Describe() (string, []string) {
	if f.mx {
		return "SGLang fp4_e2m1: E2M1 values in blocks of 16 with a power-of-two (UE8M0) scale computed on the fly, 4.5 bits/value", []string{}
	}
	scale := "1.0"
	if f.dyn != nil {
		scale = "amax/(448·6) of the first data"
	}
	return "NVIDIA nvfp4 (vLLM, TensorRT-LLM): E2M1 values in blocks of 16 with an E4M3 scale, under a per-tensor fp32 scale (" + scale + "), 4.5 bits/value", []string{}
}

func (f *fp4Format) NewCodec(p CodecParams) (Codec, error) {
	if p.Dim <= 0 || p.Dim%fp4Block != 0 {
		return nil, fmt.Errorf("%w: %s: head size %d is not a multiple of %d", ErrDim, f.Name(), p.Dim, fp4Block)
	}
	c := &fp4Codec{dim: p.Dim, mx: f.mx}
	if !f.mx {
		c.sg = f.tensorScale(p.Layer, p.Key)
	}
	// A per-tensor scale is counted once per layer side, by head 0's codec.
	if !f.mx && p.Head == 0 {
		c.state = 4
	}
	return c, nil
}

// fp4Codec stores rows of dim/2 code bytes followed by dim/16 scale bytes.
type fp4Codec struct {
	dim   int
	mx    bool
	sg    *fp8Scale // nvfp4's decode-side tensor scale (nil for fp4_e2m1)
	state int
}

var _ Codec = (*fp4Codec)(nil)

func (c *fp4Codec) TokenGroup() int        { return 1 }
func (c *fp4Codec) rowBytes() int          { return c.dim/2 + c.dim/fp4Block }
func (c *fp4Codec) TileBytes(rows int) int { return rows * c.rowBytes() }
func (c *fp4Codec) StateBytes() int        { return c.state }

func (c *fp4Codec) Encode(tile []byte, row0 int, src []float32, n int) {
	rb := c.rowBytes()
	src = src[:n*c.dim]
	var sg float32
	if !c.mx {
		if sg = c.sg.forEncode(src); sg == 0 {
			sg = 1 // a dynamic scale that has seen only zeros: the codes are ±0 anyway
		}
	}
	for r := range n {
		row := tile[(row0+r)*rb : (row0+r+1)*rb]
		x := src[r*c.dim : (r+1)*c.dim]
		if c.mx {
			encodeMXFP4Row(row, x)
		} else {
			encodeNVFP4Row(row, x, sg)
		}
	}
}

// encodeNVFP4Row stores one row with E4M3 block scales under tensor scale sg.
func encodeNVFP4Row(row []byte, x []float32, sg float32) {
	dim := len(x)
	for b := 0; b < dim/fp4Block; b++ {
		blk := x[b*fp4Block : (b+1)*fp4Block]
		var amax float32
		for _, v := range blk {
			if a := abs32f(v); a > amax {
				amax = a
			}
		}
		sc := EncodeE4M3(amax*nvfp4Sixth/sg, true)
		row[dim/2+b] = sc
		var out float32
		if sd := DecodeE4M3(sc) * sg; sd != 0 {
			out = min(1/sd, math.MaxFloat32) // finite, so that 0·out is 0
		}
		codes := row[b*fp4Block/2 : (b+1)*fp4Block/2]
		for j := range codes {
			codes[j] = EncodeE2M1(blk[2*j]*out) | EncodeE2M1(blk[2*j+1]*out)<<4
		}
	}
}

// encodeMXFP4Row stores one row with power-of-two block scales.
func encodeMXFP4Row(row []byte, x []float32) {
	dim := len(x)
	for b := 0; b < dim/fp4Block; b++ {
		blk := x[b*fp4Block : (b+1)*fp4Block]
		var amax float32
		for _, v := range blk {
			if a := abs32f(v); a > amax {
				amax = a
			}
		}
		e := min(ceilLog2(max(amax/6, mxfp4Floor)), mxfp4MaxExp)
		row[dim/2+b] = uint8(e + 127)
		inv := float32(math.Ldexp(1, -e)) // exact: e is in [−33, 125]
		codes := row[b*fp4Block/2 : (b+1)*fp4Block/2]
		for j := range codes {
			codes[j] = EncodeE2M1Up(blk[2*j]*inv) | EncodeE2M1Up(blk[2*j+1]*inv)<<4
		}
	}
}

// ceilLog2 is ⌈log2 v⌉ for a positive v, exactly (mxfp4MaxExp for +Inf).
func ceilLog2(v float32) int {
	if math.IsInf(float64(v), 0) {
		return mxfp4MaxExp
	}
	frac, exp := math.Frexp(float64(v)) // v = frac·2^exp, frac in [0.5, 1)
	if frac == 0.5 {
		return exp - 1
	}
	return exp
}

// ue8m0Values holds 2^(b−127) for every scale byte (+Inf for 255).
var ue8m0Values = func() (t [256]float32) {
	for b := range 256 {
		t[b] = float32(math.Ldexp(1, b-127))
	}
	return t
}()

// Scale returns nvfp4's tensor scale (0 for a dynamic one that has seen
// only zeros so far), as fp8's codecs return theirs; 1 for fp4_e2m1.
func (c *fp4Codec) Scale() float32 { return c.tensorScale() }

// tensorScale is the tensor scale rows are read with (1 for fp4_e2m1).
func (c *fp4Codec) tensorScale() float32 {
	if c.mx {
		return 1
	}
	return c.sg.get()
}

// blockScale is the factor of a block with scale byte sb under tensor scale sg.
func (c *fp4Codec) blockScale(sb byte, sg float32) float32 {
	if c.mx {
		return ue8m0Values[sb]
	}
	return DecodeE4M3(sb) * sg
}

// Decode maps each row's codes through the E2M1 table with the simd
// table-lookup kernel (codes low nibble first, as the tile stores them),
// then multiplies each block by its scale: the same float32 products as
// decodeGo, the Go twin it is tested against on every kernel set.
func (c *fp4Codec) Decode(dst []float32, tile []byte, row0, n int) {
	rb, sg := c.rowBytes(), c.tensorScale()
	dst = dst[:n*c.dim]
	for r := range n {
		row := tile[(row0+r)*rb : (row0+r+1)*rb]
		out := dst[r*c.dim : (r+1)*c.dim]
		simd.LUT4ToF32(out, row[:c.dim/2], &e2m1Values)
		for b := 0; b < c.dim/fp4Block; b++ {
			s := c.blockScale(row[c.dim/2+b], sg)
			o := out[b*fp4Block : (b+1)*fp4Block]
			for j := range o {
				o[j] *= s
			}
		}
	}
}

// decodeGo is Decode without the simd kernel.
func (c *fp4Codec) decodeGo(dst []float32, tile []byte, row0, n int) {
	rb, sg := c.rowBytes(), c.tensorScale()
	dst = dst[:n*c.dim]
	for r := range n {
		row := tile[(row0+r)*rb : (row0+r+1)*rb]
		out := dst[r*c.dim : (r+1)*c.dim]
		for b := 0; b < c.dim/fp4Block; b++ {
			s := c.blockScale(row[c.dim/2+b], sg)
			o := out[b*fp4Block : (b+1)*fp4Block]
			for j, q := range row[b*fp4Block/2 : (b+1)*fp4Block/2] {
				o[2*j] = e2m1Values[q&15] * s
				o[2*j+1] = e2m1Values[q>>4] * s
			}
		}
	}
}

// Scores and Accumulate read the packed tiles as the other block formats
// do: a few rows at a time decoded into a small buffer (the simd
// table-lookup kernel, then the block scales), then the shared
// register-blocked float kernels; the dequantized cache is never
// materialized. (A fused Go loop over the nibbles, scale applied per block,
// measured 2.5× slower for scores and 1.6× for value sums at head size 128.)

func (c *fp4Codec) Scores(dst []float32, ldd int, q []float32, nq int, tile []byte, row0, n int) {
	scoresChunked(c.Decode, c.dim, dst, ldd, q, nq, tile, row0, n)
}

func (c *fp4Codec) Accumulate(acc []float32, w []float32, ldw int, nq int, tile []byte, row0, n int) {
	accumulateChunked(c.Decode, c.dim, acc, w, ldw, nq, tile, row0, n)
}

// fp4Families lists the fp4 formats.
func fp4Families() []family {
	return []family{
		{base: "nvfp4", make: parseNVFP4, presets: []string{"nvfp4"}, options: []string{"dynamic"}},
		{base: "fp4_e2m1", aliases: []string{"fp4-e2m1"}, make: noOptions(FP4E2M1), presets: []string{"fp4_e2m1"}},
	}
}

// NewNVFP4Dynamic makes nvfp4:dynamic: nvfp4 whose tensor scale, one per
// layer side, is set from the first data it encodes (amax/(448·6)) and
// then frozen. Each value is a separate set of scales (see Stateful).
func NewNVFP4Dynamic() Format { return &fp4Format{dyn: &fp8ScaleTable{}} }

func parseNVFP4(base string, opts []string) (Format, error) {
	switch {
	case len(opts) == 0:
		return NVFP4, nil
	case len(opts) == 1 && opts[0] == "dynamic":
		return NewNVFP4Dynamic(), nil
	}
	return nil, fmt.Errorf("%w: %s: unknown option %q (valid: dynamic)", ErrOption, base, strings.Join(opts, ":"))
}
