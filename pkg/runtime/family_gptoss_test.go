package runtime_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// gptossSpec is the tiny GPT-OSS of the tests: 4 layers (0 and 2 slide
// over 4 positions), 4 experts of 64 (top 2), head_dim 32, YaRN factor 4
// over an original context of 32, truncated as llama.cpp computes it.
var gptossSpec = modeltest.GPTOSS{YarnFactor: 4, SinkScale: 2, Seed: 39}

func writeGPTOSS(t *testing.T, s modeltest.GPTOSS) (hf, gg string) {
	t.Helper()
	dir := t.TempDir()
	hf, gg = filepath.Join(dir, "hf"), filepath.Join(dir, "m.gguf")
	if err := modeltest.WriteGPTOSSHF(hf, s); err != nil {
		t.Fatal(err)
	}
	if err := modeltest.WriteGPTOSSGGUF(gg, s); err != nil {
		t.Fatal(err)
	}
	return hf, gg
}

// TestGPTOSSFormatsAgree loads the same GPT-OSS weights from a Hugging
// Face directory (MXFP4 blocks and scales, gate and up interleaved) and a
// GGUF file (GGML MXFP4, gate and up split) and checks the configs and
// every position's logits agree.
func TestGPTOSSFormatsAgree(t *testing.T) {
	hf, gg := writeGPTOSS(t, gptossSpec)
	mh, mg := load(t, hf, runtime.LoadOptions{}), load(t, gg, runtime.LoadOptions{})
	for _, m := range []*runtime.Model{mh, mg} {
		c := m.Config
		if c.Arch != "gpt-oss" || c.Experts != 4 || c.ExpertsUsed != 2 || c.SlidingWindow != 4 || c.Scaling.Type != "yarn" || c.SwiGLULimit != 7 {
			t.Fatalf("%s: config %+v", m.Format, c)
		}
		if len(c.SlidingLayers) != 4 || !c.SlidingLayers[0] || c.SlidingLayers[1] || !c.SlidingLayers[2] || c.SlidingLayers[3] {
			t.Errorf("%s: sliding layers %v, want the even ones", m.Format, c.SlidingLayers)
		}
		if m.Layers[1].Sinks == nil || m.Layers[1].ExpGateB == nil || len(m.Layers[1].ExpGate) != 4 {
			t.Errorf("%s: layer 1 lacks sinks or expert biases", m.Format)
		}
	}
	ids := []int{264, 10, 100, 200, 33, 45, 120, 7, 99, 250, 12, 80}
	a, b := allLogits(t, mh, ids), allLogits(t, mg, ids)
	var worst float64
	for i := range a {
		worst = math.Max(worst, math.Abs(float64(a[i]-b[i])))
	}
	t.Logf("largest |HF − GGUF| logit: %.2g", worst)
	if worst > 1e-5 {
		t.Errorf("HF and GGUF logits differ by %g", worst)
	}
}
