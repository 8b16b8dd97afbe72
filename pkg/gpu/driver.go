//go:build cuda || cudaemu

package gpu

import "unsafe"

// devptr is a device address (a host address on the emulator).
type devptr uint64

// dim3 is a launch grid or block shape.
type dim3 struct{ x, y, z uint32 }

// kernel is a loaded kernel function.
type kernel interface{}

// driver is what the backend needs of a device: memory, copies, kernel
// lookup and launch, on one in-order stream. Launches and copies to the
// device may run asynchronously; dtoh and sync wait for everything issued
// before them and report the first failure of the stream since the last
// check.
type driver interface {
	info() DeviceInfo
	alloc(bytes int64) (devptr, error)
	free(p devptr)
	htod(dst devptr, src unsafe.Pointer, bytes int64) error
	dtoh(dst unsafe.Pointer, src devptr, bytes int64) error
	dtod(dst, src devptr, bytes int64) error
	memset8(dst devptr, b byte, bytes int64) error
	// function finds a kernel by its extern "C" name.
	function(name string) (kernel, error)
	// setMaxDynamicShared allows k up to bytes of dynamic shared memory
	// (above the 48 KiB default).
	setMaxDynamicShared(k kernel, bytes int) error
	// launch runs k; args are its parameters, one 8-byte slot each
	// (see args).
	launch(k kernel, grid, block dim3, shared int, args []uint64) error
	sync() error
	close()
}
