// Package estimate implements kvq estimate: KV-cache memory planning for a
// model, GPU, parallel layout and set of cache formats.
package estimate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/cmd/kvq/internal/render"
	"github.com/kvqlabs/kvq/internal/atomicfile"
	"github.com/kvqlabs/kvq/pkg/estimate"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/spf13/cobra"
)

// DefaultCaches is the default --cache list.
const DefaultCaches = "fp16,fp8,int8,int4,kivi2"

// Options are the flags of kvq estimate.
type Options struct {
	IO *cmdutil.IOStreams

	Model                string
	GPU                  string
	GPUMem               string
	GPUs, TP, PP         int
	Utilization          float64
	WeightsMem           string
	ActivationMem        string
	NonTorchMem          string
	CUDAGraphMem         string
	KVBudget             string
	BlocksOverride       int64
	MaxModelLen          string
	AllowLongMaxModelLen bool
	MaxNumBatchedTokens  string
	Contexts             []string
	Concurrency          []string
	BlockSize            int
	Cache                string
	Engine               string
	VLLMVersion          string
	MemFractionStatic    float64
	DisableHybrid        bool
	Output               string
	Plot                 string
	ListModels, ListGPUs bool
	Wide                 bool

	// Set by Validate.
	plan   estimate.Plan
	format render.Format
	gpu    *estimate.GPU
	// blockSizeSet, cacheSet, tpSet and gpusSet record whether the user
	// gave those flags.
	blockSizeSet, cacheSet, tpSet, gpusSet bool
}

// NewCmd returns the estimate command. runF replaces the run step in tests.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "estimate [--model MODEL] [--gpu GPU | --gpu-mem SIZE | --kv-budget SIZE] [flags]",
		Short: "Plan KV-cache memory for a model, GPU and cache format",
		Long: heredoc(`
			Compute, per cache format, exactly what the KV cache of a model costs and how
			much of it fits, counted the way vLLM (default) or SGLang count it at start-up,
			so the figures can be checked against the engine's own log lines:

			  Available KV cache memory: X GiB           ->  the KV budget line
			  GPU KV cache size: N tokens                ->  TOKENS
			  Maximum concurrency for M tokens ...: X    ->  MAX CONCURRENCY

			For each format it prints bytes per token (whole model and per rank), effective
			bits per value, compression against FP16 (theoretical, and effective at
			max-model-len once block rounding and fp16 residual/sink windows are counted),
			the block size, the per-request constant of fp16 windows, blocks, tokens,
			maximum concurrency at max-model-len, the largest context one request can
			have, and the KV memory of every --context × --concurrency.

			The model is a preset name (see --list-models; Hugging Face ids such as
			meta-llama/Llama-3.1-8B-Instruct work), a config.json, a model directory
			(config.json plus safetensors headers for exact weight sizes) or a GGUF file
			(header only). Per-rank accounting follows tensor parallelism (KV heads are
			split, and replicated once --tp exceeds them), pipeline parallelism (layers are
			split; the most constrained rank decides), MLA latents, and vLLM's hybrid
			grouping of sliding-window layers.

			The KV budget is modelled as GPU memory × --gpu-memory-utilization minus the
			weights, the activation peak, non-torch memory and, from vLLM 0.21, the CUDA
			graph pool. The defaults come from public vLLM 0.19 logs (activations: Llama
			1.9, Qwen 2.2, Gemma 3.8, others 2.0 GiB; non-torch: 0.25 GiB, 2.1 GiB per
			rank with TP; CUDA graphs 1 GiB) and can be overridden; --kv-budget skips the
			model and takes vLLM's "Available KV cache memory" as given.

			Sizes take units (GiB, MiB, GB, ...); token counts may use k (×1024).
		`) + "\n\n" + cmdutil.ExitCodesHelp(""),
		Example: indent(heredoc(`
			# The first question: how much fits on one H100, per format?
			kvq estimate --model llama-3.1-8b --gpu h100-80gb

			# Check against a vLLM log: "Available KV cache memory: 58.11 GiB"
			kvq estimate --model llama-3.1-8b --kv-budget 58.11GiB --max-model-len 8192 --cache fp16,fp8

			# A 70B model on 4 GPUs, three contexts and two concurrency levels, as JSON
			kvq estimate -m meta-llama/Llama-3.1-70B-Instruct --gpu h100 --tp 4 \
			  --context 8k,32k,128k --concurrency 1,16 --output json

			# Your own checkpoint, K and V in different formats, fp16 residual window
			kvq estimate --model ./Qwen2.5-7B-Instruct/ --gpu l40s --cache fp16,k=int8,v=int4,residual=128

			# SGLang's accounting, and a plot of memory against context length
			kvq estimate --model qwen3-8b --gpu h200 --engine sglang --plot kv.svg
		`), "  "),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.blockSizeSet = cmd.Flags().Changed("block-size")
			o.cacheSet = cmd.Flags().Changed("cache")
			o.tpSet, o.gpusSet = cmd.Flags().Changed("tp"), cmd.Flags().Changed("gpus")
			if err := o.Validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return o.Run(cmd.Context())
		},
	}
	fl := cmd.Flags()
	cmdutil.AddModelRefFlag(fl, &o.Model)
	fl.StringVar(&o.GPU, "gpu", "", "GPU preset (see --list-gpus), e.g. h100-80gb, a100-80gb, h200, l4, mi300x")
	fl.StringVar(&o.GPUMem, "gpu-mem", "", "GPU memory as the engine sees it, e.g. 80GiB (instead of --gpu)")
	fl.IntVar(&o.GPUs, "gpus", 0, "number of GPUs (tensor × pipeline parallel); sets --tp when --tp is not given")
	fl.IntVar(&o.TP, "tp", 0, "tensor-parallel size (default 1, or --gpus / --pp)")
	fl.IntVar(&o.PP, "pp", 1, "pipeline-parallel size")
	fl.Float64Var(&o.Utilization, "gpu-memory-utilization", estimate.DefaultUtilization, "vLLM's fraction of GPU memory the engine may use")
	fl.StringVar(&o.WeightsMem, "weights-mem", "", "total weights size over all GPUs (default: from the model)")
	fl.StringVar(&o.ActivationMem, "activation-mem", "", "activation peak per GPU (default by model family, 0 for SGLang)")
	fl.StringVar(&o.NonTorchMem, "non-torch-mem", "", "non-torch memory per GPU (default 0.25GiB, 2.1GiB with --tp > 1)")
	fl.StringVar(&o.CUDAGraphMem, "cuda-graph-mem", "", "CUDA-graph pool per GPU taken from the KV budget (default 1GiB from vLLM 0.21, else 0)")
	fl.StringVar(&o.KVBudget, "kv-budget", "", `KV memory per GPU taken as given, e.g. 58.11GiB (vLLM's "Available KV cache memory")`)
	fl.Int64Var(&o.BlocksOverride, "num-gpu-blocks-override", 0, "fix the number of blocks, as vLLM's option of that name")
	fl.StringVar(&o.MaxModelLen, "max-model-len", "", "longest request in tokens (default and maximum: the model's max_position_embeddings, RoPE scaling included)")
	fl.BoolVar(&o.AllowLongMaxModelLen, "allow-long-max-model-len", false, "accept --max-model-len above the model's maximum (also the environment's "+allowLongEnv[estimate.VLLM]+"=1, or for SGLang "+allowLongEnv[estimate.SGLang]+"=1)")
	fl.StringVar(&o.MaxNumBatchedTokens, "max-num-batched-tokens", "8192", "tokens per scheduler step (sets sliding-window worst cases)")
	fl.StringSliceVar(&o.Contexts, "context", nil, "context lengths for the memory grid, e.g. 8k,32k,128k (default: 2k, 8k, 32k, ... up to max-model-len)")
	fl.StringSliceVar(&o.Concurrency, "concurrency", nil, "concurrent requests for the memory grid, e.g. 1,8,64 (default 1)")
	fl.IntVar(&o.BlockSize, "block-size", estimate.DefaultBlockSize, "block (page) size in tokens; 1 for SGLang unless given")
	cmdutil.AddCachesFlag(fl, &o.Cache, DefaultCaches)
	fl.StringVar(&o.Engine, "engine", string(estimate.VLLM), "accounting to follow: vllm or sglang")
	fl.StringVar(&o.VLLMVersion, "vllm-version", estimate.DefaultVLLMVersion, "vLLM release whose rules to follow (0.10: hybrid manager; 0.21: CUDA-graph estimate)")
	fl.Float64Var(&o.MemFractionStatic, "mem-fraction-static", 0, "SGLang's mem_fraction_static (default: SGLang's rule by GPU size)")
	fl.BoolVar(&o.DisableHybrid, "disable-hybrid-kv-cache-manager", false, "count sliding-window layers as full attention, as vLLM's option of that name")
	fl.StringVarP(&o.Output, "output", "o", "table", "output format: table, json, csv or markdown")
	fl.StringVar(&o.Plot, "plot", "", "also draw KV memory against context length to FILE.svg or FILE.png")
	fl.BoolVar(&o.ListModels, "list-models", false, "list the model presets and exit")
	fl.BoolVar(&o.ListGPUs, "list-gpus", false, "list the GPU presets and exit")
	cmdutil.AddWideFlag(fl, &o.Wide)
	_ = cmd.MarkFlagFilename("model", "json", "gguf")
	_ = cmd.MarkFlagFilename("plot", "svg", "png")
	complete := func(values []string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return values, cobra.ShellCompDirectiveNoFileComp
		}
	}
	var models, gpus []string
	for _, m := range estimate.Presets() {
		models = append(models, m.Name)
	}
	for _, g := range estimate.GPUPresets() {
		gpus = append(gpus, strings.ToLower(g.Name))
	}
	_ = cmd.RegisterFlagCompletionFunc("gpu", complete(gpus))
	_ = cmd.RegisterFlagCompletionFunc("cache", complete(quant.Formats().Names()))
	_ = cmd.RegisterFlagCompletionFunc("output", complete(render.Formats()))
	_ = cmd.RegisterFlagCompletionFunc("engine", complete([]string{"vllm", "sglang"}))
	_ = cmd.RegisterFlagCompletionFunc("model", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return models, cobra.ShellCompDirectiveDefault
	})
	return cmd
}

// heredoc strips the common leading tabs of a raw string literal's lines
// and the surrounding blank lines.
func heredoc(s string) string {
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	indent := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, "\t"))
		if indent < 0 || n < indent {
			indent = n
		}
	}
	for i, l := range lines {
		if len(l) >= indent && indent > 0 {
			lines[i] = l[indent:]
		} else {
			lines[i] = strings.TrimLeft(l, "\t")
		}
	}
	return strings.TrimRight(strings.Join(lines, "\n"), " \t\n")
}

// indent prefixes every non-empty line of s.
func indent(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
}

// Validate checks and parses the flags into a plan. Every error is a usage
// error (exit code 2) naming its flag.
func (o *Options) Validate() error {
	f, err := render.ParseFormat(o.Output)
	if err != nil {
		return cmdutil.FlagErrorf("--output: %w", err)
	}
	o.format = f
	if o.ListModels || o.ListGPUs {
		return nil
	}
	p := estimate.Plan{DisableHybrid: o.DisableHybrid, BlocksOverride: o.BlocksOverride, MemFractionStatic: o.MemFractionStatic}
	e, err := estimate.ParseEngine(o.Engine)
	if err != nil {
		return cmdutil.FlagErrorf("--engine: %w", err)
	}
	p.Engine = e
	if e == estimate.VLLM {
		if _, err := estimate.CheckVLLMVersion(o.VLLMVersion); err != nil {
			return cmdutil.FlagErrorf("--vllm-version %s: %w", o.VLLMVersion, err)
		}
		p.Version = o.VLLMVersion
	}
	p.AllowLongMaxModelLen = o.AllowLongMaxModelLen || envTrue(allowLongEnv[e])
	if err := o.parallel(&p); err != nil {
		return err
	}
	if err := o.memory(&p); err != nil {
		return err
	}
	if err := o.tokens(&p); err != nil {
		return err
	}
	specs, err := quant.Formats().ParseList(o.Cache)
	if err != nil {
		return cmdutil.FlagErrorf("--cache: %w", err)
	}
	p.Caches, p.SkipUnsupported = specs, !o.cacheSet
	if o.Plot != "" {
		switch strings.ToLower(filepath.Ext(o.Plot)) {
		case ".svg", ".png":
		default:
			return cmdutil.FlagErrorf("--plot %q: the file name must end in .svg or .png", o.Plot)
		}
		if err := cmdutil.CheckOutputFile("--plot", o.Plot); err != nil {
			return err
		}
	}
	o.plan = p
	return nil
}

func (o *Options) parallel(p *estimate.Plan) error {
	switch {
	case o.GPUs < 0 || o.gpusSet && o.GPUs == 0:
		return cmdutil.FlagErrorf("--gpus %d: must be ≥ 1", o.GPUs)
	case o.TP < 0 || o.tpSet && o.TP == 0:
		return cmdutil.FlagErrorf("--tp %d: must be ≥ 1", o.TP)
	case o.PP < 1:
		return cmdutil.FlagErrorf("--pp %d: must be ≥ 1", o.PP)
	}
	p.TP, p.PP = max(o.TP, 1), o.PP
	if o.GPUs > 0 {
		switch {
		case o.TP == 0 && o.GPUs%o.PP != 0:
			return cmdutil.FlagErrorf("--gpus %d is not a multiple of --pp %d", o.GPUs, o.PP)
		case o.TP == 0:
			p.TP = o.GPUs / o.PP
		case o.TP*o.PP != o.GPUs:
			return cmdutil.FlagErrorf("--gpus %d does not equal --tp %d × --pp %d", o.GPUs, o.TP, o.PP)
		}
	}
	return nil
}

func (o *Options) memory(p *estimate.Plan) error {
	if o.GPU != "" && o.GPUMem != "" {
		return cmdutil.FlagErrorf("--gpu and --gpu-mem: give one or the other")
	}
	if o.GPU != "" {
		g, err := estimate.LookupGPU(o.GPU)
		if err != nil {
			return cmdutil.FlagErrorf("--gpu: %w (see --list-gpus)", err)
		}
		o.gpu = &g
		p.GPUMemory, p.GPUName = g.Memory, g.Name
	}
	size := func(flag, v string, positive bool) (*int64, error) {
		if v == "" {
			return nil, nil
		}
		b, err := cmdutil.ParseSize("--"+flag, v)
		if err != nil {
			return nil, err
		}
		if positive && b <= 0 {
			return nil, cmdutil.FlagErrorf("--%s %s: must be positive", flag, v)
		}
		return &b, nil
	}
	var err error
	var gm, kv *int64
	if gm, err = size("gpu-mem", o.GPUMem, true); err != nil {
		return err
	}
	if gm != nil {
		p.GPUMemory, p.GPUName = *gm, "GPU"
	}
	if kv, err = size("kv-budget", o.KVBudget, true); err != nil {
		return err
	}
	if kv != nil {
		p.KVBudget = *kv
	}
	for _, s := range []struct {
		flag, v string
		dst     **int64
	}{{"weights-mem", o.WeightsMem, &p.WeightsBytes}, {"activation-mem", o.ActivationMem, &p.ActivationBytes},
		{"non-torch-mem", o.NonTorchMem, &p.NonTorchBytes}, {"cuda-graph-mem", o.CUDAGraphMem, &p.CUDAGraphBytes}} {
		if *s.dst, err = size(s.flag, s.v, false); err != nil {
			return err
		}
	}
	switch {
	case !(o.Utilization > 0 && o.Utilization <= 1):
		return cmdutil.FlagErrorf("--gpu-memory-utilization %v: must be in (0, 1]", o.Utilization)
	case !(o.MemFractionStatic >= 0 && o.MemFractionStatic <= 1):
		return cmdutil.FlagErrorf("--mem-fraction-static %v: must be in (0, 1]", o.MemFractionStatic)
	case o.BlocksOverride < 0:
		return cmdutil.FlagErrorf("--num-gpu-blocks-override %d: must be positive", o.BlocksOverride)
	}
	p.Utilization = o.Utilization
	return nil
}

func (o *Options) tokens(p *estimate.Plan) error {
	count := func(flag, v string) (int64, error) {
		n, err := estimate.ParseCount(v)
		if err != nil {
			return 0, cmdutil.FlagErrorf("--%s: %w", flag, err)
		}
		if n <= 0 {
			return 0, cmdutil.FlagErrorf("--%s %s: must be positive", flag, v)
		}
		return n, nil
	}
	var err error
	if o.MaxModelLen != "" {
		if p.MaxModelLen, err = count("max-model-len", o.MaxModelLen); err != nil {
			return err
		}
	}
	if p.MaxNumBatchedTokens, err = count("max-num-batched-tokens", o.MaxNumBatchedTokens); err != nil {
		return err
	}
	for _, list := range []struct {
		flag string
		vs   []string
		dst  *[]int64
	}{{"context", o.Contexts, &p.Contexts}, {"concurrency", o.Concurrency, &p.Concurrency}} {
		for _, v := range list.vs {
			n, err := count(list.flag, v)
			if err != nil {
				return err
			}
			*list.dst = append(*list.dst, n)
		}
	}
	switch {
	case o.BlockSize <= 0 || o.BlockSize > 1<<20:
		return cmdutil.FlagErrorf("--block-size %d: must be in [1, %d]", o.BlockSize, 1<<20)
	case p.Engine == estimate.SGLang && !o.blockSizeSet:
		p.BlockSize = estimate.DefaultSGLangPageSize
	default:
		p.BlockSize = o.BlockSize
	}
	return nil
}

// Run loads the model, estimates and prints.
func (o *Options) Run(ctx context.Context) error {
	fit := o.format == render.FormatTable && !o.Wide
	if o.ListModels || o.ListGPUs {
		r := listReport(o.ListModels, o.ListGPUs)
		if fit && o.ListModels {
			r.Tables[0] = render.Drop(r.Tables[0], "ARCH", "VERIFIED")
			r.Tables[0].Title += "; --wide adds ARCH and VERIFIED"
		}
		return render.Write(o.IO.Out, o.format, r, render.Options{TTY: o.IO.OutTTY})
	}
	ref, err := cmdutil.ResolveModel(strings.TrimSpace(o.Model), o.IO.ErrOut)
	if err != nil {
		return err
	}
	m, err := estimate.Load(ctx, ref)
	if err != nil {
		return inputError(fmt.Errorf("--model %s: %w", ref, err))
	}
	if err := cmdutil.CheckSpecLayers("--cache", m.Layers, o.plan.Caches...); err != nil {
		return err
	}
	if lim := m.MaxModelLen(); lim > 0 && o.plan.MaxModelLen > lim && !o.plan.AllowLongMaxModelLen {
		return cmdutil.FlagErrorf("--max-model-len %d is greater than the model's maximum of %d (%s), which %s refuses: pass --allow-long-max-model-len (or set %s=1) to estimate it anyway",
			o.plan.MaxModelLen, lim, m.MaxModelLenSource(), engineName[o.plan.Engine], allowLongEnv[o.plan.Engine])
	}
	// Each rank holds at least one attention head and one layer.
	if m.Heads > 0 && o.plan.TP > m.Heads {
		if !o.tpSet && o.gpusSet { // the tensor-parallel size came from --gpus
			return cmdutil.FlagErrorf("--gpus %d: a tensor-parallel size of %d, more than the model's %d attention heads (at most %d)", o.GPUs, o.plan.TP, m.Heads, m.Heads)
		}
		return cmdutil.FlagErrorf("--tp %d: more than the model's %d attention heads (at most %d)", o.plan.TP, m.Heads, m.Heads)
	}
	if m.Layers > 0 && o.plan.PP > m.Layers {
		return cmdutil.FlagErrorf("--pp %d: more than the model's %d layers (at most %d)", o.plan.PP, m.Layers, m.Layers)
	}
	p := o.plan
	p.Model = m
	res, err := estimate.Estimate(ctx, p)
	if err != nil {
		return inputError(err)
	}
	r := report(res, o.gpu)
	if fit {
		for i, l := range r.Preamble {
			r.Preamble[i] = cmdutil.WrapHanging(l, o.IO.Columns())
		}
		for i, t := range r.Tables {
			r.Tables[i] = render.Fit(t, o.IO.Columns(), -1, 0, render.Options{TTY: o.IO.OutTTY}) // titles and notes
		}
	}
	if err := render.Write(o.IO.Out, o.format, r, render.Options{TTY: o.IO.OutTTY}); err != nil {
		return err
	}
	if o.Plot != "" {
		return writePlot(o.Plot, res)
	}
	return nil
}

// allowLongEnv is, per engine, the environment variable with which the engine
// accepts a max_model_len above the model's maximum.
var allowLongEnv = map[estimate.Engine]string{
	estimate.VLLM:   "VLLM_ALLOW_LONG_MAX_MODEL_LEN",
	estimate.SGLang: "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN",
}

var engineName = map[estimate.Engine]string{estimate.VLLM: "vLLM", estimate.SGLang: "SGLang"}

// envTrue reports whether the environment variable is set to 1 or true, as
// vLLM and SGLang read their boolean variables.
func envTrue(name string) bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv(name))) {
	case "1", "true":
		return true
	}
	return false
}

// inputError marks errors caused by the user's input as usage errors (exit
// code 2); cancellation passes through.
func inputError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return cmdutil.UsageError(err)
}

func writePlot(path string, res *estimate.Result) error {
	c, err := chart(res)
	if err != nil {
		return fmt.Errorf("--plot %s: %w", path, err)
	}
	err = atomicfile.Write(path, func(w io.Writer) error {
		if strings.EqualFold(filepath.Ext(path), ".png") {
			return render.WritePNG(w, c)
		}
		return render.WriteSVG(w, c)
	})
	if err != nil {
		return fmt.Errorf("--plot %s: %w", path, err)
	}
	return nil
}
