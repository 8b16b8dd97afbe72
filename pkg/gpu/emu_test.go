//go:build cudaemu && !cuda

package gpu

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// The emulator's self-tests: they run the test kernels of
// kernels/emutest.cu through the driver directly.

// emuScheduleFlag runs every test of the package (the backend's too)
// with the threads of each block in another order:
//
//	go test -tags cudaemu ./pkg/gpu -args -emu.schedule=random:7
var emuScheduleFlag = flag.String("emu.schedule", "forward",
	"order of the emulator's threads: forward, reverse or random[:seed]")

func init() { emuOpenHook = applyScheduleFlag }

var scheduleApplied sync.Once

// applyScheduleFlag sets the schedule of -emu.schedule once, at the
// first openDriver (after flag parsing).
func applyScheduleFlag() error {
	var err error
	scheduleApplied.Do(func() {
		name, seedText, _ := strings.Cut(*emuScheduleFlag, ":")
		seed := uint64(1)
		if seedText != "" {
			if seed, err = strconv.ParseUint(seedText, 10, 64); err != nil {
				err = fmt.Errorf("-emu.schedule %q: %w", *emuScheduleFlag, err)
				return
			}
		}
		s, ok := map[string]emuSchedule{"forward": emuForward, "reverse": emuReverse, "random": emuRandom}[name]
		if !ok {
			err = fmt.Errorf("-emu.schedule %q: want forward, reverse or random[:seed]", *emuScheduleFlag)
			return
		}
		err = emuSetSchedule(s, seed)
	})
	return err
}

// emu is a test's driver with helpers.
type emu struct {
	t testing.TB
	d driver
}

func newEmu(t testing.TB) *emu {
	t.Helper()
	d, err := openDriver(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.close)
	return &emu{t: t, d: d}
}

// upload copies v to a new device buffer.
func upload[T any](e *emu, v []T) devptr {
	e.t.Helper()
	var z T
	n := int64(len(v)) * int64(unsafe.Sizeof(z))
	p, err := e.d.alloc(max(n, 1))
	if err != nil {
		e.t.Fatal(err)
	}
	if n > 0 {
		if err := e.d.htod(p, unsafe.Pointer(&v[0]), n); err != nil {
			e.t.Fatal(err)
		}
	}
	return p
}

// download copies len(dst) values from p.
func download[T any](e *emu, dst []T, p devptr) {
	e.t.Helper()
	var z T
	if err := e.d.dtoh(unsafe.Pointer(&dst[0]), p, int64(len(dst))*int64(unsafe.Sizeof(z))); err != nil {
		e.t.Fatal(err)
	}
}

// zeros allocates n zeroed values of T.
func zeros[T any](e *emu, n int) devptr { return upload(e, make([]T, n)) }

// run launches the named kernel and returns its error.
func (e *emu) run(name string, grid, block dim3, shared int, a args) error {
	e.t.Helper()
	k, err := e.d.function(name)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.d.launch(k, grid, block, shared, a)
}

// mustRun launches the named kernel and fails the test on error.
func (e *emu) mustRun(name string, grid, block dim3, shared int, a args) {
	e.t.Helper()
	if err := e.run(name, grid, block, shared, a); err != nil {
		e.t.Fatalf("%s: %v", name, err)
	}
}

func d1(x uint32) dim3 { return dim3{x, 1, 1} }

func (a args) u32(v uint32) args { return append(a, uint64(v)) }
func (a args) i64(v int64) args  { return append(a, uint64(v)) }

func TestEmuDevice(t *testing.T) {
	devs, err := probeDevices()
	if err != nil || len(devs) != 1 || devs[0].Name != "kvq CPU emulator" {
		t.Fatalf("probeDevices() = %+v, %v, want one kvq CPU emulator", devs, err)
	}
	if _, err := openDriver(Options{Device: 1}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("openDriver(Device: 1) = %v, want ErrUnavailable", err)
	}
	e := newEmu(t)
	if _, err := e.d.function("emutest_nonexistent"); err == nil {
		t.Error(`function("emutest_nonexistent") succeeded`)
	}
	// A wrong parameter count is refused.
	if err := e.run("emutest_vadd", d1(1), d1(1), 0, args{}.int(1)); !errors.Is(err, errEmuInvalid) {
		t.Errorf("launch with 1 of 4 parameters = %v, want errEmuInvalid", err)
	}
}

func TestEmuCopies(t *testing.T) {
	e := newEmu(t)
	v := []byte("0123456789abcdef0123456789")
	p := upload(e, v)
	if err := e.d.memset8(p+2, 'x', 3); err != nil {
		t.Fatal(err)
	}
	if err := e.d.dtod(p+10, p, 6); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(v))
	download(e, got, p)
	if want := "01xxx5678901xxx50123456789"; string(got) != want {
		t.Errorf("after memset8 and dtod: %q, want %q", got, want)
	}
	for _, c := range []struct {
		name string
		err  error
	}{
		{"dtoh past the end", e.d.dtoh(unsafe.Pointer(&got[0]), p+1, int64(len(v)))},
		{"htod past the end", e.d.htod(p+devptr(len(v)), unsafe.Pointer(&got[0]), 1)},
		{"dtod from an unknown address", e.d.dtod(p, 8, 1)},
		{"memset8 past the end", e.d.memset8(p, 0, int64(len(v))+1)},
	} {
		if !errors.Is(c.err, errEmuInvalid) {
			t.Errorf("%s: %v, want errEmuInvalid", c.name, c.err)
		}
	}
	// Fresh memory is not zeroed, as on a GPU: 0xff bytes (NaN floats).
	q, err := e.d.alloc(16)
	if err != nil {
		t.Fatal(err)
	}
	f := make([]float32, 4)
	download(e, f, q)
	if !math.IsNaN(float64(f[0])) {
		t.Errorf("fresh allocation reads %v, want NaN", f)
	}
}

func TestEmuVectorAdd(t *testing.T) {
	e := newEmu(t)
	const n = 10000
	a, b := make([]float32, n), make([]float32, n)
	for i := range a {
		a[i], b[i] = float32(i), float32(2*i)+0.5
	}
	pa, pb, pc := upload(e, a), upload(e, b), zeros[float32](e, n)
	e.mustRun("emutest_vadd", d1(blocks(n, 256)), d1(256), 0, args{}.ptr(pa).ptr(pb).ptr(pc).int(n))
	c := make([]float32, n)
	download(e, c, pc)
	for i := range c {
		if c[i] != a[i]+b[i] {
			t.Fatalf("c[%d] = %v, want %v", i, c[i], a[i]+b[i])
		}
	}
}

func TestEmuIndexing(t *testing.T) {
	e := newEmu(t)
	grid, block := dim3{3, 2, 2}, dim3{4, 3, 2}
	nb, nt := 12, 24
	out, order, counter := zeros[int32](e, 6*nb*nt), zeros[int32](e, nb), zeros[uint32](e, 1)
	e.mustRun("emutest_index", grid, block, 0, args{}.ptr(out).ptr(order).ptr(counter))
	got := make([]int32, 6*nb*nt)
	download(e, got, out)
	i := 0
	for bz := range 2 {
		for by := range 2 {
			for bx := range 3 {
				for tz := range 2 {
					for ty := range 3 {
						for tx := range 4 {
							want := []int32{int32(tx), int32(ty), int32(tz), int32(bx), int32(by), int32(bz)}
							if g := got[6*i : 6*i+6]; fmt.Sprint(g) != fmt.Sprint(want) {
								t.Fatalf("thread %d: threadIdx, blockIdx = %v, want %v", i, g, want)
							}
							i++
						}
					}
				}
			}
		}
	}
	ord := make([]int32, nb)
	download(e, ord, order)
	for b, o := range ord {
		if int(o) != b {
			t.Fatalf("block order %v, want blocks in order x fastest", ord)
		}
	}
}

func TestEmuBlockSum(t *testing.T) {
	e := newEmu(t)
	for _, threads := range []int{32, 64, 256, 1024} {
		t.Run(fmt.Sprint(threads), func(t *testing.T) {
			n := 3*threads + 5
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(i % 17)
			}
			nb := int(blocks(n, threads))
			px, pout := upload(e, x), zeros[float32](e, nb)
			e.mustRun("emutest_block_sum", d1(uint32(nb)), d1(uint32(threads)), 0, args{}.ptr(px).ptr(pout).int(n))
			got := make([]float32, nb)
			download(e, got, pout)
			for b := range nb {
				var want float32
				for i := b * threads; i < min(n, (b+1)*threads); i++ {
					want += x[i]
				}
				if got[b] != want {
					t.Errorf("block %d: sum %v, want %v", b, got[b], want)
				}
			}
		})
	}
	for _, block := range []dim3{{1025, 1, 1}, {32, 32, 2}, {1, 1, 65}, {0, 1, 1}} {
		if err := e.run("emutest_block_sum", d1(1), block, 0, args{}.ptr(0).ptr(0).int(0)); !errors.Is(err, errEmuInvalid) {
			t.Errorf("block %v: %v, want errEmuInvalid", block, err)
		}
	}
}

func TestEmuSyncVotes(t *testing.T) {
	e := newEmu(t)
	const n = 100
	out := zeros[int32](e, 3*n)
	e.mustRun("emutest_syncvotes", d1(1), d1(n), 0, args{}.ptr(out))
	got := make([]int32, 3*n)
	download(e, got, out)
	for i := range n {
		if g := got[3*i : 3*i+3]; g[0] != 34 || g[1] != 1 || g[2] != 1 {
			t.Fatalf("thread %d: count, and, or = %v, want [34 1 1]", i, g)
		}
	}
}

// refShuffle is PTX shfl.sync on one block of nt threads: the source lane
// must lie in the caller's segment of width lanes and exist, else the
// caller keeps its own value (the emulator's choice where CUDA leaves it
// undefined).
func refShuffle(in []int32, nt, width, delta int) [][]int32 {
	rows := make([][]int32, 9)
	for r := range rows {
		rows[r] = make([]int32, nt)
	}
	for t := range nt {
		w, lane := t/32, t%32
		live := min(32, nt-32*w)
		get := func(j int, ok bool) int32 {
			if ok && j >= 0 && j < live {
				return in[32*w+j]
			}
			return in[t]
		}
		seg := lane &^ (width - 1)
		end := seg + width - 1
		rows[0][t] = get(seg+delta&(width-1), true)
		rows[1][t] = get(lane-delta, lane-delta >= seg)
		rows[2][t] = get(lane+delta, lane+delta <= end)
		x := lane ^ delta
		rows[3][t] = get(x, x >= seg && x <= end)
		rows[4][t] = rows[3][t]
		rows[5][t] = rows[2][t]
		var ballot uint32
		anyBig, all := int32(0), int32(1)
		for j := range live {
			v := in[32*w+j]
			if v&1 != 0 {
				ballot |= 1 << j
			}
			if v > 1000 {
				anyBig = 1
			}
			if v < 0 {
				all = 0
			}
		}
		rows[6][t] = int32(ballot)
		rows[7][t] = anyBig
		rows[8][t] = all
	}
	return rows
}

func TestEmuShuffles(t *testing.T) {
	e := newEmu(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ threads, width, delta int }{
		{32, 32, 1}, {32, 32, 5}, {32, 32, 31}, {64, 16, 3}, {64, 8, 7}, {96, 32, 16},
		{48, 16, 1}, {48, 32, 4}, {40, 8, 2}, {7, 4, 1}, {1024, 32, 13}, {100, 2, 1},
	} {
		t.Run(fmt.Sprintf("%d/w%d/d%d", c.threads, c.width, c.delta), func(t *testing.T) {
			in := make([]int32, c.threads)
			for i := range in {
				in[i] = int32(rng.IntN(1000))
			}
			in[0] = 5000 // any: true in warp 0 only
			if c.threads > 32 {
				in[33] = -3 // all: false in warp 1 only
			}
			pin, pout := upload(e, in), zeros[int32](e, 9*c.threads)
			e.mustRun("emutest_shfl", d1(1), d1(uint32(c.threads)), 0,
				args{}.ptr(pin).ptr(pout).int(c.width).int(c.delta))
			got := make([]int32, 9*c.threads)
			download(e, got, pout)
			want := refShuffle(in, c.threads, c.width, c.delta)
			names := []string{"shfl", "shfl_up", "shfl_down", "shfl_xor", "shfl_xor float", "shfl_down unsigned",
				"ballot", "any", "all"}
			for r, name := range names {
				for i := range c.threads {
					if g, w := got[r*c.threads+i], want[r][i]; g != w {
						t.Fatalf("%s: thread %d got %d, want %d", name, i, g, w)
					}
				}
			}
		})
	}
}

func TestEmuWarpSum(t *testing.T) {
	e := newEmu(t)
	const n = 256 * 3
	x := make([]float32, n)
	for i := range x {
		x[i] = float32((i*37)%101) - 50
	}
	px, pout := upload(e, x), zeros[float32](e, 2*n/32)
	e.mustRun("emutest_warp_sum", d1(3), d1(256), 0, args{}.ptr(px).ptr(pout))
	got := make([]float32, 2*n/32)
	download(e, got, pout)
	for w := range n / 32 {
		var s, m float32 = 0, float32(math.Inf(-1))
		for _, v := range x[32*w : 32*w+32] {
			s += v
			m = max(m, v)
		}
		if got[2*w] != s || got[2*w+1] != m {
			t.Errorf("warp %d: sum, max = %v, %v, want %v, %v", w, got[2*w], got[2*w+1], s, m)
		}
	}
}

func TestEmuDynamicShared(t *testing.T) {
	e := newEmu(t)
	k, err := e.d.function("emutest_dynsmem")
	if err != nil {
		t.Fatal(err)
	}
	// Back to the default limit (an earlier run may have raised it: the
	// attribute belongs to the kernel).
	if err := e.d.setMaxDynamicShared(k, 0); err != nil {
		t.Fatal(err)
	}
	check := func(n, nb int) {
		t.Helper()
		out := zeros[float32](e, n*nb)
		if err := e.d.launch(k, d1(uint32(nb)), d1(128), 4*n, args{}.ptr(out).int(n)); err != nil {
			t.Fatalf("%d floats of dynamic shared: %v", n, err)
		}
		got := make([]float32, n*nb)
		download(e, got, out)
		for b := range nb {
			for i := range n {
				if want := float32(n - 1 - i + b); got[b*n+i] != want {
					t.Fatalf("block %d out[%d] = %v, want %v", b, i, got[b*n+i], want)
				}
			}
		}
	}
	check(1000, 3)
	check(12288, 2) // 48 KiB: the default limit
	big := 50000    // 200000 bytes
	if err := e.d.launch(k, d1(1), d1(128), 4*big, args{}.ptr(0).int(big)); !errors.Is(err, errEmuInvalid) {
		t.Errorf("200000 bytes of dynamic shared without setMaxDynamicShared: %v, want errEmuInvalid", err)
	}
	if err := e.d.setMaxDynamicShared(k, 4*big); err != nil {
		t.Fatal(err)
	}
	check(big, 2)
	if err := e.d.setMaxDynamicShared(k, 300<<10); !errors.Is(err, errEmuInvalid) {
		t.Errorf("setMaxDynamicShared(300 KiB) = %v, want errEmuInvalid", err)
	}
}

func TestEmuAtomics(t *testing.T) {
	e := newEmu(t)
	const n = 5000
	c, f := upload(e, []int32{0, 0, -1, 0, -1}), zeros[float32](e, 1)
	e.mustRun("emutest_atomics", d1(blocks(n, 128)), d1(128), 0, args{}.ptr(c).ptr(f).int(n))
	gc, gf := make([]int32, 5), make([]float32, 1)
	download(e, gc, c)
	download(e, gf, f)
	if gc[0] != n || gc[1] != 2*n || gc[2] != n-1 || gc[3] != n || gc[4] < 0 || gc[4] >= n || gf[0] != n/2 {
		t.Errorf("counters %v, float sum %v; want [%d %d %d %d <%d], %d", gc, gf[0], n, 2*n, n-1, n, n, n/2)
	}
}

func TestEmuParams(t *testing.T) {
	e := newEmu(t)
	out := zeros[int64](e, 5)
	e.mustRun("emutest_params", d1(1), d1(32), 0,
		args{}.ptr(out).int(-7).i64(-1<<40-3).f32(-2.5).u32(0xfffffffe).ptr(0x123456789a))
	got := make([]int64, 5)
	download(e, got, out)
	want := []int64{-7, -1<<40 - 3, int64(math.Float32bits(-2.5)), 0xfffffffe, 0x123456789a}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("parameters read %v, want %v", got, want)
	}
}

func TestEmuFlagWait(t *testing.T) {
	e := newEmu(t)
	out := zeros[int32](e, 1)
	e.mustRun("emutest_flag", d1(2), d1(64), 0, args{}.ptr(out))
	got := make([]int32, 1)
	download(e, got, out)
	if got[0] != 1 && got[0] != 2 {
		t.Errorf("flag wait wrote %d, want 1 or 2 (saw the flag, after waiting or not)", got[0])
	}
}

func TestEmuStack(t *testing.T) {
	e := newEmu(t)
	out := zeros[float32](e, 128)
	for _, size := range []int{64 << 10, 128 << 10} {
		if err := emuSetStackSize(size); err != nil {
			t.Fatal(err)
		}
		e.mustRun("emutest_stack", d1(2), d1(64), 0, args{}.ptr(out))
		got := make([]float32, 128)
		download(e, got, out)
		for i, g := range got {
			if want := float32(4095*4096/2 + 4096*(i%64)); g != want {
				t.Fatalf("stack %d: thread %d sum %v, want %v", size, i, g, want)
			}
		}
	}
	if err := emuSetStackSize(64 << 10); err != nil {
		t.Fatal(err)
	}
	if err := emuSetStackSize(1024); !errors.Is(err, errEmuInvalid) {
		t.Errorf("emuSetStackSize(1024) = %v, want errEmuInvalid", err)
	}
}

// TestEmuBadKernels checks that undefined behaviour is reported as a
// launch error (never a hang) and that the emulator works afterwards.
// The messages depend on which thread meets the problem first: the test
// runs in thread order (TestEmuSchedules checks the other orders).
func TestEmuBadKernels(t *testing.T) {
	e := newEmu(t)
	withSchedule(t, emuForward, 1, func() { badKernels(t, e) })
}

func badKernels(t *testing.T, e *emu) {
	for _, c := range []struct {
		name    string
		mode    int
		threads uint32
		err     error
		msg     string
	}{
		{"return before syncthreads", 0, 64, errEmuFault, "__syncthreads after 1 threads of the block returned"},
		{"syncwarp against syncthreads", 1, 64, errEmuDeadlock, "deadlock: of 64 threads, 32 wait at __syncthreads, 32 at warp operations, 0 returned; warp 0: lanes 0x0000ffff of mask 0xffffffff arrived"},
		{"shuffle with returned lanes", 2, 32, errEmuFault, "thread (16,0,0): returned while lanes 0x0000ffff of its warp wait for it"},
		{"write past the end", 3, 32, errEmuFault, "wrote 1 bytes past the end of the 64-byte allocation"},
		{"trap", 4, 32, errEmuFault, "thread (3,0,0): __trap() called"},
		{"lone nanosleep loop", 5, 32, errEmuFault, "no other thread of the block can run"},
		{"mma in a partial warp", 6, 48, errEmuFault, "mma in a partial warp"},
		{"write past dynamic shared memory", 7, 32, errEmuFault, "block (0,0,0): wrote past the end of its 64 bytes of dynamic shared memory"},
		{"null pointer", 8, 32, errEmuFault, "block (0,0,0), thread (5,0,0): invalid memory access at 0x0 (a null pointer)"},
		{"stack overflow", 9, 32, errEmuFault, "thread (2,0,0): stack overflow: the thread needs more than its 64 KiB of stack"},
		{"division by zero", 10, 32, errEmuFault, "thread (0,0,0): integer division by zero"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.mode >= 8 && !emuCatchesFaults() {
				t.Skip("this emulator build does not catch faults")
			}
			out := zeros[float32](e, 16)
			err := e.run("emutest_bad", d1(2), d1(c.threads), 64, args{}.ptr(out).int(16).int(c.mode))
			if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.msg) ||
				!strings.Contains(err.Error(), "emutest_bad") {
				t.Errorf("mode %d: %v, want %v containing %q", c.mode, err, c.err, c.msg)
			}
			t.Log(err)
			// The emulator still works.
			sum := zeros[float32](e, 1)
			e.mustRun("emutest_block_sum", d1(1), d1(64), 0, args{}.ptr(upload(e, make([]float32, 64))).ptr(sum).int(64))
		})
	}
}

// refHalfToFloat decodes an IEEE binary16 value.
func refHalfToFloat(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e, m := int(h>>10&0x1f), float64(h&0x3ff)
	switch e {
	case 0x1f:
		if m != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	case 0:
		return sign * m * math.Ldexp(1, -24)
	}
	return sign * (1024 + m) * math.Ldexp(1, e-25)
}

// nearest rounds |x| to the nearest of the increasing values vals (the
// bit patterns 0..len(vals)-1, the last one infinity's), ties to the even
// pattern.
func nearest(vals []float64, x float64) int {
	i := sort.SearchFloat64s(vals, x)
	if i == len(vals) {
		return len(vals) - 1
	}
	if vals[i] == x || i == 0 {
		return i
	}
	lo, hi := x-vals[i-1], vals[i]-x
	switch {
	case lo < hi:
		return i - 1
	case hi < lo:
		return i
	case i%2 == 0:
		return i
	}
	return i - 1
}

var (
	halfVals, bf16Vals []float64
	valsOnce           sync.Once
)

// refTables lists the non-negative finite halves and bfloat16s in order,
// each followed by the value where infinity begins (2^16 and 2^128, the
// next power of two).
func refTables() ([]float64, []float64) {
	valsOnce.Do(func() {
		for h := range 0x7c00 {
			halfVals = append(halfVals, refHalfToFloat(uint16(h)))
		}
		halfVals = append(halfVals, 65536)
		for b := range 0x7f80 {
			bf16Vals = append(bf16Vals, float64(math.Float32frombits(uint32(b)<<16)))
		}
		bf16Vals = append(bf16Vals, math.Ldexp(1, 128))
	})
	return halfVals, bf16Vals
}

// refFloatToHalf and refFloatToBF16 round to nearest even; NaN becomes
// 0x7fff as in CUDA.
func refFloatToHalf(f float32) uint16 {
	hv, _ := refTables()
	return refRound(hv, f)
}

func refFloatToBF16(f float32) uint16 {
	_, bv := refTables()
	return refRound(bv, f)
}

func refRound(vals []float64, f float32) uint16 { return refRound64(vals, float64(f)) }

// refRound64 rounds x once to the format of vals.
func refRound64(vals []float64, x float64) uint16 {
	if math.IsNaN(x) {
		return 0x7fff
	}
	var sign uint16
	if math.Signbit(x) {
		sign = 0x8000
	}
	return sign | uint16(nearest(vals, math.Abs(x)))
}

func TestEmuHalfToFloat(t *testing.T) {
	e := newEmu(t)
	const n = 1 << 16
	in := make([]uint16, n)
	for i := range in {
		in[i] = uint16(i)
	}
	pin, phf, pbf, pround, pbad := upload(e, in), zeros[float32](e, n), zeros[float32](e, n), zeros[uint16](e, n), zeros[int32](e, 1)
	e.mustRun("emutest_h2f", d1(n/256), d1(256), 0, args{}.ptr(pin).ptr(phf).ptr(pbf).ptr(pround).ptr(pbad).int(n))
	hf, bf, round, bad := make([]float32, n), make([]float32, n), make([]uint16, n), make([]int32, 1)
	download(e, hf, phf)
	download(e, bf, pbf)
	download(e, round, pround)
	download(e, bad, pbad)
	if bad[0] != 0 {
		t.Errorf("%d values disagree between the pair and the scalar conversions", bad[0])
	}
	for i := range n {
		want := refHalfToFloat(uint16(i))
		if math.IsNaN(want) {
			if !math.IsNaN(float64(hf[i])) || round[i] != 0x7fff {
				t.Errorf("half 0x%04x (NaN): float %v, round trip 0x%04x; want NaN, 0x7fff", i, hf[i], round[i])
			}
		} else if math.Float32bits(hf[i]) != math.Float32bits(float32(want)) || round[i] != uint16(i) {
			t.Errorf("half 0x%04x: float %v, round trip 0x%04x; want %v, 0x%04x", i, hf[i], round[i], want, i)
		}
		if got, want := math.Float32bits(bf[i]), uint32(i)<<16; got != want {
			t.Errorf("bfloat16 0x%04x: float bits 0x%08x, want 0x%08x", i, got, want)
		}
	}
}

// floatsToRound is a mix of random bit patterns, values near the rounding
// boundaries of half and bfloat16 (midpoints and their neighbours, in the
// subnormal range too) and the special values.
func floatsToRound(rng *rand.Rand, n int) []float32 {
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.Float32frombits(0xffc00001), math.Float32frombits(0x7f800001),
		65504, 65519.996, 65520, -65520, 65536, math.MaxFloat32, math.SmallestNonzeroFloat32,
		0x1p-24, 0x1p-25, -0x1p-25, 0x1.000002p-25, 0x1.8p-24, 0x1p-14, 0x1.ff8p-15, 0x1p-126, 0x1.fffffep127}
	v := append([]float32(nil), special...)
	hv, bv := refTables()
	for len(v) < n {
		switch rng.IntN(4) {
		case 0:
			v = append(v, math.Float32frombits(rng.Uint32()))
		case 1: // a half midpoint and its neighbours
			i := rng.IntN(len(hv) - 1)
			m := float32((hv[i] + hv[i+1]) / 2)
			s := float32(1 - 2*float64(rng.IntN(2)))
			v = append(v, s*m, s*math.Nextafter32(m, 0), s*math.Nextafter32(m, float32(math.Inf(1))))
		case 2: // a bfloat16 midpoint and its neighbours
			i := rng.IntN(len(bv) - 1)
			m := float32((bv[i] + bv[i+1]) / 2)
			v = append(v, m, math.Nextafter32(m, 0), -math.Nextafter32(m, float32(math.Inf(1))))
		default: // uniform in the half range
			v = append(v, float32(rng.NormFloat64()*math.Pow(2, float64(rng.IntN(44)-28))))
		}
	}
	return v[:n]
}

func TestEmuFloatToHalf(t *testing.T) {
	e := newEmu(t)
	const n = 1 << 19
	in := floatsToRound(rand.New(rand.NewPCG(3, 4)), n)
	pin, ph, pb, pbad := upload(e, in), zeros[uint16](e, n), zeros[uint16](e, n), zeros[int32](e, 1)
	e.mustRun("emutest_f2h", d1(n/256), d1(256), 0, args{}.ptr(pin).ptr(ph).ptr(pb).ptr(pbad).int(n))
	h, b, bad := make([]uint16, n), make([]uint16, n), make([]int32, 1)
	download(e, h, ph)
	download(e, b, pb)
	download(e, bad, pbad)
	if bad[0] != 0 {
		t.Errorf("%d values disagree between the conversion spellings", bad[0])
	}
	fails := 0
	for i, x := range in {
		if want := refFloatToHalf(x); h[i] != want {
			t.Errorf("float %g (0x%08x) → half 0x%04x, want 0x%04x", x, math.Float32bits(x), h[i], want)
			fails++
		}
		if want := refFloatToBF16(x); b[i] != want {
			t.Errorf("float %g (0x%08x) → bfloat16 0x%04x, want 0x%04x", x, math.Float32bits(x), b[i], want)
			fails++
		}
		if fails > 20 {
			t.Fatal("too many failures")
		}
	}
}

func TestEmuMMA(t *testing.T) {
	e := newEmu(t)
	rng := rand.New(rand.NewPCG(5, 6))
	const tiles = 6 // 3 blocks of 2 warps
	for _, bf16 := range []bool{false, true} {
		t.Run(map[bool]string{false: "f16", true: "bf16"}[bf16], func(t *testing.T) {
			conv, back := refFloatToHalf, refHalfToFloat
			if bf16 {
				conv = refFloatToBF16
				back = func(b uint16) float64 { return float64(math.Float32frombits(uint32(b) << 16)) }
			}
			A, B := make([]uint16, 256*tiles), make([]uint16, 128*tiles)
			C := make([]float32, 128*tiles)
			for i := range A {
				A[i] = conv(float32(rng.NormFloat64()))
			}
			for i := range B {
				B[i] = conv(float32(rng.NormFloat64() * 4))
			}
			for i := range C {
				C[i] = float32(rng.NormFloat64())
			}
			pa, pb, pc, pd := upload(e, A), upload(e, B), upload(e, C), zeros[float32](e, 128*tiles)
			e.mustRun("emutest_mma", d1(3), d1(64), 0, args{}.ptr(pa).ptr(pb).ptr(pc).ptr(pd).int(map[bool]int{false: 0, true: 1}[bf16]))
			D := make([]float32, 128*tiles)
			download(e, D, pd)
			for w := range tiles {
				for m := range 16 {
					for nn := range 8 {
						want, mag := float64(C[128*w+8*m+nn]), math.Abs(float64(C[128*w+8*m+nn]))
						for k := range 16 {
							p := back(A[256*w+16*m+k]) * back(B[128*w+8*k+nn])
							want += p
							mag += math.Abs(p)
						}
						if got := float64(D[128*w+8*m+nn]); math.Abs(got-want) > 1e-6*mag {
							t.Fatalf("tile %d D[%d][%d] = %v, want %v", w, m, nn, got, want)
						}
					}
				}
			}
		})
	}
}

// TestEmuConcurrent runs launches from several goroutines, each with its
// own driver: the emulator serializes them.
func TestEmuConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := newEmu(t)
			n := 1000 + 100*g
			a := make([]float32, n)
			for i := range a {
				a[i] = float32(i + g)
			}
			pa, pc := upload(e, a), zeros[float32](e, n)
			c := make([]float32, n)
			for range 20 {
				if err := e.run("emutest_vadd", d1(blocks(n, 128)), d1(128), 0, args{}.ptr(pa).ptr(pa).ptr(pc).int(n)); err != nil {
					errs <- err
					return
				}
				download(e, c, pc)
				for i := range c {
					if c[i] != 2*a[i] {
						errs <- fmt.Errorf("goroutine %d: c[%d] = %v, want %v", g, i, c[i], 2*a[i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestEmuSignalsDuringLaunch delivers signals to the thread running a
// launch while its fibers run: SIGURG (what Go's asynchronous preemption
// sends) straight to that thread, and SIGPROF from CPU profiling, with
// other goroutines busy, one of them dereferencing nil (SIGSEGV on its
// thread, which the emulator's fault handler must pass to Go's). The
// launch must finish with the same result as without them.
func TestEmuSignalsDuringLaunch(t *testing.T) {
	e := newEmu(t)
	const nb, nt, iters = 64, 256, 40
	out := zeros[float32](e, nb*nt)
	launch := func() []float32 {
		e.mustRun("emutest_spin", d1(nb), d1(nt), 0, args{}.ptr(out).int(iters))
		got := make([]float32, nb*nt)
		download(e, got, out)
		return got
	}
	quiet := launch()

	var prof bytes.Buffer
	if err := pprof.StartCPUProfile(&prof); err != nil {
		t.Logf("no CPU profile: %v", err)
	} else {
		defer pprof.StopCPUProfile()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent atomic.Int64
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() { // busy, preemptible work
			defer wg.Done()
			x := 0.0
			for {
				select {
				case <-stop:
					_ = x
					return
				default:
				}
				for i := range 10000 {
					x += math.Sqrt(float64(i))
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		pid := os.Getpid()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if tid := emuLaunchThread(); tid != 0 {
				if syscall.Tgkill(pid, tid, syscall.SIGURG) == nil {
					sent.Add(1)
				}
			}
			time.Sleep(20 * time.Microsecond)
		}
	}()
	// Go code faulting on other threads while the emulator's fault
	// handler is installed: the faults must reach Go's handler and become
	// panics.
	var recovered atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		var nilPtr *int
		for {
			select {
			case <-stop:
				return
			default:
			}
			if emuLaunchThread() == 0 {
				runtime.Gosched()
				continue
			}
			func() {
				defer func() {
					if recover() != nil {
						recovered.Add(1)
					}
				}()
				*nilPtr = 1
			}()
		}
	}()
	var noisy []float32
	for range 3 {
		noisy = launch()
	}
	close(stop)
	wg.Wait()
	if sent.Load() == 0 {
		t.Error("no signal reached the launching thread")
	}
	if recovered.Load() == 0 {
		t.Error("no nil dereference recovered during a launch")
	}
	t.Logf("%d SIGURGs sent to the launching thread, %d nil dereferences recovered during launches", sent.Load(), recovered.Load())
	for i := range quiet {
		if math.Float32bits(quiet[i]) != math.Float32bits(noisy[i]) {
			t.Fatalf("out[%d] = %v with signals, %v without", i, noisy[i], quiet[i])
		}
	}
}

// BenchmarkEmuSwitch measures a fiber switch: block barriers and nothing
// else.
func BenchmarkEmuSwitch(b *testing.B) {
	e := newEmu(b)
	const iters = 1000
	k, err := e.d.function("emutest_barriers")
	if err != nil {
		b.Fatal(err)
	}
	s0 := emuSwitches()
	start := time.Now()
	for b.Loop() {
		if err := e.d.launch(k, d1(1), d1(256), 0, args{}.int(iters)); err != nil {
			b.Fatal(err)
		}
	}
	sw := emuSwitches() - s0
	b.ReportMetric(float64(sw)/time.Since(start).Seconds(), "switches/s")
}

// BenchmarkEmuLaunch4096x128 is a vector add over 4096 blocks of 128
// threads.
func BenchmarkEmuLaunch4096x128(b *testing.B) {
	e := newEmu(b)
	const n = 4096 * 128
	pa, pc := zeros[float32](e, n), zeros[float32](e, n)
	k, err := e.d.function("emutest_vadd")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := e.d.launch(k, d1(4096), d1(128), 0, args{}.ptr(pa).ptr(pa).ptr(pc).int(n)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEmuBlockSum4096x256 is the shared-memory reduction (8
// barriers) over 4096 blocks of 256 threads.
func BenchmarkEmuBlockSum4096x256(b *testing.B) {
	e := newEmu(b)
	const n = 4096 * 256
	px, pout := zeros[float32](e, n), zeros[float32](e, 4096)
	k, err := e.d.function("emutest_block_sum")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := e.d.launch(k, d1(4096), d1(256), 0, args{}.ptr(px).ptr(pout).int(n)); err != nil {
			b.Fatal(err)
		}
	}
}

// withSchedule runs f with the emulator in schedule s, then restores the
// flag's schedule.
func withSchedule(t *testing.T, s emuSchedule, seed uint64, f func()) {
	t.Helper()
	if err := emuSetSchedule(s, seed); err != nil {
		t.Fatal(err)
	}
	defer func() {
		scheduleApplied = sync.Once{}
		if err := applyScheduleFlag(); err != nil {
			t.Fatal(err)
		}
	}()
	f()
}

// TestEmuSchedules runs the race-free test kernels in every order, and
// checks that the reverse and random orders expose a missing barrier
// that thread order hides.
func TestEmuSchedules(t *testing.T) {
	for _, c := range []struct {
		name string
		s    emuSchedule
	}{{"forward", emuForward}, {"reverse", emuReverse}, {"random", emuRandom}} {
		t.Run(c.name, func(t *testing.T) {
			withSchedule(t, c.s, 42, func() {
				t.Run("BlockSum", TestEmuBlockSum)
				t.Run("SyncVotes", TestEmuSyncVotes)
				t.Run("Shuffles", TestEmuShuffles)
				t.Run("WarpSum", TestEmuWarpSum)
				t.Run("DynamicShared", TestEmuDynamicShared)
				t.Run("Atomics", TestEmuAtomics)
				t.Run("FlagWait", TestEmuFlagWait)
				t.Run("MMA", TestEmuMMA)
				t.Run("Stack", TestEmuStack)

				e := newEmu(t)
				for mode, want := range []error{errEmuFault, errEmuDeadlock, errEmuFault, errEmuFault, errEmuFault, errEmuFault, errEmuFault, errEmuFault, errEmuFault, errEmuFault, errEmuFault} {
					if mode >= 8 && !emuCatchesFaults() {
						break
					}
					out := zeros[float32](e, 16)
					threads := uint32(64)
					if mode == 6 {
						threads = 48
					}
					if err := e.run("emutest_bad", d1(2), d1(threads), 64, args{}.ptr(out).int(16).int(mode)); !errors.Is(err, want) {
						t.Errorf("bad kernel %d: %v, want %v", mode, err, want)
					}
				}

				const nb, nt = 8, 64
				out := zeros[int32](e, nb*nt)
				e.mustRun("emutest_racy", d1(nb), d1(nt), 0, args{}.ptr(out))
				got := make([]int32, nb*nt)
				download(e, got, out)
				stale := 0
				for i, g := range got {
					if int(g) != 1000+i/nt {
						stale++
					}
				}
				if (stale == 0) != (c.s == emuForward) {
					t.Errorf("racy kernel: %d of %d threads read a stale value", stale, nb*nt)
				}
			})
		})
	}
}

func TestEmuHalfArithmetic(t *testing.T) {
	e := newEmu(t)
	const n = 1 << 16
	rng := rand.New(rand.NewPCG(7, 8))
	hv, bv := refTables()
	for _, bf16 := range []bool{false, true} {
		t.Run(map[bool]string{false: "f16", true: "bf16"}[bf16], func(t *testing.T) {
			vals, toF := hv, refHalfToFloat
			if bf16 {
				vals = bv
				toF = func(b uint16) float64 { return float64(math.Float32frombits(uint32(b) << 16)) }
			}
			a, b, c := make([]uint16, n), make([]uint16, n), make([]uint16, n)
			for i := range a {
				// Finite values of every exponent, and a few specials.
				for _, p := range []*uint16{&a[i], &b[i], &c[i]} {
					*p = uint16(rng.IntN(len(vals)-1)) | uint16(rng.IntN(2))<<15
				}
			}
			a[0], b[0] = 0x7c00, 0xfc00 // inf + -inf (fp16)
			pa, pb, pc, pout := upload(e, a), upload(e, b), upload(e, c), zeros[uint16](e, 4*n)
			e.mustRun("emutest_harith", d1(n/256), d1(256), 0,
				args{}.ptr(pa).ptr(pb).ptr(pc).ptr(pout).int(n).int(map[bool]int{false: 0, true: 1}[bf16]))
			out := make([]uint16, 4*n)
			download(e, out, pout)
			fails := 0
			for i := range n {
				x, y, z := toF(a[i]), toF(b[i]), toF(c[i])
				want := []uint16{refRound64(vals, x+y), refRound64(vals, x*y), refRound64(vals, math.FMA(x, y, z)), refRound64(vals, x+y)}
				for k, w := range want {
					if g := out[4*i+k]; g != w && !(w == 0x7fff && g&0x7fff > uint16(len(vals)-1)) {
						t.Errorf("op %d of 0x%04x, 0x%04x, 0x%04x = 0x%04x, want 0x%04x", k, a[i], b[i], c[i], g, w)
						if fails++; fails > 10 {
							t.Fatal("too many failures")
						}
					}
				}
			}
		})
	}
}

// TestEmuBackend runs a test kernel through the Backend's own upload,
// launch and download path on the emulator.
func TestEmuBackend(t *testing.T) {
	bk, err := Open(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := bk.(*Device).Backend() // Open returns a *Device since main's eada92e
	defer b.Close()
	if got := b.Info().Name; got != "kvq CPU emulator" {
		t.Errorf("Info().Name = %q", got)
	}
	const n = 1000
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i)
	}
	x, err := b.UploadF32(v)
	if err != nil {
		t.Fatal(err)
	}
	y := b.Alloc(n)
	b.launch("emutest_vadd", dim3{blocks(n, 128), 1, 1}, dim3{128, 1, 1}, 0,
		args{}.ptr(dev(x).p).ptr(dev(x).p).ptr(dev(y).p).int(n))
	got := make([]float32, n)
	if err := b.Download(got, y, 0); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != 2*v[i] {
			t.Fatalf("y[%d] = %v, want %v", i, got[i], 2*v[i])
		}
	}
	// A failing launch surfaces at the next Download.
	b.launch("emutest_bad", dim3{1, 1, 1}, dim3{32, 1, 1}, 0, args{}.ptr(dev(y).p).int(n).int(4))
	if err := b.Download(got[:1], y, 0); !errors.Is(err, errEmuFault) {
		t.Errorf("Download after a trapping kernel = %v, want errEmuFault", err)
	}
	b.Free(x)
	b.Free(y)
}

// BenchmarkEmuMMA is 4096 warps doing one m16n8k16 tile each (2048
// blocks of 64 threads).
func BenchmarkEmuMMA(b *testing.B) {
	e := newEmu(b)
	const tiles = 4096
	pa, pb := zeros[uint16](e, 256*tiles), zeros[uint16](e, 128*tiles)
	pc, pd := zeros[float32](e, 128*tiles), zeros[float32](e, 128*tiles)
	k, err := e.d.function("emutest_mma")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := e.d.launch(k, d1(tiles/2), d1(64), 0, args{}.ptr(pa).ptr(pb).ptr(pc).ptr(pd).int(0)); err != nil {
			b.Fatal(err)
		}
	}
}
