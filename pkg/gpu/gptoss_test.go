//go:build cudaemu || cuda

package gpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvqlabs/kvq/pkg/gguf"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/backend/backendtest"
	kvqtensor "github.com/kvqlabs/kvq/pkg/tensor"
)

// TestAttentionSinks runs the backend suite's cache checks, whose layer 1
// attends with a sink logit per query head on a backend that implements
// backend.Sinks (backendtest.RunCache: float64 attention with the same
// sinks on the decoded rows), through every attention kernel: the
// automatic choice (prefill, and the tensor-core or quantized decode with
// kvq_attn_merge), every sequence through split-K decoding in 16-position
// chunks (so that a row has several partials and the sink must join once,
// in the merge), every sequence through the prefill kernel, and the
// reference kernel; fp16, bf16, fp32 and quantized caches.
func TestAttentionSinks(t *testing.T) {
	b := openTest(t)
	if _, ok := any(b).(backend.Sinks); !ok {
		t.Fatal("the GPU backend does not implement backend.Sinks")
	}
	quantized := []string{"fp8-e4m3", "q8_0", "q4_0", "int4"}
	for _, tc := range []struct {
		name    string
		be      backend.Backend
		formats []string
	}{
		{"auto", b, append([]string{"fp16", "bf16", "fp32"}, quantized...)},
		{"decode", forced{b, pathDecode, 16}, append([]string{"fp16", "bf16"}, quantized...)},
		{"prefill", forced{b, pathPrefill, 0}, []string{"fp16", "q4_0"}},
		{"ref", forced{b, pathRef, 0}, []string{"fp16", "int4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			backendtest.RunKV(t, tc.be, backendtest.Options{Formats: tc.formats, Dims: []int{64}})
		})
	}
}

// TestExpertExtras checks ExpertFFN with GPT-OSS's expert biases and
// clamped SwiGLU against a float64 reference, with F32 experts and with
// MXFP4 ones (dequantized to BF16 on the device at first use: exact, so
// the reference decodes them with pkg/gguf), and that an MXFP4 expert no
// token is routed to is never put on the device.
func TestExpertExtras(t *testing.T) {
	b := openTest(t)
	const ne, k, nt, dim, hidden = 4, 2, 5, 64, 32
	rng := rand.New(rand.NewPCG(39, 1))
	randv := func(n int, s float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * s)
		}
		return v
	}
	for _, mxfp4 := range []bool{false, true} {
		name := "f32"
		if mxfp4 {
			name = "mxfp4"
		}
		t.Run(name, func(t *testing.T) {
			// host[e][0..2]: gate, up, down as float32 rows.
			var host [ne][3][]float32
			e := &backend.Experts{Alpha: 1.702, Limit: 1.5}
			prepared := map[int]bool{}
			e.Prepare = func(ex int) { prepared[ex] = true }
			var mats [ne][3]*matrix
			for ex := 0; ex < ne; ex++ {
				for j, rc := range [3][2]int{{hidden, dim}, {hidden, dim}, {dim, hidden}} {
					w := &kvqtensor.Weight{Name: "w", Rows: rc[0], Cols: rc[1]}
					if mxfp4 {
						w.DType = kvqtensor.MXFP4
						rb := kvqtensor.MXFP4.RowBytes(rc[1])
						w.Raw = make([]byte, rc[0]*rb)
						for i := range w.Raw {
							w.Raw[i] = byte(rng.IntN(256))
							if i%17 == 0 {
								w.Raw[i] = byte(118 + rng.IntN(6)) // E8M0 scales near 2^-9..2^-4
							}
						}
						host[ex][j] = make([]float32, rc[0]*rc[1])
						for r := 0; r < rc[0]; r++ {
							gguf.DequantizeRow(gguf.MXFP4, host[ex][j][r*rc[1]:(r+1)*rc[1]], w.Raw[r*rb:(r+1)*rb])
						}
					} else {
						w.DType = kvqtensor.F32
						w.F32 = randv(rc[0]*rc[1], 0.3)
						host[ex][j] = w.F32
					}
					m, err := b.Upload(w)
					if err != nil {
						t.Fatal(err)
					}
					mats[ex][j] = mat(m)
				}
				e.Gate, e.Up, e.Down = append(e.Gate, mats[ex][0]), append(e.Up, mats[ex][1]), append(e.Down, mats[ex][2])
			}
			var bias [3][ne][]float32
			for j, n := range []int{hidden, hidden, dim} {
				for ex := 0; ex < ne; ex++ {
					bias[j][ex] = randv(n, 0.5)
				}
			}
			for ex := 0; ex < ne; ex++ {
				e.GateBias = append(e.GateBias, put(t, b, bias[0][ex]))
				e.UpBias = append(e.UpBias, put(t, b, bias[1][ex]))
				e.DownBias = append(e.DownBias, put(t, b, bias[2][ex]))
			}
			x := randv(nt*dim, 1)
			// Experts 0, 1 and 3 only; per token k (expert, weight) pairs.
			use := [nt][k]int{{0, 1}, {3, 0}, {1, 3}, {0, 3}, {1, 0}}
			route := make([]float32, nt*2*k)
			for i := 0; i < nt; i++ {
				for j := 0; j < k; j++ {
					route[i*2*k+j] = float32(use[i][j])
					route[i*2*k+k+j] = float32(0.3 + 0.4*float64(j))
				}
			}
			out := b.Alloc(nt * dim)
			b.ExpertFFN(out, put(t, b, x), nt, put(t, b, route), k, e)
			got := make([]float32, nt*dim)
			if err := b.Download(got, out, 0); err != nil {
				t.Fatal(err)
			}
			if mxfp4 && mats[2][0].p != 0 {
				t.Error("an MXFP4 expert no token uses was put on the device")
			}
			if mxfp4 && (mats[0][0].p == 0 || mats[3][2].p == 0) {
				t.Error("a used MXFP4 expert has no device copy")
			}
			if !prepared[0] || !prepared[1] || !prepared[3] || prepared[2] {
				t.Errorf("Prepare called for %v, want experts 0, 1 and 3", prepared)
			}
			mv := func(w []float32, rows, cols int, v []float64, b []float32) []float64 {
				o := make([]float64, rows)
				for r := range o {
					s := float64(b[r])
					for c := 0; c < cols; c++ {
						s += float64(w[r*cols+c]) * v[c]
					}
					o[r] = s
				}
				return o
			}
			lim, alpha := float64(e.Limit), float64(e.Alpha)
			var worst, top float64
			for i := 0; i < nt; i++ {
				xi := make([]float64, dim)
				for c := range xi {
					xi[c] = float64(x[i*dim+c])
				}
				want := make([]float64, dim)
				for j := 0; j < k; j++ {
					ex := use[i][j]
					g := mv(host[ex][0], hidden, dim, xi, bias[0][ex])
					u := mv(host[ex][1], hidden, dim, xi, bias[1][ex])
					h := make([]float64, hidden)
					for c := range h {
						gg := math.Min(g[c], lim)
						uu := math.Min(math.Max(u[c], -lim), lim)
						h[c] = gg / (1 + math.Exp(-alpha*gg)) * (uu + 1)
					}
					o := mv(host[ex][2], dim, hidden, h, bias[2][ex])
					for c := range want {
						want[c] += float64(route[i*2*k+k+j]) * o[c]
					}
				}
				for c := range want {
					worst = math.Max(worst, math.Abs(float64(got[i*dim+c])-want[c]))
					top = math.Max(top, math.Abs(want[c]))
				}
			}
			// Few rows an expert: the fp32 GEMV (about 1e-6 here; 1e-3 leaves room
			// for a device that takes another path).
			t.Logf("max |GPU − float64| %.3g of max |out| %.3g", worst, top)
			if worst > 1e-3*top || top == 0 {
				t.Errorf("ExpertFFN with biases and the clamped SwiGLU: max error %.3g of %.3g (bound 1e-3 relative)", worst, top)
			}
		})
	}
}
