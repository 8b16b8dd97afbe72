package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/internal/testutil"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

const storiesContinuation = ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high.\nLily's mom said"

func newCache(t testing.TB, r *runtime.Runner, spec string, blocks int) *kvcache.Cache {
	t.Helper()
	s, err := quant.Formats().ParseSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	l, err := kvcache.NewLayout(r.Model().Geometry(), s, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.NewCache(l, kvcache.Options{Blocks: blocks})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newRunner(t testing.TB, m *runtime.Model) *runtime.Runner {
	t.Helper()
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestStories260KGreedy(t *testing.T) {
	bin, tok, gguf := testutil.Stories260K(t)
	for _, tc := range []struct {
		name, path string
		opts       runtime.LoadOptions
	}{
		{"llama2c", bin, runtime.LoadOptions{Tokenizer: tok}},
		{"gguf", gguf, runtime.LoadOptions{}},
	} {
		for _, spec := range []string{"fp32", "fp16"} {
			t.Run(tc.name+"/"+spec, func(t *testing.T) {
				m, err := runtime.Load(context.Background(), tc.path, tc.opts)
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				prompt := m.Tokenizer.Encode("Once upon a time", true)
				if want := []int{1, 403, 407, 261, 378}; !equalInts(prompt, want) {
					t.Fatalf("Encode(%q) = %v, want %v", "Once upon a time", prompt, want)
				}
				r := newRunner(t, m)
				c := newCache(t, r, spec, 8)
				if err := c.AddSeq(0); err != nil {
					t.Fatal(err)
				}
				out, _, err := r.Generate(context.Background(), c, 0, prompt, runtime.GenerateOptions{MaxTokens: 64})
				if err != nil {
					t.Fatal(err)
				}
				got := m.Tokenizer.Decode(append([]int{prompt[len(prompt)-1]}, out...))
				got = strings.TrimPrefix(got, m.Tokenizer.Decode([]int{prompt[len(prompt)-1]}))
				if got != storiesContinuation {
					t.Errorf("greedy continuation =\n%q\nwant\n%q", got, storiesContinuation)
				}
			})
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func smallModel(t testing.TB, dt tensor.DType) *runtime.Model {
	t.Helper()
	m, err := modeltest.RandomModel(runtime.Config{Dim: 64, Hidden: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, Vocab: 97, ContextLen: 256}, dt, 7)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func tokens(n, vocab, seed int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = (i*31 + seed*17 + i*i) % vocab
	}
	return ids
}

// maxRelDiff is max|a-b| / max|b|.
func maxRelDiff(a, b []float32) float64 {
	var d, m float64
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i]-b[i])))
		m = math.Max(m, math.Abs(float64(b[i])))
	}
	return d / m
}

// forward runs the batch with every entry in cache c.
func forward(t testing.TB, r *runtime.Runner, c *kvcache.Cache, batch ...runtime.Entry) [][]float32 {
	t.Helper()
	for i := range batch {
		batch[i].Cache = c
	}
	out, err := r.Forward(context.Background(), batch)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCacheDTypesAgree(t *testing.T) {
	m := smallModel(t, tensor.F32)
	r := newRunner(t, m)
	ids := tokens(40, m.Vocab, 1)
	logits := map[string][]float32{}
	for _, spec := range []string{"fp32", "fp16", "bf16"} {
		c := newCache(t, r, spec, 4)
		if err := c.AddSeq(0); err != nil {
			t.Fatal(err)
		}
		logits[spec] = forward(t, r, c, runtime.Entry{Seq: 0, Tokens: ids, Logits: runtime.AllLogits})[0]
	}
	// Stated tolerances, relative to the largest logit: fp16 keeps 11
	// significant bits, bf16 8.
	for spec, tol := range map[string]float64{"fp16": 2e-3, "bf16": 2e-2} {
		if d := maxRelDiff(logits[spec], logits["fp32"]); d > tol || d == 0 {
			t.Errorf("%s cache vs fp32: max relative logit difference %.2g, want in (0, %g]", spec, d, tol)
		}
	}
}

// TestPrefillEqualsIncremental: a prompt's logits in one batch equal those
// of one token at a time. Q8_0's decode products quantize the activations
// (as llama.cpp's) where its prefill keeps them in float32, so there the
// two differ by the activations' rounding (0.013 measured); with
// F32Activations they agree as the other types do.
func TestPrefillEqualsIncremental(t *testing.T) {
	type variant struct {
		dt   tensor.DType
		f32  bool
		tol  float64
		name string
	}
	vs := []variant{{tensor.F32, false, 1e-5, "F32"}, {tensor.F16, false, 1e-5, "F16"}, {tensor.BF16, false, 1e-5, "BF16"},
		{tensor.Q80, false, 0.05, "Q8_0"}, {tensor.Q80, true, 1e-5, "Q8_0/F32Activations"}}
	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			m := smallModel(t, v.dt)
			var opts runtime.RunnerOptions
			if v.f32 {
				opts.Backend = cpu.New(0).F32Activations()
			}
			r, err := runtime.NewRunner(m, opts)
			if err != nil {
				t.Fatal(err)
			}
			ids := tokens(37, m.Vocab, 2)
			c1 := newCache(t, r, "fp32", 4)
			c2 := newCache(t, r, "fp32", 4)
			_ = c1.AddSeq(0)
			_ = c2.AddSeq(0)
			all := forward(t, r, c1, runtime.Entry{Seq: 0, Tokens: ids, Logits: runtime.AllLogits})[0]
			for i, id := range ids {
				got := forward(t, r, c2, runtime.Entry{Seq: 0, Tokens: []int{id}})[0]
				want := all[i*m.Vocab : (i+1)*m.Vocab]
				if d := maxRelDiff(got, want); d > v.tol {
					t.Fatalf("token %d: incremental vs batched prefill logits differ by %.2g", i, d)
				}
			}
		})
	}
}

func TestBatchedDecodeEqualsSequential(t *testing.T) {
	m := smallModel(t, tensor.F16)
	r := newRunner(t, m)
	lens := []int{3, 17, 33}
	batched := newCache(t, r, "fp16", 16)
	single := newCache(t, r, "fp16", 16)
	next := make([]int, len(lens))
	for i, n := range lens {
		id := kvcache.SeqID(i)
		_ = batched.AddSeq(id)
		_ = single.AddSeq(id)
		p := tokens(n, m.Vocab, i)
		a := forward(t, r, batched, runtime.Entry{Seq: id, Tokens: p})[0]
		forward(t, r, single, runtime.Entry{Seq: id, Tokens: p})
		next[i] = runtime.Argmax(a)
	}
	for step := 0; step < 5; step++ {
		var batch []runtime.Entry
		for i := range lens {
			batch = append(batch, runtime.Entry{Seq: kvcache.SeqID(i), Tokens: []int{next[i]}})
		}
		out := forward(t, r, batched, batch...)
		for i := range lens {
			want := forward(t, r, single, batch[i])[0]
			if d := maxRelDiff(out[i], want); d > 1e-5 {
				t.Fatalf("step %d seq %d: batched decode differs from single by %.2g", step, i, d)
			}
			next[i] = runtime.Argmax(out[i])
		}
	}
}

func TestForkContinuesLikeUnforked(t *testing.T) {
	m := smallModel(t, tensor.F32)
	r := newRunner(t, m)
	c := newCache(t, r, "fp16", 16)
	prefix, cont := tokens(21, m.Vocab, 3), tokens(12, m.Vocab, 4)
	_ = c.AddSeq(0)
	forward(t, r, c, runtime.Entry{Seq: 0, Tokens: prefix})
	if err := c.Fork(1, 0); err != nil {
		t.Fatal(err)
	}
	_ = c.AddSeq(2)
	forward(t, r, c, runtime.Entry{Seq: 2, Tokens: prefix})
	a := forward(t, r, c, runtime.Entry{Seq: 1, Tokens: cont, Logits: runtime.AllLogits})[0]
	b := forward(t, r, c, runtime.Entry{Seq: 2, Tokens: cont, Logits: runtime.AllLogits})[0]
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("forked sequence logit %d = %v, unforked %v", i, a[i], b[i])
		}
	}
}

func TestForwardErrors(t *testing.T) {
	m := smallModel(t, tensor.F32)
	r := newRunner(t, m)
	c := newCache(t, r, "fp16", 2)
	_ = c.AddSeq(0)
	if _, err := r.Forward(context.Background(), []runtime.Entry{{Cache: c, Seq: 0, Tokens: []int{m.Vocab}}}); !errors.Is(err, runtime.ErrTokenID) || !errors.Is(err, runtime.ErrInput) {
		t.Errorf("token outside the vocabulary: %v, want ErrTokenID (an ErrInput)", err)
	}
	if _, err := r.Forward(context.Background(), []runtime.Entry{{Cache: c, Seq: 9, Tokens: []int{1}}}); !errors.Is(err, kvcache.ErrNoSequence) || !errors.Is(err, runtime.ErrInput) {
		t.Errorf("unknown sequence: %v, want kvcache.ErrNoSequence (an ErrInput)", err)
	}
	if _, err := r.Forward(context.Background(), nil); !errors.Is(err, runtime.ErrEmptyBatch) || !errors.Is(err, runtime.ErrInput) {
		t.Errorf("empty batch: %v, want ErrEmptyBatch (an ErrInput)", err)
	}
	if _, err := r.Forward(context.Background(), []runtime.Entry{{Cache: c, Seq: 0, Tokens: []int{1}}, {Cache: c, Seq: 0, Tokens: []int{2}}}); !errors.Is(err, runtime.ErrBatch) {
		t.Errorf("a sequence twice: %v, want ErrBatch", err)
	}
	if _, err := r.Forward(context.Background(), []runtime.Entry{{Cache: c, Seq: 0}}); !errors.Is(err, runtime.ErrBatch) {
		t.Errorf("an entry without tokens: %v, want ErrBatch", err)
	}
	if _, err := r.Forward(context.Background(), []runtime.Entry{{Seq: 0, Tokens: []int{1}}}); !errors.Is(err, runtime.ErrBatch) {
		t.Errorf("an entry without a cache: %v, want ErrBatch", err)
	}
	big := newCache(t, r, "fp16", 20)
	_ = big.AddSeq(0)
	if _, err := r.Forward(context.Background(), []runtime.Entry{{Cache: big, Seq: 0, Tokens: tokens(m.ContextLen+1, m.Vocab, 0)}}); !errors.Is(err, runtime.ErrContext) || !errors.Is(err, runtime.ErrInput) {
		t.Errorf("%d tokens in a %d-token context: %v, want ErrContext (an ErrInput)", m.ContextLen+1, m.ContextLen, err)
	}
	_, err := r.Forward(context.Background(), []runtime.Entry{{Cache: c, Seq: 0, Tokens: tokens(40, m.Vocab, 0)}})
	if errors.Is(err, runtime.ErrInput) {
		t.Errorf("a full cache is not an input error: %v", err)
	}
	var fe *kvcache.FullError
	if !asFull(err, &fe) || fe.Needed != 3 || fe.Free != 2 {
		t.Errorf("40 tokens in 2 blocks: err = %v, want FullError needing 3 with 2 free", err)
	}
	if c.Len(0) != 0 {
		t.Errorf("failed forward changed the sequence length to %d", c.Len(0))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Forward(ctx, []runtime.Entry{{Cache: c, Seq: 0, Tokens: []int{1}}}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v, want context.Canceled", err)
	}
	if c.Len(0) != 0 || c.FreeBlocks() != 2 {
		t.Errorf("cancelled forward left %d tokens and %d of 2 blocks free", c.Len(0), c.FreeBlocks())
	}
}

// preRoPE32 stores keys exactly (fp32) but before RoPE, to test the cache's
// pre-RoPE path against the ordinary one.
type preRoPE32 struct{}

func (preRoPE32) Name() string { return "prerope32" }

// Traits implements quant.Format: a test format describes nothing.
func (preRoPE32) Traits(bool) quant.Traits { return quant.Traits{} }
func (preRoPE32) NewCodec(p quant.CodecParams) (quant.Codec, error) {
	c, err := quant.FP32.NewCodec(p)
	return preRoPECodec{c}, err
}

type preRoPECodec struct{ quant.Codec }

func (preRoPECodec) PreRoPE() bool { return true }

func TestPreRoPEKeysMatchPostRoPE(t *testing.T) {
	for _, neox := range []bool{false, true} {
		m := smallModel(t, tensor.F32)
		m.RopeNeoX = neox
		r := newRunner(t, m)
		ids := tokens(45, m.Vocab, 5)
		post := newCache(t, r, "fp32", 4)
		l, err := kvcache.NewLayout(m.Geometry(), quant.Spec{K: preRoPE32{}, V: quant.FP32}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !l.PreRoPE(0) {
			t.Fatal("layout does not see the pre-RoPE codec")
		}
		pre, err := r.NewCache(l, kvcache.Options{Blocks: 4})
		if err != nil {
			t.Fatal(err)
		}
		_ = post.AddSeq(0)
		_ = pre.AddSeq(0)
		a := forward(t, r, post, runtime.Entry{Seq: 0, Tokens: ids[:30], Logits: runtime.AllLogits})[0]
		b := forward(t, r, pre, runtime.Entry{Seq: 0, Tokens: ids[:30], Logits: runtime.AllLogits})[0]
		if d := maxRelDiff(b, a); d > 1e-5 {
			t.Errorf("neox=%v prefill: pre-RoPE cache logits differ by %.2g", neox, d)
		}
		for _, id := range ids[30:] {
			a = forward(t, r, post, runtime.Entry{Seq: 0, Tokens: []int{id}})[0]
			b = forward(t, r, pre, runtime.Entry{Seq: 0, Tokens: []int{id}})[0]
			if d := maxRelDiff(b, a); d > 1e-5 {
				t.Fatalf("neox=%v decode: pre-RoPE cache logits differ by %.2g", neox, d)
			}
		}
	}
}

// TestEveryFormatRuns generates with every preset cache format on models with
// head_dim 64 and 128, prefill plus decode, checks the allocation against the
// layout, and checks the prefill logits against the fp16 cache's: within 5%
// of the largest logit for 8-bit formats (20% for fp8-e5m2) (a gross bound that catches broken
// wiring), finite for the others (random weights say nothing of quality).
func TestEveryFormatRuns(t *testing.T) {
	reg := quant.Formats()
	for _, hd := range []int{64, 128} {
		m, err := modeltest.RandomModel(runtime.Config{Dim: 64, Hidden: 64, Layers: 1, Heads: 4, KVHeads: 2, HeadDim: hd, Vocab: 64, ContextLen: 512}, tensor.F16, 3)
		if err != nil {
			t.Fatal(err)
		}
		r := newRunner(t, m)
		prompt := tokens(150, m.Vocab, 9)
		base := newCache(t, r, "fp16", 32)
		_ = base.AddSeq(0)
		want := forward(t, r, base, runtime.Entry{Seq: 0, Tokens: prompt})[0]
		for _, name := range reg.Names() {
			t.Run(fmt.Sprintf("d%d/%s", hd, name), func(t *testing.T) {
				spec, err := reg.ParseSpec(name)
				if err != nil {
					t.Fatal(err)
				}
				l, err := kvcache.NewLayout(m.Geometry(), spec, 0)
				if err != nil {
					t.Fatal(err)
				}
				c, err := r.NewCache(l, kvcache.Options{Blocks: l.BlocksFor(len(prompt) + 8)})
				if err != nil {
					t.Fatal(err)
				}
				_ = c.AddSeq(0)
				out, st, err := r.Generate(context.Background(), c, 0, prompt, runtime.GenerateOptions{MaxTokens: 8})
				if err != nil || len(out) != 8 {
					t.Fatalf("Generate: %d tokens, %v", len(out), err)
				}
				if st.KV.Allocated.Total != l.Bytes(l.BlocksFor(len(prompt)+8), 1).Total {
					t.Errorf("allocated %d bytes, layout says %d", st.KV.Allocated.Total, l.Bytes(l.BlocksFor(len(prompt)+8), 1).Total)
				}
				c2, _ := r.NewCache(l, kvcache.Options{Blocks: l.BlocksFor(len(prompt))})
				_ = c2.AddSeq(0)
				got := forward(t, r, c2, runtime.Entry{Seq: 0, Tokens: prompt})[0]
				d := maxRelDiff(got, want)
				tol := 0.05
				if strings.HasPrefix(name, "fp8-e5m2") {
					tol = 0.2 // two mantissa bits
				}
				if math.IsNaN(d) || quant.DescribeFormat(spec.K, hd).Bits >= 8 && d > tol {
					t.Errorf("prefill logits differ from fp16 by %.2g of the largest logit", d)
				}
			})
		}
	}
}

// TestCachesSideBySide runs one batch whose entries belong to four caches
// of different formats (two sequences each, one spec with K≠V and a
// per-layer override): every cache's logits equal those of the same cache
// run alone, over a prefill and decode steps, within float32 rounding (the
// matrix kernels sum in register tiles of rows, so a larger batch can
// round differently: 1e-5 of the largest logit, as batched decode; an int8
// or 4-bit cache can round such a key to another code, so 1e-3 there — with
// the Zen 4 kernel choice one int8 code of this test's keys flips, 1.6e-4;
// cross-talk between caches would show as differences of order 0.1).
func TestCachesSideBySide(t *testing.T) {
	m := smallModel(t, tensor.F16)
	r := newRunner(t, m)
	specs := []string{"fp32", "fp16", "int8", "k=int4,v=fp8,L1=fp16"}
	var caches, alone []*kvcache.Cache
	for _, s := range specs {
		for _, list := range []*[]*kvcache.Cache{&caches, &alone} {
			c := newCache(t, r, s, 8)
			_ = c.AddSeq(0)
			_ = c.AddSeq(1)
			*list = append(*list, c)
		}
	}
	steps := [][2][]int{{tokens(20, m.Vocab, 1), tokens(7, m.Vocab, 2)}, {{5}, {9}}, {{11}, {3}}}
	for si, st := range steps {
		var batch []runtime.Entry
		for _, c := range caches {
			batch = append(batch, runtime.Entry{Cache: c, Seq: 0, Tokens: st[0]}, runtime.Entry{Cache: c, Seq: 1, Tokens: st[1]})
		}
		got, err := r.Forward(context.Background(), batch)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range specs {
			want := forward(t, r, alone[i], runtime.Entry{Seq: 0, Tokens: st[0]}, runtime.Entry{Seq: 1, Tokens: st[1]})
			for e := range want {
				tol := 1e-5
				if strings.Contains(s, "int4") || s == "int8" {
					tol = 1e-3
				}
				if d := maxRelDiff(got[2*i+e], want[e]); d > tol {
					t.Fatalf("step %d, %s entry %d: side by side and alone differ by %.2g", si, s, e, d)
				}
			}
		}
		if d := maxRelDiff(got[4], got[0]); d == 0 || d > 0.05 {
			t.Errorf("int8 vs fp32 cache: relative logit difference %.2g, want in (0, 0.05]", d)
		}
	}
}

// TestLlama3RopeScaling checks the frequency rule of Llama 3.1 (rope_type
// llama3: factor 8, low_freq_factor 1, high_freq_factor 4, original context
// 8192, theta 500000, head_dim 128) at the three regimes.
func TestLlama3RopeScaling(t *testing.T) {
	c := &runtime.Config{RopeTheta: 500000, RopeDim: 128, Scaling: runtime.RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}}
	f := runtime.InvFreq(c, nil)
	base := func(i int) float64 { return math.Pow(500000, -float64(2*i)/128) }
	// i=0: wavelength 2π < 8192/4 → unchanged.
	if f[0] != 1 {
		t.Errorf("f[0] = %v, want 1", f[0])
	}
	// i=63: wavelength ≈ 2.6M > 8192 → divided by 8.
	if want := base(63) / 8; math.Abs(f[63]-want) > 1e-15 {
		t.Errorf("f[63] = %v, want %v", f[63], want)
	}
	// i=32: wavelength 2π·√500000 ≈ 4443, between 2048 and 8192 → smoothed:
	// s = (8192/4443.  − 1)/3, f = (1−s)·inv/8 + s·inv.
	inv := base(32)
	s := (8192/(2*math.Pi/inv) - 1) / 3
	if want := (1-s)*inv/8 + s*inv; math.Abs(f[32]-want) > 1e-15 || math.Abs(f[32]/inv-0.3711) > 1e-3 {
		t.Errorf("f[32] = %v (%.4f of unscaled), want %v (≈0.3711)", f[32], f[32]/inv, want)
	}
	lin := runtime.InvFreq(&runtime.Config{RopeTheta: 10000, RopeDim: 64, Scaling: runtime.RopeScaling{Type: "linear", Factor: 4}}, nil)
	if want := math.Pow(10000, -10.0/64) / 4; math.Abs(lin[5]-want) > 1e-15 {
		t.Errorf("linear: f[5] = %v, want %v", lin[5], want)
	}
}
