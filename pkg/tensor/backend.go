package tensor

// Backend runs the dense compute of a transformer forward pass. All slices
// are host float32 in row-major order; nt is the number of token rows.
// Implementations may keep device copies of weights keyed by *Weight.
//
// Attention is not part of Backend: it reads the KV cache, whose storage
// formats own their kernels (see pkg/runtime/kvcache).
type Backend interface {
	// Name identifies the backend in logs and stats ("cpu", "cuda").
	Name() string
	// MatMul sets dst[t*w.Rows+r] = Σ_c x[t*w.Cols+c]·W[r][c] for t < nt.
	MatMul(dst, x []float32, nt int, w *Weight)
	// RMSNorm sets dst row t to x_t / sqrt(mean(x_t²)+eps) ⊙ weight, rows of len(weight).
	RMSNorm(dst, x []float32, nt int, weight []float32, eps float32)
	// RoPE rotates the first 2·len(cos)/nt dims of each of nHeads heads of every
	// row in place. cos and sin are [nt][rot/2]. With neox the pairs are
	// (i, i+rot/2) (GPT-NeoX, Hugging Face rotate_half); otherwise they are
	// adjacent (2i, 2i+1) (llama.cpp "normal", GGUF llama, llama2.c).
	RoPE(x []float32, nt, nHeads, headDim int, cos, sin []float32, neox bool)
	// SwiGLU sets gate[i] = silu(gate[i])·up[i].
	SwiGLU(gate, up []float32)
	// Add sets dst[i] += src[i].
	Add(dst, src []float32)
	// Embed copies row ids[t] of w (dequantized to float32) into dst row t.
	Embed(dst []float32, w *Weight, ids []int)
}
