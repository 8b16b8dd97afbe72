package quant

import (
	"fmt"
	"strings"

	"github.com/kvqlabs/kvq/internal/simd"
)

// FP8 KV storage as vLLM does it (docs/quant-schemes.md §1.2): code =
// fp8(x/scale) with the division in float32, value = code·scale. Rows are dim codes, one byte per
// value; the scales live in the codec, not in the tile.

// The fp8 formats with vLLM's defaults: one scale of 1.0 per layer side,
// saturating conversion. Use NewFP8 or Lookup ("fp8:dynamic",
// "fp8:scales@file.json") for calibrated scales.
var (
	FP8E4M3 Format = &fp8Format{kind: E4M3}
	FP8E5M2 Format = &fp8Format{kind: E5M2}
)

// FP8Options configure NewFP8. The zero value is vLLM's default: one scale of
// 1.0 per layer for K and one for V, saturating conversion.
type FP8Options struct {
	// PerHead keeps one scale per KV head instead of one per layer side
	// (vLLM's attn_head strategy). With Scales, the granularity comes from
	// the source instead.
	PerHead bool
	// Dynamic sets each scale from the first data it sees, as vLLM's
	// calculate_kv_scales does: max|x|/200 for keys, max|x|/100 for values,
	// then frozen. The Format value holds these scales; a kvcache.Cache
	// takes a fresh copy of them (see Stateful), so caches never share what
	// they learned.
	//
	// vLLM measures the first forward batch of the whole layer; a codec sees
	// what the cache encodes, which with kvcache.Put is one token at a time,
	// so a per-tensor scale comes from head 0's first token row. Call
	// PrimeFP8Scales with the first batch to match vLLM.
	Dynamic bool
	// Scales supplies static scales (LoadFP8Scales reads vLLM's and kvq's
	// JSON files). nil means 1.0.
	Scales ScaleSource
	// NonSaturating converts like PyTorch's cast (overflow gives NaN for
	// E4M3, ±Inf for E5M2) instead of CUDA's saturating one.
	NonSaturating bool
	// Rotate applies llama.cpp's Hadamard rotation to rows before storing
	// them (see the q4_0:rot formats).
	Rotate bool
}

// NewFP8 makes an fp8 format.
func NewFP8(kind FP8Kind, opts FP8Options) (Format, error) {
	f := &fp8Format{kind: kind, opts: opts}
	switch {
	case kind != E4M3 && kind != E5M2:
		return nil, fmt.Errorf("%w: fp8 kind %d (valid: E4M3, E5M2)", ErrOption, kind)
	case opts.Dynamic && opts.Scales != nil:
		return nil, fmt.Errorf("%w: %s: dynamic and static scales exclude each other", ErrOption, f.Name())
	case opts.PerHead && opts.Scales != nil:
		return nil, fmt.Errorf("%w: %s: with a scales file, the file decides per-tensor or per-head (a number or a list per layer); drop head", ErrOption, f.Name())
	}
	if sf, ok := opts.Scales.(*FP8ScaleFile); ok {
		want := "float8_" + map[FP8Kind]string{E4M3: "e4m3fn", E5M2: "e5m2"}[kind]
		if sf.dtype != "" && sf.dtype != want {
			return nil, fmt.Errorf("%w: %s: scales file %s is for %s", ErrOption, f.Name(), sf.name, sf.dtype)
		}
	}
	if opts.Dynamic {
		f.dyn = &fp8ScaleTable{}
	}
	return f, nil
}

// PrimeFP8Scales sets the dynamic scales of format f (made with
// FP8Options.Dynamic, or "fp8:dynamic") for one layer side from x, a batch of
// rows of heads·dim values each (token-major, as the runtime holds K and V),
// as vLLM's calculate_kv_scales does with the first forward batch. Scales that
// are already frozen stay as they are; the call does nothing for other
// formats. The runtime may call it before the first Put of a layer.
func PrimeFP8Scales(f Format, layer int, key bool, heads, dim int, x []float32) {
	for {
		u, ok := f.(interface{ Unwrap() Format })
		if !ok {
			break
		}
		f = u.Unwrap() // absmax scales do not depend on the dimension order
	}
	if f4, ok := f.(*fp4Format); ok && f4.dyn != nil && heads > 0 && dim > 0 {
		f4.tensorScale(layer, key).forEncode(x[:len(x)/(heads*dim)*heads*dim]) // nvfp4:dynamic: per tensor
		return
	}
	ff, ok := f.(*fp8Format)
	if !ok || ff.dyn == nil || heads <= 0 || dim <= 0 {
		return
	}
	x = x[:len(x)/(heads*dim)*heads*dim]
	if ff.opts.Rotate { // the scales see what is stored: rotated rows
		m, err := hadamardBlock(ff.Name(), dim, key)
		if err != nil {
			return // NewCodec reports the head size
		}
		x = append([]float32(nil), x...)
		hadamardRotate(x, m)
	}
	if !ff.opts.PerHead {
		ff.scaleFor(layer, 0, key).forEncode(x)
		return
	}
	row := make([]float32, 0, len(x)/heads)
	for h := 0; h < heads; h++ {
		row = row[:0]
		for t := 0; (t+1)*heads*dim <= len(x); t++ {
			row = append(row, x[(t*heads+h)*dim:(t*heads+h+1)*dim]...)
		}
		ff.scaleFor(layer, h, key).forEncode(row)
	}
}

type fp8Format struct {
	kind FP8Kind
	opts FP8Options
	dyn  *fp8ScaleTable // dynamic scales, nil otherwise
}

var (
	_ Format    = (*fp8Format)(nil)
	_ Describer = (*fp8Format)(nil)
	_ Stateful  = (*fp8Format)(nil)
)

var _ GeometryChecker = (*fp8Format)(nil)

// CheckGeometry implements GeometryChecker for static scales whose source
// knows its model (a scales file).
func (f *fp8Format) CheckGeometry(layers, kvHeads int) error {
	if gc, ok := f.opts.Scales.(GeometryChecker); ok {
		return gc.CheckGeometry(layers, kvHeads)
	}
	return nil
}

// Fresh implements Stateful: a dynamic format gets an empty scale table;
// other fp8 formats hold no learned state and return themselves.
func (f *fp8Format) Fresh() Format {
	if f.dyn == nil {
		return f
	}
	g := *f
	g.dyn = &fp8ScaleTable{}
	return &g
}

// Name is "fp8-e4m3" or "fp8-e5m2" followed by the options in canonical
// order: head, dynamic, scales@SOURCE, nosat, rot.
func (f *fp8Format) Name() string {
	var b strings.Builder
	b.WriteString("fp8-" + f.kind.String())
	if f.opts.PerHead {
		b.WriteString(":head")
	}
	if f.opts.Dynamic {
		b.WriteString(":dynamic")
	}
	if f.opts.Scales != nil {
		b.WriteString(":scales@" + f.opts.Scales.String())
	}
	if f.opts.NonSaturating {
		b.WriteString(":nosat")
	}
	if f.opts.Rotate {
		b.WriteString(":rot")
	}
	return b.String()
}

// Traits implements Format: one fp8 code per value, the scales held by
// the codecs (float32, per layer side or per KV head).
func (f *fp8Format) Traits(key bool) Traits {
	t := Traits{Family: FamilyFP8, Value: DTypeE4M3, Bits: 8, Block: 1, Scale: ScaleTensor, ScaleType: DTypeF32,
		Saturate: !f.opts.NonSaturating, Dynamic: f.opts.Dynamic, Flush: 1}
	if f.kind == E5M2 {
		t.Value = DTypeE5M2
	}
	switch sf, isFile := f.opts.Scales.(*FP8ScaleFile); {
	case f.opts.PerHead:
		t.Scale = ScaleHead
	case isFile:
		t.Scale = sf.granularity(key)
	case f.opts.Scales != nil:
		t.Scale = ScaleHead // the source decides per layer; per head is the general case
	}
	if f.opts.Rotate {
		t.Rotation = RotationHadamard
	}
	return t
}

func (f *fp8Format) Describe() (string, []string) {
	scale := "per-tensor scale 1.0"
	switch {
	case f.opts.Dynamic:
		scale = "dynamic scales (absmax/200 K, /100 V of the first data)"
	case f.opts.Scales != nil:
		scale = "static scales from " + f.opts.Scales.String()
	case f.opts.PerHead:
		scale = "per-head scales 1.0"
	}
	if f.opts.PerHead && f.opts.Dynamic {
		scale = "per-head " + scale
	}
	s := fmt.Sprintf("OCP fp8 %s (max %g), 8 bits/value, vLLM semantics, %s", strings.ToUpper(f.kind.String()), f.kind.Max(), scale)
	if f.opts.NonSaturating {
		s += ", non-saturating cast"
	}
	if f.opts.Rotate {
		s += ", Hadamard-rotated"
	}
	var needs []string
	switch {
	case f.opts.Scales != nil:
		needs = append(needs, "scales file")
	case f.kind == E4M3 && !f.opts.Dynamic:
		needs = append(needs, "calibrated scales (vLLM warns at 1.0)")
	}
	return s, needs
}

func (f *fp8Format) scaleFor(layer, head int, key bool) *fp8Scale {
	div := float32(FP8DynamicVDivisor)
	if key {
		div = FP8DynamicKDivisor
	}
	if !f.opts.PerHead {
		head = -1
	}
	return f.dyn.get(fp8ScaleKey{layer: layer, head: head, key: key}, div, fp8ScaleLimit(f.kind))
}

func (f *fp8Format) NewCodec(p CodecParams) (Codec, error) {
	if p.Dim <= 0 {
		return nil, fmt.Errorf("%w: %s: head size %d", ErrDim, f.Name(), p.Dim)
	}
	c := &fp8Codec{kind: f.kind, dim: p.Dim, sat: !f.opts.NonSaturating}
	perHead := f.opts.PerHead
	switch {
	case f.dyn != nil:
		c.scale = f.scaleFor(p.Layer, p.Head, p.Key)
	case f.opts.Scales != nil:
		s, err := f.opts.Scales.Scales(p.Layer, p.Key)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name(), err)
		}
		if len(s) == 0 {
			return nil, fmt.Errorf("%w: %s: %s has no scales for layer %d", ErrOption, f.Name(), f.opts.Scales, p.Layer)
		}
		sc := s[0]
		switch {
		case len(s) == 1:
		case p.Head < len(s):
			sc = s[p.Head]
			perHead = true
		default:
			side := "v"
			if p.Key {
				side = "k"
			}
			return nil, fmt.Errorf("%w: %s: %s lists %d %s scales for layer %d, KV head %d has none", ErrOption, f.Name(), f.opts.Scales, len(s), side, p.Layer, p.Head)
		}
		if !(sc > 0 && sc <= fp8ScaleLimit(f.kind)) {
			return nil, fmt.Errorf("%w: %s: %s: scale %g of layer %d is not in (0, %g]", ErrOption, f.Name(), f.opts.Scales, sc, p.Layer, fp8ScaleLimit(f.kind))
		}
		c.scale = newStaticScale(sc)
	default:
		c.scale = newStaticScale(1)
	}
	// A per-tensor scale is counted once per layer side, by head 0's codec.
	if perHead || p.Head == 0 {
		c.state = 4
	}
	if f.opts.Rotate {
		return newRotCodec(f.Name(), c, p)
	}
	return c, nil
}

// fp8Codec stores rows of dim fp8 codes.
type fp8Codec struct {
	kind  FP8Kind
	dim   int
	sat   bool
	scale *fp8Scale
	state int
}

var _ Codec = (*fp8Codec)(nil)

func (c *fp8Codec) TokenGroup() int        { return 1 }
func (c *fp8Codec) TileBytes(rows int) int { return rows * c.dim }
func (c *fp8Codec) StateBytes() int        { return c.state }

// Scale returns the codec's scale (0 for a dynamic scale that has seen only
// zeros so far).
func (c *fp8Codec) Scale() float32 { return c.scale.get() }

func (c *fp8Codec) Encode(tile []byte, row0 int, src []float32, n int) {
	src = src[:n*c.dim]
	dst := tile[row0*c.dim : (row0+n)*c.dim]
	s := c.scale.forEncode(src)
	if s == 0 {
		s = 1 // a dynamic scale that has seen only zeros: the codes are ±0 anyway
	}
	p := &e4m3Params
	if c.kind == E5M2 {
		p = &e5m2Params
	}
	for i, x := range src {
		dst[i] = fp8Encode(x/s, p, c.sat)
	}
}

func (c *fp8Codec) Decode(dst []float32, tile []byte, row0, n int) {
	c.decodeRows(dst, tile[row0*c.dim:(row0+n)*c.dim])
}

// decodeRows writes rows of codes as float32 values (scale applied) with
// the simd fp8 decoders.
func (c *fp8Codec) decodeRows(dst []float32, rows []byte) {
	if c.kind == E5M2 {
		simd.E5M2ToF32(dst[:len(rows)], rows, c.scale.get())
	} else {
		simd.E4M3ToF32(dst[:len(rows)], rows, c.scale.get())
	}
}

func (c *fp8Codec) Scores(dst []float32, ldd int, q []float32, nq int, tile []byte, row0, n int) {
	scoresChunked(c.Decode, c.dim, dst, ldd, q, nq, tile, row0, n)
}

func (c *fp8Codec) Accumulate(acc []float32, w []float32, ldw int, nq int, tile []byte, row0, n int) {
	accumulateChunked(c.Decode, c.dim, acc, w, ldw, nq, tile, row0, n)
}

// fp8Families lists the fp8 formats.
func fp8Families() []family {
	mk := func(kind FP8Kind) func(string, []string) (Format, error) {
		return func(base string, opts []string) (Format, error) { return parseFP8(kind, base, opts) }
	}
	return []family{
		{base: "fp8-e4m3", aliases: []string{"fp8", "fp8_e4m3", "fp8-e4m3fn", "float8_e4m3fn"}, make: mk(E4M3),
			presets: []string{"fp8-e4m3", "fp8-e4m3:dynamic"}, options: fp8Options},
		{base: "fp8-e5m2", aliases: []string{"fp8_e5m2", "float8_e5m2"}, make: mk(E5M2),
			presets: []string{"fp8-e5m2"}, options: fp8Options},
	}
}

// fp8Options are examples of the options (scales@ names a file).
var fp8Options = []string{"head", "dynamic", "nosat", "rot"}

const fp8OptionList = "head, dynamic, scales@FILE.json, nosat, rot"

func parseFP8(kind FP8Kind, base string, opts []string) (Format, error) {
	var o FP8Options
	seen := map[string]bool{}
	for _, opt := range opts {
		key, arg, hasArg := strings.Cut(opt, "@")
		if seen[key] {
			return nil, fmt.Errorf("%w: %s: option %q given twice", ErrOption, base, key)
		}
		seen[key] = true
		switch {
		case key == "head" && !hasArg:
			o.PerHead = true
		case key == "dynamic" && !hasArg:
			o.Dynamic = true
		case key == "nosat" && !hasArg:
			o.NonSaturating = true
		case key == "rot" && !hasArg:
			o.Rotate = true
		case key == "scales" && hasArg:
			if arg == "" {
				return nil, fmt.Errorf("%w: %s: scales@ needs a file name", ErrOption, base)
			}
			sf, err := LoadFP8Scales(arg)
			if err != nil {
				return nil, err
			}
			o.Scales = sf
		default:
			return nil, fmt.Errorf("%w: %s: unknown option %q (valid: %s)", ErrOption, base, opt, fp8OptionList)
		}
	}
	return NewFP8(kind, o)
}
