package runtime

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// A checkpoint's header (GGUF metadata, config.json) declares the sizes
// the loaders allocate and loop by: layers, dimensions, heads, vocabulary.
// None of them is trusted. checkSizes compares each with the tensors the
// file holds, whose extents the parsers (pkg/gguf, pkg/safetensors) have
// already checked against the file size, so that a header saying
// block_count = 4294967295 fails at once with one line naming the key and
// the value, instead of allocating 4 billion layers or reporting a missing
// tensor for each of them.

// declared is one size as a header declares it: the key as the file spells
// it ("llama.block_count", "num_hidden_layers") and the value as written.
type declared struct {
	key  string
	v    int64 // saturated at math.MaxInt64
	text string
}

func (d declared) String() string { return d.key + " = " + d.text }

func declInt(key string, v int) declared {
	return declared{key: key, v: int64(v), text: strconv.Itoa(v)}
}

func declUint(key string, v uint64) declared {
	return declared{key: key, v: int64(min(v, math.MaxInt64)), text: strconv.FormatUint(v, 10)}
}

// headerSizes are the sizes a header declares.
type headerSizes struct {
	layers, dim, hidden, heads, kvHeads, vocab, context declared
	headDim                                             *declared // nil: dim / heads
}

// fileTensors is what a checkpoint holds, to check a header against.
type fileTensors struct {
	// shape returns a matrix's [rows, cols] (a vector is one row); ok is
	// false for a tensor that is absent or has more than two dimensions.
	shape func(name string) (rows, cols int64, ok bool)
	// layers holds the index of every layer with at least one tensor.
	layers map[int]bool
	// embed names the token embedding; q, k and gate name a layer's query,
	// key and MLP gate projections.
	embed      string
	q, k, gate func(layer int) string
}

// maxContext bounds a declared context length, which no tensor limits but
// which sizes RoPE tables and default KV pools: 16M tokens, above any
// released model's window (Llama 4 Scout's 10M).
const maxContext = 1 << 24

// layerIndices returns the layer indices named by tensors prefix<i>.<rest>,
// with i in canonical decimal.
func layerIndices(names []string, prefix string) map[int]bool {
	out := map[int]bool{}
	for _, n := range names {
		rest, ok := strings.CutPrefix(n, prefix)
		if !ok {
			continue
		}
		num, _, ok := strings.Cut(rest, ".")
		if i, err := strconv.Atoi(num); ok && err == nil && i >= 0 && strconv.Itoa(i) == num {
			out[i] = true
		}
	}
	return out
}

// checkSizes checks h against the tensors of ft, before anything is
// allocated from h, and returns the first disagreement as one error
// wrapping ErrModel that names the key and its value.
func checkSizes(h headerSizes, ft fileTensors) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrModel}, args...)...)
	}
	switch n := len(ft.layers); {
	case h.layers.v < 1:
		return bad("%v, want at least 1", h.layers)
	case h.layers.v > int64(n):
		return bad("%v, but the file holds tensors for %d layers", h.layers, n)
	}
	for i := range int(h.layers.v) {
		if !ft.layers[i] {
			return bad("%v, but the file holds no tensors for layer %d", h.layers, i)
		}
	}

	vocab, dim, ok := ft.shape(ft.embed)
	if !ok {
		return bad("missing tensor %s (or it is not a matrix)", ft.embed)
	}
	if h.dim.v != dim || h.vocab.v != vocab {
		var keys []string
		if h.vocab.v != vocab {
			keys = append(keys, h.vocab.String())
		}
		if h.dim.v != dim {
			keys = append(keys, h.dim.String())
		}
		return bad("%s: %s has shape [%d %d], the header implies [%s %s]", strings.Join(keys, " and "), ft.embed, vocab, dim, h.vocab.text, h.dim.text)
	}

	if h.heads.v < 1 || h.heads.v > dim && h.headDim == nil {
		return bad("%v, want 1 to %v", h.heads, h.dim)
	}
	hd := h.dim.v / h.heads.v
	heads := fmt.Sprintf("%v (head size %s / %s = %d)", h.heads, h.dim.key, h.heads.key, hd)
	if h.headDim != nil {
		if h.headDim.v < 1 {
			return bad("%v, want at least 1", *h.headDim)
		}
		hd = h.headDim.v
		heads = fmt.Sprintf("%v and %v", h.heads, *h.headDim)
	}
	if rows, cols, ok := ft.shape(ft.q(0)); ok && (h.heads.v > rows || hd > rows || h.heads.v*hd != rows) {
		return bad("%s: %s has shape [%d %d], the header implies [%s×%d %d]", heads, ft.q(0), rows, cols, h.heads.text, hd, dim)
	}
	if h.kvHeads.v < 1 || h.kvHeads.v > h.heads.v {
		return bad("%v, want 1 to %v", h.kvHeads, h.heads)
	}
	if rows, cols, ok := ft.shape(ft.k(0)); ok && (h.kvHeads.v > rows || hd > rows || h.kvHeads.v*hd != rows) {
		return bad("%v with head size %d: %s has shape [%d %d], the header implies [%s×%d %d]", h.kvHeads, hd, ft.k(0), rows, cols, h.kvHeads.text, hd, dim)
	}
	if h.hidden.v < 1 {
		return bad("%v, want at least 1", h.hidden)
	}
	if rows, cols, ok := ft.shape(ft.gate(0)); ok && h.hidden.v != rows {
		return bad("%v: %s has shape [%d %d], the header implies [%s %d]", h.hidden, ft.gate(0), rows, cols, h.hidden.text, dim)
	}
	if h.context.v < 0 || h.context.v > maxContext {
		return bad("%v, want 0 (unknown) to %d tokens", h.context, maxContext)
	}
	return nil
}

// maxListed is how many problems a load error lists before it counts the
// rest.
const maxListed = 8

// joinFirst joins errs like errors.Join, listing at most maxListed of them
// and counting the rest, so that a file with many problems gives a short
// message.
func joinFirst(errs []error) error {
	var kept []error
	for _, e := range errs {
		if e != nil {
			kept = append(kept, e)
		}
	}
	if n := len(kept); n > maxListed {
		kept = append(kept[:maxListed:maxListed], fmt.Errorf("and %d more problems", n-maxListed))
	}
	return errors.Join(kept...)
}
