package bench_test

import (
	"fmt"
	"math"
	"time"

	"github.com/kvqlabs/kvq/pkg/bench"
)

func ExampleSchedule() {
	// Four requests at a constant 2 requests/s; at rate 0 all arrive at once.
	fmt.Println(bench.Schedule(4, 2, math.Inf(1), 0))
	fmt.Println(bench.Schedule(3, 0, 1, 0))
	// A Poisson process (burstiness 1) ends at exactly n/rate.
	poisson := bench.Schedule(10, 4, 1, 42)
	fmt.Println(poisson[len(poisson)-1])
	// Output:
	// [500ms 1s 1.5s 2s]
	// [0s 0s 0s]
	// 2.5s
}

func ExampleParseGoodput() {
	g, err := bench.ParseGoodput("ttft:500 tpot:50ms") // vLLM's bare milliseconds, or durations
	if err != nil {
		panic(err)
	}
	fmt.Println(g.TTFT, g.TPOT, g)
	// Output:
	// 500ms 50ms ttft:500ms,tpot:50ms
}

func ExampleSummarize() {
	// One request sent at 0 with chunks at 100, 120 and 160 ms (3 tokens).
	res := &bench.Result{Duration: time.Second, Requests: 1, Records: []bench.Record{{
		Start: 0, FirstToken: 100 * time.Millisecond, End: 160 * time.Millisecond,
		ITL: []time.Duration{20 * time.Millisecond, 40 * time.Millisecond}, Chunks: 3,
		InputTokens: 12, OutputTokens: 3,
	}}}
	s, err := bench.Summarize(res, bench.SummaryOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Printf("TTFT %.0f ms, TPOT %.0f ms, mean ITL %.0f ms, E2EL %.0f ms\n", s.TTFT.Mean, s.TPOT.Mean, s.ITL.Mean, s.E2EL.Mean)
	fmt.Printf("%.0f output tok/s, %.0f total tok/s\n", s.OutputThroughput, s.TotalTokenThroughput)
	// Output:
	// TTFT 100 ms, TPOT 30 ms, mean ITL 30 ms, E2EL 160 ms
	// 3 output tok/s, 15 total tok/s
}
