package simd

import (
	"math"
	"syscall"
	"testing"
)

// TestLUTNoOverread places the packed codes at the very end of a readable
// page, followed by a page that faults when read, and runs the table
// lookups over every whole-unit length that fits: a kernel that read past
// len(src) (the 3-bit kernel's 4-byte loads, for one) would crash the test.
func TestLUTNoOverread(t *testing.T) {
	page := syscall.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Skipf("mmap: %v", err)
	}
	defer syscall.Munmap(mem)
	if err := syscall.Mprotect(mem[page:], syscall.PROT_NONE); err != nil {
		t.Skipf("mprotect: %v", err)
	}
	r := newRand(t)
	for i := range mem[:page] {
		mem[i] = byte(r.IntN(256))
	}
	table := randTable(r, 16)
	for _, c := range lutCases {
		for units := 0; units <= 40; units++ {
			n := units * c.unit
			src := mem[page-units*c.unitBytes : page]
			dst, twin := make([]float32, n), make([]float32, n)
			c.run(dst, src, table)
			c.twin(twin, src, table)
			for i := range dst {
				if math.Float32bits(dst[i]) != math.Float32bits(twin[i]) {
					t.Fatalf("%s(n=%d): dst[%d] = %#08x, generic %#08x", c.name, n, i, math.Float32bits(dst[i]), math.Float32bits(twin[i]))
				}
			}
		}
	}
}
