package modeltest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/gguf"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// dequantizeModel replaces every packed weight of m by its float32 values,
// decoded as ggml does (gguf.DequantizeRow).
func dequantizeModel(t *testing.T, m *runtime.Model) {
	t.Helper()
	ws := []*tensor.Weight{m.Embed, m.Output}
	for i := range m.Layers {
		l := &m.Layers[i]
		ws = append(ws, l.Wq, l.Wk, l.Wv, l.Wo, l.Gate, l.Up, l.Down)
	}
	for _, w := range ws {
		if w == nil || !w.DType.Packed() {
			continue
		}
		gt, ok := ggufBlockType(w.DType.String())
		if !ok {
			t.Fatalf("%s: no gguf type for %v", w.Name, w.DType)
		}
		v := make([]float32, w.Rows*w.Cols)
		rb := w.DType.RowBytes(w.Cols)
		for r := 0; r < w.Rows; r++ {
			gguf.DequantizeRow(gt, v[r*w.Cols:(r+1)*w.Cols], w.Raw[r*rb:(r+1)*rb])
		}
		*w = tensor.Weight{Name: w.Name, DType: tensor.F32, Rows: w.Rows, Cols: w.Cols, F32: v}
	}
}

// TestWriteGGUFBlockTypes: a model WriteGGUF quantizes to each GGML block
// type (or llama-quantize's Q4_K_M and Q5_K_M mixes) loads with its
// matrices in that type, and its logits over a prompt
// (prefill and one-token steps through the packed matrix products) match
// those of the same model with every matrix decoded to float32 beforehand,
// up to float32 summation order.
func TestWriteGGUFBlockTypes(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS", "MXFP4", "Q4_K_M", "Q5_K_M"} {
		t.Run(name, func(t *testing.T) {
			spec := Spec{Arch: "llama", Seed: 5, Dim: 256, Hidden: 512, Layers: 1, Heads: 4, KVHeads: 2, HeadDim: 64, Context: 64, DType: name}
			path := dir + "/" + name + ".gguf"
			if err := WriteGGUF(path, spec); err != nil {
				t.Fatal(err)
			}
			load := func() *runtime.Model {
				m, err := runtime.Load(t.Context(), path, runtime.LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { m.Close() })
				return m
			}
			mq, mf := load(), load()
			// A mix's one layer is in use_more_bits' last eighth: its
			// attn_v and ffn_down are q6_K, as is the output head.
			wantQ, wantDown := name, name
			if name == "Q4_K_M" || name == "Q5_K_M" {
				wantQ, wantDown = name[:4], "Q6_K"
			}
			for _, w := range []struct {
				w    *tensor.Weight
				want string
			}{{mq.Layers[0].Wq, wantQ}, {mq.Layers[0].Down, wantDown}, {mq.Layers[0].Wv, wantDown}, {mq.Output, map[bool]string{true: "Q6_K", false: name}[wantQ != name]}} {
				if got := w.w.DType.String(); got != w.want {
					t.Fatalf("%s is %s, want %s", w.w.Name, got, w.want)
				}
			}
			dequantizeModel(t, mf)
			ids := mq.Tokenizer.Encode("the cat sat on the mat", true)
			// logits runs the prompt as one prefill (every position's
			// logits), then one decode step of token 5, on the CPU backend
			// with float32 activations: its decode products of the k-quants,
			// the legacy types, iq4_nl and mxfp4 otherwise take Q8_K or
			// Q8_0/Q8_1 activations, as llama.cpp's do, which moves the
			// step's logits by up to 0.1 here (pkg/runtime/cpu tests that
			// path against its twins).
			logits := func(m *runtime.Model) []float32 {
				r, err := runtime.NewRunner(m, runtime.RunnerOptions{Backend: cpu.New(0).F32Activations()})
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				spec, err := quant.Formats().ParseSpec("fp32")
				if err != nil {
					t.Fatal(err)
				}
				layout, err := kvcache.NewLayout(m.Geometry(), spec, 0)
				if err != nil {
					t.Fatal(err)
				}
				c, err := r.NewCache(layout, kvcache.Options{Blocks: 4})
				if err != nil {
					t.Fatal(err)
				}
				if err := c.AddSeq(0); err != nil {
					t.Fatal(err)
				}
				pre, err := r.Forward(t.Context(), []runtime.Entry{{Cache: c, Seq: 0, Tokens: ids, Logits: runtime.AllLogits}})
				if err != nil {
					t.Fatal(err)
				}
				dec, err := r.Forward(t.Context(), []runtime.Entry{{Cache: c, Seq: 0, Tokens: []int{5}, Logits: runtime.LastLogits}})
				if err != nil {
					t.Fatal(err)
				}
				return append(pre[0], dec[0]...)
			}
			got, want := logits(mq), logits(mf)
			if len(got) != len(want) || len(got) != (len(ids)+1)*mq.Vocab {
				t.Fatalf("%d and %d logits, want %d", len(got), len(want), (len(ids)+1)*mq.Vocab)
			}
			var worst float64
			for i := range got {
				worst = max(worst, math.Abs(float64(got[i]-want[i])))
			}
			if worst > 1e-4 {
				t.Errorf("packed %s logits differ from the decoded model's by up to %g", name, worst)
			}
		})
	}
}

// TestLoadRefusesUnrunTypes: a GGUF holding a type kvq does not run (here
// iq3_s, patched over a q3_K tensor of the same block size) is refused at
// load with ErrUnsupported (exit 2 in the CLI), naming the tensor and the
// type.
func TestLoadRefusesUnrunTypes(t *testing.T) {
	path := t.TempDir() + "/m.gguf"
	spec := Spec{Arch: "llama", Seed: 5, Dim: 256, Hidden: 256, Layers: 1, Heads: 4, KVHeads: 2, HeadDim: 64, Context: 64, DType: "Q3_K"}
	if err := WriteGGUF(path, spec); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// tensor info: name, n_dims u32 (2), two u64 dims, type u32
	name := "blk.0.ffn_down.weight"
	at := bytes.Index(b, []byte(name))
	if at < 0 {
		t.Fatal("tensor info not found")
	}
	typ := at + len(name) + 4 + 16
	if got := binary.LittleEndian.Uint32(b[typ:]); got != uint32(gguf.Q3K) {
		t.Fatalf("type field holds %d, want q3_K's %d", got, gguf.Q3K)
	}
	binary.LittleEndian.PutUint32(b[typ:], uint32(gguf.IQ3S))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := runtime.Load(t.Context(), path, runtime.LoadOptions{})
	if err == nil {
		m.Close()
		t.Fatal("loaded a model with an iq3_s tensor")
	}
	if !errors.Is(err, runtime.ErrUnsupported) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "iq3_s") {
		t.Errorf("Load: %v, want ErrUnsupported naming %s and iq3_s", err, name)
	}
}

// TestKMixType pins the Q4_K_M/Q5_K_M rules kMixType follows (a tiny
// model's and a 90M one's mixes were byte-identical to llama-quantize's).
func TestKMixType(t *testing.T) {
	for _, c := range []struct {
		name string
		base gguf.Type
		cols int
		tied bool
		want gguf.Type
	}{
		{"output.weight", gguf.Q4K, 256, false, gguf.Q6K},
		{"output.weight", gguf.Q4K, 64, false, gguf.Q80},
		{"token_embd.weight", gguf.Q4K, 256, false, gguf.Q4K},
		{"token_embd.weight", gguf.Q4K, 256, true, gguf.Q6K},
		{"blk.0.ffn_down.weight", gguf.Q4K, 256, false, gguf.Q6K},
		{"blk.1.ffn_down.weight", gguf.Q4K, 256, false, gguf.Q4K},
		{"blk.3.attn_v.weight", gguf.Q5K, 256, false, gguf.Q6K},
		{"blk.7.attn_v.weight", gguf.Q5K, 256, false, gguf.Q6K},
		{"blk.5.attn_q.weight", gguf.Q5K, 256, false, gguf.Q5K},
		{"blk.0.ffn_down.weight", gguf.Q4K, 96, false, gguf.Q80},
		{"blk.1.ffn_down.weight", gguf.Q4K, 96, false, gguf.Q50},
		{"blk.1.ffn_up.weight", gguf.Q5K, 64, false, gguf.Q51},
		{"blk.1.ffn_down.weight", gguf.Q4K, 48, false, gguf.F16},
	} {
		if got := kMixType(c.name, c.base, c.cols, 8, c.tied); got != c.want {
			t.Errorf("kMixType(%s, %v, %d cols, tied %v) = %v, want %v", c.name, c.base, c.cols, c.tied, got, c.want)
		}
	}
}
