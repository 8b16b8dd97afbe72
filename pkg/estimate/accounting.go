package estimate

import (
	"fmt"
	"sort"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// layerCost is one layer's bytes, read from a kvcache.Layout.
type layerCost struct {
	page  int64 // K and V page bytes of one block
	seq   int64 // fp16 sink, residual and staging windows of one request
	state int64 // codec state
}

// layerCosts builds the layout of every layer with kvHeads heads per rank and
// returns the per-layer costs and the layout's block size. The per-layer
// figures are read from the layout's sides and codecs and checked against the
// layout's own totals, so they are exactly what the runtime allocates.
func layerCosts(m *Model, spec quant.Spec, kvHeads, blockTokens int) ([]layerCost, *kvcache.Layout, error) {
	g := kvcache.Geometry{Layers: m.Layers, KVHeads: kvHeads, HeadDim: m.KVDim(), Latent: m.MLA()}
	for i := range min(m.Layers, kvcache.MaxSetLayers) {
		if w := m.Window(i); w > 0 { // as the runtime's Model.Geometry marks them
			g.Sliding.Add(i)
			g.Window = max(g.Window, w)
		}
	}
	l, err := kvcache.NewLayout(g, spec, blockTokens)
	if err != nil {
		return nil, nil, fmt.Errorf("cache %q: %w", spec.String(), err)
	}
	fp16, err := quant.FP16.NewCodec(quant.CodecParams{Dim: g.HeadDim})
	if err != nil {
		return nil, nil, fmt.Errorf("cache %q: fp16 windows: %w", spec.String(), err)
	}
	costs := make([]layerCost, len(l.Layers))
	var block, seq, state int64
	for i := range l.Layers {
		c := &costs[i]
		for _, s := range []*kvcache.Side{&l.Layers[i].K, &l.Layers[i].V} {
			c.page += int64(s.PageBytes)
			c.seq += int64(fp16.TileBytes(s.WindowRows())) * int64(kvHeads)
			for _, cd := range s.Codecs {
				c.state += int64(cd.StateBytes())
			}
		}
		block, seq, state = block+c.page, seq+c.seq, state+c.state
	}
	if block != l.BlockBytes || seq != l.SeqBytes || state != l.StateBytes {
		// The layout changed how it counts; per-layer sums must follow it.
		return nil, nil, fmt.Errorf("estimate: internal error: per-layer sums (block %d, windows %d, state %d) differ from kvcache.Layout (%d, %d, %d)",
			block, seq, state, l.BlockBytes, l.SeqBytes, l.StateBytes)
	}
	return costs, l, nil
}

// kvGroup is one of vLLM's KV-cache groups: layers sharing one block table.
type kvGroup struct {
	window  int   // 0: full attention
	layers  []int // global layer indices; fewer than the group size when padded
	padding int
}

// rankCost is the accounting of one pipeline rank.
type rankCost struct {
	layers    []int     // global indices of the rank's layers
	groups    []kvGroup // KV-cache groups
	groupSize int
	// blockCost is the bytes of one block id: the group-size shared tensors'
	// pages (the sum of the rank's pages for a single group).
	blockCost int64
	pagesSum  int64 // one block of every real layer: the pool's bytes per block of tokens
	seq       int64 // per-request windows
	state     int64
	blockToks int64
}

// ppPartition is vLLM's get_pp_indices: L/pp layers per rank, the remainder
// given one each to the ranks before the last, starting from the
// second-to-last.
func ppPartition(layers, pp int) [][2]int {
	parts := make([]int, pp)
	for i := range parts {
		parts[i] = layers / pp
	}
	for i := 2; i < layers%pp+2; i++ {
		parts[pp-i]++
	}
	out := make([][2]int, pp)
	start := 0
	for r, n := range parts {
		out[r] = [2]int{start, start + n}
		start += n
	}
	return out
}

// groupLayers buckets layers by attention window and splits the buckets into
// groups as vLLM's hybrid manager does: the group size is the smallest
// bucket's layer count, or the largest bucket's when that is below 1.5× the
// smallest; short groups are padded.
func groupLayers(m *Model, layers []int, hybrid bool) ([]kvGroup, int) {
	buckets := map[int][]int{}
	for _, i := range layers {
		w := 0
		if hybrid {
			w = m.Window(i)
		}
		buckets[w] = append(buckets[w], i)
	}
	windows := make([]int, 0, len(buckets))
	for w := range buckets {
		windows = append(windows, w)
	}
	sort.Ints(windows) // full attention (0) first
	if len(windows) == 1 {
		w := windows[0]
		return []kvGroup{{window: w, layers: buckets[w]}}, len(buckets[w])
	}
	lo, hi := len(layers), 0
	for _, w := range windows {
		lo, hi = min(lo, len(buckets[w])), max(hi, len(buckets[w]))
	}
	size := lo
	if 2*hi < 3*lo {
		size = hi
	}
	var groups []kvGroup
	for _, w := range windows {
		b := buckets[w]
		for start := 0; start < len(b); start += size {
			end := min(start+size, len(b))
			groups = append(groups, kvGroup{window: w, layers: b[start:end], padding: size - (end - start)})
		}
	}
	return groups, size
}

// newRankCost sums the costs of a rank's layers into its block cost.
func newRankCost(m *Model, costs []layerCost, layers []int, hybrid bool, blockTokens int) (rankCost, error) {
	r := rankCost{layers: layers, blockToks: int64(blockTokens)}
	r.groups, r.groupSize = groupLayers(m, layers, hybrid)
	var c checked
	for _, i := range layers {
		r.pagesSum = c.add(r.pagesSum, costs[i].page)
		r.seq = c.add(r.seq, costs[i].seq)
		r.state = c.add(r.state, costs[i].state)
	}
	// Tensor j of the pool serves the j-th layer of every group, so its page
	// is the largest of theirs.
	for j := 0; j < r.groupSize; j++ {
		var page int64
		for _, g := range r.groups {
			if j < len(g.layers) {
				page = max(page, costs[g.layers[j]].page)
			}
		}
		r.blockCost = c.add(r.blockCost, page)
	}
	return r, c.err
}

// need is the number of block ids one request of ctx tokens takes: per
// group ⌈ctx/bs⌉ for full attention and ⌈min(w−1+batched, ctx)/bs⌉+1 for a
// sliding window w (vLLM's per-request worst case).
func (r *rankCost) need(ctx, batched int64) (int64, error) {
	var c checked
	var n int64
	for _, g := range r.groups {
		if g.window == 0 {
			n = c.add(n, ceilDiv(ctx, r.blockToks))
			continue
		}
		span := c.add(int64(g.window-1), batched)
		n = c.add(n, c.add(ceilDiv(min(span, ctx), r.blockToks), 1))
	}
	return n, c.err
}

// requestBytes is the memory of one request of ctx tokens: its blocks and
// its windows.
func (r *rankCost) requestBytes(ctx, batched int64) (blocks, bytes int64, err error) {
	blocks, err = r.need(ctx, batched)
	if err != nil {
		return 0, 0, err
	}
	var c checked
	bytes = c.add(c.mul(blocks, r.blockCost), r.seq)
	return blocks, bytes, c.err
}
