package plan

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kvqlabs/kvq/pkg/bench"
	"github.com/kvqlabs/kvq/pkg/calibrate"
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

// CalibrateResult is a kvq calibrate result and its file.
type CalibrateResult struct {
	File string
	*calibrate.Result
}

// AuditResult is a kvq calibrate audit result and its file.
type AuditResult struct {
	File string
	*calibrate.Audit
}

// EvalResult is a kvq eval report and its file.
type EvalResult struct {
	File string
	*eval.Report
}

// BenchResult is a kvq bench report and its file: the plan reads, per
// cache, the capacity and the latency it measured.
type BenchResult struct {
	File string
	*bench.Report
}

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
		case calibrate.Schema:
			var c calibrate.Result
			if err := json.Unmarshal(data, &c); err != nil {
				return nil, bad(err)
			}
			res.Calibrate = &CalibrateResult{File: f.path, Result: &c}
		case calibrate.AuditSchema:
			var a calibrate.Audit
			if err := json.Unmarshal(data, &a); err != nil {
				return nil, bad(err)
			}
			res.Audit = &AuditResult{File: f.path, Audit: &a}
		case eval.Schema:
			var r eval.Report
			if err := json.Unmarshal(data, &r); err != nil {
				return nil, bad(err)
			}
			res.Eval = &EvalResult{File: f.path, Report: &r}
		case bench.Schema:
			var b bench.Report
			if err := json.Unmarshal(data, &b); err != nil {
				return nil, bad(err)
			}
			res.Bench = &BenchResult{File: f.path, Report: &b}
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
