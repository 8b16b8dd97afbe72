package runtime

import (
	"errors"
	"fmt"
	"slices"

	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// Mixture-of-experts layers (Mixtral, Qwen3-MoE). A family whose layers
// route their FFN through experts lists the router and the experts'
// stacked matrices as LayerTensors with In: moeLayer, and its dense MLP
// with In: denseLayer; its block runs moeFFN or denseFFN per layer. The
// experts' matrices are views of the checkpoint's memory map (a GGUF
// file's 3-D tensor is cut into one view per expert, without a copy): an
// expert no token chooses is never read, and costs no resident memory.

// MoELayer reports whether layer li's FFN is routed through experts.
func (c *Config) MoELayer(li int) bool {
	return c.Experts > 0 && !slices.Contains(c.DenseLayers, li)
}

func moeLayer(c *Config, li int) bool   { return c.MoELayer(li) }
func denseLayer(c *Config, li int) bool { return !c.MoELayer(li) }

// maxExperts bounds the experts of a layer (the largest models have 512):
// a checkpoint claiming more is refused before its tensors are read.
const maxExperts = 1 << 12

// checkExpertCounts checks the expert counts the loaders read, before they
// read the experts' tensors.
func (c *Config) checkExpertCounts() error {
	switch {
	case c.Experts > maxExperts:
		return fmt.Errorf("%w: %d experts (kvq runs at most %d)", ErrUnsupported, c.Experts, maxExperts)
	case c.Experts > 0 && (c.ExpertsUsed < 1 || c.ExpertsUsed > c.Experts):
		return fmt.Errorf("%w: %d experts per token of %d experts", ErrModel, c.ExpertsUsed, c.Experts)
	}
	return nil
}

// validateMoE checks the expert counts.
func (c *Config) validateMoE() error {
	if err := c.checkExpertCounts(); err != nil {
		return err
	}
	switch {
	case c.Experts == 0 && c.ExpertsUsed == 0:
		return nil
	case c.Experts < 1 || c.ExpertsUsed < 1 || c.ExpertsUsed > c.Experts:
		return fmt.Errorf("%w: %d experts per token of %d experts", ErrModel, c.ExpertsUsed, c.Experts)
	case c.ExpertsUsed > 64:
		return fmt.Errorf("%w: %d experts per token (kvq routes at most 64)", ErrUnsupported, c.ExpertsUsed)
	case c.ExpertHidden < 1:
		return fmt.Errorf("%w: expert intermediate size %d", ErrModel, c.ExpertHidden)
	}
	for _, li := range c.DenseLayers {
		if li < 0 || li >= c.Layers {
			return fmt.Errorf("%w: dense (mlp_only) layer %d of %d layers", ErrModel, li, c.Layers)
		}
	}
	return nil
}

// sparseDense returns the dense layers of a Qwen3-MoE config: those in
// mlp_only_layers, and those with (li+1) not a multiple of
// decoder_sparse_step.
func sparseDense(layers, step int, mlpOnly []int) []int {
	var dense []int
	for li := 0; li < layers; li++ {
		if slices.Contains(mlpOnly, li) || step > 0 && (li+1)%step != 0 {
			dense = append(dense, li)
		}
	}
	return dense
}

// checkExperts checks that ws are n matrices of shape sh.
func checkExperts(ws []*tensor.Weight, n int, name string, sh []int, check func(w *tensor.Weight, name string, rows, cols int, optional bool) error) error {
	if len(ws) != n {
		return fmt.Errorf("%w: %s: %d experts, config says %d", ErrModel, name, len(ws), n)
	}
	var errs []error
	for e, w := range ws {
		errs = append(errs, check(w, fmt.Sprintf("%s (expert %d)", name, e), sh[0], sh[1], false))
	}
	return errors.Join(errs...)
}

// splitExperts cuts a stacked [n][rows][cols] tensor's bytes into n
// weights, each a view of its part of data.
func splitExperts(name string, dt tensor.DType, n, rows, cols int, data []byte) ([]*tensor.Weight, error) {
	per := rows * dt.RowBytes(cols)
	if len(data) != n*per {
		return nil, fmt.Errorf("%w: tensor %s holds %d bytes, %d experts of [%d %d] %v take %d", ErrModel, name, len(data), n, rows, cols, dt, n*per)
	}
	ws := make([]*tensor.Weight, n)
	for e := range ws {
		w, err := newWeight(fmt.Sprintf("%s[%d]", name, e), dt, rows, cols, data[e*per:(e+1)*per])
		if err != nil {
			return nil, err
		}
		ws[e] = w
	}
	return ws, nil
}

// moeTensors are a family's router and expert tensors, named in Hugging
// Face checkpoints hfRouter and, with %d for the expert, hfGate, hfUp and
// hfDown.
func moeTensors(hfRouter, hfGate, hfUp, hfDown string) []LayerTensor {
	return []LayerTensor{
		{HF: hfRouter, GGUF: "ffn_gate_inp.weight", Label: "router", Shape: matrixOf(sizeExperts, sizeDim), In: moeLayer,
			Matrix: func(l *Layer) **tensor.Weight { return &l.Router }},
		{HF: hfGate, GGUF: "ffn_gate_exps.weight", Label: "expert gate", Shape: matrixOf(sizeExpertHidden, sizeDim), In: moeLayer,
			Experts: func(l *Layer) *[]*tensor.Weight { return &l.ExpGate }},
		{HF: hfUp, GGUF: "ffn_up_exps.weight", Label: "expert up", Shape: matrixOf(sizeExpertHidden, sizeDim), In: moeLayer,
			Experts: func(l *Layer) *[]*tensor.Weight { return &l.ExpUp }},
		{HF: hfDown, GGUF: "ffn_down_exps.weight", Label: "expert down", Shape: matrixOf(sizeDim, sizeExpertHidden), In: moeLayer,
			Experts: func(l *Layer) *[]*tensor.Weight { return &l.ExpDown }},
	}
}

func sizeExperts(c *Config) []int      { return []int{c.Experts} }
func sizeExpertHidden(c *Config) []int { return []int{c.ExpertHidden} }

// withFFN returns the Llama family's tensors with the dense MLP's
// restricted to dense layers, and then moe.
func withFFN(base []LayerTensor, moe []LayerTensor) []LayerTensor {
	var out []LayerTensor
	for _, t := range base {
		switch t.GGUF {
		case "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight":
			t.In = denseLayer
		}
		out = append(out, t)
	}
	return append(out, moe...)
}

// moeFFN is an expert layer's FFN on s.XN (the normed residual), added
// into s.X: the router's logits, the family's routing, and the chosen
// experts' SwiGLU MLPs, weighted.
func moeFFN(s *Step, li int) error {
	be, c, l, nt := s.Ops, s.Config, s.Weights, s.NT
	moe := be.(backend.MoE) // NewRunner checked
	be.MatMul(s.Router, s.XN, nt, l.Router)
	if err := s.Check(li); err != nil {
		return err
	}
	moe.Route(s.Route, s.Router, nt, c.Experts, c.ExpertsUsed, c.Routing)
	moe.ExpertFFN(s.O, s.XN, nt, s.Route, c.ExpertsUsed, l.Experts)
	if err := s.Check(li); err != nil {
		return err
	}
	be.Add(s.X, s.O, nt*c.Dim)
	return nil
}

// moeBlock is the Llama block (Qwen3's q/k norms when the layer has them)
// with an expert FFN in expert layers.
func moeBlock(s *Step, li int) error {
	if err := llamaAttention(s, li); err != nil {
		return err
	}
	if s.Config.MoELayer(li) {
		return moeFFN(s, li)
	}
	return denseFFN(s, li)
}

// uploadExperts places layer l's router and experts on the backend.
func uploadExperts(be backend.Backend, l *Layer, lw *LayerWeights) error {
	if l.Router == nil {
		return nil
	}
	var errs []error
	mat := func(w *tensor.Weight) backend.Matrix {
		x, err := be.Upload(w)
		errs = append(errs, err)
		return x
	}
	lw.Router = mat(l.Router)
	lw.Experts = &backend.Experts{}
	for e := range l.ExpGate {
		lw.Experts.Gate = append(lw.Experts.Gate, mat(l.ExpGate[e]))
		lw.Experts.Up = append(lw.Experts.Up, mat(l.ExpUp[e]))
		lw.Experts.Down = append(lw.Experts.Down, mat(l.ExpDown[e]))
	}
	return errors.Join(errs...)
}

// moe reports whether the family has expert layers.
func (f *Family) moe() bool {
	for _, t := range f.Tensors {
		if t.Experts != nil {
			return true
		}
	}
	return false
}

// hfExperts reads a mixture-of-experts config.json's expert fields into
// c: the expert counts (num_local_experts or num_experts), the experts'
// size (moe_intermediate_size, else intermediate_size), the routing
// (norm_topk_prob, false when absent as in transformers' Qwen3MoeConfig)
// and the dense layers (mlp_only_layers, decoder_sparse_step).
func hfExperts(c *Config, hc hfConfig, a *Arch) {
	c.Experts = max(hc.NumLocalExperts, hc.NumExperts)
	if c.Experts == 0 {
		return // every layer dense
	}
	c.ExpertsUsed = hc.ExpertsPerTok
	c.ExpertHidden = c.Hidden
	if hc.MoEIntermediate > 0 {
		c.ExpertHidden = hc.MoEIntermediate
	}
	c.Routing = a.Routing
	if c.Routing == backend.SoftmaxTopKNorm && (hc.NormTopKProb == nil || !*hc.NormTopKProb) {
		c.Routing = backend.SoftmaxTopK
	}
	step := 1
	if hc.DecoderSparseStep != nil {
		step = *hc.DecoderSparseStep
	}
	c.DenseLayers = sparseDense(c.Layers, step, hc.MLPOnlyLayers)
}
