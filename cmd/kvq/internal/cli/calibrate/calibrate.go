// Package calibrate implements kvq calibrate and its stats and audit
// subcommands over pkg/calibrate.
package calibrate

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
	"github.com/kvqlabs/kvq/datasets"
	"github.com/kvqlabs/kvq/pkg/calibrate"
	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/spf13/cobra"
)

// DefaultCompare are the strategies kvq calibrate compares without
// --compare.
const DefaultCompare = "default,warmup,dataset"

// DataFlags select the model and calibration data (shared by the three
// commands).
type DataFlags struct {
	Model     string
	Tokenizer string
	Mmap      bool
	Data      []string
	Samples   int
	SeqLen    int
	Seed      uint64
	Threads   int
	Device    cmdutil.Device

	be     backend.Backend // opened by backend
	opened bool
}

func (d *DataFlags) bind(cmd *cobra.Command, reg *backend.Registry) {
	fl := cmd.Flags()
	cmdutil.AddModelFlag(fl, &d.Model)
	cmdutil.AddTokenizerFlag(fl, &d.Tokenizer)
	cmdutil.AddMmapFlag(fl, &d.Mmap)
	fl.StringArrayVar(&d.Data, "data", nil, "calibration data: a text file, or a .jsonl of {\"text\"}, {\"prompt\"[, \"completion\"]} or {\"messages\"} records (repeatable; default: built-in texts); a file that is not text is refused, and data for fewer than --samples samples is warned about")
	fl.IntVar(&d.Samples, "samples", 32, "calibration sequences (one forward batch each)")
	fl.IntVar(&d.SeqLen, "seq-len", 512, "tokens per calibration sequence, at most (capped at the model's context)")
	fl.Uint64Var(&d.Seed, "seed", 1, "selects the calibration windows and records, and the random warm-up tokens")
	cmdutil.AddThreadsFlag(fl, &d.Threads)
	cmdutil.AddDeviceFlag(fl, &d.Device, reg)
}

func (d *DataFlags) validate() error {
	if d.Samples <= 0 {
		return cmdutil.FlagErrorf("--samples %d: must be positive", d.Samples)
	}
	if d.SeqLen < 2 {
		return cmdutil.FlagErrorf("--seq-len %d: must be at least 2", d.SeqLen)
	}
	if limit := calibrate.MaxSamples(d.SeqLen); d.Samples > limit {
		return cmdutil.FlagErrorf("--samples %d: at most %d sequences of --seq-len %d (%d calibration tokens in all)", d.Samples, limit, d.SeqLen, calibrate.MaxTokens)
	}
	if d.Threads < 0 {
		return cmdutil.FlagErrorf("--threads %d: must be ≥ 0", d.Threads)
	}
	if err := d.Device.Check(); err != nil {
		return err
	}
	for _, p := range d.Data {
		if _, err := os.Stat(p); err != nil {
			return cmdutil.FlagErrorf("--data %s: %w", p, err)
		}
	}
	return nil
}

// load loads the model and the calibration data.
func (d *DataFlags) load(ctx context.Context, errOut *cmdutil.IOStreams) (*runtime.Model, *calibrate.Data, error) {
	m, err := cmdutil.LoadModel(ctx, d.Model, runtime.LoadOptions{Tokenizer: d.Tokenizer, Mmap: d.Mmap}, errOut.ErrOut)
	if err != nil {
		return nil, nil, err
	}
	seqLen := d.SeqLen
	if m.ContextLen > 0 {
		seqLen = min(seqLen, m.ContextLen)
	}
	data, err := calibrate.LoadData(ctx, m, calibrate.DataOptions{Paths: d.Data, Samples: d.Samples, SeqLen: seqLen, Seed: d.Seed})
	if err != nil {
		m.Close()
		return nil, nil, cmdutil.UsageError(err)
	}
	warnShortData(errOut.ErrOut, d.Data, data, d.Samples, seqLen)
	return m, data, nil
}

// warnShortData says on w when the --data files give fewer samples than
// --samples asks for: scales from a few tokens describe those tokens, not
// the model's traffic.
func warnShortData(w io.Writer, paths []string, data *calibrate.Data, samples, seqLen int) {
	if n := len(data.Samples); len(paths) > 0 && n < samples {
		fmt.Fprintf(w, "kvq: warning: --data gives %d sample(s), %d tokens in all, fewer than --samples %d of up to %d tokens: the scales describe only that data\n",
			n, data.Tokens(), samples, seqLen)
	}
}

// record runs the model over the data with a progress bar.
// backend opens the --device backend once (nil: the CPU).
func (d *DataFlags) backend(ctx context.Context, io *cmdutil.IOStreams) (backend.Backend, error) {
	if !d.opened {
		be, err := d.Device.Open(ctx, io.ErrOut)
		if err != nil {
			return nil, err
		}
		d.be, d.opened = be, true
	}
	return d.be, nil
}

func record(ctx context.Context, io *cmdutil.IOStreams, m *runtime.Model, data *calibrate.Data, label string, d *DataFlags, opts calibrate.RecordOptions) (*calibrate.Recorder, error) {
	be, err := d.backend(ctx, io)
	if err != nil {
		return nil, err
	}
	bar := io.Progress(len(data.Samples), label)
	rec, err := calibrate.Record(ctx, m, data, calibrate.RunOptions{Record: opts, Workers: d.Threads, Backend: be, Progress: func(done, total int) {
		bar.Set(done, total)
	}})
	bar.Finish()
	return rec, err
}

// Options are kvq calibrate's flags.
type Options struct {
	// Wide keeps table output at full width (--wide).
	Wide bool
	IO   *cmdutil.IOStreams
	DataFlags
	Strategy    string
	Granularity string
	DType       string
	ScaleDType  string
	Compare     string
	Texts       []string
	Ctx         int
	Chunks      int
	Codebook    string
	Out         string
	Force       bool
	Checkpoint  bool
	Stats       string
	Plot        string
	Output      string

	strategy   calibrate.Strategy
	best       bool
	compare    []calibrate.Strategy
	kind       quant.FP8Kind
	codebooks  []string
	format     render.Format
	granular   calibrate.Granularity
	scaleDType string
}

// NewCmd returns kvq calibrate with its stats and audit subcommands.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "calibrate",
		Short: "fp8 KV-cache scales by vLLM's and llm-compressor's strategies: export, compare, audit",
		Long: `kvq calibrate runs the model over calibration data, records what the keys
(after and before RoPE) and values look like per layer, KV head and channel,
and computes fp8 KV-cache scales by --strategy:

  default       1.0, what vLLM uses when a checkpoint ships no scales
  warmup        vLLM's calculate_kv_scales: the first batch's absmax / 200 (K)
                and / 100 (V), on random tokens (warmup:random, as vLLM's
                profiling run) or the first data sample (warmup:data)
  dataset       llm-compressor's observers, scale = absmax / 448 (e4m3):
                dataset:minmax (the default: moving average 0.01 of each
                batch's min and max), dataset:static_minmax, dataset:mse
  percentile:P  clip at the P-th percentile of |x| (default 99.99)
  best          the strategy --compare measures best

Each takes :tensor (one scale per layer for K and V) or :head (one per KV
head, llm-compressor's attn_head), or --granularity for all.

It writes, into --out, every format the engines load: kv_scales.json (kvq's
file: kvq eval --cache fp8:scales@FILE), kv_scales.safetensors (the tensors
llm-compressor writes into a checkpoint, model.layers.N.self_attn.k_scale /
v_scale, in the model's dtype), kv_cache_scheme.json (the config.json
quantization_config vLLM needs to load them) and kv_cache_scales_sglang.json
(SGLang's --quantization-param-path file). --write-checkpoint also puts them
into the model's own directory, keeping config.json.kvq-backup.

--compare measures each strategy on held-out text (built-in evaluation
stories unless --text): how many keys and values its scales clip, the fp8
round-trip error, and the teacher-forced KL divergence and top-1 agreement
against fp16, and recommends the best with its margin and whether it
exceeds noise.

--out defaults to ./kvq-calibration, in the current directory (kvq's own
repository ignores it in .gitignore; add it to yours, or give --out).
Nothing is written until everything is computed: Ctrl-C leaves --out as it
was. On the built-in model (no --model) it takes about 10 s on 2 cores with
the defaults, --compare included.

` + cmdutil.ExitCodesHelp(""),
		Example: `  kvq calibrate                     # the built-in model: scales, comparison, ./kvq-calibration
  kvq calibrate --model ./Llama-3.1-8B --data ultrachat.jsonl \
    --samples 512 --seq-len 2048    # your own model and data
  kvq calibrate --strategy dataset:head --out kvq-head \
    --compare default,warmup,dataset,dataset:mse,percentile:99.9   # about 40 s
  kvq calibrate --model ./Qwen3-8B --strategy best --write-checkpoint   # your own checkpoint
  kvq calibrate --codebook kvquant4 --compare none --out kvq-codebook   # kvquant4:codebook@FILE
  kvq calibrate stats --output json > stats.json
  kvq calibrate audit --model ./my-fp8-checkpoint   # your own checkpoint`,
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
	o.DataFlags.bind(cmd, f.BackendRegistry())
	fl := cmd.Flags()
	cmdutil.AddWideFlag(fl, &o.Wide)
	fl.StringVar(&o.Strategy, "strategy", "dataset", "the strategy to export: "+calibrate.Strategies+", or best")
	fl.StringVar(&o.Granularity, "granularity", "tensor", "scales per layer side: tensor (one) or head (one per KV head)")
	fl.StringVar(&o.DType, "dtype", "e4m3", "fp8 encoding of the cache: e4m3 (vLLM's fp8) or e5m2")
	fl.StringVar(&o.ScaleDType, "scale-dtype", "auto", "dtype the scales ship in and are rounded to: auto (the model's), F16, BF16 or F32")
	fl.StringVar(&o.Compare, "compare", DefaultCompare, "strategies to measure on held-out text, comma-separated; none to skip")
	fl.StringArrayVar(&o.Texts, "text", nil, "held-out text file for --compare (repeatable; default: built-in evaluation stories, disjoint from the built-in calibration texts)")
	fl.IntVar(&o.Ctx, "ctx", 0, "--compare chunk size in tokens (default: the model's context, at most 2048)")
	fl.IntVar(&o.Chunks, "chunks", 0, "--compare scores at most this many chunks (0: all)")
	fl.StringVar(&o.Codebook, "codebook", "", "also fit KVQuant codebooks for these formats (kvquant4,kvquant3,kvquant2), written as codebook-FORMAT.json")
	fl.StringVar(&o.Out, "out", "kvq-calibration", "directory the scales are written to (in the current directory by default)")
	fl.BoolVar(&o.Force, "force", false, "overwrite scales already in --out")
	fl.BoolVar(&o.Checkpoint, "write-checkpoint", false, "also write the scales into the model's Hugging Face directory (kv_scales.safetensors, config.json's kv_cache_scheme; originals kept as .kvq-backup)")
	fl.StringVar(&o.Stats, "stats", "", "also write the statistics as JSON to this file")
	fl.StringVar(&o.Plot, "plot", "", "write the statistics' pictures (SVG and PNG) into this directory")
	fl.StringVarP(&o.Output, "output", "o", "table", "output format: "+strings.Join(render.Formats(), ", "))
	cmd.AddCommand(newStatsCmd(f, nil), newAuditCmd(f, nil))
	return cmd
}

func parseKind(s string) (quant.FP8Kind, error) {
	switch strings.ToLower(s) {
	case "e4m3", "fp8", "fp8_e4m3", "float8_e4m3fn":
		return quant.E4M3, nil
	case "e5m2", "fp8_e5m2", "float8_e5m2":
		return quant.E5M2, nil
	}
	return 0, cmdutil.FlagErrorf("--dtype %q (valid: e4m3, e5m2)", s)
}

// Validate checks the flags before any work.
func (o *Options) Validate() error {
	if err := o.DataFlags.validate(); err != nil {
		return err
	}
	var err error
	if o.granular, err = calibrate.ParseGranularity(o.Granularity); err != nil {
		return cmdutil.FlagErrorf("--granularity: %w", err)
	}
	if o.kind, err = parseKind(o.DType); err != nil {
		return err
	}
	o.best = strings.EqualFold(o.Strategy, "best")
	if !o.best {
		if o.strategy, err = calibrate.ParseStrategy(o.Strategy, o.granular); err != nil {
			return cmdutil.FlagErrorf("--strategy: %w", err)
		}
	}
	o.compare = nil
	if c := strings.TrimSpace(o.Compare); c != "" && c != "none" {
		if o.compare, err = calibrate.ParseStrategies(c, o.granular); err != nil {
			return cmdutil.FlagErrorf("--compare: %w", err)
		}
	}
	if o.best && len(o.compare) < 2 {
		return cmdutil.FlagErrorf("--strategy best needs --compare with two or more strategies")
	}
	switch up := strings.ToUpper(o.ScaleDType); up {
	case "AUTO":
		o.scaleDType = ""
	case "F16", "BF16", "F32":
		o.scaleDType = up
	default:
		return cmdutil.FlagErrorf("--scale-dtype %q (valid: auto, F16, BF16, F32)", o.ScaleDType)
	}
	o.codebooks = nil
	for _, c := range strings.Split(o.Codebook, ",") {
		c = strings.TrimSpace(strings.ToLower(c))
		if c == "" {
			continue
		}
		if c != "kvquant4" && c != "kvquant3" && c != "kvquant2" {
			return cmdutil.FlagErrorf("--codebook %q (valid: kvquant4, kvquant3, kvquant2)", c)
		}
		o.codebooks = append(o.codebooks, c)
	}
	for _, t := range o.Texts {
		if _, err := os.Stat(t); err != nil {
			return cmdutil.FlagErrorf("--text %s: %w", t, err)
		}
	}
	if o.Ctx < 0 || o.Chunks < 0 {
		return cmdutil.FlagErrorf("--ctx and --chunks must be ≥ 0")
	}
	if o.format, err = render.ParseFormat(o.Output); err != nil {
		return cmdutil.FlagErrorf("--output: %w", err)
	}
	if o.Out == "" {
		return cmdutil.FlagErrorf("--out: empty directory name")
	}
	if !o.Force {
		for _, n := range append([]string{calibrate.FileKVQ, calibrate.FileSafetensors, calibrate.FileScheme, calibrate.FileSGLang}, codebookFiles(o.codebooks)...) {
			if _, err := os.Stat(filepath.Join(o.Out, n)); err == nil {
				return cmdutil.FlagErrorf("--out %s already holds %s: pass --force to overwrite, or choose another --out", o.Out, n)
			}
		}
	}
	if o.Checkpoint && o.Model == "" {
		return cmdutil.FlagErrorf("--write-checkpoint needs --model: the built-in model's files are not to be changed")
	}
	// Output targets are checked now, so that the run never ends by losing
	// its results.
	if err := cmdutil.CheckOutputFile("--stats", o.Stats); err != nil {
		return err
	}
	for _, p := range []struct{ flag, path string }{{"--out", o.Out}, {"--plot", o.Plot}} {
		if err := cmdutil.CheckOutputDir(p.flag, p.path); err != nil {
			return err
		}
	}
	if o.Checkpoint {
		if st, err := os.Stat(o.Model); err == nil && st.IsDir() {
			if err := cmdutil.CheckOutputDir("--write-checkpoint", o.Model); err != nil {
				return err
			}
		}
	}
	return nil
}

func codebookFiles(formats []string) []string {
	var out []string
	for _, f := range formats {
		out = append(out, calibrate.CodebookFile(f))
	}
	return out
}

// Run calibrates, compares, writes and reports.
func (o *Options) Run(ctx context.Context) error {
	m, data, err := o.DataFlags.load(ctx, o.IO)
	if err != nil {
		return err
	}
	defer m.Close()
	be, err := o.backend(ctx, o.IO)
	if err != nil {
		return err
	}
	copts := calibrate.Options{Model: cmdutil.ModelLabel(m, o.Model), Strategy: o.strategy, Best: o.best, Granularity: o.granular,
		Compare: o.compare, Text: eval.TextOptions{Ctx: o.Ctx, MaxChunks: o.Chunks}, Kind: o.kind, DType: o.scaleDType,
		Codebooks: o.codebooks, WarmupLen: min(o.SeqLen, max(2, m.ContextLen)), Seed: o.Seed, Workers: o.Threads, Backend: be}
	if len(o.compare) > 0 {
		if copts.Texts, copts.HeldOut, err = heldOut(o.Texts, o.Seed); err != nil {
			return err
		}
	}
	bars := &cmdutil.StageBars{IO: o.IO}
	copts.Progress = bars.Set
	cal, err := calibrate.Calibrate(ctx, m, data, copts)
	bars.Finish()
	switch {
	case errors.Is(err, eval.ErrOptions), errors.Is(err, calibrate.ErrOptions):
		return cmdutil.UsageError(err)
	case errors.Is(err, calibrate.ErrNoBest):
		return fmt.Errorf("--strategy best: no compared strategy could run")
	case err != nil:
		return err
	}
	// Everything is computed: write.
	if err := cal.Write(o.Out, m.Arch); err != nil {
		return err
	}
	if err := o.writeMore(m, cal); err != nil {
		return err
	}
	return render.Write(o.IO.Out, o.format, o.IO.FitReport(calibrateView(cal.Result), o.format, o.Wide), render.Options{TTY: o.IO.OutTTY})
}

// writeMore writes what --stats, --plot and --write-checkpoint ask for,
// adding the files to the result.
func (o *Options) writeMore(m *runtime.Model, cal *calibrate.Calibration) error {
	res := cal.Result
	if o.Stats != "" {
		if err := writeJSON(o.Stats, cal.Stats); err != nil {
			return fmt.Errorf("--stats %s: %w", o.Stats, err)
		}
		res.Files = append(res.Files, o.Stats)
	}
	if o.Plot != "" {
		ps, err := writePlots(o.Plot, cal.Stats)
		if err != nil {
			return fmt.Errorf("--plot %s: %w", o.Plot, err)
		}
		res.Files = append(res.Files, ps...)
	}
	if o.Checkpoint {
		if m.Format != "safetensors" {
			return cmdutil.FlagErrorf("--write-checkpoint: %s is a %s model; only Hugging Face directories carry scales", m.Path, m.Format)
		}
		if err := calibrate.WriteCheckpoint(m.Path, cal.Scales, cal.DType); err != nil {
			return err
		}
		res.Files = append(res.Files, filepath.Join(m.Path, calibrate.FileSafetensors), filepath.Join(m.Path, "config.json"))
	}
	return nil
}

// heldOut returns the texts --compare scores: the files given, or the
// built-in evaluation-split stories kvq eval scores.
func heldOut(paths []string, seed uint64) ([]eval.Text, []string, error) {
	if len(paths) == 0 {
		g := datasets.New(datasets.Eval, seed)
		var b strings.Builder
		for b.Len() < 12000 {
			b.WriteString(g.Story().Answer)
		}
		return []eval.Text{{Name: "built-in evaluation stories", Body: b.String()}}, []string{"built-in evaluation stories"}, nil
	}
	var out []eval.Text
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, cmdutil.FlagErrorf("--text: %w", err)
		}
		out = append(out, eval.Text{Name: p, Body: string(b)})
	}
	return out, paths, nil
}
