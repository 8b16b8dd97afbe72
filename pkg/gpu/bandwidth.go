//go:build cuda || cudaemu

package gpu

import (
	"fmt"
	"time"
)

// Bandwidth probes: blocks per SM and threads per block of kvq_bw_read
// and kvq_bw_copy (4 independent 16-byte loads per thread per iteration:
// 8 blocks of 256 threads put 128 KB of loads in flight per SM, well above
// what the HBM's latency-bandwidth product asks for).
const (
	bwBlocksPerSM = 8
	bwThreads     = 256
)

// MeasureBandwidth returns the device memory's read bandwidth in GB/s
// (10^9 bytes per second): reps passes of a coalesced read-and-reduce of a
// buffer of bytes (rounded up to 16), after one untimed pass. The time is
// wall-clock from the first timed launch to the end of a sync, so it
// includes reps launch overheads (a few µs each): pass a buffer of
// hundreds of MB, far larger than the L2 cache, for a figure of HBM
// bandwidth. It is the weight-streaming limit that a decode step's
// matrix-vector products can approach.
func (b *Backend) MeasureBandwidth(bytes int64, reps int) (readGBs float64, err error) {
	return b.measure("kvq_bw_read", bytes, reps, false)
}

// MeasureCopyBandwidth is MeasureBandwidth for a device-to-device copy of
// bytes by kvq_bw_copy, counting the bytes read and written (2·bytes per
// pass).
func (b *Backend) MeasureCopyBandwidth(bytes int64, reps int) (GBs float64, err error) {
	return b.measure("kvq_bw_copy", bytes, reps, true)
}

func (b *Backend) measure(name string, bytes int64, reps int, copying bool) (float64, error) {
	if bytes <= 0 || reps <= 0 {
		return 0, fmt.Errorf("gpu: bandwidth probe of %d bytes × %d passes", bytes, reps)
	}
	// Earlier failures are the caller's; report them rather than mix them
	// into the probe's.
	if err := b.syncErr(); err != nil {
		return 0, err
	}
	n16 := (bytes + 15) / 16
	grid := dim3{uint32(bwBlocksPerSM * b.smCount()), 1, 1}
	src, err := b.d.alloc(16 * n16)
	if err != nil {
		return 0, fmt.Errorf("gpu: bandwidth probe of %d bytes: %w", bytes, err)
	}
	defer b.d.free(src)
	var dst devptr
	if copying {
		dst, err = b.d.alloc(16 * n16)
	} else {
		dst, err = b.d.alloc(4 * int64(grid.x))
	}
	if err != nil {
		return 0, fmt.Errorf("gpu: bandwidth probe of %d bytes: %w", bytes, err)
	}
	defer b.d.free(dst)
	if err := b.d.memset8(src, 0x5a, 16*n16); err != nil {
		return 0, err
	}
	a := args{}.ptr(dst).ptr(src).int(int(n16))
	pass := func() { b.launch(name, grid, dim3{bwThreads, 1, 1}, 0, a) }
	pass()
	if err := b.syncErr(); err != nil {
		return 0, err
	}
	start := time.Now()
	for range reps {
		pass()
	}
	if err := b.syncErr(); err != nil {
		return 0, err
	}
	moved := float64(16*n16) * float64(reps)
	if copying {
		moved *= 2
	}
	return moved / time.Since(start).Seconds() / 1e9, nil
}

// syncErr waits for the stream and returns (and clears) the first failure
// since the last Download.
func (b *Backend) syncErr() error {
	b.fail(b.d.sync())
	return b.takeErr()
}
