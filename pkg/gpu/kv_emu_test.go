//go:build cudaemu && !cuda

package gpu

import (
	"runtime"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// TestKVStorageFreed checks that a dropped cache's device memory is freed
// (its storage's cleanup queues it; the next NewStorage frees it), on the
// emulator, whose driver counts its allocations.
func TestKVStorageFreed(t *testing.T) {
	_, b := openKV(t)
	d := b.d.(*emuDriver)
	l, err := kvcache.NewLayout(kvcache.Geometry{Layers: 2, KVHeads: 2, HeadDim: 64}, quant.Spec{K: quant.FP16, V: quant.FP16}, 0)
	if err != nil {
		t.Fatal(err)
	}
	newCache := func() *kvcache.Cache {
		c, err := kvcache.New(l, kvcache.Options{Blocks: 8, Storage: b})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	keep := newCache()
	before := len(d.allocs)
	for i := 0; i < 5; i++ {
		newCache() // dropped at once
	}
	if grown := len(d.allocs) - before; grown != 5*4 {
		t.Fatalf("5 caches of 2 layers made %d allocations, want 20", grown)
	}
	for i := 0; i < 100 && len(d.allocs) > before+4; i++ {
		runtime.GC()
		time.Sleep(time.Millisecond)
		newCache() // reaps what the cleanups queued (and is dropped itself)
	}
	if n := len(d.allocs) - before; n > 4 {
		t.Errorf("%d allocations of dropped caches remain, want at most the last cache's 4", n)
	}
	runtime.KeepAlive(keep)
}
