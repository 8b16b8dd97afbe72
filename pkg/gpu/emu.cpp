//go:build cudaemu

// emu.cpp: kvq's CPU emulator of a CUDA device (the cudaemu build). It
// compiles the kernels' one translation unit (kernels/kvq.cu, whose
// common.cuh includes kernels/emu.cuh) and the emulator's own test kernels
// (kernels/emutest.cu) with the host compiler, and implements emu_api.h.
//
// Threads of a block are fibers on the calling OS thread (see emu.cuh for
// the model). On x86-64 a fiber switch is a few instructions saving the
// callee-saved registers and the stack pointer (kvq_emu_swap below); other
// architectures, or -DKVQ_EMU_UCONTEXT, use ucontext (correct, slower:
// swapcontext makes a sigprocmask system call per switch). The switcher
// leaves MXCSR and the x87 control word alone: no kernel changes them.
//
// Go and fibers. The emulator runs inside a cgo call, on the OS thread's
// system stack; the fibers run on stacks mmap'd here (never Go memory),
// each with a PROT_NONE guard page below it, so an overflow faults
// instead of corrupting a neighbour. A signal arriving while a fiber runs
// (SIGURG for preemption, SIGPROF for profiling) is handled by Go's handler
// on the thread's signal stack (Go installs every handler with SA_ONSTACK
// and gives every thread a sigaltstack), which never looks at the
// interrupted stack beyond the signal context: it sees a thread in a cgo
// call and returns (emu_test.go's TestSignalsDuringLaunch sends SIGURG to
// the launching thread and profiles while fibers run). Every launch ends
// on the thread's own stack: kvq_emu_launch switches to the first fiber
// and is switched back to when the block finishes or fails; fibers left
// suspended by a failed block are simply never resumed (their stacks are
// reinitialized by the next block), so nothing runs after a return to Go.
// No Go code is called from the emulator.

#include "kernels/kvq.cu"
#include "kernels/emutest.cu"

#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "emu_api.h"

#if !defined(__x86_64__) || defined(KVQ_EMU_UCONTEXT)
#define KVQ_EMU_USE_UCONTEXT 1
#include <ucontext.h>
#else
// kvq_emu_swap(save, to): push the callee-saved registers, store the stack
// pointer in *save, load to as the stack pointer, pop and return into the
// other context.
extern "C" void kvq_emu_swap(void** save, void* to);
// kvq_emu_resume is kvq_emu_swap's second half: with the stack pointer at
// a context kvq_emu_swap saved, it resumes that context.
extern "C" void kvq_emu_resume();
__asm__(
    ".pushsection .text\n"
    ".p2align 4\n"
    ".globl kvq_emu_swap\n"
    ".hidden kvq_emu_swap\n"
    ".type kvq_emu_swap,@function\n"
    "kvq_emu_swap:\n"
    "\tpushq %rbp\n"
    "\tpushq %rbx\n"
    "\tpushq %r12\n"
    "\tpushq %r13\n"
    "\tpushq %r14\n"
    "\tpushq %r15\n"
    "\tmovq %rsp, (%rdi)\n"
    "\tmovq %rsi, %rsp\n"
    ".globl kvq_emu_resume\n"
    ".hidden kvq_emu_resume\n"
    "kvq_emu_resume:\n"
    "\tpopq %r15\n"
    "\tpopq %r14\n"
    "\tpopq %r13\n"
    "\tpopq %r12\n"
    "\tpopq %rbx\n"
    "\tpopq %rbp\n"
    "\tret\n"
    ".size kvq_emu_swap, .-kvq_emu_swap\n"
    ".popsection\n");
#endif

namespace kvq_emu {

// Limits of the emulated device (an sm_90 part: 227 KiB of dynamic shared
// memory per block with the opt-in attribute, 48 KiB without).
constexpr int kDefaultDynShared = 48 << 10;
constexpr int kMaxDynShared = 227 << 10;
constexpr size_t kGuard = 256; // guard bytes before and after each allocation
constexpr unsigned char kGuardByte = 0xa5;
constexpr int kGroupsPerWarp = 4;

enum FiberState { kReady, kRunning, kWaitBlock, kWaitWarp, kDone };

struct Group {
	bool used, complete;
	uint32_t need, arrived, pending;
	uint64_t words[32][3];
};

struct Warp {
	uint32_t exist, exited;
	Group groups[kGroupsPerWarp];
};

// The state of the launch in progress (one at a time: callers serialize).
struct Launch {
	Kernel* kernel = nullptr;
	const uint64_t* args = nullptr;
	unsigned n = 0; // threads per block
	std::vector<Fiber> fibers;
	std::vector<Fiber*> ring; // ready fibers, FIFO
	unsigned head = 0, count = 0;
	std::vector<Warp> warps;
	// The block barrier.
	unsigned arrived = 0, preds = 0, lastPreds = 0;
	std::vector<Fiber*> waiters;
	unsigned done = 0;
	unsigned loneYields = 0;
	int status = KVQ_EMU_OK;
	std::string err;
};

Launch L;
void* g_mainSp = nullptr;
#ifdef KVQ_EMU_USE_UCONTEXT
ucontext_t g_mainUc;
std::vector<ucontext_t> g_ucs;
#endif
std::vector<unsigned char*> g_stacks; // mmap'd, guard page below each
size_t g_stackSize = 64 << 10;
size_t g_page = 0; // set with the first stack
unsigned char* g_smem = nullptr;
uint64_t g_switches = 0;
std::atomic<int64_t> g_launchTid{0};
std::map<uintptr_t, size_t> g_allocs; // user address → bytes
std::string g_err;
int g_schedule = KVQ_EMU_FORWARD;
uint64_t g_rng = 1;

static std::string vformat(const char* format, va_list ap) {
	char buf[1024];
	vsnprintf(buf, sizeof buf, format, ap);
	return buf;
}

static std::string format(const char* format, ...) __attribute__((format(printf, 1, 2)));
static std::string format(const char* format, ...) {
	va_list ap;
	va_start(ap, format);
	std::string s = vformat(format, ap);
	va_end(ap);
	return s;
}

static int fail(int code, const std::string& msg) {
	g_err = msg;
	return code;
}

// Fiber switching.

static void fiberEntry();

static inline void switchTo(Fiber* from, Fiber* to) {
	g_cur = to;
	to->state = kRunning;
	g_switches++;
#ifdef KVQ_EMU_USE_UCONTEXT
	static ucontext_t dead;
	swapcontext(from ? static_cast<ucontext_t*>(from->uctx) : &dead, static_cast<ucontext_t*>(to->uctx));
#else
	static void* dead;
	kvq_emu_swap(from ? &from->sp : &dead, to->sp);
#endif
}

static inline void fromMain(Fiber* to) {
	g_cur = to;
	to->state = kRunning;
	g_switches++;
#ifdef KVQ_EMU_USE_UCONTEXT
	swapcontext(&g_mainUc, static_cast<ucontext_t*>(to->uctx));
#else
	kvq_emu_swap(&g_mainSp, to->sp);
#endif
	g_cur = nullptr;
}

[[noreturn]] static void toMain(Fiber* from) {
	g_switches++;
#ifdef KVQ_EMU_USE_UCONTEXT
	swapcontext(static_cast<ucontext_t*>(from->uctx), &g_mainUc);
#else
	kvq_emu_swap(&from->sp, g_mainSp);
#endif
	__builtin_unreachable(); // a fiber that went back to main is never resumed
}

static void initContext(Fiber* f) {
#ifdef KVQ_EMU_USE_UCONTEXT
	ucontext_t* uc = static_cast<ucontext_t*>(f->uctx);
	getcontext(uc);
	uc->uc_stack.ss_sp = f->stack;
	uc->uc_stack.ss_size = f->stackSize;
	uc->uc_link = nullptr;
	makecontext(uc, fiberEntry, 0);
#else
	// The frame kvq_emu_swap pops: six registers (zero: rbp = 0 ends frame
	// chains), then fiberEntry as the return address, entered with the
	// stack aligned as after a call (rsp ≡ 8 mod 16), above it a zero
	// return address fiberEntry never uses.
	// The top is offset by 64 bytes per fiber (mod 4 KiB): stacks whose
	// hot frames sat at the same page offset would compete for the same
	// few L1 cache sets.
	size_t color = (f->linear % 64) * 64;
	uint64_t* top = reinterpret_cast<uint64_t*>(f->stack + f->stackSize - color);
	top[-1] = 0;
	top[-2] = reinterpret_cast<uint64_t>(&fiberEntry);
	for (int i = 3; i <= 8; i++) top[-i] = 0;
	f->sp = top - 8;
#endif
}

// The ready queue.

static inline void push(Fiber* f) {
	f->state = kReady;
	unsigned i = L.head + L.count;
	if (i >= L.n) i -= L.n;
	L.ring[i] = f;
	L.count++;
}

static inline Fiber* pop() {
	if (L.count == 0) return nullptr;
	Fiber* f = L.ring[L.head];
	if (++L.head == L.n) L.head = 0;
	L.count--;
	return f;
}

// rnd is splitmix64 over g_rng: the random schedule's choices.
static inline uint64_t rnd() {
	uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void shuffle(Fiber** f, unsigned n) {
	for (unsigned i = n; i > 1; i--) {
		unsigned j = unsigned(rnd() % i);
		Fiber* t = f[i - 1];
		f[i - 1] = f[j];
		f[j] = t;
	}
}

// wake makes ready the n fibers of list (in thread order), which self's
// arrival released, in the schedule's order: as listed, reversed, or
// shuffled; in the random schedule self joins them (list has room for
// it) and may run later.
static void wake(Fiber** list, unsigned n, Fiber* self) {
	switch (g_schedule) {
	case KVQ_EMU_REVERSE:
		for (unsigned i = n; i > 0; i--) push(list[i - 1]);
		return;
	case KVQ_EMU_RANDOM: {
		list[n++] = self;
		shuffle(list, n);
		for (unsigned i = 0; i < n; i++) push(list[i]);
		Fiber* next = pop();
		if (next != self) switchTo(self, next);
		self->state = kRunning;
		return;
	}
	}
	for (unsigned i = 0; i < n; i++) push(list[i]);
}

static std::string where() {
	std::string s = format("kernel %s, block (%u,%u,%u)", L.kernel->name, g_blockIdx.x, g_blockIdx.y, g_blockIdx.z);
	if (g_cur)
		s += format(", thread (%u,%u,%u)", g_cur->tid.x, g_cur->tid.y, g_cur->tid.z);
	return s;
}

[[noreturn]] void fatal(const char* fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	std::string msg = vformat(fmt, ap);
	va_end(ap);
	L.err = where() + ": " + msg;
	L.status = KVQ_EMU_EFAULT;
	toMain(g_cur);
}

// deadlock reports that no thread of the block can run, and ends the
// block.
[[noreturn]] static void deadlock(Fiber* f) {
	unsigned atBlock = 0, atWarp = 0, exited = 0;
	std::string warps;
	for (unsigned i = 0; i < L.n; i++) {
		switch (L.fibers[i].state) {
		case kWaitBlock: atBlock++; break;
		case kWaitWarp: atWarp++; break;
		case kDone: exited++; break;
		}
	}
	for (size_t w = 0; w < L.warps.size(); w++) {
		for (const Group& g : L.warps[w].groups) {
			if (g.used && !g.complete)
				warps += format("; warp %zu: lanes 0x%08x of mask 0x%08x arrived", w, g.arrived, g.need);
		}
	}
	Fiber* saved = g_cur;
	g_cur = nullptr;
	L.err = format("%s: deadlock: of %u threads, %u wait at __syncthreads, %u at warp operations, %u returned%s",
	               where().c_str(), L.n, atBlock, atWarp, exited, warps.c_str());
	g_cur = saved;
	L.status = KVQ_EMU_EDEADLOCK;
	toMain(f);
}

// block suspends the running fiber (already recorded as waiting) and
// runs the next ready one.
static inline void block(Fiber* f) {
	Fiber* next = pop();
	if (!next) deadlock(f);
	switchTo(f, next);
}

void yield() {
	Fiber* f = g_cur;
	if (L.count == 0) {
		// Nothing else can run: a loop of these waits for nothing.
		if (++L.loneYields > (1u << 22)) fatal("__nanosleep in a loop while no other thread of the block can run");
		return;
	}
	L.loneYields = 0;
	push(f);
	switchTo(f, pop());
}

static void fiberExit() {
	Fiber* f = g_cur;
	Warp& w = L.warps[f->warp];
	uint32_t bit = 1u << f->lane;
	for (const Group& g : w.groups) {
		if (g.used && !g.complete && (g.need & bit))
			fatal("returned while lanes 0x%08x of its warp wait for it at a warp operation with mask 0x%08x",
			      g.arrived, g.need);
	}
	if (L.arrived > 0)
		fatal("returned while %u threads of the block wait at __syncthreads (every thread must reach it)", L.arrived);
	f->state = kDone;
	w.exited |= bit;
	if (++L.done == L.n) toMain(f);
	Fiber* next = pop();
	if (!next) deadlock(f);
	switchTo(nullptr, next);
	__builtin_unreachable();
}

static void fiberEntry() {
	L.kernel->invoke(L.kernel->fn, L.args);
	fiberExit();
}

int blockSync(int mode, int pred) {
	Fiber* f = g_cur;
	if (L.done > 0)
		fatal("__syncthreads after %u threads of the block returned (undefined in CUDA: every thread must reach it)",
		      L.done);
	L.preds += pred != 0;
	if (++L.arrived == L.n) {
		L.lastPreds = L.preds;
		L.arrived = 0;
		L.preds = 0;
		// Every other thread waits here (none has returned).
		L.waiters.clear();
		for (unsigned i = 0; i < L.n; i++)
			if (&L.fibers[i] != f) L.waiters.push_back(&L.fibers[i]);
		L.waiters.push_back(f); // room for wake to add it
		wake(L.waiters.data(), L.n - 1, f);
	} else {
		f->state = kWaitBlock;
		f->waitWhat = "__syncthreads";
		block(f);
	}
	switch (mode) {
	case 1: return int(L.lastPreds);
	case 2: return L.lastPreds == L.n;
	case 3: return L.lastPreds > 0;
	}
	return 0;
}

Group* warpArrive(unsigned mask, const uint64_t* words, int n) {
	Fiber* f = g_cur;
	Warp& w = L.warps[f->warp];
	uint32_t bit = 1u << f->lane;
	uint32_t need = mask & w.exist;
	if (!(need & bit)) fatal("warp operation with mask 0x%08x, which excludes the calling lane %u", mask, f->lane);
	if (need & w.exited)
		fatal("warp operation with mask 0x%08x after lanes 0x%08x of the warp returned", mask, need & w.exited);
	Group* g = nullptr;
	Group* spare = nullptr;
	for (Group& c : w.groups) {
		if (c.used && !c.complete && c.need == need) {
			g = &c;
			break;
		}
		if (!c.used && !spare) spare = &c;
	}
	if (!g) {
		if (!spare) fatal("more than %d warp operations with different masks pending in one warp", kGroupsPerWarp);
		g = spare;
		g->used = true;
		g->complete = false;
		g->need = need;
		g->arrived = 0;
	}
	g->arrived |= bit;
	for (int i = 0; i < n; i++) g->words[f->lane][i] = words[i];
	if (g->arrived == need) {
		g->complete = true;
		g->pending = need;
		Fiber* lanes = &L.fibers[f->warp * 32];
		Fiber* list[33];
		unsigned n = 0;
		for (uint32_t rest = need & ~bit; rest; rest &= rest - 1) list[n++] = &lanes[__builtin_ctz(rest)];
		wake(list, n, f);
		return g;
	}
	f->state = kWaitWarp;
	f->waitWhat = "a warp operation";
	block(f);
	return g;
}

const uint64_t* warpWords(const Group* g, unsigned lane) {
	return lane < 32 && (g->arrived >> lane & 1u) ? g->words[lane] : nullptr;
}

unsigned warpArrived(const Group* g) { return g->arrived; }

void warpRelease(Group* g) {
	g->pending &= ~(1u << g_cur->lane);
	if (!g->pending) g->used = false;
}

unsigned activeMask() {
	const Warp& w = L.warps[g_cur->warp];
	return w.exist & ~w.exited;
}

void mma16816(float d[4], const unsigned a[4], const unsigned b[2], bool bf16) {
	if (L.warps[g_cur->warp].exist != 0xffffffffu)
		fatal("mma in a partial warp (lanes 0x%08x): it needs all 32 lanes", L.warps[g_cur->warp].exist);
	uint64_t w[3] = {a[0] | uint64_t(a[1]) << 32, a[2] | uint64_t(a[3]) << 32, b[0] | uint64_t(b[1]) << 32};
	Group* g = warpArrive(0xffffffffu, w, 3);
	auto cvt = [bf16](uint32_t v) { return bf16 ? bf2f(uint16_t(v)) : h2f(uint16_t(v)); };
	unsigned lane = g_cur->lane, gr = lane >> 2, t = lane & 3;
	// Rows gr and gr+8 of A, columns 2t and 2t+1 of B, gathered from the
	// lanes that hold them.
	float A0[16], A1[16], B0[16], B1[16];
	for (unsigned q = 0; q < 4; q++) {
		const uint64_t* la = g->words[gr * 4 + q];
		uint32_t a0 = uint32_t(la[0]), a1 = uint32_t(la[0] >> 32), a2 = uint32_t(la[1]), a3 = uint32_t(la[1] >> 32);
		A0[2 * q] = cvt(a0 & 0xffff), A0[2 * q + 1] = cvt(a0 >> 16);
		A0[2 * q + 8] = cvt(a2 & 0xffff), A0[2 * q + 9] = cvt(a2 >> 16);
		A1[2 * q] = cvt(a1 & 0xffff), A1[2 * q + 1] = cvt(a1 >> 16);
		A1[2 * q + 8] = cvt(a3 & 0xffff), A1[2 * q + 9] = cvt(a3 >> 16);
		const uint64_t* l0 = g->words[(2 * t) * 4 + q];
		const uint64_t* l1 = g->words[(2 * t + 1) * 4 + q];
		uint32_t b00 = uint32_t(l0[2]), b01 = uint32_t(l0[2] >> 32);
		uint32_t b10 = uint32_t(l1[2]), b11 = uint32_t(l1[2] >> 32);
		B0[2 * q] = cvt(b00 & 0xffff), B0[2 * q + 1] = cvt(b00 >> 16);
		B0[2 * q + 8] = cvt(b01 & 0xffff), B0[2 * q + 9] = cvt(b01 >> 16);
		B1[2 * q] = cvt(b10 & 0xffff), B1[2 * q + 1] = cvt(b10 >> 16);
		B1[2 * q + 8] = cvt(b11 & 0xffff), B1[2 * q + 9] = cvt(b11 >> 16);
	}
	warpRelease(g);
	float s0 = d[0], s1 = d[1], s2 = d[2], s3 = d[3];
	for (int k = 0; k < 16; k++) {
		s0 += A0[k] * B0[k];
		s1 += A0[k] * B1[k];
		s2 += A1[k] * B0[k];
		s3 += A1[k] * B1[k];
	}
	d[0] = s0, d[1] = s1, d[2] = s2, d[3] = s3;
}

// registry is every kernel of the translation unit, in registration order
// (a function static: the registrars run during static initialization).
static std::vector<Kernel*>& registry() {
	static std::vector<Kernel*> r;
	return r;
}

Kernel* registerKernel(const char* name, AnyFn fn, Invoker invoke, int params) {
	Kernel* k = new Kernel{name, fn, invoke, params, kDefaultDynShared};
	registry().push_back(k);
	return k;
}

// Stacks.

static void freeStacks() {
	for (unsigned char* s : g_stacks) munmap(s - g_page, g_stackSize + g_page);
	g_stacks.clear();
}

static bool ensureStacks(unsigned n) {
	if (g_page == 0) g_page = size_t(sysconf(_SC_PAGESIZE));
	while (g_stacks.size() < n) {
		void* p = mmap(nullptr, g_stackSize + g_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) return false;
		mprotect(p, g_page, PROT_NONE);
		g_stacks.push_back(static_cast<unsigned char*>(p) + g_page);
	}
	return true;
}

// Allocations.

static bool guardIntact(uintptr_t p, size_t bytes, size_t* bad) {
	const unsigned char* lo = reinterpret_cast<const unsigned char*>(p) - kGuard;
	const unsigned char* hi = reinterpret_cast<const unsigned char*>(p) + bytes;
	for (size_t i = 0; i < kGuard; i++) {
		if (lo[i] != kGuardByte) {
			*bad = i;
			return false;
		}
		if (hi[i] != kGuardByte) {
			*bad = kGuard + i;
			return false;
		}
	}
	return true;
}

// checkGuards reports an allocation whose guard bytes a kernel overwrote.
static bool checkGuards(std::string* msg) {
	for (auto& [p, bytes] : g_allocs) {
		size_t bad;
		if (!guardIntact(p, bytes, &bad)) {
			if (bad < kGuard)
				*msg = format("wrote %zu bytes before the start of the %zu-byte allocation at 0x%llx", kGuard - bad,
				              bytes, (unsigned long long)p);
			else
				*msg = format("wrote %zu bytes past the end of the %zu-byte allocation at 0x%llx", bad - kGuard + 1,
				              bytes, (unsigned long long)p);
			// Repair, so that one overrun is reported once.
			memset(reinterpret_cast<unsigned char*>(p) - kGuard, kGuardByte, kGuard);
			memset(reinterpret_cast<unsigned char*>(p) + bytes, kGuardByte, kGuard);
			return false;
		}
	}
	return true;
}

// inside reports whether [p, p+n) lies in one allocation.
static bool inside(uint64_t p, size_t n) {
	auto it = g_allocs.upper_bound(uintptr_t(p));
	if (it == g_allocs.begin()) return false;
	--it;
	return p >= it->first && p - it->first <= it->second && n <= it->second - (p - it->first);
}

static int badRange(const char* op, uint64_t p, size_t n) {
	return fail(KVQ_EMU_EINVAL, format("%s: [0x%llx, +%zu) is not inside one allocation", op, (unsigned long long)p, n));
}

// Faults. While a launch runs, SIGSEGV, SIGBUS and SIGFPE have the
// emulator's handler (x86-64 switcher only; Go's handlers are restored
// after the launch). A fault in a fiber on the launching thread ends the
// block as a launch error: the handler points the interrupted context at
// the main context kvq_emu_swap saved, so that returning from the handler
// resumes kvq_emu_launch as if the fiber had switched back. Any other
// fault (another thread, or outside a fiber) goes to the handler that was
// installed before, Go's, exactly as the kernel would have delivered it.
// A kernel that faults inside a C library call (printf) may leave a lock
// of that library held.

#ifndef KVQ_EMU_USE_UCONTEXT
constexpr int kFaultSignals[] = {SIGSEGV, SIGBUS, SIGFPE};
struct sigaction g_oldActions[3];
volatile int64_t g_faultTid = 0; // the launching thread while the handler is installed

struct Fault {
	bool happened;
	int sig, code;
	uintptr_t addr;
	uint3 tid;
} g_fault;

static void forwardSignal(int sig, siginfo_t* info, void* uctx) {
	for (int i = 0; i < 3; i++) {
		if (kFaultSignals[i] != sig) continue;
		struct sigaction* old = &g_oldActions[i];
		if (old->sa_flags & SA_SIGINFO) {
			old->sa_sigaction(sig, info, uctx);
		} else if (old->sa_handler == SIG_DFL) {
			signal(sig, SIG_DFL); // the fault recurs and takes the default action
		} else if (old->sa_handler != SIG_IGN) {
			old->sa_handler(sig);
		}
	}
}

static void onFault(int sig, siginfo_t* info, void* uctx) {
	if (g_cur && g_mainSp && g_faultTid == int64_t(syscall(SYS_gettid))) {
		g_fault.happened = true;
		g_fault.sig = sig;
		g_fault.code = info->si_code;
		g_fault.addr = uintptr_t(info->si_addr);
		g_fault.tid = g_cur->tid;
		L.status = KVQ_EMU_EFAULT;
		ucontext_t* uc = static_cast<ucontext_t*>(uctx);
		uc->uc_mcontext.gregs[REG_RSP] = greg_t(g_mainSp);
		uc->uc_mcontext.gregs[REG_RIP] = greg_t(&kvq_emu_resume);
		return;
	}
	forwardSignal(sig, info, uctx);
}

static void installFaultHandlers() {
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = onFault;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigfillset(&sa.sa_mask);
	g_faultTid = int64_t(syscall(SYS_gettid));
	for (int i = 0; i < 3; i++) sigaction(kFaultSignals[i], &sa, &g_oldActions[i]);
}

static void restoreFaultHandlers() {
	for (int i = 0; i < 3; i++) sigaction(kFaultSignals[i], &g_oldActions[i], nullptr);
	g_faultTid = 0;
}

// faultMessage describes g_fault.
static std::string faultMessage() {
	std::string what;
	if (g_fault.sig == SIGFPE) {
		what = g_fault.code == FPE_INTDIV   ? "integer division by zero"
		       : g_fault.code == FPE_INTOVF ? "integer overflow in a division"
		                                    : "arithmetic exception (SIGFPE)";
	} else {
		what = format("invalid memory access at 0x%llx", (unsigned long long)g_fault.addr);
		if (g_fault.addr < 4096) what += " (a null pointer)";
		for (unsigned char* st : g_stacks) {
			if (g_fault.addr >= uintptr_t(st) - g_page && g_fault.addr < uintptr_t(st)) {
				what = format("stack overflow: the thread needs more than its %zu KiB of stack (emuSetStackSize)",
				              g_stackSize >> 10);
				break;
			}
		}
	}
	return format("kernel %s, block (%u,%u,%u), thread (%u,%u,%u): %s", L.kernel->name, g_blockIdx.x, g_blockIdx.y,
	              g_blockIdx.z, g_fault.tid.x, g_fault.tid.y, g_fault.tid.z, what.c_str());
}
#endif

// Launch.

// smemGuardIntact checks the guard bytes after a block's dynamic shared
// memory (and restores them for the next block).
static bool smemGuardIntact(int shared) {
	const unsigned char* g = g_smem + shared;
	for (size_t i = 0; i < kGuard; i++) {
		if (g[i] != kGuardByte) {
			memset(g_smem + shared, kGuardByte, kGuard);
			return false;
		}
	}
	return true;
}

static void runBlock() {
	L.head = 0;
	L.count = 0;
	L.arrived = 0;
	L.preds = 0;
	L.done = 0;
	L.loneYields = 0;
	for (Warp& w : L.warps) {
		w.exited = 0;
		for (Group& g : w.groups) g.used = false;
	}
	L.waiters.clear();
	for (unsigned i = 0; i < L.n; i++) {
		initContext(&L.fibers[i]);
		L.waiters.push_back(&L.fibers[i]);
	}
	if (g_schedule == KVQ_EMU_REVERSE)
		for (unsigned i = L.n; i > 0; i--) push(L.waiters[i - 1]);
	else {
		if (g_schedule == KVQ_EMU_RANDOM) shuffle(L.waiters.data(), L.n);
		for (Fiber* f : L.waiters) push(f);
	}
	fromMain(pop());
}

} // namespace kvq_emu

using namespace kvq_emu;

static Kernel* kern(kvq_emu_kernel* k) { return reinterpret_cast<Kernel*>(k); }

extern "C" {

uint64_t kvq_emu_alloc(size_t bytes) {
	size_t rounded = (bytes + 255) & ~size_t(255);
	void* base = nullptr;
	if (rounded < bytes || posix_memalign(&base, 256, kGuard + rounded + kGuard) != 0) return 0;
	unsigned char* p = static_cast<unsigned char*>(base) + kGuard;
	// Not zeroed, as cuMemAlloc: 0xff bytes read as NaN floats and -1 ints.
	memset(p, 0xff, bytes);
	memset(p - kGuard, kGuardByte, kGuard);
	memset(p + bytes, kGuardByte, rounded - bytes + kGuard);
	g_allocs[uintptr_t(p)] = bytes;
	return uint64_t(uintptr_t(p));
}

int kvq_emu_free(uint64_t p) {
	auto it = g_allocs.find(uintptr_t(p));
	if (it == g_allocs.end()) return fail(KVQ_EMU_EINVAL, format("free of 0x%llx: not an allocation", (unsigned long long)p));
	g_allocs.erase(it);
	free(reinterpret_cast<unsigned char*>(uintptr_t(p)) - kGuard);
	return KVQ_EMU_OK;
}

int kvq_emu_htod(uint64_t dst, const void* src, size_t bytes) {
	if (!inside(dst, bytes)) return badRange("copy to device", dst, bytes);
	memcpy(reinterpret_cast<void*>(uintptr_t(dst)), src, bytes);
	return KVQ_EMU_OK;
}

int kvq_emu_dtoh(void* dst, uint64_t src, size_t bytes) {
	if (!inside(src, bytes)) return badRange("copy from device", src, bytes);
	memcpy(dst, reinterpret_cast<const void*>(uintptr_t(src)), bytes);
	return KVQ_EMU_OK;
}

int kvq_emu_dtod(uint64_t dst, uint64_t src, size_t bytes) {
	if (!inside(dst, bytes)) return badRange("device copy to", dst, bytes);
	if (!inside(src, bytes)) return badRange("device copy from", src, bytes);
	memmove(reinterpret_cast<void*>(uintptr_t(dst)), reinterpret_cast<const void*>(uintptr_t(src)), bytes);
	return KVQ_EMU_OK;
}

int kvq_emu_memset8(uint64_t dst, int b, size_t bytes) {
	if (!inside(dst, bytes)) return badRange("memset", dst, bytes);
	memset(reinterpret_cast<void*>(uintptr_t(dst)), b, bytes);
	return KVQ_EMU_OK;
}

kvq_emu_kernel* kvq_emu_find(const char* name) {
	for (Kernel* k : registry())
		if (strcmp(k->name, name) == 0) return reinterpret_cast<kvq_emu_kernel*>(k);
	return nullptr;
}

int kvq_emu_kernel_params(const kvq_emu_kernel* k) { return reinterpret_cast<const Kernel*>(k)->params; }

int kvq_emu_set_max_dynamic_shared(kvq_emu_kernel* k, int bytes) {
	if (bytes < 0 || bytes > kMaxDynShared)
		return fail(KVQ_EMU_EINVAL, format("kernel %s: %d bytes of dynamic shared memory: the device allows at most %d",
		                                   kern(k)->name, bytes, kMaxDynShared));
	kern(k)->maxDynShared = bytes > kDefaultDynShared ? bytes : kDefaultDynShared;
	return KVQ_EMU_OK;
}

int kvq_emu_max_dynamic_shared(void) { return kMaxDynShared; }

int kvq_emu_launch(kvq_emu_kernel* kh, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   int shared, const uint64_t* args, int nargs) {
	Kernel* k = kern(kh);
	if (!k) return fail(KVQ_EMU_EINVAL, "launch of a null kernel");
	if (nargs != k->params)
		return fail(KVQ_EMU_EINVAL,
		            format("kernel %s takes %d parameters, the launch passes %d", k->name, k->params, nargs));
	unsigned long long n = (unsigned long long)bx * by * bz;
	if (bx == 0 || by == 0 || bz == 0 || bx > 1024 || by > 1024 || bz > 64 || n > 1024)
		return fail(KVQ_EMU_EINVAL, format("kernel %s: block (%u,%u,%u): at most 1024 threads, (1024,1024,64) per axis",
		                                   k->name, bx, by, bz));
	if (gx == 0 || gy == 0 || gz == 0 || gx > 0x7fffffffu || gy > 65535 || gz > 65535)
		return fail(KVQ_EMU_EINVAL, format("kernel %s: grid (%u,%u,%u) out of range", k->name, gx, gy, gz));
	if (shared < 0 || shared > k->maxDynShared)
		return fail(KVQ_EMU_EINVAL,
		            format("kernel %s: %d bytes of dynamic shared memory above its limit of %d (raise it with "
		                   "setMaxDynamicShared, up to %d)",
		                   k->name, shared, k->maxDynShared, kMaxDynShared));
	if (!ensureStacks(unsigned(n))) return fail(KVQ_EMU_ENOMEM, "out of memory for thread stacks");
	if (!g_smem) {
		void* p = nullptr;
		if (posix_memalign(&p, 128, kMaxDynShared + kGuard) != 0)
			return fail(KVQ_EMU_ENOMEM, "out of memory for shared memory");
		g_smem = static_cast<unsigned char*>(p);
	}
	// Dynamic shared memory: 0xff bytes, then guard bytes checked after
	// every block.
	memset(g_smem, 0xff, size_t(shared));
	memset(g_smem + shared, kGuardByte, kGuard);
	g_dynSmem = g_smem;

	L.kernel = k;
	L.args = args;
	L.n = unsigned(n);
	L.status = KVQ_EMU_OK;
	L.err.clear();
	L.fibers.resize(n);
	L.ring.resize(n);
	L.waiters.reserve(n + 1);
#ifdef KVQ_EMU_USE_UCONTEXT
	g_ucs.resize(n);
#endif
	for (unsigned i = 0; i < n; i++) {
		Fiber& f = L.fibers[i];
		f.tid = uint3{i % bx, (i / bx) % by, i / (bx * by)};
		f.linear = i;
		f.lane = i % 32;
		f.warp = i / 32;
		f.stack = g_stacks[i];
		f.stackSize = g_stackSize;
#ifdef KVQ_EMU_USE_UCONTEXT
		f.uctx = &g_ucs[i];
#endif
	}
	L.warps.resize((n + 31) / 32);
	for (size_t w = 0; w < L.warps.size(); w++) {
		unsigned live = unsigned(n - w * 32 < 32 ? n - w * 32 : 32);
		L.warps[w].exist = live == 32 ? 0xffffffffu : (1u << live) - 1u;
	}
	g_blockDim = dim3(bx, by, bz);
	g_gridDim = dim3(gx, gy, gz);
	g_launchTid.store(int64_t(syscall(SYS_gettid)));
#ifndef KVQ_EMU_USE_UCONTEXT
	g_fault.happened = false;
	installFaultHandlers();
#endif
	for (unsigned z = 0; z < gz && L.status == KVQ_EMU_OK; z++)
		for (unsigned y = 0; y < gy && L.status == KVQ_EMU_OK; y++)
			for (unsigned x = 0; x < gx && L.status == KVQ_EMU_OK; x++) {
				g_blockIdx = uint3{x, y, z};
				runBlock();
				if (L.status == KVQ_EMU_OK && !smemGuardIntact(shared)) {
					L.status = KVQ_EMU_EFAULT;
					L.err = format("%s: wrote past the end of its %d bytes of dynamic shared memory", where().c_str(),
					               shared);
				}
			}
#ifndef KVQ_EMU_USE_UCONTEXT
	restoreFaultHandlers();
	if (g_fault.happened) L.err = faultMessage();
#endif
	g_launchTid.store(0);
	g_cur = nullptr;
	std::string msg;
	if (!checkGuards(&msg) && L.status == KVQ_EMU_OK) {
		L.status = KVQ_EMU_EFAULT;
		L.err = format("kernel %s: %s", k->name, msg.c_str());
	}
	if (L.status != KVQ_EMU_OK) return fail(L.status, L.err);
	return KVQ_EMU_OK;
}

const char* kvq_emu_error(void) { return g_err.c_str(); }

int kvq_emu_set_stack_size(size_t bytes) {
	size_t page = size_t(sysconf(_SC_PAGESIZE));
	if (bytes < (16 << 10)) return fail(KVQ_EMU_EINVAL, format("stack size %zu below 16 KiB", bytes));
	freeStacks();
	g_page = page;
	g_stackSize = (bytes + page - 1) / page * page;
	return KVQ_EMU_OK;
}

int kvq_emu_set_schedule(int order, uint64_t seed) {
	if (order != KVQ_EMU_FORWARD && order != KVQ_EMU_REVERSE && order != KVQ_EMU_RANDOM)
		return fail(KVQ_EMU_EINVAL, format("unknown schedule %d", order));
	g_schedule = order;
	g_rng = seed;
	return KVQ_EMU_OK;
}

int kvq_emu_catches_faults(void) {
#ifdef KVQ_EMU_USE_UCONTEXT
	return 0;
#else
	return 1;
#endif
}

int64_t kvq_emu_total_memory(void) { return int64_t(sysconf(_SC_PHYS_PAGES)) * int64_t(sysconf(_SC_PAGESIZE)); }

uint64_t kvq_emu_switches(void) { return g_switches; }

int64_t kvq_emu_launch_thread(void) { return g_launchTid.load(); }

} // extern "C"
