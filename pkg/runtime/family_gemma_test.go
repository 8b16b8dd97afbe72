package runtime_test

import (
	"path/filepath"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// gemmaSpecs are the tiny Gemma checkpoints of the tests: head_dim 32 so
// that the block caches apply, a window shorter than the prompts, Gemma
// 2's softcaps low enough to bend the scores and logits, and Gemma 3's
// seven layers (five sliding, one global, one sliding) with linear RoPE
// scaling on the global layer.
var gemmaSpecs = map[string]modeltest.Spec{
	"gemma2": {Arch: "gemma2", Dim: 64, Hidden: 128, Layers: 3, Heads: 4, KVHeads: 2, HeadDim: 32, SlidingWindow: 6,
		AttnSoftcap: 2, FinalSoftcap: 8, Seed: 21},
	"gemma3": {Arch: "gemma3", Dim: 64, Hidden: 128, Layers: 7, Heads: 4, KVHeads: 2, HeadDim: 32, SlidingWindow: 6,
		RopeTheta: 1e6, RopeScaling: 8, Seed: 22},
}

// writeGemma writes spec as a Hugging Face directory and a GGUF file.
func writeGemma(t *testing.T, spec modeltest.Spec) (hf, gg string) {
	t.Helper()
	dir := t.TempDir()
	hf, gg = filepath.Join(dir, "hf"), filepath.Join(dir, "m.gguf")
	if err := modeltest.WriteHF(hf, spec, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := modeltest.WriteGGUF(gg, spec); err != nil {
		t.Fatal(err)
	}
	return hf, gg
}

// TestGemmaFormatsAgree loads each Gemma checkpoint from its Hugging Face
// directory and its GGUF file (norms stored as w and as 1+w, different
// tensor names and metadata keys) and checks that both read the same
// config and give the same logits.
func TestGemmaFormatsAgree(t *testing.T) {
	ids := tokens(40, modeltest.Vocab(), 3)
	for _, arch := range []string{"gemma2", "gemma3"} {
		for _, dt := range []string{"F32", "BF16"} {
			t.Run(arch+"/"+dt, func(t *testing.T) {
				spec := gemmaSpecs[arch]
				spec.DType = dt
				hf, gg := writeGemma(t, spec)
				mh, mg := load(t, hf, runtime.LoadOptions{}), load(t, gg, runtime.LoadOptions{})
				for _, m := range []*runtime.Model{mh, mg} {
					c := m.Config
					if c.Arch != arch || c.SlidingWindow != 6 || len(c.SlidingLayers) != spec.Layers || !c.TiedEmbeddings {
						t.Fatalf("%s: arch %q, window %d, sliding layers %v, tied %v", m.Format, c.Arch, c.SlidingWindow, c.SlidingLayers, c.TiedEmbeddings)
					}
					for li := range spec.Layers {
						want := li%2 == 0
						if arch == "gemma3" {
							want = li != 5
						}
						if c.Sliding(li) != want {
							t.Errorf("%s: layer %d sliding = %v, want %v", m.Format, li, c.Sliding(li), want)
						}
					}
				}
				if mh.AttnSoftcap != mg.AttnSoftcap || mh.FinalSoftcap != mg.FinalSoftcap || mh.RopeLocalTheta != mg.RopeLocalTheta || mh.Scaling != mg.Scaling {
					t.Errorf("HF softcaps %v/%v, local base %v, scaling %+v; GGUF %v/%v, %v, %+v", mh.AttnSoftcap, mh.FinalSoftcap, mh.RopeLocalTheta, mh.Scaling,
						mg.AttnSoftcap, mg.FinalSoftcap, mg.RopeLocalTheta, mg.Scaling)
				}
				a, b := allLogits(t, mh, ids), allLogits(t, mg, ids)
				if d := maxRelDiff(b, a); d > 1e-5 {
					t.Errorf("GGUF vs HF logits differ by %.2g", d)
				}
			})
		}
	}
}
