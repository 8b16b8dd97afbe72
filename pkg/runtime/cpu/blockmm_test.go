package cpu

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/internal/testutil"
	"github.com/kvqlabs/kvq/pkg/gguf"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// kernelSets are the simd kernel sets to try: the default selection, then
// forced AVX2, then the pure-Go twins (the same set twice where the CPU
// lacks one, which only repeats a check).
var kernelSets = []struct {
	name  string
	force func() func()
}{
	{"default", func() func() { return func() {} }},
	{"avx2", simd.ForceAVX2},
	{"generic", simd.ForceGeneric},
}

// TestDecodeRowMatchesGGUF: the SIMD decoders of every block type that the
// products use give gguf.DequantizeRow's bits (ggml's, golden-tested there)
// on rows quantized by gguf.QuantizeRow, on every kernel set.
func TestDecodeRowMatchesGGUF(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const cols = 256 * 5
	x := make([]float32, cols)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 0.05)
	}
	for _, ks := range kernelSets {
		t.Run(ks.name, func(t *testing.T) {
			defer ks.force()()
			for _, gt := range []gguf.Type{gguf.Q2K, gguf.Q3K, gguf.Q4K, gguf.Q5K, gguf.Q6K, gguf.Q40, gguf.Q41, gguf.Q50, gguf.Q51, gguf.IQ4NL, gguf.IQ4XS, gguf.MXFP4} {
				rb, _ := gt.RowBytes(cols)
				q := make([]byte, rb)
				gguf.QuantizeRow(gt, q, x)
				got, want := make([]float32, cols), make([]float32, cols)
				decodeRow(gt, got, q)
				gguf.DequantizeRow(gt, want, q)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%v value %d: %v, gguf %v", gt, i, got[i], want[i])
					}
				}
			}
		})
	}
}

// q8KValues returns the values d·c of the Q8_K blocks at q.
func q8KValues(q []byte) []float32 {
	v := make([]float32, len(q)/simd.Q8KBlockBytes*256)
	for b := 0; b < len(q)/simd.Q8KBlockBytes; b++ {
		blk := q[b*simd.Q8KBlockBytes:]
		d := math.Float32frombits(binary.LittleEndian.Uint32(blk))
		for i := 0; i < 256; i++ {
			v[256*b+i] = d * float32(int8(blk[4+i]))
		}
	}
	return v
}

// TestMatMulBlocksPaths: products of every block type agree with the
// float64 product over the decoded matrix below the packed threshold (the
// integer dots over packed blocks and quantized activations, q8Dots, whose
// activation values d·c the reference takes; the SIMD dots over packed
// blocks and float32 activations, fusedDots, for the other types) and from it (decoded panels in the packed micro-kernels,
// decoded rows for the rows past the last whole panel), on every kernel
// set, with 37 weight rows (two panels and 5 more) of 512 columns.
func TestMatMulBlocksPaths(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const rows, cols = 37, 512
	vals := make([]float32, rows*cols)
	for i := range vals {
		vals[i] = float32(r.NormFloat64() * 0.05)
	}
	for _, ks := range kernelSets {
		t.Run(ks.name, func(t *testing.T) {
			defer ks.force()()
			nts := []int{1, 5}
			if p := simd.MatMulDecodedTokens(); p < 1000 {
				nts = append(nts, p-1, p, p+7)
			}
			for dt, gt := range blockTypes {
				rb := dt.RowBytes(cols)
				w := &tensor.Weight{Name: "w", DType: dt, Rows: rows, Cols: cols, Raw: make([]byte, rows*rb)}
				dec := make([]float32, rows*cols)
				for i := 0; i < rows; i++ {
					gguf.QuantizeRow(gt, w.Raw[i*rb:(i+1)*rb], vals[i*cols:(i+1)*cols])
					gguf.DequantizeRow(gt, dec[i*cols:(i+1)*cols], w.Raw[i*rb:(i+1)*rb])
				}
				for _, nt := range nts {
					x := make([]float32, nt*cols)
					for i := range x {
						x[i] = float32(r.NormFloat64())
					}
					got := make([]float32, nt*rows)
					q8 := quantizeTokens(x, nt, w, nt, false)
					matMulRows(got, x, q8Bytes(q8), nt, w, 0, rows)
					xr, slack := x, make([]float64, nt*rows) // the activations the product takes
					switch {
					case q8 != nil && q8Dots[dt].vals == 256: // Q8_K: float32 d
						xr = q8KValues(*q8)
					case q8 != nil:
						xr, slack = q8Values(*q8, w, got, nt)
					}
					releaseTokens(q8)
					bad := 0
					for tk := 0; tk < nt; tk++ {
						for i := 0; i < rows; i++ {
							var ref, mag float64
							for c := 0; c < cols; c++ {
								p := float64(dec[i*cols+c]) * float64(xr[tk*cols+c])
								ref, mag = ref+p, mag+math.Abs(p)
							}
							if d := math.Abs(float64(got[tk*rows+i]) - ref); d > 1e-5*mag+slack[tk*rows+i] && bad < 3 {
								t.Errorf("%v nt=%d: dst[%d][%d] = %v, float64 product of the decoded weights %v", dt, nt, tk, i, got[tk*rows+i], ref)
								bad++
							}
						}
					}
				}
			}
		})
	}
}

// q8Values returns the values d·c of the nt token rows of w's quantized
// activations q8 (Q8_0 or Q8_1 blocks) and, for Q4_1 and Q5_1 (Q8_1), the
// slack per product of their mins' term m·s, s = d·Σc rounded to binary16
// (Σ_b |m_b·s_b|·2⁻¹⁰); got only sizes the slack.
func q8Values(q8 []byte, w *tensor.Weight, got []float32, nt int) ([]float32, []float64) {
	d := q8Dots[w.DType]
	qrb, rb, off := q8RowBytes(w), w.DType.RowBytes(w.Cols), d.bytes-d.vals
	v := make([]float32, nt*w.Cols)
	slack := make([]float64, len(got))
	f16 := func(b []byte) float64 { return float64(simd.F16ToF32Scalar(binary.LittleEndian.Uint16(b))) }
	for t := 0; t < nt; t++ {
		for b := 0; b < w.Cols/d.vals; b++ {
			blk := q8[t*qrb+b*d.bytes:]
			for j := 0; j < d.vals; j++ {
				v[t*w.Cols+b*d.vals+j] = float32(f16(blk)) * float32(int8(blk[off+j]))
			}
			for r := 0; off == 4 && r < w.Rows; r++ {
				m := f16(w.Raw[r*rb+b*(rb/(w.Cols/32))+2:])
				slack[t*w.Rows+r] += math.Abs(m*f16(blk[2:])) / 1024
			}
		}
	}
	return v, slack
}

// TestDecodeRowGoldens runs decodeRow over pkg/gguf's golden blocks (made
// by llama.cpp's ggml: zero and tiny blocks, outliers, large values) on
// every kernel set and compares it with gguf.DequantizeRow bit for bit.
func TestDecodeRowGoldens(t *testing.T) {
	for _, ks := range kernelSets {
		t.Run(ks.name, func(t *testing.T) {
			defer ks.force()()
			for _, gt := range blockTypes {
				b, err := os.ReadFile(filepath.Join("..", "..", "gguf", "testdata", "ggml", gt.String()+".txt"))
				if err != nil {
					t.Fatal(err)
				}
				rows := 0
				for _, line := range strings.Split(string(b), "\n") {
					h, ok := strings.CutPrefix(line, "q ")
					if !ok {
						continue
					}
					q, err := hex.DecodeString(h)
					if err != nil {
						t.Fatal(err)
					}
					rb, _ := gt.RowBytes(int64(gt.BlockSize()))
					n := len(q) / int(rb) * gt.BlockSize()
					got, want := make([]float32, n), make([]float32, n)
					decodeRow(gt, got, q)
					gguf.DequantizeRow(gt, want, q)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%v row %d value %d: %v, gguf %v", gt, rows, i, got[i], want[i])
						}
					}
					rows++
				}
				if rows == 0 {
					t.Fatalf("%v: no golden rows", gt)
				}
			}
		})
	}
}

// TestMatMulBlocksAllocs: a warmed-up product below the packed threshold
// allocates nothing, on the fused dots with and without the activations'
// group sums, with the stack scratch of iq4_xs's scales, with q2_K's
// and q3_K's stack buffers, and on Q8_0 weights' quantized activations.
func TestMatMulBlocksAllocs(t *testing.T) {
	if testutil.Race {
		t.Skip("the race detector's sync.Pool drops items at random; make test counts allocations in its runs without -race")
	}
	const rows, cols = 8, 512
	nts := []int{1, 5}
	for _, dt := range []tensor.DType{tensor.Q4K, tensor.IQ4XS, tensor.Q40, tensor.Q41, tensor.Q2K, tensor.Q3K, tensor.Q80} {
		w := &tensor.Weight{Name: "w", DType: dt, Rows: rows, Cols: cols, Raw: make([]byte, rows*dt.RowBytes(cols))}
		for _, nt := range nts {
			x, dst := make([]float32, nt*cols), make([]float32, nt*rows)
			product := func() {
				q8 := quantizeTokens(x, nt, w, nt, false)
				matMulRows(dst, x, q8Bytes(q8), nt, w, 0, rows)
				releaseTokens(q8)
			}
			product()
			if a := testing.AllocsPerRun(20, product); a != 0 {
				t.Errorf("%v, %d token rows: %v allocations a product", dt, nt, a)
			}
		}
	}
}
