//go:build cuda || cudaemu

package gpu

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/kvqlabs/kvq/pkg/runtime/backend"
)

// Backend is the GPU implementation of backend.Backend. Every op is
// issued on one stream in order; failures of asynchronous work surface at
// the next Download. It is not safe for concurrent use.
type Backend struct {
	d       driver
	kernels map[string]kernel
	// err is the first failure since the last Download.
	err error
	// The ops' state: dense ops (dense.go) and KV (kv.go).
	dense denseState
	kv    kvState
	moe   moeState  // moe.go
	sinks sinkState // attention.go
}

var _ backend.Backend = (*Backend)(nil)

// newBackend makes a backend over d.
func newBackend(d driver) (*Backend, error) {
	b := &Backend{d: d, kernels: map[string]kernel{}}
	if err := b.dense.init(b); err != nil {
		return nil, err
	}
	if err := b.kv.init(b); err != nil {
		return nil, err
	}
	return b, nil
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return Name }

// Info describes the device.
func (b *Backend) Info() DeviceInfo { return b.d.info() }

// Close frees the device context (every tensor, matrix and storage of the
// backend becomes invalid).
func (b *Backend) Close() { b.d.close() }

// fail records the first error.
func (b *Backend) fail(err error) {
	if err != nil && b.err == nil {
		b.err = err
	}
}

// takeErr returns and clears the recorded error.
func (b *Backend) takeErr() error {
	err := b.err
	b.err = nil
	return err
}

// tensor is a device buffer of n float32 values.
type tensor struct {
	p devptr
	n int
}

// Len implements backend.Tensor.
func (t *tensor) Len() int { return t.n }

// dev returns x's device tensor; x must come from a GPU backend.
func dev(x backend.Tensor) *tensor { return x.(*tensor) }

// ptr returns the address of value i of x.
func (t *tensor) at(i int) devptr { return t.p + devptr(4*i) }

// Alloc implements backend.Backend. On failure (out of device memory) it
// panics: the runtime sizes its buffers before a step, and a device that
// cannot hold them cannot run the model.
func (b *Backend) Alloc(n int) backend.Tensor {
	p, err := b.d.alloc(int64(max(n, 1)) * 4)
	if err != nil {
		panic(fmt.Sprintf("gpu: allocating %d floats: %v", n, err))
	}
	return &tensor{p: p, n: n}
}

// Free implements backend.Backend.
func (b *Backend) Free(x backend.Tensor) {
	t := dev(x)
	if t.p != 0 {
		b.d.free(t.p)
		t.p = 0
	}
}

// UploadF32 implements backend.Backend.
func (b *Backend) UploadF32(v []float32) (backend.Tensor, error) {
	p, err := b.d.alloc(int64(max(len(v), 1)) * 4)
	if err != nil {
		return nil, err
	}
	if len(v) > 0 {
		if err := b.d.htod(p, unsafe.Pointer(&v[0]), int64(len(v))*4); err != nil {
			b.d.free(p)
			return nil, err
		}
	}
	return &tensor{p: p, n: len(v)}, nil
}

// Download implements backend.Backend.
func (b *Backend) Download(dst []float32, src backend.Tensor, off int) error {
	t := dev(src)
	if off < 0 || off+len(dst) > t.n {
		panic(fmt.Sprintf("gpu: Download [%d, %d) of a tensor of %d", off, off+len(dst), t.n))
	}
	if len(dst) == 0 {
		if err := b.d.sync(); err != nil {
			b.fail(err)
		}
		return b.takeErr()
	}
	b.fail(b.d.dtoh(unsafe.Pointer(&dst[0]), t.at(off), int64(len(dst))*4))
	return b.takeErr()
}

// args are a launch's parameters, one 8-byte slot each.
type args []uint64

func (a args) ptr(p devptr) args  { return append(a, uint64(p)) }
func (a args) int(v int) args     { return append(a, uint64(int64(v))) }
func (a args) f32(v float32) args { return append(a, uint64(math.Float32bits(v))) }

// kernel returns the named kernel, loading it once.
func (b *Backend) kernel(name string) (kernel, error) {
	if k, ok := b.kernels[name]; ok {
		return k, nil
	}
	k, err := b.d.function(name)
	if err != nil {
		return nil, fmt.Errorf("gpu: kernel %s: %w", name, err)
	}
	b.kernels[name] = k
	return k, nil
}

// launch runs the named kernel, recording a failure for the next
// Download.
func (b *Backend) launch(name string, grid, block dim3, shared int, a args) {
	k, err := b.kernel(name)
	if err != nil {
		b.fail(err)
		return
	}
	if grid.x == 0 || grid.y == 0 || grid.z == 0 {
		return // nothing to do
	}
	b.fail(b.d.launch(k, grid, block, shared, a))
}

// blocks is the number of blocks of size per that cover n.
func blocks(n, per int) uint32 { return uint32((n + per - 1) / per) }
