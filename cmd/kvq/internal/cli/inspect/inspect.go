// Package inspect implements kvq inspect.
package inspect

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/cmd/kvq/internal/render"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/spf13/cobra"
)

// Options are the flags of kvq inspect.
type Options struct {
	// Wide keeps table output at full width (--wide).
	Wide      bool
	IO        *cmdutil.IOStreams
	Model     string
	Tokenizer string
	Output    string
	format    render.Format
}

// Info is what kvq inspect reports (its JSON form).
type Info struct {
	Path          string   `json:"path"`
	Format        string   `json:"format"`
	Architecture  string   `json:"architecture"`
	Params        int64    `json:"params"`
	DTypes        []string `json:"dtypes"`
	WeightBytes   int64    `json:"weight_bytes"`
	Layers        int      `json:"layers"`
	Heads         int      `json:"heads"`
	KVHeads       int      `json:"kv_heads"`
	HeadDim       int      `json:"head_dim"`
	Hidden        int      `json:"hidden_size"`
	Intermediate  int      `json:"intermediate_size"`
	Vocab         int      `json:"vocab_size"`
	ContextLength int      `json:"context_length"`
	RopeTheta     float64  `json:"rope_theta"`
	RopeScaling   string   `json:"rope_scaling"`
	SlidingWindow int      `json:"sliding_window"`
	// SlidingLayers lists the layers the window applies to when not all
	// do (Gemma's local layers); RopeLocalTheta is their RoPE base when
	// it differs; the softcaps are Gemma 2's.
	SlidingLayers  []int   `json:"sliding_layers,omitempty"`
	RopeLocalTheta float64 `json:"rope_local_theta,omitempty"`
	AttnSoftcap    float32 `json:"attn_logit_softcap,omitempty"`
	FinalSoftcap   float32 `json:"final_logit_softcap,omitempty"`
	Tokenizer      string  `json:"tokenizer"`
	ChatTemplate   bool    `json:"chat_template"`
	StopIDs        []int   `json:"stop_ids"`
	// KVBytesPerToken is K+V bytes per token for the whole model in fp16.
	KVBytesPerToken int64 `json:"kv_bytes_per_token_fp16"`
	// KVBytesPerRequest, for a model whose sliding-window layers keep only
	// their window, is the most fp16 K+V memory one request of
	// ContextLength tokens holds, fed in the engine's default prefill
	// chunks (kvcache.Layout.SeqCostChunked; kvq estimate's
	// RuntimeRequestBytes); KVBytesPerRequestFull is the same if every
	// layer kept every position.
	KVBytesPerRequest     int64 `json:"kv_bytes_per_request_fp16,omitempty"`
	KVBytesPerRequestFull int64 `json:"kv_bytes_per_request_fp16_full,omitempty"`
	// Experts describes a mixture-of-experts model's expert layers
	// (absent for a dense model).
	Experts *Experts `json:"experts,omitempty"`
}

// Experts is the MoE part of Info.
type Experts struct {
	Count        int    `json:"count"`
	PerToken     int    `json:"per_token"`
	Intermediate int    `json:"intermediate_size"`
	Routing      string `json:"routing"`
	DenseLayers  []int  `json:"dense_layers"`
	// ActiveParams are the parameters one token's forward pass uses (the
	// chosen experts' only).
	ActiveParams int64 `json:"active_params"`
}

// NewCmd returns the inspect command.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "inspect [--model PATH] [flags]",
		Short: "Show a model's architecture, size and KV-relevant shape",
		Long: `Load a model (Hugging Face directory, GGUF or llama2.c file) and print its
architecture, parameter count, weight dtypes, the shape that sets the KV
cache's size (layers, attention heads, KV heads, head_dim), context length and
tokenizer type.

` + cmdutil.ExitCodesHelp(""),
		Example: `  kvq inspect                                  # the built-in model
  kvq inspect --model ../shared/models/stories260K/stories260K.gguf --output json
  kvq inspect --model ./Llama-3.1-8B-Instruct    # your own download`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ft, err := render.ParseFormat(o.Output)
			if err != nil {
				return cmdutil.FlagErrorf("--output: %w", err)
			}
			o.format = ft
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return o.Run(cmd.Context())
		},
	}
	cmdutil.AddModelFlag(cmd.Flags(), &o.Model)
	cmdutil.AddTokenizerFlag(cmd.Flags(), &o.Tokenizer)
	cmd.Flags().StringVarP(&o.Output, "output", "o", "table", "output format: "+strings.Join(render.Formats(), ", "))
	cmdutil.AddWideFlag(cmd.Flags(), &o.Wide)
	return cmd
}

// Summarize describes a loaded model.
func Summarize(m *runtime.Model) Info {
	c := m.Config
	scaling := "none"
	if c.Scaling.Type != "" {
		scaling = fmt.Sprintf("%s ×%g", c.Scaling.Type, c.Scaling.Factor)
	}
	in := Info{
		SlidingLayers: m.LocalLayers(), RopeLocalTheta: c.RopeLocalTheta, AttnSoftcap: c.AttnSoftcap, FinalSoftcap: c.FinalSoftcap,
		Path: m.Path, Format: m.Format, Architecture: c.Arch, Params: m.Params(), DTypes: m.DTypes(), WeightBytes: m.WeightBytes(),
		Layers: c.Layers, Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim, Hidden: c.Dim, Intermediate: c.Hidden,
		Vocab: c.Vocab, ContextLength: c.ContextLen, RopeTheta: c.RopeTheta, RopeScaling: scaling, SlidingWindow: c.SlidingWindow,
		Tokenizer: m.Tokenizer.Kind().String(), ChatTemplate: m.ChatTemplate != "", StopIDs: m.StopIDs,
		KVBytesPerToken: int64(2 * c.Layers * c.KVHeads * c.HeadDim * 2),
		Experts:         experts(m),
	}
	if l, err := kvcache.NewLayout(m.Geometry(), quant.Spec{K: quant.FP16, V: quant.FP16}, 0); err == nil && l.Sliding() {
		ctx := m.MaxSeqLen()
		in.KVBytesPerRequest = l.SeqCostChunked(ctx, kvcache.DefaultChunk)
		in.KVBytesPerRequestFull = int64(l.BlocksFor(ctx)) * l.BlockBytes
	}
	return in
}

// experts summarises a mixture-of-experts model (nil for a dense one).
func experts(m *runtime.Model) *Experts {
	c := m.Config
	if c.Experts == 0 {
		return nil
	}
	moe := int64(c.Layers - len(c.DenseLayers))
	unused := moe * int64(c.Experts-c.ExpertsUsed) * 3 * int64(c.Dim) * int64(c.ExpertHidden)
	return &Experts{Count: c.Experts, PerToken: c.ExpertsUsed, Intermediate: c.ExpertHidden, Routing: c.Routing.String(),
		DenseLayers: append([]int{}, c.DenseLayers...), ActiveParams: m.Params() - unused}
}

// Run prints the summary.
func (o *Options) Run(ctx context.Context) error {
	// Only the shape is read: the weights stay mapped, never copied.
	m, err := cmdutil.LoadModel(ctx, o.Model, runtime.LoadOptions{Tokenizer: o.Tokenizer, Mmap: true}, o.IO.ErrOut)
	if err != nil {
		return err
	}
	in := Summarize(m)
	m.Close()
	n := strconv.Itoa
	window := "none"
	if in.SlidingWindow > 0 {
		window = n(in.SlidingWindow)
	}
	if in.SlidingLayers != nil {
		window += fmt.Sprintf(" (%d of %d layers: %s)", len(in.SlidingLayers), in.Layers, layerList(in.SlidingLayers))
	}
	t := render.Table{
		Header: []string{"field", "value"},
		Rows: [][]string{
			{"path", in.Path}, {"format", in.Format}, {"architecture", in.Architecture},
			{"parameters", fmt.Sprintf("%d (%.3gB)", in.Params, float64(in.Params)/1e9)},
			{"weight dtypes", strings.Join(in.DTypes, ", ")}, {"weight bytes", strconv.FormatInt(in.WeightBytes, 10)},
			{"layers", n(in.Layers)}, {"attention heads", n(in.Heads)}, {"KV heads", n(in.KVHeads)}, {"head_dim", n(in.HeadDim)},
			{"hidden / intermediate", n(in.Hidden) + " / " + n(in.Intermediate)}, {"vocabulary", n(in.Vocab)},
			{"context length", n(in.ContextLength)}, {"RoPE theta", strconv.FormatFloat(in.RopeTheta, 'g', -1, 64)},
			{"RoPE scaling", in.RopeScaling}, {"sliding window", window}, {"tokenizer", in.Tokenizer},
			{"chat template", strconv.FormatBool(in.ChatTemplate)},
			{"KV bytes per token (fp16)", strconv.FormatInt(in.KVBytesPerToken, 10)},
		},
	}
	if e := in.Experts; e != nil {
		dense := "none"
		if len(e.DenseLayers) > 0 {
			dense = strings.Trim(fmt.Sprint(e.DenseLayers), "[]")
		}
		t.Rows = append(t.Rows[:len(t.Rows)-1],
			[]string{"experts", fmt.Sprintf("%d, %d per token, intermediate %d (%s)", e.Count, e.PerToken, e.Intermediate, e.Routing)},
			[]string{"dense FFN layers", dense},
			[]string{"active parameters", fmt.Sprintf("%d (%.3gB)", e.ActiveParams, float64(e.ActiveParams)/1e9)},
			t.Rows[len(t.Rows)-1])
	}
	g := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	var extra [][]string
	if in.RopeLocalTheta > 0 {
		extra = append(extra, []string{"RoPE theta (sliding layers)", g(in.RopeLocalTheta)})
	}
	if in.AttnSoftcap > 0 || in.FinalSoftcap > 0 {
		extra = append(extra, []string{"softcaps (attention / logits)", g(float64(in.AttnSoftcap)) + " / " + g(float64(in.FinalSoftcap))})
	}
	if in.KVBytesPerRequest > 0 {
		t.Rows = append(t.Rows, []string{fmt.Sprintf("KV bytes per request (fp16, %d tokens)", in.ContextLength),
			fmt.Sprintf("%d (sliding layers keep their window; %d if every layer kept every position)", in.KVBytesPerRequest, in.KVBytesPerRequestFull)})
	}
	if extra != nil { // after the RoPE rows
		at := 15
		t.Rows = append(t.Rows[:at:at], append(extra, t.Rows[at:]...)...)
	}
	return render.Write(o.IO.Out, o.format, o.IO.FitReport(render.Report{Tables: []render.Table{t}, Value: in}, o.format, o.Wide), render.Options{TTY: o.IO.OutTTY})
}

// layerList writes sorted layer indices as ranges: "0-4, 6".
func layerList(ls []int) string {
	var parts []string
	for i := 0; i < len(ls); {
		j := i
		for j+1 < len(ls) && ls[j+1] == ls[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", ls[i], ls[j]))
		} else {
			parts = append(parts, strconv.Itoa(ls[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}
