package backend

import "math"

// Routing is the order in which a mixture-of-experts router turns a
// token's logits (one per expert) into the k experts it uses and their
// weights.
type Routing int

// Routings.
const (
	// TopKSoftmax takes the k largest logits and a softmax over those k
	// (Mixtral, GPT-OSS).
	TopKSoftmax Routing = iota
	// SoftmaxTopK takes a softmax over every expert, then the k largest
	// probabilities as they are (Qwen3-MoE with norm_topk_prob false).
	SoftmaxTopK
	// SoftmaxTopKNorm is SoftmaxTopK with the k probabilities divided by
	// their sum (Qwen3-MoE's norm_topk_prob; the same weights as
	// TopKSoftmax up to rounding).
	SoftmaxTopKNorm
)

func (r Routing) String() string {
	switch r {
	case TopKSoftmax:
		return "top-k, softmax"
	case SoftmaxTopK:
		return "softmax, top-k"
	case SoftmaxTopKNorm:
		return "softmax, top-k, normalised"
	}
	return "Routing(?)"
}

// Experts are one layer's expert FFNs, each a SwiGLU MLP:
// Down_e(silu(Gate_e·x) ⊙ Up_e·x). Gate[e] and Up[e] are [Hidden][Dim],
// Down[e] [Dim][Hidden]; all three slices have one entry per expert.
type Experts struct {
	Gate, Up, Down []Matrix
	// Optional (GPT-OSS): GateBias, UpBias and DownBias, one tensor per
	// expert when set, are added after the products; Limit > 0 replaces
	// silu(g)·u with the clamped SwiGLU, g' = min(g, Limit),
	// u' = clamp(u, −Limit, Limit), g'·sigmoid(Alpha·g')·(u'+1). Only
	// backends that implement ExpertExtras accept them.
	GateBias, UpBias, DownBias []Tensor
	Alpha, Limit               float32
	// Prepare, when set, must be called with an expert's index before its
	// matrices are read (it writes weights that are filled on first use;
	// safe for concurrent use). A backend that copies the matrices at
	// Upload never sees it: the runtime prepares every expert first.
	Prepare func(e int)
}

// Extras reports whether e uses the optional biases or clamped SwiGLU.
func (e *Experts) Extras() bool {
	return e.GateBias != nil || e.UpBias != nil || e.DownBias != nil || e.Limit > 0
}

// ExpertExtras is implemented by MoE backends whose ExpertFFN applies
// Experts' biases and clamped SwiGLU.
type ExpertExtras interface {
	ExpertExtras()
}

// MoE is implemented by backends that run mixture-of-experts layers: the
// routing of a router's logits, and the routed experts' FFNs with the
// tokens grouped by expert, so that a step reads each used expert's
// weights once whatever its number of tokens (and never reads an unused
// one). The runtime refuses a model with expert layers on a backend
// without it.
type MoE interface {
	// Route sets row t of dst, 2·k values, from row t of logits (n
	// values, one per expert), for t < nt: the k chosen experts' indices
	// (as float32 values, most weighted first; ties go to the lower
	// index), then their k weights, as r orders softmax, top-k and
	// renormalisation.
	Route(dst, logits Tensor, nt, n, k int, r Routing)
	// ExpertFFN sets row t of dst (Dim values) to Σ_j w_j·FFN_{e_j}(x_t)
	// over the k (expert e_j, weight w_j) pairs of row t of route (as
	// Route writes them), for t < nt. The sum runs in increasing expert
	// index.
	ExpertFFN(dst, x Tensor, nt int, route Tensor, k int, e *Experts)
}

// RouteRow routes one token on the host, as MoE's Route does each row:
// out (2·k values) gets the k chosen experts' indices (as float32), most
// weighted first, then their weights; the softmax runs in float64. The
// CPU backend's Route is this; a device backend may route on the host
// with it too.
func RouteRow(out, logits []float32, k int, r Routing) {
	idx := out[:k]
	// Selection of the k largest by insertion: k is small (2 to 8).
	var chosen [64]int
	top := chosen[:0]
	if k > len(chosen) {
		top = make([]int, 0, k)
	}
	for e, v := range logits {
		if len(top) == k && !(v > logits[top[k-1]]) {
			continue
		}
		i := len(top)
		if i < k {
			top = append(top, e)
		} else {
			i = k - 1
		}
		for i > 0 && v > logits[top[i-1]] {
			top[i] = top[i-1]
			i--
		}
		top[i] = e
	}
	w := out[k : 2*k]
	switch r {
	case TopKSoftmax, SoftmaxTopKNorm:
		// Both are a softmax over the k chosen logits.
		m := float64(logits[top[0]])
		var s float64
		for _, e := range top {
			s += math.Exp(float64(logits[e]) - m)
		}
		for j, e := range top {
			w[j] = float32(math.Exp(float64(logits[e])-m) / s)
		}
	case SoftmaxTopK:
		m := float64(logits[top[0]])
		var s float64
		for _, v := range logits {
			s += math.Exp(float64(v) - m)
		}
		for j, e := range top {
			w[j] = float32(math.Exp(float64(logits[e])-m) / s)
		}
	default:
		panic("backend: unknown routing " + r.String())
	}
	for j, e := range top {
		idx[j] = float32(e)
	}
}
