package calibrate

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
)

// Finding levels: an error is a problem that makes the cache wrong or the
// scales ignored (kvq calibrate audit exits non-zero); a warning is
// suspicious; info is a fact worth knowing.
const (
	LevelError   = "error"
	LevelWarning = "warning"
	LevelInfo    = "info"
)

// Finding is one audit result. Layer is -1 for the checkpoint as a whole;
// Side is "k", "v" or "".
type Finding struct {
	Level   string `json:"level"`
	Code    string `json:"code"`
	Layer   int    `json:"layer"`
	Side    string `json:"side,omitempty"`
	Message string `json:"message"`
}

// AuditLayer is one layer's shipped scales and what the data says of them.
type AuditLayer struct {
	Layer int       `json:"layer"`
	K     []float32 `json:"k_scale"`
	V     []float32 `json:"v_scale"`
	KFrom string    `json:"k_from,omitempty"`
	VFrom string    `json:"v_from,omitempty"`
	// ClipK and ClipV are the shares of calibration-data entries beyond
	// fp8 max · scale (with data).
	ClipK float64 `json:"clip_k"`
	ClipV float64 `json:"clip_v"`
	// NeedK and NeedV are the smallest per-tensor scales that clip
	// nothing on the data: absmax/fp8 max.
	NeedK float64 `json:"need_k"`
	NeedV float64 `json:"need_v"`
}

// Audit is kvq calibrate audit's result (schema kvq.calibrate.audit/v1).
type Audit struct {
	Schema   string       `json:"schema"`
	Source   string       `json:"source"`
	DType    string       `json:"scale_dtype,omitempty"`
	Scheme   any          `json:"kv_cache_scheme,omitempty"`
	Layers   []AuditLayer `json:"layers"`
	Findings []Finding    `json:"findings"`
	Errors   int          `json:"errors"`
	Warnings int          `json:"warnings"`
	// Effect is the measured comparison (shipped, calibrated, 1.0) when
	// the audit ran the model.
	Effect *Comparison `json:"effect,omitempty"`
	// Data identifies the calibration data the clip check used.
	Data *DataInfo `json:"data,omitempty"`
}

// Clip thresholds of the audit: a share of entries beyond the scale's
// range above ClipError is an error, above ClipWarning a warning.
const (
	ClipError   = 1e-3
	ClipWarning = 1e-4
	// outlierFactor: a layer's scale this many times above or below the
	// median of the same side over the layers is an outlier.
	outlierFactor = 10
)

// AuditScales checks shipped scales. rec, when not nil, holds statistics
// of calibration data for the clipping and underflow checks; kind is the
// fp8 encoding the scales are for.
func AuditScales(sh *Shipped, rec *Recorder, kind quant.FP8Kind) *Audit {
	a := &Audit{Schema: AuditSchema, Source: sh.Source, DType: sh.DType}
	if sh.Scheme != nil {
		a.Scheme = sh.Scheme
	}
	add := func(level, code string, layer int, side, format string, args ...any) {
		a.Findings = append(a.Findings, Finding{Level: level, Code: code, Layer: layer, Side: side, Message: fmt.Sprintf(format, args...)})
	}
	for _, p := range sh.Problems {
		add(LevelError, "unreadable", -1, "", "%v", p)
	}
	declared := sh.Scheme != nil || strings.EqualFold(sh.ModelOpt, "FP8")
	if !sh.Any() {
		switch {
		case declared:
			add(LevelError, "missing", -1, "", "the checkpoint declares an fp8 KV cache (%s) but ships no k_scale/v_scale tensors: vLLM runs it with scale 1.0", declaredBy(sh))
		case len(sh.Problems) == 0:
			add(LevelWarning, "none", -1, "", "no KV scales: vLLM runs an fp8 e4m3 cache with scale 1.0 (and warns); calibrate with kvq calibrate")
		}
		a.count()
		return a
	}
	if sh.Scheme == nil && sh.QuantMethod == "" && sh.ModelOpt == "" && sh.Checkpoint {
		add(LevelError, "ignored", -1, "", "scale tensors but no quantization_config in config.json: vLLM has no k_scale parameters to load them into and ignores them (add the kv_cache_scheme kvq calibrate writes)")
	}
	for _, f := range sh.NotInIndex {
		add(LevelError, "not-in-index", -1, "", "%s holds scales but model.safetensors.index.json does not list it: vLLM never reads it", f)
	}
	if sh.Scheme != nil {
		strategy, _ := sh.Scheme["strategy"].(string)
		perHead := false
		for l := range sh.Layers {
			perHead = perHead || len(sh.K[l]) > 1 || len(sh.V[l]) > 1
		}
		switch {
		case strategy == "attn_head" && !perHead:
			add(LevelError, "scheme", -1, "", "kv_cache_scheme says strategy attn_head but the tensors hold one scale per layer")
		case strategy == "tensor" && perHead:
			add(LevelError, "scheme", -1, "", "kv_cache_scheme says strategy tensor but the tensors hold one scale per KV head")
		}
		if nb, ok := sh.Scheme["num_bits"].(float64); ok && nb != 8 {
			add(LevelWarning, "scheme", -1, "", "kv_cache_scheme num_bits is %g; fp8 caches use 8", nb)
		}
	}
	if len(sh.Legacy) > 0 {
		add(LevelInfo, "legacy", -1, "", "layers %v ship one deprecated kv_scale: vLLM uses it for both K and V", sh.Legacy)
	}
	if sh.QScales == 0 {
		add(LevelInfo, "no-q-scale", -1, "", "no q_scale: where attention runs in fp8 (FlashAttention 3), vLLM sets q_scale = k_scale")
	}
	fmax := float64(kind.Max())
	var missing []string
	allOne, identical := true, true
	for l := range sh.Layers {
		al := AuditLayer{Layer: l, K: sh.K[l], V: sh.V[l], KFrom: sh.KFrom[l], VFrom: sh.VFrom[l]}
		for _, side := range []struct {
			name  string
			vals  []float32
			other []float32
			s     Side
			clip  *float64
			need  *float64
		}{{"k", sh.K[l], sh.V[l], SideK, &al.ClipK, &al.NeedK}, {"v", sh.V[l], sh.K[l], SideV, &al.ClipV, &al.NeedV}} {
			if side.vals == nil {
				if side.other == nil {
					missing = append(missing, fmt.Sprintf("%d", l))
				} else if !slices.Contains(sh.Legacy, l) {
					add(LevelWarning, "one-side", l, side.name, "layer %d ships no %s_scale: vLLM uses the other side's", l, side.name)
				}
				continue
			}
			for h, x := range side.vals {
				where := fmt.Sprintf("layer %d %s_scale", l, side.name)
				if len(side.vals) > 1 {
					where += fmt.Sprintf(" head %d", h)
				}
				switch {
				case math.IsNaN(float64(x)) || math.IsInf(float64(x), 0):
					add(LevelError, "non-finite", l, side.name, "%s is %v", where, x)
				case x == 0:
					add(LevelError, "zero", l, side.name, "%s is 0: the cache stores x/0 and reads back 0 or NaN, so the layer's entries are lost (llm-compressor#2853 wrote such scales silently)", where)
				case x < 0:
					add(LevelError, "negative", l, side.name, "%s is %g: negative (−1 is vLLM's placeholder for a scale that was never loaded)", where, x)
				}
				if x != 1 {
					allOne = false
				}
			}
			if !slices.Equal(side.vals, side.other) {
				identical = false
			}
			if rec != nil {
				acc := rec.acc[l][side.s]
				*side.need = float64(absmax(minOf(acc.min), maxOf(acc.max))) / fmax
				clipped, total := int64(0), int64(0)
				underflow := false
				for h := range rec.heads {
					s := side.vals[0]
					if len(side.vals) > 1 {
						s = side.vals[h]
					}
					var n int64
					for _, c := range acc.hist[h] {
						n += int64(c)
					}
					total += n
					if s > 0 {
						hmax := float64(absmax(minOf(acc.min[h*rec.dim:(h+1)*rec.dim]), maxOf(acc.max[h*rec.dim:(h+1)*rec.dim])))
						clipped += countAbove(acc.hist[h], fmax*float64(s), hmax)
						// Underflow: half the entries below e4m3's smallest normal.
						if med := histPercentile(acc.hist[h], n, 50); med > 0 && med < math.Ldexp(1, minNormalExp(kind))*float64(s) {
							underflow = true
						}
					}
				}
				if total > 0 {
					*side.clip = float64(clipped) / float64(total)
				}
				if underflow {
					add(LevelWarning, "underflow", l, side.name, "layer %d %s_scale is far above what the data needs (%.3g): most entries fall among fp8's subnormals and lose precision", l, side.name, *side.need)
				}
				switch {
				case *side.clip > ClipError:
					add(LevelError, "clipping", l, side.name, "layer %d %s_scale clips %.2g%% of the calibration data's entries (it needs at least %.4g)", l, side.name, 100**side.clip, *side.need)
				case *side.clip > ClipWarning:
					add(LevelWarning, "clipping", l, side.name, "layer %d %s_scale clips %.2g%% of the calibration data's entries (it needs %.4g to clip none)", l, side.name, 100**side.clip, *side.need)
				}
			}
		}
		a.Layers = append(a.Layers, al)
	}
	if len(missing) > 0 {
		add(LevelError, "missing", -1, "", "layers %s ship no scales: vLLM runs them with 1.0", strings.Join(missing, ", "))
	}
	if allOne {
		add(LevelError, "all-one", -1, "", "every scale is exactly 1.0, vLLM's uncalibrated default: an export that never calibrated (NVIDIA/Model-Optimizer#20)")
	} else {
		for l := range sh.Layers {
			for _, x := range sh.K[l] {
				if x == 1 {
					add(LevelWarning, "one", l, "k", "layer %d k_scale is exactly 1.0, vLLM's uncalibrated default", l)
					break
				}
			}
			for _, x := range sh.V[l] {
				if x == 1 {
					add(LevelWarning, "one", l, "v", "layer %d v_scale is exactly 1.0, vLLM's uncalibrated default", l)
					break
				}
			}
		}
	}
	if identical && sh.Layers > 0 && len(sh.Legacy) < sh.Layers {
		add(LevelWarning, "k-equals-v", -1, "", "K and V scales are identical in every layer: a merged scale (separate ones fixed quality in TensorRT-LLM#967)")
	}
	for _, side := range []struct {
		name string
		m    [][]float32
	}{{"k", sh.K}, {"v", sh.V}} {
		var vals []float64
		for _, v := range side.m {
			for _, x := range v {
				if x > 0 && !math.IsInf(float64(x), 0) {
					vals = append(vals, float64(x))
				}
			}
		}
		if len(vals) < 3 {
			continue
		}
		sorted := slices.Clone(vals)
		slices.Sort(sorted)
		med := sorted[len(sorted)/2]
		for l, v := range side.m {
			for _, x := range v {
				if x > 0 && (float64(x) > outlierFactor*med || float64(x) < med/outlierFactor) {
					add(LevelWarning, "outlier", l, side.name, "layer %d %s_scale %g is more than %d× off the median over layers (%.4g)", l, side.name, x, outlierFactor, med)
					break
				}
			}
		}
	}
	a.count()
	return a
}

func (a *Audit) count() {
	a.Errors, a.Warnings = 0, 0
	slices.SortStableFunc(a.Findings, func(x, y Finding) int { return levelRank(x.Level) - levelRank(y.Level) })
	for _, f := range a.Findings {
		switch f.Level {
		case LevelError:
			a.Errors++
		case LevelWarning:
			a.Warnings++
		}
	}
}

func levelRank(l string) int {
	switch l {
	case LevelError:
		return 0
	case LevelWarning:
		return 1
	}
	return 2
}

func declaredBy(sh *Shipped) string {
	if sh.Scheme != nil {
		return "config.json quantization_config.kv_cache_scheme"
	}
	return "hf_quant_config.json kv_cache_quant_algo " + sh.ModelOpt
}

// minNormalExp is the exponent of the smallest normal of kind: −6 (e4m3)
// or −14 (e5m2).
func minNormalExp(k quant.FP8Kind) int {
	if k == quant.E5M2 {
		return -14
	}
	return -6
}

func minOf(x []float32) float32 {
	m := float32(math.Inf(1))
	for _, v := range x {
		m = min(m, v)
	}
	return m
}

func maxOf(x []float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range x {
		m = max(m, v)
	}
	return m
}

// AuditEffect measures what the shipped scales do on held-out text
// (Compare with opts): the shipped scales as vLLM runs them (missing
// layers at 1.0; also with the invalid ones at 1.0 when there are any),
// against scales calibrated on rec (dataset:minmax:tensor) and 1.0 (vLLM's
// default), both rounded like the shipped ones so that only the values
// differ. kind is the fp8 encoding the scales are for.
func AuditEffect(ctx context.Context, m *runtime.Model, sh *Shipped, rec *Recorder, kind quant.FP8Kind, opts CompareOptions) (*Comparison, error) {
	kindName := map[quant.FP8Kind]string{quant.E4M3: "float8_e4m3fn", quant.E5M2: "float8_e5m2"}[kind]
	var cands []Candidate
	if sh.Any() {
		eff := sh.Effective()
		eff.DType = kindName
		cands = append(cands, Candidate{Name: "shipped", Scales: eff})
		if eff.Valid() != nil {
			fixed, n := eff.Repaired()
			cands = append(cands, Candidate{Name: fmt.Sprintf("shipped, %d invalid as 1.0", n), Scales: fixed})
		}
	}
	for _, name := range []string{"dataset", "default"} {
		s, _ := ParseStrategy(name, PerTensor)
		sc, err := Compute(s, rec, nil, ScaleOptions{Kind: kind, DType: shippedDType(sh)})
		if err != nil {
			return nil, err
		}
		label := "calibrated (dataset:minmax:tensor)"
		if name == "default" {
			label = "1.0 (vLLM's default)"
		}
		cands = append(cands, Candidate{Name: label, Scales: sc})
	}
	return Compare(ctx, m, cands, opts)
}

// shippedDType is the dtype the shipped scales were stored in, when it is
// one Compute can round to ("" otherwise: float32).
func shippedDType(sh *Shipped) string {
	switch sh.DType {
	case "F16", "BF16", "F32":
		return sh.DType
	}
	return ""
}
