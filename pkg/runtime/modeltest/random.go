package modeltest

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// RandomModel builds a model with random weights in dtype dt (norm weights
// near 1), for tests and benchmarks of realistic shapes. It has no tokenizer.
// The same config, dtype and seed give the same weights.
func RandomModel(c runtime.Config, dt tensor.DType, seed uint64) (*runtime.Model, error) {
	if c.RopeDim == 0 {
		c.RopeDim = c.HeadDim
	}
	if c.RMSEps == 0 {
		c.RMSEps = 1e-5
	}
	if c.RopeTheta == 0 {
		c.RopeTheta = 10000
	}
	if c.Arch == "" {
		c.Arch = "llama"
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	mat := func(name string, rows, cols int) (*tensor.Weight, error) {
		if dt == tensor.Q80 && cols%tensor.Q80BlockSize != 0 {
			return nil, fmt.Errorf("modeltest: random %s: %d columns is not a multiple of 32 for Q8_0", name, cols)
		}
		std := 1 / math.Sqrt(float64(cols))
		vals := make([]float32, rows*cols)
		for i := range vals {
			vals[i] = float32(rng.NormFloat64() * std)
		}
		return WeightFromF32(name, dt, rows, cols, vals), nil
	}
	norm := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(1 + 0.1*rng.NormFloat64())
		}
		return v
	}
	m := &runtime.Model{Config: c, Path: "random", Format: "random"}
	var err error
	qd, kvd := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	must := func(w *tensor.Weight, e error) *tensor.Weight {
		if e != nil && err == nil {
			err = e
		}
		return w
	}
	m.Embed = must(mat("embed", c.Vocab, c.Dim))
	m.Output = m.Embed
	if !c.TiedEmbeddings {
		m.Output = must(mat("output", c.Vocab, c.Dim))
	}
	m.Norm = norm(c.Dim)
	m.Layers = make([]runtime.Layer, c.Layers)
	for i := range m.Layers {
		l := &m.Layers[i]
		l.AttnNorm, l.FFNNorm = norm(c.Dim), norm(c.Dim)
		l.Wq = must(mat("q", qd, c.Dim))
		l.Wk = must(mat("k", kvd, c.Dim))
		l.Wv = must(mat("v", kvd, c.Dim))
		l.Wo = must(mat("o", c.Dim, qd))
		l.Gate = must(mat("gate", c.Hidden, c.Dim))
		l.Up = must(mat("up", c.Hidden, c.Dim))
		l.Down = must(mat("down", c.Dim, c.Hidden))
	}
	if err != nil {
		return nil, err
	}
	if err := m.Prepare(); err != nil {
		return nil, err
	}
	return m, nil
}

// WeightFromF32 converts float32 values into a weight of dtype dt (Q8_0 rows
// are quantized as ggml does: scale = absmax/127, codes rounded half away
// from zero).
func WeightFromF32(name string, dt tensor.DType, rows, cols int, vals []float32) *tensor.Weight {
	w := &tensor.Weight{Name: name, DType: dt, Rows: rows, Cols: cols}
	switch dt {
	case tensor.F32:
		w.F32 = vals
	case tensor.F16:
		w.U16 = make([]uint16, len(vals))
		simd.F32ToF16(w.U16, vals)
	case tensor.BF16:
		w.U16 = make([]uint16, len(vals))
		simd.F32ToBF16(w.U16, vals)
	case tensor.Q80:
		w.Raw = make([]byte, rows*dt.RowBytes(cols))
		for b := 0; b < len(vals)/tensor.Q80BlockSize; b++ {
			blk := vals[b*tensor.Q80BlockSize : (b+1)*tensor.Q80BlockSize]
			var amax float32
			for _, v := range blk {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
			d := amax / 127
			out := w.Raw[b*tensor.Q80BlockBytes:]
			binary.LittleEndian.PutUint16(out, simd.F32ToF16Scalar(d))
			for i, v := range blk {
				q := float32(0)
				if d != 0 {
					q = float32(math.Round(float64(v / d)))
				}
				out[2+i] = byte(int8(q))
			}
		}
	}
	return w
}
