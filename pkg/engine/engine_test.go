package engine_test

import (
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	goruntime "runtime"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/engine"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

func testModel(t *testing.T) *runtime.Model {
	t.Helper()
	m, err := modeltest.RandomModel(runtime.Config{Dim: 64, Hidden: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, Vocab: 97, ContextLen: 512}, tensor.F16, 7)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func specs(t *testing.T, names ...string) []quant.Spec {
	t.Helper()
	var out []quant.Spec
	for _, n := range names {
		s, err := quant.Formats().ParseSpec(n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// start runs an engine until the test ends.
func start(t *testing.T, m *runtime.Model, opts engine.Options) *engine.Engine {
	t.Helper()
	e, err := engine.New(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	if err := e.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestReady: Ready is open and Submit refused until Run starts; then
// Ready is closed, WaitReady returns nil and Submit checks requests; after
// Run returns, Ready stays closed while WaitReady and Submit say
// ErrClosed. WaitReady returns ctx's error when ctx ends first.
func TestReady(t *testing.T) {
	e, err := engine.New(testModel(t), engine.Options{Caches: specs(t, "fp16")})
	if err != nil {
		t.Fatal(err)
	}
	isClosed := func() bool {
		select {
		case <-e.Ready():
			return true
		default:
			return false
		}
	}
	if isClosed() || e.Running() {
		t.Fatalf("before Run: Ready closed %v, Running %v, want false, false", isClosed(), e.Running())
	}
	if _, err := e.Submit(context.Background(), engine.Request{Prompt: []int{1}, MaxTokens: 1}); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("Submit before Run = %v, want ErrClosed", err)
	}
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	if err := e.WaitReady(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitReady(cancelled ctx) before Run = %v, want context.Canceled", err)
	}
	tctx, tcancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer tcancel()
	if err := e.WaitReady(tctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitReady before Run = %v, want context.DeadlineExceeded", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	if err := e.WaitReady(context.Background()); err != nil {
		t.Fatalf("WaitReady while running = %v, want nil", err)
	}
	if !isClosed() || !e.Running() {
		t.Fatalf("running: Ready closed %v, Running %v, want true, true", isClosed(), e.Running())
	}
	if _, err := e.Submit(context.Background(), engine.Request{}); !errors.Is(err, engine.ErrRequest) {
		t.Fatalf("Submit(empty request) while running = %v, want ErrRequest", err)
	}
	if err := e.Run(ctx); err == nil {
		t.Fatal("a second Run returned nil")
	}

	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if !isClosed() || e.Running() {
		t.Fatalf("after Run: Ready closed %v, Running %v, want true, false", isClosed(), e.Running())
	}
	if err := e.WaitReady(context.Background()); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("WaitReady after Run = %v, want ErrClosed", err)
	}
	if _, err := e.Submit(context.Background(), engine.Request{Prompt: []int{1}, MaxTokens: 1}); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("Submit after Run = %v, want ErrClosed", err)
	}
}

func prompt(rng *rand.Rand, n, vocab int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = rng.IntN(vocab)
	}
	return p
}

func run(t *testing.T, e *engine.Engine, req engine.Request) engine.Result {
	t.Helper()
	st, err := e.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestAloneMatchesGenerate: one greedy request gives runtime.Generate's
// tokens, and its stream delivers them in order before EOF.
func TestAloneMatchesGenerate(t *testing.T) {
	m := testModel(t)
	e := start(t, m, engine.Options{Caches: specs(t, "fp16")})
	rng := rand.New(rand.NewPCG(1, 2))
	p := prompt(rng, 40, m.Vocab)
	st, err := e.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: 20, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	var streamed []int
	for {
		tok, err := st.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		streamed = append(streamed, tok.ID)
	}
	res := st.Result()
	r, _ := runtime.NewRunner(m, runtime.RunnerOptions{})
	l, _ := kvcache.NewLayout(m.Geometry(), specs(t, "fp16")[0], 0)
	c, _ := r.NewCache(l, kvcache.Options{Blocks: l.BlocksFor(60)})
	c.AddSeq(0)
	want, _, err := r.Generate(context.Background(), c, 0, p, runtime.GenerateOptions{MaxTokens: 20})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Tokens, want) || !slices.Equal(streamed, want) || res.FinishReason != engine.FinishLength || res.PromptTokens != 40 {
		t.Errorf("engine %v (streamed %v, %s), Generate %v", res.Tokens, streamed, res.FinishReason, want)
	}
	if !(res.Arrival.Compare(res.Scheduled) <= 0 && res.Scheduled.Compare(res.FirstToken) <= 0 && res.FirstToken.Compare(res.Done) <= 0) {
		t.Errorf("timeline out of order: %+v", res)
	}
}

// TestConcurrentMatchesAlone: many requests over two pools at once, prompts
// longer and shorter than a chunk, give exactly what each gives alone
// (F16 weights: batch-invariant), and leave no block behind.
func TestConcurrentMatchesAlone(t *testing.T) {
	m := testModel(t)
	opts := engine.Options{Caches: specs(t, "fp16", "int8"), Chunk: 32, MaxSeqs: 8}
	rng := rand.New(rand.NewPCG(3, 4))
	var reqs []engine.Request
	for i := range 14 {
		reqs = append(reqs, engine.Request{Cache: []string{"fp16", "int8"}[i%2], Prompt: prompt(rng, 5+rng.IntN(90), m.Vocab),
			MaxTokens: 4 + rng.IntN(20), IgnoreEOS: true})
	}
	alone := start(t, m, opts)
	want := make([][]int, len(reqs))
	for i, r := range reqs {
		want[i] = run(t, alone, r).Tokens
	}
	e := start(t, m, opts)
	got := make([][]int, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := e.Submit(context.Background(), r)
			if err != nil {
				t.Error(err)
				return
			}
			res, _ := st.Wait(context.Background())
			got[i] = res.Tokens
		}()
	}
	wg.Wait()
	for i := range reqs {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("request %d (%s, %d prompt tokens): together %v, alone %v", i, reqs[i].Cache, len(reqs[i].Prompt), got[i], want[i])
		}
	}
	waitIdle(t, e)
}

// TestSubmittersShareSteps: on one processor, requests submitted from
// goroutines started together share the engine's steps (the engine yields
// between steps) instead of running one after another.
func TestSubmittersShareSteps(t *testing.T) {
	defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(1))
	m := testModel(t)
	var mu sync.Mutex
	peak := 0
	e := start(t, m, engine.Options{Caches: specs(t, "fp16"), OnStep: func(s engine.StepInfo) {
		mu.Lock()
		defer mu.Unlock()
		peak = max(peak, s.Pools[0].Running)
	}})
	rng := rand.New(rand.NewPCG(9, 10))
	var wg sync.WaitGroup
	for range 8 {
		req := engine.Request{Prompt: prompt(rng, 20, m.Vocab), MaxTokens: 6, IgnoreEOS: true}
		wg.Go(func() {
			st, err := e.Submit(context.Background(), req)
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := st.Wait(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if peak < 4 {
		t.Errorf("8 requests submitted together on one processor: at most %d running at once", peak)
	}
}

// waitIdle waits for the engine's pools to drain and checks nothing leaked.
func waitIdle(t *testing.T, e *engine.Engine) {
	t.Helper()
	for range 2000 {
		idle := true
		for _, p := range e.Stats() {
			idle = idle && p.Running == 0 && p.Waiting == 0 && p.UsedBytes == 0
		}
		if idle {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Errorf("pools not idle: %+v", e.Stats())
}

// TestPreemption: a pool too small for every request at once preempts and
// recomputes, and every request still ends with its full length.
func TestPreemption(t *testing.T) {
	m := testModel(t)
	sp := specs(t, "fp16")
	l, _ := kvcache.NewLayout(m.Geometry(), sp[0], 0)
	// Room for about three sequences of 120 tokens.
	e := start(t, m, engine.Options{Caches: sp, Budget: l.SeqCost(120) * 3, Chunk: 32})
	rng := rand.New(rand.NewPCG(5, 6))
	var wg sync.WaitGroup
	results := make([]engine.Result, 8)
	for i := range results {
		wg.Add(1)
		req := engine.Request{Prompt: prompt(rng, 40, m.Vocab), MaxTokens: 70, IgnoreEOS: true}
		go func() {
			defer wg.Done()
			st, err := e.Submit(context.Background(), req)
			if err != nil {
				t.Error(err)
				return
			}
			results[i], _ = st.Wait(context.Background())
		}()
	}
	wg.Wait()
	pre := 0
	for i, r := range results {
		if len(r.Tokens) != 70 || r.FinishReason != engine.FinishLength {
			t.Errorf("request %d: %d tokens, %s (%v)", i, len(r.Tokens), r.FinishReason, r.Err)
		}
		pre += r.Preemptions
	}
	if st := e.Stats()[0]; pre == 0 || st.Preemptions != int64(pre) {
		t.Errorf("preemptions: requests %d, pool %d", pre, st.Preemptions)
	}
	waitIdle(t, e)
}

// TestCancel: a request whose context ends is aborted and its blocks
// freed; the engine's own end aborts the rest.
func TestCancel(t *testing.T) {
	m := testModel(t)
	e := start(t, m, engine.Options{Caches: specs(t, "fp16")})
	ctx, cancel := context.WithCancel(context.Background())
	st, err := e.Submit(ctx, engine.Request{Prompt: []int{1, 2, 3}, MaxTokens: 400, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	cancel()
	res, _ := st.Wait(context.Background())
	if res.FinishReason != engine.FinishAbort || !errors.Is(res.Err, context.Canceled) || len(res.Tokens) >= 400 {
		t.Errorf("cancelled: %s, %v, %d tokens", res.FinishReason, res.Err, len(res.Tokens))
	}
	waitIdle(t, e)

	e2, _ := engine.New(m, engine.Options{Caches: specs(t, "fp16")})
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e2.Run(rctx) }()
	var st2 *engine.Stream
	for range 1000 {
		if st2, err = e2.Submit(context.Background(), engine.Request{Prompt: []int{4}, MaxTokens: 500, IgnoreEOS: true}); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if st2 == nil {
		t.Fatal(err)
	}
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v", err)
	}
	if res, _ := st2.Wait(context.Background()); res.FinishReason != engine.FinishAbort {
		t.Errorf("after shutdown: %s", res.FinishReason)
	}
	if _, err := e2.Submit(context.Background(), engine.Request{Prompt: []int{4}, MaxTokens: 1}); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("Submit after shutdown: %v", err)
	}
}

// TestSubmitErrors: requests no engine could serve are refused up front.
func TestSubmitErrors(t *testing.T) {
	m := testModel(t)
	sp := specs(t, "fp16")
	l, _ := kvcache.NewLayout(m.Geometry(), sp[0], 0)
	e := start(t, m, engine.Options{Caches: sp, Budget: l.SeqCost(100)})
	for _, tt := range []struct {
		req  engine.Request
		want error
	}{
		{engine.Request{Prompt: []int{97}, MaxTokens: 1}, engine.ErrRequest},
		{engine.Request{Prompt: []int{1}, MaxTokens: 600}, engine.ErrRequest},
		{engine.Request{Prompt: []int{1}, MaxTokens: 200}, engine.ErrTooLarge},
		{engine.Request{Prompt: []int{1}, MaxTokens: 1, Cache: "int4"}, engine.ErrRequest},
		{engine.Request{Prompt: nil, MaxTokens: 1}, engine.ErrRequest},
		{engine.Request{Prompt: []int{1}, MaxTokens: 1, Temperature: -1}, engine.ErrRequest},
		{engine.Request{Prompt: []int{1}}, engine.ErrRequest},
	} {
		if _, err := e.Submit(context.Background(), tt.req); !errors.Is(err, tt.want) {
			t.Errorf("Submit(%+v) = %v, want %v", tt.req, err, tt.want)
		}
	}
}

// TestLogprobs: prompt log-probabilities equal a teacher-forced forward's,
// generated tokens carry theirs, top alternatives come sorted with the
// greedy choice first, and a stop token ends generation unreturned.
func TestLogprobs(t *testing.T) {
	m := testModel(t)
	e := start(t, m, engine.Options{Caches: specs(t, "fp32"), Chunk: 16})
	rng := rand.New(rand.NewPCG(7, 8))
	p := prompt(rng, 50, m.Vocab)
	res := run(t, e, engine.Request{Prompt: p, MaxTokens: 0, PromptLogprobs: true, PromptTopLogprobs: 4})
	r, _ := runtime.NewRunner(m, runtime.RunnerOptions{})
	l, _ := kvcache.NewLayout(m.Geometry(), specs(t, "fp32")[0], 0)
	c, _ := r.NewCache(l, kvcache.Options{Blocks: l.BlocksFor(50)})
	c.AddSeq(0)
	out, _ := r.Forward(context.Background(), []runtime.Entry{{Cache: c, Tokens: p, Logits: runtime.AllLogits}})
	if !math.IsNaN(float64(res.PromptLogprobs[0])) || len(res.Tokens) != 0 || res.FinishReason != engine.FinishLength {
		t.Errorf("scoring only: %+v", res)
	}
	for i := 1; i < len(p); i++ {
		row := out[0][(i-1)*m.Vocab : i*m.Vocab]
		mx := math.Inf(-1)
		for _, v := range row {
			mx = math.Max(mx, float64(v))
		}
		var sum float64
		for _, v := range row {
			sum += math.Exp(float64(v) - mx)
		}
		want := float64(row[p[i]]) - mx - math.Log(sum)
		if d := math.Abs(float64(res.PromptLogprobs[i]) - want); d > 1e-4 {
			t.Errorf("prompt logprob %d = %g, want %g", i, res.PromptLogprobs[i], want)
		}
		// The alternatives are the row's four likeliest, in order.
		ids := make([]int, len(row))
		for j := range ids {
			ids[j] = j
		}
		sort.SliceStable(ids, func(a, b int) bool { return row[ids[a]] > row[ids[b]] })
		top := res.PromptTop[i]
		if len(top) != 4 {
			t.Fatalf("prompt top %d: %d alternatives, want 4", i, len(top))
		}
		for j, a := range top {
			if a.ID != ids[j] || math.Abs(float64(a.Logprob)-(float64(row[ids[j]])-mx-math.Log(sum))) > 1e-4 {
				t.Errorf("prompt top %d[%d] = %+v, want id %d", i, j, a, ids[j])
			}
		}
	}
	if res.PromptTop[0] != nil {
		t.Errorf("prompt top 0 = %v, want none (nothing precedes the first token)", res.PromptTop[0])
	}
	st, _ := e.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: 5, IgnoreEOS: true, Logprobs: true, TopLogprobs: 3})
	for {
		tok, err := st.Next(context.Background())
		if err == io.EOF {
			break
		}
		if len(tok.Top) != 3 || tok.Top[0].ID != tok.ID || tok.Top[0].Logprob != tok.Logprob || tok.Top[1].Logprob > tok.Top[0].Logprob || tok.Logprob > 0 {
			t.Errorf("token %+v", tok)
		}
	}
	first := st.Result().Tokens[0]
	res = run(t, e, engine.Request{Prompt: p, MaxTokens: 5, StopTokens: []int{first}})
	if res.FinishReason != engine.FinishStop || len(res.Tokens) != 0 {
		t.Errorf("stop token: %s, %v", res.FinishReason, res.Tokens)
	}
}
