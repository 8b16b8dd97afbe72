//go:build cudaemu && !cuda

package gpu

// The driver over kvq's CPU emulator (emu.cpp, emu_api.h): the kernels'
// CUDA sources compiled by the host C++ compiler against kernels/emu.cuh.
//
// Rebuilds: cgo does not see the kernel sources (emu.cpp includes them
// from kernels/), so kernelSources embeds that directory: embedded files
// are part of the package's build cache key, and an edit to any kernel
// recompiles emu.cpp with a plain go build or go test. The Makefile's
// test-cudaemu target also puts a hash of kernels/ in CGO_CXXFLAGS.

/*
#cgo CXXFLAGS: -std=c++17 -O2 -fno-strict-aliasing -fstack-clash-protection
#include <stdlib.h>
#include "emu_api.h"
*/
import "C"

import (
	"embed"
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// Kind names the GPU backend compiled in.
const Kind = "cudaemu"

// description is the Registration's.
const description = "the CUDA backend on kvq's CPU emulator of a GPU (for tests: slow)"

// kernelSources ties the build to the kernel sources (see above); it is
// not read.
//
//go:embed kernels
var kernelSources embed.FS

// The emulator's failures, wrapped with its message.
var (
	errEmuInvalid  = errors.New("gpu: emulator: invalid launch or argument")
	errEmuDeadlock = errors.New("gpu: emulator: deadlock")
	errEmuFault    = errors.New("gpu: emulator: kernel fault")
	errEmuNoMemory = errors.New("gpu: emulator: out of memory")
	errEmuClosed   = errors.New("gpu: emulator: driver closed")
)

// emuMu serializes every call into the emulator: it is one process-wide
// device whose launches run on the calling thread with global state (the
// running fiber, the launch's geometry), so this mutable package state is
// the device's own lock, not configuration.
var emuMu sync.Mutex

// emuDriver is one context on the emulated device: it owns the
// allocations made through it (close frees them).
type emuDriver struct {
	allocs map[devptr]int64
	closed bool
}

var _ driver = (*emuDriver)(nil)

// emuKernel is a kernel found by name.
type emuKernel struct {
	name string
	k    *C.kvq_emu_kernel
}

// emuInfo describes the emulated device: an sm_90 part (the dynamic
// shared memory limit, 227 KiB, is sm_90's) with as many SMs as an H100,
// so that host-side choices sized by SM count take the paths they take on
// a GPU.
func emuInfo() DeviceInfo {
	return DeviceInfo{
		Name:        "kvq CPU emulator",
		TotalMemory: int64(C.kvq_emu_total_memory()),
		SMs:         132,
		Major:       9,
		Minor:       0,
	}
}

// emuOpenHook, when set (by emu_test.go), runs in every openDriver: it
// applies the test binary's -emu.schedule flag to the tests that open the
// backend through Open.
var emuOpenHook func() error

func openDriver(opts Options) (driver, error) {
	if emuOpenHook != nil {
		if err := emuOpenHook(); err != nil {
			return nil, err
		}
	}
	if opts.Device != 0 {
		return nil, fmt.Errorf("%w: the CPU emulator has one device (0), not %d", ErrUnavailable, opts.Device)
	}
	return &emuDriver{allocs: map[devptr]int64{}}, nil
}

func probeDevices() ([]DeviceInfo, error) { return []DeviceInfo{emuInfo()}, nil }

// emuError turns an emulator result into an error (nil for KVQ_EMU_OK);
// emuMu must be held.
func emuError(rc C.int) error {
	if rc == C.KVQ_EMU_OK {
		return nil
	}
	msg := C.GoString(C.kvq_emu_error())
	var sentinel error
	switch rc {
	case C.KVQ_EMU_EDEADLOCK:
		sentinel = errEmuDeadlock
	case C.KVQ_EMU_EFAULT:
		sentinel = errEmuFault
	case C.KVQ_EMU_ENOMEM:
		sentinel = errEmuNoMemory
	default:
		sentinel = errEmuInvalid
	}
	return fmt.Errorf("%w: %s", sentinel, msg)
}

func (d *emuDriver) info() DeviceInfo { return emuInfo() }

func (d *emuDriver) alloc(bytes int64) (devptr, error) {
	if d.closed {
		return 0, errEmuClosed
	}
	if bytes < 0 {
		return 0, fmt.Errorf("%w: allocating %d bytes", errEmuInvalid, bytes)
	}
	emuMu.Lock()
	p := devptr(C.kvq_emu_alloc(C.size_t(bytes)))
	emuMu.Unlock()
	if p == 0 {
		return 0, fmt.Errorf("%w: allocating %d bytes", errEmuNoMemory, bytes)
	}
	d.allocs[p] = bytes
	return p, nil
}

func (d *emuDriver) free(p devptr) {
	if _, ok := d.allocs[p]; !ok {
		return // not ours (or freed already): as after close
	}
	delete(d.allocs, p)
	emuMu.Lock()
	C.kvq_emu_free(C.uint64_t(p))
	emuMu.Unlock()
}

func (d *emuDriver) htod(dst devptr, src unsafe.Pointer, bytes int64) error {
	if bytes == 0 {
		return nil
	}
	emuMu.Lock()
	defer emuMu.Unlock()
	return emuError(C.kvq_emu_htod(C.uint64_t(dst), src, C.size_t(bytes)))
}

func (d *emuDriver) dtoh(dst unsafe.Pointer, src devptr, bytes int64) error {
	if bytes == 0 {
		return nil
	}
	emuMu.Lock()
	defer emuMu.Unlock()
	return emuError(C.kvq_emu_dtoh(dst, C.uint64_t(src), C.size_t(bytes)))
}

func (d *emuDriver) dtod(dst, src devptr, bytes int64) error {
	if bytes == 0 {
		return nil
	}
	emuMu.Lock()
	defer emuMu.Unlock()
	return emuError(C.kvq_emu_dtod(C.uint64_t(dst), C.uint64_t(src), C.size_t(bytes)))
}

func (d *emuDriver) memset8(dst devptr, b byte, bytes int64) error {
	if bytes == 0 {
		return nil
	}
	emuMu.Lock()
	defer emuMu.Unlock()
	return emuError(C.kvq_emu_memset8(C.uint64_t(dst), C.int(b), C.size_t(bytes)))
}

func (d *emuDriver) function(name string) (kernel, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	emuMu.Lock()
	k := C.kvq_emu_find(cs)
	emuMu.Unlock()
	if k == nil {
		return nil, fmt.Errorf("%w: no kernel named %q in the emulator build", errEmuInvalid, name)
	}
	return &emuKernel{name: name, k: k}, nil
}

func (d *emuDriver) setMaxDynamicShared(k kernel, bytes int) error {
	ek := k.(*emuKernel)
	emuMu.Lock()
	defer emuMu.Unlock()
	return emuError(C.kvq_emu_set_max_dynamic_shared(ek.k, C.int(bytes)))
}

// launch runs k to completion (the emulator is synchronous), so its
// failure is returned here, not at the next sync.
func (d *emuDriver) launch(k kernel, grid, block dim3, shared int, args []uint64) error {
	if d.closed {
		return errEmuClosed
	}
	ek := k.(*emuKernel)
	var p *C.uint64_t
	if len(args) > 0 {
		p = (*C.uint64_t)(unsafe.Pointer(&args[0]))
	}
	emuMu.Lock()
	defer emuMu.Unlock()
	return emuError(C.kvq_emu_launch(ek.k,
		C.uint(grid.x), C.uint(grid.y), C.uint(grid.z),
		C.uint(block.x), C.uint(block.y), C.uint(block.z),
		C.int(shared), p, C.int(len(args))))
}

func (d *emuDriver) sync() error {
	if d.closed {
		return errEmuClosed
	}
	return nil
}

func (d *emuDriver) close() {
	if d.closed {
		return
	}
	emuMu.Lock()
	for p := range d.allocs {
		C.kvq_emu_free(C.uint64_t(p))
	}
	emuMu.Unlock()
	d.allocs = nil
	d.closed = true
}

// emuSetStackSize sets the stack of each emulated thread (default 64
// KiB; a kernel with large local arrays may need more: an overflow hits a
// guard page and crashes the process).
func emuSetStackSize(bytes int) error {
	emuMu.Lock()
	defer emuMu.Unlock()
	return emuError(C.kvq_emu_set_stack_size(C.size_t(bytes)))
}

// emuSwitches is the number of fiber switches since the process started.
func emuSwitches() uint64 {
	emuMu.Lock()
	defer emuMu.Unlock()
	return uint64(C.kvq_emu_switches())
}

// emuLaunchThread is the OS thread ID running a launch now, 0 when none
// (a test hook: it does not take emuMu, which the launch holds).
func emuLaunchThread() int { return int(C.kvq_emu_launch_thread()) }

// emuSchedule is the order in which the emulator runs the threads of a
// block (see emu_api.h): thread order, reversed, or shuffled.
type emuSchedule int

const (
	emuForward emuSchedule = C.KVQ_EMU_FORWARD
	emuReverse emuSchedule = C.KVQ_EMU_REVERSE
	emuRandom  emuSchedule = C.KVQ_EMU_RANDOM
)

// emuSetSchedule makes every later launch (of every driver) run in order
// s, with seed for emuRandom; tests use it to expose missing barriers.
func emuSetSchedule(s emuSchedule, seed uint64) error {
	emuMu.Lock()
	defer emuMu.Unlock()
	return emuError(C.kvq_emu_set_schedule(C.int(s), C.uint64_t(seed)))
}

// emuCatchesFaults reports whether a kernel's invalid memory access is a
// launch error rather than a crash of the process (see emu_api.h).
func emuCatchesFaults() bool { return C.kvq_emu_catches_faults() != 0 }
