package backendtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// RunSoftcap checks the ops of backend.SoftcapOps against float64
// references: Scale, GeGLU (tanh GELU) and attention with softcapped
// scores (causal and sliding-window, fp16 and int8 caches). A backend
// without SoftcapOps skips it.
func RunSoftcap(t *testing.T, be backend.Backend, opts Options) {
	opts.defaults()
	ops, ok := be.(backend.SoftcapOps)
	if !ok || !ops.SoftcapAttention() {
		t.Skipf("the %s backend does not implement backend.SoftcapOps", be.Name())
	}
	rng := rand.New(rand.NewPCG(7, 9))
	t.Run("Scale", func(t *testing.T) {
		const n = 77
		x := randVec(rng, n, 2)
		xt := upload(t, be, x)
		ops.Scale(xt, n, 45.25)
		want, mag := make([]float64, n), make([]float64, n)
		for i := range want {
			want[i] = float64(x[i]) * 45.25
			mag[i] = math.Abs(want[i])
		}
		check(t, "Scale", download(t, be, xt, n), want, mag, opts.OpTol)
	})
	t.Run("GeGLU", func(t *testing.T) {
		const n = 7 * 301 // chunks of 256 and a tail
		g, u := randVec(rng, n, 3), randVec(rng, n, 1)
		g[0], g[1], g[2] = -30, 30, 0 // the saturated ends and zero
		gt := upload(t, be, g)
		ops.GeGLU(gt, upload(t, be, u), n)
		want, mag := make([]float64, n), make([]float64, n)
		for i := range want {
			x := float64(g[i])
			gelu := 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
			want[i] = gelu * float64(u[i])
			mag[i] = (math.Abs(x) + 1) * math.Abs(float64(u[i])) * 4
		}
		check(t, "GeGLU", download(t, be, gt, n), want, mag, opts.OpTol)
	})
	for _, name := range []string{"fp16", "int8"} {
		for _, window := range []int{0, 9} {
			t.Run(fmt.Sprintf("Attention/%s/window=%d", name, window), func(t *testing.T) {
				runSoftcapAttention(t, be, name, opts.Dims[0], window, rng)
			})
		}
	}
}

// runSoftcapAttention writes random rows to a cache in format name and
// checks softcapped attention against float64 attention on the decoded
// rows.
func runSoftcapAttention(t *testing.T, be backend.Backend, name string, dim, window int, rng *rand.Rand) {
	const kvHeads, heads, cap = 2, 4, 5.0
	f, err := quant.Formats().Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := be.SupportsKV(f); err != nil {
		t.Skip(err)
	}
	l, err := kvcache.NewLayout(kvcache.Geometry{Layers: 1, KVHeads: kvHeads, HeadDim: dim}, quant.Spec{K: f, V: f}, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kvcache.New(l, kvcache.Options{Blocks: 8, Storage: be})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddSeq(0); err != nil {
		t.Fatal(err)
	}
	scale := float32(1 / math.Sqrt(float64(dim)))
	for _, n := range []int{21, 1, 3} { // a prefill, a decode, a short step
		p, err := c.Reserve([]kvcache.Append{{Seq: 0, N: n}})
		if err != nil {
			t.Fatal(err)
		}
		k, v := RandRows(rng, n*kvHeads, dim), RandRows(rng, n*kvHeads, dim)
		q := RandRows(rng, n*heads, dim) // unsoftened: scores reach the cap
		kt, vt := upload(t, be, k), upload(t, be, v)
		be.WriteKV(c.Storage(), 0, kt, vt, p)
		out := be.Alloc(n * heads * dim)
		be.Attention(out, upload(t, be, q), kt, vt, c.Storage(), 0, p, backend.AttnParams{Heads: heads, Scale: scale, Window: window, Softcap: cap})
		got := download(t, be, out, n*heads*dim)
		be.Free(out)
		c.Commit(p)
		total := c.Len(0)
		for i := 0; i < n; i++ {
			pos := total - n + i
			from := 0
			if window > 0 {
				from = max(0, pos+1-window)
			}
			keys, vals := make([]float32, (pos+1-from)*dim), make([]float32, (pos+1-from)*dim)
			for h := 0; h < kvHeads; h++ {
				c.Read(keys, 0, 0, true, h, from, pos+1)
				c.Read(vals, 0, 0, false, h, from, pos+1)
				vmax := maxAbs(vals)
				for j := 0; j < heads/kvHeads; j++ {
					qh := h*heads/kvHeads + j
					qrow := q[(i*heads+qh)*dim : (i*heads+qh+1)*dim]
					want := refAttendCapped(qrow, keys, vals, dim, float64(scale), cap)
					for d := 0; d < dim; d++ {
						g := float64(got[(i*heads+qh)*dim+d])
						if diff := math.Abs(g - want[d]); !(diff <= DecodedTol*vmax+1e-6) {
							t.Fatalf("pos %d head %d dim %d: softcapped attention %v, float64 %v (diff %g)", pos, qh, d, g, want[d], diff)
						}
					}
				}
			}
		}
	}
}

// refAttendCapped is float64 attention with scores cap·tanh(scale·q·k/cap).
func refAttendCapped(q, keys, vals []float32, dim int, scale, cap float64) []float64 {
	n := len(keys) / dim
	s := make([]float64, n)
	m := math.Inf(-1)
	for j := 0; j < n; j++ {
		for d := 0; d < dim; d++ {
			s[j] += float64(q[d]) * float64(keys[j*dim+d])
		}
		s[j] = cap * math.Tanh(s[j]*scale/cap)
		m = math.Max(m, s[j])
	}
	var sum float64
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
