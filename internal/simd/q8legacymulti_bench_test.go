package simd

import (
	"os"
	"testing"
)

// BenchmarkQ80Rows compares the one-token products of Q4_0, Q5_0, IQ4_NL
// and Q8_0 weights with Q8_0 activations one row a call (DotQ40Q80 …:
// the set's one-row kernels) and four rows a call (DotQ40Q80Rows …: its
// four-row kernels where it has them) on the default kernel set and the
// avx2 set (ForceAVX2), on the 1B model's two shapes: 8192 rows of 2048
// columns and 2048 rows of 8192. Each streams its weights from DRAM as
// BenchmarkKQ8KRows does (a ring of copies of 256 MiB in all, one matrix
// a call, the two variants alternating first from round to round) and
// reports each variant's median GB/s of weights and "speedup" (the median
// over rounds of the one-row time over the four-row time). Run it with
// -benchtime 100x or so; with KVQ_BENCH_IN_CACHE set it reads one matrix
// of a quarter the rows over and over (-benchtime 1000x).
func BenchmarkQ80Rows(b *testing.B) {
	sets := []kernelSet{{"default", func() func() { return func() {} }}}
	if hasAVX512 {
		sets = append(sets, kernelSet{"avx2", ForceAVX2})
	}
	for _, set := range sets {
		for _, tt := range []struct {
			name string
			t    qdotType
			one  func(w, q []byte) float32
			rows func(dst []float32, w, q []byte)
		}{
			{"Q40", qdQ40, DotQ40Q80, DotQ40Q80Rows},
			{"Q50", qdQ50, DotQ50Q80, DotQ50Q80Rows},
			{"IQ4NL", qdIQ4NL, DotIQ4NLQ80, DotIQ4NLQ80Rows},
			{"Q80", qdQ80, DotQ80Q80, DotQ80Q80Rows},
		} {
			for _, shape := range []struct {
				name       string
				rows, cols int
			}{{"8192x2048", 8192, 2048}, {"2048x8192", 2048, 8192}} {
				b.Run(set.name+"/"+tt.name+"/"+shape.name, func(b *testing.B) {
					defer set.force()()
					benchQ80Rows(b, qdotBlockBytes[tt.t], shape.rows, shape.cols, tt.one, tt.rows)
				})
			}
		}
	}
}

func benchQ80Rows(b *testing.B, blockBytes, rows, cols int, one func(w, q []byte) float32, rowsDot func(dst []float32, w, q []byte)) {
	ringBytes := 256 << 20
	if os.Getenv("KVQ_BENCH_IN_CACHE") != "" {
		ringBytes, rows = 1, rows/4
	}
	r := newRand(b)
	nb := cols / 32
	rb := nb * blockBytes
	ring := cloneRing(randKBlocks(r, rows*nb, blockBytes, 0), ringBytes/(rows*rb))
	q := make([]byte, nb*Q80BlockBytes)
	QuantizeQ80(q, randF32(r, cols))
	benchRowDots(b, ring, rows, rb, q, one, rowsDot)
}
