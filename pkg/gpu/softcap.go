//go:build cuda || cudaemu

package gpu

import "github.com/kvqlabs/kvq/pkg/runtime/backend"

// The ops of the Gemma families (backend.SoftcapOps; kernels/softcap.cu):
// a scale, GeGLU with the tanh GELU, and softcapped attention (every
// attention kernel of attention.go takes AttnParams.Softcap).

var (
	_ backend.SoftcapOps = (*Backend)(nil)
	_ backend.SoftcapOps = (*Device)(nil)
)

// Scale implements backend.SoftcapOps.
func (b *Backend) Scale(x backend.Tensor, n int, s float32) {
	xt := dev(x)
	need("Scale", xt, n)
	if n == 0 {
		return
	}
	b.launch("kvq_scale", elemGrid(n), dim3{elemThreads, 1, 1}, 0, args{}.ptr(xt.p).int(n).f32(s))
}

// GeGLU implements backend.SoftcapOps.
func (b *Backend) GeGLU(gate, up backend.Tensor, n int) {
	g, u := dev(gate), dev(up)
	need("GeGLU", g, n)
	need("GeGLU", u, n)
	if n == 0 {
		return
	}
	b.launch("kvq_geglu", elemGrid(n), dim3{elemThreads, 1, 1}, 0, args{}.ptr(g.p).ptr(u.p).int(n))
}

// SoftcapAttention implements backend.SoftcapOps: Attention applies
// AttnParams.Softcap in every kernel and cache format.
func (b *Backend) SoftcapAttention() bool { return true }

// Scale implements backend.SoftcapOps.
func (d *Device) Scale(x backend.Tensor, n int, s float32) { defer d.lock()(); d.b.Scale(x, n, s) }

// GeGLU implements backend.SoftcapOps.
func (d *Device) GeGLU(gate, up backend.Tensor, n int) { defer d.lock()(); d.b.GeGLU(gate, up, n) }

// SoftcapAttention implements backend.SoftcapOps.
func (d *Device) SoftcapAttention() bool { return true }
