package bench

import (
	goruntime "runtime"
	"time"

	"github.com/kvqlabs/kvq/internal/simd"
)

// Schema names the version of Report's JSON form (kvq bench --output
// json); fields are only added under one schema.
const Schema = "kvq.bench/v1"

// Report is Measure's result and the JSON of kvq bench --output json
// (schema kvq.bench/v1); kvq plan --from reads it back with this type.
type Report struct {
	Schema   string       `json:"schema"`
	Version  string       `json:"kvq_version"`
	Mode     string       `json:"mode"` // "in-process" or "endpoint"
	Model    string       `json:"model"`
	Machine  Machine      `json:"machine"`
	Workload WorkloadInfo `json:"workload"`
	Budget   int64        `json:"kv_budget_bytes,omitempty"`
	// BudgetSource says where the budget came from: "--kv-budget",
	// "--gpu H100-80GB" (kvq estimate's memory model), or "--budget-seqs 8".
	BudgetSource string `json:"kv_budget_source,omitempty"`
	Loads        []Load `json:"loads"`
	// Caches, baseline first; each has a point per load.
	Caches []CacheReport `json:"caches"`
}

// Report modes.
const (
	ModeInProcess = "in-process"
	ModeEndpoint  = "endpoint"
)

// Machine describes where the benchmark ran.
type Machine struct {
	OS      string `json:"os"`
	Arch    string `json:"arch"`
	CPUs    int    `json:"cpus"`
	Threads int    `json:"threads"` // 0: all
	Kernels string `json:"kernels"`
	Go      string `json:"go"`
}

// HostMachine describes this machine, running with threads CPU threads
// (0: all).
func HostMachine(threads int) Machine {
	return Machine{OS: goruntime.GOOS, Arch: goruntime.GOARCH, CPUs: goruntime.NumCPU(), Threads: threads, Kernels: simd.Kernels(), Go: goruntime.Version()}
}

// WorkloadInfo describes the requests.
type WorkloadInfo struct {
	Dataset      string `json:"dataset"`
	Path         string `json:"path,omitempty"`
	Requests     int    `json:"requests"`
	InputTokens  int    `json:"input_tokens"`
	OutputTokens int    `json:"output_tokens_requested"`
	Seed         uint64 `json:"seed"`
}

// CacheReport is one cache's (or endpoint's) runs. The flat fields repeat
// the last point's headline numbers (what kvq plan --from reads).
type CacheReport struct {
	Cache    string          `json:"cache"`
	Points   []PointReport   `json:"points"`
	Capacity *CapacityResult `json:"capacity_sweep,omitempty"`
	Decode   []DepthPoint    `json:"decode,omitempty"`

	// CapacityLevel is the SLO capacity of the sweep when there is one
	// (0: none met the SLOs), else in-process the engine's running peak,
	// else the client's peak concurrency.
	CapacityLevel     int     `json:"capacity"`
	MaxConcurrent     float64 `json:"max_concurrent_requests"`
	OutputThroughput  float64 `json:"output_throughput"`
	RequestThroughput float64 `json:"request_throughput"`
	MedianTTFTms      float64 `json:"median_ttft_ms"`
	MedianTPOTms      float64 `json:"median_tpot_ms"`
	Preemptions       int64   `json:"preemptions"`
	// RequestGoodput is nil (null) when no goodput SLOs were given.
	RequestGoodput *float64 `json:"request_goodput"`
	DecodeTPS      float64  `json:"decode_tokens_per_s"`
}

// PointReport is one run at one load.
type PointReport struct {
	Load    Load    `json:"load"`
	Summary Summary `json:"summary"`
	// Engine is what the in-process engine saw (nil for endpoints).
	Engine *EngineStats `json:"engine,omitempty"`
	// Result holds every request's record.
	Result *Result `json:"result"`
}

// EngineStats are the engine's view of one run.
type EngineStats struct {
	RunningPeak int     `json:"running_peak"`
	WaitingPeak int     `json:"waiting_peak"`
	KVUsagePeak float64 `json:"kv_usage_peak"`
	Preemptions int64   `json:"preemptions"`
	Steps       int     `json:"steps"`
	// Usage is the KV usage over time, one sample per step while
	// sequences ran.
	Usage []UsagePoint `json:"kv_usage"`
	usage []usageSample
}

// UsagePoint is one step's KV usage.
type UsagePoint struct {
	Seconds float64 `json:"t_s"`
	Usage   float64 `json:"usage"`
	Running int     `json:"running"`
	Waiting int     `json:"waiting"`
}

// usageSample is UsagePoint with an absolute time.
type usageSample struct {
	t                time.Time
	usage            float64
	running, waiting int
}

// fill sets the flat headline fields.
func (r *Report) fill() {
	for i := range r.Caches {
		c := &r.Caches[i]
		if len(c.Points) == 0 {
			continue
		}
		best := c.Points[len(c.Points)-1]
		s := best.Summary
		c.OutputThroughput, c.RequestThroughput = s.OutputThroughput, s.RequestThroughput
		c.MedianTTFTms, c.MedianTPOTms = s.TTFT.Median, s.TPOT.Median
		if s.RequestGoodput != nil {
			g := *s.RequestGoodput
			c.RequestGoodput = &g
		}
		running := 0
		for _, p := range c.Points {
			c.MaxConcurrent = max(c.MaxConcurrent, float64(p.Summary.MaxConcurrentRequests))
			if p.Engine != nil {
				running = max(running, p.Engine.RunningPeak)
				c.Preemptions += p.Engine.Preemptions
			}
		}
		// In-process, capacity is what the engine ran at once in the
		// budget; an endpoint shows only the client's side.
		c.CapacityLevel = int(c.MaxConcurrent)
		if r.Mode == ModeInProcess {
			c.CapacityLevel = running
		}
		if c.Capacity != nil {
			c.CapacityLevel = 0
			if c.Capacity.Found {
				c.CapacityLevel = int(c.Capacity.Level)
			}
		}
		for _, d := range c.Decode {
			if d.Skipped == "" {
				c.DecodeTPS = d.Median
				break
			}
		}
	}
}
