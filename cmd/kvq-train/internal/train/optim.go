package train

import "math"

// optBlock is the number of parameters per optimizer task and per partial
// sum of the gradient norm.
const optBlock = 1 << 14

// lr is the learning rate of step s (0-based): linear warm-up from LR/Warmup
// to LR over Warmup steps, then a cosine decay from LR to MinLR at Steps.
func (c *Config) lr(s int) float64 {
	if s < c.Warmup {
		return c.LR * float64(s+1) / float64(c.Warmup)
	}
	decay := c.Steps - c.Warmup
	if decay <= 0 {
		return c.LR
	}
	p := min(1, float64(s-c.Warmup)/float64(decay))
	return c.MinLR + 0.5*(c.LR-c.MinLR)*(1+math.Cos(math.Pi*p))
}

// gradNorm returns the global L2 norm of e.g: float64 partial sums over
// fixed blocks, added in block order.
func (e *engine) gradNorm() float64 {
	n := len(e.g)
	part := make([]float64, (n+optBlock-1)/optBlock)
	e.pool.blocks(n, optBlock, func(_, lo, hi int) {
		var s float64
		for _, v := range e.g[lo:hi] {
			s += float64(v) * float64(v)
		}
		part[lo/optBlock] = s
	})
	var s float64
	for _, v := range part {
		s += v
	}
	return math.Sqrt(s)
}

// adamW applies one AdamW step (Loshchilov & Hutter: the weight decay is
// decoupled from the gradient and scaled by the learning rate) to e.w,
// with the gradient e.g multiplied by gscale (the clipping factor) and the
// moments m and v; t is the 1-based step number for the bias corrections.
// Weight decay applies only to the spans marked decay (the linear layers
// and the output head), not to norms or the embedding.
func (e *engine) adamW(m, v []float32, t int, lr, gscale float64) {
	c := &e.cfg
	b1, b2 := float32(c.Beta1), float32(c.Beta2)
	bc1 := 1 - math.Pow(c.Beta1, float64(t))
	bc2 := 1 - math.Pow(c.Beta2, float64(t))
	// update = lr·m̂/(sqrt(v̂)+eps) with m̂ = m/bc1, v̂ = v/bc2.
	step := float32(lr / bc1)
	rbc2 := float32(1 / math.Sqrt(bc2))
	eps := float32(c.AdamEps)
	gs := float32(gscale)
	for _, s := range e.lay.all {
		decay := float32(1)
		if s.decay {
			decay = float32(1 - lr*c.WeightDecay)
		}
		w, g, ms, vs := s.of(e.w), s.of(e.g), s.of(m), s.of(v)
		e.pool.blocks(len(w), optBlock, func(_, lo, hi int) {
			for i := lo; i < hi; i++ {
				gi := g[i] * gs
				mi := b1*ms[i] + (1-b1)*gi
				vi := b2*vs[i] + (1-b2)*gi*gi
				ms[i], vs[i] = mi, vi
				d := float32(math.Sqrt(float64(vi)))*rbc2 + eps
				w[i] = w[i]*decay - step*mi/d
			}
		})
	}
}
