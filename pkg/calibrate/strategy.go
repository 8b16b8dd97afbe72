package calibrate

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/kvqlabs/kvq/pkg/quant"
)

// Granularity is how many scales a layer side gets.
type Granularity int

// Granularities: one scale per layer for K and one for V (vLLM's
// per-tensor scales, llm-compressor's strategy "tensor"), or one per KV
// head (strategy "attn_head").
const (
	PerTensor Granularity = iota
	PerHead
)

// String is "tensor" or "head".
func (g Granularity) String() string {
	if g == PerHead {
		return "head"
	}
	return "tensor"
}

// ParseGranularity reads "tensor" (also "per-tensor") or "head" ("attn_head",
// "per-head").
func ParseGranularity(s string) (Granularity, error) {
	switch strings.ToLower(s) {
	case "tensor", "per-tensor", "":
		return PerTensor, nil
	case "head", "attn_head", "per-head":
		return PerHead, nil
	}
	return 0, fmt.Errorf("%w: granularity %q (valid: tensor, head)", ErrOptions, s)
}

// Strategy kinds.
const (
	// StrategyDefault is scale 1.0, what vLLM uses when a checkpoint ships
	// none (and warns for e4m3).
	StrategyDefault = "default"
	// StrategyWarmup is vLLM's calculate_kv_scales: the first batch's
	// absmax over 200 for keys and over 100 for values.
	StrategyWarmup = "warmup"
	// StrategyDataset is llm-compressor's static calibration with one of
	// its observers: max(|min|, |max|)/448 for e4m3.
	StrategyDataset = "dataset"
	// StrategyPercentile clips at a percentile of |x| over the whole data.
	StrategyPercentile = "percentile"
)

// Observers of the dataset strategy (llm-compressor's names).
const (
	ObserverMinMax       = "minmax"        // EMA of batch min and max, constant 0.01 (the default)
	ObserverStaticMinMax = "static_minmax" // running min and max over all data
	ObserverMSE          = "mse"           // EMA of the MSE-optimal clipped range
)

// DefaultAveraging is llm-compressor's averaging_constant: each batch
// moves the observed min and max by 1% of the way to its own (the first
// batch initializes them).
const DefaultAveraging = 0.01

// Strategy is one way to compute scales.
type Strategy struct {
	Kind string
	// Observer is the dataset strategy's observer.
	Observer string
	// Percentile is the percentile strategy's p (0 < p ≤ 100).
	Percentile float64
	// Random makes the warmup strategy run on a batch of random tokens, as
	// vLLM's profiling forward does; false uses the first data sample.
	Random      bool
	Granularity Granularity
}

// Strategies lists the strategy names ParseStrategy knows, for help text.
const Strategies = "default, warmup[:random|:data], dataset[:minmax|:static_minmax|:mse], percentile[:P], each with :tensor or :head"

// ParseStrategy parses NAME[:OPTION...]: default; warmup (options random,
// the default, or data); dataset (minmax, the default; static_minmax; mse);
// percentile (a number, default 99.99); and tensor or head for the
// granularity, which otherwise is g.
func ParseStrategy(text string, g Granularity) (Strategy, error) {
	parts := strings.Split(strings.ToLower(strings.TrimSpace(text)), ":")
	s := Strategy{Kind: parts[0], Granularity: g}
	bad := func(opt string) error {
		return fmt.Errorf("%w: strategy %q: unknown option %q (strategies: %s)", ErrOptions, text, opt, Strategies)
	}
	switch s.Kind {
	case StrategyDefault, StrategyWarmup:
		s.Random = s.Kind == StrategyWarmup
	case StrategyDataset:
		s.Observer = ObserverMinMax
	case StrategyPercentile:
		s.Percentile = 99.99
	default:
		return Strategy{}, fmt.Errorf("%w: unknown strategy %q (strategies: %s)", ErrOptions, text, Strategies)
	}
	for _, opt := range parts[1:] {
		switch {
		case opt == "tensor" || opt == "head":
			s.Granularity, _ = ParseGranularity(opt)
		case s.Kind == StrategyWarmup && (opt == "random" || opt == "data"):
			s.Random = opt == "random"
		case s.Kind == StrategyDataset && (opt == ObserverMinMax || opt == ObserverStaticMinMax || opt == ObserverMSE):
			s.Observer = opt
		case s.Kind == StrategyDataset && opt == "static":
			s.Observer = ObserverStaticMinMax
		case s.Kind == StrategyPercentile:
			p, err := strconv.ParseFloat(opt, 64)
			if err != nil || !(p > 0 && p <= 100) {
				return Strategy{}, fmt.Errorf("%w: strategy %q: percentile %q is not in (0, 100]", ErrOptions, text, opt)
			}
			s.Percentile = p
		default:
			return Strategy{}, bad(opt)
		}
	}
	if s.Kind == StrategyDefault && s.Granularity == PerHead {
		s.Granularity = PerTensor // 1.0 everywhere is the same either way
	}
	return s, nil
}

// ParseStrategies parses a comma-separated list.
func ParseStrategies(text string, g Granularity) ([]Strategy, error) {
	var out []Strategy
	for _, p := range strings.Split(text, ",") {
		if strings.TrimSpace(p) == "" {
			continue
		}
		s, err := ParseStrategy(p, g)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no strategies in %q", ErrOptions, text)
	}
	return out, nil
}

// String is the canonical name: "dataset:minmax:tensor", "warmup:random:head",
// "percentile:99.99:tensor", "default".
func (s Strategy) String() string {
	switch s.Kind {
	case StrategyDefault:
		return s.Kind
	case StrategyWarmup:
		src := "data"
		if s.Random {
			src = "random"
		}
		return s.Kind + ":" + src + ":" + s.Granularity.String()
	case StrategyDataset:
		return s.Kind + ":" + s.Observer + ":" + s.Granularity.String()
	case StrategyPercentile:
		return s.Kind + ":" + strconv.FormatFloat(s.Percentile, 'g', -1, 64) + ":" + s.Granularity.String()
	}
	return s.Kind
}

// Describe says in words what the strategy computes.
func (s Strategy) Describe() string {
	per := "one scale per layer for K and for V"
	if s.Granularity == PerHead {
		per = "one scale per KV head"
	}
	switch s.Kind {
	case StrategyDefault:
		return "scale 1.0 (vLLM without scales; it warns for e4m3)"
	case StrategyWarmup:
		src := "the first calibration sample"
		if s.Random {
			src = "a batch of random tokens"
		}
		return fmt.Sprintf("vLLM calculate_kv_scales: absmax/200 (K), /100 (V) of %s; %s", src, per)
	case StrategyDataset:
		obs := map[string]string{
			ObserverMinMax:       "moving average (0.01) of each batch's min and max",
			ObserverStaticMinMax: "min and max over all data",
			ObserverMSE:          "moving average of each batch's MSE-optimal clipped range",
		}[s.Observer]
		return fmt.Sprintf("llm-compressor %s observer: %s, scale = absmax/fp8 max; %s", s.Observer, obs, per)
	case StrategyPercentile:
		return fmt.Sprintf("clip at the %g-th percentile of |x| over all data, scale = it/fp8 max; %s", s.Percentile, per)
	}
	return s.Kind
}

// needsMSE reports whether any strategy needs the Recorder's MSE search.
func needsMSE(ss []Strategy) bool {
	for _, s := range ss {
		if s.Kind == StrategyDataset && s.Observer == ObserverMSE {
			return true
		}
	}
	return false
}

// NeedsRandomWarmup reports whether a strategy runs on random tokens.
func NeedsRandomWarmup(ss []Strategy) bool {
	for _, s := range ss {
		if s.Kind == StrategyWarmup && s.Random {
			return true
		}
	}
	return false
}

// ScaleOptions are what turns statistics into scales besides the strategy.
type ScaleOptions struct {
	// Kind is the fp8 encoding (E4M3 unless E5M2).
	Kind quant.FP8Kind
	// DType rounds every scale to the dtype it is shipped in ("F16",
	// "BF16" or "F32"; empty: F32), so that every export holds the same
	// value vLLM will load.
	DType string
	// Averaging is the moving-average constant (0: DefaultAveraging).
	Averaging float64
}

// Compute turns recorded statistics into scales by strategy s. warm holds
// the random-token warm-up batch for warmup:random (nil otherwise).
func Compute(s Strategy, rec, warm *Recorder, opts ScaleOptions) (*Scales, error) {
	if opts.Kind != quant.E5M2 {
		opts.Kind = quant.E4M3
	}
	if opts.Averaging == 0 {
		opts.Averaging = DefaultAveraging
	}
	if !(opts.Averaging > 0 && opts.Averaging <= 1) {
		return nil, fmt.Errorf("%w: averaging constant %g is not in (0, 1]", ErrOptions, opts.Averaging)
	}
	round, err := dtypeRounder(opts.DType)
	if err != nil {
		return nil, err
	}
	src := rec
	if s.Kind == StrategyWarmup && s.Random {
		if warm == nil {
			return nil, fmt.Errorf("%w: %s needs the random-token warm-up batch", ErrOptions, s)
		}
		src = warm
	}
	n := 1
	if s.Granularity == PerHead {
		n = rec.heads
	}
	sc := &Scales{DType: fp8DTypeName(opts.Kind), Strategy: s.String(), Granularity: s.Granularity,
		Layers: rec.layers, KVHeads: rec.heads, K: make([][]float32, rec.layers), V: make([][]float32, rec.layers)}
	fmax := float64(opts.Kind.Max())
	for l := range rec.layers {
		for _, side := range []Side{SideK, SideV} {
			a := src.acc[l][side]
			vals := make([]float32, n)
			for i := range vals {
				head := i
				if s.Granularity == PerTensor {
					head = -1
				}
				var v float64
				switch s.Kind {
				case StrategyDefault:
					v = 1
				case StrategyWarmup:
					if len(a.batches) == 0 {
						return nil, fmt.Errorf("%w: no data recorded for layer %d", ErrData, l)
					}
					div := float64(quant.FP8DynamicVDivisor)
					if side == SideK {
						div = quant.FP8DynamicKDivisor
					}
					lo, hi := a.batches[0].extremes(head)
					v = float64(absmax(lo, hi)) / div
				case StrategyDataset:
					lo, hi, err := a.observe(s.Observer, head, opts.Averaging)
					if err != nil {
						return nil, fmt.Errorf("layer %d %s: %w", l, side, err)
					}
					v = max(absmaxF(lo, hi)/fmax, epsFloat32)
				case StrategyPercentile:
					v = max(a.percentile(head, s.Percentile)/fmax, epsFloat32)
				}
				vals[i] = round(float32(v))
			}
			if side == SideK {
				sc.K[l] = vals
			} else {
				sc.V[l] = vals
			}
		}
	}
	return sc, nil
}

func absmaxF(lo, hi float64) float64 {
	if lo > hi {
		return 0
	}
	return math.Max(-math.Min(lo, 0), math.Max(hi, 0))
}

// extremes returns a batch's min and max for head (-1: the tensor).
func (b *batch) extremes(head int) (float32, float32) {
	if head < 0 {
		return b.tmin, b.tmax
	}
	return b.min[head], b.max[head]
}

// observe runs an llm-compressor observer over the batches of one tensor
// (head -1) or head and returns its final min and max.
func (a *sideAcc) observe(observer string, head int, c float64) (lo, hi float64, err error) {
	if len(a.batches) == 0 {
		return 0, 0, fmt.Errorf("%w: no data recorded", ErrData)
	}
	first := true
	for _, b := range a.batches {
		bl, bh := b.extremes(head)
		if bl > bh {
			continue // a batch of only non-finite values
		}
		l, h := float64(bl), float64(bh)
		if observer == ObserverMSE {
			if b.mseHead == nil {
				return 0, 0, fmt.Errorf("%w: the mse observer needs the recorder's MSE search (RecordOptions.MSE)", ErrOptions)
			}
			p := float64(b.mseTensor)
			if head >= 0 {
				p = float64(b.mseHead[head])
			}
			l, h = p*l, p*h
		}
		switch {
		case first:
			lo, hi, first = l, h, false
		case observer == ObserverStaticMinMax:
			lo, hi = math.Min(lo, l), math.Max(hi, h)
		default: // minmax and mse: moving averages
			lo += c * (l - lo)
			hi += c * (h - hi)
		}
	}
	return lo, hi, nil
}

// percentile is the p-th percentile of |x| of a head (or the tensor, -1).
func (a *sideAcc) percentile(head int, p float64) float64 {
	hist := make([]uint64, histBins)
	var n int64
	for h := range a.heads {
		if head >= 0 && h != head {
			continue
		}
		for b, c := range a.hist[h] {
			hist[b] += c
			n += int64(c)
		}
	}
	return histPercentile(hist, n, p)
}

func fp8DTypeName(k quant.FP8Kind) string {
	if k == quant.E5M2 {
		return "float8_e5m2"
	}
	return "float8_e4m3fn"
}
