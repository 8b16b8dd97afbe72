package simd

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// Benchmarks pair each kernel with its generic twin:
//
//	go test -run='^$' -bench=. -benchtime=200ms ./internal/simd/
//
// MatMul benchmarks report GFLOP/s (2*nt*rows*cols per call) and, through
// SetBytes, the weight bytes streamed per second.

// runImpls runs f as sub-benchmarks name/avx512, name/avx2 and
// name/generic, skipping the sets this CPU lacks. Sub-benchmarks run their
// -count rounds back to back, so to compare sets on a noisy machine build
// the test binary once (go test -c) and run it several times, each with
// -count 1, then benchstat the concatenated output.
func runImpls(b *testing.B, name string, f func(b *testing.B)) {
	for _, set := range []kernelSet{{"avx512", func() func() { return func() {} }}, {"avx2", ForceAVX2}, {"generic", ForceGeneric}} {
		b.Run(name+"/"+set.name, func(b *testing.B) {
			switch {
			case set.name == "avx512" && !hasAVX512:
				b.Skip("avx512 kernels not built or not supported")
			case set.name == "avx2" && !hasAVX2:
				b.Skip("assembly not built or not supported")
			}
			defer set.force()()
			b.ReportAllocs()
			f(b)
		})
	}
}

var benchSink float32

func BenchmarkDot(b *testing.B) {
	const n = 4096
	r := newRand(b)
	x := randF32(r, n)
	a := randF32(r, n)
	h := randF16(r, n)
	bf := randBF16(r, n)
	q := randQ80(r, n/q80BlockSize)
	runImpls(b, fmt.Sprintf("F32/%d", n), func(b *testing.B) {
		b.SetBytes(2 * 4 * n)
		for b.Loop() {
			benchSink += DotF32(a, x)
		}
	})
	runImpls(b, fmt.Sprintf("F16/%d", n), func(b *testing.B) {
		b.SetBytes((2 + 4) * n)
		for b.Loop() {
			benchSink += DotF16(h, x)
		}
	})
	runImpls(b, fmt.Sprintf("BF16/%d", n), func(b *testing.B) {
		b.SetBytes((2 + 4) * n)
		for b.Loop() {
			benchSink += DotBF16(bf, x)
		}
	})
	runImpls(b, fmt.Sprintf("Q80/%d", n), func(b *testing.B) {
		b.SetBytes(int64(len(q) + 4*n))
		for b.Loop() {
			benchSink += DotQ80(q, x)
		}
	})
}

func BenchmarkAxpy(b *testing.B) {
	const n = 4096
	r := newRand(b)
	y := randF32(r, n)
	x := randF32(r, n)
	h := randF16(r, n)
	runImpls(b, fmt.Sprintf("F32/%d", n), func(b *testing.B) {
		b.SetBytes(3 * 4 * n)
		for b.Loop() {
			AxpyF32(y, 1e-3, x)
		}
	})
	runImpls(b, fmt.Sprintf("F16/%d", n), func(b *testing.B) {
		b.SetBytes((8 + 2) * n)
		for b.Loop() {
			AxpyF16(y, 1e-3, h)
		}
	})
}

func BenchmarkConvert(b *testing.B) {
	const n = 4096
	r := newRand(b)
	f := randF32(r, n)
	h := randF16(r, n)
	runImpls(b, fmt.Sprintf("F16ToF32/%d", n), func(b *testing.B) {
		b.SetBytes(6 * n)
		for b.Loop() {
			F16ToF32(f, h)
		}
	})
	runImpls(b, fmt.Sprintf("F32ToF16/%d", n), func(b *testing.B) {
		b.SetBytes(6 * n)
		for b.Loop() {
			F32ToF16(h, f)
		}
	})
	runImpls(b, fmt.Sprintf("F32ToBF16/%d", n), func(b *testing.B) {
		b.SetBytes(6 * n)
		for b.Loop() {
			F32ToBF16(h, f)
		}
	})
}

// BenchmarkMatMul covers decode (nt=1: a memory-bound stream over the
// weights) and prefill (nt=64: compute-bound). Decode rotates through enough
// copies of the weights (at least 96 MiB) that each call streams them from
// DRAM, as a model far larger than the last-level cache would; prefill
// reuses one copy.
func BenchmarkMatMul(b *testing.B) {
	shapes := []struct {
		name           string
		nt, rows, cols int
	}{
		{"decode/2048x2048", 1, 2048, 2048},
		{"decode/5632x2048", 1, 5632, 2048},
		{"prefill64/2048x2048", 64, 2048, 2048},
	}
	const coldBytes = 96 << 20
	r := newRand(b)
	for _, dt := range []string{"F32", "F16", "BF16", "Q80"} {
		for _, s := range shapes {
			x := randF32(r, s.nt*s.cols)
			dst := make([]float32, s.nt*s.rows)
			n := s.rows * s.cols
			var wBytes int
			switch dt {
			case "F32":
				wBytes = 4 * n
			case "F16", "BF16":
				wBytes = 2 * n
			case "Q80":
				wBytes = n / q80BlockSize * q80BlockBytes
			}
			copies := 1
			if s.nt == 1 {
				copies = (coldBytes + wBytes - 1) / wBytes
			}
			calls := make([]func(), copies)
			for i := range calls {
				switch dt {
				case "F32":
					w := randF32(r, n)
					calls[i] = func() { MatMulF32(dst, s.rows, x, s.nt, s.cols, w, 0, s.rows) }
				case "F16":
					w := randF16(r, n)
					calls[i] = func() { MatMulF16(dst, s.rows, x, s.nt, s.cols, w, 0, s.rows) }
				case "BF16":
					w := randBF16(r, n)
					calls[i] = func() { MatMulBF16(dst, s.rows, x, s.nt, s.cols, w, 0, s.rows) }
				case "Q80":
					w := randQ80(r, n/q80BlockSize)
					calls[i] = func() { MatMulQ80(dst, s.rows, x, s.nt, s.cols, w, 0, s.rows) }
				}
			}
			flops := 2 * float64(s.nt) * float64(n)
			runImpls(b, dt+"/"+s.name, func(b *testing.B) {
				b.SetBytes(int64(wBytes))
				i := 0
				for b.Loop() {
					calls[i%copies]()
					i++
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkMemBandwidth streams a 256 MiB float32 buffer with the sum kernel,
// on one goroutine and split across GOMAXPROCS goroutines, and reports GB/s
// (1e9 bytes per second).
func BenchmarkMemBandwidth(b *testing.B) {
	const size = 256 << 20
	buf := make([]float32, size/4)
	for i := range buf {
		buf[i] = 1
	}
	for _, workers := range []int{1, runtime.GOMAXPROCS(0)} {
		runImpls(b, fmt.Sprintf("256MiB/workers=%d", workers), func(b *testing.B) {
			b.SetBytes(size)
			per := len(buf) / workers
			for b.Loop() {
				if workers == 1 {
					benchSink += sumF32(buf)
					continue
				}
				var wg sync.WaitGroup
				for w := 0; w < workers; w++ {
					wg.Go(func() { _ = sumF32(buf[w*per : (w+1)*per]) })
				}
				wg.Wait()
			}
			b.ReportMetric(size*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

func BenchmarkMeasureBandwidth(b *testing.B) {
	for b.Loop() {
		bw := MeasureBandwidth(256 << 20)
		b.ReportMetric(bw/1e9, "GB/s")
	}
}

// BenchmarkUnpack converts one row of 128 values (one call per KV row) and
// 4096 values with each unpacking kernel; SetBytes counts the source bytes.
func BenchmarkUnpack(b *testing.B) {
	r := newRand(b)
	for _, n := range []int{128, 4096} {
		dst := make([]float32, n)
		s, z := randF32(r, n), randF32(r, n)
		p := unpackParams{scale: 0.01, bias: -1, s: s, z: z}
		for _, c := range unpackCases {
			src := randUnpackSrc(r, c, n)
			runImpls(b, fmt.Sprintf("%s/%d", c.name, n), func(b *testing.B) {
				b.SetBytes(int64(len(src)))
				for b.Loop() {
					c.run(dst, src, p)
				}
			})
		}
	}
	h := randF16(r, 128)
	f := make([]float32, 128)
	runImpls(b, "F16ToF32/128", func(b *testing.B) {
		b.SetBytes(2 * 128)
		for b.Loop() {
			F16ToF32(f, h)
		}
	})
}

// BenchmarkLUT maps one row of 128 codes (one call per KV row) and 4096
// codes through a table with each lookup kernel; SetBytes counts the
// source bytes.
func BenchmarkLUT(b *testing.B) {
	r := newRand(b)
	for _, n := range []int{128, 4096} {
		dst := make([]float32, n)
		for _, c := range lutCases {
			src := make([]byte, n/c.unit*c.unitBytes)
			for i := range src {
				src[i] = byte(r.IntN(256))
			}
			table := randTable(r, c.size)
			runImpls(b, fmt.Sprintf("%s/%d", c.name, n), func(b *testing.B) {
				b.SetBytes(int64(len(src)))
				for b.Loop() {
					c.run(dst, src, table)
				}
			})
		}
	}
}

// BenchmarkMul runs MulF32 and MulAddF32 on rows of 128 values (a head
// row) and 4096; SetBytes counts the float32 bytes read and written.
func BenchmarkMul(b *testing.B) {
	r := newRand(b)
	for _, n := range []int{128, 4096} {
		d, x, y := randF32(r, n), randF32(r, n), randF32(r, n)
		runImpls(b, fmt.Sprintf("MulF32/%d", n), func(b *testing.B) {
			b.SetBytes(3 * 4 * int64(n))
			for b.Loop() {
				MulF32(d, x, y)
			}
		})
		runImpls(b, fmt.Sprintf("MulAddF32/%d", n), func(b *testing.B) {
			b.SetBytes(4 * 4 * int64(n))
			for b.Loop() {
				MulAddF32(d, x, y)
			}
		})
	}
}

// BenchmarkUnpackGroups decodes a chunk of 16 rows of 128 values whose
// groups of 64 or 32 values have their own scale and bias: "grouped" is one
// grouped call for the chunk, "percall" one ungrouped call per group (32 or
// 64 calls). "F16ToF32" converts the chunk of binary16 rows, one call per
// row of 128 values (the per-row goal of the grouped kernels) and one call
// for the chunk. SetBytes counts the source bytes; ns/row is per row of
// 128 values.
func BenchmarkUnpackGroups(b *testing.B) {
	const rows, dim = 16, 128
	r := newRand(b)
	dst := make([]float32, rows*dim)
	for _, c := range groupCases {
		src := make([]byte, rows*dim/c.perByte)
		for i := range src {
			src[i] = byte(r.IntN(256))
		}
		for _, group := range []int{64, 32} {
			ng := rows * dim / group
			scale, bias := randF32(r, ng), randF32(r, ng)
			name := fmt.Sprintf("%s/group=%d", strings.TrimSuffix(c.name, "ToF32Groups"), group)
			runImpls(b, name+"/grouped", func(b *testing.B) {
				b.SetBytes(int64(len(src)))
				for b.Loop() {
					c.run(dst, src, group, scale, bias)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/row")
			})
			runImpls(b, name+"/percall", func(b *testing.B) {
				b.SetBytes(int64(len(src)))
				gb := group / c.perByte // source bytes per group
				for b.Loop() {
					for g := 0; g < ng; g++ {
						d, s := dst[g*group:(g+1)*group], src[g*gb:(g+1)*gb]
						switch c.perByte {
						case 1:
							U8ToF32(d, s, scale[g], bias[g])
						case 2:
							U4ToF32(d, s, scale[g], bias[g])
						default:
							U2ToF32(d, s, scale[g], bias[g])
						}
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/row")
			})
		}
	}
	h := randF16(r, rows*dim)
	runImpls(b, "F16ToF32/perrow", func(b *testing.B) {
		b.SetBytes(2 * rows * dim)
		for b.Loop() {
			for j := 0; j < rows; j++ {
				F16ToF32(dst[j*dim:(j+1)*dim], h[j*dim:(j+1)*dim])
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/row")
	})
	runImpls(b, "F16ToF32/chunk", func(b *testing.B) {
		b.SetBytes(2 * rows * dim)
		for b.Loop() {
			F16ToF32(dst, h)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/row")
	})
}

// BenchmarkDecodeRows decodes a chunk of 16 KV rows of 128 values, one call
// per row, with each exact decoder (E5M2, E4M3, Q5_0, Q5_1, IQ4_NL, and
// Q4_0 for comparison) and with F16ToF32, the baseline: the goal is at most
// 30% more time per row than F16ToF32. Every kernel is called the same way,
// through a function value. The block formats get binary16 d (and m) of
// moderate size, the 8-bit floats random codes. SetBytes counts the source
// bytes; ns/row is per row of 128 values.
func BenchmarkDecodeRows(b *testing.B) {
	const rows, dim = 16, 128
	r := newRand(b)
	dst := make([]float32, rows*dim)
	blocks := func(blockBytes, halves int) []byte {
		src := make([]byte, rows*dim/32*blockBytes)
		for i := range src {
			src[i] = byte(r.IntN(256))
		}
		for o := 0; o < len(src); o += blockBytes {
			for h := 0; h < halves; h++ {
				binary.LittleEndian.PutUint16(src[o+2*h:], F32ToF16Scalar(float32(r.NormFloat64()/16)))
			}
		}
		return src
	}
	codes := make([]byte, rows*dim)
	for i := range codes {
		codes[i] = byte(r.IntN(256))
	}
	halves := make([]byte, 2*rows*dim)
	fillF16(halves)
	for _, c := range []struct {
		name string
		src  []byte
		run  func(dst []float32, src []byte)
	}{
		{"F16ToF32", halves, func(d []float32, s []byte) { F16ToF32(d, bytesAsU16(s)) }},
		{"E5M2ToF32", codes, func(d []float32, s []byte) { E5M2ToF32(d, s, 0.37) }},
		{"E4M3ToF32", codes, func(d []float32, s []byte) { E4M3ToF32(d, s, 0.37) }},
		{"Q50ToF32", blocks(q50BlockBytes, 1), Q50ToF32},
		{"Q51ToF32", blocks(q51BlockBytes, 2), Q51ToF32},
		{"IQ4NLToF32", blocks(iq4nlBlockBytes, 1), IQ4NLToF32},
		{"Q40ToF32", blocks(q40BlockBytes, 1), Q40ToF32},
	} {
		rb := len(c.src) / rows // source bytes per row
		runImpls(b, c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.src)))
			for b.Loop() {
				for j := 0; j < rows; j++ {
					c.run(dst[j*dim:(j+1)*dim], c.src[j*rb:(j+1)*rb])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/row")
		})
	}
}

// BenchmarkAttentionKernels runs ScoresF32 and AccumulateF32 alone on chunks
// of n rows, for the model head sizes and query counts, and reports the time
// per row.
func BenchmarkAttentionKernels(b *testing.B) {
	r := newRand(b)
	for _, dim := range []int{64, 128, 256} {
		for _, nq := range []int{1, 2, 4, 8} {
			for _, n := range []int{16, 64} {
				q, rows, w := randF32(r, nq*dim), randF32(r, n*dim), randF32(r, nq*n)
				dst, acc := make([]float32, nq*n), make([]float32, nq*dim)
				name := fmt.Sprintf("dim=%d/nq=%d/n=%d", dim, nq, n)
				runImpls(b, "Scores/"+name, func(b *testing.B) {
					for b.Loop() {
						ScoresF32(dst, n, q, nq, dim, rows, n)
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
				})
				runImpls(b, "Accumulate/"+name, func(b *testing.B) {
					for b.Loop() {
						AccumulateF32(acc, w, n, nq, dim, rows, n)
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
				})
			}
		}
	}
}

// Shape of the attention-chunk benchmark: 16 cached rows (tokens) of head
// dim 128 against 4 queries (GQA).
const (
	chunkDim = 128
	chunkNQ  = 4
	chunkN   = 16
)

// chunkPath is one way of running attention over a chunk of cached rows
// stored in some format: step decodes the chunk's rows (chunkN rows of
// rowBytes bytes) and computes the scores and the weighted sum of rows.
type chunkPath struct {
	name     string
	rowBytes int
	fill     func(src []byte) // random valid content for whole chunks
	step     func(chunk []byte)
}

// chunkPaths returns the paths BenchmarkAttentionChunk compares, sharing
// one set of queries, weights and buffers:
//
//   - f16: F16ToF32 of the 16 rows (256 bytes a row), then ScoresF32 and
//     AccumulateF32 on the float32 rows;
//   - u8, u4, i8: one U8ToF32, U4ToF32 or I8ToF32 call per row with the
//     row's own scale and bias (132, 68 or 130 bytes a row: the codes, and
//     binary16 scale and bias, or scale only for i8). The chunk keeps its
//     rows' codes first, then the rows' binary16 parameters, which one
//     F16ToF32 call decodes (decoding 32 halves one by one with
//     F16ToF32Scalar would cost more than the unpacking);
//   - q80, q40: one Q80ToF32 or Q40ToF32 call for the chunk (4 blocks a
//     row, 136 or 72 bytes), then the same;
//   - perrow-f16: the per-row approach the chunk kernels replace: for each
//     row, DotF16 and then AxpyF16 once per query, on the fp16 row itself;
//   - perrow-u8: per row, U8ToF32 into a row buffer, then DotF32 and AxpyF32
//     once per query.
//
// The softmax between scores and weighted sum is left out: the weights are
// fixed random values.
func chunkPaths(r *rand.Rand) []chunkPath {
	const dim, nq, n = chunkDim, chunkNQ, chunkN
	q := randF32(r, nq*dim)
	w := randF32(r, nq*n)
	buf := make([]float32, n*dim)
	dst := make([]float32, nq*n)
	acc := make([]float32, nq*dim)
	attend := func() {
		ScoresF32(dst, n, q, nq, dim, buf, n)
		AccumulateF32(acc, w, n, nq, dim, buf, n)
	}
	return []chunkPath{
		{"f16", 2 * dim, fillF16, func(c []byte) {
			F16ToF32(buf, bytesAsU16(c))
			attend()
		}},
		{"u8", dim + 4, fillCodesMeta(dim, 2), func(c []byte) {
			var m [2 * n]float32
			F16ToF32(m[:], bytesAsU16(c[n*dim:]))
			for j := 0; j < n; j++ {
				U8ToF32(buf[j*dim:(j+1)*dim], c[j*dim:(j+1)*dim], m[2*j], m[2*j+1])
			}
			attend()
		}},
		{"u4", dim/2 + 4, fillCodesMeta(dim/2, 2), func(c []byte) {
			var m [2 * n]float32
			F16ToF32(m[:], bytesAsU16(c[n*dim/2:]))
			for j := 0; j < n; j++ {
				U4ToF32(buf[j*dim:(j+1)*dim], c[j*dim/2:(j+1)*dim/2], m[2*j], m[2*j+1])
			}
			attend()
		}},
		{"i8", dim + 2, fillCodesMeta(dim, 1), func(c []byte) {
			var m [n]float32
			F16ToF32(m[:], bytesAsU16(c[n*dim:]))
			for j := 0; j < n; j++ {
				I8ToF32(buf[j*dim:(j+1)*dim], c[j*dim:(j+1)*dim], m[j])
			}
			attend()
		}},
		{"q80", dim / 32 * q80BlockBytes, fillBlocks(q80BlockBytes), func(c []byte) {
			Q80ToF32(buf, c)
			attend()
		}},
		{"q40", dim / 32 * q40BlockBytes, fillBlocks(q40BlockBytes), func(c []byte) {
			Q40ToF32(buf, c)
			attend()
		}},
		{"perrow-f16", 2 * dim, fillF16, func(c []byte) {
			h := bytesAsU16(c)
			for j := 0; j < n; j++ {
				row := h[j*dim : (j+1)*dim]
				for i := 0; i < nq; i++ {
					dst[i*n+j] = DotF16(row, q[i*dim:(i+1)*dim])
				}
				for i := 0; i < nq; i++ {
					AxpyF16(acc[i*dim:(i+1)*dim], w[i*n+j], row)
				}
			}
		}},
		{"perrow-u8", dim + 4, fillCodesMeta(dim, 2), func(c []byte) {
			var m [2 * n]float32
			F16ToF32(m[:], bytesAsU16(c[n*dim:]))
			u := buf[:dim]
			for j := 0; j < n; j++ {
				U8ToF32(u, c[j*dim:(j+1)*dim], m[2*j], m[2*j+1])
				for i := 0; i < nq; i++ {
					dst[i*n+j] = DotF32(u, q[i*dim:(i+1)*dim])
				}
				for i := 0; i < nq; i++ {
					AxpyF32(acc[i*dim:(i+1)*dim], w[i*n+j], u)
				}
			}
		}},
	}
}

// BenchmarkAttentionChunk measures one decode-attention step over a chunk of
// cached rows for each path of chunkPaths. "hot" reuses one chunk (its
// source bytes stay in L1); "stream" walks through 64 MiB of source, as a
// long context does. Metrics: ns/row, and srcGB/s, the source bytes
// decoded per second (MB/s counts the same bytes).
func BenchmarkAttentionChunk(b *testing.B) {
	const streamSize = 64 << 20
	for _, p := range chunkPaths(newRand(b)) {
		chunkBytes := chunkN * p.rowBytes
		for _, mode := range []string{"hot", "stream"} {
			chunks := 1
			if mode == "stream" {
				chunks = streamSize / chunkBytes
			}
			var src []byte
			runImpls(b, p.name+"/"+mode, func(b *testing.B) {
				if src == nil {
					src = make([]byte, chunks*chunkBytes)
					p.fill(src)
				}
				b.SetBytes(int64(chunkBytes))
				i := 0
				for b.Loop() {
					p.step(src[i*chunkBytes : (i+1)*chunkBytes])
					if i++; i == chunks {
						i = 0
					}
				}
				sec := b.Elapsed().Seconds()
				b.ReportMetric(sec*1e9/float64(b.N*chunkN), "ns/row")
				b.ReportMetric(float64(b.N*chunkBytes)/sec/1e9, "srcGB/s")
			})
		}
	}
}

// bytesAsU16 returns the little-endian uint16 values of b (len(b) even),
// sharing its memory.
func bytesAsU16(b []byte) []uint16 {
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/2)
}

// fillF16 fills b with random finite binary16 values.
func fillF16(b []byte) {
	r := rand.New(rand.NewPCG(2, 3))
	for i := 0; i+1 < len(b); i += 2 {
		binary.LittleEndian.PutUint16(b[i:], F32ToF16Scalar(float32(r.NormFloat64())))
	}
}

// fillCodesMeta returns a filler for chunks of chunkN rows of codeBytes
// random code bytes each, followed by params binary16 parameters per row
// (a scale of 0.01, then a bias of -1).
func fillCodesMeta(codeBytes, params int) func(b []byte) {
	return func(b []byte) {
		r := rand.New(rand.NewPCG(2, 3))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		chunk := chunkN * (codeBytes + 2*params)
		for o := 0; o+chunk <= len(b); o += chunk {
			m := b[o+chunkN*codeBytes : o+chunk]
			for j := 0; j < chunkN*params; j++ {
				v := float32(0.01)
				if j%params == 1 {
					v = -1
				}
				binary.LittleEndian.PutUint16(m[2*j:], F32ToF16Scalar(v))
			}
		}
	}
}

// fillBlocks returns a filler for GGML blocks of blockBytes bytes: random
// codes, and binary16 d (and m) of moderate size in front.
func fillBlocks(blockBytes int) func(b []byte) {
	return func(b []byte) {
		r := rand.New(rand.NewPCG(2, 3))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		for o := 0; o+blockBytes <= len(b); o += blockBytes {
			binary.LittleEndian.PutUint16(b[o:], F32ToF16Scalar(0.01))
			if blockBytes == q41BlockBytes {
				binary.LittleEndian.PutUint16(b[o+2:], F32ToF16Scalar(-0.1))
			}
		}
	}
}

// softmaxSizes are the row lengths of the softmax benchmarks: a short
// chunk, a head-dim-sized row, and 4K and 32K-token contexts.
var softmaxSizes = []int{16, 128, 4096, 32768}

// BenchmarkExpShiftSum runs ExpShiftSum (asm, generic) and, as the
// baseline, the same loop with math.Exp in float64 ("mathexp"). Each call
// rewrites x in place with exp(-x), which maps [0, 1] into itself, so the
// arguments stay in the softmax range call after call without a copy (the
// kernels' time does not depend on the values in that range). ns/elem is
// the time per element.
func BenchmarkExpShiftSum(b *testing.B) {
	r := newRand(b)
	for _, n := range softmaxSizes {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.Float64())
		}
		perElem := func(b *testing.B) {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/elem")
		}
		runImpls(b, fmt.Sprintf("%d", n), func(b *testing.B) {
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				benchSink += float32(ExpShiftSum(x, -1, 0))
			}
			perElem(b)
		})
		b.Run(fmt.Sprintf("%d/mathexp", n), func(b *testing.B) {
			b.SetBytes(int64(4 * n))
			b.ReportAllocs()
			for b.Loop() {
				var s float64
				for i, v := range x {
					e := float32(math.Exp(float64(-v)))
					x[i] = e
					s += float64(e)
				}
				benchSink += float32(s)
			}
			perElem(b)
		})
	}
}

// BenchmarkMaxF32 runs MaxF32 (asm, generic) on random scores.
func BenchmarkMaxF32(b *testing.B) {
	r := newRand(b)
	for _, n := range softmaxSizes {
		x := randF32(r, n)
		runImpls(b, fmt.Sprintf("%d", n), func(b *testing.B) {
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				benchSink += MaxF32(x)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/elem")
		})
	}
}

// BenchmarkCodeKernels measures the packed-code attention kernels on one
// page of chunkN rows of head dim chunkDim for chunkNQ queries, codes in
// cache: compare ns/row with BenchmarkAttentionKernels' F32 kernels on the
// same shape, which run on rows already decoded.
func BenchmarkCodeKernels(b *testing.B) {
	r := newRand(b)
	const dim, nq, n = chunkDim, chunkNQ, chunkN
	q, w, bias := randF32(r, nq*dim), randF32(r, nq*n), randF32(r, nq)
	dst, acc := make([]float32, nq*n), make([]float32, nq*dim)
	codes := make([]byte, n*dim)
	for i := range codes {
		codes[i] = byte(r.Uint32())
	}
	for _, k := range []struct {
		name       string
		bits       int
		scores     func(dst []float32, ldd int, q []float32, ldq, nq, cols int, codes []byte, ldc, n int)
		accumulate func(acc []float32, lda int, bias, w []float32, ldw, nq, cols int, codes []byte, ldc, n int)
	}{
		{"U8", 8, ScoresU8, AccumulateU8},
		{"U4", 4, ScoresU4, AccumulateU4},
	} {
		ldc := dim * k.bits / 8
		runImpls(b, "Scores"+k.name, func(b *testing.B) {
			for b.Loop() {
				k.scores(dst, n, q, dim, nq, dim, codes, ldc, n)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
		})
		runImpls(b, "Accumulate"+k.name, func(b *testing.B) {
			for b.Loop() {
				k.accumulate(acc, dim, bias, w, n, nq, dim, codes, ldc, n)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
		})
	}
}
