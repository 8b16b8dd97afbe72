package quant

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// traitFormats returns every variant of the registry, the formats that
// read files (fp8 scales, KVQuant codebooks) and each of them with keys in
// GGUF order (InterleaveKeys).
func traitFormats(t *testing.T) []Format {
	t.Helper()
	reg := Formats()
	cbs := KVQuantCodebooks{Bits: 4, Keys: kvquantFormat{bits: 4}.codebook(), Values: kvquantFormat{bits: 4, uniform: true}.codebook()}
	cbPath := filepath.Join(t.TempDir(), "cb.json")
	if err := cbs.Save(cbPath); err != nil {
		t.Fatal(err)
	}
	names := append(reg.Variants(), reg.Names()...)
	names = append(names, "fp8:scales@testdata/fp8_scales_kvq.json", "fp8-e5m2:scales@testdata/fp8_scales_2layers.json:rot",
		"kvquant4:codebook@"+cbPath, "kvquant4:g32:o5:codebook@"+cbPath)
	var fs []Format
	for _, name := range names {
		f, err := reg.Lookup(name)
		if err != nil {
			t.Fatalf("Lookup(%q) = %v", name, err)
		}
		fs = append(fs, f, InterleaveKeys(f))
	}
	return fs
}

// TestTraitsBytes checks that every format's traits describe what its
// codecs do, for several head sizes and both sides: the byte math equals
// TileBytes, the token group, fp16 residual rows, pre-RoPE keys, prompt
// flushes, rotations and codec-held scales agree, and kvq formats' bytes
// per token follow.
func TestTraitsBytes(t *testing.T) {
	dims := []int{8, 24, 32, 48, 64, 80, 96, 128, 160, 256, 512}
	checked := 0
	for _, f := range traitFormats(t) {
		for _, dim := range dims {
			var perToken [2]float64
			ok := true
			for side, key := range []bool{true, false} {
				tr := f.Traits(key)
				c, err := f.NewCodec(CodecParams{Dim: dim, Key: key})
				if err != nil {
					ok = false
					continue // traits do not say which head sizes fit
				}
				checked++
				where := func() string {
					return f.Name() + " d" + strconv.Itoa(dim) + map[bool]string{true: " K", false: " V"}[key]
				}
				if tr.Family == FamilyUnknown || tr.Bits <= 0 || tr.Flush < 1 {
					t.Errorf("%s: traits %+v: no family, bits or flush", where(), tr)
					continue
				}
				if got, want := tr.Flush, c.TokenGroup(); got != want {
					t.Errorf("%s: Traits.Flush = %d, codec TokenGroup %d", where(), got, want)
				}
				for _, rows := range []int{tr.Flush, 2 * tr.Flush, 3 * tr.Flush, tr.Flush + tr.UnitRows(dim)} {
					if got, want := tr.TileBytes(dim, rows), c.TileBytes(rows); got != want {
						t.Errorf("%s: Traits.TileBytes(%d, %d) = %d, codec TileBytes %d (traits %+v)", where(), dim, rows, got, want, tr)
					}
				}
				if tr.Axis == AxisToken && tr.UnitBytes(dim) != dim/tr.BlockLen(dim)*tr.BlockBytes(dim) && tr.BlockLen(dim)*tr.Bits%8 == 0 {
					t.Errorf("%s: UnitBytes %d is not %d blocks of %d bytes", where(), tr.UnitBytes(dim), dim/tr.BlockLen(dim), tr.BlockBytes(dim))
				}
				resid := 0
				if w, ok := c.(Windowed); ok {
					resid = w.ResidualRows()
				}
				if tr.Residual != resid {
					t.Errorf("%s: Traits.Residual = %d, codec ResidualRows %d", where(), tr.Residual, resid)
				}
				pre, ok := c.(PreRoPE)
				if got := ok && pre.PreRoPE(); tr.PreRoPE != got {
					t.Errorf("%s: Traits.PreRoPE = %v, codec %v", where(), tr.PreRoPE, got)
				}
				pf, ok := c.(PromptFlusher)
				if got := ok && pf.FlushesFromPrompt(); tr.PromptFlush != got {
					t.Errorf("%s: Traits.PromptFlush = %v, codec %v", where(), tr.PromptFlush, got)
				}
				_, rot := c.(Rotator)
				if want := tr.Rotation != RotationNone || tr.Interleaved && dim%2 == 0; rot != want {
					t.Errorf("%s: codec is a Rotator: %v, traits say %v (%v, interleaved %v)", where(), rot, want, tr.Rotation, tr.Interleaved)
				}
				held := tr.Scale == ScaleTensor || tr.Scale == ScaleHead
				if got := c.StateBytes() > 0; got != (held || tr.TensorScale != DTypeNone) || held && tr.ScaleType != DTypeF32 {
					t.Errorf("%s: codec state %d bytes, traits: scale %v of %v, tensor scale %v", where(), c.StateBytes(), tr.Scale, tr.ScaleType, tr.TensorScale)
				}
				if tr.TensorScale != DTypeNone && c.StateBytes() != tr.TensorScale.Size() {
					t.Errorf("%s: codec state %d bytes, traits: one %v tensor scale", where(), c.StateBytes(), tr.TensorScale)
				}
				perToken[side] = float64(c.TileBytes(tr.Flush)) / float64(tr.Flush)
				if got := float64(tr.TileBytes(dim, tr.Flush)) / float64(tr.Flush); got != perToken[side] {
					t.Errorf("%s: traits give %g bytes per token, codec %g", where(), got, perToken[side])
				}
			}
			if ok {
				in := DescribeFormat(f, dim)
				if in.KBytes != perToken[0] || in.VBytes != perToken[1] {
					t.Errorf("DescribeFormat(%s, %d) = %g/%g bytes per token, traits %g/%g", f.Name(), dim, in.KBytes, in.VBytes, perToken[0], perToken[1])
				}
			}
		}
	}
	if checked < 1000 {
		t.Errorf("only %d format sides checked", checked)
	}
}

// TestTraitsFamilies pins a few formats' traits field by field.
func TestTraitsFamilies(t *testing.T) {
	reg := Formats()
	for _, tc := range []struct {
		name string
		key  bool
		want Traits
	}{
		{"fp16", true, Traits{Family: FamilyFloat, Value: DTypeF16, Bits: 16, Block: 1, Flush: 1}},
		{"bf16", false, Traits{Family: FamilyFloat, Value: DTypeBF16, Bits: 16, Block: 1, Flush: 1}},
		{"fp8-e5m2:head:nosat", true, Traits{Family: FamilyFP8, Value: DTypeE5M2, Bits: 8, Block: 1, Scale: ScaleHead, ScaleType: DTypeF32, Flush: 1}},
		{"fp8:dynamic:rot", false, Traits{Family: FamilyFP8, Value: DTypeE4M3, Bits: 8, Block: 1, Scale: ScaleTensor, ScaleType: DTypeF32,
			Saturate: true, Dynamic: true, Rotation: RotationHadamard, Flush: 1}},
		{"fp8:scales@testdata/fp8_scales_kvq.json", true, Traits{Family: FamilyFP8, Value: DTypeE4M3, Bits: 8, Block: 1, Scale: ScaleHead, ScaleType: DTypeF32, Saturate: true, Flush: 1}},
		{"q4_1", true, Traits{Family: FamilyBlock, Bits: 4, Codebook: CodebookLinear, Block: 32, Scale: ScaleBlock, ScaleType: DTypeF16, Zero: DTypeF16, Flush: 1}},
		{"iq4_nl:rot", true, Traits{Family: FamilyBlock, Bits: 4, Codebook: CodebookIQ4NL, Block: 32, Scale: ScaleBlock, ScaleType: DTypeF16, Rotation: RotationHadamard, Flush: 1}},
		{"int8", true, Traits{Family: FamilyInt, Bits: 8, Codebook: CodebookLinear, Packing: PackSplit, Scale: ScaleToken, ScaleType: DTypeF16, Zero: DTypeF16, Flush: 1}},
		{"int4:g32:sym", true, Traits{Family: FamilyInt, Bits: 4, Codebook: CodebookLinear, Block: 32, Packing: PackSplit, Scale: ScaleGroup, ScaleType: DTypeF16, Flush: 1}},
		{"int2:g32:channel", false, Traits{Family: FamilyInt, Bits: 2, Codebook: CodebookLinear, Axis: AxisChannel, Block: 32, Packing: PackGroups,
			Scale: ScaleChannel, ScaleType: DTypeF16, Zero: DTypeF16, Flush: 32}},
		{"kivi2:r64", true, Traits{Family: FamilyKIVI, Bits: 2, Codebook: CodebookLinear, Axis: AxisChannel, Block: 32, Packing: PackGroups,
			Scale: ScaleChannel, ScaleType: DTypeF16, Zero: DTypeF16, Flush: 64}},
		{"kivi2:r64", false, Traits{Family: FamilyKIVI, Bits: 2, Codebook: CodebookLinear, Block: 32, Packing: PackSplit,
			Scale: ScaleGroup, ScaleType: DTypeF16, Zero: DTypeF16, Flush: 1, Residual: 64}},
		{"quanto4", false, Traits{Family: FamilyQuanto, Bits: 4, Codebook: CodebookLinear, Block: 64, Packing: PackSplit,
			Scale: ScaleGroup, ScaleType: DTypeF16, Zero: DTypeF16, Flush: 128, PromptFlush: true}},
		{"turbo3:nc", true, Traits{Family: FamilyTurbo, Bits: 3, Codebook: CodebookLloydMax, Packing: PackSplit, Scale: ScaleToken, ScaleType: DTypeF16,
			Rotation: RotationRandom, Seed: 1, NormCorrected: true, Flush: 1}},
		{"kvquant3", true, Traits{Family: FamilyKVQuant, Bits: 3, Codebook: CodebookNormal, Axis: AxisChannel, Block: 64, Packing: PackGroups,
			Scale: ScaleChannel, ScaleType: DTypeF16, Zero: DTypeF16, Outliers: 0.01, PreRoPE: true, Flush: 64}},
		{"nvfp4", true, Traits{Family: FamilyFP4, Value: DTypeE2M1, Bits: 4, Block: 16, Packing: PackRowTail, Scale: ScaleBlock, ScaleType: DTypeE4M3,
			TensorScale: DTypeF32, Saturate: true, Flush: 1}},
		{"fp4_e2m1", false, Traits{Family: FamilyFP4, Value: DTypeE2M1, Bits: 4, Block: 16, Packing: PackRowTail, Scale: ScaleBlock, ScaleType: DTypeUE8M0, Flush: 1}},
	} {
		if got := reg.MustLookup(tc.name).Traits(tc.key); got != tc.want {
			t.Errorf("%s.Traits(%v) =\n%+v, want\n%+v", tc.name, tc.key, got, tc.want)
		}
	}
	if got := InterleaveKeys(Q40).Traits(true); !got.Interleaved || got.Family != FamilyBlock {
		t.Errorf("InterleaveKeys(q4_0).Traits(true) = %+v, want q4_0's, interleaved", got)
	}
	if got := InterleaveKeys(Q40).Traits(false); got != Q40.Traits(false) {
		t.Errorf("InterleaveKeys(q4_0).Traits(false) = %+v, want q4_0's", got)
	}
	// ggml's type sizes.
	for _, tc := range []struct {
		f    Format
		want int
	}{{Q80, 34}, {Q40, 18}, {Q41, 20}, {Q50, 22}, {Q51, 24}, {IQ4NL, 18}, {NVFP4, 9}, {FP4E2M1, 9}} {
		if got := tc.f.Traits(true).BlockBytes(128); got != tc.want {
			t.Errorf("%s: BlockBytes = %d, want %d", tc.f.Name(), got, tc.want)
		}
	}
}

// TestVariantsCoverOptions checks that every option a family's parser
// lists as valid (in its error for an unknown option) has an example in
// the family's options, so that Variants exercises it: an option added
// to a parser without an example fails here.
func TestVariantsCoverOptions(t *testing.T) {
	reg := Formats()
	for _, base := range reg.Bases() {
		fam := reg.families[base]
		_, err := reg.Lookup(base + ":zzz")
		if err == nil {
			t.Fatalf("Lookup(%s:zzz) succeeded", base)
		}
		msg := err.Error()
		i := strings.Index(msg, "(valid: ")
		if i < 0 {
			if len(fam.options) > 0 || !strings.Contains(msg, "takes no options") {
				t.Errorf("%s: error %q lists no valid options", base, msg)
			}
			continue
		}
		list := msg[i+len("(valid: "):]
		list = list[:strings.Index(list, ")")]
		for _, opt := range strings.Split(list, ", ") {
			if strings.Contains(opt, "@") {
				continue // names a file
			}
			prefix, param := opt, false
			if j := strings.Index(opt, "<"); j >= 0 {
				prefix, param = opt[:j], true
			}
			found := false
			for _, ex := range fam.options {
				if ex == prefix || param && strings.HasPrefix(ex, prefix) && len(ex) > len(prefix) {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: option %q has no example in the family's options %q", base, opt, fam.options)
			}
		}
		for _, ex := range fam.options {
			if _, err := reg.Lookup(base + ":" + ex); err != nil {
				t.Errorf("%s: example option %q: %v", base, ex, err)
			}
		}
	}
	for _, name := range reg.Variants() {
		if _, err := reg.Lookup(name); err != nil {
			t.Errorf("Variants lists %q: %v", name, err)
		}
	}
}
