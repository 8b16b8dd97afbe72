package train

// flops returns the floating-point operations one training step executes
// on b in the matrix products and attention (multiply-adds count 2):
//
//   - linear layers: 2·(weights) per token forward, twice that backward
//     (input and weight gradients);
//   - attention, per layer, query head and document of n tokens with
//     P = n(n+1)/2 causal pairs: 4·hd·P forward (scores, weighted sum),
//     10·hd·P backward (scores recomputed, dP, dQ, dK, dV).
//
// Element-wise work (norms, RoPE, softmax, SwiGLU, AdamW) is not counted.
func (c *Config) flops(b *batch) float64 {
	lin := float64(c.qkvRows()*c.Dim + c.Dim*c.Heads*c.HeadDim + 3*c.Hidden*c.Dim)
	perToken := 6 * (float64(c.Layers)*lin + float64(c.Vocab*c.Dim))
	f := perToken * float64(b.nt())
	for _, d := range b.docs {
		pairs := float64(d.n) * float64(d.n+1) / 2
		f += 14 * float64(c.HeadDim) * pairs * float64(c.Heads*c.Layers)
	}
	return f
}
