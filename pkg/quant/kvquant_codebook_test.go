package quant_test

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache/cachetest"
)

// laplaceRows returns n rows of dim heavy-tailed values (Laplace, with a
// per-channel offset), the kind of data a Gaussian-shaped default codebook
// fits badly.
func laplaceRows(rng *rand.Rand, n, dim int) []float32 {
	x := make([]float32, n*dim)
	for i := range x {
		u := rng.Float64() - 0.5
		v := -math.Copysign(math.Log(1-2*math.Abs(u)), u)
		x[i] = float32(v + float64(i%dim%5))
	}
	return x
}

// codecMSE is the mean squared reconstruction error of format f on rows.
func codecMSE(t *testing.T, f quant.Format, key bool, rows []float32, dim int) float64 {
	t.Helper()
	c, err := f.NewCodec(quant.CodecParams{Dim: dim, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	n := len(rows) / dim
	tile := make([]byte, c.TileBytes(n))
	c.Encode(tile, 0, rows, n)
	back := make([]float32, len(rows))
	c.Decode(back, tile, 0, n)
	var s float64
	for i, v := range rows {
		d := float64(back[i] - v)
		s += d * d
	}
	return s / float64(len(rows))
}

// TestKVQuantCalibratedCodebook fits levels to calibration rows with
// KVQuantSamples and FitKVQuantCodebook, saves them, uses them through
// kvquant4:codebook@FILE, and checks that they reconstruct held-out rows
// of the same distribution better than the data-free default, for keys and
// values; a per-layer override changes only its layer.
func TestKVQuantCalibratedCodebook(t *testing.T) {
	const dim = 64
	rng := rand.New(rand.NewPCG(3, 4))
	calib, held := laplaceRows(rng, 512, dim), laplaceRows(rng, 512, dim)
	reg := quant.Formats()
	def := reg.MustLookup("kvquant4")
	cbs := quant.KVQuantCodebooks{Bits: 4}
	for _, key := range []bool{true, false} {
		s, err := quant.KVQuantSamples(def, key, calib, dim)
		if err != nil {
			t.Fatal(err)
		}
		levels, err := quant.FitKVQuantCodebook(s, nil, 4)
		if err != nil {
			t.Fatal(err)
		}
		if key {
			cbs.Keys = levels
		} else {
			cbs.Values = levels
		}
	}
	path := filepath.Join(t.TempDir(), "Codebook.json") // upper case survives spec folding
	if err := cbs.Save(path); err != nil {
		t.Fatal(err)
	}
	cal, err := reg.Lookup("kvquant4:codebook@" + path)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := reg.Lookup(cal.Name()); err != nil || again.Name() != cal.Name() {
		t.Errorf("name %q does not look up as itself: %v", cal.Name(), err)
	}
	for _, key := range []bool{true, false} {
		d, c := codecMSE(t, def, key, held, dim), codecMSE(t, cal, key, held, dim)
		t.Logf("key=%v: held-out MSE default %.5f, calibrated %.5f", key, d, c)
		if c > 0.95*d {
			t.Errorf("key=%v: calibrated codebook MSE %.5f is not 5%% below the default's %.5f", key, c, d)
		}
	}
	cachetest.Run(t, cal, cachetest.Options{Dims: []int{64}, Tol: 2e-5})

	// A layer override: layer 1's values use the uniform levels.
	cbs.Layers = map[string]quant.KVQuantLayerSet{"1": {Values: uniformLevels(16)}}
	if err := cbs.Save(path); err != nil {
		t.Fatal(err)
	}
	ov := reg.MustLookup("kvquant4:codebook@" + path)
	decode := func(layer int, key bool) []float32 {
		c, err := ov.NewCodec(quant.CodecParams{Dim: dim, Layer: layer, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		tile := make([]byte, c.TileBytes(1))
		c.Encode(tile, 0, held[:dim], 1)
		out := make([]float32, dim)
		c.Decode(out, tile, 0, 1)
		return out
	}
	same := func(a, b []float32) bool {
		for i := range a {
			if a[i] != b[i] {
				return false
			}
		}
		return true
	}
	if same(decode(0, false), decode(1, false)) {
		t.Error("layer 1's value override changed nothing")
	}
	if !same(decode(0, true), decode(1, true)) {
		t.Error("layer 1's value override changed its keys")
	}
}

func uniformLevels(k int) []float32 {
	l := make([]float32, k)
	for i := range l {
		l[i] = float32(-1 + 2*float64(i)/float64(k-1))
	}
	return l
}

// TestFitKVQuantCodebook checks the fit on known distributions: uniform
// samples give the evenly spaced k-means optimum (cell centres), and zero
// weights remove samples.
func TestFitKVQuantCodebook(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	s := make([]float32, 40000)
	for i := range s {
		s[i] = float32(2*rng.Float64() - 1)
	}
	l, err := quant.FitKVQuantCodebook(s, nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range l {
		if want := -1 + (2*float64(i)+1)/8; math.Abs(float64(v)-want) > 0.02 {
			t.Errorf("uniform samples: level %d = %v, want ≈ %v", i, v, want)
		}
	}
	w := make([]float32, len(s))
	for i, v := range s {
		if v > 0 {
			w[i] = 1
		}
	}
	l, err = quant.FitKVQuantCodebook(s, w, 2)
	if err != nil {
		t.Fatal(err)
	}
	if l[0] < 0 {
		t.Errorf("samples ≤ 0 have weight 0, but level 0 is %v", l[0])
	}
	if _, err := quant.FitKVQuantCodebook(s[:3], nil, 2); err == nil {
		t.Error("3 samples for 4 levels: no error")
	}
}

// TestKVQuantCodebookErrors: a bad codebook file is rejected with its name
// and the field at fault.
func TestKVQuantCodebookErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, body, want string }{
		{"count", `{"bits": 4, "keys": [-1, 0, 1]}`, "keys has 3 levels, want 16"},
		{"order", `{"bits": 2, "values": [-1, 0.5, 0, 1]}`, "values is not strictly increasing at index 2"},
		{"range", `{"bits": 2, "keys": [-1, 0, 0.5, 1.5]}`, "keys[3] = 1.5 is outside [-1, 1]"},
		{"bits", `{"bits": 5}`, `"bits" is 5`},
		{"field", `{"bits": 4, "key": []}`, `unknown field "key"`},
		{"layer", `{"bits": 2, "layers": {"x": {}}}`, `layers key "x"`},
		{"mismatch", `{"bits": 2}`, "has 2-bit levels"},
		{"json", `{"bits": `, "unexpected EOF"},
	} {
		path := filepath.Join(dir, tc.name+".json")
		if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := quant.Formats().Lookup("kvquant4:codebook@" + path)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v, want one naming %s and saying %q", tc.name, err, path, tc.want)
		}
	}
	if _, err := quant.Formats().Lookup("kvquant4:codebook@" + filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: error %v", err)
	}
}
