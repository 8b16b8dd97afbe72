package runtime_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/internal/testutil"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// pinnedLogits fixes the exact float32 bits of the forward pass: the
// SHA-256 of the last prompt position's logits, then of 20 greedy steps'
// tokens and logits, per model and cache format, on a CPU backend of two
// workers (the attention fan-out sums in an order that depends on the
// worker count) for each kernel set (simd.Kernels: the AVX2, AVX-512 and
// generic kernels sum in different orders); a kernel set with no pinned
// values is only logged. The model layer
// (arch_*.go) must compose the backend's ops in the same order and sum in
// the same way: any change of a bit fails here. A change of results that
// is meant (a new kernel) updates these values in the same commit, saying
// why.
var pinnedLogits = map[string]string{
	"amd64/avx512/mixtral/fp16":           "af75caa1ed3a7888b47b5b7de33bd4c1753863680340c308d8050d670c2ba721",
	"amd64/avx512/mixtral/fp32":           "a042625c6d75ac61e904d7faee76bd9cf61aa98888c91172e4e5a49eae3c6847",
	"amd64/avx512/mixtral/int8":           "cdedb12a5796c14ec60e2cc5c9be4f3d98e3f6de49bdc6d4bab9ef479133a216",
	"amd64/avx512/qwen3moe/fp16":          "212a921a0d8a2f8b7e57c5b151fdbaf798d9089b35bfb8913f229e294c738084",
	"amd64/avx512/qwen3moe/fp32":          "0a5285d2d18f51c9a2678670d5b54a8f828afacce6f9358d64a4f9f51e6d2da6",
	"amd64/avx512/qwen3moe/int8":          "899a77b0876199d91574fa64af29a413ccbf9c2880318feb8a883fd4a5877dfb",
	"amd64/generic/mixtral/fp16":          "0191b6b9da50b334cea08f023b87ce40809f5a30c6f7134002e1bbe924039890",
	"amd64/generic/mixtral/fp32":          "6d65186f81043def9dfa171a763ec480d23ced1364e20fea130f0e3e9c65da58",
	"amd64/generic/mixtral/int8":          "bb9f4e1686ef001d03e43f450f587c6049aed8298cabddc71574d5ab64026d7c",
	"amd64/generic/qwen3moe/fp16":         "3e387442c3e1d4659c3accf0bc44c0d5cf5cf1a4d9e4aa27944d7dcefc10bea7",
	"amd64/generic/qwen3moe/fp32":         "4dd4876b412b4024776a1561b9921fa5c73a57ee1f84ad25925fbe62dd71a814",
	"amd64/generic/qwen3moe/int8":         "ca3094fda76050d06624bc2abc8b73313a69035972dd42caab9154ff5747fc94",
	"amd64/avx512/gemma2/fp16":            "f972c69f45779efccd362a20b4d28396ad7da6f413e48fdf0340d3d0efa3c8d9",
	"amd64/avx512/gemma2/fp32":            "f750cf9a616a0be5f30d9766bcceb30d4e3f28b510fc08de5156fa7a1b80985a",
	"amd64/avx512/gemma2/int8":            "fac42023415cee1f59ba38efdbb67a88f4a09eb96127b1367fc47fe9481a00c1",
	"amd64/avx512/gemma3/fp16":            "7879a5a717bbb3e4189c8e8abc2eaedaebc7348728f22e826424e096a46e4225",
	"amd64/avx512/gemma3/fp32":            "7a545cd08ffe09e7a208e6c80f098cd9ca30c8465a548cace4eeb34143ba06e6",
	"amd64/avx512/gemma3/int8":            "a7955dd7f0a7748b17bcc87c5b36e220a0a504de7b1f542f28d5b70ee6d81ce2",
	"amd64/avx512/llama/fp16":             "66af551d486f4169acdf3f2a350028fa8b201fe988ba73c0336654103e12f736",
	"amd64/avx512/llama/fp32":             "310cddf88dfdf9efb68171db98461c52ba55f64c8a776862c20f8f6c91fe5c41",
	"amd64/avx512/llama/int8":             "191d6ad88a04386b604300f233c354e4c0413c0c6b1f86f5dea8d3ab607ef694",
	"amd64/avx512/mistral/fp16":           "c3a9573cb9de3f32a9b9ebea23eb56efdd7eecbe935950d00f706944dd4c2c9e",
	"amd64/avx512/mistral/fp32":           "16dbe353683d1f8fd362b033e093a15861e06de0261b14aacdb446591671c3b8",
	"amd64/avx512/mistral/int8":           "7d60b4827a7aeb0af88023c9ac2a656807a6e486e6bba687cee8664823ed832e",
	"amd64/avx512/olmo2/fp16":             "fb79dfc828a90b59a8014681f7f744042765a0e86c90359aaf692df92f7f7a96",
	"amd64/avx512/olmo2/fp32":             "57daff10ee10a9696a4a3e243414a3ae0b2b152bc032b43bf1992b33984bd252",
	"amd64/avx512/olmo2/int8":             "95ec449dca6f1de5f024816199ad40dcff41f81dc5bee1e31c402ea4912f0f8b",
	"amd64/avx512/phi3/fp16":              "bba4aac810c15aa4428db55cff760017258d664fe4d0283e7e4e5519bcda054a",
	"amd64/avx512/phi3/fp32":              "76e1f428b9fc5ccffc010ab98f6addca103ce5dcda6744ed456f5be9bec5306f",
	"amd64/avx512/phi3/int8":              "593cdce757456d58e707fe88d6fbd9752becc397ca8d06fdba924394970a1e19",
	"amd64/avx512/qwen2/fp16":             "4388b527a951fb82e718dc1c89cbf830fd31ef7b602ff4f0a7c60f6ebb8e4664",
	"amd64/avx512/qwen2/fp32":             "45973466752c1798d43a6ca2bd10cc8fb166fddd7bb06ed3c0fdeaa11ab516f6",
	"amd64/avx512/qwen2/int8":             "a9aaa690d0bd124045a1d8694953520b19346d708f6a6e8a0627252da97419e2",
	"amd64/avx512/qwen3/fp16":             "db1dd9154cff64a714da2f8af0fcc0c3d39068307fb8e08586bb223e3909458f",
	"amd64/avx512/qwen3/fp32":             "67f85239222eb7080e5b7e035f7e43f0dd20fb35335d861a44523e1cde67086b",
	"amd64/avx512/qwen3/int8":             "2661c5ca911612be0a32ac31f797d701686856bd7222966ef9f025b0a22c52f1",
	"amd64/avx512/stories260K.bin/fp16":   "7201950d997c52269820f24fce958a22580c1bd80dc96035636e065847615f6e",
	"amd64/avx512/stories260K.bin/fp32":   "ae3f92f72aa91a8c5d1dce2801ae21203999584aa283fff83b09d9b4c5284fb7",
	"amd64/avx512/stories260K.bin/int8":   "5de8b6e208868661ccaca91ddb4d3c0487d242c6124240ea93835ac853306cd9",
	"amd64/avx512/stories260K.gguf/fp16":  "7201950d997c52269820f24fce958a22580c1bd80dc96035636e065847615f6e",
	"amd64/avx512/stories260K.gguf/fp32":  "ae3f92f72aa91a8c5d1dce2801ae21203999584aa283fff83b09d9b4c5284fb7",
	"amd64/avx512/stories260K.gguf/int8":  "5de8b6e208868661ccaca91ddb4d3c0487d242c6124240ea93835ac853306cd9",
	"amd64/generic/gemma2/fp16":           "1da75c6011ef50c72c769621349e7cdd54babb1344402e83210bbe5a30b54675",
	"amd64/generic/gemma2/fp32":           "ff1dd2c15c34a97cf8b929052f4dfe4e26b0ed4859d4fc448904ac8987fcce7e",
	"amd64/generic/gemma2/int8":           "39c8a34463a2c75bbedf875a185c5166c6b857f35e53790ea4485de1b3446080",
	"amd64/generic/gemma3/fp16":           "21d17f6df1b723837ce47e968c66cf28176426365d735236ad0cc3834c140948",
	"amd64/generic/gemma3/fp32":           "72425a8e050b2ef82c1cffd12bda6ee290a06291b1e7bf57cd8131121acd1b8b",
	"amd64/generic/gemma3/int8":           "b4cb7a699339ec1997464ade15d685272048ff6d9dac9f19131cfc46856220dd",
	"amd64/generic/llama/fp16":            "456ab576fbd6f5e27222687a952784f753dcc03d363329b37e3ea83703aa4538",
	"amd64/generic/llama/fp32":            "bea7b7881ca7e985ea099ce935409991f57753d5de798655294987f462df05b4",
	"amd64/generic/llama/int8":            "131e8abe0c7217eb2137e88c73fcfe07940dc6f01767f77a1b8cceea230aaf44",
	"amd64/generic/mistral/fp16":          "862244bd6de2d74b57aae6a59c45d5df895ffd8f0c24153c0f492ee8729c8079",
	"amd64/generic/mistral/fp32":          "a0a789f6c0689570f86c24f597bf8db4c8911bb4076c9c9525a373433c10906f",
	"amd64/generic/mistral/int8":          "510e40c2619f15b35cc75b7fdd245d7fd10c5fd7687df7831ea332a0568f0e65",
	"amd64/generic/olmo2/fp16":            "b5b819f489e72ec260c59b37226feef0ae107ea8d23bec475fa6bebf8caea6d9",
	"amd64/generic/olmo2/fp32":            "2f5944ea2f64d315f4e717062d8880a6419b1169ff4f8d062ed7a329281b1155",
	"amd64/generic/olmo2/int8":            "4bb57f99b42ac049ae075aeba5e29c403f023503eda4df763bd0a0f0529219cf",
	"amd64/generic/phi3/fp16":             "f17a639dd05990c727e1c82d1f15bd06faed081cf14b0b2de1f48dc596a05ae7",
	"amd64/generic/phi3/fp32":             "8602e32941fcf7d01673cc05458d748cad394ab74ee282b57830d2ae7112ab24",
	"amd64/generic/phi3/int8":             "ccb9d47b2293150ff98184b91967156b4cf6c898c8502ff796c12324820ffd00",
	"amd64/generic/qwen2/fp16":            "aa57a768af8f0818dcd6ab5aee163a27e00677ec950d13407ab9755a2e3b2072",
	"amd64/generic/qwen2/fp32":            "e00300c41abb104401e15fbb2db20d6858485758b21c7df472f6e713394d30e9",
	"amd64/generic/qwen2/int8":            "344c5ba5cd8ff77818174f32ece8641159afb82ef7ac2f15529da27cbf9dae08",
	"amd64/generic/qwen3/fp16":            "73dba242006457837aee3b8805487ce9ad675d2aea8eb0d95d2ae2e4fac0b739",
	"amd64/generic/qwen3/fp32":            "840b10c99052c6f1b79eecb5326997fcdfee91235d602630405d7f0682196d46",
	"amd64/generic/qwen3/int8":            "97b1f745a211b4bfad67f29eb9a8b0d57c112092b47246c6f9bb1f64c1d7d082",
	"amd64/generic/stories260K.bin/fp16":  "9292dd34883c28666dec7052f853b46840195d7eeaaa6604547224168225341e",
	"amd64/generic/stories260K.bin/fp32":  "13634e7b7724e2429b491e3b5ecc9446def7589d6876bede8e6c4374a2a45f1c",
	"amd64/generic/stories260K.bin/int8":  "a3c37f13809bd6429d445a8304a5ff8ac39808ad499f959ab329fac816311ab7",
	"amd64/generic/stories260K.gguf/fp16": "9292dd34883c28666dec7052f853b46840195d7eeaaa6604547224168225341e",
	"amd64/generic/stories260K.gguf/fp32": "13634e7b7724e2429b491e3b5ecc9446def7589d6876bede8e6c4374a2a45f1c",
	"amd64/generic/stories260K.gguf/int8": "a3c37f13809bd6429d445a8304a5ff8ac39808ad499f959ab329fac816311ab7",
	// The Zen 4 choice (simd.Kernels "avx512-zen4") differs from avx512 only
	// in the F16 and BF16 dot products, which these float32-weight models do
	// not run: the same values.
	"amd64/avx512-zen4/mixtral/fp16":          "af75caa1ed3a7888b47b5b7de33bd4c1753863680340c308d8050d670c2ba721",
	"amd64/avx512-zen4/mixtral/fp32":          "a042625c6d75ac61e904d7faee76bd9cf61aa98888c91172e4e5a49eae3c6847",
	"amd64/avx512-zen4/mixtral/int8":          "cdedb12a5796c14ec60e2cc5c9be4f3d98e3f6de49bdc6d4bab9ef479133a216",
	"amd64/avx512-zen4/qwen3moe/fp16":         "212a921a0d8a2f8b7e57c5b151fdbaf798d9089b35bfb8913f229e294c738084",
	"amd64/avx512-zen4/qwen3moe/fp32":         "0a5285d2d18f51c9a2678670d5b54a8f828afacce6f9358d64a4f9f51e6d2da6",
	"amd64/avx512-zen4/qwen3moe/int8":         "899a77b0876199d91574fa64af29a413ccbf9c2880318feb8a883fd4a5877dfb",
	"amd64/avx512-zen4/gemma2/fp16":           "f972c69f45779efccd362a20b4d28396ad7da6f413e48fdf0340d3d0efa3c8d9",
	"amd64/avx512-zen4/gemma2/fp32":           "f750cf9a616a0be5f30d9766bcceb30d4e3f28b510fc08de5156fa7a1b80985a",
	"amd64/avx512-zen4/gemma2/int8":           "fac42023415cee1f59ba38efdbb67a88f4a09eb96127b1367fc47fe9481a00c1",
	"amd64/avx512-zen4/gemma3/fp16":           "7879a5a717bbb3e4189c8e8abc2eaedaebc7348728f22e826424e096a46e4225",
	"amd64/avx512-zen4/gemma3/fp32":           "7a545cd08ffe09e7a208e6c80f098cd9ca30c8465a548cace4eeb34143ba06e6",
	"amd64/avx512-zen4/gemma3/int8":           "a7955dd7f0a7748b17bcc87c5b36e220a0a504de7b1f542f28d5b70ee6d81ce2",
	"amd64/avx512-zen4/llama/fp16":            "66af551d486f4169acdf3f2a350028fa8b201fe988ba73c0336654103e12f736",
	"amd64/avx512-zen4/llama/fp32":            "310cddf88dfdf9efb68171db98461c52ba55f64c8a776862c20f8f6c91fe5c41",
	"amd64/avx512-zen4/llama/int8":            "191d6ad88a04386b604300f233c354e4c0413c0c6b1f86f5dea8d3ab607ef694",
	"amd64/avx512-zen4/mistral/fp16":          "c3a9573cb9de3f32a9b9ebea23eb56efdd7eecbe935950d00f706944dd4c2c9e",
	"amd64/avx512-zen4/mistral/fp32":          "16dbe353683d1f8fd362b033e093a15861e06de0261b14aacdb446591671c3b8",
	"amd64/avx512-zen4/mistral/int8":          "7d60b4827a7aeb0af88023c9ac2a656807a6e486e6bba687cee8664823ed832e",
	"amd64/avx512-zen4/olmo2/fp16":            "fb79dfc828a90b59a8014681f7f744042765a0e86c90359aaf692df92f7f7a96",
	"amd64/avx512-zen4/olmo2/fp32":            "57daff10ee10a9696a4a3e243414a3ae0b2b152bc032b43bf1992b33984bd252",
	"amd64/avx512-zen4/olmo2/int8":            "95ec449dca6f1de5f024816199ad40dcff41f81dc5bee1e31c402ea4912f0f8b",
	"amd64/avx512-zen4/phi3/fp16":             "bba4aac810c15aa4428db55cff760017258d664fe4d0283e7e4e5519bcda054a",
	"amd64/avx512-zen4/phi3/fp32":             "76e1f428b9fc5ccffc010ab98f6addca103ce5dcda6744ed456f5be9bec5306f",
	"amd64/avx512-zen4/phi3/int8":             "593cdce757456d58e707fe88d6fbd9752becc397ca8d06fdba924394970a1e19",
	"amd64/avx512-zen4/qwen2/fp16":            "4388b527a951fb82e718dc1c89cbf830fd31ef7b602ff4f0a7c60f6ebb8e4664",
	"amd64/avx512-zen4/qwen2/fp32":            "45973466752c1798d43a6ca2bd10cc8fb166fddd7bb06ed3c0fdeaa11ab516f6",
	"amd64/avx512-zen4/qwen2/int8":            "a9aaa690d0bd124045a1d8694953520b19346d708f6a6e8a0627252da97419e2",
	"amd64/avx512-zen4/qwen3/fp16":            "db1dd9154cff64a714da2f8af0fcc0c3d39068307fb8e08586bb223e3909458f",
	"amd64/avx512-zen4/qwen3/fp32":            "67f85239222eb7080e5b7e035f7e43f0dd20fb35335d861a44523e1cde67086b",
	"amd64/avx512-zen4/qwen3/int8":            "2661c5ca911612be0a32ac31f797d701686856bd7222966ef9f025b0a22c52f1",
	"amd64/avx512-zen4/stories260K.bin/fp16":  "7201950d997c52269820f24fce958a22580c1bd80dc96035636e065847615f6e",
	"amd64/avx512-zen4/stories260K.bin/fp32":  "ae3f92f72aa91a8c5d1dce2801ae21203999584aa283fff83b09d9b4c5284fb7",
	"amd64/avx512-zen4/stories260K.bin/int8":  "5de8b6e208868661ccaca91ddb4d3c0487d242c6124240ea93835ac853306cd9",
	"amd64/avx512-zen4/stories260K.gguf/fp16": "7201950d997c52269820f24fce958a22580c1bd80dc96035636e065847615f6e",
	"amd64/avx512-zen4/stories260K.gguf/fp32": "ae3f92f72aa91a8c5d1dce2801ae21203999584aa283fff83b09d9b4c5284fb7",
	"amd64/avx512-zen4/stories260K.gguf/int8": "5de8b6e208868661ccaca91ddb4d3c0487d242c6124240ea93835ac853306cd9",
}

// The Zen 5 choice (simd.Kernels "avx512-zen5") is the Zen 4 choice's
// decode with the avx512 choice's prefill blocking, which changes no bit:
// its values are the Zen 4 choice's (measured on a Zen 5: all equal).
func init() {
	for k, v := range pinnedLogits {
		if rest, ok := strings.CutPrefix(k, "amd64/avx512-zen4/"); ok {
			pinnedLogits["amd64/avx512-zen5/"+rest] = v
		}
	}
}

// pinModels lists the models of TestLogitsPinned: stories260K (the
// built-in model, as GGUF and llama2.c) and random Hugging Face checkpoints
// of each dense family (Qwen2's biases, Qwen3's q/k norms, Mistral's
// sliding window, OLMo 2's post-norms, Phi-3's fused matrices with a
// window, tied embeddings and LongRoPE over partial rotary, Gemma 2's
// softcaps and Gemma 3's local and global layers) and the MoE families.
func pinModels(t *testing.T) map[string]func() (*runtime.Model, error) {
	bin, tok, gguf := testutil.Stories260K(t)
	dir := t.TempDir()
	hf := func(s modeltest.Spec) func() (*runtime.Model, error) {
		return func() (*runtime.Model, error) {
			d := filepath.Join(dir, s.Arch)
			if err := modeltest.WriteHF(d, s, modeltest.HFOptions{}); err != nil {
				return nil, err
			}
			return runtime.Load(context.Background(), d, runtime.LoadOptions{})
		}
	}
	return map[string]func() (*runtime.Model, error){
		"stories260K.gguf": func() (*runtime.Model, error) { return runtime.Load(context.Background(), gguf, runtime.LoadOptions{}) },
		"stories260K.bin": func() (*runtime.Model, error) {
			return runtime.Load(context.Background(), bin, runtime.LoadOptions{Tokenizer: tok})
		},
		"llama":   hf(modeltest.Spec{Arch: "llama", Seed: 3}),
		"mistral": hf(modeltest.Spec{Arch: "mistral", SlidingWindow: 8, Seed: 4}),
		"qwen2":   hf(modeltest.Spec{Arch: "qwen2", Seed: 5}),
		"qwen3":   hf(modeltest.Spec{Arch: "qwen3", HeadDim: 32, Seed: 6}),
		"olmo2":   hf(modeltest.Spec{Arch: "olmo2", Seed: 7}),
		"phi3":    hf(modeltest.Spec{Arch: "phi3", SlidingWindow: 8, RopeDim: 8, OriginalContext: 256, Tied: true, Seed: 8}),
		// Mixture of experts: grouped expert products, each routing order.
		"mixtral":  hf(modeltest.Spec{Arch: "mixtral", Experts: 4, ExpertsUsed: 2, Seed: 7}),
		"qwen3moe": hf(modeltest.Spec{Arch: "qwen3moe", HeadDim: 32, Layers: 3, Experts: 6, ExpertsUsed: 2, ExpertHidden: 32, NormTopK: true, MLPOnly: []int{1}, Seed: 8}),
		"gemma2":   hf(modeltest.Spec{Arch: "gemma2", HeadDim: 32, SlidingWindow: 8, AttnSoftcap: 4, FinalSoftcap: 10, Seed: 7}),
		"gemma3":   hf(modeltest.Spec{Arch: "gemma3", Layers: 7, HeadDim: 32, SlidingWindow: 8, RopeTheta: 1e6, RopeScaling: 8, Seed: 8}),
	}
}

func TestLogitsPinned(t *testing.T) {
	ctx := context.Background()
	got := map[string]string{}
	for name, load := range pinModels(t) {
		m, err := load()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, spec := range []string{"fp32", "fp16", "int8"} {
			key := goruntime.GOARCH + "/" + simd.Kernels() + "/" + name + "/" + spec
			r, err := runtime.NewRunner(m, runtime.RunnerOptions{Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			c := newCache(t, r, spec, 16)
			if err := c.AddSeq(0); err != nil {
				t.Fatal(err)
			}
			h := sha256.New()
			add := func(lg []float32, tok int) {
				var b [4]byte
				for _, v := range lg {
					binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
					h.Write(b[:])
				}
				binary.LittleEndian.PutUint32(b[:], uint32(tok))
				h.Write(b[:])
			}
			argmax := func(lg []float32) int {
				best := 0
				for i, v := range lg {
					if v > lg[best] {
						best = i
					}
				}
				return best
			}
			toks := tokens(13, m.Vocab, 11)
			for step := 0; step <= 20; step++ {
				out, err := r.Forward(ctx, []runtime.Entry{{Cache: c, Seq: 0, Tokens: toks, Logits: runtime.LastLogits}})
				if err != nil {
					t.Fatalf("%s: %v", key, err)
				}
				next := argmax(out[0])
				add(out[0], next)
				toks = []int{next}
			}
			r.Close()
			got[key] = hex.EncodeToString(h.Sum(nil))
			if want, ok := pinnedLogits[key]; !ok {
				t.Logf("%s: no pinned value for this machine's kernels; got %q", key, got[key])
			} else if want != got[key] {
				t.Errorf("%s: logits hash %s, pinned %s: the forward pass changed", key, got[key], want)
			}
		}
		m.Close()
	}
	if p := os.Getenv("KVQ_PIN_DUMP"); p != "" {
		var s string
		for k, v := range got {
			s += k + " " + v + "\n"
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
