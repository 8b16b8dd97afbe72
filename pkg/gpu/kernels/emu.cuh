// emu.cuh: the CUDA built-ins for host C++, so that kvq's kernel sources
// compile with g++ (-std=c++17) and run on the CPU emulator (emu.cpp,
// the cudaemu build). common.cuh includes it when not compiling with nvcc.
//
// Execution model (implemented in emu.cpp):
//   - A launch runs its blocks one after another (x fastest, then y, then
//     z) on the calling OS thread. Within a block every CUDA thread is a
//     fiber with its own stack; fibers are never preempted: a thread runs
//     until it reaches a synchronization point (__syncthreads*, a warp
//     primitive, an mma wrapper, __nanosleep) or returns.
//   - __shared__ is `static`: blocks run one at a time, so a function
//     static is per-block shared memory. It is NOT zeroed between blocks
//     (as on a GPU it holds whatever the previous block left); dynamic
//     shared memory (KVQ_DYN_SMEM) is filled with 0xff bytes (NaN as
//     float) at the start of each launch.
//   - Lanes are threadIdx linearized x fastest; a warp is 32 consecutive
//     linear IDs; the last warp may be partial.
//   - Undefined behaviour that the emulator reports as a launch error
//     (naming the kernel, block and thread) instead of guessing:
//     __syncthreads when some thread of the block has returned, a warp
//     primitive whose mask names a lane that has returned or excludes the
//     caller, an mma wrapper in a partial warp, a block whose threads can
//     no longer progress (deadlock), __trap(), a write within 256 bytes
//     before or after a device allocation or past the launch's dynamic
//     shared memory (guard bytes, checked after each block or launch),
//     and on x86-64 an invalid memory access, a stack overflow (64 KiB
//     per thread by default) or an integer division by zero.
//   - Not detected: reads out of bounds, races between threads (run the
//     tests with -emu.schedule=reverse and random to expose missing
//     barriers), __launch_bounds__ or register limits, static shared
//     memory above 48 KiB, a thread spinning on a flag without
//     __nanosleep (it never yields: the launch hangs), waiting for
//     another block (blocks run one after another).
//
// Provided: the qualifiers, threadIdx/blockIdx/blockDim/gridDim/warpSize,
// the vector types, __half/__nv_bfloat16 and their pairs, the fp16/bf16
// conversions (round to nearest even, bit exact; NaN converts to the
// canonical 0x7fff as CUDA's), __syncthreads(_count/_and/_or), __syncwarp,
// the shuffles, votes, atomics (plain read-modify-write: one thread runs
// at a time), fences, __ldg, the float and integer intrinsics below, and
// kvq_mma_f16_16816/kvq_mma_bf16_16816 (the fragment layout is in
// common.cuh).
#pragma once

#include <math.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

// Qualifiers.
#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static

// Vector types.
struct uint3 {
	unsigned x, y, z;
};
struct int3 {
	int x, y, z;
};
struct float3 {
	float x, y, z;
};
struct dim3 {
	unsigned x, y, z;
	constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
	constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
	constexpr operator uint3() const { return uint3{x, y, z}; }
};
struct __align__(8) float2 {
	float x, y;
};
struct __align__(16) float4 {
	float x, y, z, w;
};
struct __align__(8) int2 {
	int x, y;
};
struct __align__(16) int4 {
	int x, y, z, w;
};
struct __align__(8) uint2 {
	unsigned x, y;
};
struct __align__(16) uint4 {
	unsigned x, y, z, w;
};
struct __align__(16) double2 {
	double x, y;
};
struct __align__(4) char4 {
	signed char x, y, z, w;
};
struct __align__(4) uchar4 {
	unsigned char x, y, z, w;
};
struct __align__(4) short2 {
	short x, y;
};
struct __align__(4) ushort2 {
	unsigned short x, y;
};
static inline float2 make_float2(float x, float y) { return float2{x, y}; }
static inline float3 make_float3(float x, float y, float z) { return float3{x, y, z}; }
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
static inline int2 make_int2(int x, int y) { return int2{x, y}; }
static inline int3 make_int3(int x, int y, int z) { return int3{x, y, z}; }
static inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
static inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
static inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return uint3{x, y, z}; }
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
static inline double2 make_double2(double x, double y) { return double2{x, y}; }
static inline char4 make_char4(signed char x, signed char y, signed char z, signed char w) { return char4{x, y, z, w}; }
static inline uchar4 make_uchar4(unsigned char x, unsigned char y, unsigned char z, unsigned char w) {
	return uchar4{x, y, z, w};
}

// The emulator's runtime, as far as kernels see it (emu.cpp has the
// rest).
namespace kvq_emu {

// Fiber is one emulated CUDA thread.
struct Fiber {
	void* sp;        // saved stack pointer while switched out
	void* uctx;      // ucontext_t when built without the x86-64 switcher
	uint3 tid;       // threadIdx
	unsigned linear; // linear thread ID in the block
	unsigned lane, warp;
	int state; // emu.cpp's fiber states
	const char* waitWhat;
	unsigned char* stack; // lowest usable address
	size_t stackSize;
};

// The running fiber and the launch's geometry.
inline Fiber* g_cur = nullptr;
inline uint3 g_blockIdx;
inline dim3 g_blockDim, g_gridDim;
inline unsigned char* g_dynSmem = nullptr;

// Synchronization, implemented in emu.cpp.
int blockSync(int mode, int pred); // mode: 0 plain, 1 count, 2 and, 3 or
struct Group;
// warpArrive deposits n 8-byte words of the calling lane and waits until
// every lane of mask (that exists) has arrived at a warp operation with
// the same mask; the returned group holds every lane's words until
// warpRelease.
Group* warpArrive(unsigned mask, const uint64_t* words, int n);
const uint64_t* warpWords(const Group* g, unsigned lane); // nullptr: lane not in the group
unsigned warpArrived(const Group* g);
void warpRelease(Group* g);
void yield();
[[noreturn]] void fatal(const char* format, ...) __attribute__((format(printf, 1, 2)));
void mma16816(float d[4], const unsigned a[4], const unsigned b[2], bool bf16);
unsigned activeMask();

// Kernel registry (KVQ_REGISTER).
using AnyFn = void (*)();
using Invoker = void (*)(AnyFn fn, const uint64_t* slots);
struct Kernel {
	const char* name;
	AnyFn fn;
	Invoker invoke;
	int params;
	int maxDynShared;
};
Kernel* registerKernel(const char* name, AnyFn fn, Invoker invoke, int params);

template <class T>
static inline T fromSlot(uint64_t s) {
	static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
	              "kernel parameters must fit an 8-byte slot (pointers, int, long long, float, unsigned)");
	T v;
	std::memcpy(&v, &s, sizeof(T)); // little-endian: the low bytes
	return v;
}

template <class... A>
struct Launcher {
	template <size_t... I>
	static void call(void (*f)(A...), const uint64_t* s, std::index_sequence<I...>) {
		f(fromSlot<A>(s[I])...);
	}
	static void invoke(AnyFn fn, const uint64_t* s) {
		call(reinterpret_cast<void (*)(A...)>(fn), s, std::index_sequence_for<A...>{});
	}
};

template <class... A>
static inline Kernel* makeKernel(const char* name, void (*f)(A...)) {
	return registerKernel(name, reinterpret_cast<AnyFn>(f), &Launcher<A...>::invoke, int(sizeof...(A)));
}

// fp16 and bf16 conversions (round to nearest even; NaN → 0x7fff).
static inline uint32_t bitsOf(float f) {
	uint32_t u;
	std::memcpy(&u, &f, 4);
	return u;
}
static inline float floatOf(uint32_t u) {
	float f;
	std::memcpy(&f, &u, 4);
	return f;
}
static inline uint16_t f2h(float f) {
	uint32_t u = bitsOf(f);
	uint16_t sign = uint16_t((u >> 16) & 0x8000u);
	u &= 0x7fffffffu;
	if (u > 0x7f800000u) return 0x7fffu; // NaN
	if (u >= 0x477ff000u) return sign | 0x7c00u; // ≥ 65520 (the midpoint above 65504): inf
	if (u >= 0x38800000u) { // normal half (≥ 2^-14): rebias, round 13 bits away
		uint32_t r = u - 0x38000000u;
		return uint16_t(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
	}
	if (u <= 0x33000000u) return sign; // ≤ 2^-25 (a tie to 0 at 2^-25)
	// Subnormal half: the value in units of 2^-24, rounded.
	uint32_t e = u >> 23, m = (u & 0x7fffffu) | 0x800000u;
	uint32_t shift = 126u - e; // 14..24
	uint32_t h = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
	if (rem > half || (rem == half && (h & 1u))) h++;
	return uint16_t(sign | h);
}
static inline float h2f(uint16_t h) {
	uint32_t sign = uint32_t(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
	if (e == 0x1f) return floatOf(m ? 0x7fffffffu : (sign | 0x7f800000u));
	if (e == 0) {
		if (m == 0) return floatOf(sign);
		e = 1;
		while (!(m & 0x400u)) {
			m <<= 1;
			e--;
		}
		m &= 0x3ffu;
	}
	return floatOf(sign | ((e + 112u) << 23) | (m << 13));
}
// d2h rounds a double once: to float with round-to-odd (which keeps the
// information for the second rounding), then to half.
static inline uint16_t d2h(double d) {
	if (std::isnan(d)) return 0x7fffu;
	float f = float(d);
	if (std::fabs(double(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
	if (double(f) != d) f = floatOf(bitsOf(f) | 1u);
	return f2h(f);
}
static inline uint16_t f2bf(float f) {
	uint32_t u = bitsOf(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
	return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static inline float bf2f(uint16_t b) { return floatOf(uint32_t(b) << 16); }
static inline uint16_t d2bf(double d) {
	if (std::isnan(d)) return 0x7fffu;
	float f = float(d);
	if (std::fabs(double(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
	if (double(f) != d) f = floatOf(bitsOf(f) | 1u);
	return f2bf(f);
}

} // namespace kvq_emu

// Built-in variables (read-only views of the running fiber's values).
#define threadIdx (static_cast<const uint3&>(kvq_emu::g_cur->tid))
#define blockIdx (static_cast<const uint3&>(kvq_emu::g_blockIdx))
#define blockDim (static_cast<const dim3&>(kvq_emu::g_blockDim))
#define gridDim (static_cast<const dim3&>(kvq_emu::g_gridDim))
static constexpr int warpSize = 32;

#define KVQ_DYN_SMEM(T, name) T* name = reinterpret_cast<T*>(kvq_emu_dyn_smem())
static inline void* kvq_emu_dyn_smem() { return kvq_emu::g_dynSmem; }

// KVQ_REGISTER records a kernel under its name, with a launcher deduced
// from its parameter types.
#define KVQ_REGISTER(name) \
	[[maybe_unused]] static kvq_emu::Kernel* const kvq_emu_kernel_##name = kvq_emu::makeKernel(#name, &name);

// fp16 and bf16.
struct __align__(2) __half {
	unsigned short __x;
	__half() = default;
	__half(float f) : __x(kvq_emu::f2h(f)) {}
	__half(double d) : __x(kvq_emu::d2h(d)) {}
	__half(int v) : __x(kvq_emu::f2h(float(v))) {}
	__half(unsigned v) : __x(kvq_emu::f2h(float(v))) {}
	__half(long long v) : __x(kvq_emu::f2h(float(v))) {}
	operator float() const { return kvq_emu::h2f(__x); }
};
struct __align__(2) __nv_bfloat16 {
	unsigned short __x;
	__nv_bfloat16() = default;
	__nv_bfloat16(float f) : __x(kvq_emu::f2bf(f)) {}
	__nv_bfloat16(double d) : __x(kvq_emu::d2bf(d)) {}
	__nv_bfloat16(int v) : __x(kvq_emu::d2bf(double(v))) {}
	__nv_bfloat16(unsigned v) : __x(kvq_emu::d2bf(double(v))) {}
	__nv_bfloat16(long long v) : __x(kvq_emu::d2bf(double(v))) {}
	operator float() const { return kvq_emu::bf2f(__x); }
};
struct __align__(4) __half2 {
	__half x, y;
};
struct __align__(4) __nv_bfloat162 {
	__nv_bfloat16 x, y;
};
typedef __half half;
typedef __half2 half2;
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;

static inline unsigned short __half_as_ushort(__half h) { return h.__x; }
static inline __half __ushort_as_half(unsigned short u) {
	__half h;
	h.__x = u;
	return h;
}
static inline float __half2float(__half h) { return kvq_emu::h2f(h.__x); }
static inline __half __float2half(float f) { return __ushort_as_half(kvq_emu::f2h(f)); }
static inline __half __float2half_rn(float f) { return __ushort_as_half(kvq_emu::f2h(f)); }
static inline __half __double2half(double d) { return __ushort_as_half(kvq_emu::d2h(d)); }
static inline __half2 __halves2half2(__half lo, __half hi) { return __half2{lo, hi}; }
static inline __half2 __floats2half2_rn(float lo, float hi) { return __half2{__float2half_rn(lo), __float2half_rn(hi)}; }
static inline __half2 __float2half2_rn(float f) { return __half2{__float2half_rn(f), __float2half_rn(f)}; }
static inline __half2 __float22half2_rn(float2 f) { return __floats2half2_rn(f.x, f.y); }
static inline float2 __half22float2(__half2 h) { return float2{__half2float(h.x), __half2float(h.y)}; }
static inline __half __low2half(__half2 h) { return h.x; }
static inline __half __high2half(__half2 h) { return h.y; }
static inline float __low2float(__half2 h) { return __half2float(h.x); }
static inline float __high2float(__half2 h) { return __half2float(h.y); }

static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.__x; }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) {
	__nv_bfloat16 b;
	b.__x = u;
	return b;
}
static inline float __bfloat162float(__nv_bfloat16 b) { return kvq_emu::bf2f(b.__x); }
static inline __nv_bfloat16 __float2bfloat16(float f) { return __ushort_as_bfloat16(kvq_emu::f2bf(f)); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __ushort_as_bfloat16(kvq_emu::f2bf(f)); }
static inline __nv_bfloat16 __double2bfloat16(double d) { return __ushort_as_bfloat16(kvq_emu::d2bf(d)); }
static inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 lo, __nv_bfloat16 hi) { return __nv_bfloat162{lo, hi}; }
static inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) {
	return __nv_bfloat162{__float2bfloat16_rn(lo), __float2bfloat16_rn(hi)};
}
static inline __nv_bfloat162 __float22bfloat162_rn(float2 f) { return __floats2bfloat162_rn(f.x, f.y); }
static inline float2 __bfloat1622float2(__nv_bfloat162 b) {
	return float2{__bfloat162float(b.x), __bfloat162float(b.y)};
}
static inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 b) { return b.x; }
static inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 b) { return b.y; }

static inline __half2 make_half2(__half x, __half y) { return __half2{x, y}; }
static inline __half2 __half2half2(__half h) { return __half2{h, h}; }
static inline __half2 __lows2half2(__half2 a, __half2 b) { return __half2{a.x, b.x}; }
static inline __half2 __highs2half2(__half2 a, __half2 b) { return __half2{a.y, b.y}; }
static inline __nv_bfloat162 make_bfloat162(__nv_bfloat16 x, __nv_bfloat16 y) { return __nv_bfloat162{x, y}; }
static inline __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 b) { return __nv_bfloat162{b, b}; }
static inline int __hisnan(__half h) { return (h.__x & 0x7fffu) > 0x7c00u; }
static inline int __hisinf(__half h) { return (h.__x & 0x7fffu) == 0x7c00u ? (h.__x >> 15 ? -1 : 1) : 0; }
static inline __half __int2half_rn(int i) { return __ushort_as_half(kvq_emu::d2h(double(i))); }
static inline int __half2int_rn(__half h) { return int(std::nearbyint(kvq_emu::h2f(h.__x))); }
static inline int __half2int_rz(__half h) { return int(kvq_emu::h2f(h.__x)); }

// fp16 and bf16 arithmetic: computed exactly in double (sums, products
// and their fma are exact or nearly so there) and rounded once to the
// 16-bit format, as the GPU rounds.
#define KVQ_EMU_H_ARITH(T, D2X, X2D, U2T)                                                                \
	static inline T __hadd(T a, T b) { return U2T(D2X(X2D(a.__x) + X2D(b.__x))); }                     \
	static inline T __hsub(T a, T b) { return U2T(D2X(X2D(a.__x) - X2D(b.__x))); }                     \
	static inline T __hmul(T a, T b) { return U2T(D2X(X2D(a.__x) * X2D(b.__x))); }                     \
	static inline T __hdiv(T a, T b) { return U2T(D2X(X2D(a.__x) / X2D(b.__x))); }                     \
	static inline T __hfma(T a, T b, T c) { return U2T(D2X(std::fma(X2D(a.__x), X2D(b.__x), X2D(c.__x)))); } \
	static inline T __hneg(T a) { return U2T(uint16_t(a.__x ^ 0x8000u)); }                             \
	static inline T __habs(T a) { return U2T(uint16_t(a.__x & 0x7fffu)); }                             \
	static inline T __hmax(T a, T b) { return X2D(a.__x) >= X2D(b.__x) || std::isnan(X2D(b.__x)) ? a : b; } \
	static inline T __hmin(T a, T b) { return X2D(a.__x) <= X2D(b.__x) || std::isnan(X2D(b.__x)) ? a : b; } \
	static inline bool __heq(T a, T b) { return X2D(a.__x) == X2D(b.__x); }                            \
	static inline bool __hne(T a, T b) { return X2D(a.__x) != X2D(b.__x); }                            \
	static inline bool __hlt(T a, T b) { return X2D(a.__x) < X2D(b.__x); }                             \
	static inline bool __hle(T a, T b) { return X2D(a.__x) <= X2D(b.__x); }                            \
	static inline bool __hgt(T a, T b) { return X2D(a.__x) > X2D(b.__x); }                             \
	static inline bool __hge(T a, T b) { return X2D(a.__x) >= X2D(b.__x); }
#define KVQ_EMU_H2_ARITH(T2)                                                                                \
	static inline T2 __hadd2(T2 a, T2 b) { return T2{__hadd(a.x, b.x), __hadd(a.y, b.y)}; }               \
	static inline T2 __hsub2(T2 a, T2 b) { return T2{__hsub(a.x, b.x), __hsub(a.y, b.y)}; }               \
	static inline T2 __hmul2(T2 a, T2 b) { return T2{__hmul(a.x, b.x), __hmul(a.y, b.y)}; }               \
	static inline T2 __h2div(T2 a, T2 b) { return T2{__hdiv(a.x, b.x), __hdiv(a.y, b.y)}; }               \
	static inline T2 __hfma2(T2 a, T2 b, T2 c) { return T2{__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)}; } \
	static inline T2 __hneg2(T2 a) { return T2{__hneg(a.x), __hneg(a.y)}; }                               \
	static inline T2 __habs2(T2 a) { return T2{__habs(a.x), __habs(a.y)}; }                               \
	static inline T2 __hmax2(T2 a, T2 b) { return T2{__hmax(a.x, b.x), __hmax(a.y, b.y)}; }               \
	static inline T2 __hmin2(T2 a, T2 b) { return T2{__hmin(a.x, b.x), __hmin(a.y, b.y)}; }
namespace kvq_emu {
static inline double h2d(uint16_t h) { return double(h2f(h)); }
static inline double bf2d(uint16_t b) { return double(bf2f(b)); }
} // namespace kvq_emu
KVQ_EMU_H_ARITH(__half, kvq_emu::d2h, kvq_emu::h2d, __ushort_as_half)
KVQ_EMU_H_ARITH(__nv_bfloat16, kvq_emu::d2bf, kvq_emu::bf2d, __ushort_as_bfloat16)
KVQ_EMU_H2_ARITH(__half2)
KVQ_EMU_H2_ARITH(__nv_bfloat162)
#undef KVQ_EMU_H_ARITH
#undef KVQ_EMU_H2_ARITH

// Bit casts.
static inline unsigned __float_as_uint(float f) { return kvq_emu::bitsOf(f); }
static inline float __uint_as_float(unsigned u) { return kvq_emu::floatOf(u); }
static inline int __float_as_int(float f) { return int(kvq_emu::bitsOf(f)); }
static inline float __int_as_float(int i) { return kvq_emu::floatOf(unsigned(i)); }
static inline long long __double_as_longlong(double d) {
	long long v;
	std::memcpy(&v, &d, 8);
	return v;
}
static inline double __longlong_as_double(long long v) {
	double d;
	std::memcpy(&d, &v, 8);
	return d;
}

// Math. <cmath> has the standard functions (expf, exp2f, logf, sqrtf,
// fmaxf, fminf, fabsf, fmaf, sinf, cosf, sincosf, sin, cos, sincos, exp,
// ...); the fast intrinsics are the accurate functions here, so a kernel
// that tests against the emulator must allow the GPU's intrinsic error.
// The common constants of CUDA's math_constants.h (which common.cuh
// includes under nvcc), with its values.
#ifndef CUDART_INF_F
#define CUDART_INF_F INFINITY
#define CUDART_NAN_F __uint_as_float(0x7fffffffu)
#define CUDART_MAX_NORMAL_F __uint_as_float(0x7f7fffffu)
#define CUDART_NEG_ZERO_F __uint_as_float(0x80000000u)
#define CUDART_ZERO_F 0.0F
#define CUDART_ONE_F 1.0F
#define CUDART_PI_F 3.141592654F
#define CUDART_L2E_F 1.442695041F
#define CUDART_L2T_F 3.321928094F
#define CUDART_LN2_F 0.693147181F
#define CUDART_LNT_F 2.302585093F
#define CUDART_INF (double(INFINITY))
#define CUDART_NAN __longlong_as_double(0xfff8000000000000LL)
#define CUDART_PI 3.1415926535897931e+0
#endif
// glibc's math.h declares __expf, __exp10f, __logf, __log2f, __log10f,
// __powf, __sinf, __cosf, __tanf and __sincosf itself (its internal names
// of the same functions), so CUDA's fast intrinsics of those names are
// glibc's accurate functions here.
static inline float __fdividef(float a, float b) { return a / b; }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; } // NaN → 0
static inline float __int2float_rn(int i) { return float(i); }
static inline float __uint2float_rn(unsigned u) { return float(u); }
static inline float __ll2float_rn(long long i) { return float(i); }
// Float to integer as the GPU does it: NaN → 0, saturating at the range.
template <class I>
static inline I kvq_emu_f2i(double r) {
	if (std::isnan(r)) return 0;
	if (r <= double(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
	if (r >= double(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
	return I(r);
}
static inline int __float2int_rn(float x) { return kvq_emu_f2i<int>(std::nearbyint(double(x))); }
static inline int __float2int_rz(float x) { return kvq_emu_f2i<int>(std::trunc(double(x))); }
static inline int __float2int_rd(float x) { return kvq_emu_f2i<int>(std::floor(double(x))); }
static inline int __float2int_ru(float x) { return kvq_emu_f2i<int>(std::ceil(double(x))); }
static inline unsigned __float2uint_rn(float x) { return kvq_emu_f2i<unsigned>(std::nearbyint(double(x))); }
static inline unsigned __float2uint_rz(float x) { return kvq_emu_f2i<unsigned>(std::trunc(double(x))); }
static inline long long __float2ll_rn(float x) { return kvq_emu_f2i<long long>(std::nearbyint(double(x))); }
static inline long long __float2ll_rz(float x) { return kvq_emu_f2i<long long>(std::trunc(double(x))); }

// min and max as CUDA overloads them.
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline unsigned min(int a, unsigned b) { return min(unsigned(a), b); }
static inline unsigned max(int a, unsigned b) { return max(unsigned(a), b); }
static inline unsigned min(unsigned a, int b) { return min(a, unsigned(b)); }
static inline unsigned max(unsigned a, int b) { return max(a, unsigned(b)); }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }

// Integer intrinsics.
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x ? __builtin_clz(unsigned(x)) : 32; }
static inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned __brev(unsigned x) {
	x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
	x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
	x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
	x = ((x >> 8) & 0x00ff00ffu) | ((x & 0x00ff00ffu) << 8);
	return (x >> 16) | (x << 16);
}
static inline int __mulhi(int a, int b) { return int((long long)a * b >> 32); }
static inline unsigned __umulhi(unsigned a, unsigned b) { return unsigned((unsigned long long)a * b >> 32); }
static inline long long __mul64hi(long long a, long long b) { return (long long)((__int128)a * b >> 64); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
	return (unsigned long long)((unsigned __int128)a * b >> 64);
}

// Memory: loads, fences. Threads run one at a time, so a fence only has to
// keep the compiler from moving memory accesses across it.
// Loads and stores with cache hints are plain accesses.
template <class T>
static inline T __ldg(const T* p) {
	return *p;
}
template <class T>
static inline T __ldca(const T* p) {
	return *p;
}
template <class T>
static inline T __ldcg(const T* p) {
	return *p;
}
template <class T>
static inline T __ldcs(const T* p) {
	return *p;
}
template <class T>
static inline T __ldlu(const T* p) {
	return *p;
}
template <class T>
static inline T __ldcv(const T* p) {
	return *p;
}
template <class T>
static inline void __stcg(T* p, T v) {
	*p = v;
}
template <class T>
static inline void __stcs(T* p, T v) {
	*p = v;
}
template <class T>
static inline void __stwb(T* p, T v) {
	*p = v;
}
template <class T>
static inline void __stwt(T* p, T v) {
	*p = v;
}
// clock64 counts the calls (a cycle counter means nothing here).
static inline long long clock64() {
	static long long ticks;
	return ++ticks;
}
static inline void __threadfence() { __asm__ __volatile__("" ::: "memory"); }
static inline void __threadfence_block() { __asm__ __volatile__("" ::: "memory"); }
static inline void __threadfence_system() { __asm__ __volatile__("" ::: "memory"); }

// Block and warp synchronization.
static inline void __syncthreads() { kvq_emu::blockSync(0, 0); }
static inline int __syncthreads_count(int pred) { return kvq_emu::blockSync(1, pred); }
static inline int __syncthreads_and(int pred) { return kvq_emu::blockSync(2, pred); }
static inline int __syncthreads_or(int pred) { return kvq_emu::blockSync(3, pred); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) {
	kvq_emu::warpRelease(kvq_emu::warpArrive(mask, nullptr, 0));
}
static inline unsigned __activemask() { return kvq_emu::activeMask(); }
// __nanosleep lets the other threads of the block run (the emulator's only
// way to wait for a flag set by another thread).
static inline void __nanosleep(unsigned) { kvq_emu::yield(); }
[[noreturn]] static inline void __trap() { kvq_emu::fatal("__trap() called"); }
// assert in a kernel fails the launch (the host's would abort the
// process). A kernel source that includes <cassert> or <assert.h> itself
// after common.cuh gets the host's back.
#include <cassert>
#undef assert
#ifdef NDEBUG
#define assert(e) ((void)0)
#else
#define assert(e) ((e) ? (void)0 : kvq_emu::fatal("assertion %s failed (%s:%d)", #e, __FILE__, __LINE__))
#endif

namespace kvq_emu {
// shuffle exchanges v over mask and returns lane src's value when valid
// (PTX shfl.sync's rules: the source must lie in the caller's segment of
// width lanes), else the caller's own.
template <class T>
static inline T shuffle(unsigned mask, T v, int mode, int b, int width) {
	static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of a type over 8 bytes");
	uint64_t w = 0;
	std::memcpy(&w, &v, sizeof(T));
	Group* g = warpArrive(mask, &w, 1);
	int lane = int(g_cur->lane);
	if (width <= 0 || width > 32 || (width & (width - 1))) width = 32;
	int segStart = lane & ~(width - 1), segEnd = segStart + width - 1, j = 0;
	bool ok = false;
	switch (mode) {
	case 0: // idx
		j = segStart + (b & (width - 1));
		ok = true;
		break;
	case 1: // up
		j = lane - b;
		ok = j >= segStart;
		break;
	case 2: // down
		j = lane + b;
		ok = j <= segEnd;
		break;
	default: // xor
		j = lane ^ (b & 31);
		ok = j <= segEnd && j >= segStart;
		break;
	}
	const uint64_t* src = ok ? warpWords(g, unsigned(j)) : nullptr;
	if (src) w = src[0];
	warpRelease(g);
	T out;
	std::memcpy(&out, &w, sizeof(T));
	return out;
}
static inline unsigned vote(unsigned mask, int pred) {
	uint64_t w = pred != 0;
	Group* g = warpArrive(mask, &w, 1);
	unsigned bits = 0, in = warpArrived(g);
	for (unsigned l = 0; l < 32; l++)
		if ((in >> l & 1u) && warpWords(g, l)[0]) bits |= 1u << l;
	warpRelease(g);
	return bits;
}
} // namespace kvq_emu

template <class T>
static inline T __shfl_sync(unsigned mask, T v, int srcLane, int width = 32) {
	return kvq_emu::shuffle(mask, v, 0, srcLane, width);
}
template <class T>
static inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
	return kvq_emu::shuffle(mask, v, 1, int(delta), width);
}
template <class T>
static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
	return kvq_emu::shuffle(mask, v, 2, int(delta), width);
}
template <class T>
static inline T __shfl_xor_sync(unsigned mask, T v, int laneMask, int width = 32) {
	return kvq_emu::shuffle(mask, v, 3, laneMask, width);
}
static inline unsigned __ballot_sync(unsigned mask, int pred) { return kvq_emu::vote(mask, pred); }
static inline int __any_sync(unsigned mask, int pred) { return kvq_emu::vote(mask, pred) != 0; }
static inline int __all_sync(unsigned mask, int pred) {
	unsigned in = mask & kvq_emu::activeMask();
	return (kvq_emu::vote(mask, pred) & in) == in;
}

// Atomics: one thread runs at a time, so a plain read-modify-write is
// atomic.
#define KVQ_EMU_ATOMIC(name, T, expr) \
	static inline T name(T* p, T v) { \
		T old = *p; \
		*p = (expr); \
		return old; \
	}
KVQ_EMU_ATOMIC(atomicAdd, int, old + v)
KVQ_EMU_ATOMIC(atomicAdd, unsigned, old + v)
KVQ_EMU_ATOMIC(atomicAdd, unsigned long long, old + v)
KVQ_EMU_ATOMIC(atomicAdd, float, old + v)
KVQ_EMU_ATOMIC(atomicAdd, double, old + v)
KVQ_EMU_ATOMIC(atomicSub, int, old - v)
KVQ_EMU_ATOMIC(atomicSub, unsigned, old - v)
KVQ_EMU_ATOMIC(atomicExch, int, v)
KVQ_EMU_ATOMIC(atomicExch, unsigned, v)
KVQ_EMU_ATOMIC(atomicExch, unsigned long long, v)
KVQ_EMU_ATOMIC(atomicExch, float, v)
KVQ_EMU_ATOMIC(atomicMax, int, old > v ? old : v)
KVQ_EMU_ATOMIC(atomicMax, unsigned, old > v ? old : v)
KVQ_EMU_ATOMIC(atomicMax, long long, old > v ? old : v)
KVQ_EMU_ATOMIC(atomicMax, unsigned long long, old > v ? old : v)
KVQ_EMU_ATOMIC(atomicMin, int, old < v ? old : v)
KVQ_EMU_ATOMIC(atomicMin, unsigned, old < v ? old : v)
KVQ_EMU_ATOMIC(atomicMin, long long, old < v ? old : v)
KVQ_EMU_ATOMIC(atomicMin, unsigned long long, old < v ? old : v)
KVQ_EMU_ATOMIC(atomicAnd, int, old & v)
KVQ_EMU_ATOMIC(atomicAnd, unsigned, old & v)
KVQ_EMU_ATOMIC(atomicAnd, unsigned long long, old & v)
KVQ_EMU_ATOMIC(atomicOr, int, old | v)
KVQ_EMU_ATOMIC(atomicOr, unsigned, old | v)
KVQ_EMU_ATOMIC(atomicOr, unsigned long long, old | v)
KVQ_EMU_ATOMIC(atomicXor, int, old ^ v)
KVQ_EMU_ATOMIC(atomicXor, unsigned, old ^ v)
KVQ_EMU_ATOMIC(atomicXor, unsigned long long, old ^ v)
KVQ_EMU_ATOMIC(atomicInc, unsigned, old >= v ? 0u : old + 1u)
KVQ_EMU_ATOMIC(atomicDec, unsigned, (old == 0u || old > v) ? v : old - 1u)
#undef KVQ_EMU_ATOMIC
#define KVQ_EMU_CAS(T) \
	static inline T atomicCAS(T* p, T cmp, T v) { \
		T old = *p; \
		if (old == cmp) *p = v; \
		return old; \
	}
KVQ_EMU_CAS(int)
KVQ_EMU_CAS(unsigned)
KVQ_EMU_CAS(unsigned long long)
KVQ_EMU_CAS(unsigned short)
#undef KVQ_EMU_CAS

// Tensor cores: warp-collective d += a·b on an m16n8k16 tile (layout in
// common.cuh). Products of the fp16/bf16 values are exact in fp32 and are
// accumulated in fp32, k ascending, onto d.
static inline void kvq_mma_f16_16816(float d[4], const unsigned a[4], const unsigned b[2]) {
	kvq_emu::mma16816(d, a, b, false);
}
static inline void kvq_mma_bf16_16816(float d[4], const unsigned a[4], const unsigned b[2]) {
	kvq_emu::mma16816(d, a, b, true);
}
