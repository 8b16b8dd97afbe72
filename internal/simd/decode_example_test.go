package simd_test

import (
	"encoding/binary"
	"fmt"

	"github.com/kvqlabs/kvq/internal/simd"
)

func ExampleE4M3ToF32() {
	// 1, -3, 448 (the largest code), 2^-9 (the smallest) and a NaN, halved.
	codes := []byte{0x38, 0xc4, 0x7e, 0x01, 0x7f}
	dst := make([]float32, len(codes))
	simd.E4M3ToF32(dst, codes, 0.5)
	fmt.Println(dst)
	// Output: [0.5 -1.5 224 0.0009765625 NaN]
}

func ExampleQ50ToF32() {
	// One Q5_0 block: d = 0.5, the fifth bit set for values 0-15 only, and
	// nibble j in both halves of qs[j].
	blk := make([]byte, 22)
	binary.LittleEndian.PutUint16(blk, simd.F32ToF16Scalar(0.5))
	binary.LittleEndian.PutUint32(blk[2:], 0x0000_ffff)
	for j := 0; j < 16; j++ {
		blk[6+j] = byte(j | j<<4)
	}
	dst := make([]float32, 32)
	simd.Q50ToF32(dst, blk)
	fmt.Println(dst[:4], dst[16:20])
	// Output: [0 0.5 1 1.5] [-8 -7.5 -7 -6.5]
}
