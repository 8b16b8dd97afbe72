package plan

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
)

// Traffic describes the requests a service sees.
type Traffic struct {
	Source     string  `json:"source"`
	Requests   int     `json:"requests"`
	InputMean  float64 `json:"input_mean"`
	InputP95   float64 `json:"input_p95"`
	OutputMean float64 `json:"output_mean"`
	OutputP95  float64 `json:"output_p95"`
}

// Verdicts of step 1.
const (
	KVBound    = "kv-bound"
	NotKVBound = "not-kv-bound"
	Unclear    = "unclear"
	NoEvidence = "no-evidence"
)

// Bottleneck is step 1's answer: does the KV cache limit the service.
type Bottleneck struct {
	Verdict  string   `json:"verdict"`
	Evidence []string `json:"evidence"`
	// Measured from the scrape (zero without one).
	Engine       string   `json:"engine,omitempty"`
	Samples      int      `json:"samples"`
	Seconds      float64  `json:"seconds"`
	UsageP50     float64  `json:"kv_usage_p50"`
	UsageMax     float64  `json:"kv_usage_max"`
	WaitingShare float64  `json:"waiting_share"`
	RunningMean  float64  `json:"running_mean"`
	Preemptions  float64  `json:"preemptions"`
	PromptTPS    float64  `json:"prompt_tokens_per_s"`
	GenTPS       float64  `json:"generation_tokens_per_s"`
	TTFTP95      float64  `json:"ttft_p95_s,omitempty"`
	Traffic      *Traffic `json:"traffic,omitempty"`
}

// Thresholds of the step-1 rules (documented in Analyze).
const (
	HighUsage    = 0.90
	LowUsage     = 0.50
	WaitingOften = 0.25
	LongInput    = 8192
	ShortInput   = 1024
	ShortOutput  = 256
)

// Analyze applies step 1's rules to scrapes (oldest first) and traffic
// (either may be empty):
//
//   - KV-bound: requests were preempted during the window, or the KV
//     cache's median usage is at least 90% while requests wait in at least
//     a quarter of the scrapes. Quantizing the cache then admits more
//     requests.
//   - Not KV-bound: usage never reached 50% and nothing waited, or the
//     traffic is short (P95 input under 1,024 tokens and mean output under
//     256) without pressure: a smaller cache frees memory nothing uses,
//     the guide's "benefit is diluted" case.
//   - Unclear otherwise (say: scrape at peak load).
//
// Long P95 inputs (8,192 tokens and more) are reported as evidence that the
// cache will bind as load grows.
func Analyze(snaps []Snapshot, tr *Traffic) Bottleneck {
	b := Bottleneck{Verdict: NoEvidence, Traffic: tr, Samples: len(snaps)}
	if len(snaps) == 0 && tr == nil {
		b.Evidence = append(b.Evidence, "no metrics scraped and no traffic given: run with --endpoint URL (the serving engine's /metrics) or --trace FILE")
		return b
	}
	pressure, idle := false, false
	if len(snaps) > 0 {
		first, last := snaps[0], snaps[len(snaps)-1]
		b.Engine = last.Engine
		b.Seconds = last.Time.Sub(first.Time).Seconds()
		var usage []float64
		waiting := 0
		for _, s := range snaps {
			if !math.IsNaN(s.Usage) {
				usage = append(usage, s.Usage)
			}
			if s.Waiting > 0 {
				waiting++
			}
			b.RunningMean += s.Running / float64(len(snaps))
		}
		b.WaitingShare = float64(waiting) / float64(len(snaps))
		if len(usage) > 0 {
			slices.Sort(usage)
			b.UsageP50 = usage[len(usage)/2]
			b.UsageMax = usage[len(usage)-1]
		}
		if !math.IsNaN(last.Preemptions) && !math.IsNaN(first.Preemptions) {
			b.Preemptions = last.Preemptions - first.Preemptions
		}
		if b.Seconds > 0 {
			b.PromptTPS = (last.PromptTokens - first.PromptTokens) / b.Seconds
			b.GenTPS = (last.GenTokens - first.GenTokens) / b.Seconds
		}
		if h := last.TTFT.Sub(first.TTFT); h != nil && h.Count > 0 {
			b.TTFTP95 = h.Quantile(0.95)
		}
		if h := last.PromptLen.Sub(first.PromptLen); h != nil && h.Count > 0 && tr == nil {
			tr = &Traffic{Source: "the engine's request_prompt_tokens histogram", Requests: int(h.Count), InputMean: h.Mean(), InputP95: h.Quantile(0.95)}
			if s := first.Requests; !math.IsNaN(s) && last.Requests > s && b.Seconds > 0 {
				tr.OutputMean = (last.GenTokens - first.GenTokens) / (last.Requests - s)
			}
			b.Traffic = tr
		}
		b.Evidence = append(b.Evidence, fmt.Sprintf("%d scrapes over %.0f s of %s metrics: KV usage median %.0f%%, peak %.0f%%; requests waiting in %.0f%% of scrapes; %.1f running on average; %.0f preemptions; %.0f prompt and %.0f generated tokens/s",
			len(snaps), b.Seconds, orUnknown(b.Engine), 100*b.UsageP50, 100*b.UsageMax, 100*b.WaitingShare, b.RunningMean, b.Preemptions, b.PromptTPS, b.GenTPS))
		if len(usage) == 0 {
			b.Evidence = append(b.Evidence, "the endpoint exposes no KV-cache usage gauge (vllm:kv_cache_usage_perc or an equivalent)")
		}
		switch {
		case b.Preemptions > 0:
			pressure = true
			what := fmt.Sprintf("%.0f requests were preempted", b.Preemptions)
			if b.Preemptions == 1 {
				what = "1 request was preempted"
			}
			b.Evidence = append(b.Evidence, what+": the pool ran out of KV blocks")
		case len(usage) > 0 && b.UsageMax >= HighUsage && b.WaitingShare >= WaitingOften:
			pressure = true
			b.Evidence = append(b.Evidence, fmt.Sprintf("the KV cache fills (peak %.0f%%, at least %.0f%%) while requests wait: admission is limited by KV memory", 100*b.UsageMax, 100*HighUsage))
		case len(usage) > 0 && b.UsageMax < LowUsage && b.WaitingShare == 0:
			idle = true
			b.Evidence = append(b.Evidence, fmt.Sprintf("KV usage never reached %.0f%% and nothing waited", 100*LowUsage))
		}
	}
	if tr != nil {
		src := tr.Source
		if tr.Requests > 0 {
			src += fmt.Sprintf(", %d requests", tr.Requests)
		}
		b.Evidence = append(b.Evidence, fmt.Sprintf("traffic (%s): input mean %.0f, P95 %.0f tokens; output mean %.0f, P95 %.0f",
			src, tr.InputMean, tr.InputP95, tr.OutputMean, tr.OutputP95))
		switch {
		case tr.InputP95 >= LongInput:
			b.Evidence = append(b.Evidence, fmt.Sprintf("P95 input of %.0f tokens: long contexts, where the KV cache dominates memory", tr.InputP95))
		case tr.InputP95 > 0 && tr.InputP95 < ShortInput && tr.OutputMean < ShortOutput && !pressure:
			idle = true
			b.Evidence = append(b.Evidence, "short requests: each holds little KV cache, so a smaller cache mostly frees memory nothing uses (the benefit is diluted)")
		}
	}
	switch {
	case pressure:
		b.Verdict = KVBound
	case idle:
		b.Verdict = NotKVBound
	default:
		b.Verdict = Unclear
		b.Evidence = append(b.Evidence, "no clear sign either way: scrape at peak load (longer --scrape), or give a trace of request lengths")
	}
	return b
}

func orUnknown(s string) string {
	if s == "" {
		return "unrecognized"
	}
	return s
}

// ReadTrace reads request lengths from a file: JSON Lines of objects with
// input and output token counts under any of the names kvq bench, vLLM and
// OpenAI logs use (input_tokens, prompt_tokens, input_len, prompt_len;
// output_tokens, completion_tokens, output_len), a JSON object whose
// "records" or "requests" list holds such objects (kvq bench --output
// json), or vLLM bench's --save-detailed "input_lens"/"output_lens".
func ReadTrace(path string) (*Traffic, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTrace, err)
	}
	var in, out []float64
	add := func(m map[string]any) bool {
		i, okI := firstNumber(m, "input_tokens", "prompt_tokens", "input_len", "prompt_len")
		o, okO := firstNumber(m, "output_tokens", "completion_tokens", "output_len")
		if okI {
			in = append(in, i)
		}
		if okO {
			out = append(out, o)
		}
		return okI || okO
	}
	trimmed := bytes.TrimSpace(data)
	var top map[string]any
	if len(trimmed) > 0 && trimmed[0] == '{' && json.Unmarshal(trimmed, &top) == nil {
		switch {
		case top["input_lens"] != nil:
			in, out = numbers(top["input_lens"]), numbers(top["output_lens"])
		case top["records"] != nil || top["requests"] != nil:
			list, _ := top["records"].([]any)
			if list == nil {
				list, _ = top["requests"].([]any)
			}
			for _, x := range list {
				if m, ok := x.(map[string]any); ok {
					add(m)
				}
			}
		default:
			add(top)
		}
	} else {
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for ln := 1; sc.Scan(); ln++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" || line[0] == '#' {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				return nil, fmt.Errorf("%w: %s:%d: %v", ErrTrace, path, ln, err)
			}
			if !add(m) {
				return nil, fmt.Errorf("%w: %s:%d: no input or output token count (input_tokens, prompt_tokens, output_tokens, completion_tokens, ...)", ErrTrace, path, ln)
			}
		}
	}
	if len(in) == 0 && len(out) == 0 {
		return nil, fmt.Errorf("%w: %s: no request lengths found", ErrTrace, path)
	}
	tr := &Traffic{Source: path, Requests: max(len(in), len(out))}
	tr.InputMean, tr.InputP95 = meanP95(in)
	tr.OutputMean, tr.OutputP95 = meanP95(out)
	return tr, nil
}

func firstNumber(m map[string]any, keys ...string) (float64, bool) {
	for _, k := range keys {
		if v, ok := m[k].(float64); ok {
			return v, true
		}
	}
	return 0, false
}

func numbers(v any) []float64 {
	list, _ := v.([]any)
	var out []float64
	for _, x := range list {
		if f, ok := x.(float64); ok {
			out = append(out, f)
		}
	}
	return out
}

// meanP95 is the mean and the 95th percentile (linear interpolation).
func meanP95(x []float64) (float64, float64) {
	if len(x) == 0 {
		return 0, 0
	}
	s := slices.Clone(x)
	slices.Sort(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	h := 0.95 * float64(len(s)-1)
	lo := int(h)
	p := s[lo]
	if lo+1 < len(s) {
		p += (h - float64(lo)) * (s[lo+1] - s[lo])
	}
	return sum / float64(len(s)), p
}
