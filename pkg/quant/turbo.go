package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/kvqlabs/kvq/internal/simd"
)

// turboFormat is TurboQuant_mse (Zandieh et al., 2025): each row x is stored
// as its norm n = ‖x‖ (fp16) and b-bit indices into a Lloyd–Max codebook
// for the coordinates of the randomly rotated unit vector Π·x/n, whose
// density is ∝ (1−t²)^((d−3)/2) on [−1, 1] (≈ N(0, 1/d)). Reconstruction is
// x̂ = n·Πᵀ·c[idx]. With the nc option ("norm correction", as in vLLM's
// presets) the stored norm is n/‖c[idx]‖, so that ‖x̂‖ = ‖x‖.
// Keys and values use the same scheme; no fp16 residual window.
type turboFormat struct {
	bits int
	nc   bool
	seed uint64
	tab  *turboTables
}

type turboTables struct {
	mu   sync.Mutex
	rots map[int]*rotation
	cbs  map[int][]float32
}

func (f turboFormat) Name() string {
	n := "turbo" + strconv.Itoa(f.bits)
	if f.nc {
		n += ":nc"
	}
	if f.seed != 1 {
		n += ":seed" + strconv.FormatUint(f.seed, 10)
	}
	return n
}

func (f turboFormat) Describe() (string, []string) {
	nc := ""
	if f.nc {
		nc = " with norm correction"
	}
	return fmt.Sprintf("TurboQuant-mse %d-bit: random rotation + Lloyd–Max codebook per coordinate, fp16 norm%s", f.bits, nc),
		[]string{"rotation of queries (fused attention)"}
}

func rotatedFamilies() []family {
	mk := func(base string, opts []string) (Format, error) {
		b, _ := strconv.Atoi(strings.TrimPrefix(base, "turbo"))
		f := turboFormat{bits: b, seed: 1, tab: &turboTables{rots: map[int]*rotation{}, cbs: map[int][]float32{}}}
		for _, o := range opts {
			switch {
			case o == "nc":
				f.nc = true
			case strings.HasPrefix(o, "seed"):
				s, err := strconv.ParseUint(o[4:], 10, 64)
				if err != nil {
					return nil, fmt.Errorf("%w: %s: %q must be seed<integer>", ErrOption, base, o)
				}
				f.seed = s
			default:
				return nil, fmt.Errorf("%w: %s: unknown option %q (valid: nc, seed<N>)", ErrOption, base, o)
			}
		}
		return f, nil
	}
	return []family{
		{base: "turbo4", make: mk, options: []string{"nc", "seed7"}, presets: []string{"turbo4"}},
		{base: "turbo3", make: mk, options: []string{"nc", "seed7"}, presets: []string{"turbo3"}},
		{base: "turbo2", make: mk, options: []string{"nc", "seed7"}, presets: []string{"turbo2"}},
	}
}

// Traits implements Format: per row an fp16 norm, then codes into the
// Lloyd–Max codebook of the randomly rotated row (norms first, then codes).
func (f turboFormat) Traits(bool) Traits {
	return Traits{Family: FamilyTurbo, Bits: f.bits, Codebook: CodebookLloydMax, Block: 0, Packing: PackSplit,
		Scale: ScaleToken, ScaleType: DTypeF16, Rotation: RotationRandom, Seed: f.seed, NormCorrected: f.nc, Flush: 1}
}

func (f turboFormat) NewCodec(p CodecParams) (Codec, error) {
	if p.Dim <= 0 || p.Dim*f.bits%8 != 0 {
		return nil, fmt.Errorf("%w: %s: head size %d does not pack into whole bytes at %d bits", ErrDim, f.Name(), p.Dim, f.bits)
	}
	if p.Dim > MaxHeadDim {
		return nil, fmt.Errorf("%w: %s: head size %d (at most %d)", ErrDim, f.Name(), p.Dim, MaxHeadDim)
	}
	f.tab.mu.Lock()
	rot, ok := f.tab.rots[p.Dim]
	if !ok {
		rot = newRotation(p.Dim, f.seed)
		f.tab.rots[p.Dim] = rot
	}
	cb, ok := f.tab.cbs[p.Dim]
	if !ok {
		cb = lloydMaxSphere(p.Dim, f.bits)
		f.tab.cbs[p.Dim] = cb
	}
	f.tab.mu.Unlock()
	return &turboCodec{dim: p.Dim, bits: f.bits, rot: rot, cb: cb, lut: newLUT(cb), nc: f.nc, codeBytes: p.Dim * f.bits / 8}, nil
}

// lloydMaxSphere returns the 2^bits Lloyd–Max (1-D k-means) centroids, in
// increasing order, for one coordinate of a uniformly random unit vector in
// R^dim, computed numerically on a fine grid.
func lloydMaxSphere(dim, bits int) []float32 {
	k := 1 << bits
	lim := 1.0
	if dim > 3 {
		lim = math.Min(1, 9/math.Sqrt(float64(dim)))
	}
	const n = 8001
	xs := make([]float64, n)
	ws := make([]float64, n)
	for i := range xs {
		x := -lim + 2*lim*(float64(i)+0.5)/n
		xs[i] = x
		if dim > 3 {
			ws[i] = math.Pow(1-x*x, float64(dim-3)/2)
		} else {
			ws[i] = 1
		}
	}
	c := lloyd1D(xs, ws, k, 200)
	out := make([]float32, k)
	for i, v := range c {
		out[i] = float32(v)
	}
	return out
}

// lloyd1D returns k weighted 1-D k-means (Lloyd–Max) centroids of the
// points xs (sorted ascending) with weights ws, in increasing order: it
// starts from equal-mass quantiles and runs iters rounds of assigning each
// point to its nearest centroid and moving each centroid to the weighted
// mean of its points (a centroid with no mass stays where it is).
func lloyd1D(xs, ws []float64, k, iters int) []float64 {
	var total float64
	for _, w := range ws {
		total += w
	}
	c := make([]float64, k)
	acc, j := 0.0, 0
	for i := range xs {
		acc += ws[i]
		for j < k && acc >= total*(float64(j)+0.5)/float64(k) {
			c[j] = xs[i]
			j++
		}
	}
	for ; j < k; j++ { // rounding left the top quantiles unset
		c[j] = xs[len(xs)-1]
	}
	sum := make([]float64, k)
	mass := make([]float64, k)
	for it := 0; it < iters; it++ {
		clear(sum)
		clear(mass)
		b := 0
		for i, x := range xs {
			for b < k-1 && x > (c[b]+c[b+1])/2 {
				b++
			}
			sum[b] += x * ws[i]
			mass[b] += ws[i]
		}
		for i := range c {
			if mass[i] > 0 {
				c[i] = sum[i] / mass[i]
			}
		}
	}
	return c
}

// turboCodec tiles of capacity C rows: the C fp16 norms, then the C rows of
// packed b-bit indices (one bit stream, little end first, dim·b/8 bytes a
// row). A chunk of rows is then one stream, looked up in one call, and a
// page is read front to back (see tokenCodec).
type turboCodec struct {
	dim, bits int
	rot       *rotation
	cb        []float32 // the 2^bits centroids, for Encode
	lut       lut       // cb as a lookup table, for the decoders
	nc        bool
	codeBytes int
}

var _ Rotator = (*turboCodec)(nil)

func (c *turboCodec) TokenGroup() int        { return 1 }
func (c *turboCodec) rowBytes() int          { return c.codeBytes + 2 }
func (c *turboCodec) TileBytes(rows int) int { return rows * c.rowBytes() }
func (c *turboCodec) StateBytes() int        { return 0 }

// regions splits a tile into its norms and its codes.
func (c *turboCodec) regions(tile []byte) (norms, codes []byte) {
	capRows := len(tile) / c.rowBytes()
	return tile[:2*capRows], tile[2*capRows : capRows*c.rowBytes()]
}

// putBits writes code v at index j of a bit stream of width bits.
func putBits(b []byte, j, bits int, v uint32) {
	pos := j * bits
	for k := 0; k < bits; k++ {
		bi := pos + k
		if v>>k&1 == 1 {
			b[bi>>3] |= 1 << (bi & 7)
		} else {
			b[bi>>3] &^= 1 << (bi & 7)
		}
	}
}

// unpackValues sets u[j] = cb[code j] for a row's bit stream.
func (c *turboCodec) unpackValues(u []float32, b []byte) { lutUnpack(u[:c.dim], b, c.bits, &c.lut) }

func (c *turboCodec) Encode(tile []byte, row0 int, src []float32, n int) {
	var yb [512]float32
	y := scratch(yb[:], c.dim)
	norms, codes := c.regions(tile)
	for r := 0; r < n; r++ {
		row := codes[(row0+r)*c.codeBytes:][:c.codeBytes]
		nb := norms[2*(row0+r):][:2]
		x := src[r*c.dim : (r+1)*c.dim]
		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		norm := math.Sqrt(ss)
		clear(row)
		if norm == 0 || math.IsInf(norm, 0) || math.IsNaN(norm) {
			if norm != 0 { // inputs beyond float32 range: keep a finite result
				norm = maxF16
			}
			binary.LittleEndian.PutUint16(nb, simd.F32ToF16Scalar(float32(min(norm, maxF16))))
			continue
		}
		for i, v := range x {
			y[i] = float32(float64(v) / norm)
		}
		c.rot.apply(y, y)
		var cn float64
		for j, v := range y {
			k := nearest(c.cb, v)
			putBits(row, j, c.bits, uint32(k))
			cn += float64(c.cb[k]) * float64(c.cb[k])
		}
		stored := norm
		if c.nc && cn > 0 {
			stored = norm / math.Sqrt(cn)
		}
		binary.LittleEndian.PutUint16(nb, simd.F32ToF16Scalar(float32(min(stored, maxF16))))
	}
}

// nearest returns the index of the centroid closest to v (cb increasing).
func nearest(cb []float32, v float32) int {
	lo, hi := 0, len(cb)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if v > (cb[mid]+cb[mid+1])/2 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

func (c *turboCodec) Decode(dst []float32, tile []byte, row0, n int) {
	var ub [512]float32
	u := scratch(ub[:], c.dim)
	norms, codes := c.regions(tile)
	for r := 0; r < n; r++ {
		c.unpackValues(u, codes[(row0+r)*c.codeBytes:][:c.codeBytes])
		d := dst[r*c.dim : (r+1)*c.dim]
		c.rot.applyT(d, u)
		simd.ScaleF32(d, getF16(norms[2*(row0+r):]))
	}
}

func (c *turboCodec) RotateQueries(dst, q []float32, nq int) {
	for i := 0; i < nq; i++ {
		c.rot.apply(dst[i*c.dim:(i+1)*c.dim], q[i*c.dim:(i+1)*c.dim])
	}
}

// unitRows writes rows [row0, row0+n) in the rotated basis without their
// norms (the centroids c[idx]) into dst, and the norms into norms.
// The rows are one bit stream: one lookup call for all of them.
func (c *turboCodec) unitRows(dst, norms []float32, tile []byte, row0, n int) {
	nb, codes := c.regions(tile)
	f16s(norms[:n], nb[2*row0:2*(row0+n)])
	lutUnpack(dst[:n*c.dim], codes[row0*c.codeBytes:(row0+n)*c.codeBytes], c.bits, &c.lut)
}

// ScoresRotated uses qr·(norm·c[idx]) = norm·(qr·c[idx]): the rows are
// looked up without their norms, a chunk at a time, and each score is
// scaled once.
func (c *turboCodec) ScoresRotated(dst []float32, ldd int, qr []float32, nq int, tile []byte, row0, n int) {
	step := chunkRows(c.dim)
	rows, pooled := chunkBuf(c.dim * min(n, step))
	defer releaseChunk(pooled)
	var nb [64]float32 // Go zeroes stack arrays on every call: keep them small
	for r := 0; r < n; r += step {
		m := min(step, n-r)
		norms := scratch(nb[:], m)
		c.unitRows(rows[:m*c.dim], norms, tile, row0+r, m)
		simd.ScoresF32(dst[r:], ldd, qr, nq, c.dim, rows[:m*c.dim], m)
		for i := 0; i < nq; i++ {
			d := dst[i*ldd+r : i*ldd+r+m]
			simd.MulF32(d, d, norms)
		}
	}
}

// AccumulateRotated uses Σ w·(norm·c[idx]) = Σ (w·norm)·c[idx]: the weights
// are scaled by the norms, a chunk at a time.
func (c *turboCodec) AccumulateRotated(racc []float32, w []float32, ldw int, nq int, tile []byte, row0, n int) {
	step := chunkRows(c.dim)
	rows, pooled := chunkBuf(c.dim * min(n, step))
	defer releaseChunk(pooled)
	var nb [64]float32 // Go zeroes stack arrays on every call: keep them small
	var wb [128]float32
	wbuf := wb[:]
	if nq*step > len(wb) { // many queries: a pooled buffer, not one per round
		var h *chunk
		wbuf, h = chunkBuf(nq * step)
		defer releaseChunk(h)
	}
	for r := 0; r < n; r += step {
		m := min(step, n-r)
		norms := scratch(nb[:], m)
		c.unitRows(rows[:m*c.dim], norms, tile, row0+r, m)
		ws := wbuf[:nq*m]
		for i := 0; i < nq; i++ {
			simd.MulF32(ws[i*m:(i+1)*m], w[i*ldw+r:i*ldw+r+m], norms)
		}
		simd.AccumulateF32(racc, ws, m, nq, c.dim, rows[:m*c.dim], m)
	}
}

func (c *turboCodec) UnrotateAdd(acc, racc []float32, nq int) {
	var tb [512]float32
	t := scratch(tb[:], c.dim)
	for i := 0; i < nq; i++ {
		c.rot.applyT(t, racc[i*c.dim:(i+1)*c.dim])
		// acc row += t: with alpha 1 the product is exact, so even the
		// fused assembly rounds only the sum.
		simd.AxpyF32(acc[i*c.dim:(i+1)*c.dim], 1, t)
	}
}

func (c *turboCodec) Scores(dst []float32, ldd int, q []float32, nq int, tile []byte, row0, n int) {
	var qb [2048]float32
	qr := scratch(qb[:], nq*c.dim)
	c.RotateQueries(qr, q, nq)
	c.ScoresRotated(dst, ldd, qr, nq, tile, row0, n)
}

func (c *turboCodec) Accumulate(acc []float32, w []float32, ldw int, nq int, tile []byte, row0, n int) {
	var rb [2048]float32
	racc := scratch(rb[:], nq*c.dim)
	clear(racc)
	c.AccumulateRotated(racc, w, ldw, nq, tile, row0, n)
	c.UnrotateAdd(acc, racc, nq)
}
