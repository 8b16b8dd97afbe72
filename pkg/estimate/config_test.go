package estimate

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/gguf"
)

// geometry summarizes what the estimator reads from a model.
func geometry(m Model) string {
	n, ws := m.SlidingLayers()
	s := fmt.Sprintf("arch %s, L %d, H %d, Hkv %d, D %d, max %d, %d sliding %v, KV B/tok %d, dtype %s",
		m.Arch, m.Layers, m.Heads, m.KVHeads, m.HeadDim, m.MaxPosition, n, ws, m.ValuesPerToken()*2, m.DType)
	if m.MLA() {
		s += fmt.Sprintf(", MLA %d+%d", m.KVLoraRank, m.QKRopeHeadDim)
	}
	return s
}

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		file   string
		want   string
		params float64 // billions, ±2.5%
		bits   float64 // weight bits per parameter, roughly
	}{
		{"llama-3.1-8b.json", "arch llama, L 32, H 32, Hkv 8, D 128, max 131072, 0 sliding [], KV B/tok 131072, dtype bfloat16", 8.03, 16},
		{"gemma-2-9b.json", "arch gemma2, L 42, H 16, Hkv 8, D 256, max 8192, 21 sliding [4096], KV B/tok 344064, dtype bfloat16", 9.24, 16},
		{"gemma-3-27b-it.json", "arch gemma3_text, L 62, H 32, Hkv 16, D 128, max 131072, 52 sliding [1024], KV B/tok 507904, dtype bfloat16", 0, 16},
		{"gpt-oss-20b.json", "arch gpt_oss, L 24, H 64, Hkv 8, D 64, max 131072, 12 sliding [128], KV B/tok 49152, dtype bfloat16", 20.9, 5.3},
		{"deepseek-v3.json", "arch deepseek_v3, L 61, H 128, Hkv 128, D 128, max 163840, 0 sliding [], KV B/tok 70272, dtype bfloat16, MLA 512+64", 671, 8},
		{"qwen2.5-7b-instruct.json", "arch qwen2, L 28, H 28, Hkv 4, D 128, max 32768, 0 sliding [], KV B/tok 57344, dtype bfloat16", 7.62, 16},
		{"mistral-7b-v0.1.json", "arch mistral, L 32, H 32, Hkv 8, D 128, max 32768, 32 sliding [4096], KV B/tok 131072, dtype bfloat16", 7.24, 16},
	} {
		t.Run(tc.file, func(t *testing.T) {
			m, err := LoadConfig(filepath.Join("testdata", "configs", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if got := geometry(m); got != tc.want {
				t.Errorf("geometry:\n got %s\nwant %s", got, tc.want)
			}
			if tc.params > 0 {
				if got := float64(m.Params) / 1e9; math.Abs(got/tc.params-1) > 0.025 {
					t.Errorf("params = %.3fB, want %.3gB ± 2.5%%", got, tc.params)
				}
				if bits := float64(m.WeightsBytesTotal()) * 8 / float64(m.Params); math.Abs(bits/tc.bits-1) > 0.1 {
					t.Errorf("weight bits per parameter = %.2f, want about %v", bits, tc.bits)
				}
			}
		})
	}
	t.Run("llama-3.1-8b exact params", func(t *testing.T) {
		m, err := LoadConfig(filepath.Join("testdata", "configs", "llama-3.1-8b.json"))
		if err != nil {
			t.Fatal(err)
		}
		if m.Params != 8030261248 {
			t.Errorf("params = %d, want 8,030,261,248", m.Params)
		}
	})
	t.Run("gemma-2 pattern", func(t *testing.T) {
		m, _ := LoadConfig(filepath.Join("testdata", "configs", "gemma-2-9b.json"))
		if m.Window(0) != 4096 || m.Window(1) != 0 {
			t.Errorf("layer 0 window %d, layer 1 window %d; want 4096 (local) then 0 (global)", m.Window(0), m.Window(1))
		}
	})
	t.Run("gemma-3 pattern", func(t *testing.T) {
		m, _ := LoadConfig(filepath.Join("testdata", "configs", "gemma-3-27b-it.json"))
		for i := 0; i < 12; i++ {
			if global := m.Window(i) == 0; global != (i == 5 || i == 11) {
				t.Errorf("layer %d window %d", i, m.Window(i))
			}
		}
	})
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		file string
		want error
		msg  string
	}{
		{"malformed.json", ErrConfig, "not a JSON object"},
		{"missing-layers.json", ErrConfig, `missing "num_hidden_layers"`},
		{"bad-heads.json", ErrConfig, "not a multiple of num_key_value_heads"},
		{"bad-layer-types.json", ErrConfig, "layer_types has 2 entries for 4 layers"},
		{"float-layers.json", ErrConfig, "not a non-negative integer"},
		{"jamba.json", ErrUnsupported, "recurrent"},
		{"absent.json", fs.ErrNotExist, "absent.json"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			_, err := LoadConfig(filepath.Join("testdata", "configs", tc.file))
			if !errors.Is(err, tc.want) || !strings.Contains(fmt.Sprint(err), tc.msg) {
				t.Errorf("LoadConfig(%s) error = %v, want %v mentioning %q", tc.file, err, tc.want, tc.msg)
			}
		})
	}
	for _, tc := range []struct{ name, json, msg string }{
		{"array", `[1, 2]`, "not a JSON object"},
		{"heads zero", `{"num_hidden_layers": 2, "num_attention_heads": 0, "hidden_size": 8}`, "num_attention_heads is 0"},
		{"negative", `{"num_hidden_layers": -2, "num_attention_heads": 2, "hidden_size": 8}`, "not a non-negative integer"},
		{"string", `{"num_hidden_layers": "32", "num_attention_heads": 2, "hidden_size": 8}`, "not a number"},
		{"no head dim", `{"num_hidden_layers": 2, "num_attention_heads": 2}`, "no head_dim"},
		{"huge", `{"num_hidden_layers": 1e12, "num_attention_heads": 2, "hidden_size": 8}`, "not a non-negative integer"},
		{"too many layers", `{"num_hidden_layers": 100000, "num_attention_heads": 2, "hidden_size": 8}`, "out of range"},
		{"text_config", `{"text_config": 3}`, "text_config is not an object"},
		{"layer type", `{"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 8, "sliding_window": 4, "layer_types": ["mamba", "full_attention"]}`, "mamba"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.json))
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("ParseConfig(%s) error = %v, want it to mention %q", tc.json, err, tc.msg)
			}
		})
	}
}

// writeSafetensors writes a safetensors file holding the given tensors
// (name → shape) in dtype.
func writeSafetensors(t *testing.T, path, dtype string, elemBytes int, tensors map[string][]int64) int64 {
	t.Helper()
	hdr := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var off int64
	for _, name := range sortedKeys(tensors) {
		n := int64(elemBytes)
		for _, d := range tensors[name] {
			n *= d
		}
		hdr[name] = map[string]any{"dtype": dtype, "shape": tensors[name], "data_offsets": []int64{off, off + n}}
		off += n
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(js)))
	b.Write(js)
	b.Write(make([]byte, off))
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return off
}

func sortedKeys(m map[string][]int64) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	cfg := `{"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
		"hidden_size": 32, "intermediate_size": 64, "vocab_size": 100, "max_position_embeddings": 256, "torch_dtype": "bfloat16"}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	a := writeSafetensors(t, filepath.Join(dir, "model-00001-of-00002.safetensors"), "BF16", 2, map[string][]int64{
		"model.embed_tokens.weight": {100, 32}, "model.layers.0.self_attn.q_proj.weight": {32, 32},
	})
	b := writeSafetensors(t, filepath.Join(dir, "model-00002-of-00002.safetensors"), "F32", 4, map[string][]int64{
		"lm_head.weight": {100, 32}, "model.norm.weight": {32},
	})
	m, err := LoadDir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.WeightsBytes != a+b || m.Params != 100*32+32*32+100*32+32 || m.Source != "config.json+safetensors" || m.Layers != 2 {
		t.Errorf("LoadDir: weights %d B, %d params, source %s; want %d B, %d params", m.WeightsBytes, m.Params, m.Source, a+b, 100*32+32*32+100*32+32)
	}
	// Load picks the directory up as well.
	if m2, err := Load(context.Background(), dir); err != nil || m2.WeightsBytes != m.WeightsBytes {
		t.Errorf("Load(dir) = %d B, %v", m2.WeightsBytes, err)
	}

	t.Run("index only", func(t *testing.T) {
		d := t.TempDir()
		os.WriteFile(filepath.Join(d, "config.json"), []byte(cfg), 0o644)
		os.WriteFile(filepath.Join(d, "model.safetensors.index.json"), []byte(`{"metadata": {"total_size": 16060522496}, "weight_map": {}}`), 0o644)
		m, err := LoadDir(context.Background(), d)
		if err != nil || m.WeightsBytes != 16060522496 {
			t.Errorf("LoadDir with index = %d B, %v; want 16,060,522,496", m.WeightsBytes, err)
		}
	})
	t.Run("no config", func(t *testing.T) {
		if _, err := LoadDir(context.Background(), t.TempDir()); !errors.Is(err, ErrConfig) {
			t.Errorf("LoadDir(empty) error = %v, want ErrConfig", err)
		}
	})
	t.Run("corrupt safetensors", func(t *testing.T) {
		for name, data := range map[string][]byte{
			"short":       {1, 2, 3},
			"huge header": binary.LittleEndian.AppendUint64(nil, 1<<40),
			"not json":    append(binary.LittleEndian.AppendUint64(nil, 3), "abc"...),
			"bad offsets": append(binary.LittleEndian.AppendUint64(nil, 58), `{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,1600]}}`...),
			"bad size":    append(binary.LittleEndian.AppendUint64(nil, 56), `{"w":{"dtype":"F32","shape":[8],"data_offsets":[0,16]}}`+strings.Repeat("\x00", 16)...),
			"negative":    append(binary.LittleEndian.AppendUint64(nil, 55), `{"w":{"dtype":"F32","shape":[-4],"data_offsets":[0,0]}}`...),
		} {
			t.Run(name, func(t *testing.T) {
				_, err := readSafetensors(bytes.NewReader(data), int64(len(data)))
				if !errors.Is(err, ErrConfig) {
					t.Errorf("readSafetensors(%s) error = %v, want ErrConfig", name, err)
				}
			})
		}
	})
}

// writeGGUF writes a header-only-sized GGUF model with our gguf.Writer.
func writeGGUF(t *testing.T, arch string, kv func(w *gguf.Writer)) string {
	t.Helper()
	w := gguf.NewWriter(3)
	w.AddString("general.architecture", arch)
	kv(w)
	if err := w.AddTensor("token_embd.weight", gguf.F32, []uint64{8, 4}, make([]byte, 8*4*4)); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), arch+".gguf")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadGGUF(t *testing.T) {
	for _, tc := range []struct {
		name string
		arch string
		kv   func(w *gguf.Writer)
		want string
	}{
		{"llama", "llama", func(w *gguf.Writer) {
			w.AddUint32("llama.block_count", 2)
			w.AddUint32("llama.embedding_length", 8)
			w.AddUint32("llama.attention.head_count", 4)
			w.AddUint32("llama.attention.head_count_kv", 2)
			w.AddUint32("llama.context_length", 512)
		}, "arch llama, L 2, H 4, Hkv 2, D 2, max 512, 0 sliding [], KV B/tok 32, dtype float16"},
		{"gemma2 sliding", "gemma2", func(w *gguf.Writer) {
			w.AddUint32("gemma2.block_count", 4)
			w.AddUint32("gemma2.embedding_length", 64)
			w.AddUint32("gemma2.attention.head_count", 4)
			w.AddUint32("gemma2.attention.head_count_kv", 2)
			w.AddUint32("gemma2.attention.key_length", 32)
			w.AddUint32("gemma2.attention.value_length", 32)
			w.AddUint32("gemma2.context_length", 8192)
			w.AddUint32("gemma2.attention.sliding_window", 4096)
		}, "arch gemma2, L 4, H 4, Hkv 2, D 32, max 8192, 2 sliding [4096], KV B/tok 1024, dtype float16"},
		{"per-layer pattern", "gpt-oss", func(w *gguf.Writer) {
			w.AddUint32("gpt-oss.block_count", 3)
			w.AddUint32("gpt-oss.embedding_length", 64)
			w.AddInt32s("gpt-oss.attention.head_count", []int32{8, 8, 8})
			w.AddUint32("gpt-oss.attention.head_count_kv", 2)
			w.AddUint32("gpt-oss.context_length", 4096)
			w.AddUint32("gpt-oss.attention.sliding_window", 128)
			w.AddKV("gpt-oss.attention.sliding_window_pattern", gguf.ArrayOf([]bool{true, true, false}))
		}, "arch gpt-oss, L 3, H 8, Hkv 2, D 8, max 4096, 2 sliding [128], KV B/tok 192, dtype float16"},
		{"deepseek2 MLA", "deepseek2", func(w *gguf.Writer) {
			w.AddUint32("deepseek2.block_count", 27)
			w.AddUint32("deepseek2.embedding_length", 2048)
			w.AddUint32("deepseek2.attention.head_count", 16)
			w.AddUint32("deepseek2.attention.head_count_kv", 16)
			w.AddUint32("deepseek2.attention.key_length", 192)
			w.AddUint32("deepseek2.attention.value_length", 128)
			w.AddUint32("deepseek2.attention.kv_lora_rank", 512)
			w.AddUint32("deepseek2.rope.dimension_count", 64)
			w.AddUint32("deepseek2.context_length", 163840)
		}, "arch deepseek2, L 27, H 16, Hkv 16, D 128, max 163840, 0 sliding [], KV B/tok 31104, dtype float16, MLA 512+64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeGGUF(t, tc.arch, tc.kv)
			m, err := Load(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			if got := geometry(m); got != tc.want {
				t.Errorf("geometry:\n got %s\nwant %s", got, tc.want)
			}
			if m.Params != 32 || m.WeightsBytes != 128 || m.Source != "gguf" {
				t.Errorf("params %d, weights %d, source %s; want 32, 128, gguf", m.Params, m.WeightsBytes, m.Source)
			}
		})
	}
	for _, tc := range []struct {
		name string
		kv   func(w *gguf.Writer)
		want error
	}{
		{"no block count", func(w *gguf.Writer) { w.AddUint32("llama.embedding_length", 8) }, ErrConfig},
		{"recurrent layers", func(w *gguf.Writer) {
			w.AddUint32("llama.block_count", 2)
			w.AddUint32("llama.embedding_length", 8)
			w.AddUint32("llama.attention.head_count", 4)
			w.AddInt32s("llama.attention.head_count_kv", []int32{0, 2})
		}, ErrUnsupported},
		{"K and V sizes differ", func(w *gguf.Writer) {
			w.AddUint32("llama.block_count", 2)
			w.AddUint32("llama.embedding_length", 8)
			w.AddUint32("llama.attention.head_count", 4)
			w.AddUint32("llama.attention.key_length", 4)
			w.AddUint32("llama.attention.value_length", 2)
		}, ErrUnsupported},
		{"wrong type", func(w *gguf.Writer) {
			w.AddString("llama.block_count", "two")
		}, ErrConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadGGUF(writeGGUF(t, "llama", tc.kv))
			if !errors.Is(err, tc.want) {
				t.Errorf("LoadGGUF() error = %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("truncated", func(t *testing.T) {
		if _, err := ReadGGUF(bytes.NewReader([]byte("GGUF\x03\x00")), 6); !errors.Is(err, ErrConfig) || !errors.Is(err, gguf.ErrTruncated) {
			t.Errorf("ReadGGUF(truncated) error = %v, want ErrConfig and gguf.ErrTruncated", err)
		}
	})
}

func TestLoad(t *testing.T) {
	for _, tc := range []struct {
		ref  string
		name string
		want error
	}{
		{"llama-3.1-8b", "llama-3.1-8b", nil},
		{filepath.Join("testdata", "configs", "gemma-2-9b.json"), filepath.Join("testdata", "configs", "gemma-2-9b.json"), nil},
		{"./missing/config.json", "", fs.ErrNotExist},
		{"missing.gguf", "", fs.ErrNotExist},
		{"llama-9", "", ErrUnknownModel},
	} {
		m, err := Load(context.Background(), tc.ref)
		if !errors.Is(err, tc.want) || (err == nil && m.Name != tc.name) {
			t.Errorf("Load(%q) = %q, %v; want %q, %v", tc.ref, m.Name, err, tc.name, tc.want)
		}
	}
}

// FuzzParseConfig checks that no config.json makes the parser panic, and
// that what it accepts is a valid model the estimator can plan for.
func FuzzParseConfig(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "configs", "*.json"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	fp16 := []byte(`fp16`)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseConfig(data)
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("ParseConfig accepted an invalid model: %v", err)
		}
		if m.Layers*max(m.KVHeads, 1) > 4096 {
			return // valid, but too large to plan quickly in a fuzz loop
		}
		spec, _ := quantSpec(string(fp16))
		_, _ = Estimate(context.Background(), Plan{Model: m, Caches: spec, MaxModelLen: 4096})
	})
}
