package simd

import (
	"syscall"
	"testing"
	"unsafe"
)

// TestDotNoOverread places the weights and the vector of the dot products
// (and the source of the F16/BF16 widening)
// each at the very end of a readable page, followed by a page that faults
// when read, and runs every kernel set over every length that fits up to
// 300 (whole blocks for Q8_0): a kernel that read past either slice (a tail
// loaded whole instead of through a mask) would crash the test.
func TestDotNoOverread(t *testing.T) {
	page := syscall.Getpagesize()
	guarded := func() []byte {
		mem, err := syscall.Mmap(-1, 0, 2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			t.Skipf("mmap: %v", err)
		}
		t.Cleanup(func() { syscall.Munmap(mem) })
		if err := syscall.Mprotect(mem[page:], syscall.PROT_NONE); err != nil {
			t.Skipf("mprotect: %v", err)
		}
		return mem[:page]
	}
	wmem, xmem := guarded(), guarded()
	r := newRand(t)
	// Small random values: any bits are fine for a crash test, but keep
	// the sums finite.
	for i := range wmem {
		wmem[i] = byte(r.IntN(256)) & 0x3b
	}
	x := unsafe.Slice((*float32)(unsafe.Pointer(&xmem[0])), page/4)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	u16 := unsafe.Slice((*uint16)(unsafe.Pointer(&wmem[0])), page/2)
	for _, set := range kernelSets(t) {
		t.Run(set.name, func(t *testing.T) {
			defer set.force()()
			dst := make([]float32, 300)
			for n := 0; n <= 300; n++ {
				xs := x[len(x)-n:]
				DotF16(u16[len(u16)-n:], xs)
				DotBF16(u16[len(u16)-n:], xs)
				F16ToF32(dst[:n], u16[len(u16)-n:])
				BF16ToF32(dst[:n], u16[len(u16)-n:])
				DotF32(x[len(x)-n:], x[len(x)-n:])
				if n%q80BlockSize == 0 {
					nb := n / q80BlockSize
					DotQ80(wmem[len(wmem)-nb*q80BlockBytes:], xs)
				}
			}
		})
	}
}
