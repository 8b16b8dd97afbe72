package quant

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"

	"github.com/kvqlabs/kvq/internal/atomicfile"
)

// KVQuantCodebooks are calibrated KVQuant levels (the "nuq" datatype fitted
// to a model's keys and values), read from a JSON file given in a spec as
// kvquant4:codebook@FILE.json:
//
//	{
//	  "bits": 4,
//	  "keys":   [16 increasing levels in [−1, 1]],
//	  "values": [16 increasing levels in [−1, 1]],
//	  "layers": {"0": {"keys": [...], "values": [...]}}
//	}
//
// Levels are in the normalized units of the codec ((x − zero)/range of a
// vector, outliers excluded), so −1 and 1 are a vector's smallest and
// largest inlier. "layers" optionally overrides the keys or values levels
// of single layers (KVQuant fits one datatype per layer); a side without
// levels anywhere uses the data-free default. FitKVQuantCodebook and
// KVQuantSamples produce the levels from calibration data.
type KVQuantCodebooks struct {
	Bits   int                        `json:"bits"`
	Keys   []float32                  `json:"keys,omitempty"`
	Values []float32                  `json:"values,omitempty"`
	Layers map[string]KVQuantLayerSet `json:"layers,omitempty"`
	// Calibration records where fitted levels came from (kvq calibrate
	// writes the data's hash); parsing keeps it and nothing reads it.
	Calibration map[string]string `json:"calibration,omitempty"`
	source      string
}

// KVQuantLayerSet is one layer's override in a KVQuantCodebooks file.
type KVQuantLayerSet struct {
	Keys   []float32 `json:"keys,omitempty"`
	Values []float32 `json:"values,omitempty"`
}

// String names the file the codebooks came from (used in format names).
func (c *KVQuantCodebooks) String() string { return c.source }

// levels returns the calibrated levels for a side of a layer, or nil.
func (c *KVQuantCodebooks) levels(layer int, key bool) []float32 {
	pick := func(k, v []float32) []float32 {
		if key {
			return k
		}
		return v
	}
	if ls, ok := c.Layers[strconv.Itoa(layer)]; ok {
		if l := pick(ls.Keys, ls.Values); l != nil {
			return l
		}
	}
	return pick(c.Keys, c.Values)
}

// LoadKVQuantCodebooks reads and checks a codebook file.
func LoadKVQuantCodebooks(path string) (*KVQuantCodebooks, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: kvquant codebook: %w", ErrOption, err)
	}
	return ParseKVQuantCodebooks(data, path)
}

// ParseKVQuantCodebooks parses codebook JSON; name labels errors.
func ParseKVQuantCodebooks(data []byte, name string) (*KVQuantCodebooks, error) {
	var c KVQuantCodebooks
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: kvquant codebook %s: %w", ErrOption, name, err)
	}
	c.source = name
	if c.Bits < 2 || c.Bits > 4 {
		return nil, fmt.Errorf("%w: kvquant codebook %s: \"bits\" is %d, want 2, 3 or 4", ErrOption, name, c.Bits)
	}
	check := func(field string, l []float32) error {
		if l == nil {
			return nil
		}
		if len(l) != 1<<c.Bits {
			return fmt.Errorf("%w: kvquant codebook %s: %s has %d levels, want %d for %d bits", ErrOption, name, field, len(l), 1<<c.Bits, c.Bits)
		}
		for i, v := range l {
			switch {
			case math.IsNaN(float64(v)) || v < -1 || v > 1:
				return fmt.Errorf("%w: kvquant codebook %s: %s[%d] = %v is outside [-1, 1]", ErrOption, name, field, i, v)
			case i > 0 && v <= l[i-1]:
				return fmt.Errorf("%w: kvquant codebook %s: %s is not strictly increasing at index %d (%v after %v)", ErrOption, name, field, i, v, l[i-1])
			}
		}
		return nil
	}
	if err := errors.Join(check("keys", c.Keys), check("values", c.Values)); err != nil {
		return nil, err
	}
	for layer, ls := range c.Layers {
		if n, err := strconv.Atoi(layer); err != nil || n < 0 {
			return nil, fmt.Errorf("%w: kvquant codebook %s: layers key %q is not a layer index", ErrOption, name, layer)
		}
		if err := errors.Join(check("layers."+layer+".keys", ls.Keys), check("layers."+layer+".values", ls.Values)); err != nil {
			return nil, err
		}
	}
	return &c, nil
}

// Save writes the codebooks as indented JSON to path, atomically
// (internal/atomicfile).
func (c *KVQuantCodebooks) Save(path string) error {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, func(w io.Writer) error {
		_, err := w.Write(append(data, '\n'))
		return err
	})
}

// FitKVQuantCodebook fits 2^bits levels to normalized samples (values in
// [−1, 1], as KVQuantSamples returns them) by weighted 1-D k-means
// (Lloyd–Max): KVQuant's Fisher-weighted k-means when weights are the
// squared gradients of the loss with respect to each sample, plain k-means
// when weights is nil. Levels that collapse onto each other are spread
// apart by a tiny step so that the result is strictly increasing.
func FitKVQuantCodebook(samples, weights []float32, bits int) ([]float32, error) {
	k := 1 << bits
	if bits < 2 || bits > 4 {
		return nil, fmt.Errorf("%w: kvquant codebook: %d bits (want 2, 3 or 4)", ErrOption, bits)
	}
	if weights != nil && len(weights) != len(samples) {
		return nil, fmt.Errorf("%w: kvquant codebook: %d weights for %d samples", ErrOption, len(weights), len(samples))
	}
	idx := make([]int, 0, len(samples))
	for i, v := range samples {
		if math.IsNaN(float64(v)) || weights != nil && !(weights[i] > 0) {
			continue
		}
		idx = append(idx, i)
	}
	if len(idx) < k {
		return nil, fmt.Errorf("%w: kvquant codebook: %d usable samples for %d levels", ErrOption, len(idx), k)
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(samples[a], samples[b]) })
	xs := make([]float64, len(idx))
	ws := make([]float64, len(idx))
	for j, i := range idx {
		xs[j] = math.Max(-1, math.Min(1, float64(samples[i])))
		ws[j] = 1
		if weights != nil {
			ws[j] = float64(weights[i])
		}
	}
	c := lloyd1D(xs, ws, k, 100)
	out := make([]float32, k)
	const eps = 1.0 / 4096
	for i, v := range c {
		out[i] = float32(math.Max(-1, math.Min(1, v)))
		if i > 0 && out[i] <= out[i-1] {
			out[i] = out[i-1] + eps
		}
	}
	if out[k-1] > 1 { // spread from the top down instead
		out[k-1] = 1
		for i := k - 2; i >= 0; i-- {
			out[i] = min(out[i], out[i+1]-eps)
		}
	}
	return out, nil
}

// KVQuantSamples returns the normalized inlier values ((x − zero)/range,
// outliers excluded) that format f (a kvquant format) computes for rows of
// keys (key true: per channel over groups of its G tokens; a last partial
// group is skipped) or values (per token), n rows of dim values: the data
// FitKVQuantCodebook fits levels to.
func KVQuantSamples(f Format, key bool, rows []float32, dim int) ([]float32, error) {
	kf, ok := f.(kvquantFormat)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not a kvquant format", ErrOption, f.Name())
	}
	cd, err := kf.NewCodec(CodecParams{Dim: dim, Key: key})
	if err != nil {
		return nil, err
	}
	c := cd.(*kvquantCodec)
	if len(rows)%dim != 0 {
		return nil, fmt.Errorf("%w: %d values are not rows of %d", ErrDim, len(rows), dim)
	}
	n := len(rows) / dim
	buf := make([]float32, 2*max(dim, c.group))
	outs := make([]int, c.nout)
	var out []float32
	add := func(m int, get func(i int) float32) {
		_, _, zero, rng, x := c.vectorParams(m, get, outs, buf)
		if rng == 0 {
			return
		}
		for i, v := range x {
			if !slices.Contains(outs, i) {
				out = append(out, (v-zero)/rng)
			}
		}
	}
	if !key {
		for r := 0; r < n; r++ {
			x := rows[r*dim : (r+1)*dim]
			add(dim, func(i int) float32 { return x[i] })
		}
		return out, nil
	}
	for g0 := 0; g0+c.group <= n; g0 += c.group {
		x := rows[g0*dim : (g0+c.group)*dim]
		for ch := 0; ch < dim; ch++ {
			add(c.group, func(t int) float32 { return x[t*dim+ch] })
		}
	}
	return out, nil
}
