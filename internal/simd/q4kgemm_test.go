package simd

import (
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"
)

// kgemmKind is one weight type of the k-quant tile GEMMs.
type kgemmKind struct {
	name       string
	blockBytes int
	matMul     func(dst []float32, ldd int, q []byte, nt, cols int, w []byte, r0, r1 int)
	dot        func(w, q []byte) float32
	twin       func(w, q []byte, nb int) float32
	weights    func(r *rand.Rand, n int) []byte
}

var kgemmKinds = []kgemmKind{
	{"MatMulQ4KQ8K", q4KBlockBytes, MatMulQ4KQ8K, DotQ4KQ8K, dotQ4KQ8KGeneric, q4kgemmWeights},
	{"MatMulQ5KQ8K", q5KBlockBytes, MatMulQ5KQ8K, DotQ5KQ8K, dotQ5KQ8KGeneric, q5kgemmWeights},
	{"MatMulQ6KQ8K", q6KBlockBytes, MatMulQ6KQ8K, DotQ6KQ8K, dotQ6KQ8KGeneric, q6kgemmWeights},
}

// q6kgemmWeights returns n random q6_K super-blocks with extremes: codes
// 63 with scales 127, codes 0 (−32) with scales −128, alternating scales
// ±127, zero d, large d.
func q6kgemmWeights(r *rand.Rand, n int) []byte {
	w := randKBlocks(r, n, q6KBlockBytes, 208)
	for i := 0; i < n; i++ {
		blk := w[i*q6KBlockBytes : (i+1)*q6KBlockBytes]
		switch i % 6 {
		case 1: // codes 63, scales 127
			for j := 0; j < 192; j++ {
				blk[j] = 0xff
			}
			for j := 192; j < 208; j++ {
				blk[j] = 127
			}
		case 2: // codes 0, scales −128
			for j := 0; j < 192; j++ {
				blk[j] = 0
			}
			for j := 192; j < 208; j++ {
				blk[j] = 0x80
			}
		case 3: // scales ±127
			for j := 192; j < 208; j++ {
				blk[j] = byte(int8(127 - 254*(j&1)))
			}
		case 4: // zero d
			binary.LittleEndian.PutUint16(blk[208:], 0)
		case 5: // large d
			binary.LittleEndian.PutUint16(blk[208:], F32ToF16Scalar(-30000))
		}
	}
	return w
}

// q5kgemmWeights returns n random q5_K super-blocks with q4_K's extremes
// (codes 31 with qh all ones, codes 0 with qh all zeros).
func q5kgemmWeights(r *rand.Rand, n int) []byte {
	w := make([]byte, n*q5KBlockBytes)
	w4 := q4kgemmWeights(r, n)
	for i := 0; i < n; i++ {
		blk, b4 := w[i*q5KBlockBytes:(i+1)*q5KBlockBytes], w4[i*q4KBlockBytes:(i+1)*q4KBlockBytes]
		copy(blk[:16], b4[:16])    // d, dmin, scales and mins
		copy(blk[48:], b4[16:])    // the low nibbles
		for j := 16; j < 48; j++ { // the fifth bits
			switch i % 7 {
			case 1:
				blk[j] = 0xff
			case 2:
				blk[j] = 0
			default:
				blk[j] = byte(r.IntN(256))
			}
		}
	}
	return w
}

// q4kgemmWeights returns n random q4_K super-blocks with extremes: codes
// 15 with scales and mins 63, codes 0, zero d or dmin, large d and dmin.
func q4kgemmWeights(r *rand.Rand, n int) []byte {
	w := randKBlocks(r, n, q4KBlockBytes, 0, 2)
	for i := 0; i < n; i++ {
		blk := w[i*q4KBlockBytes : (i+1)*q4KBlockBytes]
		switch i % 7 {
		case 1: // codes 15, scales and mins 63
			for j := 4; j < q4KBlockBytes; j++ {
				blk[j] = 0xff
			}
		case 2: // codes 0
			for j := 16; j < q4KBlockBytes; j++ {
				blk[j] = 0
			}
		case 3: // zero d
			binary.LittleEndian.PutUint16(blk, 0)
		case 4: // zero dmin
			binary.LittleEndian.PutUint16(blk[2:], 0)
		case 5: // large d and dmin
			binary.LittleEndian.PutUint16(blk, F32ToF16Scalar(30000))
			binary.LittleEndian.PutUint16(blk[2:], F32ToF16Scalar(-20000))
		}
	}
	return w
}

// kgemmCase returns nb-super-block weights of k of rows rows and nt Q8_K
// token rows (QuantizeQ8K), the activations with extremes: codes ±127,
// 127 and −127, an all-zero block, and random blocks elsewhere.
func kgemmCase(r *rand.Rand, k kgemmKind, nt, rows, nb int) (q, w []byte) {
	w = k.weights(r, rows*nb)
	x := extremeActivations(r, nt*nb, kBlockSize)
	q = make([]byte, nt*nb*Q8KBlockBytes)
	QuantizeQ8K(q, x)
	return q, w
}

// TestMatMulKQ8K checks MatMulQ4KQ8K, MatMulQ5KQ8K and MatMulQ6KQ8K
// against DotQ4KQ8K (DotQ5KQ8K, DotQ6KQ8K) and its Go twin pair by pair, bit for bit, on every kernel
// set (and the avx512 set without VNNI), for token counts around the
// tiles of four, row ranges with odd ends around the panels of 16, and
// ldd past r1; and that no other dst entry is written.
func TestMatMulKQ8K(t *testing.T) {
	for _, k := range kgemmKinds {
		t.Run(k.name, func(t *testing.T) { testMatMulKQ8K(t, k) })
	}
}

func testMatMulKQ8K(t *testing.T, k kgemmKind) {
	// cols 8192: q4_K panels of 79872 bytes, six a chunk, so that 101 rows
	// take two chunks and a rest of 5 (q5_K: 145408 bytes, three a chunk;
	// q6_K: 157696 bytes, three a chunk).
	t.Run("chunks", func(t *testing.T) {
		forEachQ8KSet(t, func(t *testing.T) {
			r := newRand(t)
			const nt, rows, nb = 5, 101, 32
			q, w := kgemmCase(r, k, nt, rows, nb)
			checkTileTwin(t, kgemmCall(k, nt, nb, q, w), rows, k.name)
		})
	})
	const rows = 53
	forEachQ8KSet(t, func(t *testing.T) {
		r := newRand(t)
		for _, cols := range []int{256, 512, 2048} {
			nb := cols / kBlockSize
			for ni, nt := range []int{1, 2, 3, 4, 5, 6, 7, 8, 13, 33} {
				q, w := kgemmCase(r, k, nt, rows, nb)
				off := ni % len(offsets)
				q, w = offsetCopy(q, offsets[off]), offsetCopy(w, offsets[(off+2)%len(offsets)])
				for _, rr := range [][2]int{{0, rows}, {3, 37}, {1, 17}, {16, 32}, {5, 6}, {7, 52}} {
					checkTileRows(t, kgemmCall(k, nt, nb, q, w), off, rows+3, rr[0], rr[1])
				}
			}
		}
	})
}

// TestMatMulKQ8KPanics checks that bad shapes panic with the function's
// name.
func TestMatMulKQ8KPanics(t *testing.T) {
	for _, k := range kgemmKinds {
		mm := k.matMul
		rb, qb := 2*k.blockBytes, 2*Q8KBlockBytes
		for name, bad := range map[string]func(){
			"cols not blocks": func() { mm(make([]float32, 8), 4, make([]byte, qb), 1, 384, make([]byte, 4*rb), 0, 4) },
			"short q":         func() { mm(make([]float32, 8), 4, make([]byte, 2*qb-1), 2, 512, make([]byte, 4*rb), 0, 4) },
			"short w":         func() { mm(make([]float32, 8), 4, make([]byte, 2*qb), 2, 512, make([]byte, 4*rb-1), 0, 4) },
			"short dst":       func() { mm(make([]float32, 7), 4, make([]byte, 2*qb), 2, 512, make([]byte, 4*rb), 0, 4) },
			"ldd < r1":        func() { mm(make([]float32, 8), 3, make([]byte, 2*qb), 2, 512, make([]byte, 4*rb), 0, 4) },
			"bad rows":        func() { mm(make([]float32, 8), 4, make([]byte, 2*qb), 2, 512, make([]byte, 4*rb), 3, 2) },
		} {
			func() {
				defer func() {
					msg, _ := recover().(string)
					if !strings.Contains(msg, k.name) {
						t.Errorf("%s: panic %q, want one naming %s", name, msg, k.name)
					}
				}()
				bad()
			}()
		}
	}
}
