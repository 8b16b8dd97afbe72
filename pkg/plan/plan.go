package plan

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/kvqlabs/kvq/pkg/estimate"
	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/quant"
)

// Schema names the JSON form of a Plan.
const Schema = "kvq.plan/v1"

// Options are what a plan is made for.
type Options struct {
	Model estimate.Model
	// ModelRef is the model as the user names it in commands (a path or a
	// Hub id); default Model.Name.
	ModelRef string
	// Engine is one of Engines() (default vLLM); EngineVersion its
	// version for the memory model (vLLM only; default estimate's).
	Engine, EngineVersion string
	// GPU, when set, gives the capacity figures and the GPU facts.
	GPU *estimate.GPU
	// KVBudget, when positive, replaces the GPU memory model (bytes of KV
	// memory per rank).
	KVBudget int64
	TP, PP   int
	// MaxModelLen (default the model's maximum).
	MaxModelLen int64
	// Bottleneck is step 1 (Analyze); nil means not measured.
	Bottleneck *Bottleneck
	// Traffic gives request lengths when the bottleneck has none.
	Traffic *Traffic
	// Results are earlier kvq runs (ReadResults); nil for none.
	Results *Results
	// Endpoint is the running service (for the commands).
	Endpoint string
	// BuiltIn marks kvq's built-in model: kvq commands then need no
	// --model.
	BuiltIn bool
}

// Plan is the rollout checklist.
type Plan struct {
	Schema        string     `json:"schema"`
	Model         string     `json:"model"`
	Engine        string     `json:"engine"`
	EngineVersion string     `json:"engine_version,omitempty"`
	GPU           string     `json:"gpu,omitempty"`
	TP            int        `json:"tp"`
	KVBudget      int64      `json:"kv_budget_bytes,omitempty"`
	MaxModelLen   int64      `json:"max_model_len"`
	Step1         Bottleneck `json:"step1"`
	// Baseline is the unquantized cache's figures.
	Baseline   Capacity    `json:"baseline"`
	Candidates []Candidate `json:"candidates"`
	Checklist  []Item      `json:"checklist"`
	Gates      []eval.Gate `json:"gates"`
	Fallback   []string    `json:"fallback"`
	// Measured lists the result files the plan read.
	Measured []string `json:"measured_from,omitempty"`
}

// Capacity is one cache's memory figures from kvq estimate's accounting.
type Capacity struct {
	Spec          string  `json:"kvq_spec,omitempty"`
	BytesPerToken float64 `json:"bytes_per_token"`
	Compression   float64 `json:"compression"`
	// Tokens is the pool's size and MaxConcurrency vLLM's "maximum
	// concurrency for max_model_len" (zero without a GPU or budget).
	Tokens         int64   `json:"tokens"`
	MaxConcurrency float64 `json:"max_concurrency"`
	// TrafficConcurrency is how many requests of the traffic's P95 input
	// plus mean output fit (zero without traffic or budget).
	TrafficConcurrency float64 `json:"traffic_concurrency"`
}

// Candidate is one engine format to try.
type Candidate struct {
	Format   Format   `json:"format"`
	Order    int      `json:"order"`
	GPU      Fact     `json:"gpu"`
	Capacity Capacity `json:"capacity"`
	// Command is the engine invocation for this model.
	Command string `json:"command"`
	// Check is the kvq command that measures the candidate's quality.
	Check string `json:"check"`
	// Verdict is kvq eval's, when a result was given.
	Verdict string `json:"verdict,omitempty"`
}

// Item statuses.
const (
	StatusMeasured = "measured"
	StatusPassed   = "passed"
	StatusFailed   = "failed"
	StatusToRun    = "to run"
	StatusUnknown  = "unknown"
	// StatusDocumented marks a compatibility fact a source settles.
	StatusDocumented = "documented"
)

// Item is one checklist entry.
type Item struct {
	Step    int    `json:"step"`
	Title   string `json:"title"`
	Status  string `json:"status"`
	Detail  string `json:"detail"`
	Command string `json:"command,omitempty"`
}

// Build makes the plan.
func Build(ctx context.Context, opts Options) (*Plan, error) {
	if opts.Engine == "" {
		opts.Engine = EngineVLLM
	}
	if _, err := ParseEngine(opts.Engine); err != nil {
		return nil, err
	}
	if opts.ModelRef == "" {
		opts.ModelRef = opts.Model.Name
	}
	p := &Plan{Schema: Schema, Model: opts.ModelRef, Engine: opts.Engine, TP: max(1, opts.TP)}
	if opts.Bottleneck != nil {
		p.Step1 = *opts.Bottleneck
	} else {
		p.Step1 = Analyze(nil, opts.Traffic)
	}
	tr := p.Step1.Traffic
	if tr == nil {
		tr = opts.Traffic
	}
	formats := EngineFormats(opts.Engine)
	specs := []quant.Spec{mustSpec("fp16")}
	for _, f := range formats {
		if f.KVQ != "" {
			specs = append(specs, mustSpec(f.KVQ))
		}
	}
	est := estimate.Plan{Model: opts.Model, Caches: specs, SkipUnsupported: true, TP: opts.TP, PP: opts.PP,
		MaxModelLen: opts.MaxModelLen, KVBudget: opts.KVBudget}
	switch opts.Engine {
	case EngineSGLang:
		est.Engine = estimate.SGLang
	default:
		est.Engine = estimate.VLLM
		est.Version = opts.EngineVersion
	}
	if opts.GPU != nil {
		est.GPUMemory, est.GPUName = opts.GPU.Memory, opts.GPU.Name
		p.GPU = opts.GPU.Name
	}
	res, err := estimate.Estimate(ctx, est)
	if err != nil {
		return nil, err
	}
	p.EngineVersion, p.MaxModelLen = res.EngineVersion, res.MaxModelLen
	if res.Memory != nil {
		p.KVBudget = res.Memory.KVBudgetBytes
	}
	byFormat := map[string]estimate.FormatResult{}
	for _, fr := range res.Formats {
		byFormat[fr.Format] = fr
	}
	capacity := func(spec string) Capacity {
		fr, ok := byFormat[spec]
		if !ok {
			return Capacity{}
		}
		c := Capacity{Spec: spec, BytesPerToken: fr.BytesPerToken, Compression: fr.Compression}
		if fr.Tokens != nil {
			c.Tokens = *fr.Tokens
		}
		if fr.MaxConcurrency != nil {
			c.MaxConcurrency = *fr.MaxConcurrency
		}
		if tr != nil && c.Tokens > 0 {
			if need := tr.InputP95 + tr.OutputMean; need > 0 {
				bt := float64(max(1, fr.BlockTokens))
				c.TrafficConcurrency = math.Floor(float64(c.Tokens) / (math.Ceil(need/bt) * bt))
			}
		}
		return c
	}
	p.Baseline = capacity("fp16")
	gpu := ""
	if opts.GPU != nil {
		gpu = opts.GPU.Name
	}
	for i, f := range formats {
		c := Candidate{Format: f, Order: i + 1, GPU: gpuFact(f, gpu), Capacity: capacity(f.KVQ),
			Command: strings.ReplaceAll(f.Enable, "{model}", opts.ModelRef)}
		if f.KVQ != "" {
			mf := " --model " + opts.ModelRef
			if opts.BuiltIn {
				mf = ""
			}
			c.Check = "kvq eval" + mf + " --cache fp16," + evalSpec(f) + " --gates kvq-gates.yaml"
			if v, ok := opts.Results.evalVerdict(evalSpec(f)); ok {
				c.Verdict = "fail"
				if v.Pass {
					c.Verdict = "pass"
				}
			}
		} else {
			c.Check = "kvq has no codec for this format: measure on the engine (kvq bench --endpoint, kvq eval --endpoint when available)"
		}
		p.Candidates = append(p.Candidates, c)
	}
	// FP8 first, then INT8, then 4-bit and below; within a class, what this
	// GPU runs natively before what it only stores, the table's order next.
	rank := map[string]int{Yes: 0, Unknown: 1, Partial: 2, No: 3}
	slices.SortStableFunc(p.Candidates, func(a, b Candidate) int {
		if a.Format.Class != b.Format.Class {
			return a.Format.Class - b.Format.Class
		}
		return rank[a.GPU.Status] - rank[b.GPU.Status]
	})
	for i := range p.Candidates {
		p.Candidates[i].Order = i + 1
	}
	p.Gates = DefaultGates()
	p.Checklist = checklist(p, opts)
	p.Fallback = fallback(opts)
	if r := opts.Results; r != nil {
		for _, f := range []string{fileOf(r.Calibrate), fileOf(r.Audit), fileOf(r.Eval), fileOf(r.Bench)} {
			if f != "" {
				p.Measured = append(p.Measured, f)
			}
		}
	}
	return p, nil
}

func fileOf(x any) string {
	switch v := x.(type) {
	case *CalibrateResult:
		if v != nil {
			return v.File
		}
	case *AuditResult:
		if v != nil {
			return v.File
		}
	case *EvalResult:
		if v != nil {
			return v.File
		}
	case *BenchResult:
		if v != nil {
			return v.File
		}
	}
	return ""
}

// evalSpec is the kvq cache spec kvq eval runs for an engine format: the
// calibrated scales file for formats that take calibrated scales.
func evalSpec(f Format) string {
	if strings.Contains(f.Name, "calibrated") {
		return "fp8:scales@kvq-calibration/kv_scales.json"
	}
	return f.KVQ
}

func mustSpec(s string) quant.Spec {
	sp, err := quant.Formats().ParseSpec(s)
	if err != nil {
		panic("plan: built-in spec " + s + ": " + err.Error())
	}
	return sp
}

// DefaultGates are the gates a plan hands to kvq eval, one per evaluation
// layer of the rollout guide that eval measures: quality (mean KLD and
// top-1 agreement), tasks (no significant drop of more than 2 points),
// safety (no significant refusal flips) and speed (decode at most 25%
// slower than the baseline). Memory is settled by the capacity figures.
func DefaultGates() []eval.Gate {
	f := func(x float64) *float64 { return &x }
	return []eval.Gate{
		{Metric: eval.GateKLD, Max: f(0.01)},
		{Metric: eval.GateSameTop, Min: f(0.95)},
		{Metric: eval.GateDrop, Suite: "*", Max: f(2), Significant: true},
		{Metric: eval.GateFlips, Suite: "safety*", Max: f(0), Significant: true},
		{Metric: eval.GateSlowdown, Max: f(1.25)},
	}
}

// GatesYAML writes gates as a kvq eval gates file.
func GatesYAML(gates []eval.Gate) []byte {
	var b bytes.Buffer
	b.WriteString("# kvq eval --gates FILE: generated by kvq plan (the rollout's quality, task, safety and speed gates)\ngates:\n")
	for _, g := range gates {
		fmt.Fprintf(&b, "  - metric: %s\n", g.Metric)
		if g.Suite != "" {
			fmt.Fprintf(&b, "    suite: %q\n", g.Suite)
		}
		if g.Cache != "" {
			fmt.Fprintf(&b, "    cache: %q\n", g.Cache)
		}
		if g.Max != nil {
			fmt.Fprintf(&b, "    max: %g\n", *g.Max)
		}
		if g.Min != nil {
			fmt.Fprintf(&b, "    min: %g\n", *g.Min)
		}
		if g.Significant {
			b.WriteString("    significant: true\n")
		}
	}
	return b.Bytes()
}

func checklist(p *Plan, opts Options) []Item {
	m := opts.ModelRef
	// kvqModel is the --model part of kvq commands.
	kvqModel := " --model " + m
	if opts.BuiltIn {
		kvqModel = ""
	}
	r := opts.Results
	var items []Item
	add := func(step int, title, status, detail, cmd string) {
		items = append(items, Item{Step: step, Title: title, Status: status, Detail: detail, Command: cmd})
	}
	// Step 1.
	scrape := "kvq plan" + kvqModel + " --endpoint URL --scrape 10m   # at peak load"
	if opts.Endpoint != "" {
		scrape = "kvq plan" + kvqModel + " --endpoint " + opts.Endpoint + " --scrape 10m   # at peak load"
	}
	switch p.Step1.Verdict {
	case NoEvidence:
		add(1, "Confirm the KV cache is the bottleneck", StatusToRun, "no metrics or traffic yet", scrape)
	default:
		add(1, "Confirm the KV cache is the bottleneck", StatusMeasured, verdictText(p.Step1), scrape)
	}
	var fp8 *Candidate
	for i := range p.Candidates {
		if p.Candidates[i].Format.Class == 1 && p.Candidates[i].GPU.Status != No {
			fp8 = &p.Candidates[i]
			break
		}
	}
	// Step 2.
	if fp8 != nil {
		gpu := p.GPU
		if gpu == "" {
			gpu = "an unspecified GPU"
		}
		detail := fmt.Sprintf("%s on %s: %s", fp8.Format.Name, gpu, fp8.GPU.Note)
		if fp8.Capacity.Compression > 0 {
			detail += fmt.Sprintf("; %.2f× the fp16 tokens", fp8.Capacity.Compression)
		}
		add(2, "Pilot FP8 with the engine's native support", StatusToRun, detail, fp8.Command)
	} else {
		add(2, "Pilot FP8 with the engine's native support", StatusUnknown, "no FP8 format of "+opts.Engine+" runs on this GPU as far as the sources say", "")
	}
	// Step 3: calibrate and audit.
	cal := "kvq calibrate" + kvqModel + " --data YOUR_SAMPLES.jsonl --strategy best --compare default,warmup,dataset,dataset:mse --write-checkpoint"
	switch c := resultCalibrate(r); {
	case c == nil:
		add(3, "Calibrate scales on real samples", StatusToRun, "kvq writes the scales in the formats vLLM and SGLang load and says which strategy measures best", cal)
	default:
		detail := fmt.Sprintf("strategy %s (data %s, sha256 %s)", c.Strategy, c.Data.Source, short(c.Data.SHA256))
		if c.Compare != nil && c.Compare.Verdict != nil {
			detail += "; " + c.Compare.Verdict.Text
		}
		add(3, "Calibrate scales on real samples", StatusMeasured, detail, cal)
	}
	audit := "kvq calibrate audit" + kvqModel
	switch a := resultAudit(r); {
	case a == nil:
		add(3, "Audit the scales the checkpoint ships", StatusToRun, "missing, zero, 1.0, ignored or clipping scales are the most common silent failure", audit)
	case a.Errors > 0:
		add(3, "Audit the scales the checkpoint ships", StatusFailed, fmt.Sprintf("%d error(s), %d warning(s) in %s", a.Errors, a.Warnings, a.Source), audit)
	default:
		add(3, "Audit the scales the checkpoint ships", StatusPassed, fmt.Sprintf("no error, %d warning(s) in %s", a.Warnings, a.Source), audit)
	}
	// Offline regression.
	evalCmd := "kvq eval" + kvqModel + " --cache fp16,fp8:scales@kvq-calibration/kv_scales.json --gates kvq-gates.yaml --output json > eval.json"
	switch e := resultEval(r); {
	case e == nil:
		add(2, "Offline regression against fp16 (quality, tasks, safety, speed)", StatusToRun, "gates: "+gateList(p.Gates), evalCmd)
	default:
		failed, passed := 0, 0
		for _, v := range e.Verdicts {
			if v.Pass {
				passed++
			} else {
				failed++
			}
		}
		status := StatusPassed
		if failed > 0 {
			status = StatusFailed
		}
		detail := fmt.Sprintf("%d candidate(s) passed, %d failed the gates", passed, failed)
		if e.Recommendation != nil {
			detail += fmt.Sprintf("; recommended %s (%.0f%% smaller)", e.Recommendation.Cache, 100*e.Recommendation.Saving)
		}
		if flips := safetyFlips(e.Report); flips != "" {
			detail += "; safety flips: " + flips
		}
		add(2, "Offline regression against fp16 (quality, tasks, safety, speed)", status, detail, evalCmd)
	}
	// Step 4: capacity and latency.
	bench := fmt.Sprintf("kvq bench --endpoint fp16=BASELINE_URL --endpoint fp8=CANDIDATE_URL --max-concurrency 1,4,16,64 --output json > bench.json")
	switch b := resultBench(r); {
	case b == nil:
		add(4, "Measure capacity and latency at the service's load", StatusToRun, "same request trace on both deployments; capacity is the concurrency that still meets the SLOs", bench)
	default:
		add(4, "Measure capacity and latency at the service's load", StatusMeasured, benchText(b), bench)
	}
	// Step 5: canary.
	canary := "kvq serve" + kvqModel + " --cache fp16,fp8 --route fp8=10%   # or two engine deployments behind your router"
	add(5, "Canary with an FP16/BF16 fallback", StatusToRun, "route a share of traffic to the candidate, record the cache per response (kvq serve: the kvq_cache field and X-KVQ-Cache header), compare the two populations, keep the one-switch fallback below", canary)
	// Step 6: explore.
	var more []string
	for _, c := range p.Candidates {
		if c.Format.Class > 1 && c.GPU.Status != No && c.Format.KVQ != "" {
			more = append(more, c.Format.KVQ)
		}
	}
	if len(more) > 0 {
		add(6, "Only then explore INT8, INT4 and 2-bit", StatusToRun, "candidates this engine offers: "+strings.Join(more, ", "),
			"kvq eval"+kvqModel+" --cache fp16,"+strings.Join(more, ",")+" --gates kvq-gates.yaml")
	}
	// Compatibility checklist.
	if fp8 != nil {
		for _, f := range fp8.Format.Facts {
			status := StatusDocumented
			if f.Status == Unknown {
				status = StatusUnknown
			}
			add(0, "Compatibility: "+f.Topic, status, f.Status+": "+f.Note+sourceSuffix(f.Source), "")
		}
	}
	// Steps in order, the compatibility facts (step 0) last.
	slices.SortStableFunc(items, func(a, b Item) int {
		ka, kb := a.Step, b.Step
		if ka == 0 {
			ka = 99
		}
		if kb == 0 {
			kb = 99
		}
		return ka - kb
	})
	return items
}

func sourceSuffix(s string) string {
	if s == "" {
		return ""
	}
	return " [" + s + "]"
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func gateList(gs []eval.Gate) string {
	var out []string
	for _, g := range gs {
		out = append(out, eval.GateResult{Gate: g, Suite: g.Suite}.Label())
	}
	return strings.Join(out, "; ")
}

func verdictText(b Bottleneck) string {
	s := b.Verdict
	if len(b.Evidence) > 0 {
		s += ": " + strings.Join(b.Evidence, "; ")
	}
	return s
}

func safetyFlips(r *eval.Report) string {
	var out []string
	for _, s := range r.Suites {
		if s.Kind != "safety" {
			continue
		}
		for _, c := range s.Caches[1:] {
			if c.PassToFail > 0 {
				out = append(out, fmt.Sprintf("%s %s: %d (p=%.2g)", c.Cache, s.Name, c.PassToFail, c.McNemarP))
			}
		}
	}
	return strings.Join(out, ", ")
}

func benchText(b *BenchResult) string {
	var parts []string
	for i, c := range b.Caches {
		if i == 0 {
			parts = append(parts, fmt.Sprintf("%s: capacity %d, median TTFT %.0f ms, TPOT %.1f ms", c.Cache, c.CapacityLevel, c.MedianTTFTms, c.MedianTPOTms))
			continue
		}
		base := b.Caches[0]
		s := fmt.Sprintf("%s: capacity %d", c.Cache, c.CapacityLevel)
		if base.CapacityLevel > 0 {
			s += fmt.Sprintf(" (%.2f×)", float64(c.CapacityLevel)/float64(base.CapacityLevel))
		}
		if base.MedianTPOTms > 0 {
			s += fmt.Sprintf(", TPOT %.2f× the baseline's", c.MedianTPOTms/base.MedianTPOTms)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func resultCalibrate(r *Results) *CalibrateResult {
	if r == nil {
		return nil
	}
	return r.Calibrate
}

func resultAudit(r *Results) *AuditResult {
	if r == nil {
		return nil
	}
	return r.Audit
}

func resultEval(r *Results) *EvalResult {
	if r == nil {
		return nil
	}
	return r.Eval
}

func resultBench(r *Results) *BenchResult {
	if r == nil {
		return nil
	}
	return r.Bench
}

func fallback(opts Options) []string {
	m := opts.ModelRef
	kvqModel := " --model " + m
	if opts.BuiltIn {
		kvqModel = ""
	}
	switch opts.Engine {
	case EngineSGLang:
		return []string{"python -m sglang.launch_server --model-path " + m + " --kv-cache-dtype auto   # back to the model's dtype"}
	case EngineLlamaCpp:
		return []string{"llama-server -m " + m + " -ctk f16 -ctv f16   # back to f16"}
	case EngineTRTLLM:
		return []string{"trtllm-serve " + m + " --kv_cache_dtype auto   # or KvCacheConfig(dtype=\"auto\")"}
	}
	return []string{
		"vllm serve " + m + " --kv-cache-dtype auto   # back to the model's dtype; checkpoint scales are then ignored",
		"kvq serve" + kvqModel + " --cache fp16,fp8 --route fp8=0%   # kvq's canary: one flag sends every request back to fp16",
	}
}
