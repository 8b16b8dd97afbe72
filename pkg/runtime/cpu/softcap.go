package cpu

import (
	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
)

// The ops of the Gemma families (backend.SoftcapOps): a scale, GeGLU with
// the tanh GELU, and softcapped attention scores. Their exponentials go
// through simd.ExpShiftTaylor (AVX2/AVX-512 with a pure-Go twin of the same
// bits); the rest is a Go loop over each 256-value chunk.

var _ backend.SoftcapOps = (*Backend)(nil)

// Scale implements backend.SoftcapOps.
func (b *Backend) Scale(x backend.Tensor, n int, s float32) { simd.ScaleF32(host(x)[:n], s) }

// SoftcapAttention implements backend.SoftcapOps: Attention applies
// AttnParams.Softcap.
func (b *Backend) SoftcapAttention() bool { return true }

// GeGLU implements backend.SoftcapOps: gate[i] = gelu_tanh(gate[i])·up[i],
// over the workers.
func (b *Backend) GeGLU(gate, up backend.Tensor, n int) {
	g, u := host(gate)[:n], host(up)[:n]
	if b.workers.Serial(n, 8, swigluChunk) {
		geglu(g, u)
		return
	}
	b.workers.For(n, 8, swigluChunk, func(lo, hi int) { geglu(g[lo:hi], u[lo:hi]) })
}

// The tanh approximation of GELU: gelu(x) = 0.5·x·(1 + tanh(u)) with
// u = √(2/π)·(x + 0.044715·x³), computed as x / (1 + e^(−2u)).
const (
	geluC0 = 0.7978845608028654 // √(2/π)
	geluC1 = 0.044715
)

// geglu sets g[i] = gelu_tanh(g[i])·u[i].
func geglu(g, u []float32) {
	var e [256]float32
	for i := 0; i < len(g); i += len(e) {
		gs := g[i:min(len(g), i+len(e))]
		us := u[i:][:len(gs)]
		es := e[:len(gs)]
		for j, x := range gs {
			es[j] = geluC0 * (x + geluC1*x*x*x)
		}
		simd.ExpShiftTaylor(es, es, -2, 0)
		for j, x := range gs {
			gs[j] = x / (1 + es[j]) * us[j]
		}
	}
}

// softcap sets x[i] = c·tanh(scale·x[i]/c), tanh(y) computed as
// 1 − 2/(1 + e^(2y)) (±c at the extremes, an absolute error of a few
// float32 ulps of c near zero).
func softcap(x []float32, scale, c float32) {
	var e [256]float32
	k := 2 * scale / c
	for i := 0; i < len(x); i += len(e) {
		xs := x[i:min(len(x), i+len(e))]
		es := e[:len(xs)]
		simd.ExpShiftTaylor(es, xs, k, 0)
		for j := range xs {
			xs[j] = c * (1 - 2/(1+es[j]))
		}
	}
}

// Softcap applies c·tanh(x/c) to each value of x in place, as softcapped
// attention does to its scores (with scale 1): the final-logit softcap of
// Gemma 2 runs it on the host logits.
func Softcap(x []float32, c float32) { softcap(x, 1, c) }
