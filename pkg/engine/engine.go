package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	goruntime "runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// DefaultChunk is Options.Chunk's default, in tokens.
const DefaultChunk = kvcache.DefaultChunk

// Options configure an Engine.
type Options struct {
	// Caches are the pools, one per spec, over the same weights; requests
	// name theirs by Spec.String() (the first when empty). At least one.
	Caches []quant.Spec
	// Budget is each pool's KV memory in bytes: blocks in use, the live
	// sequences' fp16 windows and codec state (kvcache.Options.Budget).
	// Zero uses Blocks.
	Budget int64
	// Blocks is each pool's size in blocks when Budget is zero; zero means
	// room for four sequences of the model's whole context.
	Blocks int
	// MaxSeqs bounds the running sequences of a pool (vLLM's
	// max_num_seqs); default 64.
	MaxSeqs int
	// Chunk is the prefill chunk: prompts are fed in pieces that end at
	// multiples of Chunk tokens (default DefaultChunk).
	Chunk int
	// PrefillTokens bounds the prompt tokens of one step over all pools;
	// default 2·Chunk, at least Chunk. Decode tokens come on top, one per
	// running sequence (vLLM's max_num_batched_tokens is their sum).
	PrefillTokens int
	// Workers bounds the CPU backend's goroutines (0: GOMAXPROCS).
	Workers int
	// MaxWaiting refuses a request with ErrBusy when its pool already has
	// this many requests not running (queued, or preempted back to the
	// queue); 0 is no limit. The count and the decision are one atomic
	// step, so that a burst cannot pass the limit between them.
	MaxWaiting int
	// BatchInvariant makes a request's results independent of the load on
	// the CPU backend (runtime.RunnerOptions.BatchInvariant): its tokens and
	// log-probabilities are bit-identical to the same request run alone. It
	// costs batched decode rows their blocked kernel (about 1.7× the matrix
	// products' time of a 16-row decode step, BenchmarkRowGroupsDecode).
	// Off, as vLLM's batch invariance is, tokens still match a lone run in
	// practice, and log-probabilities differ slightly (up to 5.5e-4 measured
	// on the built-in model): the row count of a step picks the kernel.
	BatchInvariant bool
	// Backend runs the model (nil: the CPU backend).
	Backend backend.Backend
	// OnStep, when set, is called after every step from the engine's
	// goroutine (keep it quick).
	OnStep func(StepInfo)
}

// Request is one generation.
type Request struct {
	// Cache names the pool (a spec's String()); empty is the first.
	Cache  string
	Prompt []int
	// MaxTokens is the most tokens to generate; 0 only scores the prompt
	// (with PromptLogprobs).
	MaxTokens int
	// Temperature 0 is greedy; TopP in (0, 1] (0 means 1); Seed makes
	// sampling reproducible.
	Temperature, TopP float64
	Seed              uint64
	// IgnoreEOS generates MaxTokens tokens whatever comes; otherwise the
	// model's stop tokens (EOS, end of turn) end generation.
	IgnoreEOS bool
	// StopTokens end generation too. Stop tokens are not returned.
	StopTokens []int
	// Logprobs returns each generated token's log-probability, and
	// TopLogprobs that many alternatives.
	Logprobs    bool
	TopLogprobs int
	// PromptLogprobs returns each prompt token's log-probability given the
	// tokens before it (the first has none): teacher-forced scoring.
	PromptLogprobs bool
	// PromptTopLogprobs, with PromptLogprobs, returns that many likeliest
	// tokens at each prompt position too (0..20), as vLLM's
	// prompt_logprobs does.
	PromptTopLogprobs int
}

// Token is one generated token.
type Token struct {
	ID      int
	Logprob float32 // with Request.Logprobs
	Top     []TopLogprob
	// Time is when the step that produced it ended.
	Time time.Time
}

// TopLogprob is an alternative token and its log-probability.
type TopLogprob struct {
	ID      int
	Logprob float32
}

// Finish reasons.
const (
	FinishStop   = "stop"   // a stop token
	FinishLength = "length" // MaxTokens reached
	FinishAbort  = "abort"  // the request's context ended, or the engine stopped
	FinishError  = "error"  // the engine failed the request (Result.Err)
)

// Result is a finished request.
type Result struct {
	Cache        string
	Tokens       []int
	FinishReason string
	// Err is set for FinishAbort (the context's error) and FinishError.
	Err          error
	PromptTokens int
	// PromptLogprobs has one entry per prompt token; the first is NaN.
	PromptLogprobs []float32
	// PromptTop has one entry per prompt token (the first nil) with
	// Request.PromptTopLogprobs alternatives, likeliest first.
	PromptTop [][]TopLogprob
	// Arrival is when Submit accepted the request, Scheduled when its first
	// chunk ran, FirstToken when its first token was produced, Done when it
	// finished.
	Arrival, Scheduled, FirstToken, Done time.Time
	Preemptions                          int
}

// StepInfo describes one step.
type StepInfo struct {
	Start    time.Time
	Duration time.Duration
	// Decode and Prefill count the step's tokens.
	Decode, Prefill int
	Pools           []PoolStats
}

// PoolStats describe one pool now.
type PoolStats struct {
	Cache            string `json:"cache"`
	Running          int    `json:"running"`
	Waiting          int    `json:"waiting"`
	UsedBytes        int64  `json:"used_bytes"`
	CapacityBytes    int64  `json:"capacity_bytes"`
	Preemptions      int64  `json:"preemptions"`
	PromptTokens     int64  `json:"prompt_tokens"`
	GenerationTokens int64  `json:"generation_tokens"`
	// Finished counts requests by finish reason.
	Finished map[string]int64 `json:"finished"`
}

// Usage is UsedBytes over CapacityBytes (vLLM's kv_cache_usage_perc).
func (p PoolStats) Usage() float64 {
	if p.CapacityBytes <= 0 {
		return 0
	}
	return float64(p.UsedBytes) / float64(p.CapacityBytes)
}

// Engine schedules requests over the model's pools. Submit and Stats are
// safe for concurrent use; Run drives the engine from one goroutine.
type Engine struct {
	m     *runtime.Model
	r     *runtime.Runner
	opts  Options
	pools []*pool
	stop  map[int]bool
	lp    []float64 // log-probabilities scratch (engine goroutine)

	// A step's scratch, reused from step to step so that a decode step
	// allocates nothing of its own (TestStepAllocs); cleared after each
	// step, so that they hold no finished sequence.
	plan   []entry
	batch  []runtime.Entry
	picks  []picked
	gone   []*seq             // dropCancelled's
	onRows runtime.LogitsFunc // e.rows, made once: a method value passed on allocates

	mu       sync.Mutex
	incoming []*seq
	wake     chan struct{}
	ready    chan struct{} // closed when Run starts
	running  bool
	closed   bool
	stats    []PoolStats
	nextID   kvcache.SeqID
	order    int64
}

type pool struct {
	name     string
	layout   *kvcache.Layout
	cache    *kvcache.Cache
	capacity int64
	blocks   int    // the pool's size in blocks
	running  []*seq // in admission order
	waiting  []*seq // FIFO; preempted sequences go to the front
	stats    PoolStats
	// queued counts the live requests not admitted (incoming, waiting,
	// preempted): Submit adds one, admission and finish take it away.
	queued atomic.Int64
}

// seq is a request's state in the engine's goroutine.
type seq struct {
	req     Request
	ctx     context.Context
	pool    *pool
	id      kvcache.SeqID
	stream  *Stream
	sampler *runtime.Sampler
	// tokens is what the cache must hold: the prompt, then what was
	// generated; fed of them are in the cache.
	tokens   []int
	fed      int
	admitted bool
	order    int64
	res      Result
}

// New loads the pools and a runner for m.
func New(m *runtime.Model, opts Options) (*Engine, error) {
	if len(opts.Caches) == 0 {
		return nil, fmt.Errorf("%w: no caches", ErrOptions)
	}
	if opts.MaxSeqs == 0 {
		opts.MaxSeqs = 64
	}
	if opts.Chunk == 0 {
		opts.Chunk = DefaultChunk
	}
	if opts.PrefillTokens == 0 {
		opts.PrefillTokens = 2 * opts.Chunk
	}
	switch {
	case opts.MaxSeqs < 1 || opts.Chunk < 1 || opts.Budget < 0 || opts.Blocks < 0:
		return nil, fmt.Errorf("%w: max sequences %d, chunk %d, budget %d, blocks %d", ErrOptions, opts.MaxSeqs, opts.Chunk, opts.Budget, opts.Blocks)
	case opts.PrefillTokens < opts.Chunk:
		return nil, fmt.Errorf("%w: prefill tokens per step %d below the chunk %d", ErrOptions, opts.PrefillTokens, opts.Chunk)
	}
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{Backend: opts.Backend, Workers: opts.Workers, BatchInvariant: opts.BatchInvariant})
	if err != nil {
		return nil, err
	}
	e := &Engine{m: m, r: r, opts: opts, stop: map[int]bool{}, wake: make(chan struct{}, 1), ready: make(chan struct{})}
	e.onRows = e.rows
	for _, id := range m.StopIDs {
		e.stop[id] = true
	}
	for _, spec := range opts.Caches {
		name := spec.String()
		for _, p := range e.pools {
			if p.name == name {
				r.Close()
				return nil, fmt.Errorf("%w: cache %s given twice", ErrOptions, name)
			}
		}
		l, err := kvcache.NewLayout(m.Geometry(), spec, 0)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("engine: cache %s: %w", name, err)
		}
		co := kvcache.Options{Budget: opts.Budget, Blocks: opts.Blocks}
		if co.Budget == 0 && co.Blocks == 0 {
			ctx := m.ContextLen
			if ctx <= 0 {
				ctx = 2048
			}
			co.Blocks = 4 * l.BlocksFor(ctx)
		}
		c, err := r.NewCache(l, co)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("engine: cache %s: %w", name, err)
		}
		p := &pool{name: name, layout: l, cache: c, capacity: opts.Budget, blocks: c.FreeBlocks()}
		if p.capacity == 0 {
			p.capacity = c.FreeBytes()
		}
		p.stats = PoolStats{Cache: name, CapacityBytes: p.capacity, Finished: map[string]int64{}}
		e.pools = append(e.pools, p)
	}
	e.publish()
	return e, nil
}

// Model returns the engine's model.
func (e *Engine) Model() *runtime.Model { return e.m }

// Caches returns the pools' names in order.
func (e *Engine) Caches() []string {
	out := make([]string, len(e.pools))
	for i, p := range e.pools {
		out[i] = p.name
	}
	return out
}

// Stats returns the pools' state after the last step.
func (e *Engine) Stats() []PoolStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := slices.Clone(e.stats)
	for i := range out {
		out[i].Finished = mapsClone(out[i].Finished)
	}
	return out
}

func mapsClone(m map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// publish copies the pools' statistics for Stats (engine goroutine). It
// runs after every step, so it updates e.stats in place, under e.mu as
// Stats reads it, and allocates nothing once every finish reason has
// been seen: Stats returns copies, so nothing else holds e.stats' maps.
func (e *Engine) publish() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.stats) != len(e.pools) {
		e.stats = make([]PoolStats, len(e.pools))
	}
	for i, p := range e.pools {
		fin := e.stats[i].Finished
		if fin == nil {
			fin = make(map[string]int64, len(p.stats.Finished))
		}
		for k, v := range p.stats.Finished { // reasons are never removed
			fin[k] = v
		}
		s := p.stats
		s.Running, s.Waiting = len(p.running), len(p.waiting)
		s.UsedBytes = p.cache.InUseBytes()
		s.Finished = fin
		e.stats[i] = s
	}
}

// Submit checks and queues a request; its tokens and result arrive on the
// stream. The request ends (FinishAbort) when ctx does. Errors: ErrRequest
// for a request no model could serve (a token outside the vocabulary, past
// the context), ErrTooLarge for one that can never fit a pool, ErrClosed
// when the engine is not running.
func (e *Engine) Submit(ctx context.Context, req Request) (*Stream, error) {
	if !e.Running() {
		return nil, ErrClosed
	}
	p, err := e.check(&req)
	if err != nil {
		return nil, err
	}
	if req.TopP == 0 {
		req.TopP = 1
	}
	sampler, err := runtime.NewSampler(req.Temperature, req.TopP, req.Seed)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRequest, err)
	}
	s := &seq{req: req, ctx: ctx, pool: p, sampler: sampler, tokens: slices.Clone(req.Prompt), stream: newStream()}
	s.res = Result{Cache: p.name, PromptTokens: len(req.Prompt), Arrival: time.Now()}
	if req.PromptLogprobs {
		s.res.PromptLogprobs = make([]float32, len(req.Prompt))
		s.res.PromptLogprobs[0] = float32(math.NaN())
		if req.PromptTopLogprobs > 0 {
			s.res.PromptTop = make([][]TopLogprob, len(req.Prompt))
		}
	}
	e.mu.Lock()
	if !e.running || e.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	if lim := int64(e.opts.MaxWaiting); lim > 0 {
		if n := p.queued.Load(); n >= lim { // e.mu serializes Submit's check and add
			e.mu.Unlock()
			return nil, fmt.Errorf("%w: cache %s has %d requests waiting (max waiting %d)", ErrBusy, p.name, n, lim)
		}
	}
	p.queued.Add(1)
	e.incoming = append(e.incoming, s)
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
	return s.stream, nil
}

func (e *Engine) check(req *Request) (*pool, error) {
	var p *pool
	if req.Cache == "" {
		p = e.pools[0]
	}
	for _, q := range e.pools {
		if q.name == req.Cache {
			p = q
		}
	}
	if p == nil {
		return nil, fmt.Errorf("%w: no cache %q (this engine has %v)", ErrRequest, req.Cache, e.Caches())
	}
	n := len(req.Prompt)
	switch {
	case n == 0:
		return nil, fmt.Errorf("%w: empty prompt", ErrRequest)
	case req.MaxTokens < 0:
		return nil, fmt.Errorf("%w: max tokens %d", ErrRequest, req.MaxTokens)
	case req.MaxTokens == 0 && !req.PromptLogprobs:
		return nil, fmt.Errorf("%w: max tokens 0 without prompt log-probabilities asks for nothing", ErrRequest)
	case req.TopLogprobs < 0 || req.TopLogprobs > 20:
		return nil, fmt.Errorf("%w: top log-probabilities %d (0..20)", ErrRequest, req.TopLogprobs)
	case req.PromptTopLogprobs < 0 || req.PromptTopLogprobs > 20:
		return nil, fmt.Errorf("%w: prompt top log-probabilities %d (0..20)", ErrRequest, req.PromptTopLogprobs)
	case req.PromptTopLogprobs > 0 && !req.PromptLogprobs:
		return nil, fmt.Errorf("%w: prompt top log-probabilities without prompt log-probabilities", ErrRequest)
	}
	for _, t := range req.Prompt {
		if t < 0 || t >= e.m.Vocab {
			return nil, fmt.Errorf("%w: token id %d outside the vocabulary of %d", ErrRequest, t, e.m.Vocab)
		}
	}
	// Compared without adding, so that a huge MaxTokens cannot overflow.
	if c := e.m.MaxSeqLen(); n > c || req.MaxTokens > c-n {
		return nil, fmt.Errorf("%w: %d prompt tokens + %d to generate exceed the model's context of %d", ErrRequest, n, req.MaxTokens, c)
	}
	// A sequence's peak: its prompt in chunks of Chunk, then one token per
	// step (sliding-window layers keep only their window's blocks).
	if need := p.layout.SeqCostChunked(n+req.MaxTokens, e.opts.Chunk); need > p.capacity || p.layout.BlocksFor(n+req.MaxTokens) > p.blocks {
		return nil, fmt.Errorf("%w: %d tokens need %d bytes of cache %s, which holds %d", ErrTooLarge, n+req.MaxTokens, need, p.name, p.capacity)
	}
	return p, nil
}

// Run drives the engine until ctx ends, then aborts what is left. It
// returns ctx's error, or an error if Run is already running.
func (e *Engine) Run(ctx context.Context) error {
	e.mu.Lock()
	if e.running || e.closed {
		e.mu.Unlock()
		return fmt.Errorf("engine: Run called twice")
	}
	e.running = true
	close(e.ready)
	e.mu.Unlock()
	defer e.shutdown(ctx)
	for {
		// Let goroutines made runnable by the last step run before the
		// next: submitters queue their requests and readers take their
		// tokens. A busy loop of short steps would otherwise keep the
		// processor until preempted (10 ms), and with one free processor
		// requests arrive one at a time and never share a step.
		goruntime.Gosched()
		e.mu.Lock()
		in := e.incoming
		e.incoming = nil
		e.mu.Unlock()
		for _, s := range in {
			e.order++
			s.order = e.order
			s.pool.waiting = append(s.pool.waiting, s)
		}
		if !e.busy() {
			e.publish()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-e.wake:
				continue
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		e.step(ctx)
	}
}

// Ready returns a channel that is closed once Run has started: from then
// until Run returns, Submit accepts requests. It stays closed after Run
// returns (Running says whether the engine still accepts requests).
func (e *Engine) Ready() <-chan struct{} { return e.ready }

// WaitReady waits until Run has started. It returns nil when the engine
// accepts requests, ErrClosed when Run has already returned, and ctx's
// error when ctx ends first.
func (e *Engine) WaitReady(ctx context.Context) error {
	select {
	case <-e.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	if !e.Running() {
		return ErrClosed
	}
	return nil
}

// Running reports whether the engine accepts requests: Run has started
// and not yet returned.
func (e *Engine) Running() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running && !e.closed
}

func (e *Engine) busy() bool {
	for _, p := range e.pools {
		if len(p.running) > 0 || len(p.waiting) > 0 {
			return true
		}
	}
	return false
}

// shutdown aborts every request and refuses new ones.
func (e *Engine) shutdown(ctx context.Context) {
	e.mu.Lock()
	e.closed = true
	in := e.incoming
	e.incoming = nil
	e.mu.Unlock()
	err := ctx.Err()
	if err == nil {
		err = ErrClosed
	}
	for _, s := range in {
		e.finish(s, FinishAbort, err)
	}
	for _, p := range e.pools {
		for _, s := range slices.Concat(p.running, p.waiting) {
			e.finish(s, FinishAbort, err)
		}
		p.running, p.waiting = nil, nil
	}
	e.publish()
	e.r.Close()
}

// finish ends a request: frees its sequence and closes its stream.
func (e *Engine) finish(s *seq, reason string, err error) {
	if s.admitted {
		_ = s.pool.cache.Remove(s.id)
		s.admitted = false
	} else {
		s.pool.queued.Add(-1)
	}
	s.res.FinishReason, s.res.Err = reason, err
	s.res.Done = time.Now()
	s.res.Tokens = slices.Clone(s.tokens[len(s.req.Prompt):])
	if reason == FinishStop && len(s.res.Tokens) > 0 {
		s.res.Tokens = s.res.Tokens[:len(s.res.Tokens)-1] // the stop token
	}
	s.pool.stats.Finished[reason]++
	s.stream.close(s.res)
}

// entry is one sequence's part of a step.
type entry struct {
	s      *seq
	n      int  // tokens fed
	sample bool // the last row's logits pick the next token
	all    bool // every row's logits (prompt log-probabilities)
}

// picked is a sampled token waiting for the step to succeed.
type picked struct {
	tok Token
	s   *seq
}

func (e *Engine) step(ctx context.Context) {
	start := time.Now()
	e.dropCancelled()
	plan := e.plan[:0]
	defer func() {
		clear(e.plan)
		clear(e.batch)
		clear(e.picks)
		e.plan, e.batch, e.picks = e.plan[:0], e.batch[:0], e.picks[:0]
	}()
	decode, prefill := 0, 0
	room := e.opts.PrefillTokens
	for _, p := range e.pools {
		free, freeBlocks := p.cache.FreeBytes(), p.cache.FreeBlocks()
		if p.layout.Sliding() {
			// Both pools grow by the same count (the sliding one
			// releases at the end of the step): the smaller bounds it.
			freeBlocks = min(freeBlocks, p.cache.FreeSlideBlocks())
		}
		cost := func(s *seq, n int) (int64, int) {
			b := p.layout.BlocksFor(s.fed+n) - p.layout.BlocksFor(s.fed)
			c := int64(b) * p.layout.BlockBytes
			if !s.admitted {
				c += p.layout.SeqBytes
			}
			return c, b
		}
		fits := func(s *seq, n int) bool {
			c, b := cost(s, n)
			return b <= freeBlocks && c <= free
		}
		take := func(s *seq, n int) {
			c, b := cost(s, n)
			free, freeBlocks = free-c, freeBlocks-b
		}
		// Decodes first; preempt the latest admitted until they fit.
		for {
			var need int64
			var needBlocks int
			for _, s := range p.running {
				if s.fed > 0 && len(s.tokens)-s.fed == 1 {
					c, b := cost(s, 1)
					need, needBlocks = need+c, needBlocks+b
				}
			}
			if (need <= free && needBlocks <= freeBlocks) || len(p.running) == 0 {
				break
			}
			e.preempt(p)
			free, freeBlocks = p.cache.FreeBytes(), p.cache.FreeBlocks()
			if p.layout.Sliding() {
				freeBlocks = min(freeBlocks, p.cache.FreeSlideBlocks())
			}
		}
		for _, s := range p.running {
			if s.fed > 0 && len(s.tokens)-s.fed == 1 {
				take(s, 1)
				plan = append(plan, entry{s: s, n: 1, sample: true})
				decode++
			}
		}
		// Prompts being prefilled, then new ones, chunk by chunk.
		next := func(s *seq) int {
			end := min(len(s.tokens), (s.fed/e.opts.Chunk+1)*e.opts.Chunk)
			return end - s.fed
		}
		for _, s := range p.running {
			if len(s.tokens)-s.fed <= 1 && s.fed > 0 {
				continue
			}
			n := next(s)
			if n > room || !fits(s, n) {
				continue
			}
			take(s, n)
			room -= n
			prefill += n
			plan = append(plan, e.prefillEntry(s, n))
		}
		for len(p.waiting) > 0 && len(p.running) < e.opts.MaxSeqs {
			s := p.waiting[0]
			n := next(s)
			if n > room || !fits(s, n) {
				break // first come, first served
			}
			e.nextID++
			s.id = e.nextID
			if err := p.cache.AddSeq(s.id); err != nil {
				break // full after all: wait for memory
			}
			take(s, n)
			s.admitted = true
			p.queued.Add(-1)
			if s.res.Scheduled.IsZero() {
				s.res.Scheduled = time.Now()
			}
			p.waiting = p.waiting[1:]
			p.running = append(p.running, s)
			room -= n
			prefill += n
			plan = append(plan, e.prefillEntry(s, n))
		}
	}
	e.plan = plan // the scratch, grown
	if len(plan) == 0 {
		e.unstick()
		e.publish()
		return
	}
	batch := e.batch[:0]
	for _, en := range plan {
		lg := runtime.NoLogits
		switch {
		case en.all:
			lg = runtime.AllLogits
		case en.sample:
			lg = runtime.LastLogits
		}
		batch = append(batch, runtime.Entry{Cache: en.s.pool.cache, Seq: en.s.id, Tokens: en.s.tokens[en.s.fed : en.s.fed+en.n], Logits: lg})
	}
	e.batch = batch
	if len(e.lp) != e.m.Vocab {
		e.lp = make([]float64, e.m.Vocab)
	}
	err := e.r.Stream(ctx, batch, e.onRows)
	picks := e.picks
	now := time.Now()
	if err != nil {
		e.stepFailed(ctx, plan, err)
		e.publish()
		return
	}
	for _, en := range plan {
		en.s.fed += en.n
		if en.s.fed <= len(en.s.req.Prompt) {
			en.s.pool.stats.PromptTokens += int64(en.n)
		}
		if en.s.req.MaxTokens == 0 && en.s.fed == len(en.s.tokens) {
			e.retire(en.s, FinishLength, nil)
		}
	}
	for _, pk := range picks {
		s := pk.s
		pk.tok.Time = now
		s.tokens = append(s.tokens, pk.tok.ID)
		gen := len(s.tokens) - len(s.req.Prompt)
		if s.res.FirstToken.IsZero() {
			s.res.FirstToken = now
		}
		stop := !s.req.IgnoreEOS && e.stop[pk.tok.ID] || slices.Contains(s.req.StopTokens, pk.tok.ID)
		if stop {
			e.retire(s, FinishStop, nil)
			continue
		}
		s.pool.stats.GenerationTokens++
		s.stream.push(pk.tok)
		if gen >= s.req.MaxTokens {
			e.retire(s, FinishLength, nil)
		}
	}
	if e.opts.OnStep != nil {
		e.publish()
		e.opts.OnStep(StepInfo{Start: start, Duration: now.Sub(start), Decode: decode, Prefill: prefill, Pools: e.Stats()})
	} else {
		e.publish()
	}
}

// rows takes the logits of a step's rows (the runner's LogitsFunc over
// e.plan): prompt log-probabilities, and the sampled tokens into e.picks.
func (e *Engine) rows(i, row int, logits []float32) error {
	en := e.plan[i]
	s, lp := en.s, e.lp
	last := !en.all || row == en.n-1
	if en.all {
		// Row row predicts token fed+row+1.
		if pos := s.fed + row + 1; pos < len(s.req.Prompt) {
			logSoftmax(lp, logits)
			s.res.PromptLogprobs[pos] = float32(lp[s.req.Prompt[pos]])
			if k := s.req.PromptTopLogprobs; k > 0 {
				s.res.PromptTop[pos] = topK(lp, k)
			}
		}
	}
	if en.sample && last {
		e.picks = append(e.picks, picked{s: s, tok: e.sample(s, logits, lp)})
	}
	return nil
}

func (e *Engine) prefillEntry(s *seq, n int) entry {
	en := entry{s: s, n: n, sample: s.fed+n == len(s.tokens) && s.req.MaxTokens > len(s.tokens)-len(s.req.Prompt)}
	en.all = s.req.PromptLogprobs && s.fed < len(s.req.Prompt)-1
	return en
}

// sample picks s's next token from logits and its log-probabilities.
func (e *Engine) sample(s *seq, logits []float32, lp []float64) Token {
	t := Token{ID: s.sampler.Sample(logits)}
	if !s.req.Logprobs && s.req.TopLogprobs == 0 {
		return t
	}
	logSoftmax(lp, logits)
	t.Logprob = float32(lp[t.ID])
	if k := s.req.TopLogprobs; k > 0 {
		t.Top = topK(lp, k)
	}
	return t
}

// topK is the k likeliest entries of lp, likeliest first (the lower id
// first among equals), in one pass that keeps the best k seen so far.
func topK(lp []float64, k int) []TopLogprob {
	k = min(k, len(lp))
	if k <= 0 {
		return nil
	}
	ids := make([]int, 0, k)
	for id, v := range lp {
		if len(ids) == k && v <= lp[ids[k-1]] {
			continue
		}
		if len(ids) < k {
			ids = append(ids, id)
		}
		i := len(ids) - 1
		for i > 0 && lp[ids[i-1]] < v {
			ids[i] = ids[i-1]
			i--
		}
		ids[i] = id
	}
	out := make([]TopLogprob, len(ids))
	for i, id := range ids {
		out[i] = TopLogprob{ID: id, Logprob: float32(lp[id])}
	}
	return out
}

// logSoftmax sets dst to log softmax(logits) in float64.
func logSoftmax(dst []float64, logits []float32) {
	m := math.Inf(-1)
	for _, v := range logits {
		m = math.Max(m, float64(v))
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - m)
	}
	ls := m + math.Log(sum)
	for i, v := range logits {
		dst[i] = float64(v) - ls
	}
}

// retire removes a finished sequence from its pool.
func (e *Engine) retire(s *seq, reason string, err error) {
	p := s.pool
	p.running = slices.DeleteFunc(p.running, func(x *seq) bool { return x == s })
	p.waiting = slices.DeleteFunc(p.waiting, func(x *seq) bool { return x == s })
	e.finish(s, reason, err)
}

// preempt frees the most recently admitted running sequence of p and puts
// it at the head of the queue, to prefill again what it holds.
func (e *Engine) preempt(p *pool) {
	if len(p.running) == 0 {
		return
	}
	v := p.running[len(p.running)-1]
	p.running = p.running[:len(p.running)-1]
	_ = p.cache.Remove(v.id)
	v.admitted, v.fed = false, 0
	p.queued.Add(1)
	v.res.Preemptions++
	p.stats.Preemptions++
	p.waiting = append([]*seq{v}, p.waiting...)
}

// unstick handles a step that could plan nothing although sequences wait:
// a prefill that cannot grow while nothing else runs is preempted (it
// restarts alone, and Submit has checked that it fits alone).
func (e *Engine) unstick() {
	for _, p := range e.pools {
		if len(p.running) > 0 {
			e.preempt(p)
			return
		}
	}
}

// dropCancelled ends the requests whose context is done (running ones
// first, then waiting ones, in order).
func (e *Engine) dropCancelled() {
	for _, p := range e.pools {
		gone := e.gone[:0]
		for _, q := range [2][]*seq{p.running, p.waiting} {
			for _, s := range q {
				if s.ctx.Err() != nil {
					gone = append(gone, s)
				}
			}
		}
		for _, s := range gone {
			e.retire(s, FinishAbort, s.ctx.Err())
		}
		clear(gone)
		e.gone = gone[:0]
	}
}

// stepFailed handles a failed forward: the caches are as before the step.
// A full pool preempts its latest sequence; the engine's own cancellation
// leaves everything to shutdown; any other error fails the step's requests.
func (e *Engine) stepFailed(ctx context.Context, plan []entry, err error) {
	if ctx.Err() != nil {
		return
	}
	var full *kvcache.FullError
	if errors.As(err, &full) {
		for _, p := range e.pools {
			if p.cache.FreeBytes() < p.layout.BlockBytes {
				e.preempt(p)
			}
		}
		return
	}
	for _, en := range plan {
		if en.s.stream.closed() {
			continue
		}
		e.retire(en.s, FinishError, fmt.Errorf("engine: step failed: %w", err))
	}
}
