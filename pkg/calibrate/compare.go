package calibrate

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
)

// Candidate is one set of scales to compare.
type Candidate struct {
	// Name labels the candidate (a strategy, "shipped").
	Name   string
	Scales *Scales
}

// CompareOptions configure Compare.
type CompareOptions struct {
	// Texts are the held-out texts (not the calibration data).
	Texts []eval.Text
	// Text configures the teacher-forced scoring (chunk size, chunks).
	Text    eval.TextOptions
	Workers int
	// Backend runs the model (nil: the CPU backend).
	Backend backend.Backend
	// Progress, when set, is called after each text chunk.
	Progress func(done, total int)
}

// Comparison is Compare's result (schema kvq.calibrate.compare/v1).
type Comparison struct {
	Schema string `json:"schema"`
	// Ctx, Chunks and Tokens describe the held-out scoring.
	Ctx     int                `json:"ctx"`
	Chunks  int                `json:"chunks"`
	Tokens  int                `json:"tokens"`
	Results []CandidateResult  `json:"results"`
	Verdict *CompareRecommends `json:"recommendation,omitempty"`
}

// CandidateResult is one candidate measured on the held-out text.
type CandidateResult struct {
	Name string `json:"name"`
	// ClipK and ClipV are the shares of held-out key and value entries
	// whose |x| exceeds what the scale can represent (fp8 max · scale).
	ClipK float64 `json:"clip_k"`
	ClipV float64 `json:"clip_v"`
	// ErrK and ErrV are the relative reconstruction errors of the fp8
	// round trip, Σ(q(x) − x)² / Σx², over the held-out keys and values.
	ErrK float64 `json:"rel_err_k"`
	ErrV float64 `json:"rel_err_v"`
	// Teacher-forced metrics against the fp16 cache.
	KLD        float64 `json:"kld"`
	KLDErr     float64 `json:"kld_err"`
	KLDP99     float64 `json:"kld_p99"`
	SameTop    float64 `json:"same_top"`
	SameTopErr float64 `json:"same_top_err"`
	PPLRatio   float64 `json:"ppl_ratio"`
	// Failed says why the candidate could not run (invalid scales); the
	// metrics are then zero.
	Failed string `json:"failed,omitempty"`
	kld    []float64
}

// CompareRecommends names the best candidate by mean KLD and how sure the
// comparison is.
type CompareRecommends struct {
	Best     string `json:"best"`
	RunnerUp string `json:"runner_up,omitempty"`
	// Margin is the runner-up's mean KLD minus the best's, MarginErr its
	// paired standard error over positions; Significant when Margin >
	// 2·MarginErr.
	Margin      float64 `json:"margin"`
	MarginErr   float64 `json:"margin_err"`
	Significant bool    `json:"significant"`
	Text        string  `json:"text"`
}

// baselineName names the fp16 cache in Compare's runs.
const baselineName = "fp16"

// Compare scores each candidate's scales on held-out text against an fp16
// cache, all side by side in one teacher-forced pass: the clip rate and
// reconstruction error of the keys and values the fp16 run writes, and the
// KL divergence and top-1 agreement of the next-token distributions.
// Candidates whose scales a cache refuses (zero, negative, NaN) are
// reported as failed, not run.
func Compare(ctx context.Context, m *runtime.Model, cands []Candidate, opts CompareOptions) (*Comparison, error) {
	if len(cands) == 0 {
		return nil, fmt.Errorf("%w: nothing to compare", ErrOptions)
	}
	if len(opts.Texts) == 0 {
		return nil, fmt.Errorf("%w: no held-out text", ErrOptions)
	}
	res := &Comparison{Schema: "kvq.calibrate.compare/v1"}
	specs := []quant.Spec{quant.NewSpec(baselineName, quant.FP16, quant.FP16)}
	meas := &errorMeter{layers: m.Config.Layers, heads: m.Config.KVHeads, dim: m.Config.HeadDim}
	var run []int // indices of candidates that run
	for i, c := range cands {
		res.Results = append(res.Results, CandidateResult{Name: c.Name})
		spec, err := c.Scales.Spec("fp8 " + c.Name)
		if err == nil {
			err = c.Scales.Valid()
		}
		if err != nil {
			res.Results[i].Failed = err.Error()
			continue
		}
		specs = append(specs, spec)
		run = append(run, i)
		meas.cands = append(meas.cands, c.Scales)
	}
	meas.init()
	if len(run) > 0 {
		r, err := runtime.NewRunner(m, runtime.RunnerOptions{Backend: opts.Backend, Workers: opts.Workers, Observer: meas})
		if err != nil {
			return nil, err
		}
		defer r.Close()
		to := opts.Text
		to.KeepPositions = true
		to.Progress = opts.Progress
		tr, err := eval.TeacherForced(ctx, r, specs, opts.Texts, to)
		if err != nil {
			return nil, err
		}
		res.Ctx, res.Chunks, res.Tokens = tr.Ctx, tr.Chunks, tr.Caches[0].Tokens
		for j, i := range run {
			tm := tr.Caches[j+1]
			cr := &res.Results[i]
			cr.KLD, cr.KLDErr, cr.KLDP99 = tm.KLD.Mean, tm.KLD.Err, tm.KLD.P99
			cr.SameTop, cr.SameTopErr = tm.SameTop, tm.SameTopErr
			cr.PPLRatio = math.Exp(tm.LnPPLRatio)
			cr.kld = tm.PerPosition.KLD
			cr.ClipK, cr.ClipV, cr.ErrK, cr.ErrV = meas.result(j)
		}
	}
	res.Verdict = recommend(res.Results)
	return res, nil
}

// Valid reports scales a cache would refuse (zero, negative, NaN, Inf,
// missing), naming the first.
func (s *Scales) Valid() error {
	for l := range s.Layers {
		for _, key := range []bool{true, false} {
			v, err := s.Scales(l, key)
			if err != nil {
				return err
			}
			for _, x := range v {
				if !(x > 0) || math.IsInf(float64(x), 0) {
					return fmt.Errorf("layer %d %s scale %g cannot run (a cache needs a positive finite scale; vLLM would produce NaN or garbage)", l, sideName(key), x)
				}
			}
		}
	}
	return nil
}

// Repaired returns a copy of s with every invalid scale set to 1.0 (what
// running the rest of a broken checkpoint's scales looks like), and how
// many were replaced.
func (s *Scales) Repaired() (*Scales, int) {
	out := *s
	out.K, out.V = make([][]float32, s.Layers), make([][]float32, s.Layers)
	n := 0
	for l := range s.Layers {
		for _, side := range []struct{ dst, src *[]float32 }{{&out.K[l], &s.K[l]}, {&out.V[l], &s.V[l]}} {
			v := slices.Clone(*side.src)
			if v == nil {
				v = []float32{1}
				n++
			}
			for i, x := range v {
				if !(x > 0) || math.IsInf(float64(x), 0) {
					v[i] = 1
					n++
				}
			}
			*side.dst = v
		}
	}
	return &out, n
}

// recommend picks the candidate with the least mean KLD and tests its
// margin over the runner-up, paired over positions.
func recommend(rs []CandidateResult) *CompareRecommends {
	var ok []int
	for i, r := range rs {
		if r.Failed == "" && r.kld != nil {
			ok = append(ok, i)
		}
	}
	if len(ok) == 0 {
		return nil
	}
	slices.SortStableFunc(ok, func(a, b int) int {
		switch {
		case rs[a].KLD < rs[b].KLD:
			return -1
		case rs[a].KLD > rs[b].KLD:
			return 1
		}
		return 0
	})
	best := rs[ok[0]]
	v := &CompareRecommends{Best: best.Name}
	if len(ok) == 1 {
		v.Text = fmt.Sprintf("%s: mean KLD %.4g (the only candidate that runs)", best.Name, best.KLD)
		return v
	}
	second := rs[ok[1]]
	v.RunnerUp = second.Name
	diff := make([]float64, len(best.kld))
	for i := range diff {
		diff[i] = second.kld[i] - best.kld[i]
	}
	v.Margin, v.MarginErr = eval.MeanStdErr(diff)
	v.Significant = v.Margin > 2*v.MarginErr && v.Margin > 0
	rel := ""
	if second.KLD > 0 {
		rel = fmt.Sprintf(", %.0f%% lower", 100*v.Margin/second.KLD)
	}
	sig := "beyond noise (margin > 2 paired standard errors over positions)"
	if !v.Significant {
		sig = "within noise: on this text the two are equally good"
	}
	sigmas := math.Inf(1)
	if v.MarginErr > 0 {
		sigmas = v.Margin / v.MarginErr
	}
	v.Text = fmt.Sprintf("%s: mean KLD %.4g against %.4g for %s (margin %.3g ± %.2g%s, %.1fσ): %s",
		best.Name, best.KLD, second.KLD, second.Name, v.Margin, v.MarginErr, rel, sigmas, sig)
	return v
}

// errorMeter is a KVObserver that measures, on the fp16 baseline cache's
// keys and values, every candidate's clip rate and fp8 round-trip error.
type errorMeter struct {
	layers, heads, dim int
	cands              []*Scales
	kind               []quant.FP8Kind
	// per candidate, per side (0 K, 1 V): clipped, total, Σerr², Σx²
	clip, total [][2]int64
	errSq, sq   [][2]float64
}

var _ runtime.KVObserver = (*errorMeter)(nil)

func (e *errorMeter) init() {
	n := len(e.cands)
	e.clip, e.total = make([][2]int64, n), make([][2]int64, n)
	e.errSq, e.sq = make([][2]float64, n), make([][2]float64, n)
	for _, c := range e.cands {
		k := quant.E4M3
		if c.DType == "float8_e5m2" {
			k = quant.E5M2
		}
		e.kind = append(e.kind, k)
	}
}

func (e *errorMeter) ObserveKV(o *runtime.KVObservation) {
	if o.Cache.Layout().Spec.String() != baselineName {
		return
	}
	w := e.heads * e.dim
	for ci, c := range e.cands {
		kind := e.kind[ci]
		fmax := kind.Max()
		for side, x := range [2][]float32{o.K, o.V} {
			scales, _ := c.Scales(o.Layer, side == 0)
			for t := range o.N {
				row := x[t*w : (t+1)*w]
				for h := range e.heads {
					s := scales[0]
					if len(scales) > 1 {
						s = scales[h]
					}
					for _, v := range row[h*e.dim : (h+1)*e.dim] {
						if float32(math.Abs(float64(v))) > fmax*s {
							e.clip[ci][side]++
						}
						q := kind.Decode(kind.Encode(v/s, true)) * s
						d := float64(q - v)
						e.errSq[ci][side] += d * d
						e.sq[ci][side] += float64(v) * float64(v)
					}
					e.total[ci][side] += int64(e.dim)
				}
			}
		}
	}
}

func (e *errorMeter) result(ci int) (clipK, clipV, errK, errV float64) {
	rate := func(a, b int64) float64 {
		if b == 0 {
			return 0
		}
		return float64(a) / float64(b)
	}
	rel := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	return rate(e.clip[ci][0], e.total[ci][0]), rate(e.clip[ci][1], e.total[ci][1]),
		rel(e.errSq[ci][0], e.sq[ci][0]), rel(e.errSq[ci][1], e.sq[ci][1])
}
