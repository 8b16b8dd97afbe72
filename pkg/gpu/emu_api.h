// emu_api.h: the C API of kvq's CPU emulator of the CUDA device (emu.cpp),
// used by driver_emu.go through cgo. Device addresses are host addresses,
// carried as uint64_t. The emulator is single-threaded by design: callers
// serialize every call (driver_emu.go holds one mutex around them).
#ifndef KVQ_EMU_API_H
#define KVQ_EMU_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Launch and API results.
enum {
	KVQ_EMU_OK = 0,
	KVQ_EMU_EINVAL = 1,    // bad launch configuration or argument
	KVQ_EMU_EDEADLOCK = 2, // the threads of a block can no longer progress
	KVQ_EMU_EFAULT = 3,    // the kernel did something undefined (trap, bad warp op, corrupted guard)
	KVQ_EMU_ENOMEM = 4,
};

typedef struct kvq_emu_kernel kvq_emu_kernel;

// kvq_emu_alloc returns bytes of zero-filled memory aligned to 256 bytes
// (as cuMemAlloc), or 0 when out of memory.
uint64_t kvq_emu_alloc(size_t bytes);
// kvq_emu_free frees p (from kvq_emu_alloc); an unknown p is ignored and
// returns KVQ_EMU_EINVAL.
int kvq_emu_free(uint64_t p);
// Copies and memset; each range must lie inside one allocation
// (KVQ_EMU_EINVAL otherwise, with a message).
int kvq_emu_htod(uint64_t dst, const void* src, size_t bytes);
int kvq_emu_dtoh(void* dst, uint64_t src, size_t bytes);
int kvq_emu_dtod(uint64_t dst, uint64_t src, size_t bytes);
int kvq_emu_memset8(uint64_t dst, int b, size_t bytes);

// kvq_emu_find returns the kernel registered under name (KVQ_REGISTER),
// or NULL.
kvq_emu_kernel* kvq_emu_find(const char* name);
// kvq_emu_kernel_params is the number of parameters of k.
int kvq_emu_kernel_params(const kvq_emu_kernel* k);
// kvq_emu_set_max_dynamic_shared allows k up to bytes of dynamic shared
// memory per block (48 KiB without it, as on a GPU; at most
// kvq_emu_max_dynamic_shared()).
int kvq_emu_set_max_dynamic_shared(kvq_emu_kernel* k, int bytes);
int kvq_emu_max_dynamic_shared(void);

// kvq_emu_launch runs k over the grid, synchronously: blocks one after
// another (x fastest, then y, then z), the threads of a block as fibers
// on the calling thread. args holds nargs 8-byte parameter slots
// (parameter i in the low bytes of slot i). It returns KVQ_EMU_OK or an
// error code, with a message from kvq_emu_error.
int kvq_emu_launch(kvq_emu_kernel* k, unsigned gx, unsigned gy, unsigned gz,
                   unsigned bx, unsigned by, unsigned bz, int shared,
                   const uint64_t* args, int nargs);

// kvq_emu_error is the message of the last failure (valid until the next
// call).
const char* kvq_emu_error(void);

// kvq_emu_set_stack_size sets the stack of each emulated thread (bytes,
// rounded up to pages; at least 16 KiB; default 64 KiB).
int kvq_emu_set_stack_size(size_t bytes);

// Schedules: the order in which the threads of a block start, and resume
// after a barrier or warp operation releases them: by linear thread ID,
// reversed, or shuffled (then the thread whose arrival released the others
// may also wait its turn). A kernel correct on a GPU gives the same result
// in every order; running its tests in the reverse and random orders
// exposes missing barriers that thread-ID order hides.
enum {
	KVQ_EMU_FORWARD = 0, // the default
	KVQ_EMU_REVERSE = 1,
	KVQ_EMU_RANDOM = 2,
};
int kvq_emu_set_schedule(int order, uint64_t seed);

// kvq_emu_catches_faults reports whether a kernel's invalid memory access,
// stack overflow or integer division by zero is a launch error
// (KVQ_EMU_EFAULT); without it (builds on the ucontext switcher) such a
// kernel crashes the process.
int kvq_emu_catches_faults(void);

// kvq_emu_total_memory is the host's physical memory in bytes.
int64_t kvq_emu_total_memory(void);

// Statistics and test hooks: context switches since the process started,
// and the OS thread ID (gettid) running a launch now, 0 when none.
uint64_t kvq_emu_switches(void);
int64_t kvq_emu_launch_thread(void);

#ifdef __cplusplus
}
#endif

#endif
