//go:build cudaemu || cuda

package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/backend/backendtest"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// Tolerances, relative to the largest |value| a query row attends to.
const (
	// kernelTol bounds a fast kernel against the reference kernel: both
	// compute in fp32, in other orders (online softmax over tiles, split
	// chunks), with exp2 instead of exp; the decode kernels' 16-bit terms
	// carry 22 bits of the queries and weights for fp16, 24 and 16 for
	// bf16 (2^-17 ≈ 7.6e-6 of a weight). Worst measured on the emulator:
	// 3e-7 (prefill), 1.9e-6 (decode); a GPU's tensor cores may accumulate
	// with fewer bits than the emulator's fp32 sums, hence the margin.
	kernelTol = 3e-5
	// refTol bounds the reference kernel against float64 attention on the
	// rows the cache decodes: float32 arithmetic (backendtest.DecodedTol).
	refTol = backendtest.DecodedTol
)

// attnScene is one cache on the GPU with a step in progress, and its
// inputs.
type attnScene struct {
	t     *testing.T
	b     *Backend
	l     *kvcache.Layout
	c     *kvcache.Cache
	s     *Storage
	heads int
	rng   *rand.Rand
	// softcap is AttnParams.Softcap of every run (0: none).
	softcap float32

	p          *kvcache.Plan
	nt         int
	q, k, v    []float32 // host rows of the step
	qt, kt, vt backend.Tensor
}

func newAttnScene(t *testing.T, b *Backend, f quant.Format, dim, kvHeads, heads, blocks int) *attnScene {
	t.Helper()
	return newAttnSceneWith(t, b, quant.Spec{K: f, V: f}, dim, kvHeads, heads, blocks, 0)
}

// newAttnSceneWith is newAttnScene for a spec and a block size (0: the
// default).
func newAttnSceneWith(t *testing.T, b *Backend, spec quant.Spec, dim, kvHeads, heads, blocks, bt int) *attnScene {
	t.Helper()
	l, err := kvcache.NewLayout(kvcache.Geometry{Layers: 1, KVHeads: kvHeads, HeadDim: dim}, spec, bt)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kvcache.New(l, kvcache.Options{Blocks: blocks, Storage: b, PoisonFreed: true})
	if err != nil {
		t.Fatal(err)
	}
	return &attnScene{t: t, b: b, l: l, c: c, s: c.Storage().(*Storage), heads: heads, rng: rand.New(rand.NewPCG(uint64(dim), uint64(heads)))}
}

// begin reserves a step of n[i] tokens for sequence i (0 skips it), the
// rows in order, writes its K and V rows and uploads its queries.
func (sc *attnScene) begin(n map[kvcache.SeqID]int, ids []kvcache.SeqID, exact bool) {
	sc.t.Helper()
	var as []kvcache.Append
	sc.nt = 0
	for _, id := range ids {
		if n[id] > 0 {
			as = append(as, kvcache.Append{Seq: id, Row: sc.nt, N: n[id], Exact: exact})
			sc.nt += n[id]
		}
	}
	p, err := sc.c.Reserve(as)
	if err != nil {
		sc.t.Fatal(err)
	}
	sc.p = p
	dim, kvh := sc.l.HeadDim, sc.l.KVHeads
	sc.k = backendtest.RandRows(sc.rng, sc.nt*kvh, dim)
	sc.v = backendtest.RandRows(sc.rng, sc.nt*kvh, dim)
	sc.q = backendtest.RandRows(sc.rng, sc.nt*sc.heads, dim)
	for i := range sc.q {
		sc.q[i] *= 0.3
	}
	sc.kt, sc.vt, sc.qt = sc.upload(sc.k), sc.upload(sc.v), sc.upload(sc.q)
	sc.b.WriteKV(sc.s, 0, sc.kt, sc.vt, p)
}

// end commits the step.
func (sc *attnScene) end() {
	for _, x := range []backend.Tensor{sc.kt, sc.vt, sc.qt} {
		sc.b.Free(x)
	}
	sc.c.Commit(sc.p)
}

func (sc *attnScene) upload(v []float32) backend.Tensor {
	sc.t.Helper()
	x, err := sc.b.UploadF32(v)
	if err != nil {
		sc.t.Fatal(err)
	}
	return x
}

// sentinel fills the output rows before a run: a kernel that leaves a
// row of the plan unwritten, or writes past it, shows.
const sentinel = 12345.0

// run computes the step's attention with path and chunk forced; the
// output has one row more than the step, which must keep the sentinel.
func (sc *attnScene) run(path attnPath, chunk, window int) []float32 {
	sc.t.Helper()
	qd := sc.heads * sc.l.HeadDim
	init := make([]float32, (sc.nt+1)*qd)
	for i := range init {
		init[i] = sentinel
	}
	dst := sc.upload(init)
	defer sc.b.Free(dst)
	sc.s.path, sc.s.chunk = path, chunk
	defer func() { sc.s.path, sc.s.chunk = pathAuto, 0 }()
	a := backend.AttnParams{Heads: sc.heads, Scale: float32(1 / math.Sqrt(float64(sc.l.HeadDim))), Window: window, Softcap: sc.softcap}
	sc.b.Attention(dst, sc.qt, sc.kt, sc.vt, sc.s, 0, sc.p, a)
	out := make([]float32, len(init))
	if err := sc.b.Download(out, dst, 0); err != nil {
		sc.t.Fatal(err)
	}
	for i, x := range out[sc.nt*qd:] {
		if x != sentinel {
			sc.t.Fatalf("path %d: value %d past the step's rows changed to %v", path, i, x)
		}
	}
	return out[:sc.nt*qd]
}

// want is float64 attention on the rows the cache decodes (an exact
// step's own positions from its activations), and per query row the
// largest |value| it attends to.
func (sc *attnScene) want(window int) (out []float64, vmax []float64) {
	dim, kvh := sc.l.HeadDim, sc.l.KVHeads
	nq, kvd := sc.heads/kvh, kvh*dim
	out = make([]float64, sc.nt*sc.heads*dim)
	vmax = make([]float64, sc.nt*sc.heads)
	for _, st := range sc.p.Seqs {
		for i := 0; i < st.N; i++ {
			pos := st.Pos + i
			from := 0
			if window > 0 {
				from = max(0, pos+1-window)
			}
			n := pos + 1 - from
			keys, vals := make([]float32, n*dim), make([]float32, n*dim)
			for h := 0; h < kvh; h++ {
				sc.c.Read(keys, 0, st.Seq, true, h, from, pos+1)
				sc.c.Read(vals, 0, st.Seq, false, h, from, pos+1)
				if st.Exact {
					for p := max(from, st.Pos); p <= pos; p++ {
						r := (st.Row+p-st.Pos)*kvd + h*dim
						copy(keys[(p-from)*dim:], sc.k[r:r+dim])
						copy(vals[(p-from)*dim:], sc.v[r:r+dim])
					}
				}
				var m float64
				for _, x := range vals {
					m = math.Max(m, math.Abs(float64(x)))
				}
				for j := 0; j < nq; j++ {
					qh := h*nq + j
					row := (st.Row+i)*sc.heads + qh
					copy(out[row*dim:(row+1)*dim], attend64(sc.q[row*dim:(row+1)*dim], keys, vals, dim, 1/math.Sqrt(float64(dim)), float64(sc.softcap)))
					vmax[row] = m
				}
			}
		}
	}
	return out, vmax
}

// attend64 is float64 attention of one query over rows of keys and
// values, the scores capped at cap·tanh(s/cap) when cap > 0.
func attend64(q, keys, vals []float32, dim int, scale, cap float64) []float64 {
	n := len(keys) / dim
	s := make([]float64, n)
	m := math.Inf(-1)
	for j := range s {
		for d := 0; d < dim; d++ {
			s[j] += float64(q[d]) * float64(keys[j*dim+d])
		}
		s[j] *= scale
		if cap > 0 {
			s[j] = cap * math.Tanh(s[j]/cap)
		}
		m = math.Max(m, s[j])
	}
	var sum float64
	for j := range s {
		s[j] = math.Exp(s[j] - m)
		sum += s[j]
	}
	out := make([]float64, dim)
	for j := range s {
		for d := 0; d < dim; d++ {
			out[d] += s[j] / sum * float64(vals[j*dim+d])
		}
	}
	return out
}

// compare fails unless got is within tol·vmax of want, row by row; it
// returns the worst relative difference.
func compare(t *testing.T, what string, got []float32, want []float64, vmax []float64, dim int, tol float64) float64 {
	t.Helper()
	worst := 0.0
	for i, g := range got {
		vm := vmax[i/dim]
		d := math.Abs(float64(g)-want[i]) / vm
		if !(d <= tol) {
			t.Fatalf("%s: row %d dim %d = %v, want %v (diff %.3g of max |v| %.3g > %g)", what, i/dim, i%dim, g, want[i], d, vm, tol)
		}
		worst = math.Max(worst, d)
	}
	return worst
}

func widen(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// checkStep runs the step's attention through every kernel and compares
// them: the reference kernel with float64 attention on the decoded rows,
// each fast path (prefill; decode with several chunks per sequence and
// with the chosen chunk; the automatic choice) with the reference kernel.
func (sc *attnScene) checkStep(label string, window int) {
	sc.t.Helper()
	want, vmax := sc.want(window)
	dim := sc.l.HeadDim
	ref := sc.run(pathRef, 0, window)
	compare(sc.t, label+" ref", ref, want, vmax, dim, refTol)
	ref64 := widen(ref)
	fast := []struct {
		name  string
		path  attnPath
		chunk int
	}{{"prefill", pathPrefill, 0}, {"decode/chunk=16", pathDecode, 16}, {"decode", pathDecode, 0}, {"auto", pathAuto, 0}}
	for _, f := range fast {
		w := compare(sc.t, label+" "+f.name, sc.run(f.path, f.chunk, window), ref64, vmax, dim, kernelTol)
		sc.t.Logf("%s %s: worst %.2g of max |v| from the reference kernel", label, f.name, w)
	}
}

// TestAttentionKernels drives caches of several geometries through
// prefills, interleaved chunked prefills (non-contiguous block tables), a
// fork (shared prefix blocks), multi-token and single-token steps, exact
// steps and sliding windows, checking every kernel at every step.
func TestAttentionKernels(t *testing.T) {
	_, b := openKV(t)
	int4 := quant.Formats().MustLookup("int4:g32")
	for _, f := range []quant.Format{quant.FP16, quant.BF16, quant.Q40, quant.FP8E5M2, int4, quant.Q51} {
		for _, dim := range []int{64, 128} {
			for _, ratio := range []int{1, 4, 8} {
				if quant.Quantized(f) && (dim == 128) != (ratio == 4) {
					continue // the quantized formats: d64 gqa1 and gqa8, d128 gqa4
				}
				const kvHeads = 2
				t.Run(fmt.Sprintf("%s/d%d/gqa%d", f.Name(), dim, ratio), func(t *testing.T) {
					sc := newAttnScene(t, b, f, dim, kvHeads, kvHeads*ratio, 40)
					ids := []kvcache.SeqID{0, 1, 2}
					for _, id := range ids[:2] {
						if err := sc.c.AddSeq(id); err != nil {
							t.Fatal(err)
						}
					}
					steps := []struct {
						n      map[kvcache.SeqID]int
						exact  bool
						window int
						fork   bool
					}{
						{n: map[kvcache.SeqID]int{0: 40, 1: 23}, window: 0},
						{n: map[kvcache.SeqID]int{0: 30, 1: 41}, window: 19, fork: true},
						{n: map[kvcache.SeqID]int{0: 1, 1: 3, 2: 2}, window: 0},
						{n: map[kvcache.SeqID]int{0: 5, 1: 1, 2: 9}, exact: true, window: 0},
						{n: map[kvcache.SeqID]int{0: 2, 1: 1, 2: 1}, exact: true, window: 6},
						{n: map[kvcache.SeqID]int{0: 1, 1: 1, 2: 1}, window: 50},
					}
					for i, st := range steps {
						sc.begin(st.n, ids, st.exact)
						sc.checkStep(fmt.Sprintf("step %d", i), st.window)
						sc.end()
						if st.fork {
							if err := sc.c.Fork(2, 0); err != nil {
								t.Fatal(err)
							}
						}
					}
				})
			}
		}
	}
}

// TestQDecodeLoaders checks the quantized decode's vector loaders (one
// kernel per format family, packed bytes staged with 16-byte copies)
// against its generic loader bit for bit — the same decoded values and
// the same arithmetic after them — and against the reference kernel
// within kernelTol, for every family at head sizes 64 and 128 (96 and
// 256: the generic loader against the reference), block sizes 8, 16 and 64, int groups that split a unit's 4 values
// (groups of 2), over decode, multi-token, exact and sliding-window
// steps with one and several chunks per sequence.
func TestQDecodeLoaders(t *testing.T) {
	_, b := openKV(t)
	reg := quant.Formats()
	type tc struct {
		spec   string
		dim    int
		bt     int
		family string
	}
	var cases []tc
	for _, f := range []struct{ spec, family string }{
		{"fp8-e4m3", "e4m3"}, {"fp8-e5m2", "e5m2"}, {"q8_0", "q8_0"}, {"q4_0", "q4_0"}, {"q4_1", "q4_1"},
		{"q5_0", "q5_0"}, {"q5_1", "q5_1"}, {"iq4_nl", "iq4_nl"}, {"int8:g32", "int8"}, {"int4", "int4"},
		{"int2:g2", "int2"}, {"int4:g16:sym", "int4"}, {"k=int8:g64:sym,v=int8:g2", "int8"},
	} {
		cases = append(cases, tc{f.spec, 64, 0, f.family})
	}
	// Head sizes 96 and 256 have the generic loader only: the cases check
	// it against the reference kernel (and itself).
	cases = append(cases, tc{"q4_0", 96, 0, ""}, tc{"int4:g32", 96, 0, ""}, tc{"q8_0", 128, 0, "q8_0"},
		tc{"fp8-e4m3", 128, 0, "e4m3"}, tc{"int2:g4", 128, 0, "int2"}, tc{"q5_1", 256, 0, ""}, tc{"int2:g64", 256, 0, ""},
		tc{"q4_0", 64, 8, "q4_0"}, tc{"int4:g32", 64, 64, "int4"}, tc{"q4_1", 128, 64, "q4_1"},
		tc{"k=q8_0,v=q4_0", 64, 0, ""}) // K ≠ V families: the generic loader
	for _, c := range cases {
		spec, err := reg.ParseSpec(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(fmt.Sprintf("%s/d%d/bt%d", c.spec, c.dim, c.bt), func(t *testing.T) {
			sc := newAttnSceneWith(t, b, spec, c.dim, 2, 8, 60, c.bt)
			at := attnArgs{s: sc.s, ks: &sc.s.sides[0][0], vs: &sc.s.sides[0][1]}
			name, _ := at.qdecodeKernel()
			if want := fmt.Sprintf("kvq_attn_qdecode_%s_d%d", c.family, c.dim); c.family == "" {
				if want = fmt.Sprintf("kvq_attn_qdecode_d%d", c.dim); name != want {
					t.Fatalf("kernel %s, want %s", name, want)
				}
			} else if name != want {
				t.Fatalf("kernel %s, want %s", name, want)
			}
			ids := []kvcache.SeqID{0, 1, 2}
			for _, id := range ids {
				if err := sc.c.AddSeq(id); err != nil {
					t.Fatal(err)
				}
			}
			steps := []struct {
				n      map[kvcache.SeqID]int
				exact  bool
				window int
			}{
				{n: map[kvcache.SeqID]int{0: 75, 1: 23, 2: 40}},
				{n: map[kvcache.SeqID]int{0: 1, 1: 2, 2: 1}},
				{n: map[kvcache.SeqID]int{0: 2, 1: 1, 2: 1}, exact: true, window: 21},
				{n: map[kvcache.SeqID]int{0: 1, 1: 1, 2: 1}, window: 50},
			}
			worst := 0.0
			for i, st := range steps {
				sc.begin(st.n, ids, st.exact)
				if i > 0 {
					want, vmax := sc.want(st.window)
					ref32 := sc.run(pathRef, 0, st.window)
					compare(t, "ref", ref32, want, vmax, c.dim, refTol)
					ref := widen(ref32)
					for _, chunk := range []int{16, 0} {
						vec := sc.run(pathDecode, chunk, st.window)
						sc.s.qgeneric = true
						gen := sc.run(pathDecode, chunk, st.window)
						sc.s.qgeneric = false
						for j := range vec {
							if math.Float32bits(vec[j]) != math.Float32bits(gen[j]) {
								t.Fatalf("step %d chunk %d value %d: vector loader %v, generic %v", i, chunk, j, vec[j], gen[j])
							}
						}
						worst = max(worst, compare(t, fmt.Sprintf("step %d chunk %d", i, chunk), vec, ref, vmax, c.dim, kernelTol))
					}
				}
				sc.end()
			}
			t.Logf("worst %.2g of max |v| from the reference kernel", worst)
		})
	}
}

// TestAttentionBatchedDecode checks that a decode step of 8 sequences
// gives each sequence what the step gives it alone: bit for bit with the
// same chunk size (the kernels' work for a sequence does not depend on the
// others), within kernelTol with the chunk size chosen from the batch.
func TestAttentionBatchedDecode(t *testing.T) {
	_, b := openKV(t)
	const dim, kvHeads, heads = 128, 2, 8
	sc := newAttnScene(t, b, quant.FP16, dim, kvHeads, heads, 80)
	lens := []int{5, 130, 17, 64, 1, 200, 33, 96}
	var ids []kvcache.SeqID
	n := map[kvcache.SeqID]int{}
	for i, l := range lens {
		id := kvcache.SeqID(i)
		if err := sc.c.AddSeq(id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		n[id] = l
	}
	sc.begin(n, ids, false)
	sc.end()
	one := map[kvcache.SeqID]int{}
	for _, id := range ids {
		one[id] = 1
	}
	sc.begin(one, ids, false)
	batch := map[int][]float32{64: sc.run(pathDecode, 64, 0), 0: sc.run(pathDecode, 0, 0)}
	q, k, v := sc.q, sc.k, sc.v
	sc.c.Rollback(sc.p)
	qd, kvd := heads*dim, kvHeads*dim
	for i, id := range ids {
		// The same rows, alone in the step.
		p, err := sc.c.Reserve([]kvcache.Append{{Seq: id, N: 1}})
		if err != nil {
			t.Fatal(err)
		}
		sc.p, sc.nt = p, 1
		sc.q, sc.k, sc.v = q[i*qd:(i+1)*qd], k[i*kvd:(i+1)*kvd], v[i*kvd:(i+1)*kvd]
		kt, vt, qt := sc.upload(sc.k), sc.upload(sc.v), sc.upload(sc.q)
		sc.kt, sc.vt, sc.qt = kt, vt, qt
		b.WriteKV(sc.s, 0, kt, vt, p)
		alone := sc.run(pathDecode, 64, 0)
		for d, x := range alone {
			if y := batch[64][i*qd+d]; math.Float32bits(x) != math.Float32bits(y) {
				t.Fatalf("sequence %d (length %d) value %d: %v alone, %v in the batch (chunk 64)", id, lens[i], d, x, y)
			}
		}
		want, vmax := sc.want(0)
		compare(t, fmt.Sprintf("sequence %d in the batch, chosen chunk", id), batch[0][i*qd:(i+1)*qd], want, vmax, dim, kernelTol)
		compare(t, fmt.Sprintf("sequence %d alone, chosen chunk", id), sc.run(pathDecode, 0, 0), want, vmax, dim, kernelTol)
		for _, x := range []backend.Tensor{kt, vt, qt} {
			b.Free(x)
		}
		sc.c.Rollback(p)
	}
}

// TestBenchDecodeAttention runs the benchmark entry point on a small
// cache (the device benchmark uses 32K tokens).
func TestBenchDecodeAttention(t *testing.T) {
	_, b := openKV(t)
	sec, bytes, err := b.BenchDecodeAttention(t.Context(), quant.FP16, 64, 2, 8, 100, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(2 * 101 * 2 * 64 * 2 * 2); bytes != want || !(sec > 0) {
		t.Errorf("BenchDecodeAttention = %v s, %d bytes; want > 0 s, %d bytes", sec, bytes, want)
	}
	// Quantized caches: the bytes of their rows (q4_0: 2 blocks of 18).
	for _, tc := range []struct {
		name     string
		rowBytes int64
	}{{"q4_0", 36}, {"int4", 36}, {"fp8-e4m3", 64}} {
		sec, bytes, err := b.BenchDecodeAttention(t.Context(), quant.Formats().MustLookup(tc.name), 64, 2, 8, 100, 2, 2)
		if err != nil {
			t.Fatal(err)
		}
		if want := 2 * 101 * 2 * tc.rowBytes * 2; bytes != want || !(sec > 0) {
			t.Errorf("BenchDecodeAttention(%s) = %v s, %d bytes; want > 0 s, %d bytes", tc.name, sec, bytes, want)
		}
	}
}

// BenchmarkDecodeAttention reports the decode kernels' bandwidth over
// 32K-token fp16 caches (Llama-3-8B's and -70B's attention geometry),
// over 8K-128K-token caches of each quantized format (8B geometry), and
// a device-to-device copy's for comparison (bytes read and written). It
// needs a GPU (-tags cuda); on the emulator it is skipped.
//
//	go test -tags cuda -run '^$' -bench DecodeAttention -benchtime 1x ./pkg/gpu
func BenchmarkDecodeAttention(bm *testing.B) {
	if Kind != "cuda" {
		bm.Skip("a device benchmark: needs -tags cuda and a GPU")
	}
	d, err := Open(bm.Context(), Options{})
	if err != nil {
		bm.Skip(err)
	}
	defer d.(*Device).Close()
	b := d.(*Device).Backend()
	type bench struct {
		f                               quant.Format
		dim, kvHeads, heads, ctx, batch int
	}
	cases := []bench{
		{quant.FP16, 128, 8, 32, 32768, 1},
		{quant.FP16, 128, 8, 32, 32768, 8},
		{quant.FP16, 128, 8, 64, 32768, 1},
		{quant.FP16, 64, 8, 32, 32768, 1},
	}
	// The quantized decode kernel per format, at 8K, 32K and 128K tokens,
	// batch 1 and 32 (the fp16 rows to compare with are gpubench's).
	for _, name := range []string{"fp16", "fp8-e4m3", "q8_0", "q4_0", "q4_1", "q5_0", "iq4_nl", "int8", "int4", "int2"} {
		for _, ctx := range []int{8192, 32768, 131072} {
			for _, batch := range []int{1, 32} {
				if ctx*batch > 1<<20 && name != "fp16" && name != "q8_0" && name != "q4_0" {
					continue // 4M-token caches for three formats only: the device check's time
				}
				cases = append(cases, bench{quant.Formats().MustLookup(name), 128, 8, 32, ctx, batch})
			}
		}
	}
	for _, tc := range cases {
		bm.Run(fmt.Sprintf("%s/d%d/kv%d/h%d/ctx%d/batch%d", tc.f.Name(), tc.dim, tc.kvHeads, tc.heads, tc.ctx, tc.batch), func(bm *testing.B) {
			for bm.Loop() {
				sec, bytes, err := b.BenchDecodeAttention(bm.Context(), tc.f, tc.dim, tc.kvHeads, tc.heads, tc.ctx, tc.batch, 100)
				if err != nil {
					bm.Fatal(err)
				}
				bm.ReportMetric(sec*1e6, "us/step")
				bm.ReportMetric(float64(bytes)/sec/1e9, "GB/s")
			}
		})
	}
	bm.Run("copy/1GiB", func(bm *testing.B) {
		const n = 1 << 30
		src, err := b.d.alloc(n)
		if err != nil {
			bm.Fatal(err)
		}
		dst, err := b.d.alloc(n)
		if err != nil {
			bm.Fatal(err)
		}
		defer b.d.free(src)
		defer b.d.free(dst)
		for bm.Loop() {
			_ = b.d.dtod(dst, src, n) // warm-up
			if err := b.syncKV(); err != nil {
				bm.Fatal(err)
			}
			start := time.Now()
			for range 20 {
				_ = b.d.dtod(dst, src, n)
			}
			if err := b.syncKV(); err != nil {
				bm.Fatal(err)
			}
			bm.ReportMetric(2*n*20/time.Since(start).Seconds()/1e9, "GB/s")
		}
	})
}
