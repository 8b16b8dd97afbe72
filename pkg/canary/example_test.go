package canary_test

import (
	"fmt"

	"github.com/kvqlabs/kvq/pkg/canary"
)

func ExampleParsePolicy() {
	p, err := canary.ParsePolicy([]byte(`
min_windows: 6
gates:
  - {metric: ttft-p95, max: 1.3}
  - {metric: flips, max: 0}
`), "canary.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, g := range p.Gates {
		fmt.Println(g)
	}
	fmt.Println(p.MinWindows, p.MinSamples, p.Alpha)
	// Output:
	// ttft-p95 <= 1.3
	// flips <= 0 (if significant)
	// 6 20 0.05
}
