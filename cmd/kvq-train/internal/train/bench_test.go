package train

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkTrainStep times one optimizer step (batch generation, forward,
// backward, clipping, AdamW) of DefaultConfig at three points of the
// length curriculum, and reports training tokens/s and the executed
// GFLOP/s of the products and attention (see Config.flops).
func BenchmarkTrainStep(b *testing.B) {
	cfg := DefaultConfig()
	for _, seq := range []int{cfg.CurriculumStart, 1024, cfg.Context - 1} {
		b.Run(fmt.Sprintf("seq%d", seq), func(b *testing.B) {
			c := cfg
			// Step s of a run whose curriculum is at seq bytes.
			c.CurriculumStart, c.CurriculumSteps = seq, 0
			if seq < cfg.Context-1 {
				c.CurriculumSteps = c.Steps
			}
			m, err := NewModel(c)
			if err != nil {
				b.Fatal(err)
			}
			st := &state{model: m, m: make([]float32, len(m.w)), v: make([]float32, len(m.w))}
			e := newEngine(c, m.lay, m.w)
			var tokens int
			var flops float64
			for b.Loop() {
				bt := c.makeBatch(st.step)
				tokens += bt.nt()
				flops += c.flops(bt)
				if _, err := e.trainStep(context.Background(), st, bt); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
			b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
