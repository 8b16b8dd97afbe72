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
	checkLegacyTiles(t, "", []int{1, 2, 3, 4, 5, 6, 7, 8, 13, 33, 64}, q8gemmCase, q8gemmCall)
}

// checkLegacyTiles runs call's product (MatMulQ80Q80 or a widening kin)
// over the cases mk makes, its subtests named from prefix, on every kernel
// set: all 69 rows of 256 blocks for 5 token rows against the twin, then
// for each number of token rows in nts and rows of 1 to 65 blocks, row
// ranges of 53 rows with odd ends around the panels, against the one-row
// dot and the twin, nothing else of dst written.
func checkLegacyTiles(t *testing.T, prefix string, nts []int, mk func(r *rand.Rand, nt, rows, nb int) (q, w []byte), call func(nt, nb int, q, w []byte) tileCall) {
	const rows = 53
	// cols 8192: VNNI panels of 16 rows and 147456 bytes, three a chunk,
	// so that 69 rows take two chunks and a rest of 5 (AVX2: 8 rows and
	// 73728 bytes, seven a chunk: two chunks and a rest of 5).
	t.Run(prefix+"chunks", func(t *testing.T) {
		for _, set := range q8lSets(t) {
			restore := set.force()
			r := newRand(t)
			const nt, rows, nb = 5, 69, 256
			q, w := mk(r, nt, rows, nb)
			c := call(nt, nb, q, w)
			checkTileTwin(t, c, rows, set.name+": "+c.name)
			restore()
		}
	})
	for _, set := range q8lSets(t) {
		t.Run(prefix+set.name, func(t *testing.T) {
			defer set.force()()
			r := newRand(t)
			for _, cols := range []int{32, 64, 96, 2048, 2080} {
				nb := cols / 32
				for ni, nt := range nts {
					q, w := mk(r, nt, rows, nb)
					off := ni % len(offsets)
					q, w = offsetCopy(q, offsets[off]), offsetCopy(w, offsets[(off+2)%len(offsets)])
					for _, rr := range [][2]int{{0, rows}, {3, 37}, {1, 17}, {16, 32}, {5, 6}, {7, 52}} {
						checkTileRows(t, call(nt, nb, q, w), off, rows+3, rr[0], rr[1])
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

// widenCases are the weight types MatMulQ40Q80 and its kin take: the
// function, its one-row dot, the type's block bytes and dequantizer.
var widenCases = []struct {
	name, typ string
	t         qdotType
	mm        func(dst []float32, ldd int, q []byte, nt, cols int, w []byte, r0, r1 int)
	dot       func(w, q []byte) float32
	toF32     func(dst []float32, src []byte)
}{
	{"MatMulQ40Q80", "q4_0", qdQ40, MatMulQ40Q80, DotQ40Q80, Q40ToF32},
	{"MatMulQ50Q80", "q5_0", qdQ50, MatMulQ50Q80, DotQ50Q80, Q50ToF32},
	{"MatMulIQ4NLQ80", "iq4_nl", qdIQ4NL, MatMulIQ4NLQ80, DotIQ4NLQ80, IQ4NLToF32},
}

// widenBlocks returns nb random blocks of type t with extremes: every
// seventh from the second with all bits of the codes clear, then all set,
// then a zero scale.
func widenBlocks(r *rand.Rand, t qdotType, nb int) []byte {
	bb := qdotBlockBytes[t]
	w := randKBlocks(r, nb, bb, 0)
	for i := 0; i < nb; i++ {
		blk := w[i*bb : (i+1)*bb]
		switch i % 7 {
		case 1:
			clear(blk[2:])
		case 2:
			for j := 2; j < bb; j++ {
				blk[j] = 0xff
			}
		case 3:
			binary.LittleEndian.PutUint16(blk, 0)
		}
	}
	return w
}

// TestMatMulWidened is TestMatMulQ80Q80 for MatMulQ40Q80, MatMulQ50Q80
// and MatMulIQ4NLQ80: every output the one-row dot's bits and its twin's,
// on every kernel set, over chunks of panels, token counts around the
// tiles and row ranges around the panels; bad shapes panic naming the
// function.
func TestMatMulWidened(t *testing.T) {
	for _, wc := range widenCases {
		mk := func(r *rand.Rand, nt, rows, nb int) (q, w []byte) {
			q = make([]byte, nt*nb*Q80BlockBytes)
			QuantizeQ80(q, extremeActivations(r, nt*nb, 32))
			return q, widenBlocks(r, wc.t, rows*nb)
		}
		call := func(nt, nb int, q, w []byte) tileCall {
			return legacyTileCall(wc.name, "its one-row dot", wc.t, wc.mm, wc.dot, nt, nb, q, w)
		}
		checkLegacyTiles(t, wc.name+"/", []int{1, 2, 3, 4, 5, 6, 7, 8, 13, 33}, mk, call)
		bb := qdotBlockBytes[wc.t]
		for name, bad := range map[string]func(){
			"cols not blocks": func() { wc.mm(make([]float32, 8), 4, make([]byte, 68), 1, 48, make([]byte, 4*2*bb), 0, 4) },
			"short w":         func() { wc.mm(make([]float32, 8), 4, make([]byte, 2*68), 2, 64, make([]byte, 4*2*bb-1), 0, 4) },
			"short q":         func() { wc.mm(make([]float32, 8), 4, make([]byte, 2*68-1), 2, 64, make([]byte, 4*2*bb), 0, 4) },
		} {
			func() {
				defer func() {
					if msg, _ := recover().(string); !strings.Contains(msg, wc.name) {
						t.Errorf("%s: panic %q, want one naming %s", name, msg, wc.name)
					}
				}()
				bad()
			}()
		}
	}
}

// TestWidenQ80 checks that every block widened to Q8_0 keeps its scale's
// bits and dequantizes to the same values, code by code the values its
// dots take (qdotValues), for each type WidenQ80 takes; and that it
// refuses another type.
func TestWidenQ80(t *testing.T) {
	r := newRand(t)
	const nb = 67
	for _, wc := range widenCases {
		bb := qdotBlockBytes[wc.t]
		src := widenBlocks(r, wc.t, nb)
		dst := make([]byte, nb*Q80BlockBytes)
		WidenQ80(wc.typ, dst, src)
		for b := 0; b < nb; b++ {
			s, d := src[b*bb:(b+1)*bb], dst[b*Q80BlockBytes:]
			if d[0] != s[0] || d[1] != s[1] {
				t.Fatalf("%s block %d: scale %#x%02x, want %#x%02x", wc.typ, b, d[1], d[0], s[1], s[0])
			}
			var v [32]int8
			qdotValues(wc.t, s, &v)
			for j := 0; j < 32; j++ {
				if got := int8(d[2+j]); got != v[j] {
					t.Fatalf("%s block %d code %d = %d, want %d", wc.typ, b, j, got, v[j])
				}
			}
		}
		a, c := make([]float32, nb*32), make([]float32, nb*32)
		wc.toF32(a, src)
		Q80ToF32(c, dst)
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(c[i]) {
				t.Fatalf("%s value %d: %v, %v from its Q8_0", wc.typ, i, a[i], c[i])
			}
		}
	}
	defer func() {
		if msg, _ := recover().(string); !strings.Contains(msg, "WidenQ80") {
			t.Errorf("WidenQ80 of q4_1: panic %q, want one naming WidenQ80", msg)
		}
	}()
	WidenQ80("q4_1", make([]byte, 34), make([]byte, 20))
}
