package estimate_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/kvqlabs/kvq/pkg/estimate"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// TestSlidingRequestBytesMatchAllocator is the one accounting truth for
// sliding-window models (Gemma 2 and 3 shaped, Mistral and Phi-3 with a
// window): for a request fed in steps of chunk tokens, the memory
// estimate.RuntimeRequestBytes gives (read from the checkpoint by kvq
// estimate) is the most the runtime's cache holds for it, measured step
// by step on a CPU cache of the model the runtime loads from the same
// directory; and for a format uniform over the layers it equals
// kvq estimate's vLLM figure for one request (no padding layers in these
// shapes, and a request long enough that vLLM's extra sliding block is one
// the request fills).
func TestSlidingRequestBytesMatchAllocator(t *testing.T) {
	for _, spec := range []modeltest.Spec{
		{Arch: "gemma2", Dim: 64, Hidden: 128, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 64, SlidingWindow: 16, DType: "BF16"},
		{Arch: "gemma3", Dim: 64, Hidden: 128, Layers: 7, Heads: 4, KVHeads: 2, HeadDim: 64, SlidingWindow: 16, RopeTheta: 1e6, RopeScaling: 8, DType: "BF16"},
		{Arch: "mistral", Dim: 64, Hidden: 128, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 64, SlidingWindow: 24, DType: "BF16"},
		{Arch: "phi3", Dim: 128, Hidden: 128, Layers: 2, Heads: 2, KVHeads: 2, HeadDim: 64, SlidingWindow: 20, DType: "BF16"},
	} {
		t.Run(spec.Arch, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), spec.Arch)
			if err := modeltest.WriteHF(dir, spec, modeltest.HFOptions{}); err != nil {
				t.Fatal(err)
			}
			em, err := estimate.Load(context.Background(), dir)
			if err != nil {
				t.Fatal(err)
			}
			rm, err := runtime.Load(context.Background(), dir, runtime.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer rm.Close()
			g := rm.Geometry()
			if g.Window != spec.SlidingWindow || g.Sliding.Empty() {
				t.Fatalf("the runtime's geometry has window %d (sliding layers %v), the config %d", g.Window, !g.Sliding.Empty(), spec.SlidingWindow)
			}
			for _, text := range []string{"fp16", "int4", "int8,sink=2,residual=5", "int4,sliding=fp16"} {
				s, err := quant.Formats().ParseSpec(text)
				if err != nil {
					t.Fatal(err)
				}
				l, err := kvcache.NewLayout(g, s, 0)
				if err != nil {
					t.Fatal(err)
				}
				for _, chunk := range []int{16, 48} {
					// A first step puts the later steps' windows
					// across block boundaries: the worst case.
					ctx := firstStep(l) + 5*chunk
					want, err := estimate.RuntimeRequestBytes(em, s, int64(ctx), int64(chunk))
					if err != nil {
						t.Fatal(err)
					}
					peak := runRequest(t, l, ctx, chunk)
					if peak != want {
						t.Errorf("%s, %d tokens in chunks of %d: the cache holds %d B at most, RuntimeRequestBytes says %d", text, ctx, chunk, peak, want)
					}
					if full := l.SeqCost(ctx) + l.StateBytes; want >= full {
						t.Errorf("%s: window-only storage %d B is not below full storage's %d B", text, want, full)
					}
					if text == "int4,sliding=fp16" {
						continue // vLLM pads the pages of mixed groups to one size
					}
					res, err := estimate.Estimate(context.Background(), estimate.Plan{Model: em, Caches: []quant.Spec{s},
						MaxModelLen: int64(ctx), AllowLongMaxModelLen: true, MaxNumBatchedTokens: int64(chunk),
						Contexts: []int64{int64(ctx)}, Concurrency: []int64{1}})
					if err != nil {
						t.Fatal(err)
					}
					if got := res.Formats[0].Grid[0].KVBytes; got != want {
						t.Errorf("%s, %d tokens in chunks of %d: kvq estimate's vLLM figure %d B, the runtime's %d B", text, ctx, chunk, got, want)
					}
				}
			}
		})
	}
}

// firstStep is the length of a first step after which every step's
// window starts on the last position of a block: the most blocks it
// spans.
func firstStep(l *kvcache.Layout) int {
	if f := (l.Window - 2) % l.BlockTokens; f > 0 {
		return f
	}
	return l.BlockTokens
}

// runRequest feeds one sequence of ctx tokens through a CPU cache of
// layout l, firstStep tokens then chunk at a time, and returns the most memory
// the cache held (in use, codec state included) during a step.
func runRequest(t *testing.T, l *kvcache.Layout, ctx, chunk int) int64 {
	t.Helper()
	c, err := kvcache.New(l, kvcache.Options{Blocks: l.BlocksFor(ctx), Storage: cpu.New(1), RoPE: func([]float32, int) {}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddSeq(0); err != nil {
		t.Fatal(err)
	}
	var peak int64
	for pos := 0; pos < ctx; {
		n := min(chunk, ctx-pos)
		if pos == 0 {
			n = firstStep(l)
		}
		p, err := c.Reserve([]kvcache.Append{{Seq: 0, N: n}})
		if err != nil {
			t.Fatal(fmt.Errorf("at %d: %w", pos, err))
		}
		peak = max(peak, c.Stats().InUse.Total)
		c.Commit(p)
		pos += n
	}
	return peak
}
