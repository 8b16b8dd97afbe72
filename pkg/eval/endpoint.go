package eval

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/kvqlabs/kvq/internal/par"
	"github.com/kvqlabs/kvq/pkg/runtime"
)

// A Deployment is a served model evaluated through its API: an
// OpenAI-compatible server (vLLM or SGLang with one KV-cache setting, kvq
// serve) reached over HTTP. Prompts go as token ids, so that every
// deployment reads exactly the tokens the local tokenizer made.
type Deployment interface {
	// Generate decodes prompt greedily, at most maxTokens tokens, ending
	// at a stop token of the model.
	Generate(ctx context.Context, prompt []int, maxTokens int) (string, error)
	// ScorePrompt returns, for each token of prompt, its log-probability
	// given the tokens before it (NaN for the first) and the server's
	// topK likeliest tokens there.
	ScorePrompt(ctx context.Context, prompt []int, topK int) ([]ScoredToken, error)
}

// ScoredToken is one prompt token's teacher-forced score from a server.
type ScoredToken struct {
	Token   string
	Logprob float64
	// Top are the server's likeliest tokens at this position (the token
	// itself may be among them).
	Top map[string]float64
}

// EndpointOptions configure RunEndpoints.
type EndpointOptions struct {
	// Names and Deployments, the baseline first; URLs and Models, when
	// set, describe them in the report.
	Names       []string
	Deployments []Deployment
	URLs        []string
	Models      []string
	// Texts are scored teacher-forced from the servers' prompt
	// log-probabilities in chunks of TextOpts.Ctx tokens (Protocol, Ctx,
	// MaxChunks, Store and Progress are used).
	Texts    []Text
	TextOpts TextOptions
	// TopK is the number of alternatives asked per position (default 20,
	// vLLM's default --max-logprobs).
	TopK int
	// Suites are the generation tasks.
	Suites []Suite
	Gates  []Gate
	// Refusal as in Options.
	Refusal *RefusalDetector
	// Concurrency is the number of tasks in flight at once (default 8).
	Concurrency int
	// Store keeps every scored item and chunk for resumption.
	Store          *Store
	Progress       func(stage string, done, total int)
	LogSamples     bool
	BootstrapIters int
	Seed           uint64
}

// TopKApproximation says how RunEndpoints' KLD is computed.
const TopKApproximation = "KLD from the servers' top-k log-probabilities: the tokens in both top-k lists, and one bucket for the rest of " +
	"each distribution (a lower bound of the full-vocabulary KLD; PPL, Δp and top-1 agreement are exact)"

// RunEndpoints evaluates deployments side by side: the generation suites
// decoded greedily by each server, and texts scored teacher-forced from
// their prompt log-probabilities, with the KLD approximated from the top-k
// alternatives the servers return (TopKApproximation; full distributions
// are not available over the API). m supplies the tokenizer and the chat
// template: it must be the model the servers serve. Memory and speed are
// not measured (they are the servers'; kvq bench --endpoint measures
// speed).
func RunEndpoints(ctx context.Context, m *runtime.Model, opts EndpointOptions) (*Report, error) {
	if len(opts.Deployments) < 2 || len(opts.Names) != len(opts.Deployments) {
		return nil, fmt.Errorf("%w: a baseline and at least one candidate deployment", ErrOptions)
	}
	if opts.TopK <= 0 {
		opts.TopK = 20
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 8
	}
	if err := prepare(m, opts.Suites); err != nil {
		return nil, err
	}
	if err := checkMCLocal(opts.Suites); err != nil {
		return nil, err
	}
	rep := &Report{Schema: Schema}
	for i, n := range opts.Names {
		ci := CacheInfo{Spec: n, Baseline: i == 0}
		if i < len(opts.URLs) {
			ci.Endpoint = opts.URLs[i]
		}
		if i < len(opts.Models) {
			ci.ServedModel = opts.Models[i]
		}
		rep.Caches = append(rep.Caches, ci)
	}
	progress := func(stage string) func(int, int) {
		if opts.Progress == nil {
			return nil
		}
		return func(d, t int) { opts.Progress(stage, d, t) }
	}
	if len(opts.Texts) > 0 {
		to := opts.TextOpts
		to.Progress = progress("text")
		to.Store = opts.Store
		res, err := endpointText(ctx, m, opts, to)
		if err != nil {
			return nil, err
		}
		rep.Text = res
	}
	if len(opts.Suites) > 0 {
		gen := func() (generator, func(), error) {
			return func(ctx context.Context, _ *Task, gi GenItem) ([]GenOutput, error) {
				return endpointGenerate(ctx, m, opts.Deployments, opts.Names, gi)
			}, func() {}, nil
		}
		o := Options{Suites: opts.Suites, Refusal: opts.Refusal, Workers: opts.Concurrency, Store: opts.Store,
			Progress: opts.Progress, LogSamples: opts.LogSamples, BootstrapIters: opts.BootstrapIters, Seed: opts.Seed}
		if err := runSuites(ctx, m, opts.Names, gen, o, rep); err != nil {
			return nil, err
		}
	}
	applyGates(rep, opts.Gates)
	return rep, nil
}

// endpointGenerate decodes gi on every deployment and cuts each output as
// Generate does (at the end of the first line with Line, before a stop
// string with Until).
func endpointGenerate(ctx context.Context, m *runtime.Model, ds []Deployment, names []string, gi GenItem) ([]GenOutput, error) {
	maxNew := gi.MaxTokens
	if m.ContextLen > 0 {
		maxNew = min(maxNew, m.ContextLen-len(gi.Prompt))
	}
	if maxNew <= 0 {
		return nil, fmt.Errorf("%w: a %d-token prompt leaves no room in the model's %d-token context", ErrOptions, len(gi.Prompt), m.ContextLen)
	}
	outs := make([]GenOutput, len(ds))
	var base []int
	for i, d := range ds {
		text, err := d.Generate(ctx, gi.Prompt, maxNew)
		if err != nil {
			return nil, fmt.Errorf("deployment %s: %w", names[i], err)
		}
		if gi.Line {
			if k := strings.IndexByte(text, '\n'); k >= 0 {
				text = text[:k+1]
			}
		}
		text, _ = cutUntil(text, gi.Until)
		ids := m.Tokenizer.Encode(text, false)
		outs[i] = GenOutput{Text: text, Tokens: len(ids), Diverge: -1}
		if i == 0 {
			base = ids
			continue
		}
		outs[i].Diverge = divergeIDs(base, ids)
	}
	return outs, nil
}

// divergeIDs is the first index where a and b differ, -1 when equal.
func divergeIDs(a, b []int) int {
	for i := 0; i < min(len(a), len(b)); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// endpointText scores the texts' chunks on every deployment, chunks in
// flight at once up to opts.Concurrency, and gathers the metrics in chunk
// order.
func endpointText(ctx context.Context, m *runtime.Model, opts EndpointOptions, to TextOptions) (*TextResult, error) {
	// A server scores a prompt by generating one token after it (vLLM
	// refuses max_tokens 0), so a chunk leaves one position free.
	limit := m.ContextLen - 1
	if to.Ctx <= 0 {
		to.Ctx = 2048
		if m.ContextLen > 0 {
			to.Ctx = min(to.Ctx, limit)
		}
	}
	if m.ContextLen > 0 && to.Ctx > limit {
		return nil, fmt.Errorf("%w: chunks of %d tokens: the model's context is %d, and a server needs one position to score a prompt", ErrOptions, to.Ctx, m.ContextLen)
	}
	if to.Ctx < 4 {
		return nil, fmt.Errorf("%w: chunks of %d tokens", ErrOptions, to.Ctx)
	}
	if to.Exact {
		return nil, fmt.Errorf("%w: exact prefill is not available from a server (it scores the cache as it stores it)", ErrOptions)
	}
	chunks, err := textChunks(m, opts.Texts, to)
	if err != nil {
		return nil, err
	}
	n := len(opts.Deployments)
	acc := make([][]accum, len(chunks))
	var mu sync.Mutex // guards done, firstErr, the store and Progress
	var firstErr error
	done := 0
	par.Workers(opts.Concurrency).For(len(chunks), 1, 1, func(lo, hi int) {
		for ci := lo; ci < hi; ci++ {
			if ctx.Err() != nil {
				return
			}
			if to.Store != nil {
				mu.Lock()
				got := to.Store.chunk(ci)
				mu.Unlock()
				if len(got) == n {
					acc[ci] = got
					mu.Lock()
					done++
					if to.Progress != nil {
						to.Progress(done, len(chunks))
					}
					mu.Unlock()
					continue
				}
			}
			cur, err := scoreChunk(ctx, opts, chunks[ci])
			if err == nil && to.Store != nil {
				mu.Lock()
				err = to.Store.putChunk(ci, cur)
				mu.Unlock()
			}
			mu.Lock()
			if err != nil {
				if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
					firstErr = cmp(firstErr, fmt.Errorf("eval: text chunk %d of %d: %w", ci+1, len(chunks), err))
				}
				mu.Unlock()
				return
			}
			acc[ci] = cur
			done++
			if to.Progress != nil {
				to.Progress(done, len(chunks))
			}
			mu.Unlock()
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("eval: stopped after %d of %d text chunks: %w", done, len(chunks), err)
	}
	if firstErr != nil {
		return nil, firstErr
	}
	all := make([]accum, n)
	for _, cur := range acc {
		for i := range all {
			all[i].merge(&cur[i])
		}
	}
	res := &TextResult{Protocol: to.Protocol.String(), Ctx: to.Ctx, Chunks: len(chunks), Approximation: TopKApproximation}
	for i, a := range all {
		tm := a.metrics(opts.Names[i], to.Ctx)
		if to.KeepPositions {
			tm.PerPosition = &PositionValues{KLD: a.kld, Same: a.same}
		}
		res.Caches = append(res.Caches, tm)
	}
	return res, nil
}

// scoreChunk scores one chunk on every deployment: the scored positions
// are the chunk's [first, len−1), each predicting the next token, as
// TeacherForced scores them.
func scoreChunk(ctx context.Context, opts EndpointOptions, ch chunk) ([]accum, error) {
	scored := make([][]ScoredToken, len(opts.Deployments))
	for i, d := range opts.Deployments {
		st, err := d.ScorePrompt(ctx, ch.ids, opts.TopK)
		if err != nil {
			return nil, fmt.Errorf("deployment %s: %w", opts.Names[i], err)
		}
		if len(st) != len(ch.ids) {
			return nil, fmt.Errorf("deployment %s: %d scores for %d tokens", opts.Names[i], len(st), len(ch.ids))
		}
		scored[i] = st
	}
	cur := make([]accum, len(opts.Deployments))
	for t := ch.first; t < len(ch.ids)-1; t++ {
		b := scored[0][t+1]
		if math.IsNaN(b.Logprob) {
			return nil, fmt.Errorf("deployment %s: no log-probability for token %d", opts.Names[0], t+1)
		}
		baseTop := argmaxTop(b.Top)
		cur[0].add(-b.Logprob, -b.Logprob, 0, 0, true, t)
		for i := 1; i < len(scored); i++ {
			c := scored[i][t+1]
			if c.Token != b.Token {
				return nil, fmt.Errorf("deployments %s and %s disagree on token %d of a chunk (%q, %q): they tokenize differently, so they are not the same model",
					opts.Names[0], opts.Names[i], t+1, b.Token, c.Token)
			}
			if math.IsNaN(c.Logprob) {
				return nil, fmt.Errorf("deployment %s: no log-probability for token %d", opts.Names[i], t+1)
			}
			kld := TopKKLD(b.Top, c.Top)
			cur[i].add(-c.Logprob, -b.Logprob, kld, math.Exp(c.Logprob)-math.Exp(b.Logprob), argmaxTop(c.Top) == baseTop, t)
		}
	}
	return cur, nil
}

// argmaxTop is the likeliest token of top (the first in byte order on
// ties).
func argmaxTop(top map[string]float64) string {
	best, bv := "", math.Inf(-1)
	for t, v := range top {
		if v > bv || v == bv && t < best {
			best, bv = t, v
		}
	}
	return best
}

// TopKKLD approximates KL(P ‖ Q) from the two distributions' top-k
// log-probabilities by an exact coarse-graining: every token in both
// top-k lists is its own outcome, and all other tokens form one bucket
// holding the rest of each distribution's mass. Merging outcomes never
// increases a KL divergence, so with exact inputs this is a lower bound
// of the full-vocabulary KLD (equal to it when the lists hold all the
// mass), 0 when Q equals P, and never negative.
func TopKKLD(p, q map[string]float64) float64 {
	var kld, pIn, qIn float64
	for t, lp := range p {
		lq, ok := q[t]
		if !ok {
			continue
		}
		pv, qv := math.Exp(lp), math.Exp(lq)
		pIn += pv
		qIn += qv
		if pv > 0 {
			kld += pv * (lp - lq)
		}
	}
	if pRest := 1 - pIn; pRest > 1e-12 {
		kld += pRest * math.Log(pRest/math.Max(1-qIn, 1e-12))
	}
	return math.Max(0, kld)
}
