package simd

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// q8gemmCase returns cols/32-block Q8_0 weights of rows rows and nt
// quantized token rows, with extremes: weight values −128 and 127 against
// activation codes ±127, an all-zero activation block (scale 0, codes 0),
// zero weight scales, and random blocks elsewhere.
func q8gemmCase(r *rand.Rand, nt, rows, nb int) (q, w []byte) {
	w = randKBlocks(r, rows*nb, Q80BlockBytes, 0)
	for i := 0; i < rows*nb; i++ {
		blk := w[i*Q80BlockBytes : (i+1)*Q80BlockBytes]
		switch i % 7 {
		case 1: // −128 throughout
			for j := 2; j < Q80BlockBytes; j++ {
				blk[j] = 0x80
			}
		case 2: // 127 throughout
			for j := 2; j < Q80BlockBytes; j++ {
				blk[j] = 0x7f
			}
		case 3: // a zero scale
			binary.LittleEndian.PutUint16(blk, 0)
		}
	}
	x := extremeActivations(r, nt*nb, 32)
	q = make([]byte, nt*nb*Q80BlockBytes)
	QuantizeQ80(q, x)
	return q, w
}

// extremeActivations returns blocks blocks of size random values, every
// fifth block from the second on quantizing to codes ±127 alternating,
// then 127 throughout, −127 throughout, and an all-zero block.
func extremeActivations(r *rand.Rand, blocks, size int) []float32 {
	x := randF32(r, blocks*size)
	for b := 0; b < blocks; b++ {
		xb := x[size*b : size*(b+1)]
		switch b % 5 {
		case 1: // codes ±127
			for j := range xb {
				xb[j] = float32(1 - 2*(j&1))
			}
		case 2: // codes 127
			for j := range xb {
				xb[j] = 3
			}
		case 3: // codes −127
			for j := range xb {
				xb[j] = -0.5
			}
		case 4: // a zero block
			clear(xb)
		}
	}
	return x
}

// TestMatMulQ80Q80 checks MatMulQ80Q80 against DotQ80Q80 and its Go twin
// pair by pair, bit for bit, on every kernel set (and the avx512 set
// without VNNI), for token counts around the tiles of four, row ranges
// with odd ends around the panels of 16, and ldd past r1; and that no
// other dst entry is written.
func TestMatMulQ80Q80(t *testing.T) {
	const rows = 53
	// cols 8192: VNNI panels of 16 rows and 147456 bytes, three a chunk,
	// so that 69 rows take two chunks and a rest of 5 (AVX2: 8 rows and
	// 73728 bytes, seven a chunk: two chunks and a rest of 5).
	t.Run("chunks", func(t *testing.T) {
		for _, set := range q8lSets(t) {
			restore := set.force()
			r := newRand(t)
			const nt, rows, nb = 5, 69, 256
			q, w := q8gemmCase(r, nt, rows, nb)
			checkTileTwin(t, q8gemmCall(nt, nb, q, w), rows, set.name+": MatMulQ80Q80")
			restore()
		}
	})
	for _, set := range q8lSets(t) {
		t.Run(set.name, func(t *testing.T) {
			defer set.force()()
			r := newRand(t)
			for _, cols := range []int{32, 64, 96, 2048, 2080} {
				nb := cols / 32
				for ni, nt := range []int{1, 2, 3, 4, 5, 6, 7, 8, 13, 33, 64} {
					q, w := q8gemmCase(r, nt, rows, nb)
					off := ni % len(offsets)
					q, w = offsetCopy(q, offsets[off]), offsetCopy(w, offsets[(off+2)%len(offsets)])
					for _, rr := range [][2]int{{0, rows}, {3, 37}, {1, 17}, {16, 32}, {5, 6}, {7, 52}} {
						checkTileRows(t, q8gemmCall(nt, nb, q, w), off, rows+3, rr[0], rr[1])
					}
				}
			}
		})
	}
}

// TestMatMulQ80Q80Panics checks that bad shapes panic with the function's
// name.
func TestMatMulQ80Q80Panics(t *testing.T) {
	rb := 2 * Q80BlockBytes
	for name, bad := range map[string]func(){
		"cols not blocks": func() { MatMulQ80Q80(make([]float32, 8), 4, make([]byte, rb), 1, 48, make([]byte, 4*rb), 0, 4) },
		"short q":         func() { MatMulQ80Q80(make([]float32, 8), 4, make([]byte, rb+33), 2, 64, make([]byte, 4*rb), 0, 4) },
		"short w":         func() { MatMulQ80Q80(make([]float32, 8), 4, make([]byte, 2*rb), 2, 64, make([]byte, 4*rb-1), 0, 4) },
		"short dst":       func() { MatMulQ80Q80(make([]float32, 7), 4, make([]byte, 2*rb), 2, 64, make([]byte, 4*rb), 0, 4) },
		"ldd < r1":        func() { MatMulQ80Q80(make([]float32, 8), 3, make([]byte, 2*rb), 2, 64, make([]byte, 4*rb), 0, 4) },
		"bad rows":        func() { MatMulQ80Q80(make([]float32, 8), 4, make([]byte, 2*rb), 2, 64, make([]byte, 4*rb), 3, 2) },
	} {
		func() {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, "MatMulQ80Q80") {
					t.Errorf("%s: panic %q, want one naming MatMulQ80Q80", name, msg)
				}
			}()
			bad()
		}()
	}
}

// q40gemmCase is q8gemmCase for Q4_0 weights: random blocks, every
// seventh from the second with codes 0 (−8) throughout, then 15 (7)
// throughout, then a zero scale.
func q40gemmCase(r *rand.Rand, nt, rows, nb int) (q, w []byte) {
	w = randKBlocks(r, rows*nb, q40BlockBytes, 0)
	for i := 0; i < rows*nb; i++ {
		blk := w[i*q40BlockBytes : (i+1)*q40BlockBytes]
		switch i % 7 {
		case 1:
			clear(blk[2:])
		case 2:
			for j := 2; j < q40BlockBytes; j++ {
				blk[j] = 0xff
			}
		case 3:
			binary.LittleEndian.PutUint16(blk, 0)
		}
	}
	x := extremeActivations(r, nt*nb, 32)
	q = make([]byte, nt*nb*Q80BlockBytes)
	QuantizeQ80(q, x)
	return q, w
}

// TestMatMulQ40Q80 is TestMatMulQ80Q80 for MatMulQ40Q80: every output
// DotQ40Q80's bits and its twin's, on every kernel set, over chunks of
// panels, token counts around the tiles and row ranges around the panels.
func TestMatMulQ40Q80(t *testing.T) {
	const rows = 53
	t.Run("chunks", func(t *testing.T) {
		for _, set := range q8lSets(t) {
			restore := set.force()
			r := newRand(t)
			const nt, rows, nb = 5, 69, 256
			q, w := q40gemmCase(r, nt, rows, nb)
			checkTileTwin(t, q40gemmCall(nt, nb, q, w), rows, set.name+": MatMulQ40Q80")
			restore()
		}
	})
	for _, set := range q8lSets(t) {
		t.Run(set.name, func(t *testing.T) {
			defer set.force()()
			r := newRand(t)
			for _, cols := range []int{32, 64, 96, 2048, 2080} {
				nb := cols / 32
				for ni, nt := range []int{1, 2, 3, 4, 5, 6, 7, 8, 13, 33} {
					q, w := q40gemmCase(r, nt, rows, nb)
					off := ni % len(offsets)
					q, w = offsetCopy(q, offsets[off]), offsetCopy(w, offsets[(off+2)%len(offsets)])
					for _, rr := range [][2]int{{0, rows}, {3, 37}, {1, 17}, {16, 32}, {5, 6}, {7, 52}} {
						checkTileRows(t, q40gemmCall(nt, nb, q, w), off, rows+3, rr[0], rr[1])
					}
				}
			}
		})
	}
	for name, bad := range map[string]func(){
		"cols not blocks": func() { MatMulQ40Q80(make([]float32, 8), 4, make([]byte, 68), 1, 48, make([]byte, 4*36), 0, 4) },
		"short w":         func() { MatMulQ40Q80(make([]float32, 8), 4, make([]byte, 2*68), 2, 64, make([]byte, 4*36-1), 0, 4) },
		"short q":         func() { MatMulQ40Q80(make([]float32, 8), 4, make([]byte, 2*68-1), 2, 64, make([]byte, 4*36), 0, 4) },
	} {
		func() {
			defer func() {
				if msg, _ := recover().(string); !strings.Contains(msg, "MatMulQ40Q80") {
					t.Errorf("%s: panic %q, want one naming MatMulQ40Q80", name, msg)
				}
			}()
			bad()
		}()
	}
}

// TestQ40ToQ80 checks that every Q4_0 block widened to Q8_0 keeps its
// scale's bits and dequantizes to the same values, code by code as ggml's
// block_q4_0 orders them.
func TestQ40ToQ80(t *testing.T) {
	r := newRand(t)
	const nb = 67
	src := randKBlocks(r, nb, q40BlockBytes, 0)
	clear(src[2+q40BlockBytes : 2*q40BlockBytes]) // codes 0 throughout
	for j := 2*q40BlockBytes + 2; j < 3*q40BlockBytes; j++ {
		src[j] = 0xff // codes 15 throughout
	}
	dst := make([]byte, nb*Q80BlockBytes)
	Q40ToQ80(dst, src)
	for b := 0; b < nb; b++ {
		s, d := src[b*q40BlockBytes:], dst[b*Q80BlockBytes:]
		if d[0] != s[0] || d[1] != s[1] {
			t.Fatalf("block %d: scale %#x%02x, want %#x%02x", b, d[1], d[0], s[1], s[0])
		}
		for j := 0; j < 32; j++ {
			n := int(s[2+j%16] >> (4 * (j / 16)) & 0xf)
			if got := int(int8(d[2+j])); got != n-8 {
				t.Fatalf("block %d code %d = %d, want %d", b, j, got, n-8)
			}
		}
	}
	a, c := make([]float32, nb*32), make([]float32, nb*32)
	Q40ToF32(a, src)
	Q80ToF32(c, dst)
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(c[i]) {
			t.Fatalf("value %d: %v from Q4_0, %v from its Q8_0", i, a[i], c[i])
		}
	}
}
