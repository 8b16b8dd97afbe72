package bench_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/bench"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

func measureModel(t *testing.T) *runtime.Model {
	t.Helper()
	m, err := modeltest.RandomModel(runtime.Config{Dim: 64, Hidden: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, Vocab: 97, ContextLen: 256}, tensor.F16, 7)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

type progressCall struct {
	stage       string
	done, total int
}

// TestMeasureInProcess runs two caches of the in-process engine at two
// loads with SLOs and the decode sweep: every point is there with the
// engine's view, the SLO capacity and the flat headline fields follow the
// points, and progress goes stage by stage from 0 to the total.
func TestMeasureInProcess(t *testing.T) {
	m := measureModel(t)
	specs, err := quant.Formats().ParseList("fp16,int4")
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := bench.Fixed(fakeTok{}, 6, 20, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	budget, err := bench.SeqBudget(m, specs[0], reqs, 2, 0)
	if err != nil || budget <= 0 {
		t.Fatalf("SeqBudget = %d, %v", budget, err)
	}
	gp, err := bench.ParseGoodput("ttft:60s,tpot:60s")
	if err != nil {
		t.Fatal(err)
	}
	loads := []bench.Load{{Concurrency: 1, Warmups: 1}, {Concurrency: 6, Warmups: 1}}
	var calls []progressCall
	rep, err := bench.Measure(context.Background(), m, reqs, bench.Options{Version: "test", Model: "random", Workload: bench.WorkloadOptions{Dataset: bench.DatasetFixed, Seed: 1},
		Loads: loads, Percentiles: []float64{50, 99}, Goodput: gp, SLOPercentile: 90, Threads: 1,
		Caches: specs, Budget: budget, BudgetSource: "test", MaxSeqs: 8, Chunk: 64, Depths: []int{0, 32}, DepthTokens: 2, DepthReps: 1,
		Progress: func(stage string, done, total int) { calls = append(calls, progressCall{stage, done, total}) }})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Schema != bench.Schema || rep.Mode != bench.ModeInProcess || rep.Budget != budget || rep.BudgetSource != "test" || rep.Machine.Threads != 1 {
		t.Errorf("report header: %+v", rep)
	}
	in, out := 0, 0
	for _, r := range reqs {
		in, out = in+len(r.Prompt), out+r.MaxTokens
	}
	if w := rep.Workload; w.Requests != len(reqs) || w.InputTokens != in || w.OutputTokens != out || w.Dataset != bench.DatasetFixed {
		t.Errorf("workload = %+v, want %d requests, %d in, %d out", w, len(reqs), in, out)
	}
	if len(rep.Caches) != 2 || rep.Caches[0].Cache != "fp16" || rep.Caches[1].Cache != "int4" {
		t.Fatalf("caches: %+v", rep.Caches)
	}
	for _, c := range rep.Caches {
		if len(c.Points) != len(loads) {
			t.Fatalf("%s: %d points, want %d", c.Cache, len(c.Points), len(loads))
		}
		for i, p := range c.Points {
			if p.Load != loads[i] || p.Summary.Completed != len(reqs) || p.Engine == nil || p.Engine.RunningPeak < 1 || len(p.Result.Records) != len(reqs) {
				t.Errorf("%s point %d: load %+v, %d completed, engine %+v", c.Cache, i, p.Load, p.Summary.Completed, p.Engine)
			}
		}
		if c.Capacity == nil || !c.Capacity.Found || c.CapacityLevel != int(c.Capacity.Level) {
			t.Errorf("%s: capacity %+v, level %d", c.Cache, c.Capacity, c.CapacityLevel)
		}
		last := c.Points[len(c.Points)-1].Summary
		if c.OutputThroughput != last.OutputThroughput || c.MedianTPOTms != last.TPOT.Median {
			t.Errorf("%s: headline %v, %v; last point %v, %v", c.Cache, c.OutputThroughput, c.MedianTPOTms, last.OutputThroughput, last.TPOT.Median)
		}
		if len(c.Decode) != 2 || c.DecodeTPS != c.Decode[0].Median || c.DecodeTPS <= 0 {
			t.Errorf("%s decode: %+v, headline %v", c.Cache, c.Decode, c.DecodeTPS)
		}
	}
	loadTotal := 2 * len(loads) * (len(reqs) + 1)
	want := []progressCall{{bench.StageLoad, 0, loadTotal}}
	if len(calls) == 0 || calls[0] != want[0] {
		t.Fatalf("first progress call %+v, want %+v", calls, want[0])
	}
	stage, last := bench.StageLoad, 0
	for _, c := range calls[1:] {
		if c.stage != stage {
			if stage != bench.StageLoad || c.stage != bench.StageDecode || c.done != 0 || last != loadTotal {
				t.Fatalf("progress moves from %s at %d to %+v", stage, last, c)
			}
			stage = c.stage
		} else if c.done < last && c.stage == bench.StageLoad {
			t.Errorf("progress went back: %d after %d", c.done, last)
		}
		last = c.done
	}
	if stage != bench.StageDecode || last != calls[len(calls)-1].total {
		t.Errorf("progress ends at %s %d of %d", stage, last, calls[len(calls)-1].total)
	}
}

// TestMeasureEndpoints runs given targets: the endpoint mode, no engine
// view, no decode sweep, the capacity as the client saw it.
func TestMeasureEndpoints(t *testing.T) {
	m := measureModel(t)
	reqs := requests(5)
	target := func(name string) bench.Target {
		return &funcTarget{name: name, do: func(ctx context.Context, r bench.Request, chunk func(int, time.Time)) (bench.Response, error) {
			for range r.MaxTokens {
				chunk(1, time.Now())
			}
			return bench.Response{InputTokens: len(r.Prompt), OutputTokens: r.MaxTokens}, nil
		}}
	}
	rep, err := bench.Measure(context.Background(), m, reqs, bench.Options{Loads: []bench.Load{{Concurrency: 2}}, Percentiles: []float64{50},
		Targets: []bench.Target{target("a"), target("b")}, Depths: []int{0}, DepthTokens: 2, DepthReps: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Mode != bench.ModeEndpoint || rep.Budget != 0 || len(rep.Caches) != 2 || rep.Caches[1].Cache != "b" {
		t.Fatalf("report: %+v", rep)
	}
	for _, c := range rep.Caches {
		p := c.Points[0]
		if p.Engine != nil || c.Decode != nil || c.Capacity != nil || p.Summary.Completed != len(reqs) || c.CapacityLevel != p.Summary.MaxConcurrentRequests || c.CapacityLevel > 2 {
			t.Errorf("%s: %+v", c.Cache, c)
		}
	}
}

// TestMeasureErrors: the engine refusing the caches is an *EngineError,
// bad percentiles wrap ErrOptions.
func TestMeasureErrors(t *testing.T) {
	m := measureModel(t)
	specs, _ := quant.Formats().ParseList("fp16")
	reqs, _ := bench.Fixed(fakeTok{}, 2, 8, 2, 1)
	var ee *bench.EngineError
	if _, err := bench.Measure(context.Background(), m, reqs, bench.Options{Loads: []bench.Load{{}}, Caches: specs, Budget: 1024, MaxSeqs: 4, Chunk: 64}); !errors.As(err, &ee) {
		t.Errorf("Measure with a 1 KiB budget: %v, want an *EngineError", err)
	}
	ok := &funcTarget{name: "a", do: func(ctx context.Context, r bench.Request, chunk func(int, time.Time)) (bench.Response, error) {
		chunk(1, time.Now())
		return bench.Response{OutputTokens: 1}, nil
	}}
	if _, err := bench.Measure(context.Background(), m, reqs, bench.Options{Loads: []bench.Load{{}}, Percentiles: []float64{101}, Targets: []bench.Target{ok}}); !errors.Is(err, bench.ErrOptions) {
		t.Errorf("Measure with percentile 101: %v, want ErrOptions", err)
	}
}

// TestModelWorkloadContext: lengths past the context are a *ContextError
// before any prompt is made.
func TestModelWorkloadContext(t *testing.T) {
	m := measureModel(t)
	for _, ds := range []string{bench.DatasetRandom, bench.DatasetFixed} {
		_, err := bench.ModelWorkload(m, bench.WorkloadOptions{Dataset: ds, Requests: 2, InputLen: 250, OutputLen: 9, Seed: 1})
		var ce *bench.ContextError
		if !errors.As(err, &ce) || ce.Request != -1 || ce.Prompt != 250 || ce.Output != 9 || ce.Context != m.MaxSeqLen() {
			t.Errorf("%s: ModelWorkload(250+9 tokens) = %v, want a ContextError for the shortest request", ds, err)
		}
	}
}
