package cpu

import (
	"math"
)

// ropeSpan is how many consecutive positions KeyRoPE derives from one
// table row.
const ropeSpan = 64

// KeyRoPE rotates runs of key head vectors at consecutive positions, as a
// cache that stores keys before RoPE does on every read. A cos/sin table of
// every position would be read in full on every decode step (at 16K
// positions and head_dim 128 it is 8 MiB, as large as the fp16 keys of a
// KV head, and it leaves the CPU caches between heads), so KeyRoPE keeps one
// table row per ropeSpan positions and the angles 0..ropeSpan-1 (32 KiB at
// head_dim 128, which stays in L1): position b·ropeSpan+j is rotated by j's
// angles, then by b·ropeSpan's — the same rotation, within a float32
// rounding or two of the direct one.
type KeyRoPE struct {
	dim, half int
	neox      bool
	invFreq   []float64
	base      []float32 // [cos | sin] of positions 0, ropeSpan, 2·ropeSpan, ...
	step      []float32 // [cos | sin] of positions 0..ropeSpan-1
}

// NewKeyRoPE returns the rotation of head vectors of headDim values whose
// first 2·len(invFreq) are rotated (pairs (i, i+len(invFreq)) with neox,
// otherwise (2i, 2i+1)), at angles pos·invFreq[i], with a table for
// positions below maxPos (beyond it, angles are computed on the fly).
func NewKeyRoPE(headDim int, invFreq []float64, neox bool, maxPos int) *KeyRoPE {
	half := len(invFreq)
	k := &KeyRoPE{dim: headDim, half: half, neox: neox, invFreq: invFreq}
	rows := func(n, stride int) []float32 {
		t := make([]float32, n*2*half)
		for j := 0; j < n; j++ {
			k.angles(t[j*2*half:(j+1)*2*half], j*stride)
		}
		return t
	}
	k.base = rows((max(0, maxPos)+ropeSpan-1)/ropeSpan, ropeSpan)
	k.step = rows(ropeSpan, 1)
	return k
}

// angles writes [cos | sin] of position pos's angles into cs.
func (k *KeyRoPE) angles(cs []float32, pos int) {
	for i, f := range k.invFreq {
		s, c := math.Sincos(float64(pos) * f)
		cs[i], cs[k.half+i] = float32(c), float32(s)
	}
}

// Rows rotates the len(rows)/headDim vectors in rows, at positions pos0,
// pos0+1, ..., in place. It is safe for concurrent use.
func (k *KeyRoPE) Rows(rows []float32, pos0 int) {
	h2 := 2 * k.half
	n := len(rows) / k.dim
	for r := 0; r < n; {
		p := pos0 + r
		b := p / ropeSpan
		if b >= len(k.base)/h2 {
			k.rowsDirect(rows[r*k.dim:], p)
			return
		}
		// Positions b·ropeSpan+j for j in [p mod ropeSpan, ropeSpan):
		// rotated by j's angles, then by b·ropeSpan's.
		j0 := p % ropeSpan
		m := min(n-r, ropeSpan-j0)
		bc, bs := k.base[b*h2:b*h2+k.half], k.base[b*h2+k.half:(b+1)*h2]
		for t := 0; t < m; t++ {
			x := rows[(r+t)*k.dim : (r+t+1)*k.dim]
			j := j0 + t
			RotateHead(x, k.step[j*h2:j*h2+k.half], k.step[j*h2+k.half:(j+1)*h2], k.neox)
			if b > 0 {
				RotateHead(x, bc, bs, k.neox)
			}
		}
		r += m
	}
}

// rowsDirect rotates rows with angles computed for each position.
func (k *KeyRoPE) rowsDirect(rows []float32, pos0 int) {
	cs := make([]float32, 2*k.half)
	for r := 0; r < len(rows)/k.dim; r++ {
		k.angles(cs, pos0+r)
		RotateHead(rows[r*k.dim:(r+1)*k.dim], cs[:k.half], cs[k.half:], k.neox)
	}
}
