package runtime_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// TestSlidingWindowOnlyStorage checks window-only storage of the sliding
// layers: a Gemma model fed a sequence many windows long, in steps of
// varied sizes, gives bit-identical logits whether its sliding layers keep
// only their window (the default) or every position
// (LayoutOptions.FullSliding), on fp16 and on quantized caches (with fp16
// sink and residual windows, and with a token-grouped format); the
// sliding pool holds no more blocks than Layout.SlideBlocksFor says and
// fewer than the full storage; a fork reads as its source; and a
// truncation into released positions is refused.
func TestSlidingWindowOnlyStorage(t *testing.T) {
	for _, arch := range []string{"gemma2", "gemma3"} {
		hf, _ := writeGemma(t, gemmaSpecs[arch])
		m := load(t, hf, runtime.LoadOptions{})
		r := newRunner(t, m)
		window := m.SlidingWindow
		for _, text := range []string{"fp16", "int4", "int8,sink=2,residual=5", "int4:channel", "int4,sliding=fp16"} {
			t.Run(arch+"/"+text, func(t *testing.T) {
				spec, err := quant.Formats().ParseSpec(text)
				if err != nil {
					t.Fatal(err)
				}
				mk := func(full bool) *kvcache.Cache {
					l, err := kvcache.NewLayoutWith(m.Geometry(), spec, kvcache.LayoutOptions{BlockTokens: 4, FullSliding: full})
					if err != nil {
						t.Fatal(err)
					}
					c, err := r.NewCache(l, kvcache.Options{Blocks: 64, PoisonFreed: true})
					if err != nil {
						t.Fatal(err)
					}
					if err := c.AddSeq(0); err != nil {
						t.Fatal(err)
					}
					return c
				}
				win, full := mk(false), mk(true)
				l := win.Layout()
				if !l.Sliding() || full.Layout().Sliding() {
					t.Fatalf("window-only storage %v, full storage %v", l.Sliding(), full.Layout().Sliding())
				}
				n := max(10*window, 3*l.BlockTokens+window)
				ids := tokens(n, m.Vocab, 7)
				pos, step := 0, 0
				sizes := []int{7, 1, 3, 2, 5, 1, 1}
				released := false
				for pos < n {
					k := min(sizes[step%len(sizes)], n-pos)
					step++
					a := forward(t, r, win, runtime.Entry{Seq: 0, Tokens: ids[pos : pos+k], Logits: runtime.AllLogits})[0]
					b := forward(t, r, full, runtime.Entry{Seq: 0, Tokens: ids[pos : pos+k], Logits: runtime.AllLogits})[0]
					for i := range a {
						if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
							t.Fatalf("positions %d..%d: logit %d is %v with window-only storage, %v with full storage", pos, pos+k-1, i, a[i], b[i])
						}
					}
					pos += k
					st := win.Stats()
					if most := l.SlideBlocksFor(pos, 0); st.SlideBlocksUsed > most {
						t.Fatalf("after %d tokens the sliding pool holds %d blocks, more than SlideBlocksFor's %d", pos, st.SlideBlocksUsed, most)
					}
					if st.SlideBlocksUsed < l.BlocksFor(pos) {
						released = true
					}
					if st.InUse.Total != l.SeqCostChunked(pos, 0)+st.InUse.State && st.SlideBlocksUsed == l.SlideBlocksFor(pos, 0) {
						t.Fatalf("after %d tokens the cache holds %d B, SeqCostChunked says %d + state %d", pos, st.InUse.Total, l.SeqCostChunked(pos, 0), st.InUse.State)
					}
				}
				if !released {
					t.Fatalf("no sliding block was released over %d tokens (window %d, blocks of %d)", n, window, l.BlockTokens)
				}
				if a, b := win.Stats().InUse.Total, full.Stats().InUse.Total; a >= b {
					t.Errorf("window-only storage holds %d B, full storage %d B", a, b)
				}
				if err := win.Truncate(0, window); !errors.Is(err, kvcache.ErrTruncate) {
					t.Errorf("Truncate into released positions: %v, want ErrTruncate", err)
				}
				// A fork continues as its source.
				if err := win.Fork(1, 0); err != nil {
					t.Fatal(err)
				}
				if err := full.Fork(1, 0); err != nil {
					t.Fatal(err)
				}
				more := tokens(5, m.Vocab, 9)
				a := forward(t, r, win, runtime.Entry{Seq: 1, Tokens: more, Logits: runtime.AllLogits})[0]
				b := forward(t, r, full, runtime.Entry{Seq: 1, Tokens: more, Logits: runtime.AllLogits})[0]
				if fmt.Sprint(a) != fmt.Sprint(b) {
					t.Errorf("the fork's logits differ between window-only and full storage")
				}
				if err := win.Remove(1); err != nil {
					t.Fatal(err)
				}
				if err := win.Remove(0); err != nil {
					t.Fatal(err)
				}
				if st := win.Stats(); st.BlocksUsed != 0 || st.SlideBlocksUsed != 0 {
					t.Errorf("after Remove: %d full and %d sliding blocks in use", st.BlocksUsed, st.SlideBlocksUsed)
				}
			})
		}
	}
}
