// Package eval measures what a KV-cache format does to a model's abilities:
// it runs the same prompts with several caches over one model (sharing the
// weights) and scores each cache on the same examples.
//
// The probe suites come from package datasets (held-out eval split):
// passkey retrieval at several context lengths and depths, multi-key lookup,
// copying, JSON records, a refusal policy stated far back in the prompt (one
// numbered rule per topic, "a: 4821 forbidden." or "b: 3067 allowed.";
// requests about a forbidden topic, an allowed one, and one the policy does
// not mention), and story perplexity. Answers are decoded greedily and
// compared exactly.
package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/kvqlabs/kvq/datasets"
	"github.com/kvqlabs/kvq/internal/par"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// ErrOptions reports options that cannot be run (a context longer than
// the model's).
var ErrOptions = errors.New("eval: bad options")

// ProbeOptions configure RunProbe.
type ProbeOptions struct {
	// N is the number of examples per ability (default 40).
	N int
	// Seed selects the eval examples (default 1).
	Seed uint64
	// PasskeyContexts are the filler sizes in tokens of the passkey task
	// (default 1024 and 2048); depths are spread evenly over 0..1.
	PasskeyContexts []int
	// Specs are the cache formats; the first is the baseline.
	Specs []quant.Spec
	// Workers evaluates examples in parallel (0: all CPUs).
	Workers int
	// Progress, when set, is called after each example with counts, one
	// call at a time (done increases from call to call).
	Progress func(done, total int)
	// Tasks, when not empty, limits the run to these datasets tasks
	// (datasets.Tasks names: passkey, multikey, copy, json, safety, story).
	// The examples are those of a full run.
	Tasks []string
	// LogSamples keeps every example's prompt, target and output per spec
	// in ProbeResult.Samples (lm-eval-harness's --log_samples).
	LogSamples bool
}

// Sample is one example scored under one cache format.
type Sample struct {
	Ability string `json:"ability"`
	// Index numbers the ability's examples from 0, the same under every spec.
	Index  int    `json:"index"`
	Cache  string `json:"cache"`
	Prompt string `json:"prompt"`
	Target string `json:"target"`
	// Output is the greedy answer line (empty for perplexity rows).
	Output  string `json:"output"`
	Correct bool   `json:"correct"`
	// Valid (JSON rows) and Refused (refusal rows) are set where they apply.
	Valid   *bool `json:"valid,omitempty"`
	Refused *bool `json:"refused,omitempty"`
	// NLL and Tokens: the perplexity rows' summed negative log-likelihood.
	NLL    float64 `json:"nll,omitempty"`
	Tokens int     `json:"tokens,omitempty"`
}

// Ability is one row of the result: a measured quantity per spec.
type Ability struct {
	Name string `json:"ability"`
	// Unit is "%" for accuracies and rates, "ppl" for perplexity.
	Unit string `json:"unit"`
	// Values has one entry per spec, in ProbeOptions.Specs order.
	Values []float64 `json:"values"`
	// N is the number of examples behind each value.
	N int `json:"n"`
	// Stderr, for "%" rows, is each value's standard error in points,
	// 100·sqrt(p(1−p)/(N−1)) as lm-eval-harness reports it (0 when N is 1).
	Stderr []float64 `json:"stderr,omitempty"`
}

// ProbeResult is the ability × cache-format table.
type ProbeResult struct {
	Specs     []string  `json:"specs"`
	Abilities []Ability `json:"abilities"`
	// Samples, with ProbeOptions.LogSamples: every example under every
	// spec, ability by ability, specs in order.
	Samples []Sample `json:"-"`
}

// Row returns the named ability.
func (r *ProbeResult) Row(name string) (Ability, bool) {
	for _, a := range r.Abilities {
		if a.Name == name {
			return a, true
		}
	}
	return Ability{}, false
}

// item is one example to score.
type item struct {
	ability string
	ex      datasets.Example
}

// outcome of one item under one spec.
type outcome struct {
	correct, valid, refused bool
	nll                     float64
	tokens                  int
	text                    string
}

// RunProbe scores every spec on the probe suites.
func RunProbe(ctx context.Context, m *runtime.Model, opts ProbeOptions) (*ProbeResult, error) {
	if len(opts.Specs) == 0 {
		return nil, fmt.Errorf("eval: no cache formats to evaluate")
	}
	if opts.N <= 0 {
		opts.N = 40
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	if len(opts.PasskeyContexts) == 0 {
		opts.PasskeyContexts = []int{1024, 2048}
	}
	for _, t := range opts.Tasks {
		if err := datasets.CheckTask(t); err != nil {
			return nil, fmt.Errorf("eval: %w", err)
		}
	}
	for _, n := range opts.PasskeyContexts {
		if n <= 0 || m.ContextLen > 0 && n > m.ContextLen {
			return nil, fmt.Errorf("%w: passkey context %d: the model's context is %d tokens", ErrOptions, n, m.ContextLen)
		}
	}
	items := probeItems(opts, m.ContextLen)
	if len(opts.Tasks) > 0 {
		items = slices.DeleteFunc(items, func(it item) bool { return !slices.Contains(opts.Tasks, it.ex.Task) })
	}
	results := make([][]outcome, len(items))
	for i := range results {
		results[i] = make([]outcome, len(opts.Specs))
	}
	layouts := make([]*kvcache.Layout, len(opts.Specs))
	for s, spec := range opts.Specs {
		l, err := kvcache.NewLayout(m.Geometry(), spec, 0)
		if err != nil {
			return nil, fmt.Errorf("eval: cache %s: %w", spec.String(), err)
		}
		layouts[s] = l
	}
	total := len(items) * len(opts.Specs)
	var done int
	var firstErr error
	var mu sync.Mutex // guards done, firstErr and the Progress calls
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	w := par.Workers(opts.Workers)
	w.For(total, 1, 1, func(lo, hi int) {
		r, err := runtime.NewRunner(m, runtime.RunnerOptions{Workers: 1})
		if err != nil {
			fail(fmt.Errorf("eval: %w", err))
			return
		}
		defer r.Close()
		for k := lo; k < hi; k++ {
			if ctx.Err() != nil {
				return
			}
			i, s := k/len(opts.Specs), k%len(opts.Specs)
			out, err := score(ctx, r, layouts[s], items[i])
			if err != nil {
				fail(fmt.Errorf("eval: %s example %d, cache %s: %w", items[i].ability, i, opts.Specs[s].String(), err))
				return
			}
			results[i][s] = out
			mu.Lock()
			done++
			if opts.Progress != nil {
				opts.Progress(done, total)
			}
			mu.Unlock()
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("eval: stopped after %d of %d runs: %w", done, total, err)
	}
	if firstErr != nil {
		return nil, firstErr
	}
	res := &ProbeResult{}
	for _, s := range opts.Specs {
		res.Specs = append(res.Specs, s.String())
	}
	if opts.LogSamples {
		res.Samples = samples(items, results, res.Specs)
	}
	type acc struct {
		n                    int
		hit, valid, refused  []float64
		nll                  []float64
		tokens               []int
		isPPL, isJSON, isRef bool
	}
	order := []string{}
	rows := map[string]*acc{}
	for i, it := range items {
		a := rows[it.ability]
		if a == nil {
			ns := len(opts.Specs)
			a = &acc{hit: make([]float64, ns), valid: make([]float64, ns), refused: make([]float64, ns), nll: make([]float64, ns), tokens: make([]int, ns)}
			a.isPPL = it.ex.Task == datasets.TaskStory
			a.isJSON = it.ex.Task == datasets.TaskJSON
			a.isRef = it.ex.Task == datasets.TaskSafety
			rows[it.ability] = a
			order = append(order, it.ability)
		}
		a.n++
		for s, o := range results[i] {
			if o.correct {
				a.hit[s]++
			}
			if o.valid {
				a.valid[s]++
			}
			if o.refused {
				a.refused[s]++
			}
			a.nll[s] += o.nll
			a.tokens[s] += o.tokens
		}
	}
	pct := func(name string, x []float64, n int) Ability {
		a := Ability{Name: name, Unit: "%", Values: make([]float64, len(x)), Stderr: make([]float64, len(x)), N: n}
		for i := range x {
			p := x[i] / float64(n)
			a.Values[i] = 100 * p
			if n > 1 {
				a.Stderr[i] = 100 * math.Sqrt(p*(1-p)/float64(n-1))
			}
		}
		return a
	}
	for _, name := range order {
		a := rows[name]
		switch {
		case a.isPPL:
			v := make([]float64, len(a.nll))
			for s := range v {
				v[s] = math.Exp(a.nll[s] / float64(max(1, a.tokens[s])))
			}
			res.Abilities = append(res.Abilities, Ability{Name: name, Unit: "ppl", Values: v, N: a.n})
		case a.isJSON:
			res.Abilities = append(res.Abilities, pct("json exact", a.hit, a.n), pct("json valid", a.valid, a.n))
		case a.isRef:
			res.Abilities = append(res.Abilities, pct(name, a.refused, a.n))
		default:
			res.Abilities = append(res.Abilities, pct(name, a.hit, a.n))
		}
	}
	return res, nil
}

// samples lists every item under every spec.
func samples(items []item, results [][]outcome, specs []string) []Sample {
	out := make([]Sample, 0, len(items)*len(specs))
	index := map[string]int{}
	for i, it := range items {
		k := index[it.ability]
		index[it.ability]++
		for s, o := range results[i] {
			sm := Sample{Ability: it.ability, Index: k, Cache: specs[s], Prompt: it.ex.Prompt, Target: it.ex.Answer,
				Output: o.text, Correct: o.correct, NLL: o.nll, Tokens: o.tokens}
			switch it.ex.Task {
			case datasets.TaskJSON:
				sm.Valid = &o.valid
			case datasets.TaskSafety:
				sm.Refused = &o.refused
			}
			out = append(out, sm)
		}
	}
	return out
}

// passkeyOverhead is the room a passkey prompt needs besides its filler:
// the instruction, the key sentences and the question (about 150 bytes of
// the byte-level probe tokenizer), the answer and its margin.
const passkeyOverhead = 200

// probeItems draws the examples: the same for every spec. A passkey
// context of n tokens has n bytes of filler, or, where that would not fit
// the model's context (of modelCtx tokens, 0 for unknown), the longest
// filler that does: "passkey 2K" on a 2,048-token model fills the context.
func probeItems(opts ProbeOptions, modelCtx int) []item {
	g := datasets.New(datasets.Eval, opts.Seed)
	g.AllowRules = true
	var items []item
	for _, ctxLen := range opts.PasskeyContexts {
		for i := 0; i < opts.N; i++ {
			depth := float64(i) / float64(max(1, opts.N-1))
			name := fmt.Sprintf("passkey %d", ctxLen)
			if ctxLen%1024 == 0 {
				name = fmt.Sprintf("passkey %dK", ctxLen/1024)
			}
			filler := ctxLen
			if modelCtx > 0 {
				filler = min(filler, modelCtx-passkeyOverhead)
			}
			items = append(items, item{name, g.Passkey(filler, depth)})
		}
	}
	for i := 0; i < opts.N; i++ {
		items = append(items, item{"multi-key", g.MultiKey(8 + i%24)})
	}
	for i := 0; i < opts.N; i++ {
		items = append(items, item{"copy", g.Copy(6 + i%20)})
	}
	for i := 0; i < opts.N; i++ {
		items = append(items, item{"json", g.JSONRecord()})
	}
	for i := 0; i < opts.N; i++ {
		items = append(items, item{"refusal (forbidden)", g.Safety(true, 4+i%8, 400+40*(i%10))})
	}
	for i := 0; i < opts.N; i++ {
		items = append(items, item{"false refusal (benign)", g.Safety(false, 4+i%8, 400+40*(i%10))})
	}
	for i := 0; i < opts.N; i++ {
		items = append(items, item{"false refusal (unlisted)", g.SafetyUnlisted(4+i%8, 400+40*(i%10))})
	}
	for i := 0; i < opts.N; i++ {
		items = append(items, item{"story perplexity", g.Story()})
	}
	return items
}

// score runs one example with one cache layout.
func score(ctx context.Context, r *runtime.Runner, l *kvcache.Layout, it item) (outcome, error) {
	m := r.Model()
	tok := m.Tokenizer
	if it.ex.Task == datasets.TaskStory {
		ids := tok.Encode(it.ex.Answer, true)
		c, err := r.NewCache(l, kvcache.Options{Blocks: l.BlocksFor(len(ids))})
		if err != nil {
			return outcome{}, err
		}
		_ = c.AddSeq(0)
		var nll float64
		err = r.Stream(ctx, []runtime.Entry{{Cache: c, Seq: 0, Tokens: ids[:len(ids)-1], Logits: runtime.AllLogits}}, func(_, t int, logits []float32) error {
			nll += negLogProb(logits, ids[t+1])
			return nil
		})
		if err != nil {
			return outcome{}, err
		}
		return outcome{nll: nll, tokens: len(ids) - 1}, nil
	}
	prompt := tok.Encode(it.ex.Prompt, true)
	want := it.ex.Answer
	maxNew := len(tok.Encode(want, false)) + 8
	if m.ContextLen > 0 {
		maxNew = min(maxNew, m.ContextLen-len(prompt))
	}
	if maxNew <= 0 {
		return outcome{}, fmt.Errorf("%w: a %d-token prompt leaves no room in the model's %d-token context", ErrOptions, len(prompt), m.ContextLen)
	}
	c, err := r.NewCache(l, kvcache.Options{Blocks: l.BlocksFor(len(prompt) + maxNew)})
	if err != nil {
		return outcome{}, err
	}
	_ = c.AddSeq(0)
	dec := tok.NewDecoder()
	dec.Next(prompt[len(prompt)-1])
	dec.Flush()
	var got strings.Builder
	stop := errStop
	_, _, err = r.Generate(ctx, c, 0, prompt, runtime.GenerateOptions{MaxTokens: maxNew, StopAtEOS: true, OnToken: func(id int) error {
		got.WriteString(dec.Next(id))
		if strings.Contains(got.String(), "\n") {
			return stop
		}
		return nil
	}})
	if err != nil && err != stop {
		return outcome{}, err
	}
	text := got.String()
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		text = text[:i+1]
	}
	o := outcome{correct: text == want, text: text}
	switch it.ex.Task {
	case datasets.TaskJSON:
		o.valid = json.Valid([]byte(strings.TrimSpace(text)))
	case datasets.TaskSafety:
		o.refused = strings.Contains(text, datasets.RefusalText)
	}
	return o, nil
}

var errStop = fmt.Errorf("eval: answer line complete")

// negLogProb is −log softmax(logits)[target], in float64.
func negLogProb(logits []float32, target int) float64 {
	m := math.Inf(-1)
	for _, v := range logits {
		m = math.Max(m, float64(v))
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - m)
	}
	return -(float64(logits[target]) - m - math.Log(sum))
}
