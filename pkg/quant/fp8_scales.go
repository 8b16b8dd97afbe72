package quant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
)

// ScaleSource supplies static fp8 scales (vLLM k_scale / v_scale): stored
// code = fp8(x/scale), value = code·scale.
type ScaleSource interface {
	// Scales returns layer's key (key true) or value scales: one value for a
	// per-tensor scale, or one per KV head. Scales must be finite and > 0.
	Scales(layer int, key bool) ([]float32, error)
	// String names the source (a file path) in format names and errors.
	String() string
}

// FP8ScaleFile holds static scales read from a JSON file. Two schemas are
// accepted:
//
// vLLM's legacy --quantization-param-path file (docs/quant-schemes.md §1.4),
// one per-tensor scale per layer used for both K and V:
//
//	{"model_type": "llama",
//	 "kv_cache": {"dtype": "float8_e4m3fn",
//	              "scaling_factor": {"0": {"0": 0.0152, "1": 0.0144, ...}}}}
//
// The outer keys are tensor-parallel ranks ("0" or "rank0"); kvq runs one
// rank, so a file with several ranks is accepted only where they agree.
//
// kvq's own schema, per-tensor (a number) or per KV head (a list) for each
// layer, K and V separately; a missing side takes the other's scales:
//
//	{"k_scale": {"0": 0.02, "1": [0.02, 0.03, ...]},
//	 "v_scale": {"0": 0.01, "1": 0.01}}
//
// An optional "dtype" ("float8_e4m3fn" or "float8_e5m2") in either schema
// restricts the file to one encoding. kvq calibrate's files add "version"
// (1; a later version is refused), the model's "layers" and "kv_heads"
// (checked against the model, see CheckGeometry) and provenance fields
// ("strategy", "granularity", "model", "data_sha256") that parsing ignores.
type FP8ScaleFile struct {
	name  string
	dtype string // "", "float8_e4m3fn" or "float8_e5m2"
	k, v  map[int][]float32
	// layers and kvHeads are the file's "layers" and "kv_heads", 0 when
	// absent.
	layers, kvHeads int
}

// FP8ScaleFileVersion is the newest "version" of kvq's scales schema this
// package reads.
const FP8ScaleFileVersion = 1

// GeometryChecker is implemented by formats (and scale sources) whose
// calibrated data belongs to one model: kvcache.NewLayout calls
// CheckGeometry with the model's geometry, so that a scales file written for
// another model fails with the file and field named instead of running with
// someone else's scales.
type GeometryChecker interface {
	CheckGeometry(layers, kvHeads int) error
}

var _ ScaleSource = (*FP8ScaleFile)(nil)

// LoadFP8Scales reads a scales file (see FP8ScaleFile).
func LoadFP8Scales(path string) (*FP8ScaleFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: fp8 scales file: %w", ErrOption, err)
	}
	return ParseFP8Scales(data, path)
}

// ParseFP8Scales parses the JSON of a scales file; name identifies it in
// errors and in format names. Every scale must be a positive finite
// float32.
func ParseFP8Scales(data []byte, name string) (*FP8ScaleFile, error) {
	return parseFP8Scales(data, name, false)
}

// ParseFP8ScalesLenient parses like ParseFP8Scales but keeps scales that
// are zero, negative (vLLM's −1 "never calibrated" placeholder) or beyond
// float32, so that an audit can report them; a format refuses them when it
// makes its codecs.
func ParseFP8ScalesLenient(data []byte, name string) (*FP8ScaleFile, error) {
	return parseFP8Scales(data, name, true)
}

func parseFP8Scales(data []byte, name string, lenient bool) (*FP8ScaleFile, error) {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%w: fp8 scales file %s: %s", ErrOption, name, fmt.Sprintf(format, a...))
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fail("not a JSON object: %v", err)
	}
	f := &FP8ScaleFile{name: name}
	if raw, ok := top["dtype"]; ok {
		if err := json.Unmarshal(raw, &f.dtype); err != nil {
			return nil, fail(`"dtype" is not a string`)
		}
	}
	for _, field := range []struct {
		key string
		dst *int
	}{{"version", new(int)}, {"layers", &f.layers}, {"kv_heads", &f.kvHeads}} {
		raw, ok := top[field.key]
		if !ok {
			continue
		}
		if err := json.Unmarshal(raw, field.dst); err != nil || *field.dst <= 0 {
			return nil, fail("%q must be a positive integer, not %s", field.key, bytes.TrimSpace(raw))
		}
		if field.key == "version" && *field.dst > FP8ScaleFileVersion {
			return nil, fail(`"version" %d is newer than this kvq reads (%d): upgrade kvq`, *field.dst, FP8ScaleFileVersion)
		}
	}
	switch {
	case top["kv_cache"] != nil:
		var kv struct {
			Dtype   string                                `json:"dtype"`
			Factors map[string]map[string]json.RawMessage `json:"scaling_factor"`
		}
		if err := json.Unmarshal(top["kv_cache"], &kv); err != nil {
			return nil, fail(`"kv_cache": %v`, err)
		}
		if kv.Dtype != "" {
			f.dtype = kv.Dtype
		}
		if len(kv.Factors) == 0 {
			return nil, fail(`"kv_cache" has no "scaling_factor"`)
		}
		ranks := slices.Sorted(maps.Keys(kv.Factors))
		for _, rank := range ranks {
			layers, err := parseLayerScales(kv.Factors[rank], false, lenient)
			if err != nil {
				return nil, fail("scaling_factor rank %q: %v", rank, err)
			}
			if f.k == nil {
				f.k = layers
				continue
			}
			if !sameScales(f.k, layers) {
				return nil, fail("tensor-parallel ranks %q and %q disagree; kvq runs one rank, give it that rank's scales", ranks[0], rank)
			}
		}
		f.v = f.k
	case top["k_scale"] != nil || top["v_scale"] != nil:
		for _, side := range []struct {
			key string
			dst *map[int][]float32
		}{{"k_scale", &f.k}, {"v_scale", &f.v}} {
			raw, ok := top[side.key]
			if !ok {
				continue
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(raw, &m); err != nil {
				return nil, fail("%q must map layer indices to scales: %v", side.key, err)
			}
			layers, err := parseLayerScales(m, true, lenient)
			if err != nil {
				return nil, fail("%s: %v", side.key, err)
			}
			*side.dst = layers
		}
		if f.k == nil {
			f.k = f.v
		}
		if f.v == nil {
			f.v = f.k
		}
	default:
		return nil, fail(`neither vLLM's {"kv_cache": {"scaling_factor": ...}} nor kvq's {"k_scale": ..., "v_scale": ...} schema`)
	}
	switch f.dtype {
	case "", "float8_e4m3fn", "float8_e5m2":
	default:
		return nil, fail("dtype %q (valid: float8_e4m3fn, float8_e5m2)", f.dtype)
	}
	return f, nil
}

func parseLayerScales(m map[string]json.RawMessage, lists, lenient bool) (map[int][]float32, error) {
	if len(m) == 0 {
		return nil, fmt.Errorf("no layers")
	}
	out := make(map[int][]float32, len(m))
	for key, raw := range m {
		layer, err := strconv.Atoi(key)
		if err != nil || layer < 0 {
			return nil, fmt.Errorf("layer key %q is not a layer index", key)
		}
		var vals []float64
		raw = bytes.TrimSpace(raw)
		if lists && len(raw) > 0 && raw[0] == '[' {
			if err := json.Unmarshal(raw, &vals); err != nil || len(vals) == 0 {
				return nil, fmt.Errorf("layer %d: scales must be a number or a non-empty list of numbers", layer)
			}
		} else {
			var v float64
			if err := json.Unmarshal(raw, &v); err != nil {
				if lists {
					return nil, fmt.Errorf("layer %d: scales must be a number or a non-empty list of numbers", layer)
				}
				return nil, fmt.Errorf("layer %d: scale must be a number", layer)
			}
			vals = []float64{v}
		}
		s := make([]float32, len(vals))
		for i, v := range vals {
			if !lenient && (!(v > 0) || math.IsInf(v, 0) || float32(v) == 0 || math.IsInf(float64(float32(v)), 0)) {
				return nil, fmt.Errorf("layer %d: scale %v is not a positive finite float32 (-1 marks a scale that was never calibrated)", layer, v)
			}
			s[i] = float32(v)
		}
		out[layer] = s
	}
	return out, nil
}

func sameScales(a, b map[int][]float32) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// String returns the file name.
func (f *FP8ScaleFile) String() string { return f.name }

var _ GeometryChecker = (*FP8ScaleFile)(nil)

// CheckGeometry implements GeometryChecker: the file's "layers" and
// "kv_heads", its layer indices and the length of its per-head lists must
// fit a model of layers layers and kvHeads KV heads.
func (f *FP8ScaleFile) CheckGeometry(layers, kvHeads int) error {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%w: fp8 scales file %s: %s (a scales file for another model?)", ErrOption, f.name, fmt.Sprintf(format, a...))
	}
	if f.layers > 0 && f.layers != layers {
		return fail(`"layers" is %d, the model has %d layers`, f.layers, layers)
	}
	if f.kvHeads > 0 && f.kvHeads != kvHeads {
		return fail(`"kv_heads" is %d, the model has %d KV heads`, f.kvHeads, kvHeads)
	}
	for _, side := range []struct {
		name string
		m    map[int][]float32
	}{{"k_scale", f.k}, {"v_scale", f.v}} {
		for _, l := range slices.Sorted(maps.Keys(side.m)) {
			switch s := side.m[l]; {
			case l >= layers:
				return fail("%s has layer %d, the model has %d layers (0..%d)", side.name, l, layers, layers-1)
			case len(s) > 1 && len(s) != kvHeads:
				return fail("%s of layer %d lists %d per-head scales, the model has %d KV heads", side.name, l, len(s), kvHeads)
			}
		}
	}
	return nil
}

// granularity is ScaleHead when some layer lists per-head scales for the
// side (key or value), else ScaleTensor.
func (f *FP8ScaleFile) granularity(key bool) Granularity {
	m := f.v
	if key {
		m = f.k
	}
	for _, s := range m {
		if len(s) > 1 {
			return ScaleHead
		}
	}
	return ScaleTensor
}

// DType returns the file's "dtype" ("" when it names none).
func (f *FP8ScaleFile) DType() string { return f.dtype }

// Layers returns the layer indices the file has scales for, sorted.
func (f *FP8ScaleFile) Layers() []int {
	seen := maps.Clone(f.k)
	maps.Copy(seen, f.v)
	return slices.Sorted(maps.Keys(seen))
}

// Scales implements ScaleSource.
func (f *FP8ScaleFile) Scales(layer int, key bool) ([]float32, error) {
	m, side := f.v, "v_scale"
	if key {
		m, side = f.k, "k_scale"
	}
	s, ok := m[layer]
	if !ok {
		return nil, fmt.Errorf("%w: fp8 scales file %s has no %s for layer %d (it covers layers %v)", ErrOption, f.name, side, layer, f.Layers())
	}
	return s, nil
}

// Dynamic fp8 scales (vLLM calculate_kv_scales, docs/quant-schemes.md §1.2):
// the scale is absmax/K_SCALE_CONSTANT (200) for keys and absmax/V_SCALE_CONSTANT (100)
// for values, taken from the first data and frozen from then on.
const (
	FP8DynamicKDivisor = 200
	FP8DynamicVDivisor = 100
)

// fp8Scale is one scale shared by the codecs that use it: the codecs of all
// KV heads of a layer side for per-tensor scales, one codec for per-head
// ones. A static scale is set at construction. A dynamic one is unset (zero)
// until the first Encode with a non-zero finite value freezes it at
// absmax/div; rows of zeros encoded before that are zero codes under any
// scale, so nothing needs re-encoding. Once frozen it never changes, so
// readers need only an atomic load; the mutex orders the freezing writers.
type fp8Scale struct {
	bits  atomic.Uint32 // float32 bits; 0 while a dynamic scale is unset
	div   float32       // dynamic divisor, 0 for a static scale
	limit float32       // largest dynamic scale (see fp8ScaleLimit)
	mu    sync.Mutex
}

// fp8ScaleLimit is the largest scale for kind k: 2^127/max, so that
// max·scale, the largest value a code can stand for, stays finite.
func fp8ScaleLimit(k FP8Kind) float32 { return 0x1p127 / k.Max() }

func newStaticScale(s float32) *fp8Scale {
	sc := &fp8Scale{}
	sc.bits.Store(math.Float32bits(s))
	return sc
}

// get returns the scale (0 for a dynamic scale that saw only zeros).
func (s *fp8Scale) get() float32 { return math.Float32frombits(s.bits.Load()) }

// forEncode returns the scale to encode src with, freezing a dynamic scale
// from src on first use.
func (s *fp8Scale) forEncode(src []float32) float32 {
	if b := s.bits.Load(); b != 0 || s.div == 0 {
		return math.Float32frombits(b)
	}
	var amax float32
	nonFinite := false
	for _, x := range src {
		a := float32(math.Abs(float64(x)))
		switch {
		case a > amax && a <= math.MaxFloat32:
			amax = a
		case !(a <= math.MaxFloat32):
			nonFinite = true
		}
	}
	if amax == 0 && !nonFinite {
		return 0 // zeros: encode as zero codes, keep waiting
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.bits.Load(); b != 0 {
		return math.Float32frombits(b) // another head froze it first
	}
	sc := amax / s.div
	switch {
	case amax == 0: // only Inf/NaN seen: vLLM would get Inf or NaN; use 1.0
		sc = 1
	case sc < math.SmallestNonzeroFloat32:
		sc = math.SmallestNonzeroFloat32
	case sc > s.limit: // beyond ~1e38 a saturated code would decode to Inf
		sc = s.limit
	}
	s.bits.Store(math.Float32bits(sc))
	return sc
}

// fp8ScaleKey names a shared scale of a dynamic format.
type fp8ScaleKey struct {
	layer, head int // head is -1 for per-tensor scales
	key         bool
}

// fp8ScaleTable holds the dynamic scales of one fp8 Format value, created
// as codecs ask for them.
type fp8ScaleTable struct {
	mu sync.Mutex
	m  map[fp8ScaleKey]*fp8Scale
}

func (t *fp8ScaleTable) get(k fp8ScaleKey, div, limit float32) *fp8Scale {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[fp8ScaleKey]*fp8Scale{}
	}
	s, ok := t.m[k]
	if !ok {
		s = &fp8Scale{div: div, limit: limit}
		t.m[k] = s
	}
	return s
}
