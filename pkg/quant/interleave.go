package quant

// GGUF key order. A Hugging Face Llama checkpoint rotates head dimensions
// in pairs (i, i+d/2) (rotate_half); llama.cpp's converter permutes the
// query and key weights so that the same pairs are adjacent, (2i, 2i+1).
// The attention scores are the same either way, but a block format groups
// consecutive dimensions (32 for q4_0), so a key cache quantizes other
// groups of values on a Hugging Face checkpoint than on its GGUF
// conversion: their KL divergences then differ by a few hundred ppm.
// InterleaveKeys stores keys in the GGUF order: dimension i of the row goes
// to 2i and i+d/2 to 2i+1 before encoding, and queries are permuted the
// same way, so that a comparison with llama.cpp on a converted model is like
// for like.

// InterleaveKeys returns f with its key codecs storing rows in GGUF order
// (see above); value codecs are f's own. Use it for models whose RoPE pairs
// (i, i+d/2); a model loaded from GGUF already has the order.
func InterleaveKeys(f Format) Format {
	if _, ok := f.(Stateful); ok {
		return &interleavedStateful{interleaved{f}}
	}
	return &interleaved{f}
}

type interleaved struct{ Format }

// interleavedStateful forwards Stateful for formats that learn from data.
type interleavedStateful struct{ interleaved }

var (
	_ Format   = (*interleaved)(nil)
	_ Stateful = (*interleavedStateful)(nil)
)

// Unwrap returns the wrapped format.
func (f *interleaved) Unwrap() Format { return f.Format }

// Traits implements Format: the wrapped format's, keys interleaved.
func (f *interleaved) Traits(key bool) Traits {
	t := f.Format.Traits(key)
	t.Interleaved = t.Interleaved || key
	return t
}

func (f *interleaved) NewCodec(p CodecParams) (Codec, error) {
	c, err := f.Format.NewCodec(p)
	if err != nil || !p.Key || p.Dim%2 != 0 {
		return c, err
	}
	return &interleavedCodec{Codec: c, dim: p.Dim}, nil
}

// Fresh keeps learned state per cache (see Stateful) through the wrapper.
func (f *interleavedStateful) Fresh() Format {
	return &interleavedStateful{interleaved{f.Format.(Stateful).Fresh()}}
}

// interleavedCodec permutes rows into GGUF order around an inner codec. It
// is a Rotator (the permutation is orthogonal), so attention permutes each
// query once instead of each row.
type interleavedCodec struct {
	Codec
	dim int
}

var (
	_ Codec         = (*interleavedCodec)(nil)
	_ Rotator       = (*interleavedCodec)(nil)
	_ Windowed      = (*interleavedCodec)(nil)
	_ PreRoPE       = (*interleavedCodec)(nil)
	_ PromptFlusher = (*interleavedCodec)(nil)
)

// The inner codec's optional behaviour passes through; their zero answers
// mean what not implementing them means.

func (c *interleavedCodec) ResidualRows() int {
	if w, ok := c.Codec.(Windowed); ok {
		return w.ResidualRows()
	}
	return 0
}

func (c *interleavedCodec) PreRoPE() bool {
	p, ok := c.Codec.(PreRoPE)
	return ok && p.PreRoPE()
}

func (c *interleavedCodec) FlushesFromPrompt() bool {
	p, ok := c.Codec.(PromptFlusher)
	return ok && p.FlushesFromPrompt()
}

// toGGUF sets dst[2i] = x[i], dst[2i+1] = x[i+d/2] for each row.
func toGGUF(dst, x []float32, dim int) {
	h := dim / 2
	for r := 0; r+dim <= len(x); r += dim {
		row, out := x[r:r+dim], dst[r:r+dim]
		for i := 0; i < h; i++ {
			out[2*i], out[2*i+1] = row[i], row[i+h]
		}
	}
}

// fromGGUF is toGGUF's inverse.
func fromGGUF(dst, x []float32, dim int) {
	h := dim / 2
	for r := 0; r+dim <= len(x); r += dim {
		row, out := x[r:r+dim], dst[r:r+dim]
		for i := 0; i < h; i++ {
			out[i], out[i+h] = row[2*i], row[2*i+1]
		}
	}
}

func (c *interleavedCodec) Encode(tile []byte, row0 int, src []float32, n int) {
	buf, h := chunkBuf(n * c.dim)
	defer releaseChunk(h)
	toGGUF(buf, src[:n*c.dim], c.dim)
	c.Codec.Encode(tile, row0, buf, n)
}

func (c *interleavedCodec) Decode(dst []float32, tile []byte, row0, n int) {
	buf, h := chunkBuf(n * c.dim)
	defer releaseChunk(h)
	c.Codec.Decode(buf, tile, row0, n)
	fromGGUF(dst[:n*c.dim], buf, c.dim)
}

func (c *interleavedCodec) Scores(dst []float32, ldd int, q []float32, nq int, tile []byte, row0, n int) {
	qr, h := chunkBuf(nq * c.dim)
	defer releaseChunk(h)
	c.RotateQueries(qr, q, nq)
	c.ScoresRotated(dst, ldd, qr, nq, tile, row0, n)
}

func (c *interleavedCodec) Accumulate(acc []float32, w []float32, ldw int, nq int, tile []byte, row0, n int) {
	racc, h := chunkBuf(nq * c.dim)
	defer releaseChunk(h)
	clear(racc)
	c.AccumulateRotated(racc, w, ldw, nq, tile, row0, n)
	c.UnrotateAdd(acc, racc, nq)
}

func (c *interleavedCodec) RotateQueries(dst, q []float32, nq int) {
	toGGUF(dst[:nq*c.dim], q[:nq*c.dim], c.dim)
}

func (c *interleavedCodec) ScoresRotated(dst []float32, ldd int, qr []float32, nq int, tile []byte, row0, n int) {
	c.Codec.Scores(dst, ldd, qr, nq, tile, row0, n)
}

func (c *interleavedCodec) AccumulateRotated(racc []float32, w []float32, ldw int, nq int, tile []byte, row0, n int) {
	c.Codec.Accumulate(racc, w, ldw, nq, tile, row0, n)
}

func (c *interleavedCodec) UnrotateAdd(acc, racc []float32, nq int) {
	buf, h := chunkBuf(nq * c.dim)
	defer releaseChunk(h)
	fromGGUF(buf, racc[:nq*c.dim], c.dim)
	for i, v := range buf {
		acc[i] += v
	}
}
