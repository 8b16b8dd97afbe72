package estimate

import (
	"context"
	"fmt"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// TestMatchesRuntimeAllocation is the single-source-of-truth check: for every
// registered format, with and without fp16 windows and with K and V in
// different formats, the KV memory estimate prints equals the bytes the
// runtime's cache allocates for the same geometry and token count.
func TestMatchesRuntimeAllocation(t *testing.T) {
	reg := quant.Formats()
	for _, name := range reg.Names() {
		for _, text := range []string{name, name + ",residual=8,sink=4", "k=" + name + ",v=fp16"} {
			spec, err := reg.ParseSpec(text)
			if err != nil {
				t.Fatalf("ParseSpec(%q): %v", text, err)
			}
			for _, dim := range []int{64, 128} {
				m := Model{Name: fmt.Sprintf("test-d%d", dim), Arch: "llama", Layers: 2, Heads: 4, KVHeads: 2, HeadDim: dim, Hidden: 4 * dim, MaxPosition: 8192}
				for _, c := range []struct{ tokens, seqs int64 }{{1, 1}, {16, 1}, {1000, 3}, {4097, 1}} {
					if c.tokens > 1000 && dim > 64 {
						continue // keep the allocations small
					}
					t.Run(fmt.Sprintf("%s/d%d/%dx%d", text, dim, c.seqs, c.tokens), func(t *testing.T) {
						checkRuntime(t, m, spec, c.tokens, c.seqs)
					})
				}
			}
		}
	}
}

func checkRuntime(t *testing.T, m Model, spec quant.Spec, tokens, seqs int64) {
	layout, lerr := kvcache.NewLayout(kvcache.Geometry{Layers: m.Layers, KVHeads: m.KVHeads, HeadDim: m.HeadDim}, spec, 0)
	r, err := Estimate(context.Background(), Plan{Model: m, Caches: []quant.Spec{spec}, Contexts: []int64{tokens}, Concurrency: []int64{seqs}})
	if lerr != nil {
		if err == nil {
			t.Fatalf("kvcache.NewLayout fails (%v) but Estimate does not", lerr)
		}
		t.Skipf("format does not fit this geometry: %v", lerr)
	}
	if err != nil {
		t.Fatalf("Estimate: %v", err)
	}
	blocks := int(seqs) * layout.BlocksFor(int(tokens))
	// Formats that keep pre-RoPE keys need a rotary function; any will do
	// for allocation.
	cache, err := kvcache.New(layout, kvcache.Options{Blocks: blocks, Storage: cpu.New(1), RoPE: func([]float32, int) {}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < int(seqs); i++ {
		if err := cache.AddSeq(kvcache.SeqID(i)); err != nil {
			t.Fatal(err)
		}
		p, err := cache.Reserve([]kvcache.Append{{Seq: kvcache.SeqID(i), N: int(tokens)}})
		if err != nil {
			t.Fatalf("Reserve: %v (the estimated %d blocks are too few)", err, blocks)
		}
		cache.Commit(p)
	}
	st := cache.Stats()
	c := r.Formats[0].Grid[0]
	if c.KVBytes != st.Allocated.Total || c.Blocks != int64(st.Blocks) {
		t.Errorf("estimate %d B in %d blocks, runtime allocates %d B in %d blocks (%+v)", c.KVBytes, c.Blocks, st.Allocated.Total, st.Blocks, st.Allocated)
	}
	if c.StateBytes != st.Allocated.State || c.RequestBytes != st.Allocated.Sink+st.Allocated.Residual+st.Allocated.Staging {
		t.Errorf("estimate state %d, windows %d; runtime state %d, windows %d", c.StateBytes, c.RequestBytes, st.Allocated.State, st.Allocated.Sink+st.Allocated.Residual+st.Allocated.Staging)
	}
	if tokens == 1000 {
		if got, err := KVBytes(m, spec, tokens, seqs); err != nil || got != st.Allocated.Total {
			t.Errorf("KVBytes = %d, %v; runtime allocates %d", got, err, st.Allocated.Total)
		}
	}
	if held := cache.HeldBytes() + st.Allocated.State; held != c.KVBytes {
		t.Errorf("the cache's buffers hold %d B, estimate says %d", held, c.KVBytes)
	}
}
