//go:build cudaemu || cuda

package gpu

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/backend/backendtest"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// The quantized formats the GPU stores (kernels/kvformats.cuh), as the
// byte tests name them.
var quantFormats = []string{
	"fp8-e4m3", "fp8-e5m2", "fp8-e4m3:nosat", "fp8-e5m2:nosat:head",
	"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl",
	"int8", "int4", "int2", "int8:g32", "int4:g32", "int4:g16", "int2:g32", "int2:g2", "int4:row:sym", "int8:g64:sym", "int2:sym",
	"nvfp4", "fp4_e2m1",
}

// fp8ScalesFile writes a kvq scales file for 2 layers and 3 KV heads:
// per-head scales for layer 0's keys and layer 1's values, per-tensor
// ones otherwise.
func fp8ScalesFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "scales.json")
	data := `{"k_scale": {"0": [0.01, 0.02, 0.5], "1": 0.05}, "v_scale": {"0": 0.004, "1": [0.5, 0.25, 3]}}`
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestKVWriteBytesQuant is TestKVWriteBytes for the quantized formats:
// the write kernel's tiles equal pkg/quant's Encode byte for byte (random
// rows with outlier channels, the special values and rows: zeros,
// constants, ties, tiny values, huge outliers, ±MaxFloat32, NaN), for each
// format on both sides, K ≠ V, per-layer mixes and calibrated fp8 scales.
func TestKVWriteBytesQuant(t *testing.T) {
	_, b := openKV(t)
	reg := quant.Formats()
	g := kvcache.Geometry{Layers: 2, KVHeads: 3, HeadDim: 64}
	var specs []string
	specs = append(specs, quantFormats...)
	specs = append(specs,
		"k=q8_0,v=q4_0", "k=fp8-e4m3,v=int4:g32", "k=q4_1,v=fp16,l1=iq4_nl", "k=int2,v=bf16,l0=q5_1",
		"fp8-e4m3:scales@"+fp8ScalesFile(t),
		// fp16 windows: sink rows, the residual ring (checkReads reads
		// them back through the window runs).
		"int4:g32,residual=8,sink=2", "q4_0,residual=5", "fp8-e4m3,sink=4", "k=q8_0,v=int8,residual=6")
	for _, text := range specs {
		spec, err := reg.ParseSpec(text)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(text, func(t *testing.T) { checkWriteBytes(t, b, spec, g) })
	}
	// Head sizes other than 64: 96 (3 GGML blocks; int4 groups of 48 share
	// bytes), 128.
	for _, text := range []string{"q4_0", "q5_1", "int4:g48", "int2:g24", "fp8-e5m2", "nvfp4", "fp4_e2m1"} {
		spec, err := reg.ParseSpec(text)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(text+"/d96", func(t *testing.T) { checkWriteBytes(t, b, spec, kvcache.Geometry{Layers: 1, KVHeads: 2, HeadDim: 96}) })
	}
}

// TestKVWindowSlots drives a cache with sink and residual windows
// through more sequences than the first window buffers hold (they grow,
// keeping the slots' rows), forks (CopyWindow), frees and reuses slots,
// and compares every row the GPU storage reads with the CPU storage's,
// and HeldBytes.
func TestKVWindowSlots(t *testing.T) {
	_, b := openKV(t)
	spec, err := quant.Formats().ParseSpec("q4_0,residual=6,sink=2")
	if err != nil {
		t.Fatal(err)
	}
	g := kvcache.Geometry{Layers: 2, KVHeads: 2, HeadDim: 64}
	kp := newKVPair(t, b, g, spec, 40, true)
	rng := rand.New(rand.NewPCG(3, 4))
	step := func(ids []kvcache.SeqID, n int) {
		var as []kvcache.Append
		for i, id := range ids {
			as = append(as, kvcache.Append{Seq: id, Row: i * n, N: n})
		}
		k, v := make([][]float32, g.Layers), make([][]float32, g.Layers)
		for layer := range k {
			k[layer] = backendtest.RandRows(rng, len(ids)*n*g.KVHeads, g.HeadDim)
			v[layer] = backendtest.RandRows(rng, len(ids)*n*g.KVHeads, g.HeadDim)
		}
		kp.step(as, k, v, nil)
	}
	var ids []kvcache.SeqID
	for id := kvcache.SeqID(0); id < 3; id++ {
		for _, c := range []*kvcache.Cache{kp.gpu, kp.cpu} {
			if err := c.AddSeq(id); err != nil {
				t.Fatal(err)
			}
		}
		ids = append(ids, id)
	}
	step(ids, 9)
	for id := kvcache.SeqID(3); id < 7; id++ { // slots 3..6: the buffers grow from 4 slots
		for _, c := range []*kvcache.Cache{kp.gpu, kp.cpu} {
			if err := c.Fork(id, id%3); err != nil {
				t.Fatal(err)
			}
		}
		ids = append(ids, id)
	}
	kp.checkReads()
	step(ids, 1)
	step(ids, 3)
	for _, c := range []*kvcache.Cache{kp.gpu, kp.cpu} {
		if err := c.Remove(1); err != nil {
			t.Fatal(err)
		}
		if err := c.AddSeq(9); err != nil { // reuses the freed slot
			t.Fatal(err)
		}
	}
	ids = []kvcache.SeqID{0, 2, 3, 4, 5, 6, 9}
	step(ids, 2)
	step(ids, 1)
	kp.checkReads()
	checkHeld(t, kp)
}

// TestKVFP8Dynamic checks fp8 with dynamic scales (learnt from the
// cache's first step, then frozen): the GPU storage reads every row as the
// CPU storage does bit for bit (both learn the same scales from the same
// rows; the GPU's from the rows downloaded), the kernels' dequantization
// uses the uploaded scales (checkKernelDecode), and the backend suite.
func TestKVFP8Dynamic(t *testing.T) {
	d, b := openKV(t)
	reg := quant.Formats()
	for _, text := range []string{"fp8-e4m3:dynamic", "k=fp8-e5m2:dynamic:head,v=q4_0", "fp8-e4m3:dynamic:head,residual=4", "k=nvfp4:dynamic,v=fp4_e2m1"} {
		spec, err := reg.ParseSpec(text)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(text, func(t *testing.T) {
			g := kvcache.Geometry{Layers: 2, KVHeads: 3, HeadDim: 64}
			kp := newKVPair(t, b, g, spec, 12, false)
			rng := rand.New(rand.NewPCG(5, 6))
			for _, id := range []kvcache.SeqID{0, 1} {
				for _, c := range []*kvcache.Cache{kp.gpu, kp.cpu} {
					if err := c.AddSeq(id); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, lens := range [][2]int{{13, 6}, {1, 1}, {4, 9}, {1, 1}} {
				as := []kvcache.Append{{Seq: 0, Row: 0, N: lens[0]}, {Seq: 1, Row: lens[0], N: lens[1]}}
				nt := lens[0] + lens[1]
				k, v := make([][]float32, g.Layers), make([][]float32, g.Layers)
				for layer := range k {
					k[layer] = backendtest.RandRows(rng, nt*g.KVHeads, g.HeadDim)
					v[layer] = backendtest.RandRows(rng, nt*g.KVHeads, g.HeadDim)
					for i := range v[layer] {
						v[layer][i] *= float32(layer + 2) // other scales per layer and side
					}
				}
				kp.step(as, k, v, nil)
			}
			kp.checkReads()
			kp.checkKernelDecode()
			checkHeld(t, kp)
		})
	}
	backendtest.RunKV(t, d, backendtest.Options{Formats: []string{"fp8-e4m3:dynamic", "nvfp4:dynamic"}, Dims: []int{64}})
}

// TestKVQuantConformance runs the backend suite's KV tests for the
// quantized formats through the Device (attention on the automatic
// choice of kernels), then through the quantized decode kernel forced
// (16-position chunks) and the reference kernel, and K ≠ V and per-layer
// mixes.
func TestKVQuantConformance(t *testing.T) {
	d, b := openKV(t)
	t.Run("auto", func(t *testing.T) {
		backendtest.RunKV(t, d, backendtest.Options{Formats: []string{"fp8-e4m3", "q8_0", "q4_0", "int4"}})
		backendtest.RunKV(t, d, backendtest.Options{Formats: []string{"fp8-e5m2", "q4_1", "q5_0", "q5_1", "iq4_nl", "int8", "int2", "int4:g32:sym", "nvfp4", "fp4_e2m1"}, Dims: []int{64}})
	})
	t.Run("decode", func(t *testing.T) { // several chunks per sequence
		backendtest.RunKV(t, forced{b, pathDecode, 16}, backendtest.Options{Formats: []string{"q4_0", "int4", "fp8-e4m3", "q5_1", "nvfp4", "fp4_e2m1"}, Dims: []int{64}})
	})
	t.Run("reference", func(t *testing.T) {
		backendtest.RunKV(t, forced{b, pathRef, 0}, backendtest.Options{Formats: []string{"q4_0", "int4", "fp8-e4m3", "nvfp4"}, Dims: []int{64}})
	})
	reg := quant.Formats()
	for _, text := range []string{"k=q8_0,v=q4_0", "k=fp8-e4m3,v=int4,l1=iq4_nl"} {
		spec, err := reg.ParseSpec(text)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(text, func(t *testing.T) {
			backendtest.RunCache(t, d, spec, 64, backendtest.DecodedTol, max(backendtest.PutBound(spec.K, 64), backendtest.PutBound(spec.V, 64)))
		})
	}
}

// TestSupportsKVQuant checks which presets the GPU accepts and that the
// others fail with backend.ErrUnsupported naming the format and why.
func TestSupportsKVQuant(t *testing.T) {
	_, b := openKV(t)
	reg := quant.Formats()
	for _, name := range []string{"kivi2", "int4:g32:channel", "q4_0:rot", "turbo3", "quanto4", "fp8-e4m3:rot"} {
		f, err := reg.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		err = b.SupportsKV(f)
		if !errors.Is(err, backend.ErrUnsupported) {
			t.Errorf("SupportsKV(%s) = %v, want backend.ErrUnsupported", name, err)
			continue
		}
		t.Logf("%s: %v", name, err)
	}
	for _, name := range append([]string{"fp32", "fp16", "bf16", "fp8-e4m3:dynamic", "fp8-e5m2:dynamic:head"}, quantFormats...) {
		if err := b.SupportsKV(reg.MustLookup(name)); err != nil {
			t.Errorf("SupportsKV(%s) = %v, want nil", name, err)
		}
	}
	// A quantized layout with sink and residual fp16 windows is kept on
	// the device.
	spec, err := reg.ParseSpec("q4_0,residual=8,sink=2")
	if err != nil {
		t.Fatal(err)
	}
	l, err := kvcache.NewLayout(kvcache.Geometry{Layers: 1, KVHeads: 1, HeadDim: 64}, spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kvcache.New(l, kvcache.Options{Blocks: 4, Storage: b}); err != nil {
		t.Errorf("kvcache.New(q4_0 with sink and residual windows on the GPU) = %v, want nil", err)
	}
}

// TestKVInterleavedKeys checks that keys in GGUF order
// (quant.InterleaveKeys, kvq eval --k-order gguf) are refused, whatever
// the format: the kernels store rows in the model's order.
func TestKVInterleavedKeys(t *testing.T) {
	_, b := openKV(t)
	for _, f := range []quant.Format{quant.FP8E4M3, quant.FP16, quant.Q40, quant.Formats().MustLookup("int4")} {
		k := quant.InterleaveKeys(f)
		if err := b.SupportsKV(k); !errors.Is(err, backend.ErrUnsupported) {
			t.Errorf("SupportsKV(%s in GGUF order) = %v, want backend.ErrUnsupported", f.Name(), err)
		}
		l, err := kvcache.NewLayout(kvcache.Geometry{Layers: 1, KVHeads: 1, HeadDim: 64}, quant.Spec{K: k, V: f}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kvcache.New(l, kvcache.Options{Blocks: 4, Storage: b}); !errors.Is(err, backend.ErrUnsupported) {
			t.Errorf("kvcache.New(%s in GGUF order on the GPU) = %v, want backend.ErrUnsupported", f.Name(), err)
		}
	}
}

// TestSlidingCacheWindowOnly runs backendtest.RunSlidingCache through the
// Device (automatic kernels), the decode kernel forced and the reference
// kernel: a sliding layer's window-only storage (its own pool, released
// blocks left out of the block tables) attends bit for bit as full storage.
func TestSlidingCacheWindowOnly(t *testing.T) {
	d, b := openKV(t)
	for _, text := range []string{"fp16", "int4,sink=2,residual=3", "q4_0"} {
		spec, err := quant.Formats().ParseSpec(text)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(text, func(t *testing.T) {
			backendtest.RunSlidingCache(t, d, spec, 64)
			backendtest.RunSlidingCache(t, forced{b, pathDecode, 16}, spec, 64)
			backendtest.RunSlidingCache(t, forced{b, pathRef, 0}, spec, 64)
		})
	}
}
