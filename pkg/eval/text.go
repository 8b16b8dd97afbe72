package eval

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// Teacher-forced distribution metrics: the model reads a text with every
// cache side by side (one forward per chunk, all caches in one batch) and
// each position's next-token distribution under a candidate cache is
// compared with the baseline's.
//
// Per scored position t (predicting token x_{t+1}), with p the baseline's
// and q a candidate's softmax:
//
//	NLL      = −log q(x_{t+1})                       (PPL = exp(mean NLL))
//	KLD      = Σ_i p_i·(log p_i − log q_i)            KL(baseline ‖ candidate), nats
//	same top = [argmax q = argmax p]
//	Δp       = q(x_{t+1}) − p(x_{t+1})
//
// Means carry llama-perplexity's uncertainty, sqrt((E[x²]−E[x]²)/(n−1))
// (0 for n ≤ 10); ln(PPL/PPL_base) is the mean NLL difference, its error
// from the variances and the covariance of the two NLL series, as
// llama-perplexity computes it.

// Protocol selects how texts are cut into chunks and which positions count.
type Protocol int

// Protocols.
const (
	// ProtocolKVQ evaluates each text on its own, in chunks of Ctx tokens
	// (the first starts with the tokenizer's BOS, later ones with BOS
	// prepended), and scores every position after the first: damage can be
	// read by position (KLD by position bucket).
	ProtocolKVQ Protocol = iota
	// ProtocolLlamaCpp is llama-perplexity's: the texts' tokens (BOS first)
	// cut into chunks of Ctx tokens, each chunk's first token replaced by
	// BOS, only the second half of each chunk scored (positions Ctx/2 …
	// Ctx−2 predicting the next token), the baseline's log-probabilities
	// rounded to 16 bits over [max−16, max] nats as its --kl-divergence-base
	// file stores them, and KLD summed over tokens with log p > −16.
	ProtocolLlamaCpp
)

func (p Protocol) String() string {
	if p == ProtocolLlamaCpp {
		return "llama.cpp"
	}
	return "kvq"
}

// ParseProtocol parses "kvq" or "llama.cpp".
func ParseProtocol(s string) (Protocol, error) {
	switch s {
	case "kvq", "":
		return ProtocolKVQ, nil
	case "llama.cpp", "llamacpp", "llama-perplexity":
		return ProtocolLlamaCpp, nil
	}
	return 0, fmt.Errorf("%w: protocol %q (valid: kvq, llama.cpp)", ErrOptions, s)
}

// TextOptions configure TeacherForced.
type TextOptions struct {
	Protocol Protocol
	// Ctx is the chunk size in tokens (default: the model's context, at
	// most 2048; llama-perplexity's default is 512).
	Ctx int
	// MaxChunks bounds the chunks evaluated over all texts (0: all).
	MaxChunks int
	// Progress, when set, is called after each chunk.
	Progress func(done, total int)
	// Store, when set, keeps each chunk's values and skips the chunks it
	// holds (resume).
	Store *Store
	// Exact feeds each chunk in steps of Step tokens (default 1) whose
	// tokens attend to each other's exact keys and values, and to earlier
	// steps' as cached: Hugging Face QuantizedCache's semantics, where a
	// prefill never reads its own quantized rows. The default (false) is
	// one step per chunk reading the cache as stored, as vLLM and
	// llama.cpp do.
	Exact bool
	Step  int
	// KeepPositions fills TextMetrics.PerPosition, for paired comparisons
	// between caches over the same positions.
	KeepPositions bool
}

// Text is one named text to score.
type Text struct {
	Name string
	Body string
}

// TextMetrics are one cache's teacher-forced metrics over all texts.
type TextMetrics struct {
	Cache string `json:"cache"`
	// Tokens is the number of scored positions.
	Tokens int `json:"tokens"`
	// PPL is exp(mean NLL) with its uncertainty.
	PPL    float64 `json:"ppl"`
	PPLErr float64 `json:"ppl_err"`
	// LnPPLRatio is mean(NLL − NLL_base) = ln(PPL/PPL_base), with its
	// uncertainty; zero for the baseline.
	LnPPLRatio    float64 `json:"ln_ppl_ratio"`
	LnPPLRatioErr float64 `json:"ln_ppl_ratio_err"`
	// KLD statistics, nats (KL(baseline ‖ this cache)).
	KLD KLDStats `json:"kld"`
	// SameTop is the share of positions whose argmax agrees with the
	// baseline's, with its binomial standard error.
	SameTop    float64 `json:"same_top"`
	SameTopErr float64 `json:"same_top_err"`
	// DeltaP statistics of the reference token's probability, q − p.
	DeltaP DeltaPStats `json:"delta_p"`
	// ByPosition is the KLD by position within a chunk.
	ByPosition []PositionBucket `json:"by_position"`
	// PerPosition holds every scored position's values, in the same order
	// for every cache (with TextOptions.KeepPositions; not serialized).
	PerPosition *PositionValues `json:"-"`
}

// PositionValues are per-position values of one cache.
type PositionValues struct {
	KLD  []float64
	Same []bool
}

// KLDStats summarize per-position KL divergences.
type KLDStats struct {
	Mean   float64 `json:"mean"`
	Err    float64 `json:"err"`
	Median float64 `json:"median"`
	P90    float64 `json:"p90"`
	P99    float64 `json:"p99"`
	P999   float64 `json:"p99_9"`
	Max    float64 `json:"max"`
}

// DeltaPStats summarize Δp = q(x) − p(x) of the reference token.
type DeltaPStats struct {
	Mean    float64 `json:"mean"`
	MeanErr float64 `json:"mean_err"`
	RMS     float64 `json:"rms"`
	RMSErr  float64 `json:"rms_err"`
	Min     float64 `json:"min"`
	Max     float64 `json:"max"`
}

// PositionBucket is the KLD of positions [From, To) of the chunks.
type PositionBucket struct {
	From    int     `json:"from"`
	To      int     `json:"to"`
	Tokens  int     `json:"tokens"`
	KLD     float64 `json:"kld"`
	SameTop float64 `json:"same_top"`
}

// TextResult is TeacherForced's result: metrics per cache (the baseline
// first) and the scoring facts.
type TextResult struct {
	Protocol string        `json:"protocol"`
	Ctx      int           `json:"ctx"`
	Chunks   int           `json:"chunks"`
	Caches   []TextMetrics `json:"caches"`
	// Approximation, when set, says how the KLD was approximated (from
	// servers' top-k log-probabilities, kvq eval --endpoint).
	Approximation string `json:"approximation,omitempty"`
}

// chunk is one forward's tokens and its scored positions [first, len-1).
type chunk struct {
	ids   []int
	first int
}

// textChunks cuts the texts into chunks for protocol p.
func textChunks(m *runtime.Model, texts []Text, opts TextOptions) ([]chunk, error) {
	tok := m.Tokenizer
	bos := -1
	if tok.AddsBOS() {
		bos = tok.BOS()
	}
	var chunks []chunk
	switch opts.Protocol {
	case ProtocolLlamaCpp:
		// All texts in one token stream, as llama-perplexity reads one
		// file (BOS at the start of each text: the tokenizer adds it).
		var ids []int
		for _, t := range texts {
			ids = append(ids, tok.Encode(t.Body, true)...)
		}
		n := len(ids) / opts.Ctx
		if len(ids) < 2*opts.Ctx {
			return nil, fmt.Errorf("%w: the llama.cpp protocol needs at least 2·ctx = %d tokens, the texts have %d", ErrOptions, 2*opts.Ctx, len(ids))
		}
		for i := 0; i < n; i++ {
			c := slices.Clone(ids[i*opts.Ctx : (i+1)*opts.Ctx])
			if bos >= 0 {
				c[0] = bos
			}
			chunks = append(chunks, chunk{ids: c, first: opts.Ctx / 2})
		}
	default:
		for _, t := range texts {
			ids := tok.Encode(t.Body, true)
			for start := 0; start < len(ids)-1; {
				var c []int
				if start > 0 && bos >= 0 {
					c = append(c, bos)
				}
				end := min(len(ids), start+opts.Ctx-len(c))
				c = append(c, ids[start:end]...)
				if len(c) >= 2 {
					chunks = append(chunks, chunk{ids: c, first: 0})
				}
				if end == len(ids) {
					break
				}
				start = end
			}
		}
	}
	if opts.MaxChunks > 0 && len(chunks) > opts.MaxChunks {
		chunks = chunks[:opts.MaxChunks]
	}
	if len(chunks) == 0 {
		return nil, fmt.Errorf("%w: the texts hold no chunk of 2 or more tokens", ErrOptions)
	}
	return chunks, nil
}

// accum gathers one cache's per-position values.
type accum struct {
	nll, nllBase []float64
	kld, dp      []float64
	same         []bool
	pos          []int
}

func (a *accum) merge(b *accum) {
	a.nll, a.nllBase = append(a.nll, b.nll...), append(a.nllBase, b.nllBase...)
	a.kld, a.dp = append(a.kld, b.kld...), append(a.dp, b.dp...)
	a.same, a.pos = append(a.same, b.same...), append(a.pos, b.pos...)
}

func (a *accum) add(nll, nllBase, kld, dp float64, same bool, pos int) {
	a.nll, a.nllBase = append(a.nll, nll), append(a.nllBase, nllBase)
	a.kld, a.dp = append(a.kld, kld), append(a.dp, dp)
	a.same, a.pos = append(a.same, same), append(a.pos, pos)
}

// TeacherForced scores texts with the baseline spec (specs[0]) and each
// candidate side by side, with runner r.
func TeacherForced(ctx context.Context, r *runtime.Runner, specs []quant.Spec, texts []Text, opts TextOptions) (*TextResult, error) {
	m := r.Model()
	if len(specs) == 0 {
		return nil, fmt.Errorf("%w: no caches", ErrOptions)
	}
	if opts.Ctx <= 0 {
		opts.Ctx = 2048
		if m.ContextLen > 0 {
			opts.Ctx = min(opts.Ctx, m.ContextLen)
		}
	}
	if m.ContextLen > 0 && opts.Ctx > m.ContextLen {
		return nil, fmt.Errorf("%w: chunks of %d tokens, the model's context is %d", ErrOptions, opts.Ctx, m.ContextLen)
	}
	if opts.Ctx < 4 {
		return nil, fmt.Errorf("%w: chunks of %d tokens", ErrOptions, opts.Ctx)
	}
	if opts.Exact && opts.Protocol == ProtocolLlamaCpp {
		return nil, fmt.Errorf("%w: the llama.cpp protocol attends to the cache as stored (exact prefill is Hugging Face's semantics)", ErrOptions)
	}
	chunks, err := textChunks(m, texts, opts)
	if err != nil {
		return nil, err
	}
	layouts := make([]*kvcache.Layout, len(specs))
	for i, s := range specs {
		if layouts[i], err = kvcache.NewLayout(m.Geometry(), s, 0); err != nil {
			return nil, fmt.Errorf("eval: cache %s: %w", s.String(), err)
		}
	}
	acc := make([]accum, len(specs))
	V := m.Vocab
	base := make([]float64, V)  // the baseline's log-probabilities at the position being compared
	baseP := make([]float64, V) // and its probabilities, exp(base), computed once for every candidate
	cand := make([]float64, V)
	// With the llama.cpp protocol the candidates compare with the
	// baseline's stored (16-bit) log-probabilities; the baseline's own NLL
	// is the unrounded one, as llama-perplexity prints it when it saves
	// them.
	llama := opts.Protocol == ProtocolLlamaCpp
	if opts.Progress != nil {
		opts.Progress(0, len(chunks)) // the stage starts: a reporter can time it
	}
	for ci, ch := range chunks {
		if opts.Store != nil {
			if got := opts.Store.chunk(ci); len(got) == len(acc) {
				for i := range acc {
					acc[i].merge(&got[i])
				}
				if opts.Progress != nil {
					opts.Progress(ci+1, len(chunks))
				}
				continue
			}
		}
		cur := make([]accum, len(specs))
		caches := make([]*kvcache.Cache, len(layouts))
		for i, l := range layouts {
			c, err := r.NewCache(l, kvcache.Options{Blocks: l.BlocksFor(len(ch.ids))})
			if err != nil {
				return nil, fmt.Errorf("eval: cache %s: %w", specs[i].String(), err)
			}
			_ = c.AddSeq(0)
			caches[i] = c
		}
		// The chunk goes in one step, or with Exact in steps of Step
		// tokens that each attend exactly to themselves.
		step := len(ch.ids)
		if opts.Exact {
			step = max(1, opts.Step)
		}
		var baseTop int
		var baseNLL, baseTrue float64
		s0 := 0
		score := func(e, t int, logits []float32) error {
			t += s0
			if t < ch.first || t >= len(ch.ids)-1 {
				return nil
			}
			next := ch.ids[t+1]
			if e == 0 {
				baseTop = logSoftmax(base, logits)
				own := -base[next]
				if llama {
					baseTop = roundLogProbs(base, logits)
				}
				baseNLL, baseTrue = -base[next], math.Exp(base[next])
				if len(caches) > 1 {
					for i, lp := range base {
						if !llama || lp > -16 { // the terms the candidates' KLD sums
							baseP[i] = math.Exp(lp)
						}
					}
				}
				cur[0].add(own, own, 0, 0, true, t)
				return nil
			}
			top := logSoftmax(cand, logits)
			var kld float64
			for i, lp := range base {
				if llama && !(lp > -16) {
					continue
				}
				kld += baseP[i] * (lp - cand[i])
			}
			cur[e].add(-cand[next], baseNLL, kld, math.Exp(cand[next])-baseTrue, top == baseTop, t)
			return nil
		}
		for s0 = 0; s0 < len(ch.ids); s0 += step {
			toks := ch.ids[s0:min(len(ch.ids), s0+step)]
			batch := make([]runtime.Entry, len(caches))
			for i, c := range caches {
				batch[i] = runtime.Entry{Cache: c, Seq: 0, Tokens: toks, Logits: runtime.AllLogits, Exact: opts.Exact}
			}
			if err := r.Stream(ctx, batch, score); err != nil {
				return nil, fmt.Errorf("eval: text chunk %d of %d: %w", ci+1, len(chunks), err)
			}
		}
		if opts.Store != nil {
			if err := opts.Store.putChunk(ci, cur); err != nil {
				return nil, err
			}
		}
		for i := range acc {
			acc[i].merge(&cur[i])
		}
		if opts.Progress != nil {
			opts.Progress(ci+1, len(chunks))
		}
	}
	res := &TextResult{Protocol: opts.Protocol.String(), Ctx: opts.Ctx, Chunks: len(chunks)}
	for i, a := range acc {
		tm := a.metrics(specs[i].String(), opts.Ctx)
		if opts.KeepPositions {
			tm.PerPosition = &PositionValues{KLD: a.kld, Same: a.same}
		}
		res.Caches = append(res.Caches, tm)
	}
	return res, nil
}

// logSoftmax sets lp to log softmax(logits) in float64 and returns the
// argmax (the first on ties).
func logSoftmax(lp []float64, logits []float32) int {
	top := 0
	mx := float64(logits[0])
	for i, v := range logits {
		if float64(v) > mx {
			mx, top = float64(v), i
		}
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - mx)
	}
	ls := mx + math.Log(sum)
	for i, v := range logits {
		lp[i] = float64(v) - ls
	}
	return top
}

// roundLogProbs is logSoftmax as llama-perplexity stores the baseline:
// each log-probability rounded to one of 65536 levels over [max−16, max]
// of the logits (those below clamp to the bottom), in float32 arithmetic.
// It returns the argmax of the stored values, as llama-perplexity compares
// tops.
func roundLogProbs(lp []float64, logits []float32) int {
	mx, mn := logits[0], logits[0]
	for _, v := range logits {
		mx, mn = max(mx, v), min(mn, v)
	}
	mn = max(mn, mx-16)
	var sum float64
	for _, v := range logits {
		sum += float64(float32(math.Exp(float64(v - mx))))
	}
	lse := float32(math.Log(sum))
	minLP := mn - mx - lse
	scale := (mx - mn) / 65535
	top := 0
	var best float32
	for i, v := range logits {
		var q float32
		if scale != 0 && v > mn {
			q = float32(math.RoundToEven(float64((1 / scale) * (v - mn))))
		}
		l := scale*q + minLP
		if i == 0 || l > best {
			best, top = l, i
		}
		lp[i] = float64(l)
	}
	return top
}

// positionBuckets are the KLD-by-position bucket bounds: [1, 64), [64,
// 256), then doubling.
func positionBuckets(ctx int) [][2]int {
	var b [][2]int
	lo := 0
	for _, hi := range []int{64, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072} {
		if lo >= ctx {
			break
		}
		b = append(b, [2]int{lo, min(hi, ctx)})
		lo = hi
	}
	if lo < ctx {
		b = append(b, [2]int{lo, ctx})
	}
	return b
}

func (a *accum) metrics(name string, ctx int) TextMetrics {
	n := len(a.nll)
	tm := TextMetrics{Cache: name, Tokens: n}
	if n == 0 {
		return tm
	}
	// ln(PPL/PPL_base) is the mean NLL difference; the uncertainty of the
	// difference series is llama-perplexity's sqrt(σ²+σ_b²−2cov)/√(n−1).
	diff := make([]float64, n)
	for i := range a.nll {
		diff[i] = a.nll[i] - a.nllBase[i]
	}
	lnPPL, lnErr := MeanStdErr(a.nll)
	tm.PPL = math.Exp(lnPPL)
	tm.PPLErr = tm.PPL * lnErr
	tm.LnPPLRatio, tm.LnPPLRatioErr = MeanStdErr(diff)
	sorted := slices.Clone(a.kld)
	slices.Sort(sorted)
	tm.KLD.Mean, tm.KLD.Err = MeanStdErr(a.kld)
	tm.KLD.Median = Percentile(sorted, 0.5)
	tm.KLD.P90 = Percentile(sorted, 0.90)
	tm.KLD.P99 = Percentile(sorted, 0.99)
	tm.KLD.P999 = Percentile(sorted, 0.999)
	tm.KLD.Max = sorted[n-1]
	same := 0
	for _, s := range a.same {
		if s {
			same++
		}
	}
	tm.SameTop = float64(same) / float64(n)
	tm.SameTopErr = StdErrRate(tm.SameTop, n)
	sq := make([]float64, n)
	tm.DeltaP.Min, tm.DeltaP.Max = a.dp[0], a.dp[0]
	for i, v := range a.dp {
		sq[i] = v * v
		tm.DeltaP.Min, tm.DeltaP.Max = min(tm.DeltaP.Min, v), max(tm.DeltaP.Max, v)
	}
	tm.DeltaP.Mean, tm.DeltaP.MeanErr = MeanStdErr(a.dp)
	mse, mseErr := MeanStdErr(sq)
	tm.DeltaP.RMS = math.Sqrt(mse)
	if tm.DeltaP.RMS > 0 {
		tm.DeltaP.RMSErr = 0.5 / tm.DeltaP.RMS * mseErr
	}
	for _, b := range positionBuckets(ctx) {
		pb := PositionBucket{From: b[0], To: b[1]}
		var sum float64
		same := 0
		for i, p := range a.pos {
			if p >= b[0] && p < b[1] {
				pb.Tokens++
				sum += a.kld[i]
				if a.same[i] {
					same++
				}
			}
		}
		if pb.Tokens == 0 {
			continue
		}
		pb.KLD = sum / float64(pb.Tokens)
		pb.SameTop = float64(same) / float64(pb.Tokens)
		tm.ByPosition = append(tm.ByPosition, pb)
	}
	return tm
}
