package runtime

import (
	"math"
	"testing"
)

// TestYarnInvFreq checks YaRN's inverse frequencies for GPT-OSS's
// rope_scaling (θ 150000, head_dim 64, factor 32, original context 4096,
// betas 32 and 1) with and without truncation, against values worked out
// in float64 from transformers' _compute_yarn_parameters formulas: the
// correction range is [8.09, 17.40] untruncated, [8, 18] truncated; pairs
// below it keep θ_i, pairs above it get θ_i/32.
func TestYarnInvFreq(t *testing.T) {
	pairs := []int{0, 8, 9, 12, 16, 20, 23, 31}
	for _, tc := range []struct {
		truncate bool
		want     []float64
	}{
		{false, []float64{1.0, 0.050813274815461475, 0.03170569618466377, 0.006794959489732219, 0.00045648391922324086, 1.818833668168956e-05, 5.950239261491605e-06, 3.0235114281192144e-07}},
		{true, []float64{1.0, 0.050813274815461475, 0.031620752275346484, 0.007015713910504388, 0.0005809475019311124, 1.818833668168956e-05, 5.950239261491605e-06, 3.0235114281192144e-07}},
	} {
		c := &Config{RopeTheta: 150000, RopeDim: 64, HeadDim: 64,
			Scaling: RopeScaling{Type: "yarn", Factor: 32, OriginalContext: 4096, BetaFast: 32, BetaSlow: 1, Truncate: tc.truncate}}
		f := InvFreq(c, nil)
		for j, i := range pairs {
			if d := math.Abs(f[i]-tc.want[j]) / tc.want[j]; d > 1e-12 {
				t.Errorf("truncate %v: inv_freq[%d] = %v, want %v", tc.truncate, i, f[i], tc.want[j])
			}
		}
		plain := 1 / math.Pow(150000, 2*20.0/64)
		if math.Abs(f[20]-plain/32) > 1e-18 {
			t.Errorf("pair 20 (above the range) = %v, want θ/32 = %v", f[20], plain/32)
		}
	}
	c := &Config{HeadDim: 64, Scaling: RopeScaling{Type: "yarn", Factor: 32}}
	a := 0.1*math.Log(32) + 1
	if got := c.Scaling.AttentionFactor(); got != a {
		t.Errorf("attention factor %v, want %v", got, a)
	}
	if got, want := ropeScale(c), float32(a*a/8); got != want {
		t.Errorf("scale %v, want %v", got, want)
	}
	if got := ropeScale(&Config{HeadDim: 64}); got != defaultScale(64) {
		t.Errorf("scale without yarn %v, want %v", got, defaultScale(64))
	}
}
