// Package backend is the seam between kvq's runtime and the devices it
// computes on: the Backend interface, its opaque Tensor and Matrix
// handles, and the parameters of its attention op.
//
// A backend owns its memory. Weights are uploaded once (Upload); the
// activations of a step live in backend Tensors from the embedding to the
// logits; the KV cache's pages and fp16 windows live in backend Storage
// (the backend is the kvcache.Allocator), while package kvcache keeps the
// bookkeeping — sequences, block tables, windows, flush rules — and hands
// the backend a kvcache.Plan per step: what to write where, and where each
// position is read from. Only token ids, positions, the RoPE frequencies,
// the plans and the logits that were asked for cross the boundary (plus,
// when an observer is set, the K and V rows).
//
// The CPU backend (package cpu) wraps host memory at no cost; a GPU
// backend (package gpu, behind the cuda build tag) implements the same
// interface. Package backendtest is the conformance suite both run.
//
// Backends are chosen by name through a Registry of Registrations
// (registry.go): each backend package exports its Registration in every
// build — a backend its build tag leaves out registers as unavailable,
// with the reason — and the program lists them (kvq's in
// cmd/kvq/internal/cli/cmdutil/backends.go). docs/backends.md says what a
// new backend implements and which suites it passes.
//
// The interface is the set of ops the model layer's families
// (runtime.Family) compose their blocks from, and nothing more; it grows through optional interfaces (HostMemory).
// Backends are not safe for concurrent use from several goroutines unless
// they say so; the CPU backend is.
package backend

import (
	"errors"

	"github.com/kvqlabs/kvq/pkg/kvqerr"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// Sentinel errors.
var (
	// ErrUnsupported reports a weight dtype or cache format that a backend
	// cannot store or compute with.
	ErrUnsupported = kvqerr.New("backend: unsupported")
	// ErrUnknownBackend reports a name no registration of a Registry has.
	ErrUnknownBackend = kvqerr.New("backend: unknown backend")
	// ErrUnavailable reports a registered backend that this build or this
	// machine cannot open (Registration.Unavailable says why).
	ErrUnavailable = kvqerr.New("backend: unavailable")
	// ErrRegistration reports a Registration a Registry refuses: a bad or
	// duplicate name, no Open, a second default.
	ErrRegistration = errors.New("backend: bad registration")
)

// Tensor is a backend-owned buffer of float32 values, row-major. Its
// contents are reached only through the backend's ops (or HostMemory).
type Tensor interface {
	// Len is the number of values the tensor holds.
	Len() int
}

// Matrix is an uploaded weight matrix, [Rows][Cols] (out × in).
type Matrix interface {
	Dims() (rows, cols int)
}

// AttnParams are the model-level parameters of attention.
type AttnParams struct {
	// Heads is the number of query heads; the cache's KVHeads divide it
	// (query head i reads KV head i/(Heads/KVHeads)).
	Heads int
	// Scale multiplies q·k before the softmax (1/sqrt(head_dim)).
	Scale float32
	// Window > 0 limits each query to the last Window positions (sliding
	// window attention); 0 attends to every earlier position.
	Window int
	// Softcap > 0 caps each score before the softmax:
	// Softcap·tanh(Scale·q·k / Softcap) (Gemma 2's attention logit
	// softcapping). Only backends that implement SoftcapOps honour it.
	Softcap float32
	// Sinks, when not nil, holds one learned logit per query head (Heads
	// values) that joins each softmax as a position with no value: it
	// takes part in the maximum and the normaliser, so the weights of the
	// real positions sum to less than one (GPT-OSS's attention sinks). The
	// logit is added as it is, after Scale. Only backends that implement
	// Sinks accept it.
	Sinks []float32
}

// Sinks is implemented by backends whose Attention applies
// AttnParams.Sinks; the runtime refuses a model with attention sinks on
// another backend.
type Sinks interface {
	AttentionSinks()
}

// Backend runs the ops of a transformer forward pass on one device.
//
// Ops panic on mismatched sizes (programmer errors). A device backend may
// run ops asynchronously and report a device failure at the next
// synchronizing call (Download).
type Backend interface {
	// Name identifies the backend ("cpu", "cuda").
	Name() string

	// Alloc returns a tensor of n values (contents unspecified); Free
	// releases it.
	Alloc(n int) Tensor
	Free(t Tensor)
	// Upload places a weight matrix on the device once; Matrix handles
	// live as long as the backend. UploadF32 does so for a vector (norm
	// weights, biases).
	Upload(w *tensor.Weight) (Matrix, error)
	UploadF32(v []float32) (Tensor, error)
	// Download copies src[off : off+len(dst)] into dst, after every op
	// issued before it has completed.
	Download(dst []float32, src Tensor, off int) error

	// Embed sets row t of dst to row ids[t] of w (dequantized).
	Embed(dst Tensor, w Matrix, ids []int32)
	// MatMul sets dst[t·rows + r] = Σ_c x[t·cols + c]·W[r][c] for t < nt.
	MatMul(dst, x Tensor, nt int, w Matrix)
	// RMSNorm sets row t of dst to x_t / sqrt(mean(x_t²)+eps) ⊙ w for
	// t < rows, rows of w.Len() values (dst may be x).
	RMSNorm(dst, x Tensor, rows int, w Tensor, eps float32)
	// AddBias adds b to each of the nt rows of x (rows of b.Len() values).
	AddBias(x Tensor, nt int, b Tensor)
	// RoPEAngles writes, for each position, [cos | sin] of pos·invFreq[i]
	// (2·len(invFreq) values per position) into dst.
	RoPEAngles(dst Tensor, pos []int32, invFreq []float64)
	// RoPE rotates the first rotDim dimensions (2·len(invFreq) given to
	// RoPEAngles) of each of heads head vectors of headDim values in each
	// of nt rows of x in place, by the angles of the row's position
	// (angles row t): pairs (i, i+rotDim/2) with neox (GPT-NeoX, Hugging
	// Face rotate_half), otherwise (2i, 2i+1) (llama.cpp's normal mode,
	// llama2.c).
	RoPE(x Tensor, nt, heads, headDim, rotDim int, angles Tensor, neox bool)
	// SwiGLU sets gate[i] = silu(gate[i])·up[i] for i < n.
	SwiGLU(gate, up Tensor, n int)
	// Add sets dst[i] += src[i] for i < n.
	Add(dst, src Tensor, n int)
	// Copy sets dst[i] = src[i] for i < n.
	Copy(dst, src Tensor, n int)
	// Gather sets row i of dst to row rows[i] of src (rows of width values).
	Gather(dst, src Tensor, rows []int32, width int)

	// The backend allocates the KV storage of caches
	// (kvcache.Allocator.NewStorage). SupportsKV says whether it can
	// store and attend over format f (nil when it can, else an error
	// naming the format).
	kvcache.Allocator
	SupportsKV(f quant.Format) error
	// WriteKV executes plan p's writes for layer: the keys (k) and values
	// (v) of the step's tokens, rows of KVHeads·HeadDim values indexed by
	// the plan's activation rows. For a layer that stores pre-RoPE keys,
	// k holds them before rotation.
	WriteKV(kv kvcache.Storage, layer int, k, v Tensor, p *kvcache.Plan)
	// Attention computes, for every token of every sequence in p,
	// causal attention of its query row of q (Heads·HeadDim values) over
	// its sequence's positions as p's runs place them, writing dst's row;
	// rows of other caches' tokens are left alone. It must follow the
	// layer's WriteKV. k and v are the step's keys (after RoPE) and values:
	// a sequence whose step is Exact (kvcache.SeqStep.Exact) reads its own
	// new positions from them instead of from the cache.
	Attention(dst, q, k, v Tensor, kv kvcache.Storage, layer int, p *kvcache.Plan, a AttnParams)
}

// Interruptible is implemented by backends whose long ops can stop part
// way, so that a cancelled step ends within milliseconds instead of at the
// end of a layer's matrix products and attention (seconds on a long
// prefill). Interruptible returns a view of the backend — the same memory,
// uploaded weights and KV storage — whose MatMul and Attention look at done
// between blocks of their work and, once it is closed, skip the rest,
// leaving their outputs unspecified. Whoever closes done must discard those
// outputs: the runtime checks its context after such ops, before anything
// (the cache, an observer, the logits) reads them.
type Interruptible interface {
	Interruptible(done <-chan struct{}) Backend
}

// RowGroups is implemented by backends whose matrix products can be made
// batch-invariant. RowGroups returns a view of the backend — the same
// memory, uploaded weights and KV storage — whose MatMul over nt rows, when
// groups sums to nt, gives every row of each group the bits of a MatMul
// over that group's rows alone, and every row of a group of one the bits
// of a MatMul over that row alone, whatever the other rows: the step's
// row count no longer picks the kernels (and so the summation order) of a
// sequence's rows. Other ops are unchanged; MatMul over another row count
// is the backend's.
type RowGroups interface {
	RowGroups(groups []int) Backend
}

// SoftcapOps is implemented by backends that run the ops of the Gemma
// families (the CPU and the CUDA backends): the runtime refuses a model
// that needs them on a backend without them, rather than compute something
// else.
type SoftcapOps interface {
	// Scale sets x[i] *= s for i < n.
	Scale(x Tensor, n int, s float32)
	// GeGLU sets gate[i] = gelu(gate[i])·up[i] for i < n, with the tanh
	// approximation of GELU: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
	GeGLU(gate, up Tensor, n int)
	// SoftcapAttention reports that Attention applies AttnParams.Softcap.
	SoftcapAttention() bool
}

// HostMemory is implemented by backends whose tensors are host memory:
// Host returns the tensor's values without a copy (the CPU backend).
type HostMemory interface {
	Host(t Tensor) []float32
}
