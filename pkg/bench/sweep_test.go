package bench_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/bench"
)

func TestSweep(t *testing.T) {
	var got []int
	instant := &funcTarget{name: "instant", do: func(_ context.Context, _ bench.Request, chunk func(int, time.Time)) (bench.Response, error) {
		chunk(1, time.Time{})
		return bench.Response{}, nil
	}}
	loads := []bench.Load{{Concurrency: 1}, {Concurrency: 2}, {Concurrency: 4}}
	points, err := bench.Sweep(context.Background(), instant, requests(6), loads, bench.SweepOptions{
		OnPoint: func(i int, p bench.Point) { got = append(got, p.Load.Concurrency) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(points) != 3 {
		t.Fatalf("%d points, want 3", len(points))
	}
	for i, p := range points {
		if p.Load != loads[i] || len(p.Result.Records) != 6 || p.Result.Load != loads[i] {
			t.Errorf("point %d: load %+v, %d records", i, p.Load, len(p.Result.Records))
		}
	}
	if len(got) != 3 || got[0] != 1 || got[2] != 4 {
		t.Errorf("OnPoint saw concurrencies %v, want [1 2 4]", got)
	}
	if _, err := bench.Sweep(context.Background(), instant, requests(1), []bench.Load{{}, {Rate: -1}}, bench.SweepOptions{}); !errors.Is(err, bench.ErrLoad) {
		t.Errorf("invalid second load: err = %v, want ErrLoad before any run", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	points, err = bench.Sweep(ctx, instant, requests(2), loads, bench.SweepOptions{})
	if !errors.Is(err, context.Canceled) || len(points) != 1 {
		t.Errorf("cancelled sweep: %d points, err %v; want the interrupted point and context.Canceled", len(points), err)
	}
}

// point is a run of n requests at load l, each with the given TTFT and a
// 10 ms gap to its second and last chunk.
func point(l bench.Load, n int, ttft float64) bench.Point {
	res := &bench.Result{Load: l, Duration: time.Second, Requests: n}
	for i := range n {
		res.Records = append(res.Records, rec(i, 0, []float64{ttft, ttft + 10}, 2, 1, 0))
	}
	return bench.Point{Load: l, Result: res}
}

func TestCapacityConcurrency(t *testing.T) {
	points := []bench.Point{
		point(bench.Load{Concurrency: 4}, 10, 600), // fails
		point(bench.Load{Concurrency: 1}, 10, 100),
		point(bench.Load{Concurrency: 8}, 10, 300), // passes above a failure: noise
		point(bench.Load{Concurrency: 2}, 10, 200),
	}
	c, err := bench.Capacity(points, bench.SLO{TTFT: ms(500)})
	if err != nil {
		t.Fatal(err)
	}
	if c.Axis != bench.AxisConcurrency || !c.Found || c.Level != 2 || c.Point != 3 {
		t.Errorf("capacity = %s %v (point %d, found %v), want concurrency 2 (point 3)", c.Axis, c.Level, c.Point, c.Found)
	}
	for i, want := range []bool{false, true, true, true} {
		if c.Verdicts[i].OK != want {
			t.Errorf("point %d: OK %v, want %v (%v)", i, c.Verdicts[i].OK, want, c.Verdicts[i].Violations)
		}
	}
	if v := c.Verdicts[0].Violations; len(v) != 1 || !strings.Contains(v[0], "p99 ttft 600.0 ms > 500ms") {
		t.Errorf("violations of point 0 = %q", v)
	}
	// The 90th percentile of TTFT 100 (×9) and 900: 100 + 0.1·800 = 180.
	mixed := point(bench.Load{Concurrency: 1}, 10, 100)
	mixed.Result.Records[9] = rec(9, 0, []float64{900, 910}, 2, 1, 0)
	for _, c := range []struct {
		p    float64
		ok   bool
		slo  time.Duration
		name string
	}{{90, true, ms(181), "p90 under the bound"}, {90, false, ms(179), "p90 over"}, {0, false, ms(500), "default p99"}} {
		got := bench.SLO{TTFT: c.slo, Percentile: c.p}.Check(mixed.Result)
		if (len(got) == 0) != c.ok {
			t.Errorf("%s: violations %q", c.name, got)
		}
	}
}

func TestCapacityRate(t *testing.T) {
	points := []bench.Point{
		point(bench.Load{Rate: 1, Concurrency: 16}, 10, 100),
		point(bench.Load{Rate: 4, Concurrency: 16}, 10, 100),
		point(bench.Load{Concurrency: 16}, 10, 100), // all at once: +Inf
	}
	c, err := bench.Capacity(points, bench.SLO{TTFT: ms(500)})
	if err != nil {
		t.Fatal(err)
	}
	if c.Axis != bench.AxisRate || !math.IsInf(c.Level, 1) || c.Point != 2 {
		t.Errorf("capacity = %s %v (point %d), want rate +Inf (point 2)", c.Axis, c.Level, c.Point)
	}
	c, _ = bench.Capacity(points, bench.SLO{TTFT: ms(50)})
	if c.Found || c.Point != -1 {
		t.Errorf("nothing meets 50 ms: found %v at point %d", c.Found, c.Point)
	}
}

func TestCapacityGoodputAndFailures(t *testing.T) {
	// Half the requests of each point are slow (TTFT 900 ms).
	mk := func(conc, failed int) bench.Point {
		p := point(bench.Load{Concurrency: conc}, 10, 100)
		for i := 5; i < 10; i++ {
			p.Result.Records[i] = rec(i, 0, []float64{900, 910}, 2, 1, 0)
		}
		for i := range failed {
			p.Result.Records[i].Error = "boom"
		}
		return p
	}
	points := []bench.Point{mk(1, 0), mk(2, 1)}
	slo := bench.SLO{Goodput: bench.Goodput{TTFT: ms(500)}, MinGoodput: 0.5, MaxFailed: 0.2}
	c, err := bench.Capacity(points, slo)
	if err != nil {
		t.Fatal(err)
	}
	// Point 0: 5 of 10 good. Point 1: one good request failed, 4 of 10.
	if !c.Verdicts[0].OK || c.Verdicts[1].OK || c.Level != 1 {
		t.Errorf("goodput ≥ 50%%: verdicts %+v, capacity %v; want only concurrency 1", c.Verdicts, c.Level)
	}
	if v := c.Verdicts[1].Violations; len(v) != 1 || !strings.Contains(v[0], "goodput 4 of 10") {
		t.Errorf("point 1 violations = %q", v)
	}
	// No failures allowed by default; not sent counts as failed.
	p := point(bench.Load{Concurrency: 1}, 4, 100)
	p.Result.Requests = 5
	if v := (bench.SLO{}).Check(p.Result); len(v) != 1 || !strings.Contains(v[0], "1 of 5 requests failed or did not complete") {
		t.Errorf("a request not sent: violations %q", v)
	}
}

func TestCapacityErrors(t *testing.T) {
	a := point(bench.Load{Concurrency: 1, Rate: 1}, 2, 10)
	b := point(bench.Load{Concurrency: 2, Rate: 2}, 2, 10)
	for _, c := range []struct {
		name   string
		points []bench.Point
		slo    bench.SLO
		want   error
	}{
		{"none", nil, bench.SLO{}, bench.ErrSweep},
		{"both vary", []bench.Point{a, b}, bench.SLO{}, bench.ErrSweep},
		{"neither varies", []bench.Point{a, a}, bench.SLO{}, bench.ErrSweep},
		{"goodput without share", []bench.Point{a}, bench.SLO{Goodput: bench.Goodput{TTFT: 1}}, bench.ErrOptions},
		{"share without goodput", []bench.Point{a}, bench.SLO{MinGoodput: 0.5}, bench.ErrOptions},
		{"percentile", []bench.Point{a}, bench.SLO{Percentile: 101}, bench.ErrOptions},
		{"negative bound", []bench.Point{a}, bench.SLO{TTFT: -1}, bench.ErrOptions},
	} {
		if _, err := bench.Capacity(c.points, c.slo); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
}
