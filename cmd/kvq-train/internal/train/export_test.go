package train

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

func runtimeLogits(t *testing.T, m *runtime.Model, ids []int, spec string) []float32 {
	t.Helper()
	s, err := quant.Formats().ParseSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	l, err := kvcache.NewLayout(m.Geometry(), s, 0)
	if err != nil {
		t.Fatal(err)
	}
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.NewCache(l, kvcache.Options{Blocks: l.BlocksFor(len(ids) + 16)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddSeq(0); err != nil {
		t.Fatal(err)
	}
	out, err := r.Forward(context.Background(), []runtime.Entry{{Cache: c, Seq: 0, Tokens: ids, Logits: runtime.AllLogits}})
	if err != nil {
		t.Fatal(err)
	}
	return out[0]
}

// maxRel is max|a−b| / max|b|.
func maxRel(a, b []float32) float64 {
	var d, s float64
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
		s = math.Max(s, math.Abs(float64(b[i])))
	}
	return d / s
}

// TestExportLoadsInRuntime trains a tiny model for a few steps, exports it
// and loads the directory with runtime.Load: the config, tokenizer and
// logits must match the trainer's.
//
// Tolerances: with the trainer's weights rounded to F16 first, both sides
// compute the same function in float32 and differ only by summation order
// and rounding (measured 2e-7 of the largest logit; allowed 1e-5).
// Against the unrounded float32 weights, the F16 rounding (relative 2^-11
// ≈ 4.9e-4 per weight) moves the logits by 3e-4 of the largest; allowed
// 5e-3. The fp16 KV cache adds its own rounding of K and V (2^-11);
// allowed 5e-3.
func TestExportLoadsInRuntime(t *testing.T) {
	cfg := testConfig()
	cfg.Steps = 3
	dir := t.TempDir()
	trainOrFatal(t, cfg, dir)
	rm, err := runtime.Load(context.Background(), filepath.Join(dir, ModelDir), runtime.LoadOptions{})
	if err != nil {
		t.Fatalf("runtime.Load: %v", err)
	}
	defer rm.Close()
	c := rm.Config
	if c.Arch != "llama" || c.Dim != cfg.Dim || c.Layers != cfg.Layers || c.Heads != cfg.Heads || c.KVHeads != cfg.KVHeads ||
		c.HeadDim != cfg.HeadDim || c.Hidden != cfg.Hidden || c.Vocab != cfg.Vocab || c.ContextLen != cfg.Context ||
		!c.RopeNeoX || c.RopeTheta != cfg.RopeTheta || c.RMSEps != cfg.RMSEps || c.TiedEmbeddings {
		t.Errorf("runtime config %+v does not match %+v", c, cfg)
	}
	if got := rm.DTypes(); len(got) != 1 || got[0] != "F16" {
		t.Errorf("weight dtypes %v, want [F16]", got)
	}
	tok := rm.Tokenizer
	if tok.VocabSize() != cfg.Vocab || tok.BOS() != BOS || tok.EOS() != EOS {
		t.Errorf("tokenizer: %d tokens, BOS %d, EOS %d; want %d, %d, %d", tok.VocabSize(), tok.BOS(), tok.EOS(), cfg.Vocab, BOS, EOS)
	}
	if len(rm.StopIDs) != 1 || rm.StopIDs[0] != EOS {
		t.Errorf("stop ids %v, want [%d]", rm.StopIDs, EOS)
	}
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	text := "Copy the text exactly.\nText: bora 42 kleth\nCopy: bora 42 kleth\n" + string(all)
	ids := tok.Encode(text, true)
	if len(ids) != len(text)+1 || ids[0] != BOS {
		t.Fatalf("Encode: %d ids for %d bytes, first %d; want BOS then one id per byte", len(ids), len(text), ids[0])
	}
	for i := 0; i < len(text); i++ {
		if ids[i+1] != int(text[i]) {
			t.Fatalf("Encode: byte %d (0x%02x) -> id %d, want %d", i, text[i], ids[i+1], text[i])
		}
	}
	if got := tok.Decode(ids[1:]); got != text {
		t.Errorf("Decode(Encode(text)) != text")
	}

	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ids = ids[:200]
	logits := func() []float32 {
		lg, err := m.Logits(context.Background(), ids)
		if err != nil {
			t.Fatal(err)
		}
		return lg
	}
	want32 := logits()
	h := make([]uint16, len(m.w))
	simd.F32ToF16(h, m.w)
	simd.F16ToF32(m.w, h) // the weights as exported
	want16 := logits()
	got := runtimeLogits(t, rm, ids, "fp32")
	if d := maxRel(got, want16); d > 1e-5 {
		t.Errorf("runtime (fp32 cache) vs trainer on F16-rounded weights: logits differ by %.3g of the largest, want <= 1e-5", d)
	} else {
		t.Logf("runtime vs trainer, F16-rounded weights: %.2g", d)
	}
	if d := maxRel(got, want32); d > 5e-3 {
		t.Errorf("runtime vs trainer on float32 weights: logits differ by %.3g, want <= 5e-3", d)
	} else {
		t.Logf("runtime vs trainer, float32 weights: %.2g", d)
	}
	if d := maxRel(runtimeLogits(t, rm, ids, "fp16"), want16); d > 5e-3 {
		t.Errorf("runtime (fp16 cache) vs trainer: logits differ by %.3g, want <= 5e-3", d)
	} else {
		t.Logf("runtime with fp16 cache vs trainer, F16-rounded weights: %.2g", d)
	}
}

func TestDefaultSize(t *testing.T) {
	c := DefaultConfig()
	if b := 2 * c.Params(); b > 16<<20 {
		t.Errorf("DefaultConfig exports %d bytes of F16 weights, want <= 16 MiB", b)
	} else {
		t.Logf("DefaultConfig: %d parameters, %.1f MiB in F16", c.Params(), float64(b)/(1<<20))
	}
}

func TestExportFiles(t *testing.T) {
	cfg := testConfig()
	m, err := NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "out")
	if err := Export(dst, m); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
		if _, err := os.Stat(filepath.Join(dst, f)); err != nil {
			t.Errorf("export is missing %s: %v", f, err)
		}
	}
}
