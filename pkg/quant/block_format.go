package quant

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/kvqlabs/kvq/internal/simd"
)

// The llama.cpp cache types (-ctk/-ctv). A row of Dim values is Dim/32
// blocks; Dim must be a multiple of 32, as llama.cpp requires. The ":rot"
// variants (Lookup("q4_0:rot")) add llama.cpp's Hadamard rotation, which
// llama.cpp turns on by default for quantized caches since April 2026.
var (
	Q80   Format = &blockFormat{t: &q80Type}
	Q40   Format = &blockFormat{t: &q40Type}
	Q41   Format = &blockFormat{t: &q41Type}
	Q50   Format = &blockFormat{t: &q50Type}
	Q51   Format = &blockFormat{t: &q51Type}
	IQ4NL Format = &blockFormat{t: &iq4nlType}
)

var ggmlTypes = []*ggmlType{&q80Type, &q40Type, &q41Type, &q50Type, &q51Type, &iq4nlType}

type blockFormat struct {
	t   *ggmlType
	rot bool
}

var (
	_ Format    = (*blockFormat)(nil)
	_ Describer = (*blockFormat)(nil)
)

func (f *blockFormat) Name() string {
	if f.rot {
		return f.t.name + ":rot"
	}
	return f.t.name
}

func (f *blockFormat) Describe() (string, []string) {
	if f.rot {
		return f.t.summary + ", Hadamard-rotated K/V (llama.cpp attn_rot)",
			[]string{"head_dim % 64 == 0 (or 32)", "rotation of queries and output"}
	}
	return f.t.summary, []string{"head_dim % 32 == 0"}
}

func (f *blockFormat) NewCodec(p CodecParams) (Codec, error) {
	if p.Dim <= 0 || p.Dim%ggmlBlock != 0 {
		return nil, fmt.Errorf("%w: %s: head size %d is not a multiple of the block size %d (llama.cpp refuses it too)", ErrDim, f.Name(), p.Dim, ggmlBlock)
	}
	nb := p.Dim / ggmlBlock
	var c Codec = &blockCodec{t: f.t, dim: p.Dim, nb: nb, rowBytes: nb * f.t.bytes}
	if f.t.kind == ggmlIQ4NL && p.Dim <= kernelFloats {
		c = &iq4nlCodec{c.(*blockCodec)}
	}
	if f.rot {
		return newRotCodec(f.Name(), c, p)
	}
	return c, nil
}

// blockCodec stores rows of Dim/32 blocks.
type blockCodec struct {
	t        *ggmlType
	dim, nb  int
	rowBytes int // bytes of one row
}

var _ Codec = (*blockCodec)(nil)

func (c *blockCodec) TokenGroup() int        { return 1 }
func (c *blockCodec) TileBytes(rows int) int { return rows * c.rowBytes }
func (c *blockCodec) StateBytes() int        { return 0 }

func (c *blockCodec) Encode(tile []byte, row0 int, src []float32, n int) {
	quantizeRow(c.t, tile[row0*c.rowBytes:(row0+n)*c.rowBytes], src[:n*c.dim])
}

// Decode returns rows in their natural order.
func (c *blockCodec) Decode(dst []float32, tile []byte, row0, n int) {
	dst, rows := dst[:n*c.dim], tile[row0*c.rowBytes:(row0+n)*c.rowBytes]
	switch {
	case c.t.direct(): // the simd decoders need no scratch
		c.decodeRows(dst, rows, nil)
		return
	case c.t.kind == ggmlIQ4NL: // the kernels' decoder gives pair order
		dequantizeRow(c.t, dst, rows)
		return
	}
	s := getScratch()
	defer putScratch(s)
	step := max(1, kernelFloats/c.dim)
	for r := 0; r < n; r += step {
		m := min(step, n-r)
		c.decodeRows(dst[r*c.dim:(r+m)*c.dim], rows[r*c.rowBytes:(r+m)*c.rowBytes], s)
	}
}

// decodeRows decodes whole rows (at most kernelFloats values when s is
// needed) with internal/simd's block decoders, in the codec's basis:
//
//   - q8_0, q4_0, q4_1: Q80ToF32, Q40ToF32, Q41ToF32 on the tile;
//   - q5_0: repacked by SWAR into q8_0 blocks (codes q−16), then Q80ToF32;
//   - iq4_nl: repacked into q8_0 blocks holding the levels T[q], two per
//     table lookup, so in pair order (element j, then j+16: see
//     iq4nlPairs), then Q80ToF32;
//   - q5_1: unsigned codes q unpacked by SWAR, then U8ToF32Groups with
//     scale d and bias m.
//
// Every product and sum is exact in float32 or rounded as the reference
// rounds it, so the values are those of the DequantizeRow functions.
func (c *blockCodec) decodeRows(dst []float32, rows []byte, s *kernelScratch) {
	bb := c.t.bytes
	nb := len(rows) / bb
	if s == nil && !c.t.direct() || nb*ggmlBlock > kernelFloats && !c.t.direct() {
		// No scratch, or a row beyond kernelFloats values (no model has
		// one): the reference decoder. It gives iq4_nl in natural order,
		// which is why NewCodec uses the pair order only when a row fits.
		dequantizeRow(c.t, dst, rows)
		return
	}
	switch c.t.kind {
	case ggmlQ80:
		simd.Q80ToF32(dst, rows)
	case ggmlQ40:
		simd.Q40ToF32(dst, rows)
	case ggmlQ41:
		simd.Q41ToF32(dst, rows)
	case ggmlQ50:
		q8 := s.q8[:nb*34]
		for k := 0; k < nb; k++ {
			blk := (*[22]byte)(rows[k*22:])
			o := (*[34]byte)(q8[k*34:])
			o[0], o[1] = blk[0], blk[1]
			w0, w1, w2, w3 := q5Words((*[4]byte)(blk[2:6]), (*[16]byte)(blk[6:22]))
			binary.LittleEndian.PutUint64(o[2:10], swarSub16(w0))
			binary.LittleEndian.PutUint64(o[10:18], swarSub16(w1))
			binary.LittleEndian.PutUint64(o[18:26], swarSub16(w2))
			binary.LittleEndian.PutUint64(o[26:34], swarSub16(w3))
		}
		simd.Q80ToF32(dst, q8)
	case ggmlIQ4NL:
		q8 := s.q8[:nb*34]
		p := &iq4nlPairs
		for k := 0; k < nb; k++ {
			b := (*[18]byte)(rows[k*18:])
			o := (*[34]byte)(q8[k*34:])
			o[0], o[1] = b[0], b[1]
			binary.LittleEndian.PutUint64(o[2:10], uint64(p[b[2]])|uint64(p[b[3]])<<16|uint64(p[b[4]])<<32|uint64(p[b[5]])<<48)
			binary.LittleEndian.PutUint64(o[10:18], uint64(p[b[6]])|uint64(p[b[7]])<<16|uint64(p[b[8]])<<32|uint64(p[b[9]])<<48)
			binary.LittleEndian.PutUint64(o[18:26], uint64(p[b[10]])|uint64(p[b[11]])<<16|uint64(p[b[12]])<<32|uint64(p[b[13]])<<48)
			binary.LittleEndian.PutUint64(o[26:34], uint64(p[b[14]])|uint64(p[b[15]])<<16|uint64(p[b[16]])<<32|uint64(p[b[17]])<<48)
		}
		simd.Q80ToF32(dst, q8)
	case ggmlQ51:
		u, hb := s.u[:nb*ggmlBlock], s.hb[:2*nb]
		for k := 0; k < nb; k++ {
			blk := (*[24]byte)(rows[k*24:])
			hb[k] = binary.LittleEndian.Uint16(blk[0:])
			hb[nb+k] = binary.LittleEndian.Uint16(blk[2:])
			w0, w1, w2, w3 := q5Words((*[4]byte)(blk[4:8]), (*[16]byte)(blk[8:24]))
			o := (*[32]byte)(u[k*32:])
			binary.LittleEndian.PutUint64(o[0:8], w0)
			binary.LittleEndian.PutUint64(o[8:16], w1)
			binary.LittleEndian.PutUint64(o[16:24], w2)
			binary.LittleEndian.PutUint64(o[24:32], w3)
		}
		sb := s.sb[:2*nb]
		simd.F16ToF32(sb, hb)
		simd.U8ToF32Groups(dst, u, ggmlBlock, sb[:nb], sb[nb:])
	}
}

// swarSub16 subtracts 16 from each byte of v (bytes 0..31), giving int8
// codes, without borrows between bytes.
func swarSub16(v uint64) uint64 { return (v | swarHigh) - 16*swarOnes ^ swarHigh }

// iq4nlPairs[b] holds, as int8 in its low and high byte, the levels of the
// low and high nibble of b: elements j and j+16 of an iq4_nl block.
var iq4nlPairs = func() (t [256]uint16) {
	for b := range t {
		t[b] = uint16(uint8(iq4nlLevels[b&15])) | uint16(uint8(iq4nlLevels[b>>4]))<<8
	}
	return t
}()

// The iq4_nl codec works in pair order: value 2j of a block's 32 is element
// j, value 2j+1 element j+16 (Π of Rotator). Keys and values both.

// permutePairs sets dst = Π·src: dst[32b+2j] = src[32b+j], dst[32b+2j+1] =
// src[32b+16+j].
func permutePairs(dst, src []float32) {
	for b := 0; b+ggmlBlock <= len(src); b += ggmlBlock {
		s := (*[32]float32)(src[b:])
		d := (*[32]float32)(dst[b:])
		for j := 0; j < 16; j++ {
			d[2*j], d[2*j+1] = s[j], s[j+16]
		}
	}
}

// unpermutePairsAdd adds Πᵀ·src to dst.
func unpermutePairsAdd(dst, src []float32) {
	for b := 0; b+ggmlBlock <= len(src); b += ggmlBlock {
		s := (*[32]float32)(src[b:])
		d := (*[32]float32)(dst[b:])
		for j := 0; j < 16; j++ {
			d[j] += s[2*j]
			d[j+16] += s[2*j+1]
		}
	}
}

// Attention decodes at most kernelFloats values (a few rows) at a time and
// runs simd.ScoresF32 / AccumulateF32 on them (see block_kernel.go).

func (c *blockCodec) Scores(dst []float32, ldd int, q []float32, nq int, tile []byte, row0, n int) {
	if n <= 0 || nq <= 0 {
		return
	}
	s := getScratch()
	defer putScratch(s)
	buf, step := s.rows(c.dim)
	for j0 := 0; j0 < n; j0 += step {
		cnt := min(step, n-j0)
		f := buf[:cnt*c.dim]
		c.decodeRows(f, tile[(row0+j0)*c.rowBytes:(row0+j0+cnt)*c.rowBytes], s)
		scoresF32(dst[j0:], ldd, q, nq, c.dim, f, cnt)
	}
}

func (c *blockCodec) Accumulate(acc []float32, w []float32, ldw int, nq int, tile []byte, row0, n int) {
	if n <= 0 || nq <= 0 {
		return
	}
	s := getScratch()
	defer putScratch(s)
	buf, step := s.rows(c.dim)
	for j0 := 0; j0 < n; j0 += step {
		cnt := min(step, n-j0)
		f := buf[:cnt*c.dim]
		c.decodeRows(f, tile[(row0+j0)*c.rowBytes:(row0+j0+cnt)*c.rowBytes], s)
		accumulateF32(acc, w[j0:], ldw, nq, c.dim, f, cnt)
	}
}

// iq4nlCodec is the iq4_nl codec: its kernels decode rows in pair order
// (element j, then j+16, for each 32-value block), which is its Rotator
// basis Π, so kvcache permutes the queries and un-permutes the value sums
// once per attention step.
type iq4nlCodec struct{ *blockCodec }

var (
	_ Codec   = (*iq4nlCodec)(nil)
	_ Rotator = (*iq4nlCodec)(nil)
)

func (c *iq4nlCodec) RotateQueries(dst, q []float32, nq int) {
	permutePairs(dst[:nq*c.dim], q[:nq*c.dim])
}

func (c *iq4nlCodec) UnrotateAdd(acc, racc []float32, nq int) {
	unpermutePairsAdd(acc[:nq*c.dim], racc[:nq*c.dim])
}

func (c *iq4nlCodec) ScoresRotated(dst []float32, ldd int, qr []float32, nq int, tile []byte, row0, n int) {
	c.blockCodec.Scores(dst, ldd, qr, nq, tile, row0, n)
}

func (c *iq4nlCodec) AccumulateRotated(racc []float32, w []float32, ldw int, nq int, tile []byte, row0, n int) {
	c.blockCodec.Accumulate(racc, w, ldw, nq, tile, row0, n)
}

func (c *iq4nlCodec) Scores(dst []float32, ldd int, q []float32, nq int, tile []byte, row0, n int) {
	var stack [kernelFloats]float32
	qr := floats(stack[:], nq*c.dim)
	c.RotateQueries(qr, q, nq)
	c.ScoresRotated(dst, ldd, qr, nq, tile, row0, n)
}

func (c *iq4nlCodec) Accumulate(acc []float32, w []float32, ldw int, nq int, tile []byte, row0, n int) {
	var stack [kernelFloats]float32
	racc := floats(stack[:], nq*c.dim)
	clear(racc)
	c.AccumulateRotated(racc, w, ldw, nq, tile, row0, n)
	c.UnrotateAdd(acc, racc, nq)
}

// blockFamilies lists the llama.cpp block formats.
func blockFamilies() []family {
	var fams []family
	for i, t := range ggmlTypes {
		plain := []Format{Q80, Q40, Q41, Q50, Q51, IQ4NL}[i]
		rot := &blockFormat{t: t, rot: true}
		fams = append(fams, family{
			base: t.name,
			make: func(base string, opts []string) (Format, error) {
				switch {
				case len(opts) == 0:
					return plain, nil
				case len(opts) == 1 && opts[0] == "rot":
					return rot, nil
				}
				return nil, fmt.Errorf("%w: %s: options %q (valid: rot)", ErrOption, base, strings.Join(opts, ":"))
			},
			presets: []string{t.name, t.name + ":rot"},
		})
	}
	return fams
}
