package runtime_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// TestCancelStopsInsideTheLayer: a step cancelled in the middle of a layer
// (from the observer, after the layer's keys and values) stops in that
// layer, not at the next layer boundary, and leaves the cache as it was.
func TestCancelStopsInsideTheLayer(t *testing.T) {
	m := smallModel(t, tensor.F32)
	for _, spec := range []string{"fp16", "kivi2", "int4:g16:channel,residual=6,sink=2", "fp8:dynamic"} {
		t.Run(spec, func(t *testing.T) {
			rec := &recorder{cancelAt: 0}
			r, err := runtime.NewRunner(m, runtime.RunnerOptions{Observer: rec})
			if err != nil {
				t.Fatal(err)
			}
			a, b := newCache(t, r, spec, 16), newCache(t, r, spec, 16)
			_ = a.AddSeq(0)
			_ = b.AddSeq(0)
			ctx, cancel := context.WithCancel(context.Background())
			rec.cancel = cancel
			free := a.FreeBlocks()
			_, err = r.Forward(ctx, []runtime.Entry{{Cache: a, Seq: 0, Tokens: tokens(50, m.Vocab, 4)}})
			if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "stopped in layer 0") {
				t.Fatalf("step cancelled in layer 0: %v, want context.Canceled, stopped in layer 0", err)
			}
			if a.FreeBlocks() != free || a.Len(0) != 0 {
				t.Fatalf("cancelled step left length %d, %d free blocks (want 0, %d)", a.Len(0), a.FreeBlocks(), free)
			}
			rec.cancel = nil
			p := tokens(30, m.Vocab, 5)
			la := forward(t, r, a, runtime.Entry{Seq: 0, Tokens: p})[0]
			lb := forward(t, r, b, runtime.Entry{Seq: 0, Tokens: p})[0]
			for k := range la {
				if la[k] != lb[k] {
					t.Fatalf("after the cancelled step: logit %d = %v, a cache that never saw it gives %v", k, la[k], lb[k])
				}
			}
		})
	}
}

// TestCancellableContextSameLogits: a context that can be cancelled (and
// is not) runs the interruptible backend view and gives the logits of
// context.Background bit for bit.
func TestCancellableContextSameLogits(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.Q80} {
		m := smallModel(t, dt)
		r := newRunner(t, m)
		a, b := newCache(t, r, "int4", 16), newCache(t, r, "int4", 16)
		_ = a.AddSeq(0)
		_ = b.AddSeq(0)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for _, p := range [][]int{tokens(200, m.Vocab, 6), {3}, {5}} {
			want := forward(t, r, a, runtime.Entry{Seq: 0, Tokens: p, Logits: runtime.AllLogits})[0]
			got, err := r.Forward(ctx, []runtime.Entry{{Cache: b, Seq: 0, Tokens: p, Logits: runtime.AllLogits}})
			if err != nil {
				t.Fatal(err)
			}
			for k := range want {
				if math.Float32bits(got[0][k]) != math.Float32bits(want[k]) {
					t.Fatalf("%v, %d tokens: logit %d = %v with a cancellable context, %v without", dt, len(p), k, got[0][k], want[k])
				}
			}
		}
	}
}
