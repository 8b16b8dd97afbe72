//go:build cudaemu || cuda

package gpu

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/backend/backendtest"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// openKV opens the device for a test, skipping without one, and returns
// it and its unlocked backend (which the tests drive from one goroutine).
func openKV(t *testing.T) (*Device, *Backend) {
	t.Helper()
	be, err := Open(context.Background(), Options{})
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	d := be.(*Device)
	t.Cleanup(d.Close)
	return d, d.Backend()
}

// forced is the backend with every storage it makes set to one attention
// path and decode chunk, to run the conformance suite through each
// kernel.
type forced struct {
	*Backend
	path  attnPath
	chunk int
}

func (f forced) NewStorage(p kvcache.StorageParams) (kvcache.Storage, error) {
	s, err := f.Backend.NewStorage(p)
	if err == nil {
		s.(*Storage).path, s.(*Storage).chunk = f.path, f.chunk
	}
	return s, err
}

// TestKVConformance runs the backend suite's KV tests (writes, attention
// of prefills, multi-token steps with a sliding window, rolled-back and
// exact steps, decodes; HeldBytes against the layout) on the automatic
// choice of kernels and on each kernel forced.
func TestKVConformance(t *testing.T) {
	d, b := openKV(t)
	t.Run("auto", func(t *testing.T) {
		// Through the Device: its locked storage wraps the backend's.
		backendtest.RunKV(t, d, backendtest.Options{Formats: []string{"fp16", "bf16"}})
		backendtest.RunKV(t, d, backendtest.Options{Formats: []string{"fp32"}, Dims: []int{64}})
	})
	for _, tc := range []struct {
		name string
		f    forced
	}{
		{"prefill", forced{b, pathPrefill, 0}},
		{"decode", forced{b, pathDecode, 16}}, // several chunks per sequence
		{"reference", forced{b, pathRef, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			backendtest.RunKV(t, tc.f, backendtest.Options{Formats: []string{"fp16", "bf16"}})
		})
	}
}

// TestSupportsKV checks every preset: the per-token-row formats run on
// the GPU (kvCode), the others fail with backend.ErrUnsupported and a
// message naming the format (TestSupportsKVQuant has more).
func TestSupportsKV(t *testing.T) {
	_, b := openKV(t)
	for _, name := range quant.Formats().Names() {
		f, err := quant.Formats().Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		err = b.SupportsKV(f)
		ok := !strings.Contains(name, ":rot") && !strings.Contains(name, ":channel")
		switch {
		case strings.HasPrefix(name, "fp"), strings.HasPrefix(name, "bf16"), strings.HasPrefix(name, "int"):
		case strings.HasPrefix(name, "q") && !strings.HasPrefix(name, "quanto"), strings.HasPrefix(name, "iq4_nl"), strings.HasPrefix(name, "nvfp4"):
		default:
			ok = false
		}
		switch {
		case ok && err != nil:
			t.Errorf("SupportsKV(%s) = %v, want nil", name, err)
		case !ok && !errors.Is(err, backend.ErrUnsupported):
			t.Errorf("SupportsKV(%s) = %v, want backend.ErrUnsupported", name, err)
		case !ok && !strings.Contains(err.Error(), "KV format "+f.Name()+" "):
			t.Errorf("SupportsKV(%s) = %v, want the format named", name, err)
		}
	}
	kivi, _ := quant.Formats().Lookup("kivi2")
	want := "backend: unsupported: the GPU has no kernel for KV format kivi2 yet (fp32, fp16, bf16, fp8, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, nvfp4, fp4_e2m1 and per-token int8/int4/int2 groups run there, with or without sink and residual windows; use --device cpu for it)"
	if err := b.SupportsKV(kivi); err == nil || err.Error() != want {
		t.Errorf("SupportsKV(kivi2) = %v, want %q", err, want)
	}
	// A layout with an unsupported side is refused by NewStorage.
	l, err := kvcache.NewLayout(kvcache.Geometry{Layers: 1, KVHeads: 1, HeadDim: 64}, quant.Spec{K: quant.FP16, V: kivi}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kvcache.New(l, kvcache.Options{Blocks: 4, Storage: b}); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("kvcache.New(fp16/kivi2 on the GPU) = %v, want backend.ErrUnsupported", err)
	}
}

// kvPair is a cache on the GPU and one on the CPU, driven by the same
// steps.
type kvPair struct {
	t      *testing.T
	b      *Backend
	l      *kvcache.Layout
	gpu    *kvcache.Cache
	cpu    *kvcache.Cache
	cpuBe  *cpu.Backend
	blocks int
}

func newKVPair(t *testing.T, b *Backend, g kvcache.Geometry, spec quant.Spec, blocks int, poison bool) *kvPair {
	t.Helper()
	l, err := kvcache.NewLayout(g, spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	kp := &kvPair{t: t, b: b, l: l, cpuBe: cpu.New(1), blocks: blocks}
	if kp.gpu, err = kvcache.New(l, kvcache.Options{Blocks: blocks, Storage: b, PoisonFreed: poison}); err != nil {
		t.Fatal(err)
	}
	if kp.cpu, err = kvcache.New(l, kvcache.Options{Blocks: blocks, Storage: kp.cpuBe, PoisonFreed: poison}); err != nil {
		t.Fatal(err)
	}
	return kp
}

// step appends rows to sequences of both caches (every layer's K and V
// rows given per layer) and commits; onPlan, if set, sees the GPU cache's
// plan first.
func (kp *kvPair) step(as []kvcache.Append, k, v [][]float32, onPlan func(p *kvcache.Plan)) {
	kp.t.Helper()
	for _, c := range []*kvcache.Cache{kp.gpu, kp.cpu} {
		p, err := c.Reserve(as)
		if err != nil {
			kp.t.Fatal(err)
		}
		var be backend.Backend = kp.cpuBe
		if c == kp.gpu {
			be = kp.b
			if onPlan != nil {
				onPlan(p)
			}
		}
		for layer := range kp.l.Layers {
			kt, err := be.UploadF32(k[layer])
			if err != nil {
				kp.t.Fatal(err)
			}
			vt, err := be.UploadF32(v[layer])
			if err != nil {
				kp.t.Fatal(err)
			}
			be.WriteKV(c.Storage(), layer, kt, vt, p)
			be.Free(kt)
			be.Free(vt)
		}
		c.Commit(p)
	}
	if err := kp.b.syncKV(); err != nil {
		kp.t.Fatal(err)
	}
}

// tiles downloads layer's side j buffer.
func (kp *kvPair) tiles(layer, j int) []byte {
	s := kp.gpu.Storage().(*Storage)
	sd := s.sides[layer][j]
	out := make([]byte, kp.l.KVHeads*kp.blocks*sd.tileBytes)
	if err := kp.b.d.dtoh(unsafe.Pointer(&out[0]), sd.p, int64(len(out))); err != nil {
		kp.t.Fatal(err)
	}
	return out
}

// checkReads compares every position of every sequence as both caches
// decode it, bit for bit (NaNs equal).
func (kp *kvPair) checkReads() {
	kp.t.Helper()
	dim := kp.l.HeadDim
	for _, id := range kp.cpu.Seqs() {
		n := kp.cpu.Len(id)
		if got := kp.gpu.Len(id); got != n {
			kp.t.Fatalf("sequence %d: GPU length %d, CPU %d", id, got, n)
		}
		g, c := make([]float32, n*dim), make([]float32, n*dim)
		for layer := range kp.l.Layers {
			for _, key := range []bool{true, false} {
				for h := 0; h < kp.l.KVHeads; h++ {
					kp.gpu.Read(g, layer, id, key, h, 0, n)
					kp.cpu.Read(c, layer, id, key, h, 0, n)
					if err := kp.b.syncKV(); err != nil {
						kp.t.Fatal(err)
					}
					for i := range g {
						if math.Float32bits(g[i]) != math.Float32bits(c[i]) && !(g[i] != g[i] && c[i] != c[i]) {
							kp.t.Fatalf("sequence %d layer %d key %v head %d value %d: GPU reads %v, CPU %v", id, layer, key, h, i, g[i], c[i])
						}
					}
				}
			}
		}
	}
}

// specialValues are rows' values that test the rounding: ties, the edges
// of the fp16 range, subnormals, infinities and NaNs with payloads.
var specialValues = []float32{
	0, float32(math.Copysign(0, -1)), 1, -1, 65504, 65519.99, 65520, -65520, 1e6, float32(math.Inf(1)), float32(math.Inf(-1)),
	math.Float32frombits(0x7fc00001), math.Float32frombits(0xffa00000), math.Float32frombits(0x7f800001),
	0x1p-24, 0x1p-25, 0x1.8p-24, 0x1p-14, 0x1.ffcp-15, 5.9e-8, 1e-10, -3.1e-5,
	1 + 0x1p-11, 1 + 0x3p-11, 1 + 0x1p-8, 1 + 0x3p-8, 1 + 0x1p-9 + 0x1p-20, math.MaxFloat32, -math.MaxFloat32,
	math.SmallestNonzeroFloat32, 2049, 2051, 4097, 0.1, -0.3333333,
	// fp8: the largest finite values, their ties and overflows, subnormals.
	448, -464, 464.01, 480, 57344, -61440, 0x1p-9, 0x1.8p-10, 0x1p-16, 0x1.4p-16, 0x1p-17, 1.0625, 1.1875, 2.5,
}

// TestKVWriteBytes checks that WriteKV stores exactly pkg/quant's bits:
// the device tiles equal tiles encoded on the host by the layout's codecs
// with the plan's ops, and every row reads back as the CPU storage's.
func TestKVWriteBytes(t *testing.T) {
	_, b := openKV(t)
	for _, f := range []quant.Format{quant.FP16, quant.BF16, quant.FP32} {
		t.Run(f.Name(), func(t *testing.T) {
			checkWriteBytes(t, b, quant.Spec{K: f, V: f}, kvcache.Geometry{Layers: 2, KVHeads: 3, HeadDim: 64})
		})
	}
}

// specialRows overwrites some rows of one KV head's data with edge cases
// of the quantizers: zeros, a constant, tiny values (below fp16 and fp8
// subnormals), one huge outlier among small values, ±MaxFloat32, and a
// row of NaNs.
func specialRows(x []float32, dim, step int) {
	rows := len(x) / dim
	set := func(r int, fill func(i int) float32) {
		r = (r + step) % rows
		for i := 0; i < dim; i++ {
			x[r*dim+i] = fill(i)
		}
	}
	set(0, func(int) float32 { return 0 })
	set(1, func(int) float32 { return 0.5 })
	set(2, func(i int) float32 { return float32(i-dim/2) * 1e-9 })
	set(3, func(i int) float32 {
		if i == 5 {
			return 3e5
		}
		return float32(i%7) * 0.01
	})
	set(4, func(i int) float32 { return float32(math.Copysign(math.MaxFloat32, float64(i%2)-0.5)) })
	set(5, func(int) float32 { return float32(math.NaN()) })
	set(6, func(i int) float32 { return float32(i%3) - 1 }) // ties of the symmetric codes
}

// checkWriteBytes writes steps of random and special rows to a GPU and a
// CPU cache of spec and compares the device tiles with the host encoding
// byte for byte, every row as both storages decode it, and HeldBytes.
func checkWriteBytes(t *testing.T, b *Backend, spec quant.Spec, g kvcache.Geometry) {
	const blocks = 12
	kp := newKVPair(t, b, g, spec, blocks, false)
	l := kp.l
	kvd := g.KVHeads * g.HeadDim
	// Host images of the device buffers, [layer][side].
	img := make([][2][]byte, g.Layers)
	for i := range img {
		img[i][0] = make([]byte, g.KVHeads*blocks*l.Layers[i].K.TileBytes)
		img[i][1] = make([]byte, g.KVHeads*blocks*l.Layers[i].V.TileBytes)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, id := range []kvcache.SeqID{0, 1} {
		if err := kp.gpu.AddSeq(id); err != nil {
			t.Fatal(err)
		}
		if err := kp.cpu.AddSeq(id); err != nil {
			t.Fatal(err)
		}
	}
	for i, lens := range [][2]int{{21, 5}, {1, 1}, {3, 17}, {1, 1}} {
		as := []kvcache.Append{{Seq: 0, Row: 0, N: lens[0]}, {Seq: 1, Row: lens[0], N: lens[1]}}
		nt := lens[0] + lens[1]
		k, v := make([][]float32, g.Layers), make([][]float32, g.Layers)
		for layer := range k {
			k[layer] = backendtest.RandRows(rng, nt*g.KVHeads, g.HeadDim)
			v[layer] = backendtest.RandRows(rng, nt*g.KVHeads, g.HeadDim)
			for x, sv := range specialValues {
				k[layer][(x*7+i)%len(k[layer])] = sv
				v[layer][(x*13+i+1)%len(v[layer])] = sv
				k[layer][(x*31+5*i)%len(k[layer])] = sv * (1 + 0x1p-12) // off-tie neighbours
			}
			if nt*g.KVHeads > 8 {
				specialRows(k[layer], g.HeadDim, i)
				specialRows(v[layer], g.HeadDim, 2*i+1)
			}
		}
		// The host encoding of the step's ops, as cpu.Storage applies them.
		kp.step(as, k, v, func(p *kvcache.Plan) {
			for layer := range k {
				for j, rows := range [2][]float32{k[layer], v[layer]} {
					side := &l.Layers[layer].K
					if j == 1 {
						side = &l.Layers[layer].V
					}
					tb := side.TileBytes
					for _, op := range p.Writes[p.SideShape[layer][j]] {
						if op.Kind != kvcache.OpEncode {
							continue // fp16 windows: checkReads compares them
						}
						for h := 0; h < g.KVHeads; h++ {
							tile := img[layer][j][(h*blocks+int(op.Block))*tb:][:tb]
							src := rows[int(op.Src)*kvd+h*g.HeadDim:][:g.HeadDim]
							side.Codecs[h].Encode(tile, int(op.Slot), src, 1)
						}
					}
				}
			}
		})
		for layer := range k {
			for j := 0; j < 2; j++ {
				if got := kp.tiles(layer, j); !bytes.Equal(got, img[layer][j]) {
					for x := range got {
						if got[x] != img[layer][j][x] {
							t.Fatalf("step %d layer %d side %d: device byte %d = %#02x, host encoder %#02x", i, layer, j, x, got[x], img[layer][j][x])
						}
					}
				}
			}
		}
	}
	kp.checkReads()
	kp.checkKernelDecode()
	checkHeld(t, kp)
}

// checkKernelDecode decodes every tile on the device with the attention
// kernels' dequantization (kvq_kv_decode) and compares it bit for bit
// with the codecs' Decode of the downloaded tiles (NaNs equal).
func (kp *kvPair) checkKernelDecode() {
	kp.t.Helper()
	s := kp.gpu.Storage().(*Storage)
	dim, bt := kp.l.HeadDim, kp.l.BlockTokens
	rows := kp.l.KVHeads * kp.blocks * bt
	out := kp.b.Alloc(rows * dim)
	defer kp.b.Free(out)
	for layer := range kp.l.Layers {
		for j := 0; j < 2; j++ {
			sd := &s.sides[layer][j]
			kp.b.launch("kvq_kv_decode", dim3{64, 1, 1}, dim3{256, 1, 1}, 0,
				args{}.ptr(dev(out).p).ptr(sd.p).int(rows).int(sd.code).ptr(sd.scales).int(kp.blocks).int(bt).int(dim))
			got := make([]float32, rows*dim)
			if err := kp.b.Download(got, out, 0); err != nil {
				kp.t.Fatal(err)
			}
			buf := kp.tiles(layer, j)
			want := make([]float32, bt*dim)
			for h := 0; h < kp.l.KVHeads; h++ {
				codec := s.codecs.Sides[layer][j][h]
				for blk := 0; blk < kp.blocks; blk++ {
					t := h*kp.blocks + blk
					codec.Decode(want, buf[t*sd.tileBytes:(t+1)*sd.tileBytes], 0, bt)
					for i, w := range want {
						g := got[t*bt*dim+i]
						if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
							kp.t.Fatalf("layer %d side %d head %d block %d value %d: kernel decodes %v (%#x), Decode %v (%#x)",
								layer, j, h, blk, i, g, math.Float32bits(g), w, math.Float32bits(w))
						}
					}
				}
			}
		}
	}
}

// checkHeld compares the storages' HeldBytes with each other and with the
// layout's accounting.
func checkHeld(t *testing.T, kp *kvPair) {
	t.Helper()
	gpu, cpu := kp.gpu.HeldBytes(), kp.cpu.HeldBytes()
	want := kp.l.Bytes(kp.blocks, len(kp.cpu.Seqs())) // a window slot per sequence
	if gpu != cpu || gpu != want.Total-want.State {
		t.Errorf("HeldBytes: GPU %d, CPU %d, layout %d", gpu, cpu, want.Total-want.State)
	}
}

// TestKVHeldBytes checks the storage's size against the layout's
// accounting and the CPU storage's, byte for byte, for several
// geometries, formats and block sizes (odd ones included).
func TestKVHeldBytes(t *testing.T) {
	_, b := openKV(t)
	for _, tc := range []struct {
		g      kvcache.Geometry
		spec   quant.Spec
		blocks int
		bt     int
	}{
		{kvcache.Geometry{Layers: 3, KVHeads: 2, HeadDim: 64}, quant.Spec{K: quant.FP16, V: quant.FP16}, 7, 0},
		{kvcache.Geometry{Layers: 2, KVHeads: 8, HeadDim: 128}, quant.Spec{K: quant.BF16, V: quant.FP16}, 33, 32},
		{kvcache.Geometry{Layers: 1, KVHeads: 1, HeadDim: 80}, quant.Spec{K: quant.FP32, V: quant.BF16}, 5, 3},
	} {
		l, err := kvcache.NewLayout(tc.g, tc.spec, tc.bt)
		if err != nil {
			t.Fatal(err)
		}
		gc, err := kvcache.New(l, kvcache.Options{Blocks: tc.blocks, Storage: b})
		if err != nil {
			t.Fatal(err)
		}
		cc, err := kvcache.New(l, kvcache.Options{Blocks: tc.blocks, Storage: cpu.New(1)})
		if err != nil {
			t.Fatal(err)
		}
		want := l.Bytes(tc.blocks, 0)
		if g, c := gc.HeldBytes(), cc.HeldBytes(); g != c || g != want.Total-want.State {
			t.Errorf("%v %s, %d blocks of %d: HeldBytes GPU %d, CPU %d, layout %d", tc.g, tc.spec.String(), tc.blocks, l.BlockTokens, g, c, want.Total-want.State)
		}
	}
}

// TestKVForkPoison forks a sequence (its full blocks shared, its tail
// block copied by CopyBlock), writes on both, removes the original (its
// freed blocks poisoned) and checks the survivor against the CPU cache,
// and that the freed blocks hold 0xFF bytes.
func TestKVForkPoison(t *testing.T) {
	_, b := openKV(t)
	const blocks = 16
	g := kvcache.Geometry{Layers: 2, KVHeads: 2, HeadDim: 64}
	kp := newKVPair(t, b, g, quant.Spec{K: quant.FP16, V: quant.BF16}, blocks, true)
	rng := rand.New(rand.NewPCG(3, 4))
	rows := func(nt int) (k, v [][]float32) {
		for range g.Layers {
			k = append(k, backendtest.RandRows(rng, nt*g.KVHeads, g.HeadDim))
			v = append(v, backendtest.RandRows(rng, nt*g.KVHeads, g.HeadDim))
		}
		return k, v
	}
	for _, c := range []*kvcache.Cache{kp.gpu, kp.cpu} {
		if err := c.AddSeq(0); err != nil {
			t.Fatal(err)
		}
	}
	k, v := rows(37)
	kp.step([]kvcache.Append{{Seq: 0, N: 37}}, k, v, nil)
	for _, c := range []*kvcache.Cache{kp.gpu, kp.cpu} {
		if err := c.Fork(1, 0); err != nil {
			t.Fatal(err)
		}
	}
	k, v = rows(9)
	kp.step([]kvcache.Append{{Seq: 0, N: 4}, {Seq: 1, Row: 4, N: 5}}, k, v, nil)
	kp.checkReads()
	// Seq 0's own blocks: its copied tail and later ones.
	var runs []kvcache.Run
	own := map[int32]bool{}
	for _, r := range kp.gpu.Runs(runs, 0, 0, true, 0, kp.gpu.Len(0)) {
		own[r.Block] = true
	}
	for _, r := range kp.gpu.Runs(runs, 0, 1, true, 0, kp.gpu.Len(1)) {
		delete(own, r.Block)
	}
	if len(own) == 0 {
		t.Fatal("the fork shares every block")
	}
	for _, c := range []*kvcache.Cache{kp.gpu, kp.cpu} {
		if err := c.Remove(0); err != nil {
			t.Fatal(err)
		}
	}
	kp.checkReads()
	s := kp.gpu.Storage().(*Storage)
	for layer := range kp.l.Layers {
		for j := 0; j < 2; j++ {
			buf, tb := kp.tiles(layer, j), s.sides[layer][j].tileBytes
			for blk := range own {
				for h := 0; h < g.KVHeads; h++ {
					tile := buf[(h*blocks+int(blk))*tb:][:tb]
					if bytes.Count(tile, []byte{0xff}) != tb {
						t.Fatalf("layer %d side %d head %d: freed block %d was not poisoned", layer, j, h, blk)
					}
				}
			}
		}
	}
	checkHeld(t, kp)
}
