//go:build cudaemu || cuda

package gpu

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/backend/backendtest"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// TestSoftcapConformance runs the backend suite's Gemma ops (Scale, GeGLU
// and softcapped attention over fp16 and int8 caches, against float64) at
// the CPU's tolerance, through the Device (its locked wrappers) with the
// automatic choice of kernels and on each attention kernel forced, at head
// sizes 64, 128 and 256 (Gemma 3's).
func TestSoftcapConformance(t *testing.T) {
	d, b := openKV(t)
	for _, dim := range []int{64, 128, 256} {
		opts := backendtest.Options{OpTol: opTolFP32, Dims: []int{dim}}
		t.Run(fmt.Sprintf("d%d/auto", dim), func(t *testing.T) { backendtest.RunSoftcap(t, d, opts) })
		for _, tc := range []struct {
			name string
			f    forced
		}{
			{"prefill", forced{b, pathPrefill, 0}},
			{"decode", forced{b, pathDecode, 16}},
			{"reference", forced{b, pathRef, 0}},
		} {
			if tc.f.path == pathDecode && dim == 256 {
				continue // fp16 at head size 256 has no decode kernel
			}
			t.Run(fmt.Sprintf("d%d/%s", dim, tc.name), func(t *testing.T) { backendtest.RunSoftcap(t, tc.f, opts) })
		}
	}
}

// TestAttentionSoftcap checks softcapped attention (AttnParams.Softcap,
// cap·tanh(scale·q·k/cap) before the mask and softmax) in every attention
// kernel: the reference kernel against float64 attention with the capped
// scores, and each fast path (prefill; tensor-core or quantized decode
// with several chunks per sequence and with the chosen chunk, then
// kvq_attn_merge with an exact step's own positions; the automatic choice)
// against the reference kernel, over dense caches (fp16, bf16, fp32) and
// the quantized decode's vector loaders (q4_0, int4, fp8) and generic one
// (q5_1 at head size 256, K ≠ V), through prefills, decodes, exact and
// sliding-window steps. The cap bends the scores: attention without it is
// far outside the tolerance of the float64 answer.
func TestAttentionSoftcap(t *testing.T) {
	_, b := openKV(t)
	const softcap = 1.5
	reg := quant.Formats()
	for _, c := range []struct {
		spec string
		dim  int
	}{
		{"fp16", 64}, {"bf16", 128}, {"fp16", 256}, {"fp32", 64}, {"fp16", 32},
		{"q4_0", 64}, {"int4", 128}, {"fp8-e4m3", 64}, {"q5_1", 256}, {"k=q8_0,v=q4_0", 64},
	} {
		spec, err := reg.ParseSpec(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(fmt.Sprintf("%s/d%d", c.spec, c.dim), func(t *testing.T) {
			sc := newAttnSceneWith(t, b, spec, c.dim, 2, 8, 60, 0)
			at := attnArgs{s: sc.s, ks: &sc.s.sides[0][0], vs: &sc.s.sides[0][1]}
			decodes := at.tensorCores() || at.quantized()
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
			worst, bent := 0.0, 0.0
			for i, st := range steps {
				sc.begin(st.n, ids, st.exact)
				for j := range sc.q {
					sc.q[j] *= 6 // scores of a few units, so that the cap bends them
				}
				b.Free(sc.qt)
				sc.qt = sc.upload(sc.q)
				sc.softcap = 0
				plain, _ := sc.want(st.window)
				sc.softcap = softcap
				want, vmax := sc.want(st.window)
				for j := range want {
					bent = max(bent, math.Abs(want[j]-plain[j])/vmax[j/c.dim])
				}
				label := fmt.Sprintf("step %d", i)
				ref32 := sc.run(pathRef, 0, st.window)
				compare(t, label+" ref", ref32, want, vmax, c.dim, refTol)
				ref := widen(ref32)
				paths := []struct {
					name  string
					path  attnPath
					chunk int
				}{{"prefill", pathPrefill, 0}, {"decode/chunk=16", pathDecode, 16}, {"decode", pathDecode, 0}, {"auto", pathAuto, 0}}
				for _, p := range paths {
					if p.path == pathDecode && !decodes || p.path == pathPrefill && !prefillDim(c.dim) {
						continue
					}
					worst = max(worst, compare(t, label+" "+p.name, sc.run(p.path, p.chunk, st.window), ref, vmax, c.dim, kernelTol))
				}
				sc.end()
			}
			if bent < 1e3*refTol {
				t.Errorf("the cap moves the float64 answer by only %.3g of max |v|: the test would not see it ignored", bent)
			}
			t.Logf("worst %.2g of max |v| from the reference kernel; the cap moves the answer by %.2g", worst, bent)
		})
	}
}

// TestAttentionHash writes the SHA-256 of every attention kernel's
// outputs, softcap 0, over dense and quantized caches and prefill,
// decode, exact and sliding-window steps, to the file KVQ_ATTN_HASH names
// (skipped without it). It checks that a zero softcap leaves the kernels'
// results bit for bit those of the kernels before softcapping: run it with
// the embedded module and with the previous one (KVQ_PTX=old.ptx: the
// extra parameter is ignored by the old kernels) and compare the two
// files. The emulator gave the same hash before and after the change.
func TestAttentionHash(t *testing.T) {
	path := os.Getenv("KVQ_ATTN_HASH")
	if path == "" {
		t.Skip("KVQ_ATTN_HASH names no file")
	}
	_, b := openKV(t)
	h := sha256.New()
	reg := quant.Formats()
	for _, c := range []struct {
		spec string
		dim  int
	}{
		{"fp16", 64}, {"fp16", 128}, {"bf16", 64}, {"fp32", 64}, {"fp16", 256}, {"q4_0", 64}, {"int4", 128},
		{"k=q8_0,v=q4_0", 64}, {"q5_1", 256}, {"fp8-e4m3", 64},
	} {
		spec, err := reg.ParseSpec(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		sc := newAttnSceneWith(t, b, spec, c.dim, 2, 8, 60, 0)
		at := attnArgs{s: sc.s, ks: &sc.s.sides[0][0], vs: &sc.s.sides[0][1]}
		decodes := at.tensorCores() || at.quantized()
		ids := []kvcache.SeqID{0, 1, 2}
		for _, id := range ids {
			if err := sc.c.AddSeq(id); err != nil {
				t.Fatal(err)
			}
		}
		for _, st := range []struct {
			n      map[kvcache.SeqID]int
			exact  bool
			window int
		}{
			{n: map[kvcache.SeqID]int{0: 75, 1: 23, 2: 40}},
			{n: map[kvcache.SeqID]int{0: 1, 1: 2, 2: 1}},
			{n: map[kvcache.SeqID]int{0: 2, 1: 1, 2: 1}, exact: true, window: 21},
			{n: map[kvcache.SeqID]int{0: 1, 1: 1, 2: 1}, window: 50},
		} {
			sc.begin(st.n, ids, st.exact)
			for _, p := range []attnPath{pathRef, pathPrefill, pathDecode, pathAuto} {
				if p == pathDecode && !decodes {
					continue
				}
				for _, x := range sc.run(p, 16, st.window) {
					_ = binary.Write(h, binary.LittleEndian, x)
				}
			}
			sc.end()
		}
	}
	sum := fmt.Sprintf("%x\n", h.Sum(nil))
	t.Logf("attention outputs' SHA-256: %s", sum)
	if err := os.WriteFile(path, []byte(sum), 0o644); err != nil {
		t.Fatal(err)
	}
}
