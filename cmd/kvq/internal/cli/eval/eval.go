// Package eval implements kvq eval: an fp16 baseline cache and candidate
// caches side by side on teacher-forced text, generation tasks, safety and
// format suites and a long-context grid, with gates that make it a CI
// check.
package eval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/cmd/kvq/internal/progressbar"
	"github.com/kvqlabs/kvq/cmd/kvq/internal/render"
	"github.com/kvqlabs/kvq/datasets"
	"github.com/kvqlabs/kvq/internal/atomicfile"
	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/spf13/cobra"
)

// DefaultCaches are the caches kvq eval compares without --cache.
const DefaultCaches = "fp16,fp8,int8,int4,kivi2"

// Options are kvq eval's flags.
type Options struct {
	// Wide keeps table output at full width (--wide).
	Wide        bool
	IO          *cmdutil.IOStreams
	Version     string
	Model       string
	Tokenizer   string
	Mmap        bool
	Cache       string
	Texts       []string
	NoText      bool
	Protocol    string
	Prefill     string
	F32Act      bool
	Step        int
	KOrder      string
	Ctx         int
	Chunks      int
	Tasks       string
	N           int
	Seed        uint64
	Contexts    string
	MaxCtx      int
	GridCtx     string
	GridDepth   int
	GridN       int
	RulerLen    string
	NoSpeed     bool
	Threads     int
	Device      cmdutil.Device
	Output      string
	JUnit       string
	Report      string
	Plot        string
	Out         string
	Force       bool
	LogSamples  string
	RefusalFile string
	RefusalMode string
	// Gates.
	GatesFile   string
	MaxKLD      float64
	MaxKLDP99   float64
	MaxPPLRatio float64
	MinSameTop  float64
	MaxDrop     []string
	MinScore    []string
	MaxFlips    []string
	MaxSlowdown float64
	Significant bool
	// Endpoint mode.
	Endpoints   []string
	EndpointKey string
	EndpointMdl string
	TopLogprobs int
	Concurrency int
	Timeout     time.Duration

	specs    []quant.Spec
	protocol eval.Protocol
	suites   []string
	files    []string
	contexts []int
	gridCtx  []int
	rulerLen []int
	gsm8k    gsm8kFlags
	mc       mcFlags
	lb       longBenchFlags
	gates    []eval.Gate
	explicit bool // gates given by flags or file: failures exit 3
	format   render.Format
	refusal  *eval.RefusalDetector
	ends     []cmdutil.Endpoint
	// contextsSet records whether --contexts was given (the defaults are
	// cut to the model's context).
	contextsSet bool
}

// NewCmd returns kvq eval (use is the command's name: "eval", or "eval"
// under "probe" for the alias).
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{IO: f.IO, Version: f.Version}
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "fp16 against quantized caches: KLD/PPL, long context, tasks, safety; gates for CI",
		Long: `kvq eval runs one model with a baseline cache (the first --cache spec, fp16 by
default) and candidate caches side by side — one forward per step for all of
them, over the same tokens — and reports per cache: bytes per token and
compression (kvq estimate's accounting), teacher-forced KL divergence and
perplexity against the baseline, the generation suites (retrieval, format, a
refusal policy, a long-context passkey grid, your own tasks), decode speed, and
a verdict under gates.

By default a step's attention reads the cache as stored, prefill included,
as vLLM and llama.cpp do (--prefill quantized). --prefill exact is Hugging
Face QuantizedCache's semantics: a prompt attends to its own exact K/V and
only later steps read the quantized cache (texts then go in steps of --step
tokens), which hides a cache's damage on short prompts.

Without --model it runs on the built-in kvq-probe model (about 2 minutes on
2 cores with the defaults). Without gate flags the default gates (mean KLD <= 0.05, top-1
agreement >= 90%, no significant drop of more than 5 points on any row) only
advise: exit 0. Any gate flag or --gates FILE makes the gates a check: exit 3
when one fails, with each failing gate on stderr.

` + cmdutil.ExitCodesHelp("a gate failed (0: every given gate passed)"),
		Example: `  kvq eval                             # the showcase on the built-in model, about 2 minutes
  kvq eval --tasks copy,json -n 10 --no-text --no-speed    # two suites, seconds
  kvq eval --model ../shared/models/stories260K/stories260K.gguf --protocol llama.cpp --ctx 128 \
    --text ../shared/models/stories260K/eval-stories.txt --tasks none --no-speed  # as llama.cpp
  kvq eval --model ./Llama-3.1-8B --cache fp16,fp8,int4 --text wiki.test.raw  # your own files
  kvq eval --tasks replay.jsonl,risk.jsonl --max-drop '*=2' --max-kld 0.01    # your own tasks
  kvq eval --gates gates.yaml --junit gates.xml --output json > report.json   # your own gates
  kvq eval --out runs/int4 --report int4.html   # resumable, Ctrl-C loses nothing; about 2 minutes
  kvq eval --endpoint fp16=http://127.0.0.1:8000 --endpoint int4=http://127.0.0.1:8000  # servers`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(cmd); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return o.Run(cmd.Context())
		},
	}
	fl := cmd.Flags()
	cmdutil.AddWideFlag(fl, &o.Wide)
	cmdutil.AddModelFlag(fl, &o.Model)
	cmdutil.AddTokenizerFlag(fl, &o.Tokenizer)
	cmdutil.AddMmapFlag(fl, &o.Mmap)
	cmdutil.AddCachesFlag(fl, &o.Cache, DefaultCaches)
	fl.StringArrayVar(&o.Texts, "text", nil, "a text file to score teacher-forced (repeatable; default: built-in stories)")
	fl.BoolVar(&o.NoText, "no-text", false, "skip the teacher-forced text metrics")
	fl.StringVar(&o.Protocol, "protocol", "kvq", "text protocol: kvq (every position of each chunk) or llama.cpp (llama-perplexity's chunks, BOS and second halves)")
	fl.StringVar(&o.Prefill, "prefill", "quantized", "what a step's attention reads: quantized (the cache as stored, as vLLM and llama.cpp) or exact (its own exact K/V, as Hugging Face's QuantizedCache)")
	fl.IntVar(&o.Step, "step", 1, "with --prefill exact: text tokens per step")
	fl.BoolVar(&o.F32Act, "f32-activations", false, "multiply quantized weights (Q8_0, K-quants, legacy types) with float32 activations instead of quantizing them to Q8_0/Q8_K as llama.cpp does: a cache's damage without the activations' rounding (slower prefill)")
	fl.StringVar(&o.KOrder, "k-order", "stored", "key dimension order of quantized caches: stored (the model's), or gguf (llama.cpp's interleaved RoPE pairs, for a like-for-like comparison of a Hugging Face checkpoint with llama.cpp on its GGUF conversion)")
	fl.IntVar(&o.Ctx, "ctx", 0, "text chunk size in tokens (default: the model's context, at most 2048; llama-perplexity's default is 512)")
	fl.IntVar(&o.Chunks, "chunks", 0, "score at most this many text chunks (0: all)")
	fl.StringVar(&o.Tasks, "tasks", strings.Join(eval.DefaultSuites(), ","), "generation suites, comma-separated: built-in "+strings.Join(eval.BuiltinSuites(), ", ")+", ruler (RULER's tasks) or ruler:TASK, gsm8k=FILE.jsonl (your copy of GSM8K's test split), longbench=FILE.jsonl and longbench2=FILE (your copies of LongBench v1 and v2), multiple choice by log-likelihood from your JSON Lines or Parquet file as "+strings.Join(eval.MCAdapters(), "=FILE, ")+"=FILE, or tasks files (.jsonl); none for no tasks")
	fl.IntVarP(&o.N, "n", "n", 20, "examples per built-in suite")
	fl.Uint64Var(&o.Seed, "seed", 1, "selects the built-in examples")
	fl.StringVar(&o.Contexts, "contexts", "1024,2048", "passkey suite's contexts in tokens")
	fl.IntVar(&o.MaxCtx, "max-context", 0, "longest context the suites and the grid use (default: the model's)")
	fl.StringVar(&o.GridCtx, "grid-contexts", "", "long-context grid's contexts (default: 256, 512, … up to the model's context)")
	fl.IntVar(&o.GridDepth, "grid-depths", 5, "long-context grid's needle depths, evenly spaced over 0..1")
	fl.IntVar(&o.GridN, "grid-n", 2, "examples per grid cell")
	fl.StringVar(&o.RulerLen, "ruler-lengths", "", "ruler suite's lengths in tokens, prompt and answer budget (default: 4096, 8192, … 131072 up to the model's context)")
	o.gsm8k.addFlags(fl)
	o.lb.addFlags(fl)
	fl.BoolVar(&o.NoSpeed, "no-speed", false, "skip the decode-speed measurement")
	cmdutil.AddThreadsFlag(fl, &o.Threads)
	cmdutil.AddDeviceFlag(fl, &o.Device, f.BackendRegistry())
	fl.StringVarP(&o.Output, "output", "o", "table", "output format: "+strings.Join(render.Formats(), ", "))
	fl.StringVar(&o.JUnit, "junit", "", "write the gates as a JUnit XML file (one test case per gate and cache)")
	fl.StringVar(&o.Report, "report", "", "write a self-contained HTML report (inline SVG)")
	fl.StringVar(&o.Plot, "plot", "", "write the report's plots as SVG and PNG files into this directory")
	fl.StringVar(&o.Out, "out", "", "keep every scored item in this directory; run again to resume")
	fl.BoolVar(&o.Force, "force", false, "with --out: discard a run of another configuration there")
	fl.StringVar(&o.LogSamples, "log-samples", "", "write every item's prompt, reference, output and score per cache to this JSON Lines file")
	fl.StringVar(&o.RefusalFile, "refusal-phrases", "", "refusal phrases, one per line (default: XSTest's and AdvBench's lists)")
	fl.StringVar(&o.RefusalMode, "refusal-mode", "prefix", "refusal detection: prefix (the output starts with a phrase, as XSTest) or contains (anywhere, as AdvBench)")
	fl.StringVar(&o.GatesFile, "gates", "", "gates file, JSON or YAML: a list of {metric, suite, cache, max, min, significant, alpha}")
	fl.Float64Var(&o.MaxKLD, "max-kld", 0, "gate: mean KL divergence to the baseline, nats, at most")
	fl.Float64Var(&o.MaxKLDP99, "max-kld-p99", 0, "gate: 99th-percentile KLD, at most")
	fl.Float64Var(&o.MaxPPLRatio, "max-ppl-ratio", 0, "gate: PPL / PPL(baseline), at most")
	fl.Float64Var(&o.MinSameTop, "min-same-top", 0, "gate: share of positions whose top token agrees with the baseline's, at least (0..1)")
	fl.StringArrayVar(&o.MaxDrop, "max-drop", nil, "gate: SUITE=POINTS, at most POINTS lost on suite rows matching SUITE ('*' all); repeatable")
	fl.StringArrayVar(&o.MinScore, "min-score", nil, "gate: SUITE=PERCENT, a suite row's score at least PERCENT; repeatable")
	fl.StringArrayVar(&o.MaxFlips, "max-flips", nil, "gate: SUITE=N, at most N items that pass with the baseline and fail; repeatable")
	fl.Float64Var(&o.MaxSlowdown, "max-slowdown", 0, "gate: decode time per token / the baseline's, at most")
	fl.BoolVar(&o.Significant, "significant", true, "drop and flips gates fail only when the flips are significant (exact McNemar p < 0.05)")
	fl.StringArrayVar(&o.Endpoints, "endpoint", nil, "evaluate OpenAI-compatible servers instead of local caches, NAME=URL (repeatable; the first is the baseline; --model gives their tokenizer)")
	fl.StringVar(&o.EndpointKey, "api-key-env", "KVQ_API_KEY", "environment variable holding the endpoints' API key")
	fl.StringVar(&o.EndpointMdl, "served-model", "", "model id to request from the endpoints (default: a /v1/models id ending in @NAME, as kvq serve lists its caches, else the first)")
	fl.IntVar(&o.TopLogprobs, "top-logprobs", 20, "endpoints: alternatives asked per position for the top-k KLD (vLLM allows up to its --max-logprobs, 20 by default)")
	fl.IntVar(&o.Concurrency, "concurrency", 8, "endpoints: tasks and text chunks in flight at once")
	fl.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "endpoints: per-request timeout")
	return cmd
}

// Validate checks the flags before any work.
func (o *Options) Validate(cmd *cobra.Command) error {
	specs, err := quant.Formats().ParseList(o.Cache)
	if err != nil {
		return cmdutil.FlagErrorf("--cache: %w", err)
	}
	if len(specs) < 1 {
		return cmdutil.FlagErrorf("--cache: no caches")
	}
	o.specs = specs
	if err := o.validateEndpoints(cmd); err != nil {
		return err
	}
	if o.protocol, err = eval.ParseProtocol(o.Protocol); err != nil {
		return cmdutil.FlagErrorf("--protocol: %w", err)
	}
	switch o.KOrder {
	case "stored", "gguf":
	default:
		return cmdutil.FlagErrorf("--k-order %q (valid: stored, gguf)", o.KOrder)
	}
	switch o.Prefill {
	case "quantized", "exact":
	default:
		return cmdutil.FlagErrorf("--prefill %q (valid: quantized, exact)", o.Prefill)
	}
	if o.Prefill == "exact" && o.protocol == eval.ProtocolLlamaCpp {
		return cmdutil.FlagErrorf("--prefill exact with --protocol llama.cpp: llama.cpp attends to its cache as stored")
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"-n", o.N}, {"--grid-depths", o.GridDepth}, {"--grid-n", o.GridN}, {"--step", o.Step}} {
		if c.v <= 0 {
			return cmdutil.FlagErrorf("%s %d: must be positive", c.name, c.v)
		}
	}
	// The counts that size the built-in suites: each at most
	// eval.MaxExamples, and the grid's cells in all too (it has one
	// context at least).
	for _, c := range []struct {
		name string
		v    int
	}{{"-n", o.N}, {"--grid-depths", o.GridDepth}, {"--grid-n", o.GridN}} {
		if c.v > eval.MaxExamples {
			return cmdutil.FlagErrorf("%s %d: at most %d (examples a suite draws into memory before scoring)", c.name, c.v, eval.MaxExamples)
		}
	}
	if o.GridDepth*o.GridN > eval.MaxExamples {
		return cmdutil.FlagErrorf("--grid-depths %d × --grid-n %d: at most %d grid examples in all", o.GridDepth, o.GridN, eval.MaxExamples)
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"--ctx", o.Ctx}, {"--chunks", o.Chunks}, {"--threads", o.Threads}, {"--max-context", o.MaxCtx}} {
		if c.v < 0 {
			return cmdutil.FlagErrorf("%s %d: must be ≥ 0", c.name, c.v)
		}
	}
	if err := o.Device.Check(); err != nil {
		return err
	}
	if o.contexts, err = ints("--contexts", o.Contexts); err != nil {
		return err
	}
	o.contextsSet = cmd.Flags().Changed("contexts")
	if o.GridCtx != "" {
		if o.gridCtx, err = ints("--grid-contexts", o.GridCtx); err != nil {
			return err
		}
	}
	o.rulerLen = nil
	if o.RulerLen != "" {
		if o.rulerLen, err = ints("--ruler-lengths", o.RulerLen); err != nil {
			return err
		}
	}
	o.suites, o.files = nil, nil
	o.gsm8k.test, o.gsm8k.spec = "", ""
	o.mc.reset()
	o.lb.reset()
	if strings.TrimSpace(o.Tasks) != "none" {
		for _, t := range strings.Split(o.Tasks, ",") {
			t = strings.TrimSpace(t)
			switch {
			case t == "":
			case t == eval.SuiteGSM8K || strings.HasPrefix(t, eval.SuiteGSM8K+"="):
				if _, err := o.gsm8k.parseTask(t); err != nil {
					return err
				}
			case isLongBenchTask(t):
				if _, err := o.lb.parseTask(t); err != nil {
					return err
				}
			case strings.Contains(t, "=") || slices.Contains(eval.MCAdapters(), t):
				ok, err := o.mc.parseTask(t)
				if err != nil {
					return err
				}
				if !ok { // a tasks file with "=" in its name
					if _, err := os.Stat(t); err != nil {
						return cmdutil.FlagErrorf("--tasks %s: %w", t, err)
					}
					o.files = append(o.files, t)
				}
			case strings.HasSuffix(t, ".jsonl") || strings.ContainsRune(t, os.PathSeparator):
				if _, err := os.Stat(t); err != nil {
					return cmdutil.FlagErrorf("--tasks %s: %w", t, err)
				}
				o.files = append(o.files, t)
			default:
				if err := eval.CheckSuite(t); err != nil {
					return cmdutil.FlagErrorf("--tasks: %w", err)
				}
				o.suites = append(o.suites, t)
			}
		}
	}
	if err := o.gsm8k.validate(o.mc.active()); err != nil {
		return err
	}
	if err := o.mc.validate(&o.gsm8k, cmd.Flags().Changed("num-fewshot"), len(o.Endpoints) > 0); err != nil {
		return err
	}
	if err := o.lb.validate(o.suites); err != nil {
		return err
	}
	for _, t := range o.Texts {
		if _, err := os.Stat(t); err != nil {
			return cmdutil.FlagErrorf("--text %s: %w", t, err)
		}
	}
	if o.format, err = render.ParseFormat(o.Output); err != nil {
		return cmdutil.FlagErrorf("--output: %w", err)
	}
	mode, err := eval.ParseRefusalMode(o.RefusalMode)
	if err != nil {
		return cmdutil.FlagErrorf("--refusal-mode: %w", err)
	}
	o.refusal = &eval.RefusalDetector{Mode: mode, Phrases: eval.DefaultRefusalPhrases()}
	if o.RefusalFile != "" {
		f, err := os.Open(o.RefusalFile)
		if err != nil {
			return cmdutil.FlagErrorf("--refusal-phrases: %w", err)
		}
		phrases, err := eval.LoadRefusalPhrases(f)
		f.Close()
		if err != nil {
			return cmdutil.FlagErrorf("--refusal-phrases %s: %w", o.RefusalFile, err)
		}
		o.refusal.Phrases = phrases
	}
	if err := o.parseGates(cmd); err != nil {
		return err
	}
	if o.Force && o.Out == "" {
		return cmdutil.FlagErrorf("--force needs --out")
	}
	// Output targets are checked now, so that a long run never ends by
	// losing its results.
	for _, p := range []struct{ flag, path string }{{"--junit", o.JUnit}, {"--report", o.Report}, {"--log-samples", o.LogSamples}} {
		if err := cmdutil.CheckOutputFile(p.flag, p.path); err != nil {
			return err
		}
	}
	for _, p := range []struct{ flag, path string }{{"--plot", o.Plot}, {"--out", o.Out}} {
		if err := cmdutil.CheckOutputDir(p.flag, p.path); err != nil {
			return err
		}
	}
	return nil
}

func ints(flag, s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return nil, cmdutil.FlagErrorf("%s: %q is not a positive integer", flag, p)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, cmdutil.FlagErrorf("%s: no values", flag)
	}
	return out, nil
}

// parseGates builds the gates from the file and flags; without any, the
// default gates advise.
func (o *Options) parseGates(cmd *cobra.Command) error {
	o.gates = nil
	if o.GatesFile != "" {
		data, err := os.ReadFile(o.GatesFile)
		if err != nil {
			return cmdutil.FlagErrorf("--gates: %w", err)
		}
		gs, err := eval.ParseGates(data, o.GatesFile)
		if err != nil {
			return cmdutil.UsageError(err)
		}
		o.gates = append(o.gates, gs...)
	}
	f := func(x float64) *float64 { return &x }
	changed := cmd.Flags().Changed
	for _, g := range []struct {
		flag, metric string
		v            float64
		min          bool
	}{{"max-kld", eval.GateKLD, o.MaxKLD, false}, {"max-kld-p99", eval.GateKLDP99, o.MaxKLDP99, false},
		{"max-ppl-ratio", eval.GatePPLRatio, o.MaxPPLRatio, false}, {"min-same-top", eval.GateSameTop, o.MinSameTop, true},
		{"max-slowdown", eval.GateSlowdown, o.MaxSlowdown, false}} {
		if !changed(g.flag) {
			continue
		}
		gate := eval.Gate{Metric: g.metric}
		if g.min {
			gate.Min = f(g.v)
		} else {
			gate.Max = f(g.v)
		}
		if err := gate.Check(); err != nil {
			return cmdutil.FlagErrorf("--%s: %w", g.flag, err)
		}
		o.gates = append(o.gates, gate)
	}
	for _, g := range []struct {
		flag, metric string
		vals         []string
		min          bool
	}{{"max-drop", eval.GateDrop, o.MaxDrop, false}, {"min-score", eval.GateScore, o.MinScore, true}, {"max-flips", eval.GateFlips, o.MaxFlips, false}} {
		for _, v := range g.vals {
			suite, num, ok := strings.Cut(v, "=")
			x, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
			if !ok || err != nil || strings.TrimSpace(suite) == "" {
				return cmdutil.FlagErrorf("--%s %q: want SUITE=NUMBER ('*=2' for every row)", g.flag, v)
			}
			gate := eval.Gate{Metric: g.metric, Suite: strings.TrimSpace(suite), Significant: o.Significant && g.metric != eval.GateScore}
			if g.min {
				gate.Min = f(x)
			} else {
				gate.Max = f(x)
			}
			if err := gate.Check(); err != nil {
				return cmdutil.FlagErrorf("--%s: %w", g.flag, err)
			}
			o.gates = append(o.gates, gate)
		}
	}
	o.explicit = len(o.gates) > 0
	if !o.explicit {
		// The default gates bound what this run measures.
		for _, g := range eval.DefaultGates() {
			text := g.Metric == eval.GateKLD || g.Metric == eval.GateSameTop
			if text && o.NoText || g.Metric == eval.GateDrop && strings.TrimSpace(o.Tasks) == "none" {
				continue
			}
			o.gates = append(o.gates, g)
		}
	}
	return nil
}

// Run evaluates and reports.
func (o *Options) Run(ctx context.Context) error {
	m, err := cmdutil.LoadModel(ctx, o.Model, runtime.LoadOptions{Tokenizer: o.Tokenizer, Mmap: o.Mmap}, o.IO.ErrOut)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := cmdutil.CheckSpecLayers("--cache", m.Config.Layers, o.specs...); err != nil {
		return err
	}
	cmdutil.WarnSpecBlocks(o.IO.ErrOut, "--cache", m.Geometry(), o.specs...)
	opts, data, err := o.options(ctx, m)
	if err != nil {
		return err
	}
	if o.Out != "" {
		hash, cfg := o.configHash(m, data)
		st, err := eval.OpenStore(o.Out, hash, cfg, o.Force)
		if err != nil {
			return cmdutil.UsageError(err)
		}
		defer st.Close()
		if n := st.Items() + st.Chunks(); n > 0 {
			fmt.Fprintf(o.IO.ErrOut, "kvq: resuming from %s: %d items and %d text chunks already scored\n", o.Out, st.Items(), st.Chunks())
		}
		opts.Store = st
	}
	bars := map[string]*progressbar.Bar{}
	labels := map[string]string{"text": "text", "tasks": "tasks", "speed": "speed"}
	opts.Progress = func(stage string, done, total int) {
		b := bars[stage]
		if b == nil {
			b = o.IO.Progress(total, "eval "+labels[stage])
			bars[stage] = b
		}
		b.Set(done, total)
		if done == total {
			b.Finish()
		}
	}
	var rep *eval.Report
	if len(o.ends) > 0 {
		rep, err = o.runEndpoints(ctx, m, opts)
	} else {
		if opts.Backend, err = o.Device.Open(ctx, o.IO.ErrOut); err != nil {
			return err
		}
		rep, err = eval.Run(ctx, m, opts)
	}
	for _, b := range bars {
		b.Finish()
	}
	if err != nil {
		return err // eval.ErrOptions and ErrTasks are input errors: exit 2
	}
	rep.Version = o.Version
	rep.Model = modelInfo(m, o.Model)
	if rep.Model.SHA256, err = hashModel(ctx, m); err != nil {
		return err
	}
	for i := range rep.Caches {
		rep.Caches[i].Scales = scaleFiles(rep.Caches[i].Spec)
	}
	rep.Setup = eval.Setup{Protocol: o.protocol.String(), Ctx: o.Ctx, Prefill: o.Prefill, Activations: activations(o.F32Act), KOrder: o.KOrder, N: o.N, Seed: o.Seed,
		Suites: append(append(append(append(append([]string(nil), o.suites...), o.files...), o.gsm8k.specs()...), o.mc.specs...), o.lb.specs...), Data: data, Workers: o.Threads,
		Refusals: fmt.Sprintf("%s, %d phrases", o.refusal.Mode, len(o.refusal.Phrases))}
	if rep.Text != nil {
		rep.Setup.Ctx = rep.Text.Ctx
	}
	if len(o.ends) > 0 {
		rep.Setup.Prefill, rep.Setup.KOrder = "server", ""
	}
	if err := o.write(rep); err != nil {
		return err
	}
	failed := 0
	for _, g := range rep.Gates {
		if !g.Pass {
			failed++
		}
	}
	if failed > 0 && o.explicit {
		for _, g := range rep.Gates {
			if !g.Pass {
				fmt.Fprintf(o.IO.ErrOut, "kvq: gate failed: %s: %s\n", g.Name(), g.Message)
			}
		}
		return &cmdutil.GateError{Failed: failed, What: "gate(s)"}
	}
	return nil
}

// options turns the flags into eval.Options for model m, with the inputs'
// identities.
func (o *Options) options(ctx context.Context, m *runtime.Model) (eval.Options, []eval.DataInfo, error) {
	var data []eval.DataInfo
	specs := o.specs
	if o.KOrder == "gguf" && m.RopeNeoX {
		// Quantized keys in llama.cpp's order; exact formats stay as they
		// are, so the baseline is unchanged.
		wrap := func(f quant.Format) quant.Format {
			if quant.Quantized(f) {
				return quant.InterleaveKeys(f)
			}
			return f
		}
		specs = nil
		for _, s := range o.specs {
			s.K = wrap(s.K)
			s.Overrides = append([]quant.LayerOverride(nil), s.Overrides...)
			for i := range s.Overrides {
				s.Overrides[i].K = wrap(s.Overrides[i].K)
			}
			specs = append(specs, s)
		}
	}
	opts := eval.Options{Specs: specs, Workers: o.Threads, Speed: !o.NoSpeed, Gates: o.gates, Refusal: o.refusal,
		LogSamples: o.LogSamples != "", Seed: o.Seed,
		ExactPrefill: o.Prefill == "exact", F32Activations: o.F32Act,
		TextOpts: eval.TextOptions{Protocol: o.protocol, Ctx: o.Ctx, MaxChunks: o.Chunks, Exact: o.Prefill == "exact", Step: o.Step}}
	modelCtx := m.ContextLen
	if o.MaxCtx > 0 {
		if modelCtx > 0 && o.MaxCtx > modelCtx {
			return opts, nil, cmdutil.FlagErrorf("--max-context %d: the model's context is %d tokens", o.MaxCtx, modelCtx)
		}
		modelCtx = o.MaxCtx
	}
	if modelCtx > 0 {
		contexts := o.contexts
		if !o.contextsSet { // the default contexts, up to the model's
			contexts = nil
			for _, n := range o.contexts {
				if n <= modelCtx {
					contexts = append(contexts, n)
				}
			}
			if len(contexts) == 0 {
				contexts = []int{modelCtx}
			}
		}
		o.contexts = contexts
		type values struct {
			flag string
			vs   []int
			use  bool
		}
		has := func(s string) bool { return slices.Contains(o.suites, s) }
		ruler := slices.ContainsFunc(o.suites, func(s string) bool { return strings.HasPrefix(s, eval.SuiteRuler) })
		for _, c := range []values{{"--ctx", []int{o.Ctx}, true}, {"--contexts", o.contexts, has(eval.SuitePasskey)}, {"--grid-contexts", o.gridCtx, has(eval.SuiteGrid)}, {"--ruler-lengths", o.rulerLen, ruler}} {
			for _, v := range c.vs {
				if c.use && v > modelCtx {
					return opts, nil, cmdutil.FlagErrorf("%s %d: more than the %d tokens of the model's context (or --max-context)", c.flag, v, modelCtx)
				}
			}
		}
	}
	if !o.NoText {
		if len(o.Texts) == 0 {
			body := builtinText(o.Seed)
			opts.Texts = []eval.Text{{Name: "built-in stories", Body: body}}
			data = append(data, dataInfo("built-in stories", "builtin", []byte(body)))
		}
		for _, p := range o.Texts {
			b, err := os.ReadFile(p)
			if err != nil {
				return opts, nil, cmdutil.FlagErrorf("--text: %w", err)
			}
			opts.Texts = append(opts.Texts, eval.Text{Name: p, Body: string(b)})
			data = append(data, dataInfo(p, "text", b))
		}
	}
	if len(o.suites) > 0 {
		so := eval.SuiteOptions{N: o.N, Seed: o.Seed, PasskeyContexts: o.contexts,
			GridContexts: o.gridCtx, GridDepths: o.GridDepth, GridN: o.GridN, ModelContext: modelCtx,
			RulerLengths: o.rulerLen, Tokens: func(s string) int { return len(m.Tokenizer.Encode(s, true)) }}
		qaData, err := o.lb.rulerQA(&so)
		if err != nil {
			return opts, nil, err
		}
		suites, err := eval.BuildSuites(ctx, o.suites, so)
		if errors.Is(err, datasets.ErrRulerLength) {
			return opts, nil, cmdutil.FlagErrorf("--ruler-lengths: %w", err)
		}
		if err != nil {
			return opts, nil, cmdutil.UsageError(err)
		}
		opts.Suites = append(opts.Suites, suites...)
		data = append(append(data, eval.DataInfo{Name: strings.Join(o.suites, ","), Kind: "builtin"}), qaData...)
	}
	for _, p := range o.files {
		b, err := os.ReadFile(p)
		if err != nil {
			return opts, nil, cmdutil.FlagErrorf("--tasks: %w", err)
		}
		suites, err := eval.ParseTasks(b, p)
		if err != nil {
			return opts, nil, cmdutil.UsageError(err)
		}
		opts.Suites = append(opts.Suites, suites...)
		data = append(data, dataInfo(p, "tasks", b))
	}
	gsm, gsmData, err := o.gsm8k.suite(o.N)
	if err != nil {
		return opts, nil, err
	}
	opts.Suites, data = append(opts.Suites, gsm...), append(data, gsmData...)
	mc, mcData, err := o.mc.suites(o.N, o.Seed, o.gsm8k.Fewshot)
	if err != nil {
		return opts, nil, err
	}
	opts.Suites, data = append(opts.Suites, mc...), append(data, mcData...)
	lb, lbData, err := o.lb.suites(m, modelCtx, o.N)
	if err != nil {
		return opts, nil, err
	}
	opts.Suites, data = append(opts.Suites, lb...), append(data, lbData...)
	return opts, data, nil
}

// builtinText is the built-in teacher-forced text: held-out stories.
func builtinText(seed uint64) string {
	g := datasets.New(datasets.Eval, seed)
	var b strings.Builder
	for b.Len() < 24000 {
		b.WriteString(g.Story().Answer)
	}
	return b.String()
}

func dataInfo(name, kind string, b []byte) eval.DataInfo {
	h := sha256.Sum256(b)
	return eval.DataInfo{Name: name, Kind: kind, SHA256: hex.EncodeToString(h[:]), Bytes: len(b)}
}

// configHash identifies the run for --out: the model, caches, inputs and
// every setting that changes what is scored.
func (o *Options) configHash(m *runtime.Model, data []eval.DataInfo) (string, any) {
	var specs []string
	for _, s := range o.specs {
		specs = append(specs, s.String())
	}
	cfg := map[string]any{"model": m.Path, "model_format": m.Format, "params": m.Params(), "caches": specs, "data": data,
		"protocol": o.Protocol, "prefill": o.Prefill, "k_order": o.KOrder, "step": o.Step, "ctx": o.Ctx, "chunks": o.Chunks, "n": o.N, "seed": o.Seed, "contexts": o.contexts,
		"max_context": o.MaxCtx, "grid": []any{o.gridCtx, o.GridDepth, o.GridN}, "tasks": o.Tasks}
	if len(o.rulerLen) > 0 {
		cfg["ruler_lengths"] = o.rulerLen
	}
	if o.F32Act {
		cfg["activations"] = "f32"
	}
	if o.gsm8k.test != "" {
		cfg["num_fewshot"] = o.gsm8k.NumFewshot
	}
	if o.mc.active() {
		cfg["mc_fewshot"] = o.mc.shots
	}
	if len(o.ends) > 0 {
		cfg["caches"], cfg["endpoints"], cfg["top_logprobs"] = nil, o.ends, o.TopLogprobs
	}
	b, _ := json.Marshal(cfg)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:]), cfg
}

// hashModel is the sha256 of the model's files, in name order (a
// directory's regular files; a file and, for llama2.c, no tokenizer).
func hashModel(ctx context.Context, m *runtime.Model) (string, error) {
	var files []string
	st, err := os.Stat(m.Path)
	if err != nil {
		return "", err
	}
	if st.IsDir() {
		entries, err := os.ReadDir(m.Path)
		if err != nil {
			return "", err
		}
		for _, e := range entries {
			if e.Type().IsRegular() {
				files = append(files, filepath.Join(m.Path, e.Name()))
			}
		}
	} else {
		files = []string{m.Path}
	}
	h := sha256.New()
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00", filepath.Base(f))
		// A checkpoint of tens of GB takes a while: Ctrl-C is honoured
		// between 4 MiB reads.
		_, err = io.CopyBuffer(h, ctxReader{ctx, fh}, make([]byte, 4<<20))
		fh.Close()
		if err != nil {
			return "", fmt.Errorf("hashing %s: %w", f, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ctxReader stops reading when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// scaleRE finds the files a cache spec reads (fp8 scales, KVQuant
// codebooks).
var scaleRE = regexp.MustCompile(`(?:scales|codebook)@([^:,]+)`)

// scaleFiles identifies the scale and codebook files of a spec.
func scaleFiles(spec string) []eval.DataInfo {
	var out []eval.DataInfo
	for _, m := range scaleRE.FindAllStringSubmatch(spec, -1) {
		b, err := os.ReadFile(m[1])
		if err != nil {
			out = append(out, eval.DataInfo{Name: m[1], Kind: "scales"})
			continue
		}
		out = append(out, dataInfo(m[1], "scales", b))
	}
	return out
}

func modelInfo(m *runtime.Model, given string) eval.ModelInfo {
	path := m.Path
	if given == "" {
		path = "built-in kvq-probe"
	}
	mi := eval.ModelInfo{Path: path, Format: m.Format, Arch: m.Arch, Layers: m.Config.Layers, KVHeads: m.KVHeads, HeadDim: m.HeadDim,
		Context: m.ContextLen, Vocab: m.Vocab, Params: m.Params()}
	if local := m.LocalLayers(); local != nil {
		mi.SlidingLayers, mi.SlidingWindow = local, m.SlidingWindow
	}
	return mi
}

// write prints the report and writes the side outputs.
func (o *Options) write(rep *eval.Report) error {
	if err := render.Write(o.IO.Out, o.format, o.IO.FitReport(View(rep), o.format, o.Wide), render.Options{TTY: o.IO.OutTTY}); err != nil {
		return err
	}
	if o.LogSamples != "" {
		if err := writeSamples(o.LogSamples, rep.Samples); err != nil {
			return err
		}
	}
	if o.JUnit != "" {
		if err := atomicfile.Write(o.JUnit, func(w io.Writer) error { return WriteJUnit(w, rep) }); err != nil {
			return fmt.Errorf("--junit %s: %w", o.JUnit, err)
		}
	}
	if o.Report != "" {
		if err := atomicfile.Write(o.Report, func(w io.Writer) error { return WriteHTML(w, rep) }); err != nil {
			return fmt.Errorf("--report %s: %w", o.Report, err)
		}
	}
	if o.Plot != "" {
		if err := os.MkdirAll(o.Plot, 0o755); err != nil {
			return fmt.Errorf("--plot %s: %w", o.Plot, err)
		}
		if err := WritePlots(o.Plot, rep); err != nil {
			return fmt.Errorf("--plot %s: %w", o.Plot, err)
		}
	}
	return nil
}

// writeSamples writes one JSON object per line, atomically.
func writeSamples(path string, samples []eval.Sample) error {
	err := atomicfile.Write(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		for _, s := range samples {
			if err := enc.Encode(s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("--log-samples %s: %w", path, err)
	}
	return nil
}

// activations is the report's config.activations: "f32" with
// --f32-activations, else empty (omitted).
func activations(f32 bool) string {
	if f32 {
		return "f32"
	}
	return ""
}
