package bench_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/bench"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

func tinyRunner(t *testing.T) *runtime.Runner {
	t.Helper()
	m, err := modeltest.RandomModel(runtime.Config{Dim: 64, Hidden: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, Vocab: 97, ContextLen: 256}, tensor.F16, 7)
	if err != nil {
		t.Fatal(err)
	}
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

func spec(t *testing.T, s string) quant.Spec {
	t.Helper()
	sp, err := quant.Formats().ParseSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

func TestDecodeDepth(t *testing.T) {
	r := tinyRunner(t)
	depths := []int{0, 40, 250, 100}
	kv := map[string][]int64{}
	for _, s := range []string{"fp16", "int8", "kivi2"} { // kivi2 keeps fp16 windows
		progress := 0
		points, err := bench.DecodeDepth(context.Background(), r, spec(t, s), depths, 8,
			bench.DepthOptions{Repetitions: 2, PrefillChunk: 16, Progress: func(done, total int) {
				progress++
				if done != progress || total != 6 {
					t.Errorf("progress(%d, %d), want (%d, 6)", done, total, progress)
				}
			}})
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if len(points) != len(depths) || progress != 6 {
			t.Fatalf("%s: %d points, %d progress calls; want 4 and 6 (3 depths × 2)", s, len(points), progress)
		}
		for i, p := range points {
			if p.Depth != depths[i] || p.Tokens != 8 {
				t.Errorf("%s point %d: depth %d, %d tokens; want %d, 8", s, i, p.Depth, p.Tokens, depths[i])
			}
			if p.Depth == 250 {
				if !strings.Contains(p.Skipped, "context of 256") || len(p.Samples) != 0 {
					t.Errorf("%s: depth 250 + 8 > 256 not skipped: %+v", s, p)
				}
				continue
			}
			if p.Skipped != "" || len(p.Samples) != 2 || len(p.TokensPerS) != 2 {
				t.Errorf("%s depth %d: skipped %q, %d samples, want 2", s, p.Depth, p.Skipped, len(p.Samples))
				continue
			}
			lo, hi := math.Min(p.TokensPerS[0], p.TokensPerS[1]), math.Max(p.TokensPerS[0], p.TokensPerS[1])
			if !(lo > 0) || math.IsInf(hi, 0) || p.Median < lo || p.Median > hi || p.Mean < lo || p.Mean > hi {
				t.Errorf("%s depth %d: tokens/s %v, median %v, mean %v", s, p.Depth, p.TokensPerS, p.Median, p.Mean)
			}
			kv[s] = append(kv[s], p.KVBytes)
		}
	}
	// The cache holds depth + 8 tokens: more bytes deeper, fewer in int8.
	for _, s := range []string{"fp16", "int8"} {
		b := kv[s]
		if len(b) != 3 || !(b[0] > 0 && b[0] < b[1] && b[1] < b[2]) {
			t.Errorf("%s: KV bytes at depths 0, 40, 100 = %v, want increasing", s, b)
		}
	}
	for i := range kv["int8"] {
		if kv["int8"][i] >= kv["fp16"][i] {
			t.Errorf("int8 cache %d bytes ≥ fp16 %d at point %d", kv["int8"][i], kv["fp16"][i], i)
		}
	}
}

func TestDecodeDepthErrors(t *testing.T) {
	r := tinyRunner(t)
	fp16 := spec(t, "fp16")
	for _, c := range []struct {
		name   string
		depths []int
		n      int
		opts   bench.DepthOptions
	}{
		{"no tokens", []int{0}, 0, bench.DepthOptions{}},
		{"no depths", nil, 4, bench.DepthOptions{}},
		{"negative depth", []int{-1}, 4, bench.DepthOptions{}},
		{"negative repetitions", []int{0}, 4, bench.DepthOptions{Repetitions: -1}},
	} {
		if _, err := bench.DecodeDepth(context.Background(), r, fp16, c.depths, c.n, c.opts); !errors.Is(err, bench.ErrOptions) {
			t.Errorf("%s: err = %v, want ErrOptions", c.name, err)
		}
	}
	// q8_0's 32-value blocks do not fit 16-value heads: the layout's error.
	if _, err := bench.DecodeDepth(context.Background(), r, spec(t, "q8_0"), []int{0}, 4, bench.DepthOptions{}); err == nil || !strings.Contains(err.Error(), "cache q8_0") {
		t.Errorf("q8_0 on head size 16: err = %v, want the cache's error", err)
	}
	// Every depth beyond the context: all skipped, nothing run.
	points, err := bench.DecodeDepth(context.Background(), r, fp16, []int{300, 256}, 1, bench.DepthOptions{})
	if err != nil || len(points) != 2 || points[0].Skipped == "" || points[1].Skipped == "" {
		t.Errorf("all beyond the context: %+v, %v", points, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := bench.DecodeDepth(ctx, r, fp16, []int{16}, 4, bench.DepthOptions{NoWarmup: true}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v, want context.Canceled", err)
	}
}
