package cpu

import (
	"math"

	"github.com/kvqlabs/kvq/pkg/runtime/backend"
)

var _ backend.ExpertExtras = (*Backend)(nil)

// ExpertExtras implements backend.ExpertExtras.
func (b *Backend) ExpertExtras() {}

// expertExtras finishes expert ex's FFN over n gathered rows when it has
// biases or the clamped SwiGLU (GPT-OSS): g and u hold the gate and up
// products (n×hidden), o gets the down product (n×dim). mm is the
// expert's matrix product.
func expertExtras(e *backend.Experts, ex int, g, u, o []float32, n, hidden, dim int, mm func(out, in []float32, m backend.Matrix)) {
	addRows := func(x []float32, bias []backend.Tensor, width int) {
		if bias == nil {
			return
		}
		b := host(bias[ex])[:width]
		for r := 0; r < n; r++ {
			row := x[r*width : (r+1)*width]
			for i, v := range b {
				row[i] += v
			}
		}
	}
	addRows(g, e.GateBias, hidden)
	addRows(u, e.UpBias, hidden)
	if e.Limit > 0 {
		ClampedSwiGLU(g[:n*hidden], u[:n*hidden], e.Alpha, e.Limit)
	} else {
		swiglu(g[:n*hidden], u[:n*hidden])
	}
	mm(o, g, e.Down[ex])
	addRows(o, e.DownBias, dim)
}

// ClampedSwiGLU sets g[i] to GPT-OSS's clamped SwiGLU of g[i] and u[i]:
// with g' = min(g, limit) and u' = clamp(u, −limit, limit),
// g'·sigmoid(alpha·g')·(u'+1), in float32 as llama.cpp's swiglu_oai
// computes it (x / (1 + exp(−alpha·x)), the exponential in float64 and
// rounded).
func ClampedSwiGLU(g, u []float32, alpha, limit float32) {
	for i, x := range g {
		x = min(x, limit)
		y := min(max(u[i], -limit), limit)
		glu := x / (1 + float32(math.Exp(float64(-alpha*x))))
		g[i] = glu * (y + 1)
	}
}
