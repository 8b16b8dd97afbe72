// Package gpu is kvq's CUDA backend: an implementation of backend.Backend
// whose weights, activations and paged KV cache live in GPU memory, with
// kernels written in this project (kernels/*.cu) and shipped as PTX
// embedded in the binary.
//
// Three builds:
//
//   - default (no tag, no cgo): Open reports ErrUnavailable; kvq runs on
//     the CPU.
//   - -tags cuda: the backend over the CUDA driver API through
//     gorgonia.org/cu (driver_cuda.go); the binary needs libcuda.so.1 and
//     a GPU.
//   - -tags cudaemu: the same backend code over an emulated device
//     (driver_emu.go, emu.cpp): the kernels' CUDA sources are compiled by
//     the host C++ compiler against kernels/emu.cuh, which runs every
//     thread of a block as a fiber on the CPU, so that the conformance
//     suite checks the kernels and the host-side logic without a GPU
//     (slowly: tests only).
//
// Every build exports Registration, the backend's entry in kvq's
// backend.Registry under the name "cuda" (registration.go): available in
// the cuda and cudaemu builds, unavailable with the reason in the default
// one (docs/backends.md).
//
// The backend talks to the device through the small driver interface
// (driver.go): memory, copies, kernel lookup and launch. Kernel parameters
// travel as 8-byte slots (gorgonia.org/cu copies 8 bytes per parameter):
// pointers, long long, int and float, each in the low bytes of its slot.
package gpu

import "errors"

// ErrUnavailable reports that no GPU backend can be opened.
var ErrUnavailable = errors.New("gpu: GPU backend not available")

// Options configure Open.
type Options struct {
	Device int // CUDA device ordinal
}

// DeviceInfo describes an opened device.
type DeviceInfo struct {
	Name        string
	Ordinal     int
	TotalMemory int64 // bytes
	SMs         int
	// Compute capability.
	Major, Minor int
	// Driver is the CUDA driver version (e.g. 13000), 0 on the emulator.
	Driver int
}
