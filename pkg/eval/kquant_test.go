// The Go twins of the q4_K and q6_K kernels (-tags purego) and the race
// detector make this 2-second check take minutes; the twins are checked
// against the SIMD kernels in internal/simd, so the comparison with
// llama.cpp runs in the default build only.

//go:build !purego && !race

package eval_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/internal/testutil"
	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/runtime"
	cpubackend "github.com/kvqlabs/kvq/pkg/runtime/cpu"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// llamaPerplexityQ4KM are llama-perplexity's numbers on the tiny Q4_K_M
// file of TestLlamaPerplexityQ4KM (llama.cpp 84f71294, CPU, one thread:
// -c 128 -b 128 -fa on -ctk T -ctv T, the f16 run saved with
// --kl-divergence-base, the q8_0 and q4_0 runs read it with
// --kl-divergence) over the first 24 lines of eval-stories.txt (34 chunks,
// 2142 scored tokens). packed: the Q4_K_M file itself, where llama.cpp
// quantizes the activations to q8_K for its q4_K and q6_K products; f32: a
// copy of the file with every tensor decoded to f32 (ggml's to_float, bit
// for bit), where it multiplies float32 activations with the same weights,
// as kvq does on the packed file.
var llamaPerplexityQ4KM = map[string]struct {
	pplPacked, kldPacked float64
	pplF32, kldF32       float64
}{
	"fp16": {391.9285, 0, 392.8753, 0},
	"q8_0": {391.414244, 0.000489, 392.691474, 0.000060},
	"q4_0": {394.309935, 0.012299, 397.928705, 0.011727},
}

// TestLlamaPerplexityQ4KM: kvq eval --protocol llama.cpp --ctx 128 --cache
// fp16,q8_0,q4_0 on a Q4_K_M file (scripts/benchmodel -shape tiny -dtype
// Q4_K_M, byte-identical to llama-quantize's Q4_K_M of the same model)
// against llama-perplexity's PPL and KLD on the same file.
//
// With F32Activations kvq keeps the activations in float32; llama.cpp
// rounds them to q8_K before its q4_K and q6_K dot products, so on the
// packed file the two differ by that rounding, not by the weights or the
// caches. Measured: PPL 0.25–0.93% apart (kvq 392.9110, 392.6025,
// 397.9786), and llama.cpp's KLD about 4.5e-4 nats higher for q8_0
// (0.000489 against kvq's 0.000043: the requantized activations turn any
// small cache error into whole rounding steps downstream) and 6e-4 lower
// for q4_0 (0.012299 against 0.011696). The default backend quantizes the
// activations of the q4_K and q6_K products to Q8_K in prefill too, on
// every CPU, as llama.cpp does, and lands on its packed
// numbers (measured on a Zen 4: PPL 392.1233, 391.3951, 394.0606, −632 to
// +497 ppm from them; KLD 0.000467 and 0.012243, 2.2e-5 and 5.6e-5 nats
// lower). The tolerances against the packed file (2% PPL, 1e-3 nats KLD),
// for both backends, cover the F32Activations gap and no more than twice
// it; the default backend must be within 0.2%
// and 1.5e-4 nats of it, which the F32Activations one is not.
// Against llama.cpp on the file's f32 decoding the gap is gone for the
// F32Activations backend, and the tolerances are tight: PPL
// within 5e-4 (measured 91, 227 and 125 ppm for fp16, q8_0 and q4_0:
// llama.cpp's flash attention rounds the query to f16, or to q8_0 for a
// q8_0 or q4_0 K, where kvq keeps it in float32), KLD within 3e-5 nats or
// 1% (measured 1.7e-5 for q8_0 and 3.1e-5, 0.3%, for q4_0).
func TestLlamaPerplexityQ4KM(t *testing.T) {
	body, err := os.ReadFile(testutil.SharedFile(t, "models/stories260K/eval-stories.txt"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(body)
	for i, end := 0, 0; i < 24; i++ {
		j := strings.IndexByte(text[end:], '\n')
		if j < 0 {
			t.Fatalf("eval-stories.txt has only %d lines", i)
		}
		end += j + 1
		if i == 23 {
			text = text[:end]
		}
	}
	path := filepath.Join(t.TempDir(), "tiny-Q4_K_M.gguf")
	spec := modeltest.Spec{Arch: "llama", Dim: 256, Hidden: 768, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 64, Context: 512, DType: "Q4_K_M", Seed: 1}
	if err := modeltest.WriteGGUF(path, spec); err != nil {
		t.Fatal(err)
	}
	m, err := runtime.Load(context.Background(), path, runtime.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := strings.Join(m.DTypes(), ", "); got != "Q4_K, Q6_K" {
		t.Fatalf("weight types %q, want Q4_K, Q6_K", got)
	}
	for _, f32Act := range []bool{false, true} {
		opts := runtime.RunnerOptions{}
		name := "default"
		if f32Act {
			opts.Backend = cpubackend.New(0).F32Activations()
			name = "F32Activations"
		}
		r, err := runtime.NewRunner(m, opts)
		if err != nil {
			t.Fatal(err)
		}
		res, err := eval.TeacherForced(context.Background(), r, parseSpecs(t, "fp16,q8_0,q4_0"), []eval.Text{{Name: "eval-stories", Body: text}}, eval.TextOptions{Protocol: eval.ProtocolLlamaCpp, Ctx: 128})
		if err != nil {
			t.Fatal(err)
		}
		if res.Chunks != 34 || res.Caches[0].Tokens != 2142 {
			t.Fatalf("%d chunks, %d scored tokens; llama-perplexity scored 2142 tokens in 34 chunks", res.Chunks, res.Caches[0].Tokens)
		}
		rel := func(a, b float64) float64 { return math.Abs(a/b - 1) }
		for _, c := range res.Caches {
			want := llamaPerplexityQ4KM[c.Cache]
			t.Logf("%s %s: PPL %.4f (llama.cpp %.4f packed, %.4f f32), KLD %.6f (%.6f, %.6f)", name, c.Cache, c.PPL, want.pplPacked, want.pplF32, c.KLD.Mean, want.kldPacked, want.kldF32)
			if d := rel(c.PPL, want.pplPacked); d > 0.02 {
				t.Errorf("%s %s: PPL %.4f, llama-perplexity %.4f on the packed file: %.2f%% apart, more than the activations' rounding explains", name, c.Cache, c.PPL, want.pplPacked, 100*d)
			}
			if d := math.Abs(c.KLD.Mean - want.kldPacked); d > 1e-3 {
				t.Errorf("%s %s: KLD %.6f, llama-perplexity %.6f on the packed file: %.2g nats apart", name, c.Cache, c.KLD.Mean, want.kldPacked, d)
			}
			if !f32Act {
				if d := rel(c.PPL, want.pplPacked); d > 2e-3 {
					t.Errorf("%s %s: PPL %.4f with Q8_K activations, llama-perplexity %.4f on the packed file: %.0f ppm apart", name, c.Cache, c.PPL, want.pplPacked, 1e6*d)
				}
				if d := math.Abs(c.KLD.Mean - want.kldPacked); d > 1.5e-4 {
					t.Errorf("%s %s: KLD %.6f with Q8_K activations, llama-perplexity %.6f on the packed file: %.2g nats apart", name, c.Cache, c.KLD.Mean, want.kldPacked, d)
				}
			}
			if !f32Act {
				continue
			}
			if d := rel(c.PPL, want.pplF32); d > 5e-4 {
				t.Errorf("%s %s: PPL %.4f, llama-perplexity %.4f on the f32 decoding: %.0f ppm apart", name, c.Cache, c.PPL, want.pplF32, 1e6*d)
			}
			if d := math.Abs(c.KLD.Mean - want.kldF32); d > 3e-5 && d > 0.01*want.kldF32 {
				t.Errorf("%s %s: KLD %.6f, llama-perplexity %.6f on the f32 decoding: %.2g nats apart", name, c.Cache, c.KLD.Mean, want.kldF32, d)
			}
		}
	}
}
