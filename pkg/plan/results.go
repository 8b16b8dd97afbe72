package plan

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kvqlabs/kvq/pkg/eval"
)

// Results are earlier kvq runs' JSON outputs (kvq calibrate, kvq calibrate
// audit, kvq eval, kvq bench with --output json), found by their "schema"
// field in a directory: what turns a plan's "to run" items into measured
// ones.
type Results struct {
	Dir       string
	Calibrate *CalibrateResult
	Audit     *AuditResult
	Eval      *EvalResult
	Bench     *BenchResult
	// Ignored lists JSON files without a known schema.
	Ignored []string
}

// CalibrateResult is what the plan reads of kvq calibrate's output.
type CalibrateResult struct {
	File     string
	Strategy string `json:"strategy"`
	DType    string `json:"dtype"`
	Data     struct {
		Source string `json:"source"`
		SHA256 string `json:"sha256"`
	} `json:"data"`
	Files   []string `json:"files"`
	Compare *struct {
		Recommendation *struct {
			Best        string  `json:"best"`
			RunnerUp    string  `json:"runner_up"`
			Significant bool    `json:"significant"`
			Margin      float64 `json:"margin"`
			Text        string  `json:"text"`
		} `json:"recommendation"`
	} `json:"compare"`
}

// AuditResult is what the plan reads of kvq calibrate audit's output.
type AuditResult struct {
	File     string
	Source   string `json:"source"`
	Errors   int    `json:"errors"`
	Warnings int    `json:"warnings"`
	Findings []struct {
		Level   string `json:"level"`
		Message string `json:"message"`
	} `json:"findings"`
}

// EvalResult is a kvq eval report and its file.
type EvalResult struct {
	File string
	*eval.Report
}

// BenchResult is what the plan reads of kvq bench's output: per cache,
// the capacity and the latency it measured.
type BenchResult struct {
	File   string
	Budget int64 `json:"kv_budget_bytes"`
	Caches []struct {
		Cache string `json:"cache"`
		// Capacity is the largest concurrency that met the SLOs (0: none
		// measured).
		Capacity        int     `json:"capacity"`
		MaxConcurrency  float64 `json:"max_concurrent_requests"`
		OutputTPS       float64 `json:"output_throughput"`
		MedianTTFTms    float64 `json:"median_ttft_ms"`
		MedianTPOTms    float64 `json:"median_tpot_ms"`
		Preemptions     int64   `json:"preemptions"`
		RequestGoodput  float64 `json:"request_goodput"`
		RequestsPerSec  float64 `json:"request_throughput"`
		DecodeTPSDepth0 float64 `json:"decode_tokens_per_s"`
	} `json:"caches"`
}

// Schemas the plan reads.
const (
	schemaCalibrate = "kvq.calibrate/v1"
	schemaAudit     = "kvq.calibrate.audit/v1"
	schemaBench     = "kvq.bench/v1"
)

// ReadResults reads every .json file in dir (not below it) and keeps the
// newest of each kind by modification time. A file with a known schema
// that does not parse is an error naming it.
func ReadResults(dir string) (*Results, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrResults, err)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory", ErrResults, dir)
	}
	type dated struct {
		path string
		mod  int64
	}
	var files []dated
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			continue
		}
		files = append(files, dated{p, st.ModTime().UnixNano()})
	}
	slices.SortFunc(files, func(a, b dated) int { return int(a.mod - b.mod) })
	res := &Results{Dir: dir}
	for _, f := range files {
		data, err := os.ReadFile(f.path)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrResults, err)
		}
		var head struct {
			Schema string `json:"schema"`
		}
		if json.Unmarshal(data, &head) != nil {
			res.Ignored = append(res.Ignored, f.path)
			continue
		}
		bad := func(err error) error {
			return fmt.Errorf("%w: %s (schema %s): %w", ErrResults, f.path, head.Schema, err)
		}
		switch head.Schema {
		case schemaCalibrate:
			var c CalibrateResult
			if err := json.Unmarshal(data, &c); err != nil {
				return nil, bad(err)
			}
			c.File, res.Calibrate = f.path, &c
		case schemaAudit:
			var a AuditResult
			if err := json.Unmarshal(data, &a); err != nil {
				return nil, bad(err)
			}
			a.File, res.Audit = f.path, &a
		case eval.Schema:
			var r eval.Report
			if err := json.Unmarshal(data, &r); err != nil {
				return nil, bad(err)
			}
			res.Eval = &EvalResult{File: f.path, Report: &r}
		case schemaBench:
			var b BenchResult
			if err := json.Unmarshal(data, &b); err != nil {
				return nil, bad(err)
			}
			b.File, res.Bench = f.path, &b
		default:
			res.Ignored = append(res.Ignored, f.path)
		}
	}
	return res, nil
}

// evalVerdict returns the eval verdict for an engine cache: the report's
// verdict for the kvq spec that models it.
func (r *Results) evalVerdict(spec string) (*eval.Verdict, bool) {
	if r == nil || r.Eval == nil {
		return nil, false
	}
	for i, v := range r.Eval.Verdicts {
		if strings.EqualFold(v.Cache, spec) {
			return &r.Eval.Verdicts[i], true
		}
	}
	return nil, false
}
