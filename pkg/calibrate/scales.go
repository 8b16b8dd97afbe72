package calibrate

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/kvqlabs/kvq/internal/atomicfile"
	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/safetensors"
)

// Scales are fp8 KV-cache scales for one model: per layer, one value (per
// tensor) or one per KV head, for K and for V. They are a
// quant.ScaleSource, so a cache can run with them directly.
type Scales struct {
	// DType is the fp8 encoding they are for: "float8_e4m3fn" or
	// "float8_e5m2".
	DType       string
	Strategy    string
	Granularity Granularity
	Model       string
	Layers      int
	KVHeads     int
	Data        DataInfo
	// K and V hold Layers entries of 1 or KVHeads values; an entry may be
	// nil for a layer a checkpoint ships no scale for.
	K, V [][]float32
	// name labels the scales in format names (a file, or the strategy).
	name string
}

var (
	_ quant.ScaleSource     = (*Scales)(nil)
	_ quant.GeometryChecker = (*Scales)(nil)
)

// String names the scales in cache names: the file they were read from or
// written to, else "calibrated:STRATEGY".
func (s *Scales) String() string {
	if s.name != "" {
		return s.name
	}
	return "calibrated:" + s.Strategy
}

// SetName sets what String returns.
func (s *Scales) SetName(name string) { s.name = name }

// Scales implements quant.ScaleSource.
func (s *Scales) Scales(layer int, key bool) ([]float32, error) {
	m, side := s.V, "v_scale"
	if key {
		m, side = s.K, "k_scale"
	}
	if layer < 0 || layer >= len(m) || m[layer] == nil {
		return nil, fmt.Errorf("%w: %s has no %s for layer %d", ErrScales, s, side, layer)
	}
	return m[layer], nil
}

// CheckGeometry implements quant.GeometryChecker.
func (s *Scales) CheckGeometry(layers, kvHeads int) error {
	if s.Layers != layers || s.KVHeads != kvHeads {
		return fmt.Errorf("%w: %s are for %d layers and %d KV heads, the model has %d and %d (scales for another model?)", ErrScales, s, s.Layers, s.KVHeads, layers, kvHeads)
	}
	return nil
}

// Format returns the fp8 cache format that runs with these scales.
func (s *Scales) Format() (quant.Format, error) {
	kind := quant.E4M3
	if s.DType == "float8_e5m2" {
		kind = quant.E5M2
	}
	return quant.NewFP8(kind, quant.FP8Options{Scales: s})
}

// Spec returns a cache spec of both sides in s's format, named name.
func (s *Scales) Spec(name string) (quant.Spec, error) {
	f, err := s.Format()
	if err != nil {
		return quant.Spec{}, err
	}
	return quant.NewSpec(name, f, f), nil
}

// dtypeRounder returns the rounding of a float32 to a safetensors dtype.
func dtypeRounder(dt string) (func(float32) float32, error) {
	switch strings.ToUpper(dt) {
	case "", "F32", "FLOAT32":
		return func(x float32) float32 { return x }, nil
	case "F16", "FLOAT16":
		return func(x float32) float32 { return simd.F16ToF32Scalar(simd.F32ToF16Scalar(x)) }, nil
	case "BF16", "BFLOAT16":
		return func(x float32) float32 { return simd.BF16ToF32Scalar(simd.F32ToBF16Scalar(x)) }, nil
	}
	return nil, fmt.Errorf("%w: scale dtype %q (valid: F32, F16, BF16)", ErrOptions, dt)
}

// SafetensorsDType maps a config.json torch_dtype ("float16", "bfloat16",
// "float32") to the safetensors dtype scales are shipped in (F32 for
// anything else).
func SafetensorsDType(torchDType string) string {
	switch strings.ToLower(torchDType) {
	case "float16", "half", "fp16":
		return "F16"
	case "bfloat16", "bf16":
		return "BF16"
	}
	return "F32"
}

// The kvq scales file (kvq calibrate's primary output), read by
// --cache fp8:scales@FILE:
//
//	{"format": "kvq.kv_scales", "version": 1, "dtype": "float8_e4m3fn",
//	 "strategy": "dataset:minmax:tensor", "granularity": "tensor",
//	 "model": "…", "layers": 4, "kv_heads": 2,
//	 "data": {"source": "…", "samples": 32, "tokens": 9000, "sha256": "…"},
//	 "k_scale": {"0": 0.0123, …}, "v_scale": {"0": [0.01, 0.02], …}}
type scalesJSON struct {
	Format      string                     `json:"format"`
	Version     int                        `json:"version"`
	DType       string                     `json:"dtype"`
	Strategy    string                     `json:"strategy"`
	Granularity string                     `json:"granularity"`
	Model       string                     `json:"model,omitempty"`
	Layers      int                        `json:"layers"`
	KVHeads     int                        `json:"kv_heads"`
	Data        *DataInfo                  `json:"data,omitempty"`
	K           map[string]json.RawMessage `json:"k_scale"`
	V           map[string]json.RawMessage `json:"v_scale"`
}

// MarshalKVQ returns the kvq scales file.
func (s *Scales) MarshalKVQ() ([]byte, error) {
	j := scalesJSON{Format: "kvq.kv_scales", Version: quant.FP8ScaleFileVersion, DType: s.DType, Strategy: s.Strategy,
		Granularity: s.Granularity.String(), Model: s.Model, Layers: s.Layers, KVHeads: s.KVHeads,
		K: map[string]json.RawMessage{}, V: map[string]json.RawMessage{}}
	if s.Data.SHA256 != "" {
		j.Data = &s.Data
	}
	for l := range s.Layers {
		for _, side := range []struct {
			m map[string]json.RawMessage
			v []float32
		}{{j.K, s.K[l]}, {j.V, s.V[l]}} {
			if side.v == nil {
				continue
			}
			var raw []byte
			if len(side.v) == 1 && s.Granularity == PerTensor {
				raw = appendFloat(nil, side.v[0])
			} else {
				raw = append(raw, '[')
				for i, x := range side.v {
					if i > 0 {
						raw = append(raw, ", "...)
					}
					raw = appendFloat(raw, x)
				}
				raw = append(raw, ']')
			}
			side.m[strconv.Itoa(l)] = raw
		}
	}
	b, err := json.MarshalIndent(j, "", "  ")
	return append(b, '\n'), err
}

// appendFloat writes x as the shortest decimal that reads back as the same
// float32.
func appendFloat(b []byte, x float32) []byte { return strconv.AppendFloat(b, float64(x), 'g', -1, 32) }

// MarshalSGLang returns the legacy --quantization-param-path file that
// SGLang (and vLLM before it deprecated the flag) reads: one per-tensor
// scale per layer used for both K and V. kvq writes max(K, V) over the
// heads, so that neither side clips.
func (s *Scales) MarshalSGLang(modelType string) ([]byte, error) {
	layers := map[string]float64{}
	for l := range s.Layers {
		var m float32
		for _, v := range append(slices.Clone(s.K[l]), s.V[l]...) {
			m = max(m, v)
		}
		if m == 0 {
			return nil, fmt.Errorf("%w: layer %d has no scales", ErrScales, l)
		}
		layers[strconv.Itoa(l)] = float64(m)
	}
	j := map[string]any{"model_type": modelType, "kv_cache": map[string]any{"dtype": s.DType,
		"scaling_factor": map[string]any{"0": layers}}}
	// Provenance in keys the readers ignore.
	j["kvq_strategy"] = s.Strategy
	if s.Data.SHA256 != "" {
		j["kvq_data_sha256"] = s.Data.SHA256
	}
	b, err := json.MarshalIndent(j, "", "  ")
	return append(b, '\n'), err
}

// ScaleTensorName is the tensor llm-compressor writes for layer's k or v
// scale (vLLM remaps it to …self_attn.attn.k_scale when loading).
func ScaleTensorName(layer int, key bool) string {
	side := "v"
	if key {
		side = "k"
	}
	return fmt.Sprintf("model.layers.%d.self_attn.%s_scale", layer, side)
}

// WriteSafetensors writes the scales as llm-compressor stores them in a
// checkpoint: tensors ScaleTensorName of shape [1] (per tensor) or
// [kv_heads, 1, 1] (per head) in dtype dt (the model's: F16, BF16 or F32).
func (s *Scales) WriteSafetensors(w io.Writer, dt string) error {
	round, err := dtypeRounder(dt)
	if err != nil {
		return err
	}
	st := safetensors.NewWriter()
	st.SetMetadata("format", "pt")
	st.SetMetadata("kvq_strategy", s.Strategy)
	if s.Data.SHA256 != "" {
		st.SetMetadata("kvq_data_sha256", s.Data.SHA256)
	}
	for l := range s.Layers {
		for _, key := range []bool{true, false} {
			v, err := s.Scales(l, key)
			if err != nil {
				return err
			}
			shape := []int64{1}
			if s.Granularity == PerHead {
				shape = []int64{int64(len(v)), 1, 1}
			}
			var data []byte
			for _, x := range v {
				switch strings.ToUpper(dt) {
				case "F16":
					data = binary.LittleEndian.AppendUint16(data, simd.F32ToF16Scalar(x))
				case "BF16":
					data = binary.LittleEndian.AppendUint16(data, simd.F32ToBF16Scalar(x))
				default:
					data = binary.LittleEndian.AppendUint32(data, math.Float32bits(round(x)))
				}
			}
			if err := st.Add(ScaleTensorName(l, key), safetensors.DType(strings.ToUpper(orF32(dt))), shape, data); err != nil {
				return err
			}
		}
	}
	_, err = st.WriteTo(w)
	return err
}

func orF32(dt string) string {
	if dt == "" {
		return "F32"
	}
	return dt
}

// KVCacheScheme returns the quantization_config.kv_cache_scheme that
// announces the scales to vLLM (compressed-tensors' QuantizationArgs).
func (s *Scales) KVCacheScheme() map[string]any {
	strategy := "tensor"
	if s.Granularity == PerHead {
		strategy = "attn_head"
	}
	return map[string]any{"num_bits": 8, "type": "float", "strategy": strategy, "dynamic": false, "symmetric": true}
}

// ConfigSnippet is the part of config.json vLLM needs to load the scales of
// an otherwise unquantized model: a compressed-tensors quantization_config
// with no weight groups and the kv_cache_scheme. For a checkpoint that is
// already quantized, only "kv_cache_scheme" goes into its existing
// quantization_config.
func (s *Scales) ConfigSnippet() ([]byte, error) {
	j := map[string]any{"quantization_config": map[string]any{
		"quant_method":        "compressed-tensors",
		"format":              "dense",
		"config_groups":       map[string]any{},
		"ignore":              []string{},
		"quantization_status": "frozen",
		"kv_cache_scheme":     s.KVCacheScheme(),
	}}
	// Provenance beside, not inside, what goes into config.json.
	j["kvq"] = map[string]any{"strategy": s.Strategy, "data_sha256": s.Data.SHA256,
		"note": "merge quantization_config into the checkpoint's config.json (kvq calibrate --write-checkpoint does it)"}
	b, err := json.MarshalIndent(j, "", "  ")
	return append(b, '\n'), err
}

// Save writes the kvq scales file to path atomically.
func (s *Scales) Save(path string) error {
	b, err := s.MarshalKVQ()
	if err != nil {
		return err
	}
	return atomicfile.Write(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// LoadScales reads scales kvq can use for a model of layers layers and
// kvHeads KV heads from a kvq scales file, a legacy vLLM/SGLang JSON file,
// or a safetensors file of k_scale/v_scale tensors (any spelling
// ReadCheckpointScales accepts). Every layer must have K and V scales.
func LoadScales(path string, layers, kvHeads int) (*Scales, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrScales, err)
	}
	var s *Scales
	if isSafetensors(data) {
		sh, err := scalesFromSafetensors(path, data, layers, kvHeads)
		if err != nil {
			return nil, err
		}
		for l := range layers {
			if sh.K[l] == nil && sh.V[l] == nil {
				return nil, fmt.Errorf("%w: %s has no %s for layer %d", ErrScales, path, ScaleTensorName(l, true), l)
			}
		}
		s = sh.Effective()
	} else {
		s, err = parseScalesJSON(path, data, layers, kvHeads)
		if err != nil {
			return nil, err
		}
	}
	s.name = path
	for l := range layers {
		for _, key := range []bool{true, false} {
			v, err := s.Scales(l, key)
			if err != nil {
				return nil, err
			}
			for _, x := range v {
				if !(x > 0) || math.IsInf(float64(x), 0) {
					return nil, fmt.Errorf("%w: %s: layer %d %s scale %g is not a positive finite number", ErrScales, path, l, sideName(key), x)
				}
			}
		}
	}
	return s, nil
}

func sideName(key bool) string {
	if key {
		return "k"
	}
	return "v"
}

// isSafetensors recognizes a safetensors file by its header: a small
// little-endian length followed by '{'.
func isSafetensors(b []byte) bool {
	if len(b) < 9 {
		return false
	}
	n := binary.LittleEndian.Uint64(b)
	return n >= 2 && n <= uint64(len(b)-8) && b[8] == '{'
}

// parseScalesJSON reads a kvq or legacy JSON scales file through
// quant.ParseFP8Scales (one parser for what --cache reads and what
// calibrate reads) and checks it against the model.
func parseScalesJSON(path string, data []byte, layers, kvHeads int) (*Scales, error) {
	f, err := quant.ParseFP8Scales(data, path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrScales, err)
	}
	if err := f.CheckGeometry(layers, kvHeads); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrScales, err)
	}
	var meta scalesJSON
	_ = json.Unmarshal(data, &meta) // provenance only; ParseFP8Scales checked the rest
	s := &Scales{DType: f.DType(), Strategy: meta.Strategy, Model: meta.Model, Layers: layers, KVHeads: kvHeads,
		K: make([][]float32, layers), V: make([][]float32, layers)}
	if s.DType == "" {
		s.DType = "float8_e4m3fn"
	}
	if meta.Data != nil {
		s.Data = *meta.Data
	}
	if s.Strategy == "" {
		s.Strategy = "file"
	}
	for l := range layers {
		for _, key := range []bool{true, false} {
			v, err := f.Scales(l, key)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrScales, err)
			}
			if len(v) > 1 {
				s.Granularity = PerHead
			}
			if key {
				s.K[l] = v
			} else {
				s.V[l] = v
			}
		}
	}
	if s.Granularity == PerHead { // a file may mix: widen per-tensor layers
		for _, m := range [][][]float32{s.K, s.V} {
			for l, v := range m {
				if len(v) == 1 {
					m[l] = slices.Repeat(v, kvHeads)
				}
			}
		}
	}
	return s, nil
}

// Equal reports whether a and b hold the same scale values.
func (s *Scales) Equal(o *Scales) bool {
	if s.Layers != o.Layers {
		return false
	}
	for l := range s.Layers {
		if !slices.Equal(s.K[l], o.K[l]) || !slices.Equal(s.V[l], o.V[l]) {
			return false
		}
	}
	return true
}

// jsonIndent is json.MarshalIndent with a final newline.
func jsonIndent(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	err := enc.Encode(v)
	return buf.Bytes(), err
}
