package quant_test

import (
	"errors"
	"math"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
)

// FuzzParseSpec: any text either parses into a spec whose formats exist, or
// fails with ErrBadSpec — never a panic.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{"fp16", "k=int8,v=int4", "int4:g32:channel,residual=128,sink=4", "q4_0:rot,L0=fp16,L-1=fp16", "kivi2:r64", "L0-3=bf16,fp8", "", ",,", "k=", "L=fp16", "int4:g", "residual=-1", "turbo3:seed7:nc"} {
		f.Add(s)
	}
	reg := quant.Formats()
	f.Fuzz(func(t *testing.T, text string) {
		s, err := reg.ParseSpec(text)
		if err != nil {
			if !errors.Is(err, quant.ErrBadSpec) {
				t.Fatalf("ParseSpec(%q) error %v does not wrap ErrBadSpec", text, err)
			}
			return
		}
		if s.K == nil || s.V == nil || s.Residual < 0 || s.Sink < 0 {
			t.Fatalf("ParseSpec(%q) = %+v", text, s)
		}
		for i := 0; i < 4; i++ {
			if k, v := s.ForLayer(i, 4); k == nil || v == nil {
				t.Fatalf("ParseSpec(%q): layer %d has no format", text, i)
			}
		}
		_, _ = reg.ParseList(text)
	})
}

// FuzzCodecRoundTrip: for every preset format, finite input never decodes to
// NaN, and nothing panics. Only the IEEE float formats may overflow to ±Inf
// (as fp16/bf16 caches do in the engines); every quantized format saturates.
func FuzzCodecRoundTrip(f *testing.F) {
	f.Add([]byte{0, 0, 128, 63, 0, 0, 0, 64}, uint8(0), false)
	f.Add([]byte{0xff, 0xff, 0x7f, 0x7f, 1, 2, 3, 4, 5, 6, 7, 8}, uint8(7), true)
	reg := quant.Formats()
	names := reg.Names()
	f.Fuzz(func(t *testing.T, data []byte, which uint8, key bool) {
		fm := reg.MustLookup(names[int(which)%len(names)])
		const dim = 64
		c, err := fm.NewCodec(quant.CodecParams{Dim: dim, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		n := c.TokenGroup()
		src := make([]float32, n*dim)
		for i := range src {
			if len(data) >= 4 {
				b := data[(4*i)%(len(data)-3):]
				v := math.Float32frombits(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					v = -1
				}
				src[i] = v
			}
		}
		tile := make([]byte, c.TileBytes(n))
		c.Encode(tile, 0, src, n)
		dec := make([]float32, len(src))
		c.Decode(dec, tile, 0, n)
		ieee := !quant.Quantized(fm)
		for i, v := range dec {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) && !ieee {
				t.Fatalf("%s: finite input %v decoded to %v", fm.Name(), src[i], v)
			}
		}
	})
}
