package simd

import (
	"runtime"
	"sync"
	"time"
)

// bandwidthSample is how long one timed sample of MeasureBandwidth runs at
// least, and bandwidthSamples how many samples the best rate is taken from.
const (
	bandwidthSample  = 20 * time.Millisecond
	bandwidthSamples = 5
)

// MeasureBandwidth returns the best streaming-read rate, in bytes per second,
// that one goroutine reaches summing a float32 buffer of about the given size
// with the fastest read kernel (the AVX2 sum where available). It allocates
// and touches the buffer first, then times several samples of whole passes
// and reports the best. Pass a size well above the last-level cache (256 MiB,
// say) to measure DRAM bandwidth, the limit for streaming weights in decode;
// smaller sizes measure the caches. A single core usually cannot saturate
// DRAM: see MeasureBandwidthParallel. It takes a few hundred milliseconds and
// is meant for benchmarks, not hot paths.
func MeasureBandwidth(bytes int) (bytesPerSec float64) {
	return MeasureBandwidthParallel(bytes, 1)
}

// MeasureBandwidthParallel is MeasureBandwidth with the buffer split into
// workers equal parts, each summed by its own goroutine; the rate counts the
// whole buffer per pass over the wall time of the slowest worker. workers < 1
// means runtime.GOMAXPROCS(0).
func MeasureBandwidthParallel(bytes, workers int) (bytesPerSec float64) {
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}
	per := max(bytes/4/workers/64*64, 64) // floats per worker, whole 256-byte lines
	buf := make([]float32, per*workers)
	for i := range buf {
		buf[i] = 1
	}
	total := float64(len(buf) * 4)

	run := func(passes int) time.Duration {
		if workers == 1 {
			var s float32
			start := time.Now()
			for p := 0; p < passes; p++ {
				s += sumF32(buf)
			}
			d := time.Since(start)
			runtime.KeepAlive(s)
			return d
		}
		var ready, done sync.WaitGroup
		startc := make(chan struct{})
		ready.Add(workers)
		done.Add(workers)
		for w := 0; w < workers; w++ {
			part := buf[w*per : (w+1)*per]
			go func() {
				defer done.Done()
				ready.Done()
				<-startc
				var s float32
				for p := 0; p < passes; p++ {
					s += sumF32(part)
				}
				runtime.KeepAlive(s)
			}()
		}
		ready.Wait()
		start := time.Now()
		close(startc)
		done.Wait()
		return time.Since(start)
	}

	run(1) // warm up: page faults, caches, goroutine start
	passes := 1
	for {
		d := run(passes)
		if d >= bandwidthSample {
			bytesPerSec = total * float64(passes) / d.Seconds()
			break
		}
		passes *= 2
	}
	for i := 1; i < bandwidthSamples; i++ {
		bytesPerSec = max(bytesPerSec, total*float64(passes)/run(passes).Seconds())
	}
	return bytesPerSec
}
