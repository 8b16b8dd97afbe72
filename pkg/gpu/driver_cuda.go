//go:build cuda

package gpu

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>

static int kvqSetMaxDynamicShared(CUfunction f, int bytes) {
	return (int)cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
}
*/
import "C"

import (
	_ "embed"
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"gorgonia.org/cu"
)

// Kind names the GPU backend compiled in.
const Kind = "cuda"

// description is the Registration's.
const description = "NVIDIA GPUs (compute capability 8.0 or later) through the CUDA driver API"

// kvqPTX is every kernel (kernels/kvq.cu) as PTX for compute_80, made by
// make ptx; the driver JIT-compiles it for the device (sm_80 and later,
// sm_90 included) when the module loads.
//
//go:embed ptx/kvq.ptx
var kvqPTX string

// cudaDriver is the driver over the CUDA driver API (gorgonia.org/cu),
// on the device's primary context and the legacy default stream: every
// launch and copy is in issue order, copies from host memory wait for the
// work before them, and copies to the host wait for everything.
type cudaDriver struct {
	mu  sync.Mutex
	ctx cu.CUContext
	dev cu.Device
	mod cu.Module
	inf DeviceInfo
}

// bind makes the context current on the calling goroutine's thread (CUDA
// contexts are per OS thread); the returned func undoes the lock.
func (d *cudaDriver) bind() func() {
	d.mu.Lock()
	runtime.LockOSThread()
	if err := cu.SetCurrentContext(d.ctx); err != nil {
		// The context was made current before; failing now means the
		// driver is gone. The op that follows reports its own error.
		_ = err
	}
	return func() {
		runtime.UnlockOSThread()
		d.mu.Unlock()
	}
}

func openDriver(opts Options) (driver, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if opts.Device < 0 || opts.Device >= n {
		return nil, fmt.Errorf("%w: device %d requested, %d present", ErrUnavailable, opts.Device, n)
	}
	dev, err := cu.GetDevice(opts.Device)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	inf, err := deviceInfo(dev, opts.Device)
	if err != nil {
		return nil, err
	}
	if inf.Major < 8 {
		return nil, fmt.Errorf("%w: %s has compute capability %d.%d; kvq's kernels need 8.0 (Ampere) or later", ErrUnavailable, inf.Name, inf.Major, inf.Minor)
	}
	ctx, err := dev.RetainPrimaryCtx()
	if err != nil {
		return nil, fmt.Errorf("%w: retaining the primary context of %s: %v", ErrUnavailable, inf.Name, err)
	}
	d := &cudaDriver{ctx: ctx, dev: dev, inf: inf}
	unbind := d.bind()
	defer unbind()
	// KVQ_PTX names a module file (PTX or cubin, made from the same
	// sources by a newer nvcc, e.g. for sm_90) to load instead of the
	// embedded PTX: the device check compares the two.
	var mod cu.Module
	if p := os.Getenv("KVQ_PTX"); p != "" {
		mod, err = cu.Load(p)
	} else {
		mod, err = cu.LoadData(kvqPTX)
	}
	if err != nil {
		return nil, fmt.Errorf("gpu: loading kvq's kernels on %s: %v", inf.Name, err)
	}
	d.mod = mod
	return d, nil
}

func deviceInfo(dev cu.Device, ordinal int) (DeviceInfo, error) {
	name, err := dev.Name()
	if err != nil {
		return DeviceInfo{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	mem, err := dev.TotalMem()
	if err != nil {
		return DeviceInfo{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	at, err := dev.Attributes(cu.MultiprocessorCount, cu.ComputeCapabilityMajor, cu.ComputeCapabilityMinor)
	if err != nil {
		return DeviceInfo{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return DeviceInfo{Name: name, Ordinal: ordinal, TotalMemory: mem, SMs: at[0], Major: at[1], Minor: at[2], Driver: cu.Version()}, nil
}

func probeDevices() ([]DeviceInfo, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	var out []DeviceInfo
	for i := 0; i < n; i++ {
		dev, err := cu.GetDevice(i)
		if err != nil {
			return out, err
		}
		inf, err := deviceInfo(dev, i)
		if err != nil {
			return out, err
		}
		out = append(out, inf)
	}
	return out, nil
}

func (d *cudaDriver) info() DeviceInfo { return d.inf }

func (d *cudaDriver) alloc(bytes int64) (devptr, error) {
	defer d.bind()()
	p, err := cu.MemAlloc(bytes)
	if err != nil {
		free, total, _ := cu.MemInfo()
		return 0, fmt.Errorf("gpu: allocating %d bytes on %s (%d of %d bytes free): %v", bytes, d.inf.Name, free, total, err)
	}
	return devptr(p), nil
}

func (d *cudaDriver) free(p devptr) {
	defer d.bind()()
	_ = cu.MemFree(cu.DevicePtr(p))
}

func (d *cudaDriver) htod(dst devptr, src unsafe.Pointer, bytes int64) error {
	defer d.bind()()
	return wrap("copy to device", cu.MemcpyHtoD(cu.DevicePtr(dst), src, bytes))
}

func (d *cudaDriver) dtoh(dst unsafe.Pointer, src devptr, bytes int64) error {
	defer d.bind()()
	return wrap("copy to host", cu.MemcpyDtoH(dst, cu.DevicePtr(src), bytes))
}

func (d *cudaDriver) dtod(dst, src devptr, bytes int64) error {
	defer d.bind()()
	return wrap("device copy", cu.MemcpyDtoDAsync(cu.DevicePtr(dst), cu.DevicePtr(src), bytes, cu.Stream{}))
}

func (d *cudaDriver) memset8(dst devptr, b byte, bytes int64) error {
	defer d.bind()()
	return wrap("memset", cu.MemsetD8Async(cu.DevicePtr(dst), b, bytes, cu.Stream{}))
}

func (d *cudaDriver) function(name string) (kernel, error) {
	defer d.bind()()
	return d.mod.Function(name)
}

func (d *cudaDriver) setMaxDynamicShared(k kernel, bytes int) error {
	defer d.bind()()
	fn := k.(cu.Function)
	// cu.Function is one CUfunction; cu has no call for this attribute.
	f := *(*C.CUfunction)(unsafe.Pointer(&fn))
	if r := C.kvqSetMaxDynamicShared(f, C.int(bytes)); r != 0 {
		return fmt.Errorf("gpu: allowing %d bytes of dynamic shared memory: CUDA error %d", bytes, int(r))
	}
	return nil
}

func (d *cudaDriver) launch(k kernel, grid, block dim3, shared int, a []uint64) error {
	defer d.bind()()
	ps := make([]unsafe.Pointer, len(a))
	for i := range a {
		ps[i] = unsafe.Pointer(&a[i])
	}
	return wrap("launch", k.(cu.Function).Launch(int(grid.x), int(grid.y), int(grid.z), int(block.x), int(block.y), int(block.z), shared, cu.Stream{}, ps))
}

func (d *cudaDriver) sync() error {
	defer d.bind()()
	return wrap("synchronize", cu.Synchronize())
}

func (d *cudaDriver) close() {
	defer d.bind()()
	_ = cu.Synchronize()
	_ = d.mod.Unload()
	_ = d.dev.ReleasePrimaryCtx()
}

func wrap(what string, err error) error {
	if err != nil {
		return fmt.Errorf("gpu: %s: %v", what, err)
	}
	return nil
}
