package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kvqlabs/kvq/internal/mmap"
	"github.com/kvqlabs/kvq/pkg/llama2c"
	"github.com/kvqlabs/kvq/pkg/tensor"
	"github.com/kvqlabs/kvq/pkg/tokenizer"
)

func loadLlama2C(_ context.Context, f *mmap.File, path string, opts LoadOptions) (*Model, error) {
	lf, err := llama2c.Parse(f, f.Size())
	if err != nil {
		// The format has no magic number: a file that is not GGUF and whose
		// first 28 bytes are no plausible llama2.c header, or whose size
		// disagrees with it, is neither.
		return nil, fmt.Errorf("%w: %s (%d bytes) is neither GGUF nor a well-formed llama2.c checkpoint: %w", ErrFormat, path, f.Size(), err)
	}
	c := lf.Config
	m := &Model{
		Config: Config{
			Arch: "llama", Dim: c.Dim, Hidden: c.Hidden, Layers: c.Layers, Heads: c.Heads, KVHeads: c.KVHeads,
			HeadDim: c.HeadDim(), Vocab: c.Vocab, ContextLen: c.SeqLen, RMSEps: 1e-5, RopeTheta: 10000,
			TiedEmbeddings: c.SharedClassifier,
		},
		Path: path, Format: "llama2c",
	}
	data := func(name string) ([]byte, llama2c.Tensor) {
		t, _ := lf.Tensor(name)
		return f.Data[t.Offset : t.Offset+4*t.Elems()], t
	}
	// perLayer slices a stacked [L][rows][cols] tensor.
	perLayer := func(name string, l int) (*tensor.Weight, error) {
		b, t := data(name)
		rows, cols := t.Shape[1], t.Shape[2]
		sz := 4 * rows * cols
		return newWeight(fmt.Sprintf("%s[%d]", name, l), tensor.F32, rows, cols, b[l*sz:(l+1)*sz])
	}
	vecLayer := func(name string, l int) []float32 {
		b, t := data(name)
		d := t.Shape[1]
		return f32s(b[4*l*d : 4*(l+1)*d])
	}
	eb, et := data("token_embedding_table")
	if m.Embed, err = newWeight("token_embedding_table", tensor.F32, et.Shape[0], et.Shape[1], eb); err != nil {
		return nil, err
	}
	m.Output = m.Embed
	if !c.SharedClassifier {
		wb, wt := data("wcls")
		if m.Output, err = newWeight("wcls", tensor.F32, wt.Shape[0], wt.Shape[1], wb); err != nil {
			return nil, err
		}
	}
	nb, _ := data("rms_final_weight")
	m.Norm = f32s(nb)
	m.Layers = make([]Layer, c.Layers)
	for i := range m.Layers {
		l := &m.Layers[i]
		l.AttnNorm = vecLayer("rms_att_weight", i)
		l.FFNNorm = vecLayer("rms_ffn_weight", i)
		for _, p := range []struct {
			dst  **tensor.Weight
			name string
		}{{&l.Wq, "wq"}, {&l.Wk, "wk"}, {&l.Wv, "wv"}, {&l.Wo, "wo"}, {&l.Gate, "w1"}, {&l.Down, "w2"}, {&l.Up, "w3"}} {
			if *p.dst, err = perLayer(p.name, i); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		}
	}
	if err := m.Prepare(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	tokPath, err := findTokenizer(path, opts.Tokenizer)
	if err != nil {
		return nil, err
	}
	tf, err := os.Open(tokPath)
	if err != nil {
		return nil, fmt.Errorf("runtime: tokenizer: %w", err)
	}
	defer tf.Close()
	st, err := tf.Stat()
	if err != nil {
		return nil, fmt.Errorf("runtime: tokenizer: %w", err)
	}
	v, err := tokenizer.ParseLlama2C(tf, st.Size(), c.Vocab)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tokPath, err)
	}
	if m.Tokenizer, err = tokenizer.New(v); err != nil {
		return nil, fmt.Errorf("%s: %w", tokPath, err)
	}
	return m, nil
}

// findTokenizer resolves the llama2.c tokenizer file for a checkpoint.
func findTokenizer(model, explicit string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	dir := filepath.Dir(model)
	cand := filepath.Join(dir, "tokenizer.bin")
	if _, err := os.Stat(cand); err == nil {
		return cand, nil
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "tok*.bin"))
	if len(matches) == 1 {
		return matches[0], nil
	}
	return "", fmt.Errorf("runtime: %s is a llama2.c checkpoint, which keeps its tokenizer in a separate file: pass --tokenizer (no tokenizer.bin or single tok*.bin found in %s)", model, dir)
}
