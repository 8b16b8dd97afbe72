package plan

import (
	"context"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/estimate"
	"github.com/kvqlabs/kvq/pkg/eval"
)

func buildFor(t *testing.T, model, gpu, engine string, b *Bottleneck) *Plan {
	t.Helper()
	m, err := estimate.LookupModel(model)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Model: m, Engine: engine, Bottleneck: b}
	if gpu != "" {
		g, err := estimate.LookupGPU(gpu)
		if err != nil {
			t.Fatal(err)
		}
		opts.GPU = &g
	}
	p, err := Build(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCandidatesOrder: FP8 first (what the GPU computes natively before
// what it only stores), then INT8, then 4-bit; capacity from estimate's
// accounting (fp8 holds twice fp16's tokens); GPU facts by compute
// capability.
func TestCandidatesOrder(t *testing.T) {
	p := buildFor(t, "llama-3.1-8b", "h100", EngineVLLM, nil)
	classes := []int{}
	for _, c := range p.Candidates {
		classes = append(classes, c.Format.Class)
	}
	for i := 1; i < len(classes); i++ {
		if classes[i] < classes[i-1] {
			t.Fatalf("classes out of order: %v", classes)
		}
	}
	first := p.Candidates[0]
	if first.Format.Class != 1 || first.GPU.Status != Yes || !strings.Contains(first.Command, "--kv-cache-dtype fp8") {
		t.Errorf("first candidate %+v", first)
	}
	if first.Capacity.Compression != 2 || p.Baseline.Tokens == 0 || first.Capacity.Tokens < 2*p.Baseline.Tokens-64 {
		t.Errorf("fp8 capacity %+v vs fp16 %+v", first.Capacity, p.Baseline)
	}
	for _, c := range p.Candidates {
		if c.Format.Name == "nvfp4" && c.GPU.Status != No {
			t.Errorf("nvfp4 on an H100: %+v", c.GPU)
		}
	}
	a := buildFor(t, "llama-3.1-8b", "a100", EngineVLLM, nil)
	for _, c := range a.Candidates {
		switch c.Format.Name {
		case "fp8 (e4m3), calibrated per-tensor scales":
			if c.GPU.Status != Partial || !strings.Contains(c.GPU.Note, "8.0") {
				t.Errorf("e4m3 on an A100: %+v", c.GPU)
			}
		case "fp8 (e4m3), calibrated per-head scales":
			if c.GPU.Status != No {
				t.Errorf("per-head scales (FA3 only) on an A100: %+v", c.GPU)
			}
		case "fp8_e5m2":
			if c.GPU.Status != Yes {
				t.Errorf("e5m2 on an A100: %+v", c.GPU)
			}
		}
	}
	if a.Candidates[0].Format.Name != "fp8_e5m2" {
		t.Errorf("on an A100 e5m2 (stored and computed) comes before e4m3 (no native compute): %s first", a.Candidates[0].Format.Name)
	}
}

// TestCompatFacts pins facts against the documented sources: a change to
// the table must be deliberate.
func TestCompatFacts(t *testing.T) {
	want := map[string]map[string]string{
		EngineVLLM: {
			"fp8 (e4m3), calibrated per-head scales/backends":           "FLASH_ATTN (FA3) only",
			"int8_per_token_head/backends":                              "TRITON_ATTN only",
			"fp8 (e4m3), scale 1.0/calculate_kv_scales":                 "deprecated, then removed",
			"fp8 (e4m3), calibrated per-tensor scales/LoRA":             "no source found",
			"fp8 (e4m3), calibrated per-tensor scales/Ampere with e4m3": "fp8e4nv not supported",
		},
		EngineSGLang:   {"fp8_e4m3/scales file": "silently ignored"},
		EngineLlamaCpp: {"iq4_nl/CUDA kernels": "", "q8_0/quantized V": "needs flash attention"},
		EngineTRTLLM:   {"int8 (TensorRT engine flow)/PyTorch backend": ""},
	}
	for engine, facts := range want {
		found := map[string]Fact{}
		for _, f := range EngineFormats(engine) {
			if f.Enable == "" || f.Scales == "" || f.GPUNote == "" {
				t.Errorf("%s %s: incomplete %+v", engine, f.Name, f)
			}
			for _, x := range f.Facts {
				found[f.Name+"/"+x.Topic] = x
				if x.Status != Unknown && x.Source == "" {
					t.Errorf("%s %s %s: a fact without a source", engine, f.Name, x.Topic)
				}
			}
		}
		for key, note := range facts {
			x, ok := found[key]
			if !ok || !strings.Contains(x.Note, note) {
				t.Errorf("%s %s: %+v, want a note with %q", engine, key, x, note)
			}
		}
	}
}

// TestGatesAndChecklist: the generated gates are a valid kvq eval gates
// file; the checklist follows the guide's steps and marks what results
// settle.
func TestGatesAndChecklist(t *testing.T) {
	gates, err := eval.ParseGates(GatesYAML(DefaultGates()), "kvq-gates.yaml")
	if err != nil || len(gates) != len(DefaultGates()) {
		t.Fatalf("gates file: %v (%d gates)", err, len(gates))
	}
	p := buildFor(t, "llama-3.1-8b", "h100", EngineVLLM, nil)
	steps := map[int]string{}
	for _, it := range p.Checklist {
		if _, ok := steps[it.Step]; !ok {
			steps[it.Step] = it.Status
		}
	}
	if steps[1] != StatusToRun || steps[2] != StatusToRun || steps[3] != StatusToRun || steps[5] != StatusToRun {
		t.Errorf("unmeasured plan statuses: %v", steps)
	}
	if len(p.Fallback) == 0 || !strings.Contains(p.Fallback[0], "--kv-cache-dtype auto") {
		t.Errorf("fallback %v", p.Fallback)
	}
	b := &Bottleneck{Verdict: KVBound, Evidence: []string{"31 requests were preempted"}}
	p = buildFor(t, "llama-3.1-8b", "h100", EngineVLLM, b)
	if p.Checklist[0].Status != StatusMeasured || !strings.Contains(p.Checklist[0].Detail, "preempted") {
		t.Errorf("measured step 1: %+v", p.Checklist[0])
	}
	for _, engine := range Engines() {
		if p := buildFor(t, "llama-3.1-8b", "h100", engine, nil); len(p.Candidates) == 0 || len(p.Fallback) == 0 {
			t.Errorf("%s: %d candidates", engine, len(p.Candidates))
		}
	}
}
