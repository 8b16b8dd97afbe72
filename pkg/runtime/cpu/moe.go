package cpu

import (
	"sync"

	"github.com/kvqlabs/kvq/pkg/runtime/backend"
)

var _ backend.MoE = (*Backend)(nil)

// Route implements backend.MoE. The softmax runs in float64.
func (b *Backend) Route(dst, logits backend.Tensor, nt, n, k int, r backend.Routing) {
	d, l := host(dst), host(logits)
	for t := 0; t < nt; t++ {
		backend.RouteRow(d[t*2*k:(t+1)*2*k], l[t*n:(t+1)*n], k, r)
	}
}

// moeScratch holds ExpertFFN's per-step buffers, recycled through
// moeScratches.
type moeScratch struct {
	x, g, u, o []float32
	tok        []int32   // tokens routed to the expert, ascending
	w          []float32 // their weights
	count      []int     // per expert
	groups     []int     // the expert's tokens per row group (RowGroups)
}

var moeScratches = sync.Pool{New: func() any { return new(moeScratch) }}

// ExpertFFN implements backend.MoE: for each expert in turn that some
// token chose, its tokens' rows are gathered and run through the
// expert's gate, up and down products as one batch (each weight read
// once), and added into their rows of dst, weighted. Under RowGroups the
// expert's tokens are grouped by the row groups they come from, so that
// a row's result does not depend on the other groups' tokens; under
// Interruptible the experts left are skipped once done closes.
func (b *Backend) ExpertFFN(dst, x backend.Tensor, nt int, route backend.Tensor, k int, e *backend.Experts) {
	d, xs, rt := host(dst), host(x), host(route)
	ne := len(e.Gate)
	hidden, dim := weight(e.Gate[0]).Rows, weight(e.Gate[0]).Cols
	clear(d[:nt*dim])
	s := moeScratches.Get().(*moeScratch)
	defer moeScratches.Put(s)
	if cap(s.count) < ne {
		s.count = make([]int, ne)
	}
	s.count = s.count[:ne]
	clear(s.count)
	for t := 0; t < nt; t++ {
		for j := 0; j < k; j++ {
			s.count[int(rt[t*2*k+j])]++
		}
	}
	for ex := 0; ex < ne; ex++ {
		n := s.count[ex]
		if n == 0 {
			continue
		}
		if stopped(b.done) {
			return
		}
		if e.Prepare != nil {
			e.Prepare(ex)
		}
		s.tok, s.w = s.tok[:0], s.w[:0]
		for t := 0; t < nt; t++ {
			row := rt[t*2*k : (t+1)*2*k]
			for j := 0; j < k; j++ {
				if int(row[j]) == ex {
					s.tok = append(s.tok, int32(t))
					s.w = append(s.w, row[k+j])
				}
			}
		}
		s.x, s.o = grow(s.x, n*dim), grow(s.o, n*dim)
		s.g, s.u = grow(s.g, n*hidden), grow(s.u, n*hidden)
		for i, t := range s.tok {
			copy(s.x[i*dim:(i+1)*dim], xs[int(t)*dim:(int(t)+1)*dim])
		}
		mm := func(out, in []float32, m backend.Matrix) {
			if b.groups != nil && sum(b.groups) == nt {
				matMulGroups(b.workers, out, in, s.subgroups(b.groups), weight(m), b.done, b.f32Act)
				return
			}
			matMul(b.workers, out, in, n, weight(m), b.done, b.f32Act)
		}
		mm(s.g, s.x, e.Gate[ex])
		mm(s.u, s.x, e.Up[ex])
		if stopped(b.done) {
			return
		}
		if e.Extras() {
			expertExtras(e, ex, s.g, s.u, s.o, n, hidden, dim, mm)
		} else if b.workers.Serial(n*hidden, 8, swigluChunk) {
			swiglu(s.g, s.u)
		} else {
			g, u := s.g, s.u
			b.workers.For(n*hidden, 8, swigluChunk, func(lo, hi int) { swiglu(g[lo:hi], u[lo:hi]) })
		}
		if !e.Extras() {
			mm(s.o, s.g, e.Down[ex])
		}
		for i, t := range s.tok {
			w, dr, or := s.w[i], d[int(t)*dim:(int(t)+1)*dim], s.o[i*dim:(i+1)*dim]
			for c, v := range or {
				dr[c] += w * v
			}
		}
	}
}

// subgroups counts the expert's tokens (s.tok) in each of the row groups.
func (s *moeScratch) subgroups(groups []int) []int {
	s.groups = s.groups[:0]
	i, end := 0, 0
	for _, g := range groups {
		end += g
		n := 0
		for i < len(s.tok) && int(s.tok[i]) < end {
			n++
			i++
		}
		s.groups = append(s.groups, n)
	}
	return s.groups
}
