package runtime_test

import (
	"context"
	"errors"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// recorder is a KV observer that keeps what it saw, and can cancel the
// step at a layer.
type recorder struct {
	obs      []runtime.KVObservation
	cancelAt int
	cancel   context.CancelFunc
}

func (r *recorder) ObserveKV(o *runtime.KVObservation) {
	c := *o
	c.KPre = append([]float32(nil), o.KPre...)
	c.K = append([]float32(nil), o.K...)
	c.V = append([]float32(nil), o.V...)
	r.obs = append(r.obs, c)
	if r.cancel != nil && o.Layer == r.cancelAt {
		r.cancel()
	}
}

// TestObserver checks that the observer sees every layer's keys (before and
// after RoPE) and values of every entry, as the cache stores them: with an
// fp32 cache the keys read back equal K, and a pre-RoPE key rotated equals
// K.
func TestObserver(t *testing.T) {
	m := smallModel(t, tensor.F32)
	rec := &recorder{}
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{Observer: rec})
	if err != nil {
		t.Fatal(err)
	}
	c := newCache(t, r, "fp32", 8)
	_ = c.AddSeq(0)
	_ = c.AddSeq(3)
	forward(t, r, c, runtime.Entry{Seq: 0, Tokens: tokens(9, m.Vocab, 1)}, runtime.Entry{Seq: 3, Tokens: tokens(4, m.Vocab, 2)})
	forward(t, r, c, runtime.Entry{Seq: 3, Tokens: []int{7}})
	if want := 3 * m.Config.Layers; len(rec.obs) != want {
		t.Fatalf("%d observations, want %d (2 entries then 1, per layer)", len(rec.obs), want)
	}
	kvd := m.KVHeads * m.HeadDim
	for _, o := range rec.obs {
		if o.Cache != c || len(o.K) != o.N*kvd || len(o.KPre) != o.N*kvd || len(o.V) != o.N*kvd {
			t.Fatalf("observation %+v: wrong cache or sizes", o)
		}
		buf := make([]float32, o.N*m.HeadDim)
		for h := 0; h < m.KVHeads; h++ {
			for side, rows := range [][]float32{o.K, o.V} {
				c.Read(buf, o.Layer, o.Seq, side == 0, h, o.Pos, o.Pos+o.N)
				for i := 0; i < o.N; i++ {
					for d := 0; d < m.HeadDim; d++ {
						if got, want := buf[i*m.HeadDim+d], rows[i*kvd+h*m.HeadDim+d]; got != want {
							t.Fatalf("layer %d seq %d pos %d side %d: cache holds %v, observer saw %v", o.Layer, o.Seq, o.Pos+i, side, got, want)
						}
					}
				}
			}
		}
		same := true
		for i := range o.K {
			same = same && o.K[i] == o.KPre[i]
		}
		if same && o.Pos+o.N > 1 {
			t.Errorf("layer %d seq %d: keys before and after RoPE are equal", o.Layer, o.Seq)
		}
	}
}

// TestCancelledStepLeavesNothing cancels a step in the middle of the
// layers (from the observer, so it happens inside the forward pass) and
// checks that every cache is as before: lengths, blocks, windows and
// learned fp8 scales, so that the next steps give the logits of a cache
// that never saw the failed one.
func TestCancelledStepLeavesNothing(t *testing.T) {
	m := smallModel(t, tensor.F32)
	for _, spec := range []string{"fp16", "kivi2", "int4:g16:channel,residual=6,sink=2", "fp8:dynamic", "quanto4:r8", "k=int4,v=fp8,L0=fp16"} {
		t.Run(spec, func(t *testing.T) {
			rec := &recorder{cancelAt: 1}
			r, err := runtime.NewRunner(m, runtime.RunnerOptions{Observer: rec})
			if err != nil {
				t.Fatal(err)
			}
			a, b := newCache(t, r, spec, 16), newCache(t, r, spec, 16)
			_ = a.AddSeq(0)
			_ = b.AddSeq(0)
			ctx, cancel := context.WithCancel(context.Background())
			rec.cancel = cancel
			// The failed step is a's first (fp8:dynamic learns its scales
			// from it) and its second.
			for _, n := range []int{30, 9} {
				if n == 9 {
					forward(t, r, a, runtime.Entry{Seq: 0, Tokens: tokens(40, m.Vocab, 3)})
					forward(t, r, b, runtime.Entry{Seq: 0, Tokens: tokens(40, m.Vocab, 3)})
					ctx, cancel = context.WithCancel(context.Background())
					rec.cancel = cancel
				}
				free := a.FreeBlocks()
				_, err := r.Forward(ctx, []runtime.Entry{{Cache: a, Seq: 0, Tokens: tokens(n, m.Vocab, 4)}})
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("cancelled step: %v", err)
				}
				if a.FreeBlocks() != free || a.Len(0) != b.Len(0) {
					t.Fatalf("cancelled step left length %d (want %d), %d free blocks (want %d)", a.Len(0), b.Len(0), a.FreeBlocks(), free)
				}
			}
			rec.cancel = nil
			for i, id := range tokens(20, m.Vocab, 5) {
				la := forward(t, r, a, runtime.Entry{Seq: 0, Tokens: []int{id}})[0]
				lb := forward(t, r, b, runtime.Entry{Seq: 0, Tokens: []int{id}})[0]
				for k := range la {
					if la[k] != lb[k] {
						t.Fatalf("token %d after the cancelled steps: logit %d = %v, a cache that never saw them gives %v", i, k, la[k], lb[k])
					}
				}
			}
		})
	}
}

// TestFreedBlocksDoNotLeak runs a sequence, removes it, and runs another
// in a cache that poisons freed blocks: its logits equal those of a fresh
// cache, so no read reaches rows the new sequence did not write.
func TestFreedBlocksDoNotLeak(t *testing.T) {
	m := smallModel(t, tensor.F16)
	r := newRunner(t, m)
	for _, spec := range []string{"fp16", "int4", "kivi2", "int4:g16:channel", "quanto4:r8"} {
		t.Run(spec, func(t *testing.T) {
			s, err := quant.Formats().ParseSpec(spec)
			if err != nil {
				t.Fatal(err)
			}
			l, err := kvcache.NewLayout(m.Geometry(), s, 0)
			if err != nil {
				t.Fatal(err)
			}
			reused, err := r.NewCache(l, kvcache.Options{Blocks: 8, PoisonFreed: true})
			if err != nil {
				t.Fatal(err)
			}
			fresh := newCache(t, r, spec, 8)
			_ = reused.AddSeq(0)
			forward(t, r, reused, runtime.Entry{Seq: 0, Tokens: tokens(100, m.Vocab, 1)})
			_ = reused.Remove(0)
			for _, c := range []*kvcache.Cache{reused, fresh} {
				_ = c.AddSeq(1)
			}
			prompt := tokens(37, m.Vocab, 2)
			a := forward(t, r, reused, runtime.Entry{Seq: 1, Tokens: prompt, Logits: runtime.AllLogits})[0]
			b := forward(t, r, fresh, runtime.Entry{Seq: 1, Tokens: prompt, Logits: runtime.AllLogits})[0]
			for i := 0; i < 5; i++ {
				a = append(a, forward(t, r, reused, runtime.Entry{Seq: 1, Tokens: []int{i + 3}})[0]...)
				b = append(b, forward(t, r, fresh, runtime.Entry{Seq: 1, Tokens: []int{i + 3}})[0]...)
			}
			for k := range a {
				if a[k] != b[k] {
					t.Fatalf("logit %d in reused blocks %v, in a fresh cache %v", k, a[k], b[k])
				}
			}
		})
	}
}

// TestStreamChunks checks that Stream hands over every logits row in
// order, a chunk of rows at a time for a large vocabulary, and equals
// Forward; a consumer error rolls the step back.
func TestStreamChunks(t *testing.T) {
	// Vocabulary 65536: 64 rows per 4M-value chunk, so 150 rows take 3.
	m, err := modeltest.RandomModel(runtime.Config{Dim: 16, Hidden: 32, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 8, Vocab: 65536, ContextLen: 512}, tensor.F16, 4)
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, m)
	ids := tokens(150, m.Vocab, 6)
	c1, c2 := newCache(t, r, "fp16", 16), newCache(t, r, "fp16", 16)
	_ = c1.AddSeq(0)
	_ = c2.AddSeq(0)
	want := forward(t, r, c1, runtime.Entry{Seq: 0, Tokens: ids, Logits: runtime.AllLogits})[0]
	stop := errors.New("stop")
	err = r.Stream(context.Background(), []runtime.Entry{{Cache: c2, Seq: 0, Tokens: ids, Logits: runtime.AllLogits}}, func(e, i int, logits []float32) error {
		if i == 100 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || c2.Len(0) != 0 {
		t.Fatalf("consumer error: Stream = %v, sequence length %d; want the error and the step rolled back", err, c2.Len(0))
	}
	next := 0
	err = r.Stream(context.Background(), []runtime.Entry{{Cache: c2, Seq: 0, Tokens: ids, Logits: runtime.AllLogits}}, func(e, i int, logits []float32) error {
		if e != 0 || i != next {
			t.Fatalf("row (%d, %d), want (0, %d)", e, i, next)
		}
		next++
		for k, v := range logits {
			if v != want[i*m.Vocab+k] {
				t.Fatalf("row %d logit %d: Stream %v, Forward %v", i, k, v, want[i*m.Vocab+k])
			}
		}
		return nil
	})
	if err != nil || next != len(ids) {
		t.Fatalf("Stream: %v after %d rows", err, next)
	}
}

// TestStreamOrder checks the delivery order: by token index, then entry,
// so that side-by-side caches hand over one position's rows together.
func TestStreamOrder(t *testing.T) {
	m := smallModel(t, tensor.F32)
	r := newRunner(t, m)
	a, b := newCache(t, r, "fp16", 4), newCache(t, r, "int8", 4)
	_ = a.AddSeq(0)
	_ = b.AddSeq(0)
	_ = b.AddSeq(1)
	var got [][2]int
	err := r.Stream(context.Background(), []runtime.Entry{
		{Cache: a, Seq: 0, Tokens: []int{1, 2, 3}, Logits: runtime.AllLogits},
		{Cache: b, Seq: 0, Tokens: []int{1, 2}, Logits: runtime.AllLogits},
		{Cache: b, Seq: 1, Tokens: []int{4, 5}, Logits: runtime.LastLogits},
	}, func(e, i int, _ []float32) error {
		got = append(got, [2]int{e, i})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]int{{0, 0}, {1, 0}, {2, 0}, {0, 1}, {1, 1}, {0, 2}}
	if len(got) != len(want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("rows %v, want %v", got, want)
		}
	}
}
