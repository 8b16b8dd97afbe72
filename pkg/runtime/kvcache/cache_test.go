package kvcache_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
	. "github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

func f32view(b []byte) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func f16round(x float32) float32  { return simd.F16ToF32Scalar(simd.F32ToF16Scalar(x)) }
func bf16round(x float32) float32 { return simd.BF16ToF32Scalar(simd.F32ToBF16Scalar(x)) }

// coarse is a test format that rounds every value to a multiple of step and
// stores it as float32; with group > 1 it rounds each group of rows to the
// group's mean offset so that grouping is observable. It counts as quantized,
// so fp16 windows apply to it.
type coarse struct {
	step  float32
	group int
}

func (f coarse) Name() string { return fmt.Sprintf("coarse%d", f.group) }

// Traits implements quant.Format: a test format describes nothing, so no
// backend kernel tries to read it.
func (f coarse) Traits(bool) quant.Traits { return quant.Traits{} }
func (f coarse) NewCodec(p quant.CodecParams) (quant.Codec, error) {
	return &coarseCodec{dim: p.Dim, step: f.step, group: max(1, f.group)}, nil
}

type coarseCodec struct {
	dim   int
	step  float32
	group int
}

func (c *coarseCodec) TokenGroup() int        { return c.group }
func (c *coarseCodec) TileBytes(rows int) int { return rows * c.dim * 4 }
func (c *coarseCodec) StateBytes() int        { return 3 }
func (c *coarseCodec) q(x float32) float32 {
	return float32(math.Round(float64(x/c.step))) * c.step
}
func (c *coarseCodec) Encode(tile []byte, row0 int, src []float32, n int) {
	if row0%c.group != 0 || n%c.group != 0 {
		panic("coarse: unaligned encode")
	}
	v, _ := asF32Test(tile)
	for i := 0; i < n*c.dim; i++ {
		v[row0*c.dim+i] = c.q(src[i])
	}
}
func (c *coarseCodec) Decode(dst []float32, tile []byte, row0, n int) {
	v, _ := asF32Test(tile)
	copy(dst, v[row0*c.dim:(row0+n)*c.dim])
}
func (c *coarseCodec) Scores(dst []float32, ldd int, q []float32, nq int, tile []byte, row0, n int) {
	v, _ := asF32Test(tile)
	for j := 0; j < n; j++ {
		for i := 0; i < nq; i++ {
			var s float32
			for d := 0; d < c.dim; d++ {
				s += q[i*c.dim+d] * v[(row0+j)*c.dim+d]
			}
			dst[i*ldd+j] = s
		}
	}
}
func (c *coarseCodec) Accumulate(acc, w []float32, ldw, nq int, tile []byte, row0, n int) {
	v, _ := asF32Test(tile)
	for j := 0; j < n; j++ {
		for i := 0; i < nq; i++ {
			for d := 0; d < c.dim; d++ {
				acc[i*c.dim+d] += w[i*ldw+j] * v[(row0+j)*c.dim+d]
			}
		}
	}
}

func asF32Test(b []byte) ([]float32, bool) { return f32view(b), true }

type harness struct {
	t      *testing.T
	g      Geometry
	nHeads int
	c      *Cache
	k, v   map[SeqID][][]float32 // [pos][kvh*dim] as written
	rng    *rand.Rand
	spec   quant.Spec
	stored func(side int, seq SeqID, pos int, x []float32) []float32 // what attention should read
}

func newHarness(t *testing.T, g Geometry, nHeads int, spec quant.Spec, blocks int) *harness {
	t.Helper()
	l, err := NewLayout(g, spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(l, Options{Blocks: blocks, Storage: cpu.New(1)})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, g: g, nHeads: nHeads, c: c, k: map[SeqID][][]float32{}, v: map[SeqID][][]float32{}, rng: rand.New(rand.NewPCG(1, 2)), spec: spec}
}

func (h *harness) randRow() []float32 {
	x := make([]float32, h.g.KVHeads*h.g.HeadDim)
	for i := range x {
		x[i] = float32(h.rng.NormFloat64())
	}
	return x
}

// append writes n tokens to seq in all layers, in one step.
func (h *harness) append(seq SeqID, n int) {
	h.t.Helper()
	p, err := h.c.Reserve([]Append{{Seq: seq, N: n}})
	if err != nil {
		h.t.Fatal(err)
	}
	kvd := h.g.KVHeads * h.g.HeadDim
	k, v := make([]float32, 0, n*kvd), make([]float32, 0, n*kvd)
	for i := 0; i < n; i++ {
		kr, vr := h.randRow(), h.randRow()
		h.k[seq] = append(h.k[seq], kr)
		h.v[seq] = append(h.v[seq], vr)
		k, v = append(k, kr...), append(v, vr...)
	}
	for l := 0; l < h.g.Layers; l++ {
		h.c.Storage().(*cpu.Storage).Write(l, k, v, p)
	}
	h.c.Commit(p)
}

// check compares what the cache reads back for positions [from, to) of
// seq in layer (Read, every head, K and V) with want(side, pos, row), the
// values the rules say each position holds, within tol.
func (h *harness) check(seq SeqID, layer int, from, to int, want func(side, pos int, row []float32) []float32, tol float64) {
	h.t.Helper()
	dim := h.g.HeadDim
	got := make([]float32, (to-from)*dim)
	for side, rows := range [][][]float32{h.k[seq], h.v[seq]} {
		for kvh := 0; kvh < h.g.KVHeads; kvh++ {
			h.c.Read(got, layer, seq, side == 0, kvh, from, to)
			for p := from; p < to; p++ {
				w := want(side, p, rows[p])[kvh*dim : (kvh+1)*dim]
				for d, x := range w {
					if g := got[(p-from)*dim+d]; math.Abs(float64(g-x)) > tol {
						h.t.Fatalf("layer %d seq %d side %d head %d position %d (of [%d,%d)) value %d: read %v, want %v", layer, seq, side, kvh, p, from, to, d, g, x)
					}
				}
			}
		}
	}
}

func f64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

func exact(_, _ int, row []float32) []float32 { return row }

func roundRow(f func(float32) float32) func(int, int, []float32) []float32 {
	return func(_, _ int, row []float32) []float32 {
		y := make([]float32, len(row))
		for i, v := range row {
			y[i] = f(v)
		}
		return y
	}
}

func mustSpec(t *testing.T, s string) quant.Spec {
	t.Helper()
	spec, err := quant.Formats().ParseSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

func TestAttendMatchesReference(t *testing.T) {
	g := Geometry{Layers: 2, KVHeads: 2, HeadDim: 8}
	for _, tc := range []struct {
		spec string
		want func(int, int, []float32) []float32
		tol  float64
	}{
		{"fp32", exact, 1e-5},
		{"fp16", roundRow(f16round), 1e-5},
		{"bf16", roundRow(bf16round), 1e-5},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			h := newHarness(t, g, 4, mustSpec(t, tc.spec), 16)
			if err := h.c.AddSeq(0); err != nil {
				t.Fatal(err)
			}
			h.append(0, 5)  // partial first block
			h.append(0, 40) // crosses several blocks
			for _, r := range [][2]int{{0, 1}, {0, 45}, {3, 17}, {16, 32}, {30, 45}} {
				h.check(0, 1, r[0], r[1], tc.want, tc.tol)
			}
		})
	}
}

func TestWindows(t *testing.T) {
	g := Geometry{Layers: 1, KVHeads: 1, HeadDim: 4}
	const step = 0.5
	c1 := coarse{step: step, group: 1}
	c4 := coarse{step: step, group: 4}
	q := func(x float32) float32 { return float32(math.Round(float64(x/step))) * step }
	for _, tc := range []struct {
		name      string
		f         quant.Format
		sink, res int
		n         int
	}{
		{"plain", c1, 0, 0, 37},
		{"sink", c1, 3, 0, 37},
		{"residual", c1, 0, 5, 37},
		{"sink+residual", c1, 2, 7, 37},
		{"residual larger than sequence", c1, 1, 64, 37},
		{"group", c4, 0, 0, 37},
		{"group+residual", c4, 1, 6, 38},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := quant.Spec{K: tc.f, V: tc.f, Sink: tc.sink, Residual: tc.res}
			h := newHarness(t, g, 2, spec, 8)
			if err := h.c.AddSeq(0); err != nil {
				t.Fatal(err)
			}
			h.append(0, 9)
			h.append(0, tc.n-9)
			n := h.c.Len(0)
			staged := n
			if tc.f.(coarse).group > 1 {
				staged = n - n%tc.f.(coarse).group
			}
			want := func(_ int, pos int, row []float32) []float32 {
				if pos < tc.sink || pos >= n-tc.res || pos >= staged {
					return roundRow(f16round)(0, 0, row)
				}
				if tc.f.(coarse).group > 1 {
					// Group codecs encode from the fp16 staging rows.
					return roundRow(func(x float32) float32 { return q(f16round(x)) })(0, 0, row)
				}
				return roundRow(q)(0, 0, row)
			}
			for _, r := range [][2]int{{0, n}, {0, 1}, {2, n - 3}, {n - 2, n}} {
				h.check(0, 0, r[0], r[1], want, 1e-5)
			}
		})
	}
}

func TestFullError(t *testing.T) {
	g := Geometry{Layers: 1, KVHeads: 1, HeadDim: 4}
	h := newHarness(t, g, 1, mustSpec(t, "fp16"), 3)
	for _, id := range []SeqID{0, 1} {
		if err := h.c.AddSeq(id); err != nil {
			t.Fatal(err)
		}
	}
	p, err := h.c.Reserve([]Append{{Seq: 0, N: 33}}) // 3 blocks
	if err != nil {
		t.Fatal(err)
	}
	h.c.Commit(p)
	_, err = h.c.Reserve([]Append{{Seq: 1, N: 20}})
	var fe *FullError
	if !errors.As(err, &fe) || !errors.Is(err, ErrFull) {
		t.Fatalf("Begin on a full cache = %v, want *FullError", err)
	}
	if fe.Needed != 2 || fe.Free != 0 || fe.Total != 3 {
		t.Errorf("FullError = %+v, want Needed 2, Free 0, Total 3", *fe)
	}
	if !strings.Contains(err.Error(), "needs 2 more blocks") || !strings.Contains(err.Error(), "0 of 3 free") {
		t.Errorf("message %q does not say needed and free blocks", err)
	}
	if err := h.c.Remove(0); err != nil {
		t.Fatal(err)
	}
	if got := h.c.FreeBlocks(); got != 3 {
		t.Errorf("after Remove, FreeBlocks = %d, want 3", got)
	}
	if err := h.c.Remove(0); !errors.Is(err, ErrNoSequence) {
		t.Errorf("second Remove = %v, want ErrNoSequence", err)
	}
	if err := h.c.AddSeq(1); !errors.Is(err, ErrSequence) {
		t.Errorf("duplicate AddSeq = %v, want ErrSequence", err)
	}
}

func TestFork(t *testing.T) {
	g := Geometry{Layers: 2, KVHeads: 2, HeadDim: 8}
	c1 := coarse{step: 0.25, group: 1}
	for _, spec := range []quant.Spec{mustSpec(t, "fp32"), {K: c1, V: c1, Sink: 2, Residual: 5}} {
		t.Run(spec.K.Name(), func(t *testing.T) {
			h := newHarness(t, g, 4, spec, 10)
			if err := h.c.AddSeq(0); err != nil {
				t.Fatal(err)
			}
			h.append(0, 37) // 2 full blocks + 5 tokens
			free := h.c.FreeBlocks()
			if err := h.c.Fork(1, 0); err != nil {
				t.Fatal(err)
			}
			if got := free - h.c.FreeBlocks(); got != 1 {
				t.Errorf("fork used %d new blocks, want 1 (only the partial tail is copied)", got)
			}
			h.k[1] = append([][]float32(nil), h.k[0]...)
			h.v[1] = append([][]float32(nil), h.v[0]...)
			// Both continue differently; each must read its own history.
			h.append(0, 20)
			h.append(1, 14)
			want0 := windowWant(h, 0, spec)
			want1 := windowWant(h, 1, spec)
			h.check(0, 1, 0, h.c.Len(0), want0, 1e-5)
			h.check(1, 1, 0, h.c.Len(1), want1, 1e-5)
			// Removing the source keeps shared blocks alive for the fork.
			if err := h.c.Remove(0); err != nil {
				t.Fatal(err)
			}
			h.check(1, 0, 0, h.c.Len(1), want1, 1e-5)
			if err := h.c.Remove(1); err != nil {
				t.Fatal(err)
			}
			if h.c.FreeBlocks() != 10 {
				t.Errorf("after removing all, FreeBlocks = %d, want 10", h.c.FreeBlocks())
			}
		})
	}
}

func windowWant(h *harness, seq SeqID, spec quant.Spec) func(int, int, []float32) []float32 {
	n := h.c.Len(seq)
	if !quant.Quantized(spec.K) {
		return exact
	}
	step := spec.K.(coarse).step
	return func(_ int, pos int, row []float32) []float32 {
		if pos < spec.Sink || pos >= n-spec.Residual {
			return roundRow(f16round)(0, 0, row)
		}
		return roundRow(func(x float32) float32 { return float32(math.Round(float64(x/step))) * step })(0, 0, row)
	}
}

func TestLayoutBytes(t *testing.T) {
	// Llama-3.1-8B: 32 layers, 8 KV heads, head_dim 128: fp16 is 131,072
	// bytes per token, 2 MiB per 16-token block.
	l, err := NewLayout(Geometry{Layers: 32, KVHeads: 8, HeadDim: 128}, mustSpec(t, "fp16"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if l.BlockBytes != 2*1024*1024 || l.BlockTokens != 16 || l.SeqBytes != 0 {
		t.Errorf("fp16 layout: block %d bytes of %d tokens, seq %d; want 2097152, 16, 0", l.BlockBytes, l.BlockTokens, l.SeqBytes)
	}
	l32, _ := NewLayout(Geometry{Layers: 32, KVHeads: 8, HeadDim: 128}, mustSpec(t, "fp32"), 0)
	if l32.BlockBytes != 2*l.BlockBytes {
		t.Errorf("fp32 block = %d, want %d", l32.BlockBytes, 2*l.BlockBytes)
	}
	// Group codecs raise the block size to a multiple of the group.
	c := coarse{step: 1, group: 24}
	lg, err := NewLayout(Geometry{Layers: 1, KVHeads: 1, HeadDim: 4}, quant.Spec{K: c, V: quant.FP16, Residual: 3, Sink: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if lg.BlockTokens != 48 {
		t.Errorf("block tokens with a 24-token group = %d, want 48", lg.BlockTokens)
	}
	// K: fp16 windows of sink 1 + residual 3 + staging 24 rows of 4 values; V unquantized: none.
	if want := int64((1 + 3 + 24) * 4 * 2); lg.SeqBytes != want {
		t.Errorf("SeqBytes = %d, want %d", lg.SeqBytes, want)
	}
}

// TestAllocationMatchesLayout checks that Stats (from Layout) equals the bytes
// the cache actually holds.
func TestAllocationMatchesLayout(t *testing.T) {
	g := Geometry{Layers: 3, KVHeads: 2, HeadDim: 8}
	c4 := coarse{step: 1, group: 4}
	for _, spec := range []quant.Spec{mustSpec(t, "fp16"), mustSpec(t, "k=fp32,v=bf16,L0=fp16"), {K: c4, V: quant.FP16, Sink: 2, Residual: 6}} {
		t.Run(spec.K.Name(), func(t *testing.T) {
			h := newHarness(t, g, 2, spec, 7)
			for id := SeqID(0); id < 3; id++ {
				if err := h.c.AddSeq(id); err != nil {
					t.Fatal(err)
				}
			}
			held := h.c.HeldBytes()
			st := h.c.Stats()
			codec := st.Allocated.State
			if st.Allocated.Total-codec != held {
				t.Errorf("Stats says %d bytes (+%d codec state), cache holds %d", st.Allocated.Total-codec, codec, held)
			}
		})
	}
}

// TestPromptFlush checks Hugging Face QuantizedCache's flush points for
// quanto's per-token groups: the prompt is quantized at once; later tokens
// wait in fp16 and are quantized R at a time counted from the end of the
// prompt, a group straddling a block boundary; a fork taken mid-group gets
// its own copy of the blocks the group will be written into (the rows
// written there are the same for both, but the writes could race).
func TestPromptFlush(t *testing.T) {
	const prompt, r = 13, 8
	g := Geometry{Layers: 1, KVHeads: 1, HeadDim: 64}
	spec := mustSpec(t, "quanto4:r8")
	h := newHarness(t, g, 1, spec, 16)
	if bt := h.c.Layout().BlockTokens; bt != DefaultBlockTokens {
		t.Fatalf("block tokens %d, want %d (prompt-flushed rows encode one by one)", bt, DefaultBlockTokens)
	}
	codec, err := spec.K.NewCodec(quant.CodecParams{Dim: g.HeadDim})
	if err != nil {
		t.Fatal(err)
	}
	quantize := func(row []float32) []float32 {
		tile := make([]byte, codec.TileBytes(1))
		codec.Encode(tile, 0, row, 1)
		out := make([]float32, len(row))
		codec.Decode(out, tile, 0, 1)
		return out
	}
	// check reads every position of seq back and compares it with what
	// the flush rule says it holds.
	check := func(seq SeqID) {
		t.Helper()
		n := h.c.Len(seq)
		frontier := prompt + (n-prompt)/r*r
		for side, rows := range [][][]float32{h.k[seq], h.v[seq]} {
			got := make([]float32, n*g.HeadDim)
			h.c.Read(got, 0, seq, side == 0, 0, 0, n)
			for p, row := range rows {
				var want []float32
				switch f16 := roundRow(f16round)(0, 0, row); {
				case p < prompt:
					want = quantize(row)
				case p < frontier:
					want = quantize(f16) // flushed from the fp16 staging rows
				default:
					want = f16
				}
				for i, w := range want {
					if got[p*g.HeadDim+i] != w {
						t.Fatalf("seq %d of %d tokens, side %d, position %d (prompt %d, quantized below %d): value %d = %v, want %v",
							seq, n, side, p, prompt, frontier, i, got[p*g.HeadDim+i], w)
					}
				}
			}
		}
	}
	if err := h.c.AddSeq(0); err != nil {
		t.Fatal(err)
	}
	h.append(0, prompt)
	check(0)
	for h.c.Len(0) < prompt+4 {
		h.append(0, 1)
		check(0)
	}
	// Mid-group (positions 13-16 staged, block 0 full): fork, then let
	// both complete the group differently.
	free := h.c.FreeBlocks()
	if err := h.c.Fork(1, 0); err != nil {
		t.Fatal(err)
	}
	if got := free - h.c.FreeBlocks(); got != 2 {
		t.Errorf("fork mid-group used %d new blocks, want 2 (the full block the group spans, and the tail)", got)
	}
	h.k[1] = append([][]float32(nil), h.k[0]...)
	h.v[1] = append([][]float32(nil), h.v[0]...)
	for h.c.Len(0) < prompt+2*r+3 {
		h.append(0, 1)
		h.append(1, 1)
		check(0)
		check(1)
	}
}

// appendRows writes explicit rows (one per token, all layers) to seq in
// one step and records them.
func (h *harness) appendRows(seq SeqID, k, v [][]float32) {
	h.t.Helper()
	p, err := h.c.Reserve([]Append{{Seq: seq, N: len(k)}})
	if err != nil {
		h.t.Fatal(err)
	}
	var kf, vf []float32
	for i := range k {
		kf, vf = append(kf, k[i]...), append(vf, v[i]...)
	}
	h.k[seq] = append(h.k[seq], k...)
	h.v[seq] = append(h.v[seq], v...)
	for l := 0; l < h.g.Layers; l++ {
		h.c.Storage().(*cpu.Storage).Write(l, kf, vf, p)
	}
	h.c.Commit(p)
}

// readSeq decodes every position of seq, all layers, heads and sides.
func readSeq(c *Cache, g Geometry, seq SeqID) []float32 {
	n := c.Len(seq)
	var out []float32
	buf := make([]float32, n*g.HeadDim)
	for l := 0; l < g.Layers; l++ {
		for _, key := range []bool{true, false} {
			for h := 0; h < g.KVHeads; h++ {
				c.Read(buf, l, seq, key, h, 0, n)
				out = append(out, buf...)
			}
		}
	}
	return out
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestTruncate checks that a truncated sequence reads exactly as a fresh
// one that only ever held the kept tokens, before and after it grows
// again: for a plain format, and for fp16 windows (sink, residual ring,
// staging groups) within LayoutOptions.Rollback; beyond it, Truncate
// refuses and changes nothing.
func TestTruncate(t *testing.T) {
	g := Geometry{Layers: 2, KVHeads: 2, HeadDim: 8}
	c4 := coarse{step: 0.25, group: 4}
	for _, tc := range []struct {
		name     string
		spec     quant.Spec
		rollback int
		n, cut   int
		refused  bool
	}{
		{"fp16", mustSpec(t, "fp16"), 0, 40, 15, false},
		{"windows", quant.Spec{K: c4, V: quant.FP16, Sink: 2, Residual: 5}, 6, 37, 6, false},
		{"windows, whole rollback", quant.Spec{K: c4, V: c4, Residual: 3}, 9, 30, 9, false},
		{"windows beyond rollback", quant.Spec{K: c4, V: quant.FP16, Residual: 5}, 2, 30, 3, true},
		{"windows without rollback", quant.Spec{K: c4, V: c4, Residual: 5}, 0, 30, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := NewLayoutWith(g, tc.spec, LayoutOptions{Rollback: tc.rollback})
			if err != nil {
				t.Fatal(err)
			}
			c, err := New(l, Options{Blocks: 16, Storage: cpu.New(1)})
			if err != nil {
				t.Fatal(err)
			}
			h := &harness{t: t, g: g, c: c, k: map[SeqID][][]float32{}, v: map[SeqID][][]float32{}, rng: rand.New(rand.NewPCG(5, 6)), spec: tc.spec}
			_ = c.AddSeq(0)
			h.append(0, tc.n-9)
			for i := 0; i < 9; i++ {
				h.append(0, 1)
			}
			keep := tc.n - tc.cut
			before := readSeq(c, g, 0)
			err = c.Truncate(0, keep)
			if tc.refused {
				if !errors.Is(err, ErrTruncate) || c.Len(0) != tc.n || !sameBits(readSeq(c, g, 0), before) {
					t.Fatalf("Truncate beyond the rollback rows = %v (length %d), want ErrTruncate and nothing changed", err, c.Len(0))
				}
				if err := c.Truncate(0, 0); err != nil || c.Len(0) != 0 {
					t.Fatalf("Truncate to 0 = %v, length %d", err, c.Len(0))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// A fresh sequence fed the same kept rows the same way.
			_ = c.AddSeq(1)
			if a := tc.n - 9; keep <= a {
				h.appendRows(1, h.k[0][:keep], h.v[0][:keep])
			} else {
				h.appendRows(1, h.k[0][:a], h.v[0][:a])
				for p := a; p < keep; p++ {
					h.appendRows(1, h.k[0][p:p+1], h.v[0][p:p+1])
				}
			}
			h.k[0], h.v[0] = h.k[0][:keep], h.v[0][:keep]
			if got, want := readSeq(c, g, 0), readSeq(c, g, 1); !sameBits(got, want) {
				t.Fatalf("truncated to %d tokens: reads differ from a fresh sequence of the same tokens", keep)
			}
			for i := 0; i < 7; i++ {
				k, v := [][]float32{h.randRow()}, [][]float32{h.randRow()}
				h.appendRows(0, k, v)
				h.appendRows(1, k, v)
				if got, want := readSeq(c, g, 0), readSeq(c, g, 1); !sameBits(got, want) {
					t.Fatalf("%d tokens after the truncation: reads differ from the fresh sequence", i+1)
				}
			}
		})
	}
}

// TestTruncateShared truncates a fork into a block it shares with its
// source: the fork gets its own copy before writing, so the source keeps
// its rows.
func TestTruncateShared(t *testing.T) {
	g := Geometry{Layers: 1, KVHeads: 1, HeadDim: 8}
	h := newHarness(t, g, 1, mustSpec(t, "fp32"), 10)
	_ = h.c.AddSeq(0)
	h.append(0, 40) // blocks 0, 1 full, 2 partial
	if err := h.c.Fork(1, 0); err != nil {
		t.Fatal(err)
	}
	src := readSeq(h.c, g, 0)
	if err := h.c.Truncate(1, 20); err != nil { // into shared block 1
		t.Fatal(err)
	}
	h.k[1], h.v[1] = append([][]float32(nil), h.k[0][:20]...), append([][]float32(nil), h.v[0][:20]...)
	h.append(1, 15)
	if !sameBits(readSeq(h.c, g, 0), src) {
		t.Fatal("writing the truncated fork changed its source")
	}
	h.check(1, 0, 0, 35, exact, 0)
}

// TestBudget checks that a byte budget bounds what the cache holds, with
// windows counted per sequence, and that CanAdmit says what AddSeq and
// Reserve will do.
func TestBudget(t *testing.T) {
	g := Geometry{Layers: 2, KVHeads: 2, HeadDim: 8}
	c4 := coarse{step: 0.25, group: 4}
	l, err := NewLayout(g, quant.Spec{K: c4, V: quant.FP16, Residual: 4}, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Room for 2 sequences' windows and 5 blocks.
	budget := l.StateBytes + 2*l.SeqBytes + 5*l.BlockBytes
	c, err := New(l, Options{Budget: budget, Storage: cpu.New(1)})
	if err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Blocks != l.BlocksForBudget(budget, 0) {
		t.Errorf("pool of %d blocks, want %d (the budget without windows)", st.Blocks, l.BlocksForBudget(budget, 0))
	}
	bt := l.BlockTokens
	if !c.CanAdmit(3*bt) || c.CanAdmit(5*bt+1) {
		t.Errorf("CanAdmit(%d) = %v, CanAdmit(%d) = %v; want true, false", 3*bt, c.CanAdmit(3*bt), 5*bt+1, c.CanAdmit(5*bt+1))
	}
	_ = c.AddSeq(0)
	p, err := c.Reserve([]Append{{Seq: 0, N: 3 * bt}})
	if err != nil {
		t.Fatal(err)
	}
	c.Commit(p)
	_ = c.AddSeq(1)
	if !c.CanGrow(1, 2*bt) || c.CanGrow(1, 2*bt+1) {
		t.Error("CanGrow: 2 blocks left in the budget")
	}
	var fe *FullError
	if _, err := c.Reserve([]Append{{Seq: 1, N: 2*bt + 1}}); !errors.As(err, &fe) {
		t.Errorf("Reserve over budget = %v, want a FullError", err)
	}
	p, err = c.Reserve([]Append{{Seq: 1, N: 2 * bt}})
	if err != nil {
		t.Fatal(err)
	}
	c.Commit(p)
	if c.CanAdmit(0) {
		t.Error("CanAdmit(0) with the budget full: a third sequence's windows do not fit")
	}
	if err := c.AddSeq(2); !errors.As(err, &fe) || fe.NeededBytes != l.SeqBytes {
		t.Errorf("AddSeq over budget = %v, want a FullError needing %d bytes", err, l.SeqBytes)
	}
	if in := c.InUseBytes(); in > budget {
		t.Errorf("%d bytes in use, budget %d", in, budget)
	}
	if err := c.Remove(0); err != nil {
		t.Fatal(err)
	}
	if !c.CanAdmit(3 * bt) {
		t.Error("after Remove, the freed blocks and windows are admissible again")
	}
}

// TestReserveErrors checks that a failed Reserve changes nothing and that
// a pending step blocks management calls.
func TestReserveErrors(t *testing.T) {
	g := Geometry{Layers: 1, KVHeads: 1, HeadDim: 8}
	h := newHarness(t, g, 1, mustSpec(t, "fp16"), 4)
	_ = h.c.AddSeq(0)
	_ = h.c.AddSeq(1)
	for _, as := range [][]Append{nil, {{Seq: 7, N: 1}}, {{Seq: 0, N: 1}, {Seq: 0, N: 2}}, {{Seq: 0, N: 0}}, {{Seq: 0, N: 40}, {Seq: 1, N: 40}}} {
		if _, err := h.c.Reserve(as); err == nil {
			t.Errorf("Reserve(%v): no error", as)
		}
		if h.c.Len(0) != 0 || h.c.Len(1) != 0 || h.c.FreeBlocks() != 4 {
			t.Fatalf("failed Reserve(%v) changed the cache", as)
		}
	}
	p, err := h.c.Reserve([]Append{{Seq: 0, N: 3}})
	if err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{"AddSeq": h.c.AddSeq(5), "Remove": h.c.Remove(1), "Fork": h.c.Fork(6, 0), "Truncate": h.c.Truncate(0, 1)} {
		if !errors.Is(err, ErrPending) {
			t.Errorf("%s during a pending step = %v, want ErrPending", name, err)
		}
	}
	if _, err := h.c.Reserve([]Append{{Seq: 1, N: 1}}); !errors.Is(err, ErrPending) {
		t.Errorf("second Reserve = %v, want ErrPending", err)
	}
	h.c.Rollback(p)
	if h.c.Len(0) != 0 || h.c.FreeBlocks() != 4 {
		t.Errorf("after Rollback: length %d, %d blocks free", h.c.Len(0), h.c.FreeBlocks())
	}
}
