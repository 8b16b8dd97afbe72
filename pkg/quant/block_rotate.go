package quant

import (
	"fmt"
	"math"
)

// llama.cpp's attention rotation (attn_rot, PR #21038; docs/quant-schemes.md
// §6.3 and §7.1): for a quantized cache, K and V rows are multiplied by an
// orthonormal Walsh–Hadamard matrix H_m/√m (Sylvester order, so symmetric and
// its own inverse) before they are quantized; queries are rotated the same way, which
// leaves q·k unchanged, and the attention output is rotated back. The matrix
// is block diagonal over runs of m values, as in llama.cpp's
// src/llama-kv-cache.cpp: for keys m is the largest power of two dividing the
// head size, for values m = 64. llama.cpp enables it when the head size is a
// multiple of 64; kvq also accepts a head size of 32 (m = 32 for both).
//
// Summaries of the PR say "n×n Hadamard on Q, K, V"; that is what llama.cpp
// does for keys with power-of-two head sizes, but its values use 64-wide
// blocks (a source comment reports smaller rotations work better for V), and
// kvq follows the source so that rotated caches match llama.cpp's.

// hadamardBlock returns the rotation block size for a head size.
func hadamardBlock(name string, dim int, key bool) (int, error) {
	switch {
	case dim == 32:
		return 32, nil
	case dim <= 0 || dim%64 != 0:
		return 0, fmt.Errorf("%w: %s: head size %d: the Hadamard rotation needs a multiple of 64 (or 32)", ErrDim, name, dim)
	case !key:
		return 64, nil
	}
	m := 64
	for dim%(2*m) == 0 {
		m *= 2
	}
	return m, nil
}

// hadamardRotate replaces x by H_m/√m applied to each run of m values
// (len(x) a multiple of m, m a power of two ≥ 8). It is its own inverse up to
// rounding.
func hadamardRotate(x []float32, m int) {
	s := float32(1 / math.Sqrt(float64(m)))
	for b := 0; b+m <= len(x); b += m {
		blk := x[b : b+m]
		fwhtInPlace(blk)
		for i := range blk {
			blk[i] *= s
		}
	}
}

// fwhtInPlace is the unnormalized fast Walsh–Hadamard transform of x
// (len(x) a power of two ≥ 8), natural (Sylvester) order: a radix-8 pass,
// then radix-4 passes, then a radix-2 pass when log2(len) is even.
func fwhtInPlace(x []float32) {
	n := len(x)
	for i := 0; i+8 <= n; i += 8 {
		v := (*[8]float32)(x[i : i+8])
		a0, a1 := v[0]+v[1], v[0]-v[1]
		a2, a3 := v[2]+v[3], v[2]-v[3]
		a4, a5 := v[4]+v[5], v[4]-v[5]
		a6, a7 := v[6]+v[7], v[6]-v[7]
		b0, b1, b2, b3 := a0+a2, a1+a3, a0-a2, a1-a3
		b4, b5, b6, b7 := a4+a6, a5+a7, a4-a6, a5-a7
		v[0], v[1], v[2], v[3] = b0+b4, b1+b5, b2+b6, b3+b7
		v[4], v[5], v[6], v[7] = b0-b4, b1-b5, b2-b6, b3-b7
	}
	h := 8
	for ; 4*h <= n; h *= 4 {
		for i := 0; i < n; i += 4 * h {
			p0 := x[i : i+h]
			p1 := x[i+h : i+2*h][:len(p0)]
			p2 := x[i+2*h : i+3*h][:len(p0)]
			p3 := x[i+3*h : i+4*h][:len(p0)]
			for j := range p0 {
				a, b, c, d := p0[j], p1[j], p2[j], p3[j]
				s0, d0 := a+b, a-b
				s1, d1 := c+d, c-d
				p0[j], p1[j], p2[j], p3[j] = s0+s1, d0+d1, s0-s1, d0-d1
			}
		}
	}
	if 2*h <= n {
		for i := 0; i < n; i += 2 * h {
			p0 := x[i : i+h]
			p1 := x[i+h : i+2*h][:len(p0)]
			for j := range p0 {
				a, b := p0[j], p1[j]
				p0[j], p1[j] = a+b, a-b
			}
		}
	}
}

// rotCodec stores rows rotated by the block Hadamard matrix and keeps them
// in an inner codec of token group 1. Decode returns un-rotated rows.
type rotCodec struct {
	inner Codec
	dim   int
	block int
}

var (
	_ Codec   = (*rotCodec)(nil)
	_ Rotator = (*rotCodec)(nil)
)

func newRotCodec(name string, inner Codec, p CodecParams) (Codec, error) {
	m, err := hadamardBlock(name, p.Dim, p.Key)
	if err != nil {
		return nil, err
	}
	return &rotCodec{inner: inner, dim: p.Dim, block: m}, nil
}

func (c *rotCodec) TokenGroup() int        { return c.inner.TokenGroup() }
func (c *rotCodec) TileBytes(rows int) int { return c.inner.TileBytes(rows) }
func (c *rotCodec) StateBytes() int        { return c.inner.StateBytes() }

func (c *rotCodec) Encode(tile []byte, row0 int, src []float32, n int) {
	var stack [512]float32
	buf := stack[:]
	if c.dim > len(stack) {
		buf = make([]float32, c.dim)
	}
	rows := len(buf) / c.dim
	for r := 0; r < n; r += rows {
		k := min(rows, n-r)
		copy(buf, src[r*c.dim:(r+k)*c.dim])
		hadamardRotate(buf[:k*c.dim], c.block)
		c.inner.Encode(tile, row0+r, buf[:k*c.dim], k)
	}
}

func (c *rotCodec) Decode(dst []float32, tile []byte, row0, n int) {
	c.inner.Decode(dst, tile, row0, n)
	hadamardRotate(dst[:n*c.dim], c.block)
}

// The Rotator methods compose the Hadamard rotation H with the inner
// codec's own basis Π (the fp8 kernels' lane order): the codec's rotation
// is Π·H.

func (c *rotCodec) RotateQueries(dst, q []float32, nq int) {
	n := nq * c.dim
	ir, ok := c.inner.(Rotator)
	if !ok {
		copy(dst[:n], q[:n])
		hadamardRotate(dst[:n], c.block)
		return
	}
	var stack [chunkFloats]float32
	t := scratch(stack[:], n)
	copy(t, q[:n])
	hadamardRotate(t, c.block)
	ir.RotateQueries(dst, t, nq)
}

func (c *rotCodec) ScoresRotated(dst []float32, ldd int, qr []float32, nq int, tile []byte, row0, n int) {
	if ir, ok := c.inner.(Rotator); ok {
		ir.ScoresRotated(dst, ldd, qr, nq, tile, row0, n)
		return
	}
	c.inner.Scores(dst, ldd, qr, nq, tile, row0, n)
}

func (c *rotCodec) AccumulateRotated(racc []float32, w []float32, ldw int, nq int, tile []byte, row0, n int) {
	if ir, ok := c.inner.(Rotator); ok {
		ir.AccumulateRotated(racc, w, ldw, nq, tile, row0, n)
		return
	}
	c.inner.Accumulate(racc, w, ldw, nq, tile, row0, n)
}

func (c *rotCodec) UnrotateAdd(acc, racc []float32, nq int) {
	n := nq * c.dim
	var stack [chunkFloats]float32
	t := scratch(stack[:], n)
	if ir, ok := c.inner.(Rotator); ok {
		clear(t)
		ir.UnrotateAdd(t, racc, nq)
	} else {
		copy(t, racc[:n])
	}
	hadamardRotate(t, c.block)
	for i, v := range t {
		acc[i] += v
	}
}

// Scores and Accumulate rotate on every call; kvcache uses the Rotator
// methods to rotate once per attention step instead.
func (c *rotCodec) Scores(dst []float32, ldd int, q []float32, nq int, tile []byte, row0, n int) {
	var stack [chunkFloats]float32
	qr := scratch(stack[:], nq*c.dim)
	c.RotateQueries(qr, q, nq)
	c.ScoresRotated(dst, ldd, qr, nq, tile, row0, n)
}

func (c *rotCodec) Accumulate(acc []float32, w []float32, ldw int, nq int, tile []byte, row0, n int) {
	var stack [chunkFloats]float32
	racc := scratch(stack[:], nq*c.dim)
	clear(racc)
	c.AccumulateRotated(racc, w, ldw, nq, tile, row0, n)
	c.UnrotateAdd(acc, racc, nq)
}
