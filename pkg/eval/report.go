package eval

// Schema names the version of Report's JSON form. Fields are only ever
// added under one schema; a rename or removal changes it.
const Schema = "kvq.eval/v1"

// Report is the whole result of Run: what was run on what, every metric
// per cache, the gates and the verdicts. Its JSON form (kvq eval --output
// json) is documented in the README and stable under Schema.
type Report struct {
	Schema  string    `json:"schema"`
	Version string    `json:"kvq_version"`
	Model   ModelInfo `json:"model"`
	Setup   Setup     `json:"config"`
	// Caches, baseline first.
	Caches []CacheInfo `json:"caches"`
	// Text holds the teacher-forced metrics (nil when no text was scored).
	Text *TextResult `json:"text,omitempty"`
	// Suites are the generation tasks, one row per suite and metric.
	Suites []SuiteResult `json:"suites"`
	// Grid is the long-context passkey grid (nil when not run).
	Grid *GridResult `json:"long_context,omitempty"`
	// Speed is each cache's decode speed (nil when not measured).
	Speed []SpeedResult `json:"speed,omitempty"`
	// Gates holds one result per gate and cache it applies to.
	Gates []GateResult `json:"gates"`
	// Verdicts, one per candidate cache: passed every gate or not.
	Verdicts []Verdict `json:"verdicts"`
	// Recommendation is the smallest cache that passed every gate.
	Recommendation *Recommendation `json:"recommendation"`
	// Samples, with Options.LogSamples: every item under every cache.
	Samples []Sample `json:"-"`
	// Flips are the items whose verdict differs between the baseline and
	// a candidate (see Flips), regressions first: the report's review
	// page. Not part of the JSON form.
	Flips []Flip `json:"-"`
}

// ModelInfo identifies the model.
type ModelInfo struct {
	Path    string `json:"path"`
	Format  string `json:"format"`
	SHA256  string `json:"sha256,omitempty"`
	Arch    string `json:"arch"`
	Layers  int    `json:"layers"`
	KVHeads int    `json:"kv_heads"`
	HeadDim int    `json:"head_dim"`
	Context int    `json:"context"`
	Vocab   int    `json:"vocab"`
	Params  int64  `json:"params"`
	// SlidingLayers are the sliding-window layers of a model that mixes
	// them with global ones (Gemma), SlidingWindow their window; absent
	// for other models.
	SlidingLayers []int `json:"sliding_layers,omitempty"`
	SlidingWindow int   `json:"sliding_window,omitempty"`
}

// Setup is what was evaluated and how.
type Setup struct {
	Protocol string `json:"protocol"`
	Ctx      int    `json:"ctx"`
	// Prefill says what a step's attention reads: "quantized" (every
	// token attends to the cache as stored, as vLLM and llama.cpp do).
	Prefill string `json:"prefill"`
	// Activations is "f32" where quantized weights were multiplied with
	// float32 activations (Options.F32Activations), absent where they
	// took llama.cpp's quantized activations.
	Activations string `json:"activations,omitempty"`
	// KOrder is the key dimension order of quantized caches: "stored"
	// (the model's) or "gguf" (llama.cpp's interleaved RoPE pairs).
	KOrder   string     `json:"k_order"`
	N        int        `json:"n"`
	Seed     uint64     `json:"seed"`
	Suites   []string   `json:"suites"`
	Data     []DataInfo `json:"data"`
	Workers  int        `json:"workers"`
	Refusals string     `json:"refusal_detector"`
}

// DataInfo identifies one input (a text or a tasks file) by content.
type DataInfo struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"` // "text", "tasks", "builtin"
	SHA256 string `json:"sha256"`
	Bytes  int    `json:"bytes"`
}

// CacheInfo is one cache's memory, from the same accounting as kvq
// estimate (kvcache.Layout).
type CacheInfo struct {
	Spec     string `json:"spec"`
	Baseline bool   `json:"baseline"`
	// BytesPerToken is block storage per token, all layers, K and V.
	BytesPerToken float64 `json:"bytes_per_token"`
	// RequestBytes are the fp16 windows each sequence keeps.
	RequestBytes int64 `json:"request_bytes"`
	// StateBytes is codec state (scales, codebooks).
	StateBytes int64 `json:"state_bytes"`
	// BitsPerValue is BytesPerToken in bits per cached value.
	BitsPerValue float64 `json:"bits_per_value"`
	// Compression is the baseline's BytesPerToken over this one's.
	Compression float64 `json:"compression"`
	// Scales lists the scale or codebook files the spec reads.
	Scales []DataInfo `json:"scales,omitempty"`
	// ContextBytes, for models whose sliding-window layers keep only
	// their window (kvcache.Layout.Sliding), is the most memory one
	// request of ContextTokens (the model's context) holds, fed in the
	// engine's default prefill chunks (kvcache.Layout.SeqCostChunked and
	// codec state; kvq estimate's RuntimeRequestBytes);
	// ContextBytesFull is the same if every layer kept every position.
	ContextTokens    int   `json:"context_tokens,omitempty"`
	ContextBytes     int64 `json:"context_bytes,omitempty"`
	ContextBytesFull int64 `json:"context_bytes_full,omitempty"`
	// Endpoint and ServedModel, in endpoint mode (kvq eval --endpoint):
	// the server and the model id evaluated; the byte fields are then 0
	// (the server's cache is not known to kvq).
	Endpoint    string `json:"endpoint,omitempty"`
	ServedModel string `json:"served_model,omitempty"`
}

// SuiteResult is one suite's metric under every cache.
type SuiteResult struct {
	Name   string `json:"suite"`
	Kind   string `json:"kind"`
	Metric string `json:"metric"`
	N      int    `json:"n"`
	// HigherIsBetter is false for rates that should be low (false
	// refusals).
	HigherIsBetter bool         `json:"higher_is_better"`
	Caches         []SuiteScore `json:"caches"`
}

// SuiteScore is one cache's score on a suite, in percent (the mean of the
// items' values ×100), and its paired comparison with the baseline.
type SuiteScore struct {
	Cache  string  `json:"cache"`
	Score  float64 `json:"score"`
	Stderr float64 `json:"stderr"`
	// Diff is Score minus the baseline's, in points, with its bootstrap
	// 95% interval (paired over items).
	Diff   float64 `json:"diff"`
	DiffLo float64 `json:"diff_lo"`
	DiffHi float64 `json:"diff_hi"`
	// PassToFail and FailToPass count the items that flipped against the
	// baseline; McNemarP is the exact two-sided McNemar p-value of the
	// flips.
	PassToFail int     `json:"pass_to_fail"`
	FailToPass int     `json:"fail_to_pass"`
	McNemarP   float64 `json:"mcnemar_p"`
}

// GridResult is the passkey accuracy over context length × needle depth.
type GridResult struct {
	Contexts []int       `json:"contexts"`
	Depths   []float64   `json:"depths"`
	Caches   []GridCache `json:"caches"`
}

// GridCache is one cache's grid: Accuracy[i][j] at Contexts[i], Depths[j],
// in percent over N items per cell.
type GridCache struct {
	Cache    string      `json:"cache"`
	Accuracy [][]float64 `json:"accuracy"`
	N        int         `json:"n"`
}

// SpeedResult is one cache's decode speed.
type SpeedResult struct {
	Cache string `json:"cache"`
	// TokensPerSec is single-sequence decode after a prompt of Depth
	// tokens; Relative is its time per token over the baseline's, the
	// median over interleaved rounds.
	TokensPerSec float64 `json:"tokens_per_sec"`
	Relative     float64 `json:"time_vs_baseline"`
	Depth        int     `json:"depth"`
}

// Verdict is a candidate's outcome under the gates.
type Verdict struct {
	Cache  string   `json:"cache"`
	Pass   bool     `json:"pass"`
	Failed []string `json:"failed_gates,omitempty"`
}

// Recommendation names the smallest cache that passed every gate.
type Recommendation struct {
	Cache string `json:"cache"`
	// Saving is the share of the baseline's bytes per token it saves.
	Saving      float64 `json:"saving"`
	Compression float64 `json:"compression"`
	Reason      string  `json:"reason"`
}

// Sample is one item scored under one cache (--log-samples).
type Sample struct {
	Suite     string  `json:"suite"`
	Index     int     `json:"index"`
	Cache     string  `json:"cache"`
	Prompt    string  `json:"prompt"`
	Reference string  `json:"reference"`
	Output    string  `json:"output"`
	Metric    string  `json:"metric"`
	Value     float64 `json:"value"`
	Pass      bool    `json:"pass"`
	Diverge   int     `json:"diverge"`
	// Flipped, on a candidate's sample whose verdict differs from the
	// baseline's, is FlipRegressed or FlipImproved, and Baseline is the
	// baseline's output and verdict on the same item; both are absent
	// otherwise.
	Flipped  string         `json:"flipped,omitempty"`
	Baseline SampleBaseline `json:"baseline,omitzero"`
}
