package estimate

import "testing"

// TestFP4Bytes checks the FP4 caches against the engines' own page math
// (docs/estimate-rules.md §1.1): vLLM's nvfp4 head row is head_size/2 bytes
// of E2M1 codes plus head_size/16 E4M3 scale bytes, so a 16-token block of
// Llama-3.1-8B (32 layers, 8 KV heads of 128) takes 32 · 2 · 16 · 8 · 72 =
// 589,824 bytes (18,432 per layer, as vllm#37192 states: 65,536 for bf16)
// and 36,864 per token; SGLang's fp4_e2m1 keeps the same bytes per token
// (codes [.., 64] and uint8 scales [.., 8] per head) in pages of one token.
// The blocks follow the budget exactly; nvfp4's fp32 tensor scales (one
// per layer side, 256 B) are codec state, outside the pages.
func TestFP4Bytes(t *testing.T) {
	m := preset(t, "llama-3.1-8b")
	budget := mustBytes(t, "58.11GiB")
	r := estimate(t, Plan{Model: m, Caches: specs(t, "fp16,nvfp4,fp4_e2m1"), Version: "0.19", MaxModelLen: 8192, KVBudget: budget})
	for _, f := range r.Formats[1:] {
		if f.BytesPerToken != 36864 || f.BlockBytes != 589824 || f.BitsPerValue != 4.5 {
			t.Errorf("%s: %v bytes/token, block %d bytes, %v bits; want 36,864, 589,824, 4.5", f.Format, f.BytesPerToken, f.BlockBytes, f.BitsPerValue)
		}
		if want := budget / 589824; *f.Blocks != want {
			t.Errorf("%s: %d blocks, want floor(budget / 589,824) = %d", f.Format, *f.Blocks, want)
		}
	}
	sg := estimate(t, Plan{Model: m, Caches: specs(t, "fp4_e2m1"), Engine: SGLang, KVBudget: 1000 * 36864})
	if f := sg.Formats[0]; f.BytesPerTokenPerRank != 36864 || f.BlockTokens != 1 || *f.Tokens != 1000 {
		t.Errorf("SGLang fp4_e2m1: cell %v B, page %d, tokens %d; want 36,864, 1, 1,000", f.BytesPerTokenPerRank, f.BlockTokens, *f.Tokens)
	}
}
