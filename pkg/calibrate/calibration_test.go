package calibrate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/quant"
)

// TestCalibrate runs the whole calibration: the exported strategy is the
// one the comparison recommends, its scales are what Compute makes of the
// same data, the result's absmax are the statistics', nothing is written
// until Write, which writes the exports and the codebooks and lists them.
func TestCalibrate(t *testing.T) {
	m, _ := testModel(t)
	d, err := LoadData(context.Background(), m, DataOptions{Samples: 3, SeqLen: 64, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	compare, err := ParseStrategies("default,dataset", PerTensor)
	if err != nil {
		t.Fatal(err)
	}
	var stages []string
	dir := filepath.Join(t.TempDir(), "out")
	cal, err := Calibrate(context.Background(), m, d, Options{Model: "test model", Best: true, Granularity: PerTensor, Compare: compare,
		Texts: []eval.Text{{Name: "fox", Body: strings.Repeat(heldOut, 4)}}, HeldOut: []string{"fox"}, Text: eval.TextOptions{Ctx: 64, MaxChunks: 2},
		Kind: quant.E4M3, Codebooks: []string{"kvquant4"}, WarmupLen: 32, Seed: 1,
		Progress: func(stage string, done, total int) {
			if len(stages) == 0 || stages[len(stages)-1] != stage {
				if done != 0 {
					t.Errorf("stage %s starts at %d of %d", stage, done, total)
				}
				stages = append(stages, stage)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{StageRecord, StageCompare}; !slices.Equal(stages, want) {
		t.Errorf("progress stages %v, want %v", stages, want)
	}
	res := cal.Result
	if res.Schema != Schema || res.Model != "test model" || res.DType != "F16" || cal.DType != "F16" || res.Compare == nil || res.Compare.Verdict == nil ||
		res.Strategy != res.Compare.Verdict.Best || !slices.Equal(res.HeldOut, []string{"fox"}) || res.Data != d.Info() {
		t.Fatalf("result: %+v", res)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Calibrate wrote %s: %v", dir, err)
	}
	best, err := ParseStrategy(res.Strategy, PerTensor)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := Record(context.Background(), m, d, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := Compute(best, rec, nil, ScaleOptions{Kind: quant.E4M3, DType: "F16"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Scales) != m.Config.Layers {
		t.Fatalf("%d layers of scales, want %d", len(res.Scales), m.Config.Layers)
	}
	for l, ls := range res.Scales {
		if ls.Layer != l || !slices.Equal(ls.K, want.K[l]) || !slices.Equal(ls.V, want.V[l]) || ls.KAbsmax != cal.Stats.Layer[l].K.Absmax || ls.VAbsmax != cal.Stats.Layer[l].V.Absmax || ls.KAbsmax <= 0 {
			t.Errorf("layer %d: %+v, want K %v V %v", l, ls, want.K[l], want.V[l])
		}
	}
	if err := cal.Write(dir, m.Arch); err != nil {
		t.Fatal(err)
	}
	wantFiles := []string{FileKVQ, FileSafetensors, FileScheme, FileSGLang, CodebookFile("kvquant4")}
	if len(res.Files) != len(wantFiles) {
		t.Fatalf("files %v, want %v", res.Files, wantFiles)
	}
	for _, name := range wantFiles {
		p := filepath.Join(dir, name)
		if !slices.Contains(res.Files, p) {
			t.Errorf("files %v lack %s", res.Files, p)
		}
		if _, err := os.Stat(p); err != nil {
			t.Error(err)
		}
	}
	back, err := LoadScales(filepath.Join(dir, FileKVQ), m.Config.Layers, m.Config.KVHeads)
	if err != nil || !slices.EqualFunc(back.K, want.K, slices.Equal) {
		t.Errorf("written scales: %v, %v; want %v", back, err, want.K)
	}
}

// TestCalibrateOptions: an unknown codebook format is ErrOptions, before
// any recording.
func TestCalibrateOptions(t *testing.T) {
	m, _ := testModel(t)
	d := &Data{Samples: [][]int{m.Tokenizer.Encode(heldOut, true)}}
	s, _ := ParseStrategy("dataset", PerTensor)
	if _, err := Calibrate(context.Background(), m, d, Options{Strategy: s, Codebooks: []string{"int4"}}); !errors.Is(err, ErrOptions) {
		t.Errorf("Calibrate with codebook int4: %v, want ErrOptions", err)
	}
}

// TestAuditEffect: shipped scales with an invalid layer are measured as
// shipped (refused), repaired, against calibrated scales and 1.0.
func TestAuditEffect(t *testing.T) {
	m, _ := testModel(t)
	rec, _ := recordTest(t, m, RecordOptions{})
	s, _ := ParseStrategy("dataset", PerTensor)
	sc, err := Compute(s, rec, nil, ScaleOptions{Kind: quant.E4M3, DType: "F16"})
	if err != nil {
		t.Fatal(err)
	}
	sc.K = slices.Clone(sc.K)
	sc.K[1] = []float32{0}
	p := filepath.Join(t.TempDir(), "kv_scales.json")
	if err := sc.Save(p); err != nil {
		t.Fatal(err)
	}
	sh, err := ReadScalesFile(p, m.Config.Layers, m.Config.KVHeads)
	if err != nil {
		t.Fatal(err)
	}
	cmp, err := AuditEffect(context.Background(), m, sh, rec, quant.E4M3, CompareOptions{Texts: []eval.Text{{Body: strings.Repeat(heldOut, 4)}}, Text: eval.TextOptions{Ctx: 64, MaxChunks: 2}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range cmp.Results {
		names = append(names, r.Name)
	}
	want := []string{"shipped", "shipped, 1 invalid as 1.0", "calibrated (dataset:minmax:tensor)", "1.0 (vLLM's default)"}
	if !slices.Equal(names, want) {
		t.Fatalf("candidates %q, want %q", names, want)
	}
	if cmp.Results[0].Failed == "" || cmp.Results[1].Failed != "" || cmp.Results[2].Failed != "" || cmp.Results[2].KLD <= 0 {
		t.Errorf("results: %+v", cmp.Results)
	}
}
