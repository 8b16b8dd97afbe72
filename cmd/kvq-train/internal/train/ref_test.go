package train

import "math"

// A float64 reference of the probe model, written as plainly as possible
// (naive loops, no blocking, no recomputation) and independent of the
// engine: the finite-difference gradient tests differentiate it, and the
// forward tests compare the engine with it. It uses the engine's float32
// RoPE tables, converted exactly, so that both compute the same function.

func to64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// refLinear returns y = x·wᵀ for nt rows: x nt×in, w out×in.
func refLinear(x []float64, nt, in int, w []float64, out int) []float64 {
	y := make([]float64, nt*out)
	for t := 0; t < nt; t++ {
		for r := 0; r < out; r++ {
			var s float64
			for c := 0; c < in; c++ {
				s += x[t*in+c] * w[r*in+c]
			}
			y[t*out+r] = s
		}
	}
	return y
}

func refRMSNorm(x []float64, nt int, g []float64, eps float64) []float64 {
	d := len(g)
	y := make([]float64, len(x))
	for t := 0; t < nt; t++ {
		var ss float64
		for i := 0; i < d; i++ {
			ss += x[t*d+i] * x[t*d+i]
		}
		r := 1 / math.Sqrt(ss/float64(d)+eps)
		for i := 0; i < d; i++ {
			y[t*d+i] = x[t*d+i] * r * g[i]
		}
	}
	return y
}

// refRoPE rotates every head of every token row (width heads·hd) in place.
func refRoPE(x []float64, pos []int32, heads, hd int, cos, sin []float32) {
	half := hd / 2
	for t, p := range pos {
		for h := 0; h < heads; h++ {
			v := x[(t*heads+h)*hd : (t*heads+h+1)*hd]
			for i := 0; i < half; i++ {
				c, s := float64(cos[int(p)*half+i]), float64(sin[int(p)*half+i])
				a, b := v[i], v[i+half]
				v[i], v[i+half] = a*c-b*s, a*s+b*c
			}
		}
	}
}

// refAttention is causal GQA attention inside each document over
// token-major q (nt × heads·hd), k and v (nt × kvHeads·hd), after RoPE.
func refAttention(q, k, v []float64, docs []doc, heads, kvHeads, hd int) []float64 {
	nt := len(q) / (heads * hd)
	o := make([]float64, nt*heads*hd)
	scale := 1 / math.Sqrt(float64(hd))
	for _, d := range docs {
		for h := 0; h < heads; h++ {
			g := h / (heads / kvHeads)
			for i := 0; i < d.n; i++ {
				ti := d.start + i
				qi := q[(ti*heads+h)*hd : (ti*heads+h+1)*hd]
				s := make([]float64, i+1)
				m := math.Inf(-1)
				for j := 0; j <= i; j++ {
					kj := k[((d.start+j)*kvHeads+g)*hd : ((d.start+j)*kvHeads+g+1)*hd]
					var dot float64
					for c := range qi {
						dot += qi[c] * kj[c]
					}
					s[j] = dot * scale
					m = math.Max(m, s[j])
				}
				var sum float64
				for j := range s {
					s[j] = math.Exp(s[j] - m)
					sum += s[j]
				}
				oi := o[(ti*heads+h)*hd : (ti*heads+h+1)*hd]
				for j := range s {
					vj := v[((d.start+j)*kvHeads+g)*hd : ((d.start+j)*kvHeads+g+1)*hd]
					for c := range oi {
						oi[c] += s[j] / sum * vj[c]
					}
				}
			}
		}
	}
	return o
}

func refSwiGLU(gu []float64, nt, hidden int) []float64 {
	h := make([]float64, nt*hidden)
	for t := 0; t < nt; t++ {
		for i := 0; i < hidden; i++ {
			g, u := gu[2*t*hidden+i], gu[(2*t+1)*hidden+i]
			h[t*hidden+i] = g / (1 + math.Exp(-g)) * u
		}
	}
	return h
}

// refCrossEntropy returns Σ_t w_t·(lse_t − z_t[y_t]) / Σ_t w_t.
func refCrossEntropy(z []float64, vocab int, targets []int32, weights []float32) float64 {
	var loss, wsum float64
	for t, y := range targets {
		w := float64(weights[t])
		if w == 0 {
			continue
		}
		zr := z[t*vocab : (t+1)*vocab]
		m := math.Inf(-1)
		for _, v := range zr {
			m = math.Max(m, v)
		}
		var s float64
		for _, v := range zr {
			s += math.Exp(v - m)
		}
		loss += w * (m + math.Log(s) - zr[y])
		wsum += w
	}
	return loss / wsum
}

// refModel runs the whole model in float64 and returns the logits (nt ×
// vocab).
func refModel(c *Config, lay *layout, w []float64, b *batch, cos, sin []float32) []float64 {
	nt, D, H, hd := b.nt(), c.Dim, c.Hidden, c.HeadDim
	at := func(s span) []float64 { return w[s.off:s.end()] }
	x := make([]float64, nt*D)
	emb := at(lay.embed)
	for t, id := range b.ids {
		copy(x[t*D:(t+1)*D], emb[int(id)*D:(int(id)+1)*D])
	}
	eps := float64(c.RMSEps)
	for _, l := range lay.layers {
		xn := refRMSNorm(x, nt, at(l.attnNorm), eps)
		qkv := refLinear(xn, nt, D, at(l.wqkv), c.qkvRows())
		qd, kvd := c.Heads*hd, c.KVHeads*hd
		q, k, v := make([]float64, nt*qd), make([]float64, nt*kvd), make([]float64, nt*kvd)
		for t := 0; t < nt; t++ {
			row := qkv[t*c.qkvRows():]
			copy(q[t*qd:(t+1)*qd], row[:qd])
			copy(k[t*kvd:(t+1)*kvd], row[qd:qd+kvd])
			copy(v[t*kvd:(t+1)*kvd], row[qd+kvd:qd+2*kvd])
		}
		refRoPE(q, b.pos, c.Heads, hd, cos, sin)
		refRoPE(k, b.pos, c.KVHeads, hd, cos, sin)
		o := refAttention(q, k, v, b.docs, c.Heads, c.KVHeads, hd)
		y := refLinear(o, nt, qd, at(l.wo), D)
		for i := range x {
			x[i] += y[i]
		}
		xn = refRMSNorm(x, nt, at(l.ffnNorm), eps)
		h := refSwiGLU(refLinear(xn, nt, D, at(l.w13), 2*H), nt, H)
		y = refLinear(h, nt, H, at(l.w2), D)
		for i := range x {
			x[i] += y[i]
		}
	}
	xn := refRMSNorm(x, nt, at(lay.norm), eps)
	return refLinear(xn, nt, D, at(lay.head), c.Vocab)
}
