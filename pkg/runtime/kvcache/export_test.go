package kvcache

import (
	"unsafe"

	"github.com/kvqlabs/kvq/internal/simd"
)

func f32view(b []byte) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func f16round(x float32) float32  { return simd.F16ToF32Scalar(simd.F32ToF16Scalar(x)) }
func bf16round(x float32) float32 { return simd.BF16ToF32Scalar(simd.F32ToBF16Scalar(x)) }
