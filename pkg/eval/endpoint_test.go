package eval_test

import (
	"context"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// localDeployment plays a server with one cache over the runtime: greedy
// generation and teacher-forced prompt scores with the whole vocabulary as
// its "top-k", tokens named by id (a server's strings may collide).
type localDeployment struct {
	mu     sync.Mutex
	r      *runtime.Runner
	layout *kvcache.Layout
	topK   int // 0: the whole vocabulary
}

func newLocal(t *testing.T, m *runtime.Model, spec quant.Spec, topK int) *localDeployment {
	t.Helper()
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	l, err := kvcache.NewLayout(m.Geometry(), spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	return &localDeployment{r: r, layout: l, topK: topK}
}

func (d *localDeployment) Generate(ctx context.Context, prompt []int, maxTokens int) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	outs, err := eval.Generate(ctx, d.r, []*kvcache.Layout{d.layout}, eval.GenItem{Prompt: prompt, MaxTokens: maxTokens})
	if err != nil {
		return "", err
	}
	return outs[0].Text, nil
}

func (d *localDeployment) ScorePrompt(ctx context.Context, prompt []int, topK int) ([]eval.ScoredToken, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.r.NewCache(d.layout, kvcache.Options{Blocks: d.layout.BlocksFor(len(prompt))})
	if err != nil {
		return nil, err
	}
	_ = c.AddSeq(0)
	out, err := d.r.Forward(ctx, []runtime.Entry{{Cache: c, Tokens: prompt, Logits: runtime.AllLogits}})
	if err != nil {
		return nil, err
	}
	V := d.r.Model().Vocab
	st := []eval.ScoredToken{{Token: strconv.Itoa(prompt[0]), Logprob: math.NaN()}}
	for i := 1; i < len(prompt); i++ {
		row := out[0][(i-1)*V : i*V]
		mx := math.Inf(-1)
		for _, v := range row {
			mx = math.Max(mx, float64(v))
		}
		var sum float64
		for _, v := range row {
			sum += math.Exp(float64(v) - mx)
		}
		ls := mx + math.Log(sum)
		type alt struct {
			id int
			lp float64
		}
		alts := make([]alt, V)
		for j, v := range row {
			alts[j] = alt{j, float64(v) - ls}
		}
		k := V
		if d.topK > 0 {
			k = min(topK, d.topK)
			// the k likeliest, as a server returns them
			for a := 0; a < k; a++ {
				for b := a + 1; b < V; b++ {
					if alts[b].lp > alts[a].lp {
						alts[a], alts[b] = alts[b], alts[a]
					}
				}
			}
		}
		top := map[string]float64{}
		for _, a := range alts[:k] {
			top[strconv.Itoa(a.id)] = a.lp
		}
		st = append(st, eval.ScoredToken{Token: strconv.Itoa(prompt[i]), Logprob: float64(row[prompt[i]]) - ls, Top: top})
	}
	return st, nil
}

// TestEndpointsMatchLocal: deployments that return their whole
// distribution give exactly the local eval's text metrics (the top-k KLD
// is then the full KLD) and the same generation rows; with a real top-k
// of 5 the KLD approximation stays positive and below.
func TestEndpointsMatchLocal(t *testing.T) {
	m, specs := tinyModel(t, "fp32,int2")
	texts := []eval.Text{{Name: "s", Body: strings.Repeat(storyText, 4)}}
	so := eval.SuiteOptions{N: 3, PasskeyContexts: []int{256}, ModelContext: m.ContextLen}
	names := []string{eval.SuitePasskey, eval.SuiteCopy, eval.SuiteJSON}
	local, err := eval.Run(context.Background(), m, eval.Options{Specs: specs, Texts: texts, TextOpts: eval.TextOptions{Ctx: 128},
		Suites: suites(t, names, so), LogSamples: true, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	run := func(topK int) *eval.Report {
		ds := []eval.Deployment{newLocal(t, m, specs[0], topK), newLocal(t, m, specs[1], topK)}
		calls := 0
		rep, err := eval.RunEndpoints(context.Background(), m, eval.EndpointOptions{Names: []string{"base", "cand"}, Deployments: ds,
			Texts: texts, TextOpts: eval.TextOptions{Ctx: 128}, TopK: 5, Suites: suites(t, names, so), LogSamples: true, Concurrency: 3,
			Gates: eval.DefaultGates(), Progress: func(string, int, int) { calls++ }})
		if err != nil {
			t.Fatal(err)
		}
		if calls == 0 {
			t.Error("no progress reported")
		}
		return rep
	}
	full := run(0)
	if full.Text == nil || len(full.Text.Caches) != 2 || full.Text.Approximation == "" {
		t.Fatalf("text: %+v", full.Text)
	}
	for i, lc := range local.Text.Caches {
		ec := full.Text.Caches[i]
		if ec.Tokens != lc.Tokens || math.Abs(ec.PPL-lc.PPL) > 1e-6*lc.PPL || math.Abs(ec.KLD.Mean-lc.KLD.Mean) > 1e-6+1e-6*lc.KLD.Mean ||
			ec.SameTop != lc.SameTop || math.Abs(ec.DeltaP.RMS-lc.DeltaP.RMS) > 1e-6 {
			t.Errorf("cache %d over the endpoints: tokens %d PPL %v KLD %v same %v Δp %v; locally %d %v %v %v %v",
				i, ec.Tokens, ec.PPL, ec.KLD.Mean, ec.SameTop, ec.DeltaP.RMS, lc.Tokens, lc.PPL, lc.KLD.Mean, lc.SameTop, lc.DeltaP.RMS)
		}
	}
	if !(full.Text.Caches[1].KLD.Mean > 0) {
		t.Fatalf("int2 KLD %v: nothing to approximate", full.Text.Caches[1].KLD.Mean)
	}
	if len(full.Suites) != len(local.Suites) || len(full.Samples) != len(local.Samples) {
		t.Fatalf("suites %d vs %d, samples %d vs %d", len(full.Suites), len(local.Suites), len(full.Samples), len(local.Samples))
	}
	for i, s := range local.Suites {
		for c := range s.Caches {
			if full.Suites[i].Name != s.Name || full.Suites[i].Caches[c].Score != s.Caches[c].Score {
				t.Errorf("suite %s cache %d: %v over the endpoints, %v locally", s.Name, c, full.Suites[i].Caches[c].Score, s.Caches[c].Score)
			}
		}
	}
	for i, s := range local.Samples {
		if e := full.Samples[i]; e.Output != s.Output || e.Suite != s.Suite || e.Index != s.Index {
			t.Errorf("sample %d: %q over the endpoints, %q locally", i, e.Output, s.Output)
		}
	}
	top5 := run(5)
	exact, approx := full.Text.Caches[1].KLD.Mean, top5.Text.Caches[1].KLD.Mean
	// The random model's distributions are flat, so five tokens hold
	// little of the mass and most of the divergence is in the bucket.
	if !(approx > 0 && approx <= exact) {
		t.Errorf("top-5 KLD %v against the full %v: want positive and not above", approx, exact)
	}
	if top5.Text.Caches[1].PPL != full.Text.Caches[1].PPL || top5.Text.Caches[1].SameTop != full.Text.Caches[1].SameTop {
		t.Errorf("PPL and top-1 agreement must not depend on k: %+v vs %+v", top5.Text.Caches[1], full.Text.Caches[1])
	}
	if len(top5.Verdicts) != 1 || len(top5.Gates) == 0 {
		t.Errorf("verdicts %+v gates %d", top5.Verdicts, len(top5.Gates))
	}
}

// TestTopKKLD pins the approximation on small distributions.
func TestTopKKLD(t *testing.T) {
	ln := math.Log
	p := map[string]float64{"a": ln(0.5), "b": ln(0.3)}
	if v := eval.TopKKLD(p, p); v != 0 {
		t.Errorf("KLD(P, P) = %v", v)
	}
	q := map[string]float64{"a": ln(0.3), "b": ln(0.5)}
	// 0.5 ln(0.5/0.3) + 0.3 ln(0.3/0.5) + 0.2 ln(0.2/0.2)
	want := 0.5*ln(0.5/0.3) + 0.3*ln(0.3/0.5)
	if v := eval.TopKKLD(p, q); math.Abs(v-want) > 1e-12 {
		t.Errorf("swapped: %v, want %v", v, want)
	}
	// b missing from Q's top-k: it joins the bucket with the rest.
	q2 := map[string]float64{"a": ln(0.4), "c": ln(0.5)}
	want = 0.5*ln(0.5/0.4) + 0.5*ln(0.5/0.6)
	if v := eval.TopKKLD(p, q2); math.Abs(v-want) > 1e-12 {
		t.Errorf("missing token: %v, want %v", v, want)
	}
}
