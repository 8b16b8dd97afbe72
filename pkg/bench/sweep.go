package bench

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"
)

// Point is one load of a sweep and its run.
type Point struct {
	Load   Load
	Result *Result
}

// SweepOptions control Sweep.
type SweepOptions struct {
	RunOptions
	// OnPoint, when set, is called after each load's run.
	OnPoint func(i int, p Point)
}

// Sweep runs the same workload (and, with the same Seed, the same arrival
// pattern scaled to each rate) once per load, in order. Every load is
// validated before the first run. When ctx ends, Sweep returns the points
// run so far, the interrupted one last, with the error.
func Sweep(ctx context.Context, t Target, reqs []Request, loads []Load, opts SweepOptions) ([]Point, error) {
	for i, l := range loads {
		if err := l.Validate(); err != nil {
			return nil, fmt.Errorf("load %d: %w", i, err)
		}
	}
	points := make([]Point, 0, len(loads))
	for i, l := range loads {
		res, err := Run(ctx, t, reqs, l, opts.RunOptions)
		p := Point{Load: l, Result: res}
		if res != nil {
			points = append(points, p)
		}
		if err != nil {
			return points, fmt.Errorf("load %d of %d: %w", i+1, len(loads), err)
		}
		if opts.OnPoint != nil {
			opts.OnPoint(i, p)
		}
	}
	return points, nil
}

// SLO is what a run must meet to count toward capacity.
type SLO struct {
	// TTFT, TPOT, ITL and E2EL bound the Percentile-th percentile of each
	// metric over the completed requests (TPOT over those with more than
	// one output token, ITL over all chunk gaps); 0 sets no bound.
	TTFT, TPOT, ITL, E2EL time.Duration
	// Percentile is the percentile the bounds apply to; 0 means 99.
	Percentile float64
	// Goodput and MinGoodput, set together, require at least MinGoodput
	// (a share in (0, 1]) of the workload's requests to be good: completed
	// and within every limit of Goodput individually (vLLM's goodput).
	Goodput    Goodput
	MinGoodput float64
	// MaxFailed is the share of the workload's requests that may fail (or
	// not complete); 0 allows none.
	MaxFailed float64
}

// Validate reports an SLO that cannot be checked, wrapping ErrOptions.
func (s SLO) Validate() error {
	switch {
	case s.TTFT < 0 || s.TPOT < 0 || s.ITL < 0 || s.E2EL < 0:
		return fmt.Errorf("%w: negative SLO bound", ErrOptions)
	case !(s.Percentile >= 0 && s.Percentile <= 100):
		return fmt.Errorf("%w: SLO percentile %v outside [0, 100]", ErrOptions, s.Percentile)
	case !(s.MinGoodput >= 0 && s.MinGoodput <= 1):
		return fmt.Errorf("%w: minimum goodput share %v outside [0, 1]", ErrOptions, s.MinGoodput)
	case (s.MinGoodput > 0) != !s.Goodput.IsZero():
		return fmt.Errorf("%w: goodput limits (%q) and a minimum goodput share (%v) go together", ErrOptions, s.Goodput.String(), s.MinGoodput)
	case s.Goodput.TTFT < 0 || s.Goodput.TPOT < 0 || s.Goodput.E2EL < 0:
		return fmt.Errorf("%w: negative goodput limit", ErrOptions)
	case !(s.MaxFailed >= 0 && s.MaxFailed <= 1):
		return fmt.Errorf("%w: failed share %v outside [0, 1]", ErrOptions, s.MaxFailed)
	}
	return nil
}

// Check returns how res falls short of s, one sentence per violation,
// nil when it meets s. Shares count against the workload's size
// (Result.Requests), so requests never sent or interrupted count as
// failed. s must be valid (Validate).
func (s SLO) Check(res *Result) []string {
	p := s.Percentile
	if p == 0 {
		p = 99
	}
	v := collect(res.Records)
	completed, good := len(v.ok), 0
	for _, r := range v.ok {
		if s.MinGoodput > 0 && s.Goodput.meets(r) {
			good++
		}
	}
	var out []string
	n := max(res.Requests, len(res.Records))
	if n == 0 {
		return []string{"no requests"}
	}
	if completed == 0 {
		out = append(out, "no request completed")
	}
	for _, b := range []struct {
		name  string
		limit time.Duration
		vals  []float64
	}{{"ttft", s.TTFT, v.ttft}, {"tpot", s.TPOT, v.tpot}, {"itl", s.ITL, v.itl}, {"e2el", s.E2EL, v.e2el}} {
		if b.limit <= 0 || len(b.vals) == 0 {
			continue
		}
		v := percentile(sortedCopy(b.vals), p)
		if v > b.limit.Seconds() {
			out = append(out, fmt.Sprintf("p%s %s %.1f ms > %v", percentileWord(p), b.name, v*1000, b.limit))
		}
	}
	if s.MinGoodput > 0 {
		if share := float64(good) / float64(n); share < s.MinGoodput {
			out = append(out, fmt.Sprintf("goodput %d of %d requests (%.1f%%) < %.1f%% under %s", good, n, 100*share, 100*s.MinGoodput, s.Goodput))
		}
	}
	if failed := n - completed; float64(failed)/float64(n) > s.MaxFailed {
		out = append(out, fmt.Sprintf("%d of %d requests failed or did not complete (%.1f%%) > %.1f%% allowed", failed, n, 100*float64(failed)/float64(n), 100*s.MaxFailed))
	}
	return out
}

// Capacity axes.
const (
	AxisConcurrency = "concurrency"
	AxisRate        = "rate"
)

// Verdict is one sweep point checked against an SLO.
type Verdict struct {
	// Level is the point's concurrency or rate; +Inf for no cap or all at
	// once.
	Level      float64
	OK         bool
	Violations []string
}

// CapacityResult is the outcome of Capacity.
type CapacityResult struct {
	Axis string // AxisConcurrency or AxisRate
	// Found reports whether some level qualifies; Point is its index in
	// the points (-1 when none) and Level its concurrency or rate.
	Found    bool
	Point    int
	Level    float64
	Verdicts []Verdict // one per point, in the points' order
}

// Capacity is the largest concurrency (or rate) of a sweep that meets slo.
// The axis is the one the points vary: concurrency when they share a rate
// (then a point without a cap is level +Inf), rate when they share a
// concurrency (all at once is +Inf). Ordered by level, a point qualifies
// when it and every point below it meet the SLO: a pass above a failed
// level is taken for noise, not capacity. Errors wrap ErrSweep (no points,
// points varying in both or neither) or ErrOptions (an invalid SLO).
func Capacity(points []Point, slo SLO) (CapacityResult, error) {
	if err := slo.Validate(); err != nil {
		return CapacityResult{}, err
	}
	if len(points) == 0 {
		return CapacityResult{}, fmt.Errorf("%w: no points", ErrSweep)
	}
	conc := func(l Load) float64 {
		if l.Concurrency == 0 {
			return math.Inf(1)
		}
		return float64(l.Concurrency)
	}
	rate := func(l Load) float64 {
		if l.allAtOnce() {
			return math.Inf(1)
		}
		return l.Rate
	}
	same := func(f func(Load) float64) bool {
		for _, p := range points[1:] {
			if f(p.Load) != f(points[0].Load) {
				return false
			}
		}
		return true
	}
	res := CapacityResult{Point: -1}
	level := conc
	switch sr, sc := same(rate), same(conc); {
	case len(points) == 1 && points[0].Load.Concurrency == 0:
		res.Axis, level = AxisRate, rate
	case len(points) == 1 || (sr && !sc):
		res.Axis = AxisConcurrency
	case sc && !sr:
		res.Axis, level = AxisRate, rate
	case sr && sc:
		return CapacityResult{}, fmt.Errorf("%w: all %d points have the same rate and concurrency", ErrSweep, len(points))
	default:
		return CapacityResult{}, fmt.Errorf("%w: the points vary in both rate and concurrency", ErrSweep)
	}
	order := make([]int, len(points))
	for i, p := range points {
		order[i] = i
		res.Verdicts = append(res.Verdicts, Verdict{Level: level(p.Load)})
		if p.Result == nil {
			res.Verdicts[i].Violations = []string{"not run"}
			continue
		}
		res.Verdicts[i].Violations = slo.Check(p.Result)
		res.Verdicts[i].OK = len(res.Verdicts[i].Violations) == 0
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(res.Verdicts[a].Level, res.Verdicts[b].Level) })
	for k := 0; k < len(order); {
		l, ok, j := res.Verdicts[order[k]].Level, true, k
		for ; j < len(order) && res.Verdicts[order[j]].Level == l; j++ {
			ok = ok && res.Verdicts[order[j]].OK
		}
		if !ok {
			break // every point at a level must pass
		}
		res.Found, res.Point, res.Level = true, order[j-1], l
		k = j
	}
	return res, nil
}
