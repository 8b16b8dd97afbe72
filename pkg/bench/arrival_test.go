package bench_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/bench"
)

func TestScheduleAllAtOnce(t *testing.T) {
	for _, rate := range []float64{0, math.Inf(1)} {
		got := bench.Schedule(5, rate, 1, 1)
		if want := make([]time.Duration, 5); !slices.Equal(got, want) {
			t.Errorf("Schedule(5, %v, 1, 1) = %v, want all 0", rate, got)
		}
	}
	if got := bench.Schedule(0, 3, 1, 1); len(got) != 0 {
		t.Errorf("Schedule(0, ...) = %v, want empty", got)
	}
}

func TestScheduleTotal(t *testing.T) {
	for _, c := range []struct {
		n           int
		rate, burst float64
	}{
		{1, 2, 1}, {10, 4, 1}, {1000, 7.5, 0.3}, {333, 0.5, 5}, {50, 3, 0}, // 0: the default, 1
	} {
		got := bench.Schedule(c.n, c.rate, c.burst, 42)
		total := time.Duration(math.Round(float64(c.n) / c.rate * 1e9))
		if got[c.n-1] != total {
			t.Errorf("Schedule(%d, %v, %v): last arrival %v, want n/rate = %v", c.n, c.rate, c.burst, got[c.n-1], total)
		}
		if got[0] <= 0 {
			t.Errorf("Schedule(%d, %v, %v): first arrival %v, want one gap after the start", c.n, c.rate, c.burst, got[0])
		}
		if !slices.IsSorted(got) {
			t.Errorf("Schedule(%d, %v, %v) is not non-decreasing", c.n, c.rate, c.burst)
		}
	}
}

func TestScheduleConstant(t *testing.T) {
	got := bench.Schedule(4, 2, math.Inf(1), 9)
	want := []time.Duration{500 * time.Millisecond, time.Second, 1500 * time.Millisecond, 2 * time.Second}
	if !slices.Equal(got, want) {
		t.Errorf("constant rate 2/s: %v, want %v", got, want)
	}
}

func TestScheduleSeeds(t *testing.T) {
	a, b := bench.Schedule(100, 5, 1, 7), bench.Schedule(100, 5, 1, 7)
	if !slices.Equal(a, b) {
		t.Error("the same seed gives different schedules")
	}
	if c := bench.Schedule(100, 5, 1, 8); slices.Equal(a, c) {
		t.Error("seeds 7 and 8 give the same schedule")
	}
}

// gapStats are the mean and coefficient of variation of a schedule's gaps.
func gapStats(offsets []time.Duration) (mean, cv float64) {
	gaps := make([]float64, len(offsets))
	prev := time.Duration(0)
	for i, o := range offsets {
		gaps[i] = (o - prev).Seconds()
		prev = o
	}
	for _, g := range gaps {
		mean += g
	}
	mean /= float64(len(gaps))
	v := 0.0
	for _, g := range gaps {
		v += (g - mean) * (g - mean)
	}
	return mean, math.Sqrt(v/float64(len(gaps))) / mean
}

func TestScheduleBurstiness(t *testing.T) {
	// Gamma(k) gaps have a coefficient of variation of 1/√k: a Poisson
	// process (k = 1) gives 1, burstier k < 1 more, k > 1 less.
	const n, rate = 20000, 10
	prev := math.Inf(1)
	for _, k := range []float64{0.25, 1, 4, 16} {
		mean, cv := gapStats(bench.Schedule(n, rate, k, 3))
		if math.Abs(mean-1.0/rate) > 1e-9 {
			t.Errorf("burstiness %v: mean gap %v, want 1/rate = %v", k, mean, 1.0/rate)
		}
		if want := 1 / math.Sqrt(k); math.Abs(cv-want) > 0.1*want {
			t.Errorf("burstiness %v: gap CV %.3f, want %.3f ± 10%%", k, cv, want)
		}
		if cv >= prev {
			t.Errorf("burstiness %v: gap CV %.3f not below the previous %.3f", k, cv, prev)
		}
		prev = cv
	}
	if _, cv := gapStats(bench.Schedule(100, rate, math.Inf(1), 3)); cv > 1e-6 {
		t.Errorf("constant rate: gap CV %v, want 0", cv)
	}
}

func TestSchedulePanics(t *testing.T) {
	for _, c := range []struct {
		n           int
		rate, burst float64
	}{{-1, 1, 1}, {1, -1, 1}, {1, math.NaN(), 1}, {1, 1, -1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Schedule(%d, %v, %v) did not panic", c.n, c.rate, c.burst)
				}
			}()
			bench.Schedule(c.n, c.rate, c.burst, 0)
		}()
	}
}
