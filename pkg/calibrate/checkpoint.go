package calibrate

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"

	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/safetensors"
)

// Shipped are the KV scales a checkpoint carries, as found: nothing is
// fixed, so that an audit can report zeros, negatives and gaps.
type Shipped struct {
	// Source is the checkpoint directory or scales file; Checkpoint is true
	// for a directory (its config.json and index were read too).
	Source          string
	Checkpoint      bool
	Layers, KVHeads int
	// K and V hold what each layer ships (nil: nothing), 1 or KVHeads
	// values.
	K, V [][]float32
	// KFrom and VFrom name where each layer's scale came from
	// ("file: tensor").
	KFrom, VFrom []string
	// Legacy lists the layers whose one kv_scale serves K and V.
	Legacy []int
	// QScales counts the layers that ship a q_scale (used when the
	// attention backend runs in fp8, FlashAttention 3).
	QScales int
	// DType is the safetensors dtype of the scale tensors ("" for JSON).
	DType string
	// Scheme is config.json's quantization_config.kv_cache_scheme (nil when
	// absent); QuantMethod is quantization_config.quant_method.
	Scheme      map[string]any
	QuantMethod string
	// ModelOpt is hf_quant_config.json's kv_cache_quant_algo ("" when the
	// file is absent or names none).
	ModelOpt string
	// NotInIndex lists safetensors files with scales that
	// model.safetensors.index.json does not name: vLLM never reads them.
	NotInIndex []string
	// Problems are tensors kvq recognized as scales but could not use
	// (wrong shape or dtype), each naming the file and tensor.
	Problems []error
}

// Any reports whether any layer ships a K or V scale.
func (s *Shipped) Any() bool {
	for l := range s.Layers {
		if s.K[l] != nil || s.V[l] != nil {
			return true
		}
	}
	return false
}

// Effective returns the scales vLLM would run with: a legacy kv_scale
// serves both sides, a layer with only one side uses it for both, and a
// layer with none gets 1.0 (vLLM's default). Invalid values stay as they
// are (a cache refuses them).
func (s *Shipped) Effective() *Scales {
	out := &Scales{DType: "float8_e4m3fn", Strategy: "shipped", Layers: s.Layers, KVHeads: s.KVHeads,
		K: make([][]float32, s.Layers), V: make([][]float32, s.Layers), name: s.Source}
	for l := range s.Layers {
		k, v := s.K[l], s.V[l]
		switch {
		case k == nil && v == nil:
			k, v = []float32{1}, []float32{1}
		case k == nil:
			k = v
		case v == nil:
			v = k
		}
		out.K[l], out.V[l] = k, v
		if len(k) > 1 || len(v) > 1 {
			out.Granularity = PerHead
		}
	}
	if out.Granularity == PerHead {
		for _, m := range [][][]float32{out.K, out.V} {
			for l, v := range m {
				if len(v) == 1 {
					m[l] = slices.Repeat(v, s.KVHeads)
				}
			}
		}
	}
	return out
}

func newShipped(source string, layers, kvHeads int) *Shipped {
	return &Shipped{Source: source, Layers: layers, KVHeads: kvHeads,
		K: make([][]float32, layers), V: make([][]float32, layers),
		KFrom: make([]string, layers), VFrom: make([]string, layers)}
}

// scaleName matches every spelling of a KV scale tensor vLLM loads
// (maybe_remap_kv_scale_name and the exporters' names): llm-compressor's
// self_attn.{k,v}_scale, the remapped self_attn.attn.{k,v}_scale, ModelOpt's
// self_attn.{k,v}_proj.{k,v}_scale, a fused self_attn.qkv_proj.{k,v}_scale,
// Quark's self_attn.{k,v}_proj.output_scale and the deprecated single
// self_attn.kv_scale. Group 1 is the layer, 2 the side (k, v, kv or q).
var scaleName = regexp.MustCompile(`(?:^|\.)layers\.(\d+)\.self_attn\.(?:attn\.|qkv_proj\.|[kvq]_proj\.)?(?:(k|v|kv|q)_scale|(k|v|q)_proj\.output_scale)$`)

// modelOptName checks ModelOpt's k_proj.k_scale spelling names one side.
var projName = regexp.MustCompile(`\.([kvq])_proj\.([kvq])_scale$`)

// ReadCheckpointScales reads the KV scales of the checkpoint in dir, for a
// model of layers layers and kvHeads KV heads: every safetensors file in
// dir (kvq reads scale tensors only), config.json's quantization_config
// and hf_quant_config.json.
func ReadCheckpointScales(dir string, layers, kvHeads int) (*Shipped, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrScales, err)
	}
	if !st.IsDir() {
		return ReadScalesFile(dir, layers, kvHeads)
	}
	sh := newShipped(dir, layers, kvHeads)
	sh.Checkpoint = true
	if err := sh.readConfig(dir); err != nil {
		return nil, err
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	var index map[string]bool
	if b, err := os.ReadFile(filepath.Join(dir, "model.safetensors.index.json")); err == nil {
		ix, err := safetensors.ParseIndex(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrScales, filepath.Join(dir, "model.safetensors.index.json"), err)
		}
		index = map[string]bool{}
		for _, f := range ix.Files() {
			index[f] = true
		}
	}
	for _, p := range files {
		found, err := sh.readSafetensors(p)
		if err != nil {
			return nil, err
		}
		if found && index != nil && !index[filepath.Base(p)] {
			sh.NotInIndex = append(sh.NotInIndex, filepath.Base(p))
		}
	}
	return sh, nil
}

// ReadScalesFile reads a single scales file without fixing its values: a
// kvq or legacy JSON file (vLLM's --quantization-param-path, SGLang's) or a
// safetensors file of scale tensors.
func ReadScalesFile(path string, layers, kvHeads int) (*Shipped, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrScales, err)
	}
	if isSafetensors(data) {
		return scalesFromSafetensors(path, data, layers, kvHeads)
	}
	f, err := quant.ParseFP8ScalesLenient(data, path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrScales, err)
	}
	if err := f.CheckGeometry(layers, kvHeads); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrScales, err)
	}
	sh := newShipped(path, layers, kvHeads)
	for _, l := range f.Layers() {
		for _, key := range []bool{true, false} {
			v, err := f.Scales(l, key)
			if err != nil {
				continue
			}
			if key {
				sh.K[l], sh.KFrom[l] = v, path
			} else {
				sh.V[l], sh.VFrom[l] = v, path
			}
		}
	}
	return sh, nil
}

func scalesFromSafetensors(path string, data []byte, layers, kvHeads int) (*Shipped, error) {
	sh := newShipped(path, layers, kvHeads)
	if _, err := sh.readSafetensorsData(path, bytes.NewReader(data), int64(len(data))); err != nil {
		return nil, err
	}
	if len(sh.Problems) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrScales, errors.Join(sh.Problems...))
	}
	if !sh.Any() {
		return nil, fmt.Errorf("%w: %s has no k_scale or v_scale tensors", ErrScales, path)
	}
	return sh, nil
}

func (sh *Shipped) readConfig(dir string) error {
	p := filepath.Join(dir, "config.json")
	if b, err := os.ReadFile(p); err == nil {
		var cfg struct {
			Q *struct {
				Method string         `json:"quant_method"`
				Scheme map[string]any `json:"kv_cache_scheme"`
			} `json:"quantization_config"`
		}
		if err := json.Unmarshal(b, &cfg); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrScales, p, err)
		}
		if cfg.Q != nil {
			sh.QuantMethod, sh.Scheme = cfg.Q.Method, cfg.Q.Scheme
		}
	}
	p = filepath.Join(dir, "hf_quant_config.json")
	if b, err := os.ReadFile(p); err == nil {
		var mo struct {
			Quantization struct {
				KV *string `json:"kv_cache_quant_algo"`
			} `json:"quantization"`
		}
		if err := json.Unmarshal(b, &mo); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrScales, p, err)
		}
		if mo.Quantization.KV != nil {
			sh.ModelOpt = *mo.Quantization.KV
		}
	}
	return nil
}

func (sh *Shipped) readSafetensors(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrScales, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrScales, err)
	}
	return sh.readSafetensorsData(path, f, st.Size())
}

type readerAt interface {
	ReadAt(p []byte, off int64) (int, error)
}

func (sh *Shipped) readSafetensorsData(path string, r readerAt, size int64) (bool, error) {
	st, err := safetensors.Parse(r, size)
	if err != nil {
		return false, fmt.Errorf("%w: %s: %w", ErrScales, path, err)
	}
	base := filepath.Base(path)
	found := false
	for _, t := range st.Tensors {
		m := scaleName.FindStringSubmatch(t.Name)
		if m == nil {
			continue
		}
		side := m[2] + m[3]
		if pm := projName.FindStringSubmatch(t.Name); pm != nil && pm[1] != pm[2] {
			continue // e.g. k_proj.v_scale: not a KV scale spelling
		}
		found = true
		layer, _ := strconv.Atoi(m[1])
		where := base + ": " + t.Name
		if side == "q" {
			sh.QScales++
			continue
		}
		if layer >= sh.Layers {
			sh.Problems = append(sh.Problems, fmt.Errorf("%s: layer %d, the model has %d layers (scales for another model?)", where, layer, sh.Layers))
			continue
		}
		vals, err := readScaleTensor(r, t)
		if err != nil {
			sh.Problems = append(sh.Problems, fmt.Errorf("%s: %w", where, err))
			continue
		}
		if len(vals) != 1 && len(vals) != sh.KVHeads {
			sh.Problems = append(sh.Problems, fmt.Errorf("%s: shape %v holds %d values; want one ([1] or a 0-d scalar) or one per KV head ([%d, 1, 1])", where, t.Shape, len(vals), sh.KVHeads))
			continue
		}
		sh.DType = string(t.DType)
		if side == "kv" {
			sh.Legacy = append(sh.Legacy, layer)
		}
		if side == "k" || side == "kv" {
			sh.K[layer], sh.KFrom[layer] = vals, where
		}
		if side == "v" || side == "kv" {
			sh.V[layer], sh.VFrom[layer] = vals, where
		}
	}
	return found, nil
}

// maxScaleValues bounds what a scale tensor may hold (a few per head).
const maxScaleValues = 4096

func readScaleTensor(r readerAt, t safetensors.TensorInfo) ([]float32, error) {
	n := t.NumElements()
	if n > maxScaleValues {
		return nil, fmt.Errorf("shape %v is far too large for a KV scale", t.Shape)
	}
	b := make([]byte, t.Size)
	if _, err := r.ReadAt(b, t.Offset); err != nil {
		return nil, err
	}
	out := make([]float32, n)
	for i := range out {
		switch t.DType {
		case "F32":
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		case "F64":
			out[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])))
		case "F16":
			out[i] = simd.F16ToF32Scalar(binary.LittleEndian.Uint16(b[2*i:]))
		case "BF16":
			out[i] = simd.BF16ToF32Scalar(binary.LittleEndian.Uint16(b[2*i:]))
		default:
			return nil, fmt.Errorf("dtype %s (scales are F32, F16, BF16 or F64)", t.DType)
		}
	}
	return out, nil
}
