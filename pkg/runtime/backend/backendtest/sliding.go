package backendtest

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// RunSlidingCache checks window-only storage on be: a two-layer cache of
// spec whose layer 1 slides over a window of 5 (4-token blocks), fed one
// sequence of 40 tokens in steps of 1 to 9, gives bit for bit the same
// attention in both layers as the same cache keeping every position
// (kvcache.LayoutOptions.FullSliding); its sliding layer holds no more
// blocks than Layout.SlideBlocksFor says, fewer than the full storage at
// the end, and its storage holds exactly what the layout accounts.
func RunSlidingCache(t *testing.T, be backend.Backend, spec quant.Spec, dim int) {
	const kvHeads, heads, window, n = 2, 4, 5, 40
	g := kvcache.Geometry{Layers: 2, KVHeads: kvHeads, HeadDim: dim, Window: window}
	g.Sliding.Add(1)
	var caches [2]*kvcache.Cache
	for i, full := range []bool{false, true} {
		l, err := kvcache.NewLayoutWith(g, spec, kvcache.LayoutOptions{BlockTokens: 4, FullSliding: full})
		if err != nil {
			t.Fatal(err)
		}
		opts := kvcache.Options{Blocks: l.BlocksFor(n), Storage: be, PoisonFreed: true}
		if l.AnyPreRoPE() {
			opts.RoPE = TestRoPE(dim)
		}
		if caches[i], err = kvcache.New(l, opts); err != nil {
			t.Fatal(err)
		}
		if err := caches[i].AddSeq(0); err != nil {
			t.Fatal(err)
		}
	}
	win := caches[0]
	l := win.Layout()
	if !l.Sliding() {
		t.Fatal("the layout does not keep the sliding layer's window only")
	}
	rng := rand.New(rand.NewPCG(uint64(dim), 17))
	params := [2]backend.AttnParams{{Heads: heads, Scale: float32(1 / math.Sqrt(float64(dim)))}, {Heads: heads, Scale: float32(1 / math.Sqrt(float64(dim))), Window: window}}
	for pos, step := 0, 0; pos < n; step++ {
		k := min([]int{9, 1, 2, 3, 1, 1, 4}[step%7], n-pos)
		var outs [2][2][]float32
		var rows [2][3][]float32 // per layer: K, V, q
		for layer := range rows {
			rows[layer] = [3][]float32{RandRows(rng, k*kvHeads, dim), RandRows(rng, k*kvHeads, dim), RandRows(rng, k*heads, dim)}
		}
		for ci, c := range caches {
			p, err := c.Reserve([]kvcache.Append{{Seq: 0, N: k}})
			if err != nil {
				t.Fatalf("step at %d: %v", pos, err)
			}
			for layer := 0; layer < 2; layer++ {
				kt, vt := upload(t, be, rows[layer][0]), upload(t, be, rows[layer][1])
				be.WriteKV(c.Storage(), layer, kt, vt, p)
				out := be.Alloc(k * heads * dim)
				be.Attention(out, upload(t, be, rows[layer][2]), kt, vt, c.Storage(), layer, p, params[layer])
				outs[ci][layer] = download(t, be, out, k*heads*dim)
				be.Free(out)
			}
			c.Commit(p)
		}
		for layer := 0; layer < 2; layer++ {
			a, b := outs[0][layer], outs[1][layer]
			for i := range a {
				if math.Float32bits(a[i]) != math.Float32bits(b[i]) && !(a[i] != a[i] && b[i] != b[i]) {
					t.Fatalf("positions %d..%d, layer %d: output %d is %v with window-only storage, %v with full storage", pos, pos+k-1, layer, i, a[i], b[i])
				}
			}
		}
		pos += k
		st := win.Stats()
		if most := l.SlideBlocksFor(pos, 0); st.SlideBlocksUsed > most {
			t.Fatalf("after %d tokens the sliding pool holds %d blocks, SlideBlocksFor says at most %d", pos, st.SlideBlocksUsed, most)
		}
		if held := win.HeldBytes(); held != st.Allocated.Total-st.Allocated.State {
			t.Fatalf("Stats: %d bytes of K/V and windows, storage holds %d", st.Allocated.Total-st.Allocated.State, held)
		}
	}
	if a, b := win.Stats().InUse.Total, caches[1].Stats().InUse.Total; a >= b {
		t.Errorf("window-only storage holds %d B in use, full storage %d B", a, b)
	}
}
