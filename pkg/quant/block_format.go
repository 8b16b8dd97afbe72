package quant

import (
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

// Traits implements Format: blocks of 32 values along head_dim, each its
// fp16 scale (and minimum) in front of its codes.
func (f *blockFormat) Traits(bool) Traits {
	t := Traits{Family: FamilyBlock, Bits: f.t.bits, Codebook: CodebookLinear, Block: ggmlBlock,
		Scale: ScaleBlock, ScaleType: DTypeF16, Flush: 1}
	if f.t.hasMin {
		t.Zero = DTypeF16
	}
	if f.t.kind == ggmlIQ4NL {
		t.Codebook = CodebookIQ4NL
	}
	if f.rot {
		t.Rotation = RotationHadamard
	}
	return t
}

func (f *blockFormat) NewCodec(p CodecParams) (Codec, error) {
	if p.Dim <= 0 || p.Dim%ggmlBlock != 0 {
		return nil, fmt.Errorf("%w: %s: head size %d is not a multiple of the block size %d (llama.cpp refuses it too)", ErrDim, f.Name(), p.Dim, ggmlBlock)
	}
	nb := p.Dim / ggmlBlock
	var c Codec = &blockCodec{t: f.t, dim: p.Dim, nb: nb, rowBytes: f.Traits(p.Key).UnitBytes(p.Dim)}
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

// Decode writes rows as float32 with internal/simd's block decoders, whose
// values are those of the DequantizeRow functions bit for bit.
func (c *blockCodec) Decode(dst []float32, tile []byte, row0, n int) {
	c.decodeRows(dst[:n*c.dim], tile[row0*c.rowBytes:(row0+n)*c.rowBytes])
}

func (c *blockCodec) decodeRows(dst []float32, rows []byte) {
	switch c.t.kind {
	case ggmlQ80:
		simd.Q80ToF32(dst, rows)
	case ggmlQ40:
		simd.Q40ToF32(dst, rows)
	case ggmlQ41:
		simd.Q41ToF32(dst, rows)
	case ggmlQ50:
		simd.Q50ToF32(dst, rows)
	case ggmlQ51:
		simd.Q51ToF32(dst, rows)
	case ggmlIQ4NL:
		simd.IQ4NLToF32(dst, rows)
	}
}

// Attention decodes a chunk of rows at a time and runs the shared kernels
// (see chunk.go).

func (c *blockCodec) Scores(dst []float32, ldd int, q []float32, nq int, tile []byte, row0, n int) {
	scoresChunked(c.Decode, c.dim, dst, ldd, q, nq, tile, row0, n)
}

func (c *blockCodec) Accumulate(acc []float32, w []float32, ldw int, nq int, tile []byte, row0, n int) {
	accumulateChunked(c.Decode, c.dim, acc, w, ldw, nq, tile, row0, n)
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
			options: []string{"rot"},
		})
	}
	return fams
}
