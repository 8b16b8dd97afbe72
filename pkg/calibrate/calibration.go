package calibrate

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
)

// Schemas of the package's JSON results: kvq calibrate's (Result) and kvq
// calibrate audit's (Audit). Fields are only added under one schema.
const (
	Schema      = "kvq.calibrate/v1"
	AuditSchema = "kvq.calibrate.audit/v1"
)

// Result is Calibrate's summary and the JSON of kvq calibrate --output
// json (schema kvq.calibrate/v1); kvq plan --from reads it back with this
// type.
type Result struct {
	Schema   string        `json:"schema"`
	Model    string        `json:"model"`
	Data     DataInfo      `json:"data"`
	Strategy string        `json:"strategy"`
	Describe string        `json:"description"`
	DType    string        `json:"dtype"`
	Scales   []LayerScales `json:"scales"`
	Compare  *Comparison   `json:"compare,omitempty"`
	HeldOut  []string      `json:"held_out,omitempty"`
	// Files are the files written (Calibration.Write and the caller's).
	Files []string `json:"files"`
}

// LayerScales is one layer's exported scales and the data's absmax.
type LayerScales struct {
	Layer   int       `json:"layer"`
	K       []float32 `json:"k_scale"`
	V       []float32 `json:"v_scale"`
	KAbsmax float64   `json:"k_absmax"`
	VAbsmax float64   `json:"v_absmax"`
	// Sliding marks a sliding-window layer of a model that mixes them
	// with global ones (Gemma): its keys come from a window of positions
	// and, with a spec's sliding= part, it may keep another format.
	Sliding bool `json:"sliding,omitempty"`
}

// Stages of Calibrate, as its Progress callback names them.
const (
	// StageRecord is the recording pass over the calibration samples.
	StageRecord = "calibrate"
	// StageCompare is the held-out comparison of the strategies.
	StageCompare = "compare"
)

// Options configure Calibrate.
type Options struct {
	// Model names the model in the result, the scales and the codebooks.
	Model string
	// Strategy is the strategy to export, unless Best.
	Strategy Strategy
	// Best exports the strategy the comparison recommends, parsed at
	// Granularity; it needs Compare.
	Best        bool
	Granularity Granularity
	// Compare are the strategies to measure on the held-out Texts (none:
	// no comparison); HeldOut names the texts in the result.
	Compare []Strategy
	Texts   []eval.Text
	HeldOut []string
	Text    eval.TextOptions
	// Kind is the fp8 encoding; DType the dtype the scales are rounded to
	// ("": the model's weights', F32 for quantized weights).
	Kind  quant.FP8Kind
	DType string
	// Codebooks are KVQuant formats (kvquant4, kvquant3, kvquant2) to fit
	// codebooks for; Write writes them.
	Codebooks []string
	// WarmupLen and Seed make the random-token warm-up batch of
	// warmup:random (one sequence of WarmupLen tokens).
	WarmupLen int
	Seed      uint64
	// Workers bounds the CPU backend's goroutines (0: GOMAXPROCS).
	Workers int
	// Backend runs the model (nil: the CPU backend).
	Backend backend.Backend
	// Progress, when set, is called with the stage (StageRecord,
	// StageCompare), the work done and the total: with done 0 when a stage
	// starts, then as work is done. Calls are made one at a time.
	Progress func(stage string, done, total int)
}

// ErrNoBest reports Options.Best when no compared strategy could run.
var ErrNoBest = errors.New("calibrate: no compared strategy could run")

// Calibration is what Calibrate computed, before anything is written.
type Calibration struct {
	// Result is the summary; Write adds the files it writes.
	Result *Result
	// Scales are the exported strategy's scales, rounded to DType.
	Scales *Scales
	DType  string
	// Stats are the recorded statistics (kvq calibrate stats's JSON).
	Stats *Stats

	rec       *Recorder
	codebooks []string
}

// Calibrate records m's keys and values over data, computes the scales of
// every compared strategy and measures them on the held-out texts, picks
// the exported strategy (opts.Strategy, or the best measured) and computes
// its scales. It writes nothing (see Write). Errors about the options wrap
// ErrOptions (or eval.ErrOptions for the held-out scoring).
func Calibrate(ctx context.Context, m *runtime.Model, data *Data, opts Options) (*Calibration, error) {
	progress := opts.Progress
	if progress == nil {
		progress = func(string, int, int) {}
	}
	for _, c := range opts.Codebooks {
		if c != "kvquant4" && c != "kvquant3" && c != "kvquant2" {
			return nil, fmt.Errorf("%w: codebook format %q (valid: kvquant4, kvquant3, kvquant2)", ErrOptions, c)
		}
	}
	all := append([]Strategy(nil), opts.Compare...)
	if !opts.Best {
		all = append(all, opts.Strategy)
	}
	keep := 0
	if len(opts.Codebooks) > 0 {
		keep = 16384
	}
	progress(StageRecord, 0, len(data.Samples))
	rec, err := Record(ctx, m, data, RunOptions{Record: RecordOptions{MSE: needsObserver(all, ObserverMSE), MSEKind: opts.Kind, KeepTokens: keep},
		Workers: opts.Workers, Backend: opts.Backend, Progress: func(done, total int) { progress(StageRecord, done, total) }})
	if err != nil {
		return nil, err
	}
	var warm *Recorder
	if NeedsRandomWarmup(all) {
		rd := RandomData(m, 1, opts.WarmupLen, opts.Seed)
		if warm, err = Record(ctx, m, rd, RunOptions{Workers: opts.Workers, Backend: opts.Backend}); err != nil {
			return nil, err
		}
	}
	dt := opts.DType
	if dt == "" {
		dt = modelDType(m)
	}
	sopts := ScaleOptions{Kind: opts.Kind, DType: dt}
	info := data.Info()
	compute := func(s Strategy) (*Scales, error) {
		sc, err := Compute(s, rec, warm, sopts)
		if err != nil {
			return nil, err
		}
		sc.Model, sc.Data = opts.Model, info
		return sc, nil
	}
	res := &Result{Schema: Schema, Model: opts.Model, Data: info, DType: dt}
	strategy := opts.Strategy
	if len(opts.Compare) > 0 {
		var cands []Candidate
		for _, s := range opts.Compare {
			sc, err := compute(s)
			if err != nil {
				return nil, err
			}
			cands = append(cands, Candidate{Name: s.String(), Scales: sc})
		}
		res.HeldOut = opts.HeldOut
		progress(StageCompare, 0, 1)
		res.Compare, err = Compare(ctx, m, cands, CompareOptions{Texts: opts.Texts, Workers: opts.Workers, Backend: opts.Backend,
			Text: opts.Text, Progress: func(done, total int) { progress(StageCompare, done, total) }})
		if err != nil {
			return nil, err
		}
		if opts.Best {
			if res.Compare.Verdict == nil {
				return nil, ErrNoBest
			}
			if strategy, err = ParseStrategy(res.Compare.Verdict.Best, opts.Granularity); err != nil {
				return nil, err
			}
		}
	}
	scales, err := compute(strategy)
	if err != nil {
		return nil, err
	}
	res.Strategy, res.Describe = strategy.String(), strategy.Describe()
	st := rec.Stats(opts.Model, info, nil)
	local := map[int]bool{}
	for _, l := range m.LocalLayers() {
		local[l] = true
	}
	for l := range scales.Layers {
		res.Scales = append(res.Scales, LayerScales{Layer: l, K: scales.K[l], V: scales.V[l],
			KAbsmax: st.Layer[l].K.Absmax, VAbsmax: st.Layer[l].V.Absmax, Sliding: local[l]})
	}
	return &Calibration{Result: res, Scales: scales, DType: dt, Stats: st, rec: rec, codebooks: opts.Codebooks}, nil
}

// Write writes into dir the scales in every format the engines load
// (WriteExports, for a model of type modelType) and the fitted codebooks
// (codebook-FORMAT.json), adding each file to c.Result.Files.
func (c *Calibration) Write(dir, modelType string) error {
	files, err := WriteExports(dir, c.Scales, c.DType, modelType)
	c.Result.Files = files
	if err != nil {
		return err
	}
	for _, name := range c.codebooks {
		f := quant.Formats().MustLookup(name)
		bits := int(name[len(name)-1] - '0')
		cb, err := FitCodebooks(c.rec, f, bits)
		if err != nil {
			return err
		}
		info := c.Result.Data
		cb.Calibration = map[string]string{"model": c.Result.Model, "data_sha256": info.SHA256, "data": info.Source}
		p := filepath.Join(dir, CodebookFile(name))
		if err := cb.Save(p); err != nil {
			return err
		}
		c.Result.Files = append(c.Result.Files, p)
	}
	return nil
}

// CodebookFile is the name Write gives the codebooks of a kvquant format.
func CodebookFile(format string) string { return "codebook-" + format + ".json" }

func needsObserver(ss []Strategy, observer string) bool {
	for _, s := range ss {
		if s.Kind == StrategyDataset && s.Observer == observer {
			return true
		}
	}
	return false
}

// modelDType is the safetensors dtype of the model's weights (F32 for
// quantized GGUF weights).
func modelDType(m *runtime.Model) string {
	if dts := m.DTypes(); len(dts) > 0 {
		switch dts[0] {
		case "F16", "BF16", "F32":
			return dts[0]
		}
	}
	return "F32"
}
