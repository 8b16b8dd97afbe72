package calibrate

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// recordTest calibrates the test model on the built-in data.
func recordTest(t *testing.T, m *runtime.Model, opts RecordOptions) (*Recorder, *Data) {
	t.Helper()
	d, err := LoadData(context.Background(), m, DataOptions{Samples: 6, SeqLen: 96, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := Record(context.Background(), m, d, RunOptions{Record: opts})
	if err != nil {
		t.Fatal(err)
	}
	return rec, d
}

const heldOut = "Once upon a time there was a little fox who liked to run in the green field by the river. "

// TestRecordMatchesTheCache: what the recorder saw is what an fp16 cache
// stores (K after RoPE, before the fp16 rounding), so scales computed from
// it are the data's.
func TestRecordMatchesTheCache(t *testing.T) {
	m, _ := testModel(t)
	d := &Data{Samples: [][]int{m.Tokenizer.Encode(heldOut, true)}}
	rec, err := Record(context.Background(), m, d, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := kvcache.NewLayout(m.Geometry(), quant.NewSpec("fp16", quant.FP16, quant.FP16), 0)
	c, _ := r.NewCache(l, kvcache.Options{Blocks: l.BlocksFor(len(d.Samples[0]))})
	c.AddSeq(0)
	if _, err := r.Forward(context.Background(), []runtime.Entry{{Cache: c, Tokens: d.Samples[0], Logits: runtime.NoLogits}}); err != nil {
		t.Fatal(err)
	}
	n := len(d.Samples[0])
	for layer := range m.Config.Layers {
		for _, key := range []bool{true, false} {
			side := SideV
			if key {
				side = SideK
			}
			a := rec.acc[layer][side]
			for h := range m.Config.KVHeads {
				rows := make([]float32, n*m.Config.HeadDim)
				c.Read(rows, layer, 0, key, h, 0, n)
				for i := range m.Config.HeadDim {
					ch := h*m.Config.HeadDim + i
					lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
					for tk := range n {
						lo, hi = min(lo, rows[tk*m.Config.HeadDim+i]), max(hi, rows[tk*m.Config.HeadDim+i])
					}
					f16 := func(x float32) float32 { return simd.F16ToF32Scalar(simd.F32ToF16Scalar(x)) }
					if f16(a.min[ch]) != lo || f16(a.max[ch]) != hi {
						t.Fatalf("layer %d %s channel %d: recorded [%g, %g], cache holds [%g, %g]", layer, side, ch, a.min[ch], a.max[ch], lo, hi)
					}
				}
			}
		}
	}
}

// TestCompareRanksClippingLast: scales far too small clip most keys and
// values; Compare must measure that (clip rate, reconstruction error, KLD)
// and never recommend them, while calibrated scales clip almost nothing.
func TestCompareRanksClippingLast(t *testing.T) {
	m, _ := testModel(t)
	rec, _ := recordTest(t, m, RecordOptions{MSE: true})
	var cands []Candidate
	for _, name := range []string{"dataset", "dataset:mse", "dataset:static_minmax:head", "percentile:99.9", "warmup:data"} {
		s, err := ParseStrategy(name, PerTensor)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := Compute(s, rec, nil, ScaleOptions{DType: "F16"})
		if err != nil {
			t.Fatal(err)
		}
		cands = append(cands, Candidate{Name: s.String(), Scales: sc})
	}
	bad := *cands[0].Scales
	bad.K, bad.V = slices.Clone(bad.K), slices.Clone(bad.V)
	for l := range bad.Layers {
		bad.K[l] = []float32{bad.K[l][0] / 50}
		bad.V[l] = []float32{bad.V[l][0] / 50}
	}
	zero := bad
	zero.K = slices.Clone(bad.K)
	zero.K[1] = []float32{0}
	cands = append(cands, Candidate{Name: "too small", Scales: &bad}, Candidate{Name: "zero", Scales: &zero})
	cmp, err := Compare(context.Background(), m, cands, CompareOptions{Texts: []eval.Text{{Body: strings.Repeat(heldOut, 6)}}, Text: eval.TextOptions{Ctx: 128}})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]CandidateResult{}
	for _, r := range cmp.Results {
		byName[r.Name] = r
	}
	good, small := byName["dataset:minmax:tensor"], byName["too small"]
	if good.ClipK > 0.01 || good.ClipV > 0.01 || small.ClipK < 0.2 || small.ClipV < 0.2 {
		t.Errorf("clip rates: calibrated K %g V %g, too small K %g V %g", good.ClipK, good.ClipV, small.ClipK, small.ClipV)
	}
	if !(small.ErrK > 10*good.ErrK) || !(small.KLD > good.KLD) || good.KLD <= 0 || math.IsNaN(good.KLD) {
		t.Errorf("too small: err %g KLD %g; calibrated: err %g KLD %g", small.ErrK, small.KLD, good.ErrK, good.KLD)
	}
	if z := byName["zero"]; z.Failed == "" || !strings.Contains(z.Failed, "layer 1 k scale 0") {
		t.Errorf("zero scale: failed %q", z.Failed)
	}
	v := cmp.Verdict
	if v == nil || v.Best == "too small" || v.Best == "zero" || v.RunnerUp == "" || !strings.Contains(v.Text, v.Best) {
		t.Fatalf("recommendation %+v", v)
	}
	if cmp.Tokens == 0 || cmp.Chunks == 0 {
		t.Errorf("held-out scoring: %d tokens in %d chunks", cmp.Tokens, cmp.Chunks)
	}
}

// TestAuditPlantedBadScales plants every kind of bad scale in a
// checkpoint and checks the audit reports each at its level; calibrated
// scales written by WriteCheckpoint pass with no error.
func TestAuditPlantedBadScales(t *testing.T) {
	m, dir := testModel(t)
	rec, _ := recordTest(t, m, RecordOptions{})
	s, _ := ParseStrategy("dataset:static_minmax", PerTensor)
	good, err := Compute(s, rec, nil, ScaleOptions{DType: "F16"})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteCheckpoint(dir, good, "F16"); err != nil {
		t.Fatal(err)
	}
	sh, err := ReadCheckpointScales(dir, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	a := AuditScales(sh, rec, quant.E4M3)
	if a.Errors != 0 {
		t.Errorf("calibrated scales: %d errors: %+v", a.Errors, a.Findings)
	}
	// Plant: layer 0 K zero, layer 0 V negative, layer 1 K a hundredth of
	// what the data needs (clipping), layer 1 V missing.
	bad := filepath.Join(t.TempDir(), "bad")
	os.MkdirAll(bad, 0o755)
	cfg, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	os.WriteFile(filepath.Join(bad, "config.json"), cfg, 0o644)
	scaleFile(t, filepath.Join(bad, "model.safetensors"), "F32", map[string][]float32{
		"model.layers.0.self_attn.k_scale": {0},
		"model.layers.0.self_attn.v_scale": {-1},
		"model.layers.1.self_attn.k_scale": {good.K[1][0] / 100},
	}, nil)
	sh, err = ReadCheckpointScales(bad, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	a = AuditScales(sh, rec, quant.E4M3)
	codes := map[string]string{}
	for _, f := range a.Findings {
		codes[f.Code] = f.Level
	}
	for code, level := range map[string]string{"zero": LevelError, "negative": LevelError, "clipping": LevelError, "one-side": LevelWarning} {
		if codes[code] != level {
			t.Errorf("finding %q: level %q, want %q (findings %+v)", code, codes[code], level, a.Findings)
		}
	}
	// Every scale 1.0, K == V: the uncalibrated export.
	scaleFile(t, filepath.Join(bad, "model.safetensors"), "BF16", map[string][]float32{
		"model.layers.0.self_attn.k_scale": {1}, "model.layers.0.self_attn.v_scale": {1},
		"model.layers.1.self_attn.k_scale": {1}, "model.layers.1.self_attn.v_scale": {1},
	}, nil)
	sh, _ = ReadCheckpointScales(bad, 2, 2)
	a = AuditScales(sh, rec, quant.E4M3)
	codes = map[string]string{}
	for _, f := range a.Findings {
		codes[f.Code] = f.Level
	}
	if codes["all-one"] != LevelError || codes["k-equals-v"] != LevelWarning || a.Errors == 0 {
		t.Errorf("all 1.0: %+v", a.Findings)
	}
	// Scales whose config.json has no quantization_config are ignored by
	// vLLM; a missing layer is an error; so is a file the index skips.
	os.WriteFile(filepath.Join(bad, "config.json"), []byte(`{"model_type": "llama"}`), 0o644)
	scaleFile(t, filepath.Join(bad, "model.safetensors"), "F32", map[string][]float32{
		"model.layers.0.self_attn.k_scale": {0.01}, "model.layers.0.self_attn.v_scale": {0.02},
	}, nil)
	sh, _ = ReadCheckpointScales(bad, 2, 2)
	a = AuditScales(sh, nil, quant.E4M3)
	codes = map[string]string{}
	for _, f := range a.Findings {
		codes[f.Code] = f.Level
	}
	if codes["ignored"] != LevelError || codes["missing"] != LevelError {
		t.Errorf("no quantization_config, layer 1 missing: %+v", a.Findings)
	}
	// ModelOpt's hf_quant_config.json announces an fp8 KV cache that ships
	// no scales; scales in a file the index does not list are never read.
	mo := filepath.Join(t.TempDir(), "modelopt")
	os.MkdirAll(mo, 0o755)
	os.WriteFile(filepath.Join(mo, "hf_quant_config.json"), []byte(`{"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}`), 0o644)
	scaleFile(t, filepath.Join(mo, "model-00001-of-00001.safetensors"), "F32", map[string][]float32{"model.layers.0.self_attn.q_proj.weight": {1}}, nil)
	sh, err = ReadCheckpointScales(mo, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if a = AuditScales(sh, nil, quant.E4M3); a.Errors != 1 || a.Findings[0].Code != "missing" || !strings.Contains(a.Findings[0].Message, "hf_quant_config.json") {
		t.Errorf("ModelOpt without scales: %+v", a.Findings)
	}
	os.WriteFile(filepath.Join(mo, "model.safetensors.index.json"), []byte(`{"metadata": {}, "weight_map": {"model.layers.0.self_attn.q_proj.weight": "model-00001-of-00001.safetensors"}}`), 0o644)
	scaleFile(t, filepath.Join(mo, "scales.safetensors"), "F32", map[string][]float32{
		"model.layers.0.self_attn.k_proj.k_scale": {0.1}, "model.layers.0.self_attn.v_proj.v_scale": {0.1},
		"model.layers.1.self_attn.k_proj.k_scale": {0.1}, "model.layers.1.self_attn.v_proj.v_scale": {0.2}}, nil)
	sh, err = ReadCheckpointScales(mo, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	a = AuditScales(sh, nil, quant.E4M3)
	if len(a.Findings) == 0 || a.Findings[0].Code != "not-in-index" || !strings.Contains(a.Findings[0].Message, "scales.safetensors") {
		t.Errorf("scales outside the index: %+v", a.Findings)
	}
	// Outliers against the other layers need three or more layers' scales:
	// see TestAuditOutlier. A lone file with NaN.
	p := filepath.Join(t.TempDir(), "s.safetensors")
	scaleFile(t, p, "F32", map[string][]float32{"model.layers.0.self_attn.k_scale": {float32(math.NaN())}, "model.layers.1.self_attn.kv_scale": {0.5}}, nil)
	sh, err = ReadCheckpointScales(p, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	a = AuditScales(sh, nil, quant.E4M3)
	codes = map[string]string{}
	for _, f := range a.Findings {
		codes[f.Code] = f.Level
	}
	if codes["non-finite"] != LevelError || codes["legacy"] != LevelInfo || codes["ignored"] != "" {
		t.Errorf("NaN and legacy kv_scale in a lone file: %+v", a.Findings)
	}
}

func TestAuditOutlier(t *testing.T) {
	sh := newShipped("x", 4, 1)
	for l := range 4 {
		sh.K[l], sh.V[l] = []float32{0.01}, []float32{0.02}
	}
	sh.K[2] = []float32{0.5}
	a := AuditScales(sh, nil, quant.E4M3)
	found := false
	for _, f := range a.Findings {
		found = found || f.Code == "outlier" && f.Layer == 2 && f.Side == "k"
	}
	if !found || a.Errors != 0 {
		t.Errorf("findings %+v", a.Findings)
	}
}

// TestFitCodebooks fits per-layer KVQuant levels from recorded pre-RoPE
// keys and values; the file they save to runs as kvquant4:codebook@FILE.
func TestFitCodebooks(t *testing.T) {
	m, _ := testModel(t)
	rec, _ := recordTest(t, m, RecordOptions{KeepTokens: 256})
	f := quant.Formats().MustLookup("kvquant4")
	cb, err := FitCodebooks(rec, f, 4)
	if err != nil {
		t.Fatal(err)
	}
	for l := range 2 {
		set := cb.Layers[string(rune('0'+l))]
		for _, lv := range [][]float32{set.Keys, set.Values} {
			if len(lv) != 16 || !slices.IsSorted(lv) || lv[0] < -1 || lv[15] > 1 {
				t.Errorf("layer %d levels %v", l, lv)
			}
		}
	}
	p := filepath.Join(t.TempDir(), "cb.json")
	if err := cb.Save(p); err != nil {
		t.Fatal(err)
	}
	if _, err := quant.Formats().Lookup("kvquant4:codebook@" + p); err != nil {
		t.Errorf("kvquant4:codebook@%s: %v", p, err)
	}
	if _, err := FitCodebooks(fakeRecorder(RecordOptions{}), f, 4); err == nil {
		t.Error("fitting without kept rows succeeded")
	}
}

// TestRecordCancel: a cancelled context stops recording with its error.
func TestRecordCancel(t *testing.T) {
	m, _ := testModel(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d := &Data{Samples: [][]int{{1, 2, 3}}}
	if _, err := Record(ctx, m, d, RunOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Record(cancelled) = %v", err)
	}
}
