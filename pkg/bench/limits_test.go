package bench_test

import (
	"errors"
	"testing"

	"github.com/kvqlabs/kvq/pkg/bench"
)

// TestWorkloadLimits: counts past MaxPrompts (or prompt tokens past
// MaxPromptTokens) are ErrWorkload before anything is allocated (1e18 used
// to panic in make, 1e9 to run out of memory).
func TestWorkloadLimits(t *testing.T) {
	tok := &byteTok{}
	file := writeFile(t, "p.jsonl", `{"prompt": "the cat"}`+"\n")
	for _, n := range []int{bench.MaxPrompts + 1, 1e9, 1e18} {
		if _, err := bench.Random(tok, n, 10, 10, 0, 1); !errors.Is(err, bench.ErrWorkload) {
			t.Errorf("Random(n=%d) = %v, want ErrWorkload", n, err)
		}
		if _, err := bench.BuiltIn(tok, n, 10, 1); !errors.Is(err, bench.ErrWorkload) {
			t.Errorf("BuiltIn(n=%d) = %v, want ErrWorkload", n, err)
		}
		if _, err := bench.FromFile(tok, file, n, 10, 1); !errors.Is(err, bench.ErrWorkload) {
			t.Errorf("FromFile(n=%d) = %v, want ErrWorkload", n, err)
		}
	}
	if _, err := bench.Fixed(tok, 1000, bench.MaxPromptTokens/1000+1, 10, 1); !errors.Is(err, bench.ErrWorkload) {
		t.Errorf("Fixed past MaxPromptTokens = %v, want ErrWorkload", err)
	}
}
