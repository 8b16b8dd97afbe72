package runtime

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// Caches side by side (RunnerOptions.AsAlone). Eval reads one text, or
// decodes one prompt, with several caches at once: one entry per cache,
// the same tokens at the same positions. Each entry's rows go through the
// matrix products as a group of their own (backend.RowGroups), so that
// every cache scores as it would alone, bit for bit; the dense layers
// still run in one step, and a decode step streams each weight matrix
// once for all the caches (the row groups of one row share one pass).
//
// The entries' activations are then the same, row group for row group,
// until the first layer's attention: there the step's keys and values are
// written to each cache and read back through its encoding, and each
// cache's attention output differs. The embedding and the first layer's
// work before it (its norm, Q/K/V products, biases, q/k norms, RoPE) are
// computed once, for the first entry's rows, and copied to the others'
// (sharedOps): the others' products would compute the same bits, over the
// same rows with the same kernels.
//
// An Exact step of sequences still empty (a prompt with Hugging Face's
// prefill, kvq eval --exact-prefill) reads only the step's own keys and
// values, not the caches: every layer's activations are then the same in
// every entry's rows, and the whole step is computed once and written to
// every cache.

// sharedRows returns the rows per entry of a step whose entries can share
// that work (n > 1 entries over the same tokens at the same positions,
// on a host-memory backend with row groups, no observer), or 0; and
// whether they share every layer (Exact entries of empty sequences).
func (r *Runner) sharedRows(be backend.Backend, batch []Entry) (int, bool) {
	if !r.alone || r.invariant || r.obs != nil || len(batch) < 2 {
		return 0, false
	}
	// sharedOps is a backend.Backend and nothing more: a family whose
	// block asks its ops for an optional interface (Needs: Gemma's
	// SoftcapOps; experts: backend.MoE, GPT-OSS's sinks) runs unshared.
	if r.family.Needs != nil || r.m.Config.Experts > 0 {
		return 0, false
	}
	if _, ok := be.(backend.HostMemory); !ok {
		return 0, false
	}
	if _, ok := r.be.(backend.RowGroups); !ok {
		return 0, false
	}
	e0 := batch[0]
	p0 := e0.Cache.Len(e0.Seq) - len(e0.Tokens) // reserved: Len counts the step
	whole := p0 == 0
	for _, e := range batch {
		if e.Cache.Len(e.Seq)-len(e.Tokens) != p0 || !slices.Equal(e.Tokens, e0.Tokens) {
			return 0, false
		}
		whole = whole && e.Exact
	}
	return len(e0.Tokens), whole
}

// replicate copies the first per values of t to the next n−1 runs of per
// values (t is host memory: sharedRows checked).
func replicate(be backend.Backend, t backend.Tensor, per, n int) {
	v := be.(backend.HostMemory).Host(t)
	for g := 1; g < n; g++ {
		copy(v[g*per:(g+1)*per], v[:per])
	}
}

// sharedOps is the first layer's view of the step's ops when its n
// entries of per rows each share their work before the attention: until
// the block writes the keys and values to the caches, each op over the
// step's nt rows runs over the first entry's rows and its output is copied
// to the other entries' rows (every input is then the same in every
// entry's rows, so the outputs are those of the full op). An op it does
// not know runs over every row, on those same inputs. WriteKV and
// Attention, the first ops that differ by cache, end the sharing for the
// rest of the block.
type sharedOps struct {
	backend.Backend
	per, n, nt int  // n entries of per rows, nt = n·per
	on         bool // still sharing
	// whole: the entries share every layer (an Exact step of empty
	// sequences): each cache is written, the first's attention computed
	// and copied to the others' rows (attWidth values a row), and the
	// sharing goes on.
	whole    bool
	attWidth int
	attLayer int // the layer whose attention was last computed
}

// part is the first entry's share of a count over the step's rows, and
// whether the op can share (a count that is not a multiple of n is
// not over the step's rows).
func (s *sharedOps) part(count int) (int, bool) {
	if !s.on || count%s.n != 0 {
		return count, false
	}
	return count / s.n, true
}

func (s *sharedOps) copyOut(t backend.Tensor, per int) { replicate(s.Backend, t, per, s.n) }

// MatMul implements backend.Backend: the product over the first entry's
// rows (the row group the backend's view computes as alone).
func (s *sharedOps) MatMul(dst, x backend.Tensor, nt int, w backend.Matrix) {
	if !s.on || nt != s.nt {
		s.Backend.MatMul(dst, x, nt, w)
		return
	}
	s.Backend.MatMul(dst, x, s.per, w)
	rows, _ := w.Dims()
	s.copyOut(dst, s.per*rows)
}

// RMSNorm implements backend.Backend.
func (s *sharedOps) RMSNorm(dst, x backend.Tensor, rows int, w backend.Tensor, eps float32) {
	k, ok := s.part(rows)
	s.Backend.RMSNorm(dst, x, k, w, eps)
	if ok {
		s.copyOut(dst, k*w.Len())
	}
}

// AddBias implements backend.Backend.
func (s *sharedOps) AddBias(x backend.Tensor, nt int, b backend.Tensor) {
	k, ok := s.part(nt)
	s.Backend.AddBias(x, k, b)
	if ok {
		s.copyOut(x, k*b.Len())
	}
}

// RoPE implements backend.Backend (the entries' positions are the same).
func (s *sharedOps) RoPE(x backend.Tensor, nt, heads, headDim, rotDim int, angles backend.Tensor, neox bool) {
	k, ok := s.part(nt)
	s.Backend.RoPE(x, k, heads, headDim, rotDim, angles, neox)
	if ok {
		s.copyOut(x, k*heads*headDim)
	}
}

// SwiGLU implements backend.Backend.
func (s *sharedOps) SwiGLU(gate, up backend.Tensor, n int) {
	k, ok := s.part(n)
	s.Backend.SwiGLU(gate, up, k)
	if ok {
		s.copyOut(gate, k)
	}
}

// Add implements backend.Backend.
func (s *sharedOps) Add(dst, src backend.Tensor, n int) {
	k, ok := s.part(n)
	s.Backend.Add(dst, src, k)
	if ok {
		s.copyOut(dst, k)
	}
}

// Copy implements backend.Backend.
func (s *sharedOps) Copy(dst, src backend.Tensor, n int) {
	k, ok := s.part(n)
	s.Backend.Copy(dst, src, k)
	if ok {
		s.copyOut(dst, k)
	}
}

// WriteKV implements backend.Backend: the caches' part begins (every
// cache is written, sharing or not).
func (s *sharedOps) WriteKV(kv kvcache.Storage, layer int, k, v backend.Tensor, p *kvcache.Plan) {
	s.on = s.on && s.whole
	s.Backend.WriteKV(kv, layer, k, v, p)
}

// Attention implements backend.Backend: the caches' part begins; or, for
// a whole step, the first cache's attention of the layer is computed and
// copied to every entry's rows, and the others' are not computed (they
// read the same exact keys and values).
func (s *sharedOps) Attention(dst, q, k, v backend.Tensor, kv kvcache.Storage, layer int, p *kvcache.Plan, a backend.AttnParams) {
	if !s.on || !s.whole {
		s.on = false
		s.Backend.Attention(dst, q, k, v, kv, layer, p, a)
		return
	}
	if layer == s.attLayer {
		return
	}
	s.attLayer = layer
	s.Backend.Attention(dst, q, k, v, kv, layer, p, a)
	s.copyOut(dst, s.per*s.attWidth)
}

// logitsAlone is logits for AsAlone: each entry's rows in the chunks its
// own step would take (logitsChunk of its row count), the chunks of every
// entry computed together as row groups, handed to fn in logits' order
// (by token index, then entry).
func (r *Runner) logitsAlone(ctx context.Context, be backend.Backend, batch []Entry, fn LogitsFunc) error {
	c, b := &r.m.Config, &r.buf
	first := make([]int, len(batch)) // each entry's first activation row
	want := make([]int, len(batch))  // its logits rows
	chunk := make([]int, len(batch))
	row, most := 0, 0
	for ei, e := range batch {
		first[ei] = row
		row += len(e.Tokens)
		switch e.Logits {
		case LastLogits:
			want[ei] = 1
		case AllLogits:
			want[ei] = len(e.Tokens)
		}
		chunk[ei] = logitsChunk(c.Vocab, max(1, want[ei]))
		most += chunk[ei]
	}
	if most == 0 || slices.Max(want) == 0 {
		return nil
	}
	if fn == nil {
		return fmt.Errorf("%w: logits asked for with no consumer", ErrBatch)
	}
	lg := &b.lg
	lg.ensure(be, c, most)
	rg := be.(backend.RowGroups)
	lo := make([]int, len(batch)) // this round's first row of each entry
	for round := 0; ; round++ {
		b.rows, b.sizes = b.rows[:0], b.sizes[:0]
		start := make([]int, len(batch)) // each entry's first row in the round's rows
		for ei, e := range batch {
			lo[ei] = min(want[ei], round*chunk[ei])
			hi := min(want[ei], lo[ei]+chunk[ei])
			start[ei] = len(b.rows)
			for i := lo[ei]; i < hi; i++ {
				at := first[ei] + i
				if e.Logits == LastLogits {
					at = first[ei] + len(e.Tokens) - 1
				}
				b.rows = append(b.rows, int32(at))
			}
			if hi > lo[ei] {
				b.sizes = append(b.sizes, hi-lo[ei])
			}
		}
		n := len(b.rows)
		if n == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("runtime: forward stopped computing logits: %w", err)
		}
		be.Gather(lg.x, b.x, b.rows, c.Dim)
		be.RMSNorm(lg.x, lg.x, n, r.w.norm, c.RMSEps)
		rg.RowGroups(b.sizes).MatMul(lg.out, lg.x, n, r.w.output)
		host := lg.host[:n*c.Vocab]
		if err := be.Download(host, lg.out, 0); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil { // the product may have stopped early
			return fmt.Errorf("runtime: forward stopped computing logits: %w", err)
		}
		// Rows go out by token index, then entry. A round holds the
		// indexes below one chunk of every entry whose rows fill a
		// chunk, and all of the others' rows (fewer than one chunk): the
		// order holds across rounds.
		from, to := math.MaxInt, 0 // the round's token indexes
		for ei := range batch {
			if hi := min(want[ei], lo[ei]+chunk[ei]); hi > lo[ei] {
				from, to = min(from, lo[ei]), max(to, hi)
			}
		}
		for i := from; i < to; i++ {
			for ei := range batch {
				if i < lo[ei] || i >= min(want[ei], lo[ei]+chunk[ei]) {
					continue
				}
				j := start[ei] + i - lo[ei]
				if r.family.Logits != nil { // Gemma 2's final softcap, as logits applies it
					r.family.Logits(c, host[j*c.Vocab:(j+1)*c.Vocab])
				}
				if err := fn(ei, i, host[j*c.Vocab:(j+1)*c.Vocab]); err != nil {
					return err
				}
			}
		}
	}
}
