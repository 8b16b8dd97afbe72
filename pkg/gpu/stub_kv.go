//go:build cuda || cudaemu

package gpu

// TEMPORARY scaffold while the KV cache and attention are written (helper
// K2 replaces this file with kv.go and attention.go). Not to be committed
// as done.

import (
	"errors"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

type kvState struct{}

func (s *kvState) init(b *Backend) error { return nil }

func (b *Backend) NewStorage(p kvcache.StorageParams) (kvcache.Storage, error) {
	return nil, errors.New("gpu: KV storage not implemented")
}
func (b *Backend) SupportsKV(f quant.Format) error { return backend.ErrUnsupported }
func (b *Backend) WriteKV(kv kvcache.Storage, layer int, k, v backend.Tensor, p *kvcache.Plan) {
	panic("gpu: WriteKV not implemented")
}
func (b *Backend) Attention(dst, q, k, v backend.Tensor, kv kvcache.Storage, layer int, p *kvcache.Plan, a backend.AttnParams) {
	panic("gpu: Attention not implemented")
}
