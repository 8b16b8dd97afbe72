package simd_test

import (
	"fmt"
	"math"

	"github.com/kvqlabs/kvq/internal/simd"
)

func ExampleDotF16() {
	w := []uint16{simd.F32ToF16Scalar(0.5), simd.F32ToF16Scalar(-2), simd.F32ToF16Scalar(4)}
	x := []float32{2, 1, 1}
	fmt.Println(simd.DotF16(w, x))
	// Output: 3
}

func ExampleMatMulF32() {
	// W is 3×2 (out × in); two token rows; compute all three outputs.
	w := []float32{
		1, 0,
		0, 1,
		1, 1,
	}
	x := []float32{
		2, 3,
		5, 7,
	}
	dst := make([]float32, 2*3)
	simd.MatMulF32(dst, 3, x, 2, 2, w, 0, 3)
	fmt.Println(dst)
	// Output: [2 3 5 5 7 12]
}

func ExampleF32ToF16Scalar() {
	fmt.Printf("%#04x %#04x %#04x\n",
		simd.F32ToF16Scalar(1),
		simd.F32ToF16Scalar(65520),   // rounds past the largest half: +Inf
		simd.F32ToF16Scalar(0x1p-25), // ties to even: +0
	)
	// Output: 0x3c00 0x7c00 0x0000
}

func ExampleU4ToF32() {
	// Two bytes hold a short block of four 4-bit codes: byte k holds code k
	// in its low nibble and code k+2 in its high nibble (a whole block of 32
	// codes pairs k with k+16): 1, 15, 2, 0.
	src := []byte{0x21, 0x0f}
	dst := make([]float32, 4)
	simd.U4ToF32(dst, src, 0.5, -1) // code*0.5 - 1
	fmt.Println(dst)
	// Output: [-0.5 6.5 0 -1]
}

func ExampleU4ToF32Groups() {
	// A run of eight 4-bit codes (one short block: byte k holds codes k and
	// k+4) in two groups of four, each with its own scale and bias: codes
	// 1, 15, 3, 0 and then 2, 0, 3, 1.
	src := []byte{0x21, 0x0f, 0x33, 0x10}
	scale := []float32{0.5, 2}
	bias := []float32{-1, 10}
	dst := make([]float32, 8)
	simd.U4ToF32Groups(dst, src, 4, scale, bias)
	fmt.Println(dst)
	// Output: [-0.5 6.5 0.5 -1 14 10 16 12]
}

func ExampleScoresF32() {
	// Two queries and three rows of dim 2.
	q := []float32{
		1, 0,
		1, 1,
	}
	rows := []float32{
		2, 3,
		4, 5,
		6, 7,
	}
	dst := make([]float32, 2*3)
	simd.ScoresF32(dst, 3, q, 2, 2, rows, 3)
	fmt.Println(dst)
	// Output: [2 4 6 5 9 13]
}

func ExampleAccumulateF32() {
	// acc[i] += Σ_j w[i][j]*rows[j] for two queries and two rows of dim 2.
	rows := []float32{
		1, 2,
		3, 4,
	}
	w := []float32{
		0.5, 0.5,
		1, 0,
	}
	acc := make([]float32, 2*2)
	simd.AccumulateF32(acc, w, 2, 2, 2, rows, 2)
	fmt.Println(acc)
	// Output: [2 3 1 2]
}

func ExampleExpShiftSum() {
	// softmax(scale*x) in place: shift by the largest scaled score, so
	// that every exponent is <= 0 and the largest becomes exactly 1, then
	// divide by the sum.
	x := []float32{1, 3, 2, 3}
	const scale = 0.5
	m := simd.MaxF32(x)
	s := simd.ExpShiftSum(x, scale, m*scale)
	simd.ScaleF32(x, float32(1/s))
	fmt.Printf("%.4f %.4f\n", x, s)
	// Output: [0.1237 0.3362 0.2039 0.3362] 2.9744
}

func ExampleMaxF32() {
	nan := float32(math.NaN())
	fmt.Println(simd.MaxF32([]float32{-2, 5, 1}), simd.MaxF32(nil), simd.MaxF32([]float32{1, nan, 7}))
	// Output: 5 -Inf NaN
}
