package runtime_test

import (
	"path/filepath"
	"slices"
	"testing"
	"unsafe"

	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// moeSpecs are tiny mixture-of-experts checkpoints: Mixtral (4 experts,
// top-2) and Qwen3-MoE (6 experts, top-2, a dense first layer, and every
// other layer sparse).
func moeSpecs() map[string]modeltest.Spec {
	return map[string]modeltest.Spec{
		"mixtral":  {Arch: "mixtral", Experts: 4, ExpertsUsed: 2, Seed: 21, RouterScale: 4},
		"qwen3moe": {Arch: "qwen3moe", Layers: 4, Experts: 6, ExpertsUsed: 2, ExpertHidden: 32, NormTopK: true, MLPOnly: []int{0}, SparseStep: 1, Seed: 22, RouterScale: 4},
	}
}

// writeMoE writes spec as a Hugging Face directory and a GGUF file.
func writeMoE(t *testing.T, spec modeltest.Spec) (hf, gg string) {
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

// TestMoEFormatsAgree loads each MoE family from its Hugging Face
// directory and its GGUF file (llama.cpp's layout: Mixtral as "llama"
// with expert_count, the experts stacked in 3-D tensors) and checks the
// config and the logits agree.
func TestMoEFormatsAgree(t *testing.T) {
	ids := tokens(40, modeltest.Vocab(), 3)
	for arch, spec := range moeSpecs() {
		for _, dt := range []string{"F32", "BF16"} {
			t.Run(arch+"/"+dt, func(t *testing.T) {
				spec.DType = dt
				hf, gg := writeMoE(t, spec)
				mh, mg := load(t, hf, runtime.LoadOptions{}), load(t, gg, runtime.LoadOptions{})
				for _, m := range []*runtime.Model{mh, mg} {
					c := m.Config
					if c.Arch != arch || c.Experts != spec.Experts || c.ExpertsUsed != spec.ExpertsUsed {
						t.Errorf("%s: arch %q, %d of %d experts; want %q, %d of %d", m.Format, c.Arch, c.ExpertsUsed, c.Experts, arch, spec.ExpertsUsed, spec.Experts)
					}
					if !slices.Equal(c.DenseLayers, mh.DenseLayers) || c.Routing != mh.Routing {
						t.Errorf("%s: dense layers %v, routing %v; HF %v, %v", m.Format, c.DenseLayers, c.Routing, mh.DenseLayers, mh.Routing)
					}
				}
				if arch == "qwen3moe" && (!slices.Equal(mh.DenseLayers, []int{0}) || mh.Routing != backend.SoftmaxTopKNorm || mh.Layers[0].Gate == nil || mh.Layers[1].Router == nil) {
					t.Errorf("qwen3moe: dense layers %v, routing %v; want [0], normalised", mh.DenseLayers, mh.Routing)
				}
				if arch == "mixtral" && mh.Routing != backend.TopKSoftmax {
					t.Errorf("mixtral: routing %v", mh.Routing)
				}
				a, b := allLogits(t, mh, ids), allLogits(t, mg, ids)
				if d := maxRelDiff(b, a); d > 1e-5 {
					t.Errorf("GGUF vs HF logits differ by %.2g", d)
				}
			})
		}
	}
}

// TestMoEExpertsMapped checks that a GGUF file's experts are views of its
// stacked tensor, each expert's bytes right after the previous one's: no
// expert is copied or converted at load, so one that no token chooses is
// never read from the file.
func TestMoEExpertsMapped(t *testing.T) {
	spec := moeSpecs()["mixtral"]
	spec.DType = "F16"
	_, gg := writeMoE(t, spec)
	m := load(t, gg, runtime.LoadOptions{})
	for li, l := range m.Layers {
		for _, ws := range [][]*tensor.Weight{l.ExpGate, l.ExpUp, l.ExpDown} {
			if len(ws) != spec.Experts {
				t.Fatalf("layer %d: %d experts, want %d", li, len(ws), spec.Experts)
			}
			for e := 1; e < len(ws); e++ {
				prev, cur := ws[e-1].U16, ws[e].U16
				if unsafe.Pointer(unsafe.SliceData(cur)) != unsafe.Add(unsafe.Pointer(unsafe.SliceData(prev)), 2*len(prev)) {
					t.Errorf("layer %d: expert %d of %s is not the stacked tensor's next part", li, e, ws[e].Name)
				}
			}
		}
	}
}
