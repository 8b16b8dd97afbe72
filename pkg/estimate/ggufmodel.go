package estimate

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/kvqlabs/kvq/pkg/gguf"
)

// LoadGGUF reads a model's geometry from a GGUF file's header. Only the
// header, metadata and tensor infos are read, never the tensor data.
func LoadGGUF(path string) (Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return Model{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Model{}, err
	}
	m, err := ReadGGUF(f, st.Size())
	if err != nil {
		return Model{}, fmt.Errorf("%s: %w", path, err)
	}
	m.Name = path
	return m, nil
}

// ReadGGUF reads a model's geometry from the GGUF file that r (of size bytes)
// holds: {arch}.block_count, .attention.head_count, .head_count_kv,
// .embedding_length, .attention.key_length, .context_length,
// .attention.sliding_window (with the architecture's layer pattern) and, for
// MLA, .attention.kv_lora_rank and .rope.dimension_count. The weights'
// size is the sum of the tensors' data.
func ReadGGUF(r io.ReaderAt, size int64) (Model, error) {
	f, err := gguf.Parse(r, size)
	if err != nil {
		return Model{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	arch, err := f.String("general.architecture")
	if err != nil {
		return Model{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	m := Model{Arch: arch, Source: "gguf", DType: "float16", Verified: true}
	key := func(k string) string { return arch + "." + k }
	num := func(k string, def int64, required bool) (int64, error) {
		v, err := f.Int(key(k))
		if errors.Is(err, gguf.ErrKeyNotFound) && !required {
			return def, nil
		}
		if err != nil {
			return 0, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		if v < 0 || v > 1<<31 {
			return 0, fmt.Errorf("%w: %s = %d out of range", ErrConfig, key(k), v)
		}
		return v, nil
	}
	// perLayer reads a count that llama.cpp stores either as one integer or
	// as one integer per layer; per-layer values must agree.
	perLayer := func(k string, def int64, required bool) (int64, error) {
		if v, ok := f.Get(key(k)); ok && v.Len() > 0 {
			xs, err := f.Int32s(key(k))
			if err != nil {
				return 0, fmt.Errorf("%w: %w", ErrConfig, err)
			}
			for _, x := range xs {
				if x != xs[0] {
					return 0, fmt.Errorf("%w: %s varies by layer (%v): recurrent or mixed-head models are not modelled", ErrUnsupported, key(k), xs)
				}
			}
			return int64(xs[0]), nil
		}
		return num(k, def, required)
	}
	var layers, heads, kvHeads, hidden, kdim, vdim, ctx, window, lora, rope int64
	steps := []func() error{
		func() (err error) { layers, err = num("block_count", 0, true); return },
		func() (err error) { hidden, err = num("embedding_length", 0, true); return },
		func() (err error) { heads, err = perLayer("attention.head_count", 0, true); return },
		func() (err error) { kvHeads, err = perLayer("attention.head_count_kv", heads, false); return },
		func() (err error) { ctx, err = num("context_length", 0, false); return },
		func() (err error) { window, err = num("attention.sliding_window", 0, false); return },
		func() (err error) { lora, err = num("attention.kv_lora_rank", 0, false); return },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return Model{}, err
		}
	}
	if heads == 0 || kvHeads == 0 {
		return Model{}, fmt.Errorf("%w: %s has %d attention and %d KV heads", ErrUnsupported, arch, heads, kvHeads)
	}
	if kdim, err = num("attention.key_length", hidden/heads, false); err != nil {
		return Model{}, err
	}
	if vdim, err = num("attention.value_length", kdim, false); err != nil {
		return Model{}, err
	}
	m.Layers, m.Heads, m.KVHeads, m.Hidden = int(layers), int(heads), int(kvHeads), int(hidden)
	m.HeadDim, m.MaxPosition = int(kdim), ctx
	if lora > 0 {
		if rope, err = num("rope.dimension_count", 0, true); err != nil {
			return Model{}, err
		}
		m.KVLoraRank, m.QKRopeHeadDim, m.HeadDim = int(lora), int(rope), int(vdim)
		m.KVHeads = m.Heads
	} else if vdim != kdim {
		return Model{}, fmt.Errorf("%w: %s has key length %d and value length %d; kvq caches need equal K and V head sizes", ErrUnsupported, arch, kdim, vdim)
	}
	if _, given := f.Get(arch + ".attention.sliding_window"); !given && arch == "gemma2" {
		window = 4096 // llama.cpp's default for Gemma 2, as the runtime's loader
	}
	if window > 0 && (ctx == 0 || window < ctx) {
		m.Windows, err = ggufWindows(f, arch, m.Layers, int(window))
		if err != nil {
			return Model{}, err
		}
	}
	for _, t := range f.Tensors {
		if m.Params, err = add(m.Params, t.NumElements()); err == nil {
			m.WeightsBytes, err = add(m.WeightsBytes, t.Size)
		}
		if err != nil {
			return Model{}, err
		}
	}
	if err := m.Validate(); err != nil {
		return Model{}, err
	}
	return m, nil
}

// ggufWindows lays out sliding layers: a per-layer bool array or a period
// in {arch}.attention.sliding_window_pattern, else the architecture's pattern
// (Gemma-2 and gpt-oss alternate, Gemma-3 slides five layers in six), else
// every layer.
func ggufWindows(f *gguf.File, arch string, layers, w int) ([]int, error) {
	k := arch + ".attention.sliding_window_pattern"
	if v, ok := f.Get(k); ok {
		if bs, ok := v.Any().([]bool); ok {
			if len(bs) != layers {
				return nil, fmt.Errorf("%w: %s has %d entries for %d layers", ErrConfig, k, len(bs), layers)
			}
			ws := make([]int, layers)
			for i, s := range bs {
				if s {
					ws[i] = w
				}
			}
			return ws, nil
		}
		p, err := f.Int(k)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		if p > 0 && p <= int64(layers) {
			return windowsEvery(layers, w, int(p)), nil
		}
	}
	switch arch {
	case "gemma2", "gpt-oss", "gpt_oss":
		return windowsEvery(layers, w, 2), nil
	case "gemma3", "gemma3n":
		return windowsEvery(layers, w, 6), nil
	}
	return windowsAll(layers, w), nil
}
