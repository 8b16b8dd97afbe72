package modeltest

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	goruntime "runtime"
	"sync"

	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/pkg/gguf"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// RandomModel builds a model with random weights in dtype dt (norm weights
// near 1), for tests and benchmarks of realistic shapes. It has no tokenizer.
// The same config, dtype and seed give the same weights.
func RandomModel(c runtime.Config, dt tensor.DType, seed uint64) (*runtime.Model, error) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	mat := func(name string, rows, cols int) (*tensor.Weight, error) {
		if err := checkQ80(name, dt, cols); err != nil {
			return nil, err
		}
		std := 1 / math.Sqrt(float64(cols))
		vals := make([]float32, rows*cols)
		for i := range vals {
			vals[i] = float32(rng.NormFloat64() * std)
		}
		return WeightFromF32(name, dt, rows, cols, vals), nil
	}
	return randomModel(c, rng, mat)
}

// RandomModelFast is RandomModel for large shapes (an 8B-shape model in
// seconds on many cores): every matrix is filled by parallel chunks of
// rows, each from its own generator, with uniform values of the same
// standard deviation as RandomModel's normal ones (so not the same
// weights). The same config, dtype and seed give the same weights.
func RandomModelFast(c runtime.Config, dt tensor.DType, seed uint64) (*runtime.Model, error) {
	n := uint64(0)
	mat := func(name string, rows, cols int) (*tensor.Weight, error) {
		if err := checkQ80(name, dt, cols); err != nil {
			return nil, err
		}
		n++
		id := n
		a := float32(math.Sqrt(3 / float64(cols))) // uniform on [-a, a] has std 1/sqrt(cols)
		w := &tensor.Weight{Name: name, DType: dt, Rows: rows, Cols: cols}
		switch dt {
		case tensor.F32:
			w.F32 = make([]float32, rows*cols)
		case tensor.F16, tensor.BF16:
			w.U16 = make([]uint16, rows*cols)
		default: // Q8_0 and the other block types
			w.Raw = make([]byte, rows*dt.RowBytes(cols))
		}
		const chunk = 64 // rows
		var wg sync.WaitGroup
		sem := make(chan struct{}, goruntime.GOMAXPROCS(0))
		for r0 := 0; r0 < rows; r0 += chunk {
			r1 := min(rows, r0+chunk)
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				rng := rand.New(rand.NewPCG(seed, id<<32|uint64(r0)))
				vals := make([]float32, (r1-r0)*cols)
				for i := range vals {
					vals[i] = a * (2*rng.Float32() - 1)
				}
				part := WeightFromF32(name, dt, r1-r0, cols, vals)
				switch dt {
				case tensor.F32:
					copy(w.F32[r0*cols:], part.F32)
				case tensor.F16, tensor.BF16:
					copy(w.U16[r0*cols:], part.U16)
				default:
					copy(w.Raw[r0*dt.RowBytes(cols):], part.Raw)
				}
			}()
		}
		wg.Wait()
		return w, nil
	}
	return randomModel(c, rand.New(rand.NewPCG(seed, 0x5eed)), mat)
}

func checkQ80(name string, dt tensor.DType, cols int) error {
	if !dt.Packed() {
		return nil
	}
	if qk, _ := dt.Block(); cols%qk != 0 {
		return fmt.Errorf("modeltest: random %s: %d columns is not a multiple of %d for %v", name, cols, qk, dt)
	}
	return nil
}

// ggufBlockTypes maps the block dtypes other than Q8_0 to pkg/gguf's
// types, whose QuantizeRow WeightFromF32 uses.
var ggufBlockTypes = map[tensor.DType]gguf.Type{
	tensor.Q40: gguf.Q40, tensor.Q41: gguf.Q41, tensor.Q50: gguf.Q50, tensor.Q51: gguf.Q51,
	tensor.Q2K: gguf.Q2K, tensor.Q3K: gguf.Q3K, tensor.Q4K: gguf.Q4K, tensor.Q5K: gguf.Q5K, tensor.Q6K: gguf.Q6K,
	tensor.IQ4NL: gguf.IQ4NL, tensor.IQ4XS: gguf.IQ4XS, tensor.MXFP4: gguf.MXFP4,
}

// randomModel assembles a model of config c from mat's matrices and norm
// weights near 1 drawn from rng.
func randomModel(c runtime.Config, rng *rand.Rand, mat func(name string, rows, cols int) (*tensor.Weight, error)) (*runtime.Model, error) {
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
// from zero; the other block types by pkg/gguf's QuantizeRow).
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
	default:
		if t, ok := ggufBlockTypes[dt]; ok { // the other block types, as llama-quantize without an imatrix
			rb := dt.RowBytes(cols)
			w.Raw = make([]byte, rows*rb)
			for r := 0; r < rows; r++ {
				gguf.QuantizeRow(t, w.Raw[r*rb:(r+1)*rb], vals[r*cols:(r+1)*cols])
			}
		}
	}
	return w
}
