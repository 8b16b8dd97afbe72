//go:build cuda || cudaemu

package gpu

// TEMPORARY scaffold while the dense ops are written (helper K1 replaces
// this file with dense.go and friends). Not to be committed as done.

import (
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	kvqtensor "github.com/kvqlabs/kvq/pkg/tensor"
)

type denseState struct{}

func (s *denseState) init(b *Backend) error { return nil }

func (b *Backend) Upload(w *kvqtensor.Weight) (backend.Matrix, error) {
	panic("gpu: Upload not implemented")
}
func (b *Backend) Embed(dst backend.Tensor, w backend.Matrix, ids []int32) {
	panic("gpu: Embed not implemented")
}
func (b *Backend) MatMul(dst, x backend.Tensor, nt int, w backend.Matrix) {
	panic("gpu: MatMul not implemented")
}
func (b *Backend) RMSNorm(dst, x backend.Tensor, rows int, w backend.Tensor, eps float32) {
	panic("gpu: RMSNorm not implemented")
}
func (b *Backend) AddBias(x backend.Tensor, nt int, bias backend.Tensor) {
	panic("gpu: AddBias not implemented")
}
func (b *Backend) RoPEAngles(dst backend.Tensor, pos []int32, invFreq []float64) {
	panic("gpu: RoPEAngles not implemented")
}
func (b *Backend) RoPE(x backend.Tensor, nt, heads, headDim, rotDim int, angles backend.Tensor, neox bool) {
	panic("gpu: RoPE not implemented")
}
func (b *Backend) SwiGLU(gate, up backend.Tensor, n int) { panic("gpu: SwiGLU not implemented") }
func (b *Backend) Add(dst, src backend.Tensor, n int)    { panic("gpu: Add not implemented") }
func (b *Backend) Copy(dst, src backend.Tensor, n int)   { panic("gpu: Copy not implemented") }
func (b *Backend) Gather(dst, src backend.Tensor, rows []int32, width int) {
	panic("gpu: Gather not implemented")
}
