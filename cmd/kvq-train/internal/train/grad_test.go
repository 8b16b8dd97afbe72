package train

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvqlabs/kvq/internal/simd"
)

// Gradient tests. The engine computes in float32; each test checks its
// analytic gradient against central differences of the float64 reference
// (ref_test.go) with step fdStep, for a random cotangent r (the loss is
// Σ r⊙op(x)) or, for the whole model, the weighted cross-entropy.
//
// Tolerance: the error measure is max_i |analytic_i − numeric_i| divided by
// max_i |numeric_i| over one tensor. The central differences are exact to
// about 1e-9 here (truncation h²·|f⁽³⁾|/6 ≈ 1e-10 at h = 1e-5, rounding
// 1e-16/h ≈ 1e-11). The float32 engine rounds every value to 6e-8
// relative, and the errors grow with the sums (≤ a few hundred terms in
// these shapes) and the depth of the chain (the whole model composes about
// 30 ops): measured errors are 3e-8 to 4e-7 for single ops and up to
// 2.5e-6 for the whole model. gradTol = 5e-5 leaves 20× headroom over
// that, while a missing or wrong term shows up as an O(1) error, and even
// scaling one term of the RMSNorm or softmax backward by 0.9 or 0.99
// fails by far.
const (
	fdStep  = 1e-5
	gradTol = 5e-5
)

func randn(rng *rand.Rand, n int, std float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64() * std)
	}
	return v
}

// numericGrad returns the central-difference gradient of f at x for the
// coordinates in idx (all when idx is nil); other entries are NaN.
func numericGrad(f func([]float64) float64, x []float32, idx []int) []float64 {
	x64 := to64(x)
	g := make([]float64, len(x))
	if idx == nil {
		idx = make([]int, len(x))
		for i := range idx {
			idx[i] = i
		}
	} else {
		for i := range g {
			g[i] = math.NaN()
		}
	}
	for _, i := range idx {
		old := x64[i]
		x64[i] = old + fdStep
		fp := f(x64)
		x64[i] = old - fdStep
		fm := f(x64)
		x64[i] = old
		g[i] = (fp - fm) / (2 * fdStep)
	}
	return g
}

// gradError is max|a−n| / max|n| over the entries where n is not NaN.
func gradError(a []float32, n []float64) (rel, scale float64) {
	var diff float64
	for i, v := range n {
		if math.IsNaN(v) {
			continue
		}
		diff = math.Max(diff, math.Abs(float64(a[i])-v))
		scale = math.Max(scale, math.Abs(v))
	}
	if scale == 0 {
		return diff, 0
	}
	return diff / scale, scale
}

func checkGrad(t *testing.T, name string, a []float32, n []float64) {
	t.Helper()
	rel, scale := gradError(a, n)
	if scale == 0 {
		t.Errorf("%s: numeric gradient is all zero (test does not exercise it)", name)
		return
	}
	if rel > gradTol || math.IsNaN(rel) {
		t.Errorf("%s: analytic vs numeric gradient error %.3g (of max |g| %.3g), want <= %g", name, rel, scale, gradTol)
	} else {
		t.Logf("%s: error %.2g of max |g| %.3g", name, rel, scale)
	}
}

func checkClose(t *testing.T, name string, got []float32, want []float64, tol float64) {
	t.Helper()
	rel, _ := gradError(got, want)
	if rel > tol || math.IsNaN(rel) {
		t.Errorf("%s: float32 vs float64 reference differ by %.3g (relative to max), want <= %g", name, rel, tol)
	}
}

func dot64(r []float32, y []float64) float64 {
	var s float64
	for i, v := range y {
		s += float64(r[i]) * v
	}
	return s
}

func TestGradLinear(t *testing.T) {
	for _, s := range []struct{ nt, in, out int }{{7, 16, 13}, {9, 20, 11}, {130, 8, 5}, {3, 5, 4}, {1100, 9, 6}} {
		t.Run(fmt.Sprintf("nt%d_in%d_out%d", s.nt, s.in, s.out), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(s.nt)))
			x, w, r := randn(rng, s.nt*s.in, 1), randn(rng, s.out*s.in, 1), randn(rng, s.nt*s.out, 1)
			e := &engine{pool: newPool(2), scr: []*scratch{{}, {}}}
			e.part = make([]float32, (s.nt+gradChunk-1)/gradChunk*s.in*s.out)
			y := make([]float32, s.nt*s.out)
			e.matmul(y, x, s.nt, s.in, w, s.out)
			checkClose(t, "y", y, refLinear(to64(x), s.nt, s.in, to64(w), s.out), 1e-5)
			wt := make([]float32, len(w))
			simd.TransposeF32(wt, s.out, w, s.in, s.out, s.in)
			dx, dw := make([]float32, len(x)), make([]float32, len(w))
			e.linearBack(dx, dw, r, s.out, x, s.in, wt, s.nt)
			var sample []int // the 1100-token case: check 300 random inputs
			if len(x) > 2000 {
				sample = rng.Perm(len(x))[:300]
			}
			checkGrad(t, "dx", dx, numericGrad(func(v []float64) float64 {
				return dot64(r, refLinear(v, s.nt, s.in, to64(w), s.out))
			}, x, sample))
			checkGrad(t, "dw", dw, numericGrad(func(v []float64) float64 {
				return dot64(r, refLinear(to64(x), s.nt, s.in, v, s.out))
			}, w, nil))
		})
	}
}

func TestGradRMSNorm(t *testing.T) {
	const nt, d = 7, 16
	rng := rand.New(rand.NewPCG(2, 0))
	x, g, r := randn(rng, nt*d, 1), randn(rng, d, 1), randn(rng, nt*d, 1)
	for i := range g {
		g[i] += 1
	}
	const eps = 1e-5
	y, inv := make([]float32, nt*d), make([]float32, nt)
	rmsNormRows(y, inv, x, g, eps, 0, nt)
	checkClose(t, "y", y, refRMSNorm(to64(x), nt, to64(g), eps), 1e-6)
	dx, dg64 := make([]float32, nt*d), make([]float64, d)
	rmsNormBackRows(dx, dg64, r, x, inv, g, 0, nt)
	dg := make([]float32, d)
	for i, v := range dg64 {
		dg[i] = float32(v)
	}
	checkGrad(t, "dx", dx, numericGrad(func(v []float64) float64 { return dot64(r, refRMSNorm(v, nt, to64(g), eps)) }, x, nil))
	checkGrad(t, "dg", dg, numericGrad(func(v []float64) float64 { return dot64(r, refRMSNorm(to64(x), nt, v, eps)) }, g, nil))
}

func TestGradRoPE(t *testing.T) {
	const nt, heads, hd = 7, 3, 8
	cos, sin := ropeTables(16, hd, 10000)
	pos := []int32{0, 1, 2, 3, 0, 1, 9}
	rng := rand.New(rand.NewPCG(3, 0))
	x, r := randn(rng, nt*heads*hd, 1), randn(rng, nt*heads*hd, 1)
	y, dx := make([]float32, len(x)), make([]float32, len(x))
	half := hd / 2
	for t, p := range pos {
		c, s := cos[int(p)*half:(int(p)+1)*half], sin[int(p)*half:(int(p)+1)*half]
		for h := 0; h < heads; h++ {
			o := (t*heads + h) * hd
			rope(y[o:o+hd], x[o:o+hd], c, s)
			ropeBack(dx[o:o+hd], r[o:o+hd], c, s)
		}
	}
	ref := func(v []float64) []float64 {
		v = append([]float64(nil), v...)
		refRoPE(v, pos, heads, hd, cos, sin)
		return v
	}
	checkClose(t, "y", y, ref(to64(x)), 1e-6)
	checkGrad(t, "dx", dx, numericGrad(func(v []float64) float64 { return dot64(r, ref(v)) }, x, nil))
}

func TestGradSwiGLU(t *testing.T) {
	const nt, hidden = 7, 12
	rng := rand.New(rand.NewPCG(4, 0))
	gu, r := randn(rng, 2*nt*hidden, 2), randn(rng, nt*hidden, 1)
	h, sig, dgu := make([]float32, nt*hidden), make([]float32, nt*hidden), make([]float32, len(gu))
	swigluRows(h, sig, gu, hidden, 0, nt)
	checkClose(t, "h", h, refSwiGLU(to64(gu), nt, hidden), 1e-6)
	swigluBackRows(dgu, r, gu, sig, hidden, 0, nt)
	checkGrad(t, "dgu", dgu, numericGrad(func(v []float64) float64 { return dot64(r, refSwiGLU(v, nt, hidden)) }, gu, nil))
}

func TestGradCrossEntropy(t *testing.T) {
	const nt, vocab = 7, 13
	rng := rand.New(rand.NewPCG(5, 0))
	z := randn(rng, nt*vocab, 3)
	targets := []int32{3, 0, 12, 5, 5, 7, 1}
	weights := []float32{1, 0, 4, 1, 0.5, 4, 1}
	var wsum float64
	for _, w := range weights {
		wsum += float64(w)
	}
	want := refCrossEntropy(to64(z), vocab, targets, weights)
	dz := append([]float32(nil), z...)
	loss := crossEntropyRows(dz, vocab, targets, weights, 1/wsum, 0, nt) / wsum
	if math.Abs(loss-want) > 1e-6*math.Abs(want) {
		t.Errorf("crossEntropyRows loss = %v, want %v", loss, want)
	}
	checkGrad(t, "dz", dz, numericGrad(func(v []float64) float64 { return refCrossEntropy(v, vocab, targets, weights) }, z, nil))
}

func TestGradEmbedding(t *testing.T) {
	const vocab, d = 13, 8
	ids := []int32{3, 0, 12, 3, 3, 7}
	rng := rand.New(rand.NewPCG(6, 0))
	emb, r := randn(rng, vocab*d, 1), randn(rng, len(ids)*d, 1)
	x := make([]float32, len(ids)*d)
	embedRows(x, emb, ids, d, 0, len(ids))
	demb := make([]float32, len(emb))
	embedBack(demb, r, ids, d)
	ref := func(v []float64) []float64 {
		out := make([]float64, len(ids)*d)
		for t, id := range ids {
			copy(out[t*d:(t+1)*d], v[int(id)*d:(int(id)+1)*d])
		}
		return out
	}
	checkClose(t, "x", x, ref(to64(emb)), 0)
	checkGrad(t, "demb", demb, numericGrad(func(v []float64) float64 { return dot64(r, ref(v)) }, emb, nil))
}

// tinyConfig is the gradient tests' model: 2 layers, d 16, 2 query heads
// sharing 1 KV head of 8, vocab 13. It bypasses Validate (vocab < 259).
func tinyConfig() Config {
	c := DefaultConfig()
	c.Layers, c.Dim, c.Heads, c.KVHeads, c.HeadDim, c.Hidden, c.Vocab, c.Context = 2, 16, 2, 1, 8, 24, 13, 200
	c.Workers = 2
	return c
}

// tinyWeights draws weights large enough that every path carries signal.
func tinyWeights(c *Config, lay *layout, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 9))
	w := randn(rng, lay.size, 0.4)
	for _, s := range lay.all {
		if s.rows == 1 { // norms around 1
			for i, v := 0, s.of(w); i < len(v); i++ {
				v[i] += 1
			}
		}
	}
	return w
}

// headMajor converts token-major (nt × heads·hd) to head-major and back.
func headMajor(x []float32, nt, heads, hd int) []float32 {
	out := make([]float32, len(x))
	for t := 0; t < nt; t++ {
		for h := 0; h < heads; h++ {
			copy(out[(h*nt+t)*hd:(h*nt+t+1)*hd], x[(t*heads+h)*hd:(t*heads+h+1)*hd])
		}
	}
	return out
}

func tokenMajor(x []float32, nt, heads, hd int) []float32 {
	out := make([]float32, len(x))
	for t := 0; t < nt; t++ {
		for h := 0; h < heads; h++ {
			copy(out[(t*heads+h)*hd:(t*heads+h+1)*hd], x[(h*nt+t)*hd:(h*nt+t+1)*hd])
		}
	}
	return out
}

func TestGradAttention(t *testing.T) {
	for _, tc := range []struct {
		name          string
		heads, kv     int
		docs          []int
		sample        int // check this many random coordinates per input (0: all)
		qscale, kvstd float64
	}{
		{"gqa_two_docs", 4, 2, []int{7, 4}, 0, 1, 1},
		{"mha_one_doc", 2, 2, []int{9}, 0, 1, 1},
		// Longer than attnBlock: several query blocks, masked tails.
		{"gqa_blocks", 2, 1, []int{150, 70}, 120, 0.5, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tinyConfig()
			c.Heads, c.KVHeads = tc.heads, tc.kv
			lay := newLayout(&c)
			e := newEngine(c, lay, make([]float32, lay.size))
			b := &batch{}
			for _, n := range tc.docs {
				b.addDoc(make([]int32, n), nil)
			}
			nt, hd := b.nt(), c.HeadDim
			e.ensure(nt)
			e.ensureBackward(nt)
			rng := rand.New(rand.NewPCG(7, uint64(nt)))
			q := randn(rng, nt*c.Heads*hd, tc.qscale)
			k, v := randn(rng, nt*c.KVHeads*hd, tc.kvstd), randn(rng, nt*c.KVHeads*hd, 1)
			r := randn(rng, nt*c.Heads*hd, 1)
			a := &e.layers[0]
			copy(a.q, headMajor(q, nt, c.Heads, hd))
			copy(a.k, headMajor(k, nt, c.KVHeads, hd))
			copy(a.v, headMajor(v, nt, c.KVHeads, hd))
			tasks := b.attnTasks(c.KVHeads)
			e.attention(a, b.docs, tasks)
			ref := func(q, k, v []float64) []float64 { return refAttention(q, k, v, b.docs, c.Heads, c.KVHeads, hd) }
			checkClose(t, "o", tokenMajor(a.o, nt, c.Heads, hd), ref(to64(q), to64(k), to64(v)), 1e-5)
			copy(e.do, headMajor(r, nt, c.Heads, hd))
			e.attentionBack(a, b.docs, tasks)
			pick := func(n int) []int {
				if tc.sample == 0 {
					return nil
				}
				return rng.Perm(n)[:tc.sample]
			}
			checkGrad(t, "dq", tokenMajor(e.dq, nt, c.Heads, hd), numericGrad(func(x []float64) float64 {
				return dot64(r, ref(x, to64(k), to64(v)))
			}, q, pick(len(q))))
			checkGrad(t, "dk", tokenMajor(e.dk, nt, c.KVHeads, hd), numericGrad(func(x []float64) float64 {
				return dot64(r, ref(to64(q), x, to64(v)))
			}, k, pick(len(k))))
			checkGrad(t, "dv", tokenMajor(e.dv, nt, c.KVHeads, hd), numericGrad(func(x []float64) float64 {
				return dot64(r, ref(to64(q), to64(k), x))
			}, v, pick(len(v))))
		})
	}
}

// tinyBatch packs two documents (7 and 4 inputs) over vocab 13, with
// weights like the trainer's (some zero, some 4).
func tinyBatch() *batch {
	b := &batch{}
	b.addDoc([]int32{1, 5, 7, 2, 12, 0, 3, 9}, []float32{1, 1, 0, 1, 4, 4, 4})
	b.addDoc([]int32{1, 11, 4, 4, 6}, []float32{0.5, 1, 4, 4})
	return b
}

func TestGradModel(t *testing.T) {
	c := tinyConfig()
	lay := newLayout(&c)
	w := tinyWeights(&c, lay, 1)
	e := newEngine(c, lay, w)
	b := tinyBatch()
	loss, err := e.forward(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	refLoss := func(w64 []float64) float64 {
		return refCrossEntropy(refModel(&c, lay, w64, b, e.cos, e.sin), c.Vocab, b.targets, b.weights)
	}
	if want := refLoss(to64(w)); math.Abs(loss-want) > 1e-5*math.Abs(want) {
		t.Errorf("forward loss = %.8g, float64 reference %.8g", loss, want)
	}
	if err := e.backward(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	num := numericGrad(refLoss, w, nil)
	for _, s := range lay.all {
		checkGrad(t, s.name, s.of(e.g), num[s.off:s.end()])
	}
}

// TestForwardMatchesReference checks the engine's logits on a longer
// batch (several attention blocks) against the float64 reference.
func TestForwardMatchesReference(t *testing.T) {
	c := tinyConfig()
	lay := newLayout(&c)
	w := tinyWeights(&c, lay, 2)
	e := newEngine(c, lay, w)
	rng := rand.New(rand.NewPCG(8, 0))
	b := &batch{}
	for _, n := range []int{130, 3, 66} {
		toks := make([]int32, n)
		for i := range toks {
			toks[i] = int32(rng.IntN(c.Vocab))
		}
		b.addDoc(toks, nil)
	}
	if _, err := e.forward(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	checkClose(t, "logits", e.logits[:b.nt()*c.Vocab], refModel(&c, lay, to64(w), b, e.cos, e.sin), 1e-4)
}
