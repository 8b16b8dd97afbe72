package quant

import (
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestParseFP8Scales(t *testing.T) {
	type want struct {
		layer int
		key   bool
		s     []float32
	}
	tests := []struct {
		name    string
		json    string
		want    []want
		wantErr string // substring; "" for success
	}{
		{
			name: "vllm",
			json: `{"model_type": "llama", "kv_cache": {"dtype": "float8_e4m3fn", "scaling_factor": {"0": {"0": 0.5, "1": 0.25}}}}`,
			want: []want{{0, true, []float32{0.5}}, {0, false, []float32{0.5}}, {1, true, []float32{0.25}}},
		},
		{
			name: "vllm ranks that agree",
			json: `{"kv_cache": {"scaling_factor": {"rank0": {"0": 2}, "rank1": {"0": 2}}}}`,
			want: []want{{0, false, []float32{2}}},
		},
		{
			name:    "vllm ranks that disagree",
			json:    `{"kv_cache": {"scaling_factor": {"0": {"0": 2}, "1": {"0": 3}}}}`,
			wantErr: `ranks "0" and "1" disagree`,
		},
		{
			name: "kvq",
			json: `{"k_scale": {"0": 0.5, "3": [1, 2, 4]}, "v_scale": {"0": 0.125}}`,
			want: []want{{0, true, []float32{0.5}}, {3, true, []float32{1, 2, 4}}, {0, false, []float32{0.125}}},
		},
		{
			name: "kvq k only: v takes k's scales",
			json: `{"k_scale": {"1": 0.5}}`,
			want: []want{{1, false, []float32{0.5}}},
		},
		{name: "not json", json: `{`, wantErr: "not a JSON object"},
		{name: "unknown schema", json: `{"scales": {}}`, wantErr: "neither vLLM's"},
		{name: "layer key", json: `{"k_scale": {"x": 1}}`, wantErr: `layer key "x"`},
		{name: "negative placeholder", json: `{"k_scale": {"0": -1}}`, wantErr: "not a positive finite"},
		{name: "zero", json: `{"k_scale": {"0": 0}}`, wantErr: "not a positive finite"},
		{name: "overflow", json: `{"k_scale": {"0": 1e300}}`, wantErr: "not a positive finite"},
		{name: "empty list", json: `{"k_scale": {"0": []}}`, wantErr: "non-empty list"},
		{name: "list in vllm", json: `{"kv_cache": {"scaling_factor": {"0": {"0": [1]}}}}`, wantErr: "must be a number"},
		{name: "no layers", json: `{"v_scale": {}}`, wantErr: "no layers"},
		{name: "dtype", json: `{"dtype": "int8", "k_scale": {"0": 1}}`, wantErr: `dtype "int8"`},
		{name: "no factors", json: `{"kv_cache": {"dtype": "float8_e4m3fn"}}`, wantErr: `no "scaling_factor"`},
		{
			name: "kvq calibrate's provenance fields",
			json: `{"format": "kvq.kv_scales", "version": 1, "layers": 2, "kv_heads": 1, "strategy": "dataset", "data_sha256": "ab", "k_scale": {"0": 0.5}}`,
			want: []want{{0, true, []float32{0.5}}},
		},
		{name: "newer version", json: `{"version": 2, "k_scale": {"0": 1}}`, wantErr: `"version" 2 is newer`},
		{name: "bad layers", json: `{"layers": "4", "k_scale": {"0": 1}}`, wantErr: `"layers" must be a positive integer`},
		{name: "bad kv_heads", json: `{"kv_heads": 0, "k_scale": {"0": 1}}`, wantErr: `"kv_heads" must be a positive integer`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ParseFP8Scales([]byte(tt.json), "s.json")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "s.json") || !errors.Is(err, ErrOption) {
					t.Fatalf("ParseFP8Scales(%s) = %v, want an ErrOption naming s.json and containing %q", tt.json, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				got, err := f.Scales(w.layer, w.key)
				if err != nil || !slices.Equal(got, w.s) {
					t.Errorf("Scales(%d, key=%v) = %v, %v; want %v", w.layer, w.key, got, err, w.s)
				}
			}
			if _, err := f.Scales(99, true); err == nil || !strings.Contains(err.Error(), "layer 99") {
				t.Errorf("Scales(99) = %v, want an error naming layer 99", err)
			}
		})
	}
}

// TestFP8ScalesGeometry: a scales file for another model (other layer or
// head counts) is refused with the file and the field named, directly and
// through a cache layout.
func TestFP8ScalesGeometry(t *testing.T) {
	tests := []struct {
		json, wantErr string
	}{
		{`{"k_scale": {"0": 1, "1": [1, 2]}}`, ""},
		{`{"layers": 2, "kv_heads": 2, "k_scale": {"0": 1}}`, ""},
		{`{"layers": 3, "k_scale": {"0": 1}}`, `"layers" is 3, the model has 2 layers`},
		{`{"kv_heads": 4, "k_scale": {"0": 1}}`, `"kv_heads" is 4, the model has 2 KV heads`},
		{`{"k_scale": {"0": 1}, "v_scale": {"5": 1}}`, "v_scale has layer 5, the model has 2 layers"},
		{`{"k_scale": {"1": [1, 2, 3]}}`, "k_scale of layer 1 lists 3 per-head scales, the model has 2 KV heads"},
	}
	for _, tt := range tests {
		f, err := ParseFP8Scales([]byte(tt.json), "s.json")
		if err != nil {
			t.Fatal(err)
		}
		fm, err := NewFP8(E4M3, FP8Options{Scales: f})
		if err != nil {
			t.Fatal(err)
		}
		for _, gc := range []GeometryChecker{f, fm.(GeometryChecker)} {
			err := gc.CheckGeometry(2, 2)
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("%s: CheckGeometry = %v", tt.json, err)
				}
				continue
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "s.json") || !errors.Is(err, ErrOption) {
				t.Errorf("%s: CheckGeometry = %v, want an ErrOption naming s.json and %q", tt.json, err, tt.wantErr)
			}
		}
	}
}

func TestLoadFP8Scales(t *testing.T) {
	f, err := LoadFP8Scales("testdata/fp8_scales_vllm.json")
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := f.Scales(2, false); len(s) != 1 || s[0] != 0.03125 || f.DType() != "float8_e4m3fn" {
		t.Errorf("vLLM file: layer 2 V = %v, dtype %q", s, f.DType())
	}
	if got := f.Layers(); !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("Layers() = %v", got)
	}
	missing := filepath.Join(t.TempDir(), "nope.json")
	if _, err := LoadFP8Scales(missing); err == nil || !strings.Contains(err.Error(), "nope.json") || !errors.Is(err, ErrOption) {
		t.Errorf("LoadFP8Scales(missing) = %v", err)
	}
}

func TestFP8Lookup(t *testing.T) {
	r := Formats()
	tests := []struct{ in, want string }{
		{"fp8", "fp8-e4m3"},
		{"FP8_E4M3", "fp8-e4m3"},
		{"float8_e4m3fn", "fp8-e4m3"},
		{"fp8_e5m2", "fp8-e5m2"},
		{"fp8-e5m2", "fp8-e5m2"},
		{"fp8:rot:head", "fp8-e4m3:head:rot"},
		{"fp8:dynamic:head", "fp8-e4m3:head:dynamic"},
		{"fp8:nosat", "fp8-e4m3:nosat"},
		{"fp8:scales@testdata/fp8_scales_kvq.json", "fp8-e4m3:scales@testdata/fp8_scales_kvq.json"},
		{"fp8_e5m2:rot:nosat:dynamic", "fp8-e5m2:dynamic:nosat:rot"},
	}
	for _, tt := range tests {
		f, err := r.Lookup(tt.in)
		if err != nil {
			t.Fatalf("Lookup(%q): %v", tt.in, err)
		}
		if f.Name() != tt.want {
			t.Errorf("Lookup(%q).Name() = %q, want %q", tt.in, f.Name(), tt.want)
		}
		if g, err := r.Lookup(f.Name()); err != nil || g.Name() != f.Name() {
			t.Errorf("Lookup(%q) does not round-trip: %v", f.Name(), err)
		}
		if s, _ := f.(Describer).Describe(); s == "" {
			t.Errorf("%s: empty description", tt.in)
		}
	}
	bad := []struct{ in, want string }{
		{"fp8:g32", "valid: head, dynamic, scales@FILE.json, nosat, rot"},
		{"fp8:head:head", "given twice"},
		{"fp8:dynamic:scales@testdata/fp8_scales_kvq.json", "exclude each other"},
		{"fp8:head:scales@testdata/fp8_scales_kvq.json", "drop head"},
		{"fp8:scales@", "needs a file name"},
		{"fp8:scales@testdata/none.json", "testdata/none.json"},
		{"fp8-e5m2:scales@testdata/fp8_scales_vllm.json", "is for float8_e4m3fn"},
		{"fp8:rot@x", "unknown option"},
	}
	for _, tt := range bad {
		_, err := r.Lookup(tt.in)
		if !errors.Is(err, ErrOption) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Lookup(%q) = %v, want an ErrOption containing %q", tt.in, err, tt.want)
		}
	}
	if FP8E4M3.Name() != "fp8-e4m3" || FP8E5M2.Name() != "fp8-e5m2" {
		t.Error("exported fp8 formats have the wrong names")
	}
	if _, err := NewFP8(FP8Kind(7), FP8Options{}); !errors.Is(err, ErrOption) {
		t.Errorf("NewFP8(kind 7) = %v", err)
	}
}

func fp8Codec4(t *testing.T, f Format, p CodecParams) *fp8Codec {
	t.Helper()
	c, err := f.NewCodec(p)
	if err != nil {
		t.Fatal(err)
	}
	return c.(*fp8Codec)
}

func TestFP8StaticScales(t *testing.T) {
	src, err := LoadFP8Scales("testdata/fp8_scales_kvq.json")
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewFP8(E4M3, FP8Options{Scales: src})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		p     CodecParams
		scale float32
		state int
	}{
		{CodecParams{Dim: 8, Layer: 0, Head: 0, Key: true}, 0.02, 4}, // per-tensor: counted by head 0
		{CodecParams{Dim: 8, Layer: 0, Head: 1, Key: true}, 0.02, 0}, // ... and only by head 0
		{CodecParams{Dim: 8, Layer: 1, Head: 0, Key: true}, 0.5, 4},  // per-head list
		{CodecParams{Dim: 8, Layer: 1, Head: 1, Key: true}, 0.25, 4}, // per-head list
		{CodecParams{Dim: 8, Layer: 1, Head: 1, Key: false}, 0.0625, 0},
		{CodecParams{Dim: 8, Layer: 2, Head: 1, Key: false}, 2, 4},
	}
	for _, tt := range tests {
		c := fp8Codec4(t, f, tt.p)
		if c.Scale() != tt.scale || c.StateBytes() != tt.state {
			t.Errorf("%+v: scale %v, state %d bytes; want %v, %d", tt.p, c.Scale(), c.StateBytes(), tt.scale, tt.state)
		}
		// vLLM: code = fp8(x/scale), value = code·scale.
		x := []float32{1, -3, 0.01, 100, 7e-4, 0, -0.5, 2}
		tile := make([]byte, 8)
		c.Encode(tile, 0, x, 1)
		dec := make([]float32, 8)
		c.Decode(dec, tile, 0, 1)
		for i, v := range x {
			code := EncodeE4M3(v/tt.scale, true)
			if tile[i] != code || dec[i] != DecodeE4M3(code)*tt.scale {
				t.Errorf("%+v: x=%v stored %#02x → %v, want %#02x → %v", tt.p, v, tile[i], dec[i], code, DecodeE4M3(code)*tt.scale)
			}
		}
	}
	for _, p := range []CodecParams{{Dim: 8, Layer: 9, Key: true}, {Dim: 8, Layer: 1, Head: 2, Key: true}} {
		if _, err := f.NewCodec(p); !errors.Is(err, ErrOption) || !strings.Contains(err.Error(), "fp8_scales_kvq.json") {
			t.Errorf("NewCodec(%+v) = %v, want an ErrOption naming the file", p, err)
		}
	}
	// Default scale 1.0; per-head formats count 4 bytes in every head.
	for _, tt := range []struct {
		f     Format
		head  int
		state int
	}{{FP8E4M3, 0, 4}, {FP8E4M3, 3, 0}, {Formats().MustLookup("fp8:head"), 3, 4}} {
		c := fp8Codec4(t, tt.f, CodecParams{Dim: 8, Head: tt.head})
		if c.Scale() != 1 || c.StateBytes() != tt.state {
			t.Errorf("%s head %d: scale %v, state %d; want 1, %d", tt.f.Name(), tt.head, c.Scale(), c.StateBytes(), tt.state)
		}
	}
}

func TestFP8DynamicScales(t *testing.T) {
	r := Formats()
	f := r.MustLookup("fp8:dynamic")
	k0 := fp8Codec4(t, f, CodecParams{Dim: 4, Layer: 2, Head: 0, Key: true})
	k1 := fp8Codec4(t, f, CodecParams{Dim: 4, Layer: 2, Head: 1, Key: true})
	v1 := fp8Codec4(t, f, CodecParams{Dim: 4, Layer: 2, Head: 1, Key: false})
	other := fp8Codec4(t, f, CodecParams{Dim: 4, Layer: 3, Head: 0, Key: true})
	tile := make([]byte, 4)
	dec := make([]float32, 4)
	// Zeros do not freeze the scale and stay zero.
	k1.Encode(tile, 0, []float32{0, 0, 0, 0}, 1)
	k1.Decode(dec, tile, 0, 1)
	if k0.Scale() != 0 || slices.ContainsFunc(dec, func(v float32) bool { return v != 0 }) {
		t.Fatalf("after zeros: scale %v, decoded %v", k0.Scale(), dec)
	}
	// The first data freezes the layer's K scale for every head: 400/200.
	k1.Encode(tile, 0, []float32{1, -400, 3, 0}, 1)
	if k0.Scale() != 2 || k1.Scale() != 2 {
		t.Fatalf("K scales %v, %v; want 2 (absmax 400 / 200)", k0.Scale(), k1.Scale())
	}
	k0.Encode(tile, 0, []float32{1e4, 0, 0, 0}, 1)
	k0.Decode(dec, tile, 0, 1)
	if k0.Scale() != 2 || dec[0] != 896 {
		t.Errorf("frozen scale moved to %v, or 1e4 did not saturate at 448·2 (got %v)", k0.Scale(), dec[0])
	}
	v1.Encode(tile, 0, []float32{50, 0, 0, float32(math.Inf(1))}, 1) // V: 50/100
	if v1.Scale() != 0.5 || other.Scale() != 0 {
		t.Errorf("V scale %v (want 0.5), other layer %v (want unset)", v1.Scale(), other.Scale())
	}
	if k0.StateBytes() != 4 || k1.StateBytes() != 0 {
		t.Errorf("StateBytes %d, %d; want 4, 0 (per-tensor, counted once)", k0.StateBytes(), k1.StateBytes())
	}

	// Per-head: each head its own scale.
	fh := r.MustLookup("fp8:head:dynamic")
	h0 := fp8Codec4(t, fh, CodecParams{Dim: 4, Head: 0, Key: false})
	h1 := fp8Codec4(t, fh, CodecParams{Dim: 4, Head: 1, Key: false})
	h0.Encode(tile, 0, []float32{10, 0, 0, 0}, 1)
	h1.Encode(tile, 0, []float32{0, 20, 0, 0}, 1)
	if h0.Scale() != 0.1 || h1.Scale() != 0.2 || h1.StateBytes() != 4 {
		t.Errorf("per-head scales %v, %v (want 0.1, 0.2), state %d", h0.Scale(), h1.Scale(), h1.StateBytes())
	}

	// PrimeFP8Scales takes a whole batch, as vLLM's first forward does.
	fp := r.MustLookup("fp8:dynamic")
	batch := []float32{1, 2, 3, 4, 5, 6, 7, -300} // 2 tokens × 2 heads × 2 dims
	PrimeFP8Scales(fp, 0, true, 2, 2, batch)
	if s := fp8Codec4(t, fp, CodecParams{Dim: 2, Head: 1, Key: true}).Scale(); s != 1.5 {
		t.Errorf("primed per-tensor scale %v, want 1.5 (300/200)", s)
	}
	fph := r.MustLookup("fp8:head:dynamic")
	PrimeFP8Scales(fph, 0, false, 2, 2, batch)
	s0 := fp8Codec4(t, fph, CodecParams{Dim: 2, Head: 0}).Scale()
	s1 := fp8Codec4(t, fph, CodecParams{Dim: 2, Head: 1}).Scale()
	if s0 != 0.06 || s1 != 3 {
		t.Errorf("primed per-head V scales %v, %v; want 0.06 (6/100), 3 (300/100)", s0, s1)
	}
	PrimeFP8Scales(FP8E4M3, 0, true, 2, 2, batch) // no-op for static formats
}

// Codecs of one layer side share a dynamic scale; whichever head encodes
// first freezes it, and every head then sees the same value.
func TestFP8DynamicConcurrent(t *testing.T) {
	f := Formats().MustLookup("fp8:dynamic")
	const heads = 8
	codecs := make([]*fp8Codec, heads)
	for h := range codecs {
		codecs[h] = fp8Codec4(t, f, CodecParams{Dim: 16, Head: h, Key: true})
	}
	var wg sync.WaitGroup
	for h, c := range codecs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := make([]float32, 16*50)
			for i := range x {
				x[i] = float32((h+1)*(i%7)) - 3
			}
			tile := make([]byte, c.TileBytes(50))
			for r := 0; r < 50; r++ {
				c.Encode(tile, r, x[r*16:], 1)
			}
		}()
	}
	wg.Wait()
	for _, c := range codecs {
		if c.Scale() != codecs[0].Scale() || c.Scale() == 0 {
			t.Fatalf("heads see scales %v and %v", c.Scale(), codecs[0].Scale())
		}
	}
}

// A NaN code must read as NaN in attention, not as the ±480 the fast
// conversion would give it; non-saturating E4M3 stores NaN for 1000.
func TestFP8NaNCodes(t *testing.T) {
	for _, name := range []string{"fp8:nosat", "fp8"} {
		f := Formats().MustLookup(name)
		for _, key := range []bool{true, false} {
			c, _ := f.NewCodec(CodecParams{Dim: 16, Key: key})
			x := make([]float32, 16*3)
			x[20] = 1000
			tile := make([]byte, c.TileBytes(3))
			c.Encode(tile, 0, x, 3)
			q := make([]float32, 16)
			for i := range q {
				q[i] = 1
			}
			sc := make([]float32, 3)
			c.Scores(sc, 3, q, 1, tile, 0, 3)
			acc := make([]float32, 16)
			c.Accumulate(acc, []float32{1, 1, 1}, 3, 1, tile, 0, 3)
			wantNaN := name == "fp8:nosat"
			if math.IsNaN(float64(sc[1])) != wantNaN || math.IsNaN(float64(acc[4])) != wantNaN || sc[0] != 0 {
				t.Errorf("%s key=%v: scores %v, acc[4] %v; NaN expected: %v", name, key, sc, acc[4], wantNaN)
			}
			if !wantNaN && (sc[1] != 448 || acc[4] != 448) {
				t.Errorf("%s: saturated value reads %v / %v, want 448", name, sc[1], acc[4])
			}
		}
	}
}
