package simd

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// Tolerances. Vector kernels sum in a different order from the generic twins
// and use fused multiply-adds, so results agree only up to rounding:
//
//   - dot products and matrix products: |got-want| <= dotTol * Σ|a_i*b_i|,
//     i.e. a relative error of 1e-5 against the magnitude of the terms;
//   - axpy: |got-want| <= axpyTol * (|y_i| + |alpha*x_i|) per element;
//   - conversions and scaling: bit-exact.
const (
	dotTol  = 1e-5
	axpyTol = 1e-6
)

// sentinel fills guard regions; its bits are checked unchanged afterwards.
var sentinel = math.Float32frombits(0x7fa5_a5a5) // a NaN no kernel produces

func newRand(t testing.TB) *rand.Rand {
	t.Helper()
	return rand.New(rand.NewPCG(1, uint64(len(t.Name()))))
}

// offsets are the slice start indices the tests try, to misalign the data.
var offsets = []int{0, 1, 3, 5, 7}

func randF32(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

// randF16 returns finite halves of moderate magnitude.
func randF16(r *rand.Rand, n int) []uint16 {
	s := make([]uint16, n)
	for i := range s {
		s[i] = F32ToF16Scalar(float32(r.NormFloat64()))
	}
	return s
}

func randBF16(r *rand.Rand, n int) []uint16 {
	s := make([]uint16, n)
	for i := range s {
		s[i] = F32ToBF16Scalar(float32(r.NormFloat64()))
	}
	return s
}

// randQ80 returns nb Q8_0 blocks with small positive or negative scales and
// codes over the whole int8 range.
func randQ80(r *rand.Rand, nb int) []byte {
	w := make([]byte, nb*q80BlockBytes)
	for b := 0; b < nb; b++ {
		blk := w[b*q80BlockBytes:]
		binary.LittleEndian.PutUint16(blk, F32ToF16Scalar(float32(r.NormFloat64()/64)))
		for i := 0; i < q80BlockSize; i++ {
			blk[2+i] = byte(r.IntN(256))
		}
	}
	return w
}

// q80Value is the dequantized value i of the Q8_0 row w.
func q80Value(w []byte, i int) float64 {
	blk := w[i/q80BlockSize*q80BlockBytes:]
	d := F16ToF32Scalar(binary.LittleEndian.Uint16(blk))
	return float64(d) * float64(int8(blk[2+i%q80BlockSize]))
}

// offsetCopy returns a copy of s that starts at index off of a larger
// backing array, so that kernels see misaligned data.
func offsetCopy[T any](s []T, off int) []T {
	b := make([]T, off+len(s)+8)
	return append(b[:off], s...)[off : off+len(s)]
}

// guarded returns a slice of n values starting at index off, with sentinel
// guard regions of guard values before and after it in the backing array;
// check reports any guard value that changed.
func guardedF32(off, n, guard int) (s []float32, check func(t *testing.T)) {
	b := make([]float32, off+n+guard)
	for i := range b {
		b[i] = sentinel
	}
	s = b[off : off+n]
	return s, func(t *testing.T) {
		t.Helper()
		for i, v := range b {
			if (i < off || i >= off+n) && math.Float32bits(v) != math.Float32bits(sentinel) {
				t.Errorf("guard value at %d (slice [%d,%d)) overwritten: %v", i, off, off+n, v)
				return
			}
		}
	}
}

func guardedU16(off, n, guard int) (s []uint16, check func(t *testing.T)) {
	const sent = 0xa5a5
	b := make([]uint16, off+n+guard)
	for i := range b {
		b[i] = sent
	}
	s = b[off : off+n]
	return s, func(t *testing.T) {
		t.Helper()
		for i, v := range b {
			if (i < off || i >= off+n) && v != sent {
				t.Errorf("guard value at %d (slice [%d,%d)) overwritten: %#04x", i, off, off+n, v)
				return
			}
		}
	}
}

// within reports whether got is within dotTol*mag of want.
func within(got, want, mag float64) bool {
	return math.Abs(got-want) <= dotTol*mag+1e-30
}

// sizes returns the vector lengths the kernel tests try: every length 0..40,
// then random lengths up to 300.
func sizes(r *rand.Rand) []int {
	var s []int
	for n := 0; n <= 40; n++ {
		s = append(s, n)
	}
	for i := 0; i < 24; i++ {
		s = append(s, 41+r.IntN(260))
	}
	return append(s, 256, 300)
}

// kernelSet is one kernel selection the tests run: force selects it and
// returns the function that restores the previous selection.
type kernelSet struct {
	name  string
	force func() (restore func())
}

// kernelSets returns every kernel set this build and CPU run, best first:
// avx512, avx512-zen4 and avx512-zen5 (one of them the default where the
// CPU has AVX-512), avx2 and generic. It
// logs the sets the CPU lacks, which are not tested.
func kernelSets(t testing.TB) []kernelSet {
	t.Helper()
	var sets []kernelSet
	switch {
	case hasAVX512:
		// Every AVX-512 choice on every CPU that runs them: the Zen 4
		// and Zen 5 ones (see Kernels) and the one every other CPU takes.
		sets = append(sets,
			kernelSet{"avx512", ForceAVX512},
			kernelSet{"avx512-zen4", ForceZen4},
			kernelSet{"avx512-zen5", ForceZen5})
	case asmBuilt:
		t.Logf("skipping the avx512 kernels: this CPU lacks them (%s)", cpuFeatures512())
	}
	switch {
	case hasAVX2:
		sets = append(sets, kernelSet{"avx2", ForceAVX2})
	case asmBuilt:
		t.Logf("skipping the avx2 kernels: this CPU lacks them (%s)", cpuFeatures())
	}
	return append(sets, kernelSet{"generic", ForceGeneric})
}

// forEachSet runs f as a subtest for every kernel set of kernelSets, with
// that set selected.
func forEachSet(t *testing.T, f func(t *testing.T)) {
	for _, set := range kernelSets(t) {
		t.Run(set.name, func(t *testing.T) {
			defer set.force()()
			f(t)
		})
	}
}

// generic runs f with the pure-Go kernels selected.
func generic(f func()) {
	restore := ForceGeneric()
	defer restore()
	f()
}

// panicCase is a call that must panic.
type panicCase struct {
	name string
	f    func()
}

// checkPanics runs each case as a subtest and fails the ones that return
// normally; what names the bad input in the message ("shapes", "lengths").
func checkPanics(t *testing.T, what string, tests []panicCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("%s with bad %s did not panic", tt.name, what)
				}
			}()
			tt.f()
		})
	}
}
