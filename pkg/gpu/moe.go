//go:build cuda || cudaemu

package gpu

import (
	"unsafe"

	"github.com/kvqlabs/kvq/pkg/runtime/backend"
)

var _ backend.MoE = (*Backend)(nil)

// Mixture-of-experts ops. The expert FFNs' matrix products run on the
// device, grouped by expert: the tokens routed to an expert are gathered
// into consecutive rows and go through its gate, up and down products as
// one batch, so each used expert's weights are read once per step, an
// unused one never. The routing (top-k of a few dozen logits per token)
// and the weighted sum of each token's k expert outputs run on the host,
// with the existing kernels only: the router's logits (Experts values a
// token) and the experts' outputs (k·Dim a token) cross the bus once per
// layer, a synchronization point of the step.

// moeState is ExpertFFN's device scratch, grown to the largest step.
type moeState struct {
	x, g, u, o *tensor // gathered rows, gate and up, expert outputs
	host       []float32
	route      []float32
	rows       []int32
	order      []int32 // the (token, slot) of each gathered row
}

// ensureMoE grows *t to n values.
func (b *Backend) ensureMoE(t **tensor, n int) *tensor {
	if *t == nil || (*t).n < n {
		if *t != nil {
			b.Free(*t)
		}
		*t = b.Alloc(n).(*tensor)
	}
	return *t
}

// view is values [off, off+n) of t as a tensor.
func view(t *tensor, off, n int) *tensor { return &tensor{p: t.at(off), n: n} }

// Route implements backend.MoE: the logits are read back and routed on
// the host (backend.RouteRow), and the routes written to dst.
func (b *Backend) Route(dst, logits backend.Tensor, nt, n, k int, r backend.Routing) {
	need("Route", dev(logits), nt*n)
	d := dev(dst)
	need("Route", d, nt*2*k)
	if nt == 0 {
		return
	}
	s := &b.moe
	s.host = grow32(s.host, nt*n)
	if err := b.Download(s.host, logits, 0); err != nil {
		b.fail(err)
		return
	}
	s.route = grow32(s.route, nt*2*k)
	for t := 0; t < nt; t++ {
		backend.RouteRow(s.route[t*2*k:(t+1)*2*k], s.host[t*n:(t+1)*n], k, r)
	}
	b.fail(b.d.htod(d.p, unsafe.Pointer(&s.route[0]), int64(4*nt*2*k)))
}

// ExpertFFN implements backend.MoE.
func (b *Backend) ExpertFFN(dst, x backend.Tensor, nt int, route backend.Tensor, k int, e *backend.Experts) {
	ne := len(e.Gate)
	hidden, dim := mat(e.Gate[0]).rows, mat(e.Gate[0]).cols
	d, xs := dev(dst), dev(x)
	need("ExpertFFN", d, nt*dim)
	need("ExpertFFN", xs, nt*dim)
	if nt == 0 {
		return
	}
	s := &b.moe
	s.route = grow32(s.route, nt*2*k)
	if err := b.Download(s.route, route, 0); err != nil {
		b.fail(err)
		return
	}
	// The rows of each expert in turn, its tokens in order.
	count := make([]int, ne+1)
	for t := 0; t < nt; t++ {
		for j := 0; j < k; j++ {
			count[int(s.route[t*2*k+j])+1]++
		}
	}
	for i := 1; i <= ne; i++ {
		count[i] += count[i-1] // count[e]: expert e's first row
	}
	total := nt * k
	s.rows, s.order = s.rows[:0], s.order[:0]
	s.rows = append(s.rows, make([]int32, total)...)
	s.order = append(s.order, make([]int32, total)...)
	next := append([]int(nil), count[:ne]...)
	for t := 0; t < nt; t++ {
		for j := 0; j < k; j++ {
			ex := int(s.route[t*2*k+j])
			s.rows[next[ex]] = int32(t)
			s.order[next[ex]] = int32(t*k + j)
			next[ex]++
		}
	}
	xg := b.ensureMoE(&s.x, total*dim)
	g, u := b.ensureMoE(&s.g, total*hidden), b.ensureMoE(&s.u, total*hidden)
	o := b.ensureMoE(&s.o, total*dim)
	b.Gather(xg, xs, s.rows, dim)
	for ex := 0; ex < ne; ex++ {
		off, n := count[ex], count[ex+1]-count[ex]
		if n == 0 {
			continue
		}
		if e.Prepare != nil {
			e.Prepare(ex)
		}
		gx, gg, gu := view(xg, off*dim, n*dim), view(g, off*hidden, n*hidden), view(u, off*hidden, n*hidden)
		gout := view(o, off*dim, n*dim)
		b.MatMul(gg, gx, n, e.Gate[ex])
		b.MatMul(gu, gx, n, e.Up[ex])
		if e.GateBias != nil {
			b.AddBias(gg, n, e.GateBias[ex])
		}
		if e.UpBias != nil {
			b.AddBias(gu, n, e.UpBias[ex])
		}
		if e.Limit > 0 {
			b.clampedSwiGLU(gg, gu, n*hidden, e.Alpha, e.Limit)
		} else {
			b.SwiGLU(gg, gu, n*hidden)
		}
		b.MatMul(gout, gg, n, e.Down[ex])
		if e.DownBias != nil {
			b.AddBias(gout, n, e.DownBias[ex])
		}
	}
	// The weighted sum of each token's outputs, in increasing expert
	// index (the rows' order), on the host.
	s.host = grow32(s.host, total*dim+nt*dim)
	out, acc := s.host[:total*dim], s.host[total*dim:total*dim+nt*dim]
	if err := b.Download(out, o, 0); err != nil {
		b.fail(err)
		return
	}
	clear(acc)
	for i, tj := range s.order {
		t, j := int(tj)/k, int(tj)%k
		w := s.route[t*2*k+k+j]
		a, r := acc[t*dim:(t+1)*dim], out[i*dim:(i+1)*dim]
		for c, v := range r {
			a[c] += w * v
		}
	}
	b.fail(b.d.htod(d.p, unsafe.Pointer(&acc[0]), int64(4*nt*dim)))
}

var _ backend.ExpertExtras = (*Backend)(nil)

// ExpertExtras implements backend.ExpertExtras: ExpertFFN adds the
// experts' biases after their products and applies the clamped SwiGLU
// (kvq_swiglu_oai) when Experts.Limit > 0. MXFP4 expert matrices are
// uploaded packed at their first use (matrix.lazy).
func (b *Backend) ExpertExtras() {}

var _ backend.ExpertExtras = (*Device)(nil)

// ExpertExtras implements backend.ExpertExtras.
func (d *Device) ExpertExtras() {}

// clampedSwiGLU sets gate[i] to GPT-OSS's clamped SwiGLU of gate[i] and
// up[i] for i < n (backend.Experts).
func (b *Backend) clampedSwiGLU(gate, up *tensor, n int, alpha, limit float32) {
	b.launch("kvq_swiglu_oai", elemGrid(n), dim3{elemThreads, 1, 1}, 0, args{}.ptr(gate.p).ptr(up.p).int(n).f32(alpha).f32(limit))
}

// grow32 returns v with n values, reallocated when too small.
func grow32(v []float32, n int) []float32 {
	if cap(v) < n {
		return make([]float32, n)
	}
	return v[:n]
}

var _ backend.MoE = (*Device)(nil)

// Route implements backend.MoE.
func (d *Device) Route(dst, logits backend.Tensor, nt, n, k int, r backend.Routing) {
	defer d.lock()()
	d.b.Route(dst, logits, nt, n, k, r)
}

// ExpertFFN implements backend.MoE.
func (d *Device) ExpertFFN(dst, x backend.Tensor, nt int, route backend.Tensor, k int, e *backend.Experts) {
	defer d.lock()()
	d.b.ExpertFFN(dst, x, nt, route, k, e)
}
