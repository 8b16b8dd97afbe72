package calibrate

import (
	"math"
	"slices"
)

// Stats are the recorded statistics, the JSON of kvq calibrate stats
// (schema kvq.calibrate.stats/v1).
type Stats struct {
	Schema  string `json:"schema"`
	Model   string `json:"model"`
	Layers  int    `json:"layers"`
	KVHeads int    `json:"kv_heads"`
	HeadDim int    `json:"head_dim"`
	// Data identifies the calibration data.
	Data        DataInfo     `json:"data"`
	Percentiles []float64    `json:"percentiles"`
	Layer       []LayerStats `json:"layer"`
}

// DataInfo identifies calibration data in every output.
type DataInfo struct {
	Source  string `json:"source"`
	Samples int    `json:"samples"`
	Tokens  int    `json:"tokens"`
	SHA256  string `json:"sha256"`
}

// Info returns d's identification.
func (d *Data) Info() DataInfo {
	return DataInfo{Source: d.Source, Samples: len(d.Samples), Tokens: d.Tokens(), SHA256: d.SHA256}
}

// LayerStats are one layer's tensors.
type LayerStats struct {
	Layer int `json:"layer"`
	// K is after RoPE, KPreRoPE before, V the values.
	K        TensorStats `json:"k"`
	KPreRoPE TensorStats `json:"k_pre_rope"`
	V        TensorStats `json:"v"`
}

// Side returns the statistics of side s.
func (l *LayerStats) Side(s Side) *TensorStats {
	switch s {
	case SideKPre:
		return &l.KPreRoPE
	case SideV:
		return &l.V
	}
	return &l.K
}

// Summary summarizes a set of values.
type Summary struct {
	Count  int64   `json:"count"`
	Absmax float64 `json:"absmax"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Mean   float64 `json:"mean"`
	Std    float64 `json:"std"`
	// AbsPercentiles are percentiles of |x| (Stats.Percentiles order),
	// from the histogram: within 3% of the exact value.
	AbsPercentiles []float64 `json:"abs_percentiles"`
	// Outliers counts values with |x| > 6·RMS (from the histogram).
	Outliers int64 `json:"outliers"`
	// NonFinite counts NaN and ±Inf values (left out of everything else).
	NonFinite int64 `json:"non_finite,omitempty"`
}

// TensorStats are one tensor's statistics: the whole tensor, per KV head
// and per channel (head·HeadDim + i).
type TensorStats struct {
	Summary
	Heads    []Summary      `json:"heads"`
	Channels ChannelStats   `json:"channels"`
	Hist     Histogram      `json:"hist"`
	Spread   ChannelSpread  `json:"channel_spread"`
	Batches  []BatchExtreme `json:"batches,omitempty"`
}

// ChannelStats hold per-channel columns.
type ChannelStats struct {
	Min  []float32 `json:"min"`
	Max  []float32 `json:"max"`
	Mean []float32 `json:"mean"`
	Std  []float32 `json:"std"`
}

// ChannelSpread says how unequal the channels are: the ratio of the
// largest channel absmax to the median one, and the channels whose absmax
// exceeds 4× the median (outlier channels: why keys want per-channel
// quantization).
type ChannelSpread struct {
	MedianAbsmax    float64 `json:"median_absmax"`
	MaxOverMedian   float64 `json:"max_over_median"`
	OutlierChannels []int   `json:"outlier_channels"`
}

// BatchExtreme is one batch's tensor-wide minimum and maximum.
type BatchExtreme struct {
	Tokens int     `json:"tokens"`
	Min    float32 `json:"min"`
	Max    float32 `json:"max"`
}

// Histogram counts |x| in bins of a quarter octave: Count[i] values in
// [Edges[i], Edges[i+1]); Zeros counts exact zeros.
type Histogram struct {
	Edges []float64 `json:"edges"`
	Count []int64   `json:"count"`
	Zeros int64     `json:"zeros"`
}

// DefaultPercentiles are the |x| percentiles Stats reports.
var DefaultPercentiles = []float64{50, 99, 99.9, 99.99}

// Stats returns the statistics recorded so far; percentiles nil means
// DefaultPercentiles.
func (r *Recorder) Stats(model string, data DataInfo, percentiles []float64) *Stats {
	if percentiles == nil {
		percentiles = DefaultPercentiles
	}
	st := &Stats{Schema: "kvq.calibrate.stats/v1", Model: model, Layers: r.layers, KVHeads: r.heads, HeadDim: r.dim,
		Data: data, Percentiles: percentiles}
	for l := range r.layers {
		ls := LayerStats{Layer: l}
		for s := range numSides {
			*ls.Side(Side(s)) = r.acc[l][s].stats(percentiles)
		}
		st.Layer = append(st.Layer, ls)
	}
	return st
}

func (a *sideAcc) stats(pct []float64) TensorStats {
	var ts TensorStats
	w := a.heads * a.dim
	all := make([]uint64, histBins)
	var tsum, tsq float64
	ts.Min, ts.Max = math.Inf(1), math.Inf(-1)
	for h := range a.heads {
		var sum, sq float64
		hs := Summary{Min: math.Inf(1), Max: math.Inf(-1)}
		for c := h * a.dim; c < (h+1)*a.dim; c++ {
			sum, sq = sum+a.sum[c], sq+a.sumSq[c]
			if a.min[c] <= a.max[c] {
				hs.Min, hs.Max = math.Min(hs.Min, float64(a.min[c])), math.Max(hs.Max, float64(a.max[c]))
			}
		}
		for b, n := range a.hist[h] {
			all[b] += n
			hs.Count += int64(n)
		}
		hs.NonFinite = a.nonFinite[h]
		hs.finish(sum, sq, a.hist[h], pct)
		ts.Min, ts.Max = math.Min(ts.Min, hs.Min), math.Max(ts.Max, hs.Max)
		ts.Count += hs.Count
		ts.NonFinite += hs.NonFinite
		tsum, tsq = tsum+sum, tsq+sq
		ts.Heads = append(ts.Heads, hs)
	}
	ts.finish(tsum, tsq, all, pct)
	ts.Channels = ChannelStats{Min: make([]float32, w), Max: make([]float32, w), Mean: make([]float32, w), Std: make([]float32, w)}
	absmaxes := make([]float64, w)
	for c := range w {
		n := float64(a.tokens)
		if a.min[c] > a.max[c] || n == 0 {
			continue
		}
		ts.Channels.Min[c], ts.Channels.Max[c] = a.min[c], a.max[c]
		mean := a.sum[c] / n
		ts.Channels.Mean[c] = float32(mean)
		ts.Channels.Std[c] = float32(math.Sqrt(math.Max(0, a.sumSq[c]/n-mean*mean)))
		absmaxes[c] = float64(absmax(a.min[c], a.max[c]))
	}
	sorted := slices.Clone(absmaxes)
	slices.Sort(sorted)
	if med := sorted[len(sorted)/2]; med > 0 {
		ts.Spread.MedianAbsmax = med
		ts.Spread.MaxOverMedian = sorted[len(sorted)-1] / med
		for c, v := range absmaxes {
			if v > 4*med {
				ts.Spread.OutlierChannels = append(ts.Spread.OutlierChannels, c)
			}
		}
	}
	ts.Hist = quarterOctaves(all)
	for _, b := range a.batches {
		ts.Batches = append(ts.Batches, BatchExtreme{Tokens: b.tokens, Min: b.tmin, Max: b.tmax})
	}
	return ts
}

// finish fills the moments, absmax, percentiles and outliers of a summary
// whose Count, Min and Max are set.
func (s *Summary) finish(sum, sq float64, hist []uint64, pct []float64) {
	if s.Count == 0 {
		s.Min, s.Max = 0, 0
		s.AbsPercentiles = make([]float64, len(pct))
		return
	}
	n := float64(s.Count)
	s.Mean = sum / n
	s.Std = math.Sqrt(math.Max(0, sq/n-s.Mean*s.Mean))
	s.Absmax = math.Max(-math.Min(s.Min, 0), math.Max(s.Max, 0))
	for _, p := range pct {
		s.AbsPercentiles = append(s.AbsPercentiles, math.Min(s.Absmax, histPercentile(hist, s.Count, p)))
	}
	rms := math.Sqrt(sq / n)
	s.Outliers = countAbove(hist, 6*rms, s.Absmax)
}

// histPercentile is the p-th percentile (0..100) of |x| from a histogram
// of count values, interpolated linearly within its bin.
func histPercentile(hist []uint64, count int64, p float64) float64 {
	target := p / 100 * float64(count)
	var cum float64
	for b, n := range hist {
		if n == 0 {
			continue
		}
		if cum+float64(n) >= target {
			lo, hi := histLow(b), histLow(b+1)
			return lo + (hi-lo)*math.Max(0, target-cum)/float64(n)
		}
		cum += float64(n)
	}
	return 0
}

// countAbove counts the values above t (bins straddling t count in
// proportion); amax, the largest |x| recorded, bounds the last bin, so that
// a t at or above it counts nothing.
func countAbove(hist []uint64, t, amax float64) int64 {
	if t >= amax {
		return 0
	}
	var n float64
	for b, c := range hist {
		if c == 0 {
			continue
		}
		lo, hi := histLow(b), math.Min(histLow(b+1), amax)
		switch {
		case lo >= t:
			n += float64(c)
		case hi > t:
			n += float64(c) * (hi - t) / (hi - lo)
		}
	}
	return int64(math.Round(n))
}

// quarterOctaves folds the fine histogram into quarter-octave bins between
// the smallest and largest non-zero |x|.
func quarterOctaves(hist []uint64) Histogram {
	var h Histogram
	h.Zeros = int64(hist[0]) // bin 0 holds 0 and the tiniest subnormals
	const per = 8            // 32 fine bins per octave, 8 per quarter
	first, last := -1, -1
	for b := 1; b < len(hist); b++ {
		if hist[b] > 0 {
			if first < 0 {
				first = b
			}
			last = b
		}
	}
	if first < 0 {
		return h
	}
	first, last = first/per*per, (last/per+1)*per
	for b := first; b < last; b += per {
		var n uint64
		for _, c := range hist[b : b+per] {
			n += c
		}
		h.Edges = append(h.Edges, histLow(b))
		h.Count = append(h.Count, int64(n))
	}
	h.Edges = append(h.Edges, histLow(last))
	return h
}
