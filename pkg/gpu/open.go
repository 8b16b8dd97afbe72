//go:build cuda || cudaemu

package gpu

import (
	"context"
	"sync"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	wt "github.com/kvqlabs/kvq/pkg/tensor"
)

// Available reports whether this binary was built with the GPU backend.
const Available = true

// Open opens device opts.Device. The backend it returns (a *Device) is
// safe for concurrent use — every op holds one lock, so runners on several
// goroutines (kvq eval's tasks) share the device and its stream — and
// uploads each weight once however many runners upload it.
func Open(ctx context.Context, opts Options) (backend.Backend, error) {
	d, err := openDriver(opts)
	if err != nil {
		return nil, err
	}
	b, err := newBackend(d)
	if err != nil {
		d.close()
		return nil, err
	}
	return &Device{b: b, mats: map[*wt.Weight]backend.Matrix{}}, nil
}

// Registration describes the GPU backend to a backend.Registry: available
// in this build, running the KV formats SupportsKV accepts and the weight
// dtypes Upload takes.
func Registration() backend.Registration {
	r := registration()
	r.Description = description
	r.KV = supportsKV
	r.Weight = supportsWeight
	return r
}

// Probe lists the devices this build can use.
func Probe() ([]DeviceInfo, error) { return probeDevices() }

// Device is an opened GPU: a Backend behind a lock, with uploads shared.
type Device struct {
	mu   sync.Mutex
	b    *Backend
	mats map[*wt.Weight]backend.Matrix
}

var _ backend.Backend = (*Device)(nil)

// Backend returns the unlocked backend (benchmarks and tests that drive
// it from one goroutine).
func (d *Device) Backend() *Backend { return d.b }

// Info describes the device.
func (d *Device) Info() DeviceInfo { return d.b.Info() }

// Close releases the device; nothing of it may be used afterwards.
func (d *Device) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.b.Close()
}

func (d *Device) lock() func() {
	d.mu.Lock()
	return d.mu.Unlock
}

// Name implements backend.Backend.
func (d *Device) Name() string { return d.b.Name() }

// Alloc implements backend.Backend.
func (d *Device) Alloc(n int) backend.Tensor { defer d.lock()(); return d.b.Alloc(n) }

// Free implements backend.Backend.
func (d *Device) Free(t backend.Tensor) { defer d.lock()(); d.b.Free(t) }

// Upload implements backend.Backend: a weight already uploaded (by another
// runner of the same model) is not uploaded again.
func (d *Device) Upload(w *wt.Weight) (backend.Matrix, error) {
	defer d.lock()()
	if m, ok := d.mats[w]; ok {
		return m, nil
	}
	m, err := d.b.Upload(w)
	if err == nil {
		d.mats[w] = m
	}
	return m, err
}

// UploadF32 implements backend.Backend.
func (d *Device) UploadF32(v []float32) (backend.Tensor, error) {
	defer d.lock()()
	return d.b.UploadF32(v)
}

// Download implements backend.Backend.
func (d *Device) Download(dst []float32, src backend.Tensor, off int) error {
	defer d.lock()()
	return d.b.Download(dst, src, off)
}

// Embed implements backend.Backend.
func (d *Device) Embed(dst backend.Tensor, w backend.Matrix, ids []int32) {
	defer d.lock()()
	d.b.Embed(dst, w, ids)
}

// MatMul implements backend.Backend.
func (d *Device) MatMul(dst, x backend.Tensor, nt int, w backend.Matrix) {
	defer d.lock()()
	d.b.MatMul(dst, x, nt, w)
}

// RMSNorm implements backend.Backend.
func (d *Device) RMSNorm(dst, x backend.Tensor, rows int, w backend.Tensor, eps float32) {
	defer d.lock()()
	d.b.RMSNorm(dst, x, rows, w, eps)
}

// AddBias implements backend.Backend.
func (d *Device) AddBias(x backend.Tensor, nt int, b backend.Tensor) {
	defer d.lock()()
	d.b.AddBias(x, nt, b)
}

// RoPEAngles implements backend.Backend.
func (d *Device) RoPEAngles(dst backend.Tensor, pos []int32, invFreq []float64) {
	defer d.lock()()
	d.b.RoPEAngles(dst, pos, invFreq)
}

// RoPE implements backend.Backend.
func (d *Device) RoPE(x backend.Tensor, nt, heads, headDim, rotDim int, angles backend.Tensor, neox bool) {
	defer d.lock()()
	d.b.RoPE(x, nt, heads, headDim, rotDim, angles, neox)
}

// SwiGLU implements backend.Backend.
func (d *Device) SwiGLU(gate, up backend.Tensor, n int) { defer d.lock()(); d.b.SwiGLU(gate, up, n) }

// Add implements backend.Backend.
func (d *Device) Add(dst, src backend.Tensor, n int) { defer d.lock()(); d.b.Add(dst, src, n) }

// Copy implements backend.Backend.
func (d *Device) Copy(dst, src backend.Tensor, n int) { defer d.lock()(); d.b.Copy(dst, src, n) }

// Gather implements backend.Backend.
func (d *Device) Gather(dst, src backend.Tensor, rows []int32, width int) {
	defer d.lock()()
	d.b.Gather(dst, src, rows, width)
}

// NewStorage implements kvcache.Allocator.
func (d *Device) NewStorage(p kvcache.StorageParams) (kvcache.Storage, error) {
	defer d.lock()()
	s, err := d.b.NewStorage(p)
	if err != nil {
		return nil, err
	}
	return &lockedStorage{s: s, mu: &d.mu}, nil
}

// SupportsKV implements backend.Backend.
func (d *Device) SupportsKV(f quant.Format) error { return d.b.SupportsKV(f) }

// WriteKV implements backend.Backend.
func (d *Device) WriteKV(kv kvcache.Storage, layer int, k, v backend.Tensor, p *kvcache.Plan) {
	defer d.lock()()
	d.b.WriteKV(kv.(*lockedStorage).s, layer, k, v, p)
}

// Attention implements backend.Backend.
func (d *Device) Attention(dst, q, k, v backend.Tensor, kv kvcache.Storage, layer int, p *kvcache.Plan, a backend.AttnParams) {
	defer d.lock()()
	d.b.Attention(dst, q, k, v, kv.(*lockedStorage).s, layer, p, a)
}

// lockedStorage is a storage whose calls hold the device's lock (a cache
// of one runner is managed while another runner's ops run).
type lockedStorage struct {
	mu *sync.Mutex
	s  kvcache.Storage
}

var (
	_ kvcache.Storage  = (*lockedStorage)(nil)
	_ kvcache.Poisoner = (*lockedStorage)(nil)
)

func (l *lockedStorage) lock() func() {
	l.mu.Lock()
	return l.mu.Unlock
}

func (l *lockedStorage) CopyBlock(dst, src int)    { defer l.lock()(); l.s.CopyBlock(dst, src) }
func (l *lockedStorage) AllocWindow() (int, error) { defer l.lock()(); return l.s.AllocWindow() }
func (l *lockedStorage) FreeWindow(w int)          { defer l.lock()(); l.s.FreeWindow(w) }
func (l *lockedStorage) CopyWindow(dst, src int)   { defer l.lock()(); l.s.CopyWindow(dst, src) }
func (l *lockedStorage) Restore()                  { defer l.lock()(); l.s.Restore() }
func (l *lockedStorage) Discard()                  { defer l.lock()(); l.s.Discard() }
func (l *lockedStorage) HeldBytes() int64          { defer l.lock()(); return l.s.HeldBytes() }
func (l *lockedStorage) Read(dst []float32, layer int, key bool, h int, runs []kvcache.Run, win, from, to int) {
	defer l.lock()()
	l.s.Read(dst, layer, key, h, runs, win, from, to)
}

// Poison implements kvcache.Poisoner when the storage does.
func (l *lockedStorage) Poison(block int) {
	defer l.lock()()
	if p, ok := l.s.(kvcache.Poisoner); ok {
		p.Poison(block)
	}
}
