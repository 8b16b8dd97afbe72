package backendtest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// PutBound is the largest allowed difference between attention over a
// format's cache and float64 attention over the rows that were put,
// relative to the largest value magnitude: the format's own error, stated
// by its precision, about twice the worst measured on the suite's rows
// (Gaussian with two outlier channels, as keys are; see RandRows), so that
// a broken encoder or a read of the wrong rows fails while honest rounding
// passes. Measured worst (CPU, head_dim 64 and 128): fp16 0.0004, bf16
// 0.004, fp8-e4m3 0.063, fp8-e5m2 0.12, int8 and q8_0 0.006, q5_* 0.05,
// 4-bit codes 0.13, 3-bit 0.18, 2-bit 0.71.
func PutBound(f quant.Format, dim int) float64 {
	switch t := f.Traits(true); {
	case t.Family == quant.FamilyFloat && t.Value == quant.DTypeF32:
		return 1e-4
	case t.Family == quant.FamilyFloat && t.Value == quant.DTypeF16:
		return 2e-3
	case t.Family == quant.FamilyFloat && t.Value == quant.DTypeBF16:
		return 1e-2
	case t.Family == quant.FamilyFP8 && t.Value == quant.DTypeE4M3:
		return 0.15
	case t.Family == quant.FamilyFP8 && t.Value == quant.DTypeE5M2:
		return 0.25
	}
	// Effective bits per value, scales and zeros included.
	switch bits := quant.DescribeFormat(f, dim).Bits; {
	case bits >= 8:
		return 0.02
	case bits >= 5.5:
		return 0.1
	case bits >= 4:
		return 0.3
	}
	return 1.0
}

// DecodedTol is the largest allowed difference between attention on packed
// data and float64 attention on the rows the cache decodes (Cache.Read),
// relative to the largest decoded value: the kernels' float32 arithmetic.
const DecodedTol = 1e-4

// RunKV runs every format of opts through a paged cache on be.
func RunKV(t *testing.T, be backend.Backend, opts Options) {
	opts.defaults()
	reg := quant.Formats()
	names := opts.Formats
	if len(names) == 0 {
		names = reg.Names()
	}
	for _, name := range names {
		f, err := reg.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := be.SupportsKV(f); err != nil {
			t.Logf("%s: not supported by the %s backend: %v", name, be.Name(), err)
			continue
		}
		for _, dim := range opts.Dims {
			specs := []quant.Spec{{K: f, V: f}}
			if quant.Quantized(f) {
				specs = append(specs, quant.Spec{K: f, V: f, Sink: 2, Residual: 5})
			}
			for _, spec := range specs {
				label := fmt.Sprintf("%s/d%d", name, dim)
				if spec.Residual > 0 {
					label += "/windows"
				}
				t.Run(label, func(t *testing.T) { RunCache(t, be, spec, dim, DecodedTol, PutBound(f, dim)) })
			}
		}
	}
}

// RandRows returns n rows of dim values: Gaussian with two large outlier
// channels (3 and dim/2), as real keys have.
func RandRows(rng *rand.Rand, n, dim int) []float32 {
	x := make([]float32, n*dim)
	for i := range x {
		v := rng.NormFloat64()
		if i%dim == 3 || i%dim == dim/2 {
			v = v*4 + 6
		}
		x[i] = float32(v)
	}
	return x
}

// TestRoPE is a normal-pairing rotary embedding with theta 10000, for
// pre-RoPE formats.
func TestRoPE(dim int) func(rows []float32, pos0 int) {
	return func(rows []float32, pos0 int) {
		for r := 0; r < len(rows)/dim; r++ {
			x, pos := rows[r*dim:(r+1)*dim], pos0+r
			for i := 0; i < dim/2; i++ {
				th := float64(pos) * math.Pow(10000, -float64(2*i)/float64(dim))
				s, c := math.Sincos(th)
				a, b := float64(x[2*i]), float64(x[2*i+1])
				x[2*i], x[2*i+1] = float32(a*c-b*s), float32(a*s+b*c)
			}
		}
	}
}

// RunCache writes two sequences through a cache of spec on be — a prefill
// of several blocks, a multi-token step and single-token steps, with one
// step rolled back — and checks at every step: the storage holds what the
// layout accounts; each new token's attention (causal, and with a sliding
// window) matches float64 attention on the decoded rows within tol of the
// largest value, and on the rows that were put within bound (PutBound for
// the presets at usual head sizes; +Inf skips the comparison); a
// rolled-back step leaves every decoded row as it was. On a backend that
// implements backend.Sinks, layer 1 attends with a sink logit per head
// (testSinks), checked against float64 attention with the same sinks.
func RunCache(t *testing.T, be backend.Backend, spec quant.Spec, dim int, tol, bound float64) {
	const layers, kvHeads, heads = 2, 2, 6
	g := kvcache.Geometry{Layers: layers, KVHeads: kvHeads, HeadDim: dim}
	l, err := kvcache.NewLayout(g, spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	const blocks = 24
	opts := kvcache.Options{Blocks: blocks, Storage: be}
	if l.AnyPreRoPE() {
		opts.RoPE = TestRoPE(dim)
	}
	c, err := kvcache.New(l, opts)
	if errors.Is(err, backend.ErrUnsupported) {
		// A backend may run a format but not every layout of it (fp16
		// windows); SupportsKV has already accepted the format.
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(dim), 11))
	bt := l.BlockTokens
	kvd := kvHeads * dim
	// put[seq][side] holds every row written, [pos][kvd].
	put := map[kvcache.SeqID][2][]float32{}
	step := func(appends map[kvcache.SeqID]int, window int, rollback, exact bool) {
		t.Helper()
		var as []kvcache.Append
		nt := 0
		for _, id := range []kvcache.SeqID{0, 1} {
			if n := appends[id]; n > 0 {
				as = append(as, kvcache.Append{Seq: id, Row: nt, N: n, Exact: exact})
				nt += n
			}
		}
		var before map[kvcache.SeqID][2][]float32
		if rollback {
			before = readAll(c, layers, kvHeads, dim)
		}
		p, err := c.Reserve(as)
		if err != nil {
			t.Fatalf("Reserve: %v (block %d tokens, %d blocks)", err, bt, blocks)
		}
		for layer := 0; layer < layers; layer++ {
			k, v := RandRows(rng, nt*kvHeads, dim), RandRows(rng, nt*kvHeads, dim)
			kt, vt := upload(t, be, k), upload(t, be, v)
			be.WriteKV(c.Storage(), layer, kt, vt, p)
			// Attention's keys are after RoPE: rotate pre-RoPE keys.
			kpost := k
			if l.AnyPreRoPE() {
				kpost = slices.Clone(k)
				for _, a := range as {
					for i := 0; i < a.N; i++ {
						r := kpost[(a.Row+i)*kvd : (a.Row+i+1)*kvd]
						for h := 0; h < kvHeads; h++ {
							opts.RoPE(r[h*dim:(h+1)*dim], c.Len(a.Seq)-a.N+i)
						}
					}
				}
				kt = upload(t, be, kpost)
			}
			q := RandRows(rng, nt*heads, dim)
			for i := range q {
				q[i] *= 0.3 // softer attention: more rows matter
			}
			out := be.Alloc(nt * heads * dim)
			params := backend.AttnParams{Heads: heads, Scale: float32(1 / math.Sqrt(float64(dim))), Window: window}
			var sinks []float32
			if _, ok := be.(backend.Sinks); ok && layer == 1 {
				sinks = testSinks[:heads]
				params.Sinks = sinks
			}
			be.Attention(out, upload(t, be, q), kt, vt, c.Storage(), layer, p, params)
			got := download(t, be, out, nt*heads*dim)
			be.Free(out)
			for _, a := range as {
				if layer == 0 && !rollback {
					pr := put[a.Seq]
					pr[0] = append(pr[0], k[a.Row*kvd:(a.Row+a.N)*kvd]...)
					pr[1] = append(pr[1], v[a.Row*kvd:(a.Row+a.N)*kvd]...)
					put[a.Seq] = pr
				}
				for i := 0; i < a.N; i++ {
					pos := c.Len(a.Seq) - a.N + i
					from := 0
					if window > 0 {
						from = max(0, pos+1-window)
					}
					row := a.Row + i
					var ex *exactRows
					if exact {
						ex = &exactRows{pos: c.Len(a.Seq) - a.N, k: kpost[a.Row*kvd : (a.Row+a.N)*kvd], v: v[a.Row*kvd : (a.Row+a.N)*kvd]}
					}
					checkToken(t, c, layer, a.Seq, pos, from, q[row*heads*dim:(row+1)*heads*dim], got[row*heads*dim:(row+1)*heads*dim],
						heads, kvHeads, dim, tol, layer == 0 && !rollback && !exact, put[a.Seq], bound, l.AnyPreRoPE(), ex, sinks)
				}
			}
		}
		if rollback {
			c.Rollback(p)
			after := readAll(c, layers, kvHeads, dim)
			for id, b := range before {
				for side := 0; side < 2; side++ {
					for i, x := range b[side] {
						if y := after[id][side][i]; x != y && !(x != x && y != y) {
							t.Fatalf("rolled-back step changed sequence %d side %d value %d: %v -> %v", id, side, i, x, y)
						}
					}
				}
			}
			return
		}
		c.Commit(p)
	}
	for _, id := range []kvcache.SeqID{0, 1} {
		if err := c.AddSeq(id); err != nil {
			t.Fatal(err)
		}
	}
	lens := [2]int{bt + 3, 2*bt + bt/2 + 1}
	step(map[kvcache.SeqID]int{0: lens[0] - 7, 1: lens[1] - 7}, 0, false, false) // prefill
	step(map[kvcache.SeqID]int{0: 3, 1: 3}, 5, false, false)                     // a multi-token step, sliding window
	step(map[kvcache.SeqID]int{0: 2, 1: 1}, 0, true, false)                      // rolled back
	step(map[kvcache.SeqID]int{0: 3, 1: 2}, 0, true, true)                       // exact within the step, rolled back
	for i := 0; i < 4; i++ {                                                     // decode
		step(map[kvcache.SeqID]int{0: 1, 1: 1}, 0, false, false)
	}
	st := c.Stats()
	if held := c.HeldBytes(); held != st.Allocated.Total-st.Allocated.State {
		t.Errorf("Stats: %d bytes of K/V and windows, storage holds %d", st.Allocated.Total-st.Allocated.State, held)
	}
	if want := l.BlocksFor(lens[0]) + l.BlocksFor(lens[1]); st.BlocksUsed != want {
		t.Errorf("blocks used = %d, want %d", st.BlocksUsed, want)
	}
}

// readAll decodes every position of every sequence, per side, all heads
// and layers.
func readAll(c *kvcache.Cache, layers, kvHeads, dim int) map[kvcache.SeqID][2][]float32 {
	out := map[kvcache.SeqID][2][]float32{}
	for _, id := range c.Seqs() {
		n := c.Len(id)
		var r [2][]float32
		for side := 0; side < 2; side++ {
			for layer := 0; layer < layers; layer++ {
				for h := 0; h < kvHeads; h++ {
					buf := make([]float32, n*dim)
					c.Read(buf, layer, id, side == 0, h, 0, n)
					r[side] = append(r[side], buf...)
				}
			}
		}
		out[id] = r
	}
	return out
}

// checkToken checks one token's attention output got for query q at pos,
// over [from, pos+1): against float64 attention on the decoded rows, and,
// when putRows holds the rows as put (every position of the sequence, the
// step's included) against float64 attention on them. Pre-RoPE layouts
// decode rotated keys, so the put comparison rotates the put keys.
// exactRows are an Exact step's own keys (after RoPE) and values, from
// position pos: what its tokens attend to instead of the cache's rows.
type exactRows struct {
	pos  int
	k, v []float32
}

func checkToken(t *testing.T, c *kvcache.Cache, layer int, seq kvcache.SeqID, pos, from int, q, got []float32, heads, kvHeads, dim int, tol float64,
	withPut bool, putRows [2][]float32, bound float64, preRoPE bool, ex *exactRows, sinks []float32) {
	t.Helper()
	to := pos + 1
	nq := heads / kvHeads
	scale := 1 / math.Sqrt(float64(dim))
	keys, vals := make([]float32, (to-from)*dim), make([]float32, (to-from)*dim)
	kvd := kvHeads * dim
	for h := 0; h < kvHeads; h++ {
		c.Read(keys, layer, seq, true, h, from, to)
		c.Read(vals, layer, seq, false, h, from, to)
		if ex != nil {
			for p := max(from, ex.pos); p < to; p++ {
				r := (p-ex.pos)*kvHeads*dim + h*dim
				copy(keys[(p-from)*dim:(p-from+1)*dim], ex.k[r:r+dim])
				copy(vals[(p-from)*dim:(p-from+1)*dim], ex.v[r:r+dim])
			}
		}
		vmax := maxAbs(vals)
		var pk, pv []float32
		if withPut {
			for p := from; p < to; p++ {
				pk = append(pk, putRows[0][p*kvd+h*dim:p*kvd+(h+1)*dim]...)
				pv = append(pv, putRows[1][p*kvd+h*dim:p*kvd+(h+1)*dim]...)
			}
			if preRoPE {
				TestRoPE(dim)(pk, from)
			}
		}
		for i := 0; i < nq; i++ {
			qh := h*nq + i
			sink := math.Inf(-1)
			if sinks != nil {
				sink = float64(sinks[qh])
			}
			want := refAttend(q[qh*dim:(qh+1)*dim], keys, vals, dim, scale, sink)
			for d := 0; d < dim; d++ {
				g := float64(got[qh*dim+d])
				if diff := math.Abs(g - want[d]); !(diff <= tol*vmax+1e-6) {
					t.Fatalf("layer %d seq %d pos %d [%d,%d) head %d dim %d: packed attention %v, float64 on decoded rows %v (diff %g > %g)",
						layer, seq, pos, from, to, qh, d, g, want[d], diff, tol*vmax)
				}
			}
			if !withPut || math.IsInf(bound, 1) {
				continue
			}
			ref := refAttend(q[qh*dim:(qh+1)*dim], pk, pv, dim, scale, sink)
			pmax := maxAbs(pv)
			for d := 0; d < dim; d++ {
				if diff := math.Abs(float64(got[qh*dim+d]) - ref[d]); !(diff <= bound*pmax) {
					t.Fatalf("layer %d seq %d pos %d head %d dim %d: attention %v, float64 on the rows put %v (diff %.3g > %.3g = %g of max |v|)",
						layer, seq, pos, qh, d, got[qh*dim+d], ref[d], diff, bound*pmax, bound)
				}
			}
		}
	}
}

func maxAbs(x []float32) float64 {
	var m float64
	for _, v := range x {
		m = math.Max(m, math.Abs(float64(v)))
	}
	return m
}

// testSinks are the sink logits of RunCache's layer 1: some below the
// scores, some above (head 3's sink takes most of the weight).
var testSinks = []float32{-1, 0.5, 2, 6, -3, 1}

// refAttend is float64 attention of one query over rows of keys and
// values, with a sink logit (no value) in the softmax; -Inf for none.
func refAttend(q, keys, vals []float32, dim int, scale, sink float64) []float64 {
	n := len(keys) / dim
	s := make([]float64, n)
	m := sink
	for j := 0; j < n; j++ {
		for d := 0; d < dim; d++ {
			s[j] += float64(q[d]) * float64(keys[j*dim+d])
		}
		s[j] *= scale
		m = math.Max(m, s[j])
	}
	var sum float64
	if !math.IsInf(sink, -1) {
		sum = math.Exp(sink - m)
	}
	for j := range s {
		s[j] = math.Exp(s[j] - m)
		sum += s[j]
	}
	out := make([]float64, dim)
	for j := 0; j < n; j++ {
		for d := 0; d < dim; d++ {
			out[d] += s[j] / sum * float64(vals[j*dim+d])
		}
	}
	return out
}
