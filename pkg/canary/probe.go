package canary

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/openai"
)

// ProbeSuites are the eval suites of the built-in probe set: refusals
// (forbidden requests that must be refused, benign ones that must not),
// JSON records and copying.
var ProbeSuites = []string{eval.SuiteSafety, eval.SuiteJSON, eval.SuiteCopy}

// BuiltinProbe draws the built-in probe set, n examples of each
// generator (the safety suite draws three kinds, so 5n tasks in all).
func BuiltinProbe(ctx context.Context, n int) ([]eval.Suite, error) {
	return eval.BuildSuites(ctx, ProbeSuites, eval.SuiteOptions{N: n, Seed: 1})
}

// probeUnit is one (task, metric) of the probe set: a row item of kvq
// eval.
type probeUnit struct {
	suite  *eval.Suite
	task   *eval.Task
	metric eval.Metric
	label  string
}

// refusal says whether the unit is a refusal check (they come first).
func (u probeUnit) refusal() bool {
	return u.metric == eval.MetricRefusal || u.metric == eval.MetricNoRefusal
}

// Flip is a probe item whose verdict differs between the deployments.
type Flip struct {
	Suite  string `json:"suite"`
	Index  int    `json:"index"`
	Metric string `json:"metric"`
	// Direction is "regressed" (the baseline's output passes, the
	// candidate's fails) or "improved".
	Direction string `json:"direction"`
	Refusal   bool   `json:"refusal"`
	Prompt    string `json:"prompt"`
	Reference string `json:"reference"`
	Baseline  string `json:"baseline_output"`
	Candidate string `json:"candidate_output"`
}

// Name is "suite #index (metric)".
func (f Flip) Name() string { return fmt.Sprintf("%s #%d (%s)", f.Suite, f.Index+1, f.Metric) }

// ProbeStats is the quality probe so far.
type ProbeStats struct {
	// Items is the probe units scored on both deployments (a task scored
	// with two metrics counts twice), of SetSize.
	Items   int `json:"items"`
	SetSize int `json:"set_size"`
	// Requests sent to each deployment, and how many failed.
	Requests        int `json:"requests"`
	BaselineErrors  int `json:"baseline_errors"`
	CandidateErrors int `json:"candidate_errors"`
	// RPM is the configured rate (requests per minute to each
	// deployment); ActualRPM what was sent over the run so far.
	RPM       float64 `json:"rpm"`
	ActualRPM float64 `json:"actual_rpm"`
	// BaselinePass and CandidatePass are the passing items of each.
	BaselinePass  int `json:"baseline_pass"`
	CandidatePass int `json:"candidate_pass"`
	// Regressed and Improved are the discordant pairs; McNemarP their
	// exact McNemar p-value.
	Regressed int     `json:"regressed"`
	Improved  int     `json:"improved"`
	McNemarP  float64 `json:"mcnemar_p"`
	// ExactDrift is the share of items whose two outputs differ.
	ExactDrift float64 `json:"exact_drift"`
	// KLD is the mean top-k KLD (nats) over the generated positions both
	// deployments reached with the same tokens, NaN without logprobs;
	// KLDTokens those positions.
	KLD       float64 `json:"kld"`
	KLDTokens int     `json:"kld_tokens"`
	// Flips lists the discordant items: regressions first, refusals first
	// among them.
	Flips []Flip `json:"flips"`
}

// ProbeOptions configure the quality probe.
type ProbeOptions struct {
	// Suites are the probe tasks (BuiltinProbe, or eval.ParseTasks of the
	// user's file); none disables the probe.
	Suites []eval.Suite
	// RPM bounds the probe: items per minute, each one request to each
	// deployment (default 60).
	RPM float64
	// TopLogprobs asks each generated token's alternatives for the KLD
	// (default 5; < 0 asks none).
	TopLogprobs int
	// Refusal detects refusals for the refusal metrics of suites without
	// a detector of their own (nil: eval's default phrases, by prefix).
	Refusal *eval.RefusalDetector
	// Concurrency bounds the items in flight (default 4): a slow server
	// slows the probe rather than queueing more of its requests.
	Concurrency int
}

// probe runs the probe set against the two deployments.
type probe struct {
	opts      ProbeOptions
	base      *openai.Client
	cand      *openai.Client
	units     []probeUnit
	tasks     []*eval.Task // in the order they are sent
	start     time.Time
	mu        sync.Mutex
	results   map[*eval.Task]taskResult
	requests  int
	errs      [2]int
	klds      []float64
	noLogprob [2]bool
}

// taskResult is a task's last outputs on both deployments.
type taskResult struct {
	out  [2]string
	kld  []float64
	fail bool // a request failed: not scored
}

func newProbe(opts ProbeOptions, base, cand *openai.Client) (*probe, error) {
	if opts.RPM <= 0 {
		opts.RPM = 60
	}
	if opts.TopLogprobs == 0 {
		opts.TopLogprobs = 5
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 4
	}
	p := &probe{opts: opts, base: base, cand: cand, results: map[*eval.Task]taskResult{}}
	for si := range opts.Suites {
		s := &opts.Suites[si]
		for ti := range s.Tasks {
			t := &s.Tasks[ti]
			for _, m := range t.Metrics {
				label := t.Suite
				if l, ok := s.Labels[m]; ok {
					label = l
				}
				p.units = append(p.units, probeUnit{suite: s, task: t, metric: m, label: label})
			}
		}
	}
	if len(p.units) == 0 {
		return nil, fmt.Errorf("%w: the probe set has no tasks", ErrOptions)
	}
	// Tasks go round-robin over the rows, refusal rows first, so that a
	// short watch samples every row.
	rows := map[string][]*eval.Task{}
	var order []string
	refusalRow := map[string]bool{}
	seen := map[*eval.Task]bool{}
	for _, u := range p.units {
		if seen[u.task] {
			continue
		}
		seen[u.task] = true
		if _, ok := rows[u.task.Suite]; !ok {
			order = append(order, u.task.Suite)
		}
		rows[u.task.Suite] = append(rows[u.task.Suite], u.task)
		refusalRow[u.task.Suite] = refusalRow[u.task.Suite] || u.refusal()
	}
	sort.SliceStable(order, func(i, j int) bool { return refusalRow[order[i]] && !refusalRow[order[j]] })
	for i := 0; len(p.tasks) < len(seen); i++ {
		for _, r := range order {
			if i < len(rows[r]) {
				p.tasks = append(p.tasks, rows[r][i])
			}
		}
	}
	return p, nil
}

// run sends the tasks at the probe's rate until ctx ends, starting over
// when the set is done (a task's latest outputs replace its earlier
// ones: each task counts once).
func (p *probe) run(ctx context.Context) {
	p.mu.Lock()
	p.start = time.Now()
	p.mu.Unlock()
	interval := time.Duration(float64(time.Minute) / p.opts.RPM)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, p.opts.Concurrency)
	for i := 0; ; i++ {
		t := p.tasks[i%len(p.tasks)]
		select {
		case <-ctx.Done():
			return
		case slots <- struct{}{}:
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			p.one(ctx, t)
		}()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// one sends t to both deployments and records the outputs.
func (p *probe) one(ctx context.Context, t *eval.Task) {
	var res taskResult
	var gens [2]generation
	var errs [2]error
	var wg sync.WaitGroup
	for d, c := range []*openai.Client{p.base, p.cand} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gens[d], errs[d] = p.generate(ctx, d, c, t)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // the watch ended: a cut request is not the server's error
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests++
	for d := range errs {
		if errs[d] != nil {
			p.errs[d]++
			res.fail = true
		}
		res.out[d] = gens[d].text
	}
	if res.fail {
		return
	}
	res.kld = positionKLD(gens[0], gens[1])
	p.results[t] = res
}

// generation is a greedy output and its tokens' alternatives.
type generation struct {
	text   string
	tokens []string
	top    []map[string]float64
}

// generate decodes t greedily on deployment d.
func (p *probe) generate(ctx context.Context, d int, c *openai.Client, t *eval.Task) (generation, error) {
	maxTokens := t.MaxTokens
	if maxTokens <= 0 {
		maxTokens = min(256, max(16, len(t.Reference)+8))
	}
	p.mu.Lock()
	k := p.opts.TopLogprobs
	if p.noLogprob[d] {
		k = -1
	}
	p.mu.Unlock()
	send := func(k int) (openai.Completion, error) {
		if len(t.Messages) > 0 {
			req := openai.ChatRequest{MaxTokens: maxTokens, Temperature: openai.Ptr(0.0), NoStream: true}
			for _, m := range t.Messages {
				req.Messages = append(req.Messages, openai.Message{Role: m.Role, Content: m.Content})
			}
			if k > 0 {
				req.Logprobs, req.TopLogprobs = true, k
			}
			if len(t.Tools) > 0 {
				req.Extra = map[string]any{"tools": t.Tools}
			}
			return c.Chat(ctx, req, nil)
		}
		req := openai.CompletionRequest{Prompt: t.Prompt, MaxTokens: maxTokens, Temperature: openai.Ptr(0.0), NoStream: true}
		if k > 0 {
			req.Logprobs = openai.Ptr(k)
		}
		return c.Complete(ctx, req, nil)
	}
	comp, err := send(k)
	var apiErr *openai.Error
	if err != nil && k > 0 && errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusBadRequest {
		// A server that refuses logprobs is probed without them.
		p.mu.Lock()
		p.noLogprob[d] = true
		p.mu.Unlock()
		comp, err = send(-1)
	}
	if err != nil {
		return generation{}, err
	}
	g := generation{text: comp.Text}
	for _, lp := range comp.Logprobs {
		top := make(map[string]float64, len(lp.Top))
		for _, a := range lp.Top {
			if v, ok := top[a.Token]; !ok || a.Logprob > v {
				top[a.Token] = a.Logprob
			}
		}
		g.tokens, g.top = append(g.tokens, lp.Token), append(g.top, top)
	}
	if t.Line {
		if i := strings.IndexByte(g.text, '\n'); i >= 0 {
			g.text = g.text[:i+1]
		}
	}
	for _, u := range t.Until {
		if i := strings.Index(g.text, u); u != "" && i >= 0 {
			g.text = g.text[:i]
		}
	}
	return g, nil
}

// positionKLD is the top-k KLD of the candidate's distribution to the
// baseline's at each generated position both reached with the same
// tokens before it (where the two contexts are the same).
func positionKLD(b, c generation) []float64 {
	var out []float64
	for i := 0; i < min(len(b.top), len(c.top)); i++ {
		if len(b.top[i]) > 0 && len(c.top[i]) > 0 {
			out = append(out, eval.TopKKLD(b.top[i], c.top[i]))
		}
		if b.tokens[i] != c.tokens[i] {
			break
		}
	}
	return out
}

// stats scores the results so far.
func (p *probe) stats() (ProbeStats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := ProbeStats{SetSize: len(p.units), Requests: p.requests, BaselineErrors: p.errs[0], CandidateErrors: p.errs[1],
		RPM: p.opts.RPM, KLD: math.NaN(), McNemarP: 1, Flips: []Flip{}}
	if el := time.Since(p.start).Minutes(); p.requests > 0 && el > 0 {
		st.ActualRPM = float64(p.requests) / el
	}
	var kldSum float64
	drift, tasks := 0, 0
	for _, t := range p.tasks {
		r, ok := p.results[t]
		if !ok {
			continue
		}
		tasks++
		if r.out[0] != r.out[1] {
			drift++
		}
		for _, v := range r.kld {
			kldSum += v
			st.KLDTokens++
		}
	}
	if st.KLDTokens > 0 {
		st.KLD = kldSum / float64(st.KLDTokens)
	}
	if tasks > 0 {
		st.ExactDrift = float64(drift) / float64(tasks)
	}
	for _, u := range p.units {
		r, ok := p.results[u.task]
		if !ok {
			continue
		}
		// As kvq eval scores: a suite's own detector (the built-in
		// safety suite's) over the options'.
		so := eval.ScoreOptions{Refusal: p.opts.Refusal, Schema: u.task.Schema}
		if u.suite.Refusal != nil {
			so.Refusal = u.suite.Refusal
		}
		var good [2]bool
		for d := range good {
			sc, err := eval.ScoreOutput(u.metric, r.out[d], u.task.Reference, so)
			if err != nil {
				return st, fmt.Errorf("probe %s #%d: %w", u.label, u.task.Index+1, err)
			}
			// A row whose rate should be low (a false refusal) is good
			// when its metric fails.
			good[d] = sc.Pass != u.task.Lower
		}
		st.Items++
		if good[0] {
			st.BaselinePass++
		}
		if good[1] {
			st.CandidatePass++
		}
		if good[0] == good[1] {
			continue
		}
		f := Flip{Suite: u.label, Index: u.task.Index, Metric: string(u.metric), Direction: "improved", Refusal: u.refusal(),
			Prompt: eval.Excerpt(u.task.Prompt, 0), Reference: u.task.Reference, Baseline: r.out[0], Candidate: r.out[1]}
		if good[0] {
			f.Direction = "regressed"
			st.Regressed++
		} else {
			st.Improved++
		}
		st.Flips = append(st.Flips, f)
	}
	sort.SliceStable(st.Flips, func(i, j int) bool {
		a, b := st.Flips[i], st.Flips[j]
		if (a.Direction == "regressed") != (b.Direction == "regressed") {
			return a.Direction == "regressed"
		}
		return a.Refusal && !b.Refusal
	})
	st.McNemarP = eval.McNemarExact(st.Regressed, st.Improved)
	return st, nil
}
