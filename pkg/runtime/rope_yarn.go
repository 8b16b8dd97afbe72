package runtime

import "math"

// YaRN RoPE scaling, as transformers' _compute_yarn_parameters defines it
// (modeling_rope_utils.py) and llama.cpp's ggml_rope_yarn_corr_dims and
// rope_yarn apply it:
//
//   - the correction range [low, high] of dimension pairs is where the
//     rotations of the original context fall between beta_fast and
//     beta_slow: corr(r) = d·ln(ctx/(2π·r)) / (2·ln θ), low = corr(beta_fast),
//     high = corr(beta_slow), rounded outward (floor, ceil) when truncating,
//     then clamped to [0, d−1];
//   - pair i's extrapolation weight is 1 − clamp((i−low)/(high−low), 0, 1)
//     (high−low at least 0.001), and its inverse frequency
//     θ_i/factor·(1−w) + θ_i·w;
//   - q and k are multiplied by the attention factor after the rotation
//     (transformers multiplies cos and sin by it; so does llama.cpp's
//     rope_yarn, mscale = 1+0.1·ln(factor)). kvq folds the square of it into
//     the attention scale (YarnScale) instead: the cache holds the rotated
//     keys without the factor, the scores are the same.
//
// Differences: llama.cpp always truncates (GGUF has no truncate key), so a
// GPT-OSS GGUF's correction range is rounded where its config.json says
// truncate false; transformers computes the table in float32, kvq and
// llama.cpp's bounds in float64 and float32. Loaders fill Truncate as
// their format defines it.

// yarnInvFreq replaces the unscaled inverse frequencies f (of rotated
// dimension d, base theta) with YaRN's.
func yarnInvFreq(f []float64, theta float64, d int, s RopeScaling) {
	corr := func(rot float64) float64 {
		return float64(d) * math.Log(float64(s.OriginalContext)/(rot*2*math.Pi)) / (2 * math.Log(theta))
	}
	low, high := corr(yarnBeta(s.BetaFast, 32)), corr(yarnBeta(s.BetaSlow, 1))
	if s.Truncate {
		low, high = math.Floor(low), math.Ceil(high)
	}
	low, high = max(low, 0), min(high, float64(d-1))
	if low == high {
		high += 0.001
	}
	for i, inv := range f {
		ramp := min(1, max(0, (float64(i)-low)/(high-low)))
		w := 1 - ramp // extrapolation weight
		f[i] = inv/s.Factor*(1-w) + inv*w
	}
}

// yarnBeta is beta, or def when it is 0 (transformers' `or 32`, `or 1`).
func yarnBeta(beta, def float64) float64 {
	if beta == 0 {
		return def
	}
	return beta
}

// AttentionFactor is the factor YaRN applies to q and k after RoPE
// (attention_factor, else 0.1·ln(factor)+1 for factor > 1); 1 for other
// scalings.
func (s RopeScaling) AttentionFactor() float64 {
	if s.Type != "yarn" {
		return 1
	}
	if s.AttnFactor > 0 {
		return s.AttnFactor
	}
	if s.Factor <= 1 {
		return 1
	}
	return 0.1*math.Log(s.Factor) + 1
}

// ropeScale is the attention scale 1/√HeadDim with YaRN's attention
// factor on q and k folded in (the factor squared); exactly defaultScale
// for other scalings.
func ropeScale(c *Config) float32 {
	if c.Scaling.Type != "yarn" {
		return defaultScale(c.HeadDim)
	}
	a := c.Scaling.AttentionFactor()
	return float32(a * a / math.Sqrt(float64(c.HeadDim)))
}

// hfYarn is a config.json's yarn rope_scaling: original_max_position_
// embeddings defaults to max_position_embeddings, truncate to true.
func hfYarn(rs *hfRopeScaling, maxPos int) RopeScaling {
	s := RopeScaling{Type: "yarn", Factor: rs.Factor, OriginalContext: rs.OriginalMaxPos,
		BetaFast: rs.BetaFast, BetaSlow: rs.BetaSlow, Truncate: rs.Truncate == nil || *rs.Truncate}
	if rs.AttentionFactor != nil {
		s.AttnFactor = *rs.AttentionFactor
	}
	if s.OriginalContext == 0 {
		s.OriginalContext = maxPos
	}
	return s
}

// ggufYarn is a GGUF file's yarn scaling as llama.cpp reads it:
// rope.scaling.factor, rope.scaling.original_context_length (default the
// context length), the betas 32 and 1 (llama.cpp reads yarn_beta_fast and
// yarn_beta_slow for Grok only), bounds always truncated, and the
// attention factor rope.scaling.attn_factor (default 1) times
// 1+0.1·ln(factor).
func ggufYarn(f func(key string, def float64) float64, ctx int) RopeScaling {
	s := RopeScaling{Type: "yarn", Factor: f("rope.scaling.factor", 0), OriginalContext: int(f("rope.scaling.original_context_length", float64(ctx))),
		BetaFast: 32, BetaSlow: 1, Truncate: true}
	if s.Factor > 1 {
		s.AttnFactor = f("rope.scaling.attn_factor", 1) * (1 + 0.1*math.Log(s.Factor))
	} else {
		s.AttnFactor = f("rope.scaling.attn_factor", 1)
	}
	return s
}
