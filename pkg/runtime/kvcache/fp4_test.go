package kvcache_test

import (
	"testing"

	. "github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// TestFP4Accounting checks the one byte count for the FP4 formats: the
// layout's block bytes are the traits' (head_dim/2 + head_dim/16 per head
// row, K and V, every layer), the cache holds exactly what Stats reports,
// nvfp4's tensor scales are codec state (4 bytes per layer side), and a
// head size that is not a multiple of 16 is refused when the layout is made.
func TestFP4Accounting(t *testing.T) {
	g := Geometry{Layers: 3, KVHeads: 2, HeadDim: 32}
	for _, tc := range []struct {
		spec  string
		state int64
	}{{"nvfp4", 3 * 2 * 4}, {"fp4_e2m1", 0}, {"k=nvfp4:dynamic,v=fp4_e2m1,L0=fp16", 2 * 4}} {
		t.Run(tc.spec, func(t *testing.T) {
			spec := mustSpec(t, tc.spec)
			l, err := NewLayout(g, spec, 0)
			if err != nil {
				t.Fatal(err)
			}
			var want int64
			for layer := range g.Layers {
				k, v := spec.ForLayer(layer, g.Layers)
				want += int64(l.BlockTokens * g.KVHeads * (k.Traits(true).TileBytes(g.HeadDim, 1) + v.Traits(false).TileBytes(g.HeadDim, 1)))
			}
			if l.BlockBytes != want || l.StateBytes != tc.state {
				t.Errorf("layout: block %d bytes, state %d; traits give %d and %d", l.BlockBytes, l.StateBytes, want, tc.state)
			}
			h := newHarness(t, g, 2, spec, 5)
			for id := SeqID(0); id < 2; id++ {
				if err := h.c.AddSeq(id); err != nil {
					t.Fatal(err)
				}
				h.append(id, 21)
			}
			st := h.c.Stats()
			if held := h.c.HeldBytes(); st.Allocated.Total-st.Allocated.State != held || st.Allocated.State != tc.state {
				t.Errorf("Stats says %d bytes (+%d codec state), cache holds %d; want state %d", st.Allocated.Total-st.Allocated.State, st.Allocated.State, held, tc.state)
			}
		})
	}
	if _, err := NewLayout(Geometry{Layers: 1, KVHeads: 1, HeadDim: 40}, mustSpec(t, "nvfp4"), 0); err == nil {
		t.Error("nvfp4 at head size 40: layout made, want a head-size error")
	}
}
