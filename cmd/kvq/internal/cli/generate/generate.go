// Package generate implements kvq generate.
package generate

import (
	"context"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/spf13/cobra"
)

// Options are the flags of kvq generate.
type Options struct {
	IO          *cmdutil.IOStreams
	Model       string
	Tokenizer   string
	Mmap        bool
	Prompt      string
	MaxTokens   int
	Temperature float64
	TopP        float64
	Seed        uint64
	Cache       string
	Compare     string
	Threads     int
	Device      cmdutil.Device
	Chat        bool
	System      string

	spec       quant.Spec
	candidates []quant.Spec
}

// NewCmd returns the generate command. runF replaces the run step in tests.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "generate [--model PATH] [--prompt TEXT] [flags]",
		Short: "Generate text with a chosen KV-cache format",
		Long: `Generate a continuation of a prompt with the model and print it, followed by
one statistics line on standard error: prompt tokens, prefill and decode speed,
and the bytes the KV cache allocated.

` + cmdutil.ExitCodesHelp(""),
		Example: `  kvq generate --prompt "Once upon a time" --max-tokens 64      # the built-in model
  kvq generate -m ../shared/models/stories260K/stories260K.gguf --prompt "Once upon a time" -n 64
  kvq generate -m ../shared/models/stories260K/stories260K.bin \
    --tokenizer ../shared/models/stories260K/tok512.bin -p "Hi" --temperature 0.8 --top-p 0.9
  kvq generate --prompt "The capital of France" --cache fp16 --compare int4,kivi2,q4_0
  kvq generate --model ./Qwen2.5-0.5B-Instruct --chat --prompt "Name three colors."  # your own`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
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
	cmdutil.AddModelFlag(fl, &o.Model)
	cmdutil.AddTokenizerFlag(fl, &o.Tokenizer)
	cmdutil.AddMmapFlag(fl, &o.Mmap)
	fl.StringVarP(&o.Prompt, "prompt", "p", "", "prompt text")
	fl.IntVarP(&o.MaxTokens, "max-tokens", "n", 128, "maximum tokens to generate")
	fl.Float64Var(&o.Temperature, "temperature", 0, "sampling temperature (0: greedy)")
	fl.Float64Var(&o.TopP, "top-p", 1, "nucleus sampling: keep the most likely tokens up to this probability mass")
	fl.Uint64Var(&o.Seed, "seed", 0, "random seed for sampling")
	cmdutil.AddCacheFlag(fl, &o.Cache, "fp16")
	fl.StringVar(&o.Compare, "compare", "", "comma-separated cache specs to compare greedily against --cache (the baseline)")
	cmdutil.AddThreadsFlag(fl, &o.Threads)
	cmdutil.AddDeviceFlag(fl, &o.Device, f.BackendRegistry())
	fl.BoolVar(&o.Chat, "chat", false, "wrap the prompt as a user message in the model's chat template")
	fl.StringVar(&o.System, "system", "", "system message (with --chat)")
	_ = cmd.MarkFlagFilename("model", "gguf", "bin", "json")
	_ = cmd.MarkFlagFilename("tokenizer", "bin")
	_ = cmd.RegisterFlagCompletionFunc("cache", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return quant.Formats().Names(), cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// Validate checks flag values.
func (o *Options) Validate() error {
	switch {
	case o.MaxTokens < 0:
		return cmdutil.FlagErrorf("--max-tokens %d: must be ≥ 0", o.MaxTokens)
	case o.Temperature < 0 || math.IsNaN(o.Temperature) || math.IsInf(o.Temperature, 0):
		return cmdutil.FlagErrorf("--temperature %v: must be a finite number ≥ 0", o.Temperature)
	case !(o.TopP > 0 && o.TopP <= 1):
		return cmdutil.FlagErrorf("--top-p %v: must be in (0, 1]", o.TopP)
	case o.Threads < 0:
		return cmdutil.FlagErrorf("--threads %d: must be ≥ 0", o.Threads)
	case o.System != "" && !o.Chat:
		return cmdutil.FlagErrorf("--system needs --chat")
	}
	if err := o.Device.Check(); err != nil {
		return err
	}
	spec, err := quant.Formats().ParseSpec(o.Cache)
	if err != nil {
		return cmdutil.FlagErrorf("--cache: %w", err)
	}
	o.spec = spec
	if o.Compare != "" {
		cands, err := quant.Formats().ParseList(o.Compare)
		if err != nil {
			return cmdutil.FlagErrorf("--compare: %w", err)
		}
		o.candidates = cands
	}
	return nil
}

// Run generates and prints.
func (o *Options) Run(ctx context.Context) error {
	m, err := cmdutil.LoadModel(ctx, o.Model, runtime.LoadOptions{Tokenizer: o.Tokenizer, Mmap: o.Mmap}, o.IO.ErrOut)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := cmdutil.CheckSpecLayers("--cache", m.Config.Layers, o.spec); err != nil {
		return err
	}
	if err := cmdutil.CheckSpecLayers("--compare", m.Config.Layers, o.candidates...); err != nil {
		return err
	}
	cmdutil.WarnSpecBlocks(o.IO.ErrOut, "--cache", m.Geometry(), append([]quant.Spec{o.spec}, o.candidates...)...)
	prompt, err := m.GenerationPrompt(o.Prompt, o.Chat, o.System)
	if err != nil {
		return cmdutil.UsageError(fmt.Errorf("--chat: %w", err))
	}
	if err := o.checkLength(m, len(prompt)); err != nil {
		return err
	}
	need, err := runtime.GenerationKV(m.Geometry(), len(prompt), o.MaxTokens, o.spec, o.candidates)
	if err != nil {
		return cmdutil.UsageError(fmt.Errorf("--cache %s: %w", o.Cache, err))
	}
	be, err := o.Device.Open(ctx, o.IO.ErrOut)
	if err != nil {
		return err
	}
	if be == nil { // the cache is host memory
		if err := cmdutil.CheckKVMemory("--max-tokens", need, fmt.Sprintf("the prompt's %d tokens and --max-tokens %d", len(prompt), o.MaxTokens)); err != nil {
			return err
		}
	}
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{Backend: be, Workers: o.Threads})
	if err != nil {
		return err
	}
	defer r.Close()
	if len(o.candidates) > 0 {
		return o.compare(ctx, r, prompt)
	}
	return o.generate(ctx, r, prompt)
}

// checkLength checks that the prompt gives a token to continue from and
// that it and --max-tokens fit the positions the model addresses.
func (o *Options) checkLength(m *runtime.Model, promptLen int) error {
	if promptLen == 0 {
		// With no BOS token an empty text encodes to nothing, and there is
		// no token to continue from.
		return cmdutil.FlagErrorf("--prompt %q gives no tokens (the tokenizer of %s adds no BOS token): give a non-empty prompt", o.Prompt, m.Path)
	}
	// Compared without adding, so that a huge --max-tokens cannot overflow.
	if limit := m.MaxSeqLen(); promptLen > limit || o.MaxTokens > limit-promptLen {
		sum := uint64(promptLen) + uint64(o.MaxTokens)
		if m.ContextLen <= 0 {
			return cmdutil.FlagErrorf("the prompt's %d tokens plus --max-tokens %d make %d, more than the %d positions kvq addresses (the model states no context length)", promptLen, o.MaxTokens, sum, limit)
		}
		return cmdutil.FlagErrorf("the prompt's %d tokens plus --max-tokens %d make %d, more than the model's context of %d tokens", promptLen, o.MaxTokens, sum, m.ContextLen)
	}
	return nil
}

// generate samples a continuation, prints it as it comes, and prints the
// statistics line.
func (o *Options) generate(ctx context.Context, r *runtime.Runner, prompt []int) error {
	sampler, err := runtime.NewSampler(o.Temperature, o.TopP, o.Seed)
	if err != nil {
		return cmdutil.UsageError(err)
	}
	st, err := r.GenerateText(ctx, prompt, runtime.TextOptions{Spec: o.spec, MaxTokens: o.MaxTokens, Sampler: sampler,
		OnText: func(piece string, final bool) error {
			_, err := fmt.Fprint(o.IO.Out, piece)
			if final {
				fmt.Fprintln(o.IO.Out)
				return nil
			}
			return err
		}})
	if err != nil {
		return err
	}
	fmt.Fprintf(o.IO.ErrOut, "prompt tokens %d | generated %d | prefill %.1f tok/s | decode %.1f tok/s | KV %d bytes allocated (%s, %d blocks of %d tokens)\n",
		st.PromptTokens, st.GeneratedTokens, st.PrefillTokensPerSec(), st.DecodeTokensPerSec(),
		st.KV.Allocated.Total, o.spec.String(), st.KV.Blocks, st.KV.BlockTokens)
	return nil
}

// compare runs greedy generation with the baseline and each candidate and
// prints each continuation with where it departs from the baseline.
func (o *Options) compare(ctx context.Context, r *runtime.Runner, prompt []int) error {
	if o.Temperature != 0 {
		return cmdutil.FlagErrorf("--compare runs greedy decoding; drop --temperature")
	}
	specs := append([]quant.Spec{o.spec}, o.candidates...)
	_, err := eval.CompareGreedy(ctx, r, prompt, o.MaxTokens, specs, func(i int, c eval.Continuation) {
		text, same := c.Text(r.Model(), prompt)
		bytes := c.Stats.KV.Allocated.Total
		switch {
		case i == 0:
			fmt.Fprintf(o.IO.Out, "== %s (baseline, KV %d bytes)\n%s\n", c.Spec.String(), bytes, text)
		case c.Diverge < 0:
			fmt.Fprintf(o.IO.Out, "== %s (KV %d bytes): identical to the baseline for all %d tokens\n%s\n", c.Spec.String(), bytes, len(c.Tokens), text)
		default:
			fmt.Fprintf(o.IO.Out, "== %s (KV %d bytes): diverges from the baseline at token %d, after %q\n%s\n", c.Spec.String(), bytes, c.Diverge, tail(same, 40), text)
		}
	})
	return err
}

// tail returns the last n bytes of s, on a rune boundary.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return "…" + s[i:]
}
