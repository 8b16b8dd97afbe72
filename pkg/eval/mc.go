package eval

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// Multiple choice by log-likelihood, as lm-evaluation-harness scores its
// multiple_choice tasks (lm_eval/api/task.py, v0.4): every choice of an
// item is one request (context, continuation); its score is the summed
// log-probability of the continuation's tokens given the context; the
// prediction is the argmax of the sums (acc) or of the sums divided by the
// length of each choice's text in characters (acc_norm; lm-eval's
// completion_len, len(choice) in Python: code points, the choice without
// the " " before it). Ties go to the first choice (numpy's argmax).
//
//	request     context = the shots, then doc_to_text; continuation = " " +
//	            choice (target_delimiter " "). Winogrande's partial scoring
//	            turns it round: one context per choice (the sentence up to
//	            "_" with the option), the same continuation (" " + the rest)
//	tokens      lm-eval's _encode_pair: trailing whitespace of the context
//	            moves to the continuation; whole = encode(context +
//	            continuation), the continuation's tokens are whole's after
//	            the len(encode(context)) first (kvq encodes with the model's
//	            BOS, as its other suites); the input is whole without its
//	            last token, cut from the left to the model's context
//	forward     every cache reads the same tokens in one forward, side by
//	            side over shared weights, as the teacher-forced text path
//	            (one fresh cache per cache and choice, the tokens in one
//	            step)
//
// The data come from the user's local files (mcdata.go): a generic
// {"context", "choices", "gold"} schema and adapters for the common dumps
// of MMLU, ARC, HellaSwag, Winogrande and PIQA.

// Multiple-choice metrics: the rows "NAME acc" and "NAME acc_norm".
const (
	MetricAcc     Metric = "acc"
	MetricAccNorm Metric = "acc_norm"
)

// MCDoc is one multiple-choice item after its adapter: lm-eval's
// doc_to_text, doc_to_choice and doc_to_target.
type MCDoc struct {
	// Query is the item's text (doc_to_text): the context every choice
	// continues. With Partial it is the sentence as written, for reports.
	Query string
	// Choices are the answers (doc_to_choice), each scored as the
	// continuation " " + choice; with Partial, the contexts.
	Choices []string
	// Gold is the index of the right choice.
	Gold int
	// Partial is Winogrande's scoring: context i is Choices[i] and every
	// choice continues with " " + Target.
	Partial bool
	Target  string
	// Subject is MMLU's subject: it names the description line and picks
	// the shots.
	Subject string
}

// MCRequest is one choice's log-likelihood request.
type MCRequest struct {
	Context      string
	Continuation string
}

// Requests are doc's requests after prefix (the description and shots),
// one per choice.
func (d MCDoc) Requests(prefix string) []MCRequest {
	out := make([]MCRequest, len(d.Choices))
	for i, c := range d.Choices {
		if d.Partial {
			out[i] = MCRequest{Context: prefix + c, Continuation: " " + d.Target}
		} else {
			out[i] = MCRequest{Context: prefix + d.Query, Continuation: " " + c}
		}
	}
	return out
}

// shot is doc as a few-shot example: its text, " ", its gold target.
func (d MCDoc) shot() string {
	if d.Partial {
		return d.Choices[d.Gold] + " " + d.Target
	}
	return d.Query + " " + d.Choices[d.Gold]
}

// MCPrediction is argmax of ll (acc) and of ll[i] over the length of
// choice i in characters (acc_norm): the first maximum, as numpy's argmax.
func MCPrediction(ll []float64, choices []string) (acc, accNorm int) {
	best, bestNorm := math.Inf(-1), math.Inf(-1)
	acc, accNorm = -1, -1
	for i, v := range ll {
		if acc < 0 || v > best {
			acc, best = i, v
		}
		n := v / float64(utf8.RuneCountInString(choices[i]))
		if accNorm < 0 || n > bestNorm {
			accNorm, bestNorm = i, n
		}
	}
	return acc, accNorm
}

// encodePair is lm-eval's _encode_pair with the model's BOS: the input
// tokens (whole without its last token, cut from the left to limit when
// limit > 0), the index of the input's first token whose logits predict a
// continuation token, and the continuation's tokens.
func encodePair(m *runtime.Model, context, continuation string, limit int) (input []int, first int, cont []int, err error) {
	if n := len(context) - len(strings.TrimRightFunc(context, unicode.IsSpace)); n > 0 {
		context, continuation = context[:len(context)-n], context[len(context)-n:]+continuation
	}
	ctxIDs := m.Tokenizer.Encode(context, true)
	if len(ctxIDs) == 0 {
		return nil, 0, nil, fmt.Errorf("%w: an empty context and a tokenizer without BOS leave the first continuation token nothing to follow", ErrOptions)
	}
	whole := m.Tokenizer.Encode(context+continuation, true)
	if len(whole) <= len(ctxIDs) {
		return nil, 0, nil, nil // no continuation token: log-likelihood 0, as lm-eval's empty sum
	}
	cont = whole[len(ctxIDs):]
	input = whole[:len(whole)-1]
	first = len(ctxIDs) - 1
	if limit > 0 && len(input) > limit {
		if len(cont) > limit {
			return nil, 0, nil, fmt.Errorf("%w: a %d-token continuation does not fit the model's %d-token context", ErrOptions, len(cont), limit)
		}
		cut := len(input) - limit
		input, first = input[cut:], first-cut
	}
	return input, first, cont, nil
}

// Loglikelihoods scores each request under a fresh cache of every layout
// (the first is the baseline): out[request][cache] is the summed
// log-probability of the continuation's tokens. The caches read the same
// tokens in one forward per request; exact makes them attend to their own
// exact keys and values (Hugging Face QuantizedCache's prefill).
func Loglikelihoods(ctx context.Context, r *runtime.Runner, layouts []*kvcache.Layout, reqs []MCRequest, exact bool) ([][]float64, error) {
	m := r.Model()
	out := make([][]float64, len(reqs))
	for qi, q := range reqs {
		out[qi] = make([]float64, len(layouts))
		input, first, cont, err := encodePair(m, q.Context, q.Continuation, m.ContextLen)
		if err != nil {
			return nil, err
		}
		if len(cont) == 0 {
			continue
		}
		batch := make([]runtime.Entry, len(layouts))
		for i, l := range layouts {
			c, err := r.NewCache(l, kvcache.Options{Blocks: l.BlocksFor(len(input))})
			if err != nil {
				return nil, err
			}
			_ = c.AddSeq(0)
			batch[i] = runtime.Entry{Cache: c, Seq: 0, Tokens: input, Logits: runtime.AllLogits, Exact: exact}
		}
		sums := out[qi]
		err = r.Stream(ctx, batch, func(e, i int, logits []float32) error {
			if i < first {
				return nil
			}
			sums[e] += tokenLogProb(logits, cont[i-first])
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// tokenLogProb is log softmax(logits)[id], computed as logSoftmax does.
func tokenLogProb(logits []float32, id int) float64 {
	mx := float64(logits[0])
	for _, v := range logits {
		mx = max(mx, float64(v))
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - mx)
	}
	return float64(logits[id]) - (mx + math.Log(sum))
}

// mcTask is a task's multiple-choice part: its requests and choices.
type mcTask struct {
	reqs    []MCRequest
	choices []string
	gold    int
}

// scoreMC scores t's choices under every layout: one GenOutput per cache
// whose LogLik holds the choices' log-likelihoods and whose Text says
// what each metric picked.
func scoreMC(ctx context.Context, r *runtime.Runner, layouts []*kvcache.Layout, t *mcTask, exact bool) ([]GenOutput, error) {
	ll, err := Loglikelihoods(ctx, r, layouts, t.reqs, exact)
	if err != nil {
		return nil, err
	}
	out := make([]GenOutput, len(layouts))
	for c := range layouts {
		v := make([]float64, len(ll))
		for i := range ll {
			v[i] = ll[i][c]
		}
		out[c] = GenOutput{Text: mcOutput(v, t.choices), Diverge: -1, LogLik: v}
	}
	return out, nil
}

// mcOutput describes the picks and the log-likelihoods, for the samples
// and the review page.
func mcOutput(ll []float64, choices []string) string {
	acc, norm := MCPrediction(ll, choices)
	var b strings.Builder
	fmt.Fprintf(&b, "acc: %d %q; acc_norm: %d %q; log-likelihoods:", acc, choices[acc], norm, choices[norm])
	for _, v := range ll {
		b.WriteString(" " + strconv.FormatFloat(v, 'f', 4, 64))
	}
	return b.String()
}

// score scores a cache's output with metric (acc or acc_norm).
func (t *mcTask) score(metric Metric, o GenOutput) (Score, error) {
	if len(o.LogLik) != len(t.choices) {
		return Score{}, fmt.Errorf("%w: %d log-likelihoods for %d choices", ErrOptions, len(o.LogLik), len(t.choices))
	}
	acc, norm := MCPrediction(o.LogLik, t.choices)
	pick := acc
	switch metric {
	case MetricAcc:
	case MetricAccNorm:
		pick = norm
	default:
		return Score{}, fmt.Errorf("%w: %s on a multiple-choice item (valid: acc, acc_norm)", ErrMetric, metric)
	}
	return passFail(pick == t.gold, fmt.Sprintf("picked %d, gold %d", pick, t.gold)), nil
}

// scoreItem's multiple-choice twin: every metric of t under every cache.
func (t *mcTask) scoreItem(metrics []Metric, outs []GenOutput) (itemResult, error) {
	res := itemResult{outputs: outs}
	for _, metric := range metrics {
		row := make([]Score, len(outs))
		for c, o := range outs {
			sc, err := t.score(metric, o)
			if err != nil {
				return res, err
			}
			row[c] = sc
		}
		res.scores = append(res.scores, row)
	}
	return res, nil
}

// MCOptions configure MCSuite.
type MCOptions struct {
	// Name names the suite and prefixes its rows ("arc acc").
	Name string
	// Metrics are the rows (default: acc and acc_norm).
	Metrics []Metric
	// Test are the items scored, the first N of them (N ≤ 0: all).
	Test []MCDoc
	N    int
	// Shots are the few-shot examples, Fewshot of them before each item:
	// with FirstN, the first of those of the item's subject (the first of
	// all when the item has none), as lm-eval's first_n sampler over
	// MMLU's per-subject dev split; otherwise a draw without replacement
	// seeded by Seed and the item's index.
	Shots   []MCDoc
	Fewshot int
	FirstN  bool
	Seed    uint64
	// Description prefixes each item's prompt (MMLU's subject line); nil:
	// none.
	Description func(d MCDoc) string
}

// MCSuite is a multiple-choice suite: one task per scored item. It returns
// ErrOptions when Fewshot is negative or more than the shots given (of
// the item's subject, with FirstN).
func MCSuite(o MCOptions) (Suite, error) {
	if o.Fewshot < 0 || o.Fewshot > len(o.Shots) {
		return Suite{}, fmt.Errorf("%w: %s: %d few-shot examples asked for, %d given", ErrOptions, o.Name, o.Fewshot, len(o.Shots))
	}
	metrics := o.Metrics
	if len(metrics) == 0 {
		metrics = []Metric{MetricAcc, MetricAccNorm}
	}
	n := len(o.Test)
	if o.N > 0 {
		n = min(n, o.N)
	}
	if n > MaxExamples {
		return Suite{}, fmt.Errorf("%w: %d %s items (at most %d)", ErrOptions, n, o.Name, MaxExamples)
	}
	s := Suite{Name: o.Name, Kind: "multiple-choice", Labels: map[Metric]string{}}
	for _, m := range metrics {
		s.Labels[m] = o.Name + " " + string(m)
	}
	for i, d := range o.Test[:n] {
		shots, err := o.shots(i, d)
		if err != nil {
			return Suite{}, err
		}
		var prefix strings.Builder
		if o.Description != nil {
			prefix.WriteString(o.Description(d))
		}
		for _, s := range shots {
			prefix.WriteString(s.shot() + "\n\n")
		}
		prompt := prefix.String() + d.Query
		reference := d.Choices[d.Gold]
		if d.Partial {
			reference += " " + d.Target
		}
		s.Tasks = append(s.Tasks, Task{Suite: o.Name, Index: i, ID: o.Name + "#" + strconv.Itoa(i),
			Prompt: prompt, Reference: reference, Metrics: metrics,
			Meta: map[string]string{"shots": strconv.Itoa(len(shots)), "choices": strconv.Itoa(len(d.Choices))},
			mc:   &mcTask{reqs: d.Requests(prefix.String()), choices: d.Choices, gold: d.Gold}, ids: []int{}})
	}
	return s, nil
}

// shots are item i's few-shot examples.
func (o MCOptions) shots(i int, d MCDoc) ([]MCDoc, error) {
	k := o.Fewshot
	if k == 0 {
		return nil, nil
	}
	if o.FirstN {
		var out []MCDoc
		for _, s := range o.Shots {
			if d.Subject == "" || s.Subject == d.Subject {
				out = append(out, s)
			}
			if len(out) == k {
				return out, nil
			}
		}
		return nil, fmt.Errorf("%w: %s item %d: %d few-shot examples asked for, the few-shot file holds %d of subject %q", ErrOptions, o.Name, i+1, k, len(out), d.Subject)
	}
	// k distinct indices, drawn in order (k is small beside a train
	// split: no permutation of all of it per item).
	rng := rand.New(rand.NewPCG(o.Seed, uint64(i)))
	seen := make(map[int]bool, k)
	out := make([]MCDoc, 0, k)
	for len(out) < k {
		if p := rng.IntN(len(o.Shots)); !seen[p] {
			seen[p] = true
			out = append(out, o.Shots[p])
		}
	}
	return out, nil
}

// checkMCLocal refuses multiple-choice suites where only generation is
// available (servers: kvq scores log-likelihoods with its own forward).
func checkMCLocal(suites []Suite) error {
	for _, s := range suites {
		for _, t := range s.Tasks {
			if t.mc != nil {
				return fmt.Errorf("%w: %s is scored by log-likelihood, which kvq computes with a local model: not with --endpoint", ErrOptions, s.Name)
			}
		}
	}
	return nil
}
