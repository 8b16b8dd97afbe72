package estimate

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/kvqlabs/kvq/pkg/quant"
)

// Plan is one estimate's inputs. Zero values take the documented defaults.
type Plan struct {
	// Model is the model to plan for. Required.
	Model Model
	// Caches are the cache formats to compare. Required.
	Caches []quant.Spec
	// SkipUnsupported drops formats whose layout cannot be built for this
	// model (for example a group size that does not divide head_dim) and
	// lists them in Result.Skipped, instead of failing.
	SkipUnsupported bool

	// Engine is the accounting to follow (default VLLM).
	Engine Engine
	// Version is the vLLM release (default DefaultVLLMVersion). From 0.10
	// sliding-window layers are grouped by the hybrid manager and
	// concurrency counts per-request blocks; from 0.21 the CUDA-graph pool
	// comes out of the KV budget.
	Version string
	// DisableHybrid is vLLM's --disable-hybrid-kv-cache-manager: sliding
	// layers count as full attention.
	DisableHybrid bool

	// TP and PP are the tensor- and pipeline-parallel sizes (default 1).
	TP, PP int

	// KVBudget, when positive, is the KV memory of one rank, taken as given
	// (vLLM's "Available KV cache memory", or --kv-cache-memory). It skips
	// the memory model.
	KVBudget int64
	// GPUMemory is the memory one GPU has as the engine sees it; with
	// KVBudget zero it feeds the memory model. When both are zero the
	// result has no capacity figures.
	GPUMemory int64
	// GPUName labels GPUMemory in the result.
	GPUName string
	// Utilization is vLLM's gpu_memory_utilization (default 0.9).
	Utilization float64
	// MemFractionStatic is SGLang's mem_fraction_static (default: SGLang's
	// rule, DefaultMemFractionStatic).
	MemFractionStatic float64
	// WeightsBytes overrides the weights' size over all ranks (default:
	// from the model). Each rank holds 1/(TP·PP) of it.
	WeightsBytes *int64
	// ActivationBytes, NonTorchBytes and CUDAGraphBytes override the
	// per-rank reserves (defaults: DefaultActivationBytes,
	// DefaultNonTorchBytes, DefaultCUDAGraphBytes from vLLM 0.21).
	ActivationBytes, NonTorchBytes, CUDAGraphBytes *int64
	// BlocksOverride is vLLM's num_gpu_blocks_override: the pool's block
	// count, replacing the one computed from the budget.
	BlocksOverride int64

	// MaxModelLen is the longest request (default Model.MaxModelLen(), the
	// engine's derived max_model_len). Above that maximum the plan is
	// refused, as vLLM and SGLang refuse it, unless AllowLongMaxModelLen.
	MaxModelLen int64
	// AllowLongMaxModelLen accepts a MaxModelLen above the model's maximum:
	// vLLM's VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, SGLang's
	// SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1.
	AllowLongMaxModelLen bool
	// MaxNumBatchedTokens bounds a step's tokens; sliding-window worst
	// cases depend on it (default 8192).
	MaxNumBatchedTokens int64
	// BlockSize is the page size in tokens (default 16 for vLLM, 1 for
	// SGLang). Formats that encode several tokens together raise it to a
	// multiple of their token group.
	BlockSize int
	// Contexts and Concurrency span the grid of KV memory figures
	// (defaults: DefaultContexts(MaxModelLen) and {1}).
	Contexts, Concurrency []int64
}

// Result is an estimate: the setting, the budget and one entry per format.
type Result struct {
	Model         Model  `json:"model"`
	Engine        Engine `json:"engine"`
	EngineVersion string `json:"engine_version,omitempty"`
	TP            int    `json:"tp"`
	PP            int    `json:"pp"`
	// BlockSize is the requested page size in tokens.
	BlockSize           int   `json:"block_size"`
	MaxModelLen         int64 `json:"max_model_len"`
	MaxNumBatchedTokens int64 `json:"max_num_batched_tokens"`
	// Hybrid reports whether sliding-window layers were grouped apart.
	Hybrid bool `json:"hybrid"`
	// Groups are the KV-cache groups of the first pipeline rank.
	Groups []Group `json:"kv_cache_groups"`
	// Memory is the per-rank budget; nil when neither a GPU nor a budget
	// was given.
	Memory      *Memory        `json:"memory"`
	Formats     []FormatResult `json:"formats"`
	Skipped     []Skipped      `json:"skipped,omitempty"`
	Contexts    []int64        `json:"contexts"`
	Concurrency []int64        `json:"concurrency"`
	// Warnings are settings the engine would refuse although the KV
	// figures are defined (query heads that do not split over TP).
	Warnings []string `json:"warnings,omitempty"`
}

// Group describes a KV-cache group: layers that share a block table.
type Group struct {
	// Window is the sliding window in tokens, 0 for full attention.
	Window  int `json:"window"`
	Layers  int `json:"layers"`
	Padding int `json:"padding"`
}

// Skipped is a format left out because its layout cannot be built.
type Skipped struct {
	Format string `json:"format"`
	Reason string `json:"reason"`
}

// FormatResult is one cache format's figures. Byte figures are per rank
// unless their name says otherwise; "per rank" figures of a pipeline-parallel
// plan are those of the largest rank, and capacity figures those of the most
// constrained rank.
type FormatResult struct {
	// Format is the cache spec as typed ("fp8", "k=int8,v=int4,residual=128").
	Format string `json:"format"`
	// BytesPerToken is the cost of one token's K and V in block storage,
	// all layers and all KV heads of the model, counted once.
	BytesPerToken float64 `json:"bytes_per_token"`
	// BytesPerTokenPerRank is the same for one rank: its layers, and
	// max(1, kv_heads/tp) heads (the latent alone for MLA).
	BytesPerTokenPerRank float64 `json:"bytes_per_token_per_rank"`
	// BytesPerTokenAllRanks sums it over every rank, replication included.
	BytesPerTokenAllRanks float64 `json:"bytes_per_token_all_ranks"`
	// BitsPerValue is BytesPerToken in bits per cached value: 16 for fp16,
	// scales and zero points included for quantized formats.
	BitsPerValue float64 `json:"bits_per_value"`
	// Compression is fp16's BytesPerToken over this format's.
	Compression float64 `json:"compression"`
	// CompressionEffective is the same ratio for one request of
	// max_model_len, with block rounding, per-request windows and codec
	// state counted.
	CompressionEffective float64 `json:"compression_effective"`
	// BlockTokens is the block size in tokens (the requested size, raised
	// to a multiple of the format's token group).
	BlockTokens int `json:"block_tokens"`
	// BlockBytes is one block id on one rank: one page of each of the
	// group-size pool tensors (for a single group, every layer's page).
	BlockBytes int64 `json:"block_bytes"`
	// RequestBytes is the per-request constant on one rank: the fp16 sink,
	// residual and staging windows, paid once per request whatever its
	// length.
	RequestBytes int64 `json:"request_bytes"`
	// StateBytes is codec state (scales, codebooks) on one rank, paid once.
	StateBytes int64 `json:"state_bytes"`
	// BlocksPerRequest is the block ids one request of max_model_len takes.
	BlocksPerRequest int64 `json:"blocks_per_request"`

	// Capacity figures; nil without a budget.
	// Blocks is the pool size (vLLM's num_gpu_blocks).
	Blocks *int64 `json:"blocks"`
	// Tokens is vLLM's "GPU KV cache size: N tokens":
	// (blocks / groups) × block tokens.
	Tokens *int64 `json:"tokens"`
	// MaxConcurrency is vLLM's "Maximum concurrency for max_model_len
	// tokens per request".
	MaxConcurrency *float64 `json:"max_concurrency"`
	// MaxContext is the longest request that fits alone, at most the
	// model's max_position_embeddings (or max_model_len when larger).
	MaxContext *int64 `json:"max_context"`
	// Fits reports whether one request of max_model_len and every grid
	// setting fit.
	Fits *bool `json:"fits"`
	// Advice says what to change when something does not fit.
	Advice []string `json:"advice,omitempty"`

	// Grid is the KV memory of every context × concurrency.
	Grid []Cell `json:"grid"`

	ranks     []rankCost
	budget    int64 // effective per-rank budget
	hasBudget bool
	plan      *Plan
}

// Cell is the KV memory of one rank for Concurrency requests of Context
// tokens each: the blocks, the per-request windows and the codec state.
type Cell struct {
	Context      int64 `json:"context"`
	Concurrency  int64 `json:"concurrency"`
	Blocks       int64 `json:"blocks"`
	TokenBytes   int64 `json:"token_bytes"`
	RequestBytes int64 `json:"request_bytes"`
	StateBytes   int64 `json:"state_bytes"`
	KVBytes      int64 `json:"kv_bytes"`
	Fits         *bool `json:"fits"`
}

// DefaultContexts lists the grid's default contexts: powers of four from
// 2048 up to maxModelLen, and maxModelLen itself.
func DefaultContexts(maxModelLen int64) []int64 {
	var cs []int64
	for c := int64(2048); c < maxModelLen && c <= math.MaxInt64/4; c *= 4 {
		cs = append(cs, c)
	}
	return append(cs, maxModelLen)
}

// withDefaults returns a copy of p with defaults filled in, checked.
func (p Plan) withDefaults() (Plan, Version, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrPlan, fmt.Sprintf(format, args...))
	}
	if p.Engine == "" {
		p.Engine = VLLM
	}
	if _, err := ParseEngine(string(p.Engine)); err != nil {
		return p, Version{}, err
	}
	var v Version
	if p.Engine == VLLM {
		if p.Version == "" {
			p.Version = DefaultVLLMVersion
		}
		var err error
		if v, err = CheckVLLMVersion(p.Version); err != nil {
			return p, v, err
		}
	}
	if p.TP == 0 {
		p.TP = 1
	}
	if p.PP == 0 {
		p.PP = 1
	}
	if p.Utilization == 0 {
		p.Utilization = DefaultUtilization
	}
	if p.MaxModelLen == 0 {
		p.MaxModelLen = p.Model.MaxModelLen()
	}
	if p.MaxNumBatchedTokens == 0 {
		p.MaxNumBatchedTokens = DefaultMaxNumBatchedTokens
	}
	if p.BlockSize == 0 {
		p.BlockSize = DefaultBlockSize
		if p.Engine == SGLang {
			p.BlockSize = DefaultSGLangPageSize
		}
	}
	m := &p.Model
	switch {
	case len(p.Caches) == 0:
		return p, v, bad("no cache formats")
	case p.TP < 1 || p.PP < 1:
		return p, v, bad("tensor-parallel size %d and pipeline-parallel size %d must be ≥ 1", p.TP, p.PP)
	case m.Heads > 0 && p.TP > m.Heads:
		// A rank with no attention head: every engine refuses it.
		return p, v, bad("tensor-parallel size %d is more than the model's %d attention heads", p.TP, m.Heads)
	case m.Layers > 0 && p.PP > m.Layers:
		return p, v, bad("pipeline-parallel size %d is more than the model's %d layers", p.PP, m.Layers)
	case p.PP > m.Layers:
		return p, v, bad("pipeline-parallel size %d exceeds the model's %d layers", p.PP, m.Layers)
	case !m.MLA() && m.KVHeads%p.TP != 0 && p.TP%m.KVHeads != 0:
		return p, v, bad("num_key_value_heads %d and tensor-parallel size %d: one must divide the other", m.KVHeads, p.TP)
	case p.MaxModelLen <= 0:
		return p, v, bad("max_model_len is unknown for %s: give it explicitly", m.Name)
	case m.MaxModelLen() > 0 && p.MaxModelLen > m.MaxModelLen() && !p.AllowLongMaxModelLen:
		return p, v, bad("max_model_len %d is greater than the model's maximum of %d (%s): the engine refuses it unless allowed (AllowLongMaxModelLen)", p.MaxModelLen, m.MaxModelLen(), m.MaxModelLenSource())
	case p.MaxNumBatchedTokens < 0:
		return p, v, bad("max_num_batched_tokens %d must be positive", p.MaxNumBatchedTokens)
	case p.BlockSize < 0 || p.BlockSize > 1<<20:
		return p, v, bad("block size %d out of range [1, %d]", p.BlockSize, 1<<20)
	case p.KVBudget < 0 || p.GPUMemory < 0 || p.BlocksOverride < 0:
		return p, v, bad("KV budget, GPU memory and block override must not be negative")
	case !(p.Utilization > 0 && p.Utilization <= 1):
		return p, v, bad("gpu_memory_utilization %v must be in (0, 1]", p.Utilization)
	case !(p.MemFractionStatic >= 0 && p.MemFractionStatic <= 1):
		return p, v, bad("mem_fraction_static %v must be in (0, 1]", p.MemFractionStatic)
	}
	for name, ptr := range map[string]*int64{"weights": p.WeightsBytes, "activation": p.ActivationBytes, "non-torch": p.NonTorchBytes, "CUDA-graph": p.CUDAGraphBytes} {
		if ptr != nil && *ptr < 0 {
			return p, v, bad("%s memory %d must not be negative", name, *ptr)
		}
	}
	if len(p.Contexts) == 0 {
		p.Contexts = DefaultContexts(p.MaxModelLen)
	}
	if len(p.Concurrency) == 0 {
		p.Concurrency = []int64{1}
	}
	for _, c := range p.Contexts {
		if c <= 0 {
			return p, v, bad("context %d must be positive", c)
		}
	}
	for _, c := range p.Concurrency {
		if c <= 0 {
			return p, v, bad("concurrency %d must be positive", c)
		}
	}
	return p, v, nil
}

// Estimate computes the plan. It fails with an error wrapping ErrPlan,
// ErrConfig or ErrOverflow for bad input, or a quant/kvcache error for a
// format that does not fit the model (unless SkipUnsupported).
func Estimate(ctx context.Context, plan Plan) (*Result, error) {
	if err := plan.Model.Validate(); err != nil {
		return nil, err
	}
	p, v, err := plan.withDefaults()
	if err != nil {
		return nil, err
	}
	ru := rulesFor(p.Engine, v, p.DisableHybrid)
	mem, err := p.budget(&p.Model, ru)
	if err != nil {
		return nil, err
	}
	res := &Result{
		Model: p.Model, Engine: p.Engine, TP: p.TP, PP: p.PP, BlockSize: p.BlockSize,
		MaxModelLen: p.MaxModelLen, MaxNumBatchedTokens: p.MaxNumBatchedTokens,
		Memory: mem, Contexts: p.Contexts, Concurrency: p.Concurrency,
	}
	if p.Engine == VLLM {
		res.EngineVersion = v.String()
	}
	n, _ := p.Model.SlidingLayers()
	res.Hybrid = ru.hybrid && n > 0
	if m := &p.Model; m.Heads%p.TP != 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf(
			"num_attention_heads %d is not divisible by tensor-parallel size %d: the engine refuses this setting; the KV figures assume it", m.Heads, p.TP))
	}
	fp16, err := quant.Formats().ParseSpec("fp16")
	if err != nil {
		return nil, err
	}
	base, err := p.account(fp16, ru)
	if err != nil {
		return nil, err
	}
	for _, spec := range p.Caches {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("estimate: before cache %q: %w", spec.String(), err)
		}
		fr, err := p.format(spec, base, ru, mem)
		if err != nil {
			if p.SkipUnsupported && !errors.Is(err, ErrOverflow) && !errors.Is(err, ErrPlan) {
				res.Skipped = append(res.Skipped, Skipped{Format: spec.String(), Reason: err.Error()})
				continue
			}
			return nil, err
		}
		if res.Groups == nil {
			for _, g := range fr.ranks[0].groups {
				res.Groups = append(res.Groups, Group{Window: g.window, Layers: len(g.layers), Padding: g.padding})
			}
		}
		res.Formats = append(res.Formats, *fr)
	}
	if len(res.Formats) == 0 {
		return nil, fmt.Errorf("%w: none of the cache formats fits %s (%s)", ErrPlan, p.Model.Name, res.Skipped[0].Reason)
	}
	return res, nil
}

// costs is a format's accounting over all ranks.
type costs struct {
	ranks       []rankCost
	blockTokens int
	perTok      float64 // bytes per token of the largest rank's pool
	allToks     float64 // summed over all ranks (× tp for replication)
	wholeTok    float64 // bytes per token of the whole model, counted once
}

// account builds the per-rank accounting of spec from its layout, and the
// whole-model bytes per token (from a second layout with every KV head when
// tensor parallelism splits them).
func (p *Plan) account(spec quant.Spec, ru rules) (costs, error) {
	m := &p.Model
	lc, l, err := layerCosts(m, spec, m.KVHeadsPerRank(p.TP), p.BlockSize)
	if err != nil {
		return costs{}, err
	}
	c := costs{blockTokens: l.BlockTokens}
	for _, part := range ppPartition(m.Layers, p.PP) {
		layers := make([]int, 0, part[1]-part[0])
		for i := part[0]; i < part[1]; i++ {
			layers = append(layers, i)
		}
		r, err := newRankCost(m, lc, layers, ru.hybrid, l.BlockTokens)
		if err != nil {
			return costs{}, err
		}
		c.ranks = append(c.ranks, r)
		pt := float64(r.pagesSum) / float64(l.BlockTokens)
		c.perTok = max(c.perTok, pt)
		c.allToks += pt * float64(p.TP)
	}
	whole, wl := lc, l
	if m.KVHeadsPerRank(p.TP) != m.KVHeadsPerRank(1) {
		if whole, wl, err = layerCosts(m, spec, m.KVHeadsPerRank(1), p.BlockSize); err != nil {
			return costs{}, err
		}
	}
	var pages int64
	for _, x := range whole {
		pages += x.page
	}
	c.wholeTok = float64(pages) / float64(wl.BlockTokens)
	return c, nil
}

// format computes one format's figures; base is fp16's accounting.
func (p *Plan) format(spec quant.Spec, base costs, ru rules, mem *Memory) (*FormatResult, error) {
	m := &p.Model
	c, err := p.account(spec, ru)
	if err != nil {
		return nil, err
	}
	fr := &FormatResult{
		Format:                spec.String(),
		BytesPerToken:         c.wholeTok,
		BytesPerTokenPerRank:  c.perTok,
		BytesPerTokenAllRanks: c.allToks,
		BlockTokens:           c.blockTokens,
		ranks:                 c.ranks,
		plan:                  p,
	}
	fr.BitsPerValue = fr.BytesPerToken * 8 / float64(m.ValuesPerToken())
	big := largestRank(c.ranks)
	fr.BlockBytes, fr.RequestBytes, fr.StateBytes = big.blockCost, big.seq, big.state
	if fr.BlocksPerRequest, err = big.need(p.MaxModelLen, p.MaxNumBatchedTokens); err != nil {
		return nil, fmt.Errorf("max_model_len %d: %w", p.MaxModelLen, err)
	}
	fr.Compression = base.wholeTok / fr.BytesPerToken
	var num, den float64
	for i := range c.ranks {
		_, b, err := base.ranks[i].requestBytes(p.MaxModelLen, p.MaxNumBatchedTokens)
		if err != nil {
			return nil, fmt.Errorf("max_model_len %d: %w", p.MaxModelLen, err)
		}
		_, f, err := c.ranks[i].requestBytes(p.MaxModelLen, p.MaxNumBatchedTokens)
		if err != nil {
			return nil, fmt.Errorf("max_model_len %d: %w", p.MaxModelLen, err)
		}
		num += float64(b + base.ranks[i].state)
		den += float64(f + c.ranks[i].state)
	}
	fr.CompressionEffective = num / den

	if mem != nil {
		if err := fr.capacity(mem.KVBudgetBytes, ru); err != nil {
			return nil, err
		}
	}
	for _, ctxLen := range p.Contexts {
		for _, n := range p.Concurrency {
			cell, err := fr.Cell(ctxLen, n)
			if err != nil {
				return nil, err
			}
			fr.Grid = append(fr.Grid, cell)
		}
	}
	if mem != nil {
		fr.advise()
	}
	return fr, nil
}

// largestRank is the rank with the most bytes per block.
func largestRank(rs []rankCost) *rankCost {
	b := &rs[0]
	for i := range rs {
		if rs[i].pagesSum > b.pagesSum {
			b = &rs[i]
		}
	}
	return b
}

// capacity fills the budget-dependent figures: the minimum over ranks.
func (fr *FormatResult) capacity(budget int64, ru rules) error {
	p := fr.plan
	var blocks, tokens, maxCtx int64 = math.MaxInt64, math.MaxInt64, math.MaxInt64
	conc := math.Inf(1)
	limit := max(p.MaxModelLen, p.Model.MaxModelLen())
	eff := int64(math.MaxInt64)
	for i := range fr.ranks {
		r := &fr.ranks[i]
		var b, avail int64 // avail: the budget less codec state, ≥ 0
		if budget > r.state {
			avail = budget - r.state
			b = avail / r.blockCost
		}
		if p.BlocksOverride > 0 {
			b = p.BlocksOverride
			var c checked
			avail = c.mul(b, r.blockCost)
			budgetR := c.add(avail, r.state)
			if c.err != nil {
				return fmt.Errorf("num_gpu_blocks_override %d: %w", b, c.err)
			}
			eff = min(eff, budgetR)
		} else {
			eff = min(eff, budget)
		}
		blocks = min(blocks, b)
		tokens = min(tokens, b/int64(len(r.groups))*r.blockToks)
		var per float64
		if ru.perRequestBlocks {
			need, err := r.need(p.MaxModelLen, p.MaxNumBatchedTokens)
			if err != nil {
				return fmt.Errorf("max_model_len %d: %w", p.MaxModelLen, err)
			}
			per = float64(need)
		} else {
			per = float64(p.MaxModelLen) / float64(r.blockToks) * float64(len(r.groups))
		}
		per += float64(r.seq) / float64(r.blockCost)
		conc = min(conc, float64(b)/per)
		maxCtx = min(maxCtx, r.maxContext(avail, limit, p.MaxNumBatchedTokens))
	}
	fr.budget, fr.hasBudget = eff, true
	fr.Blocks, fr.Tokens, fr.MaxConcurrency, fr.MaxContext = &blocks, &tokens, &conc, &maxCtx
	return nil
}

// maxContext is the largest context ≤ limit whose one request fits in avail
// bytes (the budget less codec state), found by bisection: a request's bytes
// grow with its length.
func (r *rankCost) maxContext(avail, limit, batched int64) int64 {
	fits := func(c int64) bool {
		_, b, err := r.requestBytes(c, batched)
		return err == nil && b <= avail
	}
	if !fits(1) {
		return 0
	}
	lo, hi := int64(1), limit // fits(lo) holds
	if fits(hi) {
		return hi
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// KVBytes is the KV memory one rank needs for concurrency requests of ctx
// tokens: for a plain model at TP1 and PP1 exactly what kvq's runtime cache
// allocates for that many sequences (blocks, fp16 windows, codec state); for
// sliding-window models vLLM's per-request worst case. Over the ranks of a
// pipeline-parallel plan it is the largest.
func (fr *FormatResult) KVBytes(ctx, concurrency int64) (int64, error) {
	c, err := fr.Cell(ctx, concurrency)
	return c.KVBytes, err
}

// Cell computes one grid cell: concurrency requests of ctx tokens.
func (fr *FormatResult) Cell(ctx, concurrency int64) (Cell, error) {
	if ctx <= 0 || concurrency <= 0 {
		return Cell{}, fmt.Errorf("%w: context %d and concurrency %d must be positive", ErrPlan, ctx, concurrency)
	}
	p := fr.plan
	cell := Cell{Context: ctx, Concurrency: concurrency}
	for i := range fr.ranks {
		r := &fr.ranks[i]
		need, err := r.need(ctx, p.MaxNumBatchedTokens)
		var c checked
		c.err = err
		blocks := c.mul(need, concurrency)
		tok := c.mul(blocks, r.blockCost)
		req := c.mul(r.seq, concurrency)
		total := c.add(c.add(tok, req), r.state)
		if c.err != nil {
			return Cell{}, fmt.Errorf("context %d × concurrency %d: %w", ctx, concurrency, c.err)
		}
		if total > cell.KVBytes {
			cell = Cell{Context: ctx, Concurrency: concurrency, Blocks: blocks, TokenBytes: tok, RequestBytes: req, StateBytes: r.state, KVBytes: total}
		}
	}
	if fr.hasBudget {
		f := cell.KVBytes <= fr.budget
		cell.Fits = &f
	}
	return cell, nil
}

// KVBytes is the memory kvq's runtime cache allocates for requests sequences
// of tokens tokens each in format spec, on one GPU (TP1, PP1), with every
// layer holding its full history: blocks, fp16 windows and codec state. It
// equals kvcache.New(layout, ...).Stats().Allocated.Total for the same
// geometry, spec and block count.
func KVBytes(m Model, spec quant.Spec, tokens, requests int64) (int64, error) {
	m.Windows = nil
	res, err := Estimate(context.Background(), Plan{
		Model: m, Caches: []quant.Spec{spec}, MaxModelLen: tokens, AllowLongMaxModelLen: true, // no engine's limit
		Contexts: []int64{tokens}, Concurrency: []int64{requests},
	})
	if err != nil {
		return 0, err
	}
	return res.Formats[0].Grid[0].KVBytes, nil
}

// RuntimeRequestBytes is the most memory kvq's runtime cache holds for one
// request of ctx tokens (TP1, PP1) fed at most chunk tokens per step:
// every position's blocks in the full-attention layers, the blocks of the
// window in the sliding-window ones (window-only storage:
// kvcache.Layout.SlideBlocksFor, vLLM's sliding-window rule
// ⌈min(w−1+chunk, ctx)/bs⌉+1, capped at the request's ⌈ctx/bs⌉ blocks),
// the request's fp16 windows and the codec state. It is
// kvcache.Layout.SeqCostChunked + StateBytes over the geometry kvq
// estimate reads from the model, what the engine admits a request by.
// Unlike FormatResult's vLLM figures it has no padding layers and no block
// past the request's own.
func RuntimeRequestBytes(m Model, spec quant.Spec, ctx, chunk int64) (int64, error) {
	if ctx <= 0 || chunk <= 0 || ctx > math.MaxInt32 {
		return 0, fmt.Errorf("%w: context %d and chunk %d must be positive", ErrPlan, ctx, chunk)
	}
	kvHeads := m.KVHeads
	if m.MLA() {
		kvHeads = 1
	}
	_, l, err := layerCosts(&m, spec, kvHeads, 0)
	if err != nil {
		return 0, err
	}
	return l.SeqCostChunked(int(ctx), int(min(chunk, ctx))) + l.StateBytes, nil
}
