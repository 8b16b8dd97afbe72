package train

import (
	"math"

	"github.com/kvqlabs/kvq/internal/simd"
)

// The row kernels below work on token-major activations (nt rows of a
// fixed width, back to back) for the rows [lo, hi) of one task. The
// engine cuts the rows into fixed blocks, so each output is computed the
// same way whatever the number of workers.

// rmsNormRows sets y[t] = x[t]·inv[t]·g with inv[t] = 1/sqrt(mean(x[t]²)+eps),
// the sum of squares taken in float64 and the products rounded in the
// order the runtime uses ((x·inv)·g), for rows [lo, hi).
func rmsNormRows(y, inv, x, g []float32, eps float32, lo, hi int) {
	d := len(g)
	for t := lo; t < hi; t++ {
		xr := x[t*d : (t+1)*d]
		var ss float64
		for _, v := range xr {
			ss += float64(v) * float64(v)
		}
		r := float32(1 / math.Sqrt(ss/float64(d)+float64(eps)))
		inv[t] = r
		yr := y[t*d : (t+1)*d]
		for i, v := range xr {
			yr[i] = v * r * g[i]
		}
	}
}

// rmsNormBackRows adds the gradient of y = x·inv·g to dx for rows [lo, hi),
// and adds Σ_t dy[t]·x[t]·inv[t] to dg (float64):
//
//	dx_j += inv·g_j·dy_j − x_j·inv³/d·Σ_i g_i·dy_i·x_i
func rmsNormBackRows(dx []float32, dg []float64, dy, x, inv, g []float32, lo, hi int) {
	d := len(g)
	for t := lo; t < hi; t++ {
		xr, dyr, dxr := x[t*d:(t+1)*d], dy[t*d:(t+1)*d], dx[t*d:(t+1)*d]
		r := float64(inv[t])
		var dot float64
		for i, v := range xr {
			gd := float64(g[i]) * float64(dyr[i])
			dot += gd * float64(v)
			dg[i] += float64(dyr[i]) * float64(v) * r
		}
		c := float32(dot * r * r * r / float64(d))
		rf := float32(r)
		for i, v := range xr {
			dxr[i] += rf*g[i]*dyr[i] - v*c
		}
	}
}

// swigluRows sets h = silu(gate)·up = gate·σ(gate)·up, keeping σ(gate) in
// sig, for rows [lo, hi). gu holds each row's gate values then its up
// values (2·hidden wide); h and sig are hidden wide.
func swigluRows(h, sig, gu []float32, hidden, lo, hi int) {
	for t := lo; t < hi; t++ {
		gate, up := gu[2*t*hidden:(2*t+1)*hidden], gu[(2*t+1)*hidden:(2*t+2)*hidden]
		hr, sr := h[t*hidden:(t+1)*hidden], sig[t*hidden:(t+1)*hidden]
		simd.ExpShiftTaylor(sr, gate, -1, 0) // e^-gate
		for i, g := range gate {
			s := 1 / (1 + sr[i])
			sr[i] = s
			hr[i] = g * s * up[i]
		}
	}
}

// swigluBackRows writes the gradient of h = gate·σ(gate)·up into dgu (gate
// then up, like gu) for rows [lo, hi):
//
//	dgate = dh·up·σ·(1 + gate·(1−σ)),  dup = dh·gate·σ
func swigluBackRows(dgu, dh, gu, sig []float32, hidden, lo, hi int) {
	for t := lo; t < hi; t++ {
		gate, up := gu[2*t*hidden:(2*t+1)*hidden], gu[(2*t+1)*hidden:(2*t+2)*hidden]
		dg, du := dgu[2*t*hidden:(2*t+1)*hidden], dgu[(2*t+1)*hidden:(2*t+2)*hidden]
		dhr, sr := dh[t*hidden:(t+1)*hidden], sig[t*hidden:(t+1)*hidden]
		for i, g := range gate {
			s, d := sr[i], dhr[i]
			du[i] = d * g * s
			dg[i] = d * up[i] * s * (1 + g*(1-s))
		}
	}
}

// ropeTables returns cos and sin of pos·θ_i for pos < n and i < hd/2 with
// θ_i = theta^(-2i/hd), computed in float64 and rounded as the runtime
// does.
func ropeTables(n, hd int, theta float64) (cos, sin []float32) {
	half := hd / 2
	cos, sin = make([]float32, n*half), make([]float32, n*half)
	for i := 0; i < half; i++ {
		inv := 1 / math.Pow(theta, float64(2*i)/float64(hd))
		for p := 0; p < n; p++ {
			s, c := math.Sincos(float64(p) * inv)
			cos[p*half+i], sin[p*half+i] = float32(c), float32(s)
		}
	}
	return cos, sin
}

// rope rotates one head vector src into dst with the Hugging Face
// half-split (NeoX) pairing (i, i+hd/2):
//
//	dst_i = a·c_i − b·s_i,  dst_{i+h} = a·s_i + b·c_i   (a = src_i, b = src_{i+h})
func rope(dst, src, c, s []float32) {
	half := len(c)
	a, b := src[:half], src[half:2*half]
	da, db := dst[:half], dst[half:2*half]
	for i := range c {
		x, y := a[i], b[i]
		da[i] = x*c[i] - y*s[i]
		db[i] = x*s[i] + y*c[i]
	}
}

// ropeBack is the transpose (inverse) rotation, the gradient of rope:
//
//	dsrc_i = d_i·c_i + d_{i+h}·s_i,  dsrc_{i+h} = −d_i·s_i + d_{i+h}·c_i
func ropeBack(dsrc, d, c, s []float32) {
	half := len(c)
	a, b := d[:half], d[half:2*half]
	da, db := dsrc[:half], dsrc[half:2*half]
	for i := range c {
		x, y := a[i], b[i]
		da[i] = x*c[i] + y*s[i]
		db[i] = y*c[i] - x*s[i]
	}
}

// crossEntropyRows turns rows [lo, hi) of logits (vocab wide) into their
// loss gradient in place and returns Σ_t w_t·(lse_t − z_t[y_t]) in
// float64. A row with weight 0 (no target) is zeroed. norm scales the
// gradient: dz = norm·w_t·(softmax(z_t) − onehot(y_t)).
func crossEntropyRows(logits []float32, vocab int, targets []int32, weights []float32, norm float64, lo, hi int) float64 {
	var loss float64
	for t := lo; t < hi; t++ {
		z := logits[t*vocab : (t+1)*vocab]
		w := weights[t]
		if w == 0 {
			clear(z)
			continue
		}
		m := z[0]
		for _, v := range z {
			m = max(m, v)
		}
		y := targets[t]
		zy := z[y]
		simd.ExpShiftTaylor(z, z, 1, m)
		var sum float64
		for _, e := range z {
			sum += float64(e)
		}
		loss += float64(w) * (float64(m) + math.Log(sum) - float64(zy))
		scale := float32(norm * float64(w) / sum)
		simd.ScaleF32(z, scale)
		z[y] -= float32(norm * float64(w))
	}
	return loss
}
