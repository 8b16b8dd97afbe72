package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/kvqlabs/kvq/internal/simd"
)

// kvquantFormat is a KVQuant-style scheme (Hooper et al., 2024):
//
//   - keys are stored before RoPE, per channel: each channel of a group of
//     G tokens is one vector;
//   - values are quantized per token: each token's head vector is one vector;
//   - a vector's ⌈p·m⌉ elements farthest from its median (p = the outlier
//     fraction, m its length) are kept exactly in fp16 with their index
//     ("dense-and-sparse"); the others are normalized to [−1, 1] with
//     zero = (max+min)/2 and range = (max−min)/2 (fp16) and rounded to the
//     nearest entry of a b-bit codebook.
//
// The default codebook is non-uniform ("nuq"): NormalFloat-style levels
// c_k = Φ⁻¹(q_k)/Φ⁻¹(q_last) with q_k = (k+½)/2^b, so c_0 = −1 and c_last = 1.
// KVQuant fits its codebook offline by Fisher-weighted k-means; kvq uses this
// data-free default unless calibrated levels are given with
// codebook@FILE.json (KVQuantCodebooks; fitted by FitKVQuantCodebook,
// weighted or not, on KVQuantSamples). The uniform option uses 2^b evenly
// spaced levels instead.
//
// Differences from the paper, by design: KVQuant calibrates key thresholds
// offline (static per channel) and normalizes per-token values over all KV
// heads together; kvq computes key statistics per group of G tokens online
// (so the newest incomplete group stays in fp16, as in KIVI) and treats each
// KV head separately. Attention-sink protection (the paper's first-few-fp16)
// is the spec's sink=N modifier.
type kvquantFormat struct {
	bits      int
	outliers  float64 // fraction
	group     int
	uniform   bool
	codebooks *KVQuantCodebooks // calibrated levels (codebook@FILE), or nil
}

func (f kvquantFormat) Name() string {
	n := "kvquant" + strconv.Itoa(f.bits)
	if f.outliers != 0.01 {
		n += ":o" + strconv.FormatFloat(f.outliers*100, 'f', -1, 64)
	}
	if f.group != 64 {
		n += ":g" + strconv.Itoa(f.group)
	}
	if f.uniform {
		n += ":uniform"
	}
	if f.codebooks != nil {
		n += ":codebook@" + f.codebooks.String()
	}
	return n
}

func (f kvquantFormat) Describe() (string, []string) {
	cb := "non-uniform (NormalFloat-style) data-free codebook (calibrated levels: codebook@FILE.json)"
	switch {
	case f.codebooks != nil:
		cb = "calibrated codebook from " + f.codebooks.String()
	case f.uniform:
		cb = "uniform levels"
	}
	return fmt.Sprintf("KVQuant-style %d-bit: pre-RoPE per-channel keys (groups of %d tokens), per-token values, %s, %g%% outliers in fp16",
		f.bits, f.group, cb, f.outliers*100), []string{"pre-RoPE key storage (RoPE applied at read)"}
}

func kvquantFamilies() []family {
	mk := func(base string, opts []string) (Format, error) {
		b, _ := strconv.Atoi(strings.TrimPrefix(base, "kvquant"))
		f := kvquantFormat{bits: b, outliers: 0.01, group: 64}
		for _, o := range opts {
			switch {
			case strings.HasPrefix(o, "codebook@"):
				path := strings.TrimPrefix(o, "codebook@")
				if path == "" {
					return nil, fmt.Errorf("%w: %s: codebook@ needs a file name", ErrOption, base)
				}
				cbs, err := LoadKVQuantCodebooks(path)
				if err != nil {
					return nil, err
				}
				if cbs.Bits != b {
					return nil, fmt.Errorf("%w: %s: codebook file %s has %d-bit levels", ErrOption, base, path, cbs.Bits)
				}
				f.codebooks = cbs
			case o == "uniform":
				f.uniform = true
			case o == "nuq":
				f.uniform = false
			case len(o) > 1 && o[0] == 'o':
				p, err := strconv.ParseFloat(o[1:], 64)
				if err != nil || p < 0 || p > 50 {
					return nil, fmt.Errorf("%w: %s: outlier percentage %q must be o<0..50>", ErrOption, base, o)
				}
				f.outliers = p / 100
			case len(o) > 1 && o[0] == 'g':
				g, err := strconv.Atoi(o[1:])
				if err != nil || g <= 0 || g > 4096 {
					return nil, fmt.Errorf("%w: %s: group %q must be g<1..4096>", ErrOption, base, o)
				}
				f.group = g
			default:
				return nil, fmt.Errorf("%w: %s: unknown option %q (valid: o<percent>, g<N>, nuq, uniform, codebook@FILE.json)", ErrOption, base, o)
			}
		}
		return f, nil
	}
	return []family{
		{base: "kvquant4", make: mk, options: []string{"o2", "g32", "nuq", "uniform"}, presets: []string{"kvquant4"}},
		{base: "kvquant3", make: mk, options: []string{"o2", "g32", "nuq", "uniform"}, presets: []string{"kvquant3"}},
		{base: "kvquant2", make: mk, options: []string{"o2", "g32", "nuq", "uniform"}, presets: []string{"kvquant2"}},
	}
}

// codebook returns the 2^bits levels in [−1, 1], increasing.
func (f kvquantFormat) codebook() []float32 {
	k := 1 << f.bits
	cb := make([]float32, k)
	if f.uniform {
		for i := range cb {
			cb[i] = float32(-1 + 2*float64(i)/float64(k-1))
		}
		return cb
	}
	probit := func(p float64) float64 { return math.Sqrt2 * math.Erfinv(2*p-1) }
	top := probit((float64(k) - 0.5) / float64(k))
	for i := range cb {
		cb[i] = float32(probit((float64(i)+0.5)/float64(k)) / top)
	}
	return cb
}

// Traits implements Format: keys pre-RoPE in per-channel groups of G
// tokens, values per token; each vector's zero and range (fp16) and
// outliers (see NewCodec for the layout).
func (f kvquantFormat) Traits(key bool) Traits {
	t := Traits{Family: FamilyKVQuant, Bits: f.bits, Codebook: CodebookNormal, Block: 0, Packing: PackSplit,
		Scale: ScaleToken, ScaleType: DTypeF16, Zero: DTypeF16, Outliers: f.outliers, Flush: 1}
	switch {
	case f.codebooks != nil:
		t.Codebook = CodebookCalibrated
	case f.uniform:
		t.Codebook = CodebookLinear
	}
	if key {
		t.Axis, t.Block, t.Packing, t.Scale, t.Flush, t.PreRoPE = AxisChannel, f.group, PackGroups, ScaleChannel, f.group, true
	}
	return t
}

func (f kvquantFormat) NewCodec(p CodecParams) (Codec, error) {
	if p.Dim <= 0 || p.Dim*f.bits%8 != 0 {
		return nil, fmt.Errorf("%w: %s: head size %d does not pack into whole bytes at %d bits", ErrDim, f.Name(), p.Dim, f.bits)
	}
	cb := f.codebook()
	if f.codebooks != nil {
		if l := f.codebooks.levels(p.Layer, p.Key); l != nil {
			cb = slices.Clone(l)
		}
	}
	c := &kvquantCodec{dim: p.Dim, bits: f.bits, cb: cb, lut: newLUT(cb), key: p.Key, group: 1}
	m := p.Dim // vector length
	if p.Key {
		c.group = f.group
		m = f.group
	}
	c.nout = outlierCount(f.outliers, m)
	c.idxBytes = 1
	if m > 256 {
		c.idxBytes = 2
	}
	c.vecMeta = 4 + c.nout*(2+c.idxBytes)
	c.rowCode = p.Dim * f.bits / 8
	if p.Key {
		c.groupBytes = c.group*c.rowCode + p.Dim*c.vecMeta
	} else {
		c.groupBytes = c.rowCode + c.vecMeta
	}
	return c, nil
}

// kvquantCodec. Value tiles: every row's zero and range (fp16), outlier
// values (fp16) and indices, then the rows' codes (see valueRegions). Key
// groups (group tokens): the channels' zeros, ranges and outliers, then the
// codes row by row (see keyRegions).
type kvquantCodec struct {
	dim, bits, group int
	key              bool
	cb               []float32 // the 2^bits levels, for Encode
	lut              lut       // cb as a lookup table, for Decode
	nout, idxBytes   int
	vecMeta, rowCode int
	groupBytes       int
}

func (c *kvquantCodec) PreRoPE() bool   { return c.key }
func (c *kvquantCodec) TokenGroup() int { return c.group }
func (c *kvquantCodec) StateBytes() int { return 0 }
func (c *kvquantCodec) TileBytes(rows int) int {
	return (rows + c.group - 1) / c.group * c.groupBytes
}

// vectorParams computes one vector's parameters (read through get, length
// m): it returns the fp16 bits and values of its zero and range and, in
// outs (len nout), the indices of its outliers, whose values are x[i] (x:
// the clamped vector, in scratch).
func (c *kvquantCodec) vectorParams(m int, get func(i int) float32, outs []int, scratch []float32) (zb, rb uint16, zero, rng float32, x []float32) {
	x = scratch[:m]
	for i := range x {
		x[i] = clampF16(get(i))
	}
	// Outliers: the nout elements farthest from the median.
	outs = outs[:0]
	if c.nout > 0 {
		sorted := append(scratch[m:m], x...)
		slices.Sort(sorted)
		med := (sorted[(m-1)/2] + sorted[m/2]) / 2
		for len(outs) < c.nout {
			best, bd := -1, float32(-1)
			for i, v := range x {
				if d := abs32(v - med); d > bd && !slices.Contains(outs, i) {
					best, bd = i, d
				}
			}
			outs = append(outs, best)
		}
	}
	lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
	for i, v := range x {
		if !slices.Contains(outs, i) {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	if lo > hi { // every element is an outlier
		lo, hi = 0, 0
	}
	zb = simd.F32ToF16Scalar(clampF16((hi + lo) / 2))
	zero = simd.F16ToF32Scalar(zb)
	// range covers both ends from the rounded zero, rounded up in fp16.
	rb, rng = f16Ceil(max(hi-zero, zero-lo))
	return zb, rb, zero, rng, x
}

// encodeVector quantizes one vector (see vectorParams) and writes its
// codes through put.
func (c *kvquantCodec) encodeVector(m int, get func(i int) float32, put func(i int, code uint32), outs []int, scratch []float32) (zb, rb uint16, x []float32) {
	zb, rb, zero, rng, x := c.vectorParams(m, get, outs, scratch)
	for i, v := range x {
		u := float32(0)
		if rng > 0 {
			u = (v - zero) / rng
		}
		put(i, uint32(nearest(c.cb, u)))
	}
	return zb, rb, x
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}

func (c *kvquantCodec) Encode(tile []byte, row0 int, src []float32, n int) {
	buf := make([]float32, 2*max(c.dim, c.group))
	outs := make([]int, c.nout)
	if !c.key {
		zeros, ranges, vals, idx, codes := c.valueRegions(tile)
		for r := row0; r < row0+n; r++ {
			row := codes[r*c.rowCode:][:c.rowCode]
			clear(row)
			x := src[(r-row0)*c.dim : (r-row0+1)*c.dim]
			zb, rb, xc := c.encodeVector(c.dim, func(i int) float32 { return x[i] },
				func(i int, code uint32) { putBits(row, i, c.bits, code) }, outs, buf)
			putF16(zeros[2*r:], zb)
			putF16(ranges[2*r:], rb)
			for k, i := range outs {
				j := r*c.nout + k
				putF16(vals[2*j:], simd.F32ToF16Scalar(xc[i]))
				c.putIndex(idx[j*c.idxBytes:], i)
			}
		}
		return
	}
	for g0 := 0; g0 < n; g0 += c.group {
		blk := tile[(row0+g0)/c.group*c.groupBytes:][:c.groupBytes]
		zeros, ranges, vals, idx, codes := c.keyRegions(blk)
		clear(codes)
		x := src[g0*c.dim : (g0+c.group)*c.dim]
		for ch := 0; ch < c.dim; ch++ {
			zb, rb, xc := c.encodeVector(c.group, func(t int) float32 { return x[t*c.dim+ch] },
				func(t int, code uint32) { putBits(codes[t*c.rowCode:], ch, c.bits, code) }, outs, buf)
			putF16(zeros[2*ch:], zb)
			putF16(ranges[2*ch:], rb)
			for k, i := range outs {
				j := ch*c.nout + k
				putF16(vals[2*j:], simd.F32ToF16Scalar(xc[i]))
				c.putIndex(idx[j*c.idxBytes:], i)
			}
		}
	}
}

// keyRegions splits a key group block into its regions, parameters first
// so that a page is read front to back (see tokenCodec): the dim fp16
// zeros, the dim fp16 ranges, the dim·nout fp16 outlier values and their
// dim·nout indices (channel-major: slot k of channel ch is ch·nout+k;
// index = token within the group), then the codes row by row.
func (c *kvquantCodec) keyRegions(blk []byte) (zeros, ranges, vals, idx, codes []byte) {
	d, o := c.dim, c.dim*c.nout
	zeros, ranges = blk[:2*d], blk[2*d:4*d]
	vals = blk[4*d : 4*d+2*o]
	idx = blk[4*d+2*o : 4*d+o*(2+c.idxBytes)]
	return zeros, ranges, vals, idx, blk[d*c.vecMeta:]
}

// valueRegions splits a value tile (of len(tile)/groupBytes rows) into its
// regions, parameters first: the rows' fp16 zeros, fp16 ranges, fp16
// outlier values and their indices (row-major: slot k of row r is
// r·nout+k; index = element within the row), then the codes row by row, so
// that a chunk of rows' codes is one bit stream.
func (c *kvquantCodec) valueRegions(tile []byte) (zeros, ranges, vals, idx, codes []byte) {
	rows := len(tile) / c.groupBytes
	o := rows * c.nout
	zeros, ranges = tile[:2*rows], tile[2*rows:4*rows]
	vals = tile[4*rows : 4*rows+2*o]
	idx = tile[4*rows+2*o : 4*rows+o*(2+c.idxBytes)]
	return zeros, ranges, vals, idx, tile[rows*c.vecMeta : rows*c.groupBytes]
}

func (c *kvquantCodec) putIndex(b []byte, i int) {
	if c.idxBytes == 1 {
		b[0] = byte(i)
	} else {
		binary.LittleEndian.PutUint16(b, uint16(i))
	}
}

func (c *kvquantCodec) index(b []byte, j int) int {
	if c.idxBytes == 1 {
		return int(b[j])
	}
	return int(binary.LittleEndian.Uint16(b[2*j:]))
}

// getBits reads code j of a bit stream of width bits.
func getBits(b []byte, j, bits int) uint32 {
	pos := j * bits
	w := uint32(b[pos>>3])
	if pos>>3+1 < len(b) {
		w |= uint32(b[pos>>3+1]) << 8
	}
	return w >> (pos & 7) & (1<<bits - 1)
}

func (c *kvquantCodec) Decode(dst []float32, tile []byte, row0, n int) {
	if !c.key {
		c.decodeValues(dst, tile, row0, n)
		return
	}
	var zb, rb [256]float32
	zero, rng := scratch(zb[:], c.dim), scratch(rb[:], c.dim)
	step := chunkRows(c.dim)
	u, pooled := chunkBuf(min(n, step) * c.dim)
	defer releaseChunk(pooled)
	for r := row0; r < row0+n; {
		gi := r / c.group
		e := min(row0+n, (gi+1)*c.group)
		blk := tile[gi*c.groupBytes:][:c.groupBytes]
		zeros, ranges, vals, idx, codes := c.keyRegions(blk)
		f16s(zero, zeros)
		f16s(rng, ranges)
		// Dense part: zero + range·codebook[code], a chunk of rows' codes
		// looked up in one call, then row by row, the product rounded
		// before the sum.
		lo, hi := r-gi*c.group, e-gi*c.group
		for t0 := lo; t0 < hi; t0 += step {
			t1 := min(hi, t0+step)
			lutUnpack(u[:(t1-t0)*c.dim], codes[t0*c.rowCode:t1*c.rowCode], c.bits, &c.lut)
			for t := t0; t < t1; t++ {
				d := dst[(gi*c.group+t-row0)*c.dim:][:c.dim]
				copy(d, zero)
				simd.MulAddF32(d, rng, u[(t-t0)*c.dim:(t-t0+1)*c.dim])
			}
		}
		// Sparse part: the outliers that fall in [r, e), found by their
		// indices (contiguous); only those convert their value.
		for j := 0; j < c.dim*c.nout; j++ {
			if i := c.index(idx, j); i >= lo && i < hi {
				dst[(gi*c.group+i-row0)*c.dim+j/c.nout] = getF16(vals[2*j:])
			}
		}
		r = e
	}
}

// decodeValues writes value rows [row0, row0+n): a chunk of rows' codes
// looked up in one call, then row by row zero + range·level, the product
// rounded before the sum (as the key path's MulAddF32 rounds), then the
// rows' outliers.
func (c *kvquantCodec) decodeValues(dst []float32, tile []byte, row0, n int) {
	zeros, ranges, vals, idx, codes := c.valueRegions(tile)
	lutUnpack(dst[:n*c.dim], codes[row0*c.rowCode:(row0+n)*c.rowCode], c.bits, &c.lut)
	for r := 0; r < n; r++ {
		d := dst[r*c.dim : (r+1)*c.dim]
		zero, rng := getF16(zeros[2*(row0+r):]), getF16(ranges[2*(row0+r):])
		for i, u := range d {
			d[i] = zero + float32(rng*u)
		}
		for k := 0; k < c.nout; k++ {
			j := (row0+r)*c.nout + k
			d[c.index(idx, j)] = getF16(vals[2*j:])
		}
	}
}

// Scores decodes a chunk of rows at a time and runs the shared kernel (the
// cache reads keys through Decode anyway, to apply RoPE).
func (c *kvquantCodec) Scores(dst []float32, ldd int, q []float32, nq int, tile []byte, row0, n int) {
	scoresChunked(c.Decode, c.dim, dst, ldd, q, nq, tile, row0, n)
}

// Accumulate, for values, uses Σ_t w_t v̂_t = Σ_t (w_t·range_t)·level(code_t)
// + Σ_t w_t·zero_t, then corrects the outlier elements: a chunk of rows'
// levels is looked up in one call (the codebook is shared) and accumulated
// with the weights scaled per row (an outlier's level replaced by
// (value − zero_t)/range_t), and the zeros' weighted sum is added to every
// element.
// It rounds differently from decoding and then accumulating (within the
// cache suite's tolerance). Keys take the decoding path.
func (c *kvquantCodec) Accumulate(acc []float32, w []float32, ldw int, nq int, tile []byte, row0, n int) {
	if c.key {
		accumulateChunked(c.Decode, c.dim, acc, w, ldw, nq, tile, row0, n)
		return
	}
	if nq == 0 || n == 0 {
		return
	}
	zeros, ranges, vals, idx, codes := c.valueRegions(tile)
	step := min(chunkRows(c.dim), fusedRows(nq))
	u, pooled := chunkBuf(min(n, step) * c.dim)
	defer releaseChunk(pooled)
	var sb, zb [64]float32
	var wb [256]float32
	var bb [64]float32
	var ob [64 * 4]float32
	bias := scratch(bb[:], nq)
	clear(bias)
	wbuf := wb[:]
	if nq*step > len(wb) {
		var h *chunk
		wbuf, h = chunkBuf(nq * step)
		defer releaseChunk(h)
	}
	for r := 0; r < n; r += step {
		m := min(step, n-r)
		p := row0 + r
		s, z := scratch(sb[:], m), scratch(zb[:], m)
		f16s(s, ranges[2*p:2*(p+m)])
		f16s(z, zeros[2*p:2*(p+m)])
		lutUnpack(u[:m*c.dim], codes[p*c.rowCode:(p+m)*c.rowCode], c.bits, &c.lut)
		ws := wbuf[:nq*m]
		for i := 0; i < nq; i++ {
			wi := w[i*ldw+r : i*ldw+r+m]
			simd.MulF32(ws[i*m:(i+1)*m], wi, s)
			bias[i] += simd.DotF32(wi, z)
		}
		// Outliers: their level is replaced by (value − zero)/range, so
		// that the accumulation gives zero + range·level = value (to a
		// rounding); a row of range 0 (all its inliers equal) adds
		// w·(value − zero) instead.
		o := m * c.nout
		ov := scratch(ob[:], o)
		f16s(ov, vals[2*p*c.nout:2*(p*c.nout+o)])
		for j := 0; j < o; j++ {
			t := j / c.nout
			e := c.index(idx, p*c.nout+j)
			if s[t] != 0 {
				u[t*c.dim+e] = (ov[j] - z[t]) / s[t]
				continue
			}
			u[t*c.dim+e] = 0
			for i := 0; i < nq; i++ {
				acc[i*c.dim+e] += w[i*ldw+r+t] * (ov[j] - z[t])
			}
		}
		simd.AccumulateF32(acc, ws, m, nq, c.dim, u[:m*c.dim], m)
	}
	for i, b := range bias {
		a := acc[i*c.dim : (i+1)*c.dim]
		for e := range a {
			a[e] += b
		}
	}
}
