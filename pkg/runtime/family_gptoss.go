package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// gptossFamily is OpenAI's GPT-OSS (GptOssForCausalLM; llama.cpp's GGUF
// architecture "gpt-oss"), as transformers' modeling_gpt_oss and
// llama.cpp's llm_build_openai_moe_iswa compute it:
//
//   - attention with biases on q, k, v and o, a learned sink logit per
//     head in every softmax (backend.AttnParams.Sinks), a 128-token
//     sliding window on the layers layer_types marks sliding_attention
//     (the even ones; llama.cpp's swa pattern 2) and full attention on the
//     others, YaRN RoPE (NeoX pairs) with its attention factor;
//   - an expert FFN in every layer: router logits with a bias, the top k
//     and a softmax over those k (backend.TopKSoftmax), and experts with
//     biases on gate, up and down and the clamped SwiGLU
//     (gate' = min(gate, 7), up' = clamp(up, −7, 7),
//     gate'·sigmoid(1.702·gate')·(up'+1));
//   - the RMSNorms before attention and FFN.
//
// Hugging Face checkpoints store each layer's experts stacked, gate and up
// interleaved in rows (gate_up_proj[..., ::2] is gate): as MXFP4
// (…_blocks, uint8 [E][rows][cols/32][16], two e2m1 values per byte, low
// nibble first; …_scales, uint8 E8M0 exponents [E][rows][cols/32]) or as
// plain [E][in][out] matrices. gptossHFLayer repacks the MXFP4 blocks into
// GGML's MXFP4 block layout at load (a copy the size of the experts, not
// a dequantization) and transposes plain ones. GGUF files hold the
// experts' gate, up and down as GGML MXFP4 3-D tensors, cut into views of
// the memory map.
var gptossFamily = Family{
	Archs: []Arch{
		{Name: "gpt-oss", HF: "GptOssForCausalLM", GGUFNeoX: true, HFWindow: true, Routing: backend.TopKSoftmax},
	},
	Tensors: []LayerTensor{
		{HF: "input_layernorm.weight", GGUF: "attn_norm.weight", Label: "attention norm", Shape: sizeDim, Vector: func(l *Layer) *[]float32 { return &l.AttnNorm }},
		{HF: "self_attn.q_proj.weight", GGUF: "attn_q.weight", Label: "q", Shape: matrixOf(sizeQ, sizeDim), Matrix: func(l *Layer) **tensor.Weight { return &l.Wq }},
		{HF: "self_attn.k_proj.weight", GGUF: "attn_k.weight", Label: "k", Shape: matrixOf(sizeKV, sizeDim), Matrix: func(l *Layer) **tensor.Weight { return &l.Wk }},
		{HF: "self_attn.v_proj.weight", GGUF: "attn_v.weight", Label: "v", Shape: matrixOf(sizeKV, sizeDim), Matrix: func(l *Layer) **tensor.Weight { return &l.Wv }},
		{HF: "self_attn.o_proj.weight", GGUF: "attn_output.weight", Label: "o", Shape: matrixOf(sizeDim, sizeQ), Matrix: func(l *Layer) **tensor.Weight { return &l.Wo }},
		{HF: "self_attn.q_proj.bias", GGUF: "attn_q.bias", Label: "q bias", Shape: sizeQ, Vector: func(l *Layer) *[]float32 { return &l.Bq }},
		{HF: "self_attn.k_proj.bias", GGUF: "attn_k.bias", Label: "k bias", Shape: sizeKV, Vector: func(l *Layer) *[]float32 { return &l.Bk }},
		{HF: "self_attn.v_proj.bias", GGUF: "attn_v.bias", Label: "v bias", Shape: sizeKV, Vector: func(l *Layer) *[]float32 { return &l.Bv }},
		{HF: "self_attn.o_proj.bias", GGUF: "attn_output.bias", Label: "o bias", Shape: sizeDim, Vector: func(l *Layer) *[]float32 { return &l.Bo }},
		{HF: "self_attn.sinks", GGUF: "attn_sinks.weight", Label: "attention sinks", Shape: sizeHeads, Vector: func(l *Layer) *[]float32 { return &l.Sinks }},
		{HF: "post_attention_layernorm.weight", GGUF: "post_attention_norm.weight", Label: "ffn norm", Shape: sizeDim, Vector: func(l *Layer) *[]float32 { return &l.FFNNorm }},
		{HF: "mlp.router.weight", GGUF: "ffn_gate_inp.weight", Label: "router", Shape: matrixOf(sizeExperts, sizeDim), Matrix: func(l *Layer) **tensor.Weight { return &l.Router }},
		{HF: "mlp.router.bias", GGUF: "ffn_gate_inp.bias", Label: "router bias", Shape: sizeExperts, Vector: func(l *Layer) *[]float32 { return &l.RouterBias }},
		// The experts: gptossHFLayer reads them from Hugging Face
		// checkpoints (HF "").
		{GGUF: "ffn_gate_exps.weight", Label: "expert gate", Shape: matrixOf(sizeExpertHidden, sizeDim), Experts: func(l *Layer) *[]*tensor.Weight { return &l.ExpGate }},
		{GGUF: "ffn_up_exps.weight", Label: "expert up", Shape: matrixOf(sizeExpertHidden, sizeDim), Experts: func(l *Layer) *[]*tensor.Weight { return &l.ExpUp }},
		{GGUF: "ffn_down_exps.weight", Label: "expert down", Shape: matrixOf(sizeDim, sizeExpertHidden), Experts: func(l *Layer) *[]*tensor.Weight { return &l.ExpDown }},
		{GGUF: "ffn_gate_exps.bias", Label: "expert gate bias", Shape: matrixOf(sizeExperts, sizeExpertHidden), Matrix: func(l *Layer) **tensor.Weight { return &l.ExpGateB }},
		{GGUF: "ffn_up_exps.bias", Label: "expert up bias", Shape: matrixOf(sizeExperts, sizeExpertHidden), Matrix: func(l *Layer) **tensor.Weight { return &l.ExpUpB }},
		{HF: "mlp.experts.down_proj_bias", GGUF: "ffn_down_exps.bias", Label: "expert down bias", Shape: matrixOf(sizeExperts, sizeDim), Matrix: func(l *Layer) **tensor.Weight { return &l.ExpDownB }},
	},
	Layer:   gptossLayer,
	Block:   gptossBlock,
	HFLayer: gptossHFLayer,
}

// GPT-OSS's clamped SwiGLU (transformers' GptOssExperts: alpha 1.702,
// limit config.swiglu_limit, 7.0 in the released configs; llama.cpp
// hard-codes both).
const (
	gptossAlpha = 1.702
	gptossLimit = 7.0
)

func sizeHeads(c *Config) []int { return []int{c.Heads} }

// gptossLayer is layer li's geometry: the window on sliding layers, YaRN's
// attention factor in the scale.
func gptossLayer(c *Config, invFreq []float64, li int) LayerGeometry {
	g := LayerGeometry{Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim, RopeDim: c.RopeDim, RopeNeoX: c.RopeNeoX,
		InvFreq: invFreq, Scale: ropeScale(c)}
	if c.SlidingWindow > 0 && (c.SlidingLayers == nil || li < len(c.SlidingLayers) && c.SlidingLayers[li]) {
		g.Window = c.SlidingWindow
	}
	return g
}

// gptossBlock is one GPT-OSS layer.
func gptossBlock(s *Step, li int) error {
	be, c, l, nt := s.Ops, s.Config, s.Weights, s.NT
	be.RMSNorm(s.XN, s.X, nt, l.AttnNorm, c.RMSEps)
	be.MatMul(s.Q, s.XN, nt, l.Wq)
	be.MatMul(s.K, s.XN, nt, l.Wk)
	be.MatMul(s.V, s.XN, nt, l.Wv)
	be.AddBias(s.Q, nt, l.Bq)
	be.AddBias(s.K, nt, l.Bk)
	be.AddBias(s.V, nt, l.Bv)
	if err := s.Attention(li, s.Att, s.Q, s.K, s.V); err != nil {
		return err
	}
	be.MatMul(s.O, s.Att, nt, l.Wo)
	be.AddBias(s.O, nt, l.Bo)
	be.Add(s.X, s.O, nt*c.Dim)
	be.RMSNorm(s.XN, s.X, nt, l.FFNNorm, c.RMSEps)
	moe := be.(backend.MoE) // NewRunner checked
	be.MatMul(s.Router, s.XN, nt, l.Router)
	be.AddBias(s.Router, nt, l.RouterBias)
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

// gptossHFConfig reads GPT-OSS's config.json fields: layer_types (default:
// the even layers slide, as transformers' GptOssConfig sets them) and
// swiglu_limit.
func gptossHFConfig(c *Config, hc hfConfig, path string) error {
	c.SwiGLUAlpha, c.SwiGLULimit = gptossAlpha, gptossLimit
	if hc.SwiGLULimit != nil {
		c.SwiGLULimit = float32(*hc.SwiGLULimit)
	}
	if !(c.SwiGLULimit > 0) {
		return fmt.Errorf("%w: %s: swiglu_limit %v", ErrModel, path, c.SwiGLULimit)
	}
	c.SlidingLayers = make([]bool, max(0, c.Layers))
	if hc.LayerTypes == nil {
		for li := range c.SlidingLayers {
			c.SlidingLayers[li] = li%2 == 0
		}
		return nil
	}
	if len(hc.LayerTypes) != c.Layers {
		return fmt.Errorf("%w: %s: layer_types has %d entries for %d layers", ErrModel, path, len(hc.LayerTypes), c.Layers)
	}
	for li, t := range hc.LayerTypes {
		switch t {
		case "sliding_attention":
			c.SlidingLayers[li] = true
		case "full_attention":
		default:
			return fmt.Errorf("%w: %s: layer_types[%d] is %q (sliding_attention or full_attention)", ErrModel, path, li, t)
		}
	}
	return nil
}

// gptossGGUFConfig sets what llama.cpp fixes for "gpt-oss" files: the
// even layers slide (set_swa_pattern(2)) and the clamped SwiGLU's
// constants.
func gptossGGUFConfig(c *Config) {
	c.SwiGLUAlpha, c.SwiGLULimit = gptossAlpha, gptossLimit
	c.SlidingLayers = make([]bool, max(0, c.Layers))
	for li := range c.SlidingLayers {
		c.SlidingLayers[li] = li%2 == 0
	}
}

// hfTensor is a safetensors tensor as a family's HFLayer reads it.
type hfTensor struct {
	Name, Path, DType string
	Shape             []int64
	Data              []byte
}

// gptossHFLayer reads layer li's experts from a Hugging Face checkpoint
// (names after prefix): MXFP4 blocks and scales, else plain matrices; and
// the gate and up biases, de-interleaved.
func gptossHFLayer(l *Layer, c *Config, prefix string, get func(name string) (hfTensor, bool)) error {
	E, H, D := c.Experts, c.ExpertHidden, c.Dim
	p := prefix + "mlp.experts."
	var errs []error
	var fills []func(e int)
	defer func() {
		if fills != nil {
			l.ExpPrepare = lazyExperts(E, fills)
		}
	}()
	if bt, ok := get(p + "gate_up_proj_blocks"); ok {
		st, ok := get(p + "gate_up_proj_scales")
		if !ok {
			return fmt.Errorf("%w: missing tensor %sgate_up_proj_scales", ErrModel, p)
		}
		gu, fill, err := mxfp4Experts(bt, st, E, 2*H, D)
		if err != nil {
			return err
		}
		fills = append(fills, fill)
		l.ExpGate, l.ExpUp = make([]*tensor.Weight, E), make([]*tensor.Weight, E)
		for e := range gu {
			l.ExpGate[e], l.ExpUp[e] = gu[e][0], gu[e][1]
		}
	} else if t, ok := get(p + "gate_up_proj"); ok {
		gu, err := plainExperts(t, E, D, 2*H)
		if err != nil {
			return err
		}
		l.ExpGate, l.ExpUp = make([]*tensor.Weight, E), make([]*tensor.Weight, E)
		for e := range gu {
			l.ExpGate[e], l.ExpUp[e] = gu[e][0], gu[e][1]
		}
	} else {
		errs = append(errs, fmt.Errorf("%w: missing tensor %sgate_up_proj_blocks (or gate_up_proj)", ErrModel, p))
	}
	if bt, ok := get(p + "down_proj_blocks"); ok {
		st, ok := get(p + "down_proj_scales")
		if !ok {
			return fmt.Errorf("%w: missing tensor %sdown_proj_scales", ErrModel, p)
		}
		d, fill, err := mxfp4Experts(bt, st, E, D, H)
		if err != nil {
			return err
		}
		fills = append(fills, fill)
		for e := range d {
			l.ExpDown = append(l.ExpDown, d[e][0])
		}
	} else if t, ok := get(p + "down_proj"); ok {
		d, err := plainExperts(t, E, H, D)
		if err != nil {
			return err
		}
		for e := range d {
			l.ExpDown = append(l.ExpDown, d[e][0])
		}
	} else {
		errs = append(errs, fmt.Errorf("%w: missing tensor %sdown_proj_blocks (or down_proj)", ErrModel, p))
	}
	if t, ok := get(p + "gate_up_proj_bias"); ok {
		v, err := hfValues(t, []int64{int64(E), int64(2 * H)})
		if err != nil {
			return err
		}
		g, u := make([]float32, E*H), make([]float32, E*H)
		for i := 0; i < E*H; i++ {
			g[i], u[i] = v[2*i], v[2*i+1]
		}
		l.ExpGateB = &tensor.Weight{Name: t.Name + " (gate)", DType: tensor.F32, Rows: E, Cols: H, F32: g}
		l.ExpUpB = &tensor.Weight{Name: t.Name + " (up)", DType: tensor.F32, Rows: E, Cols: H, F32: u}
	} else {
		errs = append(errs, fmt.Errorf("%w: missing tensor %sgate_up_proj_bias", ErrModel, p))
	}
	return errors.Join(errs...)
}

// mxfp4Experts makes GGML MXFP4 weights of Hugging Face MXFP4 experts
// (blocks [E][rows][cols/32][16], scales [E][rows][cols/32]). With rows
// twice the weights' (gate_up), even rows go to out[e][0] (gate), odd rows
// to out[e][1] (up); otherwise out[e][0] holds every row. The weights'
// bytes are allocated but not written (fresh pages: no resident memory);
// fill(e) repacks expert e's blocks into them, on its first use
// (Layer.ExpPrepare).
func mxfp4Experts(bt, st hfTensor, E, rows, cols int) (out [][2]*tensor.Weight, fill func(e int), err error) {
	if cols%32 != 0 {
		return nil, nil, fmt.Errorf("%w: %s: %d columns is not a multiple of the MXFP4 block (32)", ErrModel, bt.Name, cols)
	}
	nb := cols / 32
	if bt.DType != "U8" || !slices.Equal(bt.Shape, []int64{int64(E), int64(rows), int64(nb), 16}) {
		return nil, nil, fmt.Errorf("%w: %s: %s tensor %v, want U8 [%d %d %d 16]", ErrModel, bt.Name, bt.DType, bt.Shape, E, rows, nb)
	}
	if st.DType != "U8" || !slices.Equal(st.Shape, []int64{int64(E), int64(rows), int64(nb)}) {
		return nil, nil, fmt.Errorf("%w: %s: %s tensor %v, want U8 [%d %d %d]", ErrModel, st.Name, st.DType, st.Shape, E, rows, nb)
	}
	split := 1
	if strings.HasSuffix(bt.Name, "gate_up_proj_blocks") {
		split = 2
	}
	wr := rows / split
	rowBytes := nb * 17
	out = make([][2]*tensor.Weight, E)
	for e := 0; e < E; e++ {
		for k := 0; k < split; k++ {
			name := fmt.Sprintf("%s[%d]", bt.Name, e)
			if split == 2 {
				name = fmt.Sprintf("%s[%d] (%s)", bt.Name, e, [2]string{"gate", "up"}[k])
			}
			w, err := newWeight(name, tensor.MXFP4, wr, cols, make([]byte, wr*rowBytes))
			if err != nil {
				return nil, nil, err
			}
			out[e][k] = w
		}
	}
	fill = func(e int) {
		for r := 0; r < rows; r++ {
			dst := out[e][r%split].Raw[(r/split)*rowBytes:]
			src := bt.Data[(e*rows+r)*nb*16:]
			sc := st.Data[(e*rows+r)*nb:]
			for b := 0; b < nb; b++ {
				repackMXFP4(dst[b*17:(b+1)*17], sc[b], src[b*16:(b+1)*16])
			}
		}
	}
	return out, fill, nil
}

// repackMXFP4 writes one GGML MXFP4 block (the E8M0 exponent, then 16
// bytes whose low nibbles are values 0-15 and high nibbles 16-31) from a
// Hugging Face block (16 bytes, values 2j and 2j+1 in byte j's low and
// high nibbles) and its exponent. The exponent byte is the same: GGML's
// values are the e2m1 values doubled and its scale 2^(e−128), HF's the
// e2m1 values at 2^(e−127).
func repackMXFP4(dst []byte, e byte, src []byte) {
	nib := func(i int) byte { return (src[i/2] >> (4 * (i % 2))) & 15 }
	dst[0] = e
	for j := 0; j < 16; j++ {
		dst[1+j] = nib(j) | nib(j+16)<<4
	}
}

// plainExperts reads unquantized Hugging Face experts, [E][in][out] (the
// transpose of kvq's [out][in]), as float32 weights; with out twice the
// weights' rows (gate_up: rows interleaved), as gate and up.
func plainExperts(t hfTensor, E, in, out int) ([][2]*tensor.Weight, error) {
	v, err := hfValues(t, []int64{int64(E), int64(in), int64(out)})
	if err != nil {
		return nil, err
	}
	split := 1
	if strings.HasSuffix(t.Name, "gate_up_proj") {
		split = 2
	}
	wr := out / split
	res := make([][2]*tensor.Weight, E)
	for e := 0; e < E; e++ {
		for k := 0; k < split; k++ {
			m := make([]float32, wr*in)
			for r := 0; r < wr; r++ {
				o := r*split + k
				for c := 0; c < in; c++ {
					m[r*in+c] = v[(e*in+c)*out+o]
				}
			}
			res[e][k] = &tensor.Weight{Name: fmt.Sprintf("%s[%d]", t.Name, e), DType: tensor.F32, Rows: wr, Cols: in, F32: m}
		}
	}
	return res, nil
}

// hfValues reads an F32, F16 or BF16 tensor of the given shape as float32.
func hfValues(t hfTensor, shape []int64) ([]float32, error) {
	if !slices.Equal(t.Shape, shape) {
		return nil, fmt.Errorf("%w: %s: tensor %s has shape %v, config implies %v", ErrModel, t.Path, t.Name, t.Shape, shape)
	}
	n := 1
	for _, d := range shape {
		n *= int(d)
	}
	v := make([]float32, n)
	switch t.DType {
	case "F32":
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
		}
	case "F16":
		for i := range v {
			v[i] = simd.F16ToF32Scalar(binary.LittleEndian.Uint16(t.Data[2*i:]))
		}
	case "BF16":
		for i := range v {
			v[i] = simd.BF16ToF32Scalar(binary.LittleEndian.Uint16(t.Data[2*i:]))
		}
	default:
		return nil, fmt.Errorf("%w: %s: tensor %s has dtype %s (kvq reads F32, F16 and BF16)", ErrUnsupported, t.Path, t.Name, t.DType)
	}
	return v, nil
}

// gptossNeeds refuses a backend that cannot apply m's attention sinks or
// its experts' biases and clamped SwiGLU.
func gptossNeeds(m *Model, be backend.Backend) error {
	sinks, extras := false, m.SwiGLULimit > 0
	for i := range m.Layers {
		l := &m.Layers[i]
		sinks = sinks || l.Sinks != nil
		extras = extras || l.ExpGateB != nil || l.ExpUpB != nil || l.ExpDownB != nil
	}
	if _, ok := be.(backend.Sinks); sinks && !ok {
		return fmt.Errorf("%w: the %s backend does not apply attention sinks", ErrUnsupported, be.Name())
	}
	if _, ok := be.(backend.ExpertExtras); extras && !ok {
		return fmt.Errorf("%w: the %s backend does not run experts with biases or the clamped SwiGLU", ErrUnsupported, be.Name())
	}
	return nil
}

// uploadExpertExtras places layer l's expert biases (a vector per expert)
// on the backend and sets the clamped SwiGLU.
func uploadExpertExtras(be backend.Backend, c *Config, l *Layer, lw *LayerWeights) error {
	if lw.Experts == nil {
		return nil
	}
	lw.Experts.Alpha, lw.Experts.Limit = c.SwiGLUAlpha, c.SwiGLULimit
	lw.Experts.Prepare = l.ExpPrepare
	var errs []error
	rows := func(w *tensor.Weight) []backend.Tensor {
		if w == nil {
			return nil
		}
		out := make([]backend.Tensor, w.Rows)
		for e := range out {
			v := make([]float32, w.Cols)
			cpuRow(v, w, e)
			x, err := be.UploadF32(v)
			errs = append(errs, err)
			out[e] = x
		}
		return out
	}
	lw.Experts.GateBias, lw.Experts.UpBias, lw.Experts.DownBias = rows(l.ExpGateB), rows(l.ExpUpB), rows(l.ExpDownB)
	return errors.Join(errs...)
}

// lazyExperts returns a function that runs fills for expert e once, on
// the first call for e (safe for concurrent use).
func lazyExperts(n int, fills []func(e int)) func(e int) {
	once := make([]sync.Once, n)
	return func(e int) {
		once[e].Do(func() {
			for _, f := range fills {
				f(e)
			}
		})
	}
}

// prepareExperts fills every expert of l that is filled on first use
// before a backend that copies the weights at Upload (not host memory)
// sees them; the CPU backend fills each on its first use instead
// (backend.Experts.Prepare, set by uploadExpertExtras).
func prepareExperts(be backend.Backend, l *Layer) {
	if l.ExpPrepare == nil {
		return
	}
	if _, host := be.(backend.HostMemory); host {
		return
	}
	for e := range l.ExpGate {
		l.ExpPrepare(e)
	}
}
