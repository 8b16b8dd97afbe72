package estimate

import (
	"context"
	"math"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
)

// specs parses a cache list; an unknown format fails the test.
func specs(t *testing.T, list string) []quant.Spec {
	t.Helper()
	s, err := quant.Formats().ParseList(list)
	if err != nil {
		t.Fatalf("ParseList(%q): %v", list, err)
	}
	return s
}

func preset(t *testing.T, name string) Model {
	t.Helper()
	m, err := LookupModel(name)
	if err != nil {
		t.Fatalf("LookupModel(%q): %v", name, err)
	}
	return m
}

func mustBytes(t *testing.T, s string) int64 {
	t.Helper()
	b, err := ParseBytes(s)
	if err != nil {
		t.Fatalf("ParseBytes(%q): %v", s, err)
	}
	return b
}

func estimate(t *testing.T, p Plan) *Result {
	t.Helper()
	r, err := Estimate(context.Background(), p)
	if err != nil {
		t.Fatalf("Estimate(%s): %v", p.Model.Name, err)
	}
	return r
}

func i64(v int64) *int64 { return &v }

// round2 rounds to two decimals, as vLLM prints.
func round2(f float64) float64 { return math.Round(f*100) / 100 }

// gibRange is the admissible block range for a budget logged as g GiB (two
// decimals) and a block of denom bytes: docs/estimate-rules.md §1.3 "Rounding".
func gibRange(g float64, denom int64) (lo, hi int64) {
	return int64(math.Floor((g - 0.005) * float64(GiB) / float64(denom))),
		int64(math.Floor((g + 0.005) * float64(GiB) / float64(denom)))
}

func quantSpec(list string) ([]quant.Spec, error) { return quant.Formats().ParseList(list) }
