//go:build cuda || cudaemu

// Command gpubench measures kvq's CUDA backend on random-weight Llama
// shapes built in memory (no download): prefill tokens/s, decode tokens/s
// at several batch sizes, decode at batch 1 as a fraction of the
// weight-streaming limit (weight bytes read per step ÷ the device read
// bandwidth measured in the same run), and decode attention over long
// caches of each -attn-formats format (8K-128K tokens, batch 1 and 32) as
// a fraction of that bandwidth and relative to fp16's time. It prints a
// table and, with
// -json, writes the numbers.
//
//	go run -tags cuda ./scripts/gpubench -shapes 1b,8b
//
// Each figure is the median of -reps timed runs after one warm-up.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvqlabs/kvq/pkg/gpu"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// shapes are the benchmark models (Llama 3 style: GQA, SwiGLU).
var shapes = map[string]runtime.Config{
	"tiny": {Dim: 256, Hidden: 512, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 64, Vocab: 512, ContextLen: 4096},
	"1b":   {Dim: 2048, Hidden: 8192, Layers: 16, Heads: 32, KVHeads: 8, HeadDim: 64, Vocab: 32000, ContextLen: 8192},
	"8b":   {Dim: 4096, Hidden: 14336, Layers: 32, Heads: 32, KVHeads: 8, HeadDim: 128, Vocab: 32000, ContextLen: 8192},
}

// fp16Spec is the baseline cache.
var fp16Spec, _ = quant.Formats().ParseSpec("fp16")

// Result is one shape's measurements.
type Result struct {
	Shape       string  `json:"shape"`
	DType       string  `json:"dtype"`
	WeightBytes int64   `json:"weight_bytes_per_step"`
	PrefillLen  int     `json:"prefill_tokens"`
	PrefillTokS float64 `json:"prefill_tok_s"`
	Decode      []Point `json:"decode"`
	// LimitTokS is the weight-streaming limit of decode at batch 1.
	LimitTokS float64 `json:"limit_tok_s"`
	Fraction  float64 `json:"decode_b1_fraction_of_limit"`
}

// Point is decode at one batch size.
type Point struct {
	Batch int     `json:"batch"`
	TokS  float64 `json:"tok_s"`
	StepS float64 `json:"step_s"`
}

// Attn is decode attention over long caches.
type Attn struct {
	Format   string  `json:"format"`
	Ctx      int     `json:"ctx"`
	Batch    int     `json:"batch"`
	Seconds  float64 `json:"seconds"`
	Bytes    int64   `json:"bytes"`
	GBs      float64 `json:"gb_s"`
	Fraction float64 `json:"fraction_of_bandwidth"`
	// VsFP16 is the time relative to the fp16 cache's at the same context
	// and batch (0 when fp16 was not measured).
	VsFP16 float64 `json:"time_vs_fp16"`
}

// Summary is what -json writes.
type Summary struct {
	Device    gpu.DeviceInfo `json:"device"`
	Bandwidth float64        `json:"read_bandwidth_gb_s"`
	Models    []Result       `json:"models"`
	Attention []Attn         `json:"attention"`
}

func main() {
	shapeList := flag.String("shapes", "1b,8b", "model shapes: "+strings.Join(slices.Sorted(maps.Keys(shapes)), ", "))
	dtype := flag.String("dtype", "F16", "weight type: F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K or Q6_K (every matrix in that type)")
	batches := flag.String("batches", "1,8,64", "decode batch sizes")
	prefill := flag.Int("prefill", 512, "prefill tokens")
	context0 := flag.Int("context", 128, "tokens in each sequence before decode is timed")
	steps := flag.Int("steps", 32, "decode steps per timed run")
	reps := flag.Int("reps", 3, "timed runs per figure (median)")
	attnCtx := flag.String("attn-ctx", "8192,32768,131072", "decode attention benchmark: context lengths (empty: skip)")
	attnFormats := flag.String("attn-formats", "fp16,fp8-e4m3,q8_0,q4_0,q4_1,q5_0,iq4_nl,int8,int4,int2", "decode attention benchmark: cache formats (fp16 first: the others are timed relative to it)")
	attnBatch := flag.String("attn-batch", "1,32", "decode attention benchmark: batch sizes")
	bwBytes := flag.Int64("bw-bytes", 2<<30, "bytes read by the bandwidth probe")
	jsonOut := flag.String("json", "", "write the summary as JSON to this file")
	flag.Parse()
	if err := run(*shapeList, *dtype, *batches, *prefill, *context0, *steps, *reps, *attnCtx, *attnBatch, *attnFormats, *bwBytes, *jsonOut); err != nil {
		fmt.Fprintln(os.Stderr, "gpubench:", err)
		os.Exit(1)
	}
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad number %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func run(shapeList, dtype, batchList string, prefill, ctx0, steps, reps int, attnCtx, attnBatch, attnFormats string, bwBytes int64, jsonOut string) error {
	ctx := context.Background()
	dt, ok := map[string]tensor.DType{"F16": tensor.F16, "BF16": tensor.BF16, "Q8_0": tensor.Q80,
		"Q4_0": tensor.Q40, "Q4_K": tensor.Q4K, "Q5_K": tensor.Q5K, "Q6_K": tensor.Q6K}[dtype]
	if !ok {
		return fmt.Errorf("-dtype %q: want F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K or Q6_K", dtype)
	}
	batches, err := ints(batchList)
	if err != nil {
		return fmt.Errorf("-batches: %w", err)
	}
	actx, err := ints(attnCtx)
	if err != nil {
		return fmt.Errorf("-attn-ctx: %w", err)
	}
	abatch, err := ints(attnBatch)
	if err != nil {
		return fmt.Errorf("-attn-batch: %w", err)
	}
	be, err := gpu.Open(ctx, gpu.Options{})
	if err != nil {
		return err
	}
	dev := be.(*gpu.Device)
	defer dev.Close()
	sum := Summary{Device: dev.Info()}
	fmt.Printf("device: %s, %d SMs, %.1f GiB\n", sum.Device.Name, sum.Device.SMs, float64(sum.Device.TotalMemory)/(1<<30))
	bw, err := dev.Backend().MeasureBandwidth(bwBytes, 5)
	if err != nil {
		return fmt.Errorf("bandwidth: %w", err)
	}
	sum.Bandwidth = bw
	fmt.Printf("read bandwidth: %.0f GB/s (%d MiB read, median of 5)\n", bw, bwBytes>>20)
	for _, name := range strings.Split(shapeList, ",") {
		c, ok := shapes[name]
		if !ok {
			return fmt.Errorf("-shapes: unknown shape %q", name)
		}
		res, err := benchModel(ctx, dev, name, c, dt, prefill, ctx0, steps, reps, batches, bw)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		sum.Models = append(sum.Models, res)
	}
	reg := quant.Formats()
	for _, n := range actx {
		for _, b := range abatch {
			fp16 := 0.0
			for _, name := range strings.Split(attnFormats, ",") {
				f, err := reg.Lookup(name)
				if err != nil {
					return fmt.Errorf("-attn-formats: %w", err)
				}
				c := shapes["8b"]
				sec, bytes, err := dev.Backend().BenchDecodeAttention(ctx, f, c.HeadDim, c.KVHeads, c.Heads, n, b, max(3, reps))
				if err != nil {
					return fmt.Errorf("attention over %s at %d tokens, batch %d: %w", f.Name(), n, b, err)
				}
				gbs := float64(bytes) / sec / 1e9
				a := Attn{Format: f.Name(), Ctx: n, Batch: b, Seconds: sec, Bytes: bytes, GBs: gbs, Fraction: gbs / bw}
				if f == quant.FP16 {
					fp16 = sec
				}
				if fp16 > 0 {
					a.VsFP16 = sec / fp16
				}
				sum.Attention = append(sum.Attention, a)
				fmt.Printf("decode attention, 8b geometry (32 q / 8 kv heads, head_dim 128), %s cache, %d tokens × %d seqs: %.1f µs per layer (%.2fx fp16's time), %.0f GB/s = %.0f%% of measured bandwidth\n",
					f.Name(), n, b, sec*1e6, a.VsFP16, gbs, 100*a.Fraction)
			}
		}
	}
	if jsonOut != "" {
		b, err := json.MarshalIndent(sum, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(jsonOut, append(b, '\n'), 0o644)
	}
	return nil
}

func benchModel(ctx context.Context, dev *gpu.Device, name string, c runtime.Config, dt tensor.DType, prefill, ctx0, steps, reps int, batches []int, bw float64) (Result, error) {
	t0 := time.Now()
	m, err := modeltest.RandomModelFast(c, dt, 1)
	if err != nil {
		return Result{}, err
	}
	built := time.Since(t0)
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{Backend: dev})
	if err != nil {
		return Result{}, err
	}
	defer r.Close()
	fmt.Printf("%s %s: %.2f GB of weights, built in %.1fs, uploaded in %.1fs\n", name, dt, float64(m.WeightBytes())/1e9, built.Seconds(), time.Since(t0).Seconds()-built.Seconds())
	// Bytes a decode step reads: every weight but the embedding table,
	// of which it gathers one row per token.
	streamed := m.WeightBytes()
	if m.Output != m.Embed {
		streamed -= m.Embed.Bytes()
	}
	res := Result{Shape: name, DType: dt.String(), WeightBytes: streamed, PrefillLen: prefill}
	layout, err := kvcache.NewLayout(m.Geometry(), fp16Spec, 0)
	if err != nil {
		return res, err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	tokens := func(n int) []int {
		t := make([]int, n)
		for i := range t {
			t[i] = rng.IntN(c.Vocab)
		}
		return t
	}
	sink := func(e, i int, logits []float32) error { return nil }
	// Prefill: one sequence of prefill tokens, logits of the last.
	var times []float64
	for rep := 0; rep <= reps; rep++ {
		cache, err := r.NewCache(layout, kvcache.Options{Blocks: layout.BlocksFor(prefill)})
		if err != nil {
			return res, err
		}
		if err := cache.AddSeq(0); err != nil {
			return res, err
		}
		start := time.Now()
		if err := r.Stream(ctx, []runtime.Entry{{Cache: cache, Seq: 0, Tokens: tokens(prefill), Logits: runtime.LastLogits}}, sink); err != nil {
			return res, err
		}
		if rep > 0 {
			times = append(times, time.Since(start).Seconds())
		}
	}
	res.PrefillTokS = float64(prefill) / median(times)
	fmt.Printf("  prefill %d tokens: %.0f tok/s\n", prefill, res.PrefillTokS)
	res.LimitTokS = bw * 1e9 / float64(streamed)
	for _, b := range batches {
		cache, err := r.NewCache(layout, kvcache.Options{Blocks: b * layout.BlocksFor(ctx0+(reps+1)*steps)})
		if err != nil {
			return res, err
		}
		var entries []runtime.Entry
		for s := 0; s < b; s++ {
			if err := cache.AddSeq(kvcache.SeqID(s)); err != nil {
				return res, err
			}
			entries = append(entries, runtime.Entry{Cache: cache, Seq: kvcache.SeqID(s), Tokens: tokens(ctx0), Logits: runtime.NoLogits})
		}
		if err := r.Stream(ctx, entries, nil); err != nil {
			return res, err
		}
		times = times[:0]
		for rep := 0; rep <= reps; rep++ {
			start := time.Now()
			for i := 0; i < steps; i++ {
				for s := range entries {
					entries[s].Tokens, entries[s].Logits = tokens(1), runtime.LastLogits
				}
				if err := r.Stream(ctx, entries, sink); err != nil {
					return res, err
				}
			}
			if rep > 0 {
				times = append(times, time.Since(start).Seconds()/float64(steps))
			}
		}
		step := median(times)
		p := Point{Batch: b, StepS: step, TokS: float64(b) / step}
		res.Decode = append(res.Decode, p)
		line := fmt.Sprintf("  decode batch %d: %.0f tok/s (%.2f ms a step)", b, p.TokS, step*1e3)
		if b == 1 {
			res.Fraction = p.TokS / res.LimitTokS
			line += fmt.Sprintf(" = %.0f%% of the weight-streaming limit (%.0f tok/s)", 100*res.Fraction, res.LimitTokS)
		}
		fmt.Println(line)
	}
	return res, nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
