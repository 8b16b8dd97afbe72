package calibrate

import (
	"math"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
)

// Side names one of the recorded tensors of a layer.
type Side int

// The recorded tensors: keys after RoPE (what an fp8 cache stores and
// llm-compressor observes), keys before RoPE (what KVQuant calibrates),
// values.
const (
	SideK Side = iota
	SideKPre
	SideV
	numSides
)

// String is the side's name in outputs: "k", "k_pre_rope" or "v".
func (s Side) String() string {
	switch s {
	case SideK:
		return "k"
	case SideKPre:
		return "k_pre_rope"
	case SideV:
		return "v"
	}
	return "?"
}

// histBins is the number of bins of the |x| histograms: one per value of
// the top 13 bits of a float32 after its sign, i.e. 32 bins per octave over
// the whole float32 range (3% relative width), filled from the bits without
// a logarithm.
const (
	histShift = 18
	histBins  = 1 << (31 - histShift)
)

func histBin(x float32) int { return int(math.Float32bits(x) & 0x7fffffff >> histShift) }

// histLow is the smallest |x| of bin b.
func histLow(b int) float64 { return float64(math.Float32frombits(uint32(b) << histShift)) }

// RecordOptions configure a Recorder.
type RecordOptions struct {
	// MSE runs llm-compressor's MSE observer search on every batch (the
	// dataset:mse strategy needs it; it costs about 20 fake quantizations
	// of each batch).
	MSE bool
	// MSEKind is the fp8 encoding the MSE search quantizes to (E4M3 when
	// zero).
	MSEKind quant.FP8Kind
	// KeepTokens keeps the first KeepTokens token rows of every layer's
	// pre-RoPE keys and values for fitting KVQuant codebooks (0: none).
	KeepTokens int
}

// Recorder is a runtime.KVObserver that accumulates the statistics of the
// keys and values a model writes. Each ObserveKV call is one batch for its
// layer (a forward step's tokens of one sequence): the per-batch minima and
// maxima the moving-average observers need are kept batch by batch. A
// Recorder is not safe for concurrent use; one runner feeds it.
type Recorder struct {
	layers, heads, dim int
	opts               RecordOptions
	acc                [][numSides]*sideAcc
	// kept holds KeepTokens rows per layer: [layer][0 keys pre-RoPE, 1
	// values] as chunks of whole observations.
	kept [][2][]keptChunk
}

var _ runtime.KVObserver = (*Recorder)(nil)

type keptChunk struct {
	n    int
	rows []float32 // n rows of heads·dim
}

// sideAcc accumulates one tensor of one layer.
type sideAcc struct {
	heads, dim int
	tokens     int64
	// per channel (heads·dim)
	min, max   []float32
	sum, sumSq []float64
	// per head
	hist      [][]uint64 // histBins counts of |x|
	nonFinite []int64
	batches   []batch
}

// batch is one observation's extremes, per head and for the tensor; with
// the MSE search, the best shrink factor of the range per head and for the
// tensor.
type batch struct {
	tokens     int
	min, max   []float32 // per head
	tmin, tmax float32
	mseHead    []float32
	mseTensor  float32
}

// NewRecorder makes a recorder for a model's geometry.
func NewRecorder(m *runtime.Model, opts RecordOptions) *Recorder {
	c := &m.Config
	r := &Recorder{layers: c.Layers, heads: c.KVHeads, dim: c.HeadDim, opts: opts}
	if r.opts.MSEKind != quant.E5M2 {
		r.opts.MSEKind = quant.E4M3
	}
	r.acc = make([][numSides]*sideAcc, c.Layers)
	for l := range r.acc {
		for s := range r.acc[l] {
			a := &sideAcc{heads: r.heads, dim: r.dim}
			n := r.heads * r.dim
			a.min, a.max = make([]float32, n), make([]float32, n)
			for i := range a.min {
				a.min[i], a.max[i] = float32(math.Inf(1)), float32(math.Inf(-1))
			}
			a.sum, a.sumSq = make([]float64, n), make([]float64, n)
			a.hist = make([][]uint64, r.heads)
			for h := range a.hist {
				a.hist[h] = make([]uint64, histBins)
			}
			a.nonFinite = make([]int64, r.heads)
			r.acc[l][s] = a
		}
	}
	r.kept = make([][2][]keptChunk, c.Layers)
	return r
}

// ObserveKV implements runtime.KVObserver.
func (r *Recorder) ObserveKV(o *runtime.KVObservation) {
	if o.Layer < 0 || o.Layer >= r.layers || o.N <= 0 {
		return
	}
	for s, x := range [numSides][]float32{SideK: o.K, SideKPre: o.KPre, SideV: o.V} {
		r.acc[o.Layer][s].add(x, o.N, r.opts)
	}
	if r.opts.KeepTokens > 0 {
		kept := &r.kept[o.Layer]
		have := 0
		for _, c := range kept[0] {
			have += c.n
		}
		if n := min(o.N, r.opts.KeepTokens-have); n > 0 {
			w := r.heads * r.dim
			kept[0] = append(kept[0], keptChunk{n: n, rows: append([]float32(nil), o.KPre[:n*w]...)})
			kept[1] = append(kept[1], keptChunk{n: n, rows: append([]float32(nil), o.V[:n*w]...)})
		}
	}
}

func (a *sideAcc) add(x []float32, n int, opts RecordOptions) {
	w := a.heads * a.dim
	b := batch{tokens: n, min: make([]float32, a.heads), max: make([]float32, a.heads)}
	for h := range a.heads {
		b.min[h], b.max[h] = float32(math.Inf(1)), float32(math.Inf(-1))
	}
	for t := range n {
		row := x[t*w : (t+1)*w]
		for h := range a.heads {
			hist := a.hist[h]
			lo, hi := b.min[h], b.max[h]
			for i, v := range row[h*a.dim : (h+1)*a.dim] {
				c := h*a.dim + i
				if !(math.Abs(float64(v)) <= math.MaxFloat32) {
					a.nonFinite[h]++
					continue
				}
				lo, hi = min(lo, v), max(hi, v)
				a.min[c], a.max[c] = min(a.min[c], v), max(a.max[c], v)
				f := float64(v)
				a.sum[c] += f
				a.sumSq[c] += f * f
				hist[histBin(v)]++
			}
			b.min[h], b.max[h] = lo, hi
		}
	}
	a.tokens += int64(n)
	b.tmin, b.tmax = float32(math.Inf(1)), float32(math.Inf(-1))
	for h := range a.heads {
		b.tmin, b.tmax = min(b.tmin, b.min[h]), max(b.tmax, b.max[h])
	}
	if opts.MSE {
		b.mseHead = make([]float32, a.heads)
		vals := make([]float32, 0, n*a.dim)
		for h := range a.heads {
			vals = vals[:0]
			for t := range n {
				vals = append(vals, x[t*w+h*a.dim:t*w+(h+1)*a.dim]...)
			}
			b.mseHead[h] = mseShrink(vals, absmax(b.min[h], b.max[h]), opts.MSEKind)
		}
		b.mseTensor = mseShrink(x[:n*w], absmax(b.tmin, b.tmax), opts.MSEKind)
	}
	a.batches = append(a.batches, b)
}

// absmax is max(|lo|, |hi|) with the range widened to include 0, as
// compressed-tensors' calculate_qparams does; 0 for an empty range.
func absmax(lo, hi float32) float32 {
	if lo > hi {
		return 0
	}
	return max(-min(lo, 0), max(hi, 0))
}

// llm-compressor's MSE observer (observers/mse.py) shrinks the observed
// range by p = 1, 0.99, … down to 1 − maxshrink in steps of 1/grid, stopping
// after patience steps without improvement, and keeps the p whose fake
// quantization has the least Σ|x − q(x)|^norm.
const (
	mseMaxShrink = 0.20
	mseGrid      = 100
	msePatience  = 5
	mseNorm      = 2.4
)

// mseShrink returns the MSE observer's shrink factor p for vals, whose
// absmax is amax, for an fp8 encoding of kind (scale = p·amax/kind.Max()).
func mseShrink(vals []float32, amax float32, kind quant.FP8Kind) float32 {
	if !(amax > 0) {
		return 1
	}
	best, bestErr := float32(1), math.Inf(1)
	worse := 0
	for i := range int(mseMaxShrink * mseGrid) {
		p := 1 - float32(i)/mseGrid
		cand := p * amax
		scale := max(cand/kind.Max(), float32(epsFloat32))
		var e float64
		for _, v := range vals {
			q := kind.Decode(kind.Encode(v/scale, true)) * scale
			e += math.Pow(math.Abs(float64(q-v)), mseNorm)
		}
		if e < bestErr {
			best, bestErr, worse = p, e, 0
			continue
		}
		if worse++; worse >= msePatience {
			break
		}
	}
	return best
}

// epsFloat32 is torch.finfo(torch.float32).eps, compressed-tensors' floor
// for scales.
const epsFloat32 = 1.1920928955078125e-07
